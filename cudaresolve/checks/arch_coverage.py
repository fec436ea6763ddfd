"""arch-coverage: every library with device code has SASS or JIT-able PTX for every visible GPU
("no kernel image is available for execution on the device").

May import: checks/ (builds, dependencies, loading, releases, suggestions, findings), compat, binary/elf's
constants, env/, host/, knowledge/ and verdicts/rules; the findings are values, output/ words them.
"""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from cudaresolve.arch import ComputeCapability, Target
from cudaresolve.binary.elf import NO_SECTIONS
from cudaresolve.binary.facts import FatbinSummary
from cudaresolve.checks import evidence as e
from cudaresolve.checks.builds import CudaBuild, build_of
from cudaresolve.checks.dependencies import fold_into_requirers, following_torch, sole_consumers
from cudaresolve.checks.findings import Check, Finding, Severity
from cudaresolve.checks.loading import PackageLoad, refused_when_guarded
from cudaresolve.checks.problems import (
    DeviceCodePartlyUnreadable,
    DeviceCodeSkipped,
    NoDeviceCode,
    NoSectionHeaders,
    OptInUnavailable,
)
from cudaresolve.checks.releases import driver_runs_release, install, newest, with_release
from cudaresolve.checks.subjects import Subject, subject
from cudaresolve.checks.suggest import arch_fix
from cudaresolve.compat import Verdict, can_run
from cudaresolve.env.environment import ElfFile, Environment
from cudaresolve.env.imports import OPT_IN, PICKED, UNREACHED
from cudaresolve.host.facts import HostFacts
from cudaresolve.knowledge import components
from cudaresolve.knowledge.wheel_facts import Wheel
from cudaresolve.verdicts.rules import gpus_of


def check_arch_coverage(env: Environment, builds: Iterable[CudaBuild], host: HostFacts,
                        imported: Sequence[PackageLoad] = ()) -> list[Finding]:
    """One finding per package and GPU capability it cannot run on, with the CUDA wheels it pulls in
    that fail too folded into it; failing component wheels one package alone requires, two or more,
    are one finding on that package when it neither fails itself nor is a component (cuda-toolkit[all]).

    A library whose whole device code is one entry (libcufftw.so.12: one sm_75 cubin, nvcc's
    default target) beside a library of the same package that runs on the GPU carries a stub, not
    kernels the package needs: it is not judged. Facts from the wheel-facts table (a planned
    environment) record targets but not entries (`entries` 0): there one target is one entry. A library that compiles its kernels at run time
    (data/components.toml [run_time_compilers]: its fatbin is a stub) is not judged here: the
    run-time-compiler check judges its compiler's release, one finding for one cause; nor are
    files of a build the package does not import here (cuda-cccl's cu13/ beside cuda-bindings 12).
    Libraries serving only an opt-in feature ([opt_in]: torch's NVSHMEM) are one warning per feature
    and GPU, apart from the package's error; so are the libraries only modules its import does not
    load bring in (`imported`, the loads of env/imports.py's model: a submodule nothing imports, an
    environment-variable switch), one warning per module; and, by what its file says, a library built
    only for given GPU families (all its SASS `a`/`f`, no PTX: FlashMLA's kernels for sm_90a and newer).
    """
    findings: list[Finding] = []
    failures, opt_in = _coverage(env, env.elf_files, host, loaded_later(imported))
    folded = fold_into_requirers(env, {owner for owner, _ in failures})
    built = {build.dist: build for build in builds}

    def runs(wheel: Wheel) -> bool:
        return runs_on_host(env, wheel, host)

    def newest_that_runs(names: list[str]) -> Optional[Wheel]:
        return newest(names, runs, host.machine)

    consumed = _consumed(env, failures, folded)
    held = {(root, cc) for (_, cc), roots in consumed.items() for root in roots}
    for (owner, cc), files in sorted(failures.items(), key=lambda item: (item[0][0] is not None, item[0][0] or "", item[0][1])):
        if owner not in folded or (owner, cc) in held:
            continue
        dist = env.distribution(owner) if owner else None
        evidence: tuple[e.Evidence, ...] = tuple(e.NoCodeFor(path, reason) for path, reason, _ in files[:3])
        if len(files) > 3:
            evidence += (e.MoreOf(len(files) - 3, owner),)
        family = following_torch({d for d in folded[owner] if (d, cc) in failures})
        dependencies = tuple(sorted(d for d in folded[owner] if (d, cc) in failures and d not in family))
        if dependencies:
            evidence += (e.DependenciesFailToo(dependencies, cc),)
        if family:
            evidence += (e.FamilyFailsToo(tuple(sorted(family)), cc),)
        findings.append(
            Finding(
                Check.ARCH_COVERAGE, Severity.ERROR, subject(env, owner), NoDeviceCode(cc, gpus_of(host, cc)), evidence,
                arch_fix(dist, cc, host, built.get(owner) if owner is not None else None, runs,
                         lambda wheel: install(env, wheel, newest_that_runs), env),
            )
        )
    for (consumer, cc), roots in sorted(consumed.items(), key=lambda item: (item[0][0], item[0][1])):
        names = sorted({name for root in roots for name in folded[root] | {root} if (name, cc) in failures})
        lost = [file for name in names for file in failures[(name, cc)]]
        findings.append(
            Finding(
                Check.ARCH_COVERAGE, Severity.ERROR, subject(env, consumer), NoDeviceCode(cc, gpus_of(host, cc)),
                tuple(e.NoCodeFor(path, reason) for path, reason, _ in lost[:3])
                + ((e.More(len(lost) - 3, libraries=True),) if len(lost) > 3 else ())
                + (e.DependenciesFailToo(tuple(names), cc),),
                arch_fix(env.distribution(consumer), cc, host, None, runs,
                         lambda wheel: install(env, wheel, newest_that_runs), env),
            )
        )
    for (feature, cc), files in sorted(opt_in.items(), key=lambda item: (item[0][0].feature, item[0][1])):
        dist = env.distribution(feature.of)
        findings.append(
            Finding(
                Check.ARCH_COVERAGE, Severity.WARNING, subject(env, feature.of), OptInUnavailable(feature.feature, cc),
                tuple(e.NoCodeFor(path, reason) for path, reason, _ in files[:3])
                + ((e.More(len(files) - 3, libraries=True),) if len(files) > 3 else ()),
            )
        )
    return findings


