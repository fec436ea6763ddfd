"""mixed-majors: consumers needing different CUDA runtime majors in one environment (one process
imports both, and two CUDA runtimes do not share contexts, memory or streams).

May import: checks/ (builds, dependencies, duplicates, releases, suggestions, findings), env/, host/ and
knowledge/; the findings are values, output/ words them.
"""

from __future__ import annotations

import fnmatch
import os
from collections import defaultdict
from typing import Iterable, Mapping, Optional

from packaging.requirements import Requirement
from packaging.utils import NormalizedName

from cudaresolve.checks import evidence as e
from cudaresolve.checks import fixes as f
from cudaresolve.checks import releases
from cudaresolve.checks.builds import CudaBuild, build_of, major_needs
from cudaresolve.checks.dependencies import following_torch, pulled_in
from cudaresolve.checks.duplicates import unmangled
from cudaresolve.checks.findings import Check, Finding, Severity
from cudaresolve.checks.problems import CompanionMajors, Installed, MixedMajors, PreloadedOtherMajor
from cudaresolve.checks.subjects import Scope, Subject, subject
from cudaresolve.checks.suggest import driver_runs, torch_variant_fix
from cudaresolve.env.distributions import Distribution
from cudaresolve.env.environment import Environment
from cudaresolve.env.preloads import runtime_major
from cudaresolve.host.facts import HostFacts
from cudaresolve.knowledge import components, cupy, torch
from cudaresolve.knowledge.wheel_facts import Wheel
from cudaresolve.versions import CudaVersion


def check_mixed_majors(env: Environment, builds: Iterable[CudaBuild], host: HostFacts,
                       later: Optional[Mapping[str, str]] = None) -> list[Finding]:
    """Files linking a cudart of one major, and frameworks built for one, grouped by major. An error
    when the import brings two majors into the process; a warning naming the features when only
    files later code loads (or a guarded load that fails) need another: `later`, path -> feature, is
    checks/loading.py's `loaded_after_import` (none: every file loads at import). The fix moves
    everything to the newest of those majors the driver runs."""
    later = later or {}
    needs: dict[int, set[str]] = defaultdict(set)
    imported: set[int] = set()  # majors the import's own files (or a framework's build) need
    features: dict[int, set[str]] = defaultdict(set)  # major -> the features of files only later code loads
    for elf in env.elf_files:
        if elf.facts is None:
            continue
        alternative = build_of(env, elf.owner, elf.path)
        if alternative is not None and not alternative.selected:
            continue  # a build its package does not load here (bitsandbytes' library for another CUDA)
        owner = elf.owner or elf.path
        for needed in elf.facts.needed:
            rows = components.for_soname(unmangled(needed))
            majors = {c.cuda_major for c in rows}
            if len(majors) == 1 and any(c.name == "cudart" for c in rows):
                major = majors.pop()
                needs[major].add(owner)
                if elf.path in later:
                    features[major].add(later[elf.path])
                else:
                    imported.add(major)
    for build in builds:
        if components.needs_build_runtime(build.dist):
            needs[build.cuda.major].add(build.dist)
            imported.add(build.cuda.major)
    if len(needs) < 2:
        return []
    evidence = tuple(e.MajorUsers(major, tuple(sorted(owners))) for major, owners in sorted(needs.items()))
    runs = sorted((major for major in needs if driver_runs(CudaVersion(major), host)), reverse=True) or [max(needs)]
    # the newest major the driver runs whose move names every build (torch's variant), else the newest
    moves = [_move_to(env, sorted(set().union(*(owners for m, owners in needs.items() if m != target))), target, host)
             for target in runs]
    at_import = len(imported) > 1
    lost = sorted({feature for major, found in features.items() if major not in imported for feature in found})
    return [
        Finding(
            Check.MIXED_MAJORS, Severity.ERROR if at_import else Severity.WARNING, Subject(scope=Scope.ENVIRONMENT),
            MixedMajors(tuple(sorted(needs)), () if at_import else tuple(lost)),
            evidence, next((move for move in moves if not _names_a_build(move)), moves[0]),
        )
    ]


