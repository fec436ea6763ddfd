"""The lock: what `cudaresolve lock` chose for one or more hosts, as plain frozen data.

Why in resolve/: it is the resolver's answer (its decisions are the resolver's records), so the
resolver owns it; lockfile/ reads and writes it as files and output/ renders it, both importing it
from here, and nothing here imports them. A Lock read from a file holds only values that passed
lockfile/fields.py's rules; the writers apply the same rules to a Lock built in code.

Pure data. May import: packaging, the value types, resolve/reasons.py.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Literal, Optional, Union

from packaging.utils import NormalizedName
from packaging.version import Version

from cudaresolve.resolve.reasons import CandidateRef, MajorRejection, Origin, Rejection
from cudaresolve.versions import CudaVersion

# PEP 751's sources of a package other than wheels: cudaresolve can neither judge nor install them.
OtherSource = Literal["sdist", "vcs", "directory", "archive"]


class ReasonKind(enum.Enum):
    """How a locked package is sourced; the value is what files and JSON say."""

    INDEX = "index"  # a wheel chosen from the indexes
    KEPT = "kept"  # the installed release, kept
    CONDA = "conda"  # a conda package of the prefix stands for it
    OTHER_SOURCE = "other-source"  # another tool's entry with only an sdist, VCS, directory or archive
    UNRECORDED = "unrecorded"  # another tool's lock, which records no reason


class PreRelease(enum.Enum):
    """Why a pre-release was chosen, by pip's rule; the value is what files and JSON say."""

    NAMED = "named"  # a requirement's specifier names a pre-release (>=2.0rc1)
    PRE = "pre"  # pip's pre option: --pre, PIP_PRE or `pre` in pip's configuration
    ONLY = "only"  # the name has no final release, and no requirement names a version


class ExtraFor(enum.Enum):
    """Why the lock added an extra to a request; the value is what files and JSON say."""

    CUDA_MAJOR = "cuda-major"  # the environment's CUDA major (cuda-cccl -> [cu12])
    LIBRARIES = "libraries"  # the CUDA libraries the package loads undeclared are not on the target (cupy-cuda12x -> [ctk])


@dataclass(frozen=True)
class Build:
    """The CUDA a chosen build was made with, and the doctor's words for how that is known."""

    cuda: CudaVersion
    evidence: str  # checks/builds.py's account: "torch 2.7.1+cu128 is +cu128, built with CUDA 12.8"


@dataclass(frozen=True)
class Reason:
    """Why a package is in the lock at its version and build."""

    kind: ReasonKind
    origins: tuple[Origin, ...] = ()  # the requirements that brought it into the set, and pip constraints on it
    asked_as: Optional[NormalizedName] = None  # the name the user wrote: cupy -> cupy-cuda12x
    # the extras added to a request without them: cuda-cccl -> [cu12], onnxruntime-gpu -> [cuda, cudnn]
    added_extras: tuple[str, ...] = field(default=(), metadata={"unwritten-default": True})
    cuda_major: Optional[int] = None  # the environment's major that made `asked_as` or `added_extras`
    build: Optional[Build] = None
    written_by: Optional[str] = None  # OTHER_SOURCE: the tool whose lock holds the entry
    prerelease: Optional[PreRelease] = None  # a pre-release chosen from an index: why one was allowed
    extras: Optional[tuple[str, ...]] = None  # the extras chosen with it (each provided by this release), normalised
    extra_for: Optional[ExtraFor] = None  # why `added_extras` were added (None in locks written before it was recorded)


@dataclass(frozen=True)
class LockedWheel:
    """One wheel file of a locked release (a release may have several: one per platform or Python)."""

    filename: str
    url: str
    sha256: Optional[str]  # lowercase hex digest; every writer that pins files requires it
    size: Optional[int]


@dataclass(frozen=True)
class LockedSdist:
    """The sdist of a release locked without a wheel for its target: pip builds it at install."""

    filename: str
    url: str
    sha256: Optional[str]  # lowercase hex digest; every writer requires it
    size: Optional[int]


@dataclass(frozen=True)
class LockedPackage:
    """One pinned distribution and why it was chosen."""

    name: NormalizedName
    version: Optional[Version]  # with its local label: 2.11.0+cu130; None only for another source unpinned
    index: Optional[str]  # the index URL it comes from (a torch variant index for torch +cuXYZ)
    wheels: tuple[LockedWheel, ...]  # the release's files for the targets' tags; empty: kept installed, provided by conda, or only another source
    marker: Optional[str]  # PEP 508 environment marker: install only where it holds
    reason: Reason
    provided_by: Optional[str] = None  # the conda package that stands for it ("libnvjitlink 12.8.93 (conda)"); no wheel
    other_source: Optional[OtherSource] = None  # another tool's entry with no wheel: what it has instead
    sdist: Optional[LockedSdist] = None  # a release with no wheel for the target, locked as pip takes it

    @property
    def files(self) -> tuple[Union[LockedWheel, LockedSdist], ...]:
        """The files pip may install it from: its wheels, and the sdist it builds; none when kept or conda's."""
        return self.wheels if self.sdist is None else (*self.wheels, self.sdist)


@dataclass(frozen=True)
class Decision:
    """What `--explain` shows for one name: the candidate chosen and every one set aside."""

    name: NormalizedName
    chosen: Optional[CandidateRef]  # None when nothing fit
    rejected: tuple[Rejection, ...]
    marker: Optional[str] = None  # a universal lock's: the targets it was made for, where they decided differently


@dataclass(frozen=True)
class MajorDecision:
    """The environment's one CUDA major, and each newer one that some host cannot run."""

    chosen: int
    rejected: tuple[MajorRejection, ...]
    marker: Optional[str] = None  # a universal lock's: the targets it was made for, where they decided differently


@dataclass(frozen=True)
class Fork:
    """A name a universal lock pins differently per target (resolve/universal.py): each target's
    marker with its version there, None where the target does not need the name."""

    name: NormalizedName
    versions: tuple[tuple[str, Optional[Version]], ...]


@dataclass(frozen=True)
class Lock:
    """A resolution for one or more hosts, with everything needed to install it and explain it."""

    packages: tuple[LockedPackage, ...]
    requires_python: Optional[str]
    hosts: tuple[dict[str, Any], ...]  # host facts JSON objects (HostFacts.to_json() parsed)
    host_labels: tuple[str, ...]  # one per host, e.g. the --host file it came from
    index_urls: tuple[str, ...]  # the first is the primary index, the rest are extra indexes
    decisions: tuple[Decision, ...]
    created_by: str  # the tool that wrote it, e.g. "cudaresolve 0.1.0"
    major: Optional[MajorDecision] = None  # None when no major was set aside (or another tool's lock)
    environments: tuple[str, ...] = ()  # PEP 751 `environments`: markers of the targets it is for; empty: any
    forks: tuple[Fork, ...] = ()  # names pinned differently per target (a universal lock)
    majors: tuple[MajorDecision, ...] = ()  # per target, each with its marker, when targets' CUDA majors differ (then `major` is None)
