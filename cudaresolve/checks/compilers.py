"""run-time-compiler: a package that compiles its kernels at run time (data/compiler_users.toml)
with the NVRTC, NVVM or nvJitLink release the environment holds (data/compilers.toml).

Two facts of the compiler's release decide whether its kernels load, whatever the package's own
binaries say: its arch list (NVRTC 13 has no target below 7.5: `-arch=sm_61` is
NVRTC_ERROR_INVALID_OPTION on a GTX 1080), and, for a package that hands PTX to the driver, the PTX
ISA it writes (NVRTC 12.9 writes ISA 8.8; a driver reporting CUDA 12.4 JIT-compiles up to 8.4:
CUDA_ERROR_UNSUPPORTED_PTX_VERSION). Minor-version compatibility does not cover PTX. The same
rule judges an installed environment and a planned one: a planned wheel brings its name and
version, which is all the rule reads.

A package that hands the compiler's output to nvJitLink (compiler_users.toml [links]: cuda-core's
Linker, cuda-cccl, numba-cuda) also needs an nvJitLink that reads it: PTX up to the ISA nvJitLink
links (nvJitLink 12.4 refuses NVRTC 12.9's 8.8: NVJITLINK_ERROR_PTX_COMPILE), LTO-IR of a CUDA
version no newer than nvJitLink's within the major. The error's subject is the compiler's wheel (a
lock moves it below the nvJitLink a request pins); its fix names both ways out.

The compiler a package uses is the installed wheel of its kind (nvidia-cuda-nvrtc-cu12,
nvidia-cuda-nvrtc, nvidia-nvjitlink, ...) of the package's CUDA major: the build its selector picks
(cuda-cccl by cuda-bindings), else its known CUDA build, else the one major of such wheels
installed. Not judged: a compiler linked into the package (warp-lang: `linked = "static"`), a
release data/compilers.toml does not hold (no guess from a neighbour), a package whose major is
not known, a compiler not installed (the loader's checks say that).

May import: checks/ (builds, findings, suggest), env/, host/, knowledge/ and verdicts/rules; the findings are
values, output/ words them.
"""

from __future__ import annotations

from typing import Optional

from packaging.requirements import Requirement
from packaging.version import Version

from cudaresolve.arch import ComputeCapability
from cudaresolve.checks import evidence as e
from cudaresolve.checks import fixes as f
from cudaresolve.checks.builds import CudaBuild, component_builds
from cudaresolve.checks.findings import Check, Finding, Severity
from cudaresolve.checks.problems import CompilerCannotTargetGpu, CompilerPtxTooNew, LinkerCannotRead
from cudaresolve.checks.subjects import subject
from cudaresolve.checks.suggest import other_route
from cudaresolve.env.distributions import Distribution
from cudaresolve.env.environment import Environment
from cudaresolve.host.facts import HostFacts
from cudaresolve.knowledge import compiler_users, compilers, components, toolkits
from cudaresolve.knowledge.compiler_users import Link
from cudaresolve.knowledge.compilers import NvJitLinkRelease, Release
from cudaresolve.verdicts.rules import gpus_of
from cudaresolve.versions import CudaVersion


def check_run_time_compilers(env: Environment, builds: tuple[CudaBuild, ...], host: HostFacts) -> list[Finding]:
    """One error per package, compiler release and GPU it cannot target; one per package and
    compiler release whose PTX the driver cannot load. The subject is the compiler's wheel: that is
    what a fix (or the lock) changes first. A linker (nvJitLink) that cannot target the GPU either
    is no second error when the compiler's fix (the package's other CUDA route) replaces it too."""
    ccs = sorted({gpu.compute_capability for gpu in host.visible_gpus})
    driver_isa = _driver_ptx_isa(host)
    built = {build.dist: build for build in builds}
    findings: list[Finding] = []
    for dist in env.distributions:
        if dist.kind == "conda":
            continue
        usage = compiler_users.usage(dist.name, str(dist.version))
        if usage is None or usage.linked != "dynamic":
            continue
        major = _major(env, dist, built.get(dist.name), usage.compiler)
        if major is None:
            continue
        compiler = _installed(env, usage.compiler, major)
        linker = _installed(env, "nvjitlink", major) if usage.sass_by in ("nvjitlink", "nvjitlink-else-driver") else None
        if usage.sass_by == "nvjitlink-else-driver" and linker is not None and not compilers.exports(
                "nvjitlink", "nvJitLinkVersion", linker[1].version):
            linker = None  # cuda.core takes the driver's linker then
        to_driver = usage.sass_by == "driver" or (usage.sass_by == "nvjitlink-else-driver" and linker is None)
        makers = [(usage.compiler, compiler)] + ([("nvjitlink", linker)] if linker is not None else [])
        fixed: list[tuple[ComputeCapability, f.Fix]] = []  # one cause, one finding: the linker's fix is the compiler's
        for kind, found in makers:
            if found is None:
                continue
            wheel, release = found
            for cc in ccs:
                if _targets(release, cc, to_driver):
                    continue
                fix = _arch_fix(env, dist, kind, wheel, major, ccs, to_driver, host)
                if (cc, fix) in fixed:
                    continue
                fixed.append((cc, fix))
                findings.append(Finding(
                    Check.RUN_TIME_COMPILER, Severity.ERROR, subject(env, wheel.name),
                    CompilerCannotTargetGpu(dist.name, dist.version, kind, release.dist, release.version,
                                            cc, gpus_of(host, cc), release.archs[0], release.archs[-1]),
                    (e.Said(usage.source, "data/compiler_users.toml"),),
                    fix,
                ))
        if compiler is not None and to_driver and driver_isa is not None:
            wheel, release = compiler
            isa = _ptx_isa(release)
            if isa is not None and Version(isa) > Version(driver_isa):
                findings.append(Finding(
                    Check.RUN_TIME_COMPILER, Severity.ERROR, subject(env, wheel.name),
                    CompilerPtxTooNew(dist.name, dist.version, usage.compiler, release.dist, release.version, isa,
                                      host.driver.release, _driver_cuda(host), driver_isa),
                    (e.Said(usage.source, "data/compiler_users.toml"), e.HostDriver(host.driver.release, host.driver.cuda)),
                    _ptx_fix(usage.compiler, wheel, isa, driver_isa, ccs),
                ))
    return findings + _pairs(env, built, ccs)


