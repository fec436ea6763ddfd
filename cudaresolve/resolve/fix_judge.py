"""A fix is judged before it is printed: its pip steps are made into the planned environment they
would leave (resolve/planned.py, as the lock makes one: each new wheel's facts from its table row or
the wheel itself), and the doctor's checks judge that for the same host. A fix is printed only when
the plan clears its finding, adds no error, keeps every requirement of an installed distribution
that stays (with its extras) and keeps the environment on a CUDA major the driver runs; otherwise
the next alternative; when none passes, a NoFixFound that says why each was refused.

Only fixes made of pip steps are judged (a driver, a conda prefix or a loader variable is not a
change of the installed set this room can plan); the others pass as they are. A fix whose judging
needs an index that cannot be read (the PyTorch index from a machine that cannot reach it, no network)
or a page --offline has not cached is printed as it is, Unchecked, saying why; the others are judged
as usual. Nothing here changes a finding's severity, so the doctor's exit status never depends on
whether the indexes could be read.

May import: checks/ (the judge, fixes, builds, suggestions), compat, env/, host facts, index/ (access, cache,
pages), knowledge/ (components, toolkit pins), resolve/ (candidates, planned).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Iterator, Optional

from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

from cudaresolve.binary.wheel import WheelError
from cudaresolve.checks import fixes as f
from cudaresolve.checks import judge
from cudaresolve.checks.builds import cuda_builds
from cudaresolve.checks.dependencies import pulled_in
from cudaresolve.checks.findings import Check, Finding, Severity
from cudaresolve.checks.problems import NoDeviceCode
from cudaresolve.checks.suggest import majors_targeting, newest_targeting, other_major_wheels
from cudaresolve.compat import driver_verdict
from cudaresolve.env.distributions import Distribution
from cudaresolve.env.environment import Environment
from cudaresolve.errors import CudaresolveError
from cudaresolve.host.facts import HostFacts
from cudaresolve.index.access import PackageIndex
from cudaresolve.index.cache import OfflineMiss
from cudaresolve.index.http import IndexAccessError
from cudaresolve.index.pages import ProjectFile
from cudaresolve.knowledge import components, toolkit_pins
from cudaresolve.resolve.candidates import Candidate, cuda_build
from cudaresolve.resolve.planned import Unread, planned_environment
from cudaresolve.versions import CudaVersion

MAX_WHEELS = 64  # a fix's plan: the wheels it names and those they pull in, as pip would
# what a wheel's own code and CUDA decide, whatever directories a loader path adds: the errors a fix's
# pip steps are judged by when a path step finishes it
_OWN_CODE = frozenset((Check.ARCH_COVERAGE, Check.DRIVER_FLOOR))
ARCH_RELEASES = 4  # an arch fix reads at most this many of the newest releases the indexes offer


class _CannotCheck(Exception):
    """What a fix's judging needs cannot be read: a page --offline has not cached (`unreadable`
    None), or an index that could not be read (`unreadable`: why)."""

    def __init__(self, unreadable: Optional[str]):
        super().__init__(unreadable)
        self.unreadable = unreadable


@dataclass(frozen=True)
class Change:
    """What a fix's pip steps do to the installed set: names removed, then requirements installed
    (`variant`: from that PyTorch variant index); `reinstall` when pip is asked to reinstall."""

    uninstall: frozenset[NormalizedName]
    install: tuple[Requirement, ...]
    variant: Optional[str] = None
    reinstall: bool = False


def change_of(fix: f.Fix, paths: bool = False) -> Optional[Change]:
    """The change `fix`'s steps make (the first of any alternatives); None when a step is not pip's.
    With `paths`, the pip steps of a fix that also puts a directory on a loader path (`pip install
    X, then put DIR on LD_LIBRARY_PATH`): what pip's steps do to the set, the path left out."""
    uninstall: set[NormalizedName] = set()
    install: list[Requirement] = []
    variant, reinstall = None, False
    for step in f.actions(fix):
        if isinstance(step, f.PipUninstall):
            uninstall.update(step.names)
        elif isinstance(step, f.PipInstall):
            uninstall.update(step.replaces)
            install.extend(step.requirements)
            reinstall = reinstall or "--force-reinstall" in step.options
        elif isinstance(step, f.TorchVariant):
            install.extend(step.requirements)
            variant = step.variant
        elif not (paths and isinstance(step, f.AddToPath)):
            return None
    if not uninstall and not install:
        return None
    return Change(frozenset(uninstall), tuple(install), variant, reinstall)


