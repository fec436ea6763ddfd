"""The CUDA knowledge base: typed, cached accessors over the TOML tables shipped as cudaresolve.data.

Facts live in data/*.toml next to their sources and confidence (docs/data.md); this module only loads,
checks and indexes them, so a wrong fact is fixed in the data, never here. Every accessor returns
frozen dataclasses or tuples, so results can be compared and used as dict keys.
"""

from __future__ import annotations

import functools
import re
import sys
from dataclasses import dataclass
from importlib import resources
from typing import Any, Callable, Optional, TypeVar, Union

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from cudaresolve.arch import ComputeCapability, Target, parse_arch_list
from cudaresolve.binary.facts import PtxTarget
from cudaresolve.errors import DataError, UsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python < 3.11 only
    import tomli as tomllib

CONFIDENCES = ("H", "M", "L")
DATA_FILES = ("toolkits.toml", "gpus.toml", "torch.toml", "cupy.toml", "components.toml", "advisories.toml")
SEARCH_STEPS = ("site-packages", "conda-prefix", "system")

_T = TypeVar("_T")
_MINOR_RE = re.compile(r"^(\d+)\.(\d+)(?:\.\d+)*$")
_DRIVER_RE = re.compile(r"^\d+(?:\.\d+)*$")


# -- reading and checking ---------------------------------------------------------------------------


class _Node:
    """A TOML table and where it sits, so every malformed value is reported as `file: key.path`."""

    def __init__(self, file: str, path: str, data: Any) -> None:
        if not isinstance(data, dict):
            raise DataError(f"{file}: {path or 'top level'}: expected a table, got {type(data).__name__}")
        self.file = file
        self.path = path
        self.data = data

    def error(self, key: str, message: str) -> DataError:
        where = f"{self.path}.{key}" if self.path else key
        return DataError(f"{self.file}: {where}: {message}")

    def _get(self, key: str, kind: type, what: str, default: Any = ...) -> Any:
        if key not in self.data:
            if default is ...:
                raise self.error(key, "missing")
            return default
        value = self.data[key]
        if not isinstance(value, kind) or isinstance(value, bool) != (kind is bool):
            raise self.error(key, f"expected {what}, got {value!r}")
        return value

    def text(self, key: str) -> str:
        return self._get(key, str, "a string")

    def opt_text(self, key: str) -> Optional[str]:
        return self._get(key, str, "a string", None)

    def integer(self, key: str) -> int:
        return self._get(key, int, "an integer")

    def texts(self, key: str, default: Optional[tuple[str, ...]] = None) -> tuple[str, ...]:
        value = self._get(key, list, "a list of strings", ... if default is None else list(default))
        if not all(isinstance(item, str) for item in value):
            raise self.error(key, f"expected a list of strings, got {value!r}")
        return tuple(value)

    def table(self, key: str) -> "_Node":
        return _Node(self.file, self._sub(key), self._get(key, dict, "a table"))

    def tables(self, key: str, default: Optional[tuple[()]] = None) -> tuple["_Node", ...]:
        value = self._get(key, list, "a list of tables", ... if default is None else [])
        return tuple(_Node(self.file, f"{self._sub(key)}[{i}]", item) for i, item in enumerate(value))

    def str_mapping(self, key: str) -> tuple[tuple[str, str], ...]:
        """A table of string values, as (key, value) pairs in file order."""
        node = self.table(key)
        return tuple((name, node.text(name)) for name in node.data)

    def version(self, key: str) -> str:
        return _checked(self, key, self.text(key), Version)

    def opt_version(self, key: str) -> Optional[str]:
        value = self.opt_text(key)
        return None if value is None else _checked(self, key, value, Version)

    def specifier(self, key: str) -> str:
        return _checked(self, key, self.text(key), SpecifierSet)

    def opt_specifier(self, key: str) -> Optional[str]:
        value = self.opt_text(key)
        return None if value is None else _checked(self, key, value, SpecifierSet)

    def requirements(self, key: str, default: Optional[tuple[str, ...]] = None) -> tuple[str, ...]:
        values = self.texts(key, default)
        for value in values:
            _checked(self, key, value, Requirement)
        return values

    def confidence(self, default: Optional[str] = None, key: str = "confidence") -> str:
        """An H/M/L tag; a row without its own inherits `default` (its table's)."""
        value = self._get(key, str, "a string", ... if default is None else default)
        if value not in CONFIDENCES:
            raise self.error(key, f"expected one of {', '.join(CONFIDENCES)}, got {value!r}")
        return value

    def _sub(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key


def _checked(node: _Node, key: str, value: str, parse: Callable[[str], Any]) -> str:
    """Return `value` unchanged once `parse` (Version, SpecifierSet, Requirement) accepts it."""
    try:
        parse(value)
    except (InvalidVersion, InvalidSpecifier, InvalidRequirement) as exc:
        raise node.error(key, f"{value!r} does not parse: {exc}") from None
    return value


def _guard(node: _Node, key: str, build: Callable[[], _T]) -> _T:
    """Run a parser from another module; its UsageError on data becomes a DataError naming the key."""
    try:
        return build()
    except UsageError as exc:
        raise node.error(key, str(exc)) from None


@functools.lru_cache(maxsize=None)
def _file(name: str) -> _Node:
    """Load one data file and check that it and each of its top-level tables name a source and confidence."""
    try:
        raw = resources.files("cudaresolve.data").joinpath(name).read_bytes()
    except OSError as exc:
        raise DataError(f"{name}: cannot be read from the installed package ({exc})") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"{name}: not valid TOML: {exc}") from None
    root = _Node(name, "", data)
    _provenance_of(root)
    for key, value in data.items():
        if isinstance(value, dict):
            _provenance_of(root.table(key))
    return root


