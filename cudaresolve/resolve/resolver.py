"""`lock`: choose versions and variants with resolvelib, then judge the planned environment with the
doctor's own checks on every host; a set the judge refuses is resolved again without the refused
candidate, so lock -> install -> doctor is clean by construction.

Only errors that the plan brings count: an error the installed environment already has is not the
lock's doing (the doctor reports it), and refusing every set for it would help no one. The answer
is a Lock of records, or NoSolution with its causes as records; output/ words both.

May import: resolvelib, packaging, checks/ (the judge), env/, host facts, index/access, knowledge/,
resolve/. No I/O of its own beyond the index it is given.
"""

from __future__ import annotations

import difflib
import time
from dataclasses import dataclass, replace
from typing import Callable, Collection, Iterable, Iterator, Optional, Sequence, Union

from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import InvalidVersion, Version
from resolvelib import BaseReporter, ResolutionImpossible, ResolutionTooDeep, Resolver
from resolvelib.structs import RequirementInformation

from cudaresolve import __version__
from cudaresolve.checks import judge
from cudaresolve.checks.builds import component_builds
from cudaresolve.checks.findings import Check, Finding, Severity
from cudaresolve.checks.problems import KnownBadRelease, Problem
from cudaresolve.checks.subjects import Subject
from cudaresolve.checks.suggest import conda_fix
from cudaresolve.env.environment import Environment
from cudaresolve.errors import UsageError
from cudaresolve.host.facts import HostFacts
from cudaresolve.index.access import PackageIndex
from cudaresolve.index.wheel_facts import LinkBudget
from cudaresolve.knowledge import advisories, components, cupy, torch
from cudaresolve.resolve.candidates import Candidate, CandidateFinder
from cudaresolve.resolve.causes import (
    Attempt,
    Bound,
    Cause,
    CondaMismatch,
    Conflict,
    GaveUp,
    NoProvider,
    NoSolution,
    Refused,
    TooDeep,
    Unsatisfiable,
)
from cudaresolve.resolve.conda import conda_providers
from cudaresolve.resolve.fit import environment_majors, fleet_conflict, major_rejections
from cudaresolve.resolve.inputs import LockInputs
from cudaresolve.resolve.lock import (
    Build,
    Decision,
    ExtraFor,
    Lock,
    LockedPackage,
    LockedSdist,
    LockedWheel,
    MajorDecision,
    PreRelease,
    Reason,
    ReasonKind,
)
from cudaresolve.resolve.needs import installed_binary_requirements, unmet_installed_needs
from cudaresolve.resolve.planned import Unread, planned_environment, read_links, runtime_floors
from cudaresolve.resolve.provider import Identifier, Provider, missing_extra, root_requirements
from cudaresolve.resolve.reasons import (
    Asked,
    BinaryNeed,
    BreaksInstalled,
    CandidateRef,
    ExtrasOf,
    FactsUnknown,
    Judged,
    MajorRejection,
    MinorCompat,
    Need,
    NeedsSetAside,
    NotNeeded,
    OlderCuda,
    Origin,
    OtherMajor,
    Rejection,
    RequiredBy,
)
from cudaresolve.resolve.undeclared import MissingLibraries, Unprovided, missing_libraries, unprovided_libraries
from cudaresolve.versions import CudaVersion

MAX_JUDGED = 25  # sets the judge may refuse before the lock gives up
# What one lock may fetch to read the links of wheels the tables do not know (`cupy cuda-cccl` for
# one target: numpy, cuda-bindings, cuda-core, cuda-cccl and numba-cuda-mlir, ~94 MB by range);
# past it a wheel joins unread, and the lock says so.
MAX_LINKED_BYTES = 500_000_000
MAX_ROUNDS = 2000  # resolvelib rounds per resolution
# Seconds of resolution for one lock, over every CUDA major and set it tries: resolvelib has no
# deadline, and a hard set could backtrack for its 2000 rounds (46 s seen) to end naming no
# conflict. Past this a resolution that backtracks stops with the conflict it met most; one that
# never backtracks is not stopped (its rounds are bounded by the names it pins). 8, so that with
# reading the environment and the indexes a hard set is answered within about 10 s.
MAX_SECONDS = 8

FindingKey = tuple[Check, Subject, Problem]  # a finding without its evidence and fix: the same problem


@dataclass(frozen=True)
class Judging:
    """Progress: a resolved set of `distributions` is being judged on `hosts` hosts."""

    distributions: int
    hosts: int


@dataclass(frozen=True)
class Unjudged:
    """Said once a set is locked: what the lock could not judge of it, left to the doctor after install."""

    warnings: tuple[Finding, ...]  # a runtime a linked wheel carries that no byte dates; an advisory of a deprecation
    unread: tuple[CandidateRef, ...]  # wheels whose links were not read: the lock's budget was spent
    budget: int  # that budget, in bytes


