"""`cudaresolve install` with real pip and real venvs (issue 11's tests).

The target is a venv with pip (copied from one made per session): the install runs that venv's own
pip. Packages come from the fake CUDA index on 127.0.0.1 (tests/fake_cuda_index.py), or from small
servers built here when a test needs an index that lies or a pip that fails. What the venv holds
afterwards is read back from its dist-info, and compared with `cudaresolve lock` of the same request
for the same venv; the doctor's verdict is read from the install's own output and from `doctor --json`.

Failure paths compare the environment before and after: the sorted names of its `*.dist-info`
directories and the bytes of every RECORD.

The `registry` test installs real NVIDIA wheels from the registry pip is configured with (pip's own
default, this machine's pip configuration switched off), downloads cached under the test cache.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import pytest
from conftest import hermetic_environ
from hostile_locks import ATTACKS, FIELDS, hostile, toml_text
from index_server import IndexServer, make_wheel
from lock_oracles import locked, locked_with_source
from packaging.utils import canonicalize_name
from packaging.version import Version
from test_lock_files import pylock_toml
from wheel_cache import cache_dir

from cudaresolve.cli import main
from cudaresolve.env.distributions import read_distributions
from cudaresolve.lockfile.pip import requirements_txt
from cudaresolve.lockfile.pylock import read_pylock
from cudaresolve.resolve.lock import Lock, LockedPackage, LockedWheel, Reason, ReasonKind
from cudaresolve.resolve.reasons import Asked

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

RTX_4090 = ("--driver", "550.144.03", "--gpu", "8.9")
GTX_1080 = ("--driver", "580.65.06", "--gpu", "6.1")
CUSPARSE = "nvidia-cusparse-cu12==12.3.1.170"
OLD_NVJITLINK = "nvidia-nvjitlink-cu12==12.1.105"


# -- fixtures ----------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def clean(hermetic, monkeypatch):
    """Hermetic, and pip (run by cudaresolve, inheriting this environment) caches no wheel: every
    wheel comes from the index under test."""
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")


@pytest.fixture
def pip_venv(venv_with_pip, tmp_path):
    """`pip_venv(name, preinstall=(), index_url=None)` -> the python of a fresh venv with pip, holding
    `preinstall` installed by plain pip from `index_url`."""

    def make(name: str, preinstall: Sequence[str] = (), index_url: Optional[str] = None) -> str:
        python = str(venv_with_pip(tmp_path / name) / "bin" / "python")
        if preinstall:
            pip(python, "install", "--no-deps", "--index-url", index_url, *preinstall)
        return python

    return make


def pip(python: str, *args: str, check: bool = True, cache: Optional[str] = None) -> subprocess.CompletedProcess:
    """The target's own pip, this machine's pip configuration off; no cache unless `cache` is given."""
    env = hermetic_environ({"PIP_CACHE_DIR": cache} if cache else {"PIP_NO_CACHE_DIR": "1"})
    done = subprocess.run([python, "-m", "pip", *args], capture_output=True, text=True, env=env)
    if check:
        assert done.returncode == 0, done.stderr
    return done


@dataclass
class Run:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capfd):
    """`cli(*argv)`: run cudaresolve in-process; stdout/stderr captured at the file descriptors, so
    the output of the pip it starts is in them too."""

    def run(*argv: str) -> Run:
        capfd.readouterr()
        code = main(list(argv))
        captured = capfd.readouterr()
        return Run(code, captured.out, captured.err)

    return run


def index_flags(index) -> tuple[str, ...]:
    return ("--index-url", index.index_url, "--torch-index-base", index.torch_index_base)


# -- reading an environment back ---------------------------------------------------------------------


def site_packages(python: str) -> list[str]:
    """The target's purelib and platlib, as it reports them (existing ones, each once)."""
    done = subprocess.run(
        [python, "-c", "import json, sysconfig; print(json.dumps([sysconfig.get_path('purelib'), sysconfig.get_path('platlib')]))"],
        capture_output=True, text=True, check=True,
    )
    found = []
    for directory in json.loads(done.stdout):
        if os.path.isdir(directory) and os.path.realpath(directory) not in map(os.path.realpath, found):
            found.append(directory)
    return found


def installed(python: str) -> dict[str, str]:
    """name -> version of every distribution in the target's site-packages, read from its dist-info."""
    versions = {}
    for directory in site_packages(python):
        for dist in read_distributions(directory)[0]:
            versions[dist.name] = str(dist.version)
    return versions


def snapshot(directories: Sequence[str]) -> tuple[tuple[str, ...], dict[str, str]]:
    """The installed set, byte for byte: sorted `*.dist-info` names and the sha256 of each RECORD."""
    names, records = [], {}
    for directory in directories:
        for entry in sorted(os.listdir(directory)):
            if entry.endswith(".dist-info"):
                names.append(os.path.join(directory, entry))
                record = Path(directory, entry, "RECORD")
                records[names[-1]] = hashlib.sha256(record.read_bytes()).hexdigest() if record.is_file() else "(no RECORD)"
    return tuple(sorted(names)), records


