"""Issue 24: on a GPU host a CUDA-capable family resolves to a build that uses the GPU (a CPU-only
build only when asked), and extras are part of the candidate (a release lacking a requested extra
does not satisfy it). Through `cudaresolve lock` against the fake CUDA index and small local indexes."""

from __future__ import annotations

from pathlib import Path

import pytest
from index_server import make_wheel
from packaging.version import Version

from cudaresolve.cli import main
from cudaresolve.knowledge import torch as torch_data

RTX_4090 = ("--driver", "550.144.03", "--gpu", "8.9")

pytestmark = pytest.mark.usefixtures("hermetic")


def newest_torch() -> str:
    return torch_data.load().releases[-1].versions[-1]


@pytest.fixture
def cpu_find_links(tmp_path) -> Path:
    """A find-links directory holding only a CPU-only torch of the newest release data/ knows."""
    links = tmp_path / "links"
    links.mkdir()
    filename, data = make_wheel("torch", f"{newest_torch()}+cpu", tag="py3-none-any")
    (links / filename).write_bytes(data)
    return links


def run(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["lock", "-q", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def locked_versions(path: Path) -> dict[str, str]:
    from cudaresolve.lockfile.pylock import read_pylock

    return {p.name: str(p.version) for p in read_pylock(str(path)).packages}


# -- CUDA builds for a GPU host ------------------------------------------------------------------


def test_gpu_host_with_the_variant_index_missing_takes_the_main_index_cuda_build_not_cpu(
    cuda_index, empty_python, cpu_find_links, tmp_path, capsys
):
    """The acceptance case: the PyTorch variant index serves nothing (its base lacks whl/), a +cpu
    torch newer than every CUDA build that runs here sits in find-links; the main index's CUDA build
    that runs on driver 550 is locked, and the +cpu wheel is set aside as a CPU-only build."""
    code, out, err = run(
        capsys, "torch", *RTX_4090, "--python", empty_python, "--index-url", cuda_index.index_url,
        "--torch-index-base", cuda_index.torch_index_base + "/nowhere", "--find-links", str(cpu_find_links),
        "-o", str(tmp_path / "pylock.toml"), "--explain",
    )
    assert code == 0, err
    version = Version(locked_versions(tmp_path / "pylock.toml")["torch"])
    assert version.local is None and version.public == "2.8.0", version  # the PyPI build of 2.8.0 is CUDA 12.8
    assert f"torch {newest_torch()}+cpu: a CPU-only build; the host has a GPU (taken only for an exact pin of it or --cpu)" in out


def test_gpu_host_with_only_a_cpu_build_that_fits_is_exit_2_naming_it(
    cuda_index, empty_python, cpu_find_links, tmp_path, capsys
):
    code, out, err = run(
        capsys, f"torch=={newest_torch()}", *RTX_4090, "--python", empty_python, "--index-url", cuda_index.index_url,
        "--torch-index-base", cuda_index.torch_index_base + "/nowhere", "--find-links", str(cpu_find_links),
        "-o", str(tmp_path / "pylock.toml"),
    )
    assert code == 2, err
    assert f"torch {newest_torch()}+cpu: a CPU-only build; the host has a GPU" in err
    assert not (tmp_path / "pylock.toml").exists()


def test_an_unreachable_variant_index_is_exit_3_naming_it(cuda_index, empty_python, cpu_find_links, tmp_path, capsys):
    unreachable = "http://127.0.0.1:9"  # the discard port: nothing listens
    code, out, err = run(
        capsys, "torch", *RTX_4090, "--python", empty_python, "--index-url", cuda_index.index_url,
        "--torch-index-base", unreachable, "--find-links", str(cpu_find_links), "-o", str(tmp_path / "pylock.toml"),
        "--retries", "0",
    )
    assert code == 3, err
    # every variant index that failed is named, in one line with the setting that moves them
    listed = torch_data.index_path("{" + ",".join(torch_data.variant_names()) + "}")
    assert f"{unreachable}/{listed}/torch/" in err and "--torch-index-base" in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "pylock.toml").exists()


@pytest.mark.parametrize("how", ["pin", "constraint", "flag"])
def test_a_cpu_build_when_asked(cuda_index, empty_python, cpu_find_links, tmp_path, capsys, how):
    constraints = tmp_path / "constraints.txt"
    constraints.write_text(f"torch=={newest_torch()}+cpu\n")
    asked = {"pin": [f"torch=={newest_torch()}+cpu"], "constraint": ["torch", "-c", str(constraints)],
             "flag": ["torch", "--cpu"]}[how]
    code, out, err = run(
        capsys, *asked, *RTX_4090, "--python", empty_python, "--index-url", cuda_index.index_url,
        "--torch-index-base", cuda_index.torch_index_base + "/nowhere", "--find-links", str(cpu_find_links),
        "-o", str(tmp_path / "pylock.toml"),
    )
    assert code == 0, err
    assert locked_versions(tmp_path / "pylock.toml")["torch"] == f"{newest_torch()}+cpu"


def test_no_gpu_known_keeps_cpu_builds(cuda_index, empty_python, cpu_find_links, tmp_path, capsys):
    """No driver and no GPU known: nothing to use, so a CPU-only build is not set aside."""
    code, out, err = run(
        capsys, "torch", "--python", empty_python, "--index-url", cuda_index.index_url,
        "--torch-index-base", cuda_index.torch_index_base + "/nowhere", "--find-links", str(cpu_find_links),
        "-o", str(tmp_path / "pylock.toml"),
    )
    assert code == 0, err


def test_the_new_evidence_reads_back_from_a_lock_file():
    from cudaresolve.lockfile.reasons import checked_rejection, rejection_table
    from cudaresolve.output.lock_words import rejection_line
    from cudaresolve.resolve.reasons import CandidateRef, CpuOnly, NoExtra, Rejection

    cpu = Rejection(CandidateRef("torch", Version("2.15.0+cpu")), CpuOnly("cpu"))
    extra = Rejection(CandidateRef("jax", Version("0.4.1")), NoExtra("cuda12"))
    assert rejection_table(cpu) == {"version": "2.15.0+cpu", "rule": "cpu-only", "evidence": {"label": "cpu"}}
    assert checked_rejection(cpu) == cpu and checked_rejection(extra) == extra
    assert rejection_line(extra) == "jax 0.4.1: has no extra [cuda12]"


# -- extras are part of the candidate ------------------------------------------------------------

# A jax-like package beside a torch-like pin: torchish 1.0 pins the shared library at 1.0; jaxish
# 0.6.0's CUDA plugin needs 2.0; 0.5.1 dropped the cuda12 extra (Provides-Extra lists only "cpu");
# 0.5.0 has it, by its Requires-Dist markers alone (no Provides-Extra), and its plugin fits 1.0.
JAX_LIKE = (
    ("torchish", "1.0", ("sharedlib==1.0",), ()),
    ("sharedlib", "1.0", (), ()),
    ("sharedlib", "2.0", (), ()),
    ("jaxish", "0.6.0", ('jaxish-cuda12-plugin==0.6.0; extra == "cuda12"',), ("cuda12",)),
    ("jaxish", "0.5.1", ('numpyish; extra == "cpu"',), ("cpu",)),
    ("jaxish", "0.5.0", ('jaxish-cuda12-plugin==0.5.0; extra == "cuda12"',), ()),
    ("jaxish-cuda12-plugin", "0.6.0", ("sharedlib>=2.0",), ()),
    ("jaxish-cuda12-plugin", "0.5.0", ("sharedlib>=1.0",), ()),
    ("numpyish", "1.0", (), ()),
)


@pytest.fixture
def jax_like(server) -> str:
    for name, version, requires, extras in JAX_LIKE:
        filename, data = make_wheel(name, version, requires=requires, extras=extras)
        server.add(filename, data)
    return server.url + "/simple"


def lock_jax_like(capsys, index_url: str, empty_python: str, tmp_path: Path, *requirements: str) -> tuple[int, str, str]:
    return run(capsys, *requirements, *RTX_4090, "--python", empty_python, "--index-url", index_url,
               "-o", str(tmp_path / "pylock.toml"), "--explain")


def test_a_release_without_the_requested_extra_does_not_satisfy_it(jax_like, empty_python, tmp_path, capsys):
    code, out, err = lock_jax_like(capsys, jax_like, empty_python, tmp_path, "torchish==1.0", "jaxish[cuda12]")
    assert code == 0, err
    versions = locked_versions(tmp_path / "pylock.toml")
    assert versions["jaxish"] == "0.5.0"  # not 0.5.1, which lacks [cuda12]
    assert versions["jaxish-cuda12-plugin"] == "0.5.0" and versions["sharedlib"] == "1.0"
    assert "jaxish 0.5.1: has no extra [cuda12]" in out
    assert "with [cuda12]" in out  # the reason names the extra


def test_an_exact_pin_to_a_release_without_the_extra_is_bad_input(jax_like, empty_python, tmp_path, capsys):
    code, out, err = lock_jax_like(capsys, jax_like, empty_python, tmp_path, "torchish==1.0", "jaxish[cuda12]==0.5.1")
    assert code == 3, err
    assert err.strip().splitlines()[-1].endswith("jaxish[cuda12]==0.5.1: jaxish 0.5.1 has no extra [cuda12]"), err
    assert not (tmp_path / "pylock.toml").exists()


def test_a_range_admitting_only_releases_without_the_extra_is_exit_2_naming_it(jax_like, empty_python, tmp_path, capsys):
    code, out, err = lock_jax_like(capsys, jax_like, empty_python, tmp_path, "jaxish[cuda12]>0.5.0,<0.6")
    assert code == 2, err
    assert "jaxish 0.5.1: has no extra [cuda12]" in err


def test_an_installed_extra_whose_requirements_are_installed_keeps_its_needs(jax_like, tmp_path, capsys):
    """jaxish 0.5.0 installed with its [cuda12] plugin (pip records no extra; every requirement of
    the extra is installed, so it counts as chosen): keeping 0.5.0 would keep its need of plugin
    0.5.0, so a request for plugin 0.6.0 moves jaxish to 0.6.0 instead of breaking the pair."""
    import subprocess
    import sys
    import venv

    from conftest import hermetic_environ

    root = tmp_path / "target"
    venv.create(root, with_pip=False)
    python = str(root / "bin" / "python")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-cache-dir", "--index-url", jax_like,
         "jaxish==0.5.0", "jaxish-cuda12-plugin==0.5.0"],
        check=True, capture_output=True, text=True, env=hermetic_environ(),
    )
    code, out, err = lock_jax_like(capsys, jax_like, python, tmp_path, "jaxish", "jaxish-cuda12-plugin==0.6.0")
    assert code == 0, err
    versions = locked_versions(tmp_path / "pylock.toml")
    assert versions["jaxish"] == "0.6.0" and versions["jaxish-cuda12-plugin"] == "0.6.0", versions
