"""Writing a Lock as PEP 751's pylock.toml: one [[packages]] entry per locked release (its wheels
for every target's tags; a universal lock's forks each with its marker), `environments` when the
lock is for named targets, the resolver's records in [tool.cudaresolve] beside the words for people
that output/ makes (`Words`), and the small TOML writer it needs (the format is small and the
project only reads TOML otherwise).

Every value passes its rule first (lockfile/check.py), so a file we write is one the reader takes.

May import: packaging, resolve/lock.py and resolve/reasons.py (the model), lockfile/ (check,
fields, reasons, pylock's constants).
"""

from __future__ import annotations

import re
from typing import Any, Protocol, Union

from packaging.version import Version

from cudaresolve.lockfile import reasons
from cudaresolve.lockfile.check import checked
from cudaresolve.lockfile.fields import LockFileError
from cudaresolve.lockfile.pylock import LOCK_VERSION, TOOL
from cudaresolve.resolve.lock import Lock, LockedPackage, LockedSdist, LockedWheel, ReasonKind
from cudaresolve.resolve.reasons import MajorRejection, Rejection

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")
_PLAIN = re.compile(r'[^\\"\x00-\x1f\x7f]*')  # what a basic string holds unescaped


# -- TOML, by hand -------------------------------------------------------------------------------


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


def _table(path: str, mapping: dict[str, Any], array: bool = False) -> list[str]:
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


def wheel_entries(lock: Lock) -> list[LockedPackage]:
    """Packages with wheels or an sdist, each one [[packages]] entry, sorted by name, version and
    marker (a universal lock has several entries of one name, each with its marker). `lock` is a
    checked one: its names are canonical."""
    entries = [package for package in lock.packages if package.files]
    return sorted(entries, key=lambda p: (p.name, p.version or Version("0"), p.marker or ""))


def sha256_of(package: LockedPackage, file: Union[LockedWheel, LockedSdist], origin: str) -> str:
    """The file's digest, which PEP 751 and pip's hash-checking mode both require."""
    if not file.sha256:
        key = "wheels" if isinstance(file, LockedWheel) else "sdist"
        raise LockFileError(
            f"{origin}: {key}.hashes.sha256 (package {package.name}): {file.filename} has no sha256, "
            "which PEP 751 and pip's hash-checking need"
        )
    return file.sha256


class Words(Protocol):
    """The sentences a person reads beside the records (output/lock_words.py makes them)."""

    def reason(self, package: LockedPackage) -> str: ...

    def rejection(self, rejection: Rejection) -> str: ...

    def major_rejection(self, rejection: MajorRejection) -> str: ...


def _line(key: str, value: Any) -> str:
    return f"{_key(key)} = {_value(value)}"


def _reason_lines(package: LockedPackage, words: Words) -> list[str]:
    """A package's reason: the sentence, then the record's keys, one line each."""
    return [_line("reason", words.reason(package))] + [_line(k, v) for k, v in reasons.reason_table(package.reason).items()]


def pylock_toml(lock: Lock, words: Words) -> str:
    """The lock as a PEP 751 pylock.toml; host facts, decisions and kept distributions go in [tool.cudaresolve].

    Every value passes its rule first (check.checked). An entry with only another source (read
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
    if lock.environments:
        lines.append(f"environments = {_value(list(lock.environments))}")
    with_wheels = wheel_entries(lock)
    if not with_wheels:
        lines.append("packages = []")  # PEP 751 requires the key, even for a lock of nothing to install
    for package in with_wheels:
        lines += ["", "[[packages]]", f"name = {_string(package.name)}"]
        lines.append(f"version = {_string(str(package.version))}")
        if package.marker:
            lines.append(f"marker = {_string(package.marker)}")
        if package.index:
            lines.append(f"index = {_string(package.index)}")
        if package.wheels:
            lines.append("wheels = [")
            for wheel in package.wheels:  # in the lock's order (merged() sorts them by file name)
                entry = {"name": wheel.filename, "url": wheel.url, "size": wheel.size, "hashes": {"sha256": sha256_of(package, wheel, origin)}}
                lines.append(f"    {_value(entry)},")
            lines.append("]")
        if package.sdist is not None:
            sdist = package.sdist
            table = {"name": sdist.filename, "url": sdist.url, "size": sdist.size, "hashes": {"sha256": sha256_of(package, sdist, origin)}}
            lines += ["", "[packages.sdist]"] + [_line(key, value) for key, value in table.items() if value is not None]
        if package.reason.kind is not ReasonKind.UNRECORDED:
            lines += ["", f"[packages.tool.{TOOL}]"] + _reason_lines(package, words)
    kept = sorted((p for p in lock.packages if not p.files), key=lambda p: (p.name, str(p.version)))
    tool: dict[str, Any] = {"index-urls": list(lock.index_urls)}
    tool["hosts"] = [{"label": label, "facts": facts} for label, facts in zip(lock.host_labels, lock.hosts)]
    if not kept:
        tool["kept"] = []
    if not lock.decisions:
        tool["decisions"] = []
    lines += [""] + _table(f"tool.{TOOL}", tool)
    for package in kept:
        lines += ["", f"[[tool.{TOOL}.kept]]", _line("name", package.name), _line("version", str(package.version))]
        lines += [_line(key, value) for key, value in (("marker", package.marker), ("provided-by", package.provided_by)) if value]
        lines += _reason_lines(package, words)
    for decision in lock.decisions:
        lines += ["", f"[[tool.{TOOL}.decisions]]", _line("name", decision.name)]
        if decision.marker is not None:
            lines.append(_line("marker", decision.marker))
        if decision.chosen is not None:
            lines.append(_line("chosen", str(decision.chosen.version)))
        entries = [{"reason": words.rejection(r), **reasons.rejection_table(r)} for r in decision.rejected]
        lines += _array("rejected", entries)
    if lock.major is not None:
        lines += ["", f"[tool.{TOOL}.cuda-major]", _line("chosen", lock.major.chosen)]
        entries = [{"reason": words.major_rejection(r), **reasons.major_rejection_table(r)} for r in lock.major.rejected]
        lines += _array("rejected", entries)
    for major in lock.majors:  # a universal lock whose targets chose different CUDA majors: one per target set
        lines += ["", f"[[tool.{TOOL}.cuda-majors]]", _line("marker", major.marker), _line("chosen", major.chosen)]
        entries = [{"reason": words.major_rejection(r), **reasons.major_rejection_table(r)} for r in major.rejected]
        lines += _array("rejected", entries)
    for fork in lock.forks:
        lines += ["", f"[[tool.{TOOL}.forks]]", _line("name", fork.name)]
        lines += _array("versions", [{"marker": marker, "version": None if v is None else str(v)} for marker, v in fork.versions])
    return "\n".join(lines) + "\n"


def _array(key: str, items: list[dict[str, Any]]) -> list[str]:
    """An array of inline tables, one per line."""
    return [f"{_key(key)} = ["] + [f"    {_value(item)}," for item in items] + ["]"] if items else [f"{_key(key)} = []"]
