"""One lock for several targets: each target's own lock (resolved with its tags, markers and
requires-python) merged into one PEP 751 lock whose entries say, by their markers, which target
installs them.

Targets' markers are disjoint (a machine and a Python version each), so entries made from different
targets never both hold in one environment. Where every target agrees on a release it is one entry
with the union of their wheels; where they differ, each release gets the markers of the targets
that chose it, and the name is recorded as a Fork for `--explain`.

Pure: plain Locks in, a Lock out. May import: packaging, resolve/lock.py, resolve/reasons.py.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, replace
from typing import Any, Optional, Sequence, TypeVar

from packaging.markers import Marker
from packaging.specifiers import SpecifierSet
from packaging.utils import NormalizedName
from packaging.version import Version

from cudaresolve.resolve.lock import Decision, Fork, Lock, LockedPackage, LockedWheel

T = TypeVar("T")

_MINORS = range(0, 100)  # Python 3.0 to 3.99: what a requires-python is probed with
_EQUALS = re.compile(r'(\w+) == "([^"\\]*)"')  # a marker clause as packaging prints it


@dataclass(frozen=True)
class Part:
    """One target's lock and the marker that holds exactly on that target
    (`platform_machine == "aarch64" and python_version == "3.12"`)."""

    marker: str
    lock: Lock


class MergeConflict(ValueError):
    """Two targets locked one wheel file with different digests: no single lock can hold both."""


def merged(parts: Sequence[Part]) -> Lock:
    """The parts' locks as one universal lock.

    - A release (name, version, index, own marker) in every part: one entry, its wheels the union
      (one per file name, sorted), its own marker kept. In some parts only: its marker is the OR of
      those parts' markers, ANDed with its own. Different versions across parts are so many entries,
      one per release, and a Fork record for the name.
    - `environments`: the parts' markers. `requires-python`: one that covers every part —
      `>=3.X` (the lowest Python any part allows), with `,<3.Y` when every part has an upper bound;
      a union of ranges (3.10 and 3.12 only) is not expressible, so the gap between them is covered
      too (`environments` still names only the parts). None when a part has none.
    - hosts, labels and index URLs united in order; a decision (or CUDA major) the parts agree on is
      kept once, and one they differ on is kept per part set, with those parts' markers.
    """
    if not parts:
        raise ValueError("merged() needs at least one part")
    markers = [str(Marker(part.marker)) for part in parts]
    everywhere = set(range(len(parts)))
    groups: dict[tuple[str, ...], list[tuple[int, LockedPackage]]] = {}
    for i, part in enumerate(parts):
        for package in part.lock.packages:
            key: tuple[str, ...] = (package.name, str(package.version), package.index or "", package.marker or "",
                   package.provided_by or "", package.other_source or "")
            groups.setdefault(key, []).append((i, package))
    packages = []
    for release in sorted(groups, key=lambda k: (k[0], Version(k[1]) if k[1] != "None" else Version("0"), k[2:])):
        found = groups[release]
        first = found[0][1]
        where = {i for i, _ in found}
        marker = first.marker if where == everywhere else _within(first.marker, _covering_markers(markers, where))
        origins = tuple(dict.fromkeys(origin for _, package in found for origin in package.reason.origins))
        packages.append(replace(first, wheels=_wheels(first.name, [p for _, p in found]), marker=marker,
                                reason=replace(first.reason, origins=origins),
                                sdist=next((p.sdist for _, p in found if p.sdist is not None), None)))
    first_lock = parts[0].lock
    kept_hosts: dict[tuple[str, object], tuple[str, dict[str, Any]]] = {}
    for part in parts:
        for label, facts in zip(part.lock.host_labels, part.lock.hosts):
            kept_hosts.setdefault((label, _frozen(facts)), (label, facts))
    majors = _per_parts([part.lock.major for part in parts], markers)
    one_major = len(majors) == 1 and majors[0][1] is None
    return Lock(
        packages=tuple(packages),
        requires_python=_covering([part.lock.requires_python for part in parts]),
        hosts=tuple(facts for _, facts in kept_hosts.values()),
        host_labels=tuple(label for label, _ in kept_hosts.values()),
        index_urls=tuple(dict.fromkeys(url for part in parts for url in part.lock.index_urls)),
        decisions=_decisions(parts, markers),
        created_by=first_lock.created_by,
        major=majors[0][0] if one_major else None,  # also None when no part set a major aside
        environments=tuple(markers),
        forks=_forks(parts, markers),
        majors=() if one_major else tuple(replace(major, marker=marker) for major, marker in majors),
    )


def _frozen(value: object) -> object:
    """A host's facts (JSON) as something comparable and hashable."""
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value


@functools.lru_cache(maxsize=1024)  # each target's marker is split once per lock, not once per entry
def _clauses(marker: str) -> tuple[str, ...]:
    """The `and` clauses of a plain conjunction (`platform_machine == "x86_64" and python_version ==
    "3.12"`); a marker with `or` or parentheses is one clause."""
    if " or " in marker or "(" in marker:
        return (marker,)
    return tuple(str(Marker(clause)) for clause in marker.split(" and "))


def _equality(clause: str) -> Optional[tuple[str, str]]:
    """(variable, value) of a clause `variable == "value"`; None for any other clause."""
    found = _EQUALS.fullmatch(clause)
    return (found.group(1), found.group(2)) if found else None


