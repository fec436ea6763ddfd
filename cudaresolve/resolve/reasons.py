"""The resolver's vocabulary: a candidate, why one was set aside, and where a requirement came from.
Why a build does not fit a host is a verdict (verdicts/records.py), which a rejection carries as is.

What `lock --explain`, `why`, the JSON report, pylock.toml's [tool.cudaresolve] and a refusal say is
built from these values; the sentences are made in output/ (output/lock_words.py), the lock file
stores the values (lockfile/) and reads them back validated. Each kind of grounds and of origin is
its own frozen dataclass, named by a stable `kind` string the files use.

Pure data. May import: packaging, the value types (arch.py, versions.py), the verdicts, the judge's
Finding (checks/findings.py).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import ClassVar, Optional, Union

from packaging.requirements import Requirement
from packaging.utils import NormalizedName
from packaging.version import Version

from cudaresolve.checks.findings import Finding
from cudaresolve.verdicts.records import BelowPackageFloor as BelowPackageFloor
from cudaresolve.verdicts.records import CpuOnly as CpuOnly
from cudaresolve.verdicts.records import DriverTooOld as DriverTooOld
from cudaresolve.verdicts.records import GpuRef as GpuRef
from cudaresolve.verdicts.records import MinorCompat as MinorCompat
from cudaresolve.verdicts.records import NoDeviceCode as NoDeviceCode
from cudaresolve.verdicts.records import Rule as Rule
from cudaresolve.verdicts.records import SbsaOnJetson as SbsaOnJetson
from cudaresolve.verdicts.records import ToolkitTargets as ToolkitTargets
from cudaresolve.versions import CudaVersion


@dataclass(frozen=True)
class CandidateRef:
    """One release of a distribution: a candidate the resolver weighed."""

    name: NormalizedName
    version: Version  # with its local label: 2.7.1+cu128


# -- why a candidate was set aside ------------------------------------------------------------------


@dataclass(frozen=True)
class SdistOnly:
    """The release has no wheel for this interpreter, only an sdist the lock does not take: pip's
    only-binary refuses it (`via`), or, with `via` None, the name is one whose binaries the lock
    judges (a CUDA package), which a build from source would make unjudged."""

    rule: ClassVar[Rule] = Rule.SDIST_ONLY
    via: Optional[str] = None  # the only-binary setting that refuses it: "--only-binary", "PIP_ONLY_BINARY"


@dataclass(frozen=True)
class NoBinary:
    """pip's no-binary covers the name, so none of its wheels may be installed, and the release has
    no sdist to build instead."""

    rule: ClassVar[Rule] = Rule.NO_BINARY
    via: str  # the setting: "PIP_NO_BINARY", "/etc/pip.conf [global]"


@dataclass(frozen=True)
class RequiresPython:
    """The release's files all require another Python."""

    rule: ClassVar[Rule] = Rule.REQUIRES_PYTHON
    specifier: str  # the file's Requires-Python, as the index gives it


@dataclass(frozen=True)
class NoWheel:
    """No wheel of the release fits this interpreter and platform."""

    rule: ClassVar[Rule] = Rule.NO_WHEEL


@dataclass(frozen=True)
class Yanked:
    """PEP 592: a yanked file is taken only for an exact pin."""

    rule: ClassVar[Rule] = Rule.YANKED
    reason: str = ""  # the index's words; "" when it gives none


@dataclass(frozen=True)
class ShadowsConda:
    """In a conda prefix, the wheel would shadow a library a conda package provides."""

    rule: ClassVar[Rule] = Rule.CONDA_SHADOW
    soname: str
    package: str  # the conda package, as its label: "libnvjitlink 12.8.93 (conda)"


@dataclass(frozen=True)
class OtherMajor:
    """A build for another CUDA major than the environment's: by its name or local label, or by a
    binary that links a library only that major's wheels install (`file` and `soname`: torchcodec
    0.17.0's libtorchcodec_core links libcudart.so.13), so an older release of the set's major is tried."""

    rule: ClassVar[Rule] = Rule.OTHER_MAJOR
    build_major: int
    environment_major: int
    file: Optional[str] = None  # the linking file, as a path inside the wheel
    soname: Optional[str] = None  # the library of `build_major` it links


NOT_IN_LOCK_FILE = {"lock-file": False}  # a field's metadata: held in memory only, never written or read


