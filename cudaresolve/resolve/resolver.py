"""`lock`: choose versions and variants with resolvelib, then judge the planned environment with the
doctor's own checks on every host; a set the judge refuses is resolved again without the refused
candidate, so lock -> install -> doctor is clean by construction.

Only errors that the plan brings count: an error the installed environment already has is not the
lock's doing (the doctor reports it), and refusing every set for it would help no one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version
from resolvelib import BaseReporter, ResolutionImpossible, ResolutionTooDeep, Resolver

from cudaresolve import __version__
from cudaresolve.checks import judge
from cudaresolve.checks.builds import component_builds
from cudaresolve.checks.findings import Check, Finding, Severity
from cudaresolve.checks.problems import KnownBadRelease
from cudaresolve.checks.suggest import conda_fix
from cudaresolve.env.environment import Environment
from cudaresolve.errors import CudaresolveError
from cudaresolve.host.facts import HostFacts
from cudaresolve.index.access import PackageIndex
from cudaresolve.knowledge import components, cupy
from cudaresolve.output.findings import shown  # a refusal still worded here, until it is a record
from cudaresolve.output.fixes import render_fix
from cudaresolve.resolve.fit import environment_majors, fleet_conflict, major_rejections
from cudaresolve.resolve.candidates import Candidate, CandidateFinder
from cudaresolve.resolve.conda import conda_providers
from cudaresolve.resolve.lock import Decision, Lock, LockedPackage, LockedWheel
from cudaresolve.resolve.needs import installed_binary_requirements
from cudaresolve.resolve.planned import planned_environment
from cudaresolve.resolve.provider import Provider, root_requirements

ENVIRONMENT = "CUDA major"  # the --explain entry for the environment's one CUDA major
MAX_JUDGED = 25  # sets the judge may refuse before the lock gives up
MAX_ROUNDS = 2000  # resolvelib rounds per resolution


class NoSolution(CudaresolveError):
    """No set of wheels fits the requirements and the hosts: exit 2, "problems found"."""

    exit_code = 2


@dataclass(frozen=True)
class LockRequest:
    requirements: tuple[str, ...]
    constraints: tuple[str, ...] = ()
    upgrade: bool = False
    allow_advisories: tuple[str, ...] = ()
    deep: bool = False  # judge every chosen wheel's own ELF files (downloading those the table lacks)


def lock(
    request: LockRequest,
    installed: Environment,
    hosts: Sequence[tuple[str, HostFacts]],
    index: PackageIndex,
    *,
    progress: Optional[Callable[[str], None]] = None,
) -> Lock:
    """The lock for `request` on every host of `hosts`, or NoSolution naming what is in conflict.

    One CUDA major per environment: the majors every host can run are tried newest first (a conda
    prefix's `cuda-version` major first, then the installed components' major, when they have one),
    and within one try every candidate built for another major is set aside. An abstract `cupy`
    becomes that major's CuPy wheel, and a package with per-major extras asked for without one gets
    that major's extra. In a conda prefix, conda's CUDA libraries stand for their wheels
    (resolve/conda.py)."""
    markers = installed.target.marker_environment() or {}
    kept = {d.name: d for d in installed.distributions if d.kind != "conda"}
    requested = root_requirements(request.requirements, markers)
    pin = installed.conda.cuda() if installed.conda else None
    finder = CandidateFinder(
        index, hosts, kept, upgrade=request.upgrade, machine=installed.loader.machine,
        conda=conda_providers(installed), asked=frozenset(canonicalize_name(r.name) for r in requested), cuda_pin=pin,
    )
    binary_needs = installed_binary_requirements((e.owner, e.facts) for e in installed.elf_files if e.facts is not None)
    binary = [requirement for requirement, _ in binary_needs]
    notes_for_needs = {canonicalize_name(r.name): why for r, why in binary_needs}
    finder.prefetch([r.name for r in requested + binary])
    baseline = {_key(f) for _, host in hosts for f in judge(installed, host).findings if _refuses(f)}
    installed_majors = {b.cuda.major for b in component_builds(installed.distributions)}
    prefix_major = pin.major if pin else None
    majors = sorted(environment_majors(hosts), key=lambda m: (m != prefix_major, m not in installed_majors, -m)) or [None]
    for major, why in major_rejections(hosts):
        finder.rejections.add(ENVIRONMENT, f"CUDA {major}", why)
    failures = []
    for major in majors:
        finder.major = major
        roots, notes = for_major(requested, major)
        notes = {**notes_for_needs, **notes}
        try:
            return _lock_once(request, installed, hosts, index, finder, roots + binary, notes, baseline, markers, progress)
        except NoSolution as exc:
            failures.append((major, exc))
    conflict = fleet_conflict(hosts)
    if len(failures) == 1 or len({_without_majors(str(exc)) for _, exc in failures}) == 1:
        if conflict:
            raise NoSolution(f"{conflict}\n{failures[0][1]}")
        raise failures[0][1]
    raise NoSolution("\n".join(f"with CUDA {major}: {exc}" for major, exc in failures))


def _without_majors(text: str) -> str:
    """A failure's text with the per-major remarks cut, to tell whether the majors failed alike."""
    return "; ".join(part for part in text.split("; ") if "the environment is CUDA" not in part)


