"""The doctor on small environments made by hand: gcc-built libraries laid out like wheels under a
tmp site-packages, with dist-info METADATA/RECORD written by hand.

`examine` gets its environ explicitly (LD_LIBRARY_PATH, the facts cache), so the process's own
environment never leaks in; the loader's ld.so.cache and default directories are this machine's.
Where glibc can be asked (`ldd -r`, dlopen through ctypes), its words are the expected ones.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from index_server import make_wheel
from test_env_distributions import make_dist_info
from test_loader import old_math_extension

from cudaresolve.arch import ComputeCapability
from cudaresolve.binary.elf import read_binary_facts
from cudaresolve.binary.loader import INTERPRETERS, TRIPLETS, LoaderEnv, system_layout
from cudaresolve.checks import Diagnosis, judge
from cudaresolve.cli import main
from cudaresolve.commands.diagnosing import examine
from cudaresolve.env.interpreter import target_for_python, target_for_site_packages
from cudaresolve.env.scan import scan_environment
from cudaresolve.host.facts import Driver, Gpu, HostFacts
from cudaresolve.knowledge import advisories, components
from cudaresolve.output.findings import FindingText, in_report_order, shown
from cudaresolve.versions import CudaVersion, DriverRelease

HOST = HostFacts(
    "Linux", "x86_64", Driver(DriverRelease.parse("550.144.03"), "override:--driver", CudaVersion.parse("12.4"), "derived:branch-table"),
    (Gpu(ComputeCapability(8, 6), "override:--gpu", 0),),
)
NO_SUCH_FILE = "cannot open shared object file: No such file or directory"

FOO_V1 = "int foo_old(void) { return 1; }\n"
FOO_V2 = FOO_V1 + "int foo_new(void) { return 2; }\n"
MAP_V1 = "FOO_1.0 { global: foo_old; local: *; };\n"
MAP_V2 = MAP_V1 + "FOO_2.0 { global: foo_new; } FOO_1.0;\n"
LEAF = "int leaf(void) { return 1; }\n"
USES_LEAF = "int leaf(void);\nint use(void) { return leaf(); }\n"


def texts(diagnosis: Diagnosis) -> tuple[FindingText, ...]:
    """The findings of a diagnosis as the report words them, in its order."""
    return tuple(shown(finding) for finding in in_report_order(diagnosis.findings))


def advisory_named(advisory_id: str) -> advisories.Advisory:
    return next(a for a in advisories.load() if a.id == advisory_id)


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    """For the tests that go through the CLI, which reads os.environ."""
    monkeypatch.setenv("CUDARESOLVE_CACHE_DIR", str(tmp_path / "facts-cache"))
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)


def run(site: Path, tmp_path: Path, ld_library_path: str = "", ld_preload: str = "") -> Diagnosis:
    environ = {"CUDARESOLVE_CACHE_DIR": str(tmp_path / "facts-cache"), "LD_LIBRARY_PATH": ld_library_path,
               "LD_PRELOAD": ld_preload}
    return examine(target_for_site_packages(str(site)), HOST, environ)


def by_check(diagnosis: Diagnosis) -> list[tuple[str, str, str]]:
    return [(f.check, f.severity, f.subject) for f in texts(diagnosis)]


def glibc_dlopen_error(path: Path, ld_library_path: str = "", ld_preload: str = "") -> str:
    """What dlopen(path, RTLD_NOW) tells Python, from a clean process."""
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
    env["LD_LIBRARY_PATH"] = ld_library_path
    env["LD_PRELOAD"] = ld_preload
    code = "import ctypes, sys\ntry:\n    ctypes.CDLL(sys.argv[1])\nexcept OSError as e:\n    print(e)\n"
    return subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, env=env,
                          check=True).stdout.strip()


# -- shadowing and symbol skew -----------------------------------------------------------------------


@pytest.fixture
def foo_env(elf_builder):
    """nvidia-foo-cu12 ships libfoo.so.1 (FOO_2.0); consumer-pkg links it through RUNPATH; an older
    libfoo.so.1 (FOO_1.0 only) sits outside the environment, in `stale/`."""
    root = elf_builder.root
    new = elf_builder.build("libfoo.so.1", FOO_V2, soname="libfoo.so.1", version_script=MAP_V2,
                            directory="site/nvidia/foo/lib")
    elf_builder.build("libfoo.so.1", FOO_V1, soname="libfoo.so.1", version_script=MAP_V1, directory="stale")
    consumer = elf_builder.build(
        "libconsumer.so",
        "int foo_old(void); int foo_new(void);\nint consume(void) { return foo_old() + foo_new(); }\n",
        link=[new], runpath="$ORIGIN/../../nvidia/foo/lib", directory="site/consumer/lib",
    )
    site = root / "site"
    make_dist_info(site, "nvidia-foo-cu12", "1.2", files=("nvidia/foo/lib/libfoo.so.1",))
    make_dist_info(site, "consumer-pkg", "1.0", files=("consumer/lib/libconsumer.so",), requires=("nvidia-foo-cu12",))
    return site, consumer, root / "stale"


def test_clean_environment_has_no_findings(foo_env, tmp_path):
    site, _, _ = foo_env
    diagnosis = run(site, tmp_path)
    assert texts(diagnosis) == ()
    # nvidia-foo-cu12's library is linked by the consumer, so it loads in the consumer's tree only.
    assert [(load.dist, load.preloader) for load in diagnosis.loads] == [("consumer-pkg", None)]


def test_stale_copy_on_ld_library_path_shadows_the_wheel_and_lacks_a_version(foo_env, tmp_path):
    site, consumer, stale = foo_env
    diagnosis = run(site, tmp_path, ld_library_path=str(stale))
    assert by_check(diagnosis) == [
        ("symbol-skew", "error", "consumer-pkg 1.0"),
        ("shadowing", "warning", "libfoo.so.1"),
    ]
    skew, shadowing = texts(diagnosis)
    version_error = f"{stale}/libfoo.so.1: version `FOO_2.0' not found (required by {consumer})"
    # glibc's own words for this load, from dlopen in a clean process:
    assert glibc_dlopen_error(consumer, str(stale)) == version_error
    assert skew == FindingText(
        "symbol-skew",
        "error",
        "consumer-pkg 1.0",
        f"libfoo.so.1: version `FOO_2.0' not found (required by {consumer})",
        (
            version_error,
            f"{consumer}: undefined symbol: foo_new, version FOO_2.0",
            f"the loader picks {stale}/libfoo.so.1 (LD_LIBRARY_PATH)",
        ),
        f"remove {stale} from LD_LIBRARY_PATH: the loader takes its libfoo.so.1 first",
    )
    assert shadowing == FindingText(
        "shadowing",
        "warning",
        "libfoo.so.1",
        f"LD_LIBRARY_PATH makes the loader pick {stale}/libfoo.so.1 for libconsumer.so, not the environment's "
        "copy from nvidia-foo-cu12",
        (
            f"{consumer} needs libfoo.so.1: chosen {stale}/libfoo.so.1 (LD_LIBRARY_PATH)",
            f"environment copy: {site}/nvidia/foo/lib/libfoo.so.1",
        ),
        "remove the stale directory from LD_LIBRARY_PATH",
    )


def test_a_stale_copy_in_ld_preload_is_the_one_that_binds(foo_env, tmp_path):
    """LD_PRELOAD loads the old libfoo before anything: the consumer's FOO_2.0 then fails, as dlopen says."""
    site, consumer, stale = foo_env
    preload = str(stale / "libfoo.so.1")
    diagnosis = run(site, tmp_path, ld_preload=preload)
    version_error = f"{preload}: version `FOO_2.0' not found (required by {consumer})"
    assert glibc_dlopen_error(consumer, ld_preload=preload) == version_error
    [skew] = [f for f in texts(diagnosis) if f.check == "symbol-skew"]
    assert skew.message == f"libfoo.so.1: version `FOO_2.0' not found (required by {consumer})"
    assert skew.evidence[0] == version_error
    assert skew.evidence[-1] == f"the loader picks {preload} (preloaded)"


