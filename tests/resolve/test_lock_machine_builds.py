"""Issue 28: builds that are CPU-only on a machine (the registry's aarch64 torch up to 2.10 has no
libtorch_cuda.so) are known from the wheel's members, so a GPU host of that machine never gets one
called CUDA; and a Jetson (tegra) host is refused the server-Arm (SBSA) CUDA wheels, with the route
that works. Through `cudaresolve lock` against small local indexes on 127.0.0.1."""

from __future__ import annotations

import io
import json
import os
import urllib.request
import zipfile
from pathlib import Path

import pytest
from index_server import make_wheel

from cudaresolve.cli import main
from cudaresolve.lockfile.pylock import read_pylock
from cudaresolve.versions import CudaVersion, DriverRelease

pytestmark = pytest.mark.usefixtures("hermetic")

AARCH64 = "cp311-cp311-manylinux_2_28_aarch64"
X86_64 = "cp311-cp311-manylinux_2_28_x86_64"
CUDA_MEMBER = "torch/lib/libtorch_cuda.so"


def host_file(tmp_path: Path, machine: str, *, tegra: bool = False, name: str = "host") -> Path:
    """A GPU host of `machine`: GH200-like (driver 570, one 9.0 GPU), or an Orin when `tegra`."""
    gpu = {"compute_capability": "8.7" if tegra else "9.0", "name": "Orin" if tegra else "NVIDIA GH200 480GB"}
    facts = {"schema": 1, "system": "Linux", "machine": machine, "glibc": "2.35", "tegra": tegra,
             "driver": {"release": "540.4.0" if tegra else "570.124.06", "cuda": "12.6" if tegra else "12.8"},
             "gpus": [gpu]}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(facts))
    return path


def torch_wheel(version: str, tag: str, *, cuda: bool) -> tuple[str, bytes]:
    files = {"torch/__init__.py": b""}
    if cuda:
        files[CUDA_MEMBER] = b"\x7fELF"
    return make_wheel("torch", version, tag=tag, files=files)


