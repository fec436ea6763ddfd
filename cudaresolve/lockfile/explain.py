"""`cudaresolve why NAME`: which entries of a lock a name means, and the paths from what was asked
for to each, read from the origins the lock records (as `npm explain` or `uv tree --invert`).

May import: packaging, resolve/lock.py and resolve/reasons.py (the records).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from packaging.utils import canonicalize_name

from cudaresolve.resolve.lock import Lock, LockedPackage
from cudaresolve.resolve.reasons import Origin, parent_of

MAX_DEPTH = 32  # parents followed up one path: a lock's chains are short, a hostile one may not be
MAX_BRANCHES = 200  # branches in one answer: a lock where every entry requires every other stays short


@dataclass(frozen=True)
class Branch:
    """One origin of an entry and, when a locked parent brought it, the origins of that parent."""

    origin: Origin
    parent: Optional[LockedPackage]  # the locked entry whose requirement it is; None for a root
    up: tuple["Branch", ...] = ()
    cut: bool = False  # not followed further: a circle, or past MAX_DEPTH or MAX_BRANCHES


def entries(lock: Lock, name: str) -> tuple[LockedPackage, ...]:
    """The entries `name` means: the distribution of that name, else those asked for as it (`cupy`
    locked as `cupy-cuda12x`)."""
    wanted = canonicalize_name(name)
    named = tuple(p for p in lock.packages if p.name == wanted)
    return named or tuple(p for p in lock.packages if p.reason.asked_as == wanted)


def paths(lock: Lock, package: LockedPackage) -> tuple[Branch, ...]:
    """Each origin of `package` with the path up to what was asked for, as a tree of Branches."""
    budget = [MAX_BRANCHES]
    return _branches(lock, package, (package.name,), budget)


def _branches(lock: Lock, package: LockedPackage, seen: tuple[str, ...], budget: list[int]) -> tuple[Branch, ...]:
    found = []
    for origin in package.reason.origins:
        ref = parent_of(origin)
        if ref is not None and ref.name == package.name:
            continue  # the release a request with extras stands on: that request, said once
        if budget[0] <= 0:
            break
        budget[0] -= 1
        parent = None if ref is None else _entry(lock, ref.name, package.marker)
        if parent is None:
            found.append(Branch(origin, None))
        elif parent.name in seen or len(seen) >= MAX_DEPTH:
            found.append(Branch(origin, parent, cut=True))
        else:
            found.append(Branch(origin, parent, _branches(lock, parent, (*seen, parent.name), budget)))
    return tuple(found)


def _entry(lock: Lock, name: str, marker: Optional[str]) -> Optional[LockedPackage]:
    """The entry of `name`: of a universal lock's several, the one of the same marker, else the first."""
    named = [p for p in lock.packages if p.name == name]
    return next((p for p in named if p.marker == marker), named[0] if named else None)
