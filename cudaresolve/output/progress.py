"""Progress on stderr: downloads (the size first, then a bar on a terminal, one line per file
elsewhere), the doctor reading a file, and the lock judging a resolved set.

May import: resolve/resolver.py and resolve/targets.py (the progress event and its target, for types
only: inspect needs no resolver).
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING, Callable, Optional, TextIO

if TYPE_CHECKING:
    from cudaresolve.resolve.resolver import Judging
    from cudaresolve.resolve.targets import LockTarget

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


def judging_progress(judging: Judging, target: LockTarget) -> str:
    """`judging 13 distributions on 2 hosts for x86_64, Python 3.12, glibc 2.35` (`on 1 class of 2,000
    hosts` when the fleet folded): said once per target."""
    hosts = counted(judging.hosts, "host")
    if target.host_count > judging.hosts:
        hosts = f"{counted(judging.hosts, 'class', 'classes')} of {target.host_count:,} hosts"
    return (f"judging {counted(judging.distributions, 'distribution')} on {hosts} "
            f"for {target.machine}, Python {'%d.%d' % target.python}" + (", glibc %d.%d" % target.glibc if target.glibc else ""))


def counted(number: int, noun: str, plural: str = "") -> str:
    """`1 distribution`, `2 distributions` (`plural` when it is not the noun with an s)."""
    return f"{number} {noun}" if number == 1 else f"{number} {plural or noun + 's'}"


def reading_progress(stream: TextIO) -> Callable[[str], None]:
    """The doctor's progress on a terminal: the file being read, on one line (`done` clears it)."""

    def report(path: str) -> None:
        stream.write(f"\r\033[Kreading {os.path.basename(path)}")
        stream.flush()

    return report


def reading_done(stream: TextIO) -> None:
    stream.write("\r\033[K")
