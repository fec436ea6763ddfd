"""Releases of the packages that carry their own CUDA runtime (data/own_runtime.toml): per release,
the runtime each of its files carries and that file's device code, read from the real wheels by
scripts/record_own_runtime.py.

Why: such a wheel (warp-lang's statically linked cudart, ale-py's vendored libcudart) names no CUDA
library in its metadata or DT_NEEDED, so only its bytes tell which driver and GPUs a release runs
on; a fix naming another release needs those facts for releases that are not installed.

May import: records, versions, errors, arch and knowledge/files and compiled.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from packaging.utils import canonicalize_name
from packaging.version import Version

from cudaresolve import records
from cudaresolve.arch import Target
from cudaresolve.errors import UsageError
from cudaresolve.knowledge import compiled, files
from cudaresolve.knowledge.files import CONFIDENCE, VERSION
from cudaresolve.knowledge.wheel_facts import ptx_target
from cudaresolve.versions import CudaVersion

FILE = "own_runtime.toml"


def _canonical(value: str) -> None:
    if canonicalize_name(value) != value:
        raise UsageError(f"not a canonical distribution name: {value!r}")


def _runtime(value: str) -> None:
    if CudaVersion.parse(value).minor is None:  # a UsageError names what is not a CUDA version
        raise UsageError(f"expected a CUDA release MAJOR.MINOR[.PATCH], got {value!r}")


def _sass(value: str) -> None:
    if Target.parse(value).kind != "sass":
        raise UsageError(f"not a SASS target: {value!r}")


@dataclass(frozen=True)
class RuntimeFile:
    """A file of the release that carries a CUDA runtime, and the device code it carries."""

    path: str  # "warp/bin/warp.so"
    runtime: str = field(metadata=records.check(_runtime))  # "12.9.86"
    sass: tuple[str, ...] = field(default=(), metadata=records.check(_sass))
    ptx: tuple[str, ...] = field(default=(), metadata=records.check(ptx_target))  # "compute_75:8.8"

    @property
    def cuda(self) -> CudaVersion:
        return CudaVersion.parse(self.runtime)

    @property
    def ptx_targets(self) -> tuple[tuple[str, Optional[str]], ...]:
        """(compute_XY, ISA or None) of each PTX entry."""
        return tuple((target, isa or None) for target, _, isa in (p.partition(":") for p in self.ptx))


@dataclass(frozen=True)
class Release:
    name: str = field(metadata=records.check(_canonical))
    version: str = field(metadata=VERSION)
    machine: str
    filename: str
    sha256: str
    file: tuple[RuntimeFile, ...] = ()

    @property
    def cuda(self) -> Optional[CudaVersion]:
        """The CUDA the release needs a driver for: the newest runtime it carries (None: none)."""
        return max((f.cuda for f in self.file), default=None)


@dataclass(frozen=True)
class _File:
    confidence: str = field(metadata=CONFIDENCE)
    release: tuple[Release, ...] = ()


@compiled.table(FILE)
def load() -> tuple[Release, ...]:
    """Every release in the table, newest first per name; a release is listed once per machine."""
    rows = files.read(FILE, _File).release
    seen = set()
    for index, row in enumerate(rows):
        key = (row.name, Version(row.version), row.machine)
        if key in seen:
            raise files.error(FILE, f"release[{index}]", f"{row.name} {row.version} ({row.machine}) is listed twice")
        seen.add(key)
    return tuple(sorted(rows, key=lambda r: (r.name, Version(r.version)), reverse=True))


def releases(name: str, machine: str) -> tuple[Release, ...]:
    """The table's releases of `name` for `machine`, newest first."""
    wanted = canonicalize_name(name)
    return tuple(r for r in load() if r.name == wanted and r.machine == machine)
