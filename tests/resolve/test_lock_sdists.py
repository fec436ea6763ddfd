"""sdists as pip takes them (docs/lock.md, "sdists"): a dependency with only an sdist is locked with its
metadata from PKG-INFO when that is Metadata 2.2+ with static dependencies, else as pip prepares it
in its isolated build environment; pip's only-binary refuses it; pylock.toml holds its
`[packages.sdist]` with its hash, and `install --lock` lets pip build it.

The sdists are made here: each carries an in-tree PEP 517 backend (`backend-path`, no build
requirements, so pip's isolated build needs no index of build tools) whose metadata names another
leaf than its PKG-INFO does, so which of the two the lock read shows in what it locked.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest
from conftest import hermetic_environ, registry_python
from index_server import make_wheel
from packaging.pylock import Pylock
from packaging.utils import canonicalize_name

from cudaresolve.cli import main
from cudaresolve.lockfile.pylock import read_pylock

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

_BACKEND = '''
import base64, hashlib, os, zipfile
NAME, VERSION, REQUIRES = {name!r}, {version!r}, {requires!r}
STEM = NAME.replace("-", "_") + "-" + VERSION
def _metadata():
    lines = ["Metadata-Version: 2.1", "Name: " + NAME, "Version: " + VERSION]
    return "\\n".join(lines + ["Requires-Dist: " + r for r in REQUIRES]) + "\\n\\n"
def get_requires_for_build_wheel(config_settings=None):
    return []
def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    where = os.path.join(metadata_directory, STEM + ".dist-info")
    os.makedirs(where)
    with open(os.path.join(where, "METADATA"), "w") as out:
        out.write(_metadata())
    return STEM + ".dist-info"
def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    members = {{NAME.replace("-", "_") + ".py": "BUILT = True\\n",
               STEM + ".dist-info/METADATA": _metadata(),
               STEM + ".dist-info/WHEEL": "Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n"}}
    record = [p + ",sha256=" + base64.urlsafe_b64encode(hashlib.sha256(d.encode()).digest()).rstrip(b"=").decode() + "," + str(len(d))
              for p, d in members.items()]
    members[STEM + ".dist-info/RECORD"] = "\\n".join(record + [STEM + ".dist-info/RECORD,,"]) + "\\n"
    filename = STEM + "-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w") as archive:
        for path, data in members.items():
            archive.writestr(path, data)
    return filename
'''


def make_sdist(name: str, version: str, *, pkg_info: str, built_requires: list[str], zip_format: bool = False) -> tuple[str, bytes]:
    """(filename, bytes) of an sdist whose PKG-INFO is `pkg_info` and whose backend's metadata
    requires `built_requires`."""
    stem = f"{name.replace('-', '_')}-{version}"
    members = {
        f"{stem}/PKG-INFO": pkg_info,
        f"{stem}/pyproject.toml": '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n',
        f"{stem}/backend.py": _BACKEND.format(name=name, version=version, requires=built_requires),
    }
    buffer = io.BytesIO()
    if zip_format:
        with zipfile.ZipFile(buffer, "w") as archive:
            for path, text in members.items():
                archive.writestr(path, text)
        return f"{stem}.zip", buffer.getvalue()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for path, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(path)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return f"{stem}.tar.gz", buffer.getvalue()


def _pkg_info(name: str, version: str, metadata_version: str, requires: list[str], dynamic: list[str] = ()) -> str:
    lines = [f"Metadata-Version: {metadata_version}", f"Name: {name}", f"Version: {version}"]
    lines += [f"Dynamic: {field}" for field in dynamic] + [f"Requires-Dist: {r}" for r in requires]
    return "\n".join(lines) + "\n\n"


@pytest.fixture
def sdists(server):
    """app 1.0 (a wheel) needs static-dep and dynamic-dep, which exist only as sdists: static-dep's
    PKG-INFO is Metadata 2.2 with static dependencies (leaf-static; its backend would say
    leaf-built), dynamic-dep's lists Requires-Dist as dynamic (its backend says leaf-dynamic).
    old-style 1.0's PKG-INFO is Metadata 2.1, a zip (its backend says leaf-built)."""
    server.add(*make_wheel("app", "1.0", requires=["static-dep", "dynamic-dep"]))
    for leaf in ("leaf-static", "leaf-built", "leaf-dynamic"):
        server.add(*make_wheel(leaf, "1.0"))
    server.add(*make_sdist("static-dep", "1.0", pkg_info=_pkg_info("static-dep", "1.0", "2.2", ["leaf-static"]),
                           built_requires=["leaf-built"]), metadata=False)
    server.add(*make_sdist("dynamic-dep", "1.0", built_requires=["leaf-dynamic"],
                           pkg_info=_pkg_info("dynamic-dep", "1.0", "2.2", ["leaf-static"], dynamic=["Requires-Dist"])),
               metadata=False)
    server.add(*make_sdist("old-style", "1.0", pkg_info=_pkg_info("old-style", "1.0", "2.1", ["leaf-static"]),
                           built_requires=["leaf-built"], zip_format=True), metadata=False)
    return server


