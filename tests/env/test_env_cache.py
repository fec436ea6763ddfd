"""The on-disk BinaryFacts cache: hits, invalidation, corrupt entries, concurrent writers."""

from __future__ import annotations

import dataclasses
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from cudaresolve.arch import PtxTarget
from cudaresolve.binary.elf import ElfError
from cudaresolve.binary.facts import BinaryFacts, FatbinSummary, Symbol, SymbolTable, VersionNeed
from cudaresolve.env import cache as cache_module
from cudaresolve.env.cache import HEADER, FactsCache
from cudaresolve.env.store import default_cache_dir


def big_facts(path: str, symbols: int = 2000) -> BinaryFacts:
    return BinaryFacts(
        path=path, machine="x86_64", elf_type="DYN", soname="libcusparse.so.12",
        needed=("libnvJitLink.so.12", "libc.so.6"), rpath=(), runpath=("$ORIGIN/../../nvjitlink/lib",),
        flags=0, flags_1=1,
        symbols=SymbolTable.of(
            [Symbol("__nvJitLinkComplete_12_1", "libnvJitLink.so.12", "libnvJitLink.so.12")],
            [Symbol(f"cusparseFunction{i}", "libcusparse.so.12") for i in range(symbols)],
        ),
        version_definitions=("libcusparse.so.12",),
        version_needs=(VersionNeed("libc.so.6", ("GLIBC_2.2.5", "GLIBC_2.17")),),
        build_id="ab12", fatbin=FatbinSummary(sass=("sm_50", "sm_90"), ptx=(PtxTarget("compute_90", "8.1"),), containers=3, entries=40),
    )


class CountingReader:
    def __init__(self):
        self.paths: list[str] = []

    def __call__(self, path: str) -> BinaryFacts:
        self.paths.append(path)
        return big_facts(path)


@pytest.fixture
def lib(tmp_path) -> Path:
    path = tmp_path / "lib" / "libcusparse.so.12"
    path.parent.mkdir()
    path.write_bytes(b"\x7fELF" + b"\0" * 100)
    return path


@pytest.fixture
def cache(tmp_path) -> FactsCache:
    return FactsCache(str(tmp_path / "cache"))


def _entries(cache: FactsCache) -> list[Path]:
    return sorted(Path(cache.directory).iterdir())


def test_default_cache_dir_precedence():
    assert default_cache_dir({"CUDARESOLVE_CACHE_DIR": "/c", "XDG_CACHE_HOME": "/x", "HOME": "/h"}) == "/c"
    assert default_cache_dir({"XDG_CACHE_HOME": "/x", "HOME": "/h"}) == "/x/cudaresolve"
    assert default_cache_dir({"XDG_CACHE_HOME": "relative", "HOME": "/h"}) == "/h/.cache/cudaresolve"
    assert default_cache_dir({"CUDARESOLVE_CACHE_DIR": "", "HOME": "/h"}) == "/h/.cache/cudaresolve"


def test_miss_then_hit(cache, lib):
    reader = CountingReader()
    first = cache.facts_for(str(lib), read=reader)
    second = cache.facts_for(str(lib), read=reader)
    assert reader.paths == [str(lib)]
    assert first == second == big_facts(str(lib))
    assert len(_entries(cache)) == 1
    # A new cache object on the same directory (the next run) hits too.
    assert FactsCache(str(Path(cache.directory).parent)).facts_for(str(lib), read=reader) == first
    assert reader.paths == [str(lib)]


def test_symlinks_share_the_entry_of_their_target(cache, lib):
    alias = lib.parent / "libcusparse.so"
    alias.symlink_to(lib.name)
    reader = CountingReader()
    cache.facts_for(str(lib), read=reader)
    assert cache.facts_for(str(alias), read=reader).path == str(lib)
    assert reader.paths == [str(lib)]


def test_mtime_change_invalidates(cache, lib):
    reader = CountingReader()
    cache.facts_for(str(lib), read=reader)
    st = lib.stat()
    os.utime(lib, ns=(st.st_atime_ns, st.st_mtime_ns + 1))
    cache.facts_for(str(lib), read=reader)
    assert reader.paths == [str(lib), str(lib)]


