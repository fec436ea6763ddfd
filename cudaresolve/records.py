"""Frozen dataclasses built from parsed TOML or JSON, driven by the dataclass's own fields.

Why one reader: the knowledge tables and the host JSON are nested mappings read into frozen records.
Here the field names and annotations say what each key must hold, so no record needs a hand-written
constructor, and every defect names its key path. Supported annotations: str, int, bool,
Optional[T], tuple[T, ...], Mapping[str, T] (a table of values, in file order), nested dataclasses,
and value types with a `parse(text)` classmethod (ComputeCapability, CudaVersion). Keys the record
does not name are ignored.

Field metadata adds what a type cannot say: `check(fn)` runs `fn` on each string value (it raises
UsageError to reject it), `inherit` takes a missing value from the nearest enclosing record, `key`
reads the field from a differently named key.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import functools
import re
import typing
from dataclasses import dataclass
from typing import Any, Callable, Optional, TypeVar, Union, cast

from cudaresolve.errors import UsageError

T = TypeVar("T")
_INT_BITS = 63  # a signed 64-bit integer, as TOML defines its integers


def check(fn: Optional[Callable[[str], Any]] = None, inherit: bool = False, key: Optional[str] = None) -> dict[str, Any]:
    """Field metadata: run `fn` on every string the field holds (its items, for a list or table);
    `key` names the data's key where it differs from the field's name."""
    return {"check": fn, "inherit": inherit, **({"key": key} if key else {})}


@dataclass(frozen=True)
class Format:
    """How a format names its containers in messages, and whether it has null."""

    table: str
    tables: str
    strings: str
    null: bool


TOML = Format("a table", "a list of tables", "a list of strings", null=False)
JSON = Format("an object", "a list", "a list", null=True)


class RecordError(Exception):
    """A value that does not fit its field: `path` is "gpus[0].uuid" ("" for the top level).

    Either `expected` and `value` (a wrong type; a missing key has `missing` set and value None) or
    `message` (a parse or check failure) is set; callers word the message for their format.
    """

    def __init__(
        self, path: str, *, expected: Optional[str] = None, value: Any = None, missing: bool = False,
        message: Optional[str] = None,
    ) -> None:
        self.path, self.expected, self.value, self.missing, self.message = path, expected, value, missing, message
        super().__init__(f"{path or 'top level'}: {self.problem}")

    @property
    def problem(self) -> str:
        if self.message is not None:
            return self.message
        return "missing" if self.missing else f"expected {self.expected}, got {shown(self.value)}"


def shown(value: Any, limit: int = 80) -> str:
    """`value` as repr() shows it, cut at `limit` characters; an integer too long for repr() by its size."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > _INT_BITS:
        return f"an integer of {value.bit_length()} bits"
    try:
        text = repr(value)
    except ValueError:  # a list or table holding such an integer
        return "a list" if isinstance(value, list) else "a table"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def load(cls: type[T], data: Any, fmt: Format = TOML, path: str = "") -> T:
    """Build `cls` from `data` (found at `path`); raises RecordError on the first value that does not fit."""
    return cast(T, _record(cls, data, path, fmt, {}))  # _record returns cls(**values)


def _record(cls: Any, data: Any, path: str, fmt: Format, scope: dict[str, Any]) -> Any:
    if not isinstance(data, dict):
        raise RecordError(path, expected=fmt.table, value=data)
    fields = [f for f in dataclasses.fields(cls) if f.init]
    hints = _hints(cls)
    values: dict[str, Any] = {}
    # Inherited fields first: the records nested below see this one's values.
    for f in sorted(fields, key=lambda f: not f.metadata.get("inherit")):
        key = f.metadata.get("key", f.name)
        where = f"{path}.{key}" if path else key
        if key in data:
            values[f.name] = _value(hints[f.name], data[key], where, fmt, f.metadata.get("check"), {**scope, **values})
        elif f.metadata.get("inherit") and key in scope:
            values[f.name] = scope[key]
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise RecordError(where, expected=_describe(hints[f.name], fmt), missing=True)
    return cls(**values)


def _value(kind: Any, value: Any, path: str, fmt: Format, hook: Optional[Callable[[str], Any]], scope: dict[str, Any]) -> Any:
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is Union:
        inner = next(a for a in args if a is not type(None))
        if value is None and fmt.null:
            return None
        try:
            return _value(inner, value, path, fmt, hook, scope)
        except RecordError as exc:
            if exc.path != path or exc.expected is None:
                raise
            raise RecordError(path, expected=_describe(kind, fmt), value=value) from None
    if origin is tuple:
        item = args[0]
        if not isinstance(value, list):
            raise RecordError(path, expected=_describe(kind, fmt), value=value)
        if dataclasses.is_dataclass(item) and not hasattr(item, "parse"):
            return tuple(_record(item, v, f"{path}[{i}]", fmt, scope) for i, v in enumerate(value))
        if not all(_fits(item, v) for v in value):
            raise RecordError(path, expected=_describe(kind, fmt), value=value)
        return tuple(_scalar(item, v, path, hook) for v in value)
    if origin in (dict, collections.abc.Mapping):
        if not isinstance(value, dict):
            raise RecordError(path, expected=fmt.table, value=value)
        for key in value:
            control = _CONTROL.search(key)
            if control:
                raise RecordError(path, message=f"a key holds the control character U+{ord(control.group()):04X}")
        return {key: _value(args[1], v, f"{path}.{key}", fmt, hook, scope) for key, v in value.items()}
    if dataclasses.is_dataclass(kind) and not hasattr(kind, "parse"):
        return _record(kind, value, path, fmt, scope)
    if kind is int and isinstance(value, int) and value.bit_length() > _INT_BITS:
        raise RecordError(path, message=f"larger than a 64-bit integer ({value.bit_length()} bits)")
    if not _fits(kind, value):
        raise RecordError(path, expected=_describe(kind, fmt), value=value)
    return _scalar(kind, value, path, hook)


def _fits(kind: Any, value: Any) -> bool:
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:  # what TOML holds, and what any count or size here needs: a 64-bit integer
        return isinstance(value, int) and not isinstance(value, bool) and value.bit_length() <= _INT_BITS
    return isinstance(value, str)  # str, and the text of a value type


# What a terminal or a log acts on: C0 controls but tab and newline, DEL, C1 controls. A GPU name
# in a host file is printed as it is; an escape sequence in it would be run by the terminal.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _scalar(kind: Any, value: Any, path: str, hook: Optional[Callable[[str], Any]]) -> Any:
    if isinstance(value, str):
        control = _CONTROL.search(value)
        if control:
            raise RecordError(path, message=f"holds the control character U+{ord(control.group()):04X}")
    try:
        if hook is not None:
            hook(value)
        return kind.parse(value) if hasattr(kind, "parse") else value
    except UsageError as exc:
        raise RecordError(path, message=str(exc)) from None


def _describe(kind: Any, fmt: Format) -> str:
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is Union:
        inner = _describe(next(a for a in args if a is not type(None)), fmt)
        return f"{inner.replace(' or ', ', ')} or null" if fmt.null else inner
    if origin is tuple:
        return fmt.tables if dataclasses.is_dataclass(args[0]) and not hasattr(args[0], "parse") else fmt.strings
    if (dataclasses.is_dataclass(kind) and not hasattr(kind, "parse")) or origin is not None:
        return fmt.table
    return {bool: "true or false", int: "an integer"}.get(kind, "a string")


@functools.lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)
