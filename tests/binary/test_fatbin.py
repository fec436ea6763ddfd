"""The fatbin reader against hand-built containers, real nvcc output and real CUDA wheels.

Oracles: nvcc 13.0 (what it was asked to build), cuobjdump 13.4 listings recorded in
fixtures/fatbin/cuobjdump-lists.json, the uncompressed twin of each compressed fixture, and
cuobjdump itself where it is on PATH.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import mmap
import os
import re
import shutil
import struct
import subprocess
from collections import Counter
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import pytest
import zstandard
from budget import budgeted
from conftest import FIXTURES
from fatbin_bytes import MAGIC, container, cubin, entry, ptx
from hypothesis import given, settings
from hypothesis import strategies as st
from wheel_cache import cache_dir, unpack

from cudaresolve.arch import PtxTarget
from cudaresolve.binary import fatbin, lz
from cudaresolve.binary.elf import read_binary_facts_from_buffer
from cudaresolve.binary.facts import FatbinSummary
from cudaresolve.binary.fatbin import FatbinEntry, read_fatbin_entries, summarize_entries, summarize_fatbins

FATBIN_FIXTURES = FIXTURES / "fatbin"
ALLOC, WRITE, EXEC = 0x2, 0x1, 0x4
PROGBITS, NOBITS = 1, 8
Section = Tuple[str, int, int, int, int]

# -- building containers ---------------------------------------------------------------------


def layout(*sections: Tuple[str, bytes, int, int]) -> Tuple[bytes, List[Section]]:
    """A file image holding each (name, content, sh_flags, sh_type) at 8-aligned offsets."""
    data = bytearray(b"\x7fELF" + b"\0" * 60)
    table = []
    for name, content, flags, sh_type in sections:
        data += b"\0" * (-len(data) % 8)
        table.append((name, len(data), len(content), flags, sh_type))
        if sh_type != NOBITS:
            data += content
    return bytes(data), table


def nv_fatbin(content: bytes) -> Tuple[bytes, List[Section]]:
    return layout((".nv_fatbin", content, ALLOC, PROGBITS))


def summary_of(content: bytes) -> Optional[FatbinSummary]:
    return summarize_fatbins(*nv_fatbin(content))


NV_FATBIN_AT = 64  # file offset of the section `nv_fatbin` lays out


def unreadable(at: int, container: int, why: str) -> str:
    """The damage note for a walk of `nv_fatbin`'s section stopped at content offset `at`."""
    return f".nv_fatbin: device code unreadable from container {container} (offset {NV_FATBIN_AT + at:#x}) on: {why}"


# -- hand-built containers ---------------------------------------------------------------------

HAND_MADE = (
    container(
        entry(1, 90, ptx("sm_90"), flags=0x11, version=(8, 4), header_size=80),
        entry(2, 80, cubin(80), version=(1, 7)),
        entry(2, 90, cubin(90, arch_specific=True), version=(1, 7)),
        entry(8, 75, b"\x13\x37" * 20),
    )
    + b"\0" * 8
    + container(entry(2, 100, b"opaque", flags=0x200011, header_size=112))
    + b"\0" * 16
)
# Truncated: the header promises more than the section holds.
HAND_MADE_TRUNCATED_AT = len(HAND_MADE)
HAND_MADE += struct.pack("<IHHQ", MAGIC, 1, 16, 4096) + entry(2, 120, cubin(120, abi=8))
HAND_MADE_SUMMARY = FatbinSummary(
    sass=("sm_80", "sm_90a", "sm_100f"),
    ptx=(PtxTarget("compute_90", "8.4"),),
    unknown_kinds=((8, 1),),
    containers=2,
    entries=5,
    sections=(".nv_fatbin",),
    damage=(unreadable(HAND_MADE_TRUNCATED_AT, 3, "fat_size 0x1000 runs past the section end"),),
)


def test_walk_reads_every_kind_skips_padding_and_stops_at_a_truncated_container():
    assert summary_of(HAND_MADE) == HAND_MADE_SUMMARY


def test_entries_in_file_order_with_their_container():
    entries = read_fatbin_entries(*nv_fatbin(HAND_MADE))
    assert [(e.container, e.kind, e.target, e.isa, e.determined) for e in entries] == [
        (0, 1, "compute_90", "8.4", True),
        (0, 2, "sm_80", None, True),
        (0, 2, "sm_90a", None, True),
        (0, 8, None, None, True),
        (1, 2, "sm_100f", None, True),
    ]


def test_no_fatbin_is_none():
    assert summarize_fatbins(*layout((".rodata", b"hello" * 100, ALLOC, PROGBITS))) is None
    assert summary_of(b"") is None
    assert summary_of(b"\0" * 64) is None
    assert summarize_entries([]) is None


def test_garbage_at_the_start_of_nv_fatbin_is_damage_not_no_device_code():
    assert summary_of(b"\x01" + HAND_MADE) == FatbinSummary(damage=(unreadable(0, 1, "no container magic"),))


