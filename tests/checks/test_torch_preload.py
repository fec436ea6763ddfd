"""torch 2.14's own preload of its CUDA libraries (data/components.toml [preloaders], the torch row's
`sys_path`): after lib/libtorch_global_deps.so, `_preload_cuda_deps` loads each library of its list by
path from the first sys.path entry holding one, looking in nvidia/<folder>/lib before nvidia/cu13/lib.
So another CUDA major's wheel beside torch serves extensions torch's dependents link
(nvidia-cuda-runtime-cu12's libcudart.so.12 for xformers' CUDA 12 _C.so), and under a shared soname
it is the copy torch's own libraries bind (JAX's nvidia-cusparse-cu12 libcusparse.so.12).
"""

from __future__ import annotations

import ast
import os
import subprocess
from pathlib import Path

import pytest
from conftest import hermetic_environ
from packaging.utils import NormalizedName
from packaging.version import Version
from test_doctor_checks import host
from test_torch_family_fix import TORCH, errors, installed, pip
from wheel_cache import build_venv

from cudaresolve.checks import evidence as e
from cudaresolve.checks import fixes as f
from cudaresolve.checks import problems as p
from cudaresolve.env.preloads import sys_path_libraries
from cudaresolve.knowledge import components

ROW = components.sys_path_preload("torch", Version(TORCH))


def test_the_row_is_only_for_releases_that_preload_every_time():
    """torch 2.1.2 preloads only when loading libtorch_global_deps.so fails: no sys_path row for it."""
    assert ROW is not None
    assert components.sys_path_preload("torch", Version("2.1.2")) is None


def test_each_library_comes_from_the_first_entry_and_the_component_folder_first():
    """Per library: the first sys.path entry with a match wins; there nvidia/<folder>/lib comes before
    nvidia/cu13/lib, so CUDA 12 wheels' copies are taken; libcudart.so.*[0-9] takes libcudart.so.12
    (libcudart.so.13 is loaded by libtorch_global_deps.so before the preload, not by it)."""
    assert ROW is not None
    listing = {
        "/a/nvidia/cusparse/lib": ["libcusparse.so.12"],
        "/a/nvidia/cu13/lib": ["libcusparse.so.12", "libcudart.so.13", "libcurand.so.10"],
        "/a/nvidia/cuda_runtime/lib": ["libcudart.so.12", "libcudart_static.a"],
        "/b/nvidia/cu13/lib": ["libcublas.so.13", "libcurand.so.10"],
        "/b/nvidia/curand/lib": ["libcurand.so.10"],
    }
    found = sys_path_libraries(ROW, 13, ["/a", "/b"], lambda directory: listing.get(directory, []))
    assert found == {
        "libcublas.so.13": "/b/nvidia/cu13/lib/libcublas.so.13",
        "libcudart.so.12": "/a/nvidia/cuda_runtime/lib/libcudart.so.12",
        "libcurand.so.10": "/a/nvidia/cu13/lib/libcurand.so.10",
        "libcusparse.so.12": "/a/nvidia/cusparse/lib/libcusparse.so.12",
    }
    assert list(found) == ["libcublas.so.13", "libcudart.so.12", "libcurand.so.10", "libcusparse.so.12"]  # load order