def _provenance_of(node: _Node) -> tuple[str, str]:
    source = node.text("source")
    if not source.strip():
        raise node.error("source", "is empty")
    return source, node.confidence()


@dataclass(frozen=True)
class Provenance:
    """Where one table's facts come from."""

    file: str
    table: str  # "" for the file's top level
    source: str
    confidence: str


def provenance() -> tuple[Provenance, ...]:
    """The source and confidence of every file and of each top-level table inside it."""
    rows = []
    for name in DATA_FILES:
        root = _file(name)
        rows.append(Provenance(name, "", *_provenance_of(root)))
        for key, value in root.data.items():
            if isinstance(value, dict):
                rows.append(Provenance(name, key, *_provenance_of(root.table(key))))
    return tuple(rows)


def _minor_of(text: str) -> tuple[int, int]:
    """("12.8" or "12.8.1") -> (12, 8); anything else is a usage error."""
    match = _MINOR_RE.match(str(text).strip())
    if not match:
        raise UsageError(f"not a CUDA version: {text!r} (expected e.g. 12.8 or 12.8.1)")
    return int(match.group(1)), int(match.group(2))


def _driver(release: str) -> Version:
    if not _DRIVER_RE.match(str(release).strip()):
        raise UsageError(f"not a driver version: {release!r} (expected e.g. 550.144.03)")
    return Version(str(release).strip())


# -- toolkits and drivers ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolkitUpdate:
    """An update release of a toolkit minor and the driver it bundled."""

    release: str  # "12.8.1"
    driver: str  # Linux x86_64
    driver_windows: Optional[str] = None


@dataclass(frozen=True)
class Toolkit:
    """One CUDA toolkit minor release and what a binary built with it needs from the host."""

    version: str  # "12.8"
    ga_driver: str  # Linux x86_64 GA driver, "570.26"; only the branch ("610") where that is all we know
    ptx_isa: Optional[str]  # PTX ISA it writes, "8.7"; None when unknown
    family_floor: str  # minor-version-compat floor of its major, "525.60.13"
    sass_targets: tuple[str, ...]  # what nvcc can build offline; () when unknown
    ga_driver_windows: Optional[str] = None
    updates: tuple[ToolkitUpdate, ...] = ()
    confidence: str = "H"
    note: Optional[str] = None

    @property
    def major(self) -> int:
        return _minor_of(self.version)[0]


@dataclass(frozen=True)
class _DriverTables:
    toolkits: tuple[Toolkit, ...]
    floors: tuple[tuple[int, str], ...]
    branches: tuple[tuple[int, str, str], ...]  # (branch, max CUDA, confidence), by branch


