"""`cudaresolve lock` beside `pip install --dry-run --report` and `uv pip compile`, each a fresh
process, medians of `--runs`:

1. the tests' generated CUDA universe (tests/fake_cuda_index.py) served on 127.0.0.1, `torch cupy`
   for driver 550.144.03 / GPU 8.9, warm caches (each tool run once before timing);
2. `cupy-cuda12x==14.2.0 cuda-cccl[cu12]==1.2.1` from the registry pip is configured with, cold
   (empty caches: --no-cache-dir for pip, --no-cache for uv, a new CUDARESOLVE_CACHE_DIR with pip's
   default index already known) and warm.

    python scripts/bench_lock.py [--runs 5] [--skip-registry]

pip and uv are given the indexes the lock used (for torch, the variant index it chose) and resolve
the same requirements; they choose no variant and judge nothing, so they do less work. uv comes from
the registry into a cached venv (~/.cache/cudaresolve-bench). Figures: docs/performance.md.
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

ROOT = Path(__file__).resolve().parent.parent
UV_VERSION = "0.13.9"
REGISTRY = ["cupy-cuda12x==14.2.0", "cuda-cccl[cu12]==1.2.1"]


def clean_environ(**extra: str) -> dict:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_", "CUDARESOLVE_"))}
    environ.update(extra)
    return environ


def timed(command: list[str], environ: dict, runs: int) -> tuple[float, str]:
    times, out = [], ""
    for _ in range(runs):
        start = time.perf_counter()
        done = subprocess.run(command, env=environ, capture_output=True, text=True)
        times.append(time.perf_counter() - start)
        if done.returncode:
            raise SystemExit(f"{' '.join(command[:4])} ... failed:\n{done.stderr[-2000:]}")
        out = done.stdout
    return statistics.median(times), out


def uv() -> str:
    home = Path.home() / ".cache" / "cudaresolve-bench" / f"uv-{UV_VERSION}"
    binary = home / "bin" / "uv"
    if not binary.exists():
        venv.EnvBuilder(with_pip=True).create(home)
        subprocess.run([str(home / "bin" / "python"), "-m", "pip", "install", "-q", f"uv=={UV_VERSION}"], check=True)
    return str(binary)


def empty_python(scratch: Path) -> str:
    venv.EnvBuilder(with_pip=False).create(scratch / "target")
    return str(scratch / "target" / "bin" / "python")


def local(runs: int, scratch: Path) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from fake_cuda_index import build_universe, serve

    served = serve(build_universe())
    try:
        python = empty_python(scratch)
        cache = str(scratch / "cache-local")
        environ = clean_environ(PIP_CONFIG_FILE=os.devnull, CUDARESOLVE_CACHE_DIR=cache)
        lock = [sys.executable, "-m", "cudaresolve", "lock", "-q", "--json", "-o", str(scratch / "pylock.toml"),
                "--python", python, "--index-url", served.index_url, "--torch-index-base", served.torch_index_base,
                "--driver", "550.144.03", "--gpu", "8.9", "torch", "cupy"]
        timed(lock, environ, 1)
        ours, report = timed(lock, environ, runs)
        packages = {p["name"]: p for p in json.loads(report)["packages"]}
        variant = packages["torch"]["version"].split("+")[1]
        wanted = ["torch", packages.get("cupy-cuda12x") and "cupy-cuda12x" or "cupy-cuda13x"]
        indexes = ["--index-url", served.variant_index(variant), "--extra-index-url", served.index_url]
        pip = [python.replace("target", "pip-target"), "-m", "pip", "install", "--dry-run", "--ignore-installed",
               "--quiet", "--report", "-", *indexes, *wanted]
        venv.EnvBuilder(with_pip=True).create(scratch / "pip-target")
        timed(pip, environ, 1)
        pip_time, _ = timed(pip, environ, runs)
        uv_cmd = [uv(), "pip", "compile", "--no-config", "--python", python, "--index-strategy", "unsafe-best-match",
                  "--default-index", served.index_url, "--index", served.variant_index(variant), "-"]
        uv_env = clean_environ(UV_CACHE_DIR=str(scratch / "uv-cache"))

        def uv_run() -> float:
            start = time.perf_counter()
            subprocess.run(uv_cmd, input="\n".join(wanted), env=uv_env, capture_output=True, text=True, check=True)
            return time.perf_counter() - start

        uv_run()
        uv_time = statistics.median(uv_run() for _ in range(runs))
        print(f"local universe, torch cupy (driver 550, GPU 8.9) -> torch {packages['torch']['version']}, {len(packages)} distributions")
        print(f"  cudaresolve lock, warm: {ours:.3f} s")
        print(f"  pip install --dry-run --report, warm: {pip_time:.3f} s")
        print(f"  uv pip compile, warm: {uv_time:.3f} s")
    finally:
        served.stop()


def registry(runs: int, scratch: Path) -> None:
    # a target with pip: with no --index-url, pip's default index is asked of the target's pip
    venv.EnvBuilder(with_pip=True).create(scratch / "registry-target")
    python = str(scratch / "registry-target" / "bin" / "python")
    base = [sys.executable, "-m", "cudaresolve", "lock", "-q", "-o", str(scratch / "pylock.registry.toml"),
            "--python", python, "--driver", "550.144.03", "--gpu", "8.6", *REGISTRY]
    primed = str(scratch / "cache-primed")
    timed(base, clean_environ(CUDARESOLVE_CACHE_DIR=primed), 1)
    cold = []
    for run in range(runs):
        cache = scratch / f"cache-cold-{run}"
        shutil.copytree(Path(primed) / "pip-default-index", cache / "pip-default-index")
        cold.append(timed(base, clean_environ(CUDARESOLVE_CACHE_DIR=str(cache)), 1)[0])
    warm, _ = timed(base, clean_environ(CUDARESOLVE_CACHE_DIR=primed), runs)
    pip = [python, "-m", "pip", "install", "--dry-run", "--ignore-installed",
           "--quiet", "--report", "-", *REGISTRY]
    pip_cold, _ = timed(pip + ["--no-cache-dir"], clean_environ(PIP_CONFIG_FILE=os.devnull), runs)
    pip_warm, _ = timed(pip, clean_environ(PIP_CONFIG_FILE=os.devnull), runs)
    uv_cmd = [uv(), "pip", "compile", "--no-config", "--python", python, "-"]

    def uv_run(*flags: str) -> float:
        start = time.perf_counter()
        subprocess.run(uv_cmd + list(flags), input="\n".join(REGISTRY), env=clean_environ(UV_CACHE_DIR=str(scratch / "uv-cache")),
                       capture_output=True, text=True, check=True)
        return time.perf_counter() - start

    uv_cold = statistics.median(uv_run("--no-cache") for _ in range(runs))
    uv_run()
    uv_warm = statistics.median(uv_run() for _ in range(runs))
    print(f"registry, {' '.join(REGISTRY)} (driver 550, GPU 8.6):")
    print(f"  cudaresolve lock: cold {statistics.median(cold):.3f} s, warm {warm:.3f} s")
    print(f"  pip install --dry-run --report: cold {pip_cold:.3f} s, warm {pip_warm:.3f} s")
    print(f"  uv pip compile: cold {uv_cold:.3f} s, warm {uv_warm:.3f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--skip-registry", action="store_true")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="bench-lock-"))
    try:
        local(args.runs, scratch)
        if not args.skip_registry:
            registry(args.runs, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
