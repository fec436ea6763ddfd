"""Where cudaresolve's caches live, and how their entries are written and read back.

The facts cache (env/cache.py) and the doctor's result cache (results.py) both keep one file per
entry, written to a temporary file and moved into place with os.replace, so a reader sees a whole
entry or none. This module imports nothing heavy: a cached doctor run reads its entry before it
knows whether it needs anything more.
"""

from __future__ import annotations

import contextlib
import io
import os
import pickle
from typing import Mapping, Optional


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


class _PlainUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> type:
        raise pickle.UnpicklingError(f"{module}.{name}: this entry holds plain values only")


def dumps_plain(header: bytes, value: object) -> bytes:
    """`value` (tuples, strings, numbers, None) after `header`, as bytes `loads_plain` reads back."""
    return header + pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


def loads_plain(header: bytes, data: bytes) -> Optional[object]:
    """What `dumps_plain(header, ...)` wrote, or None for anything else: another header (format or
    version), garbage, trailing bytes, or a pickle naming any class, which is never unpickled."""
    if not data.startswith(header):
        return None
    stream = io.BytesIO(data)
    stream.seek(len(header))
    try:
        value = _PlainUnpickler(stream).load()
    except Exception:  # noqa: BLE001 - garbage can fail to unpickle in any way; the caller reads again
        return None
    return None if stream.read(1) else value
