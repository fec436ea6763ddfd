"""metadata-vs-binary: a dependency the metadata leaves open below what the binary binds
(nvidia-cusparse-cu12 12.3.1.170 needs nvJitLink >= 12.4 but declares it unpinned).

May import: binary/loader (versioned names), checks/ (findings, suggestions), env/ and knowledge/;
the findings are values, output/ words them.
"""

from __future__ import annotations

from typing import Iterator, Optional

from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

from cudaresolve.binary.facts import Symbol
from cudaresolve.binary.loader import min_provider_version
from cudaresolve.checks.evidence import SymbolNeed
from cudaresolve.checks.findings import Check, Finding, Severity
from cudaresolve.checks.fixes import AddConstraint, Constrain, Explained, Fix, PipInstall
from cudaresolve.checks.problems import MetadataAdmitsOlder
from cudaresolve.checks.subjects import Subject
from cudaresolve.checks.suggest import provider_dists
from cudaresolve.env.environment import ElfFile, Environment
from cudaresolve.knowledge import components
from cudaresolve.versions import CudaVersion


def check_metadata_vs_binary(env: Environment) -> list[Finding]:
    """For each distribution: the newest provider release its files bind, against the requirement it
    declares on that provider (only requirements that apply here count)."""
    by_dist: dict[str, dict[str, tuple[CudaVersion, str, str]]] = {}  # dist -> provider soname -> (minimum, symbol, file)
    for elf, symbol, minimum in versioned_needs(env):
        assert symbol.file is not None  # a minimum is implied only by a version naming its file
        for owner in elf.owners:
            needs = by_dist.setdefault(owner, {})
            if symbol.file not in needs or minimum > needs[symbol.file][0]:
                needs[symbol.file] = (minimum, symbol.name, elf.path)
    findings = []
    for dist in env.distributions:
        needs = by_dist.get(dist.name, {})
        requirements = env.requirements(dist)
        for soname, (minimum, symbol_name, consumer) in sorted(needs.items()):
            for provider in provider_dists(soname, minimum.major):
                requirement = next((r for r in requirements if canonicalize_name(r.name) == provider), None)
                lower = _admitted_older(provider, requirement, minimum)
                if not lower:
                    continue  # nothing installable is too old: declared or not, any release binds
                findings.append(
                    Finding(
                        Check.METADATA_VS_BINARY, Severity.WARNING,
                        Subject(distribution=NormalizedName(dist.name), version=dist.version),
                        MetadataAdmitsOlder(provider, minimum, consumer, symbol_name, requirement, tuple(lower)),
                        (SymbolNeed(consumer, symbol_name, soname),),
                        _constrain(env, Requirement(f"{provider}>={minimum}")),
                    )
                )
    return findings


def _constrain(env: Environment, requirement: Requirement) -> Fix:
    """Install the floor, or, where the installed release meets it already (a `pip install` would
    change nothing), keep it with a constraints file."""
    installed = env.distribution(canonicalize_name(requirement.name))
    if installed is not None and requirement.specifier.contains(installed.version, prereleases=True):
        return AddConstraint(requirement)
    return Explained(PipInstall((requirement,)), Constrain())


def versioned_needs(env: Environment) -> Iterator[tuple[ElfFile, Symbol, CudaVersion]]:
    """(file, symbol, release) for each undefined symbol whose versioned name implies a minimum
    provider release (`__nvJitLinkComplete_12_4` -> 12.4)."""
    for elf in env.elf_files:
        for symbol in elf.facts.undefined if elf.facts else ():
            minimum = min_provider_version(symbol)
            if minimum:
                yield elf, symbol, minimum


def _admitted_older(provider: str, requirement: Optional[Requirement], minimum: CudaVersion) -> list[str]:
    """Known releases of `provider` below `minimum` that `requirement` admits (all of them if undeclared)."""
    component = next((c.name for c in components.for_dist(provider)), "")
    versions = sorted({version for _, version in components.wheel_releases(component)}, key=Version)
    older = [v for v in versions if Version(v).major == minimum.major and Version(v) < minimum.as_release()]
    if requirement is not None:
        older = [v for v in older if requirement.specifier.contains(v, prereleases=True)]
    return older
