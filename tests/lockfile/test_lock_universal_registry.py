"""Issue 28's acceptance on the registry: `lock cupy cuda-cccl` for an x86_64 H100 host and an aarch64
GH200 host, Pythons 3.10 to 3.13, is one pylock.toml that two other readers take per target: uv
installs it (a dry run with `--python-platform` and `--python-version` for each machine x Python), and
packaging's own pylock selection picks, per target, exactly the releases a lock for that target alone
gives. The lock's cache is kept in the test cache, so metadata is read once, not per run.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import tomllib
from conftest import registry_python
from packaging import tags
from packaging.pylock import Pylock
from wheel_cache import cache_dir

from cudaresolve.cli import main
from cudaresolve.lockfile.pylock import read_pylock

PYTHONS = ("3.10", "3.11", "3.12", "3.13")
MACHINES = {"h100": ("x86_64", "9.0"), "gh200": ("aarch64", "9.0")}
GLIBC = (2, 35)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory, uv, venv_with_pip) -> dict:
    """The universal lock's path, the host files, the target's pip and the uv binary."""
    root = tmp_path_factory.mktemp("fleet")
    python = registry_python(venv_with_pip(root / "target"), "cupy-cuda12x")  # its pip names the default index
    return {"root": root, "python": python, "uv": uv}


def host_file(root: Path, name: str, capsys) -> str:
    machine, cc = MACHINES[name]
    assert main(["probe", "--json", "--driver", "570.124.06", "--gpu", cc]) == 0
    facts = json.loads(capsys.readouterr().out)
    facts.update(machine=machine, glibc="%d.%d" % GLIBC)
    path = root / f"{name}.json"
    path.write_text(json.dumps(facts))
    return str(path)


def lock(fleet: dict, out: Path, *args: str, capsys) -> dict[str, str]:
    out.parent.mkdir(parents=True, exist_ok=True)
    code = main(["lock", "cupy", "cuda-cccl", "-q", "--python", fleet["python"], "-o", str(out), *args])
    assert code == 0, capsys.readouterr().err
    capsys.readouterr()
    return {str(p.name): str(p.version) for p in read_pylock(str(out)).packages}


def target_tags(machine: str, python: str) -> list[tags.Tag]:
    """CPython tags of a glibc 2.35 host of `machine`, as pip computes them there."""
    major, minor = (int(part) for part in python.split("."))
    platforms = [f"manylinux_2_{m}_{machine}" for m in range(GLIBC[1], 4, -1)]
    platforms += [f"{legacy}_{machine}" for legacy in ("manylinux2014", "manylinux2010", "manylinux1")] + ["linux_" + machine]
    return [*tags.cpython_tags((major, minor), platforms=platforms), *tags.compatible_tags((major, minor), f"cp{major}{minor}", platforms)]


@pytest.mark.registry
@pytest.mark.usefixtures("hermetic")
def test_a_universal_lock_is_per_target_what_each_target_locks_alone(fleet, capsys, monkeypatch):
    monkeypatch.setenv("CUDARESOLVE_CACHE_DIR", str(cache_dir() / "lock-registry-cache"))
    root: Path = fleet["root"]
    hosts = {name: host_file(root, name, capsys) for name in MACHINES}
    universal = root / "universal" / "pylock.toml"
    lock(fleet, universal, *[f for path in hosts.values() for f in ("--host", path)],
         *[f for python in PYTHONS for f in ("--python-version", python)], capsys=capsys)
    document = Pylock.from_dict(tomllib.loads(universal.read_text()))  # packaging validates it
    assert len(document.environments or ()) == 8
    for name, (machine, _) in MACHINES.items():
        for python in PYTHONS:
            alone = lock(fleet, root / f"{name}-{python}" / "pylock.toml", "--host", hosts[name], "--python-version", python,
                         capsys=capsys)
            environment = {"platform_machine": machine, "python_version": python, "python_full_version": python + ".0",
                           "sys_platform": "linux", "platform_system": "Linux", "os_name": "posix",
                           "implementation_name": "cpython", "platform_python_implementation": "CPython"}
            picked = {str(p.name): str(p.version) for p, _ in document.select(environment=environment, tags=target_tags(machine, python))}
            assert picked == alone, (machine, python)
            assert "cupy-cuda12x" in picked and "cuda-cccl" in picked
            dry = subprocess.run(
                [str(fleet["uv"]), "pip", "install", "--dry-run", "--preview-features", "pylock", "--python-platform",
                 f"{machine}-manylinux_2_35", "--python-version", python, "--target", str(root / f"uv-{machine}-{python}"),
                 "-r", str(universal)],
                capture_output=True, text=True,
            )
            assert dry.returncode == 0, dry.stderr
            assert f"Would install {len(picked)} packages" in dry.stderr, dry.stderr
