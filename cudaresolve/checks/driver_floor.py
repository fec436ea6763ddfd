"""driver-floor: a package built for a CUDA newer than the driver runs natively, by minor-version
compatibility, or not at all ("CUDA driver version is insufficient for CUDA runtime version").

The verdict is verdicts/rules.py's, the lock's too; this check folds dependencies and adds the fix.

May import: checks/ (builds, dependencies, floors, metadata, releases, suggestions, findings), env/,
host/, knowledge/ and verdicts/; the findings are values, output/ words them.
"""

from __future__ import annotations

from typing import Iterable, Optional, Union

from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

from cudaresolve.checks import evidence as e
from cudaresolve.checks import fixes as f
from cudaresolve.checks import releases
from cudaresolve.checks.builds import CudaBuild, dated_runtime
from cudaresolve.checks.dependencies import fold_into_requirers, following_torch, sole_consumers
from cudaresolve.checks.findings import Check, Finding, Severity
from cudaresolve.checks.floors import applicable_requirements
from cudaresolve.checks.metadata import versioned_needs
from cudaresolve.checks.problems import UndatedRuntime
from cudaresolve.checks.subjects import Subject
from cudaresolve.checks.suggest import other_route, own_runtime_fix, torch_variant_fix
from cudaresolve.env.environment import Environment
from cudaresolve.host.facts import HostFacts
from cudaresolve.knowledge import components, toolkit_pins, toolkits
from cudaresolve.knowledge.wheel_facts import Wheel
from cudaresolve.verdicts.records import DriverTooOld, MinorCompat
from cudaresolve.verdicts.rules import driver_too_old, minor_compat
from cudaresolve.versions import CudaVersion, DriverRelease


def check_driver_floor(env: Environment, builds: Iterable[CudaBuild], host: HostFacts) -> list[Finding]:
    """One finding per failing package; the CUDA wheels it requires fail for the same reason and are
    folded into its finding as evidence (torch cu130 on driver 550 is one problem, not seventeen), and
    so are the failing component wheels a package of no known build alone requires, into its finding."""
    driver = host.driver
    if driver.release is None and driver.cuda is None:
        return []
    verdicts: dict[str, tuple[CudaBuild, Union[DriverTooOld, MinorCompat]]] = {}
    for build in builds:
        verdict = driver_too_old(build.cuda, driver) or minor_compat(build.cuda, driver)
        if verdict is not None:
            verdicts[build.dist] = (build, verdict)
    errors = {dist for dist, (_, verdict) in verdicts.items() if isinstance(verdict, DriverTooOld)}
    findings = []
    for failing in (errors, set(verdicts) - errors):
        roots = fold_into_requirers(env, failing)
        if failing is errors:
            for consumer, build, held in _consumers(env, roots, verdicts):
                too_old = driver_too_old(build.cuda, driver)
                if too_old is None:
                    continue
                verdicts[consumer] = (build, too_old)
                roots[consumer] = set().union(*(roots.pop(name) | {name} for name in held))
        for dist, folded in sorted(roots.items()):
            family = following_torch(folded)
            build, verdict = verdicts[dist]
            findings.append(_finding(env, build, verdict, [verdicts[d][0] for d in sorted(folded - family)], host,
                                     tuple(sorted(family))))
    return findings + _undated(env, {build.dist for build in builds}, host)


def _undated(env: Environment, dated: set[str], host: HostFacts) -> list[Finding]:
    """A warning per package without a known CUDA whose files link a runtime in statically that no
    byte dates: its floor cannot be judged, which is said, not passed over."""
    files: dict[str, list[str]] = {}
    for elf in env.elf_files:
        runtime = dated_runtime(elf.facts) if elf.facts is not None else None
        if runtime is not None and runtime.major is None and elf.owner is not None and elf.owner not in dated:
            files.setdefault(elf.owner, []).append(elf.path)
    findings = []
    for name, paths in sorted(files.items()):
        dist = env.distribution(name)
        about = Subject(distribution=NormalizedName(name), version=dist.version if dist is not None else None)
        findings.append(Finding(Check.DRIVER_FLOOR, Severity.WARNING, about, UndatedRuntime(tuple(sorted(paths))),
                                (e.HostDriver(host.driver.release, host.driver.cuda),)))
    return findings


