"""Which SASS and PTX targets a library's device code covers, read from its fatbin containers.

Layout (cuda-facts.md §6): a container is a 16-byte header (magic 0xBA55ED50, u16 version, u16
header_size, u64 fat_size) followed by entries back to back, each an entry header (u16 kind at 0,
u32 header_size at 4, u64 size at 8, u32 compressed_size at 16, u16 minor at 24, u16 major at 26,
u32 decimal arch at 28, u64 flags at 40) and its payload. Kind 1 is PTX, 2 an ELF cubin (SASS),
4 an old-style cubin; any other kind (libcufft.so.12 carries 12,728 of kind 8) is counted, not
dropped. Everything listed here comes from those headers; no payload is decompressed for that.

Where containers are looked for. `.nv_fatbin` and `__nv_relfatbin` (what nvcc's host stubs
register) are walked container by container, skipping zero padding; a container whose header or
entry chain does not fit, or bytes that are neither padding nor a container, stop that walk,
keeping the containers before it and recording where and why in `FatbinSummary.damage`: a damaged
library must not read as one without device code. Every other allocated, non-executable PROGBITS
section is scanned for the magic, always (except the toolchain's own tables, TOOLCHAIN_SECTIONS),
and a hit counts only if its entries tile its fat_size exactly. Libraries also carry fatbins they
load themselves:
libcufft.so.12 (CUDA 13 wheels) has a 672-byte `.nv_fatbin` with sm_75 alone and 23,983
containers in its 278 MB `.ldata`; libcusparseLt.so.0 0.6.3 (cu12) has an 18 MB `.nv_fatbin` and
2,494 more containers in its 188 MB `.rodata`. No size rule separates those cases, and the scan is
cheap where `.nv_fatbin` dominates, since the other data sections are then small.

The `a`/`f` suffix. Entry header flag 0x100000 marks an arch-specific target and 0x200000 a
family one: checked against nvcc 13.0 output for sm_90a, sm_100a, sm_120a, sm_100f, sm_120f,
compute_90a and compute_100f, and against cuobjdump 13.4 on the wheels below (cuobjdump prints
`f` only for PTX; an `f` cubin runs exactly where the plain one does). A cubin's own e_flags carry
the suffix only before ELF ABI 8: bit 0x800, which agrees with the header bit on all 2,512 sm_90
cubins of libcusparseLt.so.0 0.6.3 (CUDA 12). ABI 8 cubins (CUDA 13; entry header version 1.8)
record none: sm_90 and sm_90a both have e_flags 0x06005a04. So an entry without either header bit
is plain, except where a suffix could exist and the header might predate the bits: a pre-ABI-8
cubin or a PTX entry, for sm_90 or later. For those the payload's first bytes are read (e_flags,
or the `.target` line), decompressing only that prefix: zstd (flag 0x8000) with the optional
`zstandard` package, NVIDIA's LZ4 blocks (flag 0x2000) with `lz.decode_prefix`. Without
zstandard, or with an undecodable payload, the target is undetermined; nothing here raises on bad
data.

The producing toolkit. ELF ABI 8 cubins (all of CUDA 13's, and CUDA 12.8/12.9's for sm_100 and
newer; entry header version 1.8) carry a `.note.nv.tkinfo` note naming the ptxas that built them,
"Cuda compilation tools, release 13.0, V13.0.88"; ABI 7 cubins carry none, and PTX in a fatbin has
its comments, the banner among them, stripped. `FatbinSummary.toolkit` is that release, read from the
file's smallest ABI 8 cubin: small cubins keep the note within their first bytes, so only a prefix is
decompressed, one per file. On a torch 2.14.1 venv (31 files with ABI 8 cubins, the smallest 440
bytes to 6 KB, zstd) and a CUDA 12.9 one (9 files, LZ4) the note was found in every file, for a few
milliseconds in all (docs/performance.md). The PTX ISA of PTX entries says the toolkit minor too
(8.8 is CUDA 12.9), through knowledge.toolkits.

Bounded work. Every file is hostile input: a scan never walks a byte range twice (a failed entry
chain is not walked again from the next byte, `_container` says where it goes on), a sparse file's
holes are skipped (`extents`), entries are streamed and folded into their distinct headers, and a
file past MAX_STEPS steps or MAX_HEADER_KEYS distinct headers, or naming an arch no target has, is
skipped whole (FatbinSummary.skipped), so one bad library never stops a run (docs/security.md,
"Work budgets").

Why not cuobjdump: it is part of the CUDA toolkit (not on a user's machine), takes seconds per large
library, and lists neither `.ldata` nor `__nv_relfatbin`. What `summarize_fatbins` costs, per file
and for a whole environment, is in docs/performance.md (scripts/bench_fatbin.py measures it).
"""

