"""What removes a finding, as a value: pip and conda steps with their requirements, a driver upgrade,
a call the program makes, a change to a loader variable, and how they combine (one or another,
one then another, one for each package), each with why it is offered.

output/fixes.py words every type; `actions` lists the steps a test (or a tool) can apply, in order.
Texts kept here are a table's own (an advisory's fix).

May import: the value types (versions, arch) and packaging; nothing that judges.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Optional, Union

from packaging.requirements import Requirement
from packaging.utils import NormalizedName
from packaging.version import Version

from cudaresolve.arch import ComputeCapability
from cudaresolve.versions import CudaVersion, DriverRelease

# -- steps that can be applied ----------------------------------------------------------------------


@dataclass(frozen=True)
class PipInstall:
    """`pip install` of these requirements; `replaces` are installed distributions they stand in for
    (another name: pip would leave those in place, so applying it uninstalls them first)."""

    requirements: tuple[Requirement, ...]
    replaces: tuple[NormalizedName, ...] = ()
    options: tuple[str, ...] = ()  # pip options ("--force-reinstall", "--no-deps"), none so far


@dataclass(frozen=True)
class PipUninstall:
    names: tuple[NormalizedName, ...]


@dataclass(frozen=True)
class TorchVariant:
    """torch's build for CUDA variant `variant` ("cu126") from the PyTorch index's `index_path`, with
    the installed family members whose builds follow torch's variant (torchvision, torchaudio) at
    their installed public releases: torch moved alone leaves them on the old variant's CUDA."""

    version: Version  # the public release, 2.8.0
    variant: str
    index_path: str  # relative to the PyTorch index base ("whl/cu126")
    companions: tuple[tuple[NormalizedName, Version], ...] = ()  # (torchvision, 0.29.1): public releases

    @property
    def requirement(self) -> Requirement:
        return Requirement(f"torch=={self.version}+{self.variant}")

    @property
    def requirements(self) -> tuple[Requirement, ...]:
        """torch's and each companion's build of this variant, from the same index path."""
        return (self.requirement,) + tuple(Requirement(f"{name}=={version}+{self.variant}")
                                           for name, version in self.companions)


@dataclass(frozen=True)
class CondaSpec:
    """A conda match spec: `name` `relation` `version` ("cuda-version<=12.9")."""

    name: str
    relation: str  # ">=", "<="
    version: Union[CudaVersion, Version]


@dataclass(frozen=True)
class CondaInstall:
    specs: tuple[CondaSpec, ...]


@dataclass(frozen=True)
class CondaUpdate:
    package: str


@dataclass(frozen=True)
class DriverUpgrade:
    minimum: Optional[DriverRelease]  # None when the tables hold no floor for the build's CUDA major


@dataclass(frozen=True)
class Call:
    """A call the program makes before the package's first use (`onnxruntime.preload_dlls()`)."""

    module: str
    function: str


@dataclass(frozen=True)
class AddToPath:
    """Put a directory on a search-path variable; `first`: before what is there. `directory` None:
    the right copy's directory is not known."""

    variable: str
    directory: Optional[str]
    first: bool = False


@dataclass(frozen=True)
class RemoveFromPath:
    """Take `entry` (a directory, or a file for LD_PRELOAD) out of a variable."""

    variable: str
    entry: str


@dataclass(frozen=True)
class RemoveStaleDirectory:
    """Take a stale directory out of a search-path variable (worded without naming it)."""

    variable: str
    directory: str


@dataclass(frozen=True)
class RemoveCopy:
    """Remove the copy of a library the loader picks wrongly."""

    path: str


@dataclass(frozen=True)
class KeepOneBuild:
    """Keep one build of a duplicated library: remove `remove` (nothing installed requires it; with
    conda for a conda package), or install releases that share one provider; without `remove`, only
    the latter."""

    remove: Optional[NormalizedName] = None
    conda: bool = False


@dataclass(frozen=True)
class AddConstraint:
    """Keep `requirement` in the constraints file pip reads: the installed release meets it, but the
    package's metadata admits older ones a later install may pick."""

    requirement: Requirement


@dataclass(frozen=True)
class AdvisoryFix:
    """The fix data/advisories.toml gives for advisory `advisory`, in its words."""

    advisory: str
    text: str


# -- advice that names what to look for, where no step can be named ----------------------------------


@dataclass(frozen=True)
class StateHost:
    """Judge for the GPU machine: --host FILE from its probe, or --driver/--gpu."""


@dataclass(frozen=True)
class ReleaseThatFinds:
    """Install a release of the package that finds the library."""


