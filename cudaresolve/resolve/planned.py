"""The planned environment: what the target will hold once a set of candidates is installed, as the
same `Environment` value the doctor judges. The installed distributions a candidate does not replace
stay with their files; each chosen wheel brings its metadata and, where the binary facts are known,
its ELF files at the paths they will be installed at. A distribution that stays keeps its extras.

May import: packaging, binary/ (facts, names, wheel), checks/ (builds, driver_floor, findings), env/, host facts, index/ (access, cache, http, wheel_facts), knowledge/ (components, cupy, torch, wheel_facts), resolve/candidates.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import AbstractSet, Iterable, Mapping

from packaging.requirements import Requirement
from packaging.version import Version

from cudaresolve.binary.facts import BinaryFacts
from cudaresolve.binary.names import is_shared_object_name
from cudaresolve.binary.wheel import WheelError
from cudaresolve.checks.builds import cuda_builds
from cudaresolve.checks.driver_floor import check_driver_floor
from cudaresolve.checks.findings import Finding
from cudaresolve.env.distributions import Distribution
from cudaresolve.env.environment import ElfFile, Environment, installed_extras
from cudaresolve.env.imports import ImportModel
from cudaresolve.env.ownership import Claim, SharedFile
from cudaresolve.env.scan import listdir, preloads_of
from cudaresolve.host.facts import HostFacts
from cudaresolve.index.access import PackageIndex
from cudaresolve.index.cache import OfflineMiss
from cudaresolve.index.http import IndexAccessError
from cudaresolve.index.wheel_facts import BudgetSpent, LinkBudget
from cudaresolve.knowledge import components, cupy, torch, wheel_facts
from cudaresolve.resolve.candidates import Candidate
from cudaresolve.resolve.needs import read_needed

PLANNED = "cudaresolve (planned)"  # the INSTALLER a planned distribution reports


class Unread(Exception):
    """A chosen wheel whose binaries the plan must read to judge it could not be read: the lock sets
    it aside as not known (never joins it unread)."""

    def __init__(self, candidate: Candidate, why: str):
        super().__init__(why)
        self.candidate, self.why = candidate, why


def planned_environment(
    installed: Environment, chosen: Iterable[Candidate], index: PackageIndex, *, deep: bool = False, gpus: bool = False,
    linked: AbstractSet[str] = frozenset(),
) -> Environment:
    """`installed` with every chosen wheel in place of what it replaces. A wheel brings its ELF files
    from the knowledge table's row for it; a release of a consumer the table covers that has no row
    of its own (onnxruntime-gpu 1.31.0 beside 1.31.1), and every wheel with `deep` or carrying its
    own CUDA runtime, is read from the wheel itself (downloaded once, then cached by sha256): no
    release borrows another's facts. With `gpus` (a host states a GPU), a release without a row of a
    component whose releases carry device code is read too: its device code decides whether it runs.
    A component wheel that installs a soname of `linked` (what installed files that stay link: a
    fix's plan) is read as a read wheel's provider is. A wheel whose binaries are read brings its own
    import model (`_own_models`), in place of the installed release's."""
    site = installed.target.site_packages[-1]
    wheels = [c for c in chosen if c.file is not None]
    # conda's packages stay: a wheel never replaces one (a conda name is not a pip name)
    replaced = {c.name for c in wheels} - {d.name for d in installed.distributions if d.kind == "conda"}
    distributions = [d for d in installed.distributions if d.name not in replaced]
    elf_files = [e for e in installed.elf_files if not (set(e.owners) & replaced)]
    read: dict[str, tuple[BinaryFacts, ...]] = {}
    for c in wheels:
        assert c.file is not None
        # an sdist has no binaries to read: pip builds it at install, and the doctor judges what it made
        needed = c.file.is_wheel and (deep or judged_by_binaries(c.name, c.version, c.file.filename, installed.loader.machine, gpus=gpus))
        try:
            read[c.name] = index.binary_facts(c.file).members if needed else ()
        except (WheelError, OfflineMiss) as exc:
            raise Unread(c, str(exc)) from None
    _read_providers(read, wheels, index, linked)
    if deep:
        _complete_providers(read, wheels, index)
    for candidate in wheels:
        assert candidate.file is not None
        metadata = index.metadata(candidate.file)
        members = read[candidate.name]
        paths = []
        for facts in members:
            member = facts.path.split("!", 1)[1]
            path = os.path.normpath(os.path.join(site, member))
            paths.append(path)
            elf_files.append(ElfFile(path, (candidate.name,), replace(facts, path=path), None))
        stem = f"{candidate.name.replace('-', '_')}-{candidate.version}"
        distributions.append(
            Distribution(
                name=candidate.name,
                version=candidate.version,
                requires=tuple(Requirement(text) for text in metadata.requires_dist),
                installer=PLANNED,
                dist_info=os.path.join(site, f"{stem}.dist-info"),
                files=tuple(paths),
            )
        )
    models = _own_models(read, wheels, index, site)
    markers = installed.target.marker_environment() or {}
    versions = {d.name: d.version for d in distributions}
    # A distribution that stays keeps the extras that counted as chosen before (their needs bind
    # the plan, resolve/needs.py), and gains any the plan completes.
    before = {(d.name, d.dist_info): d.extras for d in installed.distributions}
    distributions = sorted(
        (replace(d, extras=installed_extras(d, versions, markers) | before.get((d.name, d.dist_info), frozenset()))
         for d in distributions),
        key=lambda d: (d.name, d.dist_info),
    )
    elf_files.sort(key=lambda e: e.path)
    planned_paths = {e.path for e in elf_files}
    planned_names: dict[str, set[str]] = {}  # directory -> the plan's file names there, for a search by listing
    for path in planned_paths:
        planned_names.setdefault(os.path.dirname(path), set()).add(os.path.basename(path))
    return replace(
        installed,
        distributions=tuple(distributions),
        elf_files=tuple(elf_files),
        shared_files=_shared_files(installed, replaced, elf_files, distributions),
        imports=planned_imports(installed.imports, distributions, replaced, models),
        preloads=preloads_of(
            distributions, elf_files, installed.target.site_packages, installed.preload_prefix,
            lambda path: path in planned_paths or os.path.isfile(path),
            lambda directory: {*planned_names.get(directory, ()), *listdir(directory)},
        ),
    )


def _own_models(read: Mapping[str, tuple[BinaryFacts, ...]], wheels: list[Candidate], index: PackageIndex, site: str
                ) -> dict[str, ImportModel]:
    """The import model of each chosen wheel whose binaries the plan read from the wheel itself,
    read from its Python members (index/wheel_imports.py): what its `import` loads by path is judged
    as loaded at import, as the doctor judges it installed. A wheel joining by its metadata alone, or
    by the knowledge table's row for it, is not fetched for it: a lock reads no wheel the tables
    answer for, nor any pure wheel's Python."""
    models: dict[str, ImportModel] = {}
    for candidate in wheels:
        file = candidate.file
        if read[candidate.name] and file is not None and wheel_facts.find(candidate.name, str(candidate.version), file.filename) is None:
            model = index.import_model(file, site)
            if model is not None:
                models[candidate.name] = model
    return models


def planned_imports(
    installed: Mapping[str, ImportModel], distributions: Iterable[Distribution], replaced: AbstractSet[str],
    read: Mapping[str, ImportModel],
) -> dict[str, ImportModel]:
    """The import models of the plan: an installed one for a distribution that stays, the chosen
    wheel's own (`read`) for one it brings; a replaced or removed distribution's model goes, so no
    release is judged by the Python files of another."""
    names = {d.name for d in distributions}
    kept = {name: model for name, model in installed.items() if name in names and name not in replaced}
    return {**kept, **{name: model for name, model in read.items() if name in names}}


def _shared_files(
    installed: Environment, replaced: AbstractSet[str], elf_files: list[ElfFile], distributions: list[Distribution]
) -> tuple[SharedFile, ...]:
    """The installed shared files whose owners all stay, and every library path two distributions of
    the plan would install: a chosen wheel's member over a file another owns, or two wheels the
    knowledge table installs in one directory under one soname (nvidia-nccl-cu12 and -cu13's
    nvidia/nccl/lib/libnccl.so.2), read or not. The plan's contents are not hashed, so two builds of
    one path count as different unless their build ids agree."""
    kept = [shared for shared in installed.shared_files if replaced.isdisjoint(shared.owners)]
    known = {shared.path for shared in kept}
    versions = {d.name: d.version for d in distributions if d.kind == "python"}
    site = installed.target.site_packages[-1]
    by_path: dict[str, list[ElfFile]] = {}
    owners_of: dict[str, set[str]] = {}
    for elf in elf_files:
        by_path.setdefault(elf.path, []).append(elf)
        owners_of.setdefault(elf.path, set()).update(owner for owner in elf.owners if owner in versions)
    for name, version in versions.items():
        for row in components.for_dist(name, str(version)):
            for soname in row.sonames:
                owners_of.setdefault(os.path.normpath(os.path.join(site, row.lib_dir, soname)), set()).add(name)
    for path, names in owners_of.items():
        owners = sorted(names)
        builds = {elf.facts.build_id if elf.facts is not None else None for elf in by_path.get(path, ())}
        if path in known or len(owners) < 2 or (len(builds) == 1 and None not in builds):
            continue
        kept.append(SharedFile(path, tuple(Claim(owner, versions[owner], None) for owner in owners),
                               unjudged="planned"))
    return tuple(sorted(kept, key=lambda shared: shared.path))


@dataclass(frozen=True)
class Links:
    """What the chosen wheels the knowledge tables do not know link, read apart from the plan: their
    files are not judged by the lock (the doctor judges them after install), only closed over
    (resolve/undeclared.py) and their runtimes' floors judged (resolve/resolver.py)."""

    files: Mapping[str, tuple[BinaryFacts, ...]]  # per chosen name: its shared objects' facts
    unread: tuple[Candidate, ...] = ()  # not read: the lock's budget for reading them was spent


def read_links(plan: Environment, chosen: Iterable[Candidate], index: PackageIndex, budget: LinkBudget) -> Links:
    """The facts of each chosen wheel the tables do not know (`_tables_know`) whose zip directory
    lists shared objects and whose files the plan does not hold already: a pure wheel is never
    fetched. A wheel that cannot be read joins by its metadata; one past `budget`, also in `unread`."""
    held = {owner for elf in plan.elf_files for owner in elf.owners}
    files: dict[str, tuple[BinaryFacts, ...]] = {}
    unread = []
    for candidate in chosen:
        file = candidate.file
        if file is None or candidate.name in held or _tables_know(candidate) or file.filename.endswith("-any.whl"):
            continue
        try:
            if any(is_shared_object_name(os.path.basename(member)) for member in index.members(file)):
                files[candidate.name] = index.linked_facts(file, budget).members
        except BudgetSpent:
            unread.append(candidate)
        except (WheelError, OfflineMiss, IndexAccessError):
            pass  # unread: joins with its metadata, and the doctor judges its files after install
    return Links(files, tuple(unread))


def runtime_floors(plan: Environment, links: Links, host: HostFacts) -> list[Finding]:
    """The driver-floor findings of the CUDA runtimes the files in `links` carry (a static one dated
    by its toolkit note or its PTX ISA; a warning when no byte dates it), judged as the doctor judges
    them, with no other check of those files (a foreign target's libgomp is not known to be missing)."""
    site = plan.target.site_packages[-1]
    paths = [(name, os.path.normpath(os.path.join(site, facts.path.split("!", 1)[-1])), facts)
             for name, read in links.files.items() for facts in read if facts.cuda_runtime is not None]
    carrying = [ElfFile(path, (name,), replace(facts, path=path), None) for name, path, facts in paths]
    if not carrying:
        return []
    floored = replace(plan, elf_files=tuple(sorted((*plan.elf_files, *carrying), key=lambda e: e.path)))
    return [finding for finding in check_driver_floor(floored, cuda_builds(floored), host)
            if finding.subject.distribution in links.files]


def _tables_know(candidate: Candidate) -> bool:
    """Whether the knowledge tables say what a wheel links: an NVIDIA component, a framework of the
    torch family (its release rows pin every wheel it links), or a CuPy wheel (data/cupy.toml, and
    its undeclared libraries: data/components.toml)."""
    return (bool(components.for_dist(candidate.name)) or candidate.name in torch.family()
            or cupy.dist(candidate.name, candidate.version.public) is not None)


def _read_providers(
    read: dict[str, tuple[BinaryFacts, ...]], wheels: list[Candidate], index: PackageIndex, linked: AbstractSet[str] = frozenset(),
) -> None:
    """A wheel read for its binaries links libraries of NVIDIA component wheels the plan holds unread
    (cuSPARSE read, nvJitLink not): those are read too (their row, else the wheel), until none is
    missing, so the loader finds what a read library links where the plan installs it. Which sonames
    a component wheel installs is data (components.toml), not a read."""
    tried: set[str] = set()
    while True:
        needed = {name for members in read.values() for facts in members for name in facts.needed} | set(linked)
        missing = [c for c in wheels if not read[c.name] and c.name not in tried
                   and any(soname in needed for row in components.for_dist(c.name, str(c.version)) for soname in row.sonames)]
        if not missing:
            return
        for candidate in missing:
            assert candidate.file is not None
            tried.add(candidate.name)
            try:
                read[candidate.name] = index.binary_facts(candidate.file).members
            except (WheelError, OfflineMiss):
                pass  # unread: the loader then says the library is not found, and why


def _complete_providers(read: dict[str, tuple[BinaryFacts, ...]], wheels: list[Candidate], index: PackageIndex) -> None:
    """With `deep`: a wheel known by its table row (a partial symbol table) whose library a member
    read in full links is read from the wheel too, until no fully read member needs a partial one,
    so the loader judges every symbol of those members against complete tables. A wheel that cannot
    be read (offline, refused) keeps its row, against which the loader reports no absent name."""
    tried: set[str] = set()
    while True:
        needed = {name for members in read.values() for facts in members if facts.symbols_complete for name in facts.needed}
        partial = [c for c in wheels if c.name not in tried
                   and any(not f.symbols_complete and f.soname in needed for f in read[c.name])]
        if not partial:
            return
        for candidate in partial:
            assert candidate.file is not None
            tried.add(candidate.name)
            try:
                read[candidate.name] = index.binary_facts(candidate.file, deep=True).members
            except (WheelError, OfflineMiss):
                pass  # its row stays: the loader blames no name the row may lack


def judged_by_binaries(name: str, version: Version, filename: str, machine: str, *, gpus: bool = False) -> bool:
    """Whether a wheel's build is judged by its own binaries, read from its table row or the wheel:

    - a consumer the knowledge table holds releases of (onnxruntime-gpu): only its binaries tell its
      CUDA build (the libraries they link), so each release is judged by its own row, or by its
      wheel where the table has none; no release borrows another's facts;
    - a wheel that carries its own CUDA runtime (warp-lang, ale-py): its driver floor is in its
      bytes alone (the table's rows do not keep a runtime's version), so it is always read;
    - a host whose loader opens plugins by path, or a distribution of such plugins (openmm,
      openmm-cuda-12; data/components.toml [plugin_hosts]): a plugin binds the names of its own
      release of the host, so both wheels are read to judge the pair.

    An NVIDIA component's CUDA is data by name and version (data/components.toml): it joins with
    the table's row for it; a release without a row is read when the component binds another
    wheel's versioned symbols (cuSPARSE: nvJitLink's), whose floor only its own bytes give, or, with
    `gpus` stated, when the component's releases carry device code (cuDNN) or the table holds no
    release of it (cuSPARSELt for CUDA 12), which only its own bytes tell; otherwise it joins with its
    metadata alone. Other wheels join the plan with their metadata alone (their files are judged by
    `doctor` after install)."""
    if components.carries_own_runtime(name) or _plugin_or_host(name):
        return True
    if wheel_facts.find(name, str(version), filename) is not None:
        return True
    if components.for_dist(name):
        unknown = not wheel_facts.releases(name, machine)  # no row of any release: its device code is not known
        return read_needed(name, version, filename, machine) or (gpus and (unknown or wheel_facts.carries_device_code(name, machine)))
    return bool(wheel_facts.releases(name, machine))


def _plugin_or_host(name: str) -> bool:
    return components.plugin_host_of(name) is not None or any(row.host == name for row in components.plugin_hosts())
