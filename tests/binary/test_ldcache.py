"""ld.so.cache parsing: this machine's cache against `ldconfig -p`, and hand-made caches in every layout."""

from __future__ import annotations

import os
import platform
import re
import shutil
import struct
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cudaresolve.binary.ldcache import (
    EXTENSION_MAGIC,
    HWCAP_EXTENSION,
    CacheEntry,
    LdCache,
    parse_ld_cache,
    read_ld_cache,
)

X86_64 = 0x0303
AARCH64 = 0x0A03
# ldconfig -p's spelling of the flags, to compare with its output.
_TYPE_NAMES = {0x0000: "libc4", 0x0001: "ELF", 0x0002: "libc5", 0x0003: "libc6"}
_ARCH_NAMES = {
    0x0000: "",
    0x0100: "64bit",
    0x0200: "IA-64",
    0x0300: "x86-64",
    0x0400: "64bit",
    0x0500: "64bit",
    0x0600: "N32",
    0x0700: "64bit",
    0x0800: "x32",
    0x0900: "hard-float",
    0x0A00: "AArch64",
    0x0B00: "soft-float",
}


def flags_text(entry: CacheEntry) -> str:
    """The flags as ldconfig -p prints them, e.g. "libc6,x86-64"."""
    kind = _TYPE_NAMES.get(entry.flags & 0x00FF, "unknown")
    arch = _ARCH_NAMES.get(entry.flags & 0xFF00, "unknown")
    return f"{kind},{arch}" if arch else kind


def new_cache(entries, *, generator=None, hwcaps=(), endian=2) -> bytes:
    """Bytes of a "glibc-ld.so.cache1.1" file: entries are (name, path, flags, hwcap)."""
    strings = bytearray()
    offsets = {}
    header_and_entries = 48 + 24 * len(entries)

    def add(s: str) -> int:
        if s not in offsets:
            offsets[s] = header_and_entries + len(strings)
            strings.extend(s.encode() + b"\0")
        return offsets[s]

    packed = b"".join(
        struct.pack("<iIIIQ", flags, add(name), add(path), 0, hwcap) for name, path, flags, hwcap in entries
    )
    hwcap_offsets = [add(h) for h in hwcaps]
    body = bytearray(packed + strings)
    extension_offset = 0
    if generator is not None or hwcaps:
        while (48 + len(body)) % 4:
            body.append(0)
        extension_offset = 48 + len(body)
        sections = []
        payload = bytearray()
        payload_start = extension_offset + 8 + 16 * ((generator is not None) + bool(hwcaps))
        if generator is not None:
            sections.append((0, payload_start + len(payload), len(generator)))
            payload.extend(generator.encode())
        if hwcaps:
            while len(payload) % 4:
                payload.append(0)
            sections.append((1, payload_start + len(payload), 4 * len(hwcaps)))
            payload.extend(struct.pack(f"<{len(hwcaps)}I", *hwcap_offsets))
        body.extend(struct.pack("<II", EXTENSION_MAGIC, len(sections)))
        for tag, offset, size in sections:
            body.extend(struct.pack("<IIII", tag, 0, offset, size))
        body.extend(payload)
    header = struct.pack(
        "<20sIIB3xI12x", b"glibc-ld.so.cache1.1", len(entries), len(strings), endian, extension_offset
    )
    return header + bytes(body)


def old_cache(entries) -> bytes:
    """Bytes of an "ld.so-1.7.0" file: entries are (name, path, flags); strings follow the entries."""
    strings = bytearray()
    packed = bytearray()
    for name, path, flags in entries:
        key = len(strings)
        strings.extend(name.encode() + b"\0")
        value = len(strings)
        strings.extend(path.encode() + b"\0")
        packed.extend(struct.pack("<iII", flags, key, value))
    return struct.pack("<11sxI", b"ld.so-1.7.0", len(entries)) + bytes(packed) + bytes(strings)