def locked_versions(cli, tmp_path: Path, python: str, requirements: Sequence[str], *flags: str, name: str = "lock") -> dict[str, str]:
    """What `cudaresolve lock` locks for the same request and the same venv."""
    out = tmp_path / name
    out.mkdir()
    run = cli("lock", *requirements, "--python", python, "-o", str(out / "pylock.toml"), "-q", *flags)
    assert run.code == 0, run.err
    return locked(read_pylock(str(out / "pylock.toml")))


def doctor_errors(cli, python: str, host: Sequence[str]) -> list[dict]:
    """The error findings of `cudaresolve doctor --json` on the target for the host."""
    run = cli("doctor", "--python", python, "--json", "--no-judge-fixes", *host)
    report = json.loads(run.out)
    errors = [f for f in report["findings"] if f["severity"] == "error"]
    assert report["counts"]["error"] == len(errors)
    assert run.code == (2 if errors else 0), run.err
    return errors


def doctor_result_line(out: str) -> str:
    found = re.findall(r"^result: .*$", out, re.M)
    assert len(found) == 1, out
    return found[0]


# -- 1. the lock scenarios' hosts end with exactly the lock installed and a clean doctor ---------------


SCENARIOS = {
    "rtx4090-driver550-torch271": (["torch==2.7.1"], RTX_4090, (), {"torch": "2.7.1+cu128"}),
    "gtx1080-driver580-torch": (["torch"], GTX_1080, (), {}),
    "numba-range": (["numba>=0.59,<0.60"], RTX_4090, (), {"numba": "0.59.1"}),
    "cusparse-over-nvjitlink-121": ([CUSPARSE], RTX_4090, (OLD_NVJITLINK,), {"nvidia-cusparse-cu12": "12.3.1.170"}),
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_install_leaves_exactly_the_lock_and_a_clean_doctor(scenario, cli, pip_venv, cuda_index, tmp_path):
    requirements, host, preinstall, expected = SCENARIOS[scenario]
    python = pip_venv("target", preinstall, cuda_index.index_url)
    before = installed(python)
    assert "pip" in before and all(canonicalize_name(r.partition("==")[0]) in before for r in preinstall)
    lock = locked_versions(cli, tmp_path, python, requirements, *host, *index_flags(cuda_index))
    for name, version in expected.items():
        assert lock[name] == version, lock

    run = cli("install", *requirements, "--python", python, "-q", *host, *index_flags(cuda_index))
    assert run.code == 0, run.out + run.err
    after = installed(python)
    assert after == {**before, **lock}  # every locked version, nothing else touched
    assert set(lock) - set(before), "the install added nothing"
    assert re.search(r"^Successfully installed ", run.out, re.M), run.out  # the target's pip did it
    assert doctor_result_line(run.out).startswith("result: 0 errors"), run.out
    assert doctor_errors(cli, python, host) == []
    if scenario == "gtx1080-driver580-torch":
        assert Version(after["torch"]).local == "cu126"  # GPU 6.1: not the newer PyPI default
    if scenario == "cusparse-over-nvjitlink-121":
        assert Version(after["nvidia-nvjitlink-cu12"]) >= Version("12.4")
        assert re.search(r"^  upgrade +nvidia-nvjitlink-cu12 12\.1\.105 -> ", run.out, re.M), run.out


def test_plain_pip_leaves_the_fake_cusparse_broken_where_install_did_not(cli, pip_venv, cuda_index):
    """The oracle for the cusparse scenario: pip alone keeps nvJitLink 12.1 and the doctor says so."""
    python = pip_venv("plain", (OLD_NVJITLINK,), cuda_index.index_url)
    pip(python, "install", "--index-url", cuda_index.index_url, CUSPARSE)
    assert installed(python)["nvidia-nvjitlink-cu12"] == "12.1.105"
    errors = doctor_errors(cli, python, RTX_4090)
    assert [(e["check"], e["subject"]) for e in errors] == [("symbol-skew", "nvidia-cusparse-cu12 12.3.1.170")]


# -- CuPy's undeclared CUDA libraries: the lock adds its [ctk] extra on a host without them ------------

AMPERE = ("--driver", "550.144.03", "--gpu", "8.6")  # given by flags: this machine's libraries do not count
CUPY_LIBRARIES = ("nvidia-cublas-cu12", "nvidia-cuda-runtime-cu12", "nvidia-cufft-cu12", "nvidia-curand-cu12",
                  "nvidia-cusolver-cu12", "nvidia-cusparse-cu12", "nvidia-cuda-nvrtc-cu12")


def test_plain_pip_cupy_leaves_seven_missing_libraries(cli, pip_venv, cuda_index):
    """The oracle: CuPy's wheel alone (what pip installs for `cupy-cuda12x`) loads none of its CUDA libraries."""
    python = pip_venv("plain-cupy")
    pip(python, "install", "--index-url", cuda_index.index_url, "cupy-cuda12x")
    errors = doctor_errors(cli, python, AMPERE)
    assert sorted({e["check"] for e in errors}) == ["missing-library"]
    assert len(errors) == 7, errors


def test_install_cupy_adds_its_ctk_extra_and_the_doctor_after_it_is_clean(cli, pip_venv, cuda_index, tmp_path):
    python = pip_venv("cupy")
    before = installed(python)
    lock = locked_versions(cli, tmp_path, python, ["cupy"], *AMPERE, *index_flags(cuda_index))
    assert lock["cupy-cuda12x"] == "14.2.0" and Version(lock["cuda-toolkit"]).major == 12
    assert all(name in lock for name in CUPY_LIBRARIES), lock

    run = cli("install", "cupy", "--python", python, "-q", *AMPERE, *index_flags(cuda_index))
    assert run.code == 0, run.out + run.err
    assert re.search(r"^  add +cupy-cuda12x +14\.2\.0: .*\[ctk\] added: its CUDA 12 libraries are not on the target", run.out, re.M), run.out
    assert installed(python) == {**before, **lock}
    assert doctor_result_line(run.out).startswith("result: 0 errors"), run.out
    assert doctor_errors(cli, python, AMPERE) == []


def test_install_cupy_over_a_cupy_without_its_libraries_keeps_it_and_adds_them(cli, pip_venv, cuda_index):
    python = pip_venv("cupy-broken")
    pip(python, "install", "--index-url", cuda_index.index_url, "cupy-cuda12x")
    assert len(doctor_errors(cli, python, AMPERE)) == 7
    run = cli("install", "cupy", "--python", python, "-q", *AMPERE, *index_flags(cuda_index))
    assert run.code == 0, run.out + run.err
    assert re.search(r"^  keep +cupy-cuda12x +14\.2\.0: .*\[ctk\] added: .*installed, kept, with \[ctk\]", run.out, re.M), run.out
    assert all(name in installed(python) for name in CUPY_LIBRARIES)
    assert doctor_errors(cli, python, AMPERE) == []


def test_install_exits_2_when_the_doctor_after_pip_finds_errors(cli, pip_venv, cuda_index, tmp_path):
    """pip succeeds, but the environment it leaves is broken (by what was there before: a lock made for
    another environment leaves it alone): the doctor's errors are the status, pip's success is not."""
    made = tmp_path / "made" / "pylock.toml"
    made.parent.mkdir()
    run = cli("lock", "numba>=0.59,<0.60", "--python", pip_venv("lock-target"), "-o", str(made), "-q", *RTX_4090,
              *index_flags(cuda_index))
    assert run.code == 0, run.err
    python = pip_venv("target", (CUSPARSE, OLD_NVJITLINK), cuda_index.index_url)
    run = cli("install", "--lock", str(made), "--python", python, "-q", *RTX_4090)
    assert run.code == 2, run.out + run.err
    assert re.search(r"^Successfully installed .*numba-0\.59\.1", run.out, re.M), run.out
    assert doctor_result_line(run.out).startswith("result: 1 error"), run.out
    assert [(e["check"], e["subject"]) for e in doctor_errors(cli, python, RTX_4090)] == [
        ("symbol-skew", "nvidia-cusparse-cu12 12.3.1.170")]
    # Without the doctor, pip's success is the status.
    python = pip_venv("unverified", (CUSPARSE, OLD_NVJITLINK), cuda_index.index_url)
    run = cli("install", "--lock", str(made), "--python", python, "-q", "--no-verify", *RTX_4090)
    assert run.code == 0 and "numba-0.59.1" in run.out and "result: " not in run.out, run.out + run.err


# -- 2. --dry-run ------------------------------------------------------------------------------------


def test_dry_run_prints_the_plan_and_the_pip_command_and_changes_nothing(cli, pip_venv, cuda_index, tmp_path):
    python = pip_venv("target", (OLD_NVJITLINK,), cuda_index.index_url)
    lock = locked_versions(cli, tmp_path, python, [CUSPARSE], *RTX_4090, *index_flags(cuda_index))
    before = snapshot(site_packages(python))
    seen = len(cuda_index.server.requests)
    run = cli("install", CUSPARSE, "--python", python, "--dry-run", "-q", *RTX_4090, *index_flags(cuda_index))
    assert run.code == 0, run.err
    assert snapshot(site_packages(python)) == before
    assert not [p for p, headers in cuda_index.server.requests[seen:] if headers.get("User-Agent", "").startswith("pip/")]
    assert "Looking in indexes" not in run.out and "Successfully installed" not in run.out
    assert "result: " not in run.out  # no doctor: nothing was installed
    assert run.out.startswith("plan: 2 to install, 0 kept\n"), run.out
    assert re.search(rf"^  add +nvidia-cusparse-cu12 +12\.3\.1\.170: .*\[{re.escape(cuda_index.index_url)}\]$", run.out, re.M)
    upgraded = lock["nvidia-nvjitlink-cu12"]
    assert re.search(rf"^  upgrade +nvidia-nvjitlink-cu12 12\.1\.105 -> {re.escape(upgraded)}: .*>=12\.4", run.out, re.M), run.out
    [command] = re.findall(r"^dry run; pip would run: (.*)$", run.out, re.M)
    assert re.fullmatch(
        rf"{re.escape(python)} -m pip install --require-hashes --no-deps -r \S+/requirements\.txt", command
    ), command
    requirements = run.out.split("with the requirements file:\n", 1)[1]
    for name, version in lock.items():
        assert re.search(rf"^    {re.escape(name)}=={re.escape(version)} \\\n        --hash=sha256:[0-9a-f]{{64}}$", requirements, re.M), (
            name, requirements)
    assert f"    --index-url {cuda_index.index_url}" in requirements


# -- 3. --lock FILE ----------------------------------------------------------------------------------


@pytest.fixture
def torch_lock(cli, pip_venv, cuda_index, tmp_path) -> Path:
    """A pylock.toml for torch==2.7.1 on an RTX 4090 with driver 550, made for a fresh venv with pip."""
    python = pip_venv("lock-target")
    path = tmp_path / "made" / "pylock.toml"
    path.parent.mkdir()
    run = cli("lock", "torch==2.7.1", "--python", python, "-o", str(path), "-q", *RTX_4090, *index_flags(cuda_index))
    assert run.code == 0, run.err
    return path


def test_lock_file_installs_exactly_on_the_host_it_was_made_for(cli, pip_venv, torch_lock):
    python = pip_venv("target")
    before = installed(python)
    lock = read_pylock(str(torch_lock))
    run = cli("install", "--lock", str(torch_lock), "--python", python, "-q", *RTX_4090)
    assert run.code == 0, run.out + run.err
    after = installed(python)
    assert after == {**before, **locked(lock)}
    assert set(locked_with_source(lock)) - set(before) == set(after) - set(before)
    assert after["torch"] == "2.7.1+cu128"
    assert doctor_result_line(run.out).startswith("result: 0 errors"), run.out


def test_lock_file_is_refused_on_a_host_it_does_not_fit_and_nothing_is_installed(cli, pip_venv, torch_lock):
    python = pip_venv("target")
    before = snapshot(site_packages(python))
    run = cli("install", "--lock", str(torch_lock), "--python", python, "-q", "--driver", "470.82.01", "--gpu", "8.9")
    assert run.code == 2, run.out + run.err
    assert run.out.startswith(f"{torch_lock} does not fit this host:\n"), run.out
    assert re.search(r"torch 2\.7\.1\+cu128.*470\.82\.01", run.out), run.out  # the reason: the build and the driver
    assert "Looking in indexes" not in run.out and "plan:" not in run.out
    assert snapshot(site_packages(python)) == before


def test_lock_file_install_is_hash_checked(cli, pip_venv, torch_lock, tmp_path):
    """One sha256 of the lock changed: pip refuses the file it downloads, nothing is installed."""
    text = torch_lock.read_text()
    digests = re.findall(r'sha256 = "([0-9a-f]{64})"', text)
    assert digests, text
    tampered = tmp_path / "tampered" / "pylock.toml"
    tampered.parent.mkdir()
    tampered.write_text(text.replace(digests[0], "0" * 64, 1))
    python = pip_venv("target")
    before = snapshot(site_packages(python))
    run = cli("install", "--lock", str(tampered), "--python", python, "-q", *RTX_4090)
    assert run.code != 0
    assert "DO NOT MATCH THE HASHES" in run.err, run.err
    assert f"pip exited with status {run.code}: 0 of " in run.out and "the environment is as it was before" in run.out
    assert snapshot(site_packages(python)) == before


# -- 3b. a hostile --lock FILE never reaches pip -----------------------------------------------------


@dataclass
class Served:
    """A lock of crtest-good 1.0 from a local index, and a requirement line for crtest-evil 1.0 (also
    served) that pip would install if a value of the lock became a line of its requirements file."""

    index_url: str
    lock_text: str
    injected: str
    server: IndexServer


@pytest.fixture
def served_lock():
    server = IndexServer()
    files = {}
    for name in ("crtest-good", "crtest-evil"):
        module = name.replace("-", "_")
        files[name] = make_wheel(name, "1.0", files={f"{module}/__init__.py": b""})
        server.add(*files[name])
    index_url = server.start() + "/simple"
    filename, data = files["crtest-good"]
    wheel = LockedWheel(filename, f"{server.url}/files/{filename}", hashlib.sha256(data).hexdigest(), len(data))
    reason = Reason(ReasonKind.INDEX, origins=(Asked("command line"),))
    lock = Lock((LockedPackage("crtest-good", Version("1.0"), index_url, (wheel,), None, reason),), None, (), (), (index_url,), (), "cudaresolve")
    evil = hashlib.sha256(files["crtest-evil"][1]).hexdigest()
    yield Served(index_url, pylock_toml(lock), f"crtest-evil==1.0 --hash=sha256:{evil}", server)
    server.stop()


def logging_shim(tmp_path: Path, python: str) -> tuple[str, Path]:
    """An interpreter that runs `python` after logging its arguments to a file, and copies the
    requirements file of a `-r` to `pip-read.txt` beside the log: what pip was given, exactly."""
    log = tmp_path / "shim.log"
    shim = tmp_path / "shim" / "python"
    shim.parent.mkdir()
    shim.write_text(
        "#!/bin/sh\n"
        f"printf '%s\\n' \"$*\" >> '{log}'\n"
        "previous=\n"
        f"for word in \"$@\"; do [ \"$previous\" = -r ] && cp \"$word\" '{tmp_path}/pip-read.txt'; previous=$word; done\n"
        f"exec '{python}' \"$@\"\n"
    )
    shim.chmod(0o755)
    log.write_text("")
    return str(shim), log


def test_the_served_lock_installs_and_the_plan_shows_what_pip_reads(cli, pip_venv, served_lock, tmp_path):
    """The control for the hostile locks: unchanged, the lock installs through the shim, pip reads
    exactly the requirements file the dry run printed; and the injected line is real: pip given it
    installs crtest-evil."""
    python = pip_venv("target")
    shim, log = logging_shim(tmp_path, python)
    path = tmp_path / "pylock.toml"
    path.write_text(served_lock.lock_text)
    dry = cli("install", "--lock", str(path), "--python", shim, "--dry-run", *RTX_4090)
    assert dry.code == 0, dry.err
    printed = dry.out.split("with the requirements file:\n", 1)[1]
    run = cli("install", "--lock", str(path), "--python", shim, "--no-verify", *RTX_4090)
    assert run.code == 0, run.out + run.err
    assert installed(python).get("crtest-good") == "1.0" and "crtest-evil" not in installed(python)
    assert re.search(r"^-m pip install --require-hashes --no-deps -r \S+$", log.read_text(), re.M), log.read_text()
    assert printed == "".join(f"    {line}\n" for line in (tmp_path / "pip-read.txt").read_text().splitlines())
    assert re.search(r"^  add +crtest-good 1.0: the newest release that fits", dry.out, re.M) and dry.out.count("\n  add ") == 1

    text = requirements_txt(read_pylock(str(path)))
    digest = re.search(r"--hash=sha256:([0-9a-f]{64})", text).group(1)
    injected = tmp_path / "injected.txt"
    injected.write_text(text.replace(digest, f"{digest}\n{served_lock.injected}"))
    pip(python, "install", "--require-hashes", "--no-deps", "-r", str(injected))
    assert installed(python).get("crtest-evil") == "1.0"  # what a value with a newline would have done


@pytest.mark.parametrize("attack", list(ATTACKS))
@pytest.mark.parametrize("field", list(FIELDS))
def test_a_hostile_lock_value_never_reaches_pip(cli, pip_venv, served_lock, tmp_path, field, attack):
    """Issue 22's acceptance: a line break, a carriage return, a NUL, a pip option or an overlong value
    in a field of the lock: `lock --check`, `install --lock` (and `why`) exit 3 naming the file and
    the field, no pip process starts, nothing reaches the index, the environment is as it was."""
    python = pip_venv("target")
    shim, log = logging_shim(tmp_path, python)
    bad, where = hostile(tomllib.loads(served_lock.lock_text), field, attack, served_lock.injected)
    path = tmp_path / "pylock.toml"
    path.write_text(toml_text(bad), encoding="utf-8")
    before = snapshot(site_packages(python))
    for argv in (("lock", "--check", str(path), *RTX_4090), ("install", "--lock", str(path), "--python", shim, *RTX_4090),
                 ("why", "crtest-good", "--lock", str(path))):
        run = cli(*argv)
        assert run.code == 3, run.out + run.err
        assert run.out == ""
        assert run.err.startswith(f"cudaresolve: error: {path}: {where}") and len(run.err.splitlines()) == 1, run.err
        if field not in ("name", "index-urls"):
            assert "(package crtest-good)" in run.err, run.err
    assert "-m pip" not in log.read_text() and "-I -" in log.read_text()  # the shim ran, pip did not
    assert not served_lock.server.requests
    assert snapshot(site_packages(python)) == before


def test_an_entry_cudaresolve_cannot_install_is_refused_naming_it(cli, pip_venv, served_lock, tmp_path):
    """Only an sdist (another tool's lock), or a wheel with only a sha512: exit 3 naming the package,
    not skipped with exit 0; pip never starts."""
    python = pip_venv("target")
    shim, log = logging_shim(tmp_path, python)
    data = tomllib.loads(served_lock.lock_text)
    sdist = {"name": "crtest-sdist", "version": "1.0",
             "sdist": {"url": served_lock.index_url + "/../files/crtest_sdist-1.0.tar.gz", "hashes": {"sha256": "0" * 64}}}
    sha512 = {**data["packages"][0], "wheels": [{**data["packages"][0]["wheels"][0], "hashes": {"sha512": "ab" * 64}}]}
    before = snapshot(site_packages(python))
    for packages, words in (
        ([data["packages"][0], sdist], "sdist (package crtest-sdist): only a sdist source"),
        ([sha512], "wheels.hashes.sha256 (package crtest-good): crtest_good-1.0-py3-none-any.whl has no sha256"),
    ):
        path = tmp_path / "pylock.toml"
        path.write_text(toml_text({**data, "packages": packages}), encoding="utf-8")
        run = cli("install", "--lock", str(path), "--python", shim, *RTX_4090)
        assert run.code == 3, run.out + run.err
        assert run.err.startswith(f"cudaresolve: error: {path}: {words}") and len(run.err.splitlines()) == 1, run.err
        assert run.out == ""
    assert "-m pip" not in log.read_text()
    assert snapshot(site_packages(python)) == before


# -- 4. failure paths: the environment is unchanged, or said to be what it is -------------------------


def test_unreachable_index_exits_3_with_one_line_and_installs_nothing(cli, pip_venv, cuda_index, monkeypatch):
    monkeypatch.setenv("PIP_RETRIES", "0")  # pip's --retries: no waits for an index that is not there
    python = pip_venv("target", (OLD_NVJITLINK,), cuda_index.index_url)
    before = snapshot(site_packages(python))
    run = cli("install", CUSPARSE, "--python", python, "-q", *RTX_4090, "--index-url", "http://127.0.0.1:9/simple",
              "--torch-index-base", "http://127.0.0.1:9")
    assert run.code == 3, run.out + run.err
    assert len(run.err.strip().splitlines()) == 1 and run.err.startswith("cudaresolve: error: "), run.err
    assert "127.0.0.1:9" in run.err
    assert run.out == ""
    assert snapshot(site_packages(python)) == before


@pytest.mark.parametrize(
    "requirements, constraint, words",
    [
        (["numba==0.59.0"], None, "numba-0.59.0-cg-cache"),
        ([CUSPARSE], "nvidia-nvjitlink-cu12<12.4\n", "12.4"),
    ],
    ids=["advisory", "capped-nvjitlink"],
)
def test_unsatisfiable_request_exits_2_and_installs_nothing(cli, pip_venv, cuda_index, tmp_path, requirements, constraint, words):
    python = pip_venv("target", (OLD_NVJITLINK,), cuda_index.index_url)
    before = snapshot(site_packages(python))
    flags = []
    if constraint:
        (tmp_path / "constraints.txt").write_text(constraint)
        flags = ["-c", str(tmp_path / "constraints.txt")]
    run = cli("install", *requirements, *flags, "--python", python, "-q", *RTX_4090, *index_flags(cuda_index))
    assert run.code == 2, run.out + run.err
    assert words in run.err and "Traceback" not in run.err
    assert run.out == ""  # no plan, no pip
    assert snapshot(site_packages(python)) == before


@pytest.fixture
def lying_index(cuda_index):
    """The fake CUDA universe again, on its own server, whose pages advertise a wrong sha256 for
    nvidia-cusparse-cu12 12.3.1.170 (its metadata file is right: a lock reads it by its own hash)."""
    universe = cuda_index.universe
    server = IndexServer()
    for filename, roots in sorted(universe.wheels.items()):
        lie = "0" * 64 if filename.startswith("nvidia_cusparse_cu12-12.3.1.170-") else None
        for root in roots:
            server.add(filename, (universe.root / filename).read_bytes(), root=root,
                       requires_python=universe.requires_python.get(filename), sha256=lie)
    server.start()

    class Lying:
        index_url = server.url + "/simple"
        torch_index_base = server.url

    yield Lying
    server.stop()


def test_bad_hash_shows_pips_error_passes_its_status_and_says_nothing_changed(cli, pip_venv, cuda_index, lying_index, tmp_path):
    python = pip_venv("target", (OLD_NVJITLINK,), cuda_index.index_url)
    before = snapshot(site_packages(python))
    run = cli("install", CUSPARSE, "--python", python, "-q", *RTX_4090, *index_flags(lying_index))
    assert "THESE PACKAGES DO NOT MATCH THE HASHES" in run.err, run.out + run.err  # pip's own words
    assert "Expected sha256 " + "0" * 64 in run.err
    # pip's status, as pip itself gives it for the same hashed requirements
    requirements = tmp_path / "requirements.txt"
    made = cli("lock", CUSPARSE, "--python", python, "-o", str(tmp_path / "pylock.toml"), "--write-requirements", str(requirements),
               "-q", *RTX_4090, *index_flags(lying_index))
    assert made.code == 0, made.err
    alone = pip(python, "install", "--require-hashes", "--no-deps", "-r", str(requirements), check=False)
    assert alone.returncode != 0 and "DO NOT MATCH THE HASHES" in alone.stderr
    assert run.code == alone.returncode
    nvjitlink = locked(read_pylock(str(tmp_path / "pylock.toml")))["nvidia-nvjitlink-cu12"]
    assert f"pip exited with status {run.code}: 0 of 2 planned changes are in place\n" in run.out, run.out
    assert "  not done: nvidia-cusparse-cu12 12.3.1.170 (installed now: nothing)\n" in run.out
    assert f"  not done: nvidia-nvjitlink-cu12 {nvjitlink} (installed now: 12.1.105)\n" in run.out
    assert "the environment is as it was before\n" in run.out
    assert "result: " not in run.out  # no doctor after a failed pip
    assert snapshot(site_packages(python)) == before


@pytest.fixture
def two_package_index():
    """An index of two small pure-Python packages; pip installs them one after the other."""
    server = IndexServer()
    for name in ("crtest-alpha", "crtest-omega"):
        module = name.replace("-", "_")
        server.add(*make_wheel(name, "1.0", files={f"{module}/__init__.py": b"", f"{module}/data.txt": b"data\n"}))
    server.start()
    yield server
    server.stop()


def test_pip_failing_midway_passes_its_status_and_reports_what_is_in_place(cli, pip_venv, two_package_index):
    """pip installs one package, then cannot write a file of the second (a directory is in the way):
    what pip installed before the failure stays, and the message says so, package by package."""
    python = pip_venv("target")
    [site] = site_packages(python)
    index = ("--index-url", two_package_index.url + "/simple", "--torch-index-base", two_package_index.url)
    blocker = Path(site, "crtest_alpha", "data.txt")  # pip installs omega first (asserted below)
    blocker.mkdir(parents=True)
    (blocker / "keep").write_text("a directory where crtest-alpha's data.txt goes\n")
    before_names, before_records = snapshot([site])

    run = cli("install", "crtest-alpha", "crtest-omega", "--python", python, "-q", *RTX_4090, *index)
    assert run.code != 0, run.out + run.err
    assert "Installing collected packages: crtest-omega, crtest-alpha\n" in run.out, run.out
    assert re.search(r"ERROR: Could not install packages due to an OSError: .*data\.txt", run.err), run.err  # pip's words
    now = installed(python)
    assert now.get("crtest-omega") == "1.0" and "crtest-alpha" not in now  # failed midway, really
    assert f"pip exited with status {run.code}: 1 of 2 planned changes are in place\n" in run.out, run.out
    assert "  in place: crtest-omega 1.0\n" in run.out
    assert "  not done: crtest-alpha 1.0 (installed now: nothing)\n" in run.out
    assert "as it was before" not in run.out
    after_names, after_records = snapshot([site])
    assert set(after_names) - set(before_names) == {os.path.join(site, "crtest_omega-1.0.dist-info")}
    assert {k: v for k, v in after_records.items() if k in before_records} == before_records


# -- 5. PEP 668 --------------------------------------------------------------------------------------

MARKER_WORDS = "This interpreter belongs to the cudaresolve tests; make a venv."


@pytest.fixture(scope="session")
def system_python(tmp_path_factory) -> str:
    """A "system" interpreter that is not a venv: a copy of this Python's executable beside a
    stdlib of symlinks to this one's, its own site-packages with pip (ensurepip), then an
    EXTERNALLY-MANAGED marker with our own Error text. Nothing of the machine is touched."""
    import sysconfig

    root = tmp_path_factory.mktemp("system-python")
    executable = os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)
    stdlib = sysconfig.get_path("stdlib", vars={"installed_base": sys.base_prefix, "base": sys.base_prefix})
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    lib = root / "lib" / version
    (lib / "site-packages").mkdir(parents=True)
    (root / "bin").mkdir()
    shutil.copy2(executable, root / "bin" / "python3")
    for entry in os.listdir(stdlib):
        if entry not in ("site-packages", "dist-packages", "EXTERNALLY-MANAGED"):
            os.symlink(os.path.join(stdlib, entry), lib / entry)
    python = str(root / "bin" / "python3")
    probe = subprocess.run([python, "-c", "import sys, sysconfig; print(sys.prefix == sys.base_prefix, sysconfig.get_path('stdlib'))"],
                           capture_output=True, text=True)
    if probe.returncode != 0 or probe.stdout.split() != ["True", str(lib)]:
        pytest.skip(f"cannot make a copy of this interpreter that runs outside a venv: {probe.stdout}{probe.stderr}")
    subprocess.run([python, "-m", "ensurepip"], check=True, capture_output=True, env=hermetic_environ())
    (lib / "EXTERNALLY-MANAGED").write_text(f"[externally-managed]\nError={MARKER_WORDS}\n")
    return python


