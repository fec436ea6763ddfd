"""The lock's sentences: a locked package's reason, a candidate set aside, a CUDA major refused, and
why no set fits, each made from the resolver's records (resolve/reasons.py, lock.py, causes.py).
The report, `why`, the install plan, the JSON report and pylock.toml's words for people all come
from here, so one record always reads the same.

May import: packaging, arch, resolve/ (its records), output/findings and fixes (a finding's words).
"""

from __future__ import annotations

import textwrap
from typing import Optional, Sequence

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from cudaresolve.output.findings import kebab, shown
from cudaresolve.output.fixes import render_fix
from cudaresolve.output.verdicts import on, unworded, words
from cudaresolve.resolve.causes import (
    Bound,
    Cause,
    Conflict,
    FleetConflict,
    GaveUp,
    NoProvider,
    NoSolution,
    Refused,
    TooDeep,
    Unsatisfiable,
)
from cudaresolve.resolve.check import Skipped
from cudaresolve.resolve.lock import ExtraFor, LockedPackage, PreRelease, Reason, ReasonKind
from cudaresolve.resolve.reasons import (
    Asked,
    BelowPackageFloor,
    BinaryNeed,
    BreaksInstalled,
    CandidateRef,
    Constrained,
    CpuOnly,
    DriverTooOld,
    ExtrasOf,
    FactsUnknown,
    Judged,
    MajorRejection,
    MinorCompat,
    Need,
    NeedsSetAside,
    NoBinary,
    NoDeviceCode,
    NoExtra,
    NotNeeded,
    NoWheel,
    OlderCuda,
    Origin,
    OtherMajor,
    PreReleaseNotAllowed,
    Rejection,
    RejectionGrounds,
    RequiredBy,
    RequiresPython,
    Rule,
    SbsaOnJetson,
    SdistOnly,
    ShadowsConda,
    ToolkitTargets,
    Yanked,
    parent_of,
)
from cudaresolve.resolve.resolver import Unjudged
from cudaresolve.versions import DriverRelease

ENVIRONMENT = "CUDA major"  # the --explain and `why` entry for the environment's one CUDA major
MAX_REASONS = 4  # candidates set aside named on one line of a refusal
# A refusal a person reads: at most MAX_LINES lines of at most WIDTH characters (room left on the first
# for "cudaresolve: error: " within 200); --explain and --json keep the whole record.
MAX_LINES = 5
WIDTH = 180
# Rules about the index's files and the interpreter rather than the hosts: a refusal names them after
# the others, so "torch 2.10.0: a CPU-only build for aarch64" is not hidden behind "torch 1.13.1: no wheel".
INDEX_RULES = frozenset({Rule.NO_WHEEL, Rule.SDIST_ONLY, Rule.REQUIRES_PYTHON, Rule.YANKED, Rule.PRE_RELEASE})
# Rules whose words are the same for every release they set aside: a refusal names them once.
ONE_LINE_RULES = frozenset({Rule.SBSA_ON_JETSON})


def candidate(ref: CandidateRef) -> str:
    """`torch 2.7.1+cu128`."""
    return f"{ref.name} {ref.version}"


def is_environment(name: str) -> bool:
    """Whether `why NAME` asks about the environment's CUDA major."""
    return canonicalize_name(name) == canonicalize_name(ENVIRONMENT)


# -- a locked package ------------------------------------------------------------------------------


def reason(package: LockedPackage) -> str:
    """One line: why this version and build (a note first when the request was rewritten or a
    binary needs it)."""
    why = package.reason
    if why.kind is ReasonKind.CONDA:
        return f"provided by {package.provided_by}: pip must not replace it"
    if why.kind is ReasonKind.UNRECORDED:
        return ""
    if why.kind is ReasonKind.OTHER_SOURCE:
        return f"a {package.other_source} source in {why.written_by}'s lock (cudaresolve reads wheels only)"
    if why.kind is ReasonKind.KEPT:
        base = "installed, kept"
    else:
        base = why.build.evidence if why.build else "the newest release that fits"
    if why.extras:
        base += f", with [{','.join(why.extras)}]"
    note = _note(why) if package.files else None
    parts = [note, base] if note else [base]
    parts += [f"within pip's constraint at {constrained_at(origin)}" for origin in why.origins if isinstance(origin, Constrained)]
    parts += [f"needed by {installed_consumer(origin)}" for origin in why.origins if isinstance(origin, RequiredBy) and origin.installed]
    if why.prerelease:
        parts.append(PRERELEASE[why.prerelease])
    if package.sdist is not None and not package.wheels:
        parts.append("no wheel for the target: pip builds its sdist, running its code")
    return "; ".join(parts)


