"""PEP 751's pylock.toml: its file-name rule and the validating reader (lockfile/writer.py writes it).

`read_pylock` is the one way a lock file comes in (`install --lock`, `lock --check`, `why`): the
file is read up to `fields.MAX_FILE_BYTES`, parsed, and every value it uses passes its rule in
fields.py before a `Lock` exists; anything else is a LockFileError (exit 3) naming the file, the
key and the package.

Why not `packaging.pylock` (a Pylock model with validation): it arrived in packaging 26.0, which
still runs on Python 3.8 (26.4 needs 3.10), so Python 3.9 is no obstacle, but cudaresolve
would raise its packaging floor from 23 to 26 for it, and its validation is not strict enough for
what pip's input needs: hashes, URLs, `index` and `path` may be any strings (a newline or an option
passes), sizes any integer, and a name must already be normalised (another tool's `Attrs` is
refused rather than normalised). Every rule below would still be needed beside it, so the tests use
it as an independent reader of what we write instead.

The words a person reads in the file (a package's `reason`, a rejection's) are checked like any
text and not used: the Lock is built from the records beside them.

May import: packaging, errors, host facts (to validate a lock's hosts), resolve/lock.py and
resolve/reasons.py (the model), lockfile/.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import re
import sys
import urllib.parse
from pathlib import Path
from typing import Any, Callable, Iterable, Literal, Optional, TypeVar, overload

from packaging.utils import parse_wheel_filename
from packaging.version import Version

from cudaresolve.bounded import read_bounded
from cudaresolve.errors import UsageError
from cudaresolve.host.facts import HostFacts
from cudaresolve.lockfile import fields, reasons
from cudaresolve.lockfile.check import one_per_environment
from cudaresolve.lockfile.fields import LockFileError
from cudaresolve.lockfile.files import TOOL as TOOL  # re-exported: the writer names the tool from here
from cudaresolve.resolve.lock import (
    Decision,
    Fork,
    Lock,
    LockedPackage,
    LockedSdist,
    LockedWheel,
    MajorDecision,
    OtherSource,
    Reason,
    ReasonKind,
)
from cudaresolve.resolve.reasons import CandidateRef

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

T = TypeVar("T")

LOCK_VERSION = "1.0"
_NAMED_LOCK = re.compile(r"^pylock\.([^.]+)\.toml$")  # PEP 751's rule for a named lock file
_OTHER_SOURCES: tuple[OtherSource, ...] = ("sdist", "vcs", "directory", "archive")


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


# -- reading -------------------------------------------------------------------------------------


class _Reader:
    """Typed, validated look-ups in parsed TOML that fail as one line naming the file, the key path
    and, inside a package, the package."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, key: str, problem: str, package: str = "") -> LockFileError:
        who = f" (package {package})" if package else ""
        return LockFileError(f"{self.path}: {key}{who}: {problem}")

    def get(self, table: dict[str, Any], key: str, where: str, kind: type, required: bool = False, package: str = "") -> Any:
        full = f"{where}.{key}" if where else key
        if key not in table:
            if required:
                raise self.fail(full, "missing", package)
            return None
        value = table[key]
        if kind is int and isinstance(value, bool) or not isinstance(value, kind):
            raise self.fail(full, f"expected {_KINDS[kind]}, got {fields.shown(value)}", package)
        return value

    @overload
    def field(
        self, table: dict[str, Any], key: str, where: str, rule: Callable[[Any], T], required: Literal[True], package: str = ""
    ) -> T: ...

    @overload
    def field(
        self, table: dict[str, Any], key: str, where: str, rule: Callable[[Any], T], required: bool = False, package: str = ""
    ) -> Optional[T]: ...

    def field(self, table: dict[str, Any], key: str, where: str, rule: Callable[[Any], T], required: bool = False, package: str = "") -> Optional[T]:
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

    def tables(self, table: dict[str, Any], key: str, where: str, required: bool = False, package: str = "") -> list[tuple[str, dict[str, Any]]]:
        """The tables of an array of tables, each with its key path ("packages[2]")."""
        items = self.get(table, key, where, list, required, package) or []
        full = f"{where}.{key}" if where else key
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                raise self.fail(f"{full}[{i}]", f"expected a table, got {fields.shown(item)}", package)
        return [(f"{full}[{i}]", item) for i, item in enumerate(items)]

    def values(self, table: dict[str, Any], key: str, where: str, rule: Callable[[Any], T]) -> tuple[T, ...]:
        """The values of an array, each passed through its rule."""
        items = self.get(table, key, where, list) or []
        found = []
        for i, item in enumerate(items):
            try:
                found.append(rule(item))
            except fields.Invalid as exc:
                raise self.fail(f"{where}.{key}[{i}]" if where else f"{key}[{i}]", str(exc)) from None
        return tuple(found)


_KINDS = {str: "a string", int: "an integer", list: "an array", dict: "a table"}


