"""Native first for the whole set: the toolkit metapackage ranks like the components it pins, so the
CUDA 12 request `lock cupy cuda-cccl --driver 550.144.03 --gpu 8.6` (driver 550 is CUDA 12.4)
locks the CUDA 12.4 toolkit and its components, which the driver runs natively, not the newer 12.9
set it runs only by minor-version compatibility (the doctor warns about that); the explanation says
why the newer toolkits were passed over. On the fake CUDA index (cuda-toolkit 12.4.1, 12.6.3, 12.9.1)."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.version import Version

from cudaresolve.cli import main
from cudaresolve.knowledge import toolkit_pins
from cudaresolve.lockfile.pylock import read_pylock

pytestmark = pytest.mark.usefixtures("hermetic")


def lock(capsys, cuda_index, python: str, out: Path, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["lock", "-q", *argv, "--python", python, "--index-url", cuda_index.index_url,
                 "--torch-index-base", cuda_index.torch_index_base, "-o", str(out), "--explain"])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("driver, cuda", [("550.144.03", "12.4"), ("575.57.08", "12.9")])
def test_the_readme_example_locks_the_toolkit_set_the_driver_runs_natively(cuda_index, empty_python, tmp_path, capsys, driver, cuda):
    code, out, err = lock(capsys, cuda_index, empty_python, tmp_path / "pylock.toml", "cupy", "cuda-cccl",
                          "--driver", driver, "--gpu", "8.6")
    assert code == 0, err
    versions = {p.name: p.version for p in read_pylock(str(tmp_path / "pylock.toml")).packages}
    toolkit = toolkit_pins.metapackage()
    assert f"{versions[toolkit].major}.{versions[toolkit].minor}" == cuda
    pinned = {pin.partition("==")[0]: Version(pin.partition("==")[2])
              for release in toolkit_pins.load() if Version(release.version) == versions[toolkit] for pin in release.pins}
    assert {name for name in pinned if name in versions} >= {"nvidia-cublas-cu12", "nvidia-cuda-runtime-cu12", "nvidia-cuda-nvrtc-cu12"}
    assert all(versions[name] == version for name, version in pinned.items() if name in versions), versions
    passed_over = f"{toolkit} 12.9.1: CUDA 12.9 runs on driver {driver} only by minor-version compatibility"
    assert (passed_over in out) == (cuda == "12.4"), out