@dataclass(frozen=True)
class Rewrite:
    """A request made concrete for the environment's CUDA major."""

    asked_as: Optional[NormalizedName] = None  # cupy, locked as cupy-cuda12x
    added_extras: tuple[str, ...] = ()  # cuda-cccl, locked with [cu12]; onnxruntime-gpu, with [cuda,cudnn]
    extra_for: Optional[ExtraFor] = None  # why `added_extras`


def lock(
    inputs: LockInputs,
    installed: Environment,
    index: PackageIndex,
    *,
    progress: Optional[Callable[[Union[Judging, Unjudged]], None]] = None,
) -> Lock:
    """The lock `inputs` ask for on every one of their hosts, given the `installed` environment and
    the `index` their settings open; or NoSolution naming what is in conflict.

    One CUDA major per environment: the majors every host can run are tried newest first (a conda
    prefix's `cuda-version` major first, then the installed components' major, when they have one),
    and within one try every candidate built for another major is set aside. An abstract `cupy`
    becomes that major's CuPy wheel, and a package with per-major extras asked for without one gets
    that major's extra. In a conda prefix, conda's CUDA libraries stand for their wheels
    (resolve/conda.py)."""
    hosts = inputs.hosts
    markers = installed.target.marker_environment() or {}
    kept = {d.name: d for d in installed.distributions if d.kind != "conda"}
    requested = root_requirements(inputs.requirements, markers)
    pin = installed.conda.cuda() if installed.conda else None
    finder = CandidateFinder(
        index, hosts, kept, upgrade=inputs.policy.upgrade, machine=installed.loader.machine,
        conda=conda_providers(installed), asked=frozenset(canonicalize_name(r.name) for r in requested), cuda_pin=pin,
        formats=inputs.policy.formats,
        prefer_binary=inputs.policy.prefer_binary,
        environment=installed,
        cpu_wanted=frozenset(torch.family()) if inputs.policy.cpu else cpu_pinned(requested + root_requirements(inputs.constraints, markers)),
    )
    binary = installed_binary_requirements(installed)
    finder.prefetch([r.name for r in requested + binary])
    for need in requested:
        _check_pinned_extras(need, finder, index)
    baseline = {_key(f) for _, host in hosts for f in judge(installed, host).findings if refuses(f)}
    installed_majors = {b.cuda.major for b in component_builds(installed.distributions)}
    prefix_major = pin.major if pin else None
    ordered = sorted(environment_majors(hosts), key=lambda m: (m != prefix_major, m not in installed_majors, -m))
    majors: list[Optional[int]] = list(ordered) or [None]
    failures: list[Attempt] = []
    deadline = time.monotonic() + MAX_SECONDS
    budget = LinkBudget(MAX_LINKED_BYTES)
    for major in majors:
        finder.major = major
        roots, rewrites = for_major(requested, major)
        try:
            return _lock_once(inputs, installed, index, finder, roots + binary, rewrites, baseline, markers, progress, deadline, budget)
        except NoSolution as exc:
            failures += exc.attempts
    untried = _untried(failures, hosts, majors)
    if len(failures) == 1 or len({_without_majors(attempt.causes) for attempt in failures}) == 1:
        raise NoSolution(tuple(failures[:1]), fleet_conflict(hosts), untried)
    raise NoSolution(tuple(failures), untried=untried)


def _untried(failures: list[Attempt], hosts: Sequence[tuple[str, HostFacts]], tried: list[Optional[int]]) -> tuple[MajorRejection, ...]:
    """The majors not tried because a host refused them, whose builds were set aside in a failure:
    why a request only that major meets fails (the GPU or the driver), not only that it was set aside."""
    causes = [cause for attempt in failures for found in attempt.causes
              for cause in (found.conflict if isinstance(found, TooDeep) else (found,))]  # a search that ran out: what it met
    aside = {r.evidence.build_major for cause in causes if isinstance(cause, Unsatisfiable)
             for r in cause.rejections if isinstance(r.evidence, OtherMajor)}
    return tuple(r for r in major_rejections(hosts) if r.major in aside and r.major not in tried)


def _check_pinned_extras(need: Need, finder: CandidateFinder, index: PackageIndex) -> None:
    """An extra asked for on an exact pin of a release that does not provide it is bad input (exit 3),
    not a set that fails to fit."""
    exact = any(s.operator == "===" or s.operator == "==" and not s.version.endswith(".*") for s in need.requirement.specifier)
    if not need.extras or not exact or not isinstance(need.origin, Asked):
        return
    pinned = [c for c in finder.all_candidates(need.name) if need.requirement.specifier.contains(c.version, prereleases=True)]
    missing = [missing_extra(index, candidate, need.extras) for candidate in pinned]
    if pinned and all(missing):
        raise UsageError(f"{need.origin.where}: {need.requirement}: {need.name} {pinned[0].version} has no extra [{missing[0]}]")


