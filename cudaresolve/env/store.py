"""How cache entries of plain values are written and read back; where caches live and how an entry
is written (`default_cache_dir`, `store_entry`) is cudaresolve/caches.py's, below the knowledge
tables, which cache themselves too (knowledge/compiled.py).

The facts cache (env/cache.py) and the doctor's result cache (commands/result_cache.py) both keep one file per
entry, written to a temporary file and moved into place with os.replace, so a reader sees a whole
entry or none. This module imports nothing heavy: a cached doctor run reads its entry before it
knows whether it needs anything more.
"""

from __future__ import annotations

import io
import pickle
from typing import Optional

from cudaresolve.caches import default_cache_dir, store_entry

__all__ = ["default_cache_dir", "store_entry", "dumps_plain", "loads_plain"]


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
