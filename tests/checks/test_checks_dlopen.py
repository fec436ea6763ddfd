"""Libraries a binary opens by soname (checks/dlopen.py): a file that imports dlopen and names
`libcublas.so.12` as a literal opens it at run time, where no DT_NEEDED shows it.

Built: a gcc-built extension calling dlopen("libcublas.so.12") with a DT_RUNPATH into the cuBLAS
wheel's directory, with and without that directory; the oracle is ctypes calling the extension's
dlopen. Real: cutensor-cu12 2.8.1's libcutensor.so.2 imports dlopen and dlmopen and names
libnvrtc.so.12 in its .rodata (`nm -D`, `strings`), with a DT_RUNPATH of `$ORIGIN` and the cuBLAS
wheel's directory only, so nothing it searches holds NVRTC.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_env_distributions import make_dist_info
from test_torch_abi import run

from cudaresolve.binary.elf import MAX_DLOPEN_NAMES, read_binary_facts
from cudaresolve.binary.loader import LoaderEnv, dlopen, host_machine, resolve
from cudaresolve.checks.findings import Check, Severity
from cudaresolve.checks.fixes import PipInstall
from cudaresolve.checks.problems import DlopenedNotFound, DlopenedOtherMajor
from cudaresolve.output.findings import shown

OPENS = """#include <dlfcn.h>
void *open_library(void) { return dlopen("%s", RTLD_NOW); }
"""
USES_CUDART = "int cudaRuntimeGetVersion(int *v);\nint version(void) { int v; cudaRuntimeGetVersion(&v); return v; }\n"
CUDART = "int cudaRuntimeGetVersion(int *v) { *v = 12080; return 0; }\n"
ORACLE = "import ctypes, sys\nlib = ctypes.CDLL(sys.argv[1])\nlib.open_library.restype = ctypes.c_void_p\nprint(bool(lib.open_library()))\n"


def dlopen_findings(site: Path, tmp_path: Path):
    findings = run(site, tmp_path).findings
    return [f for f in findings if isinstance(f.problem, (DlopenedNotFound, DlopenedOtherMajor))]


def blas_user(elf_builder, soname: str = "libcublas.so.12", link=(), runpath="$ORIGIN/../nvidia/cublas/lib") -> Path:
    """blas-user 1.0: blas_user/_ext.so opens `soname` with dlopen, searching its RUNPATH (and calls
    the CUDA runtime when it links one)."""
    source = OPENS % soname + (USES_CUDART if link else "")
    ext = elf_builder.build("_ext.so", source, link=link, runpath=runpath, directory="site/blas_user", extra=["-ldl"])
    make_dist_info(elf_builder.root / "site", "blas-user", "1.0", files=("blas_user/_ext.so",))
    return ext


def oracle(ext: Path) -> str:
    return subprocess.run([sys.executable, "-c", ORACLE, str(ext)], capture_output=True, text=True, check=True).stdout


def test_a_dlopen_by_soname_with_no_copy_is_a_warning_naming_the_wheel(elf_builder, tmp_path):
    ext = blas_user(elf_builder)
    assert read_binary_facts(ext).dlopened == ("libcublas.so.12",)
    assert oracle(ext) == "False\n"
    [finding] = dlopen_findings(elf_builder.root / "site", tmp_path)
    assert (finding.check, finding.severity, finding.subject.distribution) == (
        Check.MISSING_LIBRARY, Severity.WARNING, "blas-user")
    assert finding.problem == DlopenedNotFound(str(ext), "libcublas.so.12", 12, ("nvidia-cublas-cu12",))
    assert finding.fix == PipInstall((finding.fix.requirements[0],))
    assert str(finding.fix.requirements[0]) == "nvidia-cublas-cu12"
    message = shown(finding).message
    assert "_ext.so opens libcublas.so.12" in message and "nvidia-cublas-cu12" in message


def test_the_wheel_directory_on_its_runpath_serves_the_dlopen(elf_builder, tmp_path):
    ext = blas_user(elf_builder)
    elf_builder.build("libcublas.so.12", "int cublasCreate_v2(void **h) { return 0; }\n", soname="libcublas.so.12",
                      directory="site/nvidia/cublas/lib")
    make_dist_info(elf_builder.root / "site", "nvidia-cublas-cu12", "12.8.4.1",
                   files=("nvidia/cublas/lib/libcublas.so.12",))
    assert oracle(ext) == "True\n"
    assert dlopen_findings(elf_builder.root / "site", tmp_path) == []


def test_an_installed_wheel_off_the_search_path_is_a_warning_without_an_install(elf_builder, tmp_path):
    """The wheel is there, but not where the file's dlopen looks: installing it again changes nothing."""
    ext = blas_user(elf_builder, runpath="$ORIGIN")
    elf_builder.build("libcublas.so.12", "int cublasCreate_v2(void **h) { return 0; }\n", soname="libcublas.so.12",
                      directory="site/nvidia/cublas/lib")
    make_dist_info(elf_builder.root / "site", "nvidia-cublas-cu12", "12.8.4.1",
                   files=("nvidia/cublas/lib/libcublas.so.12",))
    assert oracle(ext) == "False\n"
    [finding] = dlopen_findings(elf_builder.root / "site", tmp_path)
    assert finding.problem.soname == "libcublas.so.12" and finding.fix is None


