"""One look at an environment: its distributions, the ELF files under its site-packages (and, in a
conda prefix, those its conda packages list), who owns each file, and each file's binary facts.

Only data is gathered here; judging it is the doctor's job. An ELF file is a `*.so` or `*.so.*`
whose first four bytes are `\\x7fELF` (linker scripts such as a text `libfoo.so` are skipped).
A file's owners come from RECORD (a conda package's: its conda-meta `files`); a file listed by no
RECORD is unowned (owners == ()), and one listed by several RECORDs (one wheel overwrote another's
file) has several owners.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Callable, Iterable, Mapping, Optional, Sequence

from cudaresolve.binary.elf import head_of_regular_file
from cudaresolve.binary.facts import ELF_MAGIC, BinaryFacts
from cudaresolve.binary.loader import LoaderEnv, with_program
from cudaresolve.env.build_records import build_records
from cudaresolve.env.cache import Recorded
from cudaresolve.env.conda import CondaPrefix, read_conda_meta, with_conda
from cudaresolve.env.distributions import UNOWNED_FILES, Distribution, Problem, read_distributions
from cudaresolve.env.environment import ElfFile, Environment, installed_extras
from cudaresolve.env.import_cache import ImportModelCache, read_source
from cudaresolve.env.imports import ImportModel, build_model
from cudaresolve.env.interpreter import Target
from cudaresolve.env.ownership import shared_files
from cudaresolve.env.preloads import preloaded_libraries, read_wheel_list, runtime_major, sys_path_libraries
from cudaresolve.env.tree import distinct_directories, shared_object_entries
from cudaresolve.errors import CudaresolveError
from cudaresolve.knowledge import components


def scan_environment(
    target: Target,
    *,
    facts_for: Callable[[str], BinaryFacts],
    prefetch: Optional[Callable[[Sequence[str], Mapping[str, Recorded]], None]] = None,
    loader: Optional[LoaderEnv] = None,
    environ: Mapping[str, str] = {},
    import_models_cache: Optional[ImportModelCache] = None,
) -> Environment:
    """Read the target's distributions and every ELF file under its site-packages into an `Environment`;
    in a conda prefix, also its conda packages and the ELF files they list (env/conda.py).

    `facts_for(path)` reads one file's facts (normally the on-disk cache in front of the ELF
    reader); a CudaresolveError or OSError from it becomes that file's `error`, and it also serves
    the loader the system libraries it picks and the interpreter's own facts (its DT_RPATH is a
    search step). `prefetch(paths, recorded)`, when given, is called once with every ELF path first
    and what the RECORDs say each holds (`recorded_contents`): the cache finds files by content
    and reads its misses in parallel. `loader` is the machine's loader (LoaderEnv.from_system);
    `environ` gives CONDA_PREFIX to the preloaders that search it. `import_models_cache` keeps the
    import models (env/import_cache.py); without it each is parsed.
    """
    distributions, paths, problems = _site_packages(target.site_packages)
    conda = None
    if target.conda_prefix:
        distributions, paths, problems, conda = _with_conda_prefix(
            target.conda_prefix, target.site_packages, distributions, paths, problems
        )
    distributions.sort(key=lambda d: (d.name, d.dist_info))
    owners = owners_by_path(distributions, set(paths))
    shared, shared_problems = shared_files(distributions)
    problems.extend(shared_problems)
    for file in shared:  # a file two wheels install is judged as the one whose bytes are there
        if file.on_disk is not None and file.path in owners:
            owners[file.path] = (file.on_disk, *(name for name in owners[file.path] if name != file.on_disk))
    paths = sorted(set(paths))
    if prefetch is not None:
        prefetch(paths, recorded_contents(distributions))
    elf_files = _elf_files(paths, owners, facts_for)
    markers = target.marker_environment() or {}
    installed = {d.name: d.version for d in distributions}
    distributions = [replace(d, extras=installed_extras(d, installed, markers)) for d in distributions]
    conda_prefix = target.prefix if target.conda else environ.get("CONDA_PREFIX")
    loader = loader or LoaderEnv(machine=target.machine or "x86_64")
    if target.executable:
        loader, unread = _with_interpreter(loader, os.path.realpath(target.executable), facts_for)
        problems.extend(unread)

    def system_facts(path: str) -> Optional[BinaryFacts]:
        return facts_for(path) if os.path.isfile(path) else None

    return Environment(
        target=target,
        distributions=tuple(distributions),
        elf_files=tuple(elf_files),
        problems=tuple(problems),
        loader=loader,
        system_facts=system_facts,
        preloads=preloads_of(distributions, elf_files, target.site_packages, conda_prefix),
        conda=conda,
        preload_prefix=conda_prefix,
        shared_files=shared,
        build_records=build_records(distributions, target.site_packages),
        imports=import_models(distributions, elf_files, target.site_packages, import_models_cache),
    )


def _site_packages(directories: tuple[str, ...]) -> tuple[list[Distribution], list[str], list[Problem]]:
    """Each site-packages directory's distributions and ELF paths, and what could not be read."""
    distributions: list[Distribution] = []
    paths: list[str] = []
    problems: list[Problem] = []
    for site_packages in distinct_directories(directories):
        found, dist_problems = read_distributions(site_packages)
        distributions.extend(found)
        problems.extend(dist_problems)
        found_paths, file_problems = find_elf_files(site_packages)
        paths.extend(found_paths)
        problems.extend(file_problems)
    return distributions, paths, problems


