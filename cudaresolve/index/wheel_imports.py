"""The import model (env/imports.py) of a wheel that is not installed, read from its own Python
members, so a planned environment judges a chosen release by what its own `import` loads: a
library its `__init__.py` loads by path is an import-time load whose misses fail the import, not
an on-demand plugin, and the installed release it replaces lends it nothing.

The same `build_model` as an installed distribution's, its `read_text` reading zip members; the
model's paths are laid out as the plan lays the wheel's ELF files (site-packages + member name).
Only the .py and package-data .json members the model asks for are read: a `file:` wheel in place;
a remote one in the pass that downloads it whole for its binary facts (index/wheel_facts.py), else
by range requests (wanted members close together fetched in one request), else downloaded. Cached
by sha256 as the facts are, relative to site-packages. Bounded: imports.py's own limits and
MAX_PYTHON_BYTES per wheel (read, and fetched by range); a wheel past a bound, not a readable zip,
not fetched (the download budget, a failed request) or `--offline` with no entry gives no model.

May import: env/ (imports, import_cache, store), binary/wheel (open_zip), index/ (cache, downloads, http, metadata, pages).
"""

from __future__ import annotations

import os
import zipfile
import zlib
from typing import BinaryIO, Callable, Optional, cast

from cudaresolve.binary.wheel import DirectoryTooLarge, open_zip
from cudaresolve.env.import_cache import HEADER as MODEL_HEADER
from cudaresolve.env.import_cache import decode_model, encode_model
from cudaresolve.env.imports import ImportModel, build_model
from cudaresolve.env.store import dumps_plain, loads_plain
from cudaresolve.index.cache import IndexCache
from cudaresolve.index.downloads import Progress, download, spend
from cudaresolve.index.http import Http, IndexAccessError, local_path
from cudaresolve.index.limits import Limits
from cudaresolve.index.metadata import MEMBER_SLACK, open_ranged
from cudaresolve.index.pages import ProjectFile

KIND = "wheel-imports"
FORMAT = 1
# the walk's own header (its format and code digest) inside: a model another walk built is a miss
HEADER = f"cudaresolve-wheel-imports {FORMAT} ".encode() + MODEL_HEADER
MAX_PYTHON_BYTES = 64 << 20  # Python and JSON read from one wheel, and fetched for them by range
MAX_ENTRY = 16 << 20  # the most of a cached model read back
RUN_GAP = 64 << 10  # wanted members this close are fetched in one request
RUN_MAX = 8 << 20  # ... of at most this many bytes
_ROOT = "/wheel/"  # models are built under this and kept relative to it
_CAUGHT = (DirectoryTooLarge, zipfile.BadZipFile, zlib.error, OSError, EOFError, ValueError, NotImplementedError,
           RuntimeError)  # RuntimeError: zipfile's for an encrypted member


class _Bound(Exception):
    """One wheel's Python is past MAX_PYTHON_BYTES."""


def wheel_import_model(
    http: Http, cache: IndexCache, file: ProjectFile, site: str, progress: Optional[Progress] = None
) -> Optional[ImportModel]:
    """The import model of the wheel `file` installed in `site`; None when it has none or it cannot
    be read within the bounds (never an error: a plan without it judges the wheel as before)."""
    root = os.path.join(site, "")
    if file.url.startswith("file:"):
        try:
            local = open(local_path(file.url), "rb")
        except (OSError, ValueError):
            return None
        with local:
            return _decoded(model_of_wheel(local, http.limits), root)
    key = file.sha256 or "url:" + file.url
    stored = cache.blob(KIND, key, MAX_ENTRY)
    if stored is not None:
        value = loads_plain(HEADER, stored)
        if isinstance(value, tuple) and len(value) == 1:
            try:
                return decode_model(value[0], root)
            except (TypeError, ValueError):
                pass
        cache.discard(KIND, key)
    if cache.offline:
        return None
    try:
        encoded = _by_range(http, cache, file)
        if encoded is None:
            with download(http, file, progress) as stream:
                encoded = (model_of_wheel(stream, http.limits),)
    except IndexAccessError:  # a failed request, the download budget: not known, not cached
        return None
    store_model(cache, file, encoded[0])
    return _decoded(encoded[0], root)


