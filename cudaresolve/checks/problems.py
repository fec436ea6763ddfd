"""What a finding says is wrong: one frozen dataclass per kind of problem, its facts as fields.

Whether a build fits the host is a verdict (verdicts/records.py), carried here as the problem it is.
A check builds one of these; output/findings.py words it (one renderer per type), and a reader
of findings (the resolver, a test, a JSON consumer) recognises a problem by its type and fields,
never by a sentence. Texts kept here are other programs' words, carried as they were said: glibc's
message for a binding failure, a table's symptom or feature name, a reader's reason.

May import: the value types (versions, arch, binary.facts), verdicts/records, checks/subjects.py, packaging; nothing that judges.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

from packaging.requirements import Requirement
from packaging.utils import NormalizedName
from packaging.version import Version

from cudaresolve.arch import ComputeCapability
from cudaresolve.binary.facts import DeviceCodeSkip
from cudaresolve.checks.subjects import Subject
from cudaresolve.verdicts.records import BelowPackageFloor as BelowPackageFloor
from cudaresolve.verdicts.records import CpuOnly as CpuOnly
from cudaresolve.verdicts.records import DriverTooOld as DriverTooOld
from cudaresolve.verdicts.records import GpuRef as GpuRef
from cudaresolve.verdicts.records import KnownBadRelease as KnownBadRelease
from cudaresolve.verdicts.records import MinorCompat as MinorCompat
from cudaresolve.verdicts.records import NoDeviceCode as NoDeviceCode
from cudaresolve.verdicts.records import SbsaOnJetson as SbsaOnJetson
from cudaresolve.versions import CudaVersion, DriverRelease

# -- environment ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Unreadable:
    """Part of the environment its reader could not read (a dist-info, a directory), in its words."""

    reason: str


@dataclass(frozen=True)
class BinaryFactsUnreadable:
    """An ELF file the reader rejects ("truncated ELF header (16 of 64 bytes)")."""

    error: str


@dataclass(frozen=True)
class ForeignMachine:
    """A library built for another machine ("aarch64"): this machine's loader passes it over."""

    machine: str


@dataclass(frozen=True)
class DeviceCodePartlyUnreadable:
    """A fatbin the reader could walk only in part; `damage` is the reader's first note."""

    damage: str


@dataclass(frozen=True)
class DeviceCodeSkipped:
    """A file whose device code the reader refused whole (binary.facts.DeviceCodeSkip): not judged,
    and the rest of the environment is."""

    skip: DeviceCodeSkip


@dataclass(frozen=True)
class NoSectionHeaders:
    """Libraries without a section header table (sstripped): their device code cannot be looked for."""

    files: tuple[str, ...]


@dataclass(frozen=True)
class CacheUnwritable:
    """The facts cache could not be written, in the cache's words."""

    reason: str


@dataclass(frozen=True)
class HostUnknown:
    """No driver release, no driver CUDA version and no GPU: the host checks had nothing to judge."""


# -- the loader -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class LibraryNotLoaded:
    """A DT_NEEDED no search step finds, or the first file found is one ld.so refuses."""

    consumer: str  # the file that needs it
    needed: str  # the soname
    loader_message: str  # glibc's words ("libfoo.so.1: cannot open shared object file: ...")


@dataclass(frozen=True)
class FoundOnlyAfterCall:
    """Libraries a file finds only once the program makes its package's preload call."""

    consumer: str
    libraries: tuple[str, ...]
    module: str  # "onnxruntime"
    function: str  # "preload_dlls"
    feature: Optional[str] = None  # what does not load without it, for a primary plugin (data)


@dataclass(frozen=True)
class NoAlternativeLoads:
    """A package's import tries files in turn and raises when none loads (env/imports.py `one-of`),
    and the loader refuses every one."""

    modules: tuple[str, ...]  # the modules whose loop tries them
    files: tuple[str, ...]  # the files tried, by name, sorted
    libraries: tuple[str, ...]  # the sonames they miss, sorted


@dataclass(frozen=True)
class OptionalFeaturesMissing:
    """A package's optional layers whose libraries are absent (numba's TBB, CuPy's NCCL module)."""

    features: tuple[str, ...]  # as data/components.toml names them
    libraries: tuple[str, ...]  # the absent sonames, sorted


