"""One look at an environment: its distributions, the ELF files under its site-packages, who owns
each file, and each file's binary facts.

Only data is gathered here; judging it is the doctor's job. An ELF file is a `*.so` or `*.so.*`
whose first four bytes are `\\x7fELF` (linker scripts such as a text `libfoo.so` are skipped).
A file's owners come from RECORD; a file listed by no RECORD is unowned (owners == ()), and one
listed by several RECORDs (one wheel overwrote another's file) has several owners.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Iterable, Optional, Sequence

from cudaresolve.binary.facts import BinaryFacts
from cudaresolve.env.distributions import Distribution, Problem, read_distributions
from cudaresolve.env.interpreter import Target
from cudaresolve.errors import CudaresolveError

ELF_MAGIC = b"\x7fELF"


@dataclass(frozen=True)
class ElfFile:
    path: str  # as found under site-packages (not resolved through symlinks)
    owners: tuple[str, ...]  # canonical names of the distributions whose RECORD lists it, sorted
    facts: Optional[BinaryFacts]  # None when reading failed
    error: Optional[str]  # why reading failed


@dataclass(frozen=True)
class Environment:
    target: Target
    distributions: tuple[Distribution, ...]  # sorted by name, then dist-info path
    elf_files: tuple[ElfFile, ...]  # sorted by path
    problems: tuple[Problem, ...]

    def distribution(self, name: str) -> Optional[Distribution]:
        """The first installed distribution with this canonical name."""
        return next((d for d in self.distributions if d.name == name), None)


def scan_environment(
    target: Target,
    *,
    facts_for: Callable[[str], BinaryFacts],
    prefetch: Optional[Callable[[Sequence[str]], None]] = None,
) -> Environment:
    """Read the target's distributions and every ELF file under its site-packages.

    `facts_for(path)` reads one file's facts (normally the on-disk cache in front of the ELF
    reader); a CudaresolveError or OSError from it becomes that file's `error`. `prefetch(paths)`,
    when given, is called once with every ELF path first (the cache reads its misses in parallel).
    """
    distributions: list[Distribution] = []
    problems: list[Problem] = []
    paths: list[str] = []
    for site_packages in _distinct(target.site_packages):
        found, dist_problems = read_distributions(site_packages)
        distributions.extend(found)
        problems.extend(dist_problems)
        found_paths, file_problems = find_elf_files(site_packages)
        paths.extend(found_paths)
        problems.extend(file_problems)
    distributions.sort(key=lambda d: (d.name, d.dist_info))
    owners = owners_by_path(distributions)
    paths = sorted(set(paths))
    if prefetch is not None:
        prefetch(paths)
    elf_files = []
    for path in paths:
        facts: Optional[BinaryFacts] = None
        error: Optional[str] = None
        try:
            facts = facts_for(path)
        except CudaresolveError as exc:
            error = str(exc)
        except OSError as exc:
            error = f"cannot read: {exc.strerror or exc}"
        elf_files.append(ElfFile(path, owners.get(path, ()), facts, error))
    return Environment(
        target=target,
        distributions=tuple(distributions),
        elf_files=tuple(elf_files),
        problems=tuple(problems),
    )


def owners_by_path(distributions: Iterable[Distribution]) -> dict[str, tuple[str, ...]]:
    """Path -> sorted canonical names of the distributions whose RECORD lists it."""
    owners: dict[str, set[str]] = {}
    for distribution in distributions:
        for path in distribution.files:
            owners.setdefault(path, set()).add(distribution.name)
    return {path: tuple(sorted(names)) for path, names in owners.items()}


def is_shared_object_name(name: str) -> bool:
    """`*.so` or `*.so.*` (a substring test: fnmatch cost 25 ms on torch's 22k file names)."""
    return name.endswith(".so") or ".so." in name


def find_elf_files(site_packages: str) -> tuple[tuple[str, ...], tuple[Problem, ...]]:
    """ELF shared objects under site_packages (symlinked directories not followed), and what could not be read."""
    paths = []
    problems = []

    def on_error(exc: OSError) -> None:
        problems.append(Problem(exc.filename or site_packages, f"cannot list: {exc.strerror or exc}"))

    for directory, _, names in os.walk(site_packages, onerror=on_error):
        for name in names:
            if not is_shared_object_name(name):
                continue
            path = os.path.join(directory, name)
            try:
                with open(path, "rb") as f:
                    magic = f.read(4)
            except OSError as exc:
                problems.append(Problem(path, f"cannot read: {exc.strerror or exc}"))
                continue
            if magic == ELF_MAGIC:
                paths.append(path)
    return tuple(paths), tuple(problems)


def _distinct(directories: tuple[str, ...]) -> list[str]:
    """Each existing site-packages once, even when purelib and platlib are one directory by two names.

    An interpreter may report a platlib nothing was ever installed into (lib64 on Fedora); that is
    not a problem worth reporting.
    """
    seen = set()
    result = []
    for directory in directories:
        real = os.path.realpath(directory)
        if real not in seen and os.path.isdir(real):
            seen.add(real)
            result.append(directory)
    return result