def for_major(requirements: Sequence[Requirement], major: Optional[int]) -> tuple[list[Requirement], dict[str, str]]:
    """The requirements for an environment of CUDA `major`, and a note per rewritten name."""
    rewritten, notes = [], {}
    for requirement in requirements:
        name = canonicalize_name(requirement.name)
        if major is None:
            rewritten.append(requirement)
        elif name == "cupy" and cupy.dist_for_cuda_major(major):
            real = canonicalize_name(cupy.dist_for_cuda_major(major))
            text = str(requirement).replace(requirement.name, real, 1)
            rewritten.append(Requirement(text))
            notes[real] = f"asked for as {requirement.name}: CuPy's wheel for the environment's CUDA {major}"
        elif components.per_major_extras(name) and not (set(requirement.extras) & components.per_major_extras(name)):
            extra = components.per_major_extra(name, major)
            if extra is None:
                rewritten.append(requirement)
                continue
            changed = Requirement(str(requirement))
            changed.extras = set(requirement.extras) | {extra}
            rewritten.append(changed)
            notes[name] = f"asked for without a CUDA extra: [{extra}] for the environment's CUDA {major}"
        else:
            rewritten.append(requirement)
    return rewritten, notes


def _lock_once(
    request: LockRequest,
    installed: Environment,
    hosts: Sequence[tuple[str, HostFacts]],
    index: PackageIndex,
    finder: CandidateFinder,
    roots: list[Requirement],
    notes: dict[str, str],
    baseline: set,
    markers: dict,
    progress: Optional[Callable[[str], None]],
) -> Lock:
    excluded: set[tuple[str, str]] = set()
    refused: list[Finding] = []
    for _ in range(MAX_JUDGED):
        constraints = root_requirements(request.constraints, markers)
        provider = Provider(finder, index, markers, excluded, constraints)
        chosen = _resolve(provider, roots, finder, installed)
        if progress:
            progress(f"judging {len(chosen)} distributions on {len(hosts)} host(s)")
        plan = planned_environment(installed, chosen.values(), index, deep=request.deep)
        problems = [
            (label, finding)
            for label, host in hosts
            for finding in judge(plan, host).findings
            if _refuses(finding) and _key(finding) not in baseline and not _allowed(finding, request.allow_advisories)
        ]
        if not problems:
            found = {name: "; ".join(reasons) for name, reasons in provider.binary_reasons.items() if name in chosen}
            return _as_lock(chosen, finder, hosts, index, markers, {**found, **notes})
        for label, finding in problems:
            culprit = chosen.get(finding.subject.distribution) if finding.subject.distribution else None
            text = shown(finding)
            if culprit is None or culprit.file is None:
                where = f" on {label}" if len(hosts) > 1 else ""
                raise NoSolution(f"{text.subject}: {text.message}{where}" + (f"; fix: {text.fix}" if text.fix else ""))
            excluded.add((culprit.name, str(culprit.version)))
            refused.append(finding)
            finder.rejections.add(culprit.name, culprit.label, f"{text.check}: {text.message}")
    raise NoSolution(f"gave up after {MAX_JUDGED} sets refused by the checks; the last: {shown(refused[-1]).message}")


def _resolve(provider: Provider, roots: list[Requirement], finder: CandidateFinder, installed: Environment) -> dict[str, Candidate]:
    try:
        result = Resolver(provider, BaseReporter()).resolve(roots, max_rounds=MAX_ROUNDS)
    except ResolutionImpossible as exc:
        raise NoSolution(_explain_impossible(exc, finder, installed)) from None
    except ResolutionTooDeep:
        raise NoSolution(f"no set found within {MAX_ROUNDS} resolution rounds") from None
    return {c.name: c for identifier, c in result.mapping.items() if "[" not in identifier}


def _explain_impossible(exc: ResolutionImpossible, finder: CandidateFinder, installed: Environment) -> str:
    """One line per requirement in conflict, with why its candidates were set aside (first, when a
    conda package stands for the wheel, why it does not fit and the conda command that would)."""
    lines = []
    for cause in exc.causes:
        requirement, parent = cause.requirement, cause.parent
        who = f" (required by {parent.label})" if parent is not None else ""
        name = canonicalize_name(requirement.name)
        reasons = _conda_reasons(requirement, finder, installed) + [
            f"{label}: {why}"
            for label, why in finder.rejected(name)
            if " " not in label or requirement.specifier.contains(Version(label.split(" ")[1]), prereleases=True)
        ]
        line = f"nothing fits {requirement}{who}"
        if reasons:
            line += "; " + "; ".join(reasons[:4]) + (f"; and {len(reasons) - 4} more" if len(reasons) > 4 else "")
        lines.append(line)
    return "\n".join(dict.fromkeys(lines))


