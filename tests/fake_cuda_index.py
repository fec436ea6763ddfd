"""A generated CUDA package universe served on 127.0.0.1, for resolver tests (the real PyTorch index is
not reachable from the test machines).

Small wheels with real metadata shapes and small real ELF payloads: torch variant wheels whose
`torch/lib/libtorch_cuda.so` carries a `.nv_fatbin` with SASS/PTX for exactly the variant's arch list
and binds versioned CUDA symbols; NVIDIA component wheels whose libraries have the real sonames and
version nodes (nvJitLink 12.X defines `__nvJitLinkComplete_12_0 ... _12_X`; cuSPARSE binds the
nvJitLink minor of its own CUDA release). Torch releases, variants, pins and arch lists come from
data/torch.toml, CuPy from data/cupy.toml, sonames and directories from data/components.toml; what
data/ does not hold (cuda-toolkit extras, the pure-Python leaves) is in the tables below, copied from
real METADATA. Built once per input hash into the test cache; stdlib and packaging only.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from fatbin_bytes import container, cubin, entry, ptx
from index_server import IndexServer, make_wheel
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.tags import sys_tags
from packaging.utils import canonicalize_name
from packaging.version import Version

from cudaresolve.knowledge import components, cupy, torch

HERE = Path(__file__).parent
SIMPLE = "simple"

# Torch: these patch releases plus the newest patch of the two newest series in data/torch.toml.
TORCH_VERSIONS = ("2.7.1", "2.8.0")
# The pure-Python part of torch's Requires-Dist (real METADATA of 2.7.1 / 2.8.0 and of 2.14.1).
TORCH_BASE = {
    "<2.14": ("filelock", "typing-extensions>=4.10.0", 'setuptools; python_version >= "3.12"', "sympy>=1.13.3",
              "networkx", "jinja2", "fsspec"),
    ">=2.14": ("filelock", "typing-extensions>=4.10.0", "setuptools>=77.0.3", "sympy>=1.13.3", "networkx>=2.5.1",
               "jinja2", "fsspec>=0.8.5"),
}
# torchvision releases built for these torch releases, one per variant the torch release has (real
# torchvision pins torch==X exactly: 0.29.1 Requires-Dist torch==2.14.1).
TORCHVISION = {"2.14.1": "0.29.1"}
# xformers 0.0.35 as plain pip installs it beside torch 2.14.1: pins torch==2.14.1 and its _C.so is a
# CUDA 12 build (links libcudart.so.12; sm_75, sm_80, sm_90a and compute_80, read from the real wheel)
# although torch 2.14.1's default build is CUDA 13.0.
XFORMERS = ("0.0.35", "2.14.1", 12, (75, 80, 90), 80)
# Requirements pinned nowhere in those torch releases that scenarios need (the cuSPARSE 12.3 +
# nvJitLink 12.1 skew; older and newer nvJitLinks).
EXTRA_COMPONENTS = ("nvidia-nvjitlink-cu12==12.1.105", "nvidia-nvjitlink-cu12==12.4.127",
                    "nvidia-nvjitlink-cu12==12.8.93", "nvidia-nvjitlink-cu12==12.9.86",
                    "nvidia-cusparse-cu12==12.3.1.170", "nvidia-cuda-nvrtc-cu12==12.4.127")

# cuda-toolkit metapackage releases: extra -> requirements (METADATA of the real wheels; only the extras
# the universe's requirements name). 13.x extras pull companions (cublas -> nvrtc, ...).
_CT12 = "sys_platform == 'linux' or sys_platform == 'win32'"
_CT13 = "sys_platform == 'linux' and platform_machine == 'x86_64' or sys_platform == 'linux' and platform_machine == 'aarch64'"
CUDA_TOOLKIT: dict[str, tuple[str, dict[str, tuple[str, ...]]]] = {
    "12.4.1": (_CT12, {  # the pins data/toolkit_pins.toml records for 12.4.1
        "cublas": ("nvidia-cublas-cu12==12.4.5.8.*",), "cudart": ("nvidia-cuda-runtime-cu12==12.4.127.*",),
        "cufft": ("nvidia-cufft-cu12==11.2.1.3.*",), "cupti": ("nvidia-cuda-cupti-cu12==12.4.127.*",),
        "curand": ("nvidia-curand-cu12==10.3.5.147.*",), "cusolver": ("nvidia-cusolver-cu12==11.6.1.9.*",),
        "cusparse": ("nvidia-cusparse-cu12==12.3.1.170.*",), "nvjitlink": ("nvidia-nvjitlink-cu12==12.4.127.*",),
        "nvrtc": ("nvidia-cuda-nvrtc-cu12==12.4.127.*",), "nvtx": ("nvidia-nvtx-cu12==12.4.127.*",),
        "nvcc": ("nvidia-cuda-nvcc-cu12==12.4.131.*",),
    }),
    "12.6.3": (_CT12, {
        "cublas": ("nvidia-cublas-cu12==12.6.4.1.*",), "cudart": ("nvidia-cuda-runtime-cu12==12.6.77.*",),
        "cufft": ("nvidia-cufft-cu12==11.3.0.4.*",), "cufile": ("nvidia-cufile-cu12==1.11.1.6.*",),
        "cupti": ("nvidia-cuda-cupti-cu12==12.6.80.*",), "curand": ("nvidia-curand-cu12==10.3.7.77.*",),
        "cusolver": ("nvidia-cusolver-cu12==11.7.1.2.*",), "cusparse": ("nvidia-cusparse-cu12==12.5.4.2.*",),
        "nvjitlink": ("nvidia-nvjitlink-cu12==12.6.85.*",), "nvrtc": ("nvidia-cuda-nvrtc-cu12==12.6.85.*",),
        "nvtx": ("nvidia-nvtx-cu12==12.6.77.*",), "nvcc": ("nvidia-cuda-nvcc-cu12==12.6.85.*",),
    }),
    "12.9.1": (_CT12, {
        "cublas": ("nvidia-cublas-cu12==12.9.1.4.*",), "cudart": ("nvidia-cuda-runtime-cu12==12.9.79.*",),
        "cufft": ("nvidia-cufft-cu12==11.4.1.4.*",), "cufile": ("nvidia-cufile-cu12==1.14.1.1.*",),
        "cupti": ("nvidia-cuda-cupti-cu12==12.9.79.*",), "curand": ("nvidia-curand-cu12==10.3.10.19.*",),
        "cusolver": ("nvidia-cusolver-cu12==11.7.5.82.*",), "cusparse": ("nvidia-cusparse-cu12==12.5.10.65.*",),
        "nvjitlink": ("nvidia-nvjitlink-cu12==12.9.86.*",), "nvrtc": ("nvidia-cuda-nvrtc-cu12==12.9.86.*",),
        "nvtx": ("nvidia-nvtx-cu12==12.9.79.*",), "nvcc": ("nvidia-cuda-nvcc-cu12==12.9.86.*",),
    }),
    "13.0.3.0": (_CT13, {
        "cublas": ("nvidia-cublas==13.1.1.3.*", "nvidia-cuda-nvrtc==13.0.88.*"),
        "cudart": ("nvidia-cuda-runtime==13.0.96.*",),
        "cufft": ("nvidia-cufft==12.0.0.61.*", "nvidia-nvjitlink<14,>=13.0.88"),
        "cufile": ("nvidia-cufile==1.15.1.6.*",), "cupti": ("nvidia-cuda-cupti==13.0.85.*",),
        "curand": ("nvidia-curand==10.4.0.35.*",),
        "cusolver": ("nvidia-cublas==13.1.1.3.*", "nvidia-cusolver==12.0.4.66.*", "nvidia-cusparse==12.6.3.3.*",
                     "nvidia-nvjitlink<14,>=13.0.88"),
        "cusparse": ("nvidia-cusparse==12.6.3.3.*", "nvidia-nvjitlink<14,>=13.0.88"),
        "nvjitlink": ("nvidia-nvjitlink<14,>=13.0.88",), "nvrtc": ("nvidia-cuda-nvrtc==13.0.88.*",),
        "nvtx": ("nvidia-nvtx==13.0.85.*",),
        "nvcc": ("nvidia-cuda-crt==13.0.88.*", "nvidia-cuda-nvcc==13.0.88.*", "nvidia-cuda-runtime==13.0.96.*",
                 "nvidia-nvvm==13.0.88.*"),
        "nvvm": ("nvidia-nvvm==13.0.88.*",),
    }),
    "13.2.2": (_CT13, {
        "cublas": ("nvidia-cublas==13.4.1.3.*", "nvidia-cuda-nvrtc==13.2.86.*"),
        "cudart": ("nvidia-cuda-runtime==13.2.86.*",),
        "cufft": ("nvidia-cufft==12.2.0.57.*", "nvidia-nvjitlink<14,>=13.2.86"),
        "cufile": ("nvidia-cufile==1.17.1.22.*",), "cupti": ("nvidia-cuda-cupti==13.2.86.*",),
        "curand": ("nvidia-curand==10.4.2.66.*",),
        "cusolver": ("nvidia-cublas==13.4.1.3.*", "nvidia-cusolver==12.2.0.11.*", "nvidia-cusparse==12.7.10.12.*",
                     "nvidia-nvjitlink<14,>=13.2.86"),
        "cusparse": ("nvidia-cusparse==12.7.10.12.*", "nvidia-nvjitlink<14,>=13.2.86"),
        "nvjitlink": ("nvidia-nvjitlink<14,>=13.2.86",), "nvrtc": ("nvidia-cuda-nvrtc==13.2.86.*",),
        "nvtx": ("nvidia-nvtx==13.2.86.*",),
        "nvcc": ("nvidia-cuda-crt==13.2.86.*", "nvidia-cuda-nvcc==13.2.86.*", "nvidia-cuda-runtime==13.2.86.*",
                 "nvidia-nvvm==13.2.86.*"),
        "nvvm": ("nvidia-nvvm==13.2.86.*",),
    }),
}

# Requires-Dist of CUDA 12 / 13 NVIDIA component wheels, by component (real METADATA: nvidia-cusparse-cu12
# 12.3.1.170, nvidia-cusolver 12.0.4.66, nvidia-cufft 12.0.0.61, nvidia-cudnn-cu13 9.24.0.43); "{sfx}" is
# "-cu12" / "" by CUDA major. Unpinned, as NVIDIA ships them. The -cu11 wheels are left without.
COMPONENT_REQUIRES = {
    "cusparse": ("nvidia-nvjitlink{sfx}",),
    "cusolver": ("nvidia-cublas{sfx}", "nvidia-nvjitlink{sfx}", "nvidia-cusparse{sfx}"),
    "cufft": ("nvidia-nvjitlink{sfx}",),
    "cudnn": ("nvidia-cublas{blas}",),
}

# The other packages: (name, version, requires, extras, requires_python, platform-specific). Metadata
# only. cuda-cccl, cuda-core, cuda-bindings, cuda-pathfinder and triton as their real METADATA (minus
# test/bench extras); numba's llvmlite/numpy pins as released; numba-cuda-mlir is a stub with its extras.
_CCCL_CU12 = 'extra == "minimal-cu12"'
_CCCL_CU13 = 'extra == "minimal-cu13"'
OTHERS: tuple[tuple[str, str, tuple[str, ...], tuple[str, ...], Optional[str], bool], ...] = (
    ("triton", "3.3.1", ("setuptools>=40.8.0",), (), None, True),
    ("triton", "3.4.0", ("setuptools>=40.8.0", 'importlib-metadata; python_version < "3.10"'), (), ">=3.9,<3.14", True),
    ("triton", "3.8.0", ('importlib-metadata; python_version < "3.10"',), (), ">=3.10,<3.15", True),
    ("triton", "3.9.0", (), (), ">=3.10", True),
    ("cuda-cccl", "1.2.1", (
        "numpy", "cuda-pathfinder>=1.2.3", "cuda-core", "typing_extensions",
        f"cuda-bindings<13.0.0,>=12.9.1; {_CCCL_CU12}", f"cuda-toolkit[cudart,nvcc,nvrtc]==12.*; {_CCCL_CU12}",
        f"nvidia-nvjitlink-cu12<13.0.0,>=12.3.0; {_CCCL_CU12}",
        f"cuda-bindings<14.0.0,>=13.0.0; {_CCCL_CU13}", f"cuda-toolkit[cudart,nvcc,nvjitlink,nvrtc,nvvm]==13.*; {_CCCL_CU13}",
        'cuda-cccl[minimal-cu12]; extra == "cu12"', 'numba-cuda-mlir[cu12]!=0.5.3,<0.6,>=0.5.2; extra == "cu12"',
        'cuda-cccl[minimal-cu13]; extra == "cu13"', 'numba-cuda-mlir[cu13]!=0.5.3,<0.6,>=0.5.2; extra == "cu13"',
    ), ("minimal-cu12", "minimal-cu13", "cu12", "cu13"), ">=3.10", True),
    ("numba-cuda-mlir", "0.5.2", (), ("cu12", "cu13"), None, False),
    # openmm hands NVRTC's PTX to the driver (data/compiler_users.toml): METADATA of 8.6.1 minus the
    # cuda13 and HIP extras; openmm-cuda-12's other unpinned CUDA wheels left out
    ("openmm", "8.6.1", ("numpy", 'openmm-cuda-12==8.6.1; platform_system != "Darwin" and extra == "cuda12"'),
     ("cuda12",), None, True),
    ("openmm-cuda-12", "8.6.1", ("nvidia-cuda-nvrtc-cu12",), (), None, True),
    # cuda-core's [cu12] and cuda-bindings' [all] as released, minus cuda-toolkit==12.* and the other
    # CUDA wheels of [all]: cuda-bindings asks nvJitLink >= 12.3 only, whatever NVRTC it brings
    ("cuda-core", "1.2.2", ("cuda-pathfinder>=1.4.2", "numpy", 'backports.strenum; python_version < "3.11"',
                            'cuda-bindings[all]==12.*; extra == "cu12"'), ("cu12",), ">=3.10", True),
    ("cuda-bindings", "12.9.10", ("cuda-pathfinder~=1.1", 'nvidia-cuda-nvrtc-cu12; extra == "all"',
                                  'nvidia-nvjitlink-cu12>=12.3; extra == "all"'), ("all",), None, True),
    ("cuda-bindings", "13.5.0", ("cuda-pathfinder>=1.4.2",), (), ">=3.11", True),
    ("cuda-pathfinder", "1.9.0", (), (), ">=3.11", False),
    ("numba", "0.59.0", ("llvmlite<0.43,>=0.42.0dev0", "numpy<1.27,>=1.22"), (), ">=3.9", True),
    ("numba", "0.59.1", ("llvmlite<0.43,>=0.42.0dev0", "numpy<1.27,>=1.22"), (), ">=3.9", True),
    ("numba", "0.60.0", ("llvmlite<0.44,>=0.43.0dev0", "numpy<2.1,>=1.22"), (), ">=3.9", True),
    ("llvmlite", "0.42.0", (), (), ">=3.9", True),
    ("llvmlite", "0.43.0", (), (), ">=3.9", True),
    ("numpy", "1.26.4", (), (), ">=3.9", False),
    ("numpy", "2.2.6", (), (), ">=3.10", False),
    ("fastrlock", "0.8.3", (), (), None, False),
    ("filelock", "4.2.12", (), (), ">=3.11", False),
    ("typing-extensions", "4.16.0", (), (), ">=3.9", False),
    ("setuptools", "84.2.1", (), (), ">=3.10", False),
    ("sympy", "1.14.0", ("mpmath<1.4,>=1.1.0",), (), ">=3.9", False),
    ("mpmath", "1.3.0", (), (), None, False),
    ("networkx", "3.6.1", (), (), "!=3.14.1,>=3.11", False),
    ("jinja2", "3.1.6", ("MarkupSafe>=2.0",), (), ">=3.7", False),
    ("markupsafe", "3.0.4", (), (), ">=3.9", False),
    ("fsspec", "2026.9.0", (), (), ">=3.10", False),
)
# CuPy releases modelled per distribution (versions of data/cupy.toml's majors).
CUPY = (("cupy-cuda11x", "13.6.0"), ("cupy-cuda12x", "13.6.0"), ("cupy-cuda12x", "14.2.0"),
        ("cupy-cuda13x", "13.6.0"), ("cupy-cuda13x", "14.2.0"))
# CuPy's [ctk] extra, from 14.0.0 (PyPI metadata of cupy-cuda12x / cupy-cuda13x 14.0.0 and 14.2.0;
# 13.6.0 and earlier have none): the CUDA libraries as wheels, through the cuda-toolkit metapackage.
CUPY_CTK_SINCE = Version("14.0.0")
CUPY_CTK = {
    "cupy-cuda12x": "cuda-toolkit[cublas,cudart,cufft,curand,cusolver,cusparse,nvrtc]==12.*",
    "cupy-cuda13x": "cuda-toolkit[cublas,cudart,cufft,curand,cusolver,cusparse,nvrtc]==13.*",
}

# CuPy's extension modules and the CUDA library each links, with no RPATH (cuda-pathfinder loads the
# libraries first): module paths of cupy-cuda12x 14.2.0, one symbol each from ELF_COMPONENTS.
CUPY_MODULES = {
    "cudart": "cupy_backends/cuda/api/runtime", "cublas": "cupy_backends/cuda/libs/cublas",
    "cufft": "cupy/cuda/cufft", "curand": "cupy_backends/cuda/libs/curand",
    "cusolver": "cupy_backends/cuda/libs/cusolver", "cusparse": "cupy_backends/cuda/libs/cusparse",
    "nvrtc": "cupy_backends/cuda/libs/nvrtc",
}

# Components built with a library (the rest are metadata-only): what each library defines.
ELF_COMPONENTS = {
    "cudart": ("cudaMalloc", "cudaLaunchKernel", "cudaGetDeviceCount"),
    "cublas": ("cublasCreate_v2",),
    "nvrtc": ("nvrtcCreateProgram", "nvrtcVersion"),
    "cusparse": ("cusparseCreate",),
    "cufft": ("cufftPlan1d",),
    "curand": ("curandCreateGenerator",),
    "cusolver": ("cusolverDnCreate",),
    "nvjitlink": (),  # the versioned-name family, by minor
}
# What libtorch_cuda.so binds from each of its CUDA libraries (names real torch 2.14.1 binds).
TORCH_BINDS = {"cudart": "cudaLaunchKernel", "cublas": "cublasCreate_v2", "nvrtc": "nvrtcCreateProgram",
               "cusparse": "cusparseCreate"}


# -- the plan: pure data ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Library:
    """A shared object to build: defines its symbols under the version node named like its soname."""

    member: str  # path inside the wheel
    soname: str
    defines: tuple[str, ...] = ()
    needs: tuple[tuple[str, str], ...] = ()  # (soname, symbol bound at that soname's version node)
    search: tuple[str, ...] = ()
    runpath: bool = True  # DT_RUNPATH (NVIDIA) or DT_RPATH (torch)
    fatbin: bytes = b""


@dataclass(frozen=True)
class Spec:
    name: str
    version: str
    tag: str
    requires: tuple[str, ...] = ()
    extras: tuple[str, ...] = ()
    requires_python: Optional[str] = None
    libraries: tuple[Library, ...] = ()
    indexes: tuple[str, ...] = (SIMPLE,)

    @property
    def key(self) -> tuple[str, str]:
        return canonicalize_name(self.name), self.version


def _platform() -> str:
    """The newest manylinux tag among those real wheels use that this interpreter accepts."""
    accepted = {t.platform for t in sys_tags()}
    for platform in ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64"):
        if platform in accepted:
            return platform
    raise RuntimeError(f"no manylinux x86_64 tag accepted here: {sorted(accepted)[:5]}")


def _interpreter() -> str:
    return f"cp{sys.version_info[0]}{sys.version_info[1]}"


def _torch_versions() -> tuple[str, ...]:
    newest = torch.load().releases[-2:]
    return TORCH_VERSIONS + tuple(r.versions[-1] for r in newest)


def _with_marker(requirement: str, marker: Optional[str]) -> str:
    if not marker:
        return requirement
    parsed = Requirement(requirement)
    if parsed.marker is None:
        return f"{requirement}; {marker}"
    parsed.marker = None
    return f"{parsed}; ({marker}) and ({Requirement(requirement).marker})"


def _component_for(dist: str, version: str) -> Optional[components.Component]:
    found = components.for_dist(dist, version)
    return found[0] if found else None


def _major_minor(version: str) -> tuple[int, int]:
    release = Version(version).release
    return release[0], release[1]


def _nvjitlink_family(major: int, minor: int) -> tuple[str, ...]:
    return tuple(f"__nvJitLink{call}_{major}_{m}" for m in range(minor + 1) for call in ("Create", "Complete"))


def _fatbin(variant: torch.TorchVariant) -> bytes:
    """One container: a cubin per SASS arch of the arch list, a PTX entry per +PTX, as nvcc lays them out."""
    entries = [entry(2, int(sm[3:]), cubin(int(sm[3:])), version=(1, 7)) for sm in variant.sass()]
    for target in variant.ptx():
        arch = int(target.target.split("_")[1])
        isa = tuple(int(x) for x in (target.isa or "8.0").split("."))
        entries.append(entry(1, arch, ptx(f"sm_{arch}", target.isa or "8.0"), version=isa, header_size=80))
    return container(*entries)


def _torch_library(variant: torch.TorchVariant) -> Library:
    """libtorch_cuda.so: the variant's fatbin, the CUDA libraries real torch links, bound by name@soname;
    of a variant whose pins data/torch.toml holds only in part (2.7's cu128), those its wheels provide,
    as real torch requires every wheel it links."""
    major = variant.cuda.major
    pins = [Requirement(text) for text in variant.requires or ()]
    required = {c.name for r in pins for c in components.for_dist(r.name)} | {e for r in pins if r.name == "cuda-toolkit" for e in r.extras}
    needs, search = [], []
    for name, symbol in TORCH_BINDS.items():
        row = components.for_component(name, major)[0]
        if required and name not in required:
            continue
        needs += [(soname, symbol) for soname in row.sonames[:1]]
        if name == "cublas":
            needs.append((row.sonames[1], "cublasLtCreate"))
        directory = "$ORIGIN/../../" + row.lib_dir
        if directory not in search:
            search.append(directory)
    return Library("torch/lib/libtorch_cuda.so", "libtorch_cuda.so", (), tuple(needs), tuple(search), runpath=False,
                   fatbin=_fatbin(variant))


def _torchvision_library(variant: torch.TorchVariant) -> Library:
    """torchvision/_C.so: the variant's fatbin, linking the variant's CUDA runtime (as real torchvision's
    does, libcudart.so.13 for cu130), found through an RPATH to the runtime wheel's directory."""
    row = components.for_component("cudart", variant.cuda.major)[0]
    return Library("torchvision/_C.so", "_C.so", (), ((row.sonames[0], "cudaLaunchKernel"),),
                   ("$ORIGIN/../" + row.lib_dir,), fatbin=_fatbin(variant))


def _xformers_library() -> Library:
    """xformers/_C.so: CUDA 12 device code linking libcudart.so.12 with no path to it, as the real
    0.0.35 _C.so (readelf -d: no RPATH/RUNPATH): it finds the runtime torch's import has loaded, a
    CUDA 12 torch variant's own or, beside CUDA 13 torch, nvidia/cuda_runtime/lib/libcudart.so.12
    that torch's sys.path preload loads when nvidia-cuda-runtime-cu12 is installed."""
    _, _, major, sass, ptx_arch = XFORMERS
    row = components.for_component("cudart", major)[0]
    entries = [entry(2, sm, cubin(sm), version=(1, 7)) for sm in sass]
    entries.append(entry(1, ptx_arch, ptx(f"sm_{ptx_arch}", "8.0"), version=(8, 0), header_size=80))
    return Library("xformers/_C.so", "_C.so", (), ((row.sonames[0], "cudaLaunchKernel"),), (),
                   fatbin=container(*entries))


def _component_libraries(component: components.Component, cuda: tuple[int, int]) -> tuple[Library, ...]:
    """The libraries of an ELF-built component wheel; cuSPARSE binds nvJitLink of its CUDA release."""
    major, minor = cuda
    if component.name == "nvjitlink":
        soname = component.sonames[0]
        return (Library(f"{component.lib_dir}/{soname}", soname, _nvjitlink_family(major, minor)),)
    libraries = []
    for soname in component.sonames:
        if component.name == "cublas" and soname.startswith("libnvblas"):
            continue
        defines = ("cublasLtCreate",) if soname.startswith("libcublasLt") else ELF_COMPONENTS[component.name]
        needs: tuple[tuple[str, str], ...] = ()
        search: tuple[str, ...] = ()
        if component.name == "cusparse" and major >= 12:
            provider = components.for_component("nvjitlink", major)[0]
            needs = ((provider.sonames[0], f"__nvJitLinkComplete_{major}_{minor}"),)
            search = ("$ORIGIN/" + os.path.relpath(provider.lib_dir, component.lib_dir),)
        libraries.append(Library(f"{component.lib_dir}/{soname}", soname, defines, needs, search))
    return tuple(libraries)


def _cupy_modules(cuda_major: int) -> tuple[Library, ...]:
    """A CuPy wheel's extension modules for CUDA `cuda_major`: each links its library by soname alone."""
    suffix = f".cpython-{sys.version_info[0]}{sys.version_info[1]}-x86_64-linux-gnu.so"
    modules = []
    for name, module in sorted(CUPY_MODULES.items()):
        soname = components.for_component(name, cuda_major)[0].sonames[0]
        modules.append(Library(module + suffix, os.path.basename(module) + suffix, (), ((soname, ELF_COMPONENTS[name][0]),)))
    return tuple(modules)


def plan() -> tuple[Spec, ...]:
    """Every wheel of the universe with the index roots that serve it; derived from data/ and the tables."""
    platform, interpreter = _platform(), _interpreter()
    cp_tag, any_tag, nvidia_tag = f"{interpreter}-{interpreter}-{platform}", "py3-none-any", "py3-none-manylinux2014_x86_64"
    specs: dict[tuple[str, str], Spec] = {}
    pins: dict[tuple[str, str], tuple[int, int]] = {}  # NVIDIA wheel -> the CUDA release that pins it

    def pinned(requirement: str, cuda: tuple[int, int]) -> None:
        parsed = Requirement(requirement)
        exact = [s.version.rstrip(".*") for s in parsed.specifier if s.operator == "=="]
        if parsed.name.startswith("nvidia-") and exact:
            pins.setdefault((canonicalize_name(parsed.name), exact[0]), cuda)

    for version in _torch_versions():
        release = torch.release(version)
        base = next(reqs for spec, reqs in TORCH_BASE.items() if Version(version) in SpecifierSet(spec))
        python = ",".join(s for s in release.python.split(",") if s.startswith(">="))
        triton = f"triton{dict(release.triton)[version]}"
        for variant in release.variants:
            if version not in variant.versions:
                continue
            cuda = (variant.cuda.major, variant.cuda.minor)
            for requirement in variant.requires or ():
                pinned(requirement, cuda)
            library = _torch_library(variant)
            cuda_requires = tuple(variant.requires or ()) + (triton,)
            builds = [(f"{version}+{variant.name}", cuda_requires, (torch.index_path(variant.name),))]
            if variant.pypi_default:
                builds.append((version, tuple(_with_marker(r, release.pypi_marker) for r in cuda_requires), (SIMPLE,)))
            for build_version, requires, indexes in builds:
                specs[("torch", build_version)] = Spec("torch", build_version, cp_tag, base + requires, (), python,
                                                       (library,), indexes)
            vision = TORCHVISION.get(version)
            if vision is not None:
                for build_version, indexes in [(f"{vision}+{variant.name}", (torch.index_path(variant.name),))] + (
                        [(vision, (SIMPLE,))] if variant.pypi_default else []):
                    specs[("torchvision", build_version)] = Spec("torchvision", build_version, cp_tag, (f"torch=={version}",),
                                                                 (), python, (_torchvision_library(variant),), indexes)
    for requirement in EXTRA_COMPONENTS:
        name, _, version = requirement.partition("==")
        cuda = _major_minor(version) if components.versioned_by_cuda(_component_for(name, version).name) else None
        if cuda is None:  # a library-versioned wheel: the CUDA release of a torch variant that pins it
            cuda = next((v.cuda.major, v.cuda.minor) for r in torch.load().releases for v in r.variants
                        if requirement in (v.requires or ()))
        pins.setdefault((canonicalize_name(name), version), cuda)

    for toolkit_version, (marker, extras) in CUDA_TOOLKIT.items():
        cuda = _major_minor(toolkit_version)
        requires = []
        for extra, requirements in sorted(extras.items()):
            for requirement in requirements:
                pinned(requirement, cuda)
                requires.append(f"{requirement}; ({marker}) and extra == '{extra}'")
        specs[("cuda-toolkit", toolkit_version)] = Spec("cuda-toolkit", toolkit_version, "py2.py3-none-any",
                                                        tuple(requires), tuple(sorted(extras)))
        # a range pin (nvidia-nvjitlink<14,>=13.0.88) is met by the toolkit's own nvJitLink
        nvjitlink = next((r.nvjitlink for r in components.cuda_releases() if r.cuda == ".".join(toolkit_version.split(".")[:3])), None)
        if nvjitlink and cuda[0] >= 13:
            pins.setdefault(("nvidia-nvjitlink", nvjitlink), cuda)

    for (name, version), cuda in sorted(pins.items()):
        component = _component_for(name, version)
        sfx = "-cu12" if cuda[0] == 12 else ""
        requires = ()
        if component and cuda[0] >= 12:
            requires = tuple(r.format(sfx=sfx, blas=sfx) for r in COMPONENT_REQUIRES.get(component.name, ()))
        libraries = _component_libraries(component, cuda) if component and component.name in ELF_COMPONENTS else ()
        specs[(name, version)] = Spec(name, version, nvidia_tag, requires, (), ">=3", libraries)

    for dist, version in CUPY:
        row = cupy.dist(dist, version)
        major = next(m for m in cupy.load() if m.major == row.cupy_major)
        requires, extras = tuple(major.requires), ()
        ctk = CUPY_CTK.get(dist) if Version(version) >= CUPY_CTK_SINCE else None
        if ctk:
            requires, extras = requires + (f'{ctk}; extra == "ctk"',), ("ctk",)
        python = ",".join(s for s in major.python.split(",") if s.startswith(">="))
        cuda_major = max(cuda.major for cuda in row.cuda)
        specs[(dist, version)] = Spec(dist, version, cp_tag, requires, extras, python, _cupy_modules(cuda_major))

    version, torch_version, _, _, _ = XFORMERS
    specs[("xformers", version)] = Spec("xformers", version, cp_tag, (f"torch=={torch_version}",), (), ">=3.10",
                                        (_xformers_library(),))
    for name, version, requires, extras, python, binary in OTHERS:
        specs[(name, version)] = Spec(name, version, cp_tag if binary else any_tag, requires, extras, python)
    return _mirrored(tuple(specs.values()))


def _mirrored(specs: tuple[Spec, ...]) -> tuple[Spec, ...]:
    """Each variant index also serves the closure of its torch wheels' requirements, as the real one mirrors them."""
    by_name: dict[str, list[Spec]] = {}
    for spec in specs:
        by_name.setdefault(canonicalize_name(spec.name), []).append(spec)
    extra_roots: dict[tuple[str, str], set[str]] = {}
    environment = default_environment()
    for spec in specs:
        roots = [i for i in spec.indexes if i != SIMPLE]
        if spec.name != "torch" or not roots:
            continue
        todo, seen = [(r, ()) for r in spec.requires], set()
        while todo:
            requirement, extras = todo.pop()
            parsed = Requirement(requirement)
            if parsed.marker and not any(parsed.marker.evaluate({**environment, "extra": e}) for e in (extras or ("",))):
                continue
            for match in by_name.get(canonicalize_name(parsed.name), ()):
                wanted = (match.key, frozenset(parsed.extras))
                if parsed.specifier.contains(match.version, prereleases=True) and wanted not in seen:
                    seen.add(wanted)
                    extra_roots.setdefault(match.key, set()).update(roots)
                    todo += [(r, tuple(parsed.extras)) for r in match.requires]
    return tuple(
        Spec(**{**s.__dict__, "indexes": s.indexes + tuple(sorted(extra_roots.get(s.key, set()) - set(s.indexes)))})
        for s in specs
    )


# -- building -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Universe:
    """The built wheels: file name -> the index roots serving it ("simple", "whl/cu128")."""

    root: Path
    wheels: dict[str, tuple[str, ...]] = field(default_factory=dict)
    requires_python: dict[str, Optional[str]] = field(default_factory=dict)

    def path(self, name: str, version: str) -> Path:
        """The wheel of `name` at exactly `version` ("2.8.0+cu128")."""
        stem = f"{canonicalize_name(name).replace('-', '_')}-{version}-"
        [found] = [f for f in self.wheels if f.startswith(stem)]
        return self.root / found


def _key(specs: tuple[Spec, ...]) -> str:
    digest = hashlib.sha256(repr(specs).encode())
    for source in (__file__, HERE / "fatbin_bytes.py", HERE / "index_server.py"):
        digest.update(Path(source).read_bytes())
    return digest.hexdigest()[:16]


def build_universe(cache: Optional[Path] = None) -> Universe:
    """Build the universe into the test cache once per input hash (a file lock guards concurrent sessions)."""
    from wheel_cache import cache_dir

    specs = plan()
    base = (cache or cache_dir()) / "fake-cuda-index"
    base.mkdir(parents=True, exist_ok=True)
    root = base / _key(specs)
    manifest = root / "manifest.json"
    with open(base / f"{root.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not manifest.exists():
            _build(specs, root)
    data = json.loads(manifest.read_text())
    return Universe(root, {f: tuple(i) for f, i in data["wheels"].items()}, data["requires_python"])


def _build(specs: tuple[Spec, ...], root: Path) -> None:
    started = time.perf_counter()
    if root.exists():
        shutil.rmtree(root)
    root.mkdir()
    with tempfile.TemporaryDirectory() as scratch:
        libraries = {lib for spec in specs for lib in spec.libraries}
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
            built = dict(zip(libraries, pool.map(lambda lib: _compile(lib, Path(scratch)), libraries)))
        wheels, python = {}, {}
        for spec in specs:
            files = {lib.member: built[lib] for lib in spec.libraries}
            filename, data = make_wheel(spec.name, spec.version, requires=spec.requires, extras=spec.extras,
                                        requires_python=spec.requires_python, tag=spec.tag, files=files)
            (root / filename).write_bytes(data)
            wheels[filename], python[filename] = spec.indexes, spec.requires_python
    manifest = {"wheels": wheels, "requires_python": python, "build_seconds": round(time.perf_counter() - started, 2)}
    (root / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True))


def _compile(library: Library, scratch: Path) -> bytes:
    """gcc: stub providers for the needed sonames (one version node each), then the library linked to them."""
    digest = hashlib.sha256(repr(library).encode()).hexdigest()[:16]
    work = scratch / digest
    work.mkdir()
    providers: dict[str, list[str]] = {}
    for soname, symbol in library.needs:
        providers.setdefault(soname, []).append(symbol)
    links = []
    for soname, symbols in providers.items():
        links.append(_gcc(work / "stubs" / soname, soname, symbols, [], ()))
    source = [f"int {s}(void);" for s in sorted({s for _, s in library.needs})]
    calls = " + ".join(f"{s}()" for _, s in library.needs) or "0"
    source.append(f"int {library.soname.split('.')[0].replace('-', '_')}_uses(void) {{ return {calls}; }}")
    if library.fatbin:
        data = ",".join(str(b) for b in library.fatbin)
        source.append(f'__attribute__((section(".nv_fatbin"), used, aligned(8))) static const unsigned char fatbin[] = {{{data}}};')
    flags = [("-Wl,--enable-new-dtags" if library.runpath else "-Wl,--disable-new-dtags"),
             "-Wl,-rpath," + ":".join(library.search)] if library.search else []
    return _gcc(work / library.soname, library.soname, list(library.defines), links, flags, "\n".join(source)).read_bytes()


def _gcc(out: Path, soname: str, defines: list[str], links: list[Path], flags, extra_source: str = "") -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    source = out.with_suffix(out.suffix + ".c")
    source.write_text("".join(f"int {s}(void) {{ return {i}; }}\n" for i, s in enumerate(defines)) + extra_source + "\n")
    command = ["gcc", "-shared", "-fPIC", "-O0", "-o", str(out), str(source), f"-Wl,-soname,{soname}"]
    if defines:
        script = out.with_suffix(out.suffix + ".map")
        script.write_text(f"{soname} {{ global: {'; '.join(defines)}; local: *; }};\n")
        command.append(f"-Wl,--version-script={script}")
    subprocess.run(command + [str(link) for link in links] + list(flags), check=True, capture_output=True, text=True)
    return out


# -- serving --------------------------------------------------------------------------------------


@dataclass
class FakeCudaIndex:
    """The universe on 127.0.0.1: `index_url` is the regular index, `torch_index_base + "/whl/cu128"` a variant index."""

    universe: Universe
    server: IndexServer

    @property
    def index_url(self) -> str:
        return self.server.url + "/" + SIMPLE

    @property
    def torch_index_base(self) -> str:
        return self.server.url

    def variant_index(self, variant: str) -> str:
        return f"{self.torch_index_base}/{torch.index_path(variant)}"

    def stop(self) -> None:
        self.server.stop()


def serve(universe: Universe) -> FakeCudaIndex:
    server = IndexServer()
    for filename, roots in sorted(universe.wheels.items()):
        data = (universe.root / filename).read_bytes()
        for root in roots:
            server.add(filename, data, root=root, requires_python=universe.requires_python.get(filename))
    server.start()
    return FakeCudaIndex(universe, server)