@functools.lru_cache(maxsize=None)
def _driver_tables() -> _DriverTables:
    root = _file("toolkits.toml")
    floors_node = root.table("family_floors").table("linux")
    floors = {}
    for major in floors_node.data:
        if not major.isdigit():
            raise floors_node.error(major, "expected a CUDA major number as the key")
        floors[int(major)] = _checked(floors_node, major, floors_node.text(major), Version)

    ptx_node = root.table("ptx_isa").table("versions")
    ptx = {key: _checked(ptx_node, key, ptx_node.text(key), Version) for key in ptx_node.data}
    sass_table = root.table("sass_targets")
    sass = {}
    for row in sass_table.tables("toolkit"):
        targets = row.texts("targets")
        _guard(row, "targets", lambda: [Target.parse(t) for t in targets])
        sass[row.version("version")] = targets

    toolkits = []
    top_confidence = root.confidence()
    for row in root.tables("toolkit"):
        version = row.version("version")
        major, minor = _guard(row, "version", lambda: _minor_of(version))
        if version != f"{major}.{minor}":
            raise row.error("version", f"expected MAJOR.MINOR, got {version!r}")
        if major not in floors:
            raise row.error("version", f"no family floor for CUDA {major} in [family_floors]")
        updates = tuple(
            ToolkitUpdate(u.version("release"), u.version("linux"), u.opt_version("windows"))
            for u in row.tables("updates", default=())
        )
        toolkits.append(
            Toolkit(
                version=version,
                ga_driver=row.version("ga_driver"),
                ptx_isa=ptx.get(version),
                family_floor=floors[major],
                sass_targets=sass.get(version, ()),
                ga_driver_windows=row.opt_version("ga_driver_windows"),
                updates=updates,
                confidence=row.confidence(top_confidence),
                note=row.opt_text("note"),
            )
        )
    known = {t.version for t in toolkits}
    if len(known) != len(toolkits):
        raise root.error("toolkit", "a version is listed twice")
    for table, keys in (("ptx_isa", ptx), ("sass_targets", sass)):
        for key in keys:
            if key not in known:
                raise root.table(table).error(key, "names a toolkit that is not in [[toolkit]]")

    branches_node = root.table("branches")
    default = branches_node.confidence()
    branches = sorted(
        (row.integer("branch"), row.version("cuda"), row.confidence(default))
        for row in branches_node.tables("max_cuda")
    )
    return _DriverTables(
        toolkits=tuple(sorted(toolkits, key=lambda t: Version(t.version))),
        floors=tuple(sorted(floors.items())),
        branches=tuple(branches),
    )


def toolkits() -> tuple[Toolkit, ...]:
    """Every known CUDA toolkit minor release, oldest first."""
    return _driver_tables().toolkits


def toolkit(version: str) -> Optional[Toolkit]:
    """The toolkit entry for "12.8" or any of its releases ("12.8.1"); None if no such toolkit."""
    major, minor = _minor_of(version)
    wanted = f"{major}.{minor}"
    return next((t for t in toolkits() if t.version == wanted), None)


def toolkit_for_ptx_isa(isa: str) -> Optional[Toolkit]:
    """The oldest toolkit whose PTX ISA is at least `isa` ("8.5" -> 12.5).

    Its GA driver is the first driver whose JIT accepts that PTX. None when `isa` is newer than every
    toolkit whose ISA is known.
    """
    try:
        wanted = Version(isa)
    except InvalidVersion:
        raise UsageError(f"not a PTX ISA version: {isa!r} (expected e.g. 8.5)") from None
    return next((t for t in toolkits() if t.ptx_isa is not None and Version(t.ptx_isa) >= wanted), None)


def family_floor(cuda_major: int) -> Optional[str]:
    """The lowest driver that runs any CUDA `cuda_major`.x binary by minor-version compatibility."""
    return dict(_driver_tables().floors).get(cuda_major)


def max_cuda_for_driver(release: str) -> Optional[str]:
    """The highest CUDA version a driver reports ("550.144.03" -> "12.4"), from its branch.

    A branch between two listed ones reports the lower one's version; None below the oldest branch.
    """
    branch = int(_driver(release).release[0])
    answer = None
    for listed, cuda, _ in _driver_tables().branches:
        if listed <= branch:
            answer = cuda
    return answer


def driver_support(release: str, cuda: str) -> Optional[str]:
    """How a driver runs binaries built with CUDA `cuda`: "native", "minor-compat", or None (cannot run).

    Native when the driver's CUDA version is at least `cuda`; minor-compat when the driver is at least
    the family floor of `cuda`'s major (limited features, and newer PTX cannot be JIT-compiled).
    """
    major, minor = _minor_of(cuda)
    driver = _driver(release)
    reported = max_cuda_for_driver(release)
    if reported is None:
        return None
    if Version(reported) >= Version(f"{major}.{minor}"):
        return "native"
    floor = family_floor(major)
    if floor is not None and driver >= Version(floor):
        return "minor-compat"
    return None


def driver_branches() -> tuple[tuple[int, str, str], ...]:
    """The branch table as (branch, highest CUDA version, confidence), ordered by branch."""
    return _driver_tables().branches


# -- GPUs -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuArch:
    """A compute capability with its architecture name and example GPUs (names are for humans only)."""

    cc: ComputeCapability
    arch: str
    examples: tuple[str, ...]
    confidence: str = "H"
    note: Optional[str] = None


