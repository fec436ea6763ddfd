"""Binary needs as requirements: the release of another CUDA component a library binds by versioned
symbol name (`__nvJitLinkComplete_12_4@libnvJitLink.so.12` -> nvidia-nvjitlink-cu12 >= 12.4), for a
candidate wheel (from the knowledge table) and for the files already installed (from their facts),
so the resolver satisfies them by construction instead of learning about them from the judge."""

from __future__ import annotations

from typing import Iterable, Iterator, Mapping, Optional

from packaging.requirements import Requirement

from cudaresolve.binary.facts import BinaryFacts
from cudaresolve.binary.loader import min_provider_version
from cudaresolve.knowledge import components, wheel_facts
from cudaresolve.versions import CudaVersion


def binary_requirements(name: str, version: str, filename: Optional[str]) -> Iterator[tuple[Requirement, str]]:
    """What a release's ELF files bind beyond its metadata, from the table (nothing when unknown),
    each with the one line that says why."""
    if wheel_facts.find(name, version, filename) is None:
        return
    for requirement, soname in _as_requirements(wheel_facts.min_provider_release(name, version, filename), exclude=name):
        yield requirement, f"{name} {version}'s binaries bind {soname} symbols of release {requirement.specifier}"


def installed_binary_requirements(facts: Iterable[tuple[Optional[str], BinaryFacts]]) -> list[tuple[Requirement, str]]:
    """What installed files ((owner, facts) pairs) bind: roots of the resolution, so a lock never
    plans a provider older than a consumer that stays needs."""
    minimum: dict[str, str] = {}
    owners: dict[str, str] = {}
    for owner, file_facts in facts:
        for symbol in file_facts.undefined:
            implied = min_provider_version(symbol)
            if implied and symbol.file and _newer(implied, minimum.get(symbol.file)):
                minimum[symbol.file] = implied
                owners[symbol.file] = owner or ""
    return [
        (requirement, f"installed {owners[soname] or 'files'} bind {soname} symbols of release {requirement.specifier}")
        for soname, floor in sorted(minimum.items())
        for requirement, _ in _as_requirements({soname: floor}, exclude=owners[soname])
    ]


def _as_requirements(floors: Mapping[str, str], *, exclude: str) -> Iterator[tuple[Requirement, str]]:
    for soname, floor in floors.items():
        major = CudaVersion.parse(floor).major
        rows = [row for row in components.for_soname(soname) if row.cuda_major == major and row.dist != exclude]
        for dist in sorted({row.dist for row in rows}):
            yield Requirement(f"{dist}>={floor}"), soname


def _newer(version: str, than: Optional[str]) -> bool:
    return than is None or CudaVersion.parse(version) > CudaVersion.parse(than)
