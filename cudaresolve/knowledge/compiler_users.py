"""Packages that compile kernels at run time (data/compiler_users.toml): which compiler each uses,
who makes the SASS the GPU runs, and the compiler functions packages find with dlsym.

Why: whether a run-time compiled kernel loads depends on the compiler release (its arch list, the
PTX ISA it writes: knowledge.compilers) and on the path its output takes: CuPy asks NVRTC for CUBIN,
so the driver never sees its PTX; openmm hands PTX to the driver, whose JIT refuses an ISA newer
than its own CUDA version's. Those paths are read from each package's source per release range.
dlsym needs are the other blind spot: cuda-bindings finds nvJitLink's functions by name at run time,
so no DT_NEEDED or versioned symbol says that nvJitLink 12.0-12.2 (no plain-named exports) fail it.
Pairs are the third: a package that hands NVRTC's or NVVM's output to nvJitLink needs an nvJitLink
that reads it (cuda-core with NVRTC 12.9 beside nvJitLink 12.4: PTX ISA 8.8 against 8.4).
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Any, Optional

from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from cudaresolve import records
from cudaresolve.errors import UsageError
from cudaresolve.knowledge import compiled, compilers, files
from cudaresolve.knowledge.files import CONFIDENCE, SPECIFIER

FILE = "compiler_users.toml"
SASS_BY = ("compiler", "nvjitlink", "driver", "nvjitlink-else-driver", "driver-if-loadable")


def _one_of(*allowed: str) -> dict[str, Any]:
    def check(value: str) -> None:
        if value not in allowed:
            raise UsageError(f"expected one of {', '.join(allowed)}, got {value!r}")

    return records.check(check)


def _pattern(value: str) -> None:
    if canonicalize_name(value.replace("*", "x")) != value.replace("*", "x"):
        raise UsageError(f"not a canonical distribution name or pattern: {value!r}")


@dataclass(frozen=True)
class Usage:
    """How one package's releases in `versions` compile kernels at run time."""

    name: str  # "cupy"
    dists: tuple[str, ...] = field(metadata=records.check(_pattern))  # shell-style: "cupy-cuda*"
    versions: str = field(metadata=SPECIFIER)  # ">=9.4"
    compiler: str = field(metadata=_one_of("nvrtc", "nvvm"))
    linked: str = field(metadata=_one_of("dynamic", "static"))  # static: of the toolkit that built the package
    output: str = field(metadata=_one_of("ptx", "cubin", "ltoir", "ptx-or-cubin"))
    sass_by: str = field(metadata=_one_of(*SASS_BY))
    source: str
    confidence: str = field(metadata=CONFIDENCE)
    note: Optional[str] = None

    @property
    def driver_gets_ptx(self) -> bool:
        """Whether the driver may have to JIT the compiler's PTX (its PTX ISA must not exceed the driver's)."""
        return self.sass_by in ("driver", "nvjitlink-else-driver")


@dataclass(frozen=True)
class DlsymNeed:
    """Functions a package's releases find with dlsym in a compiler library, and what a miss costs."""

    dist: str = field(metadata=records.check(_pattern))
    versions: str = field(metadata=SPECIFIER)
    provider: str = field(metadata=_one_of(*compilers.KINDS))
    functions: tuple[str, ...]
    missing: str = field(metadata=_one_of("error", "fallback"))
    feature: str  # what uses them: "cuda.bindings.nvjitlink"
    source: str
    confidence: str = field(metadata=CONFIDENCE)
    note: Optional[str] = None

    @property
    def min_release(self) -> str:
        """The oldest provider release exporting every function by its plain name ("12.3.52")."""
        releases: list[str] = []
        for function in self.functions:
            since = compilers.function_since(self.provider, function)
            assert since is not None  # load() refuses a function no release of the provider exports
            releases.append(since)
        return max(releases, key=Version)