def test_externally_managed_interpreter_is_refused_in_pips_own_words(cli, system_python, cuda_index):
    pips_own = pip(system_python, "install", "numba", check=False)
    assert pips_own.returncode != 0 and MARKER_WORDS in pips_own.stderr  # what pip says to this interpreter
    before = snapshot(site_packages(system_python))
    assert any(os.path.basename(name).startswith("pip-") for name in before[0])  # pip is there to refuse
    run = cli("install", "numba>=0.59,<0.60", "--python", system_python, "-q", *RTX_4090, *index_flags(cuda_index))
    assert run.code == pips_own.returncode, run.err
    assert "externally-managed-environment" in run.err
    assert MARKER_WORDS in run.err
    assert run.out == ""  # no plan: refused before resolving
    assert snapshot(site_packages(system_python)) == before


def test_externally_managed_interpreter_installs_into_a_target_directory(cli, system_python, cuda_index, tmp_path):
    """PEP 668 is about the interpreter's own site-packages: pip installs into --target anyway."""
    before = snapshot(site_packages(system_python))
    target = tmp_path / "target-dir"
    run = cli("install", "numba>=0.59,<0.60", "--python", system_python, "--target", str(target), "-q", *RTX_4090,
              *index_flags(cuda_index))
    assert run.code == 0, run.out + run.err
    found = {d.name: str(d.version) for d in read_distributions(str(target))[0]}
    assert found["numba"] == "0.59.1"
    assert snapshot(site_packages(system_python)) == before