@dataclass(frozen=True)
class FindWheelCopy:
    """Make the package find its wheel's copy (its RPATH, or the preload order)."""


@dataclass(frozen=True)
class BuildWithCuda:
    """A build made with CUDA <= `maximum`, the newest toolkit that targets `cc` (and the driver runs)."""

    maximum: CudaVersion
    cc: ComputeCapability
    driver_known: bool


@dataclass(frozen=True)
class OlderReleaseMayCarry:
    """An older release of the package may carry code for `cc`; none is known here."""

    distribution: str
    version: Version
    cuda: CudaVersion
    cc: ComputeCapability


@dataclass(frozen=True)
class NewerReleaseNeeded:
    """The package was built with CUDA `cuda`, older than `minimum`, the first CUDA that targets `cc`:
    only a newer release, built with CUDA >= `minimum`, can carry code for it."""

    distribution: str
    version: Version
    cuda: CudaVersion
    cc: ComputeCapability
    minimum: CudaVersion


@dataclass(frozen=True)
class NoKnownRelease:
    """cudaresolve's table holds no release of `names` that runs on `runs_on` (GPUs), that is built
    for CUDA `cuda_major`, or (neither given) that is built for a CUDA the driver runs."""

    names: tuple[str, ...]
    runs_on: tuple[ComputeCapability, ...] = ()
    cuda_major: Optional[int] = None


@dataclass(frozen=True)
class InstallBuild:
    """Install a build of `of` for CUDA `cuda` (None: the one the driver supports)."""

    of: tuple[str, ...]
    cuda: Optional[CudaVersion]


@dataclass(frozen=True)
class InstallBuildsOf:
    major: int
    names: tuple[str, ...]


@dataclass(frozen=True)
class InstallWheels:
    major: int
    names: tuple[str, ...]


@dataclass(frozen=True)
class BuildOf:
    """A build of `name` for CUDA `major` (the other side of a choice)."""

    name: str
    major: int


# -- a fix judged on its planned environment (resolve/fix_judge.py) ------------------------------------


@dataclass(frozen=True)
class NotOffered:
    """No release the configured indexes offer meets `requirement` (with `offline`: none the cached
    pages list)."""

    requirement: Requirement
    offline: bool = False


@dataclass(frozen=True)
class NoBuildOffered:
    """Every release of `name` the configured indexes offer is built for another CUDA major than `major`."""

    name: str
    major: int
    offline: bool = False


@dataclass(frozen=True)
class KeepsFinding:
    """The planned environment still shows the finding the fix is for."""


@dataclass(frozen=True)
class AddsError:
    """The planned environment shows an error the installed one does not: `check` on `subject`
    (a distribution or a file; None: the environment)."""

    check: str
    subject: Optional[str]


@dataclass(frozen=True)
class BreaksRequirement:
    """`distribution` `version`, which stays, requires `requirement` (through `extra`); the plan holds
    `planned` of it (None: the plan removes it)."""

    distribution: str
    version: Version
    requirement: Requirement
    extra: Optional[str]
    planned: Optional[Version]


@dataclass(frozen=True)
class LeavesDriverMajor:
    """The plan brings builds of CUDA `major`, which the driver cannot run, or which is older than the
    CUDA `kept` the environment runs now."""

    major: int
    kept: Optional[int]


@dataclass(frozen=True)
class NoMajorTargets:
    """No release of CUDA `majors` builds code for `ccs` (CUDA 13 dropped Pascal), so none of `name`'s
    is tried; `newest` is the newest CUDA that does (None: none the driver runs), of which the
    configured indexes (`offline`: the cached pages) offer no release that could stand in."""

    name: str
    majors: tuple[int, ...]
    ccs: tuple[ComputeCapability, ...]
    newest: Optional[CudaVersion]
    offline: bool = False


Refusal = Union[NotOffered, NoBuildOffered, KeepsFinding, AddsError, BreaksRequirement, LeavesDriverMajor, NoMajorTargets]


@dataclass(frozen=True)
class Refused:
    """A fix the judge did not print (`fix`) and why."""

    fix: "Fix"
    why: Refusal


@dataclass(frozen=True)
class NoFixFound:
    """No fix that was tried passes the judge: each with why it was refused."""

    tried: tuple[Refused, ...]


@dataclass(frozen=True)
class WithInstall:
    """A fix that changes releases, with the `cudaresolve install` line that makes it: it locks those
    `requirements` with what stays, installs the lock and judges again; `uninstall` first, the wheels
    the fix comes in place of (a lock installs, it removes nothing)."""

    fix: "Fix"
    requirements: tuple[Requirement, ...]
    uninstall: tuple[NormalizedName, ...] = ()


