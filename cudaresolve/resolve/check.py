"""`lock --check`: does a lock still fit these hosts? Each locked build is judged by the same early
pruning the resolver used (driver floor, arch coverage of every GPU), with nothing resolved or
rewritten: a driver downgrade or a new GPU in the fleet shows before an install does.
A build the tables do not give (onnxruntime-gpu, warp-lang) is read from the locked wheel's own
binaries, as the lock's plan reads it (resolve/planned.py): its table row, else the wheel itself
through `read` (cached by sha256); no release is judged by another's facts.

May import: binary/facts, checks/builds (a wheel's CUDA from its files), host facts, resolve/
(candidates, lock, planned, reasons).
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

from cudaresolve.binary.facts import BinaryFacts
from cudaresolve.checks.builds import CudaBuild, wheel_build
from cudaresolve.host.facts import HostFacts
from cudaresolve.resolve.candidates import cuda_build, release_rejection, wheel_machine
from cudaresolve.resolve.lock import Lock, LockedPackage, LockedWheel
from cudaresolve.resolve.planned import judged_by_binaries
from cudaresolve.resolve.reasons import CandidateRef, Rejection

# The ELF members of a locked wheel of a package: its table row's, else read from the wheel (an
# error when they cannot be had, as in the lock: --offline and not cached, a damaged wheel)
WheelReader = Callable[[LockedPackage, LockedWheel], tuple[BinaryFacts, ...]]


def misfits(lock: Lock, hosts: Sequence[tuple[str, HostFacts]], read: Optional[WheelReader] = None) -> list[Rejection]:
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
                       if (r := release_rejection(package.name, package.version,
                                                  build or _own_build(package, machine, read), group, machine))), None)
        if reason:
            found.append(Rejection(CandidateRef(package.name, package.version), reason))
    return found


def _own_build(package: LockedPackage, machine: str, read: Optional[WheelReader]) -> Optional[CudaBuild]:
    """The CUDA of a locked release the tables do not give, from its `machine` wheel's own files:
    only for wheels the lock's plan reads too (planned.judged_by_binaries), so both judge alike."""
    assert package.version is not None
    if read is None:
        return None
    for wheel in package.wheels:
        if wheel_machine(wheel.filename) not in (machine, None) or not judged_by_binaries(
                package.name, package.version, wheel.filename, machine):
            continue
        return wheel_build(package.name, str(package.version), read(package, wheel))
    return None
