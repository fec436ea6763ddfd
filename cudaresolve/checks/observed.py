"""`doctor --import`: the judgement of what an import did when it ran (env/observe.py), beside the model.

A module whose import raised is an error with the target's own words, whatever the model said: the
failure is proven. When those words name a library of the NVIDIA driver (libcuda.so.1), or the
distribution's files link one and the import mapped none, it is a warning: the machine that ran it
may have no driver, which the host judged may have. So is a failure that names no shared object of a
module under a namespace package (the first modules under it are imported one by one, as a program
might, and one of them may be internal: the CUTLASS DSL's `_cutlass_ir_version_cu12`). An import that
could not be observed leaves the static judgement standing, with a warning saying so. The reverse
proof counts too: a file the loader model cannot load (`missing-library` error) that a successful
import mapped did load there, through a preload the model does not read; it becomes an info, with the
observation as its evidence.

May import: checks/ (evidence, findings, problems, subjects), env/, knowledge/.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Sequence

from cudaresolve.checks.evidence import ImportLoaded
from cudaresolve.checks.findings import Check, Finding, Severity
from cudaresolve.checks.problems import ImportFailed, ImportNotObserved, LibraryNotLoaded
from cudaresolve.checks.subjects import subject
from cudaresolve.env.environment import Environment
from cudaresolve.knowledge import components


def check_observed_imports(env: Environment) -> list[Finding]:
    """A finding per module whose observed import raised, and per distribution not observed."""
    if env.observed is None:
        return []
    driver = components.driver_libraries()
    found = []
    for name, seen in sorted(env.observed.items()):
        about = subject(env, name)
        if seen.error is not None:
            found.append(Finding(Check.IMPORT, Severity.WARNING, about, ImportNotObserved(seen.modules, seen.error)))
        # its files link the driver, and the import mapped none: this machine may lack what the host has
        linked_driver = (any(elf.facts is not None and any(soname in driver for soname in elf.facts.needed)
                             for elf in env.elf_files if name in elf.owners)
                         and not any(os.path.basename(path).startswith(soname.split(".so")[0] + ".so")
                                     for path in seen.loaded for soname in driver))
        for failure in seen.failures:
            needs_driver = linked_driver or any(soname in failure.message for soname in driver)
            # a module under a namespace is imported the way a program might, not the way this package's
            # own code does: a failure of its Python that names no library proves nothing of the libraries
            guessed = "." in failure.module and ".so" not in failure.message
            found.append(Finding(Check.IMPORT, Severity.WARNING if needs_driver or guessed else Severity.ERROR, about,
                                 ImportFailed(failure.module, failure.kind, failure.message, needs_driver)))
    return found


def with_observed_loads(env: Environment, findings: Sequence[Finding]) -> list[Finding]:
    """`findings` with each `missing-library` error on a file an observed import mapped made an info."""
    if env.observed is None:
        return list(findings)
    mapped = {path for seen in env.observed.values() if seen.imported for path in seen.loaded}
    real = {elf.path: elf.real_path or elf.path for elf in env.elf_files}
    kept = []
    for finding in findings:
        problem = finding.problem
        if (finding.severity is Severity.ERROR and isinstance(problem, LibraryNotLoaded)
                and real.get(problem.consumer, problem.consumer) in mapped):
            finding = replace(finding, severity=Severity.INFO, evidence=(*finding.evidence, ImportLoaded(problem.consumer)),
                              fix=None)
        kept.append(finding)
    return kept
