"""Which fix to suggest: a torch variant this host runs, a release of the wheel-facts table that runs
here, the wheel or conda package that provides a library, a per-major build the driver runs, a
toolkit that still targets a GPU. Each returns a value of checks/fixes.py (None: nothing to name).

May import: checks/builds, dependencies, releases and fixes, compat, env/, host/ and knowledge/.
"""

from __future__ import annotations

import functools
from typing import Callable, Optional

from packaging.requirements import Requirement
from packaging.utils import NormalizedName
from packaging.version import Version

from cudaresolve.arch import ComputeCapability, Target
from cudaresolve.checks import releases
from cudaresolve.checks.builds import Build, CudaBuild, framework_build
from cudaresolve.checks.dependencies import pulled_in
from cudaresolve.checks.fixes import (
    AlsoProvidedBy,
    BuildLibraries,
    BuildWithCuda,
    CondaInstall,
    CondaSpec,
    CondaUpdate,
    DriverCannotRun,
    Explained,
    Fix,
    NewerReleaseNeeded,
    NewestCudaForArch,
    NewestOwnRuntime,
    NewestThatRuns,
    NoKnownRelease,
    OlderReleaseMayCarry,
    PicksConda,
    PipInstall,
    PipUninstall,
    Steps,
    TakeRoute,
    TorchVariant,
    WheelsOfMajors,
)
from cudaresolve.compat import can_run, driver_verdict
from cudaresolve.env.distributions import Distribution
from cudaresolve.env.environment import Environment
from cudaresolve.host.facts import HostFacts
from cudaresolve.knowledge import components, own_runtime, toolkits, torch
from cudaresolve.knowledge.wheel_facts import Wheel
from cudaresolve.versions import CudaVersion


def driver_runs(cuda: CudaVersion, host: HostFacts) -> bool:
    """Whether the host's driver runs code built with `cuda` (natively or by minor-version
    compatibility); True when the driver is unknown, so a fix is not ruled out for lack of facts."""
    driver = host.driver
    return not (driver.release or driver.cuda) or driver_verdict(cuda, driver.release, driver.cuda) is not None


def torch_variant_fix(
    dist: Optional[Distribution], host: HostFacts, env: Optional[Environment] = None, major: Optional[int] = None,
) -> Optional[Fix]:
    """The newest variant of the installed torch release that this driver and every visible GPU can run
    (of CUDA `major` when given), taking along the installed family members whose builds follow
    torch's variant (data/torch.toml's labelled family). For such a member (torchvision), torch's
    variant fix too: its build is the one that comes with torch's."""
    head = torch.distribution()
    if dist is not None and dist.name != head and env is not None and dist.name in torch.labelled_family():
        dist = env.distribution(head)
    if dist is None or dist.name != head:
        return None
    public = dist.version.public
    release = torch.release(public)
    if release is None:
        return None
    driver = host.driver
    for variant in reversed(release.variants):
        if public not in variant.versions or variant.arch_list_for(host.machine) is None:
            continue
        if major is not None and variant.cuda.major != major:
            continue
        if not driver_runs(variant.cuda, host):
            continue
        sass, ptx = variant.sass(host.machine), variant.ptx(host.machine)
        if all(can_run(gpu.compute_capability, sass, ptx, driver.release).runs for gpu in host.visible_gpus):
            fix = TorchVariant(Version(public), variant.name, torch.index_path(variant.name), _companions(env))
            return _replacing(env, fix, variant.cuda.major)
    return None


def _replacing(env: Optional[Environment], fix: TorchVariant, major: int) -> Fix:
    """The variant, after uninstalling the NVIDIA wheels of another CUDA major that torch and its
    companions pull in and nothing else installed requires: pip leaves them in place (nvidia-cublas
    13 beside nvidia-cublas-cu12), and a driver that cannot run them still fails them."""
    if env is None:
        return fix
    replaced = list(other_major_wheels(env, {torch.distribution(), *(name for name, _ in fix.companions)}, major))
    if not replaced:
        return fix
    uninstall = Explained(PipUninstall(tuple(replaced)), WheelsOfMajors(releases.majors_of(env, replaced)))
    restored = _restored(env, set(replaced))
    return Steps((uninstall, fix, *([restored] if restored is not None else [])))


