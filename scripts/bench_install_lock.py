"""What `install --lock` costs as a lock grows to the lock-file size limit (16 MiB).

Usage: python scripts/bench_install_lock.py [--sizes 5000,20000,55000] [--runs 1]

Writes a lock of N packages (one pure-Python wheel each, one index, ~300 bytes a package: 55,000
fill 16 MiB) and times, best of --runs, the steps `install --lock` takes before pip: reading and
validating the file (read_pylock), selecting the target's entries (select, selected_lock), and
writing pip's requirements file (requirements_txt); then the seconds per 1,000 packages, which stay
flat when every step is linear.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
import time

from cudaresolve.lockfile.pip import requirements_txt
from cudaresolve.lockfile.pylock import read_pylock
from cudaresolve.lockfile.select import host_environment, host_tags, select, selected_lock


def write_lock(path: str, packages: int) -> int:
    parts = ['lock-version = "1.0"\ncreated-by = "cudaresolve"\n']
    for i in range(packages):
        name = f"pkg{i:06d}"
        sha = hashlib.sha256(name.encode()).hexdigest()
        parts.append(
            f'\n[[packages]]\nname = "{name}"\nversion = "1.0"\nindex = "https://x.invalid/simple"\n'
            f'wheels = [{{name = "{name}-1.0-py3-none-any.whl", url = "https://x.invalid/files/{name}-1.0-py3-none-any.whl", '
            f'size = 1000, hashes = {{sha256 = "{sha}"}}}}]\n'
        )
    text = "".join(parts)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return len(text)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="5000,20000,55000")
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    python = f"{sys.version_info[0]}.{sys.version_info[1]}"
    environment = host_environment({"python_full_version": python + ".0"}, "x86_64", python)
    tags = host_tags("x86_64", "2.35", python)
    print(f"{'packages':>9} {'MiB':>6} {'read':>7} {'select':>7} {'pip file':>9} {'total':>7} {'s/1000':>7}")
    with tempfile.TemporaryDirectory() as scratch:
        for size in (int(s) for s in args.sizes.split(",")):
            path = os.path.join(scratch, "pylock.toml")
            written = write_lock(path, size)
            best = None
            for _ in range(args.runs):
                t0 = time.perf_counter()
                whole = read_pylock(path)
                t1 = time.perf_counter()
                lock = selected_lock(whole, select(whole, environment, tags, "this host", path), environment, path)
                t2 = time.perf_counter()
                requirements_txt(lock, origin=path)
                t3 = time.perf_counter()
                times = (t1 - t0, t2 - t1, t3 - t2, t3 - t0)
                best = times if best is None or times[3] < best[3] else best
            assert best is not None
            print(f"{size:>9,} {written / 2**20:>6.1f} {best[0]:>7.2f} {best[1]:>7.2f} {best[2]:>9.2f} {best[3]:>7.2f} "
                  f"{best[3] / size * 1000:>7.3f}")


if __name__ == "__main__":
    main()