def constrained_at(origin: Constrained) -> str:
    """`c.txt:1`, or `c.txt:1, named by PIP_CONSTRAINT`."""
    return f"{origin.where}, named by {origin.via}" if origin.via else origin.where


PRERELEASE = {
    PreRelease.NAMED: "a pre-release: the requirement names one",
    PreRelease.PRE: "a pre-release: pip's pre option allows them",
    PreRelease.ONLY: "a pre-release: the only kind of release it has",
}


def _note(why: Reason) -> Optional[str]:
    """The request made concrete, else what installed files bind, else what chosen wheels bind."""
    added = ",".join(why.added_extras)
    libraries = (f"[{added}] added: its CUDA {why.cuda_major} libraries are not on the target"
                 if added and why.extra_for == ExtraFor.LIBRARIES else None)
    if why.asked_as:
        asked = f"asked for as {why.asked_as}: CuPy's wheel for the environment's CUDA {why.cuda_major}"
        return f"{asked}; {libraries}" if libraries else asked
    if libraries:
        return libraries
    if added:
        return f"asked for without a CUDA extra: [{added}] for the environment's CUDA {why.cuda_major}"
    needs = [origin for origin in why.origins if isinstance(origin, BinaryNeed)]
    shown = [need for need in needs if need.installed] or needs
    return "; ".join(binary_need(need) for need in shown) or None


def binary_need(need: BinaryNeed) -> str:
    if need.installed:
        who = need.consumer.name if need.consumer else "files"
        return f"installed {who} bind {need.soname} symbols of release >={need.floor}"
    assert need.consumer is not None
    if need.linked:
        return f"{candidate(need.consumer)}'s {need.file} links {need.soname}, which nothing else of the set provides"
    return f"{candidate(need.consumer)}'s binaries bind {need.soname} symbols of release >={need.floor}"


# -- candidates set aside --------------------------------------------------------------------------


def rejection(rejected: Rejection) -> str:
    """Why a candidate was set aside."""
    return grounds(rejected.evidence, rejected.candidate)


def rejection_line(rejected: Rejection) -> str:
    """`torch 2.7.1+cu118: older CUDA than +cu128, which runs here`."""
    label = candidate(rejected.candidate) + (" (installed)" if rejected.installed else "")
    return f"{label}: {rejection(rejected)}"


def major_rejection(rejected: MajorRejection) -> str:
    return grounds(rejected.evidence, None)


def grounds(found: RejectionGrounds, of: Optional[CandidateRef]) -> str:
    """The facts that set `of` (a candidate, or a CUDA major when None) aside, in one line."""
    if isinstance(found, SdistOnly):
        if found.via is not None:
            return f"no wheel for this interpreter, only an sdist, which pip's only-binary (from {found.via}) refuses"
        return "no wheel for this interpreter, only an sdist, and a build from source of a CUDA package is not judged"
    if isinstance(found, NoBinary):
        return f"pip's no-binary (from {found.via}) refuses its wheels, and it has no sdist"
    if isinstance(found, RequiresPython):
        return f"requires Python {found.specifier}"
    if isinstance(found, PreReleaseNotAllowed):
        return "a pre-release, and nothing asks for one (a requirement naming a pre-release, or --pre)"
    if isinstance(found, NoWheel):
        return "no wheel for this interpreter and platform"
    if isinstance(found, Yanked):
        return f"yanked ({found.reason or 'no reason given'}): taken only for an exact pin"
    if isinstance(found, (DriverTooOld, ToolkitTargets, NoDeviceCode, SbsaOnJetson, BelowPackageFloor)):
        return words(found)
    if isinstance(found, ShadowsConda):
        wheel = of.name if of else "the wheel"
        return (f"would shadow {found.soname} of {found.package}: pip must not replace conda's library; update it "
                f"with conda, or name {wheel} in the requirements to install the wheel beside it")
    if isinstance(found, OtherMajor):
        linked = f": its {found.file} links {found.soname}" if found.file and found.soname else ""
        return f"a CUDA {found.build_major} build{linked}; the environment is CUDA {found.environment_major}"
    if isinstance(found, CpuOnly):
        if found.machine:
            return (f"{words(found)}; the host has a GPU (taken only with --cpu): a build with CUDA for {found.machine} "
                    "is a newer release or the PyTorch variant index's")
        return f"{words(found)}; the host has a GPU (taken only for an exact pin of it or --cpu)"
    if isinstance(found, FactsUnknown):
        return f"its binaries are not known (no table row) and its wheel could not be read: {found.why}"
    if isinstance(found, NoExtra):
        return f"has no extra [{found.extra}]"
    if isinstance(found, MinorCompat):
        return f"{words(found)}, which the doctor warns about"
    if isinstance(found, BreaksInstalled):
        consumer = installed_consumer(RequiredBy(found.consumer, found.extra, installed=True))
        return f"needs {found.requirement}, and {consumer} needs {found.need}: no release fits both"
    if isinstance(found, NeedsSetAside):
        aside = found.set_aside
        more = f" (and {found.more} more releases it admits)" if found.more else ""
        return (f"needs {found.requirement}, and nothing here fits it: "
                f"{candidate(aside.candidate)}: {grounds(aside.evidence, aside.candidate)}{more}")
    if isinstance(found, Judged):
        if found.finding is not None:
            return f"{found.check}: {shown(found.finding).message}"
        return f"{found.check}: {kebab(found.problem)} ({found.subject})"  # read back from a lock file
    if isinstance(found, OlderCuda):
        return f"older CUDA than {_chosen(found.chosen_local)}, which runs here"
    if isinstance(found, NotNeeded):
        return f"not needed: {_chosen(found.chosen_local)} runs here and fits every requirement"
    unworded(found)


