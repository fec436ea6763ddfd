"""Crafted device code that once cost minutes or gigabytes (docs/security.md, "Work budgets"), and the
gcc-built libraries that carry it. Shared by tests/binary/test_work_budgets.py and by hand measurements
(scripts/peak_rss.py on `cudaresolve inspect` of the files `library_with` writes).
"""

from __future__ import annotations

import struct
from pathlib import Path

from elftools.elf.elffile import ELFFile
from fatbin_bytes import MAGIC, container, entry

CHAIN_LINK = 80  # bytes per fake container of `chained_fakes`


def chained_fakes(count: int) -> bytes:
    """`count` fake containers back to back, each one's entry chain running through every later
    one's and failing at the end: a scan that restarts one byte after each failure walks count²/2 entries."""
    end = count * CHAIN_LINK + 16  # where the last chain stops
    blobs = []
    for i in range(count):
        first = i * CHAIN_LINK + 16
        header = struct.pack("<IHHQ", MAGIC, 1, 16, end - first - 8)  # stops 8 bytes short of the chain's end
        link = struct.pack("<HHIQ", 2, 0x0101, 64, CHAIN_LINK - 64) + bytes(48)  # next entry: the next container's
        blobs.append(header + link)
    return b"".join(blobs) + bytes(16)


def many_entries(count: int, arch: int = 80) -> bytes:
    """One container of `count` empty SASS entries (64 bytes each: a 2 GiB member holds 33 million)."""
    one = entry(2, arch, b"", version=(1, 7))
    return container(*[one] * count)


def library_with(elf_builder, content: bytes, section: str = ".rodata", name: str = "libhostile.so") -> Path:
    """A gcc-built library whose `section` holds `content` (`.rodata`: a const array; any other name:
    an array placed there as nvcc's host code places `.nv_fatbin`). The array is built as zeros
    behind a marker and `content` written over it, since gcc is slow on megabytes of initializer."""
    marker = b"HOSTILE-CONTENT!"
    size = max(len(content), len(marker))
    placed = "" if section == ".rodata" else f'section("{section}"), '
    initial = ", ".join(str(b) for b in marker)
    source = f"__attribute__(({placed}aligned(8), used)) const unsigned char blob[{size}] = {{{initial}}};\n"
    path = elf_builder.build(name, source)
    data = bytearray(path.read_bytes())
    at = data.index(marker)
    data[at : at + size] = content.ljust(size, b"\0")
    path.write_bytes(bytes(data))
    return path


def sparse_fatbin(path: Path, content: bytes, holes: int) -> None:
    """Point the `.nv_fatbin` of the library at `path` at `content` written past its end, followed by
    `holes` bytes the file system keeps as a hole: a walk that reads zero padding reads them all."""
    with open(path, "rb") as f:
        elf = ELFFile(f)
        index = next(i for i, s in enumerate(elf.iter_sections()) if s.name == ".nv_fatbin")
        shoff = elf["e_shoff"]
    offset = -(-path.stat().st_size // 4096) * 4096
    with open(path, "r+b") as f:
        f.seek(shoff + index * 64 + 24)  # sh_offset, sh_size
        f.write(struct.pack("<QQ", offset, len(content) + holes))
        f.seek(offset)
        f.write(content)
        f.truncate(offset + len(content) + holes)
