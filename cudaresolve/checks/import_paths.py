"""Which of a package's files its `import` loads, and which load only later, from its import model
(env/imports.py): the loading emulation's roots split by how the import reaches them.

- Libraries the import-time code loads itself (`ctypes.CDLL`, a loader reading a JSON list...) are
  loaded first, by path, as roots: what they bring in satisfies a later DT_NEEDED of the same
  soname, as the dynamic loader does, and what they miss makes the import fail.
- A load by a computed name (`f"libaddon_torch{major}{minor}.so"`) that matches two files or more
  opens one of them, picked at run time: none is known to load (`picked`), each is judged as a
  file that loads later.
- Files a loop tries in turn, the import raising when none loads (`one-of`), load as one later
  group: one of them loading is enough, none loading fails the import.
- Extension modules the import reaches are judged in full; one reached only behind a handler
  (`guarded`: the package says it is optional), behind an environment variable (`opt-in`), only
  from a function (`lazy`) or by no import of the package (`unreached`) loads later, in the process
  the import made: its failures cost that feature, not the package.

A package whose model is not conclusive (an import by a computed name) keeps every extension
module on the import-time path: nothing is called on-demand without proof.

May import: binary/ (names), checks/builds, env/ and knowledge/.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence

from cudaresolve.checks.builds import build_of
from cudaresolve.env.environment import ElfFile, Environment
from cudaresolve.env.imports import (
    GUARDED,
    IMPORT,
    LAZY,
    ONE_OF,
    OPT_IN,
    PICKED,
    UNREACHED,
    ImportModel,
    Reach,
    is_library_name,
    matches,
)
from cudaresolve.knowledge import components

MAX_PRELOADS = 256  # library loads followed per package
DEFERRED: tuple[Reach, ...] = (ONE_OF, GUARDED, PICKED, OPT_IN, LAZY, UNREACHED)


@dataclass(frozen=True)
class ImportPlan:
    """A package's roots in load order: what its import loads, then each later group."""

    preloaded: tuple[str, ...]  # files the import-time code loads by path, first
    imported: tuple[str, ...]  # the other roots, loaded by the import (or not known to be deferred)
    deferred: Mapping[Reach, tuple[str, ...]] = field(default_factory=dict)  # reach -> roots loaded later
    features: Mapping[str, str] = field(default_factory=dict)  # deferred root -> the module (or loader) it serves
    later: Mapping[str, str] = field(default_factory=dict)  # name -> path of what deferred code preloads


def plan(env: Environment, owner: Optional[str], roots: Sequence[str]) -> ImportPlan:
    """How importing `owner` loads its `roots`; every root imported when there is no model."""
    model = env.imports.get(owner) if owner else None
    if model is None:
        return ImportPlan((), tuple(roots))
    preloaded: list[str] = []
    deferred: dict[Reach, list[str]] = {}
    features: dict[str, str] = {}
    later: dict[str, str] = {}
    for preload in model.preloads[:MAX_PRELOADS]:
        found = targets(env, owner, preload.name)
        picked = PICKED if preload.reach == IMPORT and preload.computed and len(found) > 1 else preload.reach
        for elf in found:
            if picked == IMPORT:
                if elf.path not in preloaded:
                    preloaded.append(elf.path)
            else:
                later.setdefault(elf.facts.soname if elf.facts and elf.facts.soname else os.path.basename(elf.path),
                                 elf.path)
                if elf.owner == owner and elf.path not in roots and picked != ONE_OF:
                    continue  # loads in its own root's tree; an alternative is tried by path, before what links it
                deferred.setdefault(picked, []).append(elf.path)
                features.setdefault(elf.path, preload.module)
    imported: list[str] = []
    placed = set(preloaded) | {path for paths in deferred.values() for path in paths}
    for root in roots:
        if root in placed:
            continue
        reach = _reach(model, root) if model.conclusive else None
        if reach is None or reach == IMPORT:
            imported.append(root)
        else:
            deferred.setdefault(reach, []).append(root)
            features[root] = model.extensions[root][0]
    for reach, paths in deferred.items():
        deferred[reach] = [path for path in paths if path not in preloaded]
    return ImportPlan(tuple(in_load_order(env, preloaded)), tuple(imported),
                      {reach: tuple(paths) for reach, paths in deferred.items() if paths}, features, later)


def in_load_order(env: Environment, paths: Sequence[str]) -> list[str]:
    """The files an import preloads, each after the others of them it links: the order a package's own
    list gives them (numba-cuda-mlir: libMLIRPythonCAPI.so before libMLIRToLLVM70.so, which links it),
    which the model, reading the names a call can be given as a set, does not keep. Otherwise as given."""
    names: dict[str, str] = {}
    needed: dict[str, set[str]] = {}
    for path in paths:
        facts = elf.facts if (elf := env.elf_file(path)) is not None else None
        names[path] = facts.soname if facts and facts.soname else os.path.basename(path)
        needed[path] = set(facts.needed) if facts else set()
    needs = {path: {other for other in paths if other != path and names[other] in needed[path]} for path in paths}
    ordered: list[str] = []
    while len(ordered) < len(paths):
        ready = next((path for path in paths if path not in ordered and needs[path] <= set(ordered)), None)
        ordered.append(ready if ready is not None else next(path for path in paths if path not in ordered))  # a cycle: as given
    return ordered


def _reach(model: ImportModel, path: str) -> Optional[Reach]:
    """How the import reaches an extension module (a library file's name starts with lib: None)."""
    if os.path.basename(path).startswith("lib"):
        return None
    return model.reach_of(path)


def targets(env: Environment, owner: Optional[str], name: str) -> list[ElfFile]:
    """The files a library load names: the package's own first, else any distribution's; a component
    name (cuda-pathfinder's "cublas") stands for that component's sonames. Files of a build the
    package does not import here are not taken."""
    if is_library_name(name):
        patterns: tuple[str, ...] = (name,)
    else:
        patterns = tuple(soname for row in components.load().component if row.name.lower() == name.lower()
                         for soname in row.sonames) + (f"lib{name}.so.*",)
    found = []
    for elf in env.elf_files:
        if elf.facts is None or elf.facts.machine != env.loader.machine:
            continue
        if not any(matches(pattern, os.path.basename(elf.path), elf.facts.soname) for pattern in patterns):
            continue
        build = build_of(env, elf.owner, elf.path)
        if build is None or build.selected:
            found.append(elf)
    own = [elf for elf in found if elf.owner == owner]
    chosen = own or found
    by_name: dict[str, ElfFile] = {}
    for elf in chosen:  # one file per soname: the loader takes the first it is given
        by_name.setdefault(elf.facts.soname if elf.facts and elf.facts.soname else os.path.basename(elf.path), elf)
    return list(by_name.values())
