"""The install plan: what a lock changes in the target, per distribution (added, upgraded,
downgraded, kept), with the build chosen and why, the index it comes from and what it downloads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Literal, Optional

from packaging.utils import canonicalize_name
from packaging.version import Version

from cudaresolve.env.distributions import Distribution
from cudaresolve.errors import UsageError
from cudaresolve.records import shown
from cudaresolve.resolve.lock import Lock, LockedPackage

Kind = Literal["add", "upgrade", "downgrade", "replace", "keep"]


@dataclass(frozen=True)
class Change:
    name: str
    kind: Kind  # "replace": the same public version, another build (torch 2.8.0+cu128 -> +cu129)
    installed: Optional[str]  # the version there now
    locked: str
    reason: str
    index: Optional[str]
    download: int  # bytes to download, 0 when kept or unknown

    @property
    def touches(self) -> bool:
        return self.kind != "keep"


def install_plan(lock: Lock, installed: Iterable[Distribution]) -> tuple[Change, ...]:
    """One Change per locked package, in the lock's order."""
    present = {d.name: d.version for d in installed}
    changes = []
    for package in lock.packages:
        name = canonicalize_name(package.name)
        new = _locked_version(package)
        old = present.get(name)
        if package.provided_by is not None:
            kind: Kind = "keep"  # conda's package stands for it
        elif old is None:
            kind = "add"
        elif old == new:
            kind = "keep"
        elif old.public == new.public:
            kind = "replace"
        else:
            kind = "upgrade" if new > old else "downgrade"
        size = package.wheel.size if package.wheel and package.wheel.size and kind != "keep" else 0
        changes.append(Change(name, kind, str(old) if old else None, package.version, package.reason, package.index, size or 0))
    return tuple(changes)


def _locked_version(package: LockedPackage) -> Version:
    """The locked version, compared with the installed one: a lock from elsewhere may hold any text
    (another tool's sdist entry has none), which is bad input, not a traceback."""
    try:
        return Version(package.version)
    except ValueError:  # InvalidVersion, or a number past int()'s 4,300 digits
        raise UsageError(f"the lock's {package.name} has version {shown(package.version)}, which is not a PEP 440 version") from None