def judge_fixes(env: Environment, host: HostFacts, findings: tuple[Finding, ...], index: PackageIndex,
                *, offline: bool = False) -> tuple[Finding, ...]:
    """`findings` with each fix replaced by the first of its alternatives that passes on its planned
    environment (with the `cudaresolve install` line of a change of releases), or by NoFixFound; a
    fix whose judging cannot read what it needs, by Unchecked."""
    judged = []
    for finding in findings:
        if not needs_index(finding):
            judged.append(finding)
            continue
        assert finding.fix is not None
        try:
            fix = _judged(env, host, finding, findings, index, offline)
        except _CannotCheck as cannot:
            fix = f.Unchecked(finding.fix, cannot.unreadable)
        except CudaresolveError as exc:  # a wheel past the download budget, a page past its limits: said, never fatal
            fix = f.Unchecked(finding.fix, str(exc))
        judged.append(replace(finding, fix=fix))
    return tuple(judged)


def unchecked(findings: tuple[Finding, ...], why: str) -> tuple[Finding, ...]:
    """`findings` with each fix the judge would read the indexes for made Unchecked: the indexes
    could not be opened (`why`: a pip configuration that cannot be read)."""
    return tuple(replace(finding, fix=f.Unchecked(finding.fix, why)) if needs_index(finding) and finding.fix else finding
                 for finding in findings)


def needs_index(finding: Finding) -> bool:
    """Whether judging `finding`'s fix reads the indexes: a fix of pip steps, an arch fix that names
    no release, or a build to install (each made a release the indexes offer)."""
    fix = finding.fix
    if fix is None or finding.severity == Severity.INFO:
        return False
    if isinstance(fix, _ARCH_ADVICE) and isinstance(finding.problem, NoDeviceCode):
        return True
    return _has_build(fix) or any(change_of(option, paths=True) is not None for option in options(fix))


def _has_build(fix: f.Fix) -> bool:
    if isinstance(fix, f.Alternatives):
        return any(_has_build(option) for option in fix.options)
    if isinstance(fix, f.OrElse):
        return _has_build(fix.first) or _has_build(fix.second)
    if isinstance(fix, f.Explained):
        return _has_build(fix.fix)
    return isinstance(fix, f.InstallBuild)


_ARCH_ADVICE = (f.OlderReleaseMayCarry, f.NewerReleaseNeeded, f.BuildWithCuda, f.NoKnownRelease)


def _judged(env: Environment, host: HostFacts, finding: Finding, findings: tuple[Finding, ...],
            index: PackageIndex, offline: bool) -> Optional[f.Fix]:
    assert finding.fix is not None
    if isinstance(finding.fix, _ARCH_ADVICE) and isinstance(finding.problem, NoDeviceCode):
        return release_with_code(env, host, finding, findings, index, offline) or finding.fix
    fix = _builds_mapped(finding.fix, lambda build: release_for_build(env, host, finding, findings, build, index, offline))
    fix = offered_builds(fix, host, index, offline)
    if fix != finding.fix:
        return fix
    kept: list[f.Fix] = []  # the alternatives this room does not plan (a driver, a loader variable), as they are
    refused: list[f.Refused] = []
    passed = False
    for option in options(finding.fix):
        change = change_of(option)
        if change is None:
            # pip steps beside a loader path: the plan cannot follow the path, so only what pip's steps
            # bring is judged (a requirement broken, a major the driver cannot run, an error of the new
            # wheels' own code); where that cannot be read, the fix is printed as the tables give it
            partial = change_of(option, paths=True)
            try:
                why = refusal(env, host, finding, findings, partial, index, offline, whole=False) if partial else None
            except _CannotCheck:
                why = None
            if why is None:
                kept.append(option)
            else:
                refused.append(f.Refused(option, why))
        elif not passed:  # the first pip alternative that passes is the one printed
            try:
                why = refusal(env, host, finding, findings, change, index, offline)
            except _CannotCheck as cannot:  # printed as it is, saying so; the next alternative is judged too
                kept.append(f.Unchecked(option, cannot.unreadable))
                continue
            if why is None:
                kept.append(f.WithInstall(option, change.install, tuple(sorted(change.uninstall)))
                            if change.install and not change.reinstall else option)  # the install line removes what the fix removes
                passed = True
            else:
                refused.append(f.Refused(option, why))
    if not passed and refused:
        kept.append(f.NoFixFound(tuple(refused)))
    unchecked = [option for option in kept if isinstance(option, f.Unchecked)]
    if not passed and not refused and (not unchecked or len(unchecked) == len(kept)):
        # nothing here to plan, or none of it could be checked: the fix as the tables give it, saying so
        return f.Unchecked(finding.fix, unchecked[0].unreadable) if unchecked else finding.fix
    return kept[0] if len(kept) == 1 else f.Alternatives(tuple(kept))


