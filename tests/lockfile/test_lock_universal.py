"""Universal locks: several targets' locks merged into one pylock.toml (resolve/universal.py), written
and read back, and one target's part selected from it (lockfile/select.py) — with packaging's
PEP 751 selection (packaging.pylock) and uv installing the file as the oracles, per target machine x
Python: each must pick, per target, exactly the entries and wheels the target's own lock has."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import hermetic_environ
from index_server import make_wheel
from packaging.markers import Marker
from packaging.pylock import Pylock, PylockSelectError
from packaging.utils import canonicalize_name
from packaging.version import Version

from cudaresolve.lockfile.fields import LockFileError
from cudaresolve.lockfile.pip import constraints_txt, requirements_txt
from cudaresolve.lockfile.pylock import parse_pylock, read_pylock
from cudaresolve.lockfile.select import (
    NoFittingWheel,
    NotCovered,
    host_environment,
    host_tags,
    lock_pythons,
    manylinux_platforms,
    select,
    selected_lock,
)
from cudaresolve.lockfile.writer import pylock_toml
from cudaresolve.output import lock_words
from cudaresolve.output.lock_report import render_fit, render_text, render_why
from cudaresolve.resolve.lock import Decision, Lock, LockedPackage, LockedWheel, MajorDecision, Reason, ReasonKind
from cudaresolve.resolve.reasons import CandidateRef
from cudaresolve.resolve.universal import MergeConflict, Part, merged

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

MACHINES = ("x86_64", "aarch64")
PYTHONS = ("3.10", "3.11", "3.12", "3.13")
TARGETS = [(machine, python) for machine in MACHINES for python in PYTHONS]
BASE = {  # a Linux CPython's marker environment; host_environment() sets machine and Python
    "implementation_name": "cpython", "implementation_version": "3.12.0", "os_name": "posix",
    "platform_machine": "x86_64", "platform_python_implementation": "CPython", "platform_release": "6.8.0",
    "platform_system": "Linux", "platform_version": "#1 SMP", "python_full_version": "3.12.0",
    "python_version": "3.12", "sys_platform": "linux",
}


def _marker(machine: str, python: str) -> str:
    return f'platform_machine == "{machine}" and python_version == "{python}"'


class Wheels:
    """Tiny real wheels in a directory (file: URLs), so uv can install a lock of them offline."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.made: dict[tuple[str, str, str], LockedWheel] = {}
        directory.mkdir(exist_ok=True)

    def __call__(self, name: str, version: str, tag: str) -> LockedWheel:
        """One file per name, version and tag: targets that share it lock the same bytes (a zip's
        time stamps would make a second one differ)."""
        if (name, version, tag) not in self.made:
            filename, data = make_wheel(name, version, tag=tag)
            (self.directory / filename).write_bytes(data)
            self.made[name, version, tag] = LockedWheel(filename, (self.directory / filename).as_uri(), hashlib.sha256(data).hexdigest(), len(data))
        return self.made[name, version, tag]


def _package(name: str, version: str, wheels: tuple[LockedWheel, ...], marker=None) -> LockedPackage:
    return LockedPackage(canonicalize_name(name), Version(version), None, wheels, marker, Reason(ReasonKind.INDEX))