from __future__ import annotations

import bisect
import enum
import mmap
import re
import struct
import sys
from collections import Counter
from types import ModuleType
from typing import Any, Dict, Final, Iterator, List, NamedTuple, Optional, Sequence, Set, Tuple, Union

from cudaresolve.arch import PtxTarget
from cudaresolve.binary import lz
from cudaresolve.binary.facts import (
    ELF_MAGIC,
    SKIP_BAD_ARCH,
    SKIP_STEPS,
    SKIP_TARGETS,
    DeviceCodeSkip,
    FatbinSummary,
)

zstandard: Optional[ModuleType]
try:
    import zstandard
except ImportError:  # optional: without it some zstd-compressed entries stay undetermined
    zstandard = None

Buffer = Union[bytes, bytearray, memoryview, mmap.mmap]
# (sh_name, sh_offset, sh_size, sh_flags, sh_type), as the ELF reader passes them.
Section = Tuple[str, int, int, int, int]
_HeaderKey = Tuple[int, int, int, int, int]  # an entry's kind, arch, major, minor, flags (the bits read: _KEY_FLAGS)
Extent = Tuple[int, int]  # (start, end) of a range of the file that holds data

MAGIC = b"\x50\xed\x55\xba"  # 0xBA55ED50 little-endian
FATBIN_SECTIONS = (".nv_fatbin", "__nv_relfatbin")
# Allocated PROGBITS sections whose format the toolchain fixes (unwind tables, GOT, pointer
# arrays, fatbin registration records), so they cannot embed a container: not scanned (their share
# of a torch venv's data sections: docs/performance.md).
TOOLCHAIN_SECTIONS = frozenset(
    (".eh_frame", ".eh_frame_hdr", ".gcc_except_table", ".got", ".got.plt", ".interp", ".tm_clone_table",
     ".ctors", ".dtors", ".jcr", ".nvFatBinSegment")
)  # fmt: skip
KIND_PTX, KIND_ELF, KIND_OLD_CUBIN = 1, 2, 4
FLAG_LZ4, FLAG_ZSTD = 0x2000, 0x8000
FLAG_ARCH_SPECIFIC, FLAG_FAMILY = 0x100000, 0x200000
_KEY_FLAGS = FLAG_LZ4 | FLAG_ZSTD | FLAG_ARCH_SPECIFIC | FLAG_FAMILY
SHF_ALLOC, SHF_EXECINSTR = 0x2, 0x4
SHT_PROGBITS = 1

_HEADER = struct.Struct("<IHHQ")  # magic, version, header_size, fat_size
_SIZES = struct.Struct("<4xIQ")  # an entry's header_size and size
_ENTRY = struct.Struct("<H2xIQI4xHHI8xQ")  # kind, header_size, size, compressed_size, minor, major, arch, flags
_ENTRY_MIN = 64
_FIRST_SUFFIXED_ARCH = 90  # sm_90a (CUDA 12.0) is the first arch-specific target
_ELF_ABI_8 = (1, 8)  # entry header version of ELF ABI 8 cubins: e_flags carry no suffix, a tkinfo note names the toolkit
_CUBIN_HEAD = 64
_PTX_HEAD = 1024
_MAGIC_RE = re.compile(re.escape(MAGIC))
_NONZERO_RE = re.compile(rb"[^\x00]")
_PTX_TARGET_RE = re.compile(rb"^[ \t]*\.target[ \t]+sm_(\d+)([af]?)\b", re.MULTILINE)
_TOOLKIT_NOTE_RE = re.compile(rb"Cuda compilation tools, release (\d+)\.(\d+), V(\d+)\.(\d+)\.(\d+)\x00")
_NOTE_HEAD = 64 * 1024  # how far into the smallest cubin the note is looked for
_EM_CUDA = 190


class _Undecided(enum.Enum):
    """A sentinel type that mypy narrows: `is _UNDECIDED` leaves Optional[str]."""

    UNDECIDED = enum.auto()


