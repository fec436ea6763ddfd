"""What `cudaresolve lock` prints: the packages chosen with the one line that says why, and with
`--explain` every candidate set aside and its reason; the same as JSON (docs/lock.md); and what
`cudaresolve why NAME` reads back from a lock; with --json, a refusal and an error as one JSON
document too (the causes typed, as the doctor's findings are). The words are output/lock_words.py's.

May import: packaging, errors, resolve/ (lock, targets, causes, reasons), lockfile/reasons.py (the
records' tables), lockfile/select.py (its refusals), output/ (lock_words, findings, fixes).
"""

from __future__ import annotations

import json
from typing import Any, Optional, Sequence

from packaging.utils import canonicalize_name

from cudaresolve.errors import CudaresolveError
from cudaresolve.lockfile.reasons import major_rejection_table, plain, rejection_table
from cudaresolve.lockfile.select import NoFittingWheel, Unfit
from cudaresolve.output import lock_words
from cudaresolve.output.findings import finding_dict
from cudaresolve.output.fixes import render_fix
from cudaresolve.output.lock_words import ENVIRONMENT, candidate
from cudaresolve.resolve.causes import Cause, Conflict, GaveUp, NoProvider, NoSolution, Refused, TooDeep, Unsatisfiable
from cudaresolve.resolve.lock import Fork, Lock, LockedWheel
from cudaresolve.resolve.reasons import MajorRejection, Need, Origin, Rejection
from cudaresolve.resolve.targets import LockTarget, target_marker

SCHEMA = 1


def render_text(lock: Lock, *, explain: bool, targets: Sequence[LockTarget] = ()) -> str:
    hosts = ", ".join(lock.host_labels)
    lines = [f"locked {len(lock.packages)} distributions for {hosts}:"]
    if len(targets) > 1:
        lines[0] = f"locked {len(lock.packages)} distributions for {len(targets)} targets:"
    if len(targets) > 1 or explain:
        lines[1:1] = [f"  target {target_words(t)}" for t in targets]
    pins = [f"{p.name}=={p.version}" + (f" ; {p.marker}" if p.marker and lock.environments else "") for p in lock.packages]
    width = max((len(pin) for pin in pins), default=0)
    for pin, package in zip(pins, lock.packages):
        lines.append(f"  {pin:<{width}}  {lock_words.reason(package)}")
    if explain:
        for decision in lock.decisions:
            chose = candidate(decision.chosen) if decision.chosen else "nothing"
            lines.append(f"{decision.name}: chose {chose}" + (f" for {decision.marker}" if decision.marker else ""))
            lines += [f"  {lock_words.rejection_line(r)}" for r in decision.rejected]
        for major in (lock.major,) if lock.major is not None else lock.majors:
            lines.append(f"{ENVIRONMENT}: chose CUDA {major.chosen}" + (f" for {major.marker}" if major.marker else ""))
            lines += [f"  CUDA {r.major}: {lock_words.major_rejection(r)}" for r in major.rejected]
        lines += [fork_line(fork) for fork in lock.forks]
    return "\n".join(lines) + "\n"


def fork_line(fork: Fork) -> str:
    """`numpy forks: 2.2.6 for python_version == "3.10", 2.3.1 for python_version == "3.11"`: a name
    a universal lock pins differently per target, each version with the targets that got it."""
    by_version: dict[str, list[str]] = {}
    for marker, version in fork.versions:
        by_version.setdefault("not needed" if version is None else str(version), []).append(marker)
    said = [f"{version} for {' or '.join(markers)}" for version, markers in by_version.items()]
    return f"{fork.name} forks: " + ", ".join(said)