@functools.lru_cache(maxsize=None)
def gpu_archs() -> tuple[GpuArch, ...]:
    """Every known compute capability, lowest first."""
    root = _file("gpus.toml")
    default = root.confidence()
    rows = []
    for row in root.tables("gpu"):
        cc_text = row.text("cc")
        cc = _guard(row, "cc", lambda: ComputeCapability.parse(cc_text))
        rows.append(GpuArch(cc, row.text("arch"), row.texts("examples"), row.confidence(default), row.opt_text("note")))
    return tuple(sorted(rows, key=lambda g: g.cc))


def gpu_arch(cc: Union[ComputeCapability, str]) -> Optional[GpuArch]:
    """The entry for one compute capability ("8.6"), or None if it is not in the table."""
    wanted = cc if isinstance(cc, ComputeCapability) else ComputeCapability.parse(cc)
    return next((g for g in gpu_archs() if g.cc == wanted), None)


# -- PyTorch ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TorchVariant:
    """One CUDA build of a PyTorch release, e.g. 2.8 cu128.

    `requires` lists its CUDA requirements (PEP 508); it is exhaustive only when `requires_confidence`
    is "H" (PyPI metadata). None means the pins are unknown: read the wheel's own metadata.
    """

    release: str  # "2.8"
    name: str  # "cu128"
    cuda: str  # "12.8"
    arch_list: str  # TORCH_CUDA_ARCH_LIST of the Linux x86_64 wheel
    arch_list_aarch64: Optional[str]
    versions: tuple[str, ...]  # patch releases built with this variant
    pypi_default: bool
    requires: Optional[tuple[str, ...]] = None
    requires_confidence: Optional[str] = None
    confidence: str = "H"
    note: Optional[str] = None

    def arch_list_for(self, machine: str) -> Optional[str]:
        """The arch list of the wheel for `machine` ("x86_64", "aarch64"); None when unknown."""
        return {"x86_64": self.arch_list, "aarch64": self.arch_list_aarch64}.get(machine)

    def sass(self, machine: str = "x86_64") -> tuple[str, ...]:
        """The SASS targets the wheel carries, e.g. ("sm_75", "sm_80", ...)."""
        return tuple(str(t) for t in self._targets(machine) if t.kind == "sass")

    def ptx(self, machine: str = "x86_64") -> tuple[PtxTarget, ...]:
        """The PTX targets the wheel carries, with the PTX ISA of the toolkit it was built with."""
        built_with = toolkit(self.cuda)
        isa = built_with.ptx_isa if built_with else None
        return tuple(PtxTarget(str(t), isa) for t in self._targets(machine) if t.kind == "ptx")

    def _targets(self, machine: str) -> tuple[Target, ...]:
        arch_list = self.arch_list_for(machine)
        if arch_list is None:
            raise UsageError(f"torch {self.release} {self.name}: no known arch list for {machine}")
        return parse_arch_list(arch_list)


@dataclass(frozen=True)
class TorchRelease:
    """A PyTorch minor release series (2.8) with its patch releases and CUDA variants."""

    series: str
    versions: tuple[str, ...]
    python: str  # CPython versions with wheels, as a specifier
    default_variant: str  # the build PyPI serves
    pypi_marker: str  # environment marker on the PyPI build's CUDA requirements
    triton: tuple[tuple[str, str], ...]  # (torch version, triton specifier)
    variants: tuple[TorchVariant, ...]
    confidence: str = "H"
    note: Optional[str] = None

    def variant(self, name: str) -> Optional[TorchVariant]:
        return next((v for v in self.variants if v.name == name), None)


@dataclass(frozen=True)
class TorchCompanion:
    """A torchvision / torchaudio release and the torch its metadata requires."""

    name: str  # "torchvision"
    version: str
    requires_torch: Optional[str]  # specifier; None when its metadata declares no torch dependency
    python: Optional[str] = None
    note: Optional[str] = None


@dataclass(frozen=True)
class _TorchTables:
    index_path: str
    variant_cuda: tuple[tuple[str, str], ...]
    releases: tuple[TorchRelease, ...]
    companions: tuple[TorchCompanion, ...]


