"""A hostile index on 127.0.0.1 (tests/hostile_index.py) against `cudaresolve lock` in a child process:
each way of misbehaving must stop with exit 3 and one line naming the URL and the limit, within 30 s,
with the child's peak memory under 300 MB and the cache grown by less than 50 MB. Measured from the
outside: the child's ru_maxrss, taken by scripts/peak_rss.py (forked from pytest itself, the child would
inherit pytest's resident size as its starting peak), and the cache directory's size before and after.

Most modes run with the real limits of index/limits.py (an endless page is cut at 64 MiB, a
METADATA at 16 MiB); the two whose real limit is a matter of time or gigabytes (a trickle, a download
of unstated size) lower that one limit in the child, so the test stays fast.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass

import pytest
from conftest import hermetic_environ
from hostile_index import MODES, HostileIndex

SECONDS, MEGABYTES, CACHE_MEGABYTES = 30, 300, 50
PEAK_RSS = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "peak_rss.py")

# mode -> (limits lowered in the child, what the one line must say)
EXPECTED = {
    "endless-page": ({}, "over the limit of 64 MiB for a project page"),
    "endless-html-page": ({}, "over the limit of 64 MiB for a project page"),
    "trickle-headers": ({"request_seconds": 2.0}, "too slow, 0 bytes in 2 s (the limit: an answer within 2 s"),
    "trickle-body": ({"request_seconds": 2.0}, "too slow"),
    "endless-wheel": ({}, "over the limit of"),
    "endless-wheel-unsized": ({"download_bytes": 32 << 20}, "over the limit of 32 MiB for a file of unstated size"),
    "endless-metadata": ({}, "over the limit of 16 MiB for a metadata file"),
    "metadata-bomb": ({}, "claims 1,073,741,824 bytes, over the limit of 16 MiB for a metadata file"),
    "metadata-lies": ({}, "METADATA is damaged (Bad CRC-32"),
    "metadata-claims-4gb": ({}, "claims 4,000,000,000 bytes, over the limit of 16 MiB for a metadata file"),
    "directory-claims-3gb": ({}, "its zip directory is larger than 8 MiB"),
    "file-link": ({}, "refusing its link to file:///dev/zero"),
}


@dataclass(frozen=True)
class Outcome:
    code: int
    seconds: float
    peak_megabytes: float
    cache_megabytes: float
    stderr: str


@pytest.fixture(scope="module")
def hostile():
    index = HostileIndex()
    index.start()
    yield index
    index.stop()


def run_lock(index_url: str, python: str, cache: str, limits: dict) -> Outcome:
    """`cudaresolve lock demo` in a child process with `limits` replacing those fields of index/limits.py."""
    script = (
        "import dataclasses, sys; import cudaresolve.index.limits as limits; "
        f"limits.DEFAULT = dataclasses.replace(limits.DEFAULT, **{limits!r}); "
        "from cudaresolve.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    args = ["lock", "-q", "--python", python, "--index-url", index_url, "--driver", "550.144.03", "-o", "-", "demo"]
    env = hermetic_environ({"CUDARESOLVE_CACHE_DIR": cache, "PIP_DEFAULT_TIMEOUT": "1"})
    os.makedirs(cache, exist_ok=True)
    before = _size(cache)
    report = os.path.join(cache, "..", "report.json")
    with open(os.path.join(cache, "..", "stderr"), "w+b") as stderr:
        started = time.monotonic()
        subprocess.run(
            [sys.executable, PEAK_RSS, "--report", report, "--kill-after", str(3 * SECONDS),
             "--address-space-limit", str(4 << 30), "--", sys.executable, "-c", script, *args],
            env=env, stdout=subprocess.DEVNULL, stderr=stderr, check=True,
        )
        seconds = time.monotonic() - started
        stderr.seek(0)
        text = stderr.read().decode("utf-8", "replace")
    with open(report, encoding="utf-8") as file:
        measured = json.load(file)
    return Outcome(measured["code"], seconds, measured["peak_kib"] / 1024, (_size(cache) - before) / 1e6, text)


def _size(directory: str) -> int:
    return sum(os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(directory) for name in names)


@pytest.mark.parametrize("mode", MODES)
def test_a_hostile_index_is_stopped_in_bounded_time_memory_and_disk(mode, hostile, empty_python, tmp_path):
    limits, says = EXPECTED[mode]
    outcome = run_lock(f"{hostile.url}/{mode}/simple", empty_python, str(tmp_path / "cache"), limits)
    print(f"{mode}: exit {outcome.code} in {outcome.seconds:.1f} s, peak {outcome.peak_megabytes:.0f} MB, "
          f"cache +{outcome.cache_megabytes:.2f} MB: {outcome.stderr.strip()[:160]}")
    lines = outcome.stderr.strip().splitlines()
    assert outcome.code == 3 and len(lines) == 1 and "Traceback" not in outcome.stderr, outcome.stderr
    assert lines[0].startswith("cudaresolve: error: ") and says in lines[0]
    assert f"{hostile.url}/{mode}/" in lines[0]
    assert outcome.seconds < SECONDS
    assert outcome.peak_megabytes < MEGABYTES
    assert outcome.cache_megabytes < CACHE_MEGABYTES


def test_the_peak_measured_is_the_commands_own_not_the_test_processs(tmp_path):
    """A 300 MB test process must not make a 10 MB command look like 300 MB (it did in CI, forked
    straight from pytest), and a command that takes 200 MB must be seen taking it."""
    ballast = bytearray(300 << 20)
    ballast[:: 1 << 12] = b"\1" * len(range(0, len(ballast), 1 << 12))  # touch every page: resident
    report = str(tmp_path / "report.json")

    def peak(code: str) -> float:
        subprocess.run([sys.executable, PEAK_RSS, "--report", report, "--", sys.executable, "-c", code], check=True)
        with open(report, encoding="utf-8") as file:
            measured = json.load(file)
        assert measured["code"] == 0
        return measured["peak_kib"] / 1024

    idle, busy = peak("pass"), peak("b = bytearray(200 << 20); b[::4096] = bytes(len(b) // 4096)")
    del ballast
    assert idle < 60 and 200 < busy < 260, (idle, busy)
