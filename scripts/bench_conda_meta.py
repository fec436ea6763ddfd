"""What reading a conda prefix adds to a scan: conda-meta records, their ELF files, and the whole scan.

Usage: python scripts/bench_conda_meta.py [--records 300] [--libraries 40] [--runs 5]

Builds a synthetic prefix in a temporary directory, shaped like a conda-forge environment: one
`python` record listing 5,000 files (the real one lists about that many), `--libraries` records
each shipping a shared library (a copy of this interpreter's libpython or, failing that, of libc,
under lib/ with a soname symlink, as conda-forge lays them out), and the rest listing 10 to 100
non-library files. Each record carries `paths_data` (path, type, sha256, size per file) as conda
writes it, so the JSON is as large as a real one. Then times, best of --runs:
1. read_conda_meta: listing and parsing every record;
2. the conda part of a scan without facts: records, merging (with_conda) and the ELF check (elf_only);
3. scan_environment of the prefix with a warm facts cache (the doctor's scan, without the checks).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import sysconfig
import tempfile
import time

from cudaresolve.binary.elf import read_binary_facts
from cudaresolve.env.cache import FactsCache
from cudaresolve.env.conda import read_conda_meta, with_conda
from cudaresolve.env.interpreter import Target
from cudaresolve.env.scan import elf_only, scan_environment


def record(prefix: str, name: str, files: list[str]) -> None:
    paths = [{"_path": f, "path_type": "hardlink", "sha256": hashlib.sha256(f.encode()).hexdigest(),
              "size_in_bytes": 1000 + len(f)} for f in files]
    data = {"name": name, "version": "1.2.3", "build": "h1234567_0", "build_number": 0,
            "channel": "https://channels.example.invalid/conda-forge/linux-64", "depends": ["libgcc >=13", "libzlib >=1.3.1,<2.0a0"],
            "files": files, "paths_data": {"paths": paths, "paths_version": 1}, "subdir": "linux-64"}
    with open(os.path.join(prefix, "conda-meta", f"{name}-1.2.3-h1234567_0.json"), "w") as f:
        json.dump(data, f, indent=2)


def build_prefix(prefix: str, records: int, libraries: int, library: str) -> tuple[int, int]:
    """(bytes of JSON, files listed)."""
    rng = random.Random(0)
    os.makedirs(os.path.join(prefix, "conda-meta"))
    os.makedirs(os.path.join(prefix, "lib", "python3.11", "site-packages"))
    listed = 0
    python = [f"lib/python3.11/{'/'.join(f'd{rng.randrange(40)}' for _ in range(2))}/m{i}.py" for i in range(5000)]
    record(prefix, "python", python)
    listed += len(python)
    for i in range(libraries):
        real = f"lib/libsynth{i}.so.1.0.0"
        shutil.copyfile(library, os.path.join(prefix, real))
        os.symlink(os.path.basename(real), os.path.join(prefix, f"lib/libsynth{i}.so.1"))
        files = [real, f"lib/libsynth{i}.so.1", f"include/synth{i}.h", f"share/doc/synth{i}/README"]
        record(prefix, f"libsynth{i}", files)
        listed += len(files)
    for i in range(records - 1 - libraries):
        files = [f"share/pkg{i}/f{j}.dat" for j in range(rng.randrange(10, 100))]
        record(prefix, f"pkg{i}", files)
        listed += len(files)
    meta = os.path.join(prefix, "conda-meta")
    return sum(os.path.getsize(os.path.join(meta, n)) for n in os.listdir(meta)), listed


def best(work, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=300)
    parser.add_argument("--libraries", type=int, default=40)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    libpython = os.path.join(sysconfig.get_config_var("LIBDIR") or "", sysconfig.get_config_var("INSTSONAME") or "")
    library = libpython if os.path.isfile(libpython) else "/lib/x86_64-linux-gnu/libc.so.6"
    with tempfile.TemporaryDirectory() as root:
        prefix = os.path.join(root, "prefix")
        size, listed = build_prefix(prefix, args.records, args.libraries, library)
        site = os.path.join(prefix, "lib", "python3.11", "site-packages")
        target = Target(site_packages=(site,), prefix=prefix, conda=True)
        cache = FactsCache(os.path.join(root, "cache"))

        def facts_for(path: str):
            return cache.facts_for(path, read=read_binary_facts)

        def conda_part() -> None:
            packages, _ = read_conda_meta(prefix)
            _, owned = with_conda([], packages, [site])
            elf_only(p for paths in owned.values() for p in paths)

        scan_environment(target, facts_for=facts_for)  # fills the facts cache
        read = best(lambda: read_conda_meta(prefix), args.runs)
        part = best(conda_part, args.runs)
        scan = best(lambda: scan_environment(target, facts_for=facts_for), args.runs)
        env = scan_environment(target, facts_for=facts_for)
    print(f"records: {args.records} ({size / 1e6:.1f} MB of JSON, {listed} files listed); "
          f"{len(env.distributions)} conda packages with libraries, {len(env.elf_files)} ELF paths "
          f"(copies of {os.path.basename(library)}, {os.path.getsize(library) / 1e6:.1f} MB)")
    print(f"read_conda_meta:            {read * 1000:7.1f} ms")
    print(f"conda part, without facts:  {part * 1000:7.1f} ms")
    print(f"scan, warm facts cache:     {scan * 1000:7.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
