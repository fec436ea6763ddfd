"""Scan every shared object of a site-packages three ways and compare with an `ldd -r` loop.

Usage: python scripts/bench_scan.py SITE_PACKAGES [--doctor PYTHON]

1. cold: read_binary_facts on every file, facts cache empty (files in the page cache after one
   untimed pass, so the figure is CPU work, not disk);
2. warm: the same through the on-disk facts cache, populated by the cold pass;
3. `ldd -r FILE` for every file, one after the other (glibc's own loader doing the binding).
With --doctor, also times `cudaresolve doctor --python PYTHON` (a new process each: imports,
scan, loader emulation, checks) cold and warm. Prints files, symbols and wall seconds.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

from cudaresolve.binary.elf import read_binary_facts
from cudaresolve.env.cache import FactsCache
from cudaresolve.env.scan import find_elf_files


def timed(work) -> tuple[float, object]:
    start = time.perf_counter()
    result = work()
    return time.perf_counter() - start, result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site_packages")
    parser.add_argument("--doctor", metavar="PYTHON", help="also time `cudaresolve doctor --python PYTHON`")
    args = parser.parse_args()

    paths, _ = find_elf_files(args.site_packages)
    for path in paths:  # page cache: measure CPU work, not the disk
        with open(path, "rb") as f:
            while f.read(1 << 24):
                pass

    with tempfile.TemporaryDirectory() as cache_dir:
        cache = FactsCache(cache_dir)
        cold, facts = timed(lambda: [cache.facts_for(p, read=read_binary_facts) for p in paths])
        warm, _ = timed(lambda: [FactsCache(cache_dir).facts_for(p, read=read_binary_facts) for p in paths])
    symbols = sum(len(f.defined) + len(f.undefined) for f in facts)
    ldd, _ = timed(lambda: [subprocess.run(["ldd", "-r", p], capture_output=True) for p in paths])

    print(f"files {len(paths)}, dynamic symbols {symbols:,}")
    print(f"cudaresolve scan, cold cache : {cold:7.3f} s  ({ldd / cold:5.1f}x faster than ldd -r)")
    print(f"cudaresolve scan, warm cache : {warm:7.3f} s  ({ldd / warm:5.1f}x faster than ldd -r)")
    print(f"ldd -r loop                  : {ldd:7.3f} s")

    if args.doctor:
        with tempfile.TemporaryDirectory() as cache_dir:
            env = dict(os.environ, CUDARESOLVE_CACHE_DIR=cache_dir)
            command = [sys.executable, "-m", "cudaresolve", "doctor", "--python", args.doctor,
                       "--driver", "580.65.06", "--gpu", "8.6"]
            for label in ("cold", "warm"):
                seconds, _ = timed(lambda: subprocess.run(command, env=env, capture_output=True))
                print(f"cudaresolve doctor, {label} cache: {seconds:7.3f} s  ({ldd / seconds:5.1f}x faster than ldd -r)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