def read_pylock(path: str) -> Lock:
    """A pylock.toml back as a Lock, every value validated: ours in full, another tool's with what
    it does not record left empty. Read up to the size limit, and only from a regular file, so a
    device, a FIFO with no writer or a huge file costs nothing.

    Each [[packages]] entry becomes one LockedPackage with all its wheels; several entries of one
    name (a universal lock) each need their own marker. An entry without wheels is read with the
    kind of source it has instead (`other_source`).
    """
    try:
        raw = read_bounded(path, fields.MAX_FILE_BYTES, regular=True)
    except OSError as exc:
        if exc.errno == errno.EFBIG:
            raise _too_large(path) from None
        raise LockFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    return parse_pylock(raw, path)


def _too_large(path: str) -> LockFileError:
    return LockFileError(f"{path}: larger than {fields.MAX_FILE_BYTES >> 20} MiB, more than any lock file needs")


def parse_pylock(raw: bytes, path: str) -> Lock:
    """The bytes of the lock file `path` as a Lock (what read_pylock does once it has read them);
    every way they can fail is one LockFileError line."""
    if len(raw) > fields.MAX_FILE_BYTES:
        raise _too_large(path)
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


def _read_lock(reader: _Reader, data: dict[str, Any], base: str) -> Lock:
    reader.field(data, "lock-version", "", fields.lock_version, required=True)
    created_by = reader.field(data, "created-by", "", fields.label, required=True)
    requires_python = reader.field(data, "requires-python", "", fields.requires_python)
    environments = reader.values(data, "environments", "", fields.marker)
    packages = []
    for where, entry in reader.tables(data, "packages", "", required=True):
        packages.append(_read_package(reader, where, entry, base, created_by))
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
                version=Version(reader.field(kept, "version", kept_where, fields.version, required=True, package=name)),
                index=None,
                wheels=(),
                marker=reader.field(kept, "marker", kept_where, fields.marker, package=name),
                reason=_read_reason(reader, kept, kept_where, name) or Reason(ReasonKind.UNRECORDED),
                provided_by=reader.field(kept, "provided-by", kept_where, fields.provider, package=name),
            )
        )
    decisions = []
    for decision_where, decision in reader.tables(tool, "decisions", where):
        name = reader.field(decision, "name", decision_where, fields.name, required=True)
        chosen = reader.field(decision, "chosen", decision_where, fields.version, package=name)
        rejected = tuple(
            _read_record(reader, item, item_where, name, functools.partial(reasons.read_rejection, name=name))
            for item_where, item in reader.tables(decision, "rejected", decision_where, package=name)
        )
        marker = reader.field(decision, "marker", decision_where, fields.marker, package=name)
        decisions.append(Decision(name, None if chosen is None else CandidateRef(name, Version(chosen)), rejected, marker))
    table = reader.get(tool, "cuda-major", where, dict)
    major = None if table is None else _read_major(reader, table, f"{where}.cuda-major", marked=False)
    majors = tuple(_read_major(reader, table, major_where, marked=True) for major_where, table in reader.tables(tool, "cuda-majors", where))
    forks = []
    for fork_where, fork in reader.tables(tool, "forks", where):
        name = reader.field(fork, "name", fork_where, fields.name, required=True)
        versions = []
        for item_where, item in reader.tables(fork, "versions", fork_where, required=True, package=name):
            fork_version = reader.field(item, "version", item_where, fields.version, package=name)
            versions.append((reader.field(item, "marker", item_where, fields.marker, required=True, package=name),
                             None if fork_version is None else Version(fork_version)))
        forks.append(Fork(name, tuple(versions)))
    index_urls = reader.values(tool, "index-urls", where, fields.url) if "index-urls" in tool else _indexes_used(packages)
    one_per_environment(packages, reader.path)
    return Lock(
        packages=tuple(packages),
        requires_python=requires_python,
        hosts=tuple(hosts),
        host_labels=tuple(labels),
        index_urls=index_urls,
        decisions=tuple(decisions),
        created_by=created_by,
        major=major,
        environments=environments,
        forks=tuple(forks),
        majors=majors,
    )


def _read_major(reader: _Reader, table: dict[str, Any], where: str, marked: bool) -> MajorDecision:
    """[tool.cudaresolve.cuda-major], or one of a universal lock's cuda-majors (with its marker)."""
    chosen = reader.field(table, "chosen", where, _major, required=True)
    rejected = tuple(
        _read_record(reader, item, item_where, "", reasons.read_major_rejection)
        for item_where, item in reader.tables(table, "rejected", where)
    )
    marker = reader.field(table, "marker", where, fields.marker, required=True) if marked else None
    return MajorDecision(chosen, rejected, marker)