def _target_lock(wheels: Wheels, machine: str, python: str) -> Lock:
    """What a lock made for one target holds: cupy-cuda12x 13.6.0 and cuda-cccl 0.3.2 everywhere
    (a wheel per machine and Python), numpy 2.2.6 on 3.10 and 2.3.1 on newer Pythons (a fork),
    tomli on 3.10 only, fastrlock on x86_64 only."""
    cp = "cp3" + python.split(".")[1]
    platform = f"manylinux_2_17_{machine}.manylinux2014_{machine}"
    numpy = "2.2.6" if python == "3.10" else "2.3.1"
    packages = [
        _package("cupy-cuda12x", "13.6.0", (wheels("cupy-cuda12x", "13.6.0", f"{cp}-{cp}-{platform}"),)),
        _package("cuda-cccl", "0.3.2", (wheels("cuda-cccl", "0.3.2", f"{cp}-{cp}-manylinux_2_27_{machine}.manylinux_2_28_{machine}"),)),
        _package("numpy", numpy, (wheels("numpy", numpy, f"{cp}-{cp}-{platform}"),)),
    ]
    if python == "3.10":
        packages.append(_package("tomli", "2.2.1", (wheels("tomli", "2.2.1", "py3-none-any"),)))
    if machine == "x86_64":
        packages.append(_package("fastrlock", "0.8.3", (wheels("fastrlock", "0.8.3", f"{cp}-{cp}-{platform}"),)))
    decisions = (Decision("numpy", CandidateRef("numpy", Version(numpy)), ()),)
    return Lock(tuple(sorted(packages, key=lambda p: p.name)), f"=={python}.*", (), (), ("https://index.example.invalid/simple",),
                decisions, "cudaresolve")


@pytest.fixture
def fleet(tmp_path):
    """(parts, universal lock, its pylock.toml path) for x86_64 and aarch64 x Python 3.10-3.13."""
    wheels = Wheels(tmp_path / "wheels")
    parts = [Part(_marker(machine, python), _target_lock(wheels, machine, python)) for machine, python in TARGETS]
    universal = merged(parts)
    path = tmp_path / "pylock.toml"
    path.write_text(pylock_toml(universal, lock_words))
    return parts, universal, path


def _versions(packages) -> dict[str, str]:
    return {p.name: str(p.version) for p in packages}


# -- merged() on plain Locks ----------------------------------------------------------------------


def test_merged_agree_differ_and_only_some(fleet):
    parts, universal, _ = fleet
    by_name: dict[str, list[LockedPackage]] = {}
    for package in universal.packages:
        by_name.setdefault(package.name, []).append(package)
    # agree: one entry, no marker, the union of every target's wheel (8 files)
    (cupy,) = by_name["cupy-cuda12x"]
    assert cupy.marker is None and len(cupy.wheels) == 8
    assert [w.filename for w in cupy.wheels] == sorted(w.filename for w in cupy.wheels)
    # differ: one entry per version, each marked for its targets only (the shared clause stands for them)
    assert [(p.version, p.marker) for p in by_name["numpy"]] == [
        (Version("2.2.6"), 'python_version == "3.10"'),
        (Version("2.3.1"), 'python_version == "3.11" or python_version == "3.12" or python_version == "3.13"'),
    ]
    # only some: the OR of those targets' markers
    (tomli,) = by_name["tomli"]
    assert tomli.marker == 'python_version == "3.10"' and len(tomli.wheels) == 1  # one py3-none-any file for all
    (fastrlock,) = by_name["fastrlock"]
    assert fastrlock.marker == 'platform_machine == "x86_64"'
    assert universal.environments == tuple(_marker(m, p) for m, p in TARGETS)
    assert universal.requires_python == ">=3.10,<3.14"
    assert universal.index_urls == ("https://index.example.invalid/simple",)
    # the forks, for --explain: numpy by version, tomli and fastrlock by presence
    forks = {fork.name: fork for fork in universal.forks}
    assert set(forks) == {"numpy", "tomli", "fastrlock"}
    assert dict(forks["numpy"].versions)[_marker("aarch64", "3.10")] == Version("2.2.6")
    assert dict(forks["fastrlock"].versions)[_marker("aarch64", "3.12")] is None
    # decisions that differ are kept per target set, with their markers; none is dropped
    assert {(d.chosen.version, d.marker) for d in universal.decisions} == {
        (Version("2.2.6"), 'python_version == "3.10"'),
        (Version("2.3.1"), 'python_version == "3.11" or python_version == "3.12" or python_version == "3.13"'),
    }


