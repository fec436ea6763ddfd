"""CUDA libraries a chosen package loads without requiring them (CuPy 14, onnxruntime-gpu:
data/components.toml [undeclared_libraries]): whether the target has them, judged on the planned
environment, so the lock can add the package's own extras that bring them instead of a set the
doctor will find broken (or a release after release refused for the same missing library).

The planned environment may hold a wheel by its metadata alone (CuPy's binaries are judged by the
doctor after install), so the loader emulation cannot see what its extension modules need: the
table says which components, of the release's CUDA major (from its name, or from the binaries the
plan read: onnxruntime-gpu 1.26 is CUDA 12, 1.27 CUDA 13). The target has a component when a
distribution of the plan (a wheel, or a conda package of the prefix) provides it, when a file of
the environment is where cuda-pathfinder looks for it in site-packages, or, only when the target is this machine as probed, when ld.so
would find its soname in this machine's cache, LD_LIBRARY_PATH or default directories (a system
toolkit of that major). A host given by flags or a file says nothing about its system libraries.

The same rule closes the planned set over what its binaries link (`unprovided_libraries`): each
CUDA library a planned wheel's ELF file NEEDs (a soname data/components.toml knows) is provided by
the plan or, on this machine, by its system (a wheel the tables do not know is read apart from the
plan, resolve/planned.py `read_links`: its files are closed over, not judged); when not, the wheel of the set's CUDA major that
installs it is what the lock adds, and a library no wheel of that major installs (a CUDA 11 soname
in a CUDA 12 set) is why the set cannot be locked.

May import: packaging, binary/ (facts, loader), env/, knowledge/components, checks/builds, resolve/candidates, resolve/reasons.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterable, Mapping, Optional

from packaging.utils import NormalizedName

from cudaresolve.binary.facts import BinaryFacts
from cudaresolve.binary.loader import LoaderEnv
from cudaresolve.checks.builds import build_of, cuda_builds
from cudaresolve.env.environment import Environment
from cudaresolve.env.imports import alternatives, release_blind
from cudaresolve.knowledge import components
from cudaresolve.resolve.candidates import Candidate, cuda_build
from cudaresolve.resolve.reasons import CandidateRef


@dataclass(frozen=True)
class MissingLibraries:
    """A chosen package whose undeclared CUDA libraries the target lacks, and the extras that bring them."""

    name: NormalizedName
    extras: tuple[str, ...]
    cuda_major: int
    components: tuple[str, ...]  # the components not found, data/components.toml names


def missing_libraries(plan: Environment, chosen: Iterable[Candidate], *, system: bool) -> tuple[MissingLibraries, ...]:
    """Each chosen package without its extras whose undeclared libraries `plan`'s target does not
    have; `system`: the target is this machine, whose own libraries count."""
    found = []
    read: Optional[dict[str, int]] = None  # the CUDA majors the plan's binaries show, computed once when needed
    for candidate in chosen:
        row = components.undeclared_libraries(candidate.name, str(candidate.version))
        if row is None or set(row.extras) <= candidate.extras:
            continue
        build = candidate.build or cuda_build(candidate.name, candidate.version)
        if build is not None:
            major: Optional[int] = build.cuda.major
        else:
            read = read if read is not None else {b.dist: b.cuda.major for b in cuda_builds(plan)}
            major = read.get(candidate.name)
        if major is None:
            continue
        absent = tuple(name for name in row.components if not _has(plan, name, major, system))
        if absent:
            found.append(MissingLibraries(candidate.name, row.extras, major, absent))
    return tuple(found)


@dataclass(frozen=True)
class Unprovided:
    """A CUDA library a planned wheel's file links that nothing of the plan provides, with the
    wheels of the set's CUDA major that install it (none: no wheel of that major does)."""

    consumer: CandidateRef
    file: str  # the linking file, as a path inside the wheel
    soname: str
    cuda_major: Optional[int]  # the set's major; None when the lock chose none
    providers: tuple[components.Component, ...]  # the rows of that major whose wheel installs `soname`
    other_majors: tuple[components.Component, ...]  # the rows of other majors that do


