"""What `cudaresolve lock` prints: the packages chosen with the one line that says why, and with
`--explain` every candidate set aside and its reason; the same as JSON (docs/lock.md); and what
`cudaresolve why NAME` reads back from a lock. The words are output/lock_words.py's.

May import: packaging, resolve/lock.py, resolve/targets.py, lockfile/reasons.py (the records' tables),
output/lock_words.py.
"""

from __future__ import annotations

import json
from typing import Any, Optional, Sequence

from packaging.utils import canonicalize_name

from cudaresolve.lockfile.reasons import major_rejection_table, plain, rejection_table
from cudaresolve.output import lock_words
from cudaresolve.output.lock_words import ENVIRONMENT, candidate
from cudaresolve.resolve.lock import Lock
from cudaresolve.resolve.reasons import Rejection
from cudaresolve.resolve.targets import LockTarget, target_marker

SCHEMA = 1


def render_text(lock: Lock, *, explain: bool, targets: Sequence[LockTarget] = ()) -> str:
    hosts = ", ".join(lock.host_labels)
    lines = [f"locked {len(lock.packages)} distributions for {hosts}:"]
    if len(targets) > 1:
        lines[0] = f"locked {len(lock.packages)} distributions for {len(targets)} targets:"
    if len(targets) > 1 or explain:
        lines[1:1] = [f"  target {target_words(t)}" for t in targets]
    pins = [f"{p.name}=={p.version}" for p in lock.packages]
    width = max((len(pin) for pin in pins), default=0)
    for pin, package in zip(pins, lock.packages):
        lines.append(f"  {pin:<{width}}  {lock_words.reason(package)}")
    if explain:
        for decision in lock.decisions:
            lines.append(f"{decision.name}: chose {candidate(decision.chosen) if decision.chosen else 'nothing'}")
            lines += [f"  {lock_words.rejection_line(r)}" for r in decision.rejected]
        if lock.major is not None:
            lines.append(f"{ENVIRONMENT}: chose CUDA {lock.major.chosen}")
            lines += [f"  CUDA {r.major}: {lock_words.major_rejection(r)}" for r in lock.major.rejected]
    return "\n".join(lines) + "\n"


def target_words(target: LockTarget) -> str:
    """A target in one line: machine, Python, glibc, and its hosts."""
    major, minor = target.python
    kind = f"{target.machine} (Jetson)" if target.tegra else target.machine
    glibc = "glibc %d.%d" % target.glibc if target.glibc else "glibc not known (manylinux2014 wheels, unless it is this machine)"
    return f"{kind}, Python {major}.{minor}, {glibc}: {', '.join(label for label, _ in target.hosts)}"


def target_json(target: LockTarget) -> dict[str, Any]:
    return {
        "machine": target.machine,
        "tegra": target.tegra,
        "python": "%d.%d" % target.python,
        "glibc": None if target.glibc is None else "%d.%d" % target.glibc,
        "hosts": [label for label, _ in target.hosts],
        "marker": target_marker(target),
    }


def render_json(lock: Lock, seconds: float, targets: Sequence[LockTarget] = ()) -> str:
    decisions: list[dict[str, Any]] = [
        {
            "name": d.name,
            "chosen": candidate(d.chosen) if d.chosen else None,
            "rejected": [
                {"candidate": candidate(r.candidate), "reason": lock_words.rejection(r), **rejection_table(r, dashes=False)}
                for r in d.rejected
            ],
        }
        for d in lock.decisions
    ]
    if lock.major is not None:
        decisions.append({
            "name": ENVIRONMENT,
            "chosen": f"CUDA {lock.major.chosen}",
            "rejected": [
                {"candidate": f"CUDA {r.major}", "reason": lock_words.major_rejection(r), **major_rejection_table(r, dashes=False)}
                for r in lock.major.rejected
            ],
        })
    document = {
        "schema": SCHEMA,
        "seconds": round(seconds, 3),
        "hosts": [{"label": label, "facts": facts} for label, facts in zip(lock.host_labels, lock.hosts)],
        "targets": [target_json(t) for t in targets],
        "index_urls": list(lock.index_urls),
        "requires_python": lock.requires_python,
        "packages": [
            {
                "name": p.name,
                "version": None if p.version is None else str(p.version),
                "index": p.index,
                "wheel": None if p.wheel is None else {"filename": p.wheel.filename, "url": p.wheel.url, "sha256": p.wheel.sha256, "size": p.wheel.size},
                "reason": lock_words.reason(p),
                "why": plain(p.reason, dashes=False),
                "provided_by": p.provided_by,
            }
            for p in lock.packages
        ],
        "decisions": decisions,
    }
    return json.dumps(document, indent=2) + "\n"


def render_why(lock: Lock, name: str) -> Optional[str]:
    """`cudaresolve why NAME`: the package's pin and reason, then its decision; None when absent."""
    if lock_words.is_environment(name):
        if lock.major is None:
            return None
        return "".join(f"  CUDA {r.major}: {lock_words.major_rejection(r)}\n" for r in lock.major.rejected)
    wanted = canonicalize_name(name)
    package = next((p for p in lock.packages if p.name == wanted), None)
    decision = next((d for d in lock.decisions if d.name == wanted), None)
    if package is None and decision is None:
        return None
    lines = []
    if package is not None:
        lines.append(f"{package.name}=={package.version}: {lock_words.reason(package)}")
    if decision is not None:
        lines += [f"  {lock_words.rejection_line(r)}" for r in decision.rejected]
    return "\n".join(lines) + "\n"


def render_fit(path: str, labels: Sequence[str], misfits: Sequence[Rejection]) -> str:
    """`lock --check` and `install --lock`: whether the lock at `path` fits the hosts, one line per misfit."""
    hosts = ", ".join(labels)
    if misfits:
        return f"{path} does not fit {hosts}:\n" + "".join(f"  {lock_words.rejection_line(r)}\n" for r in misfits)
    return f"{path} fits {hosts}: every locked CUDA build runs on its driver and GPUs\n"
