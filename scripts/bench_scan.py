"""Scan every shared object of a site-packages three ways and compare with an `ldd -r` loop.

Usage: python scripts/bench_scan.py SITE_PACKAGES [--doctor PYTHON]

1. cold: facts of every file with the facts cache empty, as `doctor` gets them: the cache's misses
   read by one worker process per CPU (FactsCache.fill), then every entry loaded; also the same in
   this one process (read_binary_facts, then stored);
2. warm: every file's facts through the on-disk facts cache, populated by the cold pass;
3. `ldd -r FILE` for every file, one after the other (glibc's own loader doing the binding).
With --doctor, also times `cudaresolve doctor --python PYTHON` (a new process each: imports,
scan, loader emulation, checks) with every cache empty, and warm (a result-cache hit; its parts:
scripts/bench_doctor.py). Prints files, symbols and wall seconds, each the best of --runs runs
(the machine is shared). Every file is read once first, untimed, but the page
cache may not hold a whole torch venv (5 GB): then the scanned sections come from disk.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

from cudaresolve.binary.elf import read_binary_facts
from cudaresolve.env.cache import FactsCache
from cudaresolve.env.scan import find_elf_files


def best(work, runs: int) -> tuple[float, object]:
    """The shortest wall time of `runs` calls, and the last result."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        result = work()
        times.append(time.perf_counter() - start)
    return min(times), result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site_packages")
    parser.add_argument("--doctor", metavar="PYTHON", help="also time `cudaresolve doctor --python PYTHON`")
    parser.add_argument("--runs", type=int, default=3, help="take the best of this many runs (default 3)")
    args = parser.parse_args()

    paths, _ = find_elf_files(args.site_packages)
    for path in paths:  # page cache: measure CPU work, not the disk
        with open(path, "rb") as f:
            while f.read(1 << 24):
                pass

    def cold_parallel() -> list:
        with tempfile.TemporaryDirectory() as cache_dir:
            cache = FactsCache(cache_dir)
            cache.fill(paths, read=read_binary_facts)
            return [cache.facts_for(p, read=read_binary_facts) for p in paths]

    def cold_serial() -> None:
        with tempfile.TemporaryDirectory() as cache_dir:
            cache = FactsCache(cache_dir)
            for p in paths:
                cache.facts_for(p, read=read_binary_facts)

    cold, facts = best(cold_parallel, args.runs)
    serial, _ = best(cold_serial, args.runs)
    with tempfile.TemporaryDirectory() as cache_dir:
        FactsCache(cache_dir).fill(paths, read=read_binary_facts)
        warm, _ = best(lambda: [FactsCache(cache_dir).facts_for(p, read=read_binary_facts) for p in paths], args.runs)
    symbols = sum(len(f.symbols) for f in facts)
    ldd, _ = best(lambda: [subprocess.run(["ldd", "-r", p], capture_output=True) for p in paths], args.runs)

    print(f"files {len(paths)}, dynamic symbols {symbols:,}, {len(os.sched_getaffinity(0))} CPUs, best of {args.runs}")
    print(f"cudaresolve scan, cold cache : {cold:7.3f} s  ({ldd / cold:5.1f}x faster than ldd -r)")
    print(f"  the same in one process    : {serial:7.3f} s  ({ldd / serial:5.1f}x faster than ldd -r)")
    print(f"cudaresolve scan, warm cache : {warm:7.3f} s  ({ldd / warm:5.1f}x faster than ldd -r)")
    print(f"ldd -r loop                  : {ldd:7.3f} s")

    if args.doctor:
        with tempfile.TemporaryDirectory() as cache_dir:
            env = dict(os.environ, CUDARESOLVE_CACHE_DIR=cache_dir)
            env.pop("PYTHONDONTWRITEBYTECODE", None)  # pip compiles an installed tool's bytecode; so do the runs
            command = [sys.executable, "-m", "cudaresolve", "doctor", "--python", args.doctor,
                       "--driver", "580.65.06", "--gpu", "8.6"]
            def doctor_cold() -> None:
                for name in ("facts", "results"):  # a cached result would answer without reading
                    shutil.rmtree(os.path.join(cache_dir, name), ignore_errors=True)
                subprocess.run(command, env=env, capture_output=True)

            seconds, _ = best(doctor_cold, args.runs)
            print(f"cudaresolve doctor, cold cache: {seconds:7.3f} s  ({ldd / seconds:5.1f}x faster than ldd -r)")
            seconds, _ = best(lambda: subprocess.run(command, env=env, capture_output=True), args.runs)
            print(f"cudaresolve doctor, warm cache: {seconds:7.3f} s  ({ldd / seconds:5.1f}x faster than ldd -r)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
