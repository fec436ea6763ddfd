"""`lock --check`: does a lock still fit these hosts? Each locked build is judged by the same early
pruning the resolver used (driver floor, arch coverage of every GPU), with no index and nothing
resolved or rewritten: a driver downgrade or a new GPU in the fleet shows before an install does.

May import: host facts, resolve/ (candidates, lock, reasons).
"""

from __future__ import annotations

from typing import Sequence

from cudaresolve.host.facts import HostFacts
from cudaresolve.resolve.candidates import cuda_build, release_rejection
from cudaresolve.resolve.lock import Lock
from cudaresolve.resolve.reasons import CandidateRef, Rejection


def misfits(lock: Lock, hosts: Sequence[tuple[str, HostFacts]]) -> list[Rejection]:
    """Each locked package that does not run on one of `hosts`; [] when the lock fits. Each host is
    judged with its own machine (torch's aarch64 builds have their own arch lists)."""
    by_machine: dict[str, list[tuple[str, HostFacts]]] = {}
    for label, host in hosts:
        by_machine.setdefault(host.machine, []).append((label, host))
    found = []
    for package in lock.packages:
        if package.version is None:
            continue  # another tool's entry with no version: nothing to judge
        build = cuda_build(package.name, package.version)
        reason = next((r for machine, group in by_machine.items()
                       if (r := release_rejection(package.name, package.version, build, group, machine))), None)
        if reason:
            found.append(Rejection(CandidateRef(package.name, package.version), reason))
    return found