def _names_a_build(fix: f.Fix) -> bool:
    """Whether a move only names packages to find builds of (no release, no index)."""
    if isinstance(fix, f.Each):
        return any(_names_a_build(each) for each in fix.fixes)
    return isinstance(fix, f.InstallBuildsOf)


def _move_to(env: Environment, owners: list[str], major: int, host: HostFacts) -> f.Fix:
    """Each owner's build for CUDA `major`: torch's variant for that major (with the family members
    that follow it), CuPy's distribution for that major, the newest release of the wheel-facts table
    built for it that the driver runs for a component wheel (nvidia-curand -> "nvidia-curand-cu12==...")
    or a package whose releases it holds (onnxruntime-gpu, with its companion wheels), else the
    package named."""
    named: list[str] = []
    pins: list[f.Fix] = []
    head = torch.distribution()
    moved = {head, *following_torch(set(owners))} if head in owners else set()
    variant = torch_variant_fix(env.distribution(head), host, env, major) if moved else None
    if variant is not None:
        pins.append(variant)
        owners = [owner for owner in owners if owner not in moved]
    for owner in owners:
        pin = _release_for_major(env, owner, major, host)
        if pin is None:
            named.append(owner)
        else:
            pins.append(pin)
    fixes = ([f.InstallBuildsOf(major, tuple(named))] if named else []) + pins
    return fixes[0] if len(fixes) == 1 else f.Each(tuple(fixes))


def _release_for_major(env: Environment, owner: str, major: int, host: HostFacts) -> Optional[f.Fix]:
    """`pip install` of `owner`'s build for CUDA `major`: CuPy's distribution of the same release for
    that major (cupy-cuda12x 14.0.0 -> cupy-cuda13x 14.0.0, from data/cupy.toml), else the table's
    newest release of `owner` (or of its component's wheel for that major) built for it and run by
    the driver; a sentence when the table holds releases but none fits; None when it holds none."""
    installed = env.distribution(owner)
    other_cupy = cupy.same_release_for_major(installed.version.public, major) if installed and cupy.dist(
        owner, installed.version.public) else None
    if installed is not None and other_cupy is not None:
        extras = f"[{','.join(sorted(installed.extras))}]" if installed.extras else ""
        steps = (f.PipUninstall((NormalizedName(owner),)),
                 f.PipInstall((Requirement(f"{other_cupy}{extras}=={installed.version.public}"),)))
        return f.Explained(f.Steps(steps), f.SameCupyRelease(major))
    component = releases.known(releases.for_major(owner, major), host.machine)
    if component:
        chosen = releases.for_driver(component, host)
        return (f.PipInstall((releases.requirement(chosen),), replaces=(NormalizedName(owner),)) if chosen else
                f.NoKnownRelease(tuple(component)))
    if not releases.known([owner], host.machine) or components.for_dist(owner):
        return None

    def built_for(wheel: Wheel) -> bool:
        made = releases.build_of_release(wheel)
        return made is not None and made.cuda.major == major and releases.driver_runs_release(wheel, host)

    chosen = releases.newest([owner], built_for, host.machine)
    if chosen is None:
        return f.NoKnownRelease((owner,), cuda_major=major)
    return f.Explained(releases.install(env, chosen, lambda names: releases.for_driver(names, host)),
                       f.NewestBuildOf(major, owner))


def other_major_wheels(env: Environment, soname: str) -> dict[int, str]:
    """major -> installed wheel, for a soname of one CUDA major (libcublas.so.13) whose component the
    environment has only in other majors (nvidia-cublas-cu12); {} otherwise."""
    rows = components.for_soname(soname)
    if len({row.cuda_major for row in rows}) != 1:
        return {}
    wheels = {
        row.cuda_major: dist.name
        for dist in env.distributions
        for row in components.for_dist(dist.name, str(dist.version))
        if row.name == rows[0].name
    }
    return {} if rows[0].cuda_major in wheels else wheels