def release_with_code(env: Environment, host: HostFacts, finding: Finding, findings: tuple[Finding, ...],
                      index: PackageIndex, offline: bool = False) -> Optional[f.Fix]:
    """For a package without code for a GPU, where the tables name no release: the newest release
    the indexes offer (of the newer ones when the installed build predates the GPU's first CUDA)
    whose own binaries, read on demand, run on every GPU here, judged as any fix. A release of a
    CUDA major no toolkit of which targets the GPUs is not tried (CUDA 13 for a Pascal GPU); one of
    another major than the installed comes in place of the NVIDIA wheels the package alone pulls in
    (cuda-toolkit[all] 12.9.1 for 13.5.0), and a component nothing requires may be the same
    component's wheel of that major (nvidia-cufft-cu12 for nvidia-cufft). A package one other pins
    exactly moves with that one's release. NoFixFound naming each
    release read when none does, or that no release of a major with the GPUs' code is offered;
    None when the indexes offer no other release."""
    name = finding.subject.distribution
    dist = env.distribution(name) if name else None
    if dist is None or dist.kind != "python":
        return None
    dist = _pinned_by(env, dist) or dist  # its release is its pinner's to choose (nvidia-npp's, cuda-toolkit's)
    ccs = tuple(sorted({gpu.compute_capability for gpu in host.visible_gpus}))
    targeting = majors_targeting(ccs)
    installed = release_major(dist.name, dist.version)
    tried: list[tuple[str, Version, Optional[int]]] = []
    skipped: set[int] = set()
    for candidate, version in _offered_releases(env, dist, index, isinstance(finding.fix, f.NewerReleaseNeeded)):
        major = release_major(candidate, version)
        if major is not None and major not in targeting:
            skipped.add(major)
            continue
        if len(tried) < ARCH_RELEASES:
            tried.append((candidate, version, major))
    refused = []
    for candidate, version, major in tried:
        option = _in_place(env, dist, candidate, version, major if major != installed else None)
        change = change_of(option)
        assert change is not None
        why = refusal(env, host, finding, findings, change, index, offline, read=not option.replaces)
        if why is None:
            return f.WithInstall(f.Explained(option, f.OfferedThatRuns(ccs)), option.requirements, option.replaces)
        refused.append(f.Refused(option, why))
    if skipped and not tried and finding.fix is not None:
        refused.append(f.Refused(finding.fix, f.NoMajorTargets(dist.name, tuple(sorted(skipped, reverse=True)), ccs,
                                                               newest_targeting(ccs, host), offline)))
    return f.NoFixFound(tuple(refused)) if refused else None


def _pinned_by(env: Environment, dist: Distribution) -> Optional[Distribution]:
    """The one installed package that requires `dist`, when it pins it exactly (`==`): only a release
    of that package can move it."""
    requirers = [d for d in env.distributions if dist.name in env.requires_names(d)]
    if len(requirers) != 1:
        return None
    pins = [r for r in env.requirements(requirers[0]) if canonicalize_name(r.name) == dist.name
            and any(spec.operator == "==" for spec in r.specifier)]
    return requirers[0] if pins else None


