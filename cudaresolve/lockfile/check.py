"""Every value of a Lock through its rule (lockfile/fields.py) before a writer writes it, so a lock
built in code is held to what the reader demands of a file: names canonical, versions and markers
as packaging prints them, digests lowercase, every record as the reader would build it from its
table (lockfile/reasons.py).

May import: packaging, resolve/lock.py and resolve/reasons.py (the model), lockfile/fields.py and
lockfile/reasons.py.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any, Callable, Optional, Sequence, TypeVar

from packaging.version import Version

from cudaresolve.lockfile import reasons
from cudaresolve.lockfile.fields import (
    Invalid,
    LockFileError,
    facts,
    label,
    marker,
    name,
    provider,
    requires_python,
    sdist_filename,
    sha256,
    shown,
    size,
    url,
    version,
    wheel_filename,
)
from cudaresolve.resolve.lock import Decision, Fork, Lock, LockedPackage, LockedSdist, LockedWheel, MajorDecision
from cudaresolve.resolve.reasons import CandidateRef

T = TypeVar("T")


class _Rules:
    """Each value through its rule: one that breaks it is a LockFileError naming `origin`, the field
    and the package."""

    def __init__(self, origin: str) -> None:
        self.origin = origin

    def __call__(self, check: Callable[[Any], T], value: Any, field: str, package: str = "") -> T:
        who = f" (package {package})" if package else ""
        try:
            return check(value)
        except Invalid as exc:
            raise LockFileError(f"{self.origin}: {field}{who}: {exc}") from None
        except reasons.Bad as exc:
            raise LockFileError(f"{self.origin}: {field}.{exc.key}{who}: {exc.problem}") from None

    def optional(self, check: Callable[[Any], T], value: Any, field: str, package: str = "") -> Optional[T]:
        return None if value is None else self(check, value, field, package)


def checked(lock: Lock, origin: str = "the lock to write") -> Lock:
    """`lock` with every value passed through its rule: names canonical, versions and markers as
    packaging prints them, digests lowercase, every record as the reader would build it from its
    table. What the writers write; a value that breaks its rule is a LockFileError naming `origin`,
    the field and the package."""
    rule = _Rules(origin)
    packages = [_checked_package(package, rule) for package in lock.packages]
    one_per_environment(packages, origin)
    decisions = tuple(_checked_decision(decision, rule) for decision in lock.decisions)
    major = None if lock.major is None else _checked_major(lock.major, "cuda-major", rule)
    majors = tuple(_checked_major(m, "cuda-majors", rule) for m in lock.majors)
    if any(m.marker is None for m in majors):
        raise LockFileError(f"{origin}: cuda-majors.marker: missing")
    forks = tuple(_checked_fork(fork, rule) for fork in lock.forks)
    return Lock(
        packages=tuple(packages),
        requires_python=rule.optional(requires_python, lock.requires_python, "requires-python"),
        hosts=tuple(rule(facts, host, "hosts.facts") for host in lock.hosts),
        host_labels=tuple(rule(label, host, "hosts.label") for host in lock.host_labels),
        index_urls=tuple(rule(url, index, "index-urls") for index in lock.index_urls),
        decisions=decisions,
        created_by=rule(label, lock.created_by, "created-by"),
        major=major,
        environments=tuple(rule(marker, environment, "environments") for environment in lock.environments),
        forks=forks,
        majors=majors,
    )


def _checked_package(package: LockedPackage, rule: _Rules) -> LockedPackage:
    """A package entry: its name, version, wheels, sdist, index, marker, reason and conda provider."""
    dist = rule(name, package.name, "name")
    pinned = None if package.version is None else Version(rule(version, str(package.version), "version", dist))
    if pinned is None and package.other_source is None:
        raise LockFileError(f"{rule.origin}: version (package {dist}): missing")
    wheels = tuple(_checked_wheel(wheel, dist, pinned, rule) for wheel in package.wheels)
    if len({wheel.filename for wheel in wheels}) < len(wheels):
        raise LockFileError(f"{rule.origin}: wheels.name (package {dist}): one file named twice")
    sdist = None if package.sdist is None else _checked_sdist(package.sdist, dist, pinned, rule)
    return replace(
        package,
        name=dist,
        version=pinned,
        index=rule.optional(url, package.index, "index", dist),
        wheels=wheels,
        sdist=sdist,
        marker=rule.optional(marker, package.marker, "marker", dist),
        reason=rule(reasons.checked_reason, package.reason, "reason", dist),
        provided_by=rule.optional(provider, package.provided_by, "provided-by", dist),
    )


def _checked_wheel(wheel: LockedWheel, dist: str, pinned: Optional[Version], rule: _Rules) -> LockedWheel:
    """A wheel of package `dist`: its file name (of that name and version), URL, digest and size."""
    named = functools.partial(wheel_filename, package=dist, package_version=str(pinned or ""))
    return LockedWheel(
        filename=rule(named, wheel.filename, "wheels.name", dist),
        url=rule(url, wheel.url, "wheels.url", dist),
        sha256=rule.optional(sha256, wheel.sha256, "wheels.hashes.sha256", dist),
        size=rule.optional(size, wheel.size, "wheels.size", dist),
    )


def _checked_sdist(sdist: LockedSdist, dist: str, pinned: Optional[Version], rule: _Rules) -> LockedSdist:
    """The sdist of package `dist`: its file name (of that name and version), URL, digest and size."""
    named = functools.partial(sdist_filename, package=dist, package_version=str(pinned or ""))
    return LockedSdist(
        filename=rule(named, sdist.filename, "sdist.name", dist),
        url=rule(url, sdist.url, "sdist.url", dist),
        sha256=rule.optional(sha256, sdist.sha256, "sdist.hashes.sha256", dist),
        size=rule.optional(size, sdist.size, "sdist.size", dist),
    )


def _checked_decision(decision: Decision, rule: _Rules) -> Decision:
    """A decision: the name, the chosen version, each rejection as the reader builds it, the marker."""
    dist = rule(name, decision.name, "decisions.name")
    chosen = decision.chosen
    if chosen is not None:
        chosen = CandidateRef(dist, Version(rule(version, str(chosen.version), "decisions.chosen", dist)))
    rejected = tuple(
        rule(reasons.checked_rejection, replace(r, candidate=CandidateRef(dist, r.candidate.version)), "decisions.rejected", dist)
        for r in decision.rejected
    )
    return Decision(dist, chosen, rejected, rule.optional(marker, decision.marker, "decisions.marker", dist))


def _checked_fork(fork: Fork, rule: _Rules) -> Fork:
    """A universal lock's fork: the name, and each environment's marker and version."""
    return Fork(
        rule(name, fork.name, "forks.name"),
        tuple(
            (rule(marker, where, "forks.versions.marker", fork.name),
             None if v is None else Version(rule(version, str(v), "forks.versions.version", fork.name)))
            for where, v in fork.versions
        ),
    )


def _checked_major(major: MajorDecision, field: str, rule: _Rules) -> MajorDecision:
    return MajorDecision(
        rule(_major, major.chosen, f"{field}.chosen"),
        tuple(rule(reasons.checked_major_rejection, r, f"{field}.rejected") for r in major.rejected),
        rule.optional(marker, major.marker, f"{field}.marker"),
    )


def one_per_environment(packages: Sequence[LockedPackage], origin: str) -> None:
    """Several entries of one name (a universal lock's forks) must each carry a marker, and not the
    same one, so an installer can pick one per environment (PEP 751 refuses two that both hold)."""
    seen: dict[str, list[Optional[str]]] = {}
    for package in packages:
        seen.setdefault(package.name, []).append(package.marker)
    for dist, found in seen.items():
        if len(found) > 1 and (None in found or len(set(found)) < len(found)):
            raise LockFileError(
                f"{origin}: marker (package {dist}): {len(found)} entries, which need a marker each, "
                "none the same, so that one holds per environment"
            )


def _major(value: Any) -> int:
    """A CUDA major."""
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 1000:
        raise Invalid(f"not a CUDA major: {shown(value)}")
    return value
