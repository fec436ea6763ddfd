"""Time cudaresolve's ELF reader against pyelftools reading the same facts from one file.

Usage: python scripts/bench_elf.py PATH [RUNS]
Prints the best CPU time of RUNS runs for each (CPU time, because the machine may be shared): the
full read, the read without the fatbin scan (the part pyelftools would do), and pyelftools.
"""

from __future__ import annotations

import sys
import time

from elftools.elf.elffile import ELFFile

from cudaresolve.binary import elf
from cudaresolve.binary.elf import read_binary_facts


def pyelftools_facts(path: str) -> int:
    """Needed libraries, version tables and every global dynamic symbol with its version, via pyelftools."""
    with open(path, "rb") as f:
        elf = ELFFile(f)
        dynamic = elf.get_section_by_name(".dynamic")
        needed = [tag.needed for tag in dynamic.iter_tags() if tag.entry.d_tag == "DT_NEEDED"]
        versions = {}
        verdef = elf.get_section_by_name(".gnu.version_d")
        if verdef is not None:
            for entry, aux in verdef.iter_versions():
                versions[entry["vd_ndx"]] = (next(aux).name, None)
        verneed = elf.get_section_by_name(".gnu.version_r")
        if verneed is not None:
            for entry, aux in verneed.iter_versions():
                for item in aux:
                    versions[item["vna_other"]] = (item.name, entry.name)
        versym = elf.get_section_by_name(".gnu.version")
        symbols = []
        for index, symbol in enumerate(elf.get_section_by_name(".dynsym").iter_symbols()):
            if index == 0 or symbol["st_info"]["bind"] == "STB_LOCAL":
                continue
            ndx = versym.get_symbol(index)["ndx"] if versym is not None else 0
            version = versions.get(ndx) if isinstance(ndx, int) else None
            symbols.append((symbol.name, version, symbol["st_shndx"] == "SHN_UNDEF", symbol["st_info"]["type"]))
        return len(needed) + len(symbols)


def best(function, path: str, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.process_time()
        function(path)
        times.append(time.process_time() - start)
    return min(times)


def main() -> None:
    path = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    facts = read_binary_facts(path)
    print(f"{path}: {len(facts.defined) + len(facts.undefined)} global dynamic symbols")
    print(f"read_binary_facts  {best(read_binary_facts, path, runs) * 1000:8.1f} ms")
    scan = elf.summarize_fatbins
    elf.summarize_fatbins = lambda data, sections: None
    print(f"  without fatbins  {best(read_binary_facts, path, runs) * 1000:8.1f} ms")
    elf.summarize_fatbins = scan
    print(f"pyelftools         {best(pyelftools_facts, path, max(1, runs // 5)) * 1000:8.1f} ms")


if __name__ == "__main__":
    main()