def _chosen(local: Optional[str]) -> str:
    return f"+{local}" if local else "the default build"


# -- no set fits -----------------------------------------------------------------------------------


def no_solution(failed: NoSolution, *, whole: bool = False) -> str:
    """The cause first and once (a CUDA major the hosts refuse: the GPU or the driver; hosts that
    share no major), then a line per requirement in conflict (per CUDA major tried, when they failed
    differently), each naming at most MAX_REASONS candidates set aside. Lines wrap at WIDTH (at
    spaces, so no name is split) within MAX_LINES in all, the first lines whole and the rest
    counted; `whole`: every line unwrapped, every candidate set aside named (--explain, --json)."""
    first = [f"CUDA {r.major} is not tried: {words(r.evidence)}" for r in failed.untried]
    if failed.conflict:
        first.insert(0, fleet_conflict(failed.conflict))
    major = len(failed.attempts) > 1
    rest = [(f"with CUDA {attempt.major}: " if major else "") + cause(one, whole=whole)
            for attempt in failed.attempts for one in attempt.causes]
    lines = list(dict.fromkeys(first + rest))
    if whole:
        return "\n".join(lines)
    said: list[str] = []
    for number, line in enumerate(lines):
        left = len(lines) - number - 1
        room = MAX_LINES - len(said) - (1 if left else 0)
        pieces = textwrap.wrap(line, WIDTH, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False) or [line]
        if room <= 0:
            said.append(f"and {left + 1} more (--explain or --json: every one)")
            break
        if len(pieces) > room:
            pieces = pieces[:room - 1] + [_cut(" ".join(pieces[room - 1:]))]
        said += [_cut(piece) for piece in pieces]
    return "\n".join(said)


def _cut(line: str) -> str:
    return line if len(line) <= WIDTH else line[:WIDTH - 3] + "..."


def requirement(found: Requirement) -> str:
    """A requirement as it applies: name, extras and specifier, its marker already evaluated for the target."""
    extras = f"[{','.join(sorted(found.extras))}]" if found.extras else ""
    return found.name + extras + (f" @ {found.url}" if found.url else str(found.specifier))


def grouped(rejections: Sequence[Rejection], *, every_rule: bool = False) -> list[str]:
    """A line per rejection, those of a rule in ONE_LINE_RULES (of any rule, with `every_rule`) with
    the same words joined into one line in the place of the first, newest first: "cupy-cuda12x
    14.2.0, 14.1.1 and 16 more: a server-Arm ..."."""
    lines: list[str] = []
    joined: dict[str, tuple[int, list[Rejection]]] = {}  # words -> (its line, the releases)
    for rejection in rejections:
        if rejection.rule not in ONE_LINE_RULES and not every_rule:
            lines.append(rejection_line(rejection))
            continue
        why = grounds(rejection.evidence, rejection.candidate)
        if why not in joined:
            joined[why] = (len(lines), [])
            lines.append(why)
        joined[why][1].append(rejection)
    for why, (line, group) in joined.items():
        group = sorted(group, key=lambda r: r.candidate.version, reverse=True)
        versions = [str(r.candidate.version) + (" (installed)" if r.installed else "") for r in group]
        named = ", ".join(versions[:2]) + (f" and {len(versions) - 2} more" if len(versions) > 2 else "")
        lines[line] = f"{group[0].candidate.name} {named}: {why}"
    return lines


