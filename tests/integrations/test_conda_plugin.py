"""The conda plugin (cudaresolve/integrations/conda.py) inside the real conda 26.7.1.

conda runs as `python -m conda` from a cached venv (conftest.build_conda_venv), offline, with the
classic solver and a file:// channel built here. The machine has no GPU: hosts are recorded machines
(tests/fixtures/host, read by test_host_probe's recorded readers) handed to the conda process
through cudaresolve's stated-host variables, and conda's own `__cuda` through CONDA_OVERRIDE_CUDA.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Optional

import pytest
from test_host_probe import machine

from cudaresolve.commands.host_options import stated_by
from cudaresolve.host.facts import HostFacts
from cudaresolve.host.probe import host_for

pytestmark = pytest.mark.conda

# What a conda command may read from the calling environment: the rest is set here.
LEAKS = ("CONDA", "CUDARESOLVE_", "CUDA_VISIBLE_DEVICES", "UV_CUDA_DRIVER_VERSION", "PYTHON", "XDG_", "_CE_", "_CONDA")


def stated(facts: HostFacts) -> dict[str, str]:
    """A recorded host as the variables a conda process reads: cudaresolve's stated driver and
    visible GPUs, and conda's own `__cuda` from the same driver."""
    environ = {"CUDARESOLVE_GPUS": ",".join(str(gpu.compute_capability) for gpu in facts.visible_gpus)}
    if facts.driver.release:
        environ["CUDARESOLVE_DRIVER"] = str(facts.driver.release)
    if facts.driver.cuda:
        environ["CONDA_OVERRIDE_CUDA"] = str(facts.driver.cuda)
    return environ


MIXED = machine(nvml="nvml/570.86.15-titanv-rtx5880.json")  # TITAN V 7.0, RTX 5880 Ada 8.9
HIDE_TITAN = {"CUDA_VISIBLE_DEVICES": "GPU-7518f6b0-991f-ce2b-3d37-c779130d3137"}


def recorded(readers, environ: Optional[dict] = None) -> dict[str, str]:
    return stated(host_for(overrides=stated_by(environ or {}), readers=readers, environ=environ or {}))


def make_package(channel: Path, name: str, subdir: str, depends: tuple[str, ...] = ()) -> None:
    """A conda package (.tar.bz2: info/index.json, info/paths.json, info/files, one file) in
    `channel`/`subdir`, as the vendor README's recipe makes them."""
    files = {f"share/{name}/{name}.txt": f"{name} 1.0\n"}
    index = {"name": name, "version": "1.0", "build": "h0_0", "build_number": 0, "depends": list(depends),
             "license": "BSD-3-Clause", "subdir": subdir, "timestamp": 1760000000000}
    if subdir == "noarch":
        index["noarch"] = "generic"
    paths = {"paths_version": 1, "paths": [
        {"_path": path, "path_type": "hardlink", "sha256": hashlib.sha256(text.encode()).hexdigest(),
         "size_in_bytes": len(text.encode())} for path, text in files.items()]}
    members = {"info/index.json": json.dumps(index), "info/paths.json": json.dumps(paths),
               "info/files": "\n".join(files) + "\n", **files}
    (channel / subdir).mkdir(parents=True, exist_ok=True)
    with tarfile.open(channel / subdir / f"{name}-1.0-h0_0.tar.bz2", "w:bz2") as tf:
        for path, text in members.items():
            data = text.encode()
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(data), 0o644
            tf.addfile(info, io.BytesIO(data))