def test_replaced_file_invalidates(cache, lib):
    reader = CountingReader()
    cache.facts_for(str(lib), read=reader)
    st = lib.stat()
    replacement = lib.with_name("new")
    replacement.write_bytes(lib.read_bytes())
    os.utime(replacement, ns=(st.st_atime_ns, st.st_mtime_ns))  # same size and mtime, new inode
    os.replace(replacement, lib)
    cache.facts_for(str(lib), read=reader)
    assert reader.paths == [str(lib), str(lib)]


def _evil_payload(marker: Path) -> bytes:
    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    return pickle.dumps(Evil())


@pytest.mark.parametrize(
    "corrupt",
    [
        lambda data, marker: data[: len(data) // 2],  # truncated
        lambda data, marker: b"",  # empty
        lambda data, marker: HEADER + b"\x80\x05garbage",  # not a pickle
        lambda data, marker: b"cudaresolve-facts 0 0.0.0 old\n" + data[len(HEADER):],  # older format
        lambda data, marker: data + b"trailing",  # more than one object
        lambda data, marker: HEADER + pickle.dumps(("key", "not facts")),  # wrong key and type
        lambda data, marker: HEADER + _evil_payload(marker),  # would run code if trusted
        lambda data, marker: HEADER + pickle.dumps(pickle.loads(data[len(HEADER):])[0]),  # a key, no facts
    ],
    ids=["truncated", "empty", "garbage", "old-header", "trailing", "wrong-type", "foreign-class", "not-a-pair"],
)
def test_corrupt_entry_is_rebuilt(cache, lib, tmp_path, corrupt):
    reader = CountingReader()
    cache.facts_for(str(lib), read=reader)
    (entry,) = _entries(cache)
    marker = tmp_path / "code-ran"
    entry.write_bytes(corrupt(entry.read_bytes(), marker))
    assert cache.facts_for(str(lib), read=reader) == big_facts(str(lib))
    assert reader.paths == [str(lib), str(lib)]
    assert not marker.exists()
    # Rebuilt: the next lookup hits again.
    cache.facts_for(str(lib), read=reader)
    assert len(reader.paths) == 2


def test_entry_with_facts_of_another_key_is_not_trusted(cache, lib, tmp_path):
    other = tmp_path / "lib" / "other.so"
    other.write_bytes(b"\x7fELF")
    reader = CountingReader()
    cache.facts_for(str(lib), read=reader)
    cache.facts_for(str(other), read=reader)
    entry_lib, entry_other = sorted(_entries(cache), key=lambda p: p.stat().st_mtime_ns)
    entry_lib.write_bytes(entry_other.read_bytes())
    assert cache.facts_for(str(lib), read=reader).path == str(lib)
    assert len(reader.paths) == 3


def test_schema_change_makes_old_entries_stale():
    # The header carries a fingerprint of the facts classes' fields.
    assert HEADER.startswith(b"cudaresolve-facts 2 ")
    assert HEADER.split()[3].decode() == cache_module._schema()
    assert set(cache_module._FACT_CLASSES) == {
        "BinaryFacts", "Symbol", "SymbolTable", "PtxTarget", "FatbinSummary", "DeviceCodeSkip", "VersionNeed", "CudaRuntime"
    }


def test_entries_hold_symbol_columns_not_the_objects_built_from_them(cache, lib):
    facts = big_facts(str(lib))
    fresh = pickle.dumps(facts)
    assert len(facts.defined) == 2000 and facts.symbols.definitions["cusparseFunction7"] == (("libcusparse.so.12", False),)
    assert pickle.dumps(facts) == fresh  # Symbol objects and the definitions index stay out of the cache
    cache.facts_for(str(lib), read=lambda path: facts)
    reader = CountingReader()
    loaded = FactsCache(cache.directory[: -len("/facts")]).facts_for(str(lib), read=reader)
    assert reader.paths == []
    assert loaded == facts and loaded.defined == facts.defined and loaded.undefined == facts.undefined


def test_unwritable_cache_directory_still_answers(tmp_path, lib):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache directory should be")
    cache = FactsCache(str(blocker))
    reader = CountingReader()
    assert cache.facts_for(str(lib), read=reader) == big_facts(str(lib))
    assert cache.facts_for(str(lib), read=reader) == big_facts(str(lib))
    assert len(reader.paths) == 2
    assert cache.write_error == f"cannot write the facts cache in {blocker}/facts: Not a directory"


def test_missing_file_and_reader_errors_propagate(cache, lib, tmp_path):
    with pytest.raises(FileNotFoundError):
        cache.facts_for(str(tmp_path / "gone.so"), read=CountingReader())

    def failing(path: str) -> BinaryFacts:
        raise ValueError("bad ELF")

    with pytest.raises(ValueError, match="bad ELF"):
        cache.facts_for(str(lib), read=failing)
    assert not Path(cache.directory).exists()


def test_file_changing_while_read_is_not_stored(cache, lib):
    def rewriting(path: str) -> BinaryFacts:
        Path(path).write_bytes(b"\x7fELF changed while being read")
        return big_facts(path)

    cache.facts_for(str(lib), read=rewriting)
    assert not Path(cache.directory).exists()


WRITER = """
import os, sys
sys.path.insert(0, {tests!r})
from test_env_cache import big_facts
from cudaresolve.env.cache import FactsCache
cache = FactsCache({cache!r})
for _ in range(3):
    for entry in os.listdir(cache.directory):
        if not entry.startswith(".tmp-"):  # not the other writer's entry in progress
            try:
                os.unlink(os.path.join(cache.directory, entry))
            except FileNotFoundError:
                pass
    for name in sorted(os.listdir({libs!r})):
        cache.facts_for(os.path.join({libs!r}, name), read=lambda p: big_facts(p, 3000))
assert cache.write_error is None, cache.write_error
"""

READER = """
import os, sys
directory, done = sys.argv[1], sys.argv[2]
expected = {name: open(os.path.join(directory, name), "rb").read() for name in os.listdir(directory)}
whole = 0
for _ in range(100000):
    finished = os.path.exists(done)
    for name, data in expected.items():
        try:
            with open(os.path.join(directory, name), "rb") as f:
                seen = f.read()
        except FileNotFoundError:
            continue
        assert seen == data, f"{name}: {len(seen)} of {len(data)} bytes"
        whole += 1
    if finished:
        break
print(whole)
"""


def test_concurrent_writers_never_expose_a_partial_entry(tmp_path):
    """Two processes rewrite every entry while a third reads them: each read is absent or whole."""
    libs = tmp_path / "libs"
    libs.mkdir()
    for i in range(50):
        (libs / f"lib{i}.so").write_bytes(b"\x7fELF" + bytes([i]))
    cache = FactsCache(str(tmp_path / "cache"))
    for lib in sorted(libs.iterdir()):
        cache.facts_for(str(lib), read=lambda p: big_facts(p, 3000))
    done = tmp_path / "done"
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, cache.directory, str(done)], stdout=subprocess.PIPE, text=True
    )
    writer = WRITER.format(tests=str(Path(__file__).parent), cache=str(tmp_path / "cache"), libs=str(libs))
    writers = [subprocess.Popen([sys.executable, "-c", writer]) for _ in range(2)]
    assert [w.wait(timeout=120) for w in writers] == [0, 0]
    done.touch()
    out, _ = reader.communicate(timeout=120)
    assert reader.returncode == 0
    assert int(out) > 0

    def must_hit(path: str) -> BinaryFacts:
        raise AssertionError(f"{path} was not cached whole")

    for lib in sorted(libs.iterdir()):
        assert FactsCache(str(tmp_path / "cache")).facts_for(str(lib), read=must_hit) == big_facts(str(lib), 3000)
    assert [p.name for p in Path(cache.directory).iterdir() if p.name.startswith(".tmp-")] == []


