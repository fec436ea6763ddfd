"""`lock --check`: does a lock still fit these hosts? Each locked build is judged by the same early
pruning the resolver used (driver floor, arch coverage of every GPU), with no index and nothing
resolved or rewritten: a driver downgrade or a new GPU in the fleet shows before an install does."""

from __future__ import annotations

from typing import Sequence

from packaging.version import Version

from cudaresolve.host.facts import HostFacts
from cudaresolve.resolve.candidates import cuda_build, release_rejection
from cudaresolve.resolve.lock import Lock


def misfits(lock: Lock, hosts: Sequence[tuple[str, HostFacts]], machine: str) -> list[str]:
    """One line per locked package that does not run on one of `hosts`; [] when the lock fits."""
    found = []
    for package in lock.packages:
        try:
            version = Version(package.version)
        except ValueError:  # InvalidVersion, or a number past int()'s 4,300 digits
            continue  # read_pylock has checked it; another tool's odd version is not ours to judge
        reason = release_rejection(package.name, version, cuda_build(package.name, version), hosts, machine)
        if reason:
            found.append(f"{package.name} {package.version}: {reason}")
    return found