def _offered_releases(env: Environment, dist: Distribution, index: PackageIndex, newer_only: bool) -> list[tuple[str, Version]]:
    """(name, release) the indexes offer in place of `dist`, newest first: its own other releases,
    then, for an NVIDIA component nothing installed requires, the same component's other wheels."""
    names = [dist.name]
    if not any(dist.name in env.requires_names(d) for d in env.distributions):
        names += [n for n in components.same_component(dist.name) if n != dist.name]
    found = []
    for name in names:
        files = _files(index, name)
        versions = {file.version for file in files if file.is_wheel and file.yanked is None and not file.version.is_prerelease
                    and not (name == dist.name and (file.version == dist.version or newer_only and file.version < dist.version))}
        found += [(name, version) for version in sorted(versions, reverse=True)]
    return found


def release_cuda(name: str, version: Version) -> Optional[CudaVersion]:
    """The CUDA a release is built for, by the tables: the metapackage's version, a known build, or
    the one major of the component wheel's name (nvidia-cufft: 13)."""
    cuda = toolkit_pins.release_cuda(name, str(version))
    if cuda is not None:
        return cuda
    build = cuda_build(name, version)
    if build is not None:
        return build.cuda
    majors = {row.cuda_major for row in components.for_dist(name)}
    return CudaVersion(majors.pop()) if len(majors) == 1 else None


def release_major(name: str, version: Version) -> Optional[int]:
    cuda = release_cuda(name, version)
    return cuda.major if cuda is not None else None


def offered_builds(fix: f.Fix, host: HostFacts, index: PackageIndex, offline: bool = False) -> f.Fix:
    """`fix` with each "install a build of X for CUDA N" the indexes cannot serve said so: X is not
    offered, or every release offered is of a CUDA the tables know and none of N's major."""

    def offered(build: f.InstallBuild) -> Optional[f.Fix]:
        cuda = build.cuda or host.driver.cuda
        for name in build.of if cuda is not None else ():
            assert cuda is not None
            why = _no_build(name, cuda, index, offline)
            if why is not None:
                return f.NoFixFound((f.Refused(build, why),))
        return None

    return _builds_mapped(fix, offered)


def _builds_mapped(fix: f.Fix, change: Callable[[f.InstallBuild], Optional[f.Fix]]) -> f.Fix:
    """`fix` with each InstallBuild in it replaced by what `change` makes of it (None: kept)."""
    if isinstance(fix, f.InstallBuild):
        return change(fix) or fix
    if isinstance(fix, f.Alternatives):
        return f.Alternatives(tuple(_builds_mapped(option, change) for option in fix.options))
    if isinstance(fix, f.OrElse):
        return f.OrElse(_builds_mapped(fix.first, change), _builds_mapped(fix.second, change))
    if isinstance(fix, f.Explained):
        return f.Explained(_builds_mapped(fix.fix, change), fix.why)
    return fix


def release_for_build(env: Environment, host: HostFacts, finding: Finding, findings: tuple[Finding, ...],
                      build: f.InstallBuild, index: PackageIndex, offline: bool = False) -> Optional[f.Fix]:
    """"A build of X for CUDA N" made a release: of one installed X (of several, the one that pulls in
    the others) whose releases' CUDA the tables know (cuda-toolkit's is its version), the newest the
    indexes offer of N's major and no newer minor than N, in place of the wheels of another major X
    alone pulls in, judged as any fix; NoFixFound when none of those read passes; None when the
    tables or indexes name none."""
    cuda = build.cuda or host.driver.cuda
    # of several names, the one that pulls in the others (cuda-toolkit, which requires nvidia-cuda-nvcc)
    heads = [name for name in build.of if not any(name in pulled_in(env, other) for other in build.of if other != name)]
    dist = env.distribution(heads[0]) if len(heads) == 1 else None
    if cuda is None or dist is None or dist.kind != "python":
        return None
    files = _files(index, dist.name)
    fitting = []
    for version in sorted({file.version for file in files if file.is_wheel and file.yanked is None
                           and not file.version.is_prerelease}, reverse=True):
        made = release_cuda(dist.name, version)
        if made is not None and made.major == cuda.major and (made.minor is None or cuda.minor is None or made <= cuda):
            fitting.append(version)
    refused = []
    for version in fitting[:ARCH_RELEASES]:
        option = _in_place(env, dist, dist.name, version, cuda.major)
        change = change_of(option)
        assert change is not None
        why = refusal(env, host, finding, findings, change, index, offline)
        if why is None:
            return f.WithInstall(option, option.requirements, option.replaces)
        refused.append(f.Refused(option, why))
    return f.NoFixFound(tuple(refused)) if refused else None


