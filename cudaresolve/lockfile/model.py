"""The lock: what `cudaresolve lock` chose for a host, as plain frozen data.

Why here: it is the model of the lock files, so the room that reads and writes them owns it. The
resolver builds one, pylock.py turns it into pylock.toml, a constraints file or a hashed
requirements file and `read_pylock` builds it back from a file, output/ renders it; nothing here
imports them. No I/O here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class LockedWheel:
    """The one wheel file a locked package installs from."""

    filename: str
    url: str
    sha256: Optional[str]  # hex digest; every writer that pins files requires it
    size: Optional[int]


@dataclass(frozen=True)
class LockedPackage:
    """One pinned distribution and why it was chosen."""

    name: str
    version: str  # with its local label when it has one: "2.11.0+cu130"
    index: Optional[str]  # the index URL it comes from (a torch variant index for torch +cuXYZ)
    wheel: Optional[LockedWheel]  # None: a kept installed distribution with no source
    marker: Optional[str]  # PEP 508 environment marker: install only where it holds
    reason: str  # one line: why this version/variant
    provided_by: Optional[str] = None  # the conda package that stands for it ("libnvjitlink 12.8.93 (conda)"); no wheel


@dataclass(frozen=True)
class Decision:
    """What `--explain` shows for one name: the candidate chosen and every one rejected, with why."""

    name: str
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
    created_by: str  # the normalized name of the tool that wrote it, e.g. "cudaresolve"
