"""What `cudaresolve lock` prints: the packages chosen with the one line that says why, and with
`--explain` every candidate set aside and its reason; the same as JSON (docs/lock.md); and what
`cudaresolve why NAME` reads back from a lock; with --json, a refusal and an error as one JSON
document too (the causes typed, as the doctor's findings are). The words are output/lock_words.py's.

May import: packaging, errors, resolve/ (lock, targets, causes, reasons, check: the checks skipped),
lockfile/reasons.py (the records' tables), lockfile/select.py (its refusals), lockfile/explain.py
(why's paths), output/ (lock_words, findings, fixes, progress: counted).
"""

from __future__ import annotations

import json
from typing import Any, Optional, Sequence, Union

from packaging.utils import canonicalize_name

from cudaresolve.errors import CudaresolveError
from cudaresolve.lockfile import explain
from cudaresolve.lockfile.reasons import major_rejection_table, plain, rejection_table
from cudaresolve.lockfile.select import NoFittingWheel, Unfit
from cudaresolve.output import lock_words
from cudaresolve.output.findings import finding_dict
from cudaresolve.output.fixes import render_fix
from cudaresolve.output.lock_words import ENVIRONMENT, candidate
from cudaresolve.output.progress import counted
from cudaresolve.resolve.causes import Cause, Conflict, GaveUp, NoProvider, NoSolution, Refused, TooDeep, Unsatisfiable
from cudaresolve.resolve.check import Skipped
from cudaresolve.resolve.lock import Fork, Lock, LockedPackage, LockedSdist, LockedWheel, Reason, ReasonKind
from cudaresolve.resolve.reasons import MajorRejection, Need, NeedsSetAside, Origin, Rejection
from cudaresolve.resolve.targets import LockTarget, target_marker

SCHEMA = 1


def render_text(lock: Lock, *, explain: bool, targets: Sequence[LockTarget] = ()) -> str:
    hosts = ", ".join(lock.host_labels)
    lines = [f"locked {counted(len(lock.packages), 'distribution')} for {hosts}:"]
    if len(targets) > 1:
        lines[0] = f"locked {counted(len(lock.packages), 'distribution')} for {len(targets)} targets:"
    if len(targets) > 1 or explain:
        lines[1:1] = [f"  target {target_words(t)}" for t in targets]
    pins = [f"{p.name}=={p.version}" + (f" ; {p.marker}" if p.marker and lock.environments else "") for p in lock.packages]
    width = max((len(pin) for pin in pins), default=0)
    passed_over = {d.name: r for d in lock.decisions for r in d.rejected if isinstance(r.evidence, NeedsSetAside)}
    for pin, package in zip(pins, lock.packages):
        said = lock_words.reason(package)
        if package.name in passed_over and not explain:  # why not the release pip takes, said once
            said += f"; not {passed_over[package.name].candidate.version}: {lock_words.rejection(passed_over[package.name])}"
        lines.append(f"  {pin:<{width}}  {said}")
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
                "sdist": None if p.sdist is None else _wheel_json(p.sdist),
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
            "message": lock_words.no_solution(exc, whole=True),
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


def _wheel_json(file: Union[LockedWheel, LockedSdist]) -> dict[str, Any]:
    return {"filename": file.filename, "url": file.url, "sha256": file.sha256, "size": file.size}


def render_why(lock: Lock, name: str) -> Optional[str]:
    """`cudaresolve why NAME`: each entry NAME means (the distribution, or those asked for as NAME)
    with its pin and reason, the path from what was asked for to it, then the candidates set aside;
    None when absent. In a universal lock, each entry with its marker, each decision with its
    targets', and the fork."""
    if lock_words.is_environment(name):
        majors = (lock.major,) if lock.major is not None else lock.majors
        if not majors:
            return None
        return "".join(
            (f"CUDA {m.chosen} for {m.marker}:\n" if m.marker else "") + "".join(f"  CUDA {r.major}: {lock_words.major_rejection(r)}\n" for r in m.rejected)
            for m in majors
        )
    packages = explain.entries(lock, name)
    names = {p.name for p in packages} or {canonicalize_name(name)}
    decisions = [d for d in lock.decisions if d.name in names]
    if not packages and not decisions:
        return None
    lines = []
    for package in packages:
        where = f" ; {package.marker}" if package.marker and lock.environments else ""
        lines.append(f"{package.name}=={package.version}{where}: {lock_words.reason(package)}")
        lines += _branch_lines(explain.paths(lock, package), package, 1)
    if any(d.rejected for d in decisions):
        lines.append("set aside:")
    for decision in decisions:
        if decision.marker:
            lines.append(f"  for {decision.marker}:")
        lines += [f"  {lock_words.rejection_line(r)}" for r in decision.rejected]
    lines += [fork_line(fork) for fork in lock.forks if fork.name in names]
    return "\n".join(lines) + "\n"


def _branch_lines(branches: Sequence[explain.Branch], entry: LockedPackage, depth: int) -> list[str]:
    lines = []
    for branch in branches:
        cut = " (followed no further)" if branch.cut else ""
        lines.append("  " * depth + lock_words.origin_step(branch.origin, entry) + cut)
        if branch.parent is not None:
            lines += _branch_lines(branch.up, branch.parent, depth + 1)
    return lines


