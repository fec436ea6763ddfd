"""The facts that show a finding, as small frozen dataclasses: files, symbols, the loader's choices,
versions. output/findings.py words each type; a finding lists them in the order they are shown.

May import: the value types, compat's `Verdict`, checks/subjects.py; nothing that judges.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Union

from cudaresolve.arch import ComputeCapability
from cudaresolve.checks.subjects import Subject
from cudaresolve.compat import Verdict
from cudaresolve.versions import CudaVersion, DriverRelease


@dataclass(frozen=True)
class Said:
    """What another program or a table said, as it said it: a host source's note, a fatbin reader's
    damage note, an advisory's issue reference."""

    text: str
    source: Optional[str] = None  # who said it, when that is part of it ("nvml", "probe")


@dataclass(frozen=True)
class File:
    path: str


@dataclass(frozen=True)
class Owned:
    """A distribution whose RECORD lists the file."""

    distribution: str


@dataclass(frozen=True)
class More:
    """Items left out of the list above it: `count` more (libraries, when the list is of libraries)."""

    count: int
    libraries: bool = False


@dataclass(frozen=True)
class MoreOf:
    """A package's libraries left out of the list above it (`owner` None: files no distribution owns)."""

    count: int
    owner: Optional[str]


@dataclass(frozen=True)
class InstalledBy:
    subject: Subject


@dataclass(frozen=True)
class LoaderError:
    """glibc's words about one file."""

    file: str
    message: str


@dataclass(frozen=True)
class Unfound:
    """Where the loader looked for a needed library: a file it found first and refused (`refused`,
    with the step), copies in the environment its search path does not reach, or nothing at all."""

    consumer: str
    needed: str
    refused: Optional[str] = None
    refused_step: Optional[str] = None
    copies: tuple[str, ...] = ()


@dataclass(frozen=True)
class LoadedByCall:
    consumer: str
    needed: str
    module: str
    function: str
    path: str  # what the call would load


@dataclass(frozen=True)
class Needs:
    """A file needs these libraries or symbols."""

    file: str
    names: tuple[str, ...]


@dataclass(frozen=True)
class LoaderPicks:
    path: str
    step: Optional[str]
    owner: Optional[Subject] = None  # named when a conda package installed it


@dataclass(frozen=True)
class BridgeSymbols:
    consumer: str
    symbols: tuple[str, ...]  # sorted
    provider: str


@dataclass(frozen=True)
class Chosen:
    consumer: str
    needed: str
    path: str
    step: str


@dataclass(frozen=True)
class EnvironmentCopy:
    path: str


@dataclass(frozen=True)
class LoadedBy:
    """A copy of a duplicated library and the objects the loader resolves to it."""

    path: str
    owner: Optional[str]  # None: no distribution owns it
    conda: bool
    consumers: tuple[str, ...]  # sorted


@dataclass(frozen=True)
class CopyUse:
    """A copy of a duplicated library, and who finds it: `consumers`, no one (a conda package's, not
    judged here), or its own package by path."""

    path: str
    owner: Optional[str]  # None: no distribution owns it
    conda: bool
    consumers: tuple[str, ...]  # sorted


@dataclass(frozen=True)
class NoCodeFor:
    """A file that cannot run on a GPU, and why."""

    path: str
    why: Verdict


@dataclass(frozen=True)
class DependenciesFailToo:
    """The CUDA wheels a package pulls in that fail the same way, folded into its finding."""

    names: tuple[str, ...]
    cc: Optional[ComputeCapability] = None  # lacking code for this GPU; None: needing the same driver


@dataclass(frozen=True)
class FamilyFailsToo:
    """The installed packages whose builds follow torch's variant (torchvision, torchaudio) that fail
    the same way, folded into torch's finding: its variant fix moves them along."""

    names: tuple[str, ...]
    cc: Optional[ComputeCapability] = None  # lacking code for this GPU; None: needing the same driver


@dataclass(frozen=True)
class BuiltWith:
    """How the CUDA a package is built for is known (checks/builds.py's words)."""

    text: str


@dataclass(frozen=True)
class CudaRuntimeIn:
    """A package's own CUDA runtime, which sets its CUDA: `file` is a vendored libcudart (`linkage`
    "shared", its major from the version node libcudart.so.N) or links one in ("static"); `read_from`
    says where `release` was read ("file name", "toolkit note"; None: only the major is known)."""

    file: str
    linkage: str
    major: int
    release: Optional[str]
    read_from: Optional[str]


@dataclass(frozen=True)
class HostDriver:
    release: Optional[DriverRelease]
    cuda: Optional[CudaVersion]


@dataclass(frozen=True)
class MajorUsers:
    major: int
    names: tuple[str, ...]  # sorted


@dataclass(frozen=True)
class LinksOtherMajor:
    file: str
    needed: str
    installed: tuple[str, ...]  # the wheels of the component the environment has, sorted


@dataclass(frozen=True)
class References:
    """A file that references a symbol an advisory names."""

    file: str
    symbol: str
    version: Optional[str]


@dataclass(frozen=True)
class SymbolNeed:
    file: str
    symbol: str
    soname: str


@dataclass(frozen=True)
class FileBytes:
    """A file several distributions own: the hash each records for it, and whose bytes are there."""

    path: str
    recorded: tuple[tuple[str, Optional[str]], ...]  # (distribution, "sha256=..."; None: not known, a planned wheel)
    on_disk: Optional[str]  # the owner whose recorded hash the file has; None: none, or not compared
    unjudged: Optional[str] = None  # why the bytes were not compared


@dataclass(frozen=True)
class SharedBy:
    """The file is one several distributions own (its owned-twice finding is the cause)."""

    path: str
    owners: tuple[str, ...]
    on_disk: Optional[str]


@dataclass(frozen=True)
class SearchPicks:
    """A library a package's own sys.path search loads by path, found in `directory` before its build's
    own copy (`own`, None when it has none) in `own_directory`."""

    soname: str
    picked: str
    owner: str  # the wheel that installed it
    directory: str  # relative to the sys.path entry ("nvidia/cusparse/lib")
    own_directory: Optional[str]  # the build's own major's directory ("nvidia/cu13/lib"), if it has one
    own: Optional[str]


@dataclass(frozen=True)
class ImportLoaded:
    """`doctor --import`: the import of the file's distribution ran and mapped the file, so what the
    loader model says it cannot load did load there (a preload the model does not read)."""

    path: str


Evidence = Union[
    Said, File, Owned, More, MoreOf, InstalledBy, LoaderError, Unfound, LoadedByCall, Needs, LoaderPicks, BridgeSymbols, Chosen,
    EnvironmentCopy, LoadedBy, CopyUse, NoCodeFor, DependenciesFailToo, FamilyFailsToo, BuiltWith, CudaRuntimeIn, HostDriver, MajorUsers,
    LinksOtherMajor, References, SymbolNeed, FileBytes, SharedBy, SearchPicks, ImportLoaded,
]