def test_bad_container_stops_the_walk_keeping_the_ones_before():
    good = container(entry(2, 80, cubin(80), version=(1, 7)))
    # Entry chain one byte short of fat_size: the chain does not tile the container.
    body = entry(2, 86, b"x" * 8)
    bad = struct.pack("<IHHQ", MAGIC, 1, 16, len(body) + 1) + body + b"\0" * 7
    summary = summary_of(good + bad + good)
    assert (summary.sass, summary.containers, summary.entries) == (("sm_80",), 1, 1)
    assert summary.damage == (unreadable(len(good), 2, "entry chain overruns fat_size"),)


def test_seventh_of_thirteen_containers_corrupted_keeps_six_and_notes_the_rest():
    blobs = [container(entry(2, 50 + i, cubin(50 + i), version=(1, 7))) + b"\0" * 8 for i in range(13)]
    seventh = sum(map(len, blobs[:6]))
    data = bytearray(b"".join(blobs))
    struct.pack_into("<Q", data, seventh + 8, 0x7FFF_FFFF)  # its fat_size
    summary = summary_of(bytes(data))
    assert (summary.sass, summary.containers, summary.entries) == (tuple(f"sm_{50 + i}" for i in range(6)), 6, 6)
    assert summary.damage == (unreadable(seventh, 7, "fat_size 0x7fffffff runs past the section end"),)


@pytest.mark.parametrize("fat_size,why", [(0x47, "entry chain overruns fat_size"), (0x10, "fat_size 0x10 cannot hold an entry")])
def test_corrupted_fat_size_of_the_only_container_is_damage(fat_size, why):
    data = bytearray(container(entry(2, 80, cubin(80), version=(1, 7))) + b"\0" * 64)
    struct.pack_into("<Q", data, 8, fat_size)
    assert summary_of(bytes(data)) == FatbinSummary(damage=(unreadable(0, 1, why),))


@pytest.mark.parametrize(
    "bad_header,why",
    [
        (struct.pack("<IHHQ", MAGIC, 1, 8, 64), "container header_size 8 is below 16"),
        (struct.pack("<IHHQ", MAGIC, 1, 16, 0), "fat_size 0x0 cannot hold an entry"),
        (struct.pack("<IHHQ", MAGIC, 1, 16, 2**64 - 1), "fat_size 0xffffffffffffffff runs past the section end"),
        (struct.pack("<IHH", MAGIC, 1, 16), "container header runs past the section end"),
    ],
)
def test_impossible_container_headers(bad_header, why):
    padding = b"\0" * 128 if len(bad_header) == 16 else b""
    assert summary_of(bad_header + padding) == FatbinSummary(damage=(unreadable(0, 1, why),))


def test_entry_header_smaller_than_64_bytes_or_payload_past_the_container():
    for bad, why in ((entry(2, 80, b"x" * 64)[:4] + struct.pack("<I", 32) + entry(2, 80, b"x" * 64)[8:],
                      "entry 1 header_size 32 is below 64"),
                     (entry(2, 80, b"x" * 8)[:8] + struct.pack("<Q", 4096) + entry(2, 80, b"x" * 8)[16:],
                      "entry chain overruns fat_size")):
        assert summary_of(container(bad)) == FatbinSummary(damage=(unreadable(0, 1, why),))


def test_header_bits_decide_the_suffix_without_reading_the_payload():
    summary = summary_of(container(
        entry(2, 90, b"not an ELF header", flags=0x108011),
        entry(1, 100, b"\xff" * 40, flags=0x208011, version=(9, 0)),
    ))
    assert summary.sass == ("sm_90a",)
    assert summary.ptx == (PtxTarget("compute_100f", "9.0"),)
    assert summary.undetermined == ()


def test_abi8_cubins_carry_no_suffix_so_the_payload_is_not_read():
    summary = summary_of(container(entry(2, 90, b"\xff" * 64, flags=0x8011, version=(1, 8))))
    assert (summary.sass, summary.undetermined) == (("sm_90",), ())


def test_targets_before_sm_90_never_read_the_payload():
    summary = summary_of(container(entry(2, 89, b"junk", flags=0x8011, version=(1, 7)), entry(1, 86, b"junk", version=(7, 5))))
    assert (summary.sass, summary.ptx, summary.undetermined) == (("sm_89",), (PtxTarget("compute_86", "7.5"),), ())


def test_pre_abi8_cubin_and_ptx_suffix_from_the_payload():
    summary = summary_of(container(
        entry(2, 90, cubin(90), version=(1, 7)),
        entry(2, 90, cubin(90, arch_specific=True), version=(1, 7)),
        entry(1, 90, ptx("sm_90a", "7.8"), version=(7, 8)),
        entry(1, 100, ptx("sm_100f, debug", "8.8"), version=(8, 8)),
    ))
    assert summary.sass == ("sm_90", "sm_90a")
    assert summary.ptx == (PtxTarget("compute_90a", "7.8"), PtxTarget("compute_100f", "8.8"))
    assert summary.undetermined == ()