def _in_place(env: Environment, dist: Distribution, name: str, version: Version, major: Optional[int]) -> f.PipInstall:
    """`pip install` of `name`'s `version` (with `dist`'s extras when it is `dist`'s own name) in place
    of `dist` when it is another name, and of the NVIDIA wheels of another major than `major` that
    `dist` alone pulls in."""
    replaced = set(other_major_wheels(env, {dist.name}, major) + _pinned_alone(env, dist) if major is not None else ())
    if name != dist.name:
        replaced.add(NormalizedName(dist.name))
    kept = _covering_extras(env, dist) if name == dist.name else ()
    extras = f"[{','.join(kept)}]" if kept else ""
    return f.PipInstall((Requirement(f"{name}{extras}=={version}"),), replaces=tuple(sorted(replaced)))


def _covering_extras(env: Environment, dist: Distribution) -> tuple[str, ...]:
    """`dist`'s installed extras without those whose requirements another kept one names too
    (cuda-toolkit[all] covers [cublas], [nvcc], ...): the extras a user would write."""
    markers = env.marker_environment
    names = {extra: {canonicalize_name(r.name) for r in dist.requires
                     if r.marker is not None and r.marker.evaluate({**markers, "extra": extra})} for extra in dist.extras}
    kept: list[str] = []
    for extra in sorted(names, key=lambda e: (-len(names[e]), e)):
        if names[extra] and not names[extra] <= set().union(*(names[k] for k in kept)):
            kept.append(extra)
    return tuple(sorted(kept))


def _pinned_alone(env: Environment, dist: Distribution) -> tuple[NormalizedName, ...]:
    """The installed wheels `dist` pins exactly (`==X.*`) and nothing else installed requires: its
    release's own set (cuda-toolkit 13.5.0's nvidia-cuda-nvcc, nvidia-npp, ...), which a release of
    another CUDA major leaves behind, pip keeping them."""
    pulled = pulled_in(env, dist.name)
    elsewhere = set().union(*(env.requires_names(d) for d in env.distributions if d.name not in pulled | {dist.name}))
    pinned = {canonicalize_name(r.name) for r in env.requirements(dist) if any(s.operator == "==" for s in r.specifier)}
    return tuple(sorted(NormalizedName(name) for name in pinned & pulled - elsewhere))


def _files(index: PackageIndex, name: str, variant: Optional[str] = None) -> tuple[ProjectFile, ...]:
    """The files of `name` that fit the target; _CannotCheck when its page cannot be read."""
    try:
        return index.installable(index.files(name, variant))
    except OfflineMiss:
        raise _CannotCheck(None) from None
    except IndexAccessError as exc:
        raise _CannotCheck(str(exc)) from None


def _no_build(name: str, cuda: CudaVersion, index: PackageIndex, offline: bool) -> Optional[f.Refusal]:
    versions = {file.version for file in _files(index, name) if file.is_wheel and file.yanked is None}
    if not versions:
        return f.NotOffered(Requirement(name), offline)
    builds = [cuda_build(name, version) for version in versions]
    if all(build is not None for build in builds) and not any(build.cuda.major == cuda.major for build in builds if build):
        return f.NoBuildOffered(name, cuda.major, offline)
    return None


