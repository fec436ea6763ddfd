"""Measure reading pip's configuration ourselves against asking pip for it in a subprocess.

Usage: python scripts/bench_index_config.py [PYTHON] [RUNS]
PYTHON is the target interpreter (default: this one), RUNS the number of runs (default 9). Every
figure is the median wall time of RUNS runs, in this machine's environment and pip configuration.
Numbers go to stdout; the conclusion lives in cudaresolve/index/config.py's docstring and the figures
in docs/performance.md.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable

from cudaresolve.env.interpreter import target_for_python
from cudaresolve.index.config import (
    IndexSettings,
    index_config,
    pip_config_paths,
    pip_install_help,
    pip_settings,
    read_pip_files,
)


def median(fn: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    python = sys.argv[1] if len(sys.argv) > 1 else sys.executable
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 9
    target = target_for_python(python)
    environ = dict(os.environ)

    def read_and_merge() -> None:
        pip_settings(read_pip_files(pip_config_paths(target.prefix, environ)), environ)

    def pip_config_list() -> None:
        subprocess.run([target.python, "-m", "pip", "config", "list"], env=environ, capture_output=True, check=True)

    with tempfile.TemporaryDirectory() as cache:
        warm_environ = {**environ, "CUDARESOLVE_CACHE_DIR": cache}

        def whole_config() -> None:
            index_config(target.python, target.prefix, warm_environ, os.getcwd(), IndexSettings(), site_packages=target.site_packages)

        whole_config()  # fills the default-index cache
        rows = [
            ("read and merge pip's files and PIP_* variables ourselves", median(read_and_merge, runs)),
            ("index_config(), default index cached (+ pyproject.toml, validation)", median(whole_config, runs)),
            ("`python -m pip config list` in a subprocess", median(pip_config_list, runs)),
            ("`python -m pip install --help` (the default index, once per pip version)", median(lambda: pip_install_help(target.python, environ), runs)),
        ]
    print(f"target {target.python}, median of {runs} runs")
    for what, seconds in rows:
        print(f"{seconds * 1000:10.2f} ms  {what}")


if __name__ == "__main__":
    main()
