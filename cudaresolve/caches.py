"""Where cudaresolve's caches live, and how an entry is written so a reader sees all of it or none.

Every cache (the knowledge tables compiled, the ELF facts, the doctor's results, the index) keeps
one file per entry, written to a temporary file in its directory and moved into place with
os.replace. Standard library only: the lowest rooms use it.
"""

from __future__ import annotations

import contextlib
import os
from typing import Mapping


def default_cache_dir(environ: Mapping[str, str]) -> str:
    """$CUDARESOLVE_CACHE_DIR, else $XDG_CACHE_HOME/cudaresolve, else ~/.cache/cudaresolve."""
    explicit = environ.get("CUDARESOLVE_CACHE_DIR")
    if explicit:
        return explicit
    xdg = environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):  # the XDG spec says to ignore a relative value
        return os.path.join(xdg, "cudaresolve")
    return os.path.join(environ.get("HOME") or os.path.expanduser("~"), ".cache", "cudaresolve")


def store_entry(entry: str, data: bytes) -> None:
    """Write `data` to the file `entry` through a temporary file in its directory and os.replace;
    OSError when the directory cannot be written."""
    import tempfile  # a run that only reads the caches does without it

    directory = os.path.dirname(entry)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=directory, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(temporary, entry)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
