"""The host-fit rules: each a pure function of a build's facts and a host (or its driver or GPU),
returning its verdict record or None when the rule does not refuse. The doctor's checks, the
resolver's pruning and `lock --check` all call these, so one rule gives one answer everywhere.
`label` is the host's name in a fleet (None for one host).

May import: arch, compat, versions, host facts, knowledge/ (advisories, components, package_floors,
toolkits, torch) and verdicts/records.
"""

from __future__ import annotations

from typing import Optional, Sequence

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from cudaresolve.arch import ComputeCapability, PtxTarget, Target
from cudaresolve.compat import can_run, driver_verdict
from cudaresolve.host.facts import Driver, HostFacts
from cudaresolve.knowledge import components, package_floors, toolkits, torch
from cudaresolve.knowledge.advisories import Advisory
from cudaresolve.verdicts.records import (
    BelowPackageFloor,
    CpuOnly,
    DriverTooOld,
    GpuRef,
    KnownBadRelease,
    MinorCompat,
    NoDeviceCode,
    SbsaOnJetson,
    ToolkitTargets,
)
from cudaresolve.versions import CudaVersion


def driver_too_old(cuda: CudaVersion, driver: Driver, label: Optional[str] = None) -> Optional[DriverTooOld]:
    """A driver that cannot run code built with `cuda`; a driver the host does not state refuses nothing."""
    if driver.release is None and driver.cuda is None:
        return None
    if driver_verdict(cuda, driver.release, driver.cuda) is not None:
        return None
    return DriverTooOld(cuda, driver.release, driver.cuda, toolkits.family_floor(cuda), label)


def minor_compat(cuda: CudaVersion, driver: Driver, label: Optional[str] = None) -> Optional[MinorCompat]:
    """A driver that runs code built with `cuda` only by minor-version compatibility."""
    if driver_verdict(cuda, driver.release, driver.cuda) != "minor-compat":
        return None
    return MinorCompat(cuda, driver.release, driver.cuda, label)


def no_device_code(
    capability: ComputeCapability, gpus: tuple[GpuRef, ...], sass: Sequence[str], ptx: Sequence[PtxTarget],
    driver: Driver, label: Optional[str] = None,
) -> Optional[NoDeviceCode]:
    """GPUs of `capability` none of the build's SASS or PTX runs on; an unknown device code (none of
    either) refuses nothing."""
    if (not sass and not ptx) or can_run(capability, sass, ptx, driver=driver.release).runs:
        return None
    return NoDeviceCode(capability, gpus, tuple(Target.parse(t) for t in sass),
                        tuple(Target.parse(t) for t in sorted({p.target for p in ptx})), label)


def gpus_of(host: HostFacts, capability: ComputeCapability) -> tuple[GpuRef, ...]:
    """The visible GPUs of `capability`, each by the index the host states, else its place among them."""
    return tuple(GpuRef(gpu.index if gpu.index is not None else number, gpu.name)
                 for number, gpu in enumerate(host.visible_gpus) if gpu.compute_capability == capability)


def capabilities(host: HostFacts) -> tuple[ComputeCapability, ...]:
    """The compute capabilities of the visible GPUs, in the order the host lists them."""
    return tuple(dict.fromkeys(gpu.compute_capability for gpu in host.visible_gpus))


def toolkit_targets(major: int, host: HostFacts, label: Optional[str] = None) -> Optional[ToolkitTargets]:
    """A GPU of `host` that the newest toolkit of CUDA `major` builds no code for (CUDA 13 for Pascal)."""
    newest = [t for t in toolkits.known() if t.major == major and t.sass_targets][-1:]
    if not newest:
        return None
    for number, gpu in enumerate(host.visible_gpus):
        if not can_run(gpu.compute_capability, newest[0].sass_targets).runs:
            index = gpu.index if gpu.index is not None else number
            return ToolkitTargets(newest[0].version, index, gpu.compute_capability, label)
    return None


def cpu_only_on_machine(machine: str, host: HostFacts) -> Optional[CpuOnly]:
    """torch's default build for `machine` whose files lack the member every CUDA build carries
    (checks/builds.py, the lock's wheel reader tell), for a host with a GPU or a driver: it never
    uses the GPU."""
    if not host.gpus and host.driver.release is None:
        return None
    return CpuOnly("", machine, torch.cuda_member())


def sbsa_on_jetson(name: str, cuda: CudaVersion, host: HostFacts, label: Optional[str] = None) -> Optional[SbsaOnJetson]:
    """A CUDA build of `name` whose aarch64 wheels are server-Arm (SBSA) builds, for a Jetson (tegra)
    host: Jetson runs its JetPack release's CUDA, not SBSA's."""
    if not host.tegra or not components.sbsa_build(name):
        return None
    return SbsaOnJetson(cuda, label)


def known_bad_release(
    advisory: Advisory, version: Version, cuda: Optional[CudaVersion], host: HostFacts,
) -> Optional[KnownBadRelease]:
    """The advisory, when its conditions on the build (`cuda`, variants) and the host (driver, GPU,
    platform) hold for a release that matches its `affects`."""
    minor = cuda if cuda is not None and cuda.minor is not None else None
    if advisory.cuda is not None and (minor is None or minor.as_release() not in SpecifierSet(advisory.cuda)):
        return None
    if advisory.variants:
        local = version.local or (f"cu{minor.major}{minor.minor}" if minor else None)
        if local not in advisory.variants:
            return None
    if advisory.driver is not None:
        if host.driver.release is None or host.driver.release.as_version() not in SpecifierSet(advisory.driver):
            return None
    if advisory.gpu is not None:
        spec = SpecifierSet(advisory.gpu)
        if not any(Version(str(g.compute_capability)) in spec for g in host.visible_gpus):
            return None
    if advisory.platform is not None and advisory.platform != host.system:
        return None
    return KnownBadRelease(advisory.id, advisory.symptom)


def below_package_floor(name: str, version: Version, driver: Driver, label: Optional[str] = None) -> Optional[BelowPackageFloor]:
    """A release whose package floor (data/package_floors.toml) is above the host's driver release;
    a host that states no release refuses nothing."""
    floor = package_floors.floor(name, version)
    if floor is None or driver.release is None or driver.release >= floor:
        return None
    return BelowPackageFloor(floor, driver.release, label)