@pytest.mark.parametrize(
    "payload",
    [
        cubin(86, arch_specific=True),  # e_flags name another SM
        b"\x7fELF" + b"\0" * 60,  # not EM_CUDA
        cubin(90)[:40],  # too short to hold e_flags
        b"",
    ],
)
def test_unreadable_cubin_header_is_undetermined(payload):
    summary = summary_of(container(entry(2, 90, payload, version=(1, 7))))
    assert (summary.sass, summary.undetermined) == (("sm_90",), ("sm_90",))


def test_ptx_without_a_matching_target_line_is_undetermined():
    summary = summary_of(container(entry(1, 90, ptx("sm_80"), version=(8, 0)), entry(1, 100, b"// no target\n", version=(8, 8))))
    assert summary.ptx == (PtxTarget("compute_90", "8.0"), PtxTarget("compute_100", "8.8"))
    assert summary.undetermined == ("compute_90", "compute_100")


def test_ptx_isa_missing_from_the_header_is_none():
    assert summary_of(container(entry(1, 75, ptx("sm_75"), version=(0, 0)))).ptx == (PtxTarget("compute_75", None),)


def test_old_cubin_kind_counts_as_sass():
    assert summary_of(container(entry(4, 52, b"old"))).sass == ("sm_52",)


def test_sorted_numerically_and_unique():
    summary = summary_of(container(*[entry(2, arch, b"", flags=flags) for arch, flags in
                                     [(120, 0x11), (75, 0x11), (100, 0x100011), (100, 0x11), (75, 0x11), (90, 0x100011)]]))
    assert summary.sass == ("sm_75", "sm_90a", "sm_100", "sm_100a", "sm_120")


# -- compressed payloads -----------------------------------------------------------------------


def zstd_entry(kind: int, arch: int, plain: bytes, version: Tuple[int, int]) -> bytes:
    packed = zstandard.ZstdCompressor().compress(plain)
    return entry(kind, arch, packed, flags=0x8011, version=version, compressed_size=len(packed))


ZSTD_ENTRIES = container(
    zstd_entry(2, 90, cubin(90, arch_specific=True) + b"\0" * 4000, (1, 7)),
    zstd_entry(1, 90, ptx("sm_90a", "8.4") + b"// body\n" * 500, (8, 4)),
)


def test_zstd_payload_prefix_gives_the_suffix():
    summary = summary_of(ZSTD_ENTRIES)
    assert (summary.sass, summary.ptx, summary.undetermined) == (("sm_90a",), (PtxTarget("compute_90a", "8.4"),), ())


def test_without_zstandard_those_targets_are_undetermined(monkeypatch):
    monkeypatch.setattr(fatbin, "zstandard", None)
    summary = summary_of(ZSTD_ENTRIES)
    assert summary.sass == ("sm_90",)
    assert summary.ptx == (PtxTarget("compute_90", "8.4"),)
    assert summary.undetermined == ("sm_90", "compute_90")


def test_corrupt_zstd_and_lz4_payloads_are_undetermined():
    summary = summary_of(container(
        entry(2, 90, b"\x28\xb5\x2f\xfd" + b"\xff" * 60, flags=0x8011, version=(1, 7), compressed_size=64),
        entry(1, 100, b"\x1f\x41\x05\x00" + b"\xff" * 12, flags=0x2011, version=(8, 8), compressed_size=16),
    ))
    assert summary.undetermined == ("sm_90", "compute_100")


def fixture_entries(name: str) -> List[Tuple[int, int, int, bytes]]:
    """(kind, arch, flags, stored payload cut to compressed_size, decompressed_size) of a fixture."""
    blob = (FATBIN_FIXTURES / name).read_bytes()
    _, _, header_size, fat_size = struct.unpack_from("<IHHQ", blob)
    found = []
    pos = header_size
    while pos < header_size + fat_size:
        kind, _, ehs, size, csize, _, _, _, arch, _, _, flags, _, dsize = struct.unpack_from("<HHIQIIHHIIIQQQ", blob, pos)
        found.append((kind, arch, flags, blob[pos + ehs : pos + ehs + (csize or size)], dsize))
        pos += ehs + size
    return found


def test_lz4_decoder_reproduces_nvcc_uncompressed_payloads():
    plain = fixture_entries("multi_none.fatbin")
    packed = fixture_entries("multi_speed.fatbin")
    assert [(k, a) for k, a, *_ in plain] == [(k, a) for k, a, *_ in packed]
    for (_, _, _, expected, _), (_, _, flags, stored, size) in zip(plain, packed):
        assert flags & 0x2000
        assert lz.decode_prefix(stored, size) == expected[:size]
        for limit in (0, 1, 17, 64, 1000):
            assert lz.decode_prefix(stored, limit) == expected[: min(limit, size)]


def test_zstd_fixture_matches_its_uncompressed_twin():
    plain = fixture_entries("multi_none.fatbin")
    for (_, _, _, expected, _), (_, _, flags, stored, size) in zip(plain, fixture_entries("multi_size.fatbin")):
        assert flags & 0x8000
        assert zstandard.ZstdDecompressor().decompress(stored, max_output_size=size) == expected[:size]


