"""Time the fatbin reader on ELF files (the numbers in cudaresolve/binary/fatbin.py come from here).

Usage: python scripts/bench_fatbin.py PATH... [--runs N]
Prints, per file, the best CPU time of N runs of summarize_fatbins (CPU time, because the machine
may be shared; the first run pages the file in and is not counted apart), with what was found.
"""

from __future__ import annotations

import argparse
import mmap
import struct
import time
from typing import List, Tuple

from cudaresolve.binary.fatbin import FATBIN_SECTIONS, SHF_ALLOC, SHF_EXECINSTR, SHT_PROGBITS, summarize_fatbins


def section_table(data: mmap.mmap) -> List[Tuple[str, int, int, int, int]]:
    """(name, offset, size, flags, type) of each section of an ELF64 little-endian file."""
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    names = headers[shstrndx][4]
    return [
        (data[names + name : data.find(b"\0", names + name)].decode(), offset, size, flags, sh_type)
        for name, sh_type, flags, _, offset, size in headers
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    for path in args.paths:
        with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            table = section_table(data)
            best = float("inf")
            for _ in range(args.runs):
                start = time.process_time()
                summary = summarize_fatbins(data, table)
                best = min(best, time.process_time() - start)
            scanned = sum(
                size for name, _, size, flags, sh_type in table
                if sh_type == SHT_PROGBITS and flags & SHF_ALLOC and not flags & SHF_EXECINSTR and name not in FATBIN_SECTIONS
            )
        found = "no fatbin" if summary is None else f"{summary.containers} containers, {summary.entries} entries"
        print(f"{path}: {best * 1000:.1f} ms; {found}; {scanned / 1e6:.0f} MB scanned")


if __name__ == "__main__":
    main()
