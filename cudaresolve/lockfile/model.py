"""The lock: what `cudaresolve lock` chose for one or more hosts, as plain frozen data.

Why here: it is the model of the lock files (a `[[packages]]` entry, its wheel, `[tool.cudaresolve]`),
so the room that reads and writes those files owns it. The resolver builds one, `read_pylock`
builds one from a file, the writers and output/ take one; nothing here imports them. Values read
from a file are the validated, normalised forms of `cudaresolve.lockfile.fields`; the writers check
them again, so a Lock built in code cannot put a line into pip's input either. No I/O here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Literal, Optional, TypeVar

from cudaresolve.lockfile import fields

T = TypeVar("T")

# PEP 751's sources of a package other than wheels: cudaresolve can neither judge nor install them.
OtherSource = Literal["sdist", "vcs", "directory", "archive"]


@dataclass(frozen=True)
class LockedWheel:
    """The one wheel file a locked package installs from."""

    filename: str
    url: str
    sha256: Optional[str]  # lowercase hex digest; every writer that pins files requires it
    size: Optional[int]


@dataclass(frozen=True)
class LockedPackage:
    """One pinned distribution and why it was chosen."""

    name: str
    version: str  # with its local label when it has one: "2.11.0+cu130"; "" only for another source unpinned
    index: Optional[str]  # the index URL it comes from (a torch variant index for torch +cuXYZ)
    wheel: Optional[LockedWheel]  # None: kept installed, provided by conda, or only another source
    marker: Optional[str]  # PEP 508 environment marker: install only where it holds
    reason: str  # one line: why this version/variant
    provided_by: Optional[str] = None  # the conda package that stands for it ("libnvjitlink 12.8.93 (conda)"); no wheel
    other_source: Optional[OtherSource] = None  # another tool's entry with no wheel: what it has instead


@dataclass(frozen=True)
class Decision:
    """What `--explain` shows for one name: the candidate chosen and every one rejected, with why."""

    name: str  # a distribution name, or the resolver's "CUDA major" entry
    chosen: Optional[str]  # a candidate label like "torch 2.11.0+cu130"; None when nothing fit
    rejected: tuple[tuple[str, str], ...]  # (candidate label, reason)


@dataclass(frozen=True)
class Lock:
    """A resolution for one or more hosts, with everything needed to install it and explain it."""

    packages: tuple[LockedPackage, ...]
    requires_python: Optional[str]
    hosts: tuple[dict, ...]  # host facts JSON objects (HostFacts.to_json() parsed)
    host_labels: tuple[str, ...]  # one per host, e.g. the --host file it came from
    index_urls: tuple[str, ...]  # the first is the primary index, the rest are extra indexes
    decisions: tuple[Decision, ...]
    created_by: str  # the tool that wrote it, e.g. "cudaresolve 0.1.0"


def checked(lock: Lock, origin: str = "the lock to write") -> Lock:
    """`lock` with every value passed through its rule (fields.py): names canonical, versions and
    markers as packaging prints them, digests lowercase. What the writers write; a value that
    breaks its rule is a LockFileError naming `origin`, the package and the field."""

    def rule(check: Callable[[Any], T], value: Any, field: str, package: str = "") -> T:
        try:
            return check(value)
        except fields.Invalid as exc:
            who = f" (package {package})" if package else ""
            raise fields.LockFileError(f"{origin}: {field}{who}: {exc}") from None

    def optional(check: Callable[[Any], T], value: Any, field: str, package: str = "") -> Optional[T]:
        return None if value is None else rule(check, value, field, package)

    packages = []
    for package in lock.packages:
        name = rule(fields.name, package.name, "name")
        version = package.version
        if version or package.other_source is None:
            version = rule(fields.version, version, "version", name)
        wheel = package.wheel
        if wheel is not None:
            wheel = LockedWheel(
                filename=rule(lambda v: fields.wheel_filename(v, name, version), wheel.filename, "wheels.name", name),
                url=rule(fields.url, wheel.url, "wheels.url", name),
                sha256=optional(fields.sha256, wheel.sha256, "wheels.hashes.sha256", name),
                size=optional(fields.size, wheel.size, "wheels.size", name),
            )
        packages.append(
            replace(
                package,
                name=name,
                version=version,
                index=optional(fields.url, package.index, "index", name),
                wheel=wheel,
                marker=optional(fields.marker, package.marker, "marker", name),
                reason=rule(fields.text, package.reason, "reason", name),
                provided_by=optional(fields.label, package.provided_by, "provided-by", name),
            )
        )
    decisions = tuple(
        Decision(
            rule(fields.text, decision.name, "decisions.name"),
            optional(fields.text, decision.chosen, "decisions.chosen"),
            tuple(
                (rule(fields.text, label, "decisions.rejected.candidate"), rule(fields.text, why, "decisions.rejected.reason"))
                for label, why in decision.rejected
            ),
        )
        for decision in lock.decisions
    )
    return Lock(
        packages=tuple(packages),
        requires_python=optional(fields.requires_python, lock.requires_python, "requires-python"),
        hosts=lock.hosts,
        host_labels=tuple(rule(fields.label, label, "hosts.label") for label in lock.host_labels),
        index_urls=tuple(rule(fields.url, url, "index-urls") for url in lock.index_urls),
        decisions=decisions,
        created_by=rule(fields.label, lock.created_by, "created-by"),
    )
