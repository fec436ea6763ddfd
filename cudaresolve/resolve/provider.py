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

May import: resolvelib, packaging, env/environment (extras named by markers), index/access, resolve/
(candidates, needs, reasons).
"""

from __future__ import annotations

import functools
from typing import Callable, Iterable, Iterator, Mapping, Optional, Sequence, Union

from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name
from resolvelib import AbstractProvider

from cudaresolve.env.environment import extras_named
from cudaresolve.index.access import PackageIndex
from cudaresolve.resolve.candidates import Candidate, CandidateFinder
from cudaresolve.resolve.needs import binary_requirements
from cudaresolve.resolve.reasons import ExtrasOf, Need, NoExtra, Rejection, RequiredBy

Identifier = tuple[NormalizedName, tuple[str, ...]]  # a name and the extras asked with it, sorted


class Provider(AbstractProvider):
    def __init__(
        self,
        finder: CandidateFinder,
        index: PackageIndex,
        markers: Mapping[str, str],
        excluded: set[tuple[str, str]],
        constraints: Sequence[Need] = (),
    ):
        self.finder = finder
        self.index = index
        self.markers = dict(markers)
        self.excluded = excluded  # (name, version) the judge refused
        self.constraints: dict[str, list[Need]] = {}  # pip's -c: limits, never reasons to install
        for constraint in constraints:
            self.constraints.setdefault(canonicalize_name(constraint.name), []).append(constraint)

    def identify(self, requirement_or_candidate: Union[Need, Candidate]) -> Identifier:
        return (canonicalize_name(requirement_or_candidate.name), tuple(sorted(requirement_or_candidate.extras)))

    def get_preference(self, identifier, resolutions, candidates, information, backtrack_causes) -> tuple:
        """Exact pins first, then names in conflict, then the rest by name (a stable order)."""
        needs = [info.requirement for info in information[identifier]]
        exact = any(s.operator in ("==", "===") for n in needs for s in n.requirement.specifier)
        conflicted = any(identifier == self.identify(cause.requirement) for cause in backtrack_causes)
        return (not exact, not conflicted, identifier)

    def find_matches(
        self, identifier: Identifier, requirements, incompatibilities
    ) -> Union[list[Candidate], Callable[[], Iterator[Candidate]]]:
        """The candidates that fit, best first. With extras, a factory resolvelib calls as it goes:
        whether a release provides an extra is in its metadata, read only as far as it looks."""
        name, extras = identifier
        wanted = list(requirements[identifier]) + self.constraints.get(name, [])
        bad = {(c.version, c.file) for c in incompatibilities[identifier]}
        exact = any(s.operator in ("==", "===") for n in wanted for s in n.requirement.specifier)
        fitting = []
        for candidate in self.finder.candidates(name):
            if (candidate.version, candidate.file) in bad or (name, str(candidate.version)) in self.excluded:
                continue
            if candidate.file is not None and candidate.file.yanked is not None and not exact:
                continue  # PEP 592: a yanked file only for an exact pin
            if all(n.requirement.specifier.contains(candidate.version) for n in wanted):
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

    def is_satisfied_by(self, requirement: Need, candidate: Candidate) -> bool:
        return canonicalize_name(requirement.name) == candidate.name and requirement.requirement.specifier.contains(candidate.version)

    def get_dependencies(self, candidate: Candidate) -> list[Need]:
        parent = candidate.ref
        if candidate.extras:
            base = Need(Requirement(f"{candidate.name}=={candidate.version}"), ExtrasOf(parent))
            needs = [base]
            for requirement in self._requires(candidate):
                extra = _extra_of(requirement, candidate.extras, self.markers)
                if extra is not None:
                    needs.append(Need(requirement, RequiredBy(parent, extra)))
            return needs
        kept = candidate.installed.extras if candidate.file is None and candidate.installed is not None else frozenset()
        needs = []
        for requirement in self._requires(candidate):
            if _applies(requirement, self.markers):
                needs.append(Need(requirement, RequiredBy(parent)))
            elif kept:
                extra = _extra_of(requirement, kept, self.markers)
                if extra is not None:  # an installed extra that counts as chosen keeps its needs
                    needs.append(Need(requirement, RequiredBy(parent, extra)))
        filename = candidate.file.filename if candidate.file else None
        return needs + list(binary_requirements(candidate.name, candidate.version, filename))

    def _requires(self, candidate: Candidate) -> Sequence[Requirement]:
        if candidate.file is None:
            assert candidate.installed is not None
            return candidate.installed.requires
        return tuple(Requirement(text) for text in self.index.metadata(candidate.file).requires_dist)


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