@dataclass(frozen=True)
class Unchecked:
    """A fix printed as the tables give it because the judge could not read what it needs: the index
    pages are not cached (--offline; `unreadable` None) or an index could not be read (`unreadable`: why)."""

    fix: "Fix"
    unreadable: Optional[str] = None


# -- how fixes combine ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Alternatives:
    """Any one of these ("A, or B")."""

    options: tuple["Fix", ...]


@dataclass(frozen=True)
class OrElse:
    """The first, or else the second where it applies ("A; or B")."""

    first: "Fix"
    second: "Fix"


@dataclass(frozen=True)
class Steps:
    """These in order ("A, then B")."""

    steps: tuple["Fix", ...]


@dataclass(frozen=True)
class Each:
    """One fix per package, all of them ("A; B")."""

    fixes: tuple["Fix", ...]


# -- why a fix is offered (worded before or after it) -------------------------------------------------


@dataclass(frozen=True)
class AlsoProvidedBy:
    names: tuple[str, ...]


@dataclass(frozen=True)
class ToEnable:
    """It enables optional features."""


@dataclass(frozen=True)
class Constrain:
    """It constrains a dependency the metadata leaves open (or a constraints file can)."""


@dataclass(frozen=True)
class BuildLibraries:
    """It installs the libraries of the package's CUDA `major` build in `directory`."""

    major: int
    directory: str


@dataclass(frozen=True)
class TakeRoute:
    """It selects and installs the package's CUDA `major` build."""

    major: int


@dataclass(frozen=True)
class DriverCannotRun:
    major: int


@dataclass(frozen=True)
class WheelsOfMajors:
    """What it removes: wheels of these CUDA majors."""

    majors: tuple[int, ...]


@dataclass(frozen=True)
class NoneFitsEither:
    """Companion wheels named bare: the table holds no release of them that fits."""

    names: tuple[str, ...]


@dataclass(frozen=True)
class NewestThatRuns:
    """The table's newest release whose device code runs on these GPUs."""

    ccs: tuple[ComputeCapability, ...]


@dataclass(frozen=True)
class OfferedThatRuns:
    """The newest release the configured indexes offer whose own device code, read from its wheel,
    runs on these GPUs."""

    ccs: tuple[ComputeCapability, ...]


@dataclass(frozen=True)
class CompilerFits:
    """The newest compiler release in the table that targets `ccs` and, given `driver_ptx_isa`, writes
    PTX the driver loads."""

    ccs: tuple[ComputeCapability, ...]
    driver_ptx_isa: Optional[str]


@dataclass(frozen=True)
class PairsWith:
    """nvJitLink releases that read what the compiler release writes, or (`kind` "nvjitlink") a
    compiler release whose output the nvJitLink release reads."""

    kind: str  # the other side of the pair: "nvrtc", "nvvm", "nvjitlink"
    release: str  # "12.9.86"


@dataclass(frozen=True)
class NewestOwnRuntime:
    """The newest release (of data/own_runtime.toml) whose own CUDA runtime, `cuda`, the `driver`
    runs (`compatibility`: only by minor-version compatibility) and, when `ccs` are given, whose
    device code runs on those GPUs."""

    cuda: CudaVersion
    driver: Optional[DriverRelease]
    ccs: tuple[ComputeCapability, ...] = ()
    compatibility: bool = False


@dataclass(frozen=True)
class NewestForDriver:
    """The table's newest release built for a CUDA the driver runs (that CUDA, when known)."""

    cuda: Optional[CudaVersion]


@dataclass(frozen=True)
class NewestBuildOf:
    major: int
    name: str


@dataclass(frozen=True)
class NewestCudaForArch:
    """The newest CUDA that still targets `cc` (and the driver runs); `comes_with` follows the prefix's CUDA."""

    cc: ComputeCapability
    driver_known: bool
    comes_with: str


@dataclass(frozen=True)
class ForNativeSupport:
    pass


@dataclass(frozen=True)
class PinToDriverCuda:
    count: int


@dataclass(frozen=True)
class UseBuildInstead:
    major: Optional[int]


@dataclass(frozen=True)
class SameCupyRelease:
    major: int


@dataclass(frozen=True)
class NotWhereItLooks:
    """The environment has the library (`owner`'s copy), but not where `consumer` looks."""

    owner: Optional[str]
    consumer: str


@dataclass(frozen=True)
class PicksConda:
    """The conda package whose `soname` the loader picks."""

    soname: str


@dataclass(frozen=True)
class PreloaderLooksFirst:
    """The wheel would be found first: the package's preloader searches site-packages first."""

    preloader: str