@dataclass(frozen=True)
class Link:
    """A package's releases in `versions` hand what `producer` writes (`inputs`) to nvJitLink."""

    dist: str = field(metadata=records.check(_pattern))  # "cuda-core"
    versions: str = field(metadata=SPECIFIER)
    producer: str = field(metadata=_one_of("nvrtc", "nvvm"))
    linker: str = field(metadata=_one_of("nvjitlink"))
    inputs: tuple[str, ...] = field(metadata=_one_of("ptx", "ltoir"))  # each checked
    when: str = field(metadata=_one_of("always", "exports-nvJitLinkVersion"))
    feature: str  # what links: "cuda.core Program + Linker"
    source: str
    confidence: str = field(metadata=CONFIDENCE)
    note: Optional[str] = None


@dataclass(frozen=True)
class _Users:
    confidence: str = field(metadata=CONFIDENCE)
    package: tuple[Usage, ...]


@dataclass(frozen=True)
class _Dlsym:
    confidence: str = field(metadata=CONFIDENCE)
    need: tuple[DlsymNeed, ...]


@dataclass(frozen=True)
class _Links:
    confidence: str = field(metadata=CONFIDENCE)
    pair: tuple[Link, ...]


@dataclass(frozen=True)
class _File:
    confidence: str = field(metadata=CONFIDENCE)
    users: _Users
    dlsym: _Dlsym
    links: _Links


@dataclass(frozen=True)
class Tables:
    usages: tuple[Usage, ...]
    needs: tuple[DlsymNeed, ...]
    links: tuple[Link, ...]


@compiled.table(FILE, compilers.FILE)
def load() -> Tables:
    """Load and check the file: a package's ranges do not overlap; every dlsym function is one the
    provider's table records (so its first release is known); a pair names its inputs once each."""
    raw = files.read(FILE, _File)
    by_name: dict[str, list[Usage]] = {}
    for usage in raw.users.package:
        by_name.setdefault(usage.name, []).append(usage)
    for name, usages in by_name.items():
        for version in _probes(usages):
            if sum(SpecifierSet(u.versions).contains(version, prereleases=True) for u in usages) > 1:
                raise files.error(FILE, "users.package", f"{name} {version} falls in two rows")
    for i, need in enumerate(raw.dlsym.need):
        for function in need.functions:
            if compilers.function_since(need.provider, function) is None:
                raise files.error(FILE, f"dlsym.need[{i}].functions", f"{function} is exported by no {need.provider} release in compilers.toml")
    for i, link in enumerate(raw.links.pair):
        if not link.inputs or len(set(link.inputs)) != len(link.inputs):
            raise files.error(FILE, f"links.pair[{i}].inputs", "expected ptx, ltoir or both, each once")
    return Tables(usages=raw.users.package, needs=raw.dlsym.need, links=raw.links.pair)


def _probes(usages: list[Usage]) -> set[Version]:
    """Where two release ranges would meet: each bound, just above it, and the oldest release."""
    bounds = {Version(spec.version) for u in usages for spec in SpecifierSet(u.versions)}
    return {Version("0")} | bounds | {Version(f"{b}.post1") for b in bounds}


# -- accessors --------------------------------------------------------------------------------------


def usage(dist: str, version: str) -> Optional[Usage]:
    """How `dist==version` compiles kernels at run time; None for a package the table does not name."""
    name, wanted = canonicalize_name(dist), Version(version)
    return next(
        (u for u in load().usages
         if any(fnmatch.fnmatchcase(name, p) for p in u.dists) and SpecifierSet(u.versions).contains(wanted, prereleases=True)),
        None,
    )


def dlsym_needs(dist: str, version: str) -> tuple[DlsymNeed, ...]:
    """The dlsym needs of `dist==version`, in file order."""
    name, wanted = canonicalize_name(dist), Version(version)
    return tuple(n for n in load().needs
                 if fnmatch.fnmatchcase(name, n.dist) and SpecifierSet(n.versions).contains(wanted, prereleases=True))


def links(dist: str, version: str) -> tuple[Link, ...]:
    """The compiler-to-nvJitLink pairs `dist==version` forms, in file order."""
    name, wanted = canonicalize_name(dist), Version(version)
    return tuple(link for link in load().links
                 if fnmatch.fnmatchcase(name, link.dist) and SpecifierSet(link.versions).contains(wanted, prereleases=True))