@functools.lru_cache(maxsize=None)
def _torch_tables() -> _TorchTables:
    root = _file("torch.toml")
    index_path = root.text("index_path")
    if "{variant}" not in index_path or "//" in index_path or index_path.startswith("/"):
        raise root.error("index_path", f"expected a relative path template with {{variant}}, got {index_path!r}")
    variant_cuda = root.table("variant_cuda").str_mapping("cuda")
    cuda_of = dict(variant_cuda)
    for name, cuda in variant_cuda:
        _checked(root.table("variant_cuda").table("cuda"), name, cuda, Version)
    aarch64 = root.table("aarch64")
    aarch64_releases = SpecifierSet(aarch64.specifier("releases"))
    aarch64_lists = dict(aarch64.str_mapping("arch_lists"))
    for name, arch_list in aarch64_lists.items():
        _guard(aarch64, f"arch_lists.{name}", lambda: parse_arch_list(arch_list))

    default = root.confidence()
    releases = []
    for row in root.tables("release"):
        series = row.version("series")
        versions = row.texts("versions")
        for v in versions:
            _checked(row, "versions", v, Version)
        triton_node = row.table("triton")
        triton = tuple((v, _checked(triton_node, v, triton_node.text(v), SpecifierSet)) for v in triton_node.data)
        default_variant = row.text("default_variant")
        variants = []
        for vrow in row.tables("variant"):
            name = vrow.text("name")
            if name not in cuda_of:
                raise vrow.error("name", f"{name!r} is not in [variant_cuda]")
            arch_list = vrow.text("arch_list")
            _guard(vrow, "arch_list", lambda: parse_arch_list(arch_list))
            patches = vrow.texts("versions", default=versions)
            if not set(patches) <= set(versions):
                raise vrow.error("versions", f"{patches!r} are not all releases of {series}")
            requires = vrow.requirements("requires") if "requires" in vrow.data else None
            requires_confidence = vrow.confidence(key="requires_confidence") if requires is not None else None
            in_aarch64 = Version(patches[0]) in aarch64_releases
            variants.append(
                TorchVariant(
                    release=series,
                    name=name,
                    cuda=cuda_of[name],
                    arch_list=arch_list,
                    arch_list_aarch64=aarch64_lists.get(name) if in_aarch64 else None,
                    versions=patches,
                    pypi_default=name == default_variant,
                    requires=requires,
                    requires_confidence=requires_confidence,
                    confidence=vrow.confidence(default),
                    note=vrow.opt_text("note"),
                )
            )
        if default_variant not in {v.name for v in variants}:
            raise row.error("default_variant", f"{default_variant!r} is not one of its variants")
        releases.append(
            TorchRelease(
                series=series,
                versions=versions,
                python=row.specifier("python"),
                default_variant=default_variant,
                pypi_marker=row.text("pypi_marker"),
                triton=triton,
                variants=tuple(variants),
                confidence=row.confidence(default),
                note=row.opt_text("note"),
            )
        )

    companions = []
    for package in ("torchvision", "torchaudio"):
        for row in root.table(package).tables("packages"):
            companions.append(
                TorchCompanion(
                    name=package,
                    version=row.version("version"),
                    requires_torch=row.opt_specifier("requires_torch"),
                    python=row.opt_specifier("python"),
                    note=row.opt_text("note"),
                )
            )
    return _TorchTables(
        index_path=index_path,
        variant_cuda=variant_cuda,
        releases=tuple(sorted(releases, key=lambda r: Version(r.series))),
        companions=tuple(companions),
    )



def torch_releases() -> tuple[TorchRelease, ...]:
    """Every known PyTorch release series, oldest first."""
    return _torch_tables().releases


def torch_release(version: str) -> Optional[TorchRelease]:
    """The series of "2.8", "2.8.0" or "2.8.0+cu128"; None if unknown (or an unknown patch release)."""
    parsed = _torch_version(version)
    if len(parsed.release) < 2:
        return None
    series = f"{parsed.release[0]}.{parsed.release[1]}"
    release = next((r for r in torch_releases() if r.series == series), None)
    if release is None or len(parsed.release) == 2:
        return release
    return release if _has_patch(release.versions, parsed) else None


def torch_variant(version: str, variant: Optional[str] = None) -> Optional[TorchVariant]:
    """The CUDA build of a torch version: from `variant`, else its local label ("2.8.0+cu128").

    A version without either is the PyPI build (the release's default variant). None when that
    release or variant is unknown, or the variant was not built for that patch release.
    """
    parsed = _torch_version(version)
    release = torch_release(version)
    if release is None:
        return None
    name = variant or parsed.local or release.default_variant
    found = release.variant(name)
    if found is None or len(parsed.release) == 2:
        return found
    return found if _has_patch(found.versions, parsed) else None


def _has_patch(versions: tuple[str, ...], wanted: Version) -> bool:
    return any(Version(v) == Version(wanted.public) for v in versions)


def _torch_version(version: str) -> Version:
    try:
        return Version(version)
    except InvalidVersion:
        raise UsageError(f"not a torch version: {version!r} (expected e.g. 2.8.0 or 2.8.0+cu128)") from None


def torch_variant_cuda(variant: str) -> Optional[str]:
    """The CUDA version a variant label stands for ("cu128" -> "12.8")."""
    return dict(_torch_tables().variant_cuda).get(variant)