def run(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["lock", "-q", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def lock(capsys, server, tmp_path, host: Path, *extra: str, platform: str = "manylinux_2_28_aarch64") -> tuple[int, str, str]:
    """`lock ... --host HOST` against `server` (its /simple and its PyTorch-style /whl/<variant>)."""
    server.start()
    options = ["--platform", platform] if platform else []
    return run(capsys, *extra, "--host", str(host), *options, "--index-url", server.url + "/simple",
               "--torch-index-base", server.url, "-o", str(tmp_path / "pylock.toml"), "--explain")


def locked_torch_members(path: Path) -> tuple[str, list[str]]:
    """The locked torch's version and its wheel's member list, read from the wheel the lock names."""
    [package] = [p for p in read_pylock(str(path)).packages if p.name == "torch"]
    [wheel] = package.wheels
    with urllib.request.urlopen(wheel.url) as reply:
        members = zipfile.ZipFile(io.BytesIO(reply.read())).namelist()
    return str(package.version), members


# -- acceptance: an aarch64 GPU host never gets a CPU-only torch called CUDA --------------------------


def test_aarch64_gpu_host_refuses_the_cpu_only_default_build(server, tmp_path, capsys):
    """The registry's aarch64 torch 2.10.0 holds no libtorch_cuda.so: before, it was locked as "built
    with CUDA 12.8" (exit 0); now it is set aside from its members and, with nothing else, exit 2."""
    server.add(*torch_wheel("2.10.0", AARCH64, cuda=False))
    code, out, err = lock(capsys, server, tmp_path, host_file(tmp_path, "aarch64"), "torch")
    assert code == 2, out + err
    assert ("torch 2.10.0: a CPU-only build for aarch64 (its wheel has no torch/lib/libtorch_cuda.so); the host has a GPU"
            in err), err
    assert "built with CUDA" not in out + err
    assert not (tmp_path / "pylock.toml").exists()


def test_aarch64_gpu_host_takes_the_variant_index_cuda_build(server, tmp_path, capsys):
    server.add(*torch_wheel("2.10.0", AARCH64, cuda=False))
    server.add(*torch_wheel("2.10.0+cu128", AARCH64, cuda=True), root="whl/cu128")
    code, out, err = lock(capsys, server, tmp_path, host_file(tmp_path, "aarch64"), "torch")
    assert code == 0, out + err
    version, members = locked_torch_members(tmp_path / "pylock.toml")
    assert version == "2.10.0+cu128" and CUDA_MEMBER in members
    assert "torch 2.10.0: a CPU-only build for aarch64" in out  # --explain names the build set aside
    capsys.readouterr()
    assert main(["why", "torch", "--lock", str(tmp_path / "pylock.toml")]) == 0  # the record read back, validated
    assert "torch 2.10.0: a CPU-only build for aarch64 (its wheel has no torch/lib/libtorch_cuda.so)" in capsys.readouterr().out
    text = (tmp_path / "pylock.toml").read_text()
    assert 'rule = "cpu-only"' in text and 'machine = "aarch64"' in text and 'missing = "torch/lib/libtorch_cuda.so"' in text


def test_aarch64_default_build_holding_cuda_is_a_cuda_build(server, tmp_path, capsys):
    """The members decide, not the version: a default aarch64 build that holds libtorch_cuda.so is the
    release's CUDA build (the registry's 2.11.0 ... 2.15.0 do)."""
    server.add(*torch_wheel("2.10.0", AARCH64, cuda=True))
    code, out, err = lock(capsys, server, tmp_path, host_file(tmp_path, "aarch64"), "torch")
    assert code == 0, out + err
    version, members = locked_torch_members(tmp_path / "pylock.toml")
    assert version == "2.10.0" and CUDA_MEMBER in members
    assert "torch 2.10.0 is the PyPI build, built with CUDA 12.8" in out


def test_aarch64_cpu_build_when_asked_is_not_called_cuda(server, tmp_path, capsys):
    server.add(*torch_wheel("2.10.0", AARCH64, cuda=False))
    code, out, err = lock(capsys, server, tmp_path, host_file(tmp_path, "aarch64"), "torch", "--cpu")
    assert code == 0, out + err
    version, members = locked_torch_members(tmp_path / "pylock.toml")
    assert version == "2.10.0" and CUDA_MEMBER not in members
    assert "CUDA 12.8" not in out and "CUDA 12.8" not in (tmp_path / "pylock.toml").read_text()


@pytest.mark.parametrize("holds_cuda", [False, True])
def test_installed_aarch64_torch_is_judged_by_its_record(server, tmp_path, holds_cuda):
    """An installed default-build torch on an aarch64 target is CPU-only when its RECORD lacks
    libtorch_cuda.so: not kept for a GPU host, and never called CUDA."""
    from packaging.version import Version

    from cudaresolve.env.distributions import Distribution
    from cudaresolve.env.interpreter import running_target
    from cudaresolve.host.facts import HostFacts
    from cudaresolve.index.access import open_index
    from cudaresolve.index.config import IndexSettings, index_config
    from cudaresolve.resolve.candidates import CandidateFinder
    from cudaresolve.resolve.reasons import CpuOnly

    server.start()
    site = "/venv/lib/python3.11/site-packages"
    files = [f"{site}/torch/__init__.py"] + ([f"{site}/{CUDA_MEMBER}"] if holds_cuda else [])
    installed = Distribution("torch", Version("2.10.0"), (), "pip", f"{site}/torch-2.10.0.dist-info", tuple(files))
    host = HostFacts.from_json(host_file(tmp_path, "aarch64").read_text())
    target = running_target()
    config = index_config(target.python, target.prefix, os.environ, None, IndexSettings(index_url=server.url + "/simple",
                                                                                         torch_index_base=server.url))
    with open_index(config, target, os.environ) as index:
        finder = CandidateFinder(index, [("gh200", host)], {"torch": installed}, upgrade=False, machine="aarch64")
        found = finder.all_candidates("torch")
    if holds_cuda:
        [kept] = found
        assert kept.installed is installed and kept.build is not None and str(kept.build.cuda) == "12.8"
    else:
        assert found == ()
        [rejection] = finder.rejected("torch")
        assert rejection.installed and rejection.evidence == CpuOnly("", "aarch64", CUDA_MEMBER)


@pytest.mark.parametrize("holds_cuda", [False, True])
def test_the_doctor_says_an_installed_aarch64_cpu_only_torch_is_cpu_only(tmp_path, holds_cuda):
    """The doctor reads an installed torch as the lock reads its wheel: a default aarch64 build whose
    RECORD lacks libtorch_cuda.so is CPU-only: a warning saying so on a GPU host, and never "built
    with CUDA 12.8" (before: a driver-floor warning naming CUDA 12.8 on driver 535)."""
    import dataclasses

    from test_env_distributions import make_dist_info

    from cudaresolve.binary.loader import for_machine
    from cudaresolve.checks import judge
    from cudaresolve.env.interpreter import Target
    from cudaresolve.env.scan import scan_environment
    from cudaresolve.host.facts import HostFacts
    from cudaresolve.output.findings import shown

    site = tmp_path / "lib" / "python3.11" / "site-packages"
    members = ["torch/__init__.py", "torch/lib/libtorch_cpu.so"] + ([CUDA_MEMBER] if holds_cuda else [])
    make_dist_info(site, "torch", "2.10.0", files=tuple(members))
    (site / "torch").mkdir()
    (site / "torch" / "__init__.py").write_text("")
    env = scan_environment(Target(site_packages=(str(site),)), facts_for=lambda path: pytest.fail(f"read {path}"),
                           loader=for_machine("aarch64"))
    host = HostFacts.from_json(host_file(tmp_path, "aarch64").read_text())
    host = dataclasses.replace(host, driver=dataclasses.replace(host.driver, release=DriverRelease.parse("535.104.05"),
                                                                cuda=CudaVersion(12, 2)))
    texts = [shown(f) for f in judge(env, host).findings]
    if holds_cuda:
        assert [(t.check, t.subject) for t in texts] == [("driver-floor", "torch 2.10.0")]
        assert "torch 2.10.0 is the PyPI build, built with CUDA 12.8" in texts[0].evidence
    else:
        assert [(t.check, t.severity, t.subject, t.message) for t in texts] == [
            ("environment", "warning", "torch 2.10.0",
             "a CPU-only build for aarch64 (its wheel has no torch/lib/libtorch_cuda.so): it does not use the host's GPU")]
        assert not any("CUDA 12.8" in " ".join(t.evidence) for t in texts)


def test_x86_64_gpu_host_keeps_the_release_table(server, tmp_path, capsys):
    """x86_64 is unchanged: the release rows describe its default builds, so its wheel's members are
    not read (this fake wheel lacks the member, the registry's never do)."""
    server.add(*torch_wheel("2.10.0", X86_64, cuda=False))
    server.add(*torch_wheel("2.10.0", AARCH64, cuda=False))
    code, out, err = lock(capsys, server, tmp_path, host_file(tmp_path, "x86_64"), "torch", platform="")
    assert code == 0, out + err
    assert "torch==2.10.0  torch 2.10.0 is the PyPI build, built with CUDA 12.8" in out
    [package] = read_pylock(str(tmp_path / "pylock.toml")).packages
    assert [w.filename for w in package.wheels] == [f"torch-2.10.0-{X86_64}.whl"]


# -- Jetson: server-Arm CUDA wheels refused, with the route that works -----------------------------


@pytest.mark.parametrize("wheel, asked", [
    (("cupy-cuda12x", "13.6.0", AARCH64), "cupy-cuda12x"),
    (("nvidia-cublas-cu12", "12.8.4.1", "py3-none-manylinux_2_27_aarch64"), "nvidia-cublas-cu12"),
    (("torch", "2.10.0+cu128", AARCH64), "torch"),
])
def test_tegra_host_is_refused_sbsa_cuda_wheels_with_the_jetpack_route(server, tmp_path, capsys, wheel, asked):
    name, version, tag = wheel
    files = {CUDA_MEMBER: b"\x7fELF"} if name == "torch" else {}
    server.add(*make_wheel(name, version, tag=tag, files=files), root="whl/cu128" if name == "torch" else "simple")
    code, out, err = lock(capsys, server, tmp_path, host_file(tmp_path, "aarch64", tegra=True), asked)
    assert code == 2, out + err
    assert err.strip().replace("\n  ", " ") == (  # a refusal's long line wraps at spaces
        f"cudaresolve: error: nothing fits {asked}; {name} {version}: a server-Arm (SBSA) CUDA build; the host is a "
        "Jetson (tegra), which runs the CUDA of its JetPack release: install the JetPack wheels NVIDIA publishes for "
        "your JetPack release"), err
    assert not (tmp_path / "pylock.toml").exists()


def test_tegra_refusal_names_the_route_once_for_every_release(server, tmp_path, capsys):
    for version in ("12.6.4.1", "12.8.4.1", "12.9.1.4"):
        server.add(*make_wheel("nvidia-cublas-cu12", version, tag="py3-none-manylinux_2_27_aarch64"))
    code, out, err = lock(capsys, server, tmp_path, host_file(tmp_path, "aarch64", tegra=True), "nvidia-cublas-cu12")
    assert code == 2, out + err
    assert "nvidia-cublas-cu12 12.9.1.4, 12.8.4.1 and 1 more: a server-Arm (SBSA) CUDA build;" in err, err
    assert err.count("Jetson (tegra)") == 1, err


def test_lock_check_refuses_a_locked_sbsa_build_for_a_tegra_host(server, tmp_path, capsys):
    """A lock made for a GH200 holds CuPy's SBSA wheel; `--check` for a Jetson says it does not fit."""
    server.add(*make_wheel("cupy-cuda12x", "13.6.0", tag=AARCH64))
    code, out, err = lock(capsys, server, tmp_path, host_file(tmp_path, "aarch64"), "cupy-cuda12x")
    assert code == 0, out + err
    capsys.readouterr()
    code = main(["lock", "--check", str(tmp_path / "pylock.toml"), "--host", str(host_file(tmp_path, "aarch64", tegra=True, name="orin"))])
    checked = capsys.readouterr()
    assert code == 2, checked
    assert "cupy-cuda12x 13.6.0: a server-Arm (SBSA) CUDA build; the host is a Jetson (tegra)" in checked.out + checked.err


def test_tegra_host_keeps_packages_that_are_not_sbsa_cuda_builds(server, tmp_path, capsys):
    server.add(*make_wheel("numpy", "2.2.0", tag=AARCH64))
    code, out, err = lock(capsys, server, tmp_path, host_file(tmp_path, "aarch64", tegra=True), "numpy")
    assert code == 0, out + err


# -- the real registry: which aarch64 torch wheels hold CUDA -----------------------------------------


@pytest.mark.registry
def test_registry_aarch64_torch_members_by_range_reads(tmp_path):
    """torch 2.10.0's aarch64 wheel on the registry holds no libtorch_cuda.so, 2.11.0's does; read
    from each wheel's zip directory (its ~13,000 names: about 2 MB of a 146 MB wheel), never the whole wheel."""
    from cudaresolve.env.interpreter import running_target
    from cudaresolve.index.access import open_index
    from cudaresolve.index.config import IndexSettings, index_config
    from cudaresolve.index.http import IndexAccessError
    from cudaresolve.knowledge import torch as torch_data

    target = running_target()
    environ = {**os.environ, "CUDARESOLVE_CACHE_DIR": str(tmp_path / "cache")}
    config = index_config(target.python, target.prefix, environ, None, IndexSettings(), site_packages=target.site_packages)
    with open_index(config, target, environ) as index:
        try:
            files = index.files("torch")
        except IndexAccessError as exc:
            pytest.skip(f"the registry is not reachable: {exc}")
        held = {}
        for version in ("2.10.0", "2.11.0"):
            [file] = [f for f in files if str(f.version) == version and f.filename.endswith(f"-{AARCH64}.whl")]
            before = index.http.bytes_received
            held[version] = torch_data.cuda_member() in index.members(file)
            assert index.http.bytes_received - before < 0.03 * (file.size or 0)
    assert held == {"2.10.0": False, "2.11.0": True}
