"""The environment the checks judge: one frozen value, installed or planned.

`env.scan` builds it from a site-packages on disk; the resolver builds it from the distributions
that stay plus the wheels it chose; tests build it from plain data. Everything a check needs is
in it, computed once by whoever built it (real paths, which libraries a package preloads and
from where), so no check touches the disk. The loader reaches files only through `loader`'s
seams and `system_facts`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Optional, cast

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from cudaresolve.binary.facts import BinaryFacts
from cudaresolve.binary.loader import LoaderEnv
from cudaresolve.env.conda import CondaPrefix
from cudaresolve.env.distributions import Distribution, Problem
from cudaresolve.env.imports import ImportModel, module_index
from cudaresolve.env.interpreter import Target
from cudaresolve.env.ownership import SharedFile

if TYPE_CHECKING:
    from cudaresolve.env.observe import Observed

_EXTRA = re.compile(r"""\bextra\s*==\s*['"]([^'"]+)['"]|['"]([^'"]+)['"]\s*==\s*extra\b""")

FactsOf = Callable[[str], Optional[BinaryFacts]]


def _no_file(path: str) -> Optional[BinaryFacts]:
    return None


@dataclass(frozen=True)
class ElfFile:
    path: str  # where it is (or will be) installed, not resolved through symlinks
    owners: tuple[str, ...]  # canonical names of the distributions whose RECORD lists it, sorted,
    # except that the one whose recorded hash the bytes on disk have comes first
    facts: Optional[BinaryFacts]  # None when reading failed
    error: Optional[str]  # why reading failed
    real_path: str = ""  # the path with symlinks resolved; "" means the same as `path`

    @property
    def owner(self) -> Optional[str]:
        """The distribution the file is judged under: the first owner (the one whose bytes are there, when
        several RECORDs list it), None when no RECORD lists it."""
        return self.owners[0] if self.owners else None

    @property
    def identity(self) -> str:
        return self.real_path or self.path

    @property
    def private(self) -> bool:
        """A copy auditwheel renamed with a hash (`pkg.libs/libz.915b4635.so.1`): ld.so searches
        directories for the name a DT_NEEDED gives, so it serves only the files that name it so."""
        directory, name = os.path.split(self.path)
        return (directory.endswith(".libs") and self.facts is not None and self.facts.soname is not None
                and name != self.facts.soname)


@dataclass(frozen=True)
class Environment:
    target: Target  # the interpreter (or bare site-packages) the distributions belong to
    distributions: tuple[Distribution, ...]  # sorted by name, then dist-info path
    elf_files: tuple[ElfFile, ...]  # sorted by path
    problems: tuple[Problem, ...] = ()  # what the builder could not read
    loader: LoaderEnv = LoaderEnv(machine="x86_64")  # LD_LIBRARY_PATH, LD_PRELOAD, ld.so.cache, driver libraries
    # Facts of files outside `elf_files` that the loader may pick (system libraries); None: no file.
    system_facts: FactsOf = field(default=_no_file, compare=False)
    # distribution -> {soname: path} its preloader finds, for every CUDA soname its files need.
    preloads: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    conda: Optional[CondaPrefix] = None  # the target's conda prefix and all its records, when it is one
    preload_prefix: Optional[str] = None  # the conda prefix preloaders search (the target's, or CONDA_PREFIX)
    shared_files: tuple[SharedFile, ...] = ()  # paths several distributions install with different contents
    # distribution -> what its build recorded it was compiled against (data/components.toml [build_records])
    build_records: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    # distribution -> what its import loads, read from its Python files (env/imports.py); absent: not known
    imports: Mapping[str, ImportModel] = field(default_factory=dict)
    # distribution -> its import as run (`doctor --import`, env/observe.py); None: not run
    observed: Optional[Mapping[str, Observed]] = None

    @cached_property
    def module_owners(self) -> Mapping[str, str]:
        """Top-level module name -> the distribution whose RECORD installs a module under it (env/imports.py
        `module_index`: `torch/__init__.py` -> torch; the first by name when several do)."""
        owners: dict[str, str] = {}
        for dist in self.distributions:
            for module in module_index(dist.files, self.target.site_packages):
                owners.setdefault(module.split(".", 1)[0], dist.name)
        return owners

    def distribution(self, name: str) -> Optional[Distribution]:
        """The first installed distribution with this canonical name."""
        return next((d for d in self.distributions if d.name == name), None)

    def requirements(self, dist: Distribution) -> tuple[Requirement, ...]:
        """`dist`'s Requires-Dist that apply here: markers evaluated in the target's marker environment,
        `extra == X` true only for the extras installed with it (`Distribution.extras`)."""
        key = (dist.name, dist.dist_info)
        if key not in self._applicable:
            markers = self.marker_environment
            self._applicable[key] = tuple(
                r
                for r in dist.requires
                if r.marker is None
                # only the extras the marker names can make it true (cuda-toolkit: 60 requirements, 20 extras)
                or any(r.marker.evaluate({**markers, "extra": extra})
                       for extra in ("", *(e for e in _extras_named(r) if e in dist.extras)))
            )
        return self._applicable[key]

    @cached_property
    def _applicable(self) -> dict[tuple[str, str], tuple[Requirement, ...]]:
        """requirements() per distribution, computed once: every check that follows requirements asks."""
        return {}

    @cached_property
    def files_by_path(self) -> dict[str, ElfFile]:
        """The ELF files by the path they are (or will be) installed at."""
        return {elf.path: elf for elf in self.elf_files}

    @cached_property
    def _files_by_identity(self) -> dict[str, ElfFile]:
        return {elf.identity: elf for elf in self.elf_files}

    @cached_property
    def _files_by_soname(self) -> dict[str, tuple[ElfFile, ...]]:
        found: dict[str, list[ElfFile]] = {}
        for elf in self.elf_files:
            if elf.facts is not None and elf.facts.soname and not elf.private:
                found.setdefault(elf.facts.soname, []).append(elf)
        return {soname: tuple(files) for soname, files in found.items()}

    def identity(self, path: str) -> str:
        """The file behind a loader path: the builder's real path for the environment's files, the
        loader's seam for any other (a system library, a path with `..` in it)."""
        elf = self.files_by_path.get(path)
        return elf.identity if elf is not None else self.loader.real_path(path)

    def elf_file(self, path: str) -> Optional[ElfFile]:
        """The environment's ELF file a loader path names, under that name or another: the one the
        path names once `..` is folded (conda's `bin/../lib/x` is the `lib/x` its package lists,
        not the file in `targets/` that symlink leads to), else any with the same identity."""
        found = self.files_by_path.get(path)
        if found is not None:
            return found
        identity = self.identity(path)
        folded = self.files_by_path.get(os.path.normpath(path))
        return folded if folded is not None and folded.identity == identity else self._files_by_identity.get(identity)

    def with_soname(self, soname: str) -> tuple[ElfFile, ...]:
        """The environment's ELF files whose DT_SONAME is `soname` and that a search for it can find
        (no private copy), in path order."""
        return self._files_by_soname.get(soname, ())

    @cached_property
    def linked(self) -> frozenset[str]:
        """Every name some ELF file of the environment lists in DT_NEEDED."""
        return frozenset(needed for elf in self.elf_files if elf.facts for needed in elf.facts.needed)

    def requires_names(self, dist: Distribution) -> set[str]:
        """Canonical names of the distributions `dist` requires here."""
        return {canonicalize_name(r.name) for r in self.requirements(dist)}

    @cached_property
    def marker_environment(self) -> dict[str, str]:
        """The target interpreter's markers; this interpreter's for a bare site-packages, which runs here."""
        # packaging's Environment is a TypedDict whose every value is a str
        return self.target.marker_environment() or dict(cast("Mapping[str, str]", default_environment()))