def cpu_pinned(needs: Sequence[Need]) -> frozenset[str]:
    """The family names pinned to a CPU-only build (`torch==2.8.0+cpu`) by a requirement or a constraint."""
    pinned = set()
    for need in needs:
        name = canonicalize_name(need.name)
        for spec in need.requirement.specifier:
            if spec.operator in ("==", "===") and not spec.version.endswith(".*"):
                try:
                    version = Version(spec.version)
                except InvalidVersion:
                    continue
                if torch.cpu_only(name, version):
                    pinned.add(name)
    return frozenset(pinned)


def _without_majors(causes: tuple[Cause, ...]) -> tuple[Cause, ...]:
    """The causes without the candidates set aside for the major tried, to tell whether the majors failed alike."""
    return tuple(
        Unsatisfiable(c.requirement, c.origin, tuple(r for r in c.rejections if not isinstance(r.evidence, OtherMajor)), c.conda, c.constraints)
        if isinstance(c, Unsatisfiable) else c
        for c in causes
    )


def for_major(needs: Sequence[Need], major: Optional[int]) -> tuple[list[Need], dict[NormalizedName, Rewrite]]:
    """The requirements for an environment of CUDA `major`, and what was rewritten, per locked name."""
    rewritten: list[Need] = []
    rewrites: dict[NormalizedName, Rewrite] = {}
    for need in needs:
        requirement = need.requirement
        name = canonicalize_name(requirement.name)
        if major is None:
            rewritten.append(need)
        elif name == cupy.source_package() and (dist := cupy.dist_for_cuda_major(major)):
            real = canonicalize_name(dist)
            text = str(requirement).replace(requirement.name, real, 1)
            rewritten.append(Need(Requirement(text), need.origin))
            rewrites[real] = Rewrite(asked_as=name)
        elif components.per_major_extras(name) and not (set(requirement.extras) & components.per_major_extras(name)):
            extra = components.per_major_extra(name, major)
            if extra is None:
                rewritten.append(need)
                continue
            changed = Requirement(str(requirement))
            changed.extras = set(requirement.extras) | {extra}
            rewritten.append(Need(changed, need.origin))
            rewrites[name] = Rewrite(added_extras=(extra,), extra_for=ExtraFor.CUDA_MAJOR)
        else:
            rewritten.append(need)
    return rewritten, rewrites