def torch_index_path(variant: str) -> str:
    """The variant's index path relative to the configured PyTorch index base ("whl/cu128")."""
    return _torch_tables().index_path.format(variant=variant)


def torch_companions(name: str) -> tuple[TorchCompanion, ...]:
    """Every known release of "torchvision" or "torchaudio"."""
    return tuple(c for c in _torch_tables().companions if c.name == name)


def torch_companions_for(name: str, torch_version: str) -> tuple[TorchCompanion, ...]:
    """The torchvision / torchaudio releases whose metadata accepts this torch version."""
    wanted = Version(_torch_version(torch_version).public)
    return tuple(
        c
        for c in torch_companions(name)
        if c.requires_torch is not None and wanted in SpecifierSet(c.requires_torch)
    )


# -- CuPy -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CupyDist:
    """A CuPy binary distribution within one CuPy major, e.g. cupy-cuda12x in v14."""

    name: str
    cupy_major: int
    cuda: tuple[str, ...]  # toolkit versions it supports
    first: Optional[str] = None  # first version, when later than the major's first
    latest: Optional[str] = None  # newest version on the index, for dists that ended


@dataclass(frozen=True)
class CupyMajor:
    major: int
    versions: str  # specifier
    python: str  # specifier
    requires: tuple[str, ...]
    dists: tuple[CupyDist, ...]
    note: Optional[str] = None


@dataclass(frozen=True)
class CupyBuild:
    """The device code in CuPy wheels built with a CUDA version range."""

    cuda: str  # specifier on the build CUDA version
    sass: tuple[str, ...]
    ptx: tuple[str, ...]
    aarch64_sass: tuple[str, ...]  # extra cubins in aarch64 wheels


@dataclass(frozen=True)
class _CupyTables:
    majors: tuple[CupyMajor, ...]
    builds: tuple[CupyBuild, ...]
    ctk_versions: str
    ctk_requires: tuple[tuple[str, str], ...]


@functools.lru_cache(maxsize=None)
def _cupy_tables() -> _CupyTables:
    root = _file("cupy.toml")
    majors = []
    for row in root.tables("major"):
        major = row.integer("major")
        dists = tuple(
            CupyDist(
                name=d.text("name"),
                cupy_major=major,
                cuda=tuple(_checked(d, "cuda", c, Version) for c in d.texts("cuda")),
                first=d.opt_version("first"),
                latest=d.opt_version("latest"),
            )
            for d in row.tables("dists")
        )
        majors.append(
            CupyMajor(
                major=major,
                versions=row.specifier("versions"),
                python=row.specifier("python"),
                requires=row.requirements("requires", default=()),
                dists=dists,
                note=row.opt_text("note"),
            )
        )
    builds = []
    for row in root.table("wheel_arch").tables("builds"):
        fields = {key: row.texts(key) for key in ("sass", "ptx", "aarch64_sass")}
        for key, targets in fields.items():
            _guard(row, key, lambda: [Target.parse(t) for t in targets])
        builds.append(CupyBuild(cuda=row.specifier("cuda"), **fields))
    ctk = root.table("ctk_extra")
    ctk_requires = ctk.str_mapping("requires")
    for dist, requirement in ctk_requires:
        _checked(ctk.table("requires"), dist, requirement, Requirement)
    return _CupyTables(tuple(majors), tuple(builds), ctk.specifier("versions"), ctk_requires)


def cupy_majors() -> tuple[CupyMajor, ...]:
    """CuPy majors (12, 13, 14) with their binary distributions."""
    return _cupy_tables().majors


def cupy_dist(name: str, cupy_version: str) -> Optional[CupyDist]:
    """The row for distribution `name` ("cupy-cuda12x") at `cupy_version`; None if not published."""
    version = Version(cupy_version)
    wanted = canonicalize_name(name)
    for major in cupy_majors():
        if version in SpecifierSet(major.versions):
            for dist in major.dists:
                if canonicalize_name(dist.name) == wanted and (dist.first is None or version >= Version(dist.first)):
                    return dist
    return None


def cupy_build(cuda: str) -> Optional[CupyBuild]:
    """The device code of CuPy wheels built with CUDA `cuda` ("12.8" or "12.8.1")."""
    major, minor = _minor_of(cuda)
    version = Version(f"{major}.{minor}")
    return next((b for b in _cupy_tables().builds if version in SpecifierSet(b.cuda)), None)


def cupy_ctk_requirement(name: str, cupy_version: str) -> Optional[str]:
    """What `name[ctk]` adds at `cupy_version` (a cuda-toolkit[...] requirement); None without the extra."""
    tables = _cupy_tables()
    if Version(cupy_version) not in SpecifierSet(tables.ctk_versions):
        return None
    return dict(tables.ctk_requires).get(str(canonicalize_name(name)))