# toolkit: the .note.nv.tkinfo of the smallest ABI 8 cubin, stored plain, as LZ4 and as zstd.
MULTI_SUMMARY = FatbinSummary(
    sass=("sm_80", "sm_90a", "sm_100f"),
    ptx=(PtxTarget("compute_75", "9.0"), PtxTarget("compute_90a", "9.0"), PtxTarget("compute_100f", "9.0")),
    containers=1,
    entries=6,
    sections=(".nv_fatbin",),
    toolkit="13.0.88",
)


@pytest.mark.parametrize("name", ["multi_none.fatbin", "multi_speed.fatbin", "multi_size.fatbin"])
def test_nvcc_fixtures_summarize_to_what_nvcc_was_asked_for(name):
    assert summary_of((FATBIN_FIXTURES / name).read_bytes()) == MULTI_SUMMARY


def without_suffix_bits(blob: bytes) -> bytes:
    """The same fatbin with the a/f header bits cleared, as a toolkit predating them would write."""
    out = bytearray(blob)
    _, _, header_size, fat_size = struct.unpack_from("<IHHQ", out)
    pos = header_size
    while pos < header_size + fat_size:
        _, _, ehs, size = struct.unpack_from("<HHIQ", out, pos)
        (flags,) = struct.unpack_from("<Q", out, pos + 40)
        struct.pack_into("<Q", out, pos + 40, flags & ~0x300000)
        pos += ehs + size
    return bytes(out)


@pytest.mark.parametrize("name", ["multi_none.fatbin", "multi_speed.fatbin", "multi_size.fatbin"])
def test_without_header_bits_ptx_suffix_comes_from_the_decompressed_text(name):
    summary = summary_of(without_suffix_bits((FATBIN_FIXTURES / name).read_bytes()))
    # ABI 8 cubins keep no suffix of their own; PTX names it on its .target line.
    assert summary.sass == ("sm_80", "sm_90", "sm_100")
    assert summary.ptx == MULTI_SUMMARY.ptx
    assert summary.undetermined == ()


def test_without_header_bits_or_zstandard_ptx_is_undetermined(monkeypatch):
    monkeypatch.setattr(fatbin, "zstandard", None)
    summary = summary_of(without_suffix_bits((FATBIN_FIXTURES / "multi_size.fatbin").read_bytes()))
    assert summary.ptx == (PtxTarget("compute_75", "9.0"), PtxTarget("compute_90", "9.0"), PtxTarget("compute_100", "9.0"))
    assert summary.undetermined == ("compute_90", "compute_100")


# -- the LZ4 decoder ---------------------------------------------------------------------------


def test_lz4_overlapping_match_and_long_lengths():
    # "ab" then a match of 2 + 300 bytes at offset 2, then 20 literals.
    block = bytes([0x2F]) + b"ab" + struct.pack("<H", 2) + bytes([255, 28]) + bytes([0xF0, 5]) + b"x" * 20
    expected = b"ab" * 152 + b"x" * 20
    assert lz.decode_prefix(block, 10_000) == expected
    assert lz.decode_prefix(block, 7) == expected[:7]
    assert lz.decode_prefix(block, 310) == expected[:310]


@pytest.mark.parametrize(
    "block",
    [
        bytes([0x50]) + b"abc",  # literal run past the end
        bytes([0x10]) + b"a" + b"\x01",  # offset cut short
        bytes([0x10]) + b"a" + struct.pack("<H", 0),  # offset 0
        bytes([0x10]) + b"a" + struct.pack("<H", 2),  # offset before the output
        bytes([0xF0]) + b"\xff",  # length continuation runs out
        bytes([0x1F]) + b"a" + struct.pack("<H", 1),  # match length continuation missing
    ],
)
def test_lz4_malformed_blocks_raise_lz_error(block):
    with pytest.raises(lz.LzError):
        lz.decode_prefix(block, 1000)


@given(st.binary(max_size=300), st.integers(min_value=0, max_value=2000))
@settings(max_examples=300, deadline=None)
@budgeted
def test_lz4_random_input_decodes_or_raises_lz_error_within_the_limit(block, limit):
    try:
        out = lz.decode_prefix(block, limit)
    except lz.LzError:
        return
    assert len(out) <= limit


# -- embedded containers -----------------------------------------------------------------------


def test_containers_embedded_in_data_sections_are_found_by_scanning():
    real = container(entry(2, 90, cubin(90), flags=0x11, version=(1, 7)), entry(1, 80, ptx("sm_80"), version=(7, 0)))
    fake = struct.pack("<IHHQ", MAGIC, 1, 16, 64) + b"\x07" * 40  # magic with no entry chain behind it
    ldata = os.urandom(333).replace(b"\x50\xed", b"") + fake + b"\x01\x02\x03" + real + os.urandom(100).replace(b"\x50\xed", b"") + real
    text = container(entry(2, 120, b"", flags=0x11))
    data, table = layout(
        (".nv_fatbin", container(entry(2, 75, cubin(75, abi=8))), ALLOC, PROGBITS),
        (".text", text, ALLOC | EXEC, PROGBITS),
        (".comment", text, 0, PROGBITS),
        (".bss", b"", ALLOC | WRITE, NOBITS),
        (".ldata", ldata, ALLOC | WRITE, PROGBITS),
    )
    summary = summarize_fatbins(data, table)
    assert summary == FatbinSummary(
        sass=("sm_75", "sm_90"),
        ptx=(PtxTarget("compute_80", "7.0"),),
        containers=3,
        entries=5,
        sections=(".nv_fatbin", ".ldata"),
    )