def unjudged(note: Unjudged) -> list[str]:
    """The warnings of a locked set: a runtime no byte dates, an advisory of a deprecation (with the
    advisory's fix), and the wheels whose links were not read because the
    lock's budget for reading them was spent."""
    lines = []
    for finding in note.warnings:
        text = shown(finding)
        lines.append(f"warning: {text.subject}: {text.message}" + (f"; fix: {text.fix}" if text.fix else ""))
    if note.unread:
        names = ", ".join(candidate(ref) for ref in note.unread)
        lines.append(f"warning: the libraries {names} link{'s' if len(note.unread) == 1 else ''} were not read: this lock's "
                     f"budget of {note.budget / 1e6:,.0f} MB for reading wheels the knowledge tables do not know is spent; "
                     "the doctor judges their files after install")
    return lines


def no_provider(found: NoProvider) -> str:
    """`cuda11-ext 1.0's ext/_ext.so links libcublas.so.11, which no wheel of CUDA 12 installs (nvidia-cublas-cu11 is CUDA 11's)`."""
    major = f"CUDA {found.cuda_major}" if found.cuda_major is not None else "the set's CUDA"
    line = f"{candidate(found.consumer)}'s {found.file} links {found.soname}, which no wheel of {major} installs"
    if found.other_majors:
        line += " (" + ", ".join(f"{dist} is CUDA {other}'s" for other, dist in found.other_majors) + ")"
    return line + ", and nothing else of the set or the target provides it"


def cause(found: Cause, *, whole: bool = True) -> str:
    """One cause in one line; short (`whole` False): at most MAX_REASONS candidates set aside, the rest counted."""
    if isinstance(found, Unsatisfiable):
        by = required_by(found.origin)
        if found.unlisted:
            line = f"no project named {canonicalize_name(found.requirement.name)} on any index"
            line += (f" (required by {by})" if by else "") + (f"; the nearest CUDA name known: {found.nearest}" if found.nearest else "")
            return line
        line = f"nothing fits {requirement(found.requirement)}" + (f" (required by {by})" if by else "")
        line += "".join(f" under {constraint(c)}" for c in found.constraints)
        reasons = grouped(sorted(found.rejections, key=lambda r: r.rule in INDEX_RULES), every_rule=not whole)
        if found.conda is not None:
            conda = f"{found.conda.package} does not satisfy {found.conda.specifier}"
            reasons.insert(0, conda + (f": {render_fix(found.conda.fix)}" if found.conda.fix else ""))
        named = reasons if whole else reasons[:MAX_REASONS]
        more = len(reasons) - len(named)
        return "; ".join([line, *named]) + (f"; and {more} more" if more else "")
    if isinstance(found, Conflict):
        which = "both" if len(found.needs) == 2 else "them all"
        sides = ", ".join(f"{who(need.origin)} needs {requirement(need.requirement)}" for need in found.needs)
        return f"no release of {found.name} fits {which}: {sides}" + "".join(f" under {constraint(c)}" for c in found.constraints)
    if isinstance(found, Refused):
        text = shown(found.finding)
        return f"{text.subject}: {text.message}{on(found.host)}" + (f"; fix: {text.fix}" if text.fix else "")
    if isinstance(found, NoProvider):
        return no_provider(found)
    if isinstance(found, GaveUp):
        return f"gave up after {found.sets} sets refused by the checks; the last: {shown(found.last).message}"
    assert isinstance(found, TooDeep)
    bound = f"{found.limit} resolution rounds" if found.bound is Bound.ROUNDS else f"{found.limit} s of resolution"
    met = "; the conflict met most: " + "; ".join(cause(c, whole=whole) for c in found.conflict) if found.conflict else ""
    return f"no set found within {bound}{met}"


def required_by(origin: Origin) -> Optional[str]:
    """Who brought a requirement, for "required by ...": the installed or wheel file that binds a
    symbol and its distribution, or the candidate whose metadata names it; None for a root."""
    if isinstance(origin, BinaryNeed) and origin.file:
        binds = f", which binds {origin.symbol}" if origin.symbol else ""
        return f"{origin.file} ({_owner(origin)}){binds}"
    if isinstance(origin, RequiredBy) and origin.installed:
        return installed_consumer(origin)
    if isinstance(origin, ExtrasOf):
        return None  # the release a request with extras stands on is that request: not "required by" itself
    parent = parent_of(origin)
    return candidate(parent) if parent else None


