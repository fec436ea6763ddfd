"""What known CUDA component wheels' ELF files bind and carry (data/wheel_facts.toml).

Why a table: the resolver must know a candidate wheel's cross-component needs (cuSPARSE 12.3.1.170
binds `__nvJitLinkComplete_12_4`, so it needs nvJitLink >= 12.4 though its metadata does not say so)
without downloading 300 MB. scripts/record_wheel_facts.py reads the wheels once and writes the table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Mapping, Optional

from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from cudaresolve import records
from cudaresolve.arch import PtxTarget, Target
from cudaresolve.binary.facts import BinaryFacts, FatbinSummary, Symbol, SymbolTable, VersionNeed
from cudaresolve.binary.wheel import WheelFacts, split_symbol
from cudaresolve.errors import UsageError
from cudaresolve.knowledge import compiled, files
from cudaresolve.knowledge.files import CONFIDENCE, VERSION

FILE = "wheel_facts.toml"


def _versioned_symbol(value: str) -> None:
    name, at, version = value.partition("@")
    if not name or not at or not version.lstrip("@") or "@" in version.lstrip("@"):
        raise UsageError(f"expected NAME@VERSION or NAME@@VERSION, got {value!r}")


def ptx_target(value: str) -> None:
    """Check a PTX entry of a generated table: `compute_XY:ISA` (the ISA may be empty)."""
    target, colon, isa = value.partition(":")
    if Target.parse(target).kind != "ptx" or not colon or (isa and not re.fullmatch(r"\d+\.\d+", isa)):
        raise UsageError(f"expected compute_XY:ISA (ISA may be empty), got {value!r}")


def _sass(value: str) -> None:
    if Target.parse(value).kind != "sass":
        raise UsageError(f"not a SASS target: {value!r}")


def _sha256(value: str) -> None:
    if not re.fullmatch(r"[0-9a-f]{64}", value):
        raise UsageError(f"not a sha256 in lower-case hex: {value!r}")


def _canonical(value: str) -> None:
    if canonicalize_name(value) != value:
        raise UsageError(f"not a canonical distribution name: {value!r}")


_SYMBOLS = records.check(_versioned_symbol)


@dataclass(frozen=True)
class Bind:
    """What one member needs from one non-system provider file (`.gnu.version_r` and the symbols bound there)."""

    file: str  # "libnvJitLink.so.12"
    versions: tuple[str, ...]
    symbols: tuple[str, ...] = field(default=(), metadata=_SYMBOLS)  # NAME@VERSION
    min_version: Optional[str] = field(default=None, metadata=VERSION)  # the release the names imply: "12.4"


@dataclass(frozen=True)
class Member:
    """One ELF shared object of a wheel, reduced to what crosses components."""

    path: str  # inside the wheel
    soname: Optional[str] = None
    needed: tuple[str, ...] = ()
    rpath: tuple[str, ...] = ()
    runpath: tuple[str, ...] = ()
    version_definitions: tuple[str, ...] = ()
    binds: tuple[Bind, ...] = ()
    defines: tuple[str, ...] = field(default=(), metadata=_SYMBOLS)  # NAME@@VERSION (default) or NAME@VERSION
    sass: Optional[tuple[str, ...]] = field(default=None, metadata=records.check(_sass))  # None: no fatbin
    ptx: Optional[tuple[str, ...]] = field(default=None, metadata=records.check(ptx_target))  # TARGET:ISA
    undetermined: tuple[str, ...] = ()
    damage: tuple[str, ...] = ()
    # true: `defines` lists every dynamic definition of the member, so a name absent there is absent
    # (a missing symbol may be reported); the generator keeps only what crosses components: false
    complete: bool = False


@dataclass(frozen=True)
class Wheel:
    """One wheel as read: its identity (file name and sha256) and its ELF members."""

    name: str = field(metadata=records.check(_canonical))
    version: str = field(metadata=VERSION)
    filename: str
    sha256: str = field(metadata=records.check(_sha256))
    why: tuple[str, ...]  # which rule of the generator chose it
    machine: str
    member: tuple[Member, ...] = ()
    not_elf: tuple[str, ...] = ()
    confidence: str = field(default="H", metadata=CONFIDENCE)


@dataclass(frozen=True)
class _MachineReleases:
    machine: str
    added: tuple[str, ...]  # NAME==VERSION given to the generator's --only for that machine


@dataclass(frozen=True)
class _Releases:
    added: tuple[str, ...]  # NAME==VERSION given to the generator's --add
    machine: tuple[_MachineReleases, ...] = ()
    every: tuple[str, ...] = ()  # distributions with a row of every x86_64 release (the generator's --every)


@dataclass(frozen=True)
class _File:
    confidence: str = field(metadata=CONFIDENCE)
    releases: _Releases
    wheel: tuple[Wheel, ...] = ()


@compiled.table(FILE)
def load() -> tuple[Wheel, ...]:
    """Every wheel in the table, by name then version; file names are unique and match name and version."""
    rows = files.read(FILE, _File).wheel
    seen = set()
    for index, wheel in enumerate(rows):
        where = f"wheel[{index}]"
        try:
            name, version, _, _ = parse_wheel_filename(wheel.filename)
        except InvalidWheelFilename as exc:
            raise files.error(FILE, f"{where}.filename", str(exc)) from None
        if (name, version) != (wheel.name, Version(wheel.version)):
            raise files.error(FILE, f"{where}.filename", f"{wheel.filename!r} is not {wheel.name} {wheel.version}")
        if wheel.filename in seen:
            raise files.error(FILE, f"{where}.filename", f"{wheel.filename!r} is listed twice")
        seen.add(wheel.filename)
        for number, member in enumerate(wheel.member):
            for slot, bind in enumerate(member.binds):
                stray = [s for s in bind.symbols if s.partition("@")[2] not in bind.versions]
                if stray:
                    raise files.error(FILE, f"{where}.member[{number}].binds[{slot}].symbols",
                                      f"versions not needed from {bind.file}: {stray[:3]}")
            stray = [s for s in member.defines if s.partition("@")[2].lstrip("@") not in member.version_definitions]
            if stray:
                raise files.error(FILE, f"{where}.member[{number}].defines", f"versions the member does not define: {stray[:3]}")
    return rows


@compiled.derived(load)
def _by_name(rows: tuple[Wheel, ...]) -> Mapping[str, tuple[Wheel, ...]]:
    """The rows by distribution: a lookup reads one distribution's rows, not the whole table."""
    found: dict[str, list[Wheel]] = {}
    for wheel in rows:
        found.setdefault(wheel.name, []).append(wheel)
    return {name: tuple(group) for name, group in found.items()}


