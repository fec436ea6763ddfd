"""Damaged ELF images give BinaryFacts or ElfError, nothing else, and never hang.

Hypothesis overwrites bytes inside the structures the reader walks (ELF header, program and section
header tables, .dynamic, the version tables, .gnu.hash) of a small gcc-built library that has both
version definitions and version needs, with and without its section header table; and inside the
fatbin containers of a library's `.nv_fatbin`, where damage must be reported, never read as "no
device code".
"""

from __future__ import annotations

import struct
from datetime import timedelta
from typing import Dict, Tuple

import pytest
from budget import budgeted
from elftools.elf.elffile import ELFFile
from hostile_binaries import chained_fakes, many_entries
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_fatbin import ALLOC, PROGBITS, container, cubin, entry, fatbin_library, layout, ptx, zstd_entry

from cudaresolve.binary.elf import ElfError, read_binary_facts_from_buffer
from cudaresolve.binary.facts import SKIP_STEPS, BinaryFacts, FatbinSummary
from cudaresolve.binary.fatbin import MAGIC as MAGIC_BYTES
from cudaresolve.binary.fatbin import summarize_fatbins
from cudaresolve.env.inspect import Inspected, provider_needs
from cudaresolve.output.inspect import render_text

LIBV = """
int foo_v1(void) { return 1; }
int foo_v2(void) { return 2; }
__asm__(".symver foo_v1, foo@V1");
__asm__(".symver foo_v2, foo@@V2");
int bar(void) { return 3; }
"""
LIBV_MAP = "V1 { global: bar; foo; local: *; };\nV2 { global: foo; } V1;\n"
LIBW = """
#include <stdio.h>
extern int foo(void);
extern int maybe(void) __attribute__((weak));
int w(void) { printf("%d", foo()); return maybe ? maybe() : 0; }
"""
LIBW_MAP = "W1 { global: w; local: *; };\n"

# Values that hit bounds checks: zero, all ones, around the file size, huge.
SPECIAL = st.sampled_from([0, 1, 0xFF, 0xFFFF, 0x7FFF_FFFF, 0xFFFF_FFFF, 2**63, 2**64 - 1])


def _regions(data: bytes, with_sections: bool) -> Dict[str, Tuple[int, int]]:
    """(offset, size) of every structure worth damaging, located by pyelftools."""
    from io import BytesIO

    elf = ELFFile(BytesIO(data))
    regions = {
        "ELF header": (0, 64),
        "program headers": (elf["e_phoff"], elf["e_phnum"] * elf["e_phentsize"]),
    }
    names = [".dynamic", ".gnu.version_r", ".gnu.version_d", ".gnu.version", ".gnu.hash", ".note.gnu.build-id"]
    for name in names:
        section = elf.get_section_by_name(name)
        regions[name] = (section["sh_offset"], section["sh_size"])
    if with_sections:
        regions["section headers"] = (elf["e_shoff"], elf["e_shnum"] * elf["e_shentsize"])
    return regions


@pytest.fixture
def images(elf_builder) -> Dict[bool, Tuple[bytes, Dict[str, Tuple[int, int]]]]:
    """{with section headers?: (image, regions)} of one library with verdef, verneed and a weak undefined."""
    libv = elf_builder.build("libv.so.1", LIBV, soname="libv.so.1", version_script=LIBV_MAP)
    libw = elf_builder.build("libw.so", LIBW, soname="libw.so", version_script=LIBW_MAP, link=[libv], runpath="$ORIGIN")
    data = libw.read_bytes()
    bare = bytearray(data)
    struct.pack_into("<Q", bare, 0x28, 0)  # e_shoff
    struct.pack_into("<HHH", bare, 0x3A, 64, 0, 0)  # e_shentsize, e_shnum, e_shstrndx
    return {True: (data, _regions(data, True)), False: (bytes(bare), _regions(data, False))}


def _check(data: bytes) -> None:
    try:
        facts = read_binary_facts_from_buffer(data, "fuzz.so")
    except ElfError:
        return
    assert isinstance(facts, BinaryFacts)
    # What inspect and the doctor do with the facts: the release a versioned symbol implies, the rendering.
    provider_needs(facts)
    render_text([Inspected("fuzz.so", facts)])


def test_unmodified_images_read(images):
    for data, _ in images.values():
        facts = read_binary_facts_from_buffer(data, "fuzz.so")
        assert facts.version_definitions == ("W1",) and facts.needed[0] == "libv.so.1"


