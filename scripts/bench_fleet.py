"""`cudaresolve lock --hosts-from-nodes` for a generated cluster of N GPU nodes that differ only in
labels the judge ignores (each node its own GPU memory figure), then `lock --check` of what it
wrote against the same list: each a fresh process launched through scripts/peak_rss.py, so the
figures are the command's own wall time and peak RSS. The index is tests/index_server.py on
127.0.0.1 serving one pure-Python wheel.

    python scripts/bench_fleet.py [--nodes 10000] [--kill-after 900]

Figures: docs/performance.md ("Fleets").
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def node(i: int) -> dict:
    """One A100 node as GPU Feature Discovery labels it; only its name and its GPU memory differ."""
    labels = {
        "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
        "nvidia.com/cuda.driver.major": "550", "nvidia.com/cuda.driver.minor": "90", "nvidia.com/cuda.driver.rev": "07",
        "nvidia.com/cuda.runtime.major": "12", "nvidia.com/cuda.runtime.minor": "4",
        "nvidia.com/gpu.compute.major": "8", "nvidia.com/gpu.compute.minor": "0", "nvidia.com/gpu.count": "8",
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/gpu.memory": str(40000 + i),
    }
    return {"kind": "Node", "metadata": {"name": f"gpu-{i}", "labels": labels}}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10000)
    parser.add_argument("--kill-after", type=float, default=900)
    args = parser.parse_args(argv)
    from index_server import IndexServer, make_wheel

    server = IndexServer()
    server.add(*make_wheel("app", "1.0"))
    server.start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            venv.create(work / "venv", with_pip=False)
            nodes = work / "nodes.json"
            nodes.write_text(json.dumps({"kind": "List", "items": [node(i) for i in range(1, args.nodes + 1)]}))
            lock = work / "pylock.toml"
            environ = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_", "CUDARESOLVE_"))}
            environ.update(PIP_CONFIG_FILE=os.devnull, CUDARESOLVE_CACHE_DIR=str(work / "cache"))
            runs = {
                "lock": ["lock", "app", "--python", str(work / "venv" / "bin" / "python"), "--index-url",
                         server.url + "/simple", "--hosts-from-nodes", str(nodes), "-o", str(lock), "-q"],
                "lock --check": ["lock", "--check", str(lock), "--hosts-from-nodes", str(nodes), "-q"],
            }
            print(f"{args.nodes} nodes, node list {nodes.stat().st_size / 1e6:.1f} MB")
            for what, command in runs.items():
                report = work / "report.json"
                started = time.perf_counter()
                subprocess.run([sys.executable, str(ROOT / "scripts" / "peak_rss.py"), "--report", str(report),
                                "--kill-after", str(args.kill_after), "--", sys.executable, "-m", "cudaresolve", *command],
                               cwd=work, env=environ, stdout=subprocess.DEVNULL)
                seconds = time.perf_counter() - started
                measured = json.loads(report.read_text())
                size = f", lock file {lock.stat().st_size / 1e3:.1f} kB" if what == "lock" and lock.exists() else ""
                print(f"{what}: exit {measured['code']}, {seconds:.1f} s, peak RSS {measured['peak_kib'] / 1024:.0f} MB{size}")
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