def lock(index_url: str, python: str, *args: str) -> int:
    return main(["lock", "-q", "--python", python, "--index-url", index_url, "--driver", "550.144.03", *args])


@pytest.mark.parametrize("deep", [False, True])
def test_a_static_pkg_info_is_read_and_a_dynamic_one_is_built(sdists, empty_python, hermetic, capsys, deep):
    """static-dep's dependencies come from its PKG-INFO (leaf-static, not what its backend says);
    dynamic-dep's from pip's build (leaf-dynamic, named nowhere but in its backend). Both are locked
    with their sdist and its sha256, with --deep too (an sdist has no binaries for the plan to read)."""
    assert lock(sdists.url + "/simple", empty_python, "app", "--json", "-o", "pylock.toml", *(["--deep"] if deep else [])) == 0
    packages = {p["name"]: p for p in json.loads(capsys.readouterr().out)["packages"]}
    assert sorted(packages) == ["app", "dynamic-dep", "leaf-dynamic", "leaf-static", "static-dep"]
    for name in ("static-dep", "dynamic-dep"):
        served = next(h for h in sdists.projects[name])
        assert packages[name]["wheels"] == []
        assert packages[name]["sdist"]["filename"] == served.filename
        assert packages[name]["sdist"]["sha256"] == hashlib.sha256(served.data).hexdigest()
        assert packages[name]["reason"].endswith("no wheel for the target: pip builds its sdist, running its code")
    written = tomllib.loads((hermetic / "pylock.toml").read_text())
    entry = next(p for p in written["packages"] if p["name"] == "dynamic-dep")
    assert "wheels" not in entry and entry["sdist"]["hashes"]["sha256"] == packages["dynamic-dep"]["sdist"]["sha256"]
    read = {p.name: p for p in read_pylock(str(hermetic / "pylock.toml")).packages}
    assert read["dynamic-dep"].sdist is not None and read["dynamic-dep"].sdist.filename == "dynamic_dep-1.0.tar.gz"
    other = {p.name: p for p in Pylock.from_dict(written).packages}  # packaging's own PEP 751 reader
    assert other["dynamic-dep"].sdist is not None and other["dynamic-dep"].sdist.hashes["sha256"] == entry["sdist"]["hashes"]["sha256"]
    assert other["dynamic-dep"].wheels is None


def test_a_metadata_2_1_zip_sdist_is_built(sdists, empty_python, hermetic, capsys):
    assert lock(sdists.url + "/simple", empty_python, "old-style", "--json") == 0
    assert sorted(p["name"] for p in json.loads(capsys.readouterr().out)["packages"]) == ["leaf-built", "old-style"]


def test_only_binary_refuses_the_sdist_in_one_line(sdists, empty_python, hermetic, monkeypatch, capsys):
    assert lock(sdists.url + "/simple", empty_python, "app", "--only-binary", ":all:") == 2
    err = capsys.readouterr().err
    assert ("static-dep 1.0: no wheel for this interpreter, only an sdist, which pip's only-binary (from --only-binary) refuses"
            in err)
    assert "Traceback" not in err
    monkeypatch.setenv("PIP_ONLY_BINARY", "dynamic-dep")
    assert lock(sdists.url + "/simple", empty_python, "app") == 2
    assert ("dynamic-dep 1.0: no wheel for this interpreter, only an sdist, which pip's only-binary (from PIP_ONLY_BINARY) refuses"
            in capsys.readouterr().err)


