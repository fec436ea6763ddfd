"""Which component wheel releases each cuda-toolkit release pins (data/toolkit_pins.toml).

Why: cuBLAS, cuFFT, cuRAND, cuSOLVER and cuSPARSE wheels are versioned by their library, so their
version does not say the CUDA minor they belong to (nvidia-cufft 12.5.0.14 is CUDA 13.5). The
metapackage's pins do: scripts/record_toolkit_pins.py reads them from every cuda-toolkit release.

May import: records, versions, errors and knowledge/files.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Optional

from packaging.utils import canonicalize_name
from packaging.version import Version

from cudaresolve import records
from cudaresolve.errors import UsageError
from cudaresolve.knowledge import compiled, files
from cudaresolve.knowledge.files import CONFIDENCE, VERSION
from cudaresolve.versions import CudaVersion

FILE = "toolkit_pins.toml"


def _pin(value: str) -> None:
    name, sep, version = value.partition("==")
    if not sep or canonicalize_name(name) != name:
        raise UsageError(f"expected canonical-name==VERSION, got {value!r}")
    files.parses(Version)(version)


@dataclass(frozen=True)
class Release:
    """One cuda-toolkit release and the exact component releases it pins."""

    version: str = field(metadata=VERSION)  # "13.0.3.0": CUDA 13.0.3
    pins: tuple[str, ...] = field(metadata=records.check(_pin))  # "nvidia-cufft==12.0.0.61"

    @property
    def cuda(self) -> CudaVersion:
        """The CUDA minor of the release (13.0)."""
        major, minor = Version(self.version).release[:2]
        return CudaVersion(major, minor)


@dataclass(frozen=True)
class _File:
    confidence: str = field(metadata=CONFIDENCE)
    metapackage: str  # "cuda-toolkit"
    release: tuple[Release, ...] = ()


@compiled.table(FILE)
def load() -> tuple[Release, ...]:
    """Every cuda-toolkit release in the table, oldest first."""
    return tuple(sorted(files.read(FILE, _File).release, key=lambda r: Version(r.version)))


@compiled.table(FILE)
def metapackage() -> str:
    """The distribution whose releases pin the component releases (cuda-toolkit)."""
    return canonicalize_name(files.read(FILE, _File).metapackage)


def release_cuda(name: str, version: str) -> Optional[CudaVersion]:
    """The CUDA minor a release of the metapackage pins its components to (cuda-toolkit 12.9.1:
    12.9), by its version as the table's releases are; None for another distribution."""
    if canonicalize_name(name) != metapackage():
        return None
    try:
        major, minor = Version(version).release[:2]
    except ValueError:
        return None
    return CudaVersion(major, minor)


@functools.lru_cache(maxsize=None)
def _index() -> dict[str, tuple[tuple[CudaVersion, str], ...]]:
    """dist -> (CUDA minor, pinned version) of every release pinning it, oldest release first."""
    found: dict[str, list[tuple[CudaVersion, str]]] = {}
    for release in load():
        for pin in release.pins:
            name, _, version = pin.partition("==")
            found.setdefault(name, []).append((release.cuda, version))
    return {name: tuple(rows) for name, rows in found.items()}


def cuda_of(dist: str, version: str) -> Optional[CudaVersion]:
    """The CUDA minor of `dist==version` (13.5): that of the first toolkit pinning it; for a release
    no toolkit pins (nvidia-cublas-cu12 12.9.3.13), that of the newest pinned release below it with
    the same first version number, a lower bound (a library's patch release is built with the toolkit
    of the release it patches, or a newer one); None below every pinned release."""
    wanted = Version(version)
    pinned = [(Version(release), cuda) for cuda, release in _index().get(canonicalize_name(dist), ())]
    exact = next((cuda for release, cuda in pinned if release == wanted), None)
    if exact is not None:
        return exact
    below = [(release, cuda) for release, cuda in pinned if release < wanted and release.release[0] == wanted.release[0]]
    return max(below)[1] if below else None


def for_cuda(dist: str, cuda: CudaVersion) -> tuple[str, ...]:
    """The releases of `dist` that toolkits of CUDA minor `cuda` (13.0) pin, newest first."""
    pinned = {version for minor, version in _index().get(canonicalize_name(dist), ()) if minor == cuda}
    return tuple(sorted(pinned, key=Version, reverse=True))
