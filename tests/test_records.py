"""records.load: types, defaults, inheritance and key paths in errors."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional

import pytest

from cudaresolve import records
from cudaresolve.arch import ComputeCapability
from cudaresolve.errors import UsageError


def _even(value: str) -> None:
    if len(value) % 2:
        raise UsageError(f"odd length: {value!r}")


@dataclass(frozen=True)
class Leaf:
    cc: ComputeCapability
    confidence: str = field(default="H", metadata=records.check(inherit=True))
    windows: Optional[str] = field(default=None, metadata=records.check(key="win"))


@dataclass(frozen=True)
class Root:
    confidence: str
    leaves: tuple[Leaf, ...]
    names: tuple[str, ...] = field(default=(), metadata=records.check(_even))
    table: Mapping[str, int] = field(default_factory=dict)
    flag: bool = False


def test_builds_nested_records_with_defaults_and_inheritance():
    root = records.load(Root, {"confidence": "M", "leaves": [{"cc": "8.6", "win": "x"}, {"cc": "9.0", "confidence": "L"}],
                               "table": {"a": 1}, "other": "ignored"})
    assert root == Root("M", (Leaf(ComputeCapability(8, 6), "M", "x"), Leaf(ComputeCapability(9, 0), "L")), (), {"a": 1})


@pytest.mark.parametrize(
    "data, fmt, problem",
    [
        ({"leaves": []}, records.TOML, "confidence: missing"),
        ({"confidence": "H", "leaves": [{"cc": 86}]}, records.TOML, "leaves[0].cc: expected a string, got 86"),
        ({"confidence": "H", "leaves": [{"cc": "86"}]}, records.TOML, "leaves[0].cc: not a compute capability"),
        ({"confidence": "H", "leaves": [], "names": ["ab", "c"]}, records.TOML, "names: odd length: 'c'"),
        ({"confidence": "H", "leaves": {}}, records.JSON, "leaves: expected a list, got {}"),
        ({"confidence": "H", "leaves": [{"cc": "8.6", "win": 1}]}, records.JSON, "leaves[0].win: expected a string or null"),
        ({"confidence": "H", "leaves": [], "flag": 1}, records.JSON, "flag: expected true or false, got 1"),
        ({"confidence": "H", "leaves": [], "table": {"a": "b"}}, records.TOML, "table.a: expected an integer, got 'b'"),
    ],
)
def test_errors_name_the_key_path(data, fmt, problem):
    with pytest.raises(records.RecordError) as info:
        records.load(Root, data, fmt)
    assert str(info.value).startswith(problem)