def _with_conda_prefix(
    prefix: str, site_packages: tuple[str, ...], distributions: list[Distribution], paths: list[str], problems: list[Problem]
) -> tuple[list[Distribution], list[str], list[Problem], CondaPrefix]:
    """The site-packages' findings joined with a conda prefix's packages: a Python package conda
    installed owns the files its conda-meta record lists (not RECORD's), the ELF files the records
    list are read too, and a conda package is kept only when it ships one of them."""
    packages, conda_problems = read_conda_meta(prefix)
    problems = problems + list(conda_problems)
    conda = CondaPrefix(prefix, tuple(p.record for p in packages))
    distributions, listed = with_conda(distributions, packages, site_packages)
    from_conda = {d.dist_info for d in distributions if d.conda is not None and d.kind == "python"}
    problems = [replace(p, reason=p.reason.replace(UNOWNED_FILES, "; its files are those its conda-meta record lists"))
                if p.path in from_conda else p for p in problems]
    elf_paths, elf_problems = elf_only((p for owned in listed.values() for p in owned), missing_ok=True)
    problems.extend(elf_problems)
    shipping = {owner for owner, owned in listed.items() if not set(owned).isdisjoint(elf_paths)}
    distributions = [d for d in distributions if d.kind != "conda" or d.dist_info in shipping]
    return distributions, paths + list(elf_paths), problems, conda


def _elf_files(
    paths: Sequence[str], owners: Mapping[str, tuple[str, ...]], facts_for: Callable[[str], BinaryFacts]
) -> list[ElfFile]:
    """Each path's ElfFile with its owners and facts, read once per real path (conda's symlinks)."""
    elf_files = []
    read: dict[str, tuple[Optional[BinaryFacts], Optional[str]]] = {}
    for path in paths:
        real = os.path.realpath(path)
        if real not in read:
            read[real] = _facts(facts_for, path)
        facts, error = read[real]
        elf_files.append(ElfFile(path, owners.get(path, ()), facts, error, real))
    return elf_files


def _with_interpreter(
    loader: LoaderEnv, program: str, facts_for: Callable[[str], BinaryFacts]
) -> tuple[LoaderEnv, tuple[Problem, ...]]:
    """The loader with the interpreter `program` as the running program (its DT_RPATH is a search
    step), or as it was with the problem saying why the interpreter could not be read."""
    facts, error = _facts(facts_for, program)
    if facts is None:
        return loader, (Problem(program, f"cannot read the interpreter, so its RPATH is not searched: {error}"),)
    return with_program(loader, program, facts), ()


def recorded_contents(distributions: Iterable[Distribution]) -> dict[str, Recorded]:
    """Path -> (digest, size) its RECORD gives, for the shared objects of pip-installed distributions;
    a path several RECORDs give different contents is left out (whose bytes are there is a read's to say)."""
    claims: dict[str, Optional[Recorded]] = {}
    for dist in distributions:
        if dist.conda is None:
            for path, digest, size in dist.recorded:
                claim = (digest, size)
                claims[path] = claim if claims.get(path, claim) == claim else None
    return {path: claim for path, claim in claims.items() if claim is not None}


def import_models(
    distributions: Iterable[Distribution], elf_files: Iterable[ElfFile], site_packages: Sequence[str],
    cache: Optional[ImportModelCache] = None,
) -> dict[str, ImportModel]:
    """What importing each distribution that ships ELF files loads, read from its Python files
    (through `cache` when given)."""
    shipping = {elf.owner for elf in elf_files if elf.owner is not None}
    models = {}
    for dist in distributions:
        if dist.name in shipping and dist.kind == "python":
            model = (cache.model(dist.files, site_packages) if cache is not None
                     else build_model(dist.files, site_packages, read_source))
            if model is not None:
                models[dist.name] = model
    return models


