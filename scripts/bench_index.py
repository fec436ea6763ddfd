"""Core metadata of a requirement closure from the configured indexes: cudaresolve's index access,
cold (empty cache) and warm (all cached), beside `pip download --no-deps` of the same files.

    python scripts/bench_index.py                      # cupy-cuda12x==14.2.0 cuda-cccl[cu12]==1.2.1
    python scripts/bench_index.py --runs 5 'torch==2.9.1'
    python scripts/bench_index.py --skip-pip ...       # ours only (pip downloads several hundred MB)

The closure is walked greedily, each name's page and metadata fetched in the index's thread pool as
soon as a chosen distribution asks for it: the newest release that fits the target and the first
specifier seen, markers evaluated with the requested extras. That is not a resolver, only the set of files a resolver would read first; pip then
downloads exactly those files. Each figure is the median of `--runs` runs of a fresh process
(`--once` is the child); cold runs each get an empty index cache (pip's default index, looked up
once per pip version with a pip subprocess, is known: the first run ever, which pays for it too,
is printed apart). Figures: docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import FIRST_COMPLETED, wait

DEFAULT = ["cupy-cuda12x==14.2.0", "cuda-cccl[cu12]==1.2.1"]


def closure(requirements: list[str]) -> dict:
    """Walk the closure with the configured indexes; what it read and what it cost."""
    from packaging.utils import canonicalize_name

    from cudaresolve.env.interpreter import running_target
    from cudaresolve.index.access import open_index
    from cudaresolve.index.config import IndexSettings, index_config

    start = time.perf_counter()
    target = running_target()
    config = index_config(target.python, target.prefix, os.environ, None, IndexSettings(), site_packages=target.site_packages)
    markers = target.marker_environment()
    chosen: dict = {}  # name -> [file, metadata, extras]
    with open_index(config, target, os.environ) as index:

        def fetch(requirement):
            fitting = [
                f for f in index.installable(index.files(requirement.name))
                if f.is_wheel and not f.yanked and requirement.specifier.contains(f.version)
            ]
            if not fitting:
                raise SystemExit(f"nothing fits {requirement}")
            newest = max(f.version for f in fitting)
            file = next(f for f in fitting if f.version == newest)
            return canonicalize_name(requirement.name), file, index.metadata(file)

        pending = {index.submit(fetch, r): canonicalize_name(r.name) for r in _requested(requirements)}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                del pending[future]
                name, file, metadata = future.result()
                chosen[name] = [file, metadata, set()]
            while True:  # a requirement with extras on a chosen name widens what that name needs
                wanted = _requested(requirements) + [r for entry in chosen.values() for r in _needs(entry, markers)]
                widened = [r for r in wanted if canonicalize_name(r.name) in chosen and not set(r.extras) <= chosen[canonicalize_name(r.name)][2]]
                for requirement in widened:
                    chosen[canonicalize_name(requirement.name)][2].update(requirement.extras)
                if not widened:
                    break
            for requirement in wanted:
                name = canonicalize_name(requirement.name)
                if name not in chosen and name not in pending.values():
                    pending[index.submit(fetch, requirement)] = name
        seconds = time.perf_counter() - start
        return {
            "seconds": seconds,
            "bytes": index.http.bytes_received,
            "requests": index.http.requests_made,
            "files": sorted(f"{file.name}=={file.version}" for file, _, _ in chosen.values()),
            "how": sorted({metadata.how for _, metadata, _ in chosen.values()}),
            "wheel_bytes": sum(file.size or 0 for file, _, _ in chosen.values()),
        }


def _requested(requirements: list[str]) -> list:
    from packaging.requirements import Requirement

    return [Requirement(text) for text in requirements]


def _needs(entry: list, markers: dict) -> list:
    from packaging.requirements import Requirement

    _, metadata, extras = entry
    found = []
    for text in metadata.requires_dist:
        requirement = Requirement(text)
        if requirement.marker is None or any(
            requirement.marker.evaluate({**markers, "extra": extra}) for extra in (extras or {""})
        ):
            found.append(requirement)
    return found


def _child(args: list[str], cache: str) -> dict:
    environ = dict(os.environ, CUDARESOLVE_CACHE_DIR=cache)
    start = time.perf_counter()
    out = subprocess.run([sys.executable, __file__, "--once", *args], env=environ, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(out.stderr)
    result = json.loads(out.stdout)
    result["process_seconds"] = time.perf_counter() - start
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("requirements", nargs="*", default=DEFAULT)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--skip-pip", action="store_true")
    parser.add_argument("--once", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.once:
        print(json.dumps(closure(args.requirements)))
        return
    scratch = tempfile.mkdtemp(prefix="bench-index-")
    try:
        first = _child(args.requirements, os.path.join(scratch, "first"))  # nothing cached at all
        cold = []
        for run in range(args.runs):
            # the index cache empty; pip's default index (once per pip version, not index data) known
            cache = os.path.join(scratch, f"cold-{run}")
            shutil.copytree(os.path.join(scratch, "first", "pip-default-index"), os.path.join(cache, "pip-default-index"))
            cold.append(_child(args.requirements, cache))
        warm = [_child(args.requirements, os.path.join(scratch, "cold-0")) for _ in range(args.runs)]
        files = cold[0]["files"]
        print(f"closure of {' '.join(args.requirements)}: {len(files)} files, {cold[0]['wheel_bytes'] / 1e6:.0f} MB of wheels")
        print("  " + " ".join(files))
        print(f"first run ever (pip's default index looked up too): {first['process_seconds']:.3f} s whole process")
        for label, runs in (("cold", cold), ("warm", warm)):
            print(
                f"cudaresolve {label}: {statistics.median(r['seconds'] for r in runs):.3f} s in process, "
                f"{statistics.median(r['process_seconds'] for r in runs):.3f} s whole process, "
                f"{statistics.median(r['bytes'] for r in runs) / 1e6:.2f} MB in {statistics.median(r['requests'] for r in runs):.0f} requests "
                f"(metadata by {', '.join(runs[0]['how'])})"
            )
        if not args.skip_pip:
            times = []
            for run in range(args.runs):
                target = os.path.join(scratch, f"pip-{run}")
                start = time.perf_counter()
                subprocess.run(
                    [sys.executable, "-m", "pip", "download", "--no-deps", "--no-cache-dir", "-q", "-d", target, *files],
                    check=True,
                )
                times.append(time.perf_counter() - start)
                shutil.rmtree(target)
            pip = statistics.median(times)
            ours = statistics.median(r["process_seconds"] for r in cold)
            print(f"pip download --no-deps (no cache): {pip:.2f} s; cudaresolve cold is {pip / ours:.1f}x faster ({ours / pip:.3f} of pip's time)")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