def other_major_wheels(env: Environment, heads: set[str], major: int) -> tuple[NormalizedName, ...]:
    """The NVIDIA wheels of another CUDA major than `major` that `heads` pull in and nothing else
    installed requires: what a move of `heads` to CUDA `major` leaves behind, pip keeping them
    (nvidia-cufft beside nvidia-cufft-cu12 after cuda-toolkit 13 is replaced by 12)."""
    pulled = set().union(*(pulled_in(env, name) for name in heads)) - heads
    elsewhere = set().union(*(env.requires_names(d) for d in env.distributions if d.name not in pulled | heads))
    replaced = []
    for name in sorted(pulled - elsewhere):
        dist = env.distribution(name)
        rows = components.for_dist(name, str(dist.version)) if dist is not None else ()
        if rows and rows[0].cuda_major != major:
            replaced.append(NormalizedName(name))
    return tuple(replaced)


def _restored(env: Environment, uninstalled: set[str]) -> Optional[Fix]:
    """Uninstalling a wheel deletes the files it shares with another owner that stays (nvidia-cudnn-cu13
    and -cu12 both install nvidia/cudnn/lib/libcudnn.so.9), and pip, which counts that owner as
    installed, does not put them back: reinstall each such owner over what the uninstall leaves."""
    owners = sorted({claim.distribution for shared in env.shared_files if uninstalled & set(shared.owners)
                     for claim in shared.claims if claim.distribution not in uninstalled})
    kept = [dist for dist in (env.distribution(name) for name in owners) if dist is not None]
    if not kept:
        return None
    return PipInstall(tuple(Requirement(f"{dist.name}=={dist.version}") for dist in kept),
                      options=("--force-reinstall", "--no-deps"))


def _companions(env: Optional[Environment]) -> tuple[tuple[NormalizedName, Version], ...]:
    """The installed labelled family members besides torch, at their public releases (CPU-only builds
    stay as they are)."""
    found = []
    for name in torch.labelled_family():
        member = env.distribution(name) if env is not None and name != torch.distribution() else None
        if member is not None and not torch.cpu_only(name, member.version):
            found.append((NormalizedName(name), Version(member.version.public)))
    return tuple(found)


def arch_fix(
    dist: Optional[Distribution], cc: ComputeCapability, host: HostFacts, build: Optional[CudaBuild] = None,
    runs: Optional[Callable[[Wheel], bool]] = None, install: Optional[Callable[[Wheel], Fix]] = None,
    env: Optional[Environment] = None,
) -> Optional[Fix]:
    """Name a variant or release that runs on the host's GPUs with this driver, where the tables know
    one; never a description the installed build already meets (cuDNN built with CUDA 12 lacking
    sm_61 is not fixed by "a build made with CUDA <= 12.9", but by an older release that carries it).
    `runs` judges a release of the wheel-facts table as the check judges the installed files;
    `install` says how to install the release chosen (with its extras and companion wheels)."""
    variant = torch_variant_fix(dist, host, env)
    if variant:
        return variant
    own = own_runtime_fix(dist, host, tuple(sorted({gpu.compute_capability for gpu in host.visible_gpus}) or {cc})) if dist else None
    if own is not None:
        return own
    if dist is not None and runs is not None and install is not None and releases.known([dist.name], host.machine):
        ccs = tuple(sorted({gpu.compute_capability for gpu in host.visible_gpus}))
        chosen = releases.newest([dist.name], runs, host.machine, installed=dist.version)
        if chosen is None:
            return NoKnownRelease((dist.name,), runs_on=ccs)
        return Explained(install(chosen), NewestThatRuns(ccs))
    driver = host.driver
    targeting = [t for t in toolkits.known() if any(Target.parse(s).runs_on(cc) for s in t.sass_targets)]
    if build is not None and dist is not None and dist.kind != "conda" and _before_first(build.cuda, targeting):
        # built before any CUDA targeted the GPU (sm_120 before 12.8): no older release can carry it
        return NewerReleaseNeeded(dist.name, dist.version, build.cuda, cc, targeting[0].version)
    supporting = [t for t in targeting if driver_runs(t.version, host)]
    if not supporting:
        return None
    newest = supporting[-1].version
    driver_known = bool(driver.release or driver.cuda)
    if dist is not None and dist.kind == "conda":
        # conda's CUDA packages follow the prefix's cuda-version: moving it moves them all together
        return Explained(CondaInstall((CondaSpec(components.cuda_version_package(), "<=", newest),)),
                         NewestCudaForArch(cc, driver_known, dist.name))
    if build is not None and build.cuda.major <= newest.major and dist is not None:
        return OlderReleaseMayCarry(dist.name, dist.version, build.cuda, cc)
    return BuildWithCuda(newest, cc, driver_known)


