"""Cache entries are input too: what a reader of the facts, result and table caches accepts from the
file system before it unpickles anything (cudaresolve/caches.py)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from conftest import plant

from cudaresolve import caches
from cudaresolve.binary.elf import read_binary_facts
from cudaresolve.env.cache import FactsCache


@pytest.fixture
def alarm():
    """Fail instead of hanging when a read blocks."""
    def hung(signum, frame):
        raise AssertionError("the read blocked")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(10)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


def test_an_entry_is_read_whole_up_to_its_limit(tmp_path):
    entry = tmp_path / "entry"
    entry.write_bytes(b"x" * 100)
    assert caches.read_entry(str(entry), limit=100) == b"x" * 100
    assert caches.read_entry(str(entry), limit=99) is None


def test_the_default_limit_is_read_when_called(tmp_path, monkeypatch):
    entry = tmp_path / "entry"
    entry.write_bytes(b"x" * 100)
    monkeypatch.setattr(caches, "MAX_ENTRY", 10)
    assert caches.read_entry(str(entry)) is None


@pytest.mark.parametrize("kind", ["missing", "directory", "fifo", "nul in the path"])
def test_what_is_not_a_regular_file_is_a_miss_not_a_wait(tmp_path, alarm, kind):
    entry = tmp_path / "entry"
    if kind == "directory":
        entry.mkdir()
    elif kind == "fifo":
        os.mkfifo(entry)  # no writer: a blocking open or read would wait forever
    path = str(entry) + ("\0x" if kind == "nul in the path" else "")
    assert caches.read_entry(path) is None


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_fifo_or_directory_planted_for_a_facts_entry_is_rebuilt_not_waited_on(tmp_path, alarm, elf_builder, kind):
    lib = elf_builder.build("libplanted.so", "int f(void) { return 1; }\n")
    cache = FactsCache(str(tmp_path / "cache"))
    first = cache.facts_for(str(lib), read=read_binary_facts)
    (entry,) = [os.path.join(root, name) for root, _, names in os.walk(cache.directory) for name in names]
    plant(Path(entry), kind)
    assert cache.facts_for(str(lib), read=read_binary_facts) == first
    assert os.path.isfile(entry)  # written again in its place
