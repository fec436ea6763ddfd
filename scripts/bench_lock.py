"""`cudaresolve lock` beside uv's `pip compile` and pip's `install --dry-run --report`, each a fresh
process, run in interleaved rounds (ours, uv, pip, ours, uv, pip, ...) so that the machine's noise
falls on all alike. Each time is the median of `--runs` rounds; each ratio is the median of the
rounds' own ratios against the anchor measured in the same round (uv, pip).

1. The tests' generated CUDA universe (tests/fake_cuda_index.py) served on 127.0.0.1: `torch
   cupy-cuda12x numba` for driver 550.144.03 / GPU 8.9, warm (every tool run once before timing).
   uv and pip are given the torch build the lock chose (its version pinned, its variant index
   first, then the regular one), so all three resolve the same set; a pin that differs is printed.
   The index serves no caching headers, so uv asks it again for every page (conditional requests
   answered 304) where cudaresolve uses its cached pages for PAGE_MAX_AGE; `uv --offline`, its
   run without any request, is printed too. The warm lock is answered by the lock's result cache
   (commands/lock_cache.py); a miss of it (its entry removed before each run, pages and facts warm:
   the whole resolve, then the entry stored) is timed in the same rounds.
2. `cupy-cuda12x==14.2.0 cuda-cccl[cu12]==1.2.1` from the registry pip is configured with, cold
   (empty caches: --no-cache-dir for pip, --no-cache for uv, a new CUDARESOLVE_CACHE_DIR with pip's
   default index already known) and warm.

    python scripts/bench_lock.py [--runs 9] [--runner PY] [--skip-registry]

--runner is the interpreter cudaresolve runs in (default: this one); give a venv holding a regular
install of the package with compiled bytecode, as pip leaves an installed tool (an editable install
pays its import hook at every start). PIP_*, UV_* and CUDARESOLVE_* variables are dropped for every
tool. uv comes from the registry into a cached venv (~/.cache/cudaresolve-bench). Figures:
docs/performance.md.
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
import venv
from pathlib import Path
from typing import Callable, Optional

ROOT = Path(__file__).resolve().parent.parent
UV_VERSION = "0.13.9"
LOCAL = ["torch", "cupy-cuda12x", "numba"]
REGISTRY = ["cupy-cuda12x==14.2.0", "cuda-cccl[cu12]==1.2.1"]


def clean_environ(**extra: str) -> dict:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_", "CUDARESOLVE_"))}
    environ.pop("PYTHONDONTWRITEBYTECODE", None)  # pip compiles an installed tool's bytecode; so do the runs
    environ.update(extra)
    return environ


class Command:
    """One way of running a tool: its argument list, environment and standard input."""

    def __init__(self, argv: list[str], environ: dict, stdin: str = "", before: Optional[Callable[[], None]] = None):
        self.argv, self.environ, self.stdin, self.before = argv, environ, stdin, before

    def run(self) -> tuple[float, str]:
        if self.before:
            self.before()
        start = time.perf_counter()
        done = subprocess.run(self.argv, env=self.environ, input=self.stdin, capture_output=True, text=True,
                              cwd=tempfile.gettempdir())  # not a source checkout, whose package would shadow the runner's
        seconds = time.perf_counter() - start
        if done.returncode:
            raise SystemExit(f"{' '.join(self.argv[:4])} ... failed:\n{done.stderr[-2000:]}")
        return seconds, done.stdout


def rounds(commands: dict[str, Command], runs: int) -> dict[str, list[float]]:
    """Every command once to warm up, then `runs` interleaved rounds: name -> seconds per round."""
    for command in commands.values():
        command.run()
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, command in commands.items():
            times[name].append(command.run()[0])
    return times


def report(title: str, times: dict[str, list[float]], ours: str, anchors: list[str]) -> None:
    print(title)
    for name, values in times.items():
        line = f"  {name:44s} {statistics.median(values):7.3f} s"
        if name == ours:
            ratios = ", ".join(
                f"{statistics.median(a / b for a, b in zip(values, times[anchor])):.2f}x {anchor.split(',')[0]}" for anchor in anchors
            )
            line += f"   ({ratios}; medians of the rounds' ratios)"
        print(line)


def uv() -> str:
    home = Path.home() / ".cache" / "cudaresolve-bench" / f"uv-{UV_VERSION}"
    binary = home / "bin" / "uv"
    if not binary.exists():
        venv.EnvBuilder(with_pip=True).create(home)
        subprocess.run([str(home / "bin" / "python"), "-m", "pip", "install", "-q", f"uv=={UV_VERSION}"], check=True)
    return str(binary)


def pins(text: str) -> dict[str, str]:
    """name -> version from uv's requirements output."""
    found = {}
    for line in text.splitlines():
        name, sep, version = line.strip().partition("==")
        if sep and not line.startswith((" ", "#")):
            found[name.lower()] = version
    return found


