"""Binary needs as requirements: the release of another CUDA component a library binds by versioned
symbol name (`__nvJitLinkComplete_12_4@libnvJitLink.so.12` -> nvidia-nvjitlink-cu12 >= 12.4), for a
candidate wheel (from the knowledge table) and for the files already installed (from their facts),
so the resolver satisfies them by construction instead of learning about them from the judge. Each
comes as a Need whose origin names the consumer, the binding file and a symbol.

The same for the Requires-Dist of installed distributions the plan keeps (`unmet_installed_needs`):
installers record no extras, so an extra counts as chosen when all its requirements are installed
(env.environment.installed_extras), and its requirements bind the plan too: `jax-cuda12-plugin`
installed with `[with-cuda]` keeps cuDNN at what that extra asks, whatever a new torch pins.

May import: binary/ (facts, the loader's symbol rule), env/, knowledge/ (components, wheel_facts),
versions, resolve/ (candidates, reasons).
"""

from __future__ import annotations

from typing import Iterable, Iterator, Optional

from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

from cudaresolve.binary.facts import Symbol
from cudaresolve.binary.loader import min_provider_version
from cudaresolve.binary.wheel import WheelFacts, split_symbol
from cudaresolve.env.environment import Environment, extras_named
from cudaresolve.knowledge import components, wheel_facts
from cudaresolve.resolve.candidates import Candidate
from cudaresolve.resolve.reasons import BinaryNeed, CandidateRef, Need, RequiredBy
from cudaresolve.versions import CudaVersion


def binary_requirements(name: str, version: Version, filename: Optional[str], machine: str) -> Iterator[Need]:
    """What a release's ELF files bind beyond its metadata, from the table's row of its file (else
    of its `machine` build, for an installed release); nothing when unknown."""
    row = wheel_facts.find(name, str(version), filename, None if filename else machine)
    if row is None:
        return
    consumer = CandidateRef(canonicalize_name(name), version)
    for soname, text_floor in wheel_facts.min_provider_release(name, str(version), row.filename).items():
        floor = CudaVersion.parse(text_floor)
        binding = next(
            ((member.path, split_symbol(text)[0]) for member in row.member for bind in member.binds if bind.file == soname
             for text in bind.symbols if _implies(text, soname) == floor),
            (None, None),
        )
        origin = BinaryNeed(consumer, False, soname, floor, file=binding[0], symbol=binding[1])
        yield from _as_needs(origin, exclude=name)


def read_needed(name: str, version: Version, filename: str, machine: str) -> bool:
    """A release of an NVIDIA component the table has no row for, of a component whose releases bind
    another wheel's versioned symbols (cuSPARSE binds nvJitLink's): only its own bytes give the floor,
    so its wheel is read (`wheel_binary_requirements`), not assumed to bind nothing."""
    return (bool(components.for_dist(name)) and wheel_facts.find(name, str(version), filename) is None
            and wheel_facts.binds_versioned(name, machine))


def wheel_binary_requirements(name: str, version: Version, facts: WheelFacts) -> Iterator[Need]:
    """What a wheel's own ELF files bind by versioned symbol name: per provider soname, the newest release."""
    consumer = CandidateRef(canonicalize_name(name), version)
    newest: dict[str, BinaryNeed] = {}
    for member in facts.members:
        for symbol in member.undefined:
            floor = min_provider_version(symbol)
            if floor is not None and symbol.file and (symbol.file not in newest or floor > newest[symbol.file].floor):
                newest[symbol.file] = BinaryNeed(consumer, False, symbol.file, floor, file=member.path.split("!", 1)[-1],
                                                 symbol=symbol.name)
    for _, origin in sorted(newest.items()):
        yield from _as_needs(origin, exclude=name)


def _implies(text: str, soname: str) -> Optional[CudaVersion]:
    """The release a bound `NAME@VERSION` implies."""
    symbol, version = split_symbol(text)
    return min_provider_version(Symbol(symbol, version, soname))


def installed_binary_requirements(installed: Environment) -> list[Need]:
    """What installed files bind: roots of the resolution, so a lock never plans a provider older
    than a consumer that stays needs. Per provider soname, the file binding the newest release."""
    newest: dict[str, BinaryNeed] = {}
    for elf in installed.elf_files:
        if elf.facts is None:
            continue
        dist = installed.distribution(elf.owner) if elf.owner else None
        consumer = CandidateRef(NormalizedName(dist.name), dist.version) if dist is not None else None  # None: files no RECORD lists
        for symbol in elf.facts.undefined:
            floor = min_provider_version(symbol)
            if floor is None or not symbol.file:
                continue
            known = newest.get(symbol.file)
            if known is None or floor > known.floor:
                newest[symbol.file] = BinaryNeed(consumer, True, symbol.file, floor, file=elf.path, symbol=symbol.name)
    return [need for _, origin in sorted(newest.items()) for need in _as_needs(origin, exclude=origin.consumer.name if origin.consumer else "")]


def _as_needs(origin: BinaryNeed, *, exclude: str) -> Iterator[Need]:
    """The component wheels that provide `origin.soname` in its major, each at least `origin.floor`."""
    rows = [row for row in components.for_soname(origin.soname) if row.cuda_major == origin.floor.major and row.dist != exclude]
    for dist in sorted({row.dist for row in rows}):
        yield Need(Requirement(f"{dist}>={origin.floor}"), origin)


def unmet_installed_needs(installed: Environment, chosen: Iterable[Candidate]) -> list[Need]:
    """The requirements of installed distributions the plan keeps that the wheels `chosen` would
    break: a Requires-Dist that applies in `installed` (markers, and the extras that count as chosen
    there) on a name the plan installs in a version it does not admit. Each comes with its origin
    RequiredBy(the installed distribution, its extra, installed): a root for the next resolution."""
    wheels = {c.name: c for c in chosen if c.file is not None}
    markers = installed.marker_environment
    needs: list[Need] = []
    for dist in installed.distributions:
        if dist.name in wheels:
            continue  # replaced: the new release's own requirements count
        for requirement in installed.requirements(dist):
            wheel = wheels.get(canonicalize_name(requirement.name))
            if wheel is None or requirement.specifier.contains(wheel.version, prereleases=True):
                continue
            extra = None
            if requirement.marker is not None and not requirement.marker.evaluate({**markers, "extra": ""}):
                extra = next((e for e in sorted(dist.extras & extras_named([requirement]))
                              if requirement.marker.evaluate({**markers, "extra": e})), None)
            origin = RequiredBy(CandidateRef(NormalizedName(dist.name), dist.version), extra, installed=True)
            unmarked = Requirement(str(requirement))
            unmarked.marker = None  # evaluated here: the origin names the extra
            needs.append(Need(unmarked, origin))
    return needs