def _lock_once(
    inputs: LockInputs,
    installed: Environment,
    index: PackageIndex,
    finder: CandidateFinder,
    roots: list[Need],
    rewrites: dict[NormalizedName, Rewrite],
    baseline: set[FindingKey],
    markers: dict[str, str],
    progress: Optional[Callable[[Union[Judging, Unjudged]], None]],
    deadline: float,
    budget: LinkBudget,
) -> Lock:
    hosts = inputs.hosts
    excluded: set[tuple[str, str]] = set()
    refused: list[Finding] = []
    kept_needs: dict[tuple[str, Origin], Need] = {}  # what installed distributions that stay need, met so far
    with_libraries: set[NormalizedName] = set()  # the names asked for again with the extra bringing their libraries
    for _ in range(MAX_JUDGED):
        constraints = root_requirements(inputs.constraints, markers)
        provider = Provider(finder, index, markers, excluded, constraints, pre=inputs.policy.pre)
        while True:  # each round adds needs it found unmet: bounded by the installed requirements
            chosen, origins, prereleases = _resolve(provider, roots + list(kept_needs.values()), finder, installed, deadline)
            unmet = {(str(n.requirement), n.origin): n for n in unmet_installed_needs(installed, chosen.values())}
            if not unmet.keys() - kept_needs.keys():
                break
            kept_needs.update(unmet)
        if progress:
            progress(Judging(len(chosen), len(hosts)))
        try:
            plan = planned_environment(installed, chosen.values(), index, deep=inputs.policy.deep,
                                       gpus=any(host.visible_gpus for _, host in hosts))
        except Unread as unread:  # not known to run: set aside, as the judge sets aside what does not
            excluded.add((unread.candidate.name, str(unread.candidate.version)))
            finder.rejections.add(Rejection(unread.candidate.ref, FactsUnknown(unread.why)))
            continue
        missing = [m for m in missing_libraries(plan, chosen.values(), system=inputs.system_libraries)
                   if m.name not in with_libraries and missing_extra(index, chosen[m.name], m.extras) is None]
        # a release without that extra (a build of another origin) is judged as it is
        with_libraries.update(m.name for m in missing)
        asked_again, rewrites = _with_libraries(roots, rewrites, missing)
        if asked_again != roots:  # asked for with the package's own extra that brings them: resolve again
            roots = asked_again
            continue
        links = read_links(plan, chosen.values(), index, budget)
        unprovided = unprovided_libraries(plan, chosen.values(), finder.major, system=inputs.system_libraries, links=links.files)
        if _set_aside_other_major(unprovided, finder, excluded, environment_majors(hosts)):
            continue  # a build of another major: an older release of the set's major is tried
        lacking = tuple(_no_provider(u) for u in unprovided if not u.providers)
        if lacking:
            raise NoSolution((Attempt(finder.major, lacking),))
        linked = [need for need in dict.fromkeys(_linked_need(u) for u in unprovided) if need not in roots]
        if linked:  # the wheels that install what the set's binaries link: resolve again with them
            roots = roots + linked
            continue
        floors = {label: runtime_floors(plan, links, host) for label, host in hosts}
        found = [(label, finding) for label, host in hosts for finding in judge(plan, host).findings + tuple(floors[label])]
        problems = [(label, finding) for label, finding in found
                    if refuses(finding) and _key(finding) not in baseline and not allowed(finding, inputs.policy.allow_advisories)]
        if not problems:
            said = [f for found_floors in floors.values() for f in found_floors if not refuses(f)]
            said += [f for _, f in found if f.check == Check.ADVISORY and deprecated(f) and _key(f) not in baseline]
            warnings = tuple(dict.fromkeys(said))
            if progress and (warnings or links.unread):
                progress(Unjudged(warnings, tuple(c.ref for c in links.unread), budget.limit))
            for rejection in _passed_over(chosen, kept_needs.values(), finder, index, markers):
                finder.rejections.add(rejection)
            for rejection in _needs_set_aside(chosen, roots + constraints, finder, index, markers):
                finder.rejections.add(rejection)
            return _as_lock(chosen, origins, finder, hosts, index, markers, rewrites, prereleases)
        for label, finding in problems:
            culprit = chosen.get(finding.subject.distribution) if finding.subject.distribution else None
            if culprit is None or culprit.file is None:
                where = label if len(hosts) > 1 else None
                raise NoSolution((Attempt(finder.major, (Refused(finding, where),)),))
            excluded.add((culprit.name, str(culprit.version)))
            refused.append(finding)
            finder.rejections.add(Rejection(culprit.ref, judged(finding)))
    raise NoSolution((Attempt(finder.major, (GaveUp(MAX_JUDGED, refused[-1]),)),))


def _passed_over(
    chosen: dict[str, Candidate], kept: Iterable[Need], finder: CandidateFinder, index: PackageIndex, markers: dict[str, str]
) -> Iterator[Rejection]:
    """The releases newer than a chosen wheel that a need of an installed distribution that stays
    ruled out (resolvelib backtracked past them): one of their requirements and that need admit no
    common release. For `--explain` and the lock's decisions: why not the newest."""
    by_name: dict[str, list[Need]] = {}
    for need in kept:
        by_name.setdefault(canonicalize_name(need.name), []).append(need)
    if not by_name:
        return
    for candidate in chosen.values():
        if candidate.file is None:
            continue
        for other in finder.candidates(candidate.name):
            if other.file is None or other.version <= candidate.version:
                continue
            for text in index.metadata(other.file).requires_dist:
                requirement = Requirement(text)
                if requirement.marker is not None and not requirement.marker.evaluate({**markers, "extra": ""}):
                    continue
                name = canonicalize_name(requirement.name)
                held = next((n for n in by_name.get(name, ()) if not _fit_together(requirement, n.requirement, finder)), None)
                if held is not None and isinstance(held.origin, RequiredBy):
                    requirement.marker = None
                    yield Rejection(other.ref, BreaksInstalled(str(requirement), held.origin.parent, str(held.requirement), held.origin.extra))
                    break


