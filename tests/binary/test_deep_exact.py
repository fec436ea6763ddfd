"""`--deep` is exact: a missing symbol is reported only against a provider whose whole dynamic symbol
table is held (read from its file or wheel, or a table row marked complete). A knowledge-table row
lists only what crosses components (names with a CUDA ABI suffix and names some row binds), so a
name it lacks is blamed only when the name carries that suffix or the consumer is such a row too.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import hermetic_environ, registry_python
from test_loader import ENV, so, world
from wheel_cache import cache_dir, fetch_locked

from cudaresolve.binary.facts import Symbol
from cudaresolve.binary.loader import UNDEFINED_SYMBOL, resolve
from cudaresolve.cli import main
from cudaresolve.knowledge.wheel_facts import Bind, Member, Wheel, from_record

NVRTC = "libnvrtc.so.12"


def _nvrtc_row(complete: bool):
    """NVRTC 12 as a table row defining one name: partial as generated, or marked complete."""
    member = Member(path="nvidia/cuda_nvrtc/lib/libnvrtc.so.12", soname=NVRTC, version_definitions=(NVRTC,),
                    defines=(f"nvrtcCreateProgram@@{NVRTC}",), complete=complete)
    row = Wheel(name="nvidia-cuda-nvrtc-cu12", version="12.9.86", filename="nvidia_cuda_nvrtc_cu12-12.9.86-py3-none-any.whl",
                sha256="0" * 64, why=("test",), machine="x86_64", member=(member,))
    [facts] = from_record(row).members
    return facts


def _consumer(complete: bool, *names: str):
    """An extension binding `names` from NVRTC: read from its file (complete) or a table row."""
    undefined = [Symbol(name, NVRTC, NVRTC) for name in names]
    if complete:
        return so("/site/ext.so", needed=[NVRTC], runpath=["/site/nvrtc"], undefined=undefined)
    row = Wheel(name="cuda-cccl", version="1.2.1", filename="cuda_cccl-1.2.1-py3-none-any.whl", sha256="1" * 64,
                why=("test",), machine="x86_64",
                member=(Member(path="ext.so", needed=(NVRTC,), runpath=("/site/nvrtc",),
                               binds=(Bind(NVRTC, (NVRTC,), tuple(f"{n}@{NVRTC}" for n in names)),)),))
    [facts] = from_record(row).members
    return facts


def _missing(consumer, provider) -> list[str]:
    from dataclasses import replace

    files = world(replace(consumer, path="/site/ext.so"), replace(provider, path=f"/site/nvrtc/{NVRTC}"))
    result = resolve(["/site/ext.so"], facts_of=files, env=ENV)
    return [p.symbol or "" for p in result.problems if p.kind == UNDEFINED_SYMBOL]


def test_a_table_row_is_partial_unless_marked_complete():
    assert not _nvrtc_row(complete=False).symbols_complete
    assert _nvrtc_row(complete=True).symbols_complete
    assert so("/site/ext.so").symbols_complete  # read from a file


def test_a_name_a_partial_row_lacks_is_not_reported_against_a_file_read_in_full():
    """cuda-cccl's libcccl.c.parallel.so binds nvrtcGetLTOIR, which NVRTC 12.9 defines and its row does not list."""
    consumer = _consumer(True, "nvrtcCreateProgram", "nvrtcGetLTOIR")
    assert _missing(consumer, _nvrtc_row(complete=False)) == []
    assert _missing(consumer, _nvrtc_row(complete=True)) == ["nvrtcGetLTOIR"]


def test_a_partial_row_still_answers_for_what_it_lists():
    """A CUDA ABI suffix (`_12_4`) is listed in every row that defines it; a row's consumer binds only
    names the rows list: both are blamed against a partial row, as the cuSPARSE/nvJitLink skew needs."""
    assert _missing(_consumer(True, "nvrtcFoo_12_9"), _nvrtc_row(complete=False)) == ["nvrtcFoo_12_9"]
    assert _missing(_consumer(False, "nvrtcGetLTOIR"), _nvrtc_row(complete=False)) == ["nvrtcGetLTOIR"]


