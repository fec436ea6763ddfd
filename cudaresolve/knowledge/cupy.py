"""CuPy majors and their binary distributions (data/cupy.toml).

CUDA versions are values once loaded. May import: records, versions, knowledge/files and knowledge/components (component names).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from cudaresolve import records
from cudaresolve.knowledge import compiled, components, files
from cudaresolve.knowledge.files import CONFIDENCE, REQUIREMENT, SPECIFIER, VERSION
from cudaresolve.versions import CudaVersion


@dataclass(frozen=True)
class CupyDist:
    """A CuPy binary distribution within one CuPy major, e.g. cupy-cuda12x in v14."""

    name: str
    cupy_major: int = field(metadata=records.check(inherit=True, key="major"))
    cuda: tuple[CudaVersion, ...]  # toolkit versions it supports
    first: Optional[str] = field(default=None, metadata=VERSION)  # first version, when later than the major's first
    latest: Optional[str] = field(default=None, metadata=VERSION)  # newest version on the index, for dists that ended


@dataclass(frozen=True)
class CupyMajor:
    major: int
    versions: str = field(metadata=SPECIFIER)
    python: str = field(metadata=SPECIFIER)
    dists: tuple[CupyDist, ...]
    requires: tuple[str, ...] = field(default=(), metadata=REQUIREMENT)
    note: Optional[str] = None


def _component(name: str) -> None:
    if not any(components.for_component(name, major) for major in (11, 12, 13)):
        raise ValueError(f"{name!r} is not a component of data/components.toml")


@dataclass(frozen=True)
class UndeclaredLibraries:
    """CUDA libraries a package loads without requiring them, and its own extra that brings them as
    wheels: CuPy 14 takes them from `[ctk]` or from wherever cuda-pathfinder finds them."""

    applies_to: tuple[str, ...] = field(metadata=REQUIREMENT)  # the distributions and releases
    components: tuple[str, ...] = field(metadata=records.check(_component))  # of the wheel's CUDA major
    extra: str  # the extra that requires their wheels


@dataclass(frozen=True)
class _Undeclared:
    packages: tuple[UndeclaredLibraries, ...]


@dataclass(frozen=True)
class _File:
    confidence: str = field(metadata=CONFIDENCE)
    major: tuple[CupyMajor, ...]
    undeclared_libraries: _Undeclared


@compiled.table("cupy.toml", "components.toml")
def load() -> tuple[CupyMajor, ...]:
    """CuPy majors (12, 13, 14) with their binary distributions."""
    return files.read("cupy.toml", _File).major


@compiled.table("cupy.toml", "components.toml")
def undeclared() -> tuple[UndeclaredLibraries, ...]:
    """The packages that load CUDA libraries they do not require, and the extra that brings them."""
    return files.read("cupy.toml", _File).undeclared_libraries.packages


def undeclared_libraries(name: str, version: str) -> Optional[UndeclaredLibraries]:
    """The row for distribution `name` at `version` ("cupy-cuda12x", "14.2.0"): which CUDA libraries
    it loads undeclared and the extra that brings them; None when it declares what it loads."""
    wanted, parsed = canonicalize_name(name), Version(version)
    for row in undeclared():
        for text in row.applies_to:
            requirement = Requirement(text)
            if canonicalize_name(requirement.name) == wanted and requirement.specifier.contains(parsed, prereleases=True):
                return row
    return None


def dist(name: str, cupy_version: str) -> Optional[CupyDist]:
    """The row for distribution `name` ("cupy-cuda12x") at `cupy_version`; None if not published."""
    version = Version(cupy_version)
    wanted = canonicalize_name(name)
    for major in load():
        if version in SpecifierSet(major.versions):
            for row in major.dists:
                if canonicalize_name(row.name) == wanted and (row.first is None or version >= Version(row.first)):
                    return row
    return None


def dist_for_cuda_major(cuda_major: int) -> Optional[str]:
    """The binary distribution of the newest CuPy for a CUDA major ("cupy-cuda12x" for 12): what an
    abstract `cupy` means in an environment of that major. None when no CuPy release builds for it."""
    for major in sorted(load(), key=lambda m: m.major, reverse=True):
        for row in major.dists:
            if any(version.major == cuda_major for version in row.cuda):
                return row.name
    return None


def same_release_for_major(cupy_version: str, cuda_major: int) -> Optional[str]:
    """The binary distribution of CuPy `cupy_version` built for `cuda_major` ("cupy-cuda13x" for 14.0.0
    and 13); None when that release has none."""
    version = Version(cupy_version)
    for major in load():
        if version in SpecifierSet(major.versions):
            return next((row.name for row in major.dists
                         if (row.first is None or version >= Version(row.first))
                         and any(cuda.major == cuda_major for cuda in row.cuda)), None)
    return None