def check_companion_majors(env: Environment, host: HostFacts, later: Optional[Mapping[str, str]] = None) -> list[Finding]:
    """A package whose binaries link one CUDA major's library (libcublas.so.13) while the environment's
    wheels of that component are another major's (nvidia-cublas-cu12): the loader finds nothing, and
    the fix is either side's major, each named as releases of the wheel-facts table where it holds
    some the driver runs. One finding per package, naming both sides: an error when the import
    loads such a file, a warning naming the features when only later code (or a guarded load the
    package goes on without) does (`later`, as for check_mixed_majors)."""
    later = later or {}
    mismatches: dict[str, list[tuple[str, str, int, dict[int, str]]]] = defaultdict(list)
    for elf, needed, major in major_needs(env):
        assert elf.owner is not None  # major_needs yields owned files only
        if components.for_dist(elf.owner) or components.alternative_builds(elf.owner):
            continue  # NVIDIA's own wheels are judged by their loads; a selected build's misses have its fix
        wheels = other_major_wheels(env, needed)
        if wheels:
            mismatches[elf.owner].append((elf.path, needed, major, wheels))
    findings = []
    for owner, found in sorted(mismatches.items()):
        needs = tuple(sorted({major for _, _, major, _ in found}))
        have = tuple(sorted({m for _, _, _, wheels in found for m in wheels}))
        lost = () if any(path not in later for path, _, _, _ in found) else tuple(sorted({later[path] for path, _, _, _ in found}))
        findings.append(
            Finding(
                Check.MIXED_MAJORS, Severity.WARNING if lost else Severity.ERROR, subject(env, owner),
                CompanionMajors(needs, have, lost),
                tuple(e.LinksOtherMajor(path, needed, tuple(sorted(wheels.values())))
                      for path, needed, _, wheels in found[:5]),
                _either(_swap_or_torch(env, found, needs[-1], host)
                        + (_release_for_major(env, owner, have[-1], host) or f.BuildOf(owner, have[-1]),)),
            )
        )
    return findings


def check_preloaded_majors(env: Environment, host: HostFacts) -> list[Finding]:
    """Libraries a package's own sys.path search loads (torch 2.14's _preload_cuda_deps: `sys_path` of
    its row) from another CUDA major's wheel, under sonames the package's files link: the search takes
    nvidia/<folder>/lib before nvidia/cu<major>/lib, so beside JAX's CUDA 12 wheels torch's CUDA 13
    build binds nvidia-cusparse-cu12's libcusparse.so.12. A file two wheels install is left to
    owned-twice. One finding per package and major; the fix: uninstall those wheels where nothing else
    installed requires them, or move torch to the variant of that major, whose libraries they serve."""
    findings = []
    for dist in env.distributions:
        preload = components.sys_path_preload(dist.name, dist.version)
        picked = env.preloads.get(dist.name, {})
        if preload is None or not picked:
            continue
        links = {elf.path: elf.facts.needed for elf in env.elf_files if elf.owner == dist.name and elf.facts is not None}
        needed = {name for names in links.values() for name in names}
        major = runtime_major(needed)
        if major is None:
            continue
        by_major: dict[int, list[tuple[str, str, Distribution]]] = defaultdict(list)
        for soname, path in picked.items():
            elf = env.elf_file(path)
            if soname not in needed or elf is None or len(elf.owners) != 1 or elf.owner is None:
                continue
            owner = env.distribution(elf.owner)
            rows = components.for_dist(elf.owner, str(owner.version)) if owner is not None else ()
            if owner is not None and rows and rows[0].cuda_major != major:
                by_major[rows[0].cuda_major].append((soname, path, owner))
        for other, found in sorted(by_major.items()):
            evidence: list[e.Evidence] = []
            for soname, path, owner in found:
                library = next(lib for lib in preload.libraries if fnmatch.fnmatchcase(soname, lib.file))
                own = next((copy.path for copy in env.with_soname(soname) if copy.owner
                            and any(row.cuda_major == major for row in components.for_dist(copy.owner))), None)
                evidence.append(e.SearchPicks(
                    soname, path, owner.name, os.path.relpath(os.path.dirname(path), _entry_of(env, path)),
                    next((part.format(folder=library.folder, major=major) for part in preload.dirs if "{major}" in part),
                         None), own))
                evidence += [e.Needs(file, (soname,)) for file, names in links.items() if soname in names][:2]
            wheels = sorted({owner.name: owner for _, _, owner in found}.values(), key=lambda d: d.name)
            findings.append(Finding(
                Check.MIXED_MAJORS, Severity.ERROR, subject(env, dist.name),
                PreloadedOtherMajor(tuple(soname for soname, _, _ in found),
                                    tuple(Installed(w.name, w.version) for w in wheels), other, major),
                tuple(evidence),
                _preload_fix(env, dist.name, [w.name for w in wheels], other, host),
            ))
    return findings