# -- components -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Component:
    """One CUDA library wheel for one CUDA major: where it installs and which sonames it provides."""

    name: str  # the cuda-toolkit extra name where one exists ("cudart", "cusparse"), else "cudnn", ...
    cuda_major: int
    dist: str
    lib_dir: str  # relative to site-packages
    sonames: tuple[str, ...]
    dist_versions: Optional[str] = None  # only these versions of the dist (specifier)
    confidence: str = "H"
    note: Optional[str] = None


@dataclass(frozen=True)
class CudaRelease:
    """A CUDA update release and the nvrtc / nvJitLink wheel versions that belong to it."""

    cuda: str  # "12.8.1"
    nvrtc: str
    nvjitlink: str
    confidence: str = "M"


@dataclass(frozen=True)
class Preloader:
    """A package that loads CUDA libraries by absolute path before its extension modules."""

    name: str
    applies_to: tuple[str, ...]  # requirements naming the distributions that do it
    top_levels: tuple[str, ...]  # import packages whose extension modules benefit
    search: tuple[str, ...]  # steps from SEARCH_STEPS, in order
    optional_sonames: tuple[str, ...]  # needed only by optional features, loaded on use
    optional_features: Optional[str] = None
    note: Optional[str] = None


@dataclass(frozen=True)
class _ComponentTables:
    components: tuple[Component, ...]
    ctk_extras: tuple[str, ...]
    ctk_companions: tuple[tuple[str, tuple[str, ...]], ...]
    ctk_pins: tuple[tuple[str, tuple[str, ...]], ...]
    releases: tuple[CudaRelease, ...]
    preloaders: tuple[Preloader, ...]
    driver_libraries: tuple[str, ...]


@functools.lru_cache(maxsize=None)
def _component_tables() -> _ComponentTables:
    root = _file("components.toml")
    default = root.confidence()
    components = tuple(
        Component(
            name=row.text("name"),
            cuda_major=row.integer("cuda_major"),
            dist=row.text("dist"),
            lib_dir=row.text("lib_dir"),
            sonames=row.texts("sonames"),
            dist_versions=row.opt_specifier("dist_versions"),
            confidence=row.confidence(default),
            note=row.opt_text("note"),
        )
        for row in root.tables("component")
    )
    ctk = root.table("cuda_toolkit")
    extras = ctk.texts("extras")
    companions_node = ctk.table("companions")
    companions = tuple((extra, companions_node.texts(extra)) for extra in companions_node.data)
    pins = tuple((row.version("version"), row.requirements("requires")) for row in ctk.tables("pins"))
    releases_node = root.table("cuda_releases")
    release_default = releases_node.confidence()
    releases = tuple(
        CudaRelease(row.version("cuda"), row.version("nvrtc"), row.version("nvjitlink"), row.confidence(release_default))
        for row in releases_node.tables("releases")
    )
    preloaders = []
    for row in root.table("preloaders").tables("packages"):
        search = row.texts("search")
        unknown = [step for step in search if step not in SEARCH_STEPS]
        if unknown:
            raise row.error("search", f"unknown steps {unknown}; known: {', '.join(SEARCH_STEPS)}")
        preloaders.append(
            Preloader(
                name=row.text("name"),
                applies_to=row.requirements("applies_to"),
                top_levels=row.texts("top_levels"),
                search=search,
                optional_sonames=row.texts("optional_sonames"),
                optional_features=row.opt_text("optional_features"),
                note=row.opt_text("note"),
            )
        )
    return _ComponentTables(
        components=components,
        ctk_extras=extras,
        ctk_companions=companions,
        ctk_pins=pins,
        releases=releases,
        preloaders=tuple(preloaders),
        driver_libraries=root.table("driver_libraries").texts("sonames"),
    )


def components() -> tuple[Component, ...]:
    """Every known CUDA library wheel row."""
    return _component_tables().components


def components_for_soname(soname: str) -> tuple[Component, ...]:
    """The wheels that provide `soname`, across CUDA majors (libcurand.so.10 is in cu11, cu12 and 13)."""
    return tuple(c for c in components() if soname in c.sonames)


def components_for_dist(dist: str, version: Optional[str] = None) -> tuple[Component, ...]:
    """The rows for distribution `dist`, restricted to those that apply to `version` when given."""
    wanted = canonicalize_name(dist)
    rows = [c for c in components() if canonicalize_name(c.dist) == wanted]
    if version is not None:
        parsed = Version(version)
        rows = [c for c in rows if c.dist_versions is None or parsed in SpecifierSet(c.dist_versions)]
    return tuple(rows)


