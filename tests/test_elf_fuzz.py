"""Damaged ELF images give BinaryFacts or ElfError, nothing else, and never hang.

Hypothesis overwrites bytes inside the structures the reader walks (ELF header, program and section
header tables, .dynamic, the version tables, .gnu.hash) of a small gcc-built library that has both
version definitions and version needs, with and without its section header table.
"""

from __future__ import annotations

import struct
from datetime import timedelta
from typing import Dict, Tuple

import pytest
from elftools.elf.elffile import ELFFile
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cudaresolve.binary.elf import ElfError, read_binary_facts_from_buffer
from cudaresolve.binary.facts import BinaryFacts

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


def test_unmodified_images_read(images):
    for data, _ in images.values():
        facts = read_binary_facts_from_buffer(data, "fuzz.so")
        assert facts.version_definitions == ("W1",) and facts.needed[0] == "libv.so.1"


# The deadline only catches a hang (an unbounded walk); a read of this 16 kB image takes about a millisecond.
@settings(max_examples=400, deadline=timedelta(seconds=5), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
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