def read_in_worker(path: str) -> BinaryFacts:
    """A reader for FactsCache.fill: fails on bad files; records which process read the good ones."""
    if path.endswith("bad.so"):
        raise ElfError(f"{path}: not an ELF file (no \\x7fELF magic)")
    return dataclasses.replace(big_facts(path, symbols=10), build_id=str(os.getpid()))


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="fill reads in parallel only with two CPUs or more")
def test_fill_reads_the_misses_in_worker_processes(tmp_path, cache):
    paths = []
    for name in ("liba.so", "libb.so", "libc.so", "bad.so"):
        path = tmp_path / name
        path.write_bytes(b"\x7fELF" + name.encode())
        paths.append(str(path))
    seen: list[str] = []
    cache.fill(paths, read=read_in_worker, progress=seen.append)
    assert sorted(seen) == sorted(paths)

    def no_read(path: str) -> BinaryFacts:
        raise AssertionError(f"{path} was not cached")

    readers = {cache.facts_for(path, read=no_read).build_id for path in paths[:3]}
    assert str(os.getpid()) not in readers  # read in forked workers, stored by them
    with pytest.raises(ElfError, match="no .x7fELF magic"):  # a failure is not cached: met again here
        cache.facts_for(paths[3], read=read_in_worker)


# A scan whose reads never end, in a process of its own: fill's workers write their pids, then wait.
_ENDLESS_FILL = """
import os, sys, time
from cudaresolve.env import cache

def read(path):
    open(os.path.join(sys.argv[2], str(os.getpid())), "w").close()
    time.sleep(1000)

cache._usable_cpus = lambda: 2
cache.FactsCache(sys.argv[1]).fill(sys.argv[3:], read=read)
"""