def options(fix: f.Fix) -> Iterator[f.Fix]:
    """The alternatives of `fix`, in the order they are offered (the fix itself when it has none)."""
    if isinstance(fix, f.Alternatives):
        for option in fix.options:
            yield from options(option)
    elif isinstance(fix, f.OrElse):
        yield from options(fix.first)
        yield from options(fix.second)
    elif isinstance(fix, f.Explained) and isinstance(fix.fix, (f.Alternatives, f.OrElse)):
        yield from options(fix.fix)
    else:
        yield fix


def refusal(env: Environment, host: HostFacts, finding: Finding, findings: tuple[Finding, ...], change: Change,
            index: PackageIndex, offline: bool = False, *, read: bool = False, whole: bool = True) -> Optional[f.Refusal]:
    """Why the plan of `change` may not be printed as `finding`'s fix; None when it passes. With
    `read`, every wheel of the plan is read from the wheel itself (its device code decides). Not
    `whole` (a loader path finishes the fix, which the plan cannot follow): the requirements, the
    driver's major and the errors of the new wheels' own code and CUDA (`_OWN_CODE`)."""
    chosen = _chosen(env, change, index, offline)
    if not isinstance(chosen, list):
        return chosen
    kept = replace(env, distributions=tuple(d for d in env.distributions if d.name not in change.uninstall),
                   elf_files=tuple(e for e in env.elf_files if not set(e.owners) & change.uninstall),
                   shared_files=tuple(s for s in env.shared_files if change.uninstall.isdisjoint(s.owners)))
    try:
        linked = {soname for elf in kept.elf_files if elf.facts is not None for soname in elf.facts.needed}
        plan = planned_environment(kept, chosen, index, deep=read, gpus=bool(host.visible_gpus), linked=linked)
    except Unread as unread:
        if offline:  # a wheel --offline has not cached
            raise _CannotCheck(None) from None
        return f.NotOffered(Requirement(f"{unread.candidate.name}=={unread.candidate.version}"), offline)
    except IndexAccessError as exc:  # a wheel of the plan that cannot be fetched: this fix cannot be judged
        raise _CannotCheck(str(exc)) from None
    broken = _broken_requirement(env, plan, change)
    if broken is not None:
        return broken
    major = _left_major(env, plan, host)
    if major is not None:
        return major
    after = judge(plan, host).findings
    if whole and any(_same(finding, other) for other in after):
        return f.KeepsFinding()
    before = {_key(other) for other in findings if other.severity == Severity.ERROR}
    new = next((other for other in after if other.severity == Severity.ERROR and _key(other) not in before
                and (whole or other.check in _OWN_CODE)), None)
    if new is not None:
        subject = new.subject
        return f.AddsError(new.check.value, subject.distribution or subject.file)
    return None


def _chosen(env: Environment, change: Change, index: PackageIndex, offline: bool) -> "list[Candidate] | f.Refusal":
    """The wheels pip would install for `change`: each requirement's newest release the indexes offer
    (the installed one when it meets it and nothing is reinstalled), then, as pip does, the newest
    release of each requirement of theirs the environment does not meet; or why one is not offered."""
    markers = env.marker_environment
    installed = {d.name: d.version for d in env.distributions if d.name not in change.uninstall}
    chosen: dict[str, Candidate] = {}
    wanted = [(r, change.variant, change.reinstall) for r in change.install]
    while wanted:
        requirement, variant, reinstall = wanted.pop(0)
        name = canonicalize_name(requirement.name)
        have = chosen[name].version if name in chosen else installed.get(name)
        if have is not None and requirement.specifier.contains(have, prereleases=True) and not reinstall:
            continue
        if len(chosen) >= MAX_WHEELS:
            return f.NotOffered(requirement, offline)
        candidate = _newest(index, name, requirement, variant)
        if candidate is None:
            return f.NotOffered(requirement, offline)
        chosen[name] = candidate
        assert candidate.file is not None
        try:
            requires = index.metadata(candidate.file).requires_dist
        except WheelError:
            return f.NotOffered(requirement, offline)
        except OfflineMiss:
            raise _CannotCheck(None) from None
        except IndexAccessError as exc:
            raise _CannotCheck(str(exc)) from None
        for text in requires:
            needed = Requirement(text)
            if needed.marker is None or any(needed.marker.evaluate({**markers, "extra": e})
                                            for e in ("", *requirement.extras)):
                wanted.append((needed, variant if canonicalize_name(needed.name) in _variant_names(change) else None,
                               False))
    return list(chosen.values())