class Conda:
    """`python -m conda` of the cached venv, isolated: its own HOME, caches and package dirs."""

    def __init__(self, venv: Path, root: Path):
        self.python = str(venv / "bin" / "python")
        self.root = root
        self.environ = {key: value for key, value in os.environ.items() if not key.startswith(LEAKS)}
        self.environ.update({
            "HOME": str(root / "home"),
            "CUDARESOLVE_CACHE_DIR": str(root / "cudaresolve-cache"),
            "CONDA_SOLVER": "classic",
            "CONDA_OFFLINE": "true",
            "CONDA_PKGS_DIRS": str(root / "pkgs"),
            "CONDA_ENVS_DIRS": str(root / "envs"),
            "CONDA_NOTIFY_OUTDATED_CONDA": "false",
            "CONDA_AUTO_UPDATE_CONDA": "false",
            "CONDA_NUMBER_CHANNEL_NOTICES": "0",
            "CONDA_REGISTER_ENVS": "false",
            "CONDA_ALWAYS_YES": "true",
            "PYTHONNOUSERSITE": "1",
        })
        self.channel = root / "channel"
        make_package(self.channel, "libdemo", "linux-64")
        make_package(self.channel, "hello", "noarch", ("libdemo >=1.0",))
        make_package(self.channel, "needs-sm90", "noarch", ("__cuda_arch >=9.0",))
        subprocess.run([self.python, "-m", "conda_index", str(self.channel)], check=True, capture_output=True)

    def __call__(self, *args: str, **environ: str) -> subprocess.CompletedProcess:
        channel = ("--override-channels", "-c", self.channel.as_uri()) if args[0] in ("create", "install") else ()
        return subprocess.run(
            [self.python, "-m", "conda", *args, *channel],
            env={**self.environ, **environ},
            capture_output=True,
            text=True,
            timeout=300,
        )

    def virtual_packages(self, **environ: str) -> dict[str, tuple[str, str]]:
        done = self("info", "--json", **environ)
        assert done.returncode == 0, done.stderr
        return {name: (version, build) for name, version, build in json.loads(done.stdout)["virtual_pkgs"]}


@pytest.fixture(scope="module")
def conda(conda_venv, tmp_path_factory):
    return Conda(conda_venv, tmp_path_factory.mktemp("conda"))


@pytest.fixture(scope="module")
def prefix(conda):
    """A real conda prefix from the channel, with a Python in it (a venv laid over it: the channel
    has no python package), so the doctor has an environment to read."""
    path = conda.root / "envs" / "withpython"
    done = conda("create", "-p", str(path), "libdemo")
    assert done.returncode == 0, done.stderr
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    assert (path / "conda-meta").is_dir() and (path / "bin" / "python").exists()
    return path


@pytest.mark.parametrize(
    "host, environ, expected",
    [
        pytest.param(recorded(MIXED), {}, "7.0", id="mixed-gpus-lowest"),
        pytest.param(recorded(MIXED, HIDE_TITAN), {}, "8.9", id="hidden-gpu-does-not-count"),
        pytest.param(recorded(machine(nvml="nvml/535.216.01-a100-mig.json")), {}, "8.0", id="a100-mig"),
        pytest.param(recorded(MIXED), {"CONDA_OVERRIDE_CUDA_ARCH": "9.0"}, "9.0", id="override"),
        pytest.param(
            recorded(MIXED), {"CONDA_OVERRIDE_CUDA_ARCH": "9.0", "CUDARESOLVE_GPUS": "8.6"}, "9.0",
            id="conda-override-beats-cudaresolve-gpus",
        ),
        pytest.param(recorded(MIXED), {"CONDA_OVERRIDE_CUDA_ARCH": ""}, None, id="empty-override"),
        pytest.param(recorded(MIXED), {"CONDA_OVERRIDE_CUDA": ""}, None, id="no-cuda-no-arch"),
        pytest.param(recorded(machine(libcuda="libcuda/no-device.json")), {}, None, id="driver-without-devices"),
        pytest.param({}, {"CONDA_OVERRIDE_CUDA_ARCH": "9.0"}, None, id="override-without-driver"),
    ],
)
def test_info_shows_cuda_arch(conda, host, environ, expected):
    packages = conda.virtual_packages(**{**host, **environ})
    assert packages.get("__cuda_arch") == (None if expected is None else (expected, "0"))
    assert ("__cuda" in packages) == ("CONDA_OVERRIDE_CUDA" in host and environ.get("CONDA_OVERRIDE_CUDA") != "")