def _pairs(env: Environment, built: dict[str, CudaBuild], ccs: list[ComputeCapability]) -> list[Finding]:
    """One error per package and compiler release whose output the nvJitLink beside it cannot read."""
    findings: list[Finding] = []
    for dist in env.distributions:
        if dist.kind == "conda":
            continue
        for link in compiler_users.links(dist.name, str(dist.version)):
            major = _major(env, dist, built.get(dist.name), link.producer)
            producer = _installed(env, link.producer, major) if major is not None else None
            linker = _installed(env, link.linker, major) if major is not None else None
            if producer is None or linker is None:
                continue
            (wheel, release), (linker_wheel, linker_release) = producer, linker
            if not isinstance(linker_release, NvJitLinkRelease):
                continue
            if link.when == "exports-nvJitLinkVersion" and not compilers.exports(
                    "nvjitlink", "nvJitLinkVersion", linker_release.version):
                continue  # the driver's cuLink* links then
            isa, cuda = _ptx_isa(release), _cuda(release)
            if isa is None:
                continue
            unread = _unread(link, isa, cuda, linker_release)
            if not unread:
                continue
            findings.append(Finding(
                Check.RUN_TIME_COMPILER, Severity.ERROR, subject(env, wheel.name),
                LinkerCannotRead(dist.name, dist.version, link.producer, release.dist, release.version,
                                 linker_release.dist, linker_release.version, unread, isa, linker_release.max_ptx_isa,
                                 cuda, linker_release.cuda),
                (e.Said(link.source, "data/compiler_users.toml"),),
                _pair_fix(link, wheel, release, linker_wheel, linker_release, ccs),
            ))
    return findings


def _cuda(release: Release) -> CudaVersion:
    """The compiler release's CUDA version: NVRTC's nvrtcVersion, else (NVVM) its wheel's MAJOR.MINOR."""
    cuda: Optional[CudaVersion] = getattr(release, "cuda", None)
    if cuda is not None:
        return cuda
    major, minor = Version(release.version).release[:2]
    return CudaVersion(major, minor)


def _unread(link: Link, isa: str, cuda: CudaVersion, linker: NvJitLinkRelease) -> tuple[str, ...]:
    """What of the producer's output (`link.inputs`) the nvJitLink release cannot read."""
    cannot = {"ptx": Version(isa) > Version(linker.max_ptx_isa),
              "ltoir": cuda.major != linker.cuda.major or _minor(cuda) > _minor(linker.cuda)}
    return tuple(kind for kind in link.inputs if cannot[kind])


def _minor(cuda: CudaVersion) -> tuple[int, int]:
    return (cuda.major, cuda.minor or 0)


def _pair_fix(link: Link, wheel: Distribution, release: Release, linker_wheel: Distribution,
              linker_release: NvJitLinkRelease, ccs: list[ComputeCapability]) -> f.Fix:
    """The nvJitLink releases (same wheel) that read the compiler's output, from the oldest's CUDA
    minor; or the newest compiler release (same wheel, every GPU targeted) the installed nvJitLink
    reads; any of the two the table holds."""
    isa, cuda = _ptx_isa(release), _cuda(release)
    assert isa is not None
    same = [r for r in compilers.releases(link.linker) if r.dist == linker_wheel.name and isinstance(r, NvJitLinkRelease)]
    reads = [r for r in same if not _unread(link, isa, cuda, r)]
    options: list[f.Fix] = []
    if reads:
        floor = reads[0]
        minor = f"{floor.cuda.major}.{floor.cuda.minor or 0}"
        since_minor = [r for r in same if Version(r.version) >= Version(minor)]
        spec = f">={minor}" if all(r in reads for r in since_minor) else f">={floor.version}"
        if not linker_wheel.name.endswith(f"-cu{floor.cuda.major}"):
            spec += f",<{floor.cuda.major + 1}"
        options.append(f.Explained(f.PipInstall((Requirement(f"{linker_wheel.name}{spec}"),)),
                                   f.PairsWith(link.producer, release.version)))
    read = [r for r in compilers.releases(link.producer)
            if r.dist == wheel.name and (r_isa := _ptx_isa(r)) is not None
            and not _unread(link, r_isa, _cuda(r), linker_release) and all(_targets(r, cc, False) for cc in ccs)]
    if read:
        options.append(f.Explained(f.PipInstall((Requirement(f"{wheel.name}=={read[-1].version}"),)),
                                   f.PairsWith(link.linker, linker_release.version)))
    if not options:
        return f.NoKnownRelease((linker_wheel.name, wheel.name))
    return options[0] if len(options) == 1 else f.Alternatives(tuple(options))