def test_merged_markers_stay_exact_when_a_clause_is_shared_with_another_target():
    """x86_64 for every Python and aarch64 on 3.12 only: an aarch64-only package must not be
    marked `python_version == "3.12"`, which would hold on x86_64 too."""
    wheel = LockedWheel("a-1.0-py3-none-any.whl", "https://files.example.invalid/a-1.0-py3-none-any.whl", "a" * 64, 1)
    x86 = Lock((), None, (), (), (), (), "cudaresolve")
    arm = replace(x86, packages=(_package("a", "1.0", (wheel,)),))
    universal = merged([Part('platform_machine == "x86_64"', x86), Part(_marker("aarch64", "3.12"), arm)])
    (package,) = universal.packages
    assert package.marker == 'platform_machine == "aarch64"'
    assert not Marker(package.marker).evaluate(host_environment(BASE, "x86_64", "3.12"))


def test_merged_keeps_an_own_marker_and_refuses_one_file_with_two_digests():
    wheel = LockedWheel("a-1.0-py3-none-any.whl", "https://files.example.invalid/a-1.0-py3-none-any.whl", "a" * 64, 1)
    lock = Lock((_package("a", "1.0", (wheel,), 'sys_platform == "linux"'),), "==3.12.*", (), (), (), (), "cudaresolve")
    other = Lock((), "==3.11.*", (), (), (), (), "cudaresolve")
    universal = merged([Part(_marker("x86_64", "3.12"), lock), Part(_marker("x86_64", "3.11"), other)])
    assert universal.packages[0].marker == 'sys_platform == "linux" and python_version == "3.12"'
    assert merged([Part(_marker("x86_64", "3.12"), lock)]).packages[0].marker == 'sys_platform == "linux"'  # in every part
    tampered = replace(lock, packages=(replace(lock.packages[0], wheels=(replace(wheel, sha256="b" * 64),)),))
    with pytest.raises(MergeConflict, match="a-1.0-py3-none-any.whl locked with two sha256 digests"):
        merged([Part(_marker("x86_64", "3.12"), lock), Part(_marker("aarch64", "3.12"), tampered)])


def test_merged_cuda_majors_kept_per_target_when_they_differ():
    twelve, thirteen = MajorDecision(12, ()), MajorDecision(13, ())
    base = Lock((), None, (), (), (), (), "cudaresolve")
    same = merged([Part(_marker("x86_64", "3.12"), replace(base, major=twelve)), Part(_marker("aarch64", "3.12"), replace(base, major=twelve))])
    assert (same.major, same.majors) == (twelve, ())
    differ = merged([Part(_marker("x86_64", "3.12"), replace(base, major=thirteen)), Part(_marker("aarch64", "3.12"), replace(base, major=twelve))])
    assert differ.major is None
    assert differ.majors == (replace(thirteen, marker='platform_machine == "x86_64"'), replace(twelve, marker='platform_machine == "aarch64"'))


def test_explain_says_why_a_package_forks(fleet):
    _, universal, _ = fleet
    text = render_text(universal, explain=True)
    assert ('numpy forks: 2.2.6 for platform_machine == "x86_64" and python_version == "3.10" or '
            'platform_machine == "aarch64" and python_version == "3.10", 2.3.1 for ') in text
    assert 'fastrlock forks: 0.8.3 for platform_machine == "x86_64" and python_version == "3.10"' in text
    assert 'not needed for platform_machine == "aarch64" and python_version == "3.10"' in text
    why = render_why(universal, "numpy")
    assert why.startswith('numpy==2.2.6 ; python_version == "3.10": ') and "\nnumpy==2.3.1 ; python_version == \"3.11\" or " in why
    assert '  for python_version == "3.10":\n' in why and "\nnumpy forks: 2.2.6 for " in why


# -- the file: written, read back ----------------------------------------------------------------


def test_written_and_read_back_the_same(fleet):
    _, universal, path = fleet
    again = read_pylock(str(path))
    assert again.packages == universal.packages
    assert (again.environments, again.requires_python, again.forks, again.decisions, again.majors) == (
        universal.environments, universal.requires_python, universal.forks, universal.decisions, universal.majors)
    data = tomllib.loads(path.read_text())
    assert [p["name"] for p in data["packages"]].count("numpy") == 2
    assert data["environments"] == list(universal.environments)