def test_relfatbin_is_walked_and_listed():
    data, table = layout(("__nv_relfatbin", container(entry(2, 80, b"")), ALLOC, PROGBITS))
    assert summarize_fatbins(data, table).sections == ("__nv_relfatbin",)


def test_sections_reaching_past_the_end_of_a_truncated_file():
    data, table = nv_fatbin(HAND_MADE)
    name, offset, size, flags, sh_type = table[0]
    assert summarize_fatbins(data, [(name, offset, size * 10, flags, sh_type)]) == HAND_MADE_SUMMARY
    past_the_end = FatbinSummary(damage=(f".nv_fatbin: device code unreadable past the end of the file ({len(data):#x} bytes)",))
    assert summarize_fatbins(data, [(name, len(data) + 8, size, flags, sh_type)]) == past_the_end
    (fat_size,) = struct.unpack_from("<Q", HAND_MADE, 8)
    cut = unreadable(0, 1, f"fat_size {fat_size:#x} runs past the section end")
    assert summarize_fatbins(data[: offset + 100], table) == FatbinSummary(damage=(cut,))


def test_bytes_bytearray_memoryview_and_mmap_agree(tmp_path):
    data, table = nv_fatbin(HAND_MADE + ZSTD_ENTRIES)
    path = tmp_path / "image"
    path.write_bytes(data)
    expected = summarize_fatbins(data, table)
    assert summarize_fatbins(bytearray(data), table) == expected
    assert summarize_fatbins(memoryview(data), table) == expected
    with open(path, "rb") as handle:
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        assert summarize_fatbins(mapped, table) == expected
        mapped.close()  # raises BufferError if the reader kept a view of it


@given(st.binary(max_size=2000))
@settings(max_examples=300, deadline=None)
@budgeted
def test_random_bytes_never_raise(blob):
    for content in (blob, struct.pack("<IHHQ", MAGIC, 1, 16, len(blob)) + blob):
        data, table = layout((".nv_fatbin", content, ALLOC, PROGBITS), (".ldata", content, ALLOC | WRITE, PROGBITS))
        summary = summarize_fatbins(data, table)
        assert summary is None or summary.entries >= summary.containers > 0 or summary.damage


ENTRY_SPECS = st.lists(
    st.tuples(
        st.sampled_from([1, 2, 8]),
        st.sampled_from([75, 80, 90, 100, 120]),
        st.sampled_from([0x11, 0x100011, 0x200011]),
    ),
    min_size=1,
    max_size=6,
)


@given(st.lists(ENTRY_SPECS, min_size=1, max_size=4), st.lists(st.sampled_from([0, 8, 16]), min_size=4, max_size=4))
@settings(max_examples=100, deadline=None)
@budgeted
def test_summary_matches_a_model_of_the_containers(specs, paddings):
    blob = b"".join(
        container(*[entry(kind, arch, ptx(f"sm_{arch}") if kind == 1 else cubin(arch, abi=8), flags=flags,
                          version=(9, 0) if kind == 1 else (1, 8)) for kind, arch, flags in spec]) + b"\0" * pad
        for spec, pad in zip(specs, paddings)
    )
    flat = [s for spec in specs for s in spec]
    suffix = {0x11: "", 0x100011: "a", 0x200011: "f"}
    assert summary_of(blob) == FatbinSummary(
        sass=tuple(f"sm_{a}{s}" for a, s in sorted({(a, suffix[f]) for k, a, f in flat if k == 2})),
        ptx=tuple(PtxTarget(f"compute_{a}{s}", "9.0") for a, s in sorted({(a, suffix[f]) for k, a, f in flat if k == 1})),
        unknown_kinds=tuple(sorted(Counter(k for k, _, _ in flat if k == 8).items())),
        containers=len(specs),
        entries=len(flat),
        sections=(".nv_fatbin",),
    )


# -- real ELF files ----------------------------------------------------------------------------


def section_table(data) -> List[Section]:
    """(name, offset, size, flags, type) of every section of an ELF64 little-endian file."""
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names_at = headers[shstrndx][4]
    table = []
    for name, sh_type, flags, _, offset, size in headers:
        end = data.find(b"\0", names_at + name)
        table.append((bytes(data[names_at + name : end]).decode(), offset, size, flags, sh_type))
    return table