def _consumers(
    env: Environment, roots: dict[str, set[str]], verdicts: dict[str, tuple[CudaBuild, Union[DriverTooOld, MinorCompat]]],
) -> list[tuple[str, CudaBuild, list[str]]]:
    """Failing NVIDIA component wheels that one installed package, itself of no known build, alone
    requires, two or more: that consumer, a build of the newest CUDA among them, and their names.
    Eight failing cuDNN, cuBLAS, ... wheels of one framework are one cause, the framework's."""
    found = []
    for consumer, held in sorted(sole_consumers(env, set(roots), set(verdicts)).items()):
        dist = env.distribution(consumer)
        if dist is None:
            continue
        cuda = max(verdicts[name][0].cuda for name in held)
        found.append((consumer, CudaBuild(consumer, str(dist.version), cuda,
                                          f"{consumer} {dist.version} requires CUDA {cuda.major} wheels"), sorted(held)))
    return found


def _finding(env: Environment, build: CudaBuild, verdict: Union[DriverTooOld, MinorCompat], dependencies: list[CudaBuild],
             host: HostFacts, family: tuple[str, ...] = ()) -> Finding:
    driver = host.driver
    about = Subject(distribution=NormalizedName(build.dist), version=Version(build.version))
    evidence: tuple[e.Evidence, ...] = (e.BuiltWith(build.evidence),)
    if build.runtime is not None:
        runtime = build.runtime.runtime
        assert runtime.major is not None  # a build is made only of a runtime whose major is known
        evidence += (e.CudaRuntimeIn(build.runtime.path, runtime.linkage, runtime.major, runtime.release, runtime.release_from),)
    evidence += (e.HostDriver(driver.release, driver.cuda),)
    if dependencies:
        evidence += (e.DependenciesFailToo(tuple(d.dist for d in dependencies)),)
    if family:
        evidence += (e.FamilyFailsToo(family),)
    if isinstance(verdict, MinorCompat):
        needed = toolkits.get(build.cuda) if build.cuda.minor is not None else None
        fixes: list[f.Fix] = [f.Explained(f.DriverUpgrade(needed.ga_driver), f.ForNativeSupport())] if needed else []
        # the folded dependencies too: pinning only the package would leave them newer than the driver
        pins = [(b.dist, _release_for_driver(env, b, driver.cuda)) for b in [build, *dependencies]]
        requirements = tuple(Requirement(f"{dist}=={pin}") for dist, pin in pins if pin)
        if requirements:
            fixes.append(f.Explained(f.PipInstall(requirements), f.PinToDriverCuda(len(requirements))))
        return Finding(
            Check.DRIVER_FLOOR, Severity.WARNING, about, verdict, evidence,
            (fixes[0] if len(fixes) == 1 else f.Alternatives(tuple(fixes))) if fixes else None,
        )
    return Finding(Check.DRIVER_FLOOR, Severity.ERROR, about, verdict, evidence, _error_fix(env, build, host, verdict.floor))