def test_read_refuses_a_bad_environment_and_entries_that_both_hold(tmp_path, fleet):
    _, _, path = fleet
    text = path.read_text()
    bad = text.replace('environments = ["platform_machine', 'environments = ["platform_machine ==== \\"x\\"", "platform_machine', 1)
    with pytest.raises(LockFileError, match=r"pylock.toml: environments\[0\]: not a valid marker"):
        parse_pylock(bad.encode(), "pylock.toml")
    twice = text.replace('marker = "python_version == \\"3.10\\""\n', "", 1)  # numpy 2.2.6 now for every environment
    with pytest.raises(LockFileError, match=r"pylock.toml: marker \(package numpy\): 2 entries, which need a marker each"):
        parse_pylock(twice.encode(), "pylock.toml")


def test_pips_files_refuse_a_universal_lock_and_take_one_target(fleet):
    _, universal, _ = fleet
    for writer in (constraints_txt, requirements_txt):
        with pytest.raises(LockFileError, match=r"a universal lock with 2 entries of numpy; a pip requirements or constraints file holds one version per name"):
            writer(universal)
    environment = host_environment(BASE, "aarch64", "3.12")
    one = selected_lock(universal, select(universal, environment, host_tags("aarch64", "2.39", "3.12"), "gh200"), environment)
    text = requirements_txt(one)
    assert "numpy==2.3.1 \\\n    --hash=sha256:" in text and "fastrlock" not in text and "tomli" not in text
    assert text.count("--hash=") == 3  # one wheel per package: the target's


# -- selection, against packaging.pylock and uv -------------------------------------------------------


@pytest.mark.parametrize("machine,python", TARGETS)
def test_selection_is_the_targets_own_lock_and_packaging_agrees(fleet, machine, python):
    parts, universal, path = fleet
    own = next(part.lock for part in parts if part.marker == _marker(machine, python))
    environment = host_environment(BASE, machine, python)
    tags = host_tags(machine, "2.39", python)
    selection = select(read_pylock(str(path)), environment, tags, f"{machine} {python}")
    assert selection.unfit == ()
    assert _versions(selection.packages) == _versions(own.packages)
    assert {p.name: p.wheels for p in selection.packages} == {p.name: p.wheels for p in own.packages}
    one = selected_lock(universal, selection, environment)
    assert one.decisions == own.decisions
    # packaging's PEP 751 reader accepts the file and selects the same files
    pylock = Pylock.from_dict(tomllib.loads(path.read_text()))
    picked = {package.name: (str(package.version), wheel.name) for package, wheel in pylock.select(environment=environment, tags=tags)}
    assert picked == {p.name: (str(p.version), p.wheels[0].filename) for p in own.packages}


@pytest.mark.parametrize("machine,python", TARGETS)
def test_uv_installs_each_targets_part(fleet, uv, tmp_path, machine, python):
    """uv reads the universal pylock.toml for another machine and Python (--python-platform,
    --python-version) and installs, offline from file: URLs, the files our selection picks."""
    parts, _, path = fleet
    own = next(part.lock for part in parts if part.marker == _marker(machine, python))
    target = tmp_path / "target"
    command = [str(uv), "pip", "install", "--no-config", "--preview-features", "pylock", "--offline", "--quiet",
               "--python-platform", f"{machine}-manylinux_2_28", "--python-version", python, "--target", str(target),
               "-r", str(path)]
    result = subprocess.run(command, capture_output=True, text=True, env=hermetic_environ({"UV_CACHE_DIR": str(tmp_path / "uv-cache")}))
    assert result.returncode == 0, result.stderr
    installed = {}
    for wheel_file in target.glob("*.dist-info/WHEEL"):
        name, version = wheel_file.parent.name[: -len(".dist-info")].rsplit("-", 1)
        tag = next(line.split(": ", 1)[1] for line in wheel_file.read_text().splitlines() if line.startswith("Tag: "))
        installed[canonicalize_name(name)] = (version, tag)
    expected = {p.name: (str(p.version), p.wheels[0].filename[:-len(".whl")].split("-", 2)[2]) for p in own.packages}
    assert installed == expected


