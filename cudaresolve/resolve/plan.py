"""The install plan: what a lock changes in the target, per distribution (added, upgraded,
downgraded, kept), with the locked package (its build and why), the index it comes from, what it
downloads, and the newer releases not taken because they would break a distribution that stays.

May import: packaging, env distributions, errors, resolve/ (lock, reasons).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Literal, Optional

from packaging.utils import NormalizedName
from packaging.version import Version

from cudaresolve.env.distributions import Distribution
from cudaresolve.errors import UsageError
from cudaresolve.resolve.lock import Lock, LockedPackage
from cudaresolve.resolve.reasons import Rejection, Rule

Kind = Literal["add", "upgrade", "downgrade", "replace", "keep"]


@dataclass(frozen=True)
class Change:
    package: LockedPackage
    kind: Kind  # "replace": the same public version, another build (torch 2.8.0+cu128 -> +cu129)
    installed: Optional[Version]  # the version there now
    download: int  # bytes to download, 0 when kept or unknown
    # newer releases not taken because installing them would break a distribution that stays
    breaks_installed: tuple[Rejection, ...] = ()

    @property
    def name(self) -> NormalizedName:
        return self.package.name

    @property
    def locked(self) -> Version:
        assert self.package.version is not None
        return self.package.version

    @property
    def touches(self) -> bool:
        return self.kind != "keep"


def install_plan(lock: Lock, installed: Iterable[Distribution]) -> tuple[Change, ...]:
    """One Change per locked package, in the lock's order."""
    present = {d.name: d.version for d in installed}
    kept_back = {d.name: tuple(r for r in d.rejected if r.rule is Rule.BREAKS_INSTALLED) for d in lock.decisions}
    changes = []
    for package in lock.packages:
        new = _locked_version(package)
        old = present.get(package.name)
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
        size = max((file.size or 0 for file in package.files), default=0) if kind != "keep" else 0
        changes.append(Change(package, kind, old, size, kept_back.get(package.name, ())))
    return tuple(changes)


def _locked_version(package: LockedPackage) -> Version:
    """The locked version, compared with the installed one: another tool's sdist entry may have
    none, which is bad input, not a traceback."""
    if package.version is None:
        raise UsageError(f"the lock's {package.name} has no version")
    return package.version
