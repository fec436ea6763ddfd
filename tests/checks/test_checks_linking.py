"""The linking checks on plain data: one row per problem kind, each a planned environment of a few
libraries (no files on disk), the check that reports it, and the findings it must give.

test_doctor_synthetic.py holds the same situations as gcc-built files checked against glibc."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable, Mapping, Optional, Union

import pytest
from test_checks_planned import PLANNED, dist, planned, so
from test_doctor_synthetic import HOST

from cudaresolve.binary.elf import ElfError
from cudaresolve.binary.facts import BinaryFacts, Symbol, VersionNeed
from cudaresolve.binary.loader import LoaderEnv
from cudaresolve.checks.linking import (
    check_foreign_files,
    check_missing_libraries,
    check_plugin_libraries,
    check_shadowing,
    check_symbol_skew,
)
from cudaresolve.checks.loading import load_packages
from cudaresolve.env.environment import ElfFile, Environment
from cudaresolve.output.findings import shown

NO_FILE = "cannot open shared object file: No such file or directory"
SP = PLANNED
NVJITLINK = f"{SP}/nvidia/nvjitlink/lib/libnvJitLink.so.12"
CUSPARSE = f"{SP}/nvidia/cusparse/lib/libcusparse.so.12"
EXT = f"{SP}/pkg/_ext.so"


@dataclass
class Case:
    """Files as {path: (owner, facts)}; `system` answers the loader for paths outside the environment."""

    files: Mapping[str, tuple[Optional[str], BinaryFacts]]
    dists: tuple = ()
    system: Mapping[str, Union[BinaryFacts, Exception]] = field(default_factory=dict)
    ld_library_path: tuple[str, ...] = ()
    headers: Mapping[str, bytes] = field(default_factory=dict)

    def environment(self) -> Environment:
        def system_facts(path: str) -> Optional[BinaryFacts]:
            answer = self.system.get(path)
            if isinstance(answer, Exception):
                raise answer
            return answer

        env = planned(*self.dists, elf_files=tuple(
            ElfFile(path, (owner,) if owner else (), facts, None) for path, (owner, facts) in self.files.items()
        ))
        loader = LoaderEnv(machine="x86_64", ld_library_path=self.ld_library_path, default_dirs=("/nowhere",),
                           real_path=lambda p: p, read_header=self.headers.get)
        return Environment(env.target, env.distributions, env.elf_files, loader=loader, system_facts=system_facts)


def nvjitlink(version_definitions=("libnvJitLink.so.12",), defined=("__nvJitLinkComplete_12_0",)) -> BinaryFacts:
    return so(NVJITLINK, soname="libnvJitLink.so.12", version_definitions=version_definitions,
              defined=tuple(Symbol(name, "libnvJitLink.so.12") for name in defined))


CUSPARSE_NEEDS_12_4 = so(
    CUSPARSE, soname="libcusparse.so.12", needed=("libnvJitLink.so.12",), runpath=("$ORIGIN/../../nvjitlink/lib",),
    undefined=(Symbol("__nvJitLinkComplete_12_4", "libnvJitLink.so.12", "libnvJitLink.so.12"),),
    version_needs=(VersionNeed("libnvJitLink.so.12", ("libnvJitLink.so.12",)),),
)
SKEW = Case(
    files={CUSPARSE: ("nvidia-cusparse-cu12", CUSPARSE_NEEDS_12_4), NVJITLINK: ("nvidia-nvjitlink-cu12", nvjitlink())},
    dists=(dist("nvidia-cusparse-cu12", "12.3.1.170", "nvidia-nvjitlink-cu12"), dist("nvidia-nvjitlink-cu12", "12.1.105")),
)
MISSING_VERSION = Case(
    files={
        EXT: ("pkg", so(EXT, needed=("libfoo.so.1",), runpath=("$ORIGIN/lib",),
                        undefined=(Symbol("foo_new", "FOO_2.0", "libfoo.so.1"),),
                        version_needs=(VersionNeed("libfoo.so.1", ("FOO_2.0",)),))),
        f"{SP}/pkg/lib/libfoo.so.1": ("pkg", so(f"{SP}/pkg/lib/libfoo.so.1", soname="libfoo.so.1",
                                                  version_definitions=("libfoo.so.1", "FOO_1.0"))),
    },
    dists=(dist("pkg", "1.0"),),
)
MISSING = Case(files={EXT: ("pkg", so(EXT, needed=("libcublas.so.12",)))}, dists=(dist("pkg", "1.0"),))
OLD_PROVIDER = f"{SP}/onnxruntime/capi/libonnxruntime_providers_cuda.so"
CUDA_11_PROVIDER = Case(  # onnxruntime-gpu 1.18's provider: CUDA 11 runtime, cuRAND, cuDNN 8, no RUNPATH to wheels
    files={OLD_PROVIDER: ("onnxruntime-gpu", so(OLD_PROVIDER, needed=("libcudart.so.11.0", "libcurand.so.10", "libcudnn.so.8")))},
    dists=(dist("onnxruntime-gpu", "1.18.1"),))
OFF_PATH = Case(
    files={EXT: ("pkg", so(EXT, needed=("libfoo.so.1",))),
           f"{SP}/other/libfoo.so.1": ("other", so(f"{SP}/other/libfoo.so.1", soname="libfoo.so.1"))},
    dists=(dist("pkg", "1.0"), dist("other", "2.0")),
)
CUPY_EXT = f"{SP}/cupy/cuda/nccl.cpython-311-x86_64-linux-gnu.so"
CUPY_OPTIONAL = Case(files={CUPY_EXT: ("cupy-cuda12x", so(CUPY_EXT, needed=("libnccl.so.2",)))},
                     dists=(dist("cupy-cuda12x", "14.2.0"),))
CUPY_TENSOR = f"{SP}/cupy/cutensor.cpython-311-x86_64-linux-gnu.so"
CUPY_OPTIONALS = Case(  # cupy-cuda12x[ctk] installs neither NCCL nor cuTENSOR: one cause, one finding
    files={CUPY_EXT: ("cupy-cuda12x", so(CUPY_EXT, needed=("libnccl.so.2",))),
           CUPY_TENSOR: ("cupy-cuda12x", so(CUPY_TENSOR, needed=("libcutensor.so.2", "libcutensorMg.so.2")))},
    dists=(dist("cupy-cuda12x", "14.2.0"),),
)
TBBPOOL = f"{SP}/numba/np/ufunc/tbbpool.cpython-311-x86_64-linux-gnu.so"
NUMBA_WITHOUT_TBB = Case(files={TBBPOOL: ("numba", so(TBBPOOL, needed=("libtbb.so.12",)))}, dists=(dist("numba", "0.62.1"),))
PLUGIN = f"{SP}/nvidia/nvshmem/lib/nvshmem_transport_ibrc.so.3"
PLUGINS = Case(files={PLUGIN: ("nvidia-nvshmem-cu12", so(PLUGIN, needed=("libibverbs.so.1", "libmlx5.so.1")))},
               dists=(dist("nvidia-nvshmem-cu12", "3.4.5"),))
REFUSED = Case(
    files={EXT: ("pkg", so(EXT, needed=("libfoo.so.1",)))}, dists=(dist("pkg", "1.0"),), ld_library_path=("/bad",),
    system={"/bad/libfoo.so.1": ElfError("/bad/libfoo.so.1: not an ELF file (no \\x7fELF magic)")},
    headers={"/bad/libfoo.so.1": b"INPUT(-lfoo)\n" + bytes(64)},
)
FOREIGN = Case(files={EXT: ("pkg", BinaryFacts(**{**so(EXT).__dict__, "machine": "aarch64"}))},
               dists=(dist("pkg", "1.0"),))
SHADOWED = Case(
    files={CUSPARSE: ("nvidia-cusparse-cu12", CUSPARSE_NEEDS_12_4),
           NVJITLINK: ("nvidia-nvjitlink-cu12", nvjitlink(defined=("__nvJitLinkComplete_12_4",)))},
    dists=SKEW.dists, ld_library_path=("/opt/cuda/lib64",),
    system={"/opt/cuda/lib64/libnvJitLink.so.12": so("/opt/cuda/lib64/libnvJitLink.so.12",
                                                      soname="libnvJitLink.so.12",
                                                      defined=(Symbol("__nvJitLinkComplete_12_4", "libnvJitLink.so.12"),),
                                                      version_definitions=("libnvJitLink.so.12",))},
)

OLD_NVJITLINK = "/opt/cuda-12.1/lib64/libnvJitLink.so.12"
STALE_ON_LD_LIBRARY_PATH = Case(  # the wheel's nvJitLink has the 12.4 symbols; an older one comes first
    files=SHADOWED.files, dists=SKEW.dists, ld_library_path=("/opt/cuda-12.1/lib64",),
    system={OLD_NVJITLINK: so(OLD_NVJITLINK, soname="libnvJitLink.so.12", version_definitions=("libnvJitLink.so.12",),
                              defined=(Symbol("__nvJitLinkComplete_12_0", "libnvJitLink.so.12"),))},
)
NEW_ENOUGH = (dist("nvidia-cusparse-cu12", "12.3.1.170", "nvidia-nvjitlink-cu12"), dist("nvidia-nvjitlink-cu12", "12.8.93"))
CUSPARSE_NO_RUNPATH = BinaryFacts(**{**CUSPARSE_NEEDS_12_4.__dict__, "runpath": ()})
FROM_THE_CACHE = Case(  # the wheel's copy is not on cuSPARSE's search path; the system's old one is
    files={CUSPARSE: ("nvidia-cusparse-cu12", CUSPARSE_NO_RUNPATH),
           NVJITLINK: ("nvidia-nvjitlink-cu12", nvjitlink(defined=("__nvJitLinkComplete_12_4",)))},
    dists=NEW_ENOUGH,
    system={"/nowhere/libnvJitLink.so.12": STALE_ON_LD_LIBRARY_PATH.system[OLD_NVJITLINK]},
)

BRIDGE = f"{SP}/cuda/core/cu12/_tensor_bridge.cpython-311-x86_64-linux-gnu.so"
LIBTORCH = f"{SP}/torch/lib/libtorch_cpu.so"
BRIDGE_FACTS = so(BRIDGE, undefined=(Symbol("aoti_torch_dtype_bool"), Symbol("aoti_torch_device_type_cuda")))
BRIDGE_WITHOUT_TORCH = Case(files={BRIDGE: ("cuda-core", BRIDGE_FACTS)}, dists=(dist("cuda-core", "1.2.2"),))


def with_torch(*exported: str) -> Case:
    return Case(files={BRIDGE: ("cuda-core", BRIDGE_FACTS),
                       LIBTORCH: ("torch", so(LIBTORCH, soname="libtorch_cpu.so",
                                              defined=tuple(Symbol(name) for name in exported)))},
                dists=(dist("cuda-core", "1.2.2"), dist("torch", "2.14.1")))


SYSTEM_CUDART = "/usr/local/cuda-12.4/lib64/libcudart.so.12"
WHEEL_CUDART = f"{SP}/nvidia/cuda_runtime/lib/libcudart.so.12"
TOOLKIT_FIRST = Case(  # one library's RPATH names a system toolkit; the next one gets that copy too
    files={f"{SP}/pkg/a.so": ("pkg", so(f"{SP}/pkg/a.so", needed=("libcudart.so.12",))),
           f"{SP}/pkg/b.so": ("pkg", so(f"{SP}/pkg/b.so", needed=("libcudart.so.12",),
                                        runpath=("$ORIGIN/../nvidia/cuda_runtime/lib",))),
           WHEEL_CUDART: ("nvidia-cuda-runtime-cu12", so(WHEEL_CUDART, soname="libcudart.so.12"))},
    dists=(dist("pkg", "1.0"), dist("nvidia-cuda-runtime-cu12", "12.4.127")),
    system={SYSTEM_CUDART: so(SYSTEM_CUDART, soname="libcudart.so.12")},
)
TOOLKIT_FIRST.files[f"{SP}/pkg/a.so"] = ("pkg", BinaryFacts(**{**TOOLKIT_FIRST.files[f"{SP}/pkg/a.so"][1].__dict__,
                                                               "rpath": ("/usr/local/cuda-12.4/lib64",)}))

MISSING_LIBRARIES = functools.partial(check_missing_libraries, host=HOST)

ROWS = [
    pytest.param(SKEW, check_symbol_skew, [(
        "symbol-skew", "error", "nvidia-cusparse-cu12 12.3.1.170",
        "libcusparse.so.12: undefined symbol: __nvJitLinkComplete_12_4, version libnvJitLink.so.12",
        (f"{CUSPARSE}: undefined symbol: __nvJitLinkComplete_12_4, version libnvJitLink.so.12",
         f"the loader picks {SP}/nvidia/cusparse/lib/../../nvjitlink/lib/libnvJitLink.so.12 (runpath)"),
        'pip install "nvidia-nvjitlink-cu12>=12.4"',
    )], id="undefined-versioned-symbol"),
    pytest.param(MISSING_VERSION, check_symbol_skew, [(
        "symbol-skew", "error", "pkg 1.0",
        f"libfoo.so.1: version `FOO_2.0' not found (required by {EXT})",
        (f"{SP}/pkg/lib/libfoo.so.1: version `FOO_2.0' not found (required by {EXT})",
         f"{EXT}: undefined symbol: foo_new, version FOO_2.0",
         f"the loader picks {SP}/pkg/lib/libfoo.so.1 (runpath)"),
        None,
    )], id="missing-version"),
    pytest.param(MISSING, MISSING_LIBRARIES, [(
        "missing-library", "error", "pkg 1.0", f"_ext.so: libcublas.so.12: {NO_FILE}",
        (f"{EXT} needs libcublas.so.12; nothing on its search path, in the environment or in the system provides it",),
        # no RUNPATH to the wheel's directory and no preloader: installing alone would change nothing
        f'pip install "nvidia-cublas-cu12", then put {SP}/nvidia/cublas/lib on LD_LIBRARY_PATH',
    )], id="missing-library"),
    pytest.param(CUDA_11_PROVIDER, MISSING_LIBRARIES, [
        ("missing-library", "error", "onnxruntime-gpu 1.18.1", f"libonnxruntime_providers_cuda.so: {name}: {NO_FILE}",
         (f"{OLD_PROVIDER} needs {name}; nothing on its search path, in the environment or in the system provides it",),
         f'pip install "{wheel}", then put {SP}/{directory} on LD_LIBRARY_PATH')
        for name, wheel, directory in (
            # the provider's CUDA 11 runtime names the major (before: CUDA 13's nvidia-curand came first)
            ("libcudart.so.11.0", "nvidia-cuda-runtime-cu11", "nvidia/cuda_runtime/lib"),
            ("libcurand.so.10", "nvidia-curand-cu11", "nvidia/curand/lib"),
            ("libcudnn.so.8", "nvidia-cudnn-cu11<9", "nvidia/cudnn/lib"),  # the newest, 9.x, holds libcudnn.so.9 only
        )
    ], id="fix-takes-the-consumers-cuda-major-and-the-releases-with-the-soname"),
    pytest.param(OFF_PATH, MISSING_LIBRARIES, [(
        "missing-library", "error", "pkg 1.0", f"_ext.so: libfoo.so.1: {NO_FILE}",
        (f"{EXT} needs libfoo.so.1; the environment's copy ({SP}/other/libfoo.so.1) is not on its search path",),
        f"other has it, but not where _ext.so looks: put {SP}/other on LD_LIBRARY_PATH, or install a release of its "
        "package that finds it",
    )], id="copy-off-the-search-path"),
    pytest.param(CUPY_OPTIONAL, MISSING_LIBRARIES, [(
        "missing-library", "info", "cupy-cuda12x 14.2.0",
        "optional feature unavailable: NCCL (cupy.cuda.nccl, cupyx.distributed) (libnccl.so.2 not installed)",
        (f"{CUPY_EXT}: libnccl.so.2: {NO_FILE}",),
        'to enable: pip install "nvidia-nccl-cu12"',
    )], id="optional-layer"),
    pytest.param(CUPY_OPTIONALS, MISSING_LIBRARIES, [(
        "missing-library", "info", "cupy-cuda12x 14.2.0",
        "optional features unavailable: NCCL (cupy.cuda.nccl, cupyx.distributed); cuTENSOR routines (cupyx.cutensor) "
        "(libcutensor.so.2, libcutensorMg.so.2, libnccl.so.2 not installed)",
        (f"{CUPY_EXT}: libnccl.so.2: {NO_FILE}", f"{CUPY_TENSOR}: libcutensor.so.2: {NO_FILE}",
         f"{CUPY_TENSOR}: libcutensorMg.so.2: {NO_FILE}"),
        'to enable: pip install "nvidia-nccl-cu12" "cutensor-cu12"',
    )], id="optional-layers-one-finding"),
    pytest.param(NUMBA_WITHOUT_TBB, MISSING_LIBRARIES, [(
        "missing-library", "info", "numba 0.62.1",
        "optional feature unavailable: TBB threading layer (numba falls back to OpenMP or its workqueue) "
        "(libtbb.so.12 not installed)",
        (f"{TBBPOOL}: libtbb.so.12: {NO_FILE}",),
        'to enable: pip install "tbb"',
    )], id="numba-without-tbb"),
    pytest.param(Case(files=NUMBA_WITHOUT_TBB.files, dists=(dist("numba", "0.56.4"),)), MISSING_LIBRARIES, [(
        "missing-library", "error", "numba 0.56.4", f"tbbpool.cpython-311-x86_64-linux-gnu.so: libtbb.so.12: {NO_FILE}",
        (f"{TBBPOOL} needs libtbb.so.12; nothing on its search path, in the environment or in the system provides it",),
        None,
    )], id="an-optional-layer-only-for-the-releases-data-names"),
    pytest.param(PLUGINS, check_plugin_libraries, [(
        "missing-library", "info", "nvidia-nvshmem-cu12 3.4.5",
        "1 plugin library loads only on demand and needs libraries that are not on their search path "
        "(libibverbs.so.1, libmlx5.so.1); the features they provide are unavailable here",
        ("nvshmem_transport_ibrc.so.3 needs libibverbs.so.1, libmlx5.so.1",),
        None,
    )], id="plugin"),
    pytest.param(PLUGINS, MISSING_LIBRARIES, [], id="plugin-is-not-an-error"),
    pytest.param(REFUSED, MISSING_LIBRARIES, [(
        "missing-library", "error", "pkg 1.0", "_ext.so: /bad/libfoo.so.1: invalid ELF header",
        (f"{EXT} needs libfoo.so.1; the loader finds /bad/libfoo.so.1 first (LD_LIBRARY_PATH) and cannot load it",),
        None,
    )], id="refused-file"),
    pytest.param(FOREIGN, check_foreign_files, [(
        "environment", "warning", EXT, "built for aarch64: this machine's loader cannot load it, so it was not checked",
        ("installed by pkg 1.0",), None,
    )], id="foreign-machine"),
    pytest.param(SHADOWED, check_shadowing, [(
        "shadowing", "warning", "libnvJitLink.so.12",
        "LD_LIBRARY_PATH makes the loader pick /opt/cuda/lib64/libnvJitLink.so.12 for libcusparse.so.12, "
        "not the environment's copy from nvidia-nvjitlink-cu12",
        (f"{CUSPARSE} needs libnvJitLink.so.12: chosen /opt/cuda/lib64/libnvJitLink.so.12 (LD_LIBRARY_PATH)",
         f"environment copy: {NVJITLINK}"),
        "remove the stale directory from LD_LIBRARY_PATH",
    )], id="shadowed-by-ld-library-path"),
    pytest.param(SHADOWED, check_symbol_skew, [], id="shadowing-copy-binds"),
    pytest.param(TOOLKIT_FIRST, check_shadowing, [(
        "shadowing", "warning", "libcudart.so.12",
        f"the RPATH of {SP}/pkg/a.so makes the loader pick {SYSTEM_CUDART} for a.so, not the environment's copy "
        "from nvidia-cuda-runtime-cu12",
        (f"{SP}/pkg/a.so needs libcudart.so.12: chosen {SYSTEM_CUDART} (rpath)", f"environment copy: {WHEEL_CUDART}"),
        "make the package find its wheel's copy (fix its RPATH or the preload order)",
    ), (
        "shadowing", "warning", "libcudart.so.12",
        f"a copy another library of the package loaded first makes the loader pick {SYSTEM_CUDART} for b.so, not "
        "the environment's copy from nvidia-cuda-runtime-cu12",
        (f"{SP}/pkg/b.so needs libcudart.so.12: chosen {SYSTEM_CUDART} (already loaded)",
         f"environment copy: {WHEEL_CUDART}"),
        "make the package find its wheel's copy (fix its RPATH or the preload order)",
    )], id="shadowed-by-a-system-toolkit-on-an-rpath-then-already-loaded"),
    pytest.param(BRIDGE_WITHOUT_TORCH, check_symbol_skew, [(
        "bridge", "info", "cuda-core 1.2.2",
        "bridge unused: _tensor_bridge.cpython-311-x86_64-linux-gnu.so binds 2 symbols of torch, which is not "
        "installed; it is imported only with torch",
        (f"{BRIDGE} needs aoti_torch_device_type_cuda, aoti_torch_dtype_bool, which torch defines",),
        None,
    )], id="bridge-to-an-absent-package"),
    pytest.param(with_torch("aoti_torch_dtype_bool", "aoti_torch_device_type_cuda"), check_symbol_skew, [],
                 id="bridge-to-an-installed-package-that-defines-the-symbols"),
    pytest.param(with_torch("aoti_torch_dtype_bool"), check_symbol_skew, [(
        "symbol-skew", "error", "cuda-core 1.2.2",
        "_tensor_bridge.cpython-311-x86_64-linux-gnu.so: undefined symbol: aoti_torch_device_type_cuda",
        (f"{BRIDGE}: undefined symbol: aoti_torch_device_type_cuda",),
        None,
    )], id="bridge-to-an-installed-package-that-lacks-one"),
    pytest.param(STALE_ON_LD_LIBRARY_PATH, check_symbol_skew, [(
        "symbol-skew", "error", "nvidia-cusparse-cu12 12.3.1.170",
        "libcusparse.so.12: undefined symbol: __nvJitLinkComplete_12_4, version libnvJitLink.so.12",
        (f"{CUSPARSE}: undefined symbol: __nvJitLinkComplete_12_4, version libnvJitLink.so.12",
         f"the loader picks {OLD_NVJITLINK} (LD_LIBRARY_PATH)"),
        "remove /opt/cuda-12.1/lib64 from LD_LIBRARY_PATH: the loader takes its libnvJitLink.so.12 first",
    )], id="fix-names-ld-library-path-not-an-installed-wheel"),
    pytest.param(FROM_THE_CACHE, check_symbol_skew, [(
        "symbol-skew", "error", "nvidia-cusparse-cu12 12.3.1.170",
        "libcusparse.so.12: undefined symbol: __nvJitLinkComplete_12_4, version libnvJitLink.so.12",
        (f"{CUSPARSE}: undefined symbol: __nvJitLinkComplete_12_4, version libnvJitLink.so.12",
         "the loader picks /nowhere/libnvJitLink.so.12 (default dir)"),
        f"nvidia-nvjitlink-cu12 12.8.93 ({NVJITLINK}) has what libcusparse.so.12 needs, but the loader picks "
        # removing that copy would leave libcusparse.so.12 finding none: it does not look in the wheel's directory
        f"/nowhere/libnvJitLink.so.12 (default dir) first: put {SP}/nvidia/nvjitlink/lib first on LD_LIBRARY_PATH",
    )], id="fix-never-installs-what-is-installed"),
]


@pytest.mark.parametrize("case, check, expected", ROWS)
def test_linking_check(case: Case, check: Callable, expected):
    env = case.environment()
    found = [tuple(shown(f)) for f in check(env, load_packages(env))]
    assert found == expected