def test_a_target_outside_the_lock_and_a_wheel_for_another_machine_are_refused(fleet, tmp_path, uv):
    parts, universal, path = fleet
    ppc = select(universal, host_environment(BASE, "ppc64le", "3.12"), host_tags("ppc64le", "2.39", "3.12"), "power.json")
    (outside,) = [u for u in ppc.unfit if isinstance(u, NotCovered)]
    assert (outside.field, outside.machine, outside.python) == ("environments", "ppc64le", "3.12.0")
    too_new = select(universal, host_environment(BASE, "x86_64", "3.14"), host_tags("x86_64", "2.39", "3.14"), "new.json")
    assert {u.field for u in too_new.unfit if isinstance(u, NotCovered)} == {"environments", "requires-python"}
    # the case: a lock for one target whose wheels are all x86_64, checked for an aarch64 host
    x86 = parts[2].lock  # x86_64, Python 3.12
    arm = select(x86, host_environment(BASE, "aarch64", "3.12"), host_tags("aarch64", "2.39", "3.12"), "gh200.json")
    missing = sorted(u.name for u in arm.unfit if isinstance(u, NoFittingWheel))
    assert missing == ["cuda-cccl", "cupy-cuda12x", "fastrlock", "numpy"]
    words = render_fit("pylock.toml", ["gh200.json"], [], arm.unfit)
    assert words.startswith("pylock.toml does not fit gh200.json:\n")
    assert ("  cupy-cuda12x 13.6.0: no wheel for gh200.json (tags cp312-cp312-manylinux_2_39_aarch64, "
            "cp312-cp312-manylinux_2_38_aarch64, cp312-cp312-manylinux_2_37_aarch64, ...): the lock has "
            "cupy_cuda12x-13.6.0-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl\n") in words
    # packaging's selection refuses it too
    single = tmp_path / "pylock.single.toml"
    single.write_text(pylock_toml(x86, lock_words))
    with pytest.raises(PylockSelectError, match="No wheel found matching the provided tags"):
        list(Pylock.from_dict(tomllib.loads(single.read_text())).select(
            environment=host_environment(BASE, "aarch64", "3.12"), tags=host_tags("aarch64", "2.39", "3.12")))
    # and so does uv (for the x86_64 lock of this interpreter's Python: uv checks requires-python
    # against the interpreter it runs, even with --python-version)
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    single.write_text(pylock_toml(next(p.lock for p in parts if p.marker == _marker("x86_64", python)), lock_words))
    command = [str(uv), "pip", "install", "--no-config", "--preview-features", "pylock", "--offline", "--dry-run",
               "--python-platform", "aarch64-manylinux_2_28", "--python-version", python, "--target", str(tmp_path / "t"),
               "-r", str(single)]
    result = subprocess.run(command, capture_output=True, text=True, env=hermetic_environ({"UV_CACHE_DIR": str(tmp_path / "uv-cache")}))
    # uv wraps its message at the terminal's width, which differs under xdist: compared as one line
    assert result.returncode != 0 and "doesn't have a source distribution or wheel for the current platform" in " ".join(result.stderr.split())


