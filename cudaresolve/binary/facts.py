"""Binary facts: what one ELF file needs and carries, frozen so it can be cached and compared.

`elf.read_binary_facts(path)` produces these; the loader emulation, `inspect`, `doctor` and the
resolver consume them. Nothing here touches the file system.

May import: arch (targets) and the standard library: every room reads these records.
"""

from __future__ import annotations

import sys
from array import array
from dataclasses import dataclass
from itertools import compress
from typing import Any, Dict, Iterable, List, Optional, Tuple

from cudaresolve.arch import PtxTarget

ELF_MAGIC = b"\x7fELF"  # the first four bytes of every ELF file

BINDINGS = {1: "GLOBAL", 2: "WEAK", 10: "GNU_UNIQUE"}  # st_info >> 4; 0 is LOCAL
SYMBOL_TYPES = {0: "NOTYPE", 1: "OBJECT", 2: "FUNC", 3: "SECTION", 4: "FILE", 5: "COMMON", 6: "TLS", 10: "IFUNC"}
VERSYM_HIDDEN = 0x8000
_IS_GLOBAL = bytes(int(info >> 4 != 0) for info in range(256))  # st_info -> 1 unless binding is LOCAL


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


# (version name, file) of a .gnu.version index: file is the verneed library, None for a verdef entry
VersionSlot = Tuple[int, str, Optional[str]]


@dataclass(frozen=True)
class SymbolTable:
    """An object's dynamic symbols (.dynsym without its null entry) as columns, in file order.

    Why columns: libtriton.so carries 136k dynamic symbols; one frozen Symbol each made reading,
    pickling and unpickling its facts cost tenths of a second apiece, as byte strings they cost
    milliseconds (docs/performance.md), which is what keeps a warm scan cheap. Symbol objects and
    the definitions index are built on first use, cached on the instance and never pickled.
    Numbers are unsigned, in the file's (little-endian) byte order.
    """

    strings: bytes  # the dynamic string table
    name_offsets: bytes  # u32 st_name per symbol
    info: bytes  # st_info per symbol: binding << 4 | type
    sections: bytes  # u16 st_shndx per symbol; 0 is undefined
    versym: bytes  # u16 .gnu.version entry per symbol; empty when the object has no versions
    versions: Tuple[VersionSlot, ...]  # (index, version, file or None) of every index versym may hold

    def __len__(self) -> int:
        return len(self.info)

    def __getstate__(self) -> Dict[str, Any]:
        # the caches below are derived data: rebuilt on use, never written to the facts cache
        return {name: getattr(self, name) for name in self.__dataclass_fields__}

    @classmethod
    def of(cls, undefined: Iterable["Symbol"] = (), defined: Iterable["Symbol"] = ()) -> "SymbolTable":
        """A table holding `undefined` then `defined` in that order (for facts not read from a file)."""
        strings = bytearray(b"\0")
        offsets, info, sections, versym = array("I"), bytearray(), array("H"), array("H")
        slots: Dict[Tuple[str, Optional[str]], int] = {}
        binding_codes = {v: k for k, v in BINDINGS.items()}
        type_codes = {v: k for k, v in SYMBOL_TYPES.items()}
        for section, symbols in ((0, undefined), (1, defined)):
            for symbol in symbols:
                offsets.append(len(strings))
                strings += symbol.name.encode() + b"\0"
                info.append(binding_codes[symbol.binding] << 4 | type_codes[symbol.type])
                sections.append(section)
                index = 1
                if symbol.version is not None:
                    key = (symbol.version, None if section else symbol.file)
                    index = slots.setdefault(key, len(slots) + 2)
                versym.append(index | (VERSYM_HIDDEN if symbol.hidden else 0))
        versions = tuple((index, version, file) for (version, file), index in slots.items())
        return cls(bytes(strings), little_endian(offsets), bytes(info), little_endian(sections), little_endian(versym), versions)

    @property
    def undefined(self) -> Tuple["Symbol", ...]:
        """Global and weak undefined symbols, in file order (the order ld.so relocates them)."""
        return self._symbols(False)

    @property
    def defined(self) -> Tuple["Symbol", ...]:
        """Global and weak defined symbols, in file order."""
        return self._symbols(True)

    @property
    def definitions(self) -> Dict[str, Tuple[Tuple[Optional[str], bool], ...]]:
        """Name -> ((version, hidden), ...) of the global and weak definitions: what a lookup binds to."""
        cached: Optional[Dict[str, Tuple[Tuple[Optional[str], bool], ...]]] = self.__dict__.get("_definitions")
        if cached is not None:
            return cached
        wanted = self._mask(True)
        names = self._names(wanted)
        slots = list(compress(self._versym(), wanted))
        values = {slot: ((version, hidden),) for slot, (version, _, hidden) in self._decoded_slots().items()}
        cached = dict(zip(names, map(values.__getitem__, slots)))
        if len(cached) != len(names):  # a name defined in several versions (foo@V1, foo@@V2): rare
            cached = {}
            for name, slot in zip(names, slots):
                cached[name] = cached.get(name, ()) + values[slot]
        self.__dict__["_definitions"] = cached
        return cached

    def _symbols(self, defined: bool) -> Tuple["Symbol", ...]:
        key = "_defined" if defined else "_undefined"
        cached: Optional[Tuple[Symbol, ...]] = self.__dict__.get(key)
        if cached is not None:
            return cached
        wanted = self._mask(defined)
        decoded = self._decoded_slots()
        kinds: Dict[int, Tuple[str, str]] = {}
        symbols = []
        for name, info, slot in zip(self._names(wanted), compress(self.info, wanted), compress(self._versym(), wanted)):
            kind = kinds.get(info) or kinds.setdefault(info, symbol_kind(info))
            version, file, hidden = decoded[slot]
            symbols.append(Symbol(name, version, file, kind[0], kind[1], hidden))
        cached = self.__dict__[key] = tuple(symbols)
        return cached

    def _names(self, wanted: bytes) -> List[str]:
        return _names(self.strings, compress(native_array("I", self.name_offsets), wanted))

    def _mask(self, defined: bool) -> bytes:
        """One byte per symbol, 1 where it is global or weak (not LOCAL) and defined (or undefined)."""
        count = len(self)
        is_global = int.from_bytes(self.info.translate(_IS_GLOBAL), "little")
        is_defined = int.from_bytes(bytes(map(bool, native_array("H", self.sections))), "little")
        if not defined:
            is_defined ^= int.from_bytes(b"\1" * count, "little")
        return (is_global & is_defined).to_bytes(count, "little")

    def _versym(self) -> array[int]:
        return native_array("H", self.versym) if self.versym else native_array("H", bytes(2 * len(self)))

    def _decoded_slots(self) -> Dict[int, Tuple[Optional[str], Optional[str], bool]]:
        """versym value -> (version, file, hidden), for every value this table's symbols hold."""
        cached = self.__dict__.get("_slots")
        if cached is None:
            by_index = {index: (version, file) for index, version, file in self.versions}
            cached = {}
            for value in set(self._versym()):
                version, file = by_index.get(value & 0x7FFF, (None, None)) if value & 0x7FFF > 1 else (None, None)
                cached[value] = (version, file, version is not None and bool(value & VERSYM_HIDDEN))
            self.__dict__["_slots"] = cached
        return cached