# The deadline only catches a hang (an unbounded walk); a read of this 16 kB image takes about a millisecond.
# With the fatbin test below, 2,000 cases of the ELF reader, the same ones every run (tests/env/test_input_fuzz.py).
@settings(max_examples=1600, deadline=timedelta(seconds=5), derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
@budgeted
def test_mutated_headers_give_facts_or_elf_error(images, data):
    with_sections = data.draw(st.booleans(), label="with section headers")
    image, regions = images[with_sections]
    mutated = bytearray(image)
    region = data.draw(st.sampled_from(sorted(regions)), label="region")
    start, size = regions[region]
    for _ in range(data.draw(st.integers(1, 4), label="edits")):
        position = start + data.draw(st.integers(0, size - 1), label="position")
        width = data.draw(st.sampled_from([1, 2, 4, 8]), label="width")
        value = data.draw(st.one_of(SPECIAL, st.integers(0, 2**64 - 1)), label="value") % (1 << (8 * width))
        mutated[position : position + width] = value.to_bytes(width, "little")
    cut = data.draw(st.one_of(st.none(), st.integers(0, len(mutated))), label="truncate at")
    _check(bytes(mutated[:cut]))


# Three containers, each entry kind and a suffix read from the payload (plain and zstd), padding between.
CONTAINERS = (
    container(entry(1, 90, ptx("sm_90a"), version=(8, 4)), entry(2, 90, cubin(90), version=(1, 7)), entry(8, 75, b"ltoir")),
    container(zstd_entry(2, 90, cubin(90, arch_specific=True) + bytes(500), (1, 7))),
    container(entry(2, 100, b"opaque", flags=0x200011, header_size=112)),
)
FATBIN = b"".join(blob + bytes(8) for blob in CONTAINERS)


@pytest.fixture
def fatbin_image(elf_builder) -> Tuple[bytes, Dict[str, Tuple[int, int]]]:
    """(image, regions) of a library whose .nv_fatbin holds FATBIN: its container and entry headers, and all of it."""
    data = fatbin_library(elf_builder, FATBIN).read_bytes()
    from io import BytesIO

    start = ELFFile(BytesIO(data)).get_section_by_name(".nv_fatbin")["sh_offset"]
    regions = {".nv_fatbin": (start, len(FATBIN))}
    at = start
    for number, blob in enumerate(CONTAINERS, 1):
        regions[f"container {number} header"] = (at, 16)
        pos = at + 16
        while pos < at + len(blob):
            header_size, size = struct.unpack_from("<IQ", data, pos + 4)
            regions[f"container {number} entry at {pos - at:#x}"] = (pos, header_size)
            pos += header_size + size
        at += len(blob) + 8
    return data, regions


def test_unmodified_fatbin_image_reads_whole(fatbin_image):
    summary = read_binary_facts_from_buffer(fatbin_image[0], "fuzz.so").fatbin
    assert (summary.sass, summary.containers, summary.damage) == (("sm_90", "sm_90a", "sm_100f"), len(CONTAINERS), ())


@settings(max_examples=400, deadline=timedelta(seconds=5), derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
@budgeted
def test_mutated_fatbin_is_read_whole_or_reported_damaged(fatbin_image, data):
    image, regions = fatbin_image
    mutated = bytearray(image)
    start, size = regions[data.draw(st.sampled_from(sorted(regions)), label="region")]
    for _ in range(data.draw(st.integers(1, 4), label="edits")):
        position = start + data.draw(st.integers(0, size - 1), label="position")
        width = data.draw(st.sampled_from([1, 2, 4, 8]), label="width")
        value = data.draw(st.one_of(SPECIAL, st.integers(0, 2**64 - 1)), label="value") % (1 << (8 * width))
        mutated[position : position + width] = value.to_bytes(width, "little")
    summary = read_binary_facts_from_buffer(bytes(mutated), "fuzz.so").fatbin
    assert summary is not None and (summary.entries or summary.damage or summary.skipped)  # never "no device code" unnoted
    if not summary.damage and not summary.skipped:  # then the corruption left every container readable
        assert summary.containers == len(CONTAINERS)


def _hostile(kind: str, count: int, arch: int) -> bytes:
    if kind == "chained fakes":
        return chained_fakes(count)
    if kind == "entries":
        return many_entries(count, arch)
    if kind == "magic after magic":
        return MAGIC_BYTES * count
    return container(*(entry(8, 80, b"", version=(i % 256, i // 256)) for i in range(count)))  # distinct headers


# The work-budget attacks (tests/hostile_binaries.py) at random sizes, behind random bytes, in a
# scanned or a walked section: none may run past the step budget at these sizes (a quadratic scan
# of 2,000 chained fakes takes 2 million steps), and none may read as "no device code".
@settings(max_examples=1000, deadline=None, derandomize=True, database=None)
@given(kind=st.sampled_from(["chained fakes", "entries", "magic after magic", "headers"]),
       count=st.integers(1, 2000), arch=st.one_of(st.integers(0, 1200), SPECIAL.map(lambda v: v % 2**32)),
       before=st.binary(max_size=64), section=st.sampled_from([".rodata", ".nv_fatbin"]))
@budgeted
def test_hostile_fatbin_classes_stay_within_the_budget(kind, count, arch, before, section):
    content = before + _hostile(kind, count, arch)
    summary = summarize_fatbins(*layout((section, content, ALLOC, PROGBITS)))
    assert summary is None or summary.skipped is None or summary.skipped.reason != SKIP_STEPS
    if summary is not None and summary.skipped is not None:
        assert summary == FatbinSummary(skipped=summary.skipped)
    elif section == ".nv_fatbin":
        assert summary is not None and (summary.entries or summary.damage)