SETS = [
    ("cuda-cccl[cu12]==1.2.1",),  # cuda.compute: NVRTC and nvJitLink bound by cuda-cccl's own library
    ("nvidia-cusparse-cu12==12.5.8.93", "nvidia-nvjitlink-cu12"),
    ("nvidia-cufft-cu12", "nvidia-nvjitlink-cu12"),
]


@pytest.mark.registry
@pytest.mark.parametrize("requirements", SETS, ids=lambda s: s[0])
def test_registry_deep_lock_of_working_sets_has_no_symbol_finding(requirements, hermetic, tmp_path, capsys, monkeypatch, venv_with_pip):
    """Working sets locked with --deep against the registry pip uses by default: each is locked, and
    no finding is a symbol one. Wheels' facts are cached by sha256 under the test cache."""
    monkeypatch.setenv("CUDARESOLVE_CACHE_DIR", str(cache_dir() / "lock-registry-cache"))
    python = registry_python(venv_with_pip(tmp_path / "target"), "cuda-pathfinder")  # its pip names the default index
    capsys.readouterr()
    code = main(["lock", *requirements, "--deep", "--json", "-q", "--python", python,
                 "-o", str(tmp_path / "pylock.toml"), "--driver", "550.144.03", "--gpu", "8.9"])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert "symbol-skew" not in out + err and "undefined symbol" not in out + err
    assert json.loads(out)["packages"]


# Three sets as users install them: what importing each exercises without a GPU, and the library
# binding another wheel's symbols that the oracle must have checked.
INSTALLED_SETS = [
    (("cuda-cccl[cu12]==1.2.1",), ("cuda.compute", "cuda.core", "cuda.bindings.nvrtc", "cuda.bindings.nvjitlink"),
     "cuda/compute/cu12/cccl/libcccl.c.parallel.so"),
    (("nvidia-cusparse-cu12==12.5.8.93", "nvidia-nvjitlink-cu12"), ("nvidia.cusparse", "nvidia.nvjitlink"),
     "nvidia/cusparse/lib/libcusparse.so.12"),
    (("cupy-cuda12x[ctk]",), ("cupy", "cupy.linalg", "cupy.fft", "cupyx.scipy.sparse"),
     "nvidia/cusolver/lib/libcusolver.so.11"),
]
HOST = ("--driver", "550.144.03", "--gpu", "8.9")
LIBCUDA_NAME = re.compile(r"cu[A-Z]\w*$")  # the driver API, libcuda.so.1's: absent on a machine without a GPU
INTERPRETER_NAME = re.compile(r"_?Py\w*$")  # the interpreter's own, present in the process that loads the library


def ldd_undefined(site: Path) -> tuple[list[str], list[str]]:
    """The oracle: `ldd -r` of every shared library under `site`, its NVIDIA neighbours on the search
    path as the loaders that preload them put them there. Returns (files checked, undefined symbols as
    `file: name`). Python extensions are left out and the C API's names not counted: the interpreter
    defines them in the process. A file needing a library that is not installed (cuda-cccl's cu13/
    build beside CUDA 12) is not checked; one lacking only libcuda.so.1 (no GPU here) is, without
    the driver API's names."""
    files = sorted(p for p in site.rglob("*.so*") if p.is_file() and ".cpython-" not in p.name and not p.name.endswith(".py"))
    lib_dirs = sorted({str(p.parent) for p in files if "/nvidia/" in str(p)})
    env = hermetic_environ({"LD_LIBRARY_PATH": os.pathsep.join(lib_dirs)})
    checked: list[str] = []
    undefined: list[str] = []
    for path in files:
        with open(path, "rb") as f:
            if f.read(4) != b"\x7fELF":
                continue
        done = subprocess.run(["ldd", "-r", str(path)], capture_output=True, text=True, env=env)
        lines = (done.stdout + done.stderr).splitlines()
        missing = {line.split("=>")[0].strip() for line in lines if "=> not found" in line}
        if missing - {"libcuda.so.1"}:
            continue
        checked.append(str(path.relative_to(site)))
        for line in lines:
            found = re.match(r"undefined symbol: (\S+?)(?:, version (\S+))?\s+\(", line)
            if not found or (found.group(2) is None and INTERPRETER_NAME.match(found.group(1))):
                continue
            if not (missing and found.group(2) is None and LIBCUDA_NAME.match(found.group(1))):
                undefined.append(f"{path.name}: {found.group(1)}")
    return checked, undefined