def test_new_format_entries_flags_and_lookup():
    data = new_cache(
        [
            ("libfoo.so.1", "/opt/arm/libfoo.so.1", AARCH64, 0),
            ("libfoo.so.1", "/usr/lib/x86_64-linux-gnu/libfoo.so.1", X86_64, 0),
            ("libbar.so.2", "/usr/lib/i386-linux-gnu/libbar.so.2", 0x0003, 0),
        ],
        generator="ldconfig (test) 2.99",
    )
    cache = parse_ld_cache(data)
    assert cache.layout == "new"
    assert cache.generator == "ldconfig (test) 2.99"
    assert cache.note is None
    assert cache.entries == (
        CacheEntry("libfoo.so.1", "/opt/arm/libfoo.so.1", AARCH64),
        CacheEntry("libfoo.so.1", "/usr/lib/x86_64-linux-gnu/libfoo.so.1", X86_64),
        CacheEntry("libbar.so.2", "/usr/lib/i386-linux-gnu/libbar.so.2", 0x0003),
    )
    assert [flags_text(e) for e in cache.entries] == ["libc6,AArch64", "libc6,x86-64", "libc6"]
    assert cache.lookup("libfoo.so.1", "x86_64") == "/usr/lib/x86_64-linux-gnu/libfoo.so.1"
    assert cache.lookup("libfoo.so.1", "aarch64") == "/opt/arm/libfoo.so.1"
    # A 32-bit entry is never an answer for a 64-bit loader.
    assert cache.lookup("libbar.so.2", "x86_64") is None
    assert cache.lookup("libnothere.so", "x86_64") is None


def test_hwcaps_entries_are_named_and_the_baseline_entry_is_chosen():
    data = new_cache(
        [
            ("libz.so.1", "/usr/lib/glibc-hwcaps/x86-64-v3/libz.so.1", X86_64, HWCAP_EXTENSION | 1),
            ("libz.so.1", "/usr/lib/libz.so.1", X86_64, 0),
        ],
        hwcaps=("x86-64-v2", "x86-64-v3"),
    )
    cache = parse_ld_cache(data)
    assert [e.hwcaps_subdir for e in cache.entries] == ["x86-64-v3", None]
    assert cache.lookup("libz.so.1", "x86_64") == "/usr/lib/libz.so.1"


def test_old_format_alone():
    cache = parse_ld_cache(old_cache([("libold.so.5", "/lib/libold.so.5", X86_64), ("libc.so.5", "/lib/libc.so.5", 2)]))
    assert cache.layout == "old"
    assert cache.entries == (
        CacheEntry("libold.so.5", "/lib/libold.so.5", X86_64),
        CacheEntry("libc.so.5", "/lib/libc.so.5", 2),
    )
    assert flags_text(cache.entries[1]) == "libc5"
    assert cache.lookup("libold.so.5", "x86_64") == "/lib/libold.so.5"


def test_old_format_followed_by_new_uses_the_new_part():
    # As ldconfig writes it: the new cache hides at the start of the old format's string table.
    new = new_cache([("libfresh.so.1", "/fresh/libfresh.so.1", X86_64, 0)])
    entries_end = 16 + 12
    pad = -entries_end % 8
    old_strings = b"libstale.so.1\0/stale/libstale.so.1\0"
    base = pad + len(new)
    data = (
        struct.pack("<11sxI", b"ld.so-1.7.0", 1)
        + struct.pack("<iII", X86_64, base, base + len(b"libstale.so.1\0"))
        + b"\0" * pad
        + new
        + old_strings
    )
    # With the new magic broken, ld.so falls back to the old entries.
    assert parse_ld_cache(data[: entries_end + pad] + b"x" + data[entries_end + pad + 1 :]).entries == (
        CacheEntry("libstale.so.1", "/stale/libstale.so.1", X86_64),
    )
    cache = parse_ld_cache(data)
    assert cache.layout == "old+new"
    assert cache.entries == (CacheEntry("libfresh.so.1", "/fresh/libfresh.so.1", X86_64),)