def test_a_copy_of_another_cuda_major_is_a_warning(elf_builder, tmp_path):
    """A CUDA 12 extension (it links libcudart.so.12) opens libcurand.so.10, which the CUDA 11, 12 and
    13 wheels all provide; the one found is nvidia-curand-cu11's."""
    site = elf_builder.root / "site"
    cudart = elf_builder.build("libcudart.so.12", CUDART, soname="libcudart.so.12",
                               directory="site/nvidia/cuda_runtime/lib")
    make_dist_info(site, "nvidia-cuda-runtime-cu12", "12.8.90", files=("nvidia/cuda_runtime/lib/libcudart.so.12",))
    curand = elf_builder.build("libcurand.so.10", "int curandCreateGenerator(void) { return 0; }\n",
                               soname="libcurand.so.10", directory="site/nvidia/curand/lib")
    make_dist_info(site, "nvidia-curand-cu11", "10.3.0.86", files=("nvidia/curand/lib/libcurand.so.10",))
    ext = blas_user(elf_builder, "libcurand.so.10", link=[cudart],
                    runpath="$ORIGIN/../nvidia/cuda_runtime/lib:$ORIGIN/../nvidia/curand/lib")
    assert oracle(ext) == "True\n"
    [finding] = dlopen_findings(site, tmp_path)
    assert (finding.check, finding.severity) == (Check.MIXED_MAJORS, Severity.WARNING)
    assert finding.problem == DlopenedOtherMajor(str(ext), "libcurand.so.10", 12,
                                                 str(site / "blas_user/../nvidia/curand/lib/libcurand.so.10"), 11,
                                                 "nvidia-curand-cu11")
    assert "CUDA 11 copy of nvidia-curand-cu11" in shown(finding).message
    assert curand.exists()


def test_a_name_only_another_majors_wheels_provide_is_an_alternative_not_a_need(elf_builder, tmp_path):
    """A CUDA 13 extension (it links libcudart.so.13) naming libnvrtc.so.12 tries it as an alternative
    (onnxruntime-gpu 1.31.1's CUDA provider names libnvrtc.so.13 and .12): only its own major's
    libnvrtc.so.13 is a need."""
    site = elf_builder.root / "site"
    cudart = elf_builder.build("libcudart.so.13", CUDART, soname="libcudart.so.13", directory="site/nvidia/cu13/lib")
    make_dist_info(site, "nvidia-cuda-runtime", "13.0.96", files=("nvidia/cu13/lib/libcudart.so.13",))
    source = OPENS.replace('"%s"', 'i ? "libnvrtc.so.12" : "libnvrtc.so.13"').replace("(void)", "(int i)", 1)
    elf_builder.build("_ext.so", source + USES_CUDART, link=[cudart], runpath="$ORIGIN/../nvidia/cu13/lib",
                      directory="site/blas_user", extra=["-ldl"])
    make_dist_info(site, "blas-user", "1.0", files=("blas_user/_ext.so",))
    assert [(f.problem.soname, f.problem.cuda_major, f.problem.providers) for f in dlopen_findings(site, tmp_path)] == [
        ("libnvrtc.so.13", 13, ("nvidia-cuda-nvrtc",))]


def test_names_of_libraries_outside_the_tables_are_never_judged(elf_builder, tmp_path):
    blas_user(elf_builder, "libfoo.so.1")
    assert dlopen_findings(elf_builder.root / "site", tmp_path) == []