@pytest.mark.parametrize("gpus, solves", [("8.6", False), ("9.0", True), ("9.0,8.6", False)])
def test_a_package_needing_cuda_arch_9_solves_only_where_every_gpu_has_it(conda, tmp_path, gpus, solves):
    done = conda(
        "create", "-p", str(tmp_path / "env"), "--dry-run", "--json", "needs-sm90",
        CUDARESOLVE_GPUS=gpus, CONDA_OVERRIDE_CUDA="12.4",
    )
    if solves:
        assert done.returncode == 0, done.stdout + done.stderr
        assert [p["name"] for p in json.loads(done.stdout)["actions"]["LINK"]] == ["needs-sm90"]
    else:
        assert done.returncode != 0
        assert "__cuda_arch" in done.stdout and ">=9.0" in done.stdout


def test_another_provider_of_cuda_arch_makes_ours_step_aside(conda, tmp_path):
    """A second plugin yielding `cuda_arch` (as nvidia-virtual-packages does): conda fails every
    command when two do, so ours yields nothing and the other's value is the one conda sees."""
    source = tmp_path / "src"
    (source / "other_arch").mkdir(parents=True)
    (source / "other_arch" / "__init__.py").write_text(
        "from conda import plugins\n\n\n"
        "@plugins.hookimpl\n"
        "def conda_virtual_packages():\n"
        "    yield plugins.CondaVirtualPackage(name='cuda_arch', version='5.0', build=None)\n"
    )
    (source / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=64"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "other-arch"\nversion = "1.0"\n'
        '[project.entry-points.conda]\nother-arch = "other_arch"\n'
    )
    site = tmp_path / "site"
    subprocess.run(
        [conda.python, "-m", "pip", "install", "-q", "--no-deps", "--disable-pip-version-check", "--target", str(site), str(source)],
        check=True, capture_output=True,
    )
    host = {**recorded(MIXED), "PYTHONPATH": str(site)}
    assert conda.virtual_packages(**host)["__cuda_arch"] == ("5.0", "0")
    done = conda("create", "-p", str(tmp_path / "env"), "--dry-run", "--json", "needs-sm90", **host)
    assert done.returncode != 0 and "Conflicting plugins" not in done.stdout + done.stderr
    assert "__cuda_arch" in done.stdout


def test_conda_cudaresolve_doctor_on_a_prefix(conda, prefix):
    host = recorded(MIXED)
    done = conda("cudaresolve", "doctor", "-p", str(prefix), **host)
    assert done.returncode == 0, done.stderr
    assert f"env:  {prefix}/bin/python" in done.stdout
    assert "host: 570.86.15 (CUDA 12.8); GPU (7.0), GPU (8.9)" in done.stdout
    active = conda("cudaresolve", "doctor", "--json", CONDA_PREFIX=str(prefix), **host)
    assert active.returncode == 0, active.stderr
    assert json.loads(active.stdout)["environment"]["python"] == f"{prefix}/bin/python"


def test_the_doctor_runs_after_conda_install_and_in_conda_doctor(conda, prefix):
    done = conda("install", "-p", str(prefix), "hello", **recorded(MIXED))
    assert done.returncode == 0, done.stderr
    assert "cudaresolve doctor after conda install:" in done.stdout
    assert f"env:  {prefix}/bin/python" in done.stdout
    health = conda("doctor", "-p", str(prefix), **recorded(MIXED))
    assert health.returncode == 0, health.stderr
    assert f"env:  {prefix}/bin/python" in health.stdout


def test_a_probe_that_raises_is_one_warning_and_conda_install_still_succeeds(conda, prefix):
    done = conda("install", "-p", str(prefix), "needs-sm90", "--dry-run", CUDARESOLVE_GPUS="bogus", CONDA_OVERRIDE_CUDA="12.4")
    assert "Traceback" not in done.stderr
    assert [line for line in done.stderr.splitlines() if "cudaresolve" in line] == [
        "cudaresolve: warning: cannot read the host, so no __cuda_arch and no doctor: "
        "CUDARESOLVE_GPUS: 'bogus' is not a compute capability (expected e.g. 8.6)"
    ]
    done = conda("install", "-p", str(prefix), "libdemo", "--force-reinstall", CUDARESOLVE_GPUS="bogus")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "cudaresolve doctor after" not in done.stdout
    assert sum("cudaresolve: warning" in line for line in done.stderr.splitlines()) == 1
