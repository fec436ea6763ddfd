"""Hostile pylock.toml files for the tests of the lock reader and of the commands that read locks.

`hostile(data, field, attack, injected)` takes the parsed TOML of a good lock and puts an attack in one
field (issue 22's list: a line break, a carriage return, a NUL, a pip option after a space, an
overlong value); `toml_text` writes parsed TOML back (every top-level key as an inline value, so it
needs no table headers). The attacks carry `injected`, a whole pip requirement line: in a lock reader
that let the value through, it would have become a line of its own in pip's requirements file.
"""

from __future__ import annotations

import copy
import datetime
import math
from typing import Any, Callable

# field -> (its key path in the error, where it is in the parsed lock)
FIELDS: dict[str, tuple[str, Callable[[dict], tuple[dict, str]]]] = {
    "sha256": ("packages[0].wheels[0].hashes.sha256", lambda d: (d["packages"][0]["wheels"][0]["hashes"], "sha256")),
    "name": ("packages[0].name", lambda d: (d["packages"][0], "name")),
    "version": ("packages[0].version", lambda d: (d["packages"][0], "version")),
    "index": ("packages[0].index", lambda d: (d["packages"][0], "index")),
    "index-urls": ("tool.cudaresolve.index-urls[0]", lambda d: (d["tool"]["cudaresolve"]["index-urls"], 0)),
    "url": ("packages[0].wheels[0].url", lambda d: (d["packages"][0]["wheels"][0], "url")),
    "path": ("packages[0].wheels[0].path", lambda d: (d["packages"][0]["wheels"][0], "path")),
}

ATTACKS: dict[str, Callable[[str, str], str]] = {
    "newline": lambda value, injected: f"{value}\n{injected}",
    "carriage-return": lambda value, injected: f"{value}\r{injected}",
    "nul": lambda value, injected: f"{value}\0{injected}",
    "option": lambda value, injected: f"{value} --index-url http://127.0.0.1:9/simple",
    # a character each field allows, so the length is what is wrong
    "overlong": lambda value, injected: value + "0" * 50_000,
}


def hostile(data: dict, field: str, attack: str, injected: str) -> tuple[dict, str]:
    """A copy of the parsed lock `data` with `attack` in `field` of its first package (or its first
    index URL), and the key path the error must name. For `path`, the first wheel is given by path
    instead of URL first."""
    changed = copy.deepcopy(data)
    where, locate = FIELDS[field]
    if field == "path":
        wheel = changed["packages"][0]["wheels"][0]
        wheel["path"] = "wheels/" + wheel.pop("url").rsplit("/", 1)[-1]
    container, key = locate(changed)
    container[key] = ATTACKS[attack](container[key], injected)
    return changed, where


def toml_text(data: Any) -> str:
    """Parsed TOML (what tomllib returns, or anything of its types) as TOML text."""
    return "".join(f"{_key(key)} = {_inline(value)}\n" for key, value in data.items())


def _key(key: str) -> str:
    return key if key and all(c.isascii() and (c.isalnum() or c in "-_") for c in key) else _string(key)


def _string(text: str) -> str:
    escaped = []
    for char in text:
        if char in '"\\':
            escaped.append("\\" + char)
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            escaped.append(f"\\u{ord(char):04X}")
        else:
            escaped.append(char)
    return '"' + "".join(escaped) + '"'


def _inline(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf") if math.isinf(value) else repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_inline(item) for item in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_key(k)} = {_inline(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"not a TOML value: {value!r}")
