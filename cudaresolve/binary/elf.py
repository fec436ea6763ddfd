"""Read an ELF file's dynamic-linking facts: what the loader needs from it and what it offers.

Handles ELF64 little-endian shared objects and executables for x86_64 and aarch64, the only
platforms CUDA wheels ship for; anything else (32-bit, big-endian, other machines, relocatable
objects) is an `ElfError` naming what it is. The file is mmapped and this module touches only
headers and dynamic tables, because the files that matter are huge (libtorch_cuda.so is ~500 MB);
fatbin.py then reads the sections that can hold device code. Every offset, size and count is
checked against the file before use, so a damaged file raises `ElfError` instead of hanging,
reading without bound or leaking struct.error. Only a damaged note costs nothing but the build-id,
since the loader ignores notes.

Tables are found through the section headers, as readelf and pyelftools do; a file without them
(sstrip) is read through its dynamic tags, as the loader does, counting symbols from its hash table;
its device code, which only sections locate, is then reported as not looked for (NO_SECTIONS).

Why not pyelftools: it builds several Python objects per symbol, which makes it two orders of
magnitude slower on the libraries that matter (libtorch_cpu.so: 75,768 dynamic symbols); pyelftools
stays as the tests' oracle. The symbols stay in the file's own layout (facts.SymbolTable: the string
table and the st_name, st_info, st_shndx and versym columns, sliced out in C) for the same reason.
Figures: docs/performance.md ("Single files"), measured by scripts/bench_elf.py.
"""

from __future__ import annotations

import bisect
import errno
import mmap
import os
import re
import stat
import struct
from array import array
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

from cudaresolve.binary.facts import (
    ELF_MAGIC,
    BinaryFacts,
    FatbinSummary,
    SymbolTable,
    VersionNeed,
    little_endian,
    native_array,
)
from cudaresolve.binary.fatbin import Extent, summarize_fatbins
from cudaresolve.binary.runtime import cuda_runtime
from cudaresolve.errors import CudaresolveError


class ElfError(CudaresolveError):
    """The file is not an ELF object this reader handles, or its structures are damaged."""


Buffer = Union[bytes, bytearray, memoryview, mmap.mmap]

_MACHINES = {62: "x86_64", 183: "aarch64"}
_ELF_TYPES = {2: "EXEC", 3: "DYN"}

_EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
_PHDR = struct.Struct("<IIQQQQQQ")
_SHDR = struct.Struct("<IIQQQQIIQQ")
_DYN = struct.Struct("<QQ")
_SYM = struct.Struct("<IBBHQQ")
_VERNEED = struct.Struct("<HHIII")
_VERNAUX = struct.Struct("<IHHII")
_VERDEF = struct.Struct("<HHHHIII")
_VERDAUX = struct.Struct("<II")
_NOTE = struct.Struct("<III")
_U32 = struct.Struct("<I")
_GNU_HASH = struct.Struct("<IIII")