def _needs_set_aside(
    chosen: dict[str, Candidate], wanted: Sequence[Need], finder: CandidateFinder, index: PackageIndex, markers: dict[str, str]
) -> Iterator[Rejection]:
    """For each name asked for whose chosen release is older than its newest candidate that the
    requests and constraints on it admit (the release pip takes), when a requirement of that newest
    one admits only candidates the rules set aside (resolvelib backtracked past it for that): the
    requirement and the newest release it admits, set aside with its grounds. One release per name,
    whose metadata resolvelib has read already."""
    for name in sorted(finder.asked):
        chosen_one = chosen.get(name)
        if chosen_one is None or chosen_one.file is None:
            continue
        set_aside = {rejection.candidate for rejection in finder.rejected(name)}
        on_name = [need.requirement.specifier for need in wanted if canonicalize_name(need.name) == name]
        newer = [c for c in finder.candidates(name) if c.file is not None and c.version > chosen_one.version
                 and c.ref not in set_aside and not c.version.is_prerelease
                 and all(specifier.contains(c.version, prereleases=True) for specifier in on_name)]
        if not newer:
            continue
        newest = max(newer, key=lambda c: c.version)
        assert newest.file is not None
        extras = ("", *sorted(chosen_one.extras))
        for text in index.metadata(newest.file).requires_dist:
            requirement = Requirement(text)
            if requirement.marker is not None and not any(requirement.marker.evaluate({**markers, "extra": e}) for e in extras):
                continue
            aside = sorted((r for r in finder.rejected(requirement.name) if not r.installed
                            and requirement.specifier.contains(r.candidate.version, prereleases=True)),
                           key=lambda r: r.candidate.version, reverse=True)
            refused = {r.candidate for r in aside}  # the judge's refusals too, which the finder still lists
            admitted = [c for c in finder.candidates(requirement.name)
                        if requirement.specifier.contains(c.version, prereleases=True) and c.ref not in refused]
            if admitted or not aside:
                continue
            requirement.marker = None
            yield Rejection(newest.ref, NeedsSetAside(str(requirement), aside[0], len({r.candidate for r in aside}) - 1))
            break


def _fit_together(a: Requirement, b: Requirement, finder: CandidateFinder) -> bool:
    """Whether some candidate of their name admits both requirements."""
    return any(a.specifier.contains(c.version, prereleases=True) and b.specifier.contains(c.version, prereleases=True)
               for c in finder.all_candidates(a.name))


def _linked_need(found: Unprovided) -> Need:
    """The requirement on the wheel of the set's major that installs a library a chosen wheel links."""
    row = sorted(found.providers, key=lambda r: r.dist)[0]
    assert found.cuda_major is not None
    origin = BinaryNeed(found.consumer, False, found.soname, CudaVersion(found.cuda_major), file=found.file, linked=True)
    return Need(Requirement(f"{row.dist}{row.dist_versions or ''}"), origin)


def _set_aside_other_major(
    unprovided: Sequence[Unprovided], finder: CandidateFinder, excluded: set[tuple[str, str]], runnable: Collection[int]
) -> bool:
    """Set aside, for the major tried, each chosen wheel that links what only one other CUDA major's
    wheels install (libcudart.so.13 in a CUDA 12 set), when the hosts cannot run that major: its
    build, named by its first such library, so an older release of this major is tried. A build of a
    major the hosts run refuses this major instead (that major is tried with the newest release).
    Whether any was set aside."""
    aside: dict[CandidateRef, Rejection] = {}
    for found in reversed(unprovided):
        majors = {row.cuda_major for row in found.other_majors}
        if not found.providers and found.cuda_major is not None and len(majors) == 1 and not majors & set(runnable):
            aside[found.consumer] = Rejection(found.consumer, OtherMajor(majors.pop(), found.cuda_major, found.file, found.soname))
    for rejection in aside.values():
        excluded.add((rejection.candidate.name, str(rejection.candidate.version)))
        finder.set_aside_for_major(rejection)
    return bool(aside)


def _no_provider(found: Unprovided) -> NoProvider:
    return NoProvider(found.consumer, found.file, found.soname, found.cuda_major,
                      tuple(sorted({(row.cuda_major, row.dist) for row in found.other_majors})))


def _with_libraries(
    roots: list[Need], rewrites: dict[NormalizedName, Rewrite], missing: Sequence[MissingLibraries]
) -> tuple[list[Need], dict[NormalizedName, Rewrite]]:
    """`roots` with each package that lacks its undeclared libraries asked for with the extras that
    bring them (a root asked for by its own name; one brought by another package is left to the
    judge), and the rewrite that explains it."""
    extras_of = {m.name: m.extras for m in missing}
    changed_roots = []
    changed = dict(rewrites)
    for need in roots:
        name = canonicalize_name(need.name)
        extras = extras_of.get(name)
        if extras is None or not isinstance(need.origin, Asked):
            changed_roots.append(need)
            continue
        requirement = Requirement(str(need.requirement))
        added = tuple(e for e in extras if e not in need.requirement.extras)
        requirement.extras = set(need.requirement.extras) | set(added)
        changed_roots.append(Need(requirement, need.origin))
        changed[name] = replace(rewrites.get(name, Rewrite()), added_extras=added, extra_for=ExtraFor.LIBRARIES)
    return changed_roots, changed


