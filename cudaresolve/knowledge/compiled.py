"""The knowledge tables compiled once: what a table's loading function returns, kept as a pickle in
the user's cache, so a run unpickles it instead of parsing the TOML and checking every value again.

Why: parsing and checking data/*.toml was most of a warm lock (wheel_facts.toml alone: 0.25 s of
TOML and 0.45 s of checks); its entry loads in ~10 ms (figures: docs/performance.md, "Lock").

One entry per loading function, `<cache dir>/tables/<module>.<function>`, replaced whole when its key
changes (the directory does not grow with every edit of a table). The key: the sha256 of the table
file (and of any other table its checks read), cudaresolve's version and the identity (size,
mtime) of each of its modules (an edited checkout keeps its version, and the classes or the checks
may have changed), packaging's version (the checks parse with it) and the pickle protocol. An entry is the header, the key's digest, the
payload's sha256 and the payload; it is read back only when all of them match, through an unpickler
that builds only the dataclasses the table's module defines or imports, so a planted entry cannot
run code. Anything else (damaged, foreign, stale) is a miss: the table is parsed and checked as
before and the entry rewritten, atomically (caches.py). A table that does not check is never
stored; an unwritable cache costs speed, never the answer.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import io
import os
import pickle
import sys
from importlib import resources
from typing import Any, Callable, Mapping, Optional, TypeVar, cast

import cudaresolve
from cudaresolve.caches import default_cache_dir, read_entry, store_entry

FORMAT = 1
HEADER = f"cudaresolve-table {FORMAT} {cudaresolve.__version__}\n".encode()
_PROTOCOL = pickle.HIGHEST_PROTOCOL
_DIGEST = 32  # bytes of a sha256

_T = TypeVar("_T")
_D = TypeVar("_D")


def table(*names: str) -> Callable[[Callable[[], _T]], Callable[[], _T]]:
    """Decorate a table module's loading function (no arguments) of the data files `names` (more
    than one when its checks read another table): its result is computed once per process (as
    functools.lru_cache, whose cache_clear it keeps) and once per content of the files, the code and
    packaging across processes."""

    def decorate(load: Callable[[], _T]) -> Callable[[], _T]:
        @functools.lru_cache(maxsize=None)
        @functools.wraps(load)
        def cached() -> _T:
            return compiled(names, load)

        LOADERS.append((names, load))
        return cached

    return decorate


def derived(load: Callable[[], _T]) -> Callable[[Callable[[_T], _D]], Callable[[], _D]]:
    """Decorate a function of what `load()` returns (an index of its rows by name, so a lookup
    reads one name's rows rather than the whole table): computed once per result of `load()`, so
    again after its cache_clear."""

    def decorate(index: Callable[[_T], _D]) -> Callable[[], _D]:
        memo: list[Any] = [None, None]  # [load()'s result, its index]

        @functools.wraps(index)
        def cached() -> _D:
            value = load()
            if memo[0] is not value:
                memo[:] = [value, index(value)]
            return cast(_D, memo[1])

        return cached

    return decorate


LOADERS: list[tuple[tuple[str, ...], Callable[[], object]]] = []  # (files, function) of each decorated one, for tests


def compiled(names: tuple[str, ...], load: Callable[[], _T], environ: Optional[Mapping[str, str]] = None) -> _T:
    """`load()`, from its cache entry when that holds the result for this content of the files."""
    try:
        contents = [resources.files("cudaresolve.data").joinpath(name).read_bytes() for name in names]
    except OSError:
        return load()  # the loader says what is wrong with the file
    entry = entry_path(load, os.environ if environ is None else environ)
    key = _key(names, contents)
    found = _read(entry, key, _allowed(load))
    if found is not None:
        return cast(_T, found[0])  # stored from load()'s result under this key
    value = load()
    try:
        payload = pickle.dumps(value, protocol=_PROTOCOL)
        store_entry(entry, HEADER + key + hashlib.sha256(payload).digest() + payload)
    except (OSError, pickle.PicklingError, TypeError, AttributeError):
        pass  # not stored: the next run parses the table again
    return value


def entry_path(load: Callable[[], object], environ: Mapping[str, str]) -> str:
    return os.path.join(default_cache_dir(environ), "tables", f"{load.__module__}.{load.__qualname__}")


def _key(names: tuple[str, ...], contents: list[bytes]) -> bytes:
    import packaging

    digest = hashlib.sha256()
    digest.update(repr((names, _PROTOCOL, packaging.__version__, _code_identity())).encode())
    for content in contents:
        digest.update(hashlib.sha256(content).digest())
    return digest.digest()


@functools.lru_cache(maxsize=None)
def _code_identity() -> tuple[tuple[str, int, int], ...]:
    """(path, size, mtime_ns) of cudaresolve's modules."""
    root = os.path.dirname(cudaresolve.__file__)
    found = []
    for directory, names, files in os.walk(root):
        names[:] = sorted(n for n in names if n != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(directory, name)
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                found.append((os.path.relpath(path, root), st.st_size, st.st_mtime_ns))
    return tuple(found)


def _allowed(load: Callable[[], object]) -> dict[tuple[str, str], type]:
    """The dataclasses the loading function's module defines or imports, by (module, name)."""
    module = vars(sys.modules[load.__module__])
    return {
        (value.__module__, value.__name__): value
        for value in module.values()
        if isinstance(value, type) and dataclasses.is_dataclass(value) and value.__module__.startswith("cudaresolve.")
    }


class _TableUnpickler(pickle.Unpickler):
    def __init__(self, stream: io.BytesIO, allowed: dict[tuple[str, str], type]):
        super().__init__(stream)
        self.allowed = allowed

    def find_class(self, module: str, name: str) -> type:
        try:
            return self.allowed[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(f"{module}.{name}: not a class of this table") from None


def _read(entry: str, key: bytes, allowed: dict[tuple[str, str], type]) -> Optional[tuple[Any]]:
    """(the value,) the entry holds for `key`, or None when it is absent, damaged, stale or foreign."""
    data = read_entry(entry)
    if data is None:
        return None
    start = len(HEADER) + len(key)
    if not data.startswith(HEADER) or data[len(HEADER):start] != key:
        return None
    digest, payload = data[start:start + _DIGEST], data[start + _DIGEST:]
    if hashlib.sha256(payload).digest() != digest:
        return None
    stream = io.BytesIO(payload)
    try:
        value = _TableUnpickler(stream, allowed).load()
    except Exception:  # noqa: BLE001 - a foreign pickle can fail in any way; the table is parsed instead
        return None
    return None if stream.read(1) else (value,)
