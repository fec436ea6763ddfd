"""advisory: installed versions that match a known-bad release or combination in data/advisories.toml.

May import: checks/ (builds, findings), env/, host/, knowledge/advisories and verdicts/ (an advisory's
build and host conditions); the findings are values (the advisory's id, symptom and fix as the table
words them), output/ shows them.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Iterable, Mapping, Optional

from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name

from cudaresolve.checks.builds import CudaBuild
from cudaresolve.checks.evidence import References, Said
from cudaresolve.checks.findings import Check, Finding, Severity
from cudaresolve.checks.fixes import AdvisoryFix
from cudaresolve.checks.subjects import Subject
from cudaresolve.env.distributions import Distribution
from cudaresolve.env.environment import Environment
from cudaresolve.host.facts import HostFacts
from cudaresolve.knowledge import advisories
from cudaresolve.verdicts.rules import known_bad_release


def check_advisories(env: Environment, host: HostFacts, builds: Iterable[CudaBuild]) -> list[Finding]:
    """An advisory applies when an installed distribution matches one of its `affects` and every other
    condition holds. Requirement markers in `affects`, `together_with` and `unless` are evaluated in
    the target's marker environment: an aarch64-only combination is no problem on x86_64."""
    installed = {d.name: d for d in env.distributions}
    markers = env.marker_environment
    build_cuda = {b.dist: b.cuda for b in builds}
    findings = []
    for advisory in advisories.load():
        for text in advisory.affects:
            dist = _match(Requirement(text), installed, markers)
            if dist is None:
                continue
            if not all(_match(Requirement(t), installed, markers) for t in advisory.together_with):
                continue
            if any(_match(Requirement(t), installed, markers) for t in advisory.unless):
                continue
            verdict = known_bad_release(advisory, dist.version, build_cuda.get(dist.name), host)
            if verdict is None:
                continue
            referencing = _referencing(env, advisory.references) if advisory.references else ()
            if advisory.references and not referencing:
                continue
            findings.append(
                Finding(
                    Check.ADVISORY, Severity.WARNING, Subject(distribution=NormalizedName(dist.name), version=dist.version),
                    verdict,
                    tuple(Said(ref) for ref in advisory.refs) + referencing,
                    AdvisoryFix(advisory.id, advisory.fix),
                )
            )
    return findings


def _match(
    requirement: Requirement, installed: Mapping[str, Distribution], markers: Mapping[str, str]
) -> Optional[Distribution]:
    """The installed distribution `requirement` names, if its version matches and its marker holds here."""
    dist = installed.get(canonicalize_name(requirement.name))
    if dist is None or not requirement.specifier.contains(dist.version, prereleases=True):
        return None
    if requirement.marker is not None and not requirement.marker.evaluate({**markers, "extra": ""}):
        return None
    return dist


def _referencing(env: Environment, patterns: Iterable[str]) -> tuple[References, ...]:
    """One line per ELF file that needs (non-weak) a symbol matching one of `patterns`: the file and
    the first such symbol."""
    wanted = []
    for pattern in patterns:
        name, _, version = pattern.partition("@")
        wanted.append((re.compile(fnmatch.translate(name)).match, version or None))
    found = []
    for elf in env.elf_files:
        for symbol in elf.facts.undefined if elf.facts else ():
            if symbol.binding != "WEAK" and any(
                match(symbol.name) and version in (None, symbol.version) for match, version in wanted
            ):
                found.append(References(elf.path, symbol.name, symbol.version))
                break
    return tuple(found)