@dataclass(frozen=True)
class Judged:
    """The doctor's checks refused the planned environment with this candidate in it."""

    rule: ClassVar[Rule] = Rule.JUDGE
    check: str  # the check's id: "symbol-skew", "advisory"
    subject: str  # the distribution, or the file no distribution owns, the finding concerns
    problem: str  # the finding's kind of problem: "SymbolsMissing", "KnownBadRelease"
    # The finding itself while the lock is made, for its words; a lock file keeps the fields above.
    finding: Optional[Finding] = field(default=None, compare=False, repr=False, metadata=NOT_IN_LOCK_FILE)


@dataclass(frozen=True)
class OlderCuda:
    """Another build of the chosen version, for an older CUDA than the chosen one, which runs here."""

    rule: ClassVar[Rule] = Rule.OLDER_CUDA
    chosen_local: Optional[str]  # the chosen build's local label ("cu128"); None: the default build


@dataclass(frozen=True)
class NotNeeded:
    """Another build of the chosen version: the chosen one runs here and fits every requirement."""

    rule: ClassVar[Rule] = Rule.NOT_NEEDED
    chosen_local: Optional[str]


@dataclass(frozen=True)
class PreReleaseNotAllowed:
    """A pre-release, by pip's rule not a candidate: no requirement names one, pip's pre option is
    not given, and a requirement names a version or a final release satisfies them."""

    rule: ClassVar[Rule] = Rule.PRE_RELEASE


@dataclass(frozen=True)
class NoExtra:
    """The release does not provide an extra it was asked with (its metadata neither declares it in
    Provides-Extra nor names it in a Requires-Dist marker)."""

    rule: ClassVar[Rule] = Rule.NO_EXTRA
    extra: str  # as asked, normalised: "cuda12"


@dataclass(frozen=True)
class BreaksInstalled:
    """The release needs a version of another distribution that no release fits together with the
    need of an installed distribution the plan keeps (a torch pinning cuDNN 9.5 beside an installed
    JAX plugin whose [with-cuda] needs cuDNN >= 9.8): installing it would break what stays."""

    rule: ClassVar[Rule] = Rule.BREAKS_INSTALLED
    requirement: str  # what the release needs: "nvidia-cudnn-cu12==9.5.*"
    consumer: CandidateRef  # the installed distribution that stays
    need: str  # what the consumer needs: "nvidia-cudnn-cu12>=9.8"
    extra: Optional[str] = None  # the consumer's extra the need came through (one that counts as chosen)


@dataclass(frozen=True)
class FactsUnknown:
    """A release whose binary facts a rule needs (its device code for a stated GPU, the runtime it
    carries, what it binds) that no table row gives and whose wheel could not be read (--offline and
    not cached, a damaged wheel): not known to run, so never taken as fitting."""

    rule: ClassVar[Rule] = Rule.FACTS_UNKNOWN
    why: str  # why the wheel could not be read


@dataclass(frozen=True)
class NeedsSetAside:
    """A newer release of a name asked for that the resolution passed over because one of its
    requirements admits only releases the rules set aside here (sglang 0.5.23 needs torch==2.14.1,
    whose builds all lack code for the GPU): why the lock takes an older release than pip would."""

    rule: ClassVar[Rule] = Rule.NEEDS_SET_ASIDE
    requirement: str  # what the release needs: "torch==2.14.1"
    set_aside: Rejection  # the newest release that requirement admits, and why it was set aside
    more: int = 0  # how many other releases it admits were set aside too


# Why a candidate was set aside: the rule's facts (a lock file writes them under `evidence`).
RejectionGrounds = Union[
    SdistOnly, NoBinary, RequiresPython, NoWheel, Yanked, DriverTooOld, NoDeviceCode, ToolkitTargets, ShadowsConda,
    OtherMajor, Judged, OlderCuda, NotNeeded, PreReleaseNotAllowed, CpuOnly, NoExtra, MinorCompat, BreaksInstalled,
    SbsaOnJetson, FactsUnknown, BelowPackageFloor, NeedsSetAside,
]
GROUNDS: dict[Rule, type] = {kind.rule: kind for kind in RejectionGrounds.__args__}  # type: ignore[attr-defined]
DoesNotRun = Union[DriverTooOld, NoDeviceCode, SbsaOnJetson, BelowPackageFloor]  # a build against a host's driver, GPUs and CUDA
MajorRefusal = Union[DriverTooOld, ToolkitTargets]  # a CUDA major against a host


@dataclass(frozen=True)
class Rejection:
    """One candidate set aside, the rule that did it and the facts it judged."""

    candidate: CandidateRef
    evidence: RejectionGrounds
    installed: bool = False  # the installed distribution (kept unless --upgrade), not a file of an index

    @property
    def rule(self) -> Rule:
        return self.evidence.rule


