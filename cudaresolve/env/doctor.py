"""`cudaresolve doctor`: scan an environment, load its packages as ld.so would, run every check.

`diagnose` is pure (facts in, findings out); `examine` is the I/O edge that gathers the facts.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Mapping, Optional

from cudaresolve.binary.elf import read_binary_facts
from cudaresolve.binary.facts import BinaryFacts
from cudaresolve.binary.loader import LoaderEnv
from cudaresolve.env import checks, linking
from cudaresolve.env.cache import FactsCache, default_cache_dir
from cudaresolve.env.findings import Finding, sort_findings
from cudaresolve.env.interpreter import Target
from cudaresolve.env.scan import Environment, scan_environment
from cudaresolve.host.facts import HostFacts


@dataclass(frozen=True)
class Diagnosis:
    host: HostFacts
    environment: Environment
    loads: tuple[linking.PackageLoad, ...]
    findings: tuple[Finding, ...]


def diagnose(env: Environment, host: HostFacts, loads: tuple[linking.PackageLoad, ...]) -> tuple[Finding, ...]:
    """Every check over the gathered facts, errors first."""
    builds = checks.cuda_builds(env)
    findings: list[Finding] = []
    findings += _scan_problems(env)
    findings += linking.check_linking(env, loads)
    findings += linking.check_shadowing(env, loads)
    findings += checks.check_duplicate_libraries(env)
    findings += checks.check_arch_coverage(env, host)
    findings += checks.check_driver_floor(env, builds, host)
    findings += checks.check_mixed_majors(env, builds)
    findings += checks.check_advisories(env, host, builds)
    findings += linking.check_metadata_vs_binary(env)
    if host.driver.release is None and host.driver.cuda is None and not host.gpus:
        findings.append(
            Finding(
                "host",
                "info",
                "host",
                "no NVIDIA driver or GPU found: driver and GPU checks were skipped",
                tuple(f"{n.source}: {n.message}" for n in host.notes[:5]),
                "judge for a GPU machine with --host FILE (from `cudaresolve probe --json` there) "
                "or --driver/--gpu",
            )
        )
    return sort_findings(findings)


def _scan_problems(env: Environment) -> list[Finding]:
    found = [
        Finding("environment", "warning", problem.path, problem.reason, (), None) for problem in env.problems
    ]
    found += [
        Finding("environment", "warning", elf.path, f"cannot read its binary facts: {elf.error}", elf.owners, None)
        for elf in env.elf_files
        if elf.error is not None
    ]
    return found


def examine(
    target: Target,
    host: HostFacts,
    environ: Mapping[str, str],
    *,
    progress: Optional[Callable[[str], None]] = None,
) -> Diagnosis:
    """Gather the facts of `target` (through the on-disk facts cache) and diagnose them for `host`."""
    cache = FactsCache(default_cache_dir(environ))
    seen: dict[str, BinaryFacts] = {}  # the loader asks for a library once per package that loads it

    def cached(path: str) -> BinaryFacts:
        if path not in seen:
            if progress:
                progress(path)
            seen[path] = cache.facts_for(path, read=read_binary_facts)
        return seen[path]

    def facts_of(path: str) -> Optional[BinaryFacts]:
        return cached(path) if os.path.isfile(path) else None

    env = scan_environment(
        target, facts_for=cached, prefetch=lambda paths: cache.fill(paths, read=read_binary_facts, progress=progress)
    )
    loads = linking.load_packages(env, LoaderEnv.from_system(environ), facts_of, environ)
    findings = diagnose(env, host, loads)
    if cache.write_error:
        findings = sort_findings(findings + (Finding("environment", "info", "cache", cache.write_error),))
    return Diagnosis(host, env, loads, findings)