def _excludes(clause: str, others: Sequence[str]) -> bool:
    """Whether `clause` is false wherever a part with the clauses `others` is: both `variable ==`
    with different values."""
    mine = _equality(clause)
    return mine is not None and any((found := _equality(o)) is not None and found[0] == mine[0] and found[1] != mine[1] for o in others)


def _covering_markers(markers: Sequence[str], where: set[int]) -> list[str]:
    """Markers that, within the lock's environments (where an installer evaluates them), hold on
    exactly the parts in `where`: a clause of those parts that every other part excludes (its
    `python_version == "3.10"` against their `python_version == "3.11"`) stands for all parts that
    have it, taken greedily, largest first; each part left over by its whole marker."""
    clauses = [_clauses(m) for m in markers]
    holders: dict[str, set[int]] = {}
    for i in where:
        for clause in clauses[i]:
            holders.setdefault(clause, set()).add(i)
    outside = [clauses[j] for j in range(len(markers)) if j not in where]
    usable = sorted((c for c in holders if all(_excludes(c, other) for other in outside)), key=lambda c: (-len(holders[c]), c))
    chosen: list[str] = []
    covered: set[int] = set()
    for clause in usable:
        if holders[clause] - covered:
            chosen.append(clause)
            covered |= holders[clause]
    return chosen + [markers[i] for i in sorted(where - covered)]


def _either(markers: Sequence[str]) -> str:
    """The OR of `markers` (each parenthesised), as packaging prints it."""
    if len(markers) == 1:
        return markers[0]
    return str(Marker(" or ".join(f"({m})" for m in markers)))


def _within(own: Optional[str], markers: Sequence[str]) -> str:
    """An entry's own marker (if any) ANDed with the OR of the parts' markers it belongs to."""
    either = _either(markers)
    return either if own is None else str(Marker(f"({own}) and ({either})"))


def _wheels(name: str, packages: Sequence[LockedPackage]) -> tuple[LockedWheel, ...]:
    """The union of the packages' wheels, one per file name, sorted by it; one file with two
    different digests is a MergeConflict."""
    by_name: dict[str, LockedWheel] = {}
    for package in packages:
        for wheel in package.wheels:
            known = by_name.setdefault(wheel.filename, wheel)
            if known.sha256 and wheel.sha256 and known.sha256 != wheel.sha256:
                raise MergeConflict(f"{name}: {wheel.filename} locked with two sha256 digests ({known.sha256}, {wheel.sha256})")
    return tuple(by_name[filename] for filename in sorted(by_name))


def _per_parts(values: Sequence[Optional[T]], markers: Sequence[str]) -> list[tuple[T, Optional[str]]]:
    """The distinct values of the parts (None: the part has none), each with the marker of the parts
    that have it; None for a value every part has."""
    distinct: list[tuple[T, set[int]]] = []
    for i, value in enumerate(values):
        if value is None:
            continue
        for known, where in distinct:
            if known == value:
                where.add(i)
                break
        else:
            distinct.append((value, {i}))
    if len(distinct) == 1 and len(distinct[0][1]) == len(values):
        return [(distinct[0][0], None)]
    return [(value, _either(_covering_markers(markers, where))) for value, where in distinct]


def _decisions(parts: Sequence[Part], markers: Sequence[str]) -> tuple[Decision, ...]:
    """Per name, the decision the parts agree on, or each distinct one with its parts' markers."""
    names = dict.fromkeys(decision.name for part in parts for decision in part.lock.decisions)
    found = []
    for name in names:
        per_part = [next((d for d in part.lock.decisions if d.name == name), None) for part in parts]
        found += [replace(decision, marker=marker) for decision, marker in _per_parts(per_part, markers)]
    return tuple(found)


def _forks(parts: Sequence[Part], markers: Sequence[str]) -> tuple[Fork, ...]:
    """Every name whose version is not the same in all parts (absent counts as None)."""
    found: list[dict[NormalizedName, list[str]]] = [{} for _ in parts]
    for versions_of, part in zip(found, parts):
        for package in part.lock.packages:
            versions_of.setdefault(package.name, []).append(str(package.version))
    forks = []
    for name in sorted({name for versions_of in found for name in versions_of}):
        versions = []
        for versions_of, marker in zip(found, markers):
            mine = sorted(versions_of.get(name, []))
            versions.append((marker, Version(mine[0]) if mine and mine[0] != "None" else None))
        if len({version for _, version in versions}) > 1:
            forks.append(Fork(name, tuple(versions)))
    return tuple(forks)


def _covering(specifiers: Sequence[Optional[str]]) -> Optional[str]:
    """A requires-python that covers every part's: the lowest Python 3 minor any allows, and an
    upper bound when every one has one. None when a part allows any Python or none is known."""
    if not specifiers or any(s is None for s in specifiers):
        return None
    if len(set(specifiers)) == 1:
        return specifiers[0]
    allowed = set()
    bounded = True
    for text in specifiers:
        assert text is not None
        spec = SpecifierSet(text)
        minors = [m for m in _MINORS if spec.contains(Version(f"3.{m}.0")) or spec.contains(Version(f"3.{m}.99"))]
        allowed.update(minors)
        bounded = bounded and bool(minors) and minors[-1] < _MINORS[-1]
    if not allowed:
        return None
    low, high = min(allowed), max(allowed)
    return f">=3.{low}" + (f",<3.{high + 1}" if bounded else "")
