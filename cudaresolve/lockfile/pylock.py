"""The lock as files: PEP 751 pylock.toml, a pip constraints file and a hashed pip requirements file.

The writers are pure functions of a `Lock` returning text (files.py puts them on disk).
`read_pylock` reads a pylock.toml back, ours or another tool's. TOML is written by hand: the format is small and the project reads TOML only.
docs/lock-files.md describes every format.
"""

from __future__ import annotations

import json
import os
import re
import sys
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Iterable, Optional

from packaging.markers import InvalidMarker, Marker
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from cudaresolve.errors import UsageError
from cudaresolve.host.facts import HostFacts
from cudaresolve.lockfile.model import Decision, Lock, LockedPackage, LockedWheel

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

LOCK_VERSION = "1.0"
TOOL = "cudaresolve"
_NAMED_LOCK = re.compile(r"^pylock\.([^.]+)\.toml$")  # PEP 751's rule for a named lock file
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_SOURCE_KEYS = ("vcs", "directory", "archive", "sdist")


# -- TOML, by hand -------------------------------------------------------------------------------


def _string(text: str) -> str:
    """A TOML basic string: backslash, quote and every control character escaped."""
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


# -- pylock.toml ---------------------------------------------------------------------------------


def _groups(lock: Lock) -> list[list[LockedPackage]]:
    """Packages with a wheel, one group per [[packages]] entry: a name, version, index and marker
    with several wheels (another tool's multi-platform lock read back) is one entry, as PEP 751 wants."""
    groups: dict[tuple, list[LockedPackage]] = {}
    for package in lock.packages:
        if package.wheel is not None:
            key = (canonicalize_name(package.name), package.version, package.index or "", package.marker or "")
            groups.setdefault(key, []).append(package)
    return [groups[key] for key in sorted(groups)]


def _reason(group: list[LockedPackage]) -> str:
    return "; ".join(dict.fromkeys(package.reason for package in group if package.reason))


def _sha256(package: LockedPackage) -> str:
    """The wheel's digest, which PEP 751 and pip's hash-checking mode both require."""
    assert package.wheel is not None
    if not package.wheel.sha256:
        raise ValueError(f"{package.name} {package.version}: {package.wheel.filename} has no sha256 to lock")
    return package.wheel.sha256


