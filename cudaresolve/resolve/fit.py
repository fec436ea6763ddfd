"""Does one build (a CUDA version and the device code it carries) run on every host? The resolver's
cheap early pruning, with the same pure functions the doctor's checks use (`compat.driver_verdict`,
`compat.can_run`), so a variant pruned here is one the judge would have refused. The answers are
evidence records (resolve/reasons.py); output/ words them.

May import: arch, compat, host facts, knowledge/ (components, toolkits), versions, resolve/reasons.py and causes.py.
"""

from __future__ import annotations

from typing import Iterable, Optional, Sequence

from cudaresolve.arch import PtxTarget, Target
from cudaresolve.compat import can_run, driver_verdict
from cudaresolve.host.facts import Driver, HostFacts
from cudaresolve.knowledge import components, toolkits
from cudaresolve.resolve.causes import FleetConflict, HostMajors
from cudaresolve.resolve.reasons import (
    DoesNotRun,
    DriverTooOld,
    MajorRefusal,
    MajorRejection,
    NoDeviceCode,
    SbsaOnJetson,
    ToolkitTargets,
)
from cudaresolve.versions import CudaVersion


def rejection(
    cuda: Optional[CudaVersion],
    sass: Sequence[str],
    ptx: Sequence[PtxTarget],
    hosts: Iterable[tuple[str, HostFacts]],
) -> Optional[DoesNotRun]:
    """Why the build cannot run on one of `hosts` ((label, facts) pairs); None when it runs on all.
    `cuda` None: no CUDA (a CPU build or a pure-Python package); empty `sass` and `ptx` mean the
    device code is unknown, which is not a reason to refuse."""
    hosts = list(hosts)
    for label, host in hosts:
        where = label if len(hosts) > 1 else None
        driver = host.driver
        if cuda is not None and (driver.release or driver.cuda):
            if driver_verdict(cuda, driver.release, driver.cuda) is None:
                return _too_old(cuda, driver, where)
        if not sass and not ptx:
            continue
        for number, gpu in enumerate(host.visible_gpus):
            verdict = can_run(gpu.compute_capability, sass, ptx, driver=driver.release)
            if not verdict.runs:
                index = gpu.index if gpu.index is not None else number
                return NoDeviceCode(
                    index, gpu.compute_capability, tuple(Target.parse(t) for t in sass),
                    tuple(Target.parse(t) for t in sorted({p.target for p in ptx})), where,
                )
    return None


def jetson_rejection(name: str, cuda: CudaVersion, hosts: Iterable[tuple[str, HostFacts]]) -> Optional[SbsaOnJetson]:
    """A CUDA build of `name` (built with `cuda`) whose aarch64 wheels are server-Arm (SBSA) builds,
    for a Jetson (tegra) host among `hosts`: Jetson runs its JetPack release's CUDA, not SBSA's."""
    hosts = list(hosts)
    if not components.sbsa_build(name):
        return None
    for label, host in hosts:
        if host.tegra:
            return SbsaOnJetson(cuda, label if len(hosts) > 1 else None)
    return None


def _too_old(cuda: CudaVersion, driver: Driver, host: Optional[str]) -> DriverTooOld:
    floor = toolkits.family_floor(cuda)
    return DriverTooOld(
        cuda=cuda,
        driver=driver.release,
        driver_cuda=driver.cuda,
        floor=floor,
        host=host,
    )


def environment_majors(hosts: Iterable[tuple[str, HostFacts]]) -> tuple[int, ...]:
    """The CUDA majors an environment may be built on for every host, newest first: the driver meets
    the major's floor and the major's newest toolkit can build for every GPU (CUDA 13 cannot for
    Pascal). Unknown drivers and GPUs refuse nothing."""
    hosts = list(hosts)
    return tuple(major for major in known_majors() if all(major_rejection(major, host) is None for _, host in hosts))


def major_rejections(hosts: Sequence[tuple[str, HostFacts]]) -> tuple[MajorRejection, ...]:
    """Each CUDA major some host cannot run, newest first, with the first host's reason: for --explain."""
    found = []
    for major in known_majors():
        for label, host in hosts:
            why = major_rejection(major, host, label if len(hosts) > 1 else None)
            if why:
                found.append(MajorRejection(major, why))
                break
    return tuple(found)


def known_majors() -> tuple[int, ...]:
    """The CUDA majors the toolkit table knows, newest first."""
    return tuple(sorted({t.major for t in toolkits.known()}, reverse=True))


def major_rejection(major: int, host: HostFacts, label: Optional[str] = None) -> Optional[MajorRefusal]:
    """Why an environment of CUDA `major` cannot run on `host` (called `label` in a fleet); None when it can."""
    driver = host.driver
    if (driver.release or driver.cuda) and driver_verdict(CudaVersion(major), driver.release, driver.cuda) is None:
        return _too_old(CudaVersion(major), driver, label)
    newest = [t for t in toolkits.known() if t.major == major and t.sass_targets][-1:]
    if not newest:
        return None
    for number, gpu in enumerate(host.visible_gpus):
        if not can_run(gpu.compute_capability, newest[0].sass_targets).runs:
            index = gpu.index if gpu.index is not None else number
            return ToolkitTargets(newest[0].version, index, gpu.compute_capability, label)
    return None


def fleet_conflict(hosts: Sequence[tuple[str, HostFacts]]) -> Optional[FleetConflict]:
    """When several hosts share no CUDA major: each host, the majors it runs and why not the others."""
    if len(hosts) < 2 or environment_majors(hosts):
        return None
    found = []
    for label, host in hosts:
        runs = tuple(m for m in known_majors() if major_rejection(m, host) is None)
        refused = tuple(MajorRejection(m, why) for m in known_majors() if (why := major_rejection(m, host)) is not None)
        found.append(HostMajors(label, runs, refused))
    return FleetConflict(tuple(found))