PT_LOAD, PT_DYNAMIC, PT_NOTE = 1, 2, 4
_SEGMENT_NAMES = {PT_LOAD: "PT_LOAD", PT_DYNAMIC: "PT_DYNAMIC", PT_NOTE: "PT_NOTE"}
SHT_STRTAB, SHT_DYNAMIC, SHT_NOTE, SHT_NOBITS, SHT_DYNSYM = 3, 6, 7, 8, 11
SHT_GNU_VERDEF, SHT_GNU_VERNEED, SHT_GNU_VERSYM = 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF
DT_NULL, DT_NEEDED, DT_HASH, DT_STRTAB, DT_SYMTAB, DT_STRSZ = 0, 1, 4, 5, 6, 10
DT_SONAME, DT_RPATH, DT_RUNPATH, DT_FLAGS = 14, 15, 29, 30
DT_GNU_HASH, DT_VERSYM, DT_FLAGS_1 = 0x6FFFFEF5, 0x6FFFFFF0, 0x6FFFFFFB
DT_VERDEF, DT_VERDEFNUM, DT_VERNEED, DT_VERNEEDNUM = 0x6FFFFFFC, 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF
NT_GNU_BUILD_ID = 3
VER_FLG_BASE = 1
SHN_UNDEF, SHN_XINDEX, PN_XNUM = 0, 0xFFFF, 0xFFFF
_TAG_NAMES = {DT_NEEDED: "DT_NEEDED", DT_SONAME: "DT_SONAME", DT_RPATH: "DT_RPATH", DT_RUNPATH: "DT_RUNPATH"}
MAX_TABLE_STEPS = 1_000_000  # version records read per file (the most of 938 real files: 66, libtorch_cpu.so)
MAX_DLOPEN_SCAN = 64 << 20  # read-only data bytes searched for soname literals per file
MAX_DLOPEN_NAMES = 64  # soname literals kept per file (libtorch_cuda.so: 1 in 2.9)
# A soname literal ends at its NUL; the byte before it is checked apart (a lookbehind would make the
# search 40 times slower: libtorch_cpu.so's 17 MB .rodata, 0.67 s against 0.016 s).
_SONAME_LITERAL = re.compile(rb"lib[A-Za-z0-9_+-]{1,200}\.so(?:\.[0-9]{1,9}){0,4}\0")
_NOT_BEFORE_SONAME = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_+./-")
_DLOPEN_NAMES = (b"dlopen\0", b"dlmopen\0")
MAX_EXTENTS = 4096  # data ranges of a sparse file listed (each is a block or more of data on disk)
# The damage note of a file without usable section headers: "no device code" would be a guess.
NO_SECTIONS = "no section header table: device code could not be looked for"


def is_elf(path: Union[str, os.PathLike[str]]) -> bool:
    """True when `path` is a regular file starting with the ELF magic; False when it is not or cannot be read."""
    try:
        return head_of_regular_file(path) == ELF_MAGIC
    except OSError:
        return False