def pylock_toml(lock: Lock) -> str:
    """The lock as a PEP 751 pylock.toml; host facts, decisions and kept distributions go in [tool.cudaresolve]."""
    lines = [f"lock-version = {_string(LOCK_VERSION)}"]
    if lock.requires_python:
        lines.append(f"requires-python = {_string(lock.requires_python)}")
    lines.append(f"created-by = {_string(lock.created_by)}")
    for group in _groups(lock):
        first = group[0]
        lines += ["", "[[packages]]", f"name = {_string(canonicalize_name(first.name))}"]
        lines.append(f"version = {_string(first.version)}")
        if first.marker:
            lines.append(f"marker = {_string(first.marker)}")
        if first.index:
            lines.append(f"index = {_string(first.index)}")
        lines.append("wheels = [")
        for package in sorted(group, key=lambda p: p.wheel.filename):
            wheel = package.wheel
            entry = {"name": wheel.filename, "url": wheel.url, "size": wheel.size, "hashes": {"sha256": _sha256(package)}}
            lines.append(f"    {_value(entry)},")
        lines.append("]")
        if _reason(group):
            lines += ["", f"[packages.tool.{TOOL}]", f"reason = {_string(_reason(group))}"]
    tool: dict[str, Any] = {"index-urls": list(lock.index_urls)}
    tool["hosts"] = [{"label": label, "facts": facts} for label, facts in zip(lock.host_labels, lock.hosts)]
    tool["kept"] = [
        {"name": canonicalize_name(p.name), "version": p.version, "marker": p.marker, "reason": p.reason,
         "provided-by": p.provided_by}
        for p in sorted(lock.packages, key=lambda p: (canonicalize_name(p.name), p.version))
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


# -- pip's formats -------------------------------------------------------------------------------


def _parent_url(url: str) -> str:
    """Where pip's --find-links finds a wheel the lock names by URL alone (no index)."""
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme == "file":
        return os.path.dirname(urllib.request.url2pathname(parsed.path))
    return urllib.parse.urlunsplit(parsed._replace(path=parsed.path.rsplit("/", 1)[0] + "/", query="", fragment=""))


def _index_lines(lock: Lock) -> list[str]:
    """pip options that reach every file of the lock: its indexes (variant indexes included), the
    directories of wheels it found by location, and --no-index when it used no index at all."""
    extra = list(lock.index_urls[1:])
    for package in sorted(lock.packages, key=lambda p: canonicalize_name(p.name)):
        if package.index and package.index not in lock.index_urls and package.index not in extra:
            extra.append(package.index)
    lines = [f"--index-url {lock.index_urls[0]}"] if lock.index_urls else []
    lines += [f"--extra-index-url {url}" for url in extra]
    if not lines:
        lines.append("--no-index")
    links = [
        _parent_url(p.wheel.url)
        for p in sorted(lock.packages, key=lambda p: canonicalize_name(p.name))
        if p.wheel is not None and not p.index
    ]
    lines += [f"--find-links {link}" for link in dict.fromkeys(links)]
    return lines


def _pin(package: LockedPackage) -> str:
    """`name==version ; marker`; a source tree another tool locked without a version stays unpinned."""
    name = canonicalize_name(package.name)
    pin = f"{name}=={package.version}" if package.version else name
    return f"{pin} ; {package.marker}" if package.marker else pin


def constraints_txt(lock: Lock) -> str:
    """A pip constraints file: `pip install -c FILE REQ...` installs exactly the lock.

    A conda package standing for a wheel cannot be said in pip's terms (a constraint limits what pip
    installs, it cannot tell pip a dependency is already met), so it is a comment."""
    pins = sorted({_pin(package) for package in lock.packages if package.provided_by is None})
    header = f"# {lock.created_by}: pip install -c THIS-FILE REQUIREMENT...; installs exactly this lock"
    return "\n".join([header] + _index_lines(lock) + pins + _conda_comments(lock)) + "\n"


def _conda_comments(lock: Lock) -> list[str]:
    return [
        f"# {canonicalize_name(p.name)}: provided by {p.provided_by}; pip must not install it (cudaresolve install "
        "installs with --no-deps)"
        for p in sorted(lock.packages, key=lambda p: canonicalize_name(p.name))
        if p.provided_by is not None
    ]


def requirements_txt(lock: Lock) -> str:
    """A pip requirements file with every wheel's hash, for `pip install --require-hashes -r FILE`.

    Kept installed distributions have no file to hash, so they are named in comments only.
    """
    lines = [f"# {lock.created_by}: pip install --require-hashes -r THIS-FILE; installs exactly this lock"]
    lines += _index_lines(lock)
    for group in _groups(lock):
        lines.append(_pin(group[0]) + " \\")
        hashes = sorted({_sha256(package) for package in group})
        lines += [f"    --hash=sha256:{digest}" + (" \\" if i < len(hashes) - 1 else "") for i, digest in enumerate(hashes)]
    for package in sorted(lock.packages, key=lambda p: canonicalize_name(p.name)):
        if package.wheel is None and package.provided_by is None:
            lines.append(f"# kept installed, no file to hash: {_pin(package)}")
    return "\n".join(lines + _conda_comments(lock)) + "\n"


# -- files ---------------------------------------------------------------------------------------


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


# -- reading pylock.toml -------------------------------------------------------------------------


class _Reader:
    """Typed look-ups in parsed TOML that fail as one line naming the file and the key path."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, key: str, problem: str) -> UsageError:
        return UsageError(f"{self.path}: {key}: {problem}")

    def get(self, table: dict, key: str, where: str, kind: type, required: bool = False) -> Any:
        full = f"{where}.{key}" if where else key
        if key not in table:
            if required:
                raise self.fail(full, "missing")
            return None
        value = table[key]
        if kind is int and isinstance(value, bool) or not isinstance(value, kind):
            raise self.fail(full, f"expected {_KINDS[kind]}, got {value!r}")
        return value

    def tables(self, table: dict, key: str, where: str, required: bool = False) -> list[tuple[str, dict]]:
        """The tables of an array of tables, each with its key path ("packages[2]")."""
        items = self.get(table, key, where, list, required) or []
        full = f"{where}.{key}" if where else key
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                raise self.fail(f"{full}[{i}]", f"expected a table, got {item!r}")
        return [(f"{full}[{i}]", item) for i, item in enumerate(items)]

    def strings(self, table: dict, key: str, where: str) -> tuple[str, ...]:
        items = self.get(table, key, where, list) or []
        for i, item in enumerate(items):
            if not isinstance(item, str):
                raise self.fail(f"{where}.{key}[{i}]", f"expected a string, got {item!r}")
        return tuple(items)

    def checked(self, table: dict, key: str, where: str, parse: Any, what: str) -> Optional[str]:
        value = self.get(table, key, where, str)
        if value is not None:
            try:
                parse(value)
            except (InvalidMarker, InvalidSpecifier, InvalidVersion) as exc:
                first = str(exc).splitlines()[0]  # packaging adds lines pointing at the spot
                raise self.fail(f"{where}.{key}" if where else key, f"not a valid {what}: {value!r} ({first})") from None
        return value


_KINDS = {str: "a string", int: "an integer", list: "an array", dict: "a table"}


def read_pylock(path: str) -> Lock:
    """A pylock.toml back as a Lock: ours in full, another tool's with what it does not record left empty.

    Each wheel of a [[packages]] entry becomes its own LockedPackage (the writer groups them again);
    an entry without wheels (sdist, VCS, directory, archive) is read as a package with no source.
    """
    reader = _Reader(path)
    try:
        with open(path, "rb") as stream:
            data = tomllib.loads(stream.read().decode("utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not UTF-8 ({exc})") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML ({exc})") from None
    version = reader.get(data, "lock-version", "", str, required=True)
    if version.split(".")[0] != LOCK_VERSION.split(".")[0]:
        raise reader.fail("lock-version", f"{version!r} is not supported (this cudaresolve reads {LOCK_VERSION})")
    created_by = reader.get(data, "created-by", "", str, required=True)
    requires_python = reader.checked(data, "requires-python", "", SpecifierSet, "version specifier")
    packages = []
    for where, entry in reader.tables(data, "packages", "", required=True):
        packages += _read_package(reader, where, entry, os.path.dirname(os.path.abspath(path)), created_by)
    tool = reader.get(reader.get(data, "tool", "", dict) or {}, TOOL, "tool", dict) or {}
    where = f"tool.{TOOL}"
    hosts, labels = [], []
    for host_where, host in reader.tables(tool, "hosts", where):
        labels.append(reader.get(host, "label", host_where, str, required=True))
        facts = reader.get(host, "facts", host_where, dict, required=True)
        # Normalised through HostFacts: it validates the facts and puts back the nulls TOML cannot hold.
        hosts.append(json.loads(HostFacts.from_dict(facts, origin=f"{path}: {host_where}.facts").to_json()))
    for kept_where, kept in reader.tables(tool, "kept", where):
        packages.append(
            LockedPackage(
                name=reader.get(kept, "name", kept_where, str, required=True),
                version=reader.get(kept, "version", kept_where, str, required=True),
                index=None,
                wheel=None,
                marker=reader.checked(kept, "marker", kept_where, Marker, "marker"),
                reason=reader.get(kept, "reason", kept_where, str) or "",
                provided_by=reader.get(kept, "provided-by", kept_where, str),
            )
        )
    decisions = []
    for decision_where, decision in reader.tables(tool, "decisions", where):
        rejected = tuple(
            (
                reader.get(item, "candidate", item_where, str, required=True),
                reader.get(item, "reason", item_where, str, required=True),
            )
            for item_where, item in reader.tables(decision, "rejected", decision_where)
        )
        decisions.append(
            Decision(
                name=reader.get(decision, "name", decision_where, str, required=True),
                chosen=reader.get(decision, "chosen", decision_where, str),
                rejected=rejected,
            )
        )
    index_urls = reader.strings(tool, "index-urls", where) if "index-urls" in tool else _indexes_used(packages)
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
    name = canonicalize_name(reader.get(entry, "name", where, str, required=True))
    version = reader.checked(entry, "version", where, Version, "version")
    marker = reader.checked(entry, "marker", where, Marker, "marker")
    index = reader.get(entry, "index", where, str)
    package_tool = reader.get(entry, "tool", where, dict) or {}
    ours = reader.get(package_tool, TOOL, f"{where}.tool", dict) or {}
    reason = reader.get(ours, "reason", f"{where}.tool.{TOOL}", str) or ""
    wheels = reader.tables(entry, "wheels", where)
    if not wheels:
        kind = next((key for key in _SOURCE_KEYS if key in entry), None)
        if kind is None:
            raise reader.fail(where, f"{name} has no source (wheels, sdist, archive, directory or vcs)")
        why = reason or f"a {kind} source in {created_by}'s lock (cudaresolve reads wheels only)"
        return [LockedPackage(name, version or "", index, None, marker, why)]
    read = [_read_wheel(reader, wheel_where, wheel, base) for wheel_where, wheel in wheels]
    # PEP 751 only says a version SHOULD be there; a wheel's file name always carries it.
    version = version or str(parse_wheel_filename(read[0].filename)[1])
    return [LockedPackage(name, version, index, wheel, marker, reason) for wheel in read]


def _read_wheel(reader: _Reader, where: str, wheel: dict, base: str) -> LockedWheel:
    url = reader.get(wheel, "url", where, str)
    local = reader.get(wheel, "path", where, str)
    if url is None and local is None:
        raise reader.fail(where, "needs url or path")
    if url is None:
        # PEP 751: a relative path is relative to the lock file.
        url = Path(base, local).resolve().as_uri()
    filename = reader.get(wheel, "name", where, str) or urllib.parse.unquote(urllib.parse.urlsplit(url).path.rsplit("/", 1)[-1])
    try:
        parse_wheel_filename(filename)
    except InvalidWheelFilename:
        raise reader.fail(f"{where}.name", f"{filename!r} is not a wheel file name") from None
    hashes = reader.get(wheel, "hashes", where, dict, required=True)
    if not hashes:
        raise reader.fail(f"{where}.hashes", "PEP 751 requires at least one hash")
    sha256 = reader.get(hashes, "sha256", f"{where}.hashes", str)
    size = reader.get(wheel, "size", where, int)
    return LockedWheel(filename=filename, url=url, sha256=sha256, size=size)