NVJITLINK_LIB = "nvidia/nvjitlink/lib/libnvJitLink.so.12"


@pytest.mark.parametrize("installed", ["12.1.105", "12.8.93"])
def test_no_inline_nvjitlink_consumer(installed, elf_builder, unpacked, tmp_path):
    """A binary built with NVJITLINK_NO_INLINE calls nvJitLinkDestroy@libnvJitLink.so.12, which the
    real 12.8.93 library exports and 12.1.105 does not (NVIDIA/cccl#10083): symbol-skew from the
    binary, and the advisory because a binary of the environment makes that reference."""
    site = elf_builder.root / "site"
    (site / NVJITLINK_LIB).parent.mkdir(parents=True)
    shutil.copy2(unpacked(f"nvidia-nvjitlink-cu12=={installed}") / NVJITLINK_LIB, site / NVJITLINK_LIB)
    built_against = unpacked("nvidia-nvjitlink-cu12==12.8.93") / NVJITLINK_LIB
    consumer = elf_builder.build(
        "_ext.so", "typedef struct H *H;\nint nvJitLinkDestroy(H *);\nint f(H h) { return nvJitLinkDestroy(&h); }\n",
        link=[built_against], runpath="$ORIGIN/../nvidia/nvjitlink/lib", directory="site/app",
    )
    make_dist_info(site, "nvidia-nvjitlink-cu12", installed, files=(NVJITLINK_LIB,))
    make_dist_info(site, "app", "1.0", files=("app/_ext.so",), requires=("nvidia-nvjitlink-cu12",))
    diagnosis = run(site, tmp_path)
    glibc = glibc_dlopen_error(consumer)
    if installed == "12.8.93":
        assert glibc == ""
        assert [f.check for f in texts(diagnosis)] == ["driver-floor"]  # 12.8 on the host's CUDA 12.4 driver
        return
    assert glibc == f"{consumer}: undefined symbol: nvJitLinkDestroy, version libnvJitLink.so.12"
    assert by_check(diagnosis) == [
        ("symbol-skew", "error", "app 1.0"),
        ("advisory", "warning", "nvidia-nvjitlink-cu12 12.1.105"),
    ]
    skew, advisory = texts(diagnosis)
    assert skew.message == "_ext.so: undefined symbol: nvJitLinkDestroy, version libnvJitLink.so.12"
    assert advisory.evidence == ("NVIDIA/cccl#10083", f"{consumer} references nvJitLinkDestroy@libnvJitLink.so.12")
    assert advisory.fix == advisory_named("nvjitlink-no-inline").fix


def test_shadowing_copy_that_has_every_version_is_only_a_warning(foo_env, elf_builder, tmp_path):
    site, consumer, _ = foo_env
    elf_builder.build("libfoo.so.1", FOO_V2, soname="libfoo.so.1", version_script=MAP_V2, directory="system-cuda")
    diagnosis = run(site, tmp_path, ld_library_path=str(elf_builder.root / "system-cuda"))
    assert by_check(diagnosis) == [("shadowing", "warning", "libfoo.so.1")]
    assert glibc_dlopen_error(consumer, str(elf_builder.root / "system-cuda")) == ""


# -- duplicates, missing libraries, plugins ----------------------------------------------------------


def test_copies_only_their_own_package_loads_are_private(elf_builder, tmp_path):
    elf_builder.build("libdup.so.1", LEAF, soname="libdup.so.1", directory="site/a_pkg/lib")
    # another build of the library (a different build-id), as two wheels vendoring it would ship
    elf_builder.build("libdup.so.1", LEAF.replace("1;", "2;"), soname="libdup.so.1", directory="site/b_pkg/libs")
    site = elf_builder.root / "site"
    make_dist_info(site, "a-pkg", "1.0", files=("a_pkg/lib/libdup.so.1",))
    make_dist_info(site, "b-pkg", "2.0", files=("b_pkg/libs/libdup.so.1",))
    diagnosis = run(site, tmp_path)
    assert texts(diagnosis) == (
        FindingText(
            "duplicate-library",
            "info",
            "libdup.so.1",
            "libdup.so.1 is installed by 2 distributions (a-pkg, b-pkg); at most one copy is found by the loader, "
            "the others are private copies their package loads by path",
            (f"{site}/a_pkg/lib/libdup.so.1 (from a-pkg): loaded by path only",
             f"{site}/b_pkg/libs/libdup.so.1 (from b-pkg): loaded by path only"),
            None,
        ),
    )


