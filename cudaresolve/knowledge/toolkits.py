"""CUDA toolkits and drivers (data/toolkits.toml): GA drivers, family floors, branches, PTX ISA, SASS.

The table's strings become `CudaVersion` and `DriverRelease` values when it is loaded; the
accessors take and return values. May import: records, arch, versions, errors and knowledge/files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional, Union

from packaging.version import InvalidVersion, Version

from cudaresolve import records
from cudaresolve.arch import Target
from cudaresolve.errors import UsageError
from cudaresolve.knowledge import compiled, files
from cudaresolve.knowledge.files import CONFIDENCE, VERSION
from cudaresolve.versions import CudaVersion, DriverRelease

FILE = "toolkits.toml"


@dataclass(frozen=True)
class ToolkitUpdate:
    """An update release of a toolkit minor and the driver it bundled."""

    release: str = field(metadata=VERSION)  # "12.8.1", the update's name (its CUDA minor is the toolkit's)
    driver: DriverRelease = field(metadata=records.check(key="linux"))  # Linux x86_64
    driver_windows: Optional[DriverRelease] = field(default=None, metadata=records.check(key="windows"))


@dataclass(frozen=True)
class Toolkit:
    """One CUDA toolkit minor release and what a binary built with it needs from the host."""

    version: CudaVersion  # 12.8
    ga_driver: DriverRelease  # Linux x86_64 GA driver, 570.26; only the branch (610) where that is all we know
    ptx_isa: Optional[str]  # PTX ISA it writes, "8.7"; None when unknown
    family_floor: DriverRelease  # minor-version-compat floor of its major, 525.60.13
    sass_targets: tuple[str, ...]  # what nvcc can build offline; () when unknown
    ga_driver_windows: Optional[DriverRelease] = None
    updates: tuple[ToolkitUpdate, ...] = ()
    confidence: str = "H"
    note: Optional[str] = None

    @property
    def major(self) -> int:
        return self.version.major


# -- the file as written ----------------------------------------------------------------------------


def _driver_or_branch(value: str) -> None:
    DriverRelease.parse(value, branch_alone=True)


@dataclass(frozen=True)
class _Row:
    version: str = field(metadata=VERSION)
    ga_driver: str = field(metadata=records.check(_driver_or_branch))
    confidence: str = field(metadata=CONFIDENCE)
    ga_driver_windows: Optional[DriverRelease] = None
    updates: tuple[ToolkitUpdate, ...] = ()
    note: Optional[str] = None


@dataclass(frozen=True)
class _Floors:
    linux: Mapping[str, DriverRelease]


@dataclass(frozen=True)
class _Branch:
    branch: int
    cuda: CudaVersion
    confidence: str = field(metadata=CONFIDENCE)


@dataclass(frozen=True)
class _Branches:
    confidence: str = field(metadata=CONFIDENCE)
    max_cuda: tuple[_Branch, ...]


@dataclass(frozen=True)
class _PtxIsa:
    versions: Mapping[str, str] = field(metadata=VERSION)


@dataclass(frozen=True)
class _SassRow:
    version: str = field(metadata=VERSION)
    targets: tuple[str, ...] = field(metadata=records.check(Target.parse))


@dataclass(frozen=True)
class _Sass:
    toolkit: tuple[_SassRow, ...]


@dataclass(frozen=True)
class _File:
    confidence: str = field(metadata=CONFIDENCE)
    toolkit: tuple[_Row, ...]
    family_floors: _Floors
    branches: _Branches
    ptx_isa: _PtxIsa
    sass_targets: _Sass


@dataclass(frozen=True)
class Tables:
    toolkits: tuple[Toolkit, ...]  # oldest first
    floors: Mapping[int, DriverRelease]
    branches: tuple[tuple[int, CudaVersion], ...]  # (branch, highest CUDA version), by branch
    ptx_isa: Mapping[CudaVersion, str]  # CUDA version -> its PTX ISA, 12.7 -> "8.6"


@compiled.table(FILE)
def load() -> Tables:
    """Load and cross-check the file: every toolkit needs a family floor; PTX and SASS rows a toolkit.
    The table's version strings become values here, once."""
    raw = files.read(FILE, _File)
    for major in raw.family_floors.linux:
        if not major.isdigit():
            raise files.error(FILE, f"family_floors.linux.{major}", "expected a CUDA major number as the key")
    floors = {int(major): floor for major, floor in raw.family_floors.linux.items()}
    sass = {_minor_key(row.version, f"sass_targets.toolkit.{row.version}"): row.targets for row in raw.sass_targets.toolkit}
    toolkits = []
    for i, row in enumerate(raw.toolkit):
        version = _minor_key(row.version, f"toolkit[{i}].version")
        if version.major not in floors:
            raise files.error(FILE, f"toolkit[{i}].version", f"no family floor for CUDA {version.major} in [family_floors]")
        toolkits.append(Toolkit(
            version=version, ga_driver=DriverRelease.parse(row.ga_driver, branch_alone=True),
            ptx_isa=raw.ptx_isa.versions.get(row.version), family_floor=floors[version.major],
            sass_targets=sass.get(version, ()), ga_driver_windows=row.ga_driver_windows, updates=row.updates,
            confidence=row.confidence, note=row.note,
        ))
    known = {t.version for t in toolkits}
    if len(known) != len(toolkits):
        raise files.error(FILE, "toolkit", "a version is listed twice")
    for key in sass:
        if key not in known:
            raise files.error(FILE, f"sass_targets.{key}", "names a toolkit that is not in [[toolkit]]")
    reported = {b.cuda for b in raw.branches.max_cuda}
    ptx_isa = {}
    for text, isa in raw.ptx_isa.versions.items():
        cuda = _minor_key(text, f"ptx_isa.{text}")
        if cuda not in known and cuda not in reported:
            raise files.error(FILE, f"ptx_isa.{text}", "names neither a toolkit in [[toolkit]] nor a CUDA version in [branches]")
        ptx_isa[cuda] = isa
    return Tables(
        toolkits=tuple(sorted(toolkits, key=lambda t: t.version)),
        floors=floors,
        branches=tuple(sorted((b.branch, b.cuda) for b in raw.branches.max_cuda)),
        ptx_isa=ptx_isa,
    )