@dataclass(frozen=True)
class PluginLibrariesMissing:
    """Plugins loaded only on demand that need libraries not on their search path."""

    plugins: tuple[str, ...]  # file names
    libraries: tuple[str, ...]  # the sonames they miss, sorted


@dataclass(frozen=True)
class SymbolSkew:
    """Versions or symbols the provider the loader picks does not define (glibc's "undefined symbol"
    or "version `X' not found"): one per consumer file and provider file."""

    consumer: str  # the file that needs them
    provider: Optional[str]  # the file the loader picks; None when no file provides the library
    provider_step: Optional[str]  # why the loader picks it ("runpath", "LD_LIBRARY_PATH", ...)
    soname: str  # the library the names are wanted from
    symbols: tuple[str, ...]  # the missing symbol names (or version names), in .dynsym order
    named: str  # the file glibc names in its message: the provider for a version, else the consumer
    loader_message: str  # glibc's words for the first one
    minimum: Optional[CudaVersion] = None  # the provider release the versioned names imply (12.4)


@dataclass(frozen=True)
class FrameworkAbiMismatch:
    """An extension built for another release of the framework it imports first (torch): the installed
    release's libraries lack C++ names its files bind, so importing it fails. One per extension."""

    files: tuple[str, ...]  # the extension's files that bind them, in load order
    framework: str  # "torch"
    installed: Version  # the framework release installed
    built_for: Optional[Version]  # the release the extension pins exactly (Requires-Dist); None: unknown
    symbols: tuple[str, ...]  # the missing names (mangled), sorted


@dataclass(frozen=True)
class PluginHostMismatch:
    """Plugins its host's loader opens by path (openmm-cuda-12's under OpenMM's plugin directory),
    built for another release of the host: the installed host's libraries lack C++ names they bind.
    One per plugin distribution."""

    files: tuple[str, ...]  # the plugin files that bind them, in load order
    host: str  # "openmm"
    installed: Version  # the host release installed
    library: Optional[str]  # the host's library the first of them links (libOpenMM.so); None: not found
    symbols: tuple[str, ...]  # the missing names (mangled), in the files' order


@dataclass(frozen=True)
class UnusedBridge:
    """An extension binding another distribution's symbols without linking it, that distribution absent."""

    consumer: str
    provider: str  # the distribution whose libraries define the symbols ("torch")
    symbols: tuple[str, ...]  # sorted


@dataclass(frozen=True)
class Shadowed:
    """The loader picks a library from outside the environment although a wheel in it ships the soname."""

    consumer: str
    soname: str
    chosen: str  # the file the loader picks
    step: str  # how ("LD_LIBRARY_PATH", "ld.so.cache", "rpath", ...)
    rpath_of: Optional[str]  # for "rpath": whose DT_RPATH
    chosen_from: Optional[Subject]  # the conda package that installed the chosen file
    owners: tuple[str, ...]  # the distributions whose wheels ship the soname


@dataclass(frozen=True)
class Owner:
    """A distribution named in a problem: a conda package is removed with conda, not pip."""

    name: Optional[str]  # None: files no distribution owns
    conda: bool = False


@dataclass(frozen=True)
class DuplicateBuilds:
    """Sonames each picked from different builds for different consumers (one process gets one)."""

    libraries: tuple[str, ...]
    owners: tuple[Owner, ...]


@dataclass(frozen=True)
class PrivateCopies:
    """Sonames installed by several distributions, at most one copy of which the loader finds."""

    libraries: tuple[str, ...]
    owners: tuple[Owner, ...]


@dataclass(frozen=True)
class Installed:
    """A distribution and its installed version, as a problem names it."""

    name: str
    version: Version


@dataclass(frozen=True)
class OwnedTwice:
    """Files several distributions install with different contents (env/ownership.py): the last one
    installed wins, and uninstalling one deletes the file the others still list."""

    owners: tuple[Installed, ...]  # sorted by name
    files: tuple[str, ...]  # the shared paths, sorted
    on_disk: Optional[str]  # whose bytes every file has; None: mixed, no owner's, or not compared


# -- GPUs and drivers -----------------------------------------------------------------------------


@dataclass(frozen=True)
class OptInUnavailable:
    """Libraries serving only an opt-in feature lack code for a GPU (torch's NVSHMEM)."""

    feature: str  # as data/components.toml names it
    cc: ComputeCapability


