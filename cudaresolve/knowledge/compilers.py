"""Run-time compilers (data/compilers.toml): the GPUs each NVRTC, NVVM and nvJitLink release can
target, the PTX ISA version it writes, and the release from which it exports each API function.

Why: packages that compile kernels at run time hand the driver what these libraries produce, so a
kernel fails when the compiler has no target for the GPU (NVRTC 13 has none below 7.5) or when the
driver cannot JIT the PTX ISA the compiler wrote. Both facts belong to the compiler's release, not
to the package. scripts/record_compilers.py reads them from every release's wheel by loading the
library with ctypes; the `[[...function]]` rows say from which release a function can be found by
dlsym under its plain name (what cuda-bindings looks up; nvJitLink 12.0-12.2 export only
`__nvJitLinkCreate_12_0` and the like).

May import: records, arch, versions, errors and knowledge/files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional, Union

from packaging.utils import canonicalize_name
from packaging.version import Version

from cudaresolve import records
from cudaresolve.arch import ComputeCapability
from cudaresolve.errors import UsageError
from cudaresolve.knowledge import compiled, files
from cudaresolve.knowledge.files import CONFIDENCE, VERSION
from cudaresolve.versions import CudaVersion

FILE = "compilers.toml"
KINDS = ("nvrtc", "nvvm", "nvjitlink")


def _canonical(value: str) -> None:
    if canonicalize_name(value) != value:
        raise UsageError(f"not a canonical distribution name: {value!r}")


def _isa(value: str) -> None:
    """A PTX ISA or CUDA minor version as written in the table: MAJOR.MINOR."""
    major, dot, minor = value.partition(".")
    if not (dot and major.isdigit() and minor.isdigit()):
        raise UsageError(f"expected MAJOR.MINOR, got {value!r}")


def _sha256(value: str) -> None:
    if len(value) != 64 or any(c not in "0123456789abcdef" for c in value):
        raise UsageError(f"not a sha256 hex digest: {value!r}")


MAJOR_MINOR = records.check(_isa)


@dataclass(frozen=True)
class Release:
    """One release of a compiler's wheel, as its library answered when loaded."""

    dist: str = field(metadata=records.check(_canonical))  # "nvidia-cuda-nvrtc-cu12"
    version: str = field(metadata=VERSION)  # "12.9.86"
    filename: str  # the wheel read
    sha256: str = field(metadata=records.check(_sha256))
    library: str  # "libnvrtc.so.12"
    archs: tuple[ComputeCapability, ...]  # the GPUs it compiles for, lowest first

    def targets(self, gpu: Union[ComputeCapability, str]) -> bool:
        """Whether the compiler accepts the GPU's own arch (NVRTC 13.0 has no 6.1: `-arch=sm_61` is
        NVRTC_ERROR_INVALID_OPTION)."""
        return (gpu if isinstance(gpu, ComputeCapability) else ComputeCapability.parse(gpu)) in self.archs


@dataclass(frozen=True)
class NvrtcRelease(Release):
    cuda: CudaVersion = field(metadata=MAJOR_MINOR)  # nvrtcVersion, 12.9
    ptx_isa: str = field(metadata=MAJOR_MINOR)  # the `.version` of the PTX it writes


@dataclass(frozen=True)
class NvvmRelease(Release):
    nvvm_version: str = field(metadata=MAJOR_MINOR)  # nvvmVersion: 2.0 from 11.x to 13.x
    ir_version: str = field(metadata=MAJOR_MINOR)  # nvvmIRVersion's NVVM IR version
    debug_version: str = field(metadata=MAJOR_MINOR)  # and its debug metadata version
    ptx_isa: str = field(metadata=MAJOR_MINOR)


@dataclass(frozen=True)
class NvJitLinkRelease(Release):
    cuda: CudaVersion = field(metadata=MAJOR_MINOR)  # nvJitLinkVersion (12.0-12.2: see `note`)
    max_ptx_isa: str = field(metadata=MAJOR_MINOR)  # the newest PTX `.version` it links
    ptx_isa: Optional[str] = field(default=None, metadata=MAJOR_MINOR)  # what it writes with -lto -ptx
    note: Optional[str] = None