def symbol_kind(info: int) -> Tuple[str, str]:
    """(binding, type) names of a symbol's st_info byte."""
    return BINDINGS.get(info >> 4) or str(info >> 4), SYMBOL_TYPES.get(info & 0xF) or str(info & 0xF)


def native_array(code: str, data: bytes) -> array[int]:
    """The little-endian numbers in `data` as an array in this machine's byte order."""
    values = array(code, data)
    if sys.byteorder == "big":
        values.byteswap()
    return values


def little_endian(values: array[int]) -> bytes:
    """`values` as bytes in little-endian order, as SymbolTable stores its columns."""
    if sys.byteorder == "big":
        values = array(values.typecode, values)
        values.byteswap()
    return values.tobytes()


def _names(strings: bytes, offsets: Iterable[int]) -> List[str]:
    """The NUL-terminated strings at `offsets`; non-UTF-8 bytes come out backslash-escaped."""
    if strings.isascii():
        text = strings.decode("ascii")
        find = text.find
        return [text[offset : find("\0", offset)] for offset in offsets]
    find_bytes = strings.find
    return [strings[offset : find_bytes(b"\0", offset)].decode("utf-8", "backslashreplace") for offset in offsets]


# Why the fatbin reader gave up on a whole file's device code (DeviceCodeSkip.reason); plain
# strings, not an enum, because the facts cache unpickles facts dataclasses and nothing else.
SKIP_BAD_ARCH = "bad arch"  # an entry names an arch number no target has (sm_0, sm_1000000000)
SKIP_STEPS = "steps"  # the parse ran past its step budget
SKIP_TARGETS = "targets"  # more distinct entry headers than the reader keeps


