"""On-disk cache of import models (env/imports.py), so a venv of wheels seen before parses no Python file.

Parsing is most of a first doctor run on a large package (torch 2.14: 751 modules, 8 s of CPU, most
of it `ast.parse` and the walk); reading and hashing the same files takes a small fraction of that.
An entry is found by the distribution's files (RECORD's paths relative to the site-packages
directory that holds them, and the names a program imports): the model depends on nothing else but
the bytes of the files it read. So the entry lists each file the model read, with the limit it was
read with and the sha256 of what it got, and is used only when every one of them reads back the
same now (no RECORD hash is trusted: these files are small enough to hash whole). Paths are kept
relative and put back under the site-packages directory of the run, so a copy of a venv elsewhere
(a CI runner, a rebuilt venv) hits. An entry is plain values (env/store.py): a planted or damaged
one is a miss and is rewritten; a cache that cannot be written costs only the parse.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any, Callable, Optional, Sequence, get_args

from cudaresolve import __version__
from cudaresolve.bounded import read_bounded
from cudaresolve.caches import read_entry
from cudaresolve.env import imports as imports_module
from cudaresolve.env.imports import ImportModel, Preload, Reach, build_model
from cudaresolve.env.store import dumps_plain, loads_plain, store_entry

CACHE_FORMAT = 5  # 2: ImportModel.imports; 3: Preload.computed; 4: a guarded load whose operators the import uses; 5: one-of


def _code_digest() -> str:
    """sha256 of the code that builds and stores a model (env/imports.py and this module): an edited
    checkout reads only the models its own code wrote, where the format and release alone would let it
    read a model an older build of the walk wrote. Two small files, hashed once per process."""
    digest = hashlib.sha256()
    for module in (imports_module.__file__, __file__):
        assert module is not None  # regular modules
        with open(module, "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()[:16]


HEADER = f"cudaresolve-imports {CACHE_FORMAT} {__version__} {_code_digest()}\n".encode()
_REACHES: dict[object, Reach] = {reach: reach for reach in get_args(Reach)}

ReadText = Callable[[str, int], Optional[str]]


def read_source(path: str, limit: int) -> Optional[str]:
    """A package's Python or JSON file as text; None when it cannot be read within `limit` bytes."""
    try:
        return read_bounded(path, limit, regular=True).decode("utf-8", errors="replace")
    except OSError:
        return None


class ImportModelCache:
    """Import models by the files a distribution's RECORD lists and the bytes of those the model read,
    in `directory`/imports/."""

    def __init__(self, directory: str, read_text: ReadText = read_source):
        self.directory = os.path.join(directory, "imports")
        self.read_text = read_text
        self.writable = True
        self.parsed = 0  # models built by parsing in this run (a fresh venv of known wheels: 0)

    def model(self, files: Sequence[str], site_packages: Sequence[str], top_levels: Optional[Sequence[str]] = None
              ) -> Optional[ImportModel]:
        """`build_model(files, site_packages, ...)`, from the cache when the files it read are unchanged."""
        root = _root_of(files, site_packages)
        if root is None:  # not all under one site-packages directory: nothing to key on
            self.parsed += 1
            return build_model(files, site_packages, self.read_text, top_levels)
        inside = sorted(path[len(root):] for path in files if path.startswith(root))
        key = hashlib.sha256("\0".join([*(top_levels or ()), "\n", *inside]).encode()).hexdigest()
        entry = os.path.join(self.directory, key[:2], key)
        found = self._load(entry, root)
        if found is not None:
            return found[0]
        reads: list[tuple[str, int, Optional[str]]] = []

        def recording(path: str, limit: int) -> Optional[str]:
            text = self.read_text(path, limit)
            reads.append((path, limit, _digest(text)))
            return text

        self.parsed += 1
        model = build_model(files, site_packages, recording, top_levels)
        self._store(entry, root, reads, model)
        return model

    def _load(self, entry: str, root: str) -> Optional[tuple[Optional[ImportModel]]]:
        data = read_entry(entry)
        value: Any = loads_plain(HEADER, data) if data is not None else None
        try:
            reads, encoded = value
            for relative, limit, digest in reads:
                if type(limit) is not int or _digest(self.read_text(root + _relative(relative), limit)) != digest:
                    return None
            return (decode_model(encoded, root),)
        except (TypeError, ValueError):  # not the shape this module writes: a miss
            return None

    def _store(self, entry: str, root: str, reads: list[tuple[str, int, Optional[str]]], model: Optional[ImportModel]) -> None:
        paths = [path for path, _, _ in reads]
        if model is not None:
            paths += [*model.extensions, *model.alternatives]
        if not self.writable or any(not path.startswith(root) for path in paths):
            return  # a path outside the site-packages directory cannot be put back under another
        relative = tuple((path[len(root):], limit, digest) for path, limit, digest in reads)
        try:
            store_entry(entry, dumps_plain(HEADER, (relative, encode_model(model, root))))
        except OSError:
            self.writable = False


def _root_of(files: Sequence[str], site_packages: Sequence[str]) -> Optional[str]:
    """The site-packages directory (with its trailing slash) that holds every one of `files` under
    a site-packages directory; None when there is none, or when they lie under two."""
    roots = {os.path.join(sp.rstrip("/"), "") for sp in site_packages}
    holding = {root for path in files for root in roots if path.startswith(root)}
    return holding.pop() if len(holding) == 1 else None


def _digest(text: Optional[str]) -> Optional[str]:
    return None if text is None else hashlib.sha256(text.encode()).hexdigest()


def encode_model(model: Optional[ImportModel], root: str) -> object:
    """`model` as plain values, its paths relative to `root` (each of them under it): what an entry holds."""
    if model is None:
        return None
    cut = len(root)
    return (
        model.conclusive,
        tuple((path[cut:], name, reach) for path, (name, reach) in model.extensions.items()),
        tuple((p.name, p.reach, p.module, p.computed) for p in model.preloads),
        tuple((path[cut:], cuda) for path, cuda in model.alternatives.items()),
        tuple(sorted(model.imports)),
    )


def decode_model(value: Any, root: str) -> Optional[ImportModel]:
    """The model `encode_model` wrote, under `root`; ValueError or TypeError for any other value."""
    if value is None:
        return None
    conclusive, extensions, preloads, alternatives, imports = value
    if not isinstance(conclusive, bool):
        raise ValueError(f"not a flag: {conclusive!r}")
    return ImportModel(
        conclusive,
        {root + _relative(path): (_text(name), _reach(reach)) for path, name, reach in extensions},
        tuple(Preload(_text(name), _reach(reach), _text(module), _flag(computed)) for name, reach, module, computed in preloads),
        {root + _relative(path): _cuda(cuda) for path, cuda in alternatives},
        frozenset(_text(name) for name in imports),
    )


def _relative(path: object) -> str:
    if not isinstance(path, str) or not path or path.startswith("/") or "/../" in f"/{path}/":
        raise ValueError(f"not a relative path: {path!r}")
    return path


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"not a name: {value!r}")
    return value


def _flag(value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"not a flag: {value!r}")
    return value


def _reach(value: object) -> Reach:
    if not isinstance(value, str) or value not in _REACHES:
        raise ValueError(f"not a reach: {value!r}")
    return _REACHES[value]


def _cuda(value: Any) -> tuple[int, Optional[int]]:
    major, minor = value
    if type(major) is not int or (minor is not None and type(minor) is not int):
        raise ValueError(f"not a CUDA release: {value!r}")
    return major, minor