def _conda_reasons(requirement: Requirement, finder: CandidateFinder, installed: Environment) -> list[str]:
    provider = finder.conda.get(canonicalize_name(requirement.name))
    if provider is None or not provider.same_component or requirement.specifier.contains(provider.package.version):
        return []
    floors = [s.version for s in requirement.specifier if s.operator == ">="]  # what conda's ">=" can say
    command = conda_fix(installed, provider.soname, provider.package.name, Version(floors[0])) if len(floors) == 1 else None
    return [f"{provider.label} does not satisfy {requirement.specifier}" + (f": {render_fix(command)}" if command else "")]


def _refuses(finding: Finding) -> bool:
    """What a lock must not bring: an error, or a known-bad release (an advisory; --allow-advisory)."""
    return finding.severity == Severity.ERROR or finding.check == Check.ADVISORY


def _key(finding: Finding) -> tuple:
    return (finding.check, finding.subject, finding.problem)


def _allowed(finding: Finding, allowed: Sequence[str]) -> bool:
    return isinstance(finding.problem, KnownBadRelease) and finding.problem.advisory in allowed


def _as_lock(
    chosen: dict[str, Candidate],
    finder: CandidateFinder,
    hosts: Sequence[tuple[str, HostFacts]],
    index: PackageIndex,
    markers: dict,
    notes: dict[str, str],
) -> Lock:
    packages = []
    for name, candidate in sorted(chosen.items()):
        file = candidate.file
        if candidate.from_conda:
            assert candidate.installed is not None
            packages.append(LockedPackage(name, str(candidate.version), None, None, None,
                                          f"provided by {candidate.installed.label}: pip must not replace it",
                                          provided_by=candidate.installed.label))
            continue
        if file is None:
            # A kept installed version the indexes serve is locked with that wheel, so another
            # reader installs it too; one without a source stays in [tool.cudaresolve].kept only.
            file = next((c.file for c in finder.all_candidates(name) if c.file is not None and c.version == candidate.version), None)
            if file is None:
                packages.append(LockedPackage(name, str(candidate.version), None, None, None, "installed, kept"))
                continue
            reason = "installed, kept"
        else:
            reason = candidate.build.evidence if candidate.build else "the newest release that fits"
        sha256 = index.sha256(file)
        if name in notes:
            reason = f"{notes[name]}; {reason}"
        # a wheel found by --find-links has no index: pip reaches it through its directory (lockfile/pylock.py)
        source = None if file.source in index.config.find_links else file.source
        packages.append(
            LockedPackage(name, str(candidate.version), source, LockedWheel(file.filename, file.url, sha256, file.size), None, reason)
        )
    decisions = _decisions(chosen, finder)
    if finder.major is not None and ENVIRONMENT in finder.rejections.by_name:
        decisions += (Decision(ENVIRONMENT, f"CUDA {finder.major}", tuple(finder.rejections.by_name[ENVIRONMENT])),)
    used = [p.index for p in packages if p.index]
    index_urls = tuple(dict.fromkeys([*index.config.index_urls(), *sorted(set(used))]))
    python = markers.get("python_version")
    return Lock(
        packages=tuple(packages),
        requires_python=f"=={python}.*" if python else None,
        hosts=tuple(host.to_dict() for _, host in hosts),
        host_labels=tuple(label for label, _ in hosts),
        index_urls=index_urls,
        decisions=decisions,
        created_by=f"cudaresolve {__version__}",
    )


def _decisions(chosen: dict[str, Candidate], finder: CandidateFinder) -> tuple[Decision, ...]:
    """Per locked name, why not the others: the other builds of the chosen version, and every newer
    candidate set aside (older releases lost only on age, which needs no saying). A build of an
    older CUDA major than the environment's is compared as an older CUDA, which is why its major
    lost (the newest major that runs everywhere is tried first)."""
    decisions = []
    for name, candidate in sorted(chosen.items()):
        public = candidate.version.public
        entries = []
        for other in finder.all_candidates(name):
            if other.version.public == public and other.version != candidate.version and other.file is not None:
                if finder.fits_major(other) or _older_cuda(other, candidate):
                    entries.append((other.label, _compared(other, candidate)))
        compared = {label for label, _ in entries}
        for label, why in finder.rejected(name):
            version = label.split(" ")[1]
            if label in compared or label == candidate.label:
                continue
            if Version(version) >= candidate.version or Version(version).public == public:
                entries.append((label, why))
        if entries:
            decisions.append(Decision(name, candidate.label, tuple(entries)))
    return tuple(decisions)


def _older_cuda(other: Candidate, chosen: Candidate) -> bool:
    mine, theirs = chosen.build, other.build
    if mine is None or theirs is None:
        return False
    return theirs.cuda.major < mine.cuda.major or theirs.cuda.major == mine.cuda.major and (theirs.cuda.minor or 0) < (mine.cuda.minor or 0)


def _compared(other: Candidate, chosen: Candidate) -> str:
    label = f"+{chosen.version.local}" if chosen.version.local else "the default build"
    if _older_cuda(other, chosen):
        return f"older CUDA than {label}, which runs here"
    return f"not needed: {label} runs here and fits every requirement"