@pytest.mark.parametrize("how", ["PIP_BREAK_SYSTEM_PACKAGES=1", "pip.conf [install]", "PIP_BREAK_SYSTEM_PACKAGES=0"])
def test_pips_break_system_packages_setting_is_honoured_as_pip_honours_it(cli, system_python, cuda_index, tmp_path, monkeypatch, how):
    if how.startswith("pip.conf"):
        (tmp_path / "pip.conf").write_text("[install]\nbreak-system-packages = true\n")
        monkeypatch.setenv("PIP_CONFIG_FILE", str(tmp_path / "pip.conf"))
    else:
        monkeypatch.setenv(*how.split("="))
    pips_own = subprocess.run([system_python, "-m", "pip", "install", "--dry-run", "--no-index", "numba"],
                              capture_output=True, text=True)  # this environment: the setting under test
    allowed = "externally-managed-environment" not in pips_own.stderr  # pip's verdict under the same setting
    assert allowed == (how != "PIP_BREAK_SYSTEM_PACKAGES=0"), pips_own.stderr
    before = snapshot(site_packages(system_python))
    run = cli("install", "numba>=0.59,<0.60", "--python", system_python, "--dry-run", "-q", *RTX_4090, *index_flags(cuda_index))
    if allowed:
        assert run.code == 0 and run.out.startswith("plan: "), run.out + run.err
    else:
        assert run.code != 0 and "externally-managed-environment" in run.err and run.out == "", run.out + run.err
    assert snapshot(site_packages(system_python)) == before


