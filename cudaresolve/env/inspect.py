"""`cudaresolve inspect`: the binary facts of whatever the user names, without loading or extracting it.

A name is a `.so` file, a directory (every ELF file below it), a `.whl` file (its ELF members are
read from the zip into memory; nothing is written to disk) or an installed distribution (its
RECORD says which files are its own).

A name that cannot be read or found is reported like a file that cannot be read, an `Inspected`
with its error, so the other names are still read and the CLI exits 2 ("problems found").

`summary` is what a report says first: the CUDA libraries needed from outside, the device-code
range, the CUDA runtimes carried.

May import: binary/, knowledge/components (which sonames are CUDA's), env/ and the base values;
never checks/ or output/.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass
from typing import Optional

from packaging.utils import canonicalize_name

from cudaresolve.arch import Target as DeviceTarget
from cudaresolve.binary.elf import is_elf, read_binary_facts
from cudaresolve.binary.facts import BinaryFacts, CudaRuntime
from cudaresolve.binary.loader import min_provider_version
from cudaresolve.binary.names import is_shared_object_name
from cudaresolve.binary.wheel import WheelError, WheelFacts, read_wheel
from cudaresolve.env.distributions import read_distributions
from cudaresolve.env.interpreter import Target
from cudaresolve.env.scan import find_elf_files
from cudaresolve.errors import CudaresolveError
from cudaresolve.knowledge import components
from cudaresolve.versions import CudaVersion


@dataclass(frozen=True)
class Inspected:
    """One library: its facts, or why they could not be read."""

    path: str  # a file path, or "<wheel>!<member>" for a file inside a wheel
    facts: Optional[BinaryFacts]
    error: Optional[str] = None
    source: str = "file"  # "file", or "table": the knowledge table's partial facts of a wheel not read


@dataclass(frozen=True)
class ProviderNeeds:
    """What a library needs from one provider file: versions, the symbols bound to them, the minimum release."""

    file: str  # "libnvJitLink.so.12"
    versions: tuple[str, ...]
    symbols: tuple[str, ...]  # versioned undefined symbols bound to this file
    min_version: Optional[CudaVersion]  # 12.4 when the symbol names encode it


@dataclass(frozen=True)
class Summary:
    """What many inspected libraries come to: how many were read, the CUDA libraries they need that
    none of them is, the lowest and highest SASS and PTX targets, and the CUDA runtimes carried."""

    read: int
    unread: int
    cuda_needed: tuple[str, ...]  # sonames the knowledge table or the driver's list names
    sass: tuple[DeviceTarget, ...]  # every SASS target, sorted by compute capability
    ptx: tuple[DeviceTarget, ...]
    runtimes: tuple[tuple[str, CudaRuntime], ...]  # (path, runtime)
    device_code_skipped: int = 0  # libraries whose device code the reader refused whole: the span leaves them out


def summary(items: list[Inspected]) -> Summary:
    facts = [item.facts for item in items if item.facts is not None]
    own = {f.soname for f in facts if f.soname} | {os.path.basename(item.path.split("!")[-1]) for item in items}
    cuda = set(components.driver_libraries())
    needed = sorted({n for f in facts for n in f.needed if n not in own and (n in cuda or components.for_soname(n))})
    sass = {DeviceTarget.parse(t) for f in facts if f.fatbin for t in f.fatbin.sass}
    ptx = {DeviceTarget.parse(p.target) for f in facts if f.fatbin for p in f.fatbin.ptx}
    return Summary(
        read=len(facts), unread=len(items) - len(facts), cuda_needed=tuple(needed),
        sass=tuple(sorted(sass, key=lambda t: (t.cc, t.suffix))), ptx=tuple(sorted(ptx, key=lambda t: (t.cc, t.suffix))),
        runtimes=tuple((item.path, item.facts.cuda_runtime) for item in items if item.facts and item.facts.cuda_runtime),
        device_code_skipped=sum(1 for f in facts if f.fatbin and f.fatbin.skipped),
    )


def inspect_names(names: list[str], target: Target) -> list[Inspected]:
    """Facts of every library the names denote, in the order given."""
    found: list[Inspected] = []
    for name in names:
        if name.endswith(".whl") and os.path.isfile(name):
            found += _inspect_wheel(name)
        elif os.path.isdir(name):
            paths, problems = find_elf_files(name)
            found += [_inspect_file(p) for p in sorted(paths)]
            found += [Inspected(p.path, None, p.reason) for p in problems]
        elif os.path.exists(name):
            if is_elf(name):
                found.append(_inspect_file(name))
            else:
                found.append(Inspected(name, None, "not an ELF file, directory, wheel or installed distribution"))
        else:
            found += _inspect_distribution(name, target)
    return found


def provider_needs(facts: BinaryFacts) -> tuple[ProviderNeeds, ...]:
    """Versioned symbol needs grouped by the file they must come from, with the release they imply."""
    versions: dict[str, set[str]] = defaultdict(set)
    symbols: dict[str, list[str]] = defaultdict(list)
    minimum: dict[str, CudaVersion] = {}
    for need in facts.version_needs:
        versions[need.file].update(need.versions)
    for symbol in facts.undefined:
        if symbol.file is None:
            continue
        symbols[symbol.file].append(symbol.name)
        implied = min_provider_version(symbol)
        if implied and (symbol.file not in minimum or implied > minimum[symbol.file]):
            minimum[symbol.file] = implied
    return tuple(
        ProviderNeeds(file, tuple(sorted(versions[file])), tuple(sorted(symbols.get(file, ()))), minimum.get(file))
        for file in sorted(versions)
    )


def _inspect_file(path: str) -> Inspected:
    try:
        return Inspected(path, read_binary_facts(path))
    except CudaresolveError as exc:
        return Inspected(path, None, str(exc))
    except OSError as exc:
        return Inspected(path, None, f"cannot read: {exc.strerror or exc}")


def _inspect_wheel(wheel: str) -> list[Inspected]:
    try:
        with open(wheel, "rb") as stream:
            read = read_wheel(stream, wheel)
    except WheelError as exc:
        return [Inspected(wheel, None, exc.reason)]
    except OSError as exc:
        return [Inspected(wheel, None, f"not a readable wheel ({exc})")]
    return wheel_items(read)


def wheel_items(read: WheelFacts) -> list[Inspected]:
    """One item per ELF member of a wheel read (or known from the table), then its unreadable members."""
    source = "file" if read.complete else "table"
    found = [Inspected(facts.path, facts, source=source) for facts in read.members]
    found += [Inspected(f"{read.label}!{member}", None, why) for member, why in read.unreadable]
    return found


def _inspect_distribution(name: str, target: Target) -> list[Inspected]:
    wanted = canonicalize_name(name)
    for site_packages in target.site_packages:
        distributions, _ = read_distributions(site_packages)
        for dist in distributions:
            if dist.name == wanted:
                paths = [p for p in dist.files if is_shared_object_name(os.path.basename(p)) and is_elf(p)]
                return [_inspect_file(p) for p in sorted(paths)]
    return [
        Inspected(
            name,
            None,
            "no such file or directory, and no distribution of that name is installed in "
            + ", ".join(target.site_packages),
        )
    ]