def _consumed(env: Environment, failures: "Failures", folded: dict[Optional[str], set[str]]) -> dict[tuple[str, ComputeCapability], list[str]]:
    """(consumer, GPU capability) -> the failing component wheels it alone requires, two or more
    (checks/dependencies.py's sole_consumers): one finding, on the consumer, whose release moves them."""
    consumed = {}
    for consumer, roots in sole_consumers(env, set(folded), {owner for owner, _ in failures}).items():
        for cc in sorted({cc for _, cc in failures}):
            failing = [root for root in roots if (root, cc) in failures]
            if len(failing) >= 2:
                consumed[(consumer, cc)] = failing
    return consumed


Failures = Dict[Tuple[Optional[str], ComputeCapability], List[Tuple[str, Verdict, int]]]  # (path, why, entries) per file
OptInFailures = Dict[Tuple[components.OptIn, ComputeCapability], List[Tuple[str, Verdict, int]]]


def loaded_later(imported: Sequence[PackageLoad]) -> dict[str, str]:
    """Path -> the module it serves, for the files only modules that neither the import nor a function
    of the package loads bring in (a submodule nothing imports, an environment-variable switch, one
    of the alternatives a load by a computed name picks from, a guarded load ld.so refuses): the
    package works without them. What
    a function loads (warp's init() loads warp.so) is the package's own work, and its device code is
    judged as the import's."""
    refused = [refused_when_guarded(load) for load in imported]
    at_import = {obj.path for load, left in zip(imported, refused) if load.reach not in _APART
                 for obj in load.result.objects if obj.path not in left}
    later: dict[str, str] = {}
    for load, left in zip(imported, refused):
        for obj in load.result.objects:
            if load.reach in _APART or obj.path in left:
                module = load.feature_of(obj.path)
                if obj.path not in at_import and module is not None:
                    later.setdefault(obj.path, module)
    return later


_APART = frozenset((PICKED, OPT_IN, UNREACHED))