def majors_targeting(ccs: tuple[ComputeCapability, ...]) -> frozenset[int]:
    """The CUDA majors some toolkit of which targets every GPU of `ccs` (data/toolkits.toml): no
    CUDA 13 release builds code for a Pascal GPU, whichever package it is."""
    return frozenset(t.version.major for t in toolkits.known()
                     if all(any(Target.parse(s).runs_on(cc) for s in t.sass_targets) for cc in ccs))


def newest_targeting(ccs: tuple[ComputeCapability, ...], host: HostFacts) -> Optional[CudaVersion]:
    """The newest CUDA whose toolkit targets every GPU of `ccs` and the driver runs."""
    found = [t.version for t in toolkits.known() if driver_runs(t.version, host)
             and all(any(Target.parse(s).runs_on(cc) for s in t.sass_targets) for cc in ccs)]
    return found[-1] if found else None


def _before_first(cuda: CudaVersion, targeting: list[toolkits.Toolkit]) -> bool:
    """Whether a build with `cuda` predates the first toolkit of `targeting` (those that target a GPU):
    only when that toolkit is not the oldest the tables know (an older one may have targeted it too).
    A build of that toolkit's major whose minor is not known counts as before it: the older releases
    of that major were built with older minors still."""
    if not targeting or targeting[0] == toolkits.known()[0]:
        return False
    first = targeting[0].version
    return cuda.major <= first.major if cuda.minor is None else cuda < first


def own_runtime_fix(dist: Distribution, host: HostFacts, ccs: tuple[ComputeCapability, ...] = ()) -> Optional[Fix]:
    """For a package that carries its own CUDA runtime (warp-lang, ale-py), the newest release of
    data/own_runtime.toml other than the installed one whose runtime the driver runs (natively,
    else by minor-version compatibility) and whose runtime-carrying files' device code runs on
    `ccs`; that no release does; None when the table holds no release of it."""
    rows = [r for r in own_runtime.releases(dist.name, host.machine)
            if Version(r.version) != dist.version and r.cuda is not None]
    if not components.carries_own_runtime(dist.name) or not rows:
        return None
    driver = host.driver

    def runs(row: own_runtime.Release, natively: bool) -> bool:
        assert row.cuda is not None  # rows without a runtime are left out above
        verdict = driver_verdict(row.cuda, driver.release, driver.cuda) if driver.release or driver.cuda else "native"
        return (verdict == "native" if natively else verdict is not None) and all(
            can_run(cc, file.sass, file.ptx_targets, driver.release).runs for cc in ccs for file in row.file)

    chosen = next(((r, natively) for natively in (True, False) for r in rows if runs(r, natively)), None)
    if chosen is None:
        return NoKnownRelease((dist.name,), runs_on=ccs)
    row, natively = chosen
    assert row.cuda is not None
    return Explained(PipInstall((Requirement(f"{dist.name}=={row.version}"),)),
                     NewestOwnRuntime(row.cuda, driver.release, ccs, compatibility=not natively))


def provider_dists(soname: str, major: Optional[int]) -> list[str]:
    """The wheels that install `soname`, for one CUDA major (all majors when None)."""
    rows = components.for_soname(soname)
    return sorted({r.dist for r in rows if major is None or r.cuda_major == major})


def provider_requirement(
    soname: str, env: Environment, consumer_dist: Optional[str], minimum: Optional[CudaVersion],
    consumer_file: Optional[str] = None,
) -> Optional[tuple[Requirement, list[str]]]:
    """(the wheel that provides soname, at least `minimum`; the other wheels that also provide it),
    choosing the consumer's CUDA major: the minimum's, its framework build's, else the one the
    consumer file's other needs name (onnxruntime-gpu 1.18's provider needs libcudart.so.11.0 and
    libcurand.so.10: nvidia-curand-cu11, not CUDA 13's nvidia-curand); and the release range whose
    wheels carry that soname (libcudnn.so.8: nvidia-cudnn-cu11<9). None when no wheel provides it."""
    major = None
    dist = env.distribution(consumer_dist) if consumer_dist else None
    build = framework_build(dist, env.loader.machine) if dist else None
    if minimum:
        major = minimum.major
    elif build is not None:
        major = build.cuda.major
    elif consumer_file is not None:
        major = _needed_major(env, consumer_file)
    providers = provider_dists(soname, major)
    if not providers:
        return None
    ranges = {r.dist_versions for r in components.for_soname(soname)
              if r.dist == providers[0] and (major is None or r.cuda_major == major) and r.dist_versions}
    # a range only when it bounds the newest release out (libcudnn.so.8 is in nvidia-cudnn-cu11 < 9 only)
    specifier = f">={minimum}" if minimum else next((r for r in ranges if "<" in r and len(ranges) == 1), "")
    return Requirement(f"{providers[0]}{specifier}"), providers[1:]