def local(runner: str, runs: int, scratch: Path) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from fake_cuda_index import build_universe, serve

    served = serve(build_universe())
    try:
        venv.EnvBuilder(with_pip=False).create(scratch / "target")
        python = str(scratch / "target" / "bin" / "python")
        environ = clean_environ(PIP_CONFIG_FILE=os.devnull, CUDARESOLVE_CACHE_DIR=str(scratch / "cache-local"))
        lock = Command([runner, "-m", "cudaresolve", "lock", "-q", "--json", "-o", str(scratch / "pylock.toml"),
                        "--python", python, "--index-url", served.index_url, "--torch-index-base", served.torch_index_base,
                        "--driver", "550.144.03", "--gpu", "8.9", *LOCAL], environ)
        packages = {p["name"]: p["version"] for p in json.loads(lock.run()[1])["packages"]}
        variant = packages["torch"].split("+")[1]
        wanted = [f"torch=={packages['torch']}"] + LOCAL[1:]
        indexes = ["--index-url", served.variant_index(variant), "--extra-index-url", served.index_url]
        venv.EnvBuilder(with_pip=True).create(scratch / "pip-target")
        pip = Command([str(scratch / "pip-target" / "bin" / "python"), "-m", "pip", "install", "--dry-run",
                       "--ignore-installed", "--quiet", "--report", "-", *indexes, *wanted], environ)
        compile_ = [uv(), "pip", "compile", "--no-config", "--python", python, "--index-strategy", "first-index",
                    "--index", served.variant_index(variant), "--default-index", served.index_url, "-"]
        uv_environ = clean_environ(UV_CACHE_DIR=str(scratch / "uv-cache"))
        uv_online = Command(compile_, uv_environ, "\n".join(wanted))
        uv_offline = Command(compile_ + ["--offline"], uv_environ, "\n".join(wanted))
        resolved = pins(uv_online.run()[1])
        differ = {name: (version, resolved.get(name)) for name, version in packages.items() if resolved.get(name) != version}
        results = scratch / "cache-local" / "lock-results"
        miss = Command(lock.argv, environ, before=lambda: shutil.rmtree(results, ignore_errors=True))
        times = rounds({"cudaresolve lock": lock, "cudaresolve lock, result cache miss": miss, "uv pip compile": uv_online,
                        "pip install --dry-run --report": pip, "uv pip compile --offline (no request)": uv_offline}, runs)
        report(f"local universe, {' '.join(LOCAL)} (driver 550, GPU 8.9) -> torch {packages['torch']}, "
               f"{len(packages)} distributions, warm, {runs} rounds",
               times, "cudaresolve lock", ["uv pip compile", "pip install --dry-run --report"])
        report("  the same rounds, a miss of the lock's result cache (its entry removed; pages and facts warm)",
               {"cudaresolve lock, result cache miss": times["cudaresolve lock, result cache miss"], "uv pip compile": times["uv pip compile"]},
               "cudaresolve lock, result cache miss", ["uv pip compile"])
        print(f"  uv's pins differ from the lock's: {differ}" if differ else "  uv resolves the same pins as the lock")
    finally:
        served.stop()


def registry(runner: str, runs: int, scratch: Path) -> None:
    # a target with pip: with no --index-url, pip's default index is asked of the target's pip
    venv.EnvBuilder(with_pip=True).create(scratch / "registry-target")
    python = str(scratch / "registry-target" / "bin" / "python")
    base = [runner, "-m", "cudaresolve", "lock", "-q", "-o", str(scratch / "pylock.registry.toml"),
            "--python", python, "--driver", "550.144.03", "--gpu", "8.6", *REGISTRY]
    primed = scratch / "cache-primed"
    Command(base, clean_environ(CUDARESOLVE_CACHE_DIR=str(primed))).run()
    cold_cache = scratch / "cache-cold"

    def empty_cache() -> None:
        shutil.rmtree(cold_cache, ignore_errors=True)
        shutil.copytree(primed / "pip-default-index", cold_cache / "pip-default-index")

    pip = [python, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet", "--report", "-", *REGISTRY]
    compile_ = [uv(), "pip", "compile", "--no-config", "--python", python, "-"]
    uv_environ = clean_environ(UV_CACHE_DIR=str(scratch / "uv-cache"))
    times = rounds({
        "cudaresolve lock, cold": Command(base, clean_environ(CUDARESOLVE_CACHE_DIR=str(cold_cache)), before=empty_cache),
        "uv pip compile, cold": Command(compile_ + ["--no-cache"], uv_environ, "\n".join(REGISTRY)),
        "pip install --dry-run --report, cold": Command(pip + ["--no-cache-dir"], clean_environ(PIP_CONFIG_FILE=os.devnull)),
    }, runs)
    report(f"registry, {' '.join(REGISTRY)} (driver 550, GPU 8.6), cold, {runs} rounds", times, "cudaresolve lock, cold",
           ["uv pip compile, cold", "pip install --dry-run --report, cold"])
    times = rounds({
        "cudaresolve lock, warm": Command(base, clean_environ(CUDARESOLVE_CACHE_DIR=str(primed))),
        "uv pip compile, warm": Command(compile_, uv_environ, "\n".join(REGISTRY)),
        "pip install --dry-run --report, warm": Command(pip, clean_environ(PIP_CONFIG_FILE=os.devnull)),
    }, runs)
    report(f"registry, the same, warm, {runs} rounds", times, "cudaresolve lock, warm",
           ["uv pip compile, warm", "pip install --dry-run --report, warm"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=9, help="interleaved rounds (default 9)")
    parser.add_argument("--runner", metavar="PY", default=sys.executable, help="the interpreter cudaresolve runs in")
    parser.add_argument("--skip-registry", action="store_true")
    args = parser.parse_args()
    print(f"{len(os.sched_getaffinity(0))} CPUs, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the start")
    scratch = Path(tempfile.mkdtemp(prefix="bench-lock-"))
    try:
        local(args.runner, args.runs, scratch)
        if not args.skip_registry:
            registry(args.runner, args.runs, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} at the end")


if __name__ == "__main__":
    main()