def _coverage(env: Environment, elf_files: Iterable[ElfFile], host: HostFacts,
              later: Mapping[str, str] = {}) -> tuple[Failures, OptInFailures]:
    """(owner, GPU capability) -> the files that cannot run there, and the same per opt-in feature
    (a table's, or a module only `later` loads): the per-file judgement, shared by the check and by the
    fix that looks for a release that runs."""
    ccs = sorted({gpu.compute_capability for gpu in host.visible_gpus})
    failures: Failures = defaultdict(list)
    runs: set[tuple[Optional[str], ComputeCapability]] = set()
    opt_in: OptInFailures = defaultdict(list)
    installed = {dist.name for dist in env.distributions}
    for elf in elf_files:
        fatbin = elf.facts.fatbin if elf.facts else None
        if fatbin is None or not (fatbin.sass or fatbin.ptx):
            continue
        build = build_of(env, elf.owner, elf.path)
        if build is not None and not build.selected:
            continue  # a build the package does not import here
        if components.compiles_at_run_time(os.path.basename(elf.path)):
            continue  # its kernels are its compiler's (checks/compilers.py)
        owner = elf.owner
        feature = components.opt_in_feature(elf.owner, os.path.basename(elf.path), installed)
        if feature is None and elf.path in later and elf.owner is not None:
            feature = components.OptIn(of=elf.owner, feature=later[elf.path])
        if feature is None and elf.owner is not None and _one_generation(fatbin):
            feature = components.OptIn(of=elf.owner, feature=os.path.basename(elf.path))
        if feature is not None:
            for cc in ccs:
                verdict = can_run(cc, fatbin.sass, fatbin.ptx, host.driver.release)
                if not verdict.runs:
                    opt_in[(feature, cc)].append((elf.path, verdict, _entries(fatbin)))
            continue
        for cc in ccs:
            verdict = can_run(cc, fatbin.sass, fatbin.ptx, host.driver.release)
            if verdict.runs:
                runs.add((owner, cc))
            else:
                failures[(owner, cc)].append((elf.path, verdict, _entries(fatbin)))
    for key in list(failures):
        if key in runs:
            failures[key] = [f for f in failures[key] if f[2] != 1]
            if not failures[key]:
                del failures[key]
    return failures, opt_in


def _one_generation(fatbin: FatbinSummary) -> bool:
    """Whether a file's device code is only SASS for given GPU families (`sm_90a`, `sm_100f`: the
    arch-specific instructions of those GPUs), and no PTX: kernels of those GPUs alone, a feature that
    other GPUs lack by design, not a build that forgot them."""
    return not fatbin.ptx and bool(fatbin.sass) and all(Target.parse(sass).suffix in ("a", "f") for sass in fatbin.sass)


def runs_on_host(env: Environment, wheel: Wheel, host: HostFacts) -> bool:
    """Whether the table's release `wheel`, installed in place of its namesake, runs on every visible
    GPU (judged file by file as the installed one is) with a CUDA build this driver runs."""
    if not driver_runs_release(wheel, host):
        return False
    candidate = with_release(env, wheel)
    failures, _ = _coverage(candidate, (elf for elf in candidate.elf_files if elf.owner == wheel.name), host)
    return not failures


def _entries(fatbin: FatbinSummary) -> int:
    """The fatbin's entry count; where it was not counted (0: the wheel-facts table keeps targets
    only), the number of targets, a lower bound that is exact for a lone stub."""
    return fatbin.entries or len(fatbin.sass) + len(fatbin.ptx)


def check_unreadable_device_code(env: Environment) -> list[Finding]:
    """Device code the reader could not walk is said, never taken for "no device code": a warning per
    damaged file (its GPU coverage is judged on the part read) or skipped one (not judged), and one info per package for files
    without section headers, where device code cannot be looked for at all (sstripped libraries)."""
    findings = []
    headerless: dict[Optional[str], list[str]] = defaultdict(list)
    for elf in env.elf_files:
        fatbin = elf.facts.fatbin if elf.facts else None
        damage = fatbin.damage if fatbin else ()
        if fatbin is not None and fatbin.skipped is not None:
            findings.append(
                Finding(
                    Check.ENVIRONMENT, Severity.WARNING, Subject(file=elf.path), DeviceCodeSkipped(fatbin.skipped),
                    (e.InstalledBy(subject(env, elf.owner)),) if elf.owner else (),
                )
            )
        elif damage == (NO_SECTIONS,):
            headerless[elf.owner].append(elf.path)
        elif damage:
            findings.append(
                Finding(
                    Check.ENVIRONMENT, Severity.WARNING, Subject(file=elf.path), DeviceCodePartlyUnreadable(damage[0]),
                    tuple(e.Said(note) for note in damage)
                    + ((e.InstalledBy(subject(env, elf.owner)),) if elf.owner else ()),
                )
            )
    for owner, paths in sorted(headerless.items(), key=lambda item: (item[0] is not None, item[0] or "")):
        findings.append(
            Finding(
                Check.ENVIRONMENT, Severity.INFO, subject(env, owner), NoSectionHeaders(tuple(paths)),
                tuple(e.File(path) for path in paths[:5]) + ((e.More(len(paths) - 5),) if len(paths) > 5 else ()),
            )
        )
    return findings
