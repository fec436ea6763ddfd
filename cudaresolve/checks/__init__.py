"""The judge: every check, over one `Environment` (installed or planned) and the host.

`doctor` runs it on the environment it scanned; `lock` runs it on the environment a set of wheels
would make, and refuses the set on any error. Each check is a pure function of the environment's
value and the host, in a module of its own; the loader's file access goes through the
environment's seams. `Diagnosis` is a judgement with what it judged, the value output/ renders.

May import: env/, host/, binary/, knowledge/ and the base values (versions, arch, errors); never
index/, resolve/, output/ or the doctor's edge: the judge fetches nothing, and its findings are
values output/ words (the one sentence still made here is how a build's CUDA is known, builds.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from cudaresolve.checks.advisories import check_advisories
from cudaresolve.checks.arch_coverage import check_arch_coverage, check_unreadable_device_code
from cudaresolve.checks.builds import cuda_builds
from cudaresolve.checks.compilers import check_run_time_compilers
from cudaresolve.checks.cpu_only import check_cpu_only_builds
from cudaresolve.checks.dlopen import check_dlopened_libraries
from cudaresolve.checks.dlsym import check_dlsym_needs
from cudaresolve.checks.driver_floor import check_driver_floor
from cudaresolve.checks.duplicates import check_duplicate_libraries
from cudaresolve.checks.evidence import Owned, Said
from cudaresolve.checks.findings import Check, Finding, Severity, sort_findings
from cudaresolve.checks.fixes import StateHost
from cudaresolve.checks.floors import check_build_floors
from cudaresolve.checks.host_fit import check_package_floors, check_sbsa_on_jetson
from cudaresolve.checks.linking import (
    check_foreign_files,
    check_missing_libraries,
    check_plugin_libraries,
    check_shadowing,
    check_symbol_skew,
)
from cudaresolve.checks.loading import PackageLoad, load_packages, loaded_after_import
from cudaresolve.checks.metadata import check_metadata_vs_binary
from cudaresolve.checks.mixed_majors import check_companion_majors, check_mixed_majors, check_preloaded_majors
from cudaresolve.checks.ownership import check_owned_twice
from cudaresolve.checks.plugin_hosts import check_plugin_hosts
from cudaresolve.checks.problems import BinaryFactsUnreadable, HostUnknown, Unreadable
from cudaresolve.checks.subjects import Scope, Subject
from cudaresolve.checks.torch_abi import check_torch_abi
from cudaresolve.env.environment import Environment
from cudaresolve.env.identity import Identity
from cudaresolve.host.facts import HostFacts


@dataclass(frozen=True)
class Judgement:
    loads: tuple[PackageLoad, ...]  # how each package's libraries load, for the report
    findings: tuple[Finding, ...]  # errors first


@dataclass(frozen=True)
class Diagnosis:
    """A judgement with what it judged: the value `doctor` hands to output/ and keeps in its result cache."""

    host: HostFacts
    environment: Environment
    loads: tuple[PackageLoad, ...]
    findings: tuple[Finding, ...]
    # Every path outside the environment's ELF files the loader looked at, and the environment's
    # ELF files outside site-packages (a conda prefix's), with what was there (None: nothing): a
    # cached result holds only while each is unchanged (commands/result_cache.py).
    probed: tuple[tuple[str, Identity], ...] = ()
    cache_error: Optional[str] = None  # why the facts cache could not be written; such a result is not cached


def judge(env: Environment, host: HostFacts) -> Judgement:
    """Load every package as ld.so would, then run every check."""
    loads = load_packages(env)
    imported = tuple(load for load in loads if load.selected)  # not the builds a package does not import here
    builds = cuda_builds(env)
    findings: list[Finding] = []
    findings += _environment_problems(env)
    findings += check_foreign_files(env, imported)
    findings += check_missing_libraries(env, imported, host)
    findings += check_plugin_libraries(env, imported)
    abi, rest = check_torch_abi(env, imported)  # the names it explains are no symbol skew
    findings += abi
    plugins, rest = check_plugin_hosts(env, rest)  # the same for plugins built for another host release
    findings += plugins
    findings += check_symbol_skew(env, rest)
    findings += check_shadowing(env, imported)
    findings += check_duplicate_libraries(env, imported)
    findings += check_owned_twice(env)
    findings += check_arch_coverage(env, builds, host, imported)
    findings += check_unreadable_device_code(env)
    findings += check_driver_floor(env, builds, host)
    findings += check_cpu_only_builds(env, host)
    findings += check_sbsa_on_jetson(env, host)
    findings += check_package_floors(env, host)
    findings += check_run_time_compilers(env, builds, host)
    findings += check_dlsym_needs(env, builds)
    findings += check_dlopened_libraries(env, imported, builds)
    later = loaded_after_import(env, imported)  # what the import leaves to later code, for both major checks
    findings += check_mixed_majors(env, builds, host, later)
    findings += check_companion_majors(env, host, later)
    findings += check_preloaded_majors(env, host)
    findings += check_advisories(env, host, builds)
    findings += check_metadata_vs_binary(env)
    findings += check_build_floors(env, host)
    if env.observed is not None:  # doctor --import only: a lock and a plain doctor never import it
        from cudaresolve.checks.observed import check_observed_imports, with_observed_loads

        findings = with_observed_loads(env, findings) + check_observed_imports(env)
    if host.driver.release is None and host.driver.cuda is None and not host.gpus:
        findings.append(
            Finding(
                Check.HOST, Severity.INFO, Subject(scope=Scope.HOST), HostUnknown(),
                tuple(Said(note.message, note.source) for note in host.notes[:5]), StateHost(),
            )
        )
    return Judgement(loads, sort_findings(findings))


def _environment_problems(env: Environment) -> list[Finding]:
    """What the environment's builder could not read (a broken dist-info, an unreadable library)."""
    found = [Finding(Check.ENVIRONMENT, Severity.WARNING, Subject(file=problem.path), Unreadable(problem.reason))
             for problem in env.problems]
    found += [
        Finding(Check.ENVIRONMENT, Severity.WARNING, Subject(file=elf.path), BinaryFactsUnreadable(elf.error),
                tuple(Owned(owner) for owner in elf.owners))
        for elf in env.elf_files
        if elf.error is not None
    ]
    return found