@dataclass(frozen=True)
class MajorRejection:
    """A CUDA major the environment could not be built on, and why."""

    major: int
    evidence: MajorRefusal


# -- where a requirement came from -----------------------------------------------------------------


class OriginKind(enum.Enum):
    ASKED = "asked"
    CONSTRAINT = "constraint"
    REQUIRES_DIST = "requires-dist"
    EXTRAS = "extras"
    BINARY_NEED = "binary-need"


@dataclass(frozen=True)
class Asked:
    """The user asked for it: on the command line, in a requirements file, in pyproject.toml."""

    kind: ClassVar[OriginKind] = OriginKind.ASKED
    where: str  # "command line", "requirements.txt:3", "pyproject.toml: project.dependencies[0]"


@dataclass(frozen=True)
class Constrained:
    """A pip constraint (-c, or pip's `constraint` setting): it limits versions, it never asks for
    a distribution."""

    kind: ClassVar[OriginKind] = OriginKind.CONSTRAINT
    where: str  # the file and line: "constraints.txt:3"
    via: Optional[str] = None  # the pip setting that named the file ("PIP_CONSTRAINT", "/etc/pip.conf [global]"); None: -c


@dataclass(frozen=True)
class RequiredBy:
    """A candidate's Requires-Dist, under one of its extras when `extra` is set; with `installed`, an
    installed distribution's that the plan keeps (a root of the resolution: what stays binds the
    plan), under an extra that counts as chosen there."""

    kind: ClassVar[OriginKind] = OriginKind.REQUIRES_DIST
    parent: CandidateRef
    extra: Optional[str] = None
    # lock files write it only when true: the origins of every lock written before it read the same
    installed: bool = field(default=False, metadata={"unwritten-default": True})
    # the requirement the parent holds, without its marker ("cuda-toolkit[cublas]==12.*"), for `why`;
    # not compared: one parent bringing a name is one origin; None in locks written before it was kept
    requirement: Optional[str] = field(default=None, compare=False)


@dataclass(frozen=True)
class ExtrasOf:
    """The release a candidate asked for with extras stands on (`foo[x]` needs `foo` of its version)."""

    kind: ClassVar[OriginKind] = OriginKind.EXTRAS
    parent: CandidateRef


@dataclass(frozen=True)
class BinaryNeed:
    """An ELF file binds a versioned symbol that implies a release of another component
    (`__nvJitLinkComplete_12_4@libnvJitLink.so.12`: nvJitLink >= 12.4), or (`linked`) links a CUDA
    library nothing else of the planned set provides (resolve/undeclared.py)."""

    kind: ClassVar[OriginKind] = OriginKind.BINARY_NEED
    consumer: Optional[CandidateRef]  # the wheel or installed distribution; None: installed files no one owns
    installed: bool  # the consumer's files are installed (a root of the resolution), not a candidate's
    soname: str  # the provider's soname: libnvJitLink.so.12
    floor: CudaVersion  # the release the symbol names imply: 12.4
    file: Optional[str] = None  # the binding file: an installed path, or a path inside the wheel
    symbol: Optional[str] = None  # one symbol that implies `floor`: __nvJitLinkComplete_12_4
    # the file links `soname` and nothing else of the set provides it: any release of `floor`'s major
    linked: bool = field(default=False, metadata={"unwritten-default": True})


Origin = Union[Asked, Constrained, RequiredBy, ExtrasOf, BinaryNeed]
ORIGINS: dict[OriginKind, type] = {kind.kind: kind for kind in Origin.__args__}  # type: ignore[attr-defined]


@dataclass(frozen=True)
class Need:
    """A requirement with where it came from: what the resolver is given and passes to resolvelib,
    so a conflict names its origin and a locked package lists why it is there."""

    requirement: Requirement
    origin: Origin

    @property
    def name(self) -> str:
        return self.requirement.name

    @property
    def extras(self) -> set[str]:
        return self.requirement.extras

    def __str__(self) -> str:
        return str(self.requirement)


def parent_of(origin: Origin) -> Optional[CandidateRef]:
    """The candidate whose needs brought a requirement; None for a root (asked, constrained, or
    needed by installed distributions or files)."""
    if isinstance(origin, RequiredBy) and origin.installed:
        return None
    if isinstance(origin, (RequiredBy, ExtrasOf)):
        return origin.parent
    if isinstance(origin, BinaryNeed) and not origin.installed:
        return origin.consumer
    return None