def _targets(release: Release, cc: ComputeCapability, to_driver: bool) -> bool:
    """Whether the release compiles for the GPU: its arch list holds it, or (PTX to the driver) the
    GPU is newer than its newest arch, whose PTX the driver JIT-compiles forward."""
    return release.targets(cc) or (to_driver and cc > release.archs[-1])


def _ptx_isa(release: Release) -> Optional[str]:
    isa: Optional[str] = getattr(release, "ptx_isa", None)
    return isa


def _driver_cuda(host: HostFacts) -> Optional[CudaVersion]:
    driver = host.driver
    if driver.cuda is not None:
        return driver.cuda
    return toolkits.max_cuda_for_driver(driver.release) if driver.release is not None else None


def _driver_ptx_isa(host: HostFacts) -> Optional[str]:
    """The newest PTX ISA the driver JIT-compiles: that of the CUDA version it reports; None unknown."""
    cuda = _driver_cuda(host)
    return toolkits.ptx_isa(cuda) if cuda is not None and cuda.minor is not None else None


def _major(env: Environment, dist: Distribution, build: Optional[CudaBuild], kind: str) -> Optional[int]:
    """The CUDA major whose compiler `dist` loads: its selector's (cuda-cccl: cuda-bindings'), its
    known build's, else the one major of the compiler's wheels installed."""
    row = components.alternative_builds(dist.name)
    if row is not None:
        chooser = env.distribution(row.selected_by) if row.selected_by else None
        if chooser is not None:
            return chooser.version.release[0]
        majors = {b.cuda.major for b in component_builds(env.distributions)}
        return majors.pop() if len(majors) == 1 else None
    if build is not None:
        return build.cuda.major
    names = _names(kind)
    majors = {d.version.release[0] for d in env.distributions if d.name in names}
    return majors.pop() if len(majors) == 1 else None


def _names(kind: str) -> set[str]:
    return {release.dist for release in compilers.releases(kind)}


def _installed(env: Environment, kind: str, major: int) -> Optional[tuple[Distribution, Release]]:
    """The installed wheel of compiler `kind` for CUDA `major` and its row; None when none is
    installed or the table does not hold its release."""
    names = _names(kind)
    wheel = next((d for d in env.distributions if d.name in names and d.version.release[0] == major), None)
    if wheel is None:
        return None
    release = compilers.release(kind, wheel.name, str(wheel.version))
    return (wheel, release) if release is not None else None


def _arch_fix(env: Environment, dist: Distribution, kind: str, wheel: Distribution, major: int,
              ccs: list[ComputeCapability], to_driver: bool, host: HostFacts) -> f.Fix:
    """The newest release of the same wheel that targets every GPU; else the package's build of
    another CUDA major whose compiler does; else that the table holds none."""
    fits = [r for r in compilers.releases(kind) if r.dist == wheel.name and all(_targets(r, cc, to_driver) for cc in ccs)]
    if fits:
        return f.Explained(f.PipInstall((Requirement(f"{wheel.name}=={fits[-1].version}"),)),
                           f.CompilerFits(tuple(ccs), None))
    others = {Version(r.version).release[0] for r in compilers.releases(kind)
              if all(_targets(r, cc, to_driver) for cc in ccs)} - {major}
    route = other_route(dist.name, major, host) if others else None
    if route is not None:
        return route
    return f.NoKnownRelease((wheel.name,), runs_on=tuple(ccs))


def _ptx_fix(kind: str, wheel: Distribution, isa: str, driver_isa: str, ccs: list[ComputeCapability]) -> f.Fix:
    """A release of the same wheel whose PTX the driver loads (and that targets every GPU), or the
    driver that loads this one's."""
    fits = [r for r in compilers.releases(kind)
            if r.dist == wheel.name and (r_isa := _ptx_isa(r)) is not None and Version(r_isa) <= Version(driver_isa)
            and all(_targets(r, cc, True) for cc in ccs)]
    needed = toolkits.for_ptx_isa(isa)
    upgrade = f.DriverUpgrade(needed.ga_driver) if needed is not None else None
    if not fits:
        return upgrade if upgrade is not None else f.NoKnownRelease((wheel.name,))
    pin = f.Explained(f.PipInstall((Requirement(f"{wheel.name}=={fits[-1].version}"),)),
                      f.CompilerFits(tuple(ccs), driver_isa))
    return f.Alternatives((pin, upgrade)) if upgrade is not None else pin