_UNDECIDED: Final = _Undecided.UNDECIDED  # a header key not met yet (None is a decided "undetermined")
# Pages of a mapped file the walk and the scan have passed are handed back every this many bytes:
# a mapping's pages count in the process's memory once touched, and a torch venv's largest files
# have hundreds of MB of sections to look through (docs/performance.md).
RELEASE_BYTES = 32 << 20
# Work bounds per file (docs/security.md, "Work budgets"). The steps are counted by _Budget.
MAX_STEPS = 1_000_000
PAYLOAD_STEPS = 16
HIT_STEPS = 4
MAX_HEADER_KEYS = 4096  # distinct entry headers kept per file
ARCH_NUMBERS = range(10, 1000)  # the arch numbers a target names (arch.Target: sm_10 to sm_999)


class _Entry(NamedTuple):
    """An entry header as stored."""

    kind: int
    arch: int
    major: int
    minor: int
    flags: int
    start: int  # payload offset in the file
    size: int  # payload bytes stored
    compressed_size: int  # bytes before padding when compressed, else 0


class FatbinEntry(NamedTuple):
    """One fatbin entry as read: what `cuobjdump --list-elf/--list-ptx` would list for it."""

    section: str
    container: int  # index of its container among all containers read from the file
    kind: int  # 1 PTX, 2 ELF cubin, 4 old cubin, others unknown
    arch: int  # decimal SM number: 90 for sm_90a
    suffix: str  # "a", "f" or ""; "" also when undetermined
    isa: Optional[str]  # PTX ISA version, "9.0"; None for other kinds or when the header has none
    determined: bool  # False when the suffix was left to a payload that could not be read

    @property
    def target(self) -> Optional[str]:
        """ "sm_90a" for SASS, "compute_100f" for PTX, None for unknown kinds."""
        if self.kind == KIND_PTX:
            return f"compute_{self.arch}{self.suffix}"
        if self.kind in (KIND_ELF, KIND_OLD_CUBIN):
            return f"sm_{self.arch}{self.suffix}"
        return None


def summarize_fatbins(
    data: Buffer, sections: Sequence[Section], extents: Optional[Sequence[Extent]] = None, *, max_steps: int = MAX_STEPS
) -> Optional[FatbinSummary]:
    """The device code in one ELF file, from its section table; None when it carries no fatbin and
    no damage was met (with damage, a summary carrying it, so "unreadable" never reads as "CPU-only").

    `data` is the whole file (bytes, memoryview or mmap); no reference to it is kept. `extents` are
    the (start, end) byte ranges that hold data when the file is sparse (None: all of it): holes
    read as zeros, so they are skipped, never read. Entries whose headers are equal are judged once
    (all 112 files of a torch 2.14.1 venv: 47,716 entries); only the distinct headers are kept. A
    file past `max_steps` or MAX_HEADER_KEYS, or naming an arch no target has, gives a summary
    with `skipped` alone: its device code is not judged, and nothing else stops.
    """
    fold = _Fold()
    header_suffixes: Dict[_HeaderKey, Optional[str]] = {}  # the suffixes the entry header alone decides
    keys: Set[_HeaderKey] = set()  # every distinct header met, checked once
    payloads = _Payloads(data)
    budget = _Budget(max_steps)
    smallest: Optional[_Entry] = None  # the smallest ELF ABI 8 cubin, whose note names the toolkit
    counted: Counter[Tuple[str, _HeaderKey, Optional[str]]] = Counter()  # (section, header key, suffix) -> entries: folded once each, below
    try:
        for section, container in _containers(data, sections, fold.damage, budget, _Extents(extents, len(data))):
            fold.containers += 1
            for raw in container:
                key = (raw.kind, raw.arch, raw.major, raw.minor, raw.flags & _KEY_FLAGS)
                if raw.kind == KIND_ELF and key[2:4] >= _ELF_ABI_8 and (smallest is None or raw.size < smallest.size):
                    smallest = raw
                suffix = header_suffixes.get(key, _UNDECIDED)
                if suffix is _UNDECIDED:
                    if key not in keys:
                        _check_key(key, keys)
                    if _reads_payload(raw):
                        budget.spend(PAYLOAD_STEPS)
                        suffix = _suffix(payloads, raw)
                    else:
                        suffix = header_suffixes[key] = _suffix(payloads, raw)
                counted[section, key, suffix] += 1
    except _Skip as skip:
        return FatbinSummary(skipped=skip.why)
    for (section, (kind, arch, major, minor, _), suffix), count in counted.items():
        fold.add(section, kind, arch, suffix, _isa(kind, major, minor), count)
    if smallest is not None:
        fold.toolkit = _toolkit(payloads, smallest)
    return fold.summary()