def test_a_build_that_fails_is_one_line_naming_the_sdist(server, empty_python, hermetic, capsys):
    """A backend that raises: exit 3, one line naming the sdist and pip's last error, no traceback."""
    name, data = make_sdist("broken", "1.0", pkg_info=_pkg_info("broken", "1.0", "2.1", []), built_requires=[])
    buffer = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as source, tarfile.open(fileobj=buffer, mode="w:gz") as out:
        for member in source:
            body = source.extractfile(member).read()
            if member.name.endswith("backend.py"):
                body += b"def prepare_metadata_for_build_wheel(*args, **kwargs):\n    raise SystemExit('the backend refuses')\n"
            member.size = len(body)
            out.addfile(member, io.BytesIO(body))
    server.add(name, buffer.getvalue(), metadata=False)
    assert lock(server.url + "/simple", empty_python, "broken") == 3
    err = capsys.readouterr().err
    assert "broken-1.0.tar.gz (broken 1.0): pip could not prepare its metadata (exit 1)" in err and "Traceback" not in err


def test_install_lock_lets_pip_build_the_sdist(sdists, empty_python, hermetic, tmp_path, capfd, venv_with_pip):
    """The lock's sdist entries go to pip hash-pinned; pip builds them and the venv holds exactly the lock."""
    assert lock(sdists.url + "/simple", empty_python, "app", "-o", "pylock.toml") == 0
    target = venv_with_pip(tmp_path / "target")
    python = str(target / "bin" / "python")
    before = _installed(python)
    capfd.readouterr()
    code = main(["install", "--lock", str(hermetic / "pylock.toml"), "--python", python, "-q", "--driver", "550.144.03"])
    captured = capfd.readouterr()
    assert code == 0, captured.err + captured.out
    installed = {name: version for name, version in _installed(python).items() if name not in before}
    assert installed == {"app": "1.0", "static-dep": "1.0", "dynamic-dep": "1.0", "leaf-static": "1.0", "leaf-dynamic": "1.0"}
    built = subprocess.run([python, "-c", "import dynamic_dep; print(dynamic_dep.BUILT)"], capture_output=True, text=True)
    assert built.stdout.strip() == "True"
    shutil.rmtree(target)


def _installed(python: str) -> dict[str, str]:
    listed = subprocess.run([python, "-m", "pip", "list", "--format", "json"], capture_output=True, text=True,
                            env=hermetic_environ(), check=True)
    return {canonicalize_name(p["name"]): p["version"] for p in json.loads(listed.stdout)}


@pytest.mark.registry
def test_a_real_sdist_only_release_is_built_locked_and_installed(tmp_path, hermetic, capfd, venv_with_pip):
    """docopt 0.6.2 exists only as an sdist whose PKG-INFO is Metadata 1.1: pip prepares its metadata
    (setuptools in pip's isolated build environment, from the registry), the lock holds its sdist,
    and install --lock has pip build it into an empty venv."""
    python = registry_python(venv_with_pip(tmp_path / "target"), "packaging")  # docopt has no wheel to list with --only-binary
    capfd.readouterr()
    assert main(["lock", "-q", "--python", python, "--driver", "550.144.03", "docopt==0.6.2", "-o", "pylock.toml", "--json"]) == 0
    entry = next(p for p in json.loads(capfd.readouterr().out)["packages"] if p["name"] == "docopt")
    assert (entry["wheels"], entry["sdist"]["filename"]) == ([], "docopt-0.6.2.tar.gz")
    assert len(entry["sdist"]["sha256"]) == 64
    code = main(["install", "--lock", str(hermetic / "pylock.toml"), "--python", python, "-q", "--driver", "550.144.03"])
    captured = capfd.readouterr()
    assert code == 0, captured.err + captured.out
    assert _installed(python).get("docopt") == "0.6.2"


