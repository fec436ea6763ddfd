"""A damaged index cache heals: each kind of entry (a project page, core metadata fetched by range and
by PEP 658, the sha256 of a file listed without one, a wheel's binary facts, a host's no-ranges
marker) is cut short, overwritten with random bytes, or left whole but holding what its kind cannot
hold; the next `cudaresolve lock` fetches it again (a damaged page without its ETag, so the index
cannot answer 304 to it) and writes the same lock as from a clean cache."""

from __future__ import annotations

import hashlib
import os
import random
from pathlib import Path

import pytest
from conftest import plant
from index_server import make_wheel

import cudaresolve.index.cache as cache_module
from cudaresolve.cli import main
from cudaresolve.env.cache import dumps_facts
from cudaresolve.index.cache import IndexCache
from cudaresolve.index.http import Http
from cudaresolve.index.pages import index_files
from cudaresolve.index.wheel_facts import wheel_binary_facts


@pytest.fixture
def clean(hermetic):
    """Hermetic; the index cache's directory."""
    return hermetic / "cudaresolve-cache" / "index"


@pytest.fixture
def index(server):
    """demo (metadata by range reads) needs dep (PEP 658 metadata); extra is listed without a hash on a find-links page."""
    server.add(*make_wheel("demo", "1.0", requires=["dep>=1", "extra"]), metadata=False)
    server.add(*make_wheel("dep", "1.0"))
    server.add(*make_wheel("extra", "1.0"), root="links", hashed=False)
    return server


