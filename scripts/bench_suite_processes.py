"""Run the test suite and sum the processes its tests start, by kind: pip, uv, conda, gcc, ensurepip, ...

Usage: python scripts/bench_suite_processes.py LOG [pytest arguments...]

Runs `python -m pytest -p bench_suite_processes ARGUMENTS` with this file as a pytest plugin in every
process that runs tests (xdist workers too): each subprocess a test starts is written to LOG as a JSON
line (its kind, the test, wall seconds, and the CPU seconds, user + system, of it and what it waited
for: the growth of RUSAGE_CHILDREN across its reaping). Then prints a table by kind. What the pytest
processes do themselves (the tool called in-process, hypothesis, collection) is the rest of the
run's CPU, which `/usr/bin/time -v` over the whole command gives. The plugin's folder is dropped from
PYTHONPATH once tests run, so the interpreters the tests start see the environment they would.
"""

from __future__ import annotations

import collections
import json
import os
import resource
import subprocess
import sys
import threading
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
LOG = os.environ.get("BENCH_SUITE_PROCESSES_LOG")
_written = threading.Lock()
_running = {"test": ""}


def kind(args: Any) -> str:
    """A process's kind from its argument list: the tool it runs, and pip's command."""
    words = [os.fspath(a) for a in args] if isinstance(args, (list, tuple)) else [os.fspath(args)]
    program, rest = os.path.basename(words[0]), words[1:]
    if program == "uv":
        return "uv"
    if program in ("gcc", "cc", "objcopy", "ld"):
        return "gcc, objcopy"
    if program in ("ldd", "readelf", "objdump", "nm"):
        return "readelf, ldd"
    if "python" not in program:
        return "other"
    module = rest[rest.index("-m") + 1] if "-m" in rest[:-1] else None
    if module == "pip":
        command = [w for w in rest[rest.index("-m") + 2:] if not w.startswith("-")]
        return "pip " + command[0] if command and "/" not in command[0] else "pip, other commands"
    if module in ("conda", "conda_index"):
        return "conda, conda-index"
    if module in ("ensurepip", "venv"):
        return module
    if module is not None and module.startswith("cudaresolve"):
        return "cudaresolve in its own process"
    return "python -c, other scripts"


def _install() -> None:
    started = subprocess.Popen.__init__
    reaped = subprocess.Popen._try_wait  # type: ignore[attr-defined]

    def init(self: subprocess.Popen, args: Any, *rest: Any, **options: Any) -> None:  # type: ignore[type-arg]
        self._bench = (kind(args), _running["test"], time.perf_counter())  # type: ignore[attr-defined]
        started(self, args, *rest, **options)

    def try_wait(self: subprocess.Popen, flags: int) -> tuple[int, int]:  # type: ignore[type-arg]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        pid, status = reaped(self, flags)
        what = getattr(self, "_bench", None)
        if pid == self.pid and LOG and what is not None and what[1]:
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
            line = json.dumps({"kind": what[0], "test": what[1], "wall": time.perf_counter() - what[2], "cpu": cpu})
            with _written, open(LOG, "a") as log:
                log.write(line + "\n")
        return pid, status

    subprocess.Popen.__init__ = init  # type: ignore[method-assign]
    subprocess.Popen._try_wait = try_wait  # type: ignore[attr-defined]


def pytest_configure(config: Any) -> None:
    _install()


def pytest_runtest_setup(item: Any) -> None:
    _running["test"] = item.nodeid
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != HERE]
    if paths:
        os.environ["PYTHONPATH"] = os.pathsep.join(paths)
    else:
        os.environ.pop("PYTHONPATH", None)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    log, arguments = os.path.abspath(argv[0]), argv[1:]
    environ = dict(os.environ, BENCH_SUITE_PROCESSES_LOG=log,
                   PYTHONPATH=os.pathsep.join(p for p in (HERE, os.environ.get("PYTHONPATH")) if p))
    code = subprocess.call([sys.executable, "-m", "pytest", "-p", "bench_suite_processes", *arguments], env=environ)
    totals: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0.0])
    with open(log) as lines:
        for line in lines:
            entry = json.loads(line)
            row = totals[entry["kind"]]
            row[0] += 1
            row[1] += entry["wall"]
            row[2] += entry["cpu"]
    print(f"{'kind':34s} {'runs':>6s} {'wall s':>9s} {'CPU s':>8s}")
    for name, (runs, wall, cpu) in sorted(totals.items(), key=lambda item: -item[1][2]):
        print(f"{name:34s} {int(runs):6d} {wall:9.1f} {cpu:8.1f}")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