def _resolve(
    provider: Provider, roots: list[Need], finder: CandidateFinder, installed: Environment, deadline: float
) -> tuple[dict[str, Candidate], dict[str, tuple[Origin, ...]], dict[str, PreRelease]]:
    """The chosen candidate per name, the origins of the requirements that brought each, and for
    each pre-release chosen from an index why pip's rule allowed it."""
    watch = _Watch(deadline)
    try:
        result = Resolver(provider, watch).resolve(roots, max_rounds=MAX_ROUNDS)
    except ResolutionImpossible as exc:
        raise NoSolution((Attempt(finder.major, _causes(exc.causes, finder, installed, provider.constraints)),)) from None
    except (ResolutionTooDeep, _OutOfTime) as exc:
        bound, limit = (Bound.SECONDS, MAX_SECONDS) if isinstance(exc, _OutOfTime) else (Bound.ROUNDS, MAX_ROUNDS)
        conflict = tuple(c for c in _causes(watch.most(), finder, installed, provider.constraints)
                         if isinstance(c, (Unsatisfiable, Conflict)))
        raise NoSolution((Attempt(finder.major, (TooDeep(limit, bound, conflict),)),)) from None
    origins: dict[str, dict[Origin, None]] = {}
    needs: dict[str, list[Need]] = {}
    for (name, _), criterion in result.criteria.items():
        found = origins.setdefault(name, {})
        for information in criterion.information:
            if not isinstance(information.requirement.origin, ExtrasOf):  # the extras' own base: not a reason
                found[information.requirement.origin] = None
                needs.setdefault(name, []).append(information.requirement)
    chosen: dict[str, Candidate] = {c.name: c for (_, extras), c in result.mapping.items() if not extras}
    for extras_name, extras in result.mapping:
        if extras and extras_name in chosen:  # the extras chosen with it, for its reason
            base = chosen[extras_name]
            chosen[extras_name] = base.with_extras(base.extras | {canonicalize_name(e) for e in extras})
    for chosen_name in chosen:
        for constraint in provider.constraints.get(chosen_name, []):
            origins.setdefault(chosen_name, {})[constraint.origin] = None
    prereleases: dict[str, PreRelease] = {}
    for chosen_name, candidate in chosen.items():
        if candidate.file is not None and candidate.version.is_prerelease:
            wanted = needs.get(chosen_name, []) + provider.constraints.get(chosen_name, [])
            why = provider.prereleases(candidate.name, wanted)
            if why is not None:
                prereleases[chosen_name] = why
    return chosen, {name: tuple(origins.get(name, ())) for name in chosen}, prereleases


class _OutOfTime(Exception):
    """The resolution ran past MAX_SECONDS (raised through resolvelib by the reporter)."""


