"""The knowledge tables compiled once (knowledge/compiled.py): a table's entry gives what parsing the
TOML gives, and every entry that is not exactly what this code, these files and this packaging
wrote (damaged, foreign, planted, of another content or code) is a miss that parses again."""

from __future__ import annotations

import functools
import os
import pickle
from importlib import resources
from pathlib import Path

import pytest
from conftest import plant

from cudaresolve.errors import DataError

# Every table module, imported so that each decorated function is in compiled.LOADERS.
from cudaresolve.knowledge import (  # noqa: F401
    advisories,
    compiled,
    compiler_users,
    components,
    cupy,
    files,
    gpus,
    own_runtime,
    toolkit_pins,
    toolkits,
    torch,
    wheel_facts,
)


def counted(load):
    """`load` (its module and name kept: they name the entry and the classes it may hold), counting its calls."""
    calls = []

    @functools.wraps(load)
    def counting():
        calls.append(1)
        return load()

    return counting, calls


@pytest.fixture
def environ(tmp_path):
    return {"CUDARESOLVE_CACHE_DIR": str(tmp_path / "cache")}


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    """A copy of the data directory that the tables are read from instead of the package's."""
    directory = tmp_path / "data"
    directory.mkdir()
    for shipped in resources.files("cudaresolve.data").iterdir():
        if shipped.name.endswith(".toml"):
            (directory / shipped.name).write_bytes(shipped.read_bytes())
    monkeypatch.setattr(files.resources, "files", lambda package: Path(directory))
    return directory


def test_every_table_loads_from_its_entry_as_parsed(environ):
    assert {load.__module__ for _, load in compiled.LOADERS} >= {
        f"cudaresolve.knowledge.{m}" for m in ("advisories", "compiler_users", "compilers", "components", "cupy", "gpus",
                                               "own_runtime", "toolkit_pins", "toolkits", "torch", "wheel_facts")}
    for names, load in compiled.LOADERS:
        parsed = load()
        counting, calls = counted(load)
        assert compiled.compiled(names, counting, environ) == parsed
        assert compiled.compiled(names, counting, environ) == parsed
        assert len(calls) == 1, f"{load.__module__}.{load.__name__}: the second load was not a hit"
        assert os.path.exists(compiled.entry_path(load, environ))


def test_an_entry_is_a_miss_for_other_content_or_code(environ, data_dir, monkeypatch):
    load = wheel_facts.load.__wrapped__
    counting, calls = counted(load)
    compiled.compiled(("wheel_facts.toml",), counting, environ)
    with open(data_dir / "wheel_facts.toml", "a") as f:
        f.write("\n# an edit\n")
    compiled.compiled(("wheel_facts.toml",), counting, environ)
    assert len(calls) == 2
    compiled.compiled(("wheel_facts.toml",), counting, environ)
    assert len(calls) == 2  # the entry was replaced: a hit again
    monkeypatch.setattr(compiled, "_code_identity", lambda: (("cudaresolve/x.py", 1, 2),))
    compiled.compiled(("wheel_facts.toml",), counting, environ)
    assert len(calls) == 3
    assert os.listdir(os.path.dirname(compiled.entry_path(load, environ))) == [os.path.basename(compiled.entry_path(load, environ))]


def test_an_entry_follows_every_table_its_checks_read(environ, data_dir):
    """compiler_users.toml is checked against compilers.toml: an edit of either is a miss."""
    counting, calls = counted(compiler_users.load.__wrapped__)
    names = (compiler_users.FILE, "compilers.toml")
    compiled.compiled(names, counting, environ)
    with open(data_dir / "compilers.toml", "a") as f:
        f.write("\n# an edit\n")
    compiled.compiled(names, counting, environ)
    assert len(calls) == 2


@pytest.mark.parametrize("how", ["truncated", "a byte changed", "empty", "another header", "trailing bytes", "fifo", "directory"])
def test_a_damaged_entry_is_a_miss_and_is_rewritten(how, environ):
    load = gpus.load.__wrapped__
    counting, calls = counted(load)
    parsed = compiled.compiled(("gpus.toml",), counting, environ)
    entry = compiled.entry_path(load, environ)
    data = open(entry, "rb").read()
    if how in ("fifo", "directory"):
        plant(Path(entry), how)
        assert compiled.compiled(("gpus.toml",), counting, environ) == parsed
        assert len(calls) == 2 and open(entry, "rb").read() == data
        return
    damaged = {
        "truncated": data[: len(data) // 2],
        "a byte changed": data[:-10] + bytes([data[-10] ^ 1]) + data[-9:],
        "empty": b"",
        "another header": data.replace(compiled.HEADER, compiled.HEADER.replace(b"table 1", b"table 9")),
        "trailing bytes": data + b".",
    }[how]
    with open(entry, "wb") as f:
        f.write(damaged)
    assert compiled.compiled(("gpus.toml",), counting, environ) == parsed
    assert len(calls) == 2
    assert open(entry, "rb").read() == data


class _Planted:
    """What a planted entry would build: a class outside the table's module (here, os.system)."""

    def __reduce__(self):
        return (os.system, ("touch planted-ran",))


@pytest.mark.parametrize("payload", [_Planted(), DataError("a class of cudaresolve, not of the table")], ids=["os.system", "DataError"])
def test_a_planted_entry_builds_no_foreign_class(payload, environ, tmp_path, monkeypatch):
    """A whole entry, with this key and a matching digest, whose pickle names a class the table does
    not hold: refused before anything is built, and parsed instead."""
    import hashlib

    monkeypatch.chdir(tmp_path)
    load = gpus.load.__wrapped__
    counting, calls = counted(load)
    parsed = compiled.compiled(("gpus.toml",), counting, environ)
    entry = compiled.entry_path(load, environ)
    key = open(entry, "rb").read()[len(compiled.HEADER):len(compiled.HEADER) + 32]
    planted = pickle.dumps(payload)
    with open(entry, "wb") as f:
        f.write(compiled.HEADER + key + hashlib.sha256(planted).digest() + planted)
    assert compiled.compiled(("gpus.toml",), counting, environ) == parsed
    assert len(calls) == 2 and not (tmp_path / "planted-ran").exists()


def test_an_unwritable_cache_costs_only_speed(tmp_path):
    (tmp_path / "cache").write_text("a file where the directory would be")
    environ = {"CUDARESOLVE_CACHE_DIR": str(tmp_path / "cache")}
    counting, calls = counted(gpus.load.__wrapped__)
    assert compiled.compiled(("gpus.toml",), counting, environ) == gpus.load()
    assert compiled.compiled(("gpus.toml",), counting, environ) == gpus.load()
    assert len(calls) == 2


def test_a_table_that_does_not_check_is_never_stored(environ, data_dir):
    text = (data_dir / "gpus.toml").read_text()
    (data_dir / "gpus.toml").write_text(text.replace('cc = "', 'cc = "x', 1))
    load = gpus.load.__wrapped__
    with pytest.raises(DataError, match="gpus.toml: gpu"):
        compiled.compiled(("gpus.toml",), load, environ)
    assert not os.path.exists(compiled.entry_path(load, environ))
