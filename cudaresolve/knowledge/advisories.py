"""Known breakages and the conditions under which they apply (data/advisories.toml)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional

from cudaresolve import records
from cudaresolve.errors import UsageError
from cudaresolve.knowledge import compiled, files
from cudaresolve.knowledge.files import CONFIDENCE, REQUIREMENT, SPECIFIER

FILE = "advisories.toml"


def _symbol_pattern(value: str) -> None:
    name, at, version = value.partition("@")
    if not name or (at and not version) or "@" in version:
        raise UsageError(f"expected NAME or NAME@VERSION, got {value!r}")


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
    affects: tuple[str, ...] = field(metadata=REQUIREMENT)
    symptom: str
    fix: str
    refs: tuple[str, ...]
    together_with: tuple[str, ...] = field(default=(), metadata=REQUIREMENT)
    unless: tuple[str, ...] = field(default=(), metadata=REQUIREMENT)
    cuda: Optional[str] = field(default=None, metadata=SPECIFIER)
    variants: tuple[str, ...] = ()
    driver: Optional[str] = field(default=None, metadata=SPECIFIER)
    gpu: Optional[str] = field(default=None, metadata=SPECIFIER)
    platform: Optional[str] = None
    references: tuple[str, ...] = field(default=(), metadata=records.check(_symbol_pattern))
    fixed_in: tuple[str, ...] = field(default=(), metadata=REQUIREMENT)  # NAME==VERSION, first release without it
    confidence: str = field(default="H", metadata=CONFIDENCE)
    note: Optional[str] = None
    sets_aside: bool = True  # false: a deprecation, not a breakage; the lock takes the release and warns


@dataclass(frozen=True)
class _Releases:
    versions: Mapping[str, tuple[str, ...]]  # distribution -> its releases on the index


@dataclass(frozen=True)
class _File:
    confidence: str = field(metadata=CONFIDENCE)
    advisory: tuple[Advisory, ...]
    releases: _Releases


def _file() -> _File:
    return files.read(FILE, _File)


@compiled.table(FILE)
def releases() -> Mapping[str, tuple[str, ...]]:
    """The releases on the index of the distributions the advisories name ([releases])."""
    return _file().releases.versions


@compiled.table(FILE)
def load() -> tuple[Advisory, ...]:
    """Every known advisory, in file order; ids are unique."""
    rows = _file().advisory
    ids = [a.id for a in rows]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise files.error(FILE, "advisory", f"duplicate ids {duplicates}")
    return rows