@pytest.mark.torch_venv
def test_the_row_is_torchs_own_list():
    """The row's libraries, in order, are torch 2.14.1's `cuda_libs` in _preload_cuda_deps, then the
    optional nvtx, and its directories those of _get_cuda_dep_paths (read from the installed file)."""
    assert ROW is not None
    python = build_venv(["torch==2.14.1"], deps=True) / "bin" / "python"
    source = subprocess.run([str(python), "-c", "import importlib.util as u; print(u.find_spec('torch').origin)"],
                            capture_output=True, text=True, check=True, env=hermetic_environ()).stdout.strip()
    tree = ast.parse(Path(source).read_text())
    functions = {node.name: node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    [table] = [node.value for node in ast.walk(functions["_preload_cuda_deps"])
               if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", None) == "cuda_libs"]
    listed = [tuple(ast.literal_eval(item)) for item in table.elts]  # type: ignore[attr-defined]
    calls = [node for node in ast.walk(functions["_preload_cuda_deps"]) if isinstance(node, ast.Call)
             and getattr(node.func, "id", None) == "_preload_cuda_lib" and isinstance(node.args[0], ast.Constant)]
    listed += [(call.args[0].value, call.args[1].value) for call in calls]  # type: ignore[attr-defined]
    assert [(lib.folder, lib.file) for lib in ROW.libraries] == listed
    paths = ast.unparse(functions["_get_cuda_dep_paths"])
    assert [directory.split("/") for directory in ROW.dirs] == [
        ["nvidia", "{folder}", "lib"], ["nvidia", "cu{major}", "lib"], ["{folder}", "lib"]]
    assert 'os.path.join(path, \'nvidia\', lib_folder, \'lib\', lib_name)' in paths
    assert "os.path.join(path, 'nvidia', f'cu{maj_cuda_version}', 'lib', lib_name)" in paths
    assert "os.path.join(path, lib_folder, 'lib', lib_name)" in paths


@pytest.fixture
def torch_cu130(cuda_index, tmp_path, venv_with_pip) -> Path:
    root = venv_with_pip(tmp_path / "venv")
    python = root / "bin" / "python"
    pip(python, "install", f"torch=={TORCH}", "--index-url", cuda_index.index_url)
    return python


def test_a_cuda_12_cusparse_beside_cuda_13_torch_is_the_one_torch_binds(torch_cu130, cuda_index, tmp_path):
    """nvidia-cusparse-cu12 installed after torch (as jax[cuda12] does): torch's preload takes
    nvidia/cusparse/lib/libcusparse.so.12 before nvidia/cu13/lib's, and libtorch_cuda.so binds it.
    One error naming torch, the file and why; nothing else requires the wheel, so the fix uninstalls
    it, and applied with pip the error is gone with nothing new."""
    pip(torch_cu130, "install", "nvidia-cusparse-cu12", "--index-url", cuda_index.index_url)
    facts = host("580.65.06", "8.6")
    [error] = errors(torch_cu130, facts, tmp_path)
    assert (error.check.value, str(error.subject.distribution)) == ("mixed-majors", "torch")
    assert isinstance(error.problem, p.PreloadedOtherMajor)
    assert (error.problem.sonames, error.problem.picked_major, error.problem.major) == (("libcusparse.so.12",), 12, 13)
    assert [w.name for w in error.problem.wheels] == ["nvidia-cusparse-cu12"]
    [picked] = [item for item in error.evidence if isinstance(item, e.SearchPicks)]
    assert (picked.directory, picked.own_directory) == ("nvidia/cusparse/lib", "nvidia/cu13/lib")
    assert picked.picked.endswith("/nvidia/cusparse/lib/libcusparse.so.12")
    assert picked.own is not None and picked.own.endswith("/nvidia/cu13/lib/libcusparse.so.12")
    assert any(isinstance(item, e.Needs) and item.file.endswith("/torch/lib/libtorch_cuda.so") for item in error.evidence)
    fix = error.fix.options[0] if isinstance(error.fix, f.Alternatives) else error.fix
    assert fix == f.PipUninstall((NormalizedName("nvidia-cusparse-cu12"),))
    pip(torch_cu130, "uninstall", "-y", "nvidia-cusparse-cu12")
    assert "nvidia-cusparse-cu12" not in installed(torch_cu130)
    assert errors(torch_cu130, facts, tmp_path) == []


def test_xformers_finds_the_cuda_12_runtime_torch_preloads(torch_cu130, cuda_index, tmp_path):
    """xformers' CUDA 12 _C.so links libcudart.so.12 with no path to it (as the real 0.0.35 one). With
    nvidia-cuda-runtime-cu12 beside torch's CUDA 13 runtime, torch's preload has loaded
    nvidia/cuda_runtime/lib/libcudart.so.12 when xformers is imported (the real import loads _C.so
    then): no missing-library error; without that wheel, xformers' own mixed-majors error names it.
    The stand-in's _C.so has no RPATH, so only the preload finds it (readelf -d of the built file)."""
    pip(torch_cu130, "install", "xformers==0.0.35", "--index-url", cuda_index.index_url)
    facts = host("580.65.06", "8.6")
    before = {(x.check.value, str(x.subject.distribution or x.subject.scope.value)) for x in errors(torch_cu130, facts, tmp_path)}
    assert before == {("mixed-majors", "environment"), ("mixed-majors", "xformers")}  # no CUDA 12 runtime wheel
    pip(torch_cu130, "install", "nvidia-cuda-runtime-cu12", "--index-url", cuda_index.index_url)
    site = next(Path(torch_cu130).parent.parent.glob("lib/python3*/site-packages"))
    assert os.path.isfile(site / "nvidia" / "cuda_runtime" / "lib" / "libcudart.so.12")
    dynamic = subprocess.run(["readelf", "-d", str(site / "xformers" / "_C.so")], capture_output=True, text=True).stdout
    assert "libcudart.so.12" in dynamic and "RPATH" not in dynamic and "RUNPATH" not in dynamic
    found = {(x.check.value, str(x.subject.distribution or x.subject.scope.value)) for x in errors(torch_cu130, facts, tmp_path)}
    assert found == {("mixed-majors", "environment")}  # two runtimes in one process: right, and the only error
