"""One target's part of a lock, as PEP 751 installers select it: the entries whose markers hold in
the target's marker environment, and for each the most preferred wheel its tags allow.

A universal lock (resolve/universal.py) holds several targets; `install --lock` installs the part of
its target interpreter, and `lock --check` checks the part of each host (its machine and glibc, and
every Python the lock's `environments` name for that machine). An entry with no wheel for the
target's tags is a typed refusal (NoFittingWheel), so an x86_64 wheel never "fits" an aarch64 host.

Pure: a Lock, a marker environment and tags in, a Selection out. May import: packaging, index/tags (pip's platform expansion), resolve/lock.py
(the model), lockfile/fields.py.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping, Optional, Sequence, Union

from packaging import tags as packaging_tags
from packaging.markers import Marker, UndefinedComparison, UndefinedEnvironmentName
from packaging.specifiers import SpecifierSet
from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, NormalizedName, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from cudaresolve.index.tags import expand_platform
from cudaresolve.lockfile.fields import LockFileError
from cudaresolve.resolve.lock import Lock, LockedPackage, LockedWheel

_UNKNOWN_GLIBC_MINOR = 99  # a host whose glibc is not known: every manylinux tag of its machine is allowed


@dataclass(frozen=True)
class NoFittingWheel:
    """An entry selected for a target that has no wheel for the target's tags."""

    target: str  # the host's label or the interpreter's path
    name: NormalizedName
    version: Optional[Version]
    filenames: tuple[str, ...]  # the entry's wheels
    tags: tuple[Tag, ...]  # the target's tags, most preferred first


@dataclass(frozen=True)
class NotCovered:
    """A target the lock was not made for: none of its `environments` holds, or its
    `requires-python` does not allow the target's Python."""

    target: str
    field: str  # "environments" or "requires-python"
    value: str  # the lock's markers (joined with " or ") or specifier
    python: str  # the target's python_full_version
    machine: str  # the target's platform_machine


Unfit = Union[NoFittingWheel, NotCovered]


@dataclass(frozen=True)
class Selection:
    """A target's entries (each with the one wheel it installs; kept and conda entries as they are)
    and what stops the lock from installing there."""

    packages: tuple[LockedPackage, ...]
    unfit: tuple[Unfit, ...]


def _holds(marker: str, environment: Mapping[str, str], origin: str, where: str) -> bool:
    try:
        return Marker(marker).evaluate(dict(environment))
    except (UndefinedComparison, UndefinedEnvironmentName) as exc:
        raise LockFileError(f"{origin}: {where}: the marker {marker!r} cannot be evaluated ({exc})") from None


def _rank(wheel: LockedWheel, order: Mapping[Tag, int]) -> Optional[int]:
    """The wheel's best position in the target's tags; None when none of its tags is the target's."""
    try:
        found = parse_wheel_filename(wheel.filename)[3]
    except (InvalidWheelFilename, InvalidVersion):
        return None  # checked on read; a lock built in code with a bad name fits nothing
    ranks = [order[tag] for tag in found if tag in order]
    return min(ranks) if ranks else None


def select(lock: Lock, environment: Mapping[str, str], tags: Sequence[Tag], target: str, origin: str = "the lock") -> Selection:
    """The entries of `lock` for one target (`environment`: its PEP 508 marker environment; `tags`:
    its wheel tags, most preferred first), each with the most preferred wheel that fits; two
    entries of one name that both hold are a LockFileError (PEP 751: an installer must refuse)."""
    python = environment.get("python_full_version", environment.get("python_version", ""))
    machine = environment.get("platform_machine", "")
    unfit: list[Unfit] = []
    if lock.environments and not any(_holds(m, environment, origin, "environments") for m in lock.environments):
        unfit.append(NotCovered(target, "environments", " or ".join(f"({m})" for m in lock.environments), python, machine))
    if lock.requires_python and python:
        try:
            allowed = SpecifierSet(lock.requires_python).contains(Version(python), prereleases=True)
        except InvalidVersion:
            allowed = True  # an interpreter's odd version string: the markers decide
        if not allowed:
            unfit.append(NotCovered(target, "requires-python", lock.requires_python, python, machine))
    order = {tag: i for i, tag in enumerate(tags)}
    chosen: dict[str, LockedPackage] = {}
    for package in lock.packages:
        if package.marker and not _holds(package.marker, environment, origin, f"packages (package {package.name}).marker"):
            continue
        if package.name in chosen:
            raise LockFileError(f"{origin}: packages (package {package.name}): two entries hold for {target}, "
                                f"{chosen[package.name].version} and {package.version}")
        if not package.wheels:
            chosen[package.name] = package  # kept installed, conda's, an sdist or another source: as it is
            continue
        ranked = sorted((rank, i) for i, wheel in enumerate(package.wheels) if (rank := _rank(wheel, order)) is not None)
        if not ranked and package.sdist is not None:
            chosen[package.name] = replace(package, wheels=())  # no wheel fits this target: pip builds the sdist
            continue
        if not ranked:
            unfit.append(NoFittingWheel(target, package.name, package.version, tuple(w.filename for w in package.wheels), tuple(tags)))
            continue
        chosen[package.name] = replace(package, wheels=(package.wheels[ranked[0][1]],))
    return Selection(tuple(chosen.values()), tuple(unfit))


