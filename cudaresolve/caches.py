"""Where cudaresolve's caches live, and how an entry is written so a reader sees all of it or none.

Every cache (the knowledge tables compiled, the ELF facts, the doctor's results, the index) keeps
one file per entry, written to a temporary file in its directory and moved into place with
os.replace. Standard library only: the lowest rooms use it.
"""

from __future__ import annotations

import contextlib
import os
import stat
from typing import Mapping, Optional

# The most an entry may hold: a library's facts are at most a few MB (libtorch_cuda's symbols), a
# compiled table under 1 MB. A larger file is not ours, and is a miss rather than memory taken.
MAX_ENTRY = 256 << 20


def default_cache_dir(environ: Mapping[str, str]) -> str:
    """$CUDARESOLVE_CACHE_DIR, else $XDG_CACHE_HOME/cudaresolve, else ~/.cache/cudaresolve."""
    explicit = environ.get("CUDARESOLVE_CACHE_DIR")
    if explicit:
        return explicit
    xdg = environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):  # the XDG spec says to ignore a relative value
        return os.path.join(xdg, "cudaresolve")
    return os.path.join(environ.get("HOME") or os.path.expanduser("~"), ".cache", "cudaresolve")


def read_entry(entry: str, limit: Optional[int] = None) -> Optional[bytes]:
    """The bytes of the cache file `entry`, or None when it is absent, unreadable, not a regular
    file (a FIFO planted there would block the read) or larger than `limit` (MAX_ENTRY): every such
    entry is a miss. The same reading as bounded.read_bounded(regular=True), kept here so a cached
    doctor run does not import bounded.py (subprocess, selectors, tomllib) before it knows it needs them."""
    limit = MAX_ENTRY if limit is None else limit
    try:
        fd = os.open(entry, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except (OSError, ValueError):
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with open(fd, "rb", closefd=False) as stream:
            data = stream.read(limit + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    return data if len(data) <= limit else None


def store_entry(entry: str, data: bytes) -> None:
    """Write `data` to the file `entry` through a temporary file in its directory and os.replace;
    OSError when the directory cannot be written. Whatever stood at `entry` is replaced, a directory
    too (os.replace cannot move a file over one), so an entry read_entry refused heals."""
    import tempfile  # a run that only reads the caches does without it

    directory = os.path.dirname(entry)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        try:
            os.replace(temporary, entry)
        except IsADirectoryError:
            import shutil

            shutil.rmtree(entry)
            os.replace(temporary, entry)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
