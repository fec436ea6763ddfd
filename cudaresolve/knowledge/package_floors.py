"""Package floors: the driver release some releases of a distribution need (data/package_floors.toml).

May import: records, versions, knowledge/files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from cudaresolve.knowledge import compiled, files
from cudaresolve.knowledge.files import CONFIDENCE, REQUIREMENT
from cudaresolve.versions import DriverRelease

FILE = "package_floors.toml"


@dataclass(frozen=True)
class PackageFloor:
    """Releases of a distribution (`affects`) that run only on `driver` or newer."""

    affects: str = field(metadata=REQUIREMENT)
    driver: DriverRelease
    refs: tuple[str, ...]
    confidence: str = field(default="H", metadata=CONFIDENCE)


@dataclass(frozen=True)
class _File:
    confidence: str = field(metadata=CONFIDENCE)
    floor: tuple[PackageFloor, ...]


@compiled.table(FILE)
def load() -> tuple[PackageFloor, ...]:
    """Every package floor, in file order."""
    return files.read(FILE, _File).floor


def floor(name: str, version: Version) -> Optional[DriverRelease]:
    """The highest driver floor of the rows whose `affects` holds `version` of `name`; None when none does."""
    wanted = canonicalize_name(name)
    found = [row.driver for row in load()
             if canonicalize_name((requirement := Requirement(row.affects)).name) == wanted
             and requirement.specifier.contains(version, prereleases=True)]
    return max(found) if found else None
