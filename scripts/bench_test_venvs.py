"""Build the test suite's venvs two ways from the same wheels and time them: pip (`--no-compile`, the
anchor), then links into a store, against `uv pip install --link-mode=hardlink --offline` (the
tests' way, tests/wheel_cache.py), then the same links.

Usage: python scripts/bench_test_venvs.py SCRATCH [--cache CACHE] [--uv UV] [--ways pip,uv]

The recipes are the venvs the test cache CACHE holds (their `.complete` markers: dependencies or
not, then the requirements; CACHE as scripts/test_cache.py finds it). Their wheels are fetched
once into SCRATCH/wheels (pip download, not timed). Each way then builds every venv, one after the
other as a cold test run does, into its own SCRATCH/<way>/ with its own store; uv's cache lives in
SCRATCH/<way>/uv-cache for the run, as a session's downloads do. Printed: seconds per venv for the
installer and for the links, and each way's disk (venvs and store, each file once; uv's cache
apart), which is then deleted. uv is the `uv` on PATH unless --uv names one.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import wheel_cache  # noqa: E402


def recipes(cache: Path) -> list[tuple[bool, list[str]]]:
    found = []
    for marker in sorted((cache / "venvs").glob("*/.complete")):
        lines = [line for line in marker.read_text().splitlines() if line]
        if len(lines) > 2 and lines[0].startswith("python ") and lines[1] in ("with dependencies", "no dependencies"):
            found.append((lines[1] == "with dependencies", lines[2:]))
    return found


def fetch(scratch: Path, index: int, deps: bool, requirements: list[str]) -> list[Path]:
    target = scratch / "wheels" / str(index)
    done = target / ".complete"
    if not done.exists():
        shutil.rmtree(target, ignore_errors=True)
        command = wheel_cache.PIP + ["download", "--only-binary=:all:", "-q", "-d", str(target), *requirements]
        if not deps:
            command.insert(len(wheel_cache.PIP) + 1, "--no-deps")
        subprocess.run(command, check=True)
        done.touch()
    return sorted(target.glob("*.whl"))


def disk(root: Path, skip: str = "") -> int:
    """Bytes of disk under `root`, each inode once (as du)."""
    seen, total = set(), 0
    for directory, dirs, names in os.walk(root):
        if skip:
            dirs[:] = [d for d in dirs if d != skip]
        for name in dirs + names:
            st = os.lstat(os.path.join(directory, name))
            if (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                total += st.st_blocks * 512
    return total


def build(way: str, root: Path, venv: Path, wheels: list[Path], uv: str) -> tuple[float, float]:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    if way == "pip":
        command = wheel_cache.PIP + ["--python", python, "install", "-q", "--no-deps", "--no-index", "--no-compile", *map(str, wheels)]
    else:
        command = [uv, "pip", "install", "-q", "--no-config", "--python", python, "--offline", "--no-index", "--no-deps",
                   "--link-mode=hardlink", "--cache-dir", str(root / "uv-cache"), *map(str, wheels)]
    subprocess.run(command, check=True)
    installed = time.perf_counter()
    wheel_cache.link_installed(venv)
    return installed - started, time.perf_counter() - installed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scratch", type=Path)
    parser.add_argument("--cache", type=Path, default=wheel_cache.CACHE)
    parser.add_argument("--uv", default=shutil.which("uv") or "uv")
    parser.add_argument("--ways", default="pip,uv")
    args = parser.parse_args()
    plan = recipes(args.cache)
    if not plan:
        print(f"no venvs of this layout in {args.cache}", file=sys.stderr)
        return 1
    wheels = [fetch(args.scratch, i, deps, requirements) for i, (deps, requirements) in enumerate(plan)]
    print(f"{len(plan)} venvs, {sum(len(w) for w in wheels)} wheels, {sum(p.stat().st_size for w in wheels for p in w) / 1e9:.2f} GB "
          f"of wheels; load average {os.getloadavg()[0]:.2f}")
    seconds = {}
    for way in args.ways.split(","):
        root = args.scratch / way
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        wheel_cache.CACHE = root  # its store
        totals = [0.0, 0.0]
        for index, ((_deps, requirements), files) in enumerate(zip(plan, wheels)):
            install, link = build(way, root, root / "venvs" / str(index), files, args.uv)
            totals[0] += install
            totals[1] += link
            print(f"  {way:4} {install:6.1f} s install {link:5.1f} s links  {', '.join(requirements)[:70]}")
        venvs_and_store = disk(root, skip="uv-cache")
        with_cache = disk(root)
        print(f"{way}: {totals[0]:.1f} s installing + {totals[1]:.1f} s linking = {sum(totals):.1f} s; "
              f"venvs and store {venvs_and_store / 2**30:.2f} GiB (with the installer's cache {with_cache / 2**30:.2f} GiB); "
              f"load average {os.getloadavg()[0]:.2f}")
        shutil.rmtree(root)  # the next way starts from nothing
        seconds[way] = sum(totals)
    if "pip" in seconds and "uv" in seconds:
        print(f"uv takes {seconds['uv'] / seconds['pip']:.2f} of pip's time ({seconds['pip'] / seconds['uv']:.1f}x faster)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
