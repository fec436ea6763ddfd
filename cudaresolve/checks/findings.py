"""A finding: one problem, with the evidence that shows it and the fix that removes it.

Every check returns findings; the doctor sorts, renders and turns them into an exit code, and
`lock --explain` gives them as the reasons a set of wheels was refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Literal, Optional, get_args

from cudaresolve.env.environment import Environment

Severity = Literal["error", "warning", "info"]  # will break / may break or degraded / for information
SEVERITIES: tuple[Severity, ...] = get_args(Severity)
UNOWNED = "(unowned files)"  # what findings call files no distribution's RECORD lists


@dataclass(frozen=True)
class Finding:
    check: str  # the check's id: "symbol-skew", "arch-coverage", ...
    severity: Severity
    subject: str  # what it is about: a distribution ("nvidia-cusparse-cu12 12.3.1.170") or a file
    message: str  # one line, the problem
    evidence: tuple[str, ...] = ()  # the facts that show it (file paths, symbols, versions, search steps)
    fix: Optional[str] = None  # what to run or change

    def to_dict(self) -> dict:
        return {
            "check": self.check,
            "severity": self.severity,
            "subject": self.subject,
            "message": self.message,
            "evidence": list(self.evidence),
            "fix": self.fix,
        }


def subject(env: Environment, owner: Optional[str]) -> str:
    """How a finding names a distribution ("torch 2.14.1", a conda package as "nccl 2.21.5.1 (conda)"),
    or the files no distribution owns."""
    dist = env.distribution(owner) if owner else None
    return dist.label if dist else (owner or UNOWNED)


def version_list(versions: list[str]) -> str:
    """Versions for a message, oldest first: all of a few, or the ends and the count of many
    ("12.0.76 … 12.3.101, 9 releases")."""
    if len(versions) <= 4:
        return ", ".join(versions)
    return f"{versions[0]} … {versions[-1]}, {len(versions)} releases"


def sort_findings(findings: Iterable[Finding]) -> tuple[Finding, ...]:
    """Errors first, then warnings, then info; stable by check and subject within a severity."""
    return tuple(
        sorted(findings, key=lambda f: (SEVERITIES.index(f.severity), f.check, f.subject, f.message))
    )


def exit_code(findings: Iterable[Finding], strict: bool) -> int:
    """0 clean, 1 warnings only (with --strict), 2 errors. 3 (doctor could not run) is the CLI's."""
    severities = {f.severity for f in findings}
    if "error" in severities:
        return 2
    if strict and "warning" in severities:
        return 1
    return 0