def target_words(target: LockTarget) -> str:
    """A target in one line: machine, Python, glibc, and its hosts."""
    major, minor = target.python
    kind = f"{target.machine} (Jetson)" if target.tegra else target.machine
    glibc = "glibc %d.%d" % target.glibc if target.glibc else "glibc not known (manylinux2014 wheels, unless it is this machine)"
    hosts = ", ".join(label for label, _ in target.hosts)
    if target.host_count > len(target.hosts):
        classes = f"{len(target.hosts)} class{'es' if len(target.hosts) != 1 else ''}"
        hosts += f" ({target.host_count} hosts folded into {classes}, each resolved once)"
    return f"{kind}, Python {major}.{minor}, {glibc}: {hosts}"


def target_json(target: LockTarget) -> dict[str, Any]:
    return {
        "machine": target.machine,
        "tegra": target.tegra,
        "python": "%d.%d" % target.python,
        "glibc": None if target.glibc is None else "%d.%d" % target.glibc,
        "hosts": [label for label, _ in target.hosts],
        "host_count": target.host_count,
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
        "environments": list(lock.environments),
        "forks": [
            {"name": f.name, "versions": [{"marker": m, "version": None if v is None else str(v)} for m, v in f.versions]}
            for f in lock.forks
        ],
        "packages": [
            {
                "name": p.name,
                "version": None if p.version is None else str(p.version),
                "index": p.index,
                "wheel": None if not p.wheels else _wheel_json(p.wheels[0]),
                "wheels": [_wheel_json(wheel) for wheel in p.wheels],
                "marker": p.marker,
                "reason": lock_words.reason(p),
                "why": plain(p.reason, dashes=False),
                "provided_by": p.provided_by,
            }
            for p in lock.packages
        ],
        "decisions": decisions,
    }
    return json.dumps(document, indent=2) + "\n"


def render_error_json(exc: CudaresolveError) -> str:
    """`lock --json` and `install --dry-run --json` that stop: one document still, `refused` with
    the typed causes when no set fits (exit 2), `error` with the message when the command could not
    run (exit 3)."""
    document: dict[str, Any] = {"schema": SCHEMA, "exit_code": exc.exit_code}
    if isinstance(exc, NoSolution):
        document["refused"] = {
            "message": lock_words.no_solution(exc),
            "attempts": [{"cuda_major": a.major, "causes": [_cause_json(c) for c in a.causes]} for a in exc.attempts],
            "fleet_conflict": None if exc.conflict is None else [
                {"host": h.host, "runs": list(h.runs), "refused": [_major_json(r) for r in h.refused]}
                for h in exc.conflict.hosts
            ],
            "untried": [_major_json(r) for r in exc.untried],
        }
    else:
        document["error"] = {"message": str(exc)}
    return json.dumps(document, indent=2) + "\n"


def _cause_json(cause: Cause) -> dict[str, Any]:
    """One cause: `type` names its dataclass, `reason` is the line the text report prints."""
    found: dict[str, Any] = {"type": type(cause).__name__, "reason": lock_words.cause(cause)}
    if isinstance(cause, Unsatisfiable):
        found.update(
            requirement=str(cause.requirement), origin=_origin_json(cause.origin),
            rejections=[_rejection_json(r) for r in cause.rejections],
            conda=None if cause.conda is None else {
                "package": cause.conda.package, "specifier": cause.conda.specifier,
                "fix": None if cause.conda.fix is None else render_fix(cause.conda.fix),
            },
            constraints=[_need_json(n) for n in cause.constraints],
        )
    elif isinstance(cause, Conflict):
        found.update(name=cause.name, needs=[_need_json(n) for n in cause.needs],
                     constraints=[_need_json(n) for n in cause.constraints])
    elif isinstance(cause, Refused):
        found.update(host=cause.host, finding=finding_dict(cause.finding))
    elif isinstance(cause, NoProvider):
        found.update(consumer=candidate(cause.consumer), file=cause.file, soname=cause.soname, cuda_major=cause.cuda_major,
                     other_majors=[{"cuda_major": major, "wheel": dist} for major, dist in cause.other_majors])
    elif isinstance(cause, GaveUp):
        found.update(sets=cause.sets, last=finding_dict(cause.last))
    else:
        assert isinstance(cause, TooDeep)
        found.update(limit=cause.limit, bound=cause.bound.value, conflict=[_cause_json(c) for c in cause.conflict])
    return found