def installed_extras(dist: Distribution, installed: Mapping[str, Version], markers: Mapping[str, str]) -> frozenset[str]:
    """The extras of `dist` whose every requirement (where its marker holds) is installed in a matching version.

    Installers record no extras, so this is how an installed environment tells `torch[cu13]`'s
    requirements from ones that were never asked for.
    """
    extras: dict[str, list[Requirement]] = {}
    for requirement in dist.requires:
        for extra in _extras_named(requirement):
            assert requirement.marker is not None  # the extras were read from it
            if requirement.marker.evaluate({**markers, "extra": extra}):
                extras.setdefault(extra, []).append(requirement)
            else:
                extras.setdefault(extra, [])
    return frozenset(
        extra
        for extra, requirements in extras.items()
        if requirements
        and all(
            canonicalize_name(r.name) in installed
            and r.specifier.contains(installed[canonicalize_name(r.name)], prereleases=True)
            for r in requirements
        )
    )


def extras_named(requires: Iterable[Requirement]) -> frozenset[str]:
    """The extras some Requires-Dist marker names, normalised: what metadata without Provides-Extra
    provides."""
    return frozenset(canonicalize_name(extra) for requirement in requires for extra in _extras_named(requirement))


def _extras_named(requirement: Requirement) -> Iterable[str]:
    """The extra names a requirement's marker compares `extra` with (`extra == "cu13"`)."""
    if requirement.marker is None:
        return ()
    return sorted({a or b for a, b in _EXTRA.findall(str(requirement.marker))})
