"""Time a warm `cudaresolve doctor` beside an `ldd -r` loop over the same files, and what its parts cost.

Usage: python scripts/bench_doctor.py PYTHON [--runs N] [--runner PY] [--baseline PY]

PYTHON is the target environment's interpreter (the torch venv the tests build). Each figure is the
median wall time of --runs fresh processes (default 7), the kinds interleaved so the machine's noise
falls on all alike:
- `ldd -r FILE` for every ELF file of the environment, one after the other;
- `cudaresolve doctor --python PYTHON` with the result cache warm (a hit), text and --json, with the
  host stated (--driver 580.65.06 --gpu 8.6) and probed (no host options: the probe runs);
- the same with only the facts cache warm (results/ emptied first): the scan, the loader and the
  checks, as every run paid before the result cache;
- with --baseline PY (an interpreter with another cudaresolve installed, e.g. an older commit), its
  doctor with its facts cache warm.
The doctor runs as `--runner -m cudaresolve` (default: this interpreter; an editable install pays
its import hook at every start, so give an interpreter with a regular install to time what users get).
Then, in this process (medians of 25): the parts a hit pays: asking PYTHON for its paths, the host
(stated, probed), the key without the tree, checking the tree by its directories' stats and by
walking it, and loading the entry. Every ELF file is read once first, untimed.
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

from cudaresolve import results
from cudaresolve.env.interpreter import target_for
from cudaresolve.env.scan import find_elf_files
from cudaresolve.host.probe import host_for

STATED = ["--driver", "580.65.06", "--gpu", "8.6"]


def timed(work) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("python", help="the target environment's interpreter")
    parser.add_argument("--runs", type=int, default=7, help="fresh processes per figure (default 7)")
    parser.add_argument("--runner", metavar="PY", default=sys.executable, help="the interpreter cudaresolve runs in")
    parser.add_argument("--baseline", metavar="PY", help="also time the doctor of the cudaresolve installed for PY")
    args = parser.parse_args()

    target = target_for(python=args.python)
    paths = [p for site in target.site_packages for p in find_elf_files(site)[0]]
    for path in paths:  # page cache: measure CPU work, not the disk
        with open(path, "rb") as f:
            while f.read(1 << 24):
                pass

    scratch = tempfile.mkdtemp(prefix="bench-doctor-")
    cache_dir, miss_cache_dir = os.path.join(scratch, "hits"), os.path.join(scratch, "misses")
    env = dict(os.environ, CUDARESOLVE_CACHE_DIR=cache_dir)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # pip compiles an installed tool's bytecode; so do the runs
    doctor = [args.runner, "-m", "cudaresolve", "doctor", "--python", args.python]

    def run(command: list, environ: dict = env) -> None:
        done = subprocess.run(command, env=environ, capture_output=True, cwd=scratch)  # not a source checkout
        assert done.returncode in (0, 1, 2), done.stderr.decode()

    def miss() -> None:
        shutil.rmtree(os.path.join(miss_cache_dir, "results"), ignore_errors=True)
        run(doctor + STATED, dict(env, CUDARESOLVE_CACHE_DIR=miss_cache_dir))

    kinds = {
        "ldd -r loop": lambda: [subprocess.run(["ldd", "-r", p], capture_output=True) for p in paths],
        "doctor, hit, host stated": lambda: run(doctor + STATED),
        "doctor --json, hit, host stated": lambda: run(doctor + STATED + ["--json"]),
        "doctor, hit, host probed": lambda: run(doctor),
        "doctor, facts cache warm, result cache empty": miss,
    }
    if args.baseline:
        baseline = [args.baseline] + doctor[1:] + STATED
        kinds["baseline doctor, facts cache warm"] = lambda: run(baseline, dict(env, CUDARESOLVE_CACHE_DIR=os.path.join(scratch, "baseline")))
    for work in kinds.values():  # warm every cache once (and, for a hit, twice: trusted directories)
        work()
    time.sleep(results.TIMESTAMP_SLACK)
    for work in kinds.values():
        work()
    times: dict[str, list[float]] = {name: [] for name in kinds}
    for _ in range(args.runs):
        for name, work in kinds.items():
            times[name].append(timed(work))
    ldd = statistics.median(times["ldd -r loop"])
    print(f"{len(paths)} ELF files, {len(os.sched_getaffinity(0))} CPUs, median of {args.runs} fresh processes each")
    for name, values in times.items():
        seconds = statistics.median(values)
        print(f"{name:46s} {seconds:7.3f} s  ({seconds / ldd:6.3f} of the ldd -r loop)")

    environ = dict(env, CUDARESOLVE_CACHE_DIR=os.path.join(scratch, "in-process"))
    stated = host_for(driver="580.65.06", gpus=["8.6"], environ=environ)
    results.doctor_report(target, stated, environ)  # this process's cudaresolve has an entry of its own
    cache = results.ResultCache(environ["CUDARESOLVE_CACHE_DIR"])
    key = results.result_key(target, stated, environ)
    stored = cache.load(target, stated, key)
    assert stored[0] is not None and stored[1] is None, "expected a hit by directory stats"
    parts = {
        "ask PYTHON for its paths (a subprocess)": lambda: target_for(python=args.python),
        "host, stated (tables read)": lambda: host_for(driver="580.65.06", gpus=["8.6"], environ=environ),
        "host, probed": lambda: host_for(environ=environ),
        "key without the tree": lambda: results.result_key(target, stated, environ),
        "load the entry, tree checked by stats": lambda: cache.load(target, stated, key),
        "walk the tree instead": lambda: results.walk_tree(target),
    }
    print("in this process, medians of 25:")
    for name, work in parts.items():
        print(f"  {name:44s} {statistics.median(timed(work) for _ in range(25)) * 1000:7.1f} ms")
    shutil.rmtree(scratch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