def _check_key(key: _HeaderKey, keys: Set[_HeaderKey]) -> None:
    """Admit a header not met before: its arch must be one a target can name (what arch.Target
    parses), and the distinct headers kept stay within MAX_HEADER_KEYS."""
    kind, arch = key[0], key[1]
    if kind in (KIND_PTX, KIND_ELF, KIND_OLD_CUBIN) and arch not in ARCH_NUMBERS:
        raise _Skip(DeviceCodeSkip(SKIP_BAD_ARCH, arch, kind == KIND_PTX))
    if len(keys) >= MAX_HEADER_KEYS:
        raise _Skip(DeviceCodeSkip(SKIP_TARGETS, MAX_HEADER_KEYS))
    keys.add(key)


def read_fatbin_entries(data: Buffer, sections: Sequence[Section]) -> List[FatbinEntry]:
    """Every entry of every container found in the file, in section and file order (damage is
    reported by `summarize_fatbins` only; no budget: the tests' oracle)."""
    payloads = _Payloads(data)
    entries: List[FatbinEntry] = []
    found = _containers(data, sections, [], _Budget(sys.maxsize), _Extents(None, len(data)))
    for index, (section, container) in enumerate(found):
        for raw in container:
            suffix = _suffix(payloads, raw)
            entries.append(FatbinEntry(section, index, raw.kind, raw.arch, suffix or "", _isa(raw.kind, raw.major, raw.minor),
                                       suffix is not None))
    return entries


def summarize_entries(entries: Sequence[FatbinEntry]) -> Optional[FatbinSummary]:
    """Fold entries into the per-file summary (without `toolkit`, which needs a payload); None for no entries."""
    fold = _Fold()
    fold.containers = len({entry.container for entry in entries})
    for e in entries:
        fold.add(e.section, e.kind, e.arch, e.suffix if e.determined else None, e.isa)
    return fold.summary()


def _containers(
    data: Buffer, sections: Sequence[Section], damage: List[str], budget: "_Budget", extents: "_Extents"
) -> Iterator[Tuple[str, Iterator[_Entry]]]:
    """(section name, its entries) of every container, in section and file order; where a fatbin
    section cannot be read to its end, a note appended to `damage`."""
    length = len(data)
    for name, offset, size, flags, sh_type in sections:
        if sh_type != SHT_PROGBITS:
            continue
        budget.spend()
        if name in FATBIN_SECTIONS:
            walked = _Walk(data, offset, min(offset + size, length), budget, extents)
            for first, stop in walked:
                yield name, _entries(data, first, stop)
            problem = walked.stop
            if problem is None and offset + size > length:
                problem = f"past the end of the file ({length:#x} bytes)"
            if problem is not None:
                damage.append(f"{name}: device code unreadable {problem}")
        elif flags & SHF_ALLOC and not flags & SHF_EXECINSTR and name not in TOOLCHAIN_SECTIONS:
            for first, stop in _scan(data, offset, min(offset + size, length), budget, extents):
                yield name, _entries(data, first, stop)


class _Fold:
    """Entries folded into a FatbinSummary: distinct targets, counts, sections in order of appearance."""

    def __init__(self) -> None:
        self.containers = 0
        self.entries = 0
        self.sections: Dict[str, None] = {}
        self.sass: Set[Tuple[int, str]] = set()  # (arch, suffix)
        self.ptx: Set[Tuple[int, str, Optional[str]]] = set()  # (arch, suffix, isa)
        self.undetermined: Set[Tuple[bool, int]] = set()  # (is PTX, arch)
        self.unknown: Counter[int] = Counter()  # kind -> entries
        self.damage: List[str] = []
        self.toolkit: Optional[str] = None

    def add(self, section: str, kind: int, arch: int, suffix: Optional[str], isa: Optional[str], count: int = 1) -> None:
        """`count` equal entries; `suffix` None means it could not be determined."""
        self.entries += count
        self.sections.setdefault(section)
        if kind == KIND_PTX:
            self.ptx.add((arch, suffix or "", isa))
        elif kind in (KIND_ELF, KIND_OLD_CUBIN):
            self.sass.add((arch, suffix or ""))
        else:
            self.unknown[kind] += count
            return
        if suffix is None:
            self.undetermined.add((kind == KIND_PTX, arch))

    def summary(self) -> Optional[FatbinSummary]:
        if not self.entries and not self.damage:
            return None
        ptx = sorted((arch, suffix, _version_key(isa), isa) for arch, suffix, isa in self.ptx)
        return FatbinSummary(
            sass=tuple(f"sm_{arch}{suffix}" for arch, suffix in sorted(self.sass)),
            ptx=tuple(PtxTarget(f"compute_{arch}{suffix}", isa) for arch, suffix, _, isa in ptx),
            undetermined=tuple(f"{'compute' if is_ptx else 'sm'}_{arch}" for is_ptx, arch in sorted(self.undetermined)),
            unknown_kinds=tuple(sorted(self.unknown.items())),
            containers=self.containers,
            entries=self.entries,
            sections=tuple(self.sections),
            damage=tuple(self.damage),
            toolkit=self.toolkit,
        )


