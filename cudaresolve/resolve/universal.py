"""The universal lock: the locks of several targets merged into one. A placeholder until the
writer of several entries per name lands; it has the same signature.

May import: resolve/lock.py, errors.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from cudaresolve.errors import UsageError
from cudaresolve.resolve.lock import Lock


@dataclass(frozen=True)
class Part:
    """One target's lock, and the PEP 508 marker that holds on that target alone."""

    marker: str
    lock: Lock


def merged(parts: Sequence[Part]) -> Lock:
    """One lock for every part's target."""
    raise UsageError(f"several targets need the universal lock writer ({len(parts)} targets): lock one machine and Python at a time")