@pytest.mark.registry
@pytest.mark.parametrize(("requirements", "imports", "binder"), INSTALLED_SETS, ids=[s[0][0] for s in INSTALLED_SETS])
def test_registry_deep_lock_installs_imports_and_passes_the_doctor(requirements, imports, binder, hermetic, tmp_path, capsys, monkeypatch, venv_with_pip):
    """Issue 25: each set is locked with --deep, the lock installed by real pip into a throwaway venv,
    its modules imported, every shared library checked with `ldd -r` (the oracle), and the doctor on
    the venv for the same host finds no symbol problem and no error. pip installs the lock's wheels
    from the test cache's kept wheels (fetched from the lock's URLs on the first run, by sha256);
    the venv (3 GB for CuPy's toolkit) is removed at the end."""
    monkeypatch.setenv("CUDARESOLVE_CACHE_DIR", str(cache_dir() / "lock-registry-cache"))
    python = registry_python(venv_with_pip(tmp_path / "target"), re.split(r"[\[=]", requirements[0])[0])  # its pip names the default index
    target = Path(python).parent.parent
    try:
        lock_file = tmp_path / "pylock.toml"
        capsys.readouterr()
        code = main(["lock", *requirements, "--deep", "--json", "-q", "--python", python, "-o", str(lock_file), *HOST])
        out, err = capsys.readouterr()
        assert code == 0, out + err
        assert "symbol-skew" not in out + err and "undefined symbol" not in out + err

        monkeypatch.setenv("PIP_NO_INDEX", "1")
        monkeypatch.setenv("PIP_FIND_LINKS", str(fetch_locked(lock_file)))
        assert main(["install", "--lock", str(lock_file), "--python", python, "-q", "--no-verify", *HOST]) == 0
        capsys.readouterr()
        imported = subprocess.run([python, "-c", "import " + ", ".join(imports)], capture_output=True, text=True, env=hermetic_environ())
        assert imported.returncode == 0, imported.stderr

        [site] = target.glob("lib/python*/site-packages")
        checked, undefined = ldd_undefined(site)
        assert undefined == []
        assert binder in checked

        code = main(["doctor", "--python", python, "--json", "--no-judge-fixes", *HOST])
        report = json.loads(capsys.readouterr().out)
        findings = [(f["check"], f["severity"], f["subject"]) for f in report["findings"]]
        assert code == 0 and not [f for f in findings if f[1] == "error"], findings
        assert not [f for f in findings if f[0] in ("symbol-skew", "torch-abi")], findings
    finally:
        shutil.rmtree(target, ignore_errors=True)


def test_the_oracle_sees_the_cusparse_nvjitlink_skew(cuda_venv):
    """ldd_undefined is the oracle above: cuSPARSE 12.3 beside nvJitLink 12.1 lacks its _12_x names."""
    [site] = cuda_venv(["nvidia-cusparse-cu12==12.3.1.170", "nvidia-nvjitlink-cu12==12.1.105"]).glob("lib/python*/site-packages")
    checked, undefined = ldd_undefined(site)
    assert "nvidia/cusparse/lib/libcusparse.so.12" in checked
    assert undefined and all(u.startswith("libcusparse.so.12: __nvJitLink") for u in undefined), undefined