def summarize_file(path: Path, only: Sequence[str] = ()) -> Tuple[Optional[FatbinSummary], List[FatbinEntry]]:
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        table = [s for s in section_table(data) if not only or s[0] in only]
        summary, entries = summarize_fatbins(data, table), read_fatbin_entries(data, table)
        # the entries carry no payload, so no toolkit note
        assert summarize_entries(entries) == (summary and dataclasses.replace(summary, damage=(), toolkit=None))
        return summary, entries


def test_objcopy_section_and_rodata_array_in_a_gcc_built_library(elf_builder, tmp_path):
    if shutil.which("objcopy") is None:
        pytest.skip("objcopy is not installed")
    embedded = container(entry(2, 86, cubin(86), version=(1, 7)), entry(1, 86, ptx("sm_86", "7.5"), version=(7, 5)))
    array = ", ".join(str(b) for b in embedded)
    source = f"__attribute__((aligned(8))) const unsigned char kernels[] = {{{array}}};\nint f(void) {{ return kernels[0]; }}\n"
    built = elf_builder.build("libk.so", source)
    blob = tmp_path / "blob"
    blob.write_bytes(HAND_MADE)
    subprocess.run(
        ["objcopy", "--add-section", f".nv_fatbin={blob}", "--set-section-flags", ".nv_fatbin=alloc,load,readonly,data",
         str(built), str(tmp_path / "libf.so")],
        check=True, capture_output=True,
    )
    summary, _ = summarize_file(tmp_path / "libf.so")
    with open(tmp_path / "libf.so", "rb") as handle:
        (at,) = [offset for name, offset, *_ in section_table(handle.read()) if name == ".nv_fatbin"]
    truncated = (f".nv_fatbin: device code unreadable from container 3 (offset {at + HAND_MADE_TRUNCATED_AT:#x}) on: "
                 "fat_size 0x1000 runs past the section end")
    assert summary == FatbinSummary(
        sass=("sm_80", "sm_86", "sm_90a", "sm_100f"),
        ptx=(PtxTarget("compute_86", "7.5"), PtxTarget("compute_90", "8.4")),
        unknown_kinds=((8, 1),),
        containers=3,
        entries=7,
        sections=(".rodata", ".nv_fatbin"),
        damage=(truncated,),
    )
    assert summarize_file(built)[0].sections == (".rodata",)


NVCC_SOURCE = (FATBIN_FIXTURES / "multi.cu").read_text()
NVCC_GENCODES = [
    "arch=compute_80,code=sm_80",
    "arch=compute_90,code=sm_90",
    "arch=compute_90a,code=sm_90a",
    "arch=compute_100f,code=sm_100f",
    "arch=compute_120a,code=sm_120a",
    "arch=compute_90a,code=compute_90a",
    "arch=compute_100f,code=compute_100f",
    "arch=compute_75,code=compute_75",
]


def nvcc_library(mode: str) -> Path:
    """multi.cu built by nvcc into a shared library with every image compressed by `mode`; cached."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not installed")
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    key = hashlib.sha256("\n".join([version, NVCC_SOURCE, mode, *NVCC_GENCODES]).encode()).hexdigest()[:16]
    out = cache_dir() / "nvcc" / f"multi-{mode}-{key}.so"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        source = out.with_suffix(".cu")
        source.write_text(NVCC_SOURCE)
        part = f"{out}.{os.getpid()}.part"  # xdist workers may build it at once
        command = [nvcc, "-shared", "-Xcompiler", "-fPIC", "-o", part, str(source)]
        for gencode in NVCC_GENCODES:
            command += ["-gencode", gencode]
        command += ["-Xfatbin", "-compress-all", "-Xfatbin", f"-compress-mode={mode}"]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            pytest.skip(f"nvcc cannot build here: {result.stderr.strip()[-300:]}")
        os.replace(part, out)
    return out


@pytest.mark.parametrize("mode", ["none", "speed", "size"])
def test_nvcc_built_library(mode):
    summary, entries = summarize_file(nvcc_library(mode))
    assert (summary.sass, summary.ptx, summary.undetermined, summary.sections) == (
        ("sm_80", "sm_90", "sm_90a", "sm_100f", "sm_120a"),
        (PtxTarget("compute_75", "9.0"), PtxTarget("compute_90a", "9.0"), PtxTarget("compute_100f", "9.0")),
        (),
        (".nv_fatbin",),
    )
    cuobjdump = shutil.which("cuobjdump")
    if cuobjdump is not None:
        listed = subprocess.run([cuobjdump, "--list-elf", "--list-ptx", str(nvcc_library(mode))], capture_output=True, text=True).stdout
        assert sorted(re.findall(r"\.(sm_\d+[af]?)\.(?:cubin|ptx)$", listed, re.M)) == sorted(
            cuobjdump_name(e) for e in entries
        )


def cuobjdump_name(entry: FatbinEntry) -> str:
    """How cuobjdump names an entry's target: sm_ for PTX too, and no `f` on SASS."""
    suffix = "" if entry.kind != 1 and entry.suffix == "f" else entry.suffix
    return f"sm_{entry.arch}{suffix}"


# -- real wheels -------------------------------------------------------------------------------


