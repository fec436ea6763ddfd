"""Does one build (a CUDA version and the device code it carries) run on every host? The resolver's
cheap early pruning, with the rules the doctor's checks use (verdicts/rules.py), so a variant pruned
here is one the judge would have refused. The answers are verdicts; output/ words them.

May import: arch, host facts, knowledge/toolkits, versions, verdicts/, resolve/reasons.py and causes.py.
"""

from __future__ import annotations

from typing import Iterable, Optional, Sequence

from packaging.version import Version

from cudaresolve.arch import PtxTarget
from cudaresolve.host.facts import HostFacts
from cudaresolve.knowledge import toolkits
from cudaresolve.resolve.causes import FleetConflict, HostMajors
from cudaresolve.resolve.reasons import DoesNotRun, MajorRefusal, MajorRejection
from cudaresolve.verdicts.records import BelowPackageFloor, SbsaOnJetson
from cudaresolve.verdicts.rules import (
    below_package_floor,
    capabilities,
    driver_too_old,
    gpus_of,
    no_device_code,
    sbsa_on_jetson,
    toolkit_targets,
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
        too_old = driver_too_old(cuda, host.driver, where) if cuda is not None else None
        if too_old is not None:
            return too_old
        for capability in capabilities(host):
            missing = no_device_code(capability, gpus_of(host, capability), sass, ptx, host.driver, where)
            if missing is not None:
                return missing
    return None


def jetson_rejection(name: str, cuda: CudaVersion, hosts: Iterable[tuple[str, HostFacts]]) -> Optional[SbsaOnJetson]:
    """A CUDA build of `name` whose aarch64 wheels are server-Arm (SBSA) builds, for a Jetson (tegra)
    host among `hosts`."""
    hosts = list(hosts)
    return next((found for label, host in hosts
                 if (found := sbsa_on_jetson(name, cuda, host, label if len(hosts) > 1 else None))), None)


def floor_rejection(name: str, version: Version, hosts: Iterable[tuple[str, HostFacts]]) -> Optional[BelowPackageFloor]:
    """A release whose package floor is above the driver of a host among `hosts`."""
    hosts = list(hosts)
    return next((found for label, host in hosts
                 if (found := below_package_floor(name, version, host.driver, label if len(hosts) > 1 else None))), None)


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
    return driver_too_old(CudaVersion(major), host.driver, label) or toolkit_targets(major, host, label)


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
