"""The resolvelib provider: which candidates fit a requirement, and what a candidate needs.

Requirements travel as Needs (a packaging Requirement with its origin), so resolvelib's causes and
the chosen set's criteria say where each came from. Extras follow pip's model: `foo[x]` is its own
identifier, (name, extras), whose candidates are foo's candidates that provide the extra, with it set
(a release without it is set aside: NoExtra); each depends on `foo==<its version>` (the same wheel)
and on what the extra adds. An installed distribution's extras whose requirements are all installed
(env.environment.installed_extras: installers record none) count as chosen: their requirements are
its needs too. What a candidate needs is its
Requires-Dist (markers evaluated for the target, `extra` for its extras) plus its **binary needs**:
the release of another component its ELF files bind by versioned symbol (cuSPARSE 12.3.1.170 binds
`__nvJitLinkComplete_12_4`, so nvidia-nvjitlink-cu12 >= 12.4, which its metadata leaves unpinned),
read from the wheel-facts table.

Pre-releases follow pip's rule: a name's pre-releases are candidates only when a requirement or
constraint on it names one (`>=2.0rc1`), pip's pre option is given, or none of them names a version
and the name has no final release (pip's finder falls back to pre-releases only for an empty
specifier: `demo>2` with only 3.0rc1 above 2 finds nothing); an installed pre-release is kept like
any installed release. A candidate asked with extras must provide them (its metadata, read only as
far as resolvelib looks).

May import: resolvelib, packaging, env/environment (extras named by markers), index/access, resolve/
(candidates, needs, reasons).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Callable, Iterable, Iterator, Mapping, Optional, Sequence, Union

from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name
from resolvelib import AbstractProvider

from cudaresolve.binary.wheel import WheelError
from cudaresolve.env.environment import extras_named
from cudaresolve.index.access import PackageIndex
from cudaresolve.index.cache import OfflineMiss
from cudaresolve.resolve.candidates import Candidate, CandidateFinder
from cudaresolve.resolve.lock import PreRelease
from cudaresolve.resolve.needs import binary_requirements, read_needed, wheel_binary_requirements
from cudaresolve.resolve.reasons import ExtrasOf, Need, NoExtra, PreReleaseNotAllowed, Rejection, RequiredBy

if TYPE_CHECKING:
    from resolvelib.structs import RequirementInformation

Identifier = tuple[NormalizedName, tuple[str, ...]]  # a name and the extras asked with it, sorted

if TYPE_CHECKING:
    # Subscripted for the checker only: resolvelib 1.0's AbstractProvider is not generic at run time.
    _ProviderBase = AbstractProvider[Need, Candidate, Identifier]
else:
    _ProviderBase = AbstractProvider


class Provider(_ProviderBase):
    def __init__(
        self,
        finder: CandidateFinder,
        index: PackageIndex,
        markers: Mapping[str, str],
        excluded: set[tuple[str, str]],
        constraints: Sequence[Need] = (),
        pre: bool = False,
    ) -> None:
        self.finder = finder
        self.index = index
        self.markers = dict(markers)
        self.excluded = excluded  # (name, version) the judge refused
        self.constraints: dict[str, list[Need]] = {}  # pip's -c: limits, never reasons to install
        for constraint in constraints:
            self.constraints.setdefault(canonicalize_name(constraint.name), []).append(constraint)
        self.pre = pre  # pip's pre option: pre-releases of every name may be chosen

    def identify(self, requirement_or_candidate: Union[Need, Candidate]) -> Identifier:
        return (canonicalize_name(requirement_or_candidate.name), tuple(sorted(requirement_or_candidate.extras)))

    def get_preference(
        self,
        identifier: Identifier,
        resolutions: Mapping[Identifier, Candidate],
        candidates: Mapping[Identifier, Iterator[Candidate]],
        information: Mapping[Identifier, Iterator[RequirementInformation[Need, Candidate]]],
        backtrack_causes: Sequence[RequirementInformation[Need, Candidate]],
    ) -> tuple[bool, bool, Identifier]:
        """Exact pins first, then names in conflict, then the rest by name (a stable order)."""
        needs = [info.requirement for info in information[identifier]]
        exact = any(s.operator in ("==", "===") for n in needs for s in n.requirement.specifier)
        conflicted = any(identifier == self.identify(cause.requirement) for cause in backtrack_causes)
        return (not exact, not conflicted, identifier)

    def find_matches(
        self,
        identifier: Identifier,
        requirements: Mapping[Identifier, Iterator[Need]],
        incompatibilities: Mapping[Identifier, Iterator[Candidate]],
    ) -> Union[list[Candidate], Callable[[], Iterator[Candidate]]]:
        """The candidates that fit, best first. With extras, a factory resolvelib calls as it goes:
        whether a release provides an extra is in its metadata, read only as far as it looks."""
        name, extras = identifier
        wanted = list(requirements[identifier]) + self.constraints.get(name, [])
        bad = {(c.version, c.file) for c in incompatibilities[identifier]}
        exact = _exact(wanted)
        prereleases = self.prereleases(name, wanted) is not None
        fitting: list[Candidate] = []
        for candidate in self.finder.candidates(name):
            if (candidate.version, candidate.file) in bad or (name, str(candidate.version)) in self.excluded:
                continue
            if candidate.file is not None and candidate.file.yanked is not None and not exact:
                continue  # PEP 592: a yanked file only for an exact pin
            if candidate.file is not None and candidate.version.is_prerelease and not prereleases:
                self.finder.rejections.add(Rejection(candidate.ref, PreReleaseNotAllowed()))
                continue
            if all(n.requirement.specifier.contains(candidate.version, prereleases=True) for n in wanted):
                fitting.append(candidate)
        if not extras:
            return fitting
        return functools.partial(self._with_extras, fitting, extras)

    def _with_extras(self, fitting: list[Candidate], extras: tuple[str, ...]) -> Iterator[Candidate]:
        """Each of `fitting` that provides `extras`, with them set; the others set aside."""
        for candidate in fitting:
            missing = missing_extra(self.index, candidate, extras)
            if missing is not None:
                self.finder.rejections.add(Rejection(candidate.ref, NoExtra(missing), installed=candidate.file is None))
                continue
            yield candidate.with_extras(extras)

    def prereleases(self, name: NormalizedName, wanted: Sequence[Need]) -> Optional[PreRelease]:
        """Why pre-releases of `name` may be chosen under the requirements `wanted` (its constraints
        included), by pip's rule; None: they may not."""
        if any(n.requirement.specifier.prereleases for n in wanted):
            return PreRelease.NAMED
        if self.pre:
            return PreRelease.PRE
        if any(n.requirement.specifier for n in wanted):
            return None
        exact = _exact(wanted)
        for candidate in self.finder.candidates(name):
            if candidate.file is not None and not candidate.version.is_prerelease and (candidate.file.yanked is None or exact):
                return None
        return PreRelease.ONLY

    def is_satisfied_by(self, requirement: Need, candidate: Candidate) -> bool:
        return canonicalize_name(requirement.name) == candidate.name and requirement.requirement.specifier.contains(
            candidate.version, prereleases=True
        )

    def get_dependencies(self, candidate: Candidate) -> list[Need]:
        parent = candidate.ref
        if candidate.extras:
            base = Need(Requirement(f"{candidate.name}=={candidate.version}"), ExtrasOf(parent))
            needs = [base]
            for requirement in self._requires(candidate):
                extra = _extra_of(requirement, candidate.extras, self.markers)
                if extra is not None:
                    needs.append(Need(requirement, RequiredBy(parent, extra, requirement=held(requirement))))
            return needs
        kept = candidate.installed.extras if candidate.file is None and candidate.installed is not None else frozenset()
        needs = []
        for requirement in self._requires(candidate):
            if _applies(requirement, self.markers):
                needs.append(Need(requirement, RequiredBy(parent, requirement=held(requirement))))
            elif kept:
                extra = _extra_of(requirement, kept, self.markers)
                if extra is not None:  # an installed extra that counts as chosen keeps its needs
                    needs.append(Need(requirement, RequiredBy(parent, extra, requirement=held(requirement))))
        filename = candidate.file.filename if candidate.file else None
        if candidate.file is not None and read_needed(candidate.name, candidate.version, candidate.file.filename, self.finder.machine):
            try:
                facts = self.index.binary_facts(candidate.file)
            except (WheelError, OfflineMiss):
                return needs  # unread: the plan's judge reads it again and says why
            return needs + list(wheel_binary_requirements(candidate.name, candidate.version, facts))
        return needs + list(binary_requirements(candidate.name, candidate.version, filename, self.finder.machine))

    def _requires(self, candidate: Candidate) -> Sequence[Requirement]:
        if candidate.file is None:
            assert candidate.installed is not None
            return candidate.installed.requires
        return tuple(Requirement(text) for text in self.index.metadata(candidate.file).requires_dist)


