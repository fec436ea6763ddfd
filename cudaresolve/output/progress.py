"""Progress on stderr: downloads (the size first, then a bar on a terminal, one line per file
elsewhere) and the lock's judging of each resolved set.

May import: resolve/resolver.py (its progress event, for types only: inspect needs no resolver).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Callable, Optional, TextIO

if TYPE_CHECKING:
    from cudaresolve.resolve.resolver import Judging

WIDTH = 30


def download_progress(stream: TextIO) -> Callable[[str, int, Optional[int]], None]:
    """A `Progress` callback for index downloads that writes to `stream` (usually sys.stderr)."""
    interactive = stream.isatty()
    lock = threading.Lock()  # downloads may run in the index's worker threads
    shown: dict[str, int] = {}  # filename -> last percentage drawn

    def report(filename: str, done: int, total: Optional[int]) -> None:
        with lock:
            if done == 0 and filename not in shown:
                size = f"{megabytes(total)}" if total is not None else "size unknown"
                stream.write(f"downloading {filename} ({size})\n")
                shown[filename] = -1
            elif interactive and total:
                percent = done * 100 // total
                if percent != shown.get(filename):
                    filled = WIDTH * done // total
                    stream.write(f"\r  [{'#' * filled}{'.' * (WIDTH - filled)}] {percent:3d}% {megabytes(done)}")
                    shown[filename] = percent
                    if done >= total:
                        stream.write("\n")
            stream.flush()

    return report


def megabytes(size: Optional[int]) -> str:
    return "?" if size is None else f"{size / 1e6:,.1f} MB"


def judging_progress(judging: Judging) -> str:
    return f"judging {judging.distributions} distributions on {judging.hosts} host(s)"