def wheel_member(requirement: str, member: str) -> Path:
    """One file of a wheel, extracted once into the test cache (the wheel comes through pip)."""
    return unpack(requirement, [member]) / member


CUOBJDUMP_LISTS = json.loads((FATBIN_FIXTURES / "cuobjdump-lists.json").read_text())["files"]


@pytest.mark.parametrize("key", sorted(CUOBJDUMP_LISTS))
def test_nv_fatbin_entries_match_cuobjdump_listing(key):
    requirement, member = key.split(" ")
    _, entries = summarize_file(wheel_member(requirement, member), only=(".nv_fatbin",))
    listed = CUOBJDUMP_LISTS[key]
    assert Counter(cuobjdump_name(e) for e in entries if e.kind == 2) == Counter(listed["elf"])
    assert Counter(cuobjdump_name(e) for e in entries if e.kind == 1) == Counter(listed["ptx"])
    assert all(e.determined for e in entries)


WHEEL_SUMMARIES = {
    ("torch==2.14.1", "torch/lib/libtorch_cuda.so"): FatbinSummary(
        sass=("sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a", "sm_100", "sm_100a", "sm_103f", "sm_120", "sm_120a", "sm_121a"),
        containers=475,
        entries=2975,
        sections=(".nv_fatbin",),
        toolkit="13.0.88",
    ),
    ("torch==2.14.1", "torch/lib/libtorch_cuda_linalg.so"): FatbinSummary(
        sass=("sm_80", "sm_86", "sm_90", "sm_100", "sm_120"),
        containers=65,
        entries=325,
        sections=(".nv_fatbin",),
        toolkit="13.0.88",
    ),
    ("nvidia-cublas==13.1.1.3", "nvidia/cu13/lib/libcublas.so.13"): FatbinSummary(
        sass=("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"),
        ptx=(PtxTarget("compute_120", "9.0"),),
        containers=193,
        entries=1257,
        sections=(".nv_fatbin",),
        toolkit="13.0.79",
    ),
    ("nvidia-cufft==12.0.0.61", "nvidia/cu13/lib/libcufft.so.12"): FatbinSummary(
        sass=("sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_100", "sm_110", "sm_120"),
        ptx=(PtxTarget("compute_75", "7.0"), PtxTarget("compute_80", "7.0"), PtxTarget("compute_86", "7.5"), PtxTarget("compute_90", "7.8")),
        unknown_kinds=((8, 12728),),
        containers=23984,
        entries=23984,
        sections=(".nv_fatbin", ".ldata"),
        toolkit="13.0.85",
    ),
    ("nvidia-nccl-cu13==2.30.7", "nvidia/nccl/lib/libnccl.so.2"): FatbinSummary(
        sass=("sm_75", "sm_80", "sm_90", "sm_100", "sm_100f", "sm_110", "sm_120"),
        ptx=(PtxTarget("compute_120", "9.3"),),
        containers=166,
        entries=1101,
        sections=("__nv_relfatbin", ".nv_fatbin"),
        toolkit="13.3.70",
    ),
    ("nvidia-cudnn-cu13==9.24.0.43", "nvidia/cudnn/lib/libcudnn_ops.so.9"): FatbinSummary(
        sass=("sm_75", "sm_80", "sm_90a", "sm_100f", "sm_120f", "sm_121"),
        ptx=(PtxTarget("compute_121", "9.3"),),
        containers=22,
        entries=154,
        sections=(".nv_fatbin",),
        toolkit="13.3.33",
    ),
    # CUDA 12 (ELF ABI 7): sm_90a from the header bit agrees with e_flags 0x800 in the cubin; no
    # ABI 7 cubin carries a toolkit note.
    ("nvidia-cusparselt-cu12==0.6.3", "cusparselt/lib/libcusparseLt.so.0"): FatbinSummary(
        sass=("sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a"),
        ptx=(PtxTarget("compute_80", "8.0"), PtxTarget("compute_86", "8.0"), PtxTarget("compute_89", "8.0"), PtxTarget("compute_90", "8.0")),
        containers=2513,
        entries=3167,
        sections=(".rodata", ".nv_fatbin"),
    ),
}


@pytest.mark.parametrize("requirement,member", sorted(WHEEL_SUMMARIES))
def test_wheel_library_summary(requirement, member):
    summary, _ = summarize_file(wheel_member(requirement, member))
    assert summary == WHEEL_SUMMARIES[(requirement, member)]


def containers_in(data, start: int, end: int):
    """(flags, stored payload, decompressed size) of each kind-2 sm_90 entry in containers that
    tile exactly, found by magic: an oracle independent of the reader's walk."""
    for hit in re.finditer(re.escape(struct.pack("<I", MAGIC)), data[start:end]):
        at = start + hit.start()
        _, _, header_size, fat_size = struct.unpack_from("<IHHQ", data, at)
        pos, stop, found = at + header_size, at + header_size + fat_size, []
        while pos + 64 <= stop:
            kind, _, ehs, size, csize, _, _, _, arch, _, _, flags = struct.unpack_from("<HHIQIIHHIIIQ", data, pos)
            if kind == 2 and arch == 90:
                found.append((flags, data[pos + ehs : pos + ehs + (csize or size)]))
            pos += ehs + size
        if pos == stop:
            yield from found