def who(origin: Origin) -> str:
    """The side of a conflict that needs a requirement: "a 1.0", "the request (command line)"."""
    if isinstance(origin, Asked):
        return f"the request ({origin.where})"
    if isinstance(origin, Constrained):
        return f"pip's constraint ({constrained_at(origin)})"
    if isinstance(origin, BinaryNeed):
        if origin.file:
            binds = f", binding {origin.symbol}" if origin.symbol else ""
            return f"{origin.file} ({_owner(origin)}{binds})"
        return f"{_owner(origin)}'s binaries"
    if isinstance(origin, RequiredBy) and origin.installed:
        return installed_consumer(origin)
    if isinstance(origin, ExtrasOf):
        return f"{candidate(origin.parent)} with its extras"
    extra = f" with [{origin.extra}]" if isinstance(origin, RequiredBy) and origin.extra else ""
    return candidate(origin.parent) + extra


def installed_consumer(origin: RequiredBy) -> str:
    """`jax-cuda12-plugin 0.6.0 [with-cuda] (installed, stays)`: a distribution the plan keeps, with
    the extra its need came through (one that counts as chosen: all its requirements installed)."""
    extra = f" [{origin.extra}]" if origin.extra else ""
    return f"{candidate(origin.parent)}{extra} (installed, stays)"


def _owner(origin: BinaryNeed) -> str:
    if origin.consumer is None:
        return "a file no distribution lists"
    return candidate(origin.consumer)


def constraint(need: Need) -> str:
    """`pip's constraint demo<2 (c.txt:1, named by PIP_CONSTRAINT)`."""
    where = f" ({constrained_at(need.origin)})" if isinstance(need.origin, Constrained) else ""
    return f"pip's constraint {requirement(need.requirement)}{where}"


def fleet_conflict(conflict: FleetConflict) -> str:
    parts = []
    for host in conflict.hosts:
        why = "; ".join(f"not {r.major}: {words(r.evidence)}" for r in host.refused)
        parts.append(f"{host.host} runs CUDA {', '.join(map(str, host.runs)) or 'no major'} ({why})")
    return "no CUDA major runs on every host: " + "; ".join(parts)


def assumed(label: str, unstated: Sequence[Skipped], major: Optional[int], floor: Optional[DriverRelease], several: bool) -> str:
    """What a lock assumed of a host that states only some of its driver and GPUs, and how to pin it.
    `major` is the newest CUDA major the lock's builds are of, `floor` its driver floor."""
    where = f"{label}: " if several else ""
    if Skipped.DRIVER in unstated and Skipped.GPUS in unstated:
        return f"{where}no driver and no GPU known (no --driver/--gpu/--host): locking the CUDA builds the regular index serves by default"
    if Skipped.DRIVER in unstated:
        runs = "" if major is None else f" one that runs CUDA {major}" + (f" (driver >= {floor})" if floor else "")
        return f"{where}no driver known (no --driver/--cuda): assumed{runs or ' any driver'}; give --driver or --cuda to lock for yours"
    return f"{where}no GPU known (no --gpu): the device code of the locked builds was not checked for any GPU; give --gpu to lock for yours"


def lock_basis(python: Optional[str]) -> str:
    """Whether `lock` keeps the target's installed set (--python) or locks fresh."""
    if python is None:
        return ("locking fresh for this interpreter's tags and markers, keeping nothing installed "
                "(give --python PY to keep what PY has installed)")
    return f"keeping what {python} has installed where it fits (--upgrade to choose anew)"


def origin_step(origin: Origin, entry: LockedPackage) -> str:
    """One step of `why`'s path: who brought `entry` there, and with which requirement."""
    if isinstance(origin, Asked):
        asked = f" as {entry.reason.asked_as}" if entry.reason.asked_as else ""
        return f"asked for{asked} ({origin.where})"
    if isinstance(origin, Constrained):
        return f"within pip's constraint at {constrained_at(origin)}"
    if isinstance(origin, BinaryNeed):
        return f"needed: {binary_need(origin)}"
    if isinstance(origin, RequiredBy):
        held = f": {origin.requirement}" if origin.requirement else ""
        if origin.installed:
            return f"required by {installed_consumer(origin)}{held}"
        extra = f" [{origin.extra}]" if origin.extra else ""
        return f"required by {candidate(origin.parent)}{extra}{held}"
    return f"with the extras of {candidate(origin.parent)}"