def _major(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 1000:
        raise fields.Invalid(f"not a CUDA major: {fields.shown(value)}")
    return value


def _read_record(reader: _Reader, table: dict[str, Any], where: str, package: str, read: Callable[[dict[str, Any]], T]) -> T:
    """A record of the resolver's from its table; a value that breaks its rule names its key."""
    reader.field(table, "reason", where, fields.text, package=package)  # the words for people: checked, never used
    try:
        return read(table)
    except reasons.Bad as exc:
        raise reader.fail(f"{where}.{exc.key}", exc.problem, package) from None


def _read_reason(reader: _Reader, table: dict[str, Any], where: str, package: str) -> Optional[Reason]:
    """The Reason recorded in `table` (a package's [tool.cudaresolve], or a kept entry); None when
    it records none (another tool's lock, or only words)."""
    if "kind" not in table:
        reader.field(table, "reason", where, fields.text, package=package)
        return None
    return _read_record(reader, table, where, package, reasons.read_reason)


def _indexes_used(packages: Iterable[LockedPackage]) -> tuple[str, ...]:
    """Another tool's lock records indexes per package only: these, in file order, are its indexes."""
    return tuple(dict.fromkeys(p.index for p in packages if p.index))


def _read_package(reader: _Reader, where: str, entry: dict[str, Any], base: str, created_by: str) -> LockedPackage:
    """One [[packages]] entry: a LockedPackage with its wheels, or with the other source it has."""
    name = reader.field(entry, "name", where, fields.name, required=True)
    version = reader.field(entry, "version", where, fields.version, package=name)
    marker = reader.field(entry, "marker", where, fields.marker, package=name)
    index = reader.field(entry, "index", where, fields.url, package=name)
    package_tool = reader.get(entry, "tool", where, dict, package=name) or {}
    ours = reader.get(package_tool, TOOL, f"{where}.tool", dict, package=name) or {}
    reason = _read_reason(reader, ours, f"{where}.tool.{TOOL}", name)
    wheels = reader.tables(entry, "wheels", where, package=name)
    others = [key for key in _OTHER_SOURCES if key in entry]
    for key in others:
        reader.get(entry, key, where, dict, package=name)
    direct = [key for key in others if key != "sdist"]
    if wheels and direct:
        raise reader.fail(where, f"wheels together with {direct[0]} (PEP 751 allows one or the other)", name)
    sdist = None
    if "sdist" in entry and reason is not None and reason.kind is not ReasonKind.OTHER_SOURCE:
        sdist = _read_sdist(reader, f"{where}.sdist", entry["sdist"], base, name, version or "")  # our own: pip builds it
    if not wheels and sdist is not None:
        assert reason is not None  # an sdist is read for our own entries only
        if version is None:
            raise reader.fail(f"{where}.version", "missing", name)
        return LockedPackage(name, Version(version), index, (), marker, reason, sdist=sdist)
    if not wheels:
        if not others:
            raise reader.fail(where, "no source (wheels, sdist, archive, directory or vcs)", name)
        kind = others[0]
        why = reason or Reason(ReasonKind.OTHER_SOURCE, written_by=created_by)
        pinned = Version(version) if version is not None else None
        return LockedPackage(name, pinned, index, (), marker, why, other_source=kind)
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
    named = [wheel.filename for wheel in read]
    for (wheel_where, _), filename in zip(wheels, named):
        if named.count(filename) > 1:
            raise reader.fail(f"{wheel_where}.name", f"{fields.shown(filename)} named twice in one entry", name)
    why = reason or Reason(ReasonKind.UNRECORDED)
    return LockedPackage(name, Version(version), index, tuple(read), marker, why, sdist=sdist)


def _read_sdist(reader: _Reader, where: str, table: dict[str, Any], base: str, name: str, version: str) -> LockedSdist:
    """A [packages.sdist] table of our own lock: its file, with the sha256 pip's hash-checking needs."""
    url = reader.field(table, "url", where, fields.url, package=name)
    local = reader.field(table, "path", where, fields.path, package=name)
    if url is None and local is None:
        raise reader.fail(where, "needs url or path", name)
    if url is None:
        assert local is not None
        try:
            url = fields.url(Path(base, local).resolve().as_uri())
        except (OSError, ValueError, RuntimeError) as exc:
            raise reader.fail(f"{where}.path", f"cannot be made a file URL ({exc})", name) from None
    filename = table.get("name")
    if filename is None:
        filename = urllib.parse.unquote((local or urllib.parse.urlsplit(url).path).replace("\\", "/").rsplit("/", 1)[-1])
    try:
        filename = fields.sdist_filename(filename, name, version)
    except fields.Invalid as exc:
        raise reader.fail(f"{where}.name", str(exc), name) from None
    hashes = reader.get(table, "hashes", where, dict, required=True, package=name)
    sha256 = reader.field(hashes, "sha256", f"{where}.hashes", fields.sha256, required=True, package=name)
    size = reader.field(table, "size", where, fields.size, package=name)
    return LockedSdist(filename=filename, url=url, sha256=sha256, size=size)


def _read_wheel(reader: _Reader, where: str, wheel: dict[str, Any], base: str, name: str, version: str) -> LockedWheel:
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
