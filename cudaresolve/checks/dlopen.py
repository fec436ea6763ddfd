"""Libraries a binary opens by soname: a file that imports dlopen and names `libcublas.so.12` as a
literal (BinaryFacts.dlopened) opens it at run time, where no DT_NEEDED shows it. Only sonames the
component table maps to wheels are judged, so libc's and the package's own never matter.

Each loaded object's needs are looked up as its dlopen would (binary/loader.dlopen): what its
namespace has loaded or its package preloads, else the search from the object itself. Nothing
found is a warning naming the wheel that provides the soname for the binary's CUDA major; a copy of
another major's wheel is a warning too. Never an error: a dlopen may be optional (a fallback path).

The binary's CUDA major is its package's build's, else the soname's when one major's wheels alone
provide it. A soname only other majors' wheels provide (a CUDA 13 build naming libnvrtc.so.12 too)
is an alternative the binary tries, not judged.

May import: binary/loader, checks/ (builds, findings, linking, loading, problems, subjects), env/, knowledge/.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Iterable, Mapping, Optional

from packaging.requirements import Requirement

from cudaresolve.binary.loader import dlopen
from cudaresolve.checks import fixes as f
from cudaresolve.checks.builds import CudaBuild, soname_major
from cudaresolve.checks.findings import Check, Finding, Severity
from cudaresolve.checks.linking import search_dirs
from cudaresolve.checks.loading import PackageLoad, facts_of_env
from cudaresolve.checks.problems import DlopenedNotFound, DlopenedOtherMajor
from cudaresolve.checks.subjects import subject
from cudaresolve.env.environment import Environment
from cudaresolve.knowledge import components


def check_dlopened_libraries(env: Environment, loads: Iterable[PackageLoad], builds: Iterable[CudaBuild]) -> list[Finding]:
    """One warning per loaded file and CUDA soname it opens by name that no copy serves, or that a
    copy of another CUDA major's wheel serves."""
    majors = {build.dist: build.cuda.major for build in builds}
    facts_of = facts_of_env(env)
    seen: set[tuple[str, str]] = set()
    findings: list[Finding] = []
    for load in loads:
        namespace = None
        for obj in load.result.objects:
            elf = env.elf_file(obj.path)
            if elf is None or elf.facts is None or not elf.facts.dlopened or obj.why == "preloaded":
                continue
            for soname in elf.facts.dlopened:
                if not components.for_soname(soname) or (elf.identity, soname) in seen:
                    continue
                seen.add((elf.identity, soname))
                major = majors.get(elf.owner or "") or soname_major(soname)
                if major is not None and all(row.cuda_major != major for row in components.for_soname(soname)):
                    continue  # another CUDA's library (a CUDA 13 build naming libnvrtc.so.12): an alternative
                if namespace is None:
                    namespace = replace(env.loader, preloaded={**env.loader.preloaded, **_preloads(env, load)})
                found = dlopen(soname, obj.path, load.result, facts_of=facts_of, env=namespace)
                finding = _judge(env, load, elf.owner, obj.path, soname, major, found.path if not found.error else None)
                if finding is not None:
                    findings.append(finding)
    return findings


def _preloads(env: Environment, load: PackageLoad) -> Mapping[str, str]:
    """What the process has loaded by path before the package's files run: the preloads of the packages
    its import imports first (torch's), then its own preloader's (CuPy through cuda-pathfinder)."""
    found: dict[str, str] = {}
    for name in (*load.imported_first, *((load.dist,) if load.preloader is not None and load.dist else ())):
        found.update(env.preloads.get(name, {}))
    return found


def _judge(env: Environment, load: PackageLoad, owner: Optional[str], consumer: str, soname: str,
           major: Optional[int], found: Optional[str]) -> Optional[Finding]:
    """The finding for one need: its subject is the package whose file calls dlopen."""
    rows = components.for_soname(soname)
    if found is None:
        wanted = [row for row in rows if major is None or row.cuda_major == major]
        providers = tuple(dict.fromkeys(row.dist for row in wanted))
        return Finding(Check.MISSING_LIBRARY, Severity.WARNING, subject(env, owner),
                       DlopenedNotFound(consumer, soname, major, providers), (), _install_fix(env, load, consumer, wanted))
    copy = env.elf_file(found)
    copy_owner = copy.owner if copy is not None else None
    found_majors = {row.cuda_major for row in components.for_dist(copy_owner)} if copy_owner else set()
    if major is None or len(found_majors) != 1 or major in found_majors or copy_owner is None:
        return None
    [found_major] = found_majors
    return Finding(Check.MIXED_MAJORS, Severity.WARNING, subject(env, owner),
                   DlopenedOtherMajor(consumer, soname, major, found, found_major, copy_owner), (), None)


def _install_fix(env: Environment, load: PackageLoad, consumer: str, rows: list[components.Component]) -> Optional[f.Fix]:
    """`pip install` of the one wheel providing the soname, when it is not installed and installs it
    into a directory the consumer's dlopen searches; otherwise installing changes nothing."""
    dists = {row.dist for row in rows}
    if len(dists) != 1 or env.distribution(rows[0].dist) is not None:
        return None
    searched = {os.path.normpath(d) for d in search_dirs(env, load, consumer) + list(env.loader.ld_library_path) if d}
    places = {os.path.normpath(os.path.join(site, row.lib_dir)) for row in rows for site in env.target.site_packages}
    return f.PipInstall((Requirement(rows[0].dist),)) if searched & places else None