def test_glibc_limits_the_manylinux_tags():
    assert manylinux_platforms("aarch64", "2.28")[:2] == ["manylinux_2_28_aarch64", "manylinux_2_27_aarch64"]
    assert "manylinux2014_aarch64" in manylinux_platforms("aarch64", "2.28")
    assert "manylinux2010_aarch64" not in manylinux_platforms("aarch64", "2.28")  # PEP 571 is x86 only
    assert "manylinux_2_34_aarch64" not in manylinux_platforms("aarch64", "2.28")  # onnxruntime-gpu's aarch64 wheels need 2.34
    wheel = LockedWheel("o-1.0-cp312-cp312-manylinux_2_34_aarch64.whl", "https://f.example.invalid/o-1.0-cp312-cp312-manylinux_2_34_aarch64.whl", "c" * 64, 1)
    lock = Lock((_package("o", "1.0", (wheel,)),), None, (), (), (), (), "cudaresolve")
    environment = host_environment(BASE, "aarch64", "3.12")
    assert select(lock, environment, host_tags("aarch64", "2.28", "3.12"), "old").unfit
    assert not select(lock, environment, host_tags("aarch64", "2.35", "3.12"), "new").unfit
    assert manylinux_platforms("aarch64", None)[0] == "manylinux_2_99_aarch64"  # unknown glibc: the machine decides


def test_lock_pythons_are_the_environments_of_a_machine(fleet):
    _, universal, _ = fleet
    assert lock_pythons(universal, BASE, "aarch64") == PYTHONS
    assert lock_pythons(universal, BASE, "ppc64le") == ()



# -- the commands ---------------------------------------------------------------------------------


def _host_file(directory: Path, machine: str, glibc: str) -> str:
    from cudaresolve.arch import ComputeCapability
    from cudaresolve.host.facts import Driver, Gpu, HostFacts
    from cudaresolve.versions import CudaVersion, DriverRelease

    facts = HostFacts(system="Linux", machine=machine, glibc=glibc,
                      driver=Driver(DriverRelease.parse("580.65.06"), "override:--driver", CudaVersion.parse("13.0"), "derived:drivers"),
                      gpus=(Gpu(ComputeCapability.parse("9.0"), "override:--gpu"),))
    path = directory / f"{machine}.json"
    path.write_text(facts.to_json())
    return str(path)


def test_lock_check_matches_wheels_to_each_hosts_machine(fleet, tmp_path, capsys):
    """Before: `lock --check` said a lock of x86_64 wheels "fits" an aarch64 host. Now each host's
    part is selected with its machine's tags: the universal lock fits both, the x86_64 one does not."""
    from cudaresolve.cli import main

    parts, _, path = fleet
    x86, arm = _host_file(tmp_path, "x86_64", "2.35"), _host_file(tmp_path, "aarch64", "2.39")
    assert main(["lock", "--check", str(path), "--host", x86, "--host", arm]) == 0
    assert f"{path} fits {x86}, {arm}" in capsys.readouterr().out
    single = tmp_path / "pylock.x86.toml"
    single.write_text(pylock_toml(parts[2].lock, lock_words))  # x86_64, Python 3.12
    assert main(["lock", "--check", str(single), "--host", x86, "--host", arm]) == 2
    out = capsys.readouterr().out
    assert f"cupy-cuda12x 13.6.0: no wheel for {arm} (tags cp3" in out and x86 + " (" not in out


def test_install_lock_installs_the_interpreters_part(fleet, tmp_path, capsys, hermetic):
    """`install --lock` of the universal lock for this x86_64 interpreter: its Python's entries with
    its wheels only, in the requirements file pip would read (one hash per package)."""
    import platform
    import venv

    from cudaresolve.cli import main

    _, universal, path = fleet
    root = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(root)
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    cp = f"cp{sys.version_info.major}{sys.version_info.minor}"
    assert main(["install", "--lock", str(path), "--python", str(root / "bin" / "python"), "--dry-run",
                 "--driver", "580.65.06", "--gpu", "9.0"]) == 0
    out = capsys.readouterr().out
    environment = host_environment(BASE, platform.machine(), python)
    expected = select(universal, environment, host_tags(platform.machine(), None, python), "here").packages
    assert {"cupy-cuda12x", "numpy"} <= {p.name for p in expected}
    for package in expected:
        assert f"{package.name}=={package.version} \\" in out
        assert f"--hash=sha256:{package.wheels[0].sha256}" in out and cp in package.wheels[0].filename
    assert out.count("--hash=sha256:") == len(expected)
