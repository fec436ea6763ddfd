"""The resolvelib provider: which candidates fit a requirement, and what a candidate needs.

Extras follow pip's model: `foo[x]` is its own identifier whose candidates are foo's candidates with
the extra set; each depends on `foo==<its version>` (the same wheel) and on what the extra adds.
What a candidate needs is its Requires-Dist (markers evaluated for the target, `extra` for its
extras) plus its **binary needs**: the release of another component its ELF files bind by versioned
symbol (cuSPARSE 12.3.1.170 binds `__nvJitLinkComplete_12_4`, so nvidia-nvjitlink-cu12 >= 12.4,
which its metadata leaves unpinned), read from the wheel-facts table.
"""

from __future__ import annotations

from typing import Iterable, Iterator, Mapping, Sequence

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from resolvelib import AbstractProvider

from cudaresolve.index.access import PackageIndex
from cudaresolve.resolve.candidates import Candidate, CandidateFinder
from cudaresolve.resolve.needs import binary_requirements


class Provider(AbstractProvider):
    def __init__(
        self,
        finder: CandidateFinder,
        index: PackageIndex,
        markers: Mapping[str, str],
        excluded: set[tuple[str, str]],
        constraints: Sequence[Requirement] = (),
    ):
        self.finder = finder
        self.index = index
        self.markers = dict(markers)
        self.excluded = excluded  # (name, version) the judge refused
        self.binary_reasons: dict[str, list[str]] = {}  # name -> why a binary need asks for it
        self.constraints: dict[str, list[Requirement]] = {}  # pip's -c: limits, never reasons to install
        for constraint in constraints:
            self.constraints.setdefault(canonicalize_name(constraint.name), []).append(constraint)

    def identify(self, requirement_or_candidate) -> str:
        name = canonicalize_name(requirement_or_candidate.name)
        extras = sorted(requirement_or_candidate.extras)
        return f"{name}[{','.join(extras)}]" if extras else name

    def get_preference(self, identifier, resolutions, candidates, information, backtrack_causes) -> tuple:
        """Exact pins first, then names in conflict, then the rest by name (a stable order)."""
        requirements = [info.requirement for info in information[identifier]]
        exact = any(s.operator in ("==", "===") for r in requirements for s in r.specifier)
        conflicted = any(identifier == self.identify(cause.requirement) for cause in backtrack_causes)
        return (not exact, not conflicted, identifier)

    def find_matches(self, identifier, requirements, incompatibilities) -> Iterator[Candidate]:
        name, _, extras_text = identifier.partition("[")
        extras = frozenset(extras_text.rstrip("]").split(",")) if extras_text else frozenset()
        wanted = list(requirements[identifier]) + self.constraints.get(name, [])
        bad = {(c.version, c.file) for c in incompatibilities[identifier]}
        exact = any(s.operator in ("==", "===") for r in wanted for s in r.specifier)
        for candidate in self.finder.candidates(name):
            if (candidate.version, candidate.file) in bad or (name, str(candidate.version)) in self.excluded:
                continue
            if candidate.file is not None and candidate.file.yanked is not None and not exact:
                continue  # PEP 592: a yanked file only for an exact pin
            if all(self._admits(r, candidate) for r in wanted):
                yield candidate.with_extras(extras) if extras else candidate

    def is_satisfied_by(self, requirement: Requirement, candidate: Candidate) -> bool:
        return canonicalize_name(requirement.name) == candidate.name and self._admits(requirement, candidate)

    def get_dependencies(self, candidate: Candidate) -> list[Requirement]:
        if candidate.extras:
            base = Requirement(f"{candidate.name}=={candidate.version}")
            return [base] + [r for r in self._requires(candidate) if _for_extras(r, candidate.extras, self.markers)]
        needs = [r for r in self._requires(candidate) if _for_extras(r, frozenset(), self.markers)]
        return needs + list(self._binary_needs(candidate))

    def _requires(self, candidate: Candidate) -> Sequence[Requirement]:
        if candidate.file is None:
            assert candidate.installed is not None
            return candidate.installed.requires
        return tuple(Requirement(text) for text in self.index.metadata(candidate.file).requires_dist)

    def _binary_needs(self, candidate: Candidate) -> Iterator[Requirement]:
        filename = candidate.file.filename if candidate.file else None
        for requirement, why in binary_requirements(candidate.name, str(candidate.version), filename):
            reasons = self.binary_reasons.setdefault(canonicalize_name(requirement.name), [])
            if why not in reasons:
                reasons.append(why)
            yield requirement

    @staticmethod
    def _admits(requirement: Requirement, candidate: Candidate) -> bool:
        return requirement.specifier.contains(candidate.version)


def _for_extras(requirement: Requirement, extras: frozenset[str], markers: Mapping[str, str]) -> bool:
    """Whether a Requires-Dist applies: for the base (`extras` empty) those without an extra marker,
    for an extras candidate those that hold only with one of its extras."""
    if requirement.marker is None:
        return not extras
    base = requirement.marker.evaluate({**markers, "extra": ""})
    if not extras:
        return base
    return not base and any(requirement.marker.evaluate({**markers, "extra": extra}) for extra in extras)


def root_requirements(texts: Iterable[str], markers: Mapping[str, str]) -> list[Requirement]:
    """The requested requirements whose markers hold on the target."""
    found = []
    for text in texts:
        requirement = Requirement(text)
        if requirement.marker is None or requirement.marker.evaluate({**markers, "extra": ""}):
            found.append(requirement)
    return found
