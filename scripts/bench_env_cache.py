"""Measure the BinaryFacts cache: warm lookups against cold reads and an `ldd -r` loop, pickle
against JSON, and one entry file per library against one file per environment.

Usage: python scripts/bench_env_cache.py SITE_PACKAGES [RUNS]
Every ELF file under SITE_PACKAGES is read with cudaresolve.binary.elf. Times are the best of RUNS
(CPU time of this process, or wall time for `ldd -r`, which runs in a child), since the machine is
shared. Numbers go to stdout; the conclusions live in cudaresolve/env/cache.py's docstring.
"""

from __future__ import annotations

import dataclasses
import json
import os
import pickle
import subprocess
import sys
import tempfile
import time
from typing import Callable

from cudaresolve.arch import PtxTarget
from cudaresolve.binary.elf import read_binary_facts
from cudaresolve.binary.facts import BinaryFacts, FatbinSummary, Symbol, SymbolTable, VersionNeed
from cudaresolve.env.cache import FactsCache
from cudaresolve.env.scan import find_elf_files


def best(fn: Callable[[], object], runs: int, clock: Callable[[], float] = time.process_time) -> float:
    times = []
    for _ in range(runs):
        start = clock()
        fn()
        times.append(clock() - start)
    return min(times)


def to_json(facts: BinaryFacts) -> str:
    return json.dumps(dataclasses.asdict(facts), default=lambda b: b.decode("latin-1"))


def from_json(text: str) -> BinaryFacts:
    """The decoder a JSON cache would need: every nested dataclass rebuilt by hand."""
    d = json.loads(text)
    table = d["symbols"]
    symbols = SymbolTable(
        *(table[name].encode("latin-1") for name in ("strings", "name_offsets", "info", "sections", "versym")),
        versions=tuple(tuple(v) for v in table["versions"]),
    )
    fatbin = d["fatbin"]
    if fatbin is not None:
        fatbin = FatbinSummary(
            sass=tuple(fatbin["sass"]),
            ptx=tuple(PtxTarget(**p) for p in fatbin["ptx"]),
            undetermined=tuple(fatbin["undetermined"]),
            unknown_kinds=tuple(tuple(k) for k in fatbin["unknown_kinds"]),
            containers=fatbin["containers"],
            entries=fatbin["entries"],
            sections=tuple(fatbin["sections"]),
        )
    return BinaryFacts(
        **{k: tuple(v) if isinstance(v, list) else v for k, v in d.items() if k not in ("symbols", "version_needs", "fatbin")},
        symbols=symbols,
        version_needs=tuple(VersionNeed(n["file"], tuple(n["versions"])) for n in d["version_needs"]),
        fatbin=fatbin,
    )