def _need_json(need: Need) -> dict[str, Any]:
    return {"requirement": str(need.requirement), "origin": _origin_json(need.origin)}


def _origin_json(origin: Origin) -> dict[str, Any]:
    return {"kind": origin.kind.value, **plain(origin, dashes=False)}


def _rejection_json(rejection: Rejection) -> dict[str, Any]:
    return {"candidate": candidate(rejection.candidate), "reason": lock_words.rejection(rejection),
            **rejection_table(rejection, dashes=False)}


def _major_json(rejection: MajorRejection) -> dict[str, Any]:
    return {"reason": lock_words.major_rejection(rejection), **major_rejection_table(rejection, dashes=False)}


def _wheel_json(wheel: LockedWheel) -> dict[str, Any]:
    return {"filename": wheel.filename, "url": wheel.url, "sha256": wheel.sha256, "size": wheel.size}


def render_why(lock: Lock, name: str) -> Optional[str]:
    """`cudaresolve why NAME`: the package's pin and reason, then its decision; None when absent. In
    a universal lock, each entry of the name with its marker, each decision with its targets', and
    the fork."""
    if lock_words.is_environment(name):
        majors = (lock.major,) if lock.major is not None else lock.majors
        if not majors:
            return None
        return "".join(
            (f"CUDA {m.chosen} for {m.marker}:\n" if m.marker else "") + "".join(f"  CUDA {r.major}: {lock_words.major_rejection(r)}\n" for r in m.rejected)
            for m in majors
        )
    wanted = canonicalize_name(name)
    packages = [p for p in lock.packages if p.name == wanted]
    decisions = [d for d in lock.decisions if d.name == wanted]
    if not packages and not decisions:
        return None
    lines = []
    for package in packages:
        where = f" ; {package.marker}" if package.marker and lock.environments else ""
        lines.append(f"{package.name}=={package.version}{where}: {lock_words.reason(package)}")
    for decision in decisions:
        if decision.marker:
            lines.append(f"  for {decision.marker}:")
        lines += [f"  {lock_words.rejection_line(r)}" for r in decision.rejected]
    lines += [fork_line(fork) for fork in lock.forks if fork.name == wanted]
    return "\n".join(lines) + "\n"


def render_fit(path: str, labels: Sequence[str], misfits: Sequence[Rejection], unfit: Sequence[Unfit] = ()) -> str:
    """`lock --check` and `install --lock`: whether the lock at `path` fits the hosts, one line per
    misfit: a build that does not run, a wheel the target cannot install, a target the lock is not for."""
    hosts = ", ".join(labels)
    if misfits or unfit:
        lines = [unfit_line(u) for u in unfit] + [lock_words.rejection_line(r) for r in misfits]
        return f"{path} does not fit {hosts}:\n" + "".join(f"  {line}\n" for line in lines)
    return f"{path} fits {hosts}: every entry has a wheel for its tags, and every locked CUDA build runs on its driver and GPUs\n"


_TAGS_SHOWN = 3  # the target's most preferred tags, named in a refusal


def unfit_line(unfit: Unfit) -> str:
    """One refusal of a target's selection, e.g. `cupy-cuda12x 13.6.0: no wheel for gh200.json
    (tags cp312-cp312-manylinux_2_39_aarch64, ...): the lock has ...x86_64.whl`."""
    if isinstance(unfit, NoFittingWheel):
        tags = ", ".join(str(tag) for tag in unfit.tags[:_TAGS_SHOWN]) + (", ..." if len(unfit.tags) > _TAGS_SHOWN else "")
        return (f"{unfit.name} {unfit.version}: no wheel for {unfit.target} (tags {tags or 'none'}): "
                f"the lock has {', '.join(unfit.filenames)}")
    return (f"{unfit.target} (Python {unfit.python}, {unfit.machine or 'unknown machine'}): not a target of the lock, "
            f"whose {unfit.field} is {unfit.value}")