@dataclass(frozen=True)
class UndatedRuntime:
    """Files that link a CUDA runtime in statically whose release no byte tells (no toolkit note, no
    PTX the toolkit table places): the package's driver floor is unknown."""

    files: tuple[str, ...]


@dataclass(frozen=True)
class MixedMajors:
    """Consumers of different CUDA runtime majors in one environment."""

    majors: tuple[int, ...]
    later: tuple[str, ...] = ()  # the features needing another major than the import's, when only they do


@dataclass(frozen=True)
class CompanionMajors:
    """A package links one major's libraries while the environment's wheels of them are another's."""

    needs: tuple[int, ...]
    installed: tuple[int, ...]
    later: tuple[str, ...] = ()  # the features of those files, when only later code loads them


@dataclass(frozen=True)
class PreloadedOtherMajor:
    """A package's own sys.path search (torch's _preload_cuda_deps) loads another CUDA major's wheel
    copies of libraries its files link by soname: they bind those copies, not their own major's."""

    sonames: tuple[str, ...]  # in load order
    wheels: tuple[Installed, ...]  # the wheels that installed them, sorted by name
    picked_major: int
    major: int  # the CUDA major of the package's build


@dataclass(frozen=True)
class CompilerCannotTargetGpu:
    """A package compiles its kernels at run time with a compiler release (data/compilers.toml) whose
    arch list lacks a visible GPU's (NVRTC 13 on compute capability 6.1: NVRTC_ERROR_INVALID_OPTION)."""

    consumer: str  # the package that compiles ("cuda-cccl")
    consumer_version: Version
    kind: str  # "nvrtc", "nvvm", "nvjitlink"
    compiler: str  # its wheel ("nvidia-cuda-nvrtc")
    release: str  # "13.0.88"
    cc: ComputeCapability
    gpus: tuple[GpuRef, ...]
    lowest: ComputeCapability  # the release's arch list, lowest and highest
    highest: ComputeCapability


@dataclass(frozen=True)
class CompilerPtxTooNew:
    """A package hands the driver PTX of a compiler release whose PTX ISA is newer than the driver's
    CUDA version JIT-compiles (CUDA_ERROR_UNSUPPORTED_PTX_VERSION); minor-version compatibility does
    not cover PTX."""

    consumer: str
    consumer_version: Version
    kind: str
    compiler: str
    release: str
    ptx_isa: str  # what the release writes ("8.8")
    driver: Optional[DriverRelease]
    driver_cuda: Optional[CudaVersion]
    driver_ptx_isa: str  # the newest ISA the driver loads ("8.4")


@dataclass(frozen=True)
class LinkerCannotRead:
    """A package hands what one compiler release writes to an nvJitLink release that cannot read it
    (data/compiler_users.toml [links]): PTX of a newer ISA than nvJitLink links
    (NVJITLINK_ERROR_PTX_COMPILE), or LTO-IR of a newer CUDA version than nvJitLink's."""

    consumer: str  # "cuda-core"
    consumer_version: Version
    kind: str  # the producer: "nvrtc", "nvvm"
    compiler: str  # its wheel ("nvidia-cuda-nvrtc-cu12")
    release: str  # "12.9.86"
    linker: str  # nvJitLink's wheel ("nvidia-nvjitlink-cu12")
    linker_release: str  # "12.4.127"
    inputs: tuple[str, ...]  # what it cannot read: "ptx", "ltoir"
    ptx_isa: str  # what the producer writes ("8.8")
    linker_ptx_isa: str  # the newest nvJitLink links ("8.4")
    cuda: CudaVersion  # the producer's CUDA version (the LTO-IR's: 12.9)
    linker_cuda: CudaVersion  # nvJitLink's (12.4)


@dataclass(frozen=True)
class DlsymFunctionsMissing:
    """A package finds compiler functions with dlsym at run time (data/compiler_users.toml [dlsym])
    that the provider's installed release does not export by their plain names."""

    consumer: str  # "cuda-bindings"
    consumer_version: Version
    feature: str  # what uses them ("cuda.bindings.nvjitlink")
    kind: str  # "nvjitlink", "nvrtc"
    provider: str  # its wheel ("nvidia-nvjitlink-cu12")
    release: str  # "12.0.140"
    functions: tuple[str, ...]  # those the release lacks, in the table's order
    minimum: str  # the oldest release exporting every function of the need ("12.3.52")
    fallback: bool  # the package works without them, otherwise (cuda.core takes the driver's linker)