def synthetic(symbols: int) -> BinaryFacts:
    """A libtorch_cuda-sized symbol table (tens of thousands of defined C++ symbols)."""
    return BinaryFacts(
        path="/synthetic/libtorch_cuda.so", machine="x86_64", elf_type="DYN", soname="libtorch_cuda.so",
        needed=("libc10_cuda.so", "libcudart.so.12", "libc.so.6"), rpath=("$ORIGIN",), runpath=(), flags=0, flags_1=0,
        symbols=SymbolTable.of(
            [Symbol(f"_ZN3c104impl{i}Ev", "GLIBC_2.2.5", "libc.so.6") for i in range(symbols // 10)],
            [Symbol(f"_ZN2at6native{i:06d}_cuda_kernel_implERKNS_6TensorE") for i in range(symbols)],
        ),
        version_definitions=(), version_needs=(VersionNeed("libc.so.6", ("GLIBC_2.2.5",)),), build_id="00" * 20,
        fatbin=FatbinSummary(sass=("sm_50", "sm_80", "sm_90"), ptx=(PtxTarget("compute_90", "8.4"),), containers=900, entries=2700),
    )


def main() -> None:
    site = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    paths, _ = find_elf_files(site)
    workdir = tempfile.mkdtemp(prefix="bench-env-cache-")
    cache = FactsCache(workdir)
    read = lambda p: read_binary_facts(p)  # noqa: E731

    print(f"{len(paths)} ELF files under {site}")
    print(f"{'file':32} {'MB':>7} {'symbols':>7} {'cold ms':>8} {'warm ms':>8} {'entry KB':>8} {'json ms':>8} {'ldd -r ms':>9}")
    all_facts = {}
    total_cold = total_warm = total_ldd = 0.0
    for path in sorted(paths):
        cold = best(lambda: read_binary_facts(path), max(1, runs // 5))
        facts = cache.facts_for(path, read=read)
        warm = best(lambda: cache.facts_for(path, read=read), runs)
        text = to_json(facts)
        assert from_json(text) == facts
        json_load = best(lambda: from_json(text), runs)
        ldd = best(lambda: subprocess.run(["ldd", "-r", path], capture_output=True), 3, time.perf_counter)
        entry_kb = sum(os.path.getsize(os.path.join(cache.directory, e)) for e in os.listdir(cache.directory)) / 1024 - sum(
            len(pickle.dumps(f)) for f in all_facts.values()) / 1024
        all_facts[path] = facts
        total_cold, total_warm, total_ldd = total_cold + cold, total_warm + warm, total_ldd + ldd
        print(f"{os.path.basename(path)[:32]:32} {os.path.getsize(path) / 1e6:7.1f} {len(facts.defined) + len(facts.undefined):7d} "
              f"{cold * 1e3:8.2f} {warm * 1e3:8.3f} {entry_kb:8.1f} {json_load * 1e3:8.3f} {ldd * 1e3:9.1f}")
    print(f"{'total':32} {'':7} {'':7} {total_cold * 1e3:8.2f} {total_warm * 1e3:8.3f} {'':8} {'':8} {total_ldd * 1e3:9.1f}")
    print(f"warm / ldd -r: 1/{total_ldd / total_warm:.0f}")

    big = synthetic(100_000)
    blob = pickle.dumps(big, protocol=pickle.HIGHEST_PROTOCOL)
    text = to_json(big)
    print(f"\nsynthetic 110k-symbol entry: pickle {len(blob) / 1e6:.1f} MB, load {best(lambda: pickle.loads(blob), 5) * 1e3:.0f} ms; "
          f"JSON {len(text) / 1e6:.1f} MB, load+rebuild {best(lambda: from_json(text), 5) * 1e3:.0f} ms")

    # One file per environment: every entry in one pickle, against one file per library.
    # Copies through pickle, so no two entries share symbol objects (pickle would memoize those).
    env = {
        f"/env/lib{i}.so": pickle.loads(pickle.dumps(dataclasses.replace(f, path=f"/env/lib{i}.so")))
        for i, f in enumerate(list(all_facts.values()) * 30)
    }
    one_file = os.path.join(workdir, "env.pickle")
    per_lib = FactsCache(os.path.join(workdir, "per-lib"))
    for path, facts in env.items():
        per_lib._store(os.path.join(per_lib.directory, str(abs(hash(path)))), (path,), facts)
    with open(one_file, "wb") as f:
        pickle.dump(env, f, protocol=pickle.HIGHEST_PROTOCOL)

    def load_one() -> None:
        with open(one_file, "rb") as f:
            pickle.load(f)

    def load_each() -> None:
        for name in os.listdir(per_lib.directory):
            with open(os.path.join(per_lib.directory, name), "rb") as f:
                f.readline()
                pickle.load(f)

    def write_one() -> None:
        with open(one_file + ".tmp", "wb") as f:
            pickle.dump(env, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(one_file + ".tmp", one_file)

    print(f"\n{len(env)} libraries: one file per env load {best(load_one, 5) * 1e3:.1f} ms, "
          f"one file per library load all {best(load_each, 5) * 1e3:.1f} ms; "
          f"updating one library rewrites the env file: {best(write_one, 5) * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