def unprovided_libraries(
    plan: Environment, chosen: Iterable[Candidate], major: Optional[int], *, system: bool,
    links: Mapping[str, tuple[BinaryFacts, ...]],
) -> tuple[Unprovided, ...]:
    """Each (soname, consumer) where a chosen wheel's file (in `plan`, or read apart from it:
    `links`) links a CUDA library no file, distribution or (with `system`) system library of the
    plan provides; `major` picks the wheels that would. Only a soname the component table maps to a
    wheel is a need: any other (libgomp.so.1, a foreign target's C++ runtime) is not known to be
    missing, and is left to the doctor's loader after install."""
    wheels: dict[str, Candidate] = {c.name: c for c in chosen if c.file is not None}
    site = plan.target.site_packages[-1]
    files = [(elf.owner, elf.path, elf.facts) for elf in plan.elf_files if elf.facts is not None]
    files += [(name, os.path.normpath(os.path.join(site, facts.path.split("!", 1)[-1])), facts)
              for name, read in links.items() for facts in read]
    provided = {facts.soname for _, _, facts in files if facts.soname}
    provided |= {os.path.basename(path) for _, path, _ in files}
    for dist in plan.distributions:
        for row in components.for_dist(dist.name, str(dist.version)) if dist.kind != "conda" else ():
            provided.update(row.sonames)
    conda = {dist.name for dist in plan.distributions if dist.kind == "conda"}
    unloaded = _other_major_alternatives([(owner, path) for owner, path, _ in files], major)
    found: dict[tuple[str, str], Unprovided] = {}
    for owner_name, path, facts in files:
        owner = wheels.get(owner_name or "")
        if owner is None or path in unloaded:
            continue  # unloaded: a per-major alternative (torch-memory-saver's *_cu12 hook beside *_cu13)
        build = build_of(plan, owner.name, path)
        if build is not None and (not build.selected or major is not None and build.cuda_major not in (None, major)):
            continue  # a build of the package its import does not load here (cuda-cccl's cu13/ in a CUDA 12 set)
        for soname in facts.needed:
            rows = components.for_soname(soname)
            if not rows or soname in provided or (owner.name, soname) in found:
                continue
            if components.optional_layer(owner.name, owner.version, soname) is not None:
                continue  # an optional layer's library (CuPy 13's NCCL module): the package works without it
            if any(row.conda in conda for row in rows if row.conda) or (system and on_system(plan.loader, soname)):
                continue
            if major is None and len({row.cuda_major for row in rows}) == 1:
                major_here: Optional[int] = rows[0].cuda_major
            else:
                major_here = major
            if major_here is None:
                continue  # no major chosen and the soname is several majors': the doctor's loader judges it
            member = os.path.relpath(path, site)
            found[(owner.name, soname)] = Unprovided(
                owner.ref, member, soname, major_here,
                tuple(row for row in rows if row.cuda_major == major_here and row.dist != owner.name),
                tuple(row for row in rows if row.cuda_major != major_here),
            )
    return tuple(found[key] for key in sorted(found))


def _other_major_alternatives(files: Iterable[tuple[Optional[str], str]], major: Optional[int]) -> set[str]:
    """The files a package ships once per CUDA major or release (env/imports.py `alternatives`) that
    a process of the set's `major` does not load: those of another major in a group of the same
    name that holds one of `major`, and the group's name without a release beside them."""
    if major is None:
        return set()
    by_owner: dict[Optional[str], list[str]] = {}
    for owner, path in files:
        by_owner.setdefault(owner, []).append(path)
    unloaded: set[str] = set()
    for paths in by_owner.values():
        # the same name without a release (torch-memory-saver's ROCm hook, a CUDA 12 build) is in the
        # group too: not what a loader of `major` picks when that major's own file is there
        shipped = alternatives(path for path in paths if ".so" in os.path.basename(path))
        groups: dict[str, set[int]] = {}
        for path, cuda in shipped.items():
            groups.setdefault(release_blind(path), set()).add(cuda[0])
        unloaded |= {path for path, cuda in shipped.items() if cuda[0] != major and major in groups[release_blind(path)]}
    return unloaded


def _has(plan: Environment, component: str, major: int, system: bool) -> bool:
    rows = components.for_component(component, major)
    conda = {row.conda for row in rows if row.conda}
    for dist in plan.distributions:
        if dist.kind == "conda":
            if dist.name in conda:
                return True
        elif any(row.name == component and row.cuda_major == major for row in components.for_dist(dist.name, str(dist.version))):
            return True
    where = [os.path.join(site, row.lib_dir, row.sonames[0]) for site in plan.target.site_packages for row in rows]
    if any(path in plan.files_by_path for path in where):  # where cuda-pathfinder looks in site-packages
        return True
    return system and any(on_system(plan.loader, row.sonames[0]) for row in rows)


def on_system(loader: LoaderEnv, soname: str) -> bool:
    """Whether ld.so on this machine finds `soname` outside any package: its cache, LD_LIBRARY_PATH
    or a default directory."""
    if loader.cache.lookup(soname, loader.machine) is not None:
        return True
    directories = [d for d in loader.ld_library_path + loader.default_dirs if d]
    return any(loader.read_header(os.path.join(directory, soname)) is not None for directory in directories)