def _needed_major(env: Environment, path: str) -> Optional[int]:
    """The one CUDA major of the CUDA-versioned libraries (cudart, nvrtc, ...) the file needs; None
    when it needs none, or several."""
    elf = env.elf_file(path)
    if elf is None or elf.facts is None:
        return None
    return _one_major(elf.facts.needed, id(components.load()))


@functools.lru_cache(maxsize=64)
def _one_major(needed: tuple[str, ...], tables: int) -> Optional[int]:
    """`_needed_major` of one file's DT_NEEDED list, kept per table load (`tables`: its identity):
    it is asked once per library the file misses, and a module can miss thousands."""
    majors = {row.cuda_major for soname in needed for row in components.for_soname(soname)
              if components.versioned_by_cuda(row.name)}
    return majors.pop() if len(majors) == 1 else None


def provider_fix(
    soname: str, env: Environment, consumer_dist: Optional[str], minimum: Optional[CudaVersion], consumer_file: Optional[str] = None
) -> Optional[Fix]:
    """`pip install` of the wheel that provides soname (at least `minimum`), naming the other wheels that provide it too."""
    found = provider_requirement(soname, env, consumer_dist, minimum, consumer_file)
    if found is None:
        return None
    requirement, others = found
    fix = PipInstall((requirement,))
    return Explained(fix, AlsoProvidedBy(tuple(others))) if others else fix


def conda_fix(env: Environment, soname: str, provider_owner: Optional[str], minimum: Optional[Version]) -> Optional[Fix]:
    """For a library a conda package provides: the conda command that replaces it (the package from
    data/components.toml for the needed major, else the owner's own conda name), with the prefix's
    cuda-version moved along when it pins an older CUDA; None when conda did not install it."""
    owner = env.distribution(provider_owner) if provider_owner else None
    if owner is None or owner.conda is None:
        return None
    major = minimum.release[0] if minimum else None
    package = next(iter(components.conda_packages(soname, major)), owner.conda.name)
    if minimum is None:
        return Explained(CondaUpdate(package), PicksConda(soname))
    specs = [CondaSpec(package, ">=", minimum)]
    pinned = env.conda.record(components.cuda_version_package()) if env.conda else None
    cuda = env.conda.cuda() if env.conda else None
    if pinned is not None and (cuda is None or cuda.as_release() < minimum):  # one it cannot read: move it too
        specs.append(CondaSpec(pinned.name, ">=", minimum))
    return CondaInstall(tuple(specs))


def build_fix(dist: str, build: Build, host: HostFacts) -> Optional[Fix]:
    """For a library missing from the build a package imports (cuda-cccl's cu13/ without CUDA 13
    wheels): the extra that installs that build's libraries, or, when the driver cannot run that
    CUDA major, the route to a build it runs."""
    row = components.alternative_builds(dist)
    if row is None or build.cuda_major is None:
        return None
    extra = row.extras.get(build.directory)
    if driver_runs(CudaVersion(build.cuda_major), host) and extra:
        return Explained(PipInstall((Requirement(f"{dist}[{extra}]"),)), BuildLibraries(build.cuda_major, build.directory))
    route = other_route(dist, build.cuda_major, host)
    return Explained(route, DriverCannotRun(build.cuda_major)) if route else None


def other_route(dist: str, cuda_major: int, host: HostFacts) -> Optional[Fix]:
    """For a package shipping one build per CUDA major, the newest other build the driver runs, as
    the requirements that select it and install its libraries ("take the CUDA 12 route: ...")."""
    row = components.alternative_builds(dist)
    if row is None:
        return None
    for directory, major in sorted(row.directories.items(), key=lambda item: -item[1]):
        if major != cuda_major and driver_runs(CudaVersion(major), host) and row.extras.get(directory):
            chooser: tuple[Requirement, ...] = ((Requirement(f"{row.selected_by}<{cuda_major}") if major < cuda_major
                        else Requirement(f"{row.selected_by}>={major}")),) if row.selected_by else ()
            return Explained(PipInstall(chooser + (Requirement(f"{dist}[{row.extras[directory]}]"),)), TakeRoute(major))
    return None
