"""Time the fatbin reader on ELF files (the numbers in cudaresolve/binary/fatbin.py come from here).

Usage: python scripts/bench_fatbin.py PATH... [--runs N]
Prints, per file, the best CPU time of N runs of summarize_fatbins (CPU time, because the machine
may be shared; the first run pages the file in and is not counted apart), with what was found, and
the best CPU time of the scan for embedded containers alone (the magic searched for in every
allocated data section, each hit's entry chain checked, no entry judged), the part that stays
whatever the reader does with the entries. With several files, also the totals.
"""

from __future__ import annotations

import argparse
import mmap
import struct
import time
from typing import List, Tuple

from cudaresolve.binary.fatbin import (
    FATBIN_SECTIONS,
    SHF_ALLOC,
    SHF_EXECINSTR,
    SHT_PROGBITS,
    TOOLCHAIN_SECTIONS,
    _scan,
    summarize_fatbins,
)


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


def best_cpu(work, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.process_time()
        work()
        times.append(time.process_time() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    totals = [0.0, 0.0, 0]  # summarize seconds, scan seconds, bytes scanned
    for path in args.paths:
        with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            table = section_table(data)
            scanned = [
                (offset, offset + size) for name, offset, size, flags, sh_type in table
                if sh_type == SHT_PROGBITS and flags & SHF_ALLOC and not flags & SHF_EXECINSTR
                and name not in FATBIN_SECTIONS and name not in TOOLCHAIN_SECTIONS
            ]
            summary = summarize_fatbins(data, table)
            seconds = best_cpu(lambda: summarize_fatbins(data, table), args.runs)
            scan = best_cpu(lambda: [_scan(data, a, b) for a, b in scanned], args.runs)
        size = sum(b - a for a, b in scanned)
        for i, value in enumerate((seconds, scan, size)):
            totals[i] += value
        found = "no fatbin" if summary is None else f"{summary.containers} containers, {summary.entries} entries"
        if summary is not None and summary.damage:
            found += f" ({'; '.join(summary.damage)})"
        print(f"{path}: {seconds * 1000:.1f} ms; {found}; {size / 1e6:.0f} MB scanned, the scan alone {scan * 1000:.1f} ms")
    if len(args.paths) > 1:
        seconds, scan, size = totals
        print(f"{len(args.paths)} files: {seconds:.3f} s; {size / 1e9:.2f} GB scanned, the scan alone {scan:.3f} s")


if __name__ == "__main__":
    main()