@dataclass(frozen=True)
class LooksFirstIn:
    """The wheel would be found first: `consumer` searches `directory` first."""

    consumer: str
    directory: str


@dataclass(frozen=True)
class TakenFirst:
    """The loader takes that directory's `soname` first."""

    soname: str


@dataclass(frozen=True)
class PreloadServes:
    """That preloaded file is loaded before everything and serves `soname`."""

    soname: str


@dataclass(frozen=True)
class PickedOther:
    """`distribution` `version` (its copy at `copy`) has what `consumer` needs, but the loader picks
    `chosen` (`step`) first."""

    distribution: str
    version: Version
    copy: Optional[str]
    consumer: str
    chosen: str
    step: Optional[str]


@dataclass(frozen=True)
class BuiltAgainst:
    """The release `distribution` `version` was built against, as the file it ships (`record`) says."""

    distribution: str
    version: Version
    record: str


@dataclass(frozen=True)
class ConsumersRange:
    """The range `distribution` `version` (with `extra`) requires, from its own metadata; with
    `runs_on`, the newest release in it of the table whose device code runs on those GPUs."""

    distribution: str
    version: Version
    extra: Optional[str]
    runs_on: tuple[ComputeCapability, ...] = ()


@dataclass(frozen=True)
class MadeFor:
    """It installs the release of `distribution` made for `framework` `version` (the one installed)."""

    distribution: str
    framework: str
    version: Version


@dataclass(frozen=True)
class RightOwner:
    """Why `distribution` is the owner to keep: `rule` "required" (`by` require it and not the other
    owners), "cuda-major" (the environment's CUDA runtime is of its major, `major`), "on-disk" (its
    bytes are the ones there now, so keeping it changes nothing that runs)."""

    distribution: str
    rule: str
    by: tuple[str, ...] = ()
    major: Optional[int] = None


Why = Union[
    AlsoProvidedBy, ToEnable, Constrain, BuildLibraries, TakeRoute, DriverCannotRun, WheelsOfMajors, NoneFitsEither,
    NewestThatRuns, OfferedThatRuns, CompilerFits, PairsWith, NewestOwnRuntime, NewestForDriver, NewestBuildOf, NewestCudaForArch, ForNativeSupport, PinToDriverCuda,
    UseBuildInstead, SameCupyRelease, NotWhereItLooks, PicksConda, PreloaderLooksFirst, LooksFirstIn, TakenFirst,
    PreloadServes, PickedOther, NoKnownRelease, ConsumersRange, BuiltAgainst, MadeFor, RightOwner,
]


@dataclass(frozen=True)
class Explained:
    """A fix with why it is offered."""

    fix: "Fix"
    why: Why


Fix = Union[
    PipInstall, PipUninstall, TorchVariant, CondaInstall, CondaUpdate, DriverUpgrade, Call, AddToPath, RemoveFromPath,
    RemoveStaleDirectory, RemoveCopy, KeepOneBuild, AddConstraint, AdvisoryFix, StateHost, ReleaseThatFinds, FindWheelCopy,
    BuildWithCuda, OlderReleaseMayCarry, NewerReleaseNeeded, NoKnownRelease, InstallBuild, InstallBuildsOf, InstallWheels, BuildOf,
    Alternatives, OrElse, Steps, Each, Explained, NoFixFound, WithInstall, Unchecked,
]
Action = Union[PipInstall, PipUninstall, TorchVariant, CondaInstall, CondaUpdate, DriverUpgrade, Call, AddToPath,
               RemoveFromPath, RemoveStaleDirectory, RemoveCopy]


def actions(fix: Fix) -> Iterator[Action]:
    """The steps of `fix` in order, taking the first of any alternatives: what applying it runs.
    Advice (a build to look for, no known release) has none."""
    if isinstance(fix, (Explained, WithInstall, Unchecked)):
        yield from actions(fix.fix)
    elif isinstance(fix, Alternatives):
        yield from actions(fix.options[0])
    elif isinstance(fix, OrElse):
        yield from actions(fix.first)
    elif isinstance(fix, Steps):
        for step in fix.steps:
            yield from actions(step)
    elif isinstance(fix, Each):
        for each in fix.fixes:
            yield from actions(each)
    elif isinstance(fix, KeepOneBuild):
        if fix.remove is not None and not fix.conda:
            yield PipUninstall((fix.remove,))
    elif isinstance(fix, (PipInstall, PipUninstall, TorchVariant, CondaInstall, CondaUpdate, DriverUpgrade, Call,
                          AddToPath, RemoveFromPath, RemoveStaleDirectory, RemoveCopy)):
        yield fix
