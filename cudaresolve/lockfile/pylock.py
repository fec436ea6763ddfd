"""PEP 751's pylock.toml: its file-name rule, the writer and the validating reader.

`read_pylock` is the one way a lock file comes in (`install --lock`, `lock --check`, `why`): the
file is read up to `fields.MAX_FILE_BYTES`, parsed, and every value it uses passes its rule in
fields.py before a `Lock` exists; anything else is a LockFileError (exit 3) naming the file, the
key and the package. TOML is written by hand: the format is small and the project reads TOML only.

Why not `packaging.pylock` (a Pylock model with validation): it arrived in packaging 26.0, which
still runs on Python 3.8 (26.4 needs 3.10), so Python 3.9 is no obstacle, but cudaresolve
would raise its packaging floor from 23 to 26 for it, and its validation is not strict enough for
what pip's input needs: hashes, URLs, `index` and `path` may be any strings (a newline or an option
passes), sizes any integer, and a name must already be normalised (another tool's `Attrs` is
refused rather than normalised). Every rule below would still be needed beside it, so the tests use
it as an independent reader of what we write instead.
"""

from __future__ import annotations

import json
import os
import re
import sys
import urllib.parse
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, TypeVar

from packaging.utils import parse_wheel_filename

from cudaresolve.errors import UsageError
from cudaresolve.host.facts import HostFacts
from cudaresolve.lockfile import fields
from cudaresolve.lockfile.fields import LockFileError
from cudaresolve.lockfile.fields import checked
from cudaresolve.resolve.lock import Decision, Lock, LockedPackage, LockedWheel

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

T = TypeVar("T")

LOCK_VERSION = "1.0"
TOOL = "cudaresolve"
_NAMED_LOCK = re.compile(r"^pylock\.([^.]+)\.toml$")  # PEP 751's rule for a named lock file
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_OTHER_SOURCES = ("sdist", "vcs", "directory", "archive")


def lock_file_name_ok(path: str) -> None:
    """Refuse a pylock file name PEP 751 does not allow; "-" (stdout) passes."""
    if path == "-":
        return
    name = os.path.basename(path)
    if name != "pylock.toml" and not _NAMED_LOCK.match(name):
        raise UsageError(
            f"{path}: a PEP 751 lock file must be named pylock.toml or pylock.<name>.toml "
            "(lowercase prefix and suffix, <name> without dots)"
        )


# -- TOML, by hand -------------------------------------------------------------------------------

_PLAIN = re.compile(r'[^\\"\x00-\x1f\x7f]*')  # what a basic string holds unescaped