def selected_lock(lock: Lock, selection: Selection, environment: Mapping[str, str], origin: str = "the lock") -> Lock:
    """`lock` cut to one target's selection: its entries with their chosen wheels (and no markers:
    each was evaluated for the target), its decisions and CUDA major (those marked for other
    targets left out), no environments or forks: what a lock made for that target alone holds, and
    what pip's files can be written from."""
    decisions = tuple(d for d in lock.decisions if d.marker is None or _holds(d.marker, environment, origin, "decisions.marker"))
    major = lock.major
    if major is None:
        major = next((m for m in lock.majors if m.marker and _holds(m.marker, environment, origin, "cuda-majors.marker")), None)
        major = None if major is None else replace(major, marker=None)
    packages = tuple(replace(package, marker=None) for package in selection.packages)  # each held for the target
    return replace(lock, packages=packages, decisions=tuple(replace(d, marker=None) for d in decisions),
                   major=major, environments=(), forks=(), majors=())


# -- a host's target, for `lock --check` ---------------------------------------------------------


def manylinux_platforms(machine: str, glibc: Optional[str]) -> list[str]:
    """The platform tags a Linux host of `machine` with `glibc` installs, most preferred first:
    manylinux_2_N down to 2_5 with the legacy names (PEP 600), then linux_<machine>. An unknown
    glibc allows every manylinux tag of the machine (the machine is what a lock gets wrong)."""
    minor = _UNKNOWN_GLIBC_MINOR
    if glibc:
        try:
            major_text, minor_text = glibc.split(".")[:2]
            minor = int(minor_text) if int(major_text) == 2 else _UNKNOWN_GLIBC_MINOR
        except ValueError:
            minor = _UNKNOWN_GLIBC_MINOR
    return expand_platform(f"manylinux_2_{minor}_{machine}") + [f"linux_{machine}"]


def host_tags(machine: str, glibc: Optional[str], python: str) -> tuple[Tag, ...]:
    """CPython's tags for Python `python` ("3.12") on a Linux host of `machine` and `glibc`."""
    major, minor = (int(part) for part in python.split(".")[:2])
    platforms = manylinux_platforms(machine, glibc)
    found = list(packaging_tags.cpython_tags((major, minor), [f"cp{major}{minor}"], platforms))
    found += packaging_tags.compatible_tags((major, minor), f"cp{major}{minor}", platforms)
    return tuple(dict.fromkeys(found))


def host_environment(base: Mapping[str, str], machine: str, python: str) -> dict[str, str]:
    """`base` (a Linux interpreter's marker environment) for a host of `machine` running Python
    `python` ("3.12"): what a lock's markers are evaluated in for that host."""
    return {**base, "platform_machine": machine, "python_version": python, "python_full_version": f"{python}.0",
            "sys_platform": "linux", "platform_system": "Linux", "os_name": "posix"}


def lock_pythons(lock: Lock, base: Mapping[str, str], machine: str) -> tuple[str, ...]:
    """The Python versions ("3.12") a host of `machine` is checked with: those the lock's
    `environments` name for the machine (() when they name none: the host is not a target); for a
    lock without environments, the interpreter's of `base` when the lock's requires-python allows
    it, else the lowest Python 3 it allows (a lock made with --python-version)."""
    if lock.environments:
        found = []
        for minor in range(0, 100):
            environment = host_environment(base, machine, f"3.{minor}")
            if any(_holds(m, environment, "the lock", "environments") for m in lock.environments):
                found.append(f"3.{minor}")
        return tuple(found)
    running = base.get("python_version", "")
    if lock.requires_python:
        spec = SpecifierSet(lock.requires_python)
        allowed = [f"3.{minor}" for minor in range(0, 100) if spec.contains(Version(f"3.{minor}.0"), prereleases=True)]
        if allowed and running not in allowed:
            return (allowed[0],)
    return (running,)
