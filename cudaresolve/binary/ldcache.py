"""/etc/ld.so.cache, parsed from its bytes the way ld.so reads it (never by running ldconfig).

The loader emulation needs the cache's soname -> path answers for the target machine. glibc
ignores a cache it cannot read, so a missing or malformed file gives an empty cache with a note
instead of an error: the emulation then behaves like ld.so on that machine.

Layouts (glibc elf/dl-cache.h): the old format ("ld.so-1.7.0": 16-byte header, 12-byte entries,
strings relative to the end of the entries), the new format ("glibc-ld.so.cache1.1": 48-byte
header, 24-byte entries with a hwcap word, strings relative to the header, optional extension
sections naming glibc-hwcaps subdirectories), and the old format followed by the new one, in
which case ld.so uses only the new part.

May import: the standard library only; it knows no environment.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Optional

OLD_MAGIC = b"ld.so-1.7.0"
NEW_MAGIC = b"glibc-ld.so.cache1.1"
EXTENSION_MAGIC = 0xEAA42174
EXTENSION_TAG_GENERATOR = 0
EXTENSION_TAG_GLIBC_HWCAPS = 1
HWCAP_EXTENSION = 1 << 62  # hwcap word of an entry found in a glibc-hwcaps subdirectory

FLAG_ELF_LIBC6 = 0x0003
FLAG_X8664_LIB64 = 0x0300
FLAG_AARCH64_LIB64 = 0x0A00

# The one flags value ld.so accepts per machine (_DL_CACHE_DEFAULT_ID, matched exactly).
MACHINE_FLAGS = {
    "x86_64": FLAG_ELF_LIBC6 | FLAG_X8664_LIB64,
    "aarch64": FLAG_ELF_LIBC6 | FLAG_AARCH64_LIB64,
}

_OLD_HEADER = struct.Struct("<11sxI")  # magic, nlibs
_OLD_ENTRY = struct.Struct("<iII")  # flags, key, value
_NEW_HEADER = struct.Struct("<20sIIB3xI12x")  # magic+version, nlibs, len_strings, endianness, extension_offset
_NEW_ENTRY = struct.Struct("<iIIIQ")  # flags, key, value, osversion, hwcap
_EXTENSION_HEADER = struct.Struct("<II")  # magic, count
_EXTENSION_SECTION = struct.Struct("<IIII")  # tag, flags, offset, size


@dataclass(frozen=True)
class CacheEntry:
    """One cache line: `ldconfig -p` shows it as `name (flags) => path`."""

    name: str
    path: str
    flags: int
    hwcap: int = 0
    hwcaps_subdir: Optional[str] = None  # "x86-64-v3" for entries from glibc-hwcaps/x86-64-v3


@dataclass(frozen=True)
class LdCache:
    """The parsed cache. `note` says why it is empty or partly unusable; None when all is well."""

    entries: tuple[CacheEntry, ...] = ()
    layout: str = "none"  # "new", "old", "old+new", "none"
    generator: Optional[str] = None  # e.g. "ldconfig (Debian GLIBC 2.36-9+deb12u14) stable release version 2.36"
    note: Optional[str] = None

    def lookup(self, name: str, machine: str) -> Optional[str]:
        """The path ld.so takes from the cache for `name` on `machine`, or None.

        The first entry with the machine's exact flags wins, as in dl-cache.c. Entries from
        glibc-hwcaps subdirectories (and legacy hwcap entries) are skipped: which of them ld.so
        would prefer depends on the CPU, and the baseline entry names the same library.
        """
        flags = MACHINE_FLAGS.get(machine)
        for entry in self.entries:
            if entry.name == name and entry.flags == flags and entry.hwcap == 0:
                return entry.path
        return None


def read_ld_cache(path: str = "/etc/ld.so.cache") -> LdCache:
    """Read and parse a cache file; an unreadable file is an empty cache with a note, as ld.so treats it."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        return LdCache(note=f"{path}: cannot read ({e.strerror or e}); the loader would not use a cache")
    cache = parse_ld_cache(data)
    if cache.note is not None:
        return LdCache(cache.entries, cache.layout, cache.generator, f"{path}: {cache.note}")
    return cache