def _error_fix(env: Environment, build: CudaBuild, host: HostFacts, floor: Optional[DriverRelease]) -> f.Fix:
    """The driver the build needs, or a build this driver runs: for a package carrying its own
    runtime, the newest release of data/own_runtime.toml whose runtime the driver runs (or that none
    does); a torch variant; the newest release of
    the package or of the same component the wheel-facts table knows (another major's wheel, when
    nothing installed requires this one), or that the table holds none; another of the package's
    per-major builds (cuda-cccl's CUDA 12 route); else a description of the build to look for."""
    upgrade = f.DriverUpgrade(floor)
    installed = env.distribution(build.dist)
    own = own_runtime_fix(installed, host) if installed is not None else None
    if isinstance(own, f.NoKnownRelease):
        return f.Explained(upgrade, own)
    if own is not None:
        return f.Alternatives((upgrade, own))
    alternative = torch_variant_fix(env.distribution(build.dist), host, env)
    names = components.same_component(build.dist) or (build.dist,)
    table = [] if alternative or _requirers(env, build.dist) else releases.known(names, host.machine)
    if table:
        chosen = releases.for_driver(table, host)
        if chosen is None:
            return f.Explained(upgrade, f.NoKnownRelease(tuple(table)))
        alternative = _release_in_place(env, build, chosen, host)
    return f.Alternatives((upgrade, (
        alternative
        or other_route(build.dist, build.cuda.major, host)
        or _component_for_driver(env, build, host.driver.cuda)
        or f.InstallBuild(tuple(_requirers(env, build.dist)) or (build.dist,), host.driver.cuda)
    )))


def _release_in_place(env: Environment, build: CudaBuild, chosen: Wheel, host: HostFacts) -> f.Fix:
    """The table's release the driver runs, as a requirement: another major's wheel goes in place of
    the installed one; a release of the same name comes with its extras and the companion wheels of
    its CUDA major (onnxruntime-gpu 1.26.0 and nvidia-cublas-cu12 for a CUDA 12 driver)."""
    made = releases.build_of_release(chosen)
    if chosen.name == build.dist:
        command = releases.install(env, chosen, lambda names: releases.for_driver(names, host))
        return f.Explained(command, f.NewestForDriver(made.cuda if made else None))
    return f.Explained(f.PipInstall((releases.requirement(chosen),), replaces=(NormalizedName(build.dist),)),
                       f.UseBuildInstead(made.cuda.major if made else None))


def _requirers(env: Environment, name: str) -> list[str]:
    """The installed distributions that require `name`, for a fix that must change them instead."""
    return [d.name for d in env.distributions if name in env.requires_names(d)]


def _component_for_driver(env: Environment, build: CudaBuild, driver_cuda: Optional[CudaVersion]) -> Optional[f.Fix]:
    """The same NVIDIA component's wheel for the driver's CUDA major (nvidia-cusparse-cu11 for 11.4),
    when nothing installed requires the one to replace."""
    if not driver_cuda or _requirers(env, build.dist):
        return None
    major = driver_cuda.major
    names = {row.name for row in components.for_dist(build.dist, build.version)}
    wheels = sorted({row.dist for name in names for row in components.for_component(name, major)})
    if not wheels:
        return None
    return f.Explained(f.PipInstall((Requirement(wheels[0]),), replaces=(NormalizedName(build.dist),)),
                       f.UseBuildInstead(major))


def _release_for_driver(env: Environment, build: CudaBuild, have: Optional[CudaVersion]) -> Optional[str]:
    """The newest release of the component of the driver's CUDA minor (nvJitLink and NVRTC by their
    CUDA-like versions, the others by the cuda-toolkit releases that pin them) that every installed
    requirement on it admits and every binary of the environment can bind. The requirements are those
    the build-floor check applies, with the extras present: an extra broken by a downgrade
    (jax-cuda12-plugin[with-cuda] beside cuDNN 9.5) still holds its nvcc at >= 12.6.85."""
    if not have:
        return None
    rows = components.for_dist(build.dist, build.version)
    candidates = [
        version for cuda, version in components.wheel_releases(rows[0].name if rows else "") if cuda == have
    ] + list(toolkit_pins.for_cuda(build.dist, have) if have.minor is not None else ())
    if not candidates:
        return None
    sonames = {s for row in rows for s in row.sonames}
    needed = [minimum for _, symbol, minimum in versioned_needs(env) if symbol.file in sonames]
    requirements = [
        r for dist in env.distributions for _, r in applicable_requirements(env, dist) if canonicalize_name(r.name) == build.dist
    ]
    for version in sorted(set(candidates), key=Version, reverse=True):
        if all(r.specifier.contains(version, prereleases=True) for r in requirements) and all(n <= have for n in needed):
            return version
    return None