@dataclass(frozen=True)
class Function:
    """An API function and the oldest release exporting it under its plain name."""

    name: str  # "nvJitLinkCreate"
    since: str = field(metadata=VERSION)  # "12.3.52"
    missing: tuple[str, ...] = field(default=(), metadata=VERSION)  # later releases without it


@dataclass(frozen=True)
class _Nvrtc:
    confidence: str = field(metadata=CONFIDENCE)
    release: tuple[NvrtcRelease, ...]
    function: tuple[Function, ...] = ()


@dataclass(frozen=True)
class _Nvvm:
    confidence: str = field(metadata=CONFIDENCE)
    release: tuple[NvvmRelease, ...]
    function: tuple[Function, ...] = ()


@dataclass(frozen=True)
class _NvJitLink:
    confidence: str = field(metadata=CONFIDENCE)
    release: tuple[NvJitLinkRelease, ...]
    function: tuple[Function, ...] = ()


@dataclass(frozen=True)
class _File:
    confidence: str = field(metadata=CONFIDENCE)
    nvrtc: _Nvrtc
    nvvm: _Nvvm
    nvjitlink: _NvJitLink


@dataclass(frozen=True)
class Tables:
    releases: Mapping[str, tuple[Release, ...]]  # kind -> its releases, oldest first
    functions: Mapping[str, Mapping[str, Function]]  # kind -> name -> function


@compiled.table(FILE)
def load() -> Tables:
    """Load and check the file: releases unique and their archs ascending; every function's releases in the table."""
    raw = files.read(FILE, _File)
    releases, functions = {}, {}
    for kind in KINDS:
        table = getattr(raw, kind)
        seen = set()
        for i, row in enumerate(table.release):
            where = f"{kind}.release[{i}]"
            if (row.dist, row.version) in seen:
                raise files.error(FILE, where, f"{row.dist}=={row.version} is listed twice")
            seen.add((row.dist, row.version))
            if not row.archs or list(row.archs) != sorted(set(row.archs)):
                raise files.error(FILE, f"{where}.archs", "expected compute capabilities, lowest first, each once")
        versions = {Version(row.version) for row in table.release}
        for i, function in enumerate(table.function):
            for version in (function.since, *function.missing):
                if Version(version) not in versions:
                    raise files.error(FILE, f"{kind}.function[{i}]", f"names {version}, a release not in the table")
        releases[kind] = tuple(sorted(table.release, key=lambda r: Version(r.version)))
        functions[kind] = {f.name: f for f in table.function}
    return Tables(releases=releases, functions=functions)


# -- accessors --------------------------------------------------------------------------------------


def releases(kind: str) -> tuple[Release, ...]:
    """Every release of one compiler ("nvrtc", "nvvm", "nvjitlink") in the table, oldest first."""
    return load().releases[_kind(kind)]


def release(kind: str, dist: str, version: str) -> Optional[Release]:
    """The row of `dist==version` ("nvidia-cuda-nvrtc-cu12", "12.9.86"); None when not recorded."""
    name, wanted = canonicalize_name(dist), Version(version)
    return next((r for r in releases(kind) if r.dist == name and Version(r.version) == wanted), None)


def function_since(kind: str, name: str) -> Optional[str]:
    """The oldest release exporting `name` by its plain name (what dlsym finds); None when no
    release in the table does. A release listed in the function's `missing` lacks it again."""
    function = load().functions[_kind(kind)].get(name)
    return function.since if function else None


def exports(kind: str, name: str, version: str) -> bool:
    """Whether release `version` of a compiler exports `name` by its plain name."""
    function = load().functions[_kind(kind)].get(name)
    if function is None:
        return False
    wanted = Version(version)
    return wanted >= Version(function.since) and all(Version(v) != wanted for v in function.missing)


def _kind(kind: str) -> str:
    if kind not in KINDS:
        raise UsageError(f"not a run-time compiler: {kind!r} (expected one of {', '.join(KINDS)})")
    return kind