def _variant_names(change: Change) -> set[str]:
    return {canonicalize_name(r.name) for r in change.install} if change.variant else set()


def _newest(index: PackageIndex, name: NormalizedName, requirement: Requirement, variant: Optional[str]) -> Optional[Candidate]:
    """The newest wheel of `name` meeting `requirement` that fits the target, not yanked."""
    fitting = [file for file in _files(index, name, variant) if file.is_wheel and file.yanked is None
               and requirement.specifier.contains(file.version, prereleases=True)]
    if not fitting:
        return None
    best = max(fitting, key=lambda file: file.version)
    return Candidate(name, best.version, best, extras=frozenset(requirement.extras))


def _broken_requirement(env: Environment, plan: Environment, change: Change) -> Optional[f.BreaksRequirement]:
    """The first requirement (markers and installed extras applied) of a distribution that stays that
    the plan no longer meets: removed, or at a release outside its range."""
    planned = {d.name: d.version for d in plan.distributions}
    markers = env.marker_environment
    for dist in env.distributions:
        if dist.name in change.uninstall or planned.get(dist.name) != dist.version:
            continue  # removed or replaced: the new release's requirements are the judge's
        for requirement in env.requirements(dist):
            name = canonicalize_name(requirement.name)
            if name == dist.name:
                continue
            have = planned.get(name)
            if have is not None and requirement.specifier.contains(have, prereleases=True):
                continue
            if have is None and name not in {d.name for d in env.distributions}:
                continue  # unmet before the fix too: the dependency check says so already
            extra = None
            if requirement.marker is not None and not requirement.marker.evaluate({**markers, "extra": ""}):
                extra = next((e for e in sorted(dist.extras) if requirement.marker.evaluate({**markers, "extra": e})), None)
            bare = Requirement(str(requirement))
            bare.marker = None
            return f.BreaksRequirement(dist.name, dist.version, bare, extra, have)
    return None


def _left_major(env: Environment, plan: Environment, host: HostFacts) -> Optional[f.LeavesDriverMajor]:
    """A wheel the plan brings of a CUDA major the driver cannot run (more of the CUDA 13 an old
    driver already cannot run is no fix either), or of a major older than the newest of the installed
    builds the driver runs (a CUDA 12 torch replaced by a CUDA 11 build)."""
    driver = host.driver
    known = bool(driver.release or driver.cuda)

    def runs(major: int, minor: Optional[int]) -> bool:
        return not known or driver_verdict(CudaVersion(major, minor), driver.release, driver.cuda) is not None

    installed = cuda_builds(env)
    before = {(b.cuda.major, b.cuda.minor) for b in installed}
    # a major no toolkit of which targets the GPUs runs nothing here: leaving it is the fix (CUDA 13 on Pascal)
    targeting = majors_targeting(tuple(gpu.compute_capability for gpu in host.visible_gpus))
    running = [major for major, minor in before if runs(major, minor) and major in targeting]
    kept = max(running) if running else None
    stays = {(b.dist, b.version) for b in installed}
    for build in cuda_builds(plan):
        major, minor = build.cuda.major, build.cuda.minor
        if (build.dist, build.version) in stays:
            continue
        if not runs(major, minor):
            return f.LeavesDriverMajor(major, None)
        if (major, minor) in before:
            continue
        if kept is not None and major < kept:
            return f.LeavesDriverMajor(major, kept)
    return None


def _key(finding: Finding) -> tuple[object, ...]:
    """A finding without versions: the same problem of the same package after a change of release."""
    subject = finding.subject
    return (finding.check, subject.distribution, subject.file, subject.libraries, subject.scope, type(finding.problem))


def _same(finding: Finding, other: Finding) -> bool:
    return _key(finding) == _key(other)