@dataclass(frozen=True)
class DeviceCodeSkip:
    """A file whose device code was not judged at all, and why: one bad file must not stop the run,
    nor read as a file without device code. `value` is the arch number (BAD_ARCH, with `ptx` telling
    compute_ from sm_) or the bound that was passed (STEPS, TARGETS)."""

    reason: str  # SKIP_BAD_ARCH, SKIP_STEPS or SKIP_TARGETS
    value: int
    ptx: bool = False


@dataclass(frozen=True)
class FatbinSummary:
    """The device code a library carries, from every fatbin container found in it.

    `undetermined` lists targets ("sm_90", "compute_90") whose `a`/`f` suffix could not be read
    (compressed payload and no decompressor available); they are also listed in `sass` or `ptx`
    without a suffix.
    `unknown_kinds` counts entries of kinds that are neither PTX nor SASS (e.g. kind 8, likely LTO-IR).
    `toolkit` is the CUDA compiler release named in the `.note.nv.tkinfo` of the file's smallest ELF
    ABI 8 cubin ("13.0.88"): which toolkit built the device code (fatbin.py says which bytes).
    `damage` has one line per place where device code could not be read, e.g. ".nv_fatbin: device
    code unreadable from container 7 (offset 0x1a2b0) on: entry chain overruns fat_size": the other
    fields then cover only what was read, and a summary may hold damage alone.
    `skipped` is set when the file's device code was refused whole: every other field is then empty.
    """

    sass: tuple[str, ...] = ()  # sorted, unique: "sm_75", "sm_90a", "sm_100"
    ptx: tuple[PtxTarget, ...] = ()  # sorted, unique
    undetermined: tuple[str, ...] = ()
    unknown_kinds: tuple[tuple[int, int], ...] = ()  # (kind, count)
    containers: int = 0
    entries: int = 0
    sections: tuple[str, ...] = ()  # sections the containers were found in
    damage: tuple[str, ...] = ()
    toolkit: Optional[str] = None  # "13.0.88"; None when no ABI 8 cubin names one (CUDA <= 12.7, or unreadable)
    skipped: Optional[DeviceCodeSkip] = None


@dataclass(frozen=True)
class CudaRuntime:
    """The CUDA runtime (cudart) a file is, or has linked into it, and what its bytes say of its release.

    `linkage` "shared": the file is a libcudart, defining the version node `libcudart.so.N` (NVIDIA's,
    or a copy vendored under auditwheel's name, libcudart-09529672.so.12.6.77); "static": it registers
    its own fatbins through a runtime linked into it (nvcc's default `-cudart static`).
    runtime.py says which bytes tell each field.
    """

    linkage: str  # "shared" or "static"
    major: Optional[int]  # 12; None when no byte tells (a static runtime without a toolkit note)
    release: Optional[str]  # "12.6.77"; None when no byte tells
    release_from: Optional[str] = None  # "file name" or "toolkit note": where `release` (and a static major) was read


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
    symbols: SymbolTable
    version_definitions: tuple[str, ...]  # verdef names, excluding the BASE entry (the soname)
    version_needs: tuple[VersionNeed, ...]
    build_id: Optional[str]  # hex of NT_GNU_BUILD_ID
    fatbin: Optional[FatbinSummary]  # None when the file carries no fatbin and none was found damaged
    cuda_runtime: Optional[CudaRuntime] = None  # None: the file neither is a libcudart nor links one in
    # False: `symbols` holds only what crosses components (a knowledge-table row, data/wheel_facts.toml),
    # so a name absent from its definitions proves nothing; True: the file's whole .dynsym
    symbols_complete: bool = True
    # Soname literals ("libcublas.so.12") in the read-only data of a file that imports dlopen or
    # dlmopen: libraries it may open by name at run time, which no DT_NEEDED shows (elf.py bounds them)
    dlopened: tuple[str, ...] = ()

    @property
    def undefined(self) -> tuple[Symbol, ...]:
        """Global and weak undefined dynamic symbols, in .dynsym order."""
        return self.symbols.undefined

    @property
    def defined(self) -> tuple[Symbol, ...]:
        """Global and weak defined dynamic symbols, in .dynsym order."""
        return self.symbols.defined