def _minor_key(text: str, where: str) -> CudaVersion:
    """A table's CUDA minor ("12.8"), written as MAJOR.MINOR exactly."""
    try:
        version = CudaVersion.parse(text)
    except UsageError as exc:
        raise files.error(FILE, where, str(exc)) from None
    if version.minor is None or text != str(version):
        raise files.error(FILE, where, f"expected MAJOR.MINOR, got {text!r}")
    return version


# -- accessors --------------------------------------------------------------------------------------


def known() -> tuple[Toolkit, ...]:
    """Every known CUDA toolkit minor release, oldest first."""
    return load().toolkits


def get(version: CudaVersion) -> Optional[Toolkit]:
    """The toolkit entry for CUDA 12.8; None if no such toolkit (12.7). A major alone is an error."""
    wanted = _minor(version)
    return next((t for t in known() if t.version == wanted), None)


def for_ptx_isa(isa: str) -> Optional[Toolkit]:
    """The oldest toolkit whose PTX ISA is at least `isa` ("8.5" -> 12.5).

    Its GA driver is the first driver whose JIT accepts that PTX. None when `isa` is newer than every
    toolkit whose ISA is known.
    """
    try:
        wanted = Version(isa)
    except InvalidVersion:
        raise UsageError(f"not a PTX ISA version: {isa!r} (expected e.g. 8.5)") from None
    return next((t for t in known() if t.ptx_isa is not None and Version(t.ptx_isa) >= wanted), None)


def ptx_isa(cuda: CudaVersion) -> Optional[str]:
    """The PTX ISA of a CUDA version (12.9 -> "8.8"): what its compilers write, and the newest PTX a
    driver reporting that version JIT-compiles (R565's 12.7 -> "8.6", a version no toolkit has).
    None when unknown (13.5, or a version newer than the table)."""
    return load().ptx_isa.get(_minor(cuda))


def oldest_writing_ptx_isa(isa: str) -> Optional[CudaVersion]:
    """The oldest CUDA minor whose compilers write PTX ISA `isa` ("8.5": 12.5): a file carrying PTX of
    that ISA was built with it or a later toolkit. None when the table has no minor writing it."""
    found = sorted((cuda for cuda, written in load().ptx_isa.items() if written == isa), key=lambda c: (c.major, c.minor or 0))
    return found[0] if found else None


def family_floor(cuda: Union[int, CudaVersion]) -> Optional[DriverRelease]:
    """The lowest driver that runs any binary of a CUDA major (12, or CUDA 12.8) by minor-version compatibility."""
    return load().floors.get(cuda.major if isinstance(cuda, CudaVersion) else cuda)


def max_cuda_for_driver(release: DriverRelease) -> Optional[CudaVersion]:
    """The highest CUDA version a driver reports (550.144.03 -> 12.4), from its branch.

    A branch between two listed ones reports the lower one's version; None below the oldest branch.
    """
    answer = None
    for listed, cuda in load().branches:
        if listed <= release.branch:
            answer = cuda
    return answer


def driver_support(release: DriverRelease, cuda: CudaVersion) -> Optional[str]:
    """How a driver runs binaries built with CUDA `cuda`: "native", "minor-compat", or None (cannot run).

    Native when the driver's CUDA version is at least `cuda`; minor-compat when the driver is at least
    the family floor of `cuda`'s major (limited features, and newer PTX cannot be JIT-compiled).
    """
    wanted = _minor(cuda)
    reported = max_cuda_for_driver(release)
    if reported is None:
        return None
    if reported >= wanted:
        return "native"
    floor = family_floor(wanted)
    if floor is not None and release >= floor:
        return "minor-compat"
    return None


def _minor(version: CudaVersion) -> CudaVersion:
    if version.minor is None:
        raise UsageError(f"not a CUDA minor version: {str(version)!r} (expected e.g. 12.8 or 12.8.1)")
    return version
