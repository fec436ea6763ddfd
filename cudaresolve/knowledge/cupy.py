"""CuPy majors and their binary distributions (data/cupy.toml).

CUDA versions are values once loaded. May import: records, versions, knowledge/files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from cudaresolve import records
from cudaresolve.knowledge import compiled, files
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


@dataclass(frozen=True)
class _File:
    confidence: str = field(metadata=CONFIDENCE)
    source_package: str
    major: tuple[CupyMajor, ...]


@compiled.table("cupy.toml")
def load() -> tuple[CupyMajor, ...]:
    """CuPy majors (12, 13, 14) with their binary distributions."""
    return files.read("cupy.toml", _File).major


@compiled.table("cupy.toml")
def source_package() -> str:
    """The name a user asks for (`cupy`), which stands for the binary wheel of the environment's CUDA major."""
    return canonicalize_name(files.read("cupy.toml", _File).source_package)


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