@pytest.mark.parametrize("variable, value", [("PIP_TARGET", "{tmp}/elsewhere"), ("PIP_PREFIX", "{tmp}/prefix"),
                                             ("PIP_ROOT", "{tmp}/root"), ("PIP_USER", "yes")])
def test_pip_configured_to_install_elsewhere_is_refused_before_anything(cli, pip_venv, cuda_index, tmp_path, monkeypatch, variable, value):
    """pip would put the files where its configuration says, not where the plan looked: nothing runs."""
    python = pip_venv("target")
    before = snapshot(site_packages(python))
    monkeypatch.setenv(variable, value.format(tmp=tmp_path))
    run = cli("install", "numba>=0.59,<0.60", "--python", python, "-q", *RTX_4090, *index_flags(cuda_index))
    key = variable[len("PIP_"):].lower()
    assert (run.code, run.out) == (3, ""), run.out + run.err
    assert run.err == (f"cudaresolve: error: pip's configuration sets {key} ({variable}), so pip would install elsewhere "
                       "than the plan: unset it, and give cudaresolve install --target or --prefix instead\n")
    assert snapshot(site_packages(python)) == before and not list(tmp_path.glob("elsewhere*"))


def test_this_machines_system_python_is_refused_when_it_is_externally_managed(cli, cuda_index):
    system = "/usr/bin/python3"
    probe = subprocess.run([system, "-c", "import os, sys, sysconfig; print(sys.prefix == sys.base_prefix); "
                            "print(os.path.join(sysconfig.get_path('stdlib'), 'EXTERNALLY-MANAGED'))"],
                           capture_output=True, text=True) if os.path.exists(system) else None
    if probe is None or probe.returncode != 0:
        pytest.skip(f"{system} does not run here")
    not_venv, marker = probe.stdout.split("\n")[:2]
    if not_venv != "True" or not os.path.isfile(marker):
        pytest.skip(f"{system} has no PEP 668 marker ({marker}): nothing to refuse")
    before = snapshot(site_packages(system))
    run = cli("install", "numba>=0.59,<0.60", "--python", system, "-q", *RTX_4090, *index_flags(cuda_index))
    assert run.code != 0
    assert run.out == ""
    has_pip = subprocess.run([system, "-m", "pip", "--version"], capture_output=True).returncode == 0
    if has_pip:
        assert "externally-managed-environment" in run.err, run.err
        first = next(line for line in Path(marker).read_text().splitlines() if line.startswith("Error="))[len("Error="):]
        assert first.strip() in run.err, run.err
    assert snapshot(site_packages(system)) == before