def _entry_of(env: Environment, path: str) -> str:
    """The site-packages directory `path` lies under (its sys.path entry)."""
    return next((site for site in env.target.site_packages if path.startswith(site.rstrip("/") + "/")),
                os.path.dirname(path))


def _preload_fix(env: Environment, consumer: str, wheels: list[str], major: int, host: HostFacts) -> Optional[f.Fix]:
    """Uninstalling the other major's wheels where nothing else installed requires them; else (or also)
    the consumer's variant of that major (torch's), whose build the picked libraries serve."""
    options: list[f.Fix] = []
    if not any(set(wheels) & env.requires_names(d) for d in env.distributions if d.name not in {*wheels, consumer}):
        options.append(f.PipUninstall(tuple(NormalizedName(wheel) for wheel in wheels)))
    variant = torch_variant_fix(env.distribution(consumer), host, env, major) if consumer == torch.distribution() else None
    if variant is not None:
        options.append(variant)
    return _either(tuple(options)) if options else None


def _either(options: tuple[f.Fix, ...]) -> f.Fix:
    return options[0] if len(options) == 1 else f.Alternatives(options)


def _swap_or_torch(env: Environment, found: list[tuple[str, str, int, dict[int, str]]], major: int,
                   host: HostFacts) -> tuple[f.Fix, ...]:
    """The side of the choice that gives the package its major: the installed wheels swapped for that
    major's, unless another package needs them (xformers links libcudart.so.12 beside torch's CUDA 13:
    swapping nvidia-cuda-runtime out breaks torch's import). Where torch pulls them in, torch's
    variant for that major (with its family) moves the whole process to it; else nothing is named."""
    installed = {name for _, _, _, wheels in found for name in wheels.values()}
    users = {d.name for d in env.distributions if d.name not in installed and pulled_in(env, d.name) & installed}
    if not users:
        return (_wheels_for(found, major, host),)
    head = torch.distribution()
    variant = torch_variant_fix(env.distribution(head), host, env, major) if head in users else None
    return (variant,) if variant is not None else ()


def _wheels_for(found: list[tuple[str, str, int, dict[int, str]]], major: int, host: HostFacts) -> f.Fix:
    """The CUDA `major` wheels providing the libraries a package links, in place of the installed
    wheels of another major: the table's newest release the driver runs, else the bare name."""
    wanted = sorted({row.dist for _, needed, _, _ in found for row in components.for_soname(needed)
                     if row.cuda_major == major})
    installed = sorted({name for _, _, _, wheels in found for name in wheels.values()})
    chosen = [releases.for_driver(releases.known([name], host.machine), host) for name in wanted]
    if not any(chosen):
        return f.InstallWheels(major, tuple(wanted))
    named = tuple(releases.requirement(wheel) if wheel else Requirement(name) for name, wheel in zip(wanted, chosen))
    return f.PipInstall(named, replaces=tuple(NormalizedName(name) for name in installed))