def find(name: str, version: str, filename: Optional[str] = None, machine: Optional[str] = None) -> Optional[Wheel]:
    """The table's row of a release for `machine` (of one file of it, when given), None when the
    table lacks it. A file name says its machine; a release has one row per machine it was read for."""
    release = Version(version)
    rows = [w for w in _by_name().get(canonicalize_name(name), ()) if Version(w.version) == release
            and (filename is None or w.filename == filename) and (machine is None or w.machine == machine)]
    if len(rows) > 1:
        raise UsageError(f"{name} {version} has {len(rows)} wheels in {FILE}: name the file or the machine")
    return rows[0] if rows else None


def releases(name: str, machine: str) -> tuple[Wheel, ...]:
    """The table's releases of one distribution for `machine`, newest first: the only ones a fix may
    name, since only their device code and CUDA builds are known."""
    rows = (w for w in _by_name().get(canonicalize_name(name), ()) if w.machine == machine)
    return tuple(sorted(rows, key=lambda w: Version(w.version), reverse=True))


def machines() -> tuple[str, ...]:
    """The machines the table has rows for."""
    return tuple(sorted({w.machine for w in load()}))


def binds_versioned(name: str, machine: str) -> bool:
    """Whether any release of `name` the table holds binds another wheel's versioned symbols (cuSPARSE
    binds nvJitLink's `__nvJitLink*_12_9`): a release of it without a row is read, not assumed free of them."""
    return any(bind.min_version for row in releases(name, machine) for member in row.member for bind in member.binds)


def carries_device_code(name: str, machine: str) -> bool:
    """Whether any release of `name` the table holds carries device code (cuDNN's fatbins): a release
    of it without a row is read for a stated GPU, not assumed to run there."""
    return any(member.sass is not None or member.ptx is not None for row in releases(name, machine) for member in row.member)


def min_provider_release(name: str, version: str, filename: Optional[str] = None, machine: Optional[str] = None) -> Mapping[str, str]:
    """Provider file -> the newest release any member's versioned symbol names imply ({} when none or unknown)."""
    row = find(name, version, filename, machine)
    found: dict[str, str] = {}
    for member in row.member if row else ():
        for bind in member.binds:
            if bind.min_version and (bind.file not in found or Version(bind.min_version) > Version(found[bind.file])):
                found[bind.file] = bind.min_version
    return dict(sorted(found.items()))


def from_record(wheel: Wheel) -> WheelFacts:
    """A table row as the WheelFacts a read of the wheel would give, reduced to what crosses components."""
    members = tuple(_member_facts(wheel.filename, wheel.machine, m) for m in wheel.member)
    return WheelFacts(wheel.filename, members, complete=False)


def _member_facts(label: str, machine: str, member: Member) -> BinaryFacts:
    undefined = [
        Symbol(name, version, bind.file)
        for bind in member.binds
        for name, version in map(split_symbol, bind.symbols)
    ]
    defined = []
    for text in member.defines:
        name, version = split_symbol(text)
        defined.append(Symbol(name, version, hidden="@@" not in text))
    fatbin = None
    if member.sass is not None or member.ptx is not None:
        ptx = tuple(PtxTarget(target, isa or None) for target, _, isa in (t.partition(":") for t in member.ptx or ()))
        fatbin = FatbinSummary(sass=member.sass or (), ptx=ptx, undetermined=member.undetermined, damage=member.damage)
    return BinaryFacts(
        path=f"{label}!{member.path}", machine=machine, elf_type="DYN", soname=member.soname,
        needed=member.needed, rpath=member.rpath, runpath=member.runpath, flags=0, flags_1=0,
        symbols=SymbolTable.of(undefined, defined), version_definitions=member.version_definitions,
        version_needs=tuple(VersionNeed(bind.file, bind.versions) for bind in member.binds), build_id=None,
        fatbin=fatbin, symbols_complete=member.complete,
    )
