"""A package that ships one native library per CUDA release and loads, at import, the one its
torch's CUDA picks (bitsandbytes: libbitsandbytes_cuda118.so ... cuda132.so beside CPU, ROCm and XPU
ones) is judged on that one: the others are not loaded, so their CUDA 11 and 12 needs are no
mixed-majors error and their missing ROCm libraries no finding; the pick is judged in full."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from packaging.version import Version
from test_doctor import TORCH, doctor_json, errors_of, site_packages
from test_env_distributions import make_dist_info

from cudaresolve.checks.builds import pick_cuda_library
from cudaresolve.knowledge import components

SHIPPED = {(11, 8): "cuda118", (12, 1): "cuda121", (12, 8): "cuda128", (13, 0): "cuda130", (13, 2): "cuda132"}


@pytest.mark.parametrize("runtime, picked", [
    ((13, 0), "cuda130"),  # the same release
    ((12, 9), "cuda128"),  # the newest of its major below it
    ((12, 0), "cuda121"),  # else the oldest of its major above it
    ((13, 1), "cuda130"),
    ((14, 0), None),  # never another major: the import fails to find its library
])
def test_the_pick_is_bitsandbytes_own(runtime, picked):
    assert pick_cuda_library(SHIPPED, runtime) == picked


def test_the_row_reads_the_cuda_of_a_file_name():
    row = components.per_cuda_libraries("bitsandbytes", Version("0.50.2"))
    assert row is not None and row.selected_by == "torch"
    assert [row.cuda_of(name) for name in (
        "libbitsandbytes_cuda118.so", "libbitsandbytes_cuda130.so", "libbitsandbytes_cuda1210.so",
        "libbitsandbytes_cpu.so", "libbitsandbytes_rocm64.so", "libbitsandbytes_cuda.so", "libbitsandbytes_cuda13x.so",
    )] == [(11, 8), (13, 0), (12, 10), None, None, None, None]
    assert components.per_cuda_libraries("bitsandbytes", Version("0.49.0")) is None  # releases not read


# bitsandbytes' wheel beside torch 2.14.1 (CUDA 13.0), with its requirements as pip picks them
BITSANDBYTES = ["bitsandbytes==0.50.2", "numpy==2.4.6", "packaging==25.0"]


@pytest.fixture(scope="module")
def bitsandbytes_python() -> str:
    from wheel_cache import build_venv, build_venv_on
    return str(build_venv_on(build_venv([TORCH], deps=True), BITSANDBYTES) / "bin" / "python")


ORACLE = """
import ctypes, json, bitsandbytes
from bitsandbytes.cextension import get_cuda_bnb_library_path
from bitsandbytes.cuda_specs import CUDASpecs, get_cuda_version_tuple
cuda = get_cuda_version_tuple()
path = get_cuda_bnb_library_path(CUDASpecs((8, 6), "%d%d" % cuda, cuda))
ctypes.CDLL(str(path))  # loads with what importing torch loaded, as bitsandbytes does on a GPU host
print(json.dumps({"cuda": cuda, "picked": str(path)}))
"""


@pytest.mark.torch_venv
def test_bitsandbytes_is_judged_on_the_library_its_torch_picks(bitsandbytes_python, capsys):
    """Before: exit 2, "bitsandbytes 0.50.2: links CUDA 11, 12 libraries, but the environment's
    wheels of them are CUDA 13" and an environment mixed-majors error (11, 12, 13), whose fix
    (CUDA 13 builds of bitsandbytes) is what is installed. The oracle is the import and
    bitsandbytes' own pick for a CUDA GPU, loaded with ctypes."""
    oracle = subprocess.run([bitsandbytes_python, "-c", ORACLE], capture_output=True, text=True, check=True)
    found = json.loads(oracle.stdout.splitlines()[-1])
    site = site_packages(Path(bitsandbytes_python).parent.parent)
    assert found == {"cuda": [13, 0], "picked": str(site / "bitsandbytes" / "libbitsandbytes_cuda130.so")}
    code, data = doctor_json(capsys, "--python", bitsandbytes_python, "--driver", "580.65.06", "--gpu", "8.6")
    assert (code, errors_of(data)) == (0, [])
    assert [f for f in data["findings"] if "bitsandbytes" in f["subject"]] == []
    loads = {(lib["build"], lib["selected"]) for lib in data["libraries"] if lib["package"] == "bitsandbytes"}
    assert ("libbitsandbytes_cuda130.so", True) in loads
    assert {build for build, selected in loads if selected} == {"libbitsandbytes_cuda130.so"}
    assert ("libbitsandbytes_cuda128.so", False) in loads and ("libbitsandbytes_rocm64.so", False) in loads


def fake_bitsandbytes(elf_builder, tmp_path):
    """torch 2.14.1 (CUDA 13.0) as dist-info, and bitsandbytes 0.50.2 with three of its CUDA
    libraries and its CPU one, gcc-built; each CUDA one links a library of its own that is absent
    here (libbnb_dep_cuda130.so.1 ...), so a file judged shows a missing library."""
    site = elf_builder.root / "site"
    names = ("libbitsandbytes_cuda124.so", "libbitsandbytes_cuda130.so", "libbitsandbytes_cuda132.so",
             "libbitsandbytes_cpu.so")
    for name in names:
        cuda = name.startswith("libbitsandbytes_cuda")
        dep = name.replace("libbitsandbytes_", "libbnb_dep_") + ".1"
        needed = [elf_builder.build(dep, "int dep(void) { return 0; }\n", soname=dep, directory="elsewhere")] if cuda else []
        source = "int dep(void);\nint bnb(void) { return dep(); }\n" if cuda else "int bnb(void) { return 1; }\n"
        elf_builder.build(name, source, link=needed, directory="site/bitsandbytes")
    make_dist_info(site, "torch", "2.14.1")
    make_dist_info(site, "bitsandbytes", "0.50.2", files=tuple(f"bitsandbytes/{n}" for n in names), requires=("torch<3,>=2.4",))
    return site


def test_only_the_pick_is_judged_and_in_full(elf_builder, tmp_path):
    from test_torch_abi import DRIVER_580

    from cudaresolve.commands.diagnosing import examine
    from cudaresolve.env.interpreter import target_for_site_packages

    site = fake_bitsandbytes(elf_builder, tmp_path)
    environ = {"CUDARESOLVE_CACHE_DIR": str(tmp_path / "c"), "LD_LIBRARY_PATH": "", "LD_PRELOAD": ""}
    diagnosis = examine(target_for_site_packages(str(site)), DRIVER_580, environ)
    selected = sorted(load.build.directory for load in diagnosis.loads
                      if load.dist == "bitsandbytes" and load.build is not None and load.selected)
    assert selected == ["libbitsandbytes_cuda130.so"]  # torch 2.14.1's CUDA 13.0
    # the pick is judged in full: its missing library is an error, never an on-demand plugin's info;
    # the files not picked are not loaded, so theirs are no finding at all
    found = [(f.severity.value, str(f.problem)) for f in diagnosis.findings if f.subject.distribution == "bitsandbytes"]
    assert [severity for severity, _ in found] == ["error"] and "libbnb_dep_cuda130.so.1" in found[0][1]