# -- 6. the real registry ------------------------------------------------------------------------------


@pytest.mark.registry
def test_registry_cusparse_install_raises_nvjitlink_where_plain_pip_leaves_it_broken(cli, pip_venv, monkeypatch):
    """Real NVIDIA wheels from the registry pip uses by default (~250 MB each way; pip's cache
    directory is under the test cache: pip keeps there what the registry lets it cache).
    cudaresolve raises nvJitLink to >= 12.4 and the doctor is clean; plain pip keeps 12.1.105 and the doctor reports the symbol skew."""
    pip_cache = str(cache_dir() / "pip-cache")
    monkeypatch.delenv("PIP_NO_CACHE_DIR")
    monkeypatch.setenv("PIP_CACHE_DIR", pip_cache)  # for the pip cudaresolve runs
    host = ("--driver", "550.144.03", "--gpu", "8.6")
    pythons = []
    for name in ("with-cudaresolve", "with-pip"):
        python = pip_venv(name)
        done = pip(python, "install", "--no-deps", OLD_NVJITLINK, check=False, cache=pip_cache)
        if done.returncode != 0:
            pytest.skip(f"the registry is not reachable: {done.stderr.strip().splitlines()[-1:]}")
        assert installed(python)["nvidia-nvjitlink-cu12"] == "12.1.105"
        pythons.append(python)
    ours, plain = pythons

    run = cli("install", CUSPARSE, "--python", ours, "-q", *host)
    assert run.code == 0, run.out + run.err
    after = installed(ours)
    assert after["nvidia-cusparse-cu12"] == "12.3.1.170"
    assert Version(after["nvidia-nvjitlink-cu12"]) >= Version("12.4")
    assert doctor_result_line(run.out).startswith("result: 0 errors"), run.out
    assert doctor_errors(cli, ours, host) == []

    pip(plain, "install", CUSPARSE, cache=pip_cache)
    assert installed(plain)["nvidia-nvjitlink-cu12"] == "12.1.105"
    assert installed(plain)["nvidia-cusparse-cu12"] == "12.3.1.170"
    errors = doctor_errors(cli, plain, host)
    assert ("symbol-skew", "nvidia-cusparse-cu12 12.3.1.170") in [(e["check"], e["subject"]) for e in errors], errors