def _facts(facts_for: Callable[[str], BinaryFacts], path: str) -> tuple[Optional[BinaryFacts], Optional[str]]:
    """(facts, None), or (None, why they cannot be read)."""
    try:
        return facts_for(path), None
    except CudaresolveError as exc:
        return None, str(exc)
    except OSError as exc:
        return None, f"cannot read: {exc.strerror or exc}"


def preloads_of(
    distributions: Iterable[Distribution], elf_files: Iterable[ElfFile], site_packages: tuple[str, ...],
    conda_prefix: Optional[str],
    exists: Callable[[str], bool] = os.path.isfile,
    files_in: Optional[Callable[[str], Iterable[str]]] = None,
) -> dict[str, dict[str, str]]:
    """For each distribution with a preloader: where it finds each CUDA library its files need or
    open by soname (`exists` says where a file is: the disk for an installed environment, the plan for a lock), or,
    for a package whose own code searches sys.path (torch), every library that search loads
    (`files_in` lists a directory's file names, the disk's by default)."""
    needed: dict[str, set[str]] = {}
    for elf in elf_files:
        if elf.facts is not None and elf.owner is not None:
            needed.setdefault(elf.owner, set()).update(elf.facts.needed, elf.facts.dlopened)
    preloads = {}
    installed = {d.name: d.version for d in distributions}
    for dist in distributions:
        preloader = components.preloader_for(dist.name, dist.version)
        sys_path = components.sys_path_preload(dist.name, dist.version)
        if sys_path is not None and dist.name in needed:
            major = runtime_major(needed[dist.name])
            if major is not None:  # a CUDA build: its import loads libcudart first, then preloads
                preloads[dist.name] = sys_path_libraries(sys_path, major, site_packages, files_in or listdir)
            continue
        if preloader is not None and dist.name in needed:
            listed = None
            if preloader.wheel_list is not None:  # read from the disk: a planned wheel's list is not there
                found = next((wheel_list for sp in site_packages
                              if (wheel_list := read_wheel_list(os.path.join(sp, preloader.wheel_list)))), None)
                listed = (found, installed) if found else None
            preloads[dist.name] = preloaded_libraries(
                needed[dist.name], preloader, site_packages, conda_prefix, exists, listed
            )
    return preloads


def listdir(directory: str) -> list[str]:
    """The names in `directory`; none when it is absent or unreadable."""
    try:
        return os.listdir(directory)
    except OSError:
        return []


def owners_by_path(distributions: Iterable[Distribution], paths: set[str]) -> dict[str, tuple[str, ...]]:
    """Path -> sorted canonical names of the distributions whose RECORD lists it, for the `paths`
    asked of it (the ELF files: torch's RECORD alone lists 20k others)."""
    owners: dict[str, set[str]] = {}
    for distribution in distributions:
        for path in paths.intersection(distribution.files):
            owners.setdefault(path, set()).add(distribution.name)
    return {path: tuple(sorted(names)) for path, names in owners.items()}


def find_elf_files(site_packages: str) -> tuple[tuple[str, ...], tuple[Problem, ...]]:
    """ELF shared objects under site_packages (symlinked directories not followed), and what could not be read."""
    problems = []

    def on_error(exc: OSError) -> None:
        problems.append(Problem(exc.filename or site_packages, f"cannot list: {exc.strerror or exc}"))

    paths, read_problems = elf_only(entry.path for entry in shared_object_entries(site_packages, on_error))
    return paths, tuple(problems) + read_problems


def elf_only(paths: Iterable[str], missing_ok: bool = False) -> tuple[tuple[str, ...], tuple[Problem, ...]]:
    """The paths whose first bytes are the ELF magic; a file that cannot be opened is a problem,
    except, with `missing_ok`, one that is not there (a conda record lists a file since removed)."""
    found = []
    problems = []
    for path in paths:
        try:
            magic = head_of_regular_file(path)  # None: not a regular file, not a library
        except OSError as exc:
            if missing_ok and isinstance(exc, FileNotFoundError):
                continue
            problems.append(Problem(path, f"cannot read: {exc.strerror or exc}"))
            continue
        if magic == ELF_MAGIC:
            found.append(path)
    return tuple(found), tuple(problems)
