"""Reading one data file: TOML into its records, each file and top-level table checked for provenance.

Every file, and every top-level table in it, names its `source` and an H/M/L `confidence`; rows
without their own confidence inherit the nearest enclosing one (docs/data.md).

May import: records and errors only. The table modules import this, never the other way round.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from importlib import resources
from typing import Any, Callable, TypeVar

from packaging.version import Version

from cudaresolve import records
from cudaresolve.errors import DataError, UsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python < 3.11 only
    import tomli as tomllib

CONFIDENCES = ("H", "M", "L")

_T = TypeVar("_T")


def check_confidence(value: str) -> None:
    if value not in CONFIDENCES:
        raise UsageError(f"expected one of {', '.join(CONFIDENCES)}, got {value!r}")


def _nonblank(value: str) -> None:
    if not value.strip():
        raise UsageError("is empty")


def parses(parse: Callable[[str], Any]) -> Callable[[str], None]:
    """A check that `parse` (Version, SpecifierSet, Requirement) accepts the text; packaging's
    Invalid* errors are ValueErrors."""

    def check(value: str) -> None:
        try:
            parse(value)
        except ValueError as exc:
            raise UsageError(f"{value!r} does not parse: {exc}") from None

    return check


def _specifier_set(text: str) -> Any:
    """packaging's requirements and specifiers take ~10 ms to import, which the tables the host
    needs (toolkits, gpus) and a cached doctor run do without."""
    from packaging.specifiers import SpecifierSet

    return SpecifierSet(text)


def _requirement(text: str) -> Any:
    from packaging.requirements import Requirement

    return Requirement(text)


VERSION = records.check(parses(Version))
SPECIFIER = records.check(parses(_specifier_set))
REQUIREMENT = records.check(parses(_requirement))
CONFIDENCE = records.check(check_confidence, inherit=True)


@dataclass(frozen=True)
class Provenance:
    """Where a file's or table's facts come from."""

    source: str = field(metadata=records.check(_nonblank))
    confidence: str = field(metadata=CONFIDENCE)


def error(name: str, path: str, message: str) -> DataError:
    """A defect found after loading, worded like the loader's: `file: key.path: message`."""
    return DataError(f"{name}: {path or 'top level'}: {message}")


def read(name: str, cls: type[_T]) -> _T:
    """Load data file `name` into `cls`, once its provenance and that of its top-level tables check."""
    try:
        raw = resources.files("cudaresolve.data").joinpath(name).read_bytes()
    except OSError as exc:
        raise DataError(f"{name}: cannot be read from the installed package ({exc})") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"{name}: not valid TOML: {exc}") from None
    tables = [("", data)] + [(key, value) for key, value in data.items() if isinstance(value, dict)]
    try:
        for key, table in tables:
            records.load(Provenance, table, path=key)
        return records.load(cls, data)
    except records.RecordError as exc:
        raise error(name, exc.path, exc.problem) from None