def test_fill_workers_die_with_a_scan_killed_by_sigkill(tmp_path):
    """kill -9 of the scan gives the pool no chance to stop its workers: they end with it anyway."""
    import signal
    import time

    from test_host_readers import wait_gone

    pids = tmp_path / "pids"
    pids.mkdir()
    paths = []
    for name in ("liba.so", "libb.so"):
        (tmp_path / name).write_bytes(b"\x7fELF" + name.encode())
        paths.append(str(tmp_path / name))
    scan = subprocess.Popen([sys.executable, "-c", _ENDLESS_FILL, str(tmp_path / "cache"), str(pids), *paths])
    for _ in range(600):
        if len(os.listdir(pids)) == 2 or scan.poll() is not None:
            break
        time.sleep(0.05)
    workers = [int(name) for name in os.listdir(pids)]
    assert len(workers) == 2, scan.poll()
    scan.send_signal(signal.SIGKILL)
    scan.wait()
    assert all(wait_gone(pid) for pid in workers)


def test_fill_leaves_a_single_miss_to_facts_for(lib, cache):
    cache.fill([str(lib)], read=read_in_worker)
    assert not os.path.isdir(cache.directory)


def test_fill_with_an_unwritable_cache_reads_nothing(tmp_path, lib):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache directory should be")
    other = tmp_path / "lib" / "libother.so"
    other.write_bytes(b"\x7fELF" + b"\1" * 100)
    FactsCache(str(blocker)).fill([str(lib), str(other)], read=read_in_worker, progress=pytest.fail)


@pytest.mark.parametrize("platform, start_methods", [("darwin", ["spawn", "fork", "forkserver"]), ("win32", ["spawn"])])
def test_fill_without_a_safe_fork_leaves_every_read_to_facts_for(tmp_path, cache, monkeypatch, platform, start_methods):
    """macOS (fork unsafe) and Windows (no fork, no sched_getaffinity): fill reads nothing, the scan still works."""
    import multiprocessing

    from cudaresolve.env import cache as cache_module

    monkeypatch.setattr(cache_module.sys, "platform", platform)
    monkeypatch.setattr(multiprocessing, "get_all_start_methods", lambda: start_methods)
    monkeypatch.delattr(os, "sched_getaffinity", raising=False)
    paths = []
    for name in ("liba.so", "libb.so"):
        path = tmp_path / name
        path.write_bytes(b"\x7fELF" + name.encode())
        paths.append(str(path))
    cache.fill(paths, read=read_in_worker, progress=pytest.fail)
    assert not os.path.isdir(cache.directory)
    assert cache.facts_for(paths[0], read=read_in_worker).build_id == str(os.getpid())
