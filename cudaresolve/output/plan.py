"""What `cudaresolve install` shows: the plan before pip runs, and, when pip fails, the state pip left.

May import: packaging, resolve/plan.py, lockfile/reasons.py (the records' tables), output/ (lock_words, progress).
"""

from __future__ import annotations

import json
import shlex
from typing import Any, Mapping, Optional, Sequence

from packaging.version import Version

from cudaresolve.lockfile.reasons import plain, rejection_table
from cudaresolve.output.lock_words import grounds, reason, rejection
from cudaresolve.output.progress import megabytes
from cudaresolve.resolve.plan import Change


def render_plan(changes: Sequence[Change], command: Optional[Sequence[str]], requirements: str = "") -> str:
    """One line per distribution (what happens, the versions, why, where from; under it each newer
    release not taken because it would break a distribution that stays), the download size,
    and with `command` (a dry run) the exact pip command line and the requirements file it reads."""
    touched = [c for c in changes if c.touches]
    lines = [f"plan: {len(touched)} to install, {len(changes) - len(touched)} kept"]
    width = max((len(c.name) for c in changes), default=0)
    for change in changes:
        versions = change.locked if change.installed in (None, change.locked) else f"{change.installed} -> {change.locked}"
        index = change.package.index
        where = f" [{index}]" if change.touches and index else ""
        lines.append(f"  {change.kind:<9} {change.name:<{width}} {versions}: {reason(change.package)}{where}")
        lines += [f"  {'':<9} {'':<{width}} not {rejection.candidate.version}: {grounds(rejection.evidence, rejection.candidate)}"
                  for rejection in change.breaks_installed]
    lines.append(f"download: {megabytes(sum(c.download for c in changes))}")
    if command is not None:
        lines.append("dry run; pip would run: " + shlex.join(command))
        lines.append("with the requirements file:")
        lines += [f"    {line}" for line in requirements.splitlines()]
    return "\n".join(lines) + "\n"


SCHEMA = 1


def render_plan_json(changes: Sequence[Change], command: Sequence[str], requirements: str) -> str:
    """`install --dry-run --json`: the plan as one JSON document (docs/install.md), the same facts as
    render_plan's lines."""
    document: dict[str, Any] = {
        "schema": SCHEMA,
        "changes": [
            {
                "name": c.name, "kind": c.kind, "installed": None if c.installed is None else str(c.installed),
                "locked": str(c.locked), "index": c.package.index, "download": c.download,
                "reason": reason(c.package), "why": plain(c.package.reason, dashes=False),
                "breaks_installed": [{"reason": rejection(r), **rejection_table(r, dashes=False)} for r in c.breaks_installed],
            }
            for c in changes
        ],
        "download": sum(c.download for c in changes),
        "pip_command": list(command),
        "requirements": requirements,
    }
    return json.dumps(document, indent=2) + "\n"


def render_state(changes: Sequence[Change], after: Mapping[str, Version], code: int) -> str:
    """After pip failed: which planned changes are in place and which are not, so the user knows
    what the environment holds now (pip stops at the first failure; what it installed stays)."""
    done = [c for c in changes if c.touches and after.get(c.name) == c.locked]
    missing = [c for c in changes if c.touches and after.get(c.name) != c.locked]
    lines = [f"pip exited with status {code}: {len(done)} of {len(done) + len(missing)} planned changes are in place"]
    lines += [f"  in place: {c.name} {c.locked}" for c in done]
    lines += [f"  not done: {c.name} {c.locked} (installed now: {after.get(c.name) or 'nothing'})" for c in missing]
    if not done:
        lines.append("the environment is as it was before")
    return "\n".join(lines) + "\n"