def parse_ld_cache(data: bytes) -> LdCache:
    """Parse cache bytes in any of the three layouts."""
    if data.startswith(NEW_MAGIC):
        return _parse_new(data, 0, "new")
    if not data.startswith(OLD_MAGIC):
        return LdCache(note="not an ld.so cache (unknown magic); the loader would ignore it")
    if len(data) < _OLD_HEADER.size:
        return LdCache(note="truncated ld.so cache header; the loader would ignore it")
    _, nlibs = _OLD_HEADER.unpack_from(data, 0)
    entries_end = _OLD_HEADER.size + nlibs * _OLD_ENTRY.size
    if entries_end > len(data):
        return LdCache(note=f"truncated ld.so cache: {nlibs} entries announced; the loader would ignore it")
    new_start = (entries_end + 7) & ~7
    if data[new_start : new_start + len(NEW_MAGIC)] == NEW_MAGIC:
        return _parse_new(data[new_start:], 0, "old+new")
    entries = []
    bad = 0
    for i in range(nlibs):
        flags, key, value = _OLD_ENTRY.unpack_from(data, _OLD_HEADER.size + i * _OLD_ENTRY.size)
        name = _string(data, entries_end + key)
        path = _string(data, entries_end + value)
        if name is None or path is None:
            bad += 1
            continue
        entries.append(CacheEntry(name, path, flags))
    return LdCache(tuple(entries), "old", None, _bad_note(bad))


def _parse_new(data: bytes, base: int, layout: str) -> LdCache:
    if len(data) < base + _NEW_HEADER.size:
        return LdCache(layout=layout, note="truncated ld.so cache header; the loader would ignore it")
    _, nlibs, _, endian, extension_offset = _NEW_HEADER.unpack_from(data, base)
    if endian in (1, 3):
        why = "invalid" if endian == 1 else "big-endian"
        return LdCache(layout=layout, note=f"{why} byte order flag in the ld.so cache; the loader would ignore it")
    entries_start = base + _NEW_HEADER.size
    if entries_start + nlibs * _NEW_ENTRY.size > len(data):
        return LdCache(
            layout=layout, note=f"truncated ld.so cache: {nlibs} entries announced; the loader would ignore it"
        )
    generator, hwcaps = _read_extensions(data, base, extension_offset)
    entries = []
    bad = 0
    for i in range(nlibs):
        flags, key, value, _, hwcap = _NEW_ENTRY.unpack_from(data, entries_start + i * _NEW_ENTRY.size)
        name = _string(data, base + key)
        path = _string(data, base + value)
        if name is None or path is None:
            bad += 1
            continue
        subdir = None
        if hwcap >> 32 == HWCAP_EXTENSION >> 32:
            index = hwcap & 0xFFFFFFFF
            subdir = hwcaps[index] if index < len(hwcaps) else "?"
        entries.append(CacheEntry(name, path, flags, hwcap, subdir))
    return LdCache(tuple(entries), layout, generator, _bad_note(bad))


def _read_extensions(data: bytes, base: int, offset: int) -> tuple[Optional[str], tuple[str, ...]]:
    """The generator string and the glibc-hwcaps subdirectory names; missing or broken parts give nothing."""
    start = base + offset
    if offset == 0 or start + _EXTENSION_HEADER.size > len(data):
        return None, ()
    magic, count = _EXTENSION_HEADER.unpack_from(data, start)
    if magic != EXTENSION_MAGIC:
        return None, ()
    generator = None
    hwcaps: tuple[str, ...] = ()
    for i in range(count):
        at = start + _EXTENSION_HEADER.size + i * _EXTENSION_SECTION.size
        if at + _EXTENSION_SECTION.size > len(data):
            break
        tag, _, section_offset, size = _EXTENSION_SECTION.unpack_from(data, at)
        section = data[base + section_offset : base + section_offset + size]
        if len(section) != size:
            continue
        if tag == EXTENSION_TAG_GENERATOR:
            generator = section.decode("utf-8", "replace")
        elif tag == EXTENSION_TAG_GLIBC_HWCAPS:
            offsets = struct.unpack(f"<{size // 4}I", section[: size - size % 4])
            hwcaps = tuple(_string(data, base + o) or "?" for o in offsets)
    return generator, hwcaps


def _string(data: bytes, offset: int) -> Optional[str]:
    """The NUL-terminated string at `offset`, or None when it runs off the data."""
    if offset < 0 or offset >= len(data):
        return None
    end = data.find(b"\0", offset)
    if end < 0:
        return None
    return data[offset:end].decode("utf-8", "surrogateescape")


def _bad_note(bad: int) -> Optional[str]:
    return f"{bad} entries point outside the cache and were skipped" if bad else None