def _exact(needs: Sequence[Need]) -> bool:
    return any(s.operator in ("==", "===") for n in needs for s in n.requirement.specifier)


def missing_extra(index: PackageIndex, candidate: Candidate, extras: Iterable[str]) -> Optional[str]:
    """The first of `extras` (sorted) the candidate's metadata does not provide, normalised; None when
    it provides them all. Provided: what Provides-Extra declares; for metadata without Provides-Extra
    (and for an installed distribution, whose record cudaresolve keeps without it), the extras its
    Requires-Dist markers name."""
    if candidate.file is not None:
        metadata = index.metadata(candidate.file)
        declared = frozenset(canonicalize_name(extra) for extra in metadata.provides_extra)
        provided = declared or extras_named(Requirement(text) for text in metadata.requires_dist)
    else:
        assert candidate.installed is not None
        provided = extras_named(candidate.installed.requires)
    return next((extra for extra in sorted(canonicalize_name(e) for e in extras) if extra not in provided), None)


def _applies(requirement: Requirement, markers: Mapping[str, str]) -> bool:
    """Whether a Requires-Dist applies to the base release: its marker holds without an extra."""
    return requirement.marker is None or requirement.marker.evaluate({**markers, "extra": ""})


def _extra_of(requirement: Requirement, extras: frozenset[str], markers: Mapping[str, str]) -> Optional[str]:
    """The first of `extras` a Requires-Dist holds only with (None: it does not come with them)."""
    if requirement.marker is None or _applies(requirement, markers):
        return None
    return next((extra for extra in sorted(extras) if requirement.marker.evaluate({**markers, "extra": extra})), None)


def root_requirements(needs: Iterable[Need], markers: Mapping[str, str]) -> list[Need]:
    """The requested requirements whose markers hold on the target."""
    return [need for need in needs if _applies(need.requirement, markers)]


def held(requirement: Requirement) -> str:
    """A parent's requirement as `why` shows it: without its marker, which held where it was locked."""
    bare = Requirement(str(requirement))
    bare.marker = None
    return str(bare)
