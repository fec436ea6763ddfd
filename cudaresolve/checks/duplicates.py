"""duplicate-library: one soname installed by several distributions, and whether one process can
load two of its builds against each other.

May import: checks/ (findings, loads), env/; the findings are values, output/ words them.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Iterable, Optional

from packaging.utils import NormalizedName

from cudaresolve.checks import evidence as e
from cudaresolve.checks.findings import Check, Finding, Severity
from cudaresolve.checks.fixes import KeepOneBuild
from cudaresolve.checks.loading import PackageLoad
from cudaresolve.checks.problems import DuplicateBuilds, Owner, PrivateCopies
from cudaresolve.checks.subjects import Subject
from cudaresolve.env.environment import ElfFile, Environment

# (soname, its copies) of one set of owners
_Group = list[tuple[str, list[ElfFile]]]

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
    clashing: dict[tuple[Optional[str], ...], _Group] = defaultdict(list)
    private: dict[tuple[Optional[str], ...], _Group] = defaultdict(list)
    for soname, copies in sorted(by_soname.items()):
        owners = tuple(sorted({elf.owner for elf in copies}, key=_by_name))
        builds = {elf.facts.build_id or elf.identity for elf in copies if elf.facts}  # a symlink is its target
        if len(owners) < 2 or len(builds) == 1:
            continue
        found = [elf for elf in copies if consumers.get(elf.identity)]
        same_name = defaultdict(set)  # ld.so matches a loaded object by its soname, not by what it was renamed from
        for elf in found:
            assert elf.facts is not None  # by_soname holds files with facts only
            same_name[elf.facts.soname].add(elf.facts.build_id or elf.identity)
        if any(len(ids) > 1 for ids in same_name.values()):
            clashing[owners].append((soname, found))
        else:
            private[owners].append((soname, copies))
    findings = [_clash(env, owners, group, consumers) for owners, group in sorted(clashing.items(), key=_by_owners)]
    findings += [_private(env, owners, group, consumers) for owners, group in sorted(private.items(), key=_by_owners)]
    return findings


def _owner(env: Environment, name: Optional[str]) -> Owner:
    """An owner as findings name it (None: files no distribution owns): a conda package is marked, as
    `conda remove` is its way out."""
    dist = env.distribution(name) if name else None
    return Owner(name, conda=dist is not None and dist.kind == "conda")


def _by_name(owner: Optional[str]) -> tuple[bool, str]:
    return (owner is not None, owner or "")  # the unowned files first


def _by_owners(item: tuple[tuple[Optional[str], ...], _Group]) -> list[tuple[bool, str]]:
    return [_by_name(owner) for owner in item[0]]


def _consumers(env: Environment, loads: Iterable[PackageLoad]) -> dict[str, set[str]]:
    """File identity -> the objects whose DT_NEEDED the loader resolved to it (preloads included)."""
    found: dict[str, set[str]] = defaultdict(set)
    for load in loads:
        for obj in load.result.objects:
            for res in obj.needed:
                if res.path is not None:
                    found[env.identity(res.path)].add(obj.path)
    return found


def _subject(owners: tuple[Optional[str], ...], group: _Group) -> Subject:
    return Subject(file=group[0][0]) if len(group) == 1 else Subject(libraries=tuple(name for name, _ in group), owners=owners)


def _clash(env: Environment, owners: tuple[Optional[str], ...], group: _Group, consumers: dict[str, set[str]]) -> Finding:
    evidence = tuple(
        e.LoadedBy(elf.path, elf.owner, _owner(env, elf.owner).conda, tuple(sorted(consumers[elf.identity])))
        for _, copies in group
        for elf in sorted(copies, key=lambda e: e.path)
    )
    required = {name for dist in env.distributions for name in env.requires_names(dist)}
    required |= {match.group(0) for record in (env.conda.records if env.conda else ())
                 for spec in record.depends if (match := _CONDA_NAME.match(spec))}
    removable = [owner for owner in owners if owner is not None and owner not in required]
    return Finding(
        Check.DUPLICATE_LIBRARY, Severity.ERROR, _subject(owners, group),
        DuplicateBuilds(tuple(name for name, _ in group), tuple(_owner(env, owner) for owner in owners)),
        evidence,
        KeepOneBuild(NormalizedName(removable[0]), _owner(env, removable[0]).conda) if len(removable) == 1
        else KeepOneBuild(),
    )


def _private(env: Environment, owners: tuple[Optional[str], ...], group: _Group, consumers: dict[str, set[str]]) -> Finding:
    return Finding(
        Check.DUPLICATE_LIBRARY, Severity.INFO, _subject(owners, group),
        PrivateCopies(tuple(name for name, _ in group), tuple(_owner(env, owner) for owner in owners)),
        tuple(
            e.CopyUse(elf.path, elf.owner, _owner(env, elf.owner).conda, tuple(sorted(consumers.get(elf.identity, ()))))
            for _, copies in group
            for elf in sorted(copies, key=lambda elf: (_by_name(elf.owner), elf.path))
        ),
    )
