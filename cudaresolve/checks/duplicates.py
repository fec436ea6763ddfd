"""duplicate-library: one soname installed by several distributions, and whether one process can
load two of its builds against each other."""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Iterable

from cudaresolve.checks.findings import UNOWNED, Finding
from cudaresolve.checks.loading import PackageLoad
from cudaresolve.env.environment import ElfFile, Environment

# auditwheel renames vendored libraries to libfoo-<8 hex>.so.N; the soname underneath is libfoo.so.N.
_MANGLED = re.compile(r"^(?P<stem>.+?)-[0-9a-f]{8}(?P<suffix>\.so(?:\.\d+)*)$")
_CONDA_NAME = re.compile(r"[A-Za-z0-9_.\-]+")  # the package a conda match spec names ("cuda-version >=12.4")


def unmangled(soname: str) -> str:
    """The soname before auditwheel renamed it (libcudart-a1b2c3d4.so.12 -> libcudart.so.12)."""
    match = _MANGLED.match(soname)
    return match.group("stem") + match.group("suffix") if match else soname


def check_duplicate_libraries(env: Environment, loads: Iterable[PackageLoad]) -> list[Finding]:
    """One soname installed by several distributions, judged by what the loader does with the copies.

    Two different builds that the loader picks for consumers (through a search path or a preload)
    can meet in one process: whichever loads first serves both, an error. A copy that only its own
    package loads by path (triton's CUPTI under its own tree) is private: nothing else can bind it,
    so it is information. One finding per set of distributions: a package vendoring a whole SDK is
    one decision for the user, not five. One build vendored twice (numpy.libs and scipy.libs) is the
    same code whichever loads: no finding.
    """
    by_soname: dict[str, list[ElfFile]] = defaultdict(list)
    seen = set()
    for elf in env.elf_files:  # one file under several names (conda's lib/ symlinks) counts once
        if elf.facts is not None and elf.facts.soname and elf.identity not in seen:
            seen.add(elf.identity)
            by_soname[unmangled(elf.facts.soname)].append(elf)
    consumers = _consumers(env, loads)
    clashing: dict[tuple[str, ...], list[tuple[str, list[ElfFile]]]] = defaultdict(list)
    private: dict[tuple[str, ...], list[tuple[str, list[ElfFile]]]] = defaultdict(list)
    for soname, copies in sorted(by_soname.items()):
        owners = tuple(sorted({elf.owner or UNOWNED for elf in copies}))
        builds = {elf.facts.build_id or elf.identity for elf in copies if elf.facts}  # a symlink is its target
        if len(owners) < 2 or len(builds) == 1:
            continue
        found = [elf for elf in copies if consumers.get(elf.identity)]
        same_name = defaultdict(set)  # ld.so matches a loaded object by its soname, not by what it was renamed from
        for elf in found:
            same_name[elf.facts.soname].add(elf.facts.build_id or elf.identity)
        if any(len(ids) > 1 for ids in same_name.values()):
            clashing[owners].append((soname, found))
        else:
            private[owners].append((soname, copies))
    findings = [_clash(env, owners, group, consumers) for owners, group in sorted(clashing.items())]
    findings += [_private(env, owners, group, consumers) for owners, group in sorted(private.items())]
    return findings


def _named(env: Environment, owner: str) -> str:
    """An owner as the findings name it: a conda package gets " (conda)", as `conda remove` is its way out."""
    dist = env.distribution(owner)
    return f"{owner} (conda)" if dist is not None and dist.kind == "conda" else owner


def _consumers(env: Environment, loads: Iterable[PackageLoad]) -> dict[str, set[str]]:
    """File identity -> the objects whose DT_NEEDED the loader resolved to it (preloads included)."""
    found: dict[str, set[str]] = defaultdict(set)
    for load in loads:
        for obj in load.result.objects:
            for res in obj.needed:
                if res.path is not None:
                    found[env.identity(res.path)].add(obj.path)
    return found


def _names(group: list[tuple[str, list[ElfFile]]]) -> str:
    return ", ".join(soname for soname, _ in group)


def _subject(owners: tuple[str, ...], group: list) -> str:
    return group[0][0] if len(group) == 1 else f"{len(group)} libraries of {', '.join(owners)}"


def _clash(env: Environment, owners: tuple[str, ...], group, consumers: dict[str, set[str]]) -> Finding:
    names = _names(group)
    evidence = tuple(
        f"{elf.path} (from {_named(env, elf.owner or UNOWNED)}) is what {', '.join(sorted(consumers[elf.identity])[:3])} "
        f"load{'s' if len(consumers[elf.identity]) == 1 else ''}"
        + (f" and {len(consumers[elf.identity]) - 3} more" if len(consumers[elf.identity]) > 3 else "")
        for _, copies in group
        for elf in sorted(copies, key=lambda e: e.path)
    )
    required = {name for dist in env.distributions for name in env.requires_names(dist)}
    required |= {_CONDA_NAME.match(spec).group(0) for record in (env.conda.records if env.conda else ())
                 for spec in record.depends if _CONDA_NAME.match(spec)}
    removable = [owner for owner in owners if owner not in required and owner != UNOWNED]
    remove = (f"conda remove {removable[0]}" if _named(env, removable[0]) != removable[0]
              else f"uninstall {removable[0]}") if removable else ""
    return Finding(
        "duplicate-library",
        "error",
        _subject(owners, group),
        f"{names} {'is' if len(group) == 1 else 'are each'} loaded from different builds for different consumers "
        f"({', '.join(_named(env, owner) for owner in owners)}): in one process the first copy loaded serves every consumer",
        evidence,
        (f"keep one build: {remove}, which nothing installed requires, "
         "or install releases that share one provider") if len(removable) == 1
        else "install releases of these packages that load one build of it (the evidence says who loads which)",
    )


def _private(env: Environment, owners: tuple[str, ...], group, consumers: dict[str, set[str]]) -> Finding:
    names = _names(group)
    return Finding(
        "duplicate-library",
        "info",
        _subject(owners, group),
        f"{names} {'is' if len(group) == 1 else 'are each'} installed by {len(owners)} distributions "
        f"({', '.join(_named(env, owner) for owner in owners)}); at most one copy is found by the loader, the others are "
        + ("private copies their package loads by path" if all(_named(env, o) == o for o in owners)
           else "private copies or a conda package's, which no package judged here loads"),
        tuple(
            f"{elf.path} (from {_named(env, elf.owner or UNOWNED)}): "
            + ("found by the loader for " + ", ".join(sorted(consumers[elf.identity])[:3])
               if consumers.get(elf.identity)
               else "loaded by no package judged here" if _named(env, elf.owner or UNOWNED) != (elf.owner or UNOWNED)
               else "loaded by path only")
            for _, copies in group
            for elf in sorted(copies, key=lambda e: (e.owner or UNOWNED, e.path))
        ),
        None,
    )