def _version_key(isa: Optional[str]) -> Tuple[int, ...]:
    return tuple(int(part) for part in isa.split(".")) if isa else ()


class _Skip(Exception):
    """Raised with the reason a file's device code is refused whole."""

    def __init__(self, why: DeviceCodeSkip):
        super().__init__(why)
        self.why = why


class _Budget:
    """The steps a file's parse may take: each section, zero run, container walked to and entry
    header looked at is one, each magic hit of a scan HIT_STEPS, each payload prefix decompressed
    PAYLOAD_STEPS (weights near what each costs next to an entry header)."""

    __slots__ = ("left", "limit")

    def __init__(self, limit: int):
        self.left = self.limit = limit

    def spend(self, steps: int = 1) -> None:
        self.left -= steps
        if self.left < 0:
            raise _Skip(DeviceCodeSkip(SKIP_STEPS, self.limit))


class _Extents:
    """The byte ranges of a file that hold data; a sparse file's holes are neither searched nor paged in."""

    def __init__(self, extents: Optional[Sequence[Extent]], length: int):
        self.ranges = list(extents) if extents is not None else [(0, length)]
        self.starts = [start for start, _ in self.ranges]

    def within(self, start: int, end: int) -> Iterator[Extent]:
        """The data ranges that meet [start, end), clipped to it, in order."""
        first = max(bisect.bisect_right(self.starts, start) - 1, 0)
        for lo, hi in self.ranges[first:]:
            if lo >= end:
                return
            if hi > start:
                yield max(lo, start), min(hi, end)


class _Walk:
    """Iterates the (first entry, stop) of containers laid back to back from `start`, with zero
    padding between them; afterwards `stop` says where and why the walk stopped short of `end`
    (None when it reached it)."""

    def __init__(self, data: Buffer, start: int, end: int, budget: _Budget, extents: _Extents):
        self.data, self.start, self.end, self.budget, self.extents = data, start, end, budget, extents
        self.stop: Optional[str] = None

    def __iter__(self) -> Iterator[Tuple[int, int]]:
        data, end, budget = self.data, self.end, self.budget
        pos = self.start
        count = 0
        release = _Release(data, pos)
        while pos < end:
            if pos >= release.due:
                release.upto(pos)
            if data[pos] == 0:
                budget.spend()
                found = _next_nonzero(data, pos, end, self.extents)
                if found is None:
                    break
                pos = found
            budget.spend()
            why = ["no container magic"]
            if data[pos : pos + 4] == MAGIC:
                why.clear()
                first, stop = _container(data, pos, end, budget, why)
            if why:
                self.stop = f"from container {count + 1} (offset {pos:#x}) on: {why[0]}"
                return
            count += 1
            yield first, stop
            pos = stop
        release.upto(end, final=True)



def _next_nonzero(data: Buffer, pos: int, end: int, extents: _Extents) -> Optional[int]:
    """The offset of the first nonzero byte in [pos, end), looked for in the data ranges only."""
    for lo, hi in extents.within(pos, end):
        found = _NONZERO_RE.search(data, lo, hi)
        if found is not None:
            return found.start()
    return None