@pytest.mark.parametrize(
    "data, note",
    [
        (b"", "not an ld.so cache"),
        (b"\x7fELF\x02\x01\x01" + b"\0" * 100, "not an ld.so cache"),
        (b"glibc-ld.so.cache1.1\x05\0\0\0", "truncated ld.so cache header"),
        (struct.pack("<20sIIB3xI12x", b"glibc-ld.so.cache1.1", 1000, 0, 2, 0), "1000 entries announced"),
        (struct.pack("<20sIIB3xI12x", b"glibc-ld.so.cache1.1", 0, 0, 3, 0), "big-endian byte order flag"),
        (b"ld.so-1.7.0", "truncated ld.so cache header"),
        (struct.pack("<11sxI", b"ld.so-1.7.0", 7), "7 entries announced"),
    ],
)
def test_malformed_cache_is_empty_with_a_note(data, note):
    cache = parse_ld_cache(data)
    assert cache.entries == ()
    assert note in cache.note


def test_entry_pointing_outside_the_file_is_skipped_with_a_note():
    data = bytearray(new_cache([("liba.so.1", "/a/liba.so.1", X86_64, 0), ("libb.so.1", "/b/libb.so.1", X86_64, 0)]))
    struct.pack_into("<I", data, 48 + 24 + 4, 10**6)  # key of the second entry
    cache = parse_ld_cache(bytes(data))
    assert cache.note == "1 entries point outside the cache and were skipped"
    assert cache.entries == (CacheEntry("liba.so.1", "/a/liba.so.1", X86_64),)


def test_read_missing_file_is_empty_with_a_note(tmp_path):
    cache = read_ld_cache(str(tmp_path / "ld.so.cache"))
    assert cache == LdCache(note=f"{tmp_path / 'ld.so.cache'}: cannot read (No such file or directory); "
                            "the loader would not use a cache")


def test_read_file_prefixes_the_note_with_the_path(tmp_path):
    path = tmp_path / "ld.so.cache"
    path.write_bytes(b"garbage")
    assert read_ld_cache(str(path)).note == f"{path}: not an ld.so cache (unknown magic); the loader would ignore it"


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=400), st.integers(min_value=0, max_value=400))
def test_any_bytes_or_truncation_never_raise(noise, cut):
    valid = new_cache([("liba.so.1", "/a/liba.so.1", X86_64, HWCAP_EXTENSION | 3)], generator="g", hwcaps=("v2",))
    for data in (noise, valid[:cut], valid[:cut] + noise, b"glibc-ld.so.cache1.1" + noise, b"ld.so-1.7.0\0" + noise):
        cache = parse_ld_cache(data)
        assert isinstance(cache, LdCache)


def _ldconfig_lines() -> list[str]:
    ldconfig = shutil.which("ldconfig") or ("/sbin/ldconfig" if os.path.exists("/sbin/ldconfig") else None)
    if ldconfig is None or not os.path.exists("/etc/ld.so.cache"):
        pytest.skip("no ldconfig or no /etc/ld.so.cache on this machine")
    out = subprocess.run([ldconfig, "-p"], capture_output=True, text=True, check=True).stdout
    return [line for line in out.splitlines() if line.startswith("\t")]


def test_this_machines_cache_matches_ldconfig_p():
    lines = _ldconfig_lines()
    cache = read_ld_cache()
    assert cache.note is None
    assert cache.layout in ("new", "old+new")

    def render(e: CacheEntry) -> str:
        extra = f', hwcap: "{e.hwcaps_subdir}"' if e.hwcaps_subdir else (f", hwcap: {e.hwcap:#018x}" if e.hwcap else "")
        return f"\t{e.name} ({flags_text(e)}{extra}) => {e.path}"

    assert [render(e) for e in cache.entries] == lines

    machine = platform.machine()
    label = {"x86_64": "libc6,x86-64", "aarch64": "libc6,AArch64"}.get(machine)
    if label is None:
        pytest.skip(f"no ld.so.cache flags known for {machine}")
    expected = {}
    for line in lines:
        m = re.match(r"\t(\S+) \((.*)\) => (.*)$", line)
        if m.group(2) == label:
            expected.setdefault(m.group(1), m.group(3))
    assert len(expected) > 10
    assert {name: cache.lookup(name, machine) for name in expected} == expected