@pytest.mark.network
def test_cutensor_and_cublaslt_open_nvrtc_by_soname(unpacked, tmp_path):
    """cutensor-cu12 2.8.1 with the cuBLAS wheel it links: libcutensor.so.2 and libcublasLt.so.12
    (12.9.2.10; DT_RUNPATH `$ORIGIN`) both name libnvrtc.so.12 and import dlopen. Neither searches a
    directory holding NVRTC (ctypes agrees): one warning each, naming nvidia-cuda-nvrtc-cu12, without an
    install, since the NVRTC wheel's directory is on neither's search path."""
    site = tmp_path / "site"
    for requirement in ("cutensor-cu12==2.8.1", "nvidia-cublas-cu12==12.9.2.10"):
        shutil.copytree(unpacked(requirement), site, dirs_exist_ok=True, symlinks=True)
    library = next(site.glob("cutensor/lib/libcutensor.so.2"))
    assert "libnvrtc.so.12" in read_binary_facts(library).dlopened
    found = subprocess.run([sys.executable, "-c", "import ctypes, sys; ctypes.CDLL(sys.argv[1]); "
                            "print(ctypes.CDLL('libnvrtc.so.12'))", str(library)], capture_output=True, text=True)
    assert "libnvrtc.so.12: cannot open shared object file" in found.stderr
    findings = sorted(dlopen_findings(site, tmp_path), key=lambda f: f.subject.distribution)
    assert [(f.subject.distribution, Path(f.problem.consumer).name, f.problem.soname, f.problem.providers, f.fix)
            for f in findings] == [
        ("cutensor-cu12", "libcutensor.so.2", "libnvrtc.so.12", ("nvidia-cuda-nvrtc-cu12",), None),
        ("nvidia-cublas-cu12", "libcublasLt.so.12", "libnvrtc.so.12", ("nvidia-cuda-nvrtc-cu12",), None)]
    assert {f.severity for f in findings} == {Severity.WARNING}


def test_the_reader_keeps_soname_literals_of_files_that_import_dlopen_only(elf_builder):
    """Paths, format strings and the names of a file that does not call dlopen are not kept; the
    names kept are bounded."""
    names = ", ".join(f'"libcap{i}.so.1"' for i in range(MAX_DLOPEN_NAMES + 10))
    opens = elf_builder.build("libopens.so", '#include <dlfcn.h>\nstatic const char *n[] = {"libcublas.so.12", '
                              '"/usr/lib/libcudnn.so.9", "libnvrtc.so.%d", "libc.so.6"};\n'
                              'void *f(int i) { return dlopen(n[i], RTLD_NOW); }\n', extra=["-ldl"])
    assert read_binary_facts(opens).dlopened == ("libcublas.so.12", "libc.so.6")
    quiet = elf_builder.build("libquiet.so", 'const char *name(void) { return "libcublas.so.12"; }\n')
    assert read_binary_facts(quiet).dlopened == ()
    many = elf_builder.build("libmany.so", f'#include <dlfcn.h>\nstatic const char *n[] = {{{names}}};\n'
                             'void *f(int i) { return dlopen(n[i], RTLD_NOW); }\n', extra=["-ldl"])
    kept = read_binary_facts(many).dlopened
    assert len(kept) == MAX_DLOPEN_NAMES and kept[0] == "libcap0.so.1"
    assert ctypes.CDLL(str(opens)).f  # the built file loads: what is read is a real library


def test_a_dlopen_searches_the_rpath_of_the_objects_that_loaded_the_caller(elf_builder, tmp_path):
    """ld.so's dlopen from a library without DT_RUNPATH searches the DT_RPATH of its loaders up the
    chain, as for a DT_NEEDED entry: the root's RPATH serves its dependency's dlopen (ctypes agrees)."""
    target = elf_builder.build("libtarget.so.1", "int target(void) { return 7; }\n", soname="libtarget.so.1",
                               directory="deps")
    opener = elf_builder.build("libopener.so", OPENS % "libtarget.so.1", soname="libopener.so", extra=["-ldl"],
                               directory="lib")
    root = elf_builder.build("root.so", "void *open_library(void);\nvoid *go(void) { return open_library(); }\n",
                             link=[opener], rpath="$ORIGIN/lib:$ORIGIN/deps")
    probe = ("import ctypes, sys\nlib = ctypes.CDLL(sys.argv[1])\nlib.go.restype = ctypes.c_void_p\n"
             "print(bool(lib.go()))\n")
    assert subprocess.run([sys.executable, "-c", probe, str(root)], capture_output=True, text=True).stdout == "True\n"
    env = LoaderEnv(machine=host_machine())

    def facts_of(path: str):
        return read_binary_facts(path) if Path(path).exists() else None

    result = resolve([str(root)], facts_of=facts_of, env=env)
    caller = next(obj.path for obj in result.objects if obj.soname == "libopener.so")
    found = dlopen("libtarget.so.1", caller, result, facts_of=facts_of, env=env)
    assert (os.path.realpath(found.path), found.step, found.rpath_of) == (str(target), "rpath", str(root))
    assert dlopen("libabsent.so.1", caller, result, facts_of=facts_of, env=env).step == "not found"
