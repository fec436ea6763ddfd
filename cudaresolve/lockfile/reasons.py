"""The resolver's records in a lock file: a package's Reason, a Rejection, a CUDA major set aside,
each as a plain table and back. Reading is validated like every other lock value: each string
passes its rule in fields.py, each version or release parses, an unknown rule or origin kind is
refused, and every failure names the key.

A record's table holds its dataclass fields (dashes for underscores; None left out, as TOML has no
null); a Rejection's evidence and an origin are tables named by their `rule` or `kind`. The JSON
report uses the same tables with underscores (`dashes=False`).

May import: packaging, the value types, resolve/lock.py and resolve/reasons.py, lockfile/fields.py.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import typing
from typing import Any, Union

from packaging.utils import NormalizedName
from packaging.version import Version

from cudaresolve.arch import ComputeCapability, Target
from cudaresolve.errors import UsageError
from cudaresolve.lockfile import fields
from cudaresolve.resolve.lock import Build, Reason, ReasonKind
from cudaresolve.resolve.reasons import (
    GROUNDS,
    ORIGINS,
    CandidateRef,
    DriverTooOld,
    GpuRef,
    MajorRejection,
    OriginKind,
    Rejection,
    Rule,
    ToolkitTargets,
)
from cudaresolve.versions import CudaVersion, DriverRelease

MAX_ITEMS = 1000  # origins of one package, device-code targets of one build
MAX_NUMBER = 1 << 31  # a GPU index, a CUDA major
_VALUES = (CudaVersion, DriverRelease, ComputeCapability, Target)


class Bad(ValueError):
    """A value of a record that breaks its rule: `key` is its path below the record's table."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key}: {problem}")
        self.key, self.problem = key, problem


# -- writing ---------------------------------------------------------------------------------------


def plain(record: Any, dashes: bool = True) -> dict[str, Any]:
    """A record as a table: its fields by name, values as text, numbers, booleans, lists and tables
    (a field marked `unwritten-default` only when it is not at its default)."""
    table: dict[str, Any] = {}
    for field in _in_lock_file(record):
        raw = getattr(record, field.name)
        value = _plain_value(raw, dashes)
        if value is not None and not (field.metadata.get("unwritten-default") and raw == field.default):
            table[_key(field.name, dashes)] = value
    return table


def _plain_value(value: Any, dashes: bool) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, (Version, *_VALUES)):
        return str(value)
    if isinstance(value, tuple):
        return [_plain_value(item, dashes) for item in value]
    if isinstance(value, enum.Enum):  # ReasonKind, PreRelease
        return value.value
    if hasattr(value, "rule"):
        return {"rule": value.rule.value, **plain(value, dashes)}
    if hasattr(value, "kind"):
        return {"kind": value.kind.value, **plain(value, dashes)}
    return plain(value, dashes)


def _in_lock_file(record: Any) -> list[dataclasses.Field[Any]]:
    return [field for field in dataclasses.fields(record) if field.metadata.get("lock-file", True)]


def _key(name: str, dashes: bool) -> str:
    return name.replace("_", "-") if dashes else name


def reason_table(reason: Reason, dashes: bool = True) -> dict[str, Any]:
    return plain(reason, dashes)


def rejection_table(rejection: Rejection, dashes: bool = True) -> dict[str, Any]:
    """A rejection inside its decision, whose name it shares: the version, the rule, the evidence."""
    table: dict[str, Any] = {"version": str(rejection.candidate.version), "rule": rejection.rule.value}
    if rejection.installed:
        table["installed"] = True
    table["evidence"] = plain(rejection.evidence, dashes)
    return table


def major_rejection_table(rejection: MajorRejection, dashes: bool = True) -> dict[str, Any]:
    return {"major": rejection.major, "rule": rejection.evidence.rule.value, "evidence": plain(rejection.evidence, dashes)}


# -- reading ---------------------------------------------------------------------------------------


def read_reason(table: dict[str, Any]) -> Reason:
    """A Reason from its table; raises Bad naming the key."""
    kind = _enum(ReasonKind, table.get("kind"), "kind")
    if "added-extra" in table and "added-extras" not in table:  # written before a package could get two
        extra = _rule(fields.extra, table["added-extra"], "added-extra")
        table = {**{k: v for k, v in table.items() if k != "added-extra"}, "added-extras": [extra]}
    values = _fields(Reason, table, "", skip=frozenset({"kind"}))
    return Reason(kind=kind, **values)


def read_rejection(table: dict[str, Any], name: NormalizedName) -> Rejection:
    """A Rejection of a candidate of `name` from its table; raises Bad naming the key."""
    version = _version(_required(table, "version", ""), "version")
    rule = _enum(Rule, table.get("rule"), "rule")
    installed = table.get("installed", False)
    if not isinstance(installed, bool):
        raise Bad("installed", f"expected true or false, got {fields.shown(installed)}")
    grounds = _table(_required(table, "evidence", ""), "evidence")
    if rule is Rule.DEVICE_CODE and "gpu" in grounds and "gpus" not in grounds:  # written before it named every GPU
        grounds = {**{k: v for k, v in grounds.items() if k != "gpu"}, "gpus": [{"index": _number(grounds["gpu"], "evidence.gpu")}]}
    evidence = _record(GROUNDS[rule], grounds, "evidence")
    return Rejection(CandidateRef(name, version), evidence, installed)


