"""The CUDA runtime a file is, or has linked into it, and which bytes tell its release.

Why: a binary's driver floor usually comes from its DT_NEEDED (libcudart.so.12 is CUDA 12's). Two
kinds of files hide it, and both are common on the index:

- A vendored runtime. auditwheel copies libcudart into `<package>.libs/` under a hashed name and
  points DT_NEEDED and DT_SONAME at it (ale-py 0.12.1: `ale_py.libs/libcudart-09529672.so.12.6.77`),
  so no file names `libcudart.so.12`. The copy still defines the version node `libcudart.so.12`
  (`.gnu.version_d`) that its consumers bind (`.gnu.version_r`): that node gives the major. auditwheel
  keeps the original file name's suffix, `.so.12.6.77`, which gives the release.
- A statically linked runtime (nvcc's default `-cudart static`). warp-lang's `warp/bin/warp.so` links
  cudart_static, nvrtc_static and nvptxcompiler_static: it needs only glibc, and, stripped, keeps no
  `__cudart*` symbol. What shows the runtime is structural: the file has a `.nvFatBinSegment` (the
  records nvcc's host code hands `__cudaRegisterFatBinary`), yet needs no libcudart and does not
  leave `__cudaRegisterFatBinary` undefined, so the runtime that defines it is inside. cudart_static
  carries no release string (its own strings, "/cudart.shm.%08llx%08llx" or "CUDA driver version is
  insufficient for CUDA runtime version", are the same in every release), so the release comes from
  the toolkit that built the file: the `.note.nv.tkinfo` of its cubins (FatbinSummary.toolkit:
  warp-lang 1.19.0 "13.4.92", 1.12.1 "12.9.86"), which the static runtime of that build shares.
  Where no cubin carries the note (CUDA <= 12.7 builds), the PTX ISA of the file's PTX entries says
  the toolkit minor (knowledge.toolkits: 9.4 is CUDA 13.4). A static NVRTC or nvJitLink also leaves
  the banner "Cuda compilation tools, release 12.9, V12.9.86" in `.rodata`, but finding it means
  searching every library's read-only data, a quarter of a cold scan's time (docs/performance.md):
  not read.

NVIDIA's own libraries (cuBLAS, cuDNN, NCCL, ...) link cudart statically too and read as "static"
here, which is what they are; their major is also their soname's.

May import: binary/facts and versions.
"""

from __future__ import annotations

import re
from typing import Iterable, Optional

from cudaresolve.binary.facts import CudaRuntime, FatbinSummary, SymbolTable
from cudaresolve.versions import CudaVersion

_VERSION_NODE = re.compile(r"^libcudart\.so\.(\d+)$")
_RELEASE_SUFFIX = re.compile(r"\.so\.((\d+)\.\d+\.\d+)$")
REGISTRATION_SECTION = ".nvFatBinSegment"
_REGISTER = "__cudaRegisterFatBinary"


def cuda_runtime(
    path: str,
    soname: Optional[str],
    needed: Iterable[str],
    version_definitions: Iterable[str],
    symbols: SymbolTable,
    section_names: Iterable[str],
    fatbin: Optional[FatbinSummary],
) -> Optional[CudaRuntime]:
    """The runtime the file is ("shared") or links in ("static"); None when it is neither."""
    for node in version_definitions:
        match = _VERSION_NODE.match(node)
        if match:
            release = _release_from_name(path, soname, int(match.group(1)))
            return CudaRuntime("shared", int(match.group(1)), release, "file name" if release else None)
    if REGISTRATION_SECTION not in section_names or any(name.startswith("libcudart") for name in needed):
        return None
    if _REGISTER.encode() + b"\0" in symbols.strings and any(s.name == _REGISTER for s in symbols.undefined):
        return None  # registered through a runtime found elsewhere (preloaded, or linked by a dependency)
    toolkit = fatbin.toolkit if fatbin is not None else None
    if toolkit is None:
        return CudaRuntime("static", None, None)
    return CudaRuntime("static", CudaVersion.parse(toolkit).major, toolkit, "toolkit note")


def runtime_cuda(runtime: CudaRuntime) -> Optional[CudaVersion]:
    """The CUDA a runtime is of: its release's minor (12.6 for 12.6.77), else its major alone; None
    when no byte tells either."""
    if runtime.release is not None:
        return CudaVersion.parse(runtime.release)
    return CudaVersion(runtime.major) if runtime.major is not None else None


def _release_from_name(path: str, soname: Optional[str], major: int) -> Optional[str]:
    """The X.Y.Z a runtime's file name or soname ends in (libcudart-09529672.so.12.6.77), when its
    major is the version node's."""
    for name in (path.rsplit("/", 1)[-1], soname or ""):
        match = _RELEASE_SUFFIX.search(name)
        if match and int(match.group(2)) == major:
            return match.group(1)
    return None