def render_why_json(lock: Lock, name: str, path: str) -> Optional[str]:
    """`why NAME --json`: the same answer as one JSON document (docs/lock.md); None when absent."""
    if lock_words.is_environment(name):
        majors = (lock.major,) if lock.major is not None else lock.majors
        if not majors:
            return None
        document: dict[str, Any] = {"schema": SCHEMA, "lock": path, "asked": name, "majors": [
            {"chosen": m.chosen, "marker": m.marker, "rejected": [
                {"candidate": f"CUDA {r.major}", "reason": lock_words.major_rejection(r), **major_rejection_table(r, dashes=False)}
                for r in m.rejected]}
            for m in majors]}
        return json.dumps(document, indent=2) + "\n"
    packages = explain.entries(lock, name)
    names = {p.name for p in packages} or {canonicalize_name(name)}
    decisions = [d for d in lock.decisions if d.name in names]
    if not packages and not decisions:
        return None
    document = {
        "schema": SCHEMA,
        "lock": path,
        "asked": name,
        "packages": [
            {
                "name": p.name,
                "version": None if p.version is None else str(p.version),
                "marker": p.marker,
                "reason": lock_words.reason(p),
                "why": plain(p.reason, dashes=False),
                "paths": [_branch_json(b, p) for b in explain.paths(lock, p)],
            }
            for p in packages
        ],
        "decisions": [
            {
                "name": d.name,
                "marker": d.marker,
                "chosen": candidate(d.chosen) if d.chosen else None,
                "rejected": [
                    {"candidate": candidate(r.candidate), "reason": lock_words.rejection(r), **rejection_table(r, dashes=False)}
                    for r in d.rejected
                ],
            }
            for d in decisions
        ],
    }
    return json.dumps(document, indent=2) + "\n"


def _branch_json(branch: explain.Branch, entry: LockedPackage) -> dict[str, Any]:
    parent = branch.parent
    return {
        "step": lock_words.origin_step(branch.origin, entry),
        "origin": plain(Reason(ReasonKind.INDEX, (branch.origin,)), dashes=False)["origins"][0],
        "parent": None if parent is None else {"name": parent.name, "version": None if parent.version is None else str(parent.version)},
        "cut": branch.cut,
        "up": [] if parent is None else [_branch_json(b, parent) for b in branch.up],
    }


def render_fit(
    path: str, labels: Sequence[str], misfits: Sequence[Rejection], unfit: Sequence[Unfit] = (),
    majors: Sequence[MajorRejection] = (), skipped: Sequence[tuple[str, Sequence[Skipped]]] = (),
) -> str:
    """`lock --check` and `install --lock`: whether the lock at `path` fits the hosts, one line per
    misfit: a build that does not run, a CUDA major a host cannot run, a wheel the target cannot
    install, a target the lock is not for; then each check skipped for a host that does not state
    what it judges."""
    hosts = ", ".join(labels)
    lines = skipped_lines(skipped)
    if misfits or unfit or majors:
        found = ([unfit_line(u) for u in unfit] + [f"CUDA {m.major}: {lock_words.major_rejection(m)}" for m in majors]
                 + [lock_words.rejection_line(r) for r in misfits])
        return f"{path} does not fit {hosts}:\n" + "".join(f"  {line}\n" for line in found + [f"not checked: {x}" for x in lines])
    if lines:
        return (f"{path} fits {hosts} as far as it states: every entry has a wheel for its tags, and every check "
                "it allows passed; not checked:\n" + "".join(f"  {line}\n" for line in lines))
    return f"{path} fits {hosts}: every entry has a wheel for its tags, and every locked CUDA build runs on its driver and GPUs\n"


_SKIPPED = {
    Skipped.DRIVER: "the driver floors (no driver known: give --driver or --cuda)",
    Skipped.GPUS: "the device code for its GPUs (no GPU known: give --gpu)",
}


def skipped_lines(skipped: Sequence[tuple[str, Sequence[Skipped]]]) -> list[str]:
    """One line per check skipped, with the hosts it was skipped for when several are judged."""
    several = len(skipped) > 1
    by_check: dict[Skipped, list[str]] = {}
    for label, checks in skipped:
        for check in checks:
            by_check.setdefault(check, []).append(label)
    return [_SKIPPED[check] + (f" for {', '.join(labels)}" if several else "") for check, labels in by_check.items()]


def render_fit_json(
    path: str, labels: Sequence[str], misfits: Sequence[Rejection], unfit: Sequence[Unfit],
    majors: Sequence[MajorRejection], skipped: Sequence[tuple[str, Sequence[Skipped]]],
) -> str:
    """`lock --check --json`: the same answer as one JSON document (docs/lock.md)."""
    document = {
        "schema": SCHEMA,
        "lock": path,
        "hosts": list(labels),
        "fits": not (misfits or unfit or majors),
        "misfits": [
            {"candidate": candidate(r.candidate), "reason": lock_words.rejection(r), **rejection_table(r, dashes=False)}
            for r in misfits
        ],
        "majors": [
            {"candidate": f"CUDA {m.major}", "reason": lock_words.major_rejection(m), **major_rejection_table(m, dashes=False)}
            for m in majors
        ],
        "unfit": [unfit_line(u) for u in unfit],
        "skipped": [{"host": label, "checks": [check.value for check in checks]} for label, checks in skipped if checks],
    }
    return json.dumps(document, indent=2) + "\n"


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