def _string(text: str) -> str:
    """A TOML basic string: backslash, quote and every control character escaped."""
    if _PLAIN.fullmatch(text):  # nearly every value: one C scan instead of a loop over its characters
        return '"' + text + '"'
    out = []
    for char in text:
        if char == "\\":
            out.append("\\\\")
        elif char == '"':
            out.append('\\"')
        elif char in "\b\t\n\f\r":
            out.append({"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}[char])
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04X}")
        else:
            out.append(char)
    return '"' + "".join(out) + '"'


def _key(key: str) -> str:
    return key if _BARE_KEY.match(key) else _string(key)


def _value(value: Any) -> str:
    """A value written inline; TOML has no null, so None values of tables are left out."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(item) for item in value) + "]"
    if isinstance(value, dict):
        items = [f"{_key(k)} = {_value(v)}" for k, v in value.items() if v is not None]
        return "{ " + ", ".join(items) + " }" if items else "{}"
    raise TypeError(f"cannot write {type(value).__name__} {value!r} as TOML")


def _is_tables(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and bool(value) and all(isinstance(item, dict) for item in value)


def _table(path: str, mapping: dict, array: bool = False) -> list[str]:
    """`mapping` as a table headed `[path]` (`[[path]]` for an array element): plain keys first,
    then sub-tables and arrays of tables under their own headers, so nested host facts stay readable."""
    lines = [f"[[{path}]]" if array else f"[{path}]"]
    nested = []
    for key, value in mapping.items():
        if value is None:
            continue
        if isinstance(value, dict) or _is_tables(value):
            nested.append((key, value))
        else:
            lines.append(f"{_key(key)} = {_value(value)}")
    for key, value in nested:
        child = f"{path}.{_key(key)}"
        if isinstance(value, dict):
            lines += [""] + _table(child, value)
        else:
            for item in value:
                lines += [""] + _table(child, item, array=True)
    return lines


# -- writing -------------------------------------------------------------------------------------


def wheel_groups(lock: Lock) -> list[list[LockedPackage]]:
    """Packages with a wheel, one group per [[packages]] entry: a name, version, index and marker
    with several wheels (another tool's multi-platform lock read back) is one entry, as PEP 751 wants.
    `lock` is a checked one: its names are canonical."""
    groups: dict[tuple, list[LockedPackage]] = {}
    for package in lock.packages:
        if package.wheel is not None:
            key = (package.name, package.version, package.index or "", package.marker or "")
            groups.setdefault(key, []).append(package)
    return [groups[key] for key in sorted(groups)]


def sha256_of(package: LockedPackage, origin: str) -> str:
    """The wheel's digest, which PEP 751 and pip's hash-checking mode both require."""
    assert package.wheel is not None
    if not package.wheel.sha256:
        raise LockFileError(
            f"{origin}: wheels.hashes.sha256 (package {package.name}): {package.wheel.filename} has no sha256, "
            "which PEP 751 and pip's hash-checking need"
        )
    return package.wheel.sha256


def _reason(group: list[LockedPackage]) -> str:
    return "; ".join(dict.fromkeys(package.reason for package in group if package.reason))


def pylock_toml(lock: Lock) -> str:
    """The lock as a PEP 751 pylock.toml; host facts, decisions and kept distributions go in [tool.cudaresolve].

    Every value passes its rule first (fields.checked). An entry with only another source (read
    from another tool's lock) is refused: cudaresolve keeps no sdist, VCS, directory or archive to
    write back."""
    origin = "the lock to write"
    lock = checked(lock, origin)
    for package in lock.packages:
        if package.other_source is not None:
            raise LockFileError(f"{origin}: {package.other_source} (package {package.name}): cudaresolve writes wheels only")
    lines = [f"lock-version = {_string(LOCK_VERSION)}"]
    if lock.requires_python:
        lines.append(f"requires-python = {_string(lock.requires_python)}")
    lines.append(f"created-by = {_string(lock.created_by)}")
    groups = wheel_groups(lock)
    if not groups:
        lines.append("packages = []")  # PEP 751 requires the key, even for a lock of nothing to install
    for group in groups:
        first = group[0]
        lines += ["", "[[packages]]", f"name = {_string(first.name)}"]
        lines.append(f"version = {_string(first.version)}")
        if first.marker:
            lines.append(f"marker = {_string(first.marker)}")
        if first.index:
            lines.append(f"index = {_string(first.index)}")
        lines.append("wheels = [")
        for package in sorted(group, key=lambda p: p.wheel.filename):
            wheel = package.wheel
            entry = {"name": wheel.filename, "url": wheel.url, "size": wheel.size, "hashes": {"sha256": sha256_of(package, origin)}}
            lines.append(f"    {_value(entry)},")
        lines.append("]")
        if _reason(group):
            lines += ["", f"[packages.tool.{TOOL}]", f"reason = {_string(_reason(group))}"]
    tool: dict[str, Any] = {"index-urls": list(lock.index_urls)}
    tool["hosts"] = [{"label": label, "facts": facts} for label, facts in zip(lock.host_labels, lock.hosts)]
    tool["kept"] = [
        {"name": p.name, "version": p.version, "marker": p.marker, "reason": p.reason, "provided-by": p.provided_by}
        for p in sorted(lock.packages, key=lambda p: (p.name, p.version))
        if p.wheel is None
    ]
    tool["decisions"] = [
        {
            "name": decision.name,
            "chosen": decision.chosen,
            "rejected": [{"candidate": label, "reason": why} for label, why in decision.rejected],
        }
        for decision in lock.decisions
    ]
    lines += [""] + _table(f"tool.{TOOL}", tool)
    return "\n".join(lines) + "\n"


# -- reading -------------------------------------------------------------------------------------


class _Reader:
    """Typed, validated look-ups in parsed TOML that fail as one line naming the file, the key path
    and, inside a package, the package."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, key: str, problem: str, package: str = "") -> LockFileError:
        who = f" (package {package})" if package else ""
        return LockFileError(f"{self.path}: {key}{who}: {problem}")

    def get(self, table: dict, key: str, where: str, kind: type, required: bool = False, package: str = "") -> Any:
        full = f"{where}.{key}" if where else key
        if key not in table:
            if required:
                raise self.fail(full, "missing", package)
            return None
        value = table[key]
        if kind is int and isinstance(value, bool) or not isinstance(value, kind):
            raise self.fail(full, f"expected {_KINDS[kind]}, got {fields.shown(value)}", package)
        return value

    def field(self, table: dict, key: str, where: str, rule: Callable[[Any], T], required: bool = False, package: str = "") -> Optional[T]:
        """The value at `key` passed through its rule; None when absent and not required."""
        full = f"{where}.{key}" if where else key
        if key not in table:
            if required:
                raise self.fail(full, "missing", package)
            return None
        try:
            return rule(table[key])
        except fields.Invalid as exc:
            raise self.fail(full, str(exc), package) from None

    def tables(self, table: dict, key: str, where: str, required: bool = False, package: str = "") -> list[tuple[str, dict]]:
        """The tables of an array of tables, each with its key path ("packages[2]")."""
        items = self.get(table, key, where, list, required, package) or []
        full = f"{where}.{key}" if where else key
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                raise self.fail(f"{full}[{i}]", f"expected a table, got {fields.shown(item)}", package)
        return [(f"{full}[{i}]", item) for i, item in enumerate(items)]

    def values(self, table: dict, key: str, where: str, rule: Callable[[Any], T]) -> tuple[T, ...]:
        """The values of an array, each passed through its rule."""
        items = self.get(table, key, where, list) or []
        found = []
        for i, item in enumerate(items):
            try:
                found.append(rule(item))
            except fields.Invalid as exc:
                raise self.fail(f"{where}.{key}[{i}]", str(exc)) from None
        return tuple(found)


_KINDS = {str: "a string", int: "an integer", list: "an array", dict: "a table"}


def read_pylock(path: str) -> Lock:
    """A pylock.toml back as a Lock, every value validated: ours in full, another tool's with what
    it does not record left empty. Read up to the size limit, so a device or a huge file costs nothing.

    Each wheel of a [[packages]] entry becomes its own LockedPackage (the writer groups them again);
    an entry without wheels is read with the kind of source it has instead (`other_source`).
    """
    try:
        with open(path, "rb") as stream:
            raw = stream.read(fields.MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise LockFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    return parse_pylock(raw, path)


def parse_pylock(raw: bytes, path: str) -> Lock:
    """The bytes of the lock file `path` as a Lock (what read_pylock does once it has read them);
    every way they can fail is one LockFileError line."""
    if len(raw) > fields.MAX_FILE_BYTES:
        raise LockFileError(f"{path}: larger than {fields.MAX_FILE_BYTES >> 20} MiB, more than any lock file needs")
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise LockFileError(f"{path}: not UTF-8 ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise LockFileError(f"{path}: not valid TOML ({exc})") from None
    except RecursionError:
        raise LockFileError(f"{path}: not valid TOML (nested too deeply)") from None
    except ValueError as exc:  # an integer past Python's digit limit
        raise LockFileError(f"{path}: not valid TOML ({str(exc).splitlines()[0]})") from None
    try:
        return _read_lock(_Reader(path), data, os.path.dirname(os.path.abspath(path)))
    except RecursionError:
        raise LockFileError(f"{path}: nested too deeply") from None


def _read_lock(reader: _Reader, data: dict, base: str) -> Lock:
    reader.field(data, "lock-version", "", fields.lock_version, required=True)
    created_by = reader.field(data, "created-by", "", fields.label, required=True)
    requires_python = reader.field(data, "requires-python", "", fields.requires_python)
    packages = []
    for where, entry in reader.tables(data, "packages", "", required=True):
        packages += _read_package(reader, where, entry, base, created_by)
    tool = reader.get(reader.get(data, "tool", "", dict) or {}, TOOL, "tool", dict) or {}
    where = f"tool.{TOOL}"
    hosts, labels = [], []
    for host_where, host in reader.tables(tool, "hosts", where):
        labels.append(reader.field(host, "label", host_where, fields.label, required=True))
        facts = reader.field(host, "facts", host_where, fields.facts, required=True)
        # Normalised through HostFacts: it validates the facts and puts back the nulls TOML cannot hold.
        try:
            known = HostFacts.from_dict(facts, origin=f"{reader.path}: {host_where}.facts")
        except UsageError as exc:
            words = str(exc)  # one line; cut, as its value may be long
            raise LockFileError(words if len(words) <= 300 else words[:300] + "…") from None
        hosts.append(json.loads(known.to_json()))
    for kept_where, kept in reader.tables(tool, "kept", where):
        name = reader.field(kept, "name", kept_where, fields.name, required=True)
        packages.append(
            LockedPackage(
                name=name,
                version=reader.field(kept, "version", kept_where, fields.version, required=True, package=name),
                index=None,
                wheel=None,
                marker=reader.field(kept, "marker", kept_where, fields.marker, package=name),
                reason=reader.field(kept, "reason", kept_where, fields.text, package=name) or "",
                provided_by=reader.field(kept, "provided-by", kept_where, fields.label, package=name),
            )
        )
    decisions = []
    for decision_where, decision in reader.tables(tool, "decisions", where):
        rejected = tuple(
            (
                reader.field(item, "candidate", item_where, fields.text, required=True),
                reader.field(item, "reason", item_where, fields.text, required=True),
            )
            for item_where, item in reader.tables(decision, "rejected", decision_where)
        )
        decisions.append(
            Decision(
                name=reader.field(decision, "name", decision_where, fields.text, required=True),
                chosen=reader.field(decision, "chosen", decision_where, fields.text),
                rejected=rejected,
            )
        )
    index_urls = reader.values(tool, "index-urls", where, fields.url) if "index-urls" in tool else _indexes_used(packages)
    return Lock(
        packages=tuple(packages),
        requires_python=requires_python,
        hosts=tuple(hosts),
        host_labels=tuple(labels),
        index_urls=index_urls,
        decisions=tuple(decisions),
        created_by=created_by,
    )


def _indexes_used(packages: Iterable[LockedPackage]) -> tuple[str, ...]:
    """Another tool's lock records indexes per package only: these, in file order, are its indexes."""
    return tuple(dict.fromkeys(p.index for p in packages if p.index))


def _read_package(reader: _Reader, where: str, entry: dict, base: str, created_by: str) -> list[LockedPackage]:
    name = reader.field(entry, "name", where, fields.name, required=True)
    version = reader.field(entry, "version", where, fields.version, package=name)
    marker = reader.field(entry, "marker", where, fields.marker, package=name)
    index = reader.field(entry, "index", where, fields.url, package=name)
    package_tool = reader.get(entry, "tool", where, dict, package=name) or {}
    ours = reader.get(package_tool, TOOL, f"{where}.tool", dict, package=name) or {}
    reason = reader.field(ours, "reason", f"{where}.tool.{TOOL}", fields.text, package=name) or ""
    wheels = reader.tables(entry, "wheels", where, package=name)
    others = [key for key in _OTHER_SOURCES if key in entry]
    for key in others:
        reader.get(entry, key, where, dict, package=name)
    direct = [key for key in others if key != "sdist"]
    if wheels and direct:
        raise reader.fail(where, f"wheels together with {direct[0]} (PEP 751 allows one or the other)", name)
    if not wheels:
        if not others:
            raise reader.fail(where, "no source (wheels, sdist, archive, directory or vcs)", name)
        kind = others[0]
        why = reason or f"a {kind} source in {created_by}'s lock (cudaresolve reads wheels only)"
        return [LockedPackage(name, version or "", index, None, marker, why, other_source=kind)]  # type: ignore[arg-type]
    read = [_read_wheel(reader, wheel_where, wheel, base, name, version or "") for wheel_where, wheel in wheels]
    if version is None:
        # PEP 751 only says a version SHOULD be there; a wheel's file name always carries it, and
        # every wheel of the entry must carry the same one.
        version = str(parse_wheel_filename(read[0].filename)[1])
        for (wheel_where, _), wheel in zip(wheels, read):
            try:
                fields.wheel_filename(wheel.filename, name, version)
            except fields.Invalid as exc:
                raise reader.fail(f"{wheel_where}.name", f"{exc} (of the entry's first wheel)", name) from None
    return [LockedPackage(name, version, index, wheel, marker, reason) for wheel in read]


def _read_wheel(reader: _Reader, where: str, wheel: dict, base: str, name: str, version: str) -> LockedWheel:
    url = reader.field(wheel, "url", where, fields.url, package=name)
    local = reader.field(wheel, "path", where, fields.path, package=name)
    if url is None and local is None:
        raise reader.fail(where, "needs url or path", name)
    if url is None:
        assert local is not None
        try:
            # PEP 751: a relative path is relative to the lock file; as_uri() percent-encodes it.
            url = fields.url(Path(base, local).resolve().as_uri())
        except (OSError, ValueError, RuntimeError) as exc:
            raise reader.fail(f"{where}.path", f"cannot be made a file URL ({exc})", name) from None
    filename = wheel.get("name")
    if filename is None:
        filename = urllib.parse.unquote((local or urllib.parse.urlsplit(url).path).replace("\\", "/").rsplit("/", 1)[-1])
    key = f"{where}.name"
    try:
        filename = fields.wheel_filename(filename, name, version)
    except fields.Invalid as exc:
        raise reader.fail(key, str(exc), name) from None
    hashes = reader.get(wheel, "hashes", where, dict, required=True, package=name)
    if not hashes:
        raise reader.fail(f"{where}.hashes", "PEP 751 requires at least one hash", name)
    sha256 = reader.field(hashes, "sha256", f"{where}.hashes", fields.sha256, package=name)
    for algorithm, digest in hashes.items():
        if algorithm != "sha256":
            try:
                fields.other_hash(digest)
            except fields.Invalid as exc:
                raise reader.fail(f"{where}.hashes[{fields.shown(algorithm)}]", str(exc), name) from None
    size = reader.field(wheel, "size", where, fields.size, package=name)
    return LockedWheel(filename=filename, url=url, sha256=sha256, size=size)
