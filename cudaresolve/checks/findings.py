"""A finding: one problem, with the evidence that shows it and the fix that removes it, all as values.

Every check returns findings; the doctor hands them to output/ (which words them, output/findings.py)
and turns them into an exit code, and the lock refuses a set of wheels on them. A reader tells
findings apart by their fields: `check` and `severity` are enums, `subject` names the distribution
or file, `problem` is one dataclass per kind of problem (checks/problems.py), `evidence` and `fix`
are values too (checks/evidence.py, checks/fixes.py).

May import: checks/subjects, problems, evidence and fixes; nothing that judges.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from enum import Enum
from typing import Iterable, Optional

from cudaresolve.checks.evidence import Evidence
from cudaresolve.checks.fixes import Fix
from cudaresolve.checks.problems import Problem
from cudaresolve.checks.subjects import Subject


class Check(str, Enum):
    """The check that found it; the value is the id reports and JSON show."""

    SYMBOL_SKEW = "symbol-skew"
    TORCH_ABI = "torch-abi"
    PLUGIN_HOST = "plugin-host"
    MISSING_LIBRARY = "missing-library"
    SHADOWING = "shadowing"
    DUPLICATE_LIBRARY = "duplicate-library"
    OWNED_TWICE = "owned-twice"
    BRIDGE = "bridge"
    ARCH_COVERAGE = "arch-coverage"
    DRIVER_FLOOR = "driver-floor"
    RUN_TIME_COMPILER = "run-time-compiler"
    MIXED_MAJORS = "mixed-majors"
    ADVISORY = "advisory"
    METADATA_VS_BINARY = "metadata-vs-binary"
    BUILD_FLOOR = "build-floor"
    IMPORT = "import"
    ENVIRONMENT = "environment"
    HOST = "host"


class Severity(str, Enum):
    """Will break / may break or runs degraded / for information."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


SEVERITIES: tuple[Severity, ...] = tuple(Severity)


@dataclass(frozen=True)
class Finding:
    check: Check
    severity: Severity
    subject: Subject
    problem: Problem
    evidence: tuple[Evidence, ...] = ()  # the facts that show it, in the order they are shown
    fix: Optional[Fix] = None  # what removes it; None when nothing can be suggested


def sort_key(finding: Finding) -> tuple[int, str, tuple[str, ...], str, tuple[str, ...]]:
    """Errors first, then warnings, then info; then by check, subject and the problem's fields."""
    problem = finding.problem
    fields = tuple(str(getattr(problem, field.name)) for field in dataclasses.fields(problem))
    return (SEVERITIES.index(finding.severity), finding.check.value, finding.subject.key(), type(problem).__name__,
            fields)


def sort_findings(findings: Iterable[Finding]) -> tuple[Finding, ...]:
    return tuple(sorted(findings, key=sort_key))


def exit_code(findings: Iterable[Finding], strict: bool) -> int:
    """0 clean, 1 warnings only (with --strict), 2 errors. 3 (doctor could not run) is the CLI's."""
    severities = {f.severity for f in findings}
    if Severity.ERROR in severities:
        return 2
    if strict and Severity.WARNING in severities:
        return 1
    return 0