class _Watch(BaseReporter[Need, Candidate, Identifier]):
    """Counts the conflicts resolvelib backtracks on, and stops a resolution that backtracks past
    its deadline."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.met = 0  # conflicts met so far
        self.seen: dict[frozenset[Need], tuple[int, int, Collection[RequirementInformation[Need, Candidate]]]] = {}  # count, last met, causes

    def resolving_conflicts(self, causes: Collection[RequirementInformation[Need, Candidate]]) -> None:
        key = frozenset(information.requirement for information in causes)
        count = self.seen[key][0] if key in self.seen else 0
        self.met += 1
        self.seen[key] = (count + 1, self.met, list(causes))
        self._check()

    def starting_round(self, index: int) -> None:
        self._check()

    def _check(self) -> None:
        if self.seen and time.monotonic() > self.deadline:
            raise _OutOfTime()

    def most(self) -> Collection[RequirementInformation[Need, Candidate]]:
        """The causes of the conflict met most often (the later one of a tie); none when none was met."""
        if not self.seen:
            return ()
        return max(self.seen.values(), key=lambda entry: entry[:2])[2]


def _causes(
    found: Collection[RequirementInformation[Need, Candidate]], finder: CandidateFinder, installed: Environment,
    constraints: dict[str, list[Need]],
) -> tuple[Cause, ...]:
    """resolvelib's causes as records: requirements on one name that each admit a candidate but not
    together are a Conflict naming each with its origin; a requirement nothing admits is
    Unsatisfiable, with the pip constraints on its name and the candidates its specifier admits
    that were set aside (first, when a conda package stands for the wheel, why it does not fit)."""
    by_name: dict[str, dict[Need, None]] = {}
    for information in found:
        need: Need = information.requirement
        by_name.setdefault(canonicalize_name(need.name), {})[need] = None
    causes: dict[Cause, None] = {}
    for name, needs in by_name.items():
        on_name = tuple(constraints.get(name, ()))
        alone = [need for need in needs if not _admits_any(need, on_name, finder)]
        if len(needs) > 1 and not alone:
            causes[Conflict(name, tuple(needs), on_name)] = None
            continue
        for need in alone or needs:
            requirement = need.requirement
            rejections = tuple(r for r in finder.rejected(name) if requirement.specifier.contains(r.candidate.version, prereleases=True))
            conda = _conda_mismatch(requirement, finder, installed)
            unlisted = (not rejections and conda is None and name not in known_names() and not finder.all_candidates(name)
                        and not finder.listed(name))
            causes[Unsatisfiable(requirement, need.origin, rejections, conda, on_name, unlisted,
                                 nearest_known(name) if unlisted else None)] = None
    return tuple(causes)


def known_names() -> frozenset[str]:
    """The names the knowledge tables hold (CuPy's, the torch family's, the NVIDIA components'): a
    project even when no index lists it under that name (`cupy` is asked for as a CUDA wheel's name)."""
    return frozenset({cupy.source_package(), *(canonicalize_name(row.name) for major in cupy.load() for row in major.dists),
                      *torch.family(), *(canonicalize_name(row.dist) for row in components.load().component)})


def nearest_known(name: str) -> Optional[str]:
    """The name of the knowledge tables closest to `name`, when one is close: what a misspelt
    request most likely meant."""
    close = difflib.get_close_matches(canonicalize_name(name), sorted(known_names()), n=1, cutoff=0.8)
    return close[0] if close and close[0] != canonicalize_name(name) else None


def _admits_any(need: Need, constraints: tuple[Need, ...], finder: CandidateFinder) -> bool:
    """Whether some candidate of the major tried meets `need` and the constraints on its name."""
    specifiers = [need.requirement.specifier] + [c.requirement.specifier for c in constraints]
    return any(
        finder.fits_major(candidate) and all(s.contains(candidate.version, prereleases=True) for s in specifiers)
        for candidate in finder.all_candidates(need.name)
    )


def _conda_mismatch(requirement: Requirement, finder: CandidateFinder, installed: Environment) -> Optional[CondaMismatch]:
    provider = finder.conda.get(canonicalize_name(requirement.name))
    if provider is None or not provider.same_component or requirement.specifier.contains(provider.package.version):
        return None
    floors = [s.version for s in requirement.specifier if s.operator == ">="]  # what conda's ">=" can say
    command = conda_fix(installed, provider.soname, provider.package.name, Version(floors[0])) if len(floors) == 1 else None
    return CondaMismatch(provider.label, str(requirement.specifier), command)


def judged(finding: Finding) -> Judged:
    """The finding as a rejection's evidence: its check, what it concerns, and its kind of problem."""
    subject = finding.subject.distribution or finding.subject.file or ""
    return Judged(finding.check.value, subject, type(finding.problem).__name__, finding)


def refuses(finding: Finding) -> bool:
    """What a lock must not bring: an error, or a known-bad release (an advisory; --allow-advisory),
    but for an advisory of a deprecation (`deprecated`), which the lock says as the doctor does."""
    return finding.severity == Severity.ERROR or finding.check == Check.ADVISORY and not deprecated(finding)


def deprecated(finding: Finding) -> bool:
    """An advisory data/advisories.toml marks `sets_aside = false`: a deprecation that breaks nothing
    yet (numba's built-in CUDA target, which sglang 0.5.23's numba 0.65.1 still has)."""
    problem = finding.problem
    return isinstance(problem, KnownBadRelease) and any(a.id == problem.advisory and not a.sets_aside for a in advisories.load())


def _key(finding: Finding) -> FindingKey:
    return (finding.check, finding.subject, finding.problem)


def allowed(finding: Finding, allowed: Sequence[str]) -> bool:
    return isinstance(finding.problem, KnownBadRelease) and finding.problem.advisory in allowed


def _as_lock(
    chosen: dict[str, Candidate],
    origins: dict[str, tuple[Origin, ...]],
    finder: CandidateFinder,
    hosts: Sequence[tuple[str, HostFacts]],
    index: PackageIndex,
    markers: dict[str, str],
    rewrites: dict[NormalizedName, Rewrite],
    prereleases: dict[str, PreRelease],
) -> Lock:
    packages = []
    for name, candidate in sorted(chosen.items()):
        file = candidate.file
        rewrite = rewrites.get(candidate.name, Rewrite())
        major = finder.major if rewrite != Rewrite() else None
        if candidate.from_conda:
            assert candidate.installed is not None
            packages.append(LockedPackage(candidate.name, candidate.version, None, (), None,
                                          Reason(ReasonKind.CONDA, origins[name]), provided_by=candidate.installed.label))
            continue
        if file is None:
            # A kept installed version the indexes serve is locked with that wheel, so another
            # reader installs it too; one without a source stays in [tool.cudaresolve].kept only.
            file = next((c.file for c in finder.all_candidates(name) if c.file is not None and c.version == candidate.version), None)
            reason = Reason(ReasonKind.KEPT, origins[name], rewrite.asked_as, rewrite.added_extras, major,
                            extras=tuple(sorted(candidate.extras)) or None, extra_for=rewrite.extra_for)
            if file is None:
                packages.append(LockedPackage(candidate.name, candidate.version, None, (), None, reason))
                continue
        else:
            build = Build(candidate.build.cuda, candidate.build.evidence) if candidate.build else None
            reason = Reason(ReasonKind.INDEX, origins[name], rewrite.asked_as, rewrite.added_extras, major, build,
                            prerelease=prereleases.get(name),
                            extras=tuple(sorted(candidate.extras)) or None, extra_for=rewrite.extra_for)
        sha256 = index.sha256(file)
        # a wheel found by --find-links has no index: pip reaches it through its directory (lockfile/pylock.py)
        source = None if file.source in index.config.find_links else file.source
        if file.is_wheel:
            packages.append(LockedPackage(candidate.name, candidate.version, source,
                                          (LockedWheel(file.filename, file.url, sha256, file.size),), None, reason))
        else:  # no wheel for the target: its sdist, which pip builds at install
            packages.append(LockedPackage(candidate.name, candidate.version, source, (), None, reason,
                                          sdist=LockedSdist(file.filename, file.url, sha256, file.size)))
    rejected = major_rejections(hosts)
    used = [p.index for p in packages if p.index]
    index_urls = tuple(dict.fromkeys([*index.config.index_urls(), *sorted(set(used))]))
    python = markers.get("python_version")
    return Lock(
        packages=tuple(packages),
        requires_python=f"=={python}.*" if python else None,
        hosts=tuple(host.to_dict() for _, host in hosts),
        host_labels=tuple(label for label, _ in hosts),
        index_urls=index_urls,
        decisions=_decisions(chosen, finder),
        created_by=f"cudaresolve {__version__}",
        major=MajorDecision(finder.major, rejected) if finder.major is not None and rejected else None,
    )


def _decisions(chosen: dict[str, Candidate], finder: CandidateFinder) -> tuple[Decision, ...]:
    """Per locked name, why not the others: the other builds of the chosen version, every newer
    candidate set aside, and every newer one ranked below because a driver runs it only by
    minor-version compatibility (older releases lost only on age, which needs no saying). A build of an
    older CUDA major than the environment's is compared as an older CUDA, which is why its major
    lost (the newest major that runs everywhere is tried first)."""
    decisions = []
    for name, candidate in sorted(chosen.items()):
        public = candidate.version.public
        entries: list[Rejection] = []
        for other in finder.all_candidates(name):
            if other.version.public == public and other.version != candidate.version and other.file is not None:
                if finder.fits_major(other) or _older_cuda(other, candidate):
                    entries.append(Rejection(other.ref, _compared(other, candidate, finder)))
        compared = {entry.candidate for entry in entries}
        set_aside = {rejection.candidate for rejection in finder.rejected(name)}
        for other in finder.all_candidates(name):  # newer releases ranked below for the doctor's warning
            newer = other.version.public != public and other.version > candidate.version and other.file is not None
            if newer and other.ref not in set_aside and finder.fits_major(other) and (passed_over := finder.minor_compat(other)):
                entries.append(Rejection(other.ref, passed_over))
                compared.add(other.ref)
        for rejection in finder.rejected(name):
            if not rejection.installed and (rejection.candidate in compared or rejection.candidate == candidate.ref):
                continue
            version = rejection.candidate.version
            if version >= candidate.version or version.public == public:
                entries.append(rejection)
        if entries:
            decisions.append(Decision(candidate.name, candidate.ref, tuple(entries)))
    return tuple(decisions)


def _older_cuda(other: Candidate, chosen: Candidate) -> bool:
    mine, theirs = chosen.build, other.build
    if mine is None or theirs is None:
        return False
    return theirs.cuda.major < mine.cuda.major or theirs.cuda.major == mine.cuda.major and (theirs.cuda.minor or 0) < (mine.cuda.minor or 0)


def _compared(other: Candidate, chosen: Candidate, finder: CandidateFinder) -> OlderCuda | MinorCompat | NotNeeded:
    if _older_cuda(other, chosen):
        return OlderCuda(chosen.version.local)
    return finder.minor_compat(other) or NotNeeded(chosen.version.local)