@dataclass(frozen=True)
class ImportFailed:
    """`doctor --import`: importing a module of the distribution raised, in the target's interpreter.
    `driver`: its words name a library of the NVIDIA driver, which a machine without one lacks."""

    module: str
    kind: str  # the exception's type, as the target named it
    message: str  # the exception's words, as the target printed them (hostile text: output/ quotes it)
    driver: bool


@dataclass(frozen=True)
class ImportNotObserved:
    """`doctor --import`: the distribution's import could not be observed (it ran past its time or
    output, or its interpreter ended without a report); the static judgement stands."""

    modules: tuple[str, ...]
    reason: str


@dataclass(frozen=True)
class DlopenedNotFound:
    """A binary names a CUDA library's soname as a literal and imports dlopen: the library it opens
    by that name at run time, which no DT_NEEDED shows; no copy is loadable from it. A dlopen may be
    optional, so the feature using it is what is lost."""

    consumer: str  # the file that calls dlopen
    soname: str  # "libcublas.so.12"
    cuda_major: Optional[int]  # the consumer's CUDA major, None when neither its build nor the soname tells
    providers: tuple[str, ...]  # the wheels that provide the soname for that major, in table order


@dataclass(frozen=True)
class DlopenedOtherMajor:
    """The copy a binary's dlopen by soname finds belongs to another CUDA major's wheel than the binary's."""

    consumer: str
    soname: str
    cuda_major: int  # the consumer's
    found: str  # the file the loader finds
    found_major: int
    owner: str  # the wheel that installed it


# -- metadata and advisories ----------------------------------------------------------------------


@dataclass(frozen=True)
class MetadataAdmitsOlder:
    """A dependency the metadata leaves open below what the package's binaries bind."""

    provider: str  # the canonical name of the wheel that provides the symbols
    minimum: CudaVersion
    consumer: str  # the file that binds the newest of them
    symbol: str
    declared: Optional[Requirement]  # the requirement as declared; None when undeclared
    admitted: tuple[str, ...]  # the known releases below `minimum` it admits, oldest first


@dataclass(frozen=True)
class BelowBuildFloor:
    """An installed CUDA library wheel below the release its consumer (the subject) requires: the
    consumer refuses it at load time, having been built against the floor."""

    library: str  # the component, as data/components.toml names it ("cudnn")
    provider: NormalizedName  # the wheel installed ("nvidia-cudnn-cu12")
    installed: Version
    extra: Optional[str]  # the consumer's extra that requires it; None: required without one
    required: Requirement  # the consumer's requirement on the provider, without its marker
    floor: Version
    # From the consumer's build record instead of its metadata: the file and the field that set the
    # floor ("tensorflow/python/platform/build_info.py", "cudnn_version", "9.8")
    record: Optional[tuple[str, str, str]] = None


Problem = Union[
    Unreadable, BinaryFactsUnreadable, ForeignMachine, DeviceCodePartlyUnreadable, DeviceCodeSkipped, NoSectionHeaders,
    CacheUnwritable, HostUnknown, LibraryNotLoaded, FoundOnlyAfterCall, NoAlternativeLoads, OptionalFeaturesMissing,
    PluginLibrariesMissing, SymbolSkew, FrameworkAbiMismatch, PluginHostMismatch, CpuOnly, UnusedBridge, Shadowed,
    DuplicateBuilds, PrivateCopies, NoDeviceCode,
    OptInUnavailable, DriverTooOld, UndatedRuntime, MinorCompat, MixedMajors, CompanionMajors, PreloadedOtherMajor, KnownBadRelease,
    MetadataAdmitsOlder, BelowBuildFloor, CompilerCannotTargetGpu, CompilerPtxTooNew, LinkerCannotRead, DlsymFunctionsMissing,
    DlopenedNotFound, DlopenedOtherMajor, OwnedTwice, SbsaOnJetson, BelowPackageFloor, ImportFailed, ImportNotObserved,
]
