"""The lock: what `cudaresolve lock` chose for one or more hosts, as plain frozen data.

Why in resolve/: it is the resolver's answer (its decisions are the resolver's records), so the
resolver owns it; lockfile/ reads and writes it as files and output/ renders it, both importing it
from here, and nothing here imports them. A Lock read from a file holds only values that passed
lockfile/fields.py's rules; the writers apply the same rules to a Lock built in code. No I/O here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

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