def test_the_newest_release_is_taken_wheel_or_sdist_as_pip_ranks_them(server, empty_python, hermetic, monkeypatch, capsys):
    """demo 1.0 has a wheel and an sdist, 2.0 only an sdist: pip takes 2.0 (built); with prefer-binary,
    1.0's wheel; with no-binary demo and demo<2, 1.0's sdist. The lock takes what pip takes."""
    server.add(*make_wheel("demo", "1.0"))
    for version in ("1.0", "2.0"):
        server.add(*make_sdist("demo", version, pkg_info=_pkg_info("demo", version, "2.2", []), built_requires=[]), metadata=False)
    index = server.url + "/simple"

    def chosen() -> tuple[str, bool]:
        entry = next(p for p in json.loads(capsys.readouterr().out)["packages"] if p["name"] == "demo")
        return entry["version"], entry["sdist"] is not None

    def pip_takes(environ: dict[str, str], requirement: str = "demo") -> str:
        out = hermetic / "pip-report.json"
        command = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-cache-dir", "--quiet",
                   "--report", str(out), "--index-url", index, requirement]
        done = subprocess.run(command, capture_output=True, text=True, env=hermetic_environ(environ))
        assert done.returncode == 0, done.stderr
        return json.loads(out.read_text())["install"][0]["metadata"]["version"]

    assert lock(index, empty_python, "demo", "--json") == 0
    assert chosen() == ("2.0", True) and pip_takes({}) == "2.0"
    monkeypatch.setenv("PIP_PREFER_BINARY", "1")
    assert lock(index, empty_python, "demo", "--json") == 0
    assert chosen() == ("1.0", False) and pip_takes({"PIP_PREFER_BINARY": "1"}) == "1.0"
    monkeypatch.delenv("PIP_PREFER_BINARY")
    assert lock(index, empty_python, "demo<2", "--json", "--no-binary", "demo") == 0
    assert chosen() == ("1.0", True) and pip_takes({"PIP_NO_BINARY": "demo"}, "demo<2") == "1.0"


def test_an_sdist_only_release_refused_by_only_binary_is_a_decision_read_back(server, empty_python, hermetic, capsys):
    """demo 2.0 exists only as an sdist: under --only-binary :all: 1.0's wheel is locked, and the
    lock file's decision says why not 2.0, with the setting, as the reader reads it back."""
    server.add(*make_wheel("demo", "1.0"))
    server.add(*make_sdist("demo", "2.0", pkg_info=_pkg_info("demo", "2.0", "2.2", []), built_requires=[]), metadata=False)
    assert lock(server.url + "/simple", empty_python, "demo", "--only-binary", ":all:", "-o", "pylock.toml") == 0
    made = read_pylock(str(hermetic / "pylock.toml"))
    assert [str(p.version) for p in made.packages] == ["1.0"]
    (rejection,) = [r for d in made.decisions for r in d.rejected]
    assert (str(rejection.candidate.version), rejection.rule.value, rejection.evidence.via) == ("2.0", "sdist-only", "--only-binary")
    written = tomllib.loads((hermetic / "pylock.toml").read_text())["tool"]["cudaresolve"]["decisions"][0]["rejected"][0]
    assert written["reason"] == "no wheel for this interpreter, only an sdist, which pip's only-binary (from --only-binary) refuses"


def test_a_build_that_does_not_end_is_stopped_at_its_time_limit(server, empty_python, hermetic, monkeypatch, capsys):
    """A backend that hangs: pip's run is stopped at the limit (here set to 5 s), exit 3 naming the sdist."""
    from cudaresolve.index import limits

    name, data = make_sdist("slow", "1.0", pkg_info=_pkg_info("slow", "1.0", "2.1", []), built_requires=[])
    buffer = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as source, tarfile.open(fileobj=buffer, mode="w:gz") as out:
        for member in source:
            body = source.extractfile(member).read()
            if member.name.endswith("backend.py"):
                body += b"import time\ndef prepare_metadata_for_build_wheel(*args, **kwargs):\n    time.sleep(600)\n"
            member.size = len(body)
            out.addfile(member, io.BytesIO(body))
    server.add(name, buffer.getvalue(), metadata=False)
    monkeypatch.setattr(limits, "DEFAULT", dataclasses.replace(limits.DEFAULT, build_seconds=5.0))
    assert lock(server.url + "/simple", empty_python, "slow") == 3
    err = capsys.readouterr().err
    assert "slow-1.0.tar.gz (slow 1.0): pip did not prepare its metadata within 5 s, the limit for an sdist's build" in err, err