def _scan(data: Buffer, start: int, end: int, budget: _Budget, extents: _Extents) -> Iterator[Tuple[int, int]]:
    """(first entry, stop) of containers anywhere in [start, end): every magic hit whose entry chain
    checks out. Linear: after a hit that fails, the search goes on past the entries its check
    passed, and the magic, which has no zero byte, is looked for in the data ranges only."""
    pos = start
    release = _Release(data, start)
    window = RELEASE_BYTES if release.active else end - start  # searched at once
    for lo, hi in extents.within(start, end):
        pos = max(pos, lo)
        while pos < hi:
            if pos >= release.due:
                release.upto(pos)
            hit = _MAGIC_RE.search(data, pos, min(hi, pos + window))
            if hit is None:
                if pos + window >= hi:
                    break
                pos += window - len(MAGIC) + 1  # a magic across the window's edge is found in the next
                continue
            budget.spend(HIT_STEPS)
            first, stop = _container(data, hit.start(), end, budget)
            if stop < 0:
                # Not damage: outside the fatbin sections nothing says a container is there, and any
                # four bytes of data (a constant, a hash, compressed bytes) can equal the magic.
                pos = first
                continue
            yield first, stop
            pos = stop
    release.upto(end, final=True)


class _Release:
    """Hands the pages of a mapped file below an offset back to the kernel (MADV_DONTNEED: they stay in
    the page cache, and a later read maps them again), at most once per RELEASE_BYTES."""

    def __init__(self, data: Buffer, start: int):
        self.data = data
        self.active = isinstance(data, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED")
        self.done = start - start % mmap.PAGESIZE
        self.due = self.done + RELEASE_BYTES if self.active else float("inf")  # callers check this first

    def upto(self, offset: int, final: bool = False) -> None:
        if self.active and (final or offset >= self.due):
            stop = offset - offset % mmap.PAGESIZE
            if stop > self.done:
                assert isinstance(self.data, mmap.mmap)  # active only for a mapped file
                self.data.madvise(mmap.MADV_DONTNEED, self.done, stop - self.done)
                self.done = stop
                self.due = stop + RELEASE_BYTES


def _container(data: Buffer, at: int, end: int, budget: _Budget, why: Optional[List[str]] = None) -> Tuple[int, int]:
    """(offset of the first entry, offset after the container) for the container at `at`, when
    every entry header fits and the entries fill fat_size exactly; else (where a scan goes on, -1),
    with the reason appended to `why` when given (the walk reports it; the scan, which meets a
    false magic at every turn in some files, does not pay for the words). Only the sizes are read
    here: the entries are read by `_entries` once the chain checks out."""
    if at + _HEADER.size > end:
        return _failed(at + 1, why, "container header runs past the section end")
    _, _, header_size, fat_size = _HEADER.unpack_from(data, at)
    first = pos = at + header_size
    stop = pos + fat_size
    if header_size < _HEADER.size or fat_size < _ENTRY_MIN or stop > end:
        return _failed(at + 1, why, f"container header_size {header_size} is below {_HEADER.size}" if header_size < _HEADER.size
                       else f"fat_size {fat_size:#x} cannot hold an entry" if fat_size < _ENTRY_MIN
                       else f"fat_size {fat_size:#x} runs past the section end")
    # A scan goes on from `resume` after a failure: the start of the last entry header read once the
    # chain has passed a whole entry (each costs one step and spans at least _ENTRY_MIN bytes, so
    # steps stay within bytes / _ENTRY_MIN however the chains overlap), else the byte after the magic.
    unpack, last, number, resume = _SIZES.unpack_from, stop - _ENTRY_MIN, 0, at + 1
    while pos < stop:
        if pos > last:
            return _failed(resume, why, "entry chain overruns fat_size")
        budget.spend()
        number += 1
        if number > 1:
            resume = pos
        entry_header_size, size = unpack(data, pos)
        if entry_header_size < _ENTRY_MIN:
            return _failed(resume, why, f"entry {number} header_size {entry_header_size} is below {_ENTRY_MIN}")
        pos += entry_header_size + size
        if pos > stop:
            return _failed(resume, why, "entry chain overruns fat_size")
    return first, stop


def _failed(resume: int, why: Optional[List[str]], reason: str) -> Tuple[int, int]:
    if why is not None:
        why.append(reason)
    return resume, -1


def _entries(data: Buffer, pos: int, stop: int) -> Iterator[_Entry]:
    """The entries of a container `_container` checked, one at a time (a file can hold millions)."""
    unpack, make = _ENTRY.unpack_from, _Entry._make
    while pos < stop:
        kind, entry_header_size, size, compressed_size, minor, major, arch, flags = unpack(data, pos)
        payload = pos + entry_header_size
        pos = payload + size
        yield make((kind, arch, major, minor, flags, payload, size, compressed_size))


def _isa(kind: int, major: int, minor: int) -> Optional[str]:
    return f"{major}.{minor}" if kind == KIND_PTX and (major or minor) else None


def _reads_payload(entry: _Entry) -> bool:
    """Whether `_suffix` must look past the entry header: no suffix bit where a suffix could exist."""
    return (
        entry.kind in (KIND_PTX, KIND_ELF)
        and not entry.flags & (FLAG_ARCH_SPECIFIC | FLAG_FAMILY)
        and entry.arch >= _FIRST_SUFFIXED_ARCH
        and not (entry.kind == KIND_ELF and (entry.major, entry.minor) >= _ELF_ABI_8)
    )


def _suffix(payloads: "_Payloads", entry: _Entry) -> Optional[str]:
    """"a", "f" or "" for one entry; None when only its payload could tell and it cannot be read."""
    if entry.kind not in (KIND_PTX, KIND_ELF, KIND_OLD_CUBIN):
        return ""
    if entry.flags & FLAG_ARCH_SPECIFIC:
        return "a"
    if entry.flags & FLAG_FAMILY:
        return "f"
    if not _reads_payload(entry):
        return ""
    if entry.kind == KIND_ELF:
        head = payloads.head(entry, _CUBIN_HEAD)
        return None if head is None else _cubin_suffix(head, entry.arch)
    head = payloads.head(entry, _PTX_HEAD)
    return None if head is None else _ptx_suffix(head, entry.arch)


def _cubin_suffix(head: bytes, arch: int) -> Optional[str]:
    """The suffix a cubin's ELF header records, if the header is a 64-bit EM_CUDA one for `arch`."""
    if len(head) < 0x34 or head[:4] != ELF_MAGIC or head[4] != 2:
        return None
    (machine,) = struct.unpack_from("<H", head, 0x12)
    (flags,) = struct.unpack_from("<I", head, 0x30)
    if machine != _EM_CUDA:
        return None
    if head[8] >= 8:  # EI_ABIVERSION 8: SM in bits 8-15, no suffix bit
        return "" if (flags >> 8) & 0xFF == arch else None
    if flags & 0xFF != arch:
        return None
    return "a" if flags & 0x800 else ""


def _toolkit(payloads: "_Payloads", entry: _Entry) -> Optional[str]:
    """The release ("13.0.88") in the cubin's `.note.nv.tkinfo` banner, whose `release X.Y` and
    `VX.Y.Z` must agree; None when its first bytes hold no such banner or cannot be read."""
    head = payloads.head(entry, _NOTE_HEAD)
    match = _TOOLKIT_NOTE_RE.search(head) if head is not None else None
    if match is None or match.group(1, 2) != match.group(3, 4):
        return None
    return b".".join(match.group(3, 4, 5)).decode()


def _ptx_suffix(head: bytes, arch: int) -> Optional[str]:
    match = _PTX_TARGET_RE.search(head)
    if match is None or int(match.group(1)) != arch:
        return None
    return match.group(2).decode()


class _Payloads:
    """Reads the first bytes of entry payloads from one file, with one zstd decompressor for all."""

    def __init__(self, data: Buffer):
        self.data = data
        self._zstd: Any = None  # a zstandard.ZstdDecompressor, made on first use

    def head(self, entry: _Entry, limit: int) -> Optional[bytes]:
        """The first `limit` bytes of an entry's payload after decompression, or None."""
        data = self.data
        if not entry.flags & (FLAG_ZSTD | FLAG_LZ4):
            return bytes(data[entry.start : entry.start + min(entry.size, limit)])
        stored_size = min(entry.compressed_size, entry.size) if entry.compressed_size else entry.size
        stored = memoryview(data)[entry.start : entry.start + stored_size]
        if entry.flags & FLAG_ZSTD:
            if zstandard is None:
                return None
            if self._zstd is None:
                self._zstd = zstandard.ZstdDecompressor()
            head = bytearray()
            try:
                with self._zstd.stream_reader(stored) as reader:
                    while len(head) < limit:
                        chunk = reader.read(limit - len(head))
                        if not chunk:
                            break
                        head += chunk
            except zstandard.ZstdError:
                return None
            return bytes(head)
        try:
            return lz.decode_prefix(stored, limit)
        except lz.LzError:
            return None
