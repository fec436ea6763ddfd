"""Binary facts: what one ELF file needs and carries, frozen so it can be cached and compared.

`elf.read_binary_facts(path)` produces these; the loader emulation, `inspect`, `doctor` and the
resolver consume them. Nothing here touches the file system.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Symbol:
    """A dynamic symbol with its version binding.

    For an undefined symbol, `version` and `file` come from `.gnu.version_r` (verneed): the version
    name and the library the link editor found it in, e.g. ("libnvJitLink.so.12", "libnvJitLink.so.12")
    for `__nvJitLinkComplete_12_4`. For a defined symbol, `version` comes from `.gnu.version_d`
    (verdef) and `file` is None; `hidden` marks a non-default version (`name@V`, not `name@@V`).
    """

    name: str
    version: Optional[str] = None
    file: Optional[str] = None
    binding: str = "GLOBAL"  # GLOBAL, WEAK, GNU_UNIQUE
    type: str = "FUNC"  # FUNC, OBJECT, TLS, IFUNC, NOTYPE, ...
    hidden: bool = False


@dataclass(frozen=True)
class PtxTarget:
    """A PTX entry: its virtual arch and the PTX ISA version the producing toolkit wrote."""

    target: str  # "compute_90", "compute_90a"
    isa: Optional[str]  # "8.4"; None when the header did not carry it


@dataclass(frozen=True)
class FatbinSummary:
    """The device code a library carries, from every fatbin container found in it.

    `undetermined` lists targets ("sm_90", "compute_90") whose `a`/`f` suffix could not be read
    (compressed payload and no decompressor available); they are also listed in `sass` or `ptx`
    without a suffix.
    `unknown_kinds` counts entries of kinds that are neither PTX nor SASS (e.g. kind 8, likely LTO-IR).
    """

    sass: tuple[str, ...] = ()  # sorted, unique: "sm_75", "sm_90a", "sm_100"
    ptx: tuple[PtxTarget, ...] = ()  # sorted, unique
    undetermined: tuple[str, ...] = ()
    unknown_kinds: tuple[tuple[int, int], ...] = ()  # (kind, count)
    containers: int = 0
    entries: int = 0
    sections: tuple[str, ...] = ()  # sections the containers were found in


@dataclass(frozen=True)
class VersionNeed:
    """One verneed record: versions this object needs from one library."""

    file: str  # "libc.so.6"
    versions: tuple[str, ...]  # ("GLIBC_2.2.5", "GLIBC_2.17")


@dataclass(frozen=True)
class BinaryFacts:
    path: str
    machine: str  # "x86_64", "aarch64"
    elf_type: str  # "DYN", "EXEC"
    soname: Optional[str]
    needed: tuple[str, ...]
    rpath: tuple[str, ...]  # DT_RPATH split on ":", unexpanded ($ORIGIN kept)
    runpath: tuple[str, ...]  # DT_RUNPATH likewise
    flags: int  # DT_FLAGS
    flags_1: int  # DT_FLAGS_1
    undefined: tuple[Symbol, ...]  # global/weak undefined dynamic symbols, sorted by name
    defined: tuple[Symbol, ...]  # global/weak defined dynamic symbols, sorted by (name, version)
    version_definitions: tuple[str, ...]  # verdef names, excluding the BASE entry (the soname)
    version_needs: tuple[VersionNeed, ...]
    build_id: Optional[str]  # hex of NT_GNU_BUILD_ID
    fatbin: Optional[FatbinSummary]  # None when the file carries no fatbin

    @property
    def glibc_needs(self) -> tuple[str, ...]:
        """GLIBC_* and GLIBCXX_* / CXXABI_* versions needed, for manylinux-style checks."""
        prefixes = ("GLIBC_", "GLIBCXX_", "CXXABI_")
        return tuple(
            sorted(
                {v for need in self.version_needs for v in need.versions if v.startswith(prefixes)}
            )
        )
