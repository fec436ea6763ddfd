"""Scan every shared object of a site-packages three ways and compare with an `ldd -r` loop.

Usage: python scripts/bench_scan.py SITE_PACKAGES [--doctor PYTHON] [--runs N]

1. cold: facts of every file with the facts cache empty, as `doctor` gets them: the cache's misses
   read by one worker process per CPU (FactsCache.fill), then every entry loaded; also the same in
   this one process (read_binary_facts, then stored);
2. warm: every file's facts through the on-disk facts cache, populated by the cold pass;
3. `ldd -r FILE` for every file, one after the other (glibc's own loader doing the binding): the anchor.
With --doctor, also `cudaresolve doctor --python PYTHON` (a new process each: imports, scan, loader
emulation, checks) with every cache empty, and warm (a result-cache hit; its parts:
scripts/bench_doctor.py). The kinds run in interleaved rounds (one of each per round, --runs rounds),
so the machine's noise falls on all alike: each time is the median of the rounds and each ratio the
median of the rounds' own ratios to the `ldd -r` loop of the same round. Every file is read once
first, untimed, but the page cache may not hold a whole torch venv (5 GB): then the scanned
sections come from disk.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from cudaresolve.binary.elf import read_binary_facts
from cudaresolve.env.cache import FactsCache
from cudaresolve.env.scan import find_elf_files


def timed(work) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("site_packages")
    parser.add_argument("--doctor", metavar="PYTHON", help="also time `cudaresolve doctor --python PYTHON`")
    parser.add_argument("--runs", type=int, default=5, help="interleaved rounds (default 5)")
    args = parser.parse_args()

    paths, _ = find_elf_files(args.site_packages)
    for path in paths:  # page cache: measure CPU work, not the disk
        with open(path, "rb") as f:
            while f.read(1 << 24):
                pass

    def cold_parallel() -> None:
        with tempfile.TemporaryDirectory() as cache_dir:
            cache = FactsCache(cache_dir)
            cache.fill(paths, read=read_binary_facts)
            for p in paths:
                cache.facts_for(p, read=read_binary_facts)

    def cold_serial() -> None:
        with tempfile.TemporaryDirectory() as cache_dir:
            cache = FactsCache(cache_dir)
            for p in paths:
                cache.facts_for(p, read=read_binary_facts)

    warm_dir = tempfile.mkdtemp(prefix="bench-scan-")
    FactsCache(warm_dir).fill(paths, read=read_binary_facts)
    facts = [FactsCache(warm_dir).facts_for(p, read=read_binary_facts) for p in paths]
    kinds = {
        "ldd -r loop": lambda: [subprocess.run(["ldd", "-r", p], capture_output=True) for p in paths],
        "cudaresolve scan, cold cache": cold_parallel,
        "  the same in one process": cold_serial,
        "cudaresolve scan, warm cache": lambda: [FactsCache(warm_dir).facts_for(p, read=read_binary_facts) for p in paths],
    }
    if args.doctor:
        doctor_dir = tempfile.mkdtemp(prefix="bench-scan-doctor-")
        env = dict(os.environ, CUDARESOLVE_CACHE_DIR=doctor_dir)
        env.pop("PYTHONDONTWRITEBYTECODE", None)  # pip compiles an installed tool's bytecode; so do the runs
        command = [sys.executable, "-m", "cudaresolve", "doctor", "--python", args.doctor, "--driver", "580.65.06", "--gpu", "8.6"]

        def doctor_cold() -> None:
            for name in ("facts", "results"):  # a cached result would answer without reading
                shutil.rmtree(os.path.join(doctor_dir, name), ignore_errors=True)
            subprocess.run(command, env=env, capture_output=True, cwd=doctor_dir)

        kinds["cudaresolve doctor, cold cache"] = doctor_cold
        kinds["cudaresolve doctor, warm cache"] = lambda: subprocess.run(command, env=env, capture_output=True, cwd=doctor_dir)
    for work in kinds.values():
        work()
    times: dict[str, list[float]] = {name: [] for name in kinds}
    load = os.getloadavg()
    for _ in range(args.runs):
        for name, work in kinds.items():
            times[name].append(timed(work))
    ldd = times["ldd -r loop"]
    symbols = sum(len(f.symbols) for f in facts)
    print(f"files {len(paths)}, dynamic symbols {symbols:,}, {len(os.sched_getaffinity(0))} CPUs, {args.runs} interleaved "
          f"rounds, load average {load[0]:.2f} before them and {os.getloadavg()[0]:.2f} after")
    for name, values in times.items():
        ratio = statistics.median(seconds / anchor for seconds, anchor in zip(values, ldd))
        print(f"{name:32s} {statistics.median(values):7.3f} s  {ratio:6.3f}x the ldd -r loop")
    shutil.rmtree(warm_dir)
    if args.doctor:
        shutil.rmtree(doctor_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
