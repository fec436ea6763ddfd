"""Rendering a diagnosis: a compact human report, or the stable JSON of docs/doctor.md.

Only `Report` and `use_colour` are needed to print a cached result, so this module imports the
checks' and the loader's modules only inside the functions that render a fresh diagnosis.

May import: the checks (`Diagnosis`, findings), env/, host/ and binary/ values, and output/; never the
doctor's edge (commands/diagnosing.py, commands/result_cache.py), which imports this.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from enum import Enum
from typing import IO, TYPE_CHECKING, Any, Mapping

from cudaresolve.output.progress import counted

if TYPE_CHECKING:
    from cudaresolve.binary.loader import LoadedObject
    from cudaresolve.checks import Diagnosis
    from cudaresolve.checks.loading import PackageLoad
    from cudaresolve.env.distributions import Distribution
    from cudaresolve.env.environment import Environment

SCHEMA = 1
SEVERITIES = ("error", "warning", "info")  # the values of checks.findings.Severity, in report order
_COLOURS = {"error": "31", "warning": "33", "info": "36"}


class NotJudged(Enum):
    """Why a report's fixes were not judged against the indexes (commands/doctor.py decides)."""

    NOT_ASKED = "not-asked"  # --no-judge-fixes
    NO_INTERPRETER = "no-interpreter"  # --site-packages: no interpreter whose pip settings name the indexes
    EXAMPLE = "example"  # --example: nothing installed, no interpreter


_NOT_JUDGED = {
    NotJudged.NOT_ASKED: "not asked: `cudaresolve doctor` without --no-judge-fixes judges them",
    NotJudged.NO_INTERPRETER: "--site-packages names no interpreter whose pip settings name the indexes",
    NotJudged.EXAMPLE: "the built-in example has no interpreter whose pip settings name the indexes",
}


@dataclass(frozen=True)
class Report:
    """A diagnosis as `doctor` prints it: every rendering and both exit statuses, so a cached
    result (commands/result_cache.py) answers --json, text, colour and --strict alike."""

    text: str
    text_colour: str
    json: str
    exit_code: int
    strict_exit_code: int


def report_of(diagnosis: Diagnosis, not_judged: NotJudged | None = None) -> Report:
    """Every rendering of `diagnosis`, so a kept report answers whatever the next run asks;
    `not_judged`: why its fixes were not judged (None: they were, those that needed the indexes)."""
    from cudaresolve.checks.findings import exit_code

    return Report(
        text=render_text(diagnosis, not_judged=not_judged),
        text_colour=render_text(diagnosis, colour=True, not_judged=not_judged),
        json=render_json(diagnosis, not_judged),
        exit_code=exit_code(diagnosis.findings, strict=False),
        strict_exit_code=exit_code(diagnosis.findings, strict=True),
    )


def use_colour(stream: IO[str], environ: Mapping[str, str]) -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set to a non-empty value (no-color.org)."""
    return stream.isatty() and not environ.get("NO_COLOR")


def render_text(diagnosis: Diagnosis, colour: bool = False, not_judged: NotJudged | None = None) -> str:
    from cudaresolve.output.findings import in_report_order, shown

    host, env = diagnosis.host, diagnosis.environment
    findings = [shown(finding) for finding in in_report_order(diagnosis.findings)]
    counts = Counter(f.severity for f in findings)
    paint = (lambda sev, text: f"\033[{_COLOURS[sev]}m{text}\033[0m") if colour else (lambda sev, text: text)
    gpus = ", ".join(f"{g.name or 'GPU'} ({g.compute_capability})" for g in host.visible_gpus) or "no GPU"
    driver = str(host.driver.release) if host.driver.release else "no driver"
    if host.driver.cuda:
        driver += f" (CUDA {host.driver.cuda})"
    python = env.target.python or "site-packages"
    conda = sum(d.kind == "conda" for d in env.distributions)
    lines = [
        f"host: {driver}; {gpus}",
        f"env:  {python} — {counted(len(env.distributions), 'distribution')}"
        + (f" ({conda} of them conda packages with libraries)" if conda else "")
        + f", {counted(len(env.elf_files), 'ELF file')}, {', '.join(env.target.site_packages)}"
        + (f"; conda prefix {env.conda.path} ({len(env.conda.records)} packages)" if env.conda else ""),
        "result: " + ", ".join(paint(s, f"{counts.get(s, 0)} {s}{'s' if counts.get(s, 0) != 1 else ''}")
                               for s in SEVERITIES),
    ]
    for severity in SEVERITIES:
        group = [f for f in findings if f.severity == severity]
        if not group:
            continue
        lines.append("")
        lines.append(paint(severity, f"{severity.upper()}S" if len(group) > 1 else severity.upper()))
        for finding in group:
            lines.append(f"- [{finding.check}] {finding.subject}: {finding.message}")
            for item in finding.evidence:
                lines.append(f"    {item}")
            if finding.fix:
                lines.append(f"    fix: {finding.fix}")
    if not_judged is not None and any(f.fix and f.severity != "info" for f in findings):
        lines += ["", f"fixes: from the tables, not judged against the indexes ({_NOT_JUDGED[not_judged]})"]
    return "\n".join(lines) + "\n"


def _roots(env: Environment, load: PackageLoad) -> list[LoadedObject]:
    """The objects of a load that are its roots, matched by file (a root may be loaded under another name)."""
    roots = {env.identity(root) for root in load.roots}
    return [obj for obj in load.result.objects if env.identity(obj.path) in roots]


def _distribution(dist: Distribution) -> dict[str, Any]:
    """name and version; with `kind` and the conda record's fields when conda installed it."""
    if dist.conda is None:
        return {"name": dist.name, "version": str(dist.version)}
    record = dist.conda
    return {"name": dist.name, "version": record.version if dist.kind == "conda" else str(dist.version),
            "kind": dist.kind, "conda": {"name": record.name, "version": record.version, "build": record.build,
                                         "channel": record.channel}}


def render_json(diagnosis: Diagnosis, not_judged: NotJudged | None = None) -> str:
    from cudaresolve.output.findings import finding_dict, in_report_order

    env = diagnosis.environment

    counts = Counter(f.severity.value for f in diagnosis.findings)
    data = {
        "schema": SCHEMA,
        "host": diagnosis.host.to_dict(),
        "environment": {
            "python": env.target.python,
            "site_packages": list(env.target.site_packages),
            "distributions": [_distribution(d) for d in env.distributions],
            "elf_files": len(env.elf_files),
            "conda_prefix": env.conda.path if env.conda else None,
        },
        "counts": {s: counts.get(s, 0) for s in SEVERITIES},
        "fix_judging": {"judged": not_judged is None, "why_not": not_judged.value if not_judged else None},
        "findings": [finding_dict(f) for f in in_report_order(diagnosis.findings)],
        "libraries": [
            {
                "package": load.dist,
                "build": load.build.directory if load.build else None,
                "selected": load.selected,
                "preloader": load.preloader.name if load.preloader else None,
                "objects": [
                    {
                        "path": obj.path,
                        "needed": [
                            {"name": r.needed, "path": r.path, "step": r.step, "rpath_of": r.rpath_of}
                            for r in obj.needed
                        ],
                    }
                    for obj in _roots(env, load)
                ],
            }
            for load in diagnosis.loads
        ],
    }
    return json.dumps(data, indent=2) + "\n"