def test_abi7_cubins_e_flags_agree_with_the_header_bit():
    """Every sm_90 cubin of cusparseLt 0.6.3 (CUDA 12, LZ4): e_flags bit 0x800 exactly where flag 0x100000 is."""
    path = wheel_member("nvidia-cusparselt-cu12==0.6.3", "cusparselt/lib/libcusparseLt.so.0")
    seen: Counter = Counter()
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        for name, offset, size, _, _ in section_table(data):
            if name in (".nv_fatbin", ".rodata"):
                for flags, stored in containers_in(data, offset, offset + size):
                    head = lz.decode_prefix(stored, 64) if flags & 0x2000 else stored[:64]
                    (e_flags,) = struct.unpack_from("<I", head, 0x30)
                    seen[(head[8], e_flags & 0xFF, bool(flags & 0x100000), bool(e_flags & 0x800))] += 1
    assert seen == Counter({(7, 90, True, True): 2511, (7, 90, False, False): 1})


def tkinfo_banners(path: Path) -> Counter:
    """The release in the `.note.nv.tkinfo` of every ELF ABI 8 cubin of the file's `.nv_fatbin`, each
    cubin decompressed whole and read with pyelftools: an oracle independent of the reader's prefix
    search in the smallest one."""
    from elftools.elf.elffile import ELFFile

    found: Counter = Counter()
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        (offset, size), = [(o, s) for name, o, s, _, _ in section_table(data) if name == ".nv_fatbin"]
        for hit in re.finditer(re.escape(struct.pack("<I", MAGIC)), data[offset : offset + size]):
            at = offset + hit.start()
            _, _, header_size, fat_size = struct.unpack_from("<IHHQ", data, at)
            pos, stop = at + header_size, at + header_size + fat_size
            while pos + 64 <= stop:
                kind, _, ehs, stored_size, csize, _, minor, major, _, _, _, flags = struct.unpack_from("<HHIQIIHHIIIQ", data, pos)
                if kind == 2 and (major, minor) >= (1, 8):
                    stored = data[pos + ehs : pos + ehs + (csize or stored_size)]
                    cubin_image = zstandard.ZstdDecompressor().stream_reader(stored).read() if flags & 0x8000 else stored
                    note = ELFFile(io.BytesIO(cubin_image)).get_section_by_name(".note.nv.tkinfo")
                    found[re.search(rb"V(\d+\.\d+\.\d+)\0", note.data()).group(1).decode() if note else None] += 1
                pos += ehs + stored_size
    return found


def test_toolkit_note_names_the_release_every_abi8_cubin_of_torch_names():
    """libtorch_cuda_linalg.so (torch 2.14.1, CUDA 13.0 Update 2's nvcc V13.0.88): all 325 cubins."""
    path = wheel_member("torch==2.14.1", "torch/lib/libtorch_cuda_linalg.so")
    assert tkinfo_banners(path) == Counter({"13.0.88": 325})
    assert summarize_file(path)[0].toolkit == "13.0.88"


def test_without_zstandard_cublas_leaves_the_pre_abi8_and_ptx_targets_undetermined(monkeypatch):
    monkeypatch.setattr(fatbin, "zstandard", None)
    summary, _ = summarize_file(wheel_member("nvidia-cublas==13.1.1.3", "nvidia/cu13/lib/libcublas.so.13"))
    assert summary.undetermined == ("sm_90", "compute_120")
    assert summary.sass == WHEEL_SUMMARIES[("nvidia-cublas==13.1.1.3", "nvidia/cu13/lib/libcublas.so.13")].sass


# -- damage seen through the ELF reader --------------------------------------------------------


def fatbin_library(elf_builder, content: bytes) -> Path:
    """A gcc-built library whose `.nv_fatbin` holds `content`, placed there as nvcc's host code does."""
    array = ", ".join(map(str, content))
    source = f'__attribute__((section(".nv_fatbin"), aligned(8), used)) const unsigned char fatbin[] = {{{array}}};\n'
    return elf_builder.build("libfat.so", source)


def test_zeroed_e_shoff_notes_device_code_not_looked_for_instead_of_none(elf_builder):
    data = bytearray(fatbin_library(elf_builder, container(entry(2, 80, cubin(80), version=(1, 7)))).read_bytes())
    whole = read_binary_facts_from_buffer(bytes(data), "libfat.so").fatbin
    assert (whole.sass, whole.sections, whole.damage) == (("sm_80",), (".nv_fatbin",), ())
    struct.pack_into("<Q", data, 0x28, 0)  # e_shoff; the reader falls back on dynamic tags
    bare = read_binary_facts_from_buffer(bytes(data), "libfat.so")
    assert bare.fatbin == FatbinSummary(damage=("no section header table: device code could not be looked for",))