def lock(server, python, capsys) -> str:
    code = main(["lock", "-q", "--python", python, "--index-url", server.url + "/simple", "--find-links",
                 server.url + "/links/extra/", "--driver", "550.144.03", "-o", "-", "demo"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    return captured.out


def entries(directory) -> dict[str, str]:
    """kind -> path of each entry in the cache (one of each kind in these tests, besides pages and metadata)."""
    found: dict[str, list[str]] = {}
    for root, _, names in os.walk(directory):
        for name in names:
            found.setdefault(os.path.relpath(root, directory).split(os.sep)[0], []).append(os.path.join(root, name))
    return {kind: sorted(paths) for kind, paths in found.items()}


def first_page_requests(requests: list) -> dict:
    """Project page path -> the headers it was first asked with."""
    found: dict = {}
    for path, headers in requests:
        if path.startswith(("/simple/", "/links/")):
            found.setdefault(path, headers)
    return found


def damage(path: str, how: str) -> None:
    if how in ("fifo", "directory"):
        plant(Path(path), how)
        return
    with open(path, "rb") as f:
        data = f.read()
    if how == "truncated":
        data = data[: len(data) * 2 // 3]
    elif how == "random bytes":
        data = random.Random(path).randbytes(len(data))
    elif how == "empty":
        data = b""
    with open(path, "wb") as f:
        f.write(data)


@pytest.mark.parametrize("how", ["truncated", "random bytes", "empty", "fifo", "directory"])
@pytest.mark.parametrize("kind", ["pages", "metadata", "sha256"])
def test_a_damaged_entry_is_fetched_again_and_the_lock_is_the_same(kind, how, index, empty_python, clean, capsys, monkeypatch):
    first = lock(index, empty_python, capsys)
    assert 'name = "dep"' in first and 'name = "extra"' in first
    stored = entries(clean)
    wholes = {path: open(path, "rb").read() for path in stored[kind]}
    for path in stored[kind]:
        damage(path, how)
    monkeypatch.setattr(cache_module, "PAGE_MAX_AGE", 0.0)  # every page is revalidated, as after 10 minutes
    asked = len(index.requests)
    assert lock(index, empty_python, capsys) == first
    for path, whole in wholes.items():  # healed: the same entries again (pages: with a new fetch time)
        assert os.path.isfile(path)
        if kind != "pages":
            assert open(path, "rb").read() == whole
    first_asked = first_page_requests(index.requests[asked:])
    assert sorted(first_asked) == ["/links/extra/", "/simple/demo/", "/simple/dep/", "/simple/extra/"]
    # a damaged page is never revalidated with its ETag (the index could answer 304 to it); whole ones are
    revalidated = {path for path, headers in first_asked.items() if "If-None-Match" in headers}
    assert revalidated == (set() if kind == "pages" else {"/simple/demo/", "/simple/dep/", "/links/extra/"})


def test_a_truncated_metadata_no_longer_drops_a_dependency(index, empty_python, clean, capsys):
    first = lock(index, empty_python, capsys)
    demo_metadata = next(p for p in entries(clean)["metadata"] if b"Name: demo" in open(p, "rb").read())
    data = open(demo_metadata, "rb").read()
    with open(demo_metadata, "wb") as f:  # what an old cudaresolve used as it was: METADATA cut before Requires-Dist
        f.write(data[: data.index(b"Requires-Dist")])
    assert lock(index, empty_python, capsys) == first


def test_whole_entries_that_do_not_hold_their_kind_are_fetched_again(index, empty_python, clean, capsys, monkeypatch):
    first = lock(index, empty_python, capsys)
    cache = IndexCache(str(clean))
    stored = entries(clean)
    for path in stored["metadata"]:  # checksummed, but no Name or Version
        os.unlink(path)
        cache._write(path, b"Metadata-Version: 2.1\n\n")
    for path in stored["pages"]:  # checksummed, a valid header, a body that is not a page
        head = open(path, "rb").read().split(b"\n")[1]
        cache._write(path, head + b"\n" + b'{"files": 7}')
    monkeypatch.setattr(cache_module, "PAGE_MAX_AGE", 0.0)
    asked = len(index.requests)
    assert lock(index, empty_python, capsys) == first
    assert not any("If-None-Match" in headers for headers in first_page_requests(index.requests[asked:]).values())


def test_files_listed_without_a_hash_are_hashed_once(index, empty_python, clean, capsys):
    first = lock(index, empty_python, capsys)
    data = index.file("extra-1.0-py3-none-any.whl")
    assert f'sha256 = "{hashlib.sha256(data).hexdigest()}"' in first
    downloads = index.paths().count("/files/extra-1.0-py3-none-any.whl")
    assert lock(index, empty_python, capsys) == first
    assert index.paths().count("/files/extra-1.0-py3-none-any.whl") == downloads


@pytest.mark.parametrize("how", ["truncated", "random bytes", "not facts", "fifo", "directory"])
def test_damaged_wheel_facts_are_read_again(how, server, tmp_path):
    server.add(*make_wheel("demo", "1.0", files={"demo/libdemo.so": b"not an ELF file"}))
    cache = IndexCache(str(tmp_path))
    http = Http(sleep=lambda seconds: None)
    (file,) = index_files(http, cache, server.url + "/simple", "demo")
    facts = wheel_binary_facts(http, cache, file, deep=True)
    assert facts.not_elf == ("demo/libdemo.so",)
    (path,) = entries(tmp_path)["wheel-facts"]
    if how == "not facts":
        os.unlink(path)
        cache._write(path, dumps_facts(("a tuple", "of the wrong shape")))
    else:
        damage(path, how)
    downloads = server.paths().count(f"/files/{file.filename}")
    assert wheel_binary_facts(http, cache, file, deep=True) == facts
    assert server.paths().count(f"/files/{file.filename}") == downloads + 1
    assert wheel_binary_facts(http, cache, file, deep=True) == facts  # and from the healed entry
    assert server.paths().count(f"/files/{file.filename}") == downloads + 1


@pytest.mark.parametrize("how", ["truncated", "random bytes"])
def test_a_damaged_no_ranges_marker_is_forgotten(how, server, tmp_path):
    cache = IndexCache(str(tmp_path))
    cache.remember_refuses_ranges("127.0.0.1:1")
    assert cache.refuses_ranges("127.0.0.1:1")
    (path,) = entries(tmp_path)["no-ranges"]
    damage(path, how)
    assert not cache.refuses_ranges("127.0.0.1:1") and not os.path.exists(path)