def store_model(cache: IndexCache, file: ProjectFile, encoded: object) -> None:
    """Keep what `model_of_wheel` gave for a remote wheel, by its sha256."""
    cache.store_blob(KIND, file.sha256 or "url:" + file.url, dumps_plain(HEADER, (encoded,)))


def model_of_wheel(stream: BinaryIO, limits: Limits, fetch: Optional[Callable[[zipfile.ZipInfo], None]] = None) -> object:
    """The model of the wheel in `stream` as `encode_model` keeps it (relative paths); None when it
    has no Python module to start from, is not a readable zip or breaks a bound. `fetch(info)` is
    called before a member is read (range reads fetch it then)."""
    try:
        with open_zip(stream, limits.central_directory_bytes) as archive:
            return _model(archive, fetch)
    except (_Bound, *_CAUGHT):
        return None


def _model(archive: zipfile.ZipFile, fetch: Optional[Callable[[zipfile.ZipInfo], None]]) -> object:
    infos = {path: info for info in archive.infolist() if not info.is_dir()
             and (path := os.path.normpath(os.path.join(_ROOT, info.filename))).startswith(_ROOT)}  # none outside it
    read = 0

    def read_text(path: str, limit: int) -> Optional[str]:
        nonlocal read
        info = infos.get(path)
        if info is None or info.file_size > limit:
            return None
        if fetch is not None:
            fetch(info)
        with archive.open(info) as member:
            data = member.read(limit + 1)
        read += len(data)
        if read > MAX_PYTHON_BYTES:
            raise _Bound
        return data.decode("utf-8", errors="replace") if len(data) <= limit else None

    return encode_model(build_model(list(infos), (_ROOT,), read_text), _ROOT)


def _by_range(http: Http, cache: IndexCache, file: ProjectFile) -> Optional[tuple[object]]:
    """(the encoded model,) read by range requests, fetching only the members the model asks for,
    several close together in one request; None when the server does not do ranges."""
    ranged = open_ranged(http, cache, file)
    if ranged is None:
        return None
    spend(http, ranged.size - ranged.tail_start, file.filename)  # its tail, as every range read
    stream = cast(BinaryIO, ranged)
    try:
        with open_zip(stream, http.limits.central_directory_bytes) as archive:
            runs = _runs(archive.infolist(), archive.start_dir)
    except _CAUGHT:
        return (None,)
    fetched: set[int] = set()
    spent = 0

    def fetch(info: zipfile.ZipInfo) -> None:
        nonlocal spent
        run = runs.get(info.filename)
        if run is None or run[0] in fetched:
            return
        start, length = run
        spent += length
        if spent > MAX_PYTHON_BYTES:
            raise _Bound
        spend(http, length, file.filename)
        fetched.add(start)
        ranged.prefetch(start, length)

    return (model_of_wheel(stream, http.limits, fetch),)


def _runs(infos: list[zipfile.ZipInfo], directory: int) -> dict[str, tuple[int, int]]:
    """member name -> (start, length) of the request that fetches it: the .py and .json members,
    each with its local header, joined with the next when the gap between them is under RUN_GAP."""
    wanted = sorted((info for info in infos if info.filename.endswith((".py", ".json")) and not info.is_dir()),
                    key=lambda info: info.header_offset)
    runs: list[tuple[int, list[int], list[str]]] = []  # (start, [end], names)
    for info in wanted:
        start = info.header_offset
        end = min(directory, start + 30 + len(info.orig_filename.encode()) + info.compress_size + MEMBER_SLACK)
        if end <= start:
            continue
        if runs and start - runs[-1][1][0] <= RUN_GAP and end - runs[-1][0] <= RUN_MAX:
            runs[-1][1][0] = max(runs[-1][1][0], end)
            runs[-1][2].append(info.filename)
        else:
            runs.append((start, [end], [info.filename]))
    return {name: (first, last[0] - first) for first, last, names in runs for name in names}


def _decoded(encoded: object, root: str) -> Optional[ImportModel]:
    try:
        return decode_model(encoded, root)
    except (TypeError, ValueError):
        return None