def head_of_regular_file(path: Union[str, os.PathLike[str]], size: int = 4) -> Optional[bytes]:
    """The first `size` bytes of `path` when it is a regular file; None when it is not (a FIFO named
    libx.so would block a plain open forever); OSError when it cannot be opened."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        return f.read(size)


def read_binary_facts(path: Union[str, os.PathLike[str]]) -> BinaryFacts:
    """Read the facts of the ELF file at `path` through a read-only mmap."""
    name = os.fspath(path)
    try:
        if not stat.S_ISREG(os.stat(name).st_mode):
            raise ElfError(f"{name}: not a regular file")
        with open(name, "rb") as f:
            if os.fstat(f.fileno()).st_size == 0:
                raise ElfError(f"{name}: empty file, not an ELF object")
            extents = data_extents(f.fileno())
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                return read_binary_facts_from_buffer(data, name, extents)
    except OSError as exc:
        raise ElfError(f"{name}: cannot read: {exc.strerror or exc}") from exc


def read_binary_facts_from_buffer(data: Buffer, path: str, extents: Optional[Sequence[Extent]] = None) -> BinaryFacts:
    """Read the facts of an ELF image already in memory (e.g. a wheel member); `path` names it in
    facts and errors; `extents`, for a sparse file, the ranges that hold data (data_extents)."""
    return _Reader(data, path, extents).facts()


def data_extents(fd: int) -> Optional[Tuple[Extent, ...]]:
    """The (start, end) ranges of a sparse file that hold data, None for a file without holes.

    A file whose blocks cover its size has no hole worth skipping; otherwise SEEK_DATA/SEEK_HOLE
    list the ranges, at most MAX_EXTENTS of them (the rest counts as data). A 16 KB file can claim
    gigabytes of holes: they read as zeros, and reading them costs what gigabytes cost."""
    info = os.fstat(fd)
    if info.st_blocks * 512 >= info.st_size or not hasattr(os, "SEEK_DATA"):
        return None
    extents: List[Extent] = []
    pos = 0
    try:
        while pos < info.st_size:
            if len(extents) == MAX_EXTENTS:
                extents.append((pos, info.st_size))
                break
            start = os.lseek(fd, pos, os.SEEK_DATA)
            pos = os.lseek(fd, start, os.SEEK_HOLE)
            extents.append((start, pos))
    except OSError as exc:
        if exc.errno != errno.ENXIO:  # ENXIO: no data past `pos`
            return None  # the file system cannot say: all of it is data
    return tuple(extents)


class _Section(NamedTuple):
    name: str
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    link: int
    info: int
    align: int
    entsize: int


class _Strings:
    """A string table copied out of the file, under the name its errors give it; strings are sliced
    out of it on demand."""

    __slots__ = ("_blob", "_last", "_reader", "_what")

    def __init__(self, blob: bytes, reader: "_Reader", what: str):
        self._blob = blob
        self._last = blob.rfind(b"\0")  # a string starting after the last NUL is unterminated
        self._reader = reader
        self._what = what

    def _check(self, offset: int, user: str = "string") -> None:
        if not 0 <= offset <= self._last:
            raise self._reader.error(f"{user} offset {offset:#x} is outside {self._what}")

    def get(self, offset: int, user: str = "string") -> str:
        """The string at `offset`; `user` names what points there, for the error."""
        self._check(offset, user)
        # backslashreplace: a non-UTF-8 name must never make a later print or JSON dump fail.
        return self._blob[offset : self._blob.find(b"\0", offset)].decode("utf-8", "backslashreplace")

    @property
    def blob(self) -> bytes:
        return self._blob

    def check_offsets(self, *offsets: int) -> None:
        for offset in offsets:
            self._check(offset)


class _Reader:
    """One pass over one image: checks bounds, then reads headers, dynamic section, symbols, versions, notes."""

    def __init__(self, data: Buffer, path: str, extents: Optional[Sequence[Extent]] = None):
        self.data = data
        self.size = len(data) if not isinstance(data, memoryview) else data.nbytes
        self.path = path
        self.extents = extents
        self.steps = 0
        self._string_blobs: Dict[Tuple[int, int], bytes] = {}

    def error(self, message: str) -> ElfError:
        return ElfError(f"{self.path}: {message}")

    def check(self, offset: int, size: int, what: str) -> None:
        if offset < 0 or size < 0 or offset + size > self.size:
            raise self.error(
                f"{what} (offset {offset:#x}, size {size:#x}) lies outside the file ({self.size:#x} bytes)"
            )

    def unpack(self, fmt: struct.Struct, offset: int, what: str) -> Tuple[Any, ...]:
        self.check(offset, fmt.size, what)
        return fmt.unpack_from(self.data, offset)

    def step(self, what: str) -> None:
        """Count one record of a chained table read: records may point back at each other (each
        version need re-walking one long chain of names), so their walk has a budget per file."""
        self.steps += 1
        if self.steps > MAX_TABLE_STEPS:
            raise self.error(f"{what} did not parse within {MAX_TABLE_STEPS:,} steps")

    def check_data(self, offset: int, size: int, what: str) -> None:
        """`check`, and for a sparse file that the range holds data: a table is copied whole, so one
        lying in a hole would cost its apparent size for nothing but zeros."""
        self.check(offset, size, what)
        if not self.holds_data(offset, size):
            raise self.error(f"{what} (offset {offset:#x}, size {size:#x}) lies in a hole of the sparse file")

    def holds_data(self, offset: int, size: int) -> bool:
        """Whether [offset, offset + size) lies within one data range (always, for a file without holes)."""
        if self.extents is None or size <= 0:
            return True
        index = bisect.bisect_right(self.extents, (offset, float("inf"))) - 1
        return index >= 0 and offset + size <= self.extents[index][1]

    def block(self, offset: int, size: int, what: str) -> bytes:
        self.check_data(offset, size, what)
        return bytes(self.data[offset : offset + size])

    def strings(self, offset: int, size: int, what: str) -> _Strings:
        """The string table at `offset`, named `what` by this caller: tables are shared (.dynstr
        serves DT_NEEDED, .dynsym and both version tables) but copied once, and each user's errors
        name the table as that user found it."""
        key = (offset, size)
        blob = self._string_blobs.get(key)
        if blob is None:
            blob = self._string_blobs[key] = self.block(offset, size, what)
        return _Strings(blob, self, what)

    # -- headers -------------------------------------------------------------------------------

    def facts(self) -> BinaryFacts:
        self._read_header()
        self._read_program_headers()
        self._read_section_headers()
        dynamic = self._read_dynamic()
        dynstr = self._dynamic_strings(dynamic)

        def text(tag: int) -> Optional[str]:
            values = dynamic.get(tag)
            return None if not values else self._need_strings(dynstr).get(values[-1], f"{_TAG_NAMES[tag]} string")

        rpath, runpath = text(DT_RPATH), text(DT_RUNPATH)
        versions, version_definitions, version_needs = self._read_versions(dynamic, dynstr)
        symbols = self._read_symbols(dynamic, dynstr, versions)
        soname = text(DT_SONAME)
        needed = tuple(self._need_strings(dynstr).get(v, "DT_NEEDED string") for v in dynamic.get(DT_NEEDED, ()))
        fatbin = self._read_fatbins()
        return BinaryFacts(
            path=self.path,
            machine=self.machine,
            elf_type=self.elf_type,
            soname=soname,
            needed=needed,
            rpath=tuple(rpath.split(":")) if rpath is not None else (),
            runpath=tuple(runpath.split(":")) if runpath is not None else (),
            flags=dynamic.get(DT_FLAGS, [0])[-1],
            flags_1=dynamic.get(DT_FLAGS_1, [0])[-1],
            symbols=symbols,
            version_definitions=version_definitions,
            version_needs=version_needs,
            build_id=self._read_build_id(),
            fatbin=fatbin,
            cuda_runtime=cuda_runtime(self.path, soname, needed, version_definitions, symbols,
                                      [s.name for s in self.sections], fatbin),
            dlopened=self._read_dlopened(symbols),
        )

    def _read_dlopened(self, symbols: SymbolTable) -> Tuple[str, ...]:
        """The soname literals in .rodata* when the file imports dlopen or dlmopen: the names it may
        open at run time. Bounded: MAX_DLOPEN_SCAN bytes read, MAX_DLOPEN_NAMES kept, in file order;
        a file without sections (whose data no header names) gives none."""
        if not _imports_dlopen(symbols):
            return ()
        found: Dict[str, None] = {}
        budget = MAX_DLOPEN_SCAN
        for section in self.sections:
            if section.type == SHT_NOBITS or not (section.name == ".rodata" or section.name.startswith(".rodata.")):
                continue
            size = min(section.size, budget)
            if size <= 0 or not self.holds_data(section.offset, size):
                continue
            budget -= size
            for match in _SONAME_LITERAL.finditer(self.data, section.offset, section.offset + size):
                start = match.start()
                if start > section.offset and self.data[start - 1] in _NOT_BEFORE_SONAME:
                    continue  # the tail of a longer string: a path ("/usr/lib/libx.so.1") or another name
                found.setdefault(bytes(match.group()[:-1]).decode("ascii"))
                if len(found) == MAX_DLOPEN_NAMES:
                    return tuple(found)
        return tuple(found)

    def _read_fatbins(self) -> Optional[FatbinSummary]:
        """The device code, found by section; without sections a note, so the file does not read as CPU-only."""
        if not self.sections:
            return FatbinSummary(damage=(NO_SECTIONS,))
        return summarize_fatbins(self.data, [(s.name, s.offset, s.size, s.flags, s.type) for s in self.sections], self.extents)

    def _read_header(self) -> None:
        if self.size == 0:
            raise self.error("empty file, not an ELF object")
        if self.size < 4 or bytes(self.data[:4]) != ELF_MAGIC:
            raise self.error("not an ELF file (no \\x7fELF magic)")
        if self.size < _EHDR.size:
            raise self.error(f"truncated ELF header ({self.size} of {_EHDR.size} bytes)")
        header = _EHDR.unpack_from(self.data, 0)
        ident = header[0]
        if ident[4] == 1:
            raise self.error("32-bit ELF (ELFCLASS32) is not supported; CUDA wheels are 64-bit")
        if ident[4] != 2:
            raise self.error(f"invalid ELF class {ident[4]}")
        if ident[5] == 2:
            raise self.error("big-endian ELF is not supported; only little-endian x86_64 and aarch64")
        if ident[5] != 1:
            raise self.error(f"invalid ELF data encoding {ident[5]}")
        e_type, e_machine = header[1], header[2]
        if e_type not in _ELF_TYPES:
            raise self.error(f"ELF type {e_type} is not a shared object or executable")
        if e_machine not in _MACHINES:
            raise self.error(f"unsupported machine e_machine={e_machine} (only x86_64 and aarch64)")
        self.elf_type = _ELF_TYPES[e_type]
        self.machine = _MACHINES[e_machine]
        (_, _, _, _, _, self.phoff, self.shoff, _, _, self.phentsize, self.phnum,
         self.shentsize, self.shnum, self.shstrndx) = header  # fmt: skip

    def _section_zero(self) -> _Section:
        """Section header 0 carries the real counts when they overflow the ELF header's 16-bit fields."""
        return _Section(*self.unpack(_SHDR, self.shoff, "section header 0"))

    def _read_program_headers(self) -> None:
        self.loads: List[Tuple[int, int, int]] = []  # (vaddr, offset, filesz)
        self.dynamic_segment: Optional[Tuple[int, int]] = None
        self.note_segments: List[Tuple[int, int, int]] = []  # (offset, filesz, align)
        count = self.phnum
        if self.phoff == 0 or count == 0:
            return
        if count == PN_XNUM and self.shoff:
            count = self._section_zero().info
        if self.phentsize != _PHDR.size:
            raise self.error(f"program header entry size {self.phentsize}, expected {_PHDR.size}")
        self.check_data(self.phoff, count * _PHDR.size, "program header table")
        for p_type, _, offset, vaddr, _, filesz, _, align in _PHDR.iter_unpack(
            self.data[self.phoff : self.phoff + count * _PHDR.size]
        ):
            if p_type in _SEGMENT_NAMES:
                self.check(offset, filesz, f"{_SEGMENT_NAMES[p_type]} segment")
            if p_type == PT_LOAD:
                self.loads.append((vaddr, offset, filesz))
            elif p_type == PT_DYNAMIC:
                self.dynamic_segment = (offset, filesz)
            elif p_type == PT_NOTE:
                self.note_segments.append((offset, filesz, align))

    def _read_section_headers(self) -> None:
        self.sections: List[_Section] = []
        if self.shoff == 0:
            return
        if self.shentsize != _SHDR.size:
            raise self.error(f"section header entry size {self.shentsize}, expected {_SHDR.size}")
        count = self.shnum
        shstrndx = self.shstrndx
        if count == 0 or shstrndx == SHN_XINDEX:
            zero = self._section_zero()
            count = count or zero.size
            shstrndx = zero.link if shstrndx == SHN_XINDEX else shstrndx
        self.check_data(self.shoff, count * _SHDR.size, "section header table")
        raw = list(_SHDR.iter_unpack(self.data[self.shoff : self.shoff + count * _SHDR.size]))
        for index, (_, sh_type, _, _, offset, size, _, _, _, _) in enumerate(raw):
            if sh_type != SHT_NOBITS and index != 0:
                self.check(offset, size, f"section {index}")
        names = None
        if shstrndx != 0:
            if shstrndx >= count:
                raise self.error(f"section name table index {shstrndx} is outside the {count} sections")
            names = self.strings(raw[shstrndx][4], raw[shstrndx][5], "the section name table")
        self.sections = [_Section(names.get(r[0]) if names is not None else "", *r[1:]) for r in raw]

    def _sections_of_type(self, sh_type: int) -> List[_Section]:
        return [s for s in self.sections if s.type == sh_type]

    def _linked_strings(self, section: _Section, what: str) -> _Strings:
        link = section.link
        if not 0 < link < len(self.sections) or self.sections[link].type != SHT_STRTAB:
            raise self.error(f"{what} links to section {link}, which is not a string table")
        target = self.sections[link]
        name = target.name or f"section {link}"
        return self.strings(target.offset, target.size, f"{name}, the string table of {what}")

    def _file_offset(self, vaddr: int, what: str) -> int:
        """Map a run-time address to a file offset through the PT_LOAD segments, as the loader does."""
        for start, offset, filesz in self.loads:
            if start <= vaddr < start + filesz:
                return vaddr - start + offset
        raise self.error(f"{what} address {vaddr:#x} lies in no loaded segment")

    # -- dynamic section -----------------------------------------------------------------------

    def _read_dynamic(self) -> Dict[int, List[int]]:
        """Tag -> values in file order, up to DT_NULL; empty for a file without dynamic linking."""
        if self.dynamic_segment is not None:
            offset, size = self.dynamic_segment
        else:
            found = self._sections_of_type(SHT_DYNAMIC)
            if not found:
                return {}
            offset, size = found[0].offset, found[0].size
        self.check_data(offset, size, "dynamic section")
        end = offset + size - size % _DYN.size
        tags: Dict[int, List[int]] = {}
        for tag, value in _DYN.iter_unpack(self.data[offset:end]):
            if tag == DT_NULL:
                break
            tags.setdefault(tag, []).append(value)
        return tags

    def _dynamic_strings(self, dynamic: Dict[int, List[int]]) -> Optional[Tuple[int, int]]:
        """(offset, size) of the dynamic string table: DT_STRTAB as the loader finds it, else .dynamic's link."""
        if DT_STRTAB in dynamic:
            if DT_STRSZ not in dynamic:
                raise self.error("dynamic section has DT_STRTAB but no DT_STRSZ")
            offset = self._file_offset(dynamic[DT_STRTAB][-1], "DT_STRTAB")
            return offset, dynamic[DT_STRSZ][-1]
        for section in self._sections_of_type(SHT_DYNAMIC):
            if 0 < section.link < len(self.sections):
                return self.sections[section.link].offset, self.sections[section.link].size
        return None

    def _need_strings(self, dynstr: Optional[Tuple[int, int]]) -> _Strings:
        if dynstr is None:
            raise self.error("dynamic section names strings but has no string table")
        return self.strings(dynstr[0], dynstr[1], "the dynamic string table (.dynstr)")

    # -- symbol versions -----------------------------------------------------------------------

    def _version_table(
        self, dynamic: Dict[int, List[int]], dynstr: Optional[Tuple[int, int]], sh_type: int, addr_tag: int, count_tag: int, what: str
    ) -> Optional[Tuple[int, int, int, _Strings]]:
        """(offset, end, count, strings) of .gnu.version_r or .gnu.version_d, from its section or dynamic tags."""
        if self.sections:
            found = self._sections_of_type(sh_type)
            if not found:
                return None
            s = found[0]
            return s.offset, s.offset + s.size, s.info, self._linked_strings(s, what)
        if addr_tag not in dynamic:
            return None
        offset = self._file_offset(dynamic[addr_tag][-1], what)
        return offset, self.size, dynamic.get(count_tag, [0])[-1], self._need_strings(dynstr)

    def _read_versions(
        self, dynamic: Dict[int, List[int]], dynstr: Optional[Tuple[int, int]]
    ) -> Tuple[Dict[int, Tuple[str, Optional[str]]], Tuple[str, ...], Tuple[VersionNeed, ...]]:
        """Version index -> (version, file or None), verdef names without the BASE entry, verneed records."""
        index: Dict[int, Tuple[str, Optional[str]]] = {}
        definitions: List[str] = []
        table = self._version_table(dynamic, dynstr, SHT_GNU_VERDEF, DT_VERDEF, DT_VERDEFNUM, ".gnu.version_d")
        if table is not None:
            offset, end, count, strings = table
            for _ in range(count):
                if offset + _VERDEF.size > end:
                    raise self.error(f"version definition at {offset:#x} runs past .gnu.version_d")
                self.step(".gnu.version_d")
                _, flags, ndx, aux_count, _, aux, next_ = self.unpack(_VERDEF, offset, ".gnu.version_d entry")
                if aux_count == 0:
                    raise self.error(f"version definition at {offset:#x} has no name")
                if offset + aux + _VERDAUX.size > end:
                    raise self.error(f"version definition name at {offset + aux:#x} runs past .gnu.version_d")
                name = strings.get(self.unpack(_VERDAUX, offset + aux, ".gnu.version_d name")[0])
                if not flags & VER_FLG_BASE:
                    definitions.append(name)
                    index[ndx & 0x7FFF] = (name, None)
                if next_ == 0:
                    break
                offset += next_
        needs: List[VersionNeed] = []
        table = self._version_table(dynamic, dynstr, SHT_GNU_VERNEED, DT_VERNEED, DT_VERNEEDNUM, ".gnu.version_r")
        if table is not None:
            offset, end, count, strings = table
            for _ in range(count):
                if offset + _VERNEED.size > end:
                    raise self.error(f"version need at {offset:#x} runs past .gnu.version_r")
                self.step(".gnu.version_r")
                _, aux_count, file_name, aux, next_ = self.unpack(_VERNEED, offset, ".gnu.version_r entry")
                file = strings.get(file_name)
                versions: List[str] = []
                aux_offset = offset + aux
                for _ in range(aux_count):
                    if aux_offset + _VERNAUX.size > end:
                        raise self.error(f"version need of {file} at {aux_offset:#x} runs past .gnu.version_r")
                    self.step(".gnu.version_r")
                    _, _, other, name_offset, aux_next = self.unpack(_VERNAUX, aux_offset, ".gnu.version_r entry")
                    name = strings.get(name_offset)
                    versions.append(name)
                    index[other & 0x7FFF] = (name, file)
                    if aux_next == 0:
                        break
                    aux_offset += aux_next
                needs.append(VersionNeed(file, tuple(versions)))
                if next_ == 0:
                    break
                offset += next_
        return index, tuple(definitions), tuple(needs)

    # -- symbols -------------------------------------------------------------------------------

    def _symbol_table(self, dynamic: Dict[int, List[int]], dynstr: Optional[Tuple[int, int]]) -> Optional[Tuple[int, int, _Strings]]:
        """(offset, count, strings) of .dynsym: its section, or for a file without sections DT_SYMTAB + hash table."""
        if self.sections:
            found = self._sections_of_type(SHT_DYNSYM)
            if not found:
                return None
            s = found[0]
            if s.entsize != _SYM.size:
                raise self.error(f".dynsym entry size {s.entsize}, expected {_SYM.size}")
            return s.offset, s.size // _SYM.size, self._linked_strings(s, ".dynsym")
        if DT_SYMTAB not in dynamic:
            return None
        offset = self._file_offset(dynamic[DT_SYMTAB][-1], "DT_SYMTAB")
        return offset, self._symbol_count(dynamic), self._need_strings(dynstr)

    def _symbol_count(self, dynamic: Dict[int, List[int]]) -> int:
        """Number of dynamic symbols of a file without section headers, from DT_HASH or DT_GNU_HASH."""
        if DT_HASH in dynamic:
            count: int = self.unpack(_U32, self._file_offset(dynamic[DT_HASH][-1], "DT_HASH") + 4, "DT_HASH")[0]
            return count
        if DT_GNU_HASH not in dynamic:
            raise self.error("no section headers and no DT_HASH or DT_GNU_HASH to count dynamic symbols")
        offset = self._file_offset(dynamic[DT_GNU_HASH][-1], "DT_GNU_HASH")
        buckets: int
        first: int
        bloom: int
        buckets, first, bloom, _ = self.unpack(_GNU_HASH, offset, "DT_GNU_HASH")
        start = offset + _GNU_HASH.size + bloom * 8
        self.check(start, buckets * 4, "DT_GNU_HASH buckets")
        last = max(struct.unpack_from(f"<{buckets}I", self.data, start), default=0)
        if last < first:
            return first
        chain = start + buckets * 4 + (last - first) * 4
        while not self.unpack(_U32, chain, "DT_GNU_HASH chain")[0] & 1:
            chain += 4
        return first + (chain - start - buckets * 4) // 4 + 1

    def _versym_offset(self, dynamic: Dict[int, List[int]], count: int) -> Optional[int]:
        """File offset of .gnu.version (one 16-bit version index per dynamic symbol), None without versions."""
        if not self.sections:
            return self._file_offset(dynamic[DT_VERSYM][-1], "DT_VERSYM") if DT_VERSYM in dynamic else None
        found = self._sections_of_type(SHT_GNU_VERSYM)
        if not found:
            return None
        if found[0].size < count * 2:
            raise self.error(f".gnu.version has {found[0].size // 2} entries for {count} symbols")
        return found[0].offset

    def _read_symbols(
        self, dynamic: Dict[int, List[int]], dynstr: Optional[Tuple[int, int]], versions: Dict[int, Tuple[str, Optional[str]]]
    ) -> SymbolTable:
        """The .dynsym columns, checked: every name inside the string table, every version index known."""
        table = self._symbol_table(dynamic, dynstr)
        if table is None or table[1] <= 1:
            return SymbolTable(b"", b"", b"", b"", b"", ())
        offset, count, strings = table
        block = self.block(offset, count * _SYM.size, ".dynsym")
        # Columns sliced out in C, so nothing is built per symbol; index 0 is the null symbol.
        name_offsets = _column(block, "I", 0, _SYM.size)[1:]
        strings.check_offsets(max(name_offsets), min(name_offsets))
        versym = b""
        versym_offset = self._versym_offset(dynamic, count)
        if versym_offset is not None:
            values = _column(self.block(versym_offset, count * 2, ".gnu.version"), "H", 0, 2)[1:]
            for value in set(values):
                ndx = value & 0x7FFF
                if ndx > 1 and ndx not in versions:
                    name = strings.get(name_offsets[values.index(value)])
                    raise self.error(f"symbol {name} has version index {ndx}, which no version entry defines")
            versym = little_endian(values)
        return SymbolTable(
            strings=strings.blob,
            name_offsets=little_endian(name_offsets),
            info=block[4 + _SYM.size :: _SYM.size],
            sections=little_endian(_column(block, "H", 6, _SYM.size)[1:]),
            versym=versym,
            versions=tuple((index, version, file) for index, (version, file) in sorted(versions.items())),
        )

    # -- notes ---------------------------------------------------------------------------------

    def _read_build_id(self) -> Optional[str]:
        """Hex NT_GNU_BUILD_ID from the note sections, or from PT_NOTE segments when there are no sections.

        Sections first: patched wheels (libcusparse.so.12 12.3.1.170) keep a PT_NOTE that points at stale bytes.
        """
        if self.sections:
            areas = [(s.offset, s.size, s.align) for s in self._sections_of_type(SHT_NOTE)]
        else:
            areas = self.note_segments
        for offset, size, align in areas:
            if not self.holds_data(offset, size):
                continue  # a note area in a hole holds zeros: no build-id, and walking them costs its size
            step = 8 if align == 8 else 4  # 8-byte notes (.note.gnu.property) pad name and desc to 8
            position = 0
            while position + _NOTE.size <= size:
                name_size, desc_size, note_type = _NOTE.unpack_from(self.data, offset + position)
                desc = -(-(position + _NOTE.size + name_size) // step) * step
                if desc + desc_size > size:
                    break  # a damaged note area; the loader ignores notes, so the file stays readable
                name = bytes(self.data[offset + position + _NOTE.size : offset + position + _NOTE.size + name_size])
                if note_type == NT_GNU_BUILD_ID and name == b"GNU\0":
                    return bytes(self.data[offset + desc : offset + desc + desc_size]).hex()
                position = -(-(desc + desc_size) // step) * step
        return None


def _imports_dlopen(symbols: SymbolTable) -> bool:
    """Whether an undefined dynamic symbol is named dlopen or dlmopen: found in the string table
    first, so a file without them (most) costs one search and builds no symbol."""
    offsets: Optional[array[int]] = None
    sections = native_array("H", symbols.sections) if symbols.sections else None
    for name in _DLOPEN_NAMES:
        at = symbols.strings.find(name)
        while at > 0:
            if offsets is None:
                offsets = native_array("I", symbols.name_offsets)
            start = 0
            while True:
                try:
                    index = offsets.index(at, start)
                except ValueError:
                    break
                if sections is not None and sections[index] == SHN_UNDEF:
                    return True
                start = index + 1
            at = symbols.strings.find(name, at + 1)
    return False


def _column(block: bytes, code: str, offset: int, stride: int) -> array[int]:
    """The little-endian field at `offset` of every `stride`-byte record in `block`."""
    values = native_array(code, block)
    return values[offset // values.itemsize :: stride // values.itemsize]
