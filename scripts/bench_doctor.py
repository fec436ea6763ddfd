"""Time `cudaresolve doctor` beside an `ldd -r` loop over the same files, and what its parts cost.

Usage: python scripts/bench_doctor.py PYTHON [--runs N] [--runner PY] [--baseline PY]

PYTHON is the target environment's interpreter (the torch venv the tests build). The kinds below run
as fresh processes in interleaved rounds (one of each per round, --runs rounds, default 7), so the
machine's noise falls on all alike; each time is the median of the rounds, each ratio the median of
the rounds' own ratios to the `ldd -r` loop of the same round, each peak the median of the
rounds' largest resident set of the process and its workers, and each CPU figure the median of the
rounds' CPU seconds (user + system) of the process and its workers (on a shared machine, what the
work costs whatever the others take):
- `ldd -r FILE` for every ELF file of the environment, one after the other (the anchor);
- `cudaresolve doctor --python PYTHON --driver 580.65.06 --gpu 8.6` cold: the facts, import-model
  and result caches emptied first, so every file is read and every package's Python parsed;
- the same with the facts and import-model caches warm (results/ emptied first): the scan, the
  loader and the checks;
- with the result cache warm (a hit), text and --json, with the host stated and probed (no host
  options: the probe runs);
- on a fresh venv of known wheels: the target venv hard-linked to a new path before each run (new
  paths, so no identity entry and no result entry holds), with the facts cache the facts-warm kind
  filled: its libraries are found by the (sha256, size) their RECORDs give;
- with --baseline PY (an interpreter with another cudaresolve installed, e.g. an older commit), its
  doctor cold, with its facts cache warm, and on a fresh venv.
The doctor runs as `--runner -m cudaresolve` (default: this interpreter; an editable install pays
its import hook at every start, so give an interpreter with a regular install to time what users get).
Then, in this process (medians of 25): the parts a hit pays: asking PYTHON for its paths, the host
(stated, probed), the key without the tree, checking the tree by its directories' stats and by
walking it, and loading the entry. Every ELF file is read once first, untimed.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable

from cudaresolve.commands import result_cache
from cudaresolve.commands.host_options import overrides_from, stated_by
from cudaresolve.env.interpreter import target_for
from cudaresolve.env.scan import find_elf_files
from cudaresolve.host.probe import host_for

PEAK_RSS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "peak_rss.py")
STATED = ["--driver", "580.65.06", "--gpu", "8.6"]


def timed(work) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def measured(command: list, environ: dict, cwd: str) -> tuple[float, float, float]:
    """(wall seconds, peak resident MB, CPU seconds: user + system) of one run, of the process and the workers it
    waited for, taken by peak_rss.py so that this script's own resident size is not counted as the command's."""
    with tempfile.TemporaryDirectory() as scratch:
        report = os.path.join(scratch, "report.json")
        start = time.perf_counter()
        done = subprocess.run([sys.executable, PEAK_RSS, "--report", report, "--", *command], env=environ, cwd=cwd,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=True)
        seconds = time.perf_counter() - start
        with open(report, encoding="utf-8") as file:
            outcome = json.load(file)
    assert outcome["code"] in (0, 1, 2), done.stderr.decode()
    return seconds, outcome["peak_kib"] / 1024, outcome["user_s"] + outcome["system_s"]


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

    def run(command: list, environ: dict = env) -> tuple[float, float, float]:
        return measured(command, environ, scratch)  # not a source checkout

    def emptied(command: list, cache: str, *names: str) -> Callable[[], tuple[float, float, float]]:
        def work() -> tuple[float, float, float]:
            for name in names:
                shutil.rmtree(os.path.join(cache, name), ignore_errors=True)
            return run(command, dict(env, CUDARESOLVE_CACHE_DIR=cache))
        return work

    venv_root = os.path.dirname(os.path.dirname(os.path.abspath(args.python)))
    copies = itertools.count()

    def fresh_venv(runner: str, cache: str) -> Callable[[], tuple[float, float, float]]:
        def work() -> tuple[float, float, float]:
            copy = os.path.join(scratch, f"venv-{next(copies)}")
            shutil.copytree(venv_root, copy, symlinks=True, copy_function=os.link)  # a second or two, untimed
            try:
                shutil.rmtree(os.path.join(cache, "results"), ignore_errors=True)
                python = os.path.join(copy, os.path.relpath(os.path.abspath(args.python), venv_root))
                return run([runner, "-m", "cudaresolve", "doctor", "--python", python] + STATED,
                           dict(env, CUDARESOLVE_CACHE_DIR=cache))
            finally:
                shutil.rmtree(copy)
        return work

    def ldd_loop() -> tuple[float, float, float]:
        runs = [measured(["ldd", "-r", p], env, scratch) for p in paths]
        return sum(seconds for seconds, _, _ in runs), max(peak for _, peak, _ in runs), sum(cpu for _, _, cpu in runs)

    kinds = {
        "ldd -r loop": ldd_loop,
        "doctor, cold: every cache empty": emptied(doctor + STATED, os.path.join(scratch, "cold"), "facts", "imports", "results"),
        "doctor, facts cache warm, result cache empty": emptied(doctor + STATED, miss_cache_dir, "results"),
        "doctor, a fresh venv of known wheels": fresh_venv(args.runner, miss_cache_dir),
        "doctor, hit, host stated": lambda: run(doctor + STATED),
        "doctor --json, hit, host stated": lambda: run(doctor + STATED + ["--json"]),
        "doctor, hit, host probed": lambda: run(doctor),
    }
    if args.baseline:
        baseline = [args.baseline] + doctor[1:] + STATED
        kinds["baseline doctor, cold"] = emptied(baseline, os.path.join(scratch, "baseline-cold"), "facts", "imports", "results")
        kinds["baseline doctor, facts cache warm"] = emptied(baseline, os.path.join(scratch, "baseline"), "results")
        kinds["baseline doctor, a fresh venv"] = fresh_venv(args.baseline, os.path.join(scratch, "baseline"))
    for work in kinds.values():  # warm every cache once (and, for a hit, twice: trusted directories)
        work()
    time.sleep(result_cache.TIMESTAMP_SLACK)
    for work in kinds.values():
        work()
    figures: dict[str, list[tuple[float, float, float]]] = {name: [] for name in kinds}
    load = os.getloadavg()
    for _ in range(args.runs):
        for name, work in kinds.items():
            figures[name].append(work())
    ldd = [seconds for seconds, _, _ in figures["ldd -r loop"]]
    print(f"{len(paths)} ELF files, {len(os.sched_getaffinity(0))} CPUs, {args.runs} interleaved rounds, "
          f"load average {load[0]:.2f} before them and {os.getloadavg()[0]:.2f} after")
    for name, values in figures.items():
        seconds = statistics.median(s for s, _, _ in values)
        ratio = statistics.median(s / anchor for (s, _, _), anchor in zip(values, ldd))
        peak = statistics.median(p for _, p, _ in values)
        cpu = statistics.median(c for _, _, c in values)
        cpu_ratio = statistics.median(c / anchor for (_, _, c), (_, _, anchor) in zip(values, figures["ldd -r loop"]))
        print(f"{name:46s} {seconds:7.3f} s  {ratio:6.3f}x the ldd -r loop  CPU {cpu:6.2f} s ({cpu_ratio:6.3f}x the loop's)  "
              f"peak {peak:5.0f} MB")

    environ = dict(env, CUDARESOLVE_CACHE_DIR=os.path.join(scratch, "in-process"))
    stated = host_for(overrides=overrides_from("580.65.06", None, ["8.6"], environ), environ=environ)
    result_cache.doctor_report(target, stated, environ)  # this process's cudaresolve has an entry of its own
    cache = result_cache.ResultCache(environ["CUDARESOLVE_CACHE_DIR"])
    key = result_cache.result_key(target, stated, environ)
    stored = cache.load(target, stated, key)
    assert stored[0] is not None and stored[1] is None, "expected a hit by directory stats"
    parts = {
        "ask PYTHON for its paths (a subprocess)": lambda: target_for(python=args.python),
        "host, stated (tables read)": lambda: host_for(overrides=overrides_from("580.65.06", None, ["8.6"], environ),
                                                       environ=environ),
        "host, probed": lambda: host_for(overrides=stated_by(environ), environ=environ),
        "key without the tree": lambda: result_cache.result_key(target, stated, environ),
        "load the entry, tree checked by stats": lambda: cache.load(target, stated, key),
        "walk the tree instead": lambda: result_cache.walk_tree(target),
    }
    print("in this process, medians of 25:")
    for name, work in parts.items():
        print(f"  {name:44s} {statistics.median(timed(work) for _ in range(25)) * 1000:7.1f} ms")
    shutil.rmtree(scratch)
    return 0


if __name__ == "__main__":
    sys.exit(main())
