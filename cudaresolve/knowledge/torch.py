"""PyTorch releases and their CUDA variants (data/torch.toml): arch lists, CUDA pins, index paths.

Never `import torch` here: this module is the table about it, named for what it describes.

A variant's CUDA is a `CudaVersion`. May import: records, arch, versions, errors, knowledge/files
and knowledge/toolkits.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from cudaresolve import records
from cudaresolve.arch import PtxTarget, Target, parse_arch_list
from cudaresolve.errors import UsageError
from cudaresolve.knowledge import compiled, files, toolkits
from cudaresolve.knowledge.files import CONFIDENCE, REQUIREMENT, SPECIFIER, VERSION
from cudaresolve.versions import CudaVersion

FILE = "torch.toml"
_ARCH_LIST = records.check(parse_arch_list)


@dataclass(frozen=True)
class TorchVariant:
    """One CUDA build of a PyTorch release, e.g. 2.8 cu128.

    `requires` lists its CUDA requirements (PEP 508); it is exhaustive only when `requires_confidence`
    is "H" (PyPI metadata). None means the pins are unknown: read the wheel's own metadata.
    """

    release: str  # "2.8"
    name: str  # "cu128"
    cuda: CudaVersion  # 12.8
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
        built_with = toolkits.get(self.cuda)
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


# -- the file as written ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Variant:
    name: str
    arch_list: str = field(metadata=_ARCH_LIST)
    versions: tuple[str, ...] = field(metadata=records.check(inherit=True))  # the release's when absent
    confidence: str = field(metadata=CONFIDENCE)
    requires: Optional[tuple[str, ...]] = field(default=None, metadata=REQUIREMENT)
    requires_confidence: Optional[str] = field(default=None, metadata=records.check(files.check_confidence))
    note: Optional[str] = None


@dataclass(frozen=True)
class _Release:
    series: str = field(metadata=VERSION)
    versions: tuple[str, ...] = field(metadata=VERSION)
    python: str = field(metadata=SPECIFIER)
    default_variant: str
    pypi_marker: str
    triton: Mapping[str, str] = field(metadata=SPECIFIER)
    confidence: str = field(metadata=CONFIDENCE)
    variant: tuple[_Variant, ...]
    note: Optional[str] = None


@dataclass(frozen=True)
class _VariantCuda:
    cuda: Mapping[str, CudaVersion]


@dataclass(frozen=True)
class _Aarch64:
    releases: str = field(metadata=SPECIFIER)
    arch_lists: Mapping[str, str] = field(metadata=_ARCH_LIST)


def _canonical(name: str) -> None:
    if canonicalize_name(name) != name:
        raise UsageError(f"{name!r} is not a canonical distribution name (expected {canonicalize_name(name)!r})")


@dataclass(frozen=True)
class _FamilyDist:
    name: str = field(metadata=records.check(_canonical))
    confidence: str = field(metadata=CONFIDENCE)
    labelled: bool = False
    note: Optional[str] = None


@dataclass(frozen=True)
class _Family:
    dists: tuple[_FamilyDist, ...]


@dataclass(frozen=True)
class _CpuBuilds:
    local_labels: tuple[str, ...]


@dataclass(frozen=True)
class _CudaMember:
    member: str
    described: tuple[str, ...]


@dataclass(frozen=True)
class _File:
    confidence: str = field(metadata=CONFIDENCE)
    distribution: str = field(metadata=records.check(_canonical))
    index_path: str
    family: _Family
    cpu_builds: _CpuBuilds
    cuda_member: _CudaMember
    variant_cuda: _VariantCuda
    aarch64: _Aarch64
    release: tuple[_Release, ...]


@dataclass(frozen=True)
class Tables:
    distribution: str  # the distribution the release rows describe: "torch"
    index_path: str
    family: tuple[str, ...]  # canonical names, file order
    labelled: tuple[str, ...]  # the family names whose variant builds carry the variant's local label
    releases: tuple[TorchRelease, ...]  # oldest first
    cpu_labels: tuple[str, ...] = ()  # first parts of the local labels of CPU-only builds: "cpu"
    cuda_member: str = ""  # the wheel member every CUDA build carries: "torch/lib/libtorch_cuda.so"
    described: tuple[str, ...] = ()  # machines whose default builds the release rows describe


@compiled.table(FILE)
def load() -> Tables:
    """Load and cross-check the file: variants name a known CUDA label, releases a variant they have."""
    raw = files.read(FILE, _File)
    if "{variant}" not in raw.index_path or "//" in raw.index_path or raw.index_path.startswith("/"):
        raise files.error(FILE, "index_path", f"expected a relative path template with {{variant}}, got {raw.index_path!r}")
    cuda_of = raw.variant_cuda.cuda
    aarch64_releases = SpecifierSet(raw.aarch64.releases)
    releases = []
    for i, row in enumerate(raw.release):
        variants = []
        for j, v in enumerate(row.variant):
            where = f"release[{i}].variant[{j}]"
            if v.name not in cuda_of:
                raise files.error(FILE, f"{where}.name", f"{v.name!r} is not in [variant_cuda]")
            if not set(v.versions) <= set(row.versions):
                raise files.error(FILE, f"{where}.versions", f"{list(v.versions)!r} are not all releases of {row.series}")
            if v.requires is not None and v.requires_confidence is None:
                raise files.error(FILE, f"{where}.requires_confidence", "missing")
            in_aarch64 = Version(v.versions[0]) in aarch64_releases
            variants.append(
                TorchVariant(
                    release=row.series,
                    name=v.name,
                    cuda=cuda_of[v.name],
                    arch_list=v.arch_list,
                    arch_list_aarch64=raw.aarch64.arch_lists.get(v.name) if in_aarch64 else None,
                    versions=v.versions,
                    pypi_default=v.name == row.default_variant,
                    requires=v.requires,
                    requires_confidence=v.requires_confidence if v.requires is not None else None,
                    confidence=v.confidence,
                    note=v.note,
                )
            )
        if row.default_variant not in {v.name for v in variants}:
            raise files.error(FILE, f"release[{i}].default_variant", f"{row.default_variant!r} is not one of its variants")
        releases.append(
            TorchRelease(
                series=row.series,
                versions=row.versions,
                python=row.python,
                default_variant=row.default_variant,
                pypi_marker=row.pypi_marker,
                triton=tuple(row.triton.items()),
                variants=tuple(variants),
                confidence=row.confidence,
                note=row.note,
            )
        )
    family = tuple(d.name for d in raw.family.dists)
    labelled = tuple(d.name for d in raw.family.dists if d.labelled)
    if raw.distribution not in labelled:
        raise files.error(FILE, "distribution", f"{raw.distribution!r} is not a labelled [family] distribution")
    return Tables(raw.distribution, raw.index_path, family, labelled, tuple(sorted(releases, key=lambda r: Version(r.series))), raw.cpu_builds.local_labels,
                  raw.cuda_member.member, raw.cuda_member.described)


# -- accessors --------------------------------------------------------------------------------------


def release(version: str) -> Optional[TorchRelease]:
    """The series of "2.8", "2.8.0" or "2.8.0+cu128"; None if unknown (or an unknown patch release)."""
    parsed = _version(version)
    if len(parsed.release) < 2:
        return None
    series = f"{parsed.release[0]}.{parsed.release[1]}"
    found = next((r for r in load().releases if r.series == series), None)
    if found is None or len(parsed.release) == 2:
        return found
    return found if _has_patch(found.versions, parsed) else None


def variant_names() -> tuple[str, ...]:
    """Every CUDA variant any known release was built in ("cu118", ...), oldest CUDA first: the
    variant indexes a torch-family name may come from."""
    names = {v.name for r in load().releases for v in r.variants if v.name.startswith("cu")}
    return tuple(sorted(names, key=lambda n: Version(n[2:-1] + "." + n[-1])))


def variant(version: str, name: Optional[str] = None) -> Optional[TorchVariant]:
    """The CUDA build of a torch version: variant `name` ("cu128"), else its local label ("2.8.0+cu128").

    A version without either is the PyPI build (the release's default variant). None when that
    release or variant is unknown, or the variant was not built for that patch release.
    """
    parsed = _version(version)
    series = release(version)
    if series is None:
        return None
    found = series.variant(name or parsed.local or series.default_variant)
    if found is None or len(parsed.release) == 2:
        return found
    return found if _has_patch(found.versions, parsed) else None


def distribution() -> str:
    """The distribution whose releases and CUDA variants the table describes ("torch")."""
    return load().distribution


def index_path(variant_name: str) -> str:
    """The variant's index path relative to the configured PyTorch index base ("whl/cu128")."""
    return load().index_path.format(variant=variant_name)


def family() -> tuple[str, ...]:
    """The canonical names whose builds a chosen CUDA variant takes from the variant index only."""
    return load().family


def labelled_family() -> tuple[str, ...]:
    """The family names whose variant builds carry the variant's local label (torch, torchvision,
    torchaudio): the ones a move to another variant takes along at their installed public release."""
    return load().labelled


def cpu_only(name: str, version: Version) -> bool:
    """Whether a release of a family distribution is a CPU-only build: its local label's first part
    is one data/torch.toml lists (torch 2.8.0+cpu, 2.5.1+cpu.cxx11.abi)."""
    if canonicalize_name(name) not in family() or version.local is None:
        return False
    return version.local.split(".")[0] in load().cpu_labels


def default_build_described(machine: str) -> bool:
    """Whether the release rows describe the default (PyPI) build for `machine`: for x86_64 they do;
    for aarch64 only the wheel's members tell a CUDA build from a CPU-only one (2.10.0 is CPU-only)."""
    return machine in load().described


def cuda_member() -> str:
    """The member every CUDA build of torch carries: "torch/lib/libtorch_cuda.so"."""
    return load().cuda_member


def _has_patch(versions: tuple[str, ...], wanted: Version) -> bool:
    return any(Version(v) == Version(wanted.public) for v in versions)


def _version(version: str) -> Version:
    try:
        return Version(version)
    except InvalidVersion:
        raise UsageError(f"not a torch version: {version!r} (expected e.g. 2.8.0 or 2.8.0+cu128)") from None
