"""What `cudaresolve lock` prints: the packages chosen with the one line that says why, and with
`--explain` every candidate set aside and its reason; or the same as JSON (docs/lock.md)."""

from __future__ import annotations

import json
from typing import Optional

from packaging.utils import canonicalize_name

from cudaresolve.resolve.lock import Lock

SCHEMA = 1


def render_text(lock: Lock, *, explain: bool) -> str:
    hosts = ", ".join(lock.host_labels)
    lines = [f"locked {len(lock.packages)} distributions for {hosts}:"]
    width = max((len(f"{p.name}=={p.version}") for p in lock.packages), default=0)
    for package in lock.packages:
        pin = f"{package.name}=={package.version}"
        lines.append(f"  {pin:<{width}}  {package.reason}")
    if explain:
        for decision in lock.decisions:
            lines.append(f"{decision.name}: chose {decision.chosen or 'nothing'}")
            lines += [f"  {label}: {reason}" for label, reason in decision.rejected]
    return "\n".join(lines) + "\n"


def render_json(lock: Lock, seconds: float) -> str:
    document = {
        "schema": SCHEMA,
        "seconds": round(seconds, 3),
        "hosts": [{"label": label, "facts": facts} for label, facts in zip(lock.host_labels, lock.hosts)],
        "index_urls": list(lock.index_urls),
        "requires_python": lock.requires_python,
        "packages": [
            {
                "name": p.name,
                "version": p.version,
                "index": p.index,
                "wheel": None if p.wheel is None else {"filename": p.wheel.filename, "url": p.wheel.url, "sha256": p.wheel.sha256, "size": p.wheel.size},
                "reason": p.reason,
                "provided_by": p.provided_by,
            }
            for p in lock.packages
        ],
        "decisions": [
            {"name": d.name, "chosen": d.chosen, "rejected": [{"candidate": c, "reason": r} for c, r in d.rejected]}
            for d in lock.decisions
        ],
    }
    return json.dumps(document, indent=2) + "\n"


def render_why(lock: Lock, name: str) -> Optional[str]:
    """`cudaresolve why NAME`: the package's pin and reason, then its decision; None when absent."""
    wanted = canonicalize_name(name)
    package = next((p for p in lock.packages if canonicalize_name(p.name) == wanted), None)
    decision = next((d for d in lock.decisions if canonicalize_name(d.name) == wanted), None)
    if package is None and decision is None:
        return None
    lines = []
    if package is not None:
        lines.append(f"{package.name}=={package.version}: {package.reason}")
    if decision is not None:
        lines += [f"  {label}: {reason}" for label, reason in decision.rejected]
    return "\n".join(lines) + "\n"
