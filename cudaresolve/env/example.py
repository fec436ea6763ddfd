"""The built-in example: a planned environment read from data/example.toml, judged by
`cudaresolve doctor --example` on any machine, with no GPU and nothing installed.

It is nvidia-cusparse-cu12 12.3.1.170 beside nvidia-nvjitlink-cu12 12.1.105, reduced by
scripts/make_example.py to the libraries and symbols between the two: cuSPARSE binds nvJitLink
12.4's versioned names, which 12.1 lacks. Being a planned environment (nothing on disk), it shows
the one judge that `lock` will use too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Mapping, Optional

from packaging.requirements import Requirement
from packaging.version import Version

from cudaresolve.arch import PtxTarget
from cudaresolve.binary.facts import BinaryFacts, FatbinSummary, Symbol, SymbolTable, VersionNeed
from cudaresolve.binary.loader import LoaderEnv
from cudaresolve.env.distributions import Distribution
from cudaresolve.env.environment import ElfFile, Environment
from cudaresolve.env.interpreter import Target
from cudaresolve.knowledge import files
from cudaresolve.knowledge.files import CONFIDENCE, REQUIREMENT, VERSION


@dataclass(frozen=True)
class _Dist:
    name: str
    version: str = field(metadata=VERSION)
    requires: tuple[str, ...] = field(default=(), metadata=REQUIREMENT)


@dataclass(frozen=True)
class _Library:
    path: str  # relative to site_packages
    owner: str
    soname: Optional[str] = None
    needed: tuple[str, ...] = ()
    runpath: tuple[str, ...] = ()
    undefined: tuple[str, ...] = ()  # NAME@VERSION
    defined: tuple[str, ...] = ()  # NAME@VERSION
    version_definitions: tuple[str, ...] = ()
    version_needs: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # file -> versions
    sass: tuple[str, ...] = ()
    ptx: tuple[str, ...] = ()  # TARGET:ISA
    fatbin_entries: int = 0


@dataclass(frozen=True)
class _Example:
    confidence: str = field(metadata=CONFIDENCE)
    site_packages: str
    dist: tuple[_Dist, ...]
    library: tuple[_Library, ...]


def example_environment() -> Environment:
    """The example as the value every check takes; its loader reaches nothing outside it."""
    example = files.read("example.toml", _Example)
    root = example.site_packages
    elf_files = tuple(ElfFile(os.path.join(root, lib.path), (lib.owner,), _facts(root, lib), None)
                      for lib in example.library)
    distributions = tuple(
        Distribution(
            name=dist.name,
            version=Version(dist.version),
            requires=tuple(Requirement(r) for r in dist.requires),
            installer="pip",
            dist_info=os.path.join(root, f"{dist.name.replace('-', '_')}-{dist.version}.dist-info"),
            files=tuple(os.path.join(root, lib.path) for lib in example.library if lib.owner == dist.name),
        )
        for dist in example.dist
    )
    return Environment(
        target=Target(site_packages=(root,)),
        distributions=distributions,
        elf_files=elf_files,
        loader=LoaderEnv(machine="x86_64", real_path=os.path.normpath, read_header=lambda path: None),
    )


def _facts(root: str, lib: _Library) -> BinaryFacts:
    def symbol(text: str, undefined: bool) -> Symbol:
        name, _, version = text.partition("@")
        holder = next((f for f, versions in lib.version_needs.items() if version in versions), None)
        return Symbol(name, version or None, holder if undefined else None)

    fatbin = None
    if lib.sass or lib.ptx:
        fatbin = FatbinSummary(
            sass=lib.sass, ptx=tuple(PtxTarget(*text.split(":")) for text in lib.ptx), entries=lib.fatbin_entries,
        )
    return BinaryFacts(
        path=os.path.join(root, lib.path), machine="x86_64", elf_type="DYN", soname=lib.soname, needed=lib.needed,
        rpath=(), runpath=lib.runpath, flags=0, flags_1=0,
        symbols=SymbolTable.of([symbol(s, True) for s in lib.undefined], [symbol(s, False) for s in lib.defined]),
        version_definitions=lib.version_definitions,
        version_needs=tuple(VersionNeed(f, v) for f, v in lib.version_needs.items()), build_id=None, fatbin=fatbin,
    )