def read_major_rejection(table: dict[str, Any]) -> MajorRejection:
    major = _number(_required(table, "major", ""), "major")
    rule = _enum(Rule, table.get("rule"), "rule")
    if rule not in (Rule.DRIVER, Rule.TOOLKIT_TARGETS):
        raise Bad("rule", f"{rule.value!r} does not set a CUDA major aside")
    kind = DriverTooOld if rule is Rule.DRIVER else ToolkitTargets
    return MajorRejection(major, _record(kind, _table(_required(table, "evidence", ""), "evidence"), "evidence"))


def _required(table: dict[str, Any], key: str, where: str) -> Any:
    if key not in table:
        raise Bad(_join(where, key), "missing")
    return table[key]


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _table(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise Bad(where, f"expected a table, got {fields.shown(value)}")
    return value


def _enum(kind: Any, value: Any, where: str) -> Any:
    if value is None:
        raise Bad(where, "missing")
    try:
        return kind(value)
    except (ValueError, TypeError):
        known = ", ".join(member.value for member in kind)
        raise Bad(where, f"{fields.shown(value)} is not one of {known}") from None


def _record(cls: type, table: dict[str, Any], where: str) -> Any:
    return cls(**_fields(cls, table, where))


def _fields(cls: type, table: dict[str, Any], where: str, skip: frozenset[str] = frozenset()) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for field in _in_lock_file(cls):
        if field.name in skip:
            continue
        key, kind = _key(field.name, True), _hints(cls)[field.name]
        optional = typing.get_origin(kind) is Union
        if key not in table:
            if optional:
                values[field.name] = None  # TOML has no null: an absent key is None
            elif field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
                raise Bad(_join(where, key), "missing")
            continue
        inner = next(a for a in typing.get_args(kind) if a is not type(None)) if optional else kind
        values[field.name] = _value(inner, table[key], _join(where, key), field.name)
    return values


def _value(kind: Any, value: Any, where: str, name: str) -> Any:
    if typing.get_origin(kind) is tuple:
        if not isinstance(value, list):
            raise Bad(where, f"expected an array, got {fields.shown(value)}")
        if len(value) > MAX_ITEMS:
            raise Bad(where, f"more than {MAX_ITEMS} items")
        item = typing.get_args(kind)[0]
        return tuple(_value(item, v, f"{where}[{i}]", name) for i, v in enumerate(value))
    if kind is bool:
        if not isinstance(value, bool):
            raise Bad(where, f"expected true or false, got {fields.shown(value)}")
        return value
    if kind is int:
        return _number(value, where)
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return _enum(kind, value, where)
    if kind is NormalizedName:
        return _rule(fields.name, value, where)
    if kind is Version:
        return _version(value, where)
    if kind in _VALUES:
        text = _rule(fields.label, value, where)
        try:
            parsed = kind.parse(text)
        except UsageError as exc:
            raise Bad(where, str(exc)) from None
        if kind is Target and name in ("sass", "ptx") and parsed.kind != name:
            raise Bad(where, f"{text!r} is not a {name.upper()} target")
        return parsed
    if kind is str:
        return _rule(fields.extra if name in ("extra", "added_extras", "extras") else fields.text, value, where)
    if kind is Build or kind is CandidateRef or kind is GpuRef:
        return _record(kind, _table(value, where), where)
    if kind is Rejection:
        return _nested_rejection(_table(value, where), where)
    # an origin: one of several records, named by its kind
    table = _table(value, where)
    origin = _enum(OriginKind, table.get("kind"), _join(where, "kind"))
    return _record(ORIGINS[origin], {k: v for k, v in table.items() if k != "kind"}, where)


def _nested_rejection(table: dict[str, Any], where: str) -> Rejection:
    """A rejection inside another's evidence (NeedsSetAside.set_aside), one level deep at most."""
    candidate = _record(CandidateRef, _table(_required(table, "candidate", where), _join(where, "candidate")), _join(where, "candidate"))
    grounds = _table(_required(table, "evidence", where), _join(where, "evidence"))
    rule = _enum(Rule, grounds.get("rule"), _join(where, "evidence.rule"))
    if rule is Rule.NEEDS_SET_ASIDE:
        raise Bad(_join(where, "evidence.rule"), f"{rule.value!r} inside {rule.value!r}")
    installed = table.get("installed", False)
    if not isinstance(installed, bool):
        raise Bad(_join(where, "installed"), f"expected true or false, got {fields.shown(installed)}")
    return Rejection(candidate, _record(GROUNDS[rule], grounds, _join(where, "evidence")), installed)


def _number(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise Bad(where, f"expected an integer, got {fields.shown(value)}")
    if not 0 <= value < MAX_NUMBER:
        raise Bad(where, f"not a number from 0 to {MAX_NUMBER - 1}: {value}")
    return value


def _version(value: Any, where: str) -> Version:
    return Version(_rule(fields.version, value, where))


def _rule(rule: Any, value: Any, where: str) -> Any:
    try:
        return rule(value)
    except fields.Invalid as exc:
        raise Bad(where, str(exc)) from None


@functools.lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def checked_reason(reason: Reason) -> Reason:
    """`reason` as a reader would build it from its table: what the writers apply before writing."""
    return read_reason(reason_table(reason))


def checked_rejection(rejection: Rejection) -> Rejection:
    """`rejection` when it reads back the same (keeping what only memory holds: a judged finding)."""
    back = read_rejection(rejection_table(rejection), rejection.candidate.name)
    return rejection if back == rejection else back


def checked_major_rejection(rejection: MajorRejection) -> MajorRejection:
    return read_major_rejection(major_rejection_table(rejection))
