"""A fix the doctor prints is a value a test can apply: in a small real venv, the pip command read
from the printed fix and the pip commands built from the fix's value (tests/fix_steps.py) install
the same thing, and the finding they fix is gone after either.

The venv holds gcc-built wheels (test_conda_env's): `skewpkg`, whose extension binds
`__nvJitLinkComplete_12_8@libnvJitLink.so.12`, beside nvidia-nvjitlink-cu12 12.1.105, which lacks it.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from fix_steps import offline_pip, pip_arguments
from index_server import make_wheel
from packaging.requirements import Requirement
from test_conda_env import EXT, HOST_570, TAG, build_nvjitlink, extension_source

from cudaresolve.checks.findings import Check
from cudaresolve.checks.fixes import PipInstall
from cudaresolve.commands.diagnosing import examine
from cudaresolve.env.interpreter import target_for_python
from cudaresolve.output.findings import shown


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> Path:
    """skewpkg 1.0 and nvidia-nvjitlink-cu12 12.1.105 and 12.8.93, as a --find-links directory."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    import sysconfig

    from conftest import ElfBuilder

    root = tmp_path_factory.mktemp("fixes")
    builder = ElfBuilder(root / "elf")
    found = root / "wheels"
    found.mkdir()

    def wheel(name: str, version: str, files: dict[str, Path], requires: tuple[str, ...] = ()) -> None:
        members = {member: path.read_bytes() for member, path in files.items()}
        package = next(iter(files)).split('/')[0]
        modules = sorted(member.split("/")[1].split(".")[0] for member in files if member.count("/") == 1)
        members[f"{package}/__init__.py"] = "".join(f"from . import {m}\n" for m in modules).encode()  # import-time
        filename, data = make_wheel(name, version, requires=requires, tag=TAG, files=members)
        (found / filename).write_bytes(data)

    stub = build_nvjitlink(builder, 12, 8, "stub")
    wheel("skewpkg", "1.0", {f"skewpkg/_ext{EXT}": builder.build(
        f"_ext{EXT}", extension_source("_ext", "__nvJitLinkComplete_12_8()"), link=[stub],
        rpath="$ORIGIN/../nvidia/nvjitlink/lib", directory="skewpkg", extra=["-I" + sysconfig.get_paths()["include"]])})
    for version, minor in (("12.1.105", 1), ("12.8.93", 8)):
        wheel("nvidia-nvjitlink-cu12", version,
              {"nvidia/nvjitlink/lib/libnvJitLink.so.12": build_nvjitlink(builder, 12, minor, f"nvjitlink-{minor}")})
    return found



def installed(python: Path) -> dict[str, str]:
    done = subprocess.run([str(python), "-m", "pip", "list", "--format=json", "--disable-pip-version-check",
                           "--isolated"], capture_output=True, text=True, check=True)
    return {row["name"]: row["version"] for row in json.loads(done.stdout) if row["name"] not in ("pip", "setuptools")}


def test_the_printed_fix_and_its_value_apply_the_same(wheels, tmp_path, venv_with_pip):
    template = venv_with_pip(tmp_path / "template")
    python = template / "bin" / "python"
    offline_pip(python, wheels, ["install", "--no-deps", "skewpkg==1.0", "nvidia-nvjitlink-cu12==12.1.105"])
    by_text, by_value = tmp_path / "by-text", tmp_path / "by-value"
    for copy in (by_text, by_value):
        shutil.copytree(template, copy, symlinks=True)

    def doctor(root: Path):
        return examine(target_for_python(str(root / "bin" / "python")), HOST_570,
                       {"CUDARESOLVE_CACHE_DIR": str(tmp_path / "cache")}).findings

    [skew] = [f for f in doctor(by_text) if f.check == Check.SYMBOL_SKEW]
    assert skew.fix == PipInstall((Requirement("nvidia-nvjitlink-cu12>=12.8"),))
    printed = shown(skew).fix
    assert printed == 'pip install "nvidia-nvjitlink-cu12>=12.8"'

    command = shlex.split(printed)  # what a person pastes into a shell
    assert command[0] == "pip"
    offline_pip(by_text / "bin" / "python", wheels, command[1:])
    for arguments in pip_arguments(skew.fix):
        offline_pip(by_value / "bin" / "python", wheels, arguments)

    assert installed(by_text / "bin" / "python") == installed(by_value / "bin" / "python") == {
        "nvidia-nvjitlink-cu12": "12.8.93", "skewpkg": "1.0"}
    for root in (by_text, by_value):
        assert [shown(f) for f in doctor(root) if f.severity == "error"] == []


def test_only_pip_steps_are_applied():
    from cudaresolve.checks.fixes import Alternatives, DriverUpgrade, Explained, PipUninstall, Steps, WheelsOfMajors
    from cudaresolve.versions import DriverRelease

    install = PipInstall((Requirement("b==2"),), replaces=("a",))
    steps = Steps((Explained(PipUninstall(("c",)), WheelsOfMajors((13,))), install))
    assert pip_arguments(Alternatives((steps, DriverUpgrade(DriverRelease.parse("580.65.06"))))) == [
        ["uninstall", "-y", "c"], ["uninstall", "-y", "a"], ["install", "b==2"]]
    with pytest.raises(ValueError, match="not a pip step"):
        pip_arguments(DriverUpgrade(DriverRelease.parse("580.65.06")))


def test_a_driver_upgrade_without_a_known_floor_names_no_version():
    """The tables may hold no floor for a build's CUDA major: the fix must not read ">= None"."""
    from cudaresolve.checks.fixes import DriverUpgrade
    from cudaresolve.output.fixes import render_fix
    from cudaresolve.versions import DriverRelease

    assert render_fix(DriverUpgrade(DriverRelease.parse("580.65.06"))) == "upgrade the driver to >= 580.65.06"
    assert "None" not in render_fix(DriverUpgrade(None))