def test_the_pip_wrappers_binary_options_choose_formats_as_pips_do(hermetic):
    """`cudaresolve pip install ... --only-binary :all: --no-binary demo --prefer-binary`: the lock it
    makes refuses every sdist but demo's, refuses demo's wheels, and ranks wheels first, naming pip's
    option; in the other order pip's :all: clears the no-binary name, and so does the lock."""
    from cudaresolve.commands.pip import PipCommand, pip_lock_inputs
    from cudaresolve.env.interpreter import target_for
    from cudaresolve.integrations.pip import split_install_arguments

    def formats(*arguments: str):
        positions, options = split_install_arguments(arguments)
        inputs = pip_lock_inputs(PipCommand(None, "https://t.invalid", True, ("install", *arguments)), target_for(), positions, options)
        return inputs.policy.formats, inputs.policy.prefer_binary

    chosen, prefer = formats("--only-binary", ":all:", "--no-binary=demo", "--prefer-binary", "demo", "app")
    assert chosen.sdists_refused("app") and not chosen.sdists_refused("demo") and chosen.wheels_refused("demo")
    assert (chosen.only_binary_via, chosen.no_binary_via, prefer) == ("--only-binary", "--no-binary", True)
    chosen, prefer = formats("--no-binary", "demo", "--only-binary", ":all:", "demo")
    assert chosen.sdists_refused("demo") and not chosen.wheels_refused("demo") and not prefer


def test_the_locks_binary_options_apply_in_the_order_given():
    """`lock --only-binary :all: --no-binary demo`: demo's sdist is taken and its wheels refused, as pip
    applies the two options one after the other; in the other order :all: clears the name."""
    from cudaresolve.commands.options import formats_given
    from cudaresolve.commands.parser import build_parser
    from cudaresolve.index.choices import PipChoices

    def formats(*arguments: str):
        return formats_given(PipChoices(), build_parser().parse_args(["lock", *arguments, "demo"])).formats

    chosen = formats("--only-binary", ":all:", "--no-binary", "demo")
    assert not chosen.sdists_refused("demo") and chosen.wheels_refused("demo") and chosen.sdists_refused("app")
    chosen = formats("--no-binary", "demo", "--only-binary", ":all:")
    assert chosen.sdists_refused("demo") and not chosen.wheels_refused("demo")


def test_a_lock_with_sdists_is_checked_and_explained(sdists, empty_python, hermetic, capsys):
    """`lock --check` of a lock holding sdist entries passes on its host, and `why` names the sdist's build."""
    assert lock(sdists.url + "/simple", empty_python, "app", "-o", "pylock.toml") == 0
    capsys.readouterr()
    assert main(["lock", "--check", "pylock.toml", "--driver", "550.144.03"]) == 0
    capsys.readouterr()
    assert main(["why", "dynamic-dep", "--lock", "pylock.toml"]) == 0
    assert "no wheel for the target: pip builds its sdist, running its code" in capsys.readouterr().out


def test_a_target_no_wheel_of_an_entry_fits_takes_its_sdist():
    """A universal lock's entry with an aarch64 wheel and the sdist: on x86_64 the sdist is selected
    (pip builds it), on aarch64 the wheel; an entry without an sdist stays unfit where no wheel fits."""
    from packaging.tags import Tag
    from packaging.version import Version

    from cudaresolve.lockfile.select import select
    from cudaresolve.resolve.lock import Lock, LockedPackage, LockedSdist, LockedWheel, Reason, ReasonKind

    wheel = LockedWheel("demo-1.0-py3-none-manylinux_2_28_aarch64.whl", "https://files.invalid/w.whl", "a" * 64, 10)
    sdist = LockedSdist("demo-1.0.tar.gz", "https://files.invalid/demo-1.0.tar.gz", "b" * 64, 10)
    entry = LockedPackage("demo", Version("1.0"), None, (wheel,), None, Reason(ReasonKind.INDEX), sdist=sdist)
    made = Lock((entry,), None, (), (), (), (), "cudaresolve test")
    x86 = [Tag("py3", "none", "manylinux_2_28_x86_64")]
    (chosen,) = select(made, {"platform_machine": "x86_64"}, x86, "x86_64").packages
    assert (chosen.wheels, chosen.sdist) == ((), sdist)
    (chosen,) = select(made, {"platform_machine": "aarch64"}, [Tag("py3", "none", "manylinux_2_28_aarch64")], "aarch64").packages
    assert chosen.wheels == (wheel,)
    without = Lock((LockedPackage("demo", Version("1.0"), None, (wheel,), None, Reason(ReasonKind.INDEX)),), None, (), (), (), (), "t")
    assert len(select(without, {"platform_machine": "x86_64"}, x86, "x86_64").unfit) == 1
