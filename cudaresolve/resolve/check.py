"""`lock --check`: does a lock still fit these hosts? The lock's own rules, with nothing resolved or
rewritten: each locked release by the verdicts the resolver prunes with (`release_rejection`: its
package floor, an SBSA build on a Jetson, the driver floor, arch coverage of every GPU), each CUDA
major of the lock by the rule that chooses the environment's major (CUDA 13 builds no code for
Pascal), and the locked distributions by the doctor's checks the lock judges its plan with
(advisories, with their driver conditions): a driver downgrade
or a new GPU in the fleet shows before an install does. What a host does not state (no driver, no
GPU) is a check skipped, said, never a pass.
A build the tables do not give (onnxruntime-gpu, warp-lang) is read from the locked wheel's own
binaries, as the lock's plan reads it (resolve/planned.py): its table row, else the wheel itself
through `read` (cached by sha256); no release is judged by another's facts.

May import: binary/facts, checks/ (the judge; builds: a wheel's CUDA from its files), env/ (the
planned distributions), host facts, resolve/ (candidates, fit, lock, planned, reasons, resolver).
"""

from __future__ import annotations

import enum
import os
from typing import Callable, Optional, Sequence

from cudaresolve.binary.facts import BinaryFacts
from cudaresolve.binary.loader import LoaderEnv
from cudaresolve.checks import judge
from cudaresolve.checks.builds import CudaBuild, wheel_build
from cudaresolve.env.distributions import Distribution
from cudaresolve.env.environment import Environment
from cudaresolve.env.interpreter import Target
from cudaresolve.host.facts import HostFacts
from cudaresolve.resolve.candidates import cuda_build, release_rejection, wheel_machine
from cudaresolve.resolve.fit import major_rejection
from cudaresolve.resolve.lock import Lock, LockedPackage, LockedWheel
from cudaresolve.resolve.planned import PLANNED, judged_by_binaries
from cudaresolve.resolve.reasons import CandidateRef, MajorRejection, Rejection
from cudaresolve.resolve.resolver import allowed, judged, refuses

# The ELF members of a locked wheel of a package: its table row's, else read from the wheel (an
# error when they cannot be had, as in the lock: --offline and not cached, a damaged wheel)
WheelReader = Callable[[LockedPackage, LockedWheel], tuple[BinaryFacts, ...]]


def misfits(
    lock: Lock, hosts: Sequence[tuple[str, HostFacts]], read: Optional[WheelReader] = None, advisories: Sequence[str] = (),
) -> list[Rejection]:
    """Each locked package that does not run on one of `hosts`; [] when the lock fits. Each host is
    judged with its own machine (torch's aarch64 builds have their own arch lists); the known-bad
    releases `advisories` names are accepted, as `lock --allow-advisory` accepts them."""
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
    return found + _judged_misfits(lock, hosts, {r.candidate.name for r in found}, advisories)


def major_misfits(lock: Lock, hosts: Sequence[tuple[str, HostFacts]]) -> list[MajorRejection]:
    """Each CUDA major the lock's builds are of that one of `hosts` cannot run, with the first such
    host's reason: the rule `lock` chooses the environment's major by (resolve/fit.py)."""
    majors = sorted({b.cuda.major for p in lock.packages if p.version is not None
                     and (b := cuda_build(p.name, p.version)) is not None}, reverse=True)
    found = []
    for major in majors:
        why = next((r for label, host in hosts if (r := major_rejection(major, host, label if len(hosts) > 1 else None))), None)
        if why is not None:
            found.append(MajorRejection(major, why))
    return found


class Skipped(enum.Enum):
    """A check `lock --check` could not make for a host that does not state what it judges."""

    DRIVER = "driver"  # no driver release or CUDA version: the driver floors
    GPUS = "gpus"  # no GPU: the device code


def skipped(host: HostFacts) -> tuple[Skipped, ...]:
    """The checks skipped for `host`, as the doctor skips them for a host it knows nothing of."""
    found = []
    if host.driver.release is None and host.driver.cuda is None:
        found.append(Skipped.DRIVER)
    if not host.visible_gpus:
        found.append(Skipped.GPUS)
    return tuple(found)


_SITE = "/planned/site-packages"  # where the judged distributions are said to be: no file is read there


def _judged_misfits(
    lock: Lock, hosts: Sequence[tuple[str, HostFacts]], known: set[str], advisories: Sequence[str],
) -> list[Rejection]:
    """The doctor's refusals (errors, advisories) of the locked distributions on each host, as the
    lock judges its plan, those a host's driver or GPUs bring; judged by name and version, as their
    files are not installed (the checks of files ran when the lock was made and do not depend on the
    host). One per distribution not already in `known`."""
    distributions = tuple(sorted(
        (Distribution(p.name, p.version, (), PLANNED, os.path.join(_SITE, f"{p.name.replace('-', '_')}-{p.version}.dist-info"), ())
         for p in lock.packages if p.version is not None),
        key=lambda d: (d.name, d.dist_info),
    ))
    found: dict[str, Rejection] = {}
    for machine in dict.fromkeys(host.machine for _, host in hosts):
        environment = Environment(Target(site_packages=(_SITE,)), distributions, (), loader=LoaderEnv(machine=machine))
        # what the checks say with no driver and no GPU known is not the host's doing: the lock kept it
        anywhere = {(f.check, f.subject, f.problem) for f in judge(environment, HostFacts("Linux", machine)).findings}
        for _, host in hosts:
            if host.machine != machine:
                continue
            for finding in judge(environment, host).findings:
                dist = finding.subject.distribution
                if (refuses(finding) and not allowed(finding, advisories) and (finding.check, finding.subject, finding.problem) not in anywhere
                        and dist and dist not in known and dist not in found):
                    version = next(d.version for d in distributions if d.name == dist)
                    found[dist] = Rejection(CandidateRef(dist, version), judged(finding))
    return list(found.values())


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