def test_a_preloaded_copy_and_another_on_a_consumers_runpath_clash(elf_builder, tmp_path):
    """cupy-cuda12x 14 preloads nvidia-nccl-cu12's libnccl.so.2; other-pkg's extension finds its own
    build through RUNPATH. In one process the first loaded serves both: glibc shows it."""
    [row] = [c for c in components.for_soname("libnccl.so.2") if c.dist == "nvidia-nccl-cu12"]
    wheel_nccl = elf_builder.build("libnccl.so.2", "int nccl_build(void) { return 12; }\n", soname="libnccl.so.2",
                                   directory=f"site/{row.lib_dir}")
    own_nccl = elf_builder.build("libnccl.so.2", "int nccl_build(void) { return 99; }\n", soname="libnccl.so.2",
                                 directory="site/other_pkg/lib")
    calls = "int nccl_build(void);\nint which(void) { return nccl_build(); }\n"
    cupy = elf_builder.build("nccl.cpython-311-x86_64-linux-gnu.so", calls, link=[wheel_nccl], directory="site/cupy/cuda")
    other = elf_builder.build("_ext.cpython-311-x86_64-linux-gnu.so", calls, link=[own_nccl], runpath="$ORIGIN/lib",
                              directory="site/other_pkg")
    site = elf_builder.root / "site"
    make_dist_info(site, "nvidia-nccl-cu12", "2.27.3", files=(f"{row.lib_dir}/libnccl.so.2",))
    make_dist_info(site, "cupy-cuda12x", "14.2.0", files=("cupy/cuda/nccl.cpython-311-x86_64-linux-gnu.so",))
    make_dist_info(site, "other-pkg", "1.0", files=("other_pkg/_ext.cpython-311-x86_64-linux-gnu.so",
                                                     "other_pkg/lib/libnccl.so.2"))
    diagnosis = run(site, tmp_path)
    [clash] = [f for f in texts(diagnosis) if f.check == "duplicate-library"]
    assert (clash.severity, clash.subject) == ("error", "libnccl.so.2")
    assert clash.evidence == (
        f"{site}/{row.lib_dir}/libnccl.so.2 (from nvidia-nccl-cu12) is what {cupy} loads",
        f"{site}/other_pkg/lib/libnccl.so.2 (from other-pkg) is what {other} loads",
    )
    # glibc: with cupy's copy loaded first (its preload), other-pkg's extension binds it, not its own.
    code = ("import ctypes, sys\nctypes.CDLL(sys.argv[1], ctypes.RTLD_GLOBAL)\nctypes.CDLL(sys.argv[2])\n"
            "print(ctypes.CDLL(sys.argv[3]).which())\n")
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
    out = subprocess.run([sys.executable, "-c", code, str(wheel_nccl), str(cupy), str(other)], env=env,
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "12"


@pytest.fixture
def absent_env(elf_builder):
    """c-pkg: an extension module and a plugin library, both needing libabsent.so.1, which is gone."""
    absent = elf_builder.build("libabsent.so.1", LEAF, soname="libabsent.so.1", directory="gone")
    extension = elf_builder.build("_ext.cpython-311-x86_64-linux-gnu.so", USES_LEAF, link=[absent],
                                  directory="site/c_pkg")
    elf_builder.build("libc_transport.so.1", USES_LEAF, link=[absent], soname="libc_transport.so.1",
                      directory="site/c_pkg/plugins")
    shutil.rmtree(elf_builder.root / "gone")
    return elf_builder.root / "site", extension


def test_missing_library_is_an_error_in_glibc_words(absent_env, tmp_path):
    site, extension = absent_env
    make_dist_info(site, "c-pkg", "3.0", files=("c_pkg/_ext.cpython-311-x86_64-linux-gnu.so",))
    diagnosis = run(site, tmp_path)
    assert glibc_dlopen_error(extension) == f"libabsent.so.1: {NO_SUCH_FILE}"
    [error] = [f for f in texts(diagnosis) if f.severity == "error"]
    assert error == FindingText(
        "missing-library",
        "error",
        "c-pkg 3.0",
        f"_ext.cpython-311-x86_64-linux-gnu.so: libabsent.so.1: {NO_SUCH_FILE}",
        (f"{extension} needs libabsent.so.1; nothing on its search path, in the environment or in the system "
         "provides it",),
        None,
    )


def test_a_plugin_nothing_links_needing_an_absent_library_is_info(absent_env, tmp_path):
    site, extension = absent_env
    extension.unlink()
    make_dist_info(site, "c-pkg", "3.0", files=("c_pkg/plugins/libc_transport.so.1",))
    diagnosis = run(site, tmp_path)
    assert texts(diagnosis) == (
        FindingText(
            "missing-library",
            "info",
            "c-pkg 3.0",
            "1 plugin library loads only on demand and needs libraries that are not on their search path (libabsent.so.1); "
            "the features they provide are unavailable here",
            ("libc_transport.so.1 needs libabsent.so.1",),
            None,
        ),
    )


def judged_without_ld_so_cache(site: Path, host: HostFacts) -> tuple[FindingText, ...]:
    """The doctor's findings for `site` with a loader that has no ld.so.cache, as `ld.so --inhibit-cache`
    runs (this machine's cache may hold a CUDA toolkit that would find anything)."""
    dirs, lib = system_layout(platform.machine(), os.path.isdir(f"/usr/lib/{TRIPLETS.get(platform.machine(), '')}"))
    loader = LoaderEnv(machine=platform.machine(), default_dirs=dirs, lib=lib,
                       driver_libraries=frozenset(components.driver_libraries()))
    env = scan_environment(target_for_site_packages(str(site)), facts_for=read_binary_facts, loader=loader, environ={})
    return tuple(shown(finding) for finding in in_report_order(judge(env, host).findings))


def loads_without_ld_so_cache(path: Path) -> str:
    """glibc's answer, '' or its error, to ctypes.CDLL(path) in a Python that ld.so runs with --inhibit-cache."""
    if not os.path.exists(INTERPRETERS.get(platform.machine(), "")):
        pytest.skip("no dynamic linker at its usual path")
    code = "import ctypes, sys\ntry:\n    ctypes.CDLL(sys.argv[1])\nexcept OSError as e:\n    print(e)\n"
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
    return subprocess.run([INTERPRETERS[platform.machine()], "--inhibit-cache", os.path.realpath(sys.executable), "-c",
                           code, str(path)], capture_output=True, text=True, env=env, check=True).stdout.strip()


def test_a_library_torch_loads_by_path_on_import_is_judged_in_full(unpacked, tmp_path):
    """torch 2.14.1's lib/libtorch_global_deps.so: nothing links it, `import torch` loads it with
    ctypes before anything else, and the import fails when it cannot. With nvidia-cuda-runtime's
    libcudart.so.13 where its RPATH looks it loads and the doctor has nothing to say; without it, it
    does not load, and the doctor says so as an error, not as an on-demand plugin's info."""
    host = HostFacts("Linux", "x86_64", Driver(DriverRelease.parse("580.95.05"), "override:--driver", CudaVersion.parse("13.0"),
                                               "derived:branch-table"), (Gpu(ComputeCapability(8, 6), "override:--gpu", 0),))
    member, cudart = "torch/lib/libtorch_global_deps.so", "nvidia/cu13/lib/libcudart.so.13"
    site = tmp_path / "site"
    for source, path in ((unpacked("torch==2.14.1", [member]), member), (unpacked("nvidia-cuda-runtime==13.0.96"), cudart)):
        (site / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source / path, site / path)
    assert "libcudart.so.13" in read_binary_facts(str(site / member)).needed
    make_dist_info(site, "torch", "2.14.1", files=(member,))
    make_dist_info(site, "nvidia-cuda-runtime", "13.0.96", files=(cudart,))
    assert loads_without_ld_so_cache(site / member) == ""
    assert judged_without_ld_so_cache(site, host) == ()
    (site / cudart).unlink()
    shutil.rmtree(site / "nvidia_cuda_runtime-13.0.96.dist-info")
    message = f"libcudart.so.13: {NO_SUCH_FILE}"
    assert loads_without_ld_so_cache(site / member) == message
    [finding] = judged_without_ld_so_cache(site, host)
    assert (finding.check, finding.severity, finding.subject, finding.message) == (
        "missing-library", "error", "torch 2.14.1", f"libtorch_global_deps.so: {message}")


def test_a_lock_refuses_a_torch_whose_import_time_library_cannot_load(elf_builder, tmp_path, server, capsys, hermetic):
    """The plan is judged by the same rule: a chosen torch wheel whose lib/libtorch_global_deps.so (loaded
    by `import torch`) needs a library nothing provides is refused, not let through as a plugin's info."""
    python, _ = old_math_venv(elf_builder, tmp_path / "venv")
    deps = elf_builder.build("libtorch_global_deps.so", USES_LEAF, link=[elf_builder.build(
        "libabsent.so.1", LEAF, soname="libabsent.so.1", directory="gone")], directory="wheel/torch/lib")
    server.add(*make_wheel("torch", "2.99.0", tag="py3-none-manylinux_2_28_x86_64",
                           files={"torch/lib/libtorch_global_deps.so": deps.read_bytes()}))
    code = main(["lock", "-q", "--deep", "--driver", "580.95.05", "--gpu", "8.6", "--python", python,
                 "--index-url", server.url + "/simple", "--torch-index-base", server.url, "-o", str(tmp_path / "pylock.toml"),
                 "torch"])
    out, err = capsys.readouterr()
    assert code == 2 and f"libtorch_global_deps.so: libabsent.so.1: {NO_SUCH_FILE}" in out + err, out + err


# -- preloaders --------------------------------------------------------------------------------------


@pytest.fixture
def cupy_env(elf_builder):
    """A CuPy-like extension module with no RPATH needing libcublas.so.12 (installed by a wheel) and
    libnccl.so.2 (not installed), as cupy-cuda12x 14 ships them."""
    [cublas_row] = [c for c in components.for_soname("libcublas.so.12") if c.dist == "nvidia-cublas-cu12"]
    assert cublas_row.lib_dir == "nvidia/cublas/lib"  # data/components.toml: where the wheel puts it
    cublas = elf_builder.build("libcublas.so.12", "int cublasCreate_v2(void) { return 0; }\n",
                               soname="libcublas.so.12", directory=f"site/{cublas_row.lib_dir}")
    nccl = elf_builder.build("libnccl.so.2", "int ncclGetVersion(void) { return 0; }\n", soname="libnccl.so.2",
                             directory="elsewhere")
    extension = elf_builder.build(
        "x.cpython-311-x86_64-linux-gnu.so",
        "int cublasCreate_v2(void); int ncclGetVersion(void);\nint f(void) { return cublasCreate_v2() + ncclGetVersion(); }\n",
        link=[cublas, nccl], directory="site/cupy/_core",
    )
    shutil.rmtree(elf_builder.root / "elsewhere")
    site = elf_builder.root / "site"
    # CUDA 12.4's cuBLAS (cuda-toolkit 12.4 pins it): native on the 550 host, so no minor-version warning
    make_dist_info(site, "nvidia-cublas-cu12", "12.4.5.8", files=(f"{cublas_row.lib_dir}/libcublas.so.12",))
    return site, extension, cublas


def test_cupy_14_preloads_the_wheel_library_and_nccl_is_an_optional_feature(cupy_env, tmp_path):
    site, extension, cublas = cupy_env
    make_dist_info(site, "cupy-cuda12x", "14.0.0", files=("cupy/_core/x.cpython-311-x86_64-linux-gnu.so",))
    diagnosis = run(site, tmp_path)
    assert texts(diagnosis) == (
        FindingText(
            "missing-library",
            "info",
            "cupy-cuda12x 14.0.0",
            "optional feature unavailable: NCCL (cupy.cuda.nccl, cupyx.distributed) (libnccl.so.2 not installed)",
            (f"{extension}: libnccl.so.2: {NO_SUCH_FILE}",),
            'to enable: pip install "nvidia-nccl-cu12"',
        ),
    )
    [cupy] = [load for load in diagnosis.loads if load.dist == "cupy-cuda12x"]
    assert cupy.preloader.name == "cupy"
    [ext] = [o for o in cupy.result.objects if o.path == str(extension)]
    assert [(r.needed, r.path, r.step) for r in ext.needed] == [
        ("libcublas.so.12", str(cublas), "preloaded"),
        ("libnccl.so.2", None, "not found"),
    ]


def test_cupy_13_preloads_nothing_so_the_wheel_library_is_not_found(cupy_env, tmp_path):
    site, extension, cublas = cupy_env
    make_dist_info(site, "cupy-cuda12x", "13.6.0", files=("cupy/_core/x.cpython-311-x86_64-linux-gnu.so",))
    diagnosis = run(site, tmp_path)
    assert by_check(diagnosis) == [
        ("missing-library", "error", "cupy-cuda12x 13.6.0"),
        ("missing-library", "info", "cupy-cuda12x 13.6.0"),  # NCCL: an optional module in CuPy 13 as in 14
    ]
    cublas_error = texts(diagnosis)[0]
    assert cublas_error.message == f"x.cpython-311-x86_64-linux-gnu.so: libcublas.so.12: {NO_SUCH_FILE}"
    assert cublas_error.evidence == (
        f"{extension} needs libcublas.so.12; the environment's copy ({cublas}) is not on its search path",
    )
    # the wheel is installed: the fix says where it is, never to install it again
    assert cublas_error.fix == (
        f"nvidia-cublas-cu12 has it, but not where x.cpython-311-x86_64-linux-gnu.so looks: put {cublas.parent} on "
        "LD_LIBRARY_PATH, or install a release of its package that finds it"
    )


def old_math_venv(elf_builder, root: Path) -> tuple[str, Path]:
    """A real venv (its python, its site-packages) holding `oldmath`, an extension calling sin and pow
    without linking libm."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = str(root / "bin" / "python")
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    ext = shutil.copy(old_math_extension(elf_builder, "oldmath"), site)
    make_dist_info(site, "oldmath", "1.0", files=(os.path.basename(ext),))
    return python, site


def test_an_old_extension_takes_libm_through_the_interpreter_and_imports(elf_builder, tmp_path):
    """In a real venv, an extension calling sin and pow without linking libm imports (they bind to the
    libm the interpreter's tree loaded) and the doctor has nothing to say; a symbol no library
    defines is still an error."""
    python, site = old_math_venv(elf_builder, tmp_path / "venv")
    imported = subprocess.run([python, "-c", "import oldmath; print(oldmath.run(2.0))"], capture_output=True, text=True)
    assert imported.returncode == 0, imported.stderr
    environ = {"CUDARESOLVE_CACHE_DIR": str(tmp_path / "facts-cache")}
    assert texts(examine(target_for_python(python), HOST, environ)) == ()
    broken = shutil.copy(old_math_extension(elf_builder, "broken", missing="in_no_library"), site)
    make_dist_info(site, "broken", "1.0", files=(os.path.basename(broken),))
    [error] = texts(examine(target_for_python(python), HOST, environ))
    assert (error.check, error.severity, error.subject, error.evidence) == (
        "symbol-skew", "error", "broken 1.0", (f"{broken}: undefined symbol: in_no_library",))


def test_a_lock_of_a_wheel_with_an_old_extension_judges_it_in_the_interpreters_process(elf_builder, tmp_path, server, hermetic,
                                                                                     capsys):
    """The plan is judged by the same loader, from the target's interpreter: a chosen wheel whose
    extension takes sin from the interpreter's libm is not refused (`--deep` reads its files); one
    whose extension needs a symbol no library defines is."""
    python, _ = old_math_venv(elf_builder, tmp_path / "venv")
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}-cp{sys.version_info[0]}{sys.version_info[1]}-linux_x86_64"
    for name, missing in (("mathwheel", None), ("brokenwheel", "in_no_library")):
        ext = old_math_extension(elf_builder, name, missing=missing)
        server.add(*make_wheel(name, "1.0", tag=tag, files={ext.name: ext.read_bytes()}))
    lock = ["lock", "-q", "--deep", "--driver", "550.144.03", "--gpu", "8.6", "--python", python,
            "--index-url", server.url + "/simple", "-o", str(tmp_path / "pylock.toml")]
    capsys.readouterr()
    code = main([*lock, "mathwheel"])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    code = main([*lock, "brokenwheel"])
    out, err = capsys.readouterr()
    assert code == 2 and "in_no_library" in out + err and "symbol: sin" not in out + err, out + err


CUPY_13_OPTIONAL = ("cupy_backends/cuda/libs/nccl.cpython-311-x86_64-linux-gnu.so",
                    "cupy_backends/cuda/libs/cutensor.cpython-311-x86_64-linux-gnu.so",
                    "cupy_backends/cuda/libs/cudnn.cpython-311-x86_64-linux-gnu.so")


def test_cupy_13_optional_modules_are_infos_as_cupy_14s_are(unpacked):
    """cupy-cuda12x 13.6.0's own files: its nccl, cutensor and cudnn modules (which cupy/cuda/*.py import
    inside try/except ImportError) need libnccl.so.2, libcutensor.so.2 and libcudnn.so.8; none installed
    is one info naming the three features, whose fix installs NCCL and cuTENSOR but no cuDNN wheel (CuPy 13
    looks for cuDNN in ~/.cupy/cuda_lib and on the loader's path only);
    a core module beside them is judged as usual and has nothing missing."""
    core = "cupy/_core/_dtype.cpython-311-x86_64-linux-gnu.so"
    dist_info = "cupy_cuda12x-13.6.0.dist-info"
    site = unpacked("cupy-cuda12x==13.6.0", [*CUPY_13_OPTIONAL, core, f"{dist_info}/METADATA", f"{dist_info}/RECORD"])
    assert sorted(n for m in CUPY_13_OPTIONAL for n in read_binary_facts(str(site / m)).needed if "cu" in n or "nccl" in n) == [
        "libcudnn.so.8", "libcutensor.so.2", "libnccl.so.2"]
    [finding] = judged_without_ld_so_cache(site, HOST)
    assert (finding.check, finding.severity, finding.subject) == ("missing-library", "info", "cupy-cuda12x 13.6.0")
    assert finding.message == (
        "optional features unavailable: cuDNN routines (cupy.cuda.cudnn, cupyx.cudnn); cuTENSOR routines (cupyx.cutensor); "
        "NCCL (cupy.cuda.nccl, cupyx.distributed) (libcudnn.so.8, libcutensor.so.2, libnccl.so.2 not installed)")
    assert finding.fix == 'to enable: pip install "cutensor-cu12" "nvidia-nccl-cu12"'


def test_a_lock_takes_a_cupy_13_whose_optional_module_lacks_its_library(elf_builder, tmp_path, server, capsys, hermetic):
    """The plan is judged by the same rows: a chosen cupy-cuda12x 13 wheel whose nccl module needs an
    absent libnccl.so.2 is not refused (an info), as CuPy 14's is not."""
    python, _ = old_math_venv(elf_builder, tmp_path / "venv")
    nccl = elf_builder.build("libnccl.so.2", "int ncclGetVersion(void) { return 0; }\n", soname="libnccl.so.2",
                             directory="gone")
    module = elf_builder.build(os.path.basename(CUPY_13_OPTIONAL[0]), "int ncclGetVersion(void);\nint f(void) { return ncclGetVersion(); }\n",
                               link=[nccl], directory="wheel")
    tag = f"cp{sys.version_info[0]}{sys.version_info[1]}-cp{sys.version_info[0]}{sys.version_info[1]}-manylinux2014_x86_64"
    server.add(*make_wheel("cupy-cuda12x", "13.6.0", tag=tag, files={CUPY_13_OPTIONAL[0]: module.read_bytes()}))
    code = main(["lock", "-q", "--deep", "--driver", "550.144.03", "--gpu", "8.6", "--python", python,
                 "--index-url", server.url + "/simple", "-o", str(tmp_path / "pylock.toml"), "cupy-cuda12x"])
    out, err = capsys.readouterr()
    assert code == 0, out + err


CUPY_13_NCCL_ORACLE = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("cupy_environment", sys.argv[1] + "/cupy/_environment.py")
environment = importlib.util.module_from_spec(spec)
spec.loader.exec_module(environment)
listed = json.load(open(sys.argv[1] + "/cupy/.data/_wheel.json"))
print(json.dumps(environment._get_nccl_from_wheel(listed["nccl"]["min_pypi_version"], listed["cuda"])))
"""


@pytest.mark.parametrize("dist, version, taken", [
    ("nvidia-nccl-cu12", "2.25.1", True),
    ("nvidia-nccl-cu12", "2.15.5", False),  # older than the list's min_pypi_version, 2.16.5
    ("nvidia-nccl-cu13", "2.25.1", False),  # another CUDA major's wheel, at the same path
])
def test_cupy_13_preloads_the_nccl_wheel_its_own_list_names(unpacked, elf_builder, tmp_path, dist, version, taken):
    """cupy-cuda12x 13.6.0's nccl module has no RPATH; `cupy.cuda.nccl` preloads libnccl.so.2 from the
    NCCL wheel that its cupy/.data/_wheel.json (read from the environment, not from our data) admits.
    CuPy's own _environment.py, run on the environment, is the oracle for which wheel it takes; the
    doctor agrees: nothing to say, or the optional-feature info. The NCCL library is a gcc-built
    stand-in defining every nccl* function the real module needs."""
    dist_info = "cupy_cuda12x-13.6.0.dist-info"
    source = unpacked("cupy-cuda12x==13.6.0", [CUPY_13_OPTIONAL[0], "cupy/.data/_wheel.json", "cupy/_environment.py",
                                               f"{dist_info}/METADATA", f"{dist_info}/RECORD"])
    site = tmp_path / "site"
    shutil.copytree(source, site, ignore=shutil.ignore_patterns(".complete"))
    wanted = sorted({s.name for s in read_binary_facts(str(site / CUPY_13_OPTIONAL[0])).undefined if s.name.startswith("nccl")})
    assert "ncclCommInitRank" in wanted
    elf_builder.build("libnccl.so.2", "".join(f"int {name}(void) {{ return 0; }}\n" for name in wanted),
                      soname="libnccl.so.2", directory="site/nvidia/nccl/lib")
    make_dist_info(site, dist, version, files=("nvidia/nccl/lib/libnccl.so.2",))
    oracle = subprocess.run([sys.executable, "-c", CUPY_13_NCCL_ORACLE, str(site)], capture_output=True, text=True,
                            check=True, env={**os.environ, "PYTHONPATH": str(site)})
    assert json.loads(oracle.stdout) == ([str(site / "nvidia/nccl/lib/libnccl.so.2")] if taken else [])
    found = [f for f in judged_without_ld_so_cache(site, HOST) if f.check != "driver-floor"]  # the cu13 wheel on this host
    if taken:
        assert found == []
    else:
        assert [(f.severity, f.message) for f in found] == [
            ("info", "optional feature unavailable: NCCL (cupy.cuda.nccl, cupyx.distributed) (libnccl.so.2 not installed)")]


# -- what an import has loaded already ---------------------------------------------------------------

C10 = "int c10_core(void) { return 10; }\n"
USES_C10 = "int c10_core(void);\nint use(void) { return c10_core(); }\n"
EXT = "_ext.cpython-311-x86_64-linux-gnu.so"


@pytest.fixture
def torch_extension_env(elf_builder):
    """A torch-like package whose import loads torch/_C*.so, which finds torch/lib/libc10.so by its
    RPATH; ext-pkg's extension links libc10.so with no RPATH at all, as torchvision's do."""
    c10 = elf_builder.build("libc10.so", C10, soname="libc10.so", directory="site/torch/lib")
    torch_c = elf_builder.build("_C.cpython-311-x86_64-linux-gnu.so", USES_C10, link=[c10], rpath="$ORIGIN/lib",
                                directory="site/torch")
    extension = elf_builder.build(EXT, USES_C10, link=[c10], directory="site/ext_pkg")
    site = elf_builder.root / "site"
    make_dist_info(site, "torch", "2.14.1", files=("torch/_C.cpython-311-x86_64-linux-gnu.so", "torch/lib/libc10.so"))
    return site, torch_c, extension


def test_an_extension_finds_what_the_package_it_requires_loaded_on_import(torch_extension_env, tmp_path):
    """`import ext_pkg` imports torch first (its Requires-Dist), and torch/_C has loaded libc10.so:
    ld.so matches the DT_NEEDED to that loaded object by soname before any search path."""
    site, torch_c, extension = torch_extension_env
    make_dist_info(site, "ext-pkg", "1.0", files=(f"ext_pkg/{EXT}",), requires=("torch>=2.14",))
    diagnosis = run(site, tmp_path)
    assert [f for f in texts(diagnosis) if f.check in ("missing-library", "shadowing")] == []
    [ext] = [o for load in diagnosis.loads if load.dist == "ext-pkg" for o in load.result.objects
             if o.path == str(extension)]
    assert [(r.needed, r.path, r.step) for r in ext.needed] == [("libc10.so", f"{torch_c.parent}/lib/libc10.so",
                                                                  "preloaded")]
    # glibc: alone it fails; once torch's extension is loaded (RTLD_LOCAL, as Python imports) it loads.
    assert glibc_dlopen_error(extension) == f"libc10.so: {NO_SUCH_FILE}"
    code = "import ctypes, sys\nctypes.CDLL(sys.argv[1])\nprint(ctypes.CDLL(sys.argv[2]).use())\n"
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
    out = subprocess.run([sys.executable, "-c", code, str(torch_c), str(extension)], env=env,
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "10"


def test_what_a_package_loads_on_import_counts_through_a_package_between(torch_extension_env, tmp_path):
    """ext-pkg requires mid-pkg, which requires torch: importing ext_pkg imports torch first all the same."""
    site, _, _ = torch_extension_env
    make_dist_info(site, "mid-pkg", "1.0", requires=("torch",))
    make_dist_info(site, "ext-pkg", "1.0", files=(f"ext_pkg/{EXT}",), requires=("mid-pkg",))
    assert [f for f in texts(run(site, tmp_path)) if f.check == "missing-library"] == []


def test_a_package_whose_own_files_import_torch_undeclared_finds_what_it_loaded(torch_extension_env, tmp_path):
    """torchaudio 2.11.0 and sgl-deep-gemm list no Requires-Dist on torch, yet their __init__ imports torch
    first: the import model reads it from the package's files (env/imports.py); without that line the
    same package is the error below."""
    site, _, _ = torch_extension_env
    (site / "ext_pkg/__init__.py").write_text("import torch\nfrom . import _ext\n")
    make_dist_info(site, "ext-pkg", "1.0", files=("ext_pkg/__init__.py", f"ext_pkg/{EXT}"))
    assert [f for f in texts(run(site, tmp_path)) if f.check == "missing-library"] == []
    (site / "ext_pkg/__init__.py").write_text("from . import _ext\n")
    assert [f.severity for f in texts(run(site, tmp_path / "again")) if f.check == "missing-library"] == ["error"]


def test_without_the_requirement_nothing_imports_torch_first(torch_extension_env, tmp_path):
    site, _, extension = torch_extension_env
    make_dist_info(site, "ext-pkg", "1.0", files=(f"ext_pkg/{EXT}",))
    diagnosis = run(site, tmp_path)
    [error] = [f for f in texts(diagnosis) if f.check == "missing-library"]
    assert (error.severity, error.subject, error.message) == (
        "error", "ext-pkg 1.0", f"{EXT}: libc10.so: {NO_SUCH_FILE}")
    assert error.evidence == (
        f"{extension} needs libc10.so; the environment's copy ({site}/torch/lib/libc10.so) is not on its search path",)


def test_a_hash_renamed_private_copy_never_serves_another_package(elf_builder, tmp_path):
    """auditwheel's `a_pkg.libs/libpriv-1a2b3c4d.so.1` keeps the soname libpriv.so.1, but ld.so
    searches directories for the file name libpriv.so.1: that copy is no one else's remedy."""
    private = elf_builder.build("libpriv-1a2b3c4d.so.1", LEAF, soname="libpriv.so.1", directory="site/a_pkg.libs")
    extension = elf_builder.build(EXT, USES_LEAF, link=[private], directory="site/b_pkg")
    site = elf_builder.root / "site"
    make_dist_info(site, "a-pkg", "1.0", files=("a_pkg.libs/libpriv-1a2b3c4d.so.1",))
    make_dist_info(site, "b-pkg", "1.0", files=(f"b_pkg/{EXT}",))
    diagnosis = run(site, tmp_path)
    assert glibc_dlopen_error(extension, ld_library_path=str(private.parent)) == f"libpriv.so.1: {NO_SUCH_FILE}"
    [error] = [f for f in texts(diagnosis) if f.check == "missing-library"]
    assert error.evidence == (
        f"{extension} needs libpriv.so.1; nothing on its search path, in the environment or in the system provides it",)
    assert error.fix is None


# -- what cannot be read -----------------------------------------------------------------------------


def test_malformed_dist_info_and_unreadable_files_are_findings_not_tracebacks(elf_builder, tmp_path, capsys):
    site = elf_builder.root / "site"
    elf_builder.build("libok.so.1", LEAF, soname="libok.so.1", directory="site/norecord")
    no_record = make_dist_info(site, "norecord", "1.0", files=("norecord/libok.so.1",))
    (no_record / "RECORD").unlink()
    no_version = make_dist_info(site, "noversion", "1.0")
    (no_version / "METADATA").write_text("Metadata-Version: 2.1\nName: noversion\n\n")
    unreadable = make_dist_info(site, "unreadable", "1.0")
    (unreadable / "METADATA").unlink()
    (unreadable / "METADATA").mkdir()  # open() fails even for root
    latin1 = make_dist_info(site, "latin1", "1.0")
    (latin1 / "RECORD").write_bytes(b"caf\xe9/__init__.py,,\n")
    bad_requires = make_dist_info(site, "badreq", "1.0", requires=("not a requirement!!",))
    broken = site / "broken" / "libbroken.so"
    broken.parent.mkdir()
    broken.write_bytes(b"\x7fELF" + b"\x00" * 12)

    code = main(["doctor", "--site-packages", str(site), "--json", "--driver", "550.144.03", "--gpu", "8.6"])
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    found = [(f["check"], f["severity"], f["subject"], f["message"]) for f in json.loads(out)["findings"]]
    reasons = {
        str(bad_requires): "unparsable Requires-Dist 'not a requirement!!' skipped",
        str(broken): f"cannot read its binary facts: {broken}: truncated ELF header (16 of 64 bytes)",
        str(latin1): "RECORD is not UTF-8 (byte 3); its files count as unowned",
        str(no_record): "RECORD is missing; its files count as unowned",
        str(no_version): "METADATA has no Version",
        str(unreadable): "METADATA is unreadable: Is a directory",
    }
    assert found == [("environment", "warning", path, reason) for path, reason in sorted(reasons.items())]
    # norecord's library is still loaded and judged, as a file no distribution owns.
    assert [lib["package"] for lib in json.loads(out)["libraries"]] == [None]


def test_a_library_for_another_machine_is_reported_not_fatal(elf_builder, tmp_path):
    library = elf_builder.build("libarm.so.1", LEAF, soname="libarm.so.1", directory="site/d_pkg")
    data = bytearray(library.read_bytes())
    data[18:20] = (183).to_bytes(2, "little")  # e_machine = EM_AARCH64
    library.write_bytes(bytes(data))
    site = elf_builder.root / "site"
    make_dist_info(site, "d-pkg", "1.0", files=("d_pkg/libarm.so.1",))
    diagnosis = run(site, tmp_path)
    assert texts(diagnosis) == (
        FindingText("environment", "warning", str(library),
                "built for aarch64: this machine's loader cannot load it, so it was not checked",
                ("installed by d-pkg 1.0",)),
    )


def test_a_file_the_loader_refuses_stops_the_search(foo_env, tmp_path):
    site, consumer, _ = foo_env
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "libfoo.so.1").write_bytes(b"/* linker script */\n" * 8)
    diagnosis = run(site, tmp_path, ld_library_path=str(bad))
    assert glibc_dlopen_error(consumer, str(bad)) == f"{bad}/libfoo.so.1: invalid ELF header"
    assert by_check(diagnosis) == [
        ("missing-library", "error", "consumer-pkg 1.0"),
        ("shadowing", "warning", "libfoo.so.1"),
    ]
    assert texts(diagnosis)[0] == FindingText(
        "missing-library",
        "error",
        "consumer-pkg 1.0",
        f"libconsumer.so: {bad}/libfoo.so.1: invalid ELF header",
        (f"{consumer} needs libfoo.so.1; the loader finds {bad}/libfoo.so.1 first (LD_LIBRARY_PATH) and cannot "
         "load it",),
        None,
    )


def test_one_build_vendored_by_two_distributions_is_not_a_duplicate(elf_builder, tmp_path):
    """numpy.libs and scipy.libs carry the same libgfortran build: whichever loads first, it is the same code."""
    elf_builder.build("libdup.so.1", LEAF, soname="libdup.so.1", directory="site/a_pkg/lib")
    elf_builder.build("libdup.so.1", LEAF, soname="libdup.so.1", directory="site/b_pkg/libs")
    site = elf_builder.root / "site"
    make_dist_info(site, "a-pkg", "1.0", files=("a_pkg/lib/libdup.so.1",))
    make_dist_info(site, "b-pkg", "2.0", files=("b_pkg/libs/libdup.so.1",))
    assert texts(run(site, tmp_path)) == ()


def test_cuda_core_tensor_bridge_without_torch_is_an_unused_bridge(unpacked, tmp_path):
    """cuda-core's _tensor_bridge extensions take torch's aoti_torch_* symbols from the process (no
    DT_NEEDED): without torch they are never imported, so no symbol-skew, one info per build."""
    site = unpacked("cuda-core==1.2.2")
    diagnosis = run(site, tmp_path)
    assert [f for f in texts(diagnosis) if f.check == "symbol-skew"] == []
    bridges = [f for f in texts(diagnosis) if f.check == "bridge"]
    assert [(f.severity, f.subject) for f in bridges] == [("info", "cuda-core 1.2.2")] * 2
    assert all("binds 25 symbols of torch, which is not installed" in f.message for f in bridges)
    # glibc: the bridge cannot load on its own (no DT_NEEDED provides aoti_torch_*), only once torch is loaded
    bridge = site / "cuda/core/cu12/_tensor_bridge.cpython-311-x86_64-linux-gnu.so"
    assert "undefined symbol: aoti_torch_" in glibc_dlopen_error(bridge)