def cuda_toolkit_extras() -> tuple[str, ...]:
    """The extras of the cuda-toolkit metapackage."""
    return _component_tables().ctk_extras


def cuda_toolkit_dists(extra: str, cuda_major: int) -> tuple[str, ...]:
    """The distributions `cuda-toolkit[extra]` installs for a CUDA major, its companions included."""
    tables = _component_tables()
    names = (extra,) + dict(tables.ctk_companions).get(extra, ())
    return tuple(c.dist for name in names for c in components() if c.name == name and c.cuda_major == cuda_major)


def cuda_toolkit_pins(version: str) -> Optional[tuple[str, ...]]:
    """The component requirements a cuda-toolkit release pins (only the checked ones); None if unknown."""
    wanted = Version(version)
    return next((pins for v, pins in _component_tables().ctk_pins if Version(v) == wanted), None)


def cuda_releases() -> tuple[CudaRelease, ...]:
    """CUDA update releases with their nvrtc / nvJitLink wheel versions, oldest first."""
    return _component_tables().releases


def cuda_releases_of(component: str, version: str) -> tuple[str, ...]:
    """The CUDA releases a "nvrtc" or "nvjitlink" wheel version belongs to ("12.8.93" -> 12.8.1, 12.8.2)."""
    if component not in ("nvrtc", "nvjitlink"):
        raise UsageError(f"no release table for component {component!r} (known: nvrtc, nvjitlink)")
    wanted = Version(version)
    return tuple(r.cuda for r in cuda_releases() if Version(getattr(r, component)) == wanted)


def preloaders() -> tuple[Preloader, ...]:
    """Packages that preload CUDA libraries by absolute path."""
    return _component_tables().preloaders


def driver_libraries() -> tuple[str, ...]:
    """Sonames the NVIDIA driver provides (libcuda.so.1, libnvidia-ml.so.1, ...), never a wheel."""
    return _component_tables().driver_libraries


# -- advisories -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Advisory:
    """A known breakage and the conditions under which it applies (all given conditions must hold).

    `affects` are requirements one of which must match an installed distribution; empty means a rule
    that code checks (e.g. PTX ISA against the driver). `cuda`, `driver` and `gpu` are specifiers on
    the package's build CUDA version, the driver release and the compute capability. `references`
    are undefined symbols, `NAME@VERSION` with shell wildcards in NAME (`@VERSION` optional), one of
    which some ELF file of the environment must reference: the binary side of a problem that only
    binaries built a certain way meet.
    """

    id: str
    affects: tuple[str, ...]
    symptom: str
    fix: str
    refs: tuple[str, ...]
    together_with: tuple[str, ...] = ()
    unless: tuple[str, ...] = ()
    cuda: Optional[str] = None
    variants: tuple[str, ...] = ()
    driver: Optional[str] = None
    gpu: Optional[str] = None
    platform: Optional[str] = None
    references: tuple[str, ...] = ()
    confidence: str = "H"
    note: Optional[str] = None


@functools.lru_cache(maxsize=None)
def advisories() -> tuple[Advisory, ...]:
    """Every known advisory, in file order."""
    root = _file("advisories.toml")
    default = root.confidence()
    rows = []
    for row in root.tables("advisory"):
        rows.append(
            Advisory(
                id=row.text("id"),
                affects=row.requirements("affects"),
                symptom=row.text("symptom"),
                fix=row.text("fix"),
                refs=row.texts("refs"),
                together_with=row.requirements("together_with", default=()),
                unless=row.requirements("unless", default=()),
                cuda=row.opt_specifier("cuda"),
                variants=row.texts("variants", default=()),
                driver=row.opt_specifier("driver"),
                gpu=row.opt_specifier("gpu"),
                platform=row.opt_text("platform"),
                references=_symbol_patterns(row, "references"),
                confidence=row.confidence(default),
                note=row.opt_text("note"),
            )
        )
    ids = [a.id for a in rows]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise root.error("advisory", f"duplicate ids {duplicates}")
    return tuple(rows)


def _symbol_patterns(row: _Node, key: str) -> tuple[str, ...]:
    values = row.texts(key, default=())
    for value in values:
        name, at, version = value.partition("@")
        if not name or (at and not version) or "@" in version:
            raise row.error(key, f"expected NAME or NAME@VERSION, got {value!r}")
    return values


def advisory(advisory_id: str) -> Optional[Advisory]:
    return next((a for a in advisories() if a.id == advisory_id), None)


def load_all() -> None:
    """Load and check every table now (tests, `doctor` start-up): raises DataError on the first defect."""
    for build in (_driver_tables, gpu_archs, _torch_tables, _cupy_tables, _component_tables, advisories):
        build()
    provenance()

