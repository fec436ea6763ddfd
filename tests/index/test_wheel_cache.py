"""The test cache itself (tests/wheel_cache.py, tests/conftest.py): every fetched wheel is kept, so a
second fetch asks the index nothing; the bound removes the least recently used; and the `network`
mark follows the marks, fixtures and helpers a test uses. pip fetches from an index on 127.0.0.1 here."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import wheel_cache
from conftest import TESTS, _network_helpers, _reaches_network, needs_network
from index_server import make_wheel

pytestmark = pytest.mark.offline  # fetches only from 127.0.0.1


@pytest.fixture
def own_cache(monkeypatch, hermetic, server) -> Path:
    """An empty test cache in tmp_path with its own session state, and pip's index the local server
    (a test of the cache may fetch: it reaches only 127.0.0.1)."""
    cache = hermetic / "test-cache"
    monkeypatch.setattr(wheel_cache, "CACHE", cache)
    for name in ("directory", "lock"):
        monkeypatch.setattr(wheel_cache._Session, name, None)
    monkeypatch.setattr(wheel_cache._Kept, "lock", None)
    monkeypatch.setattr(wheel_cache._Session, "fetching", True)
    monkeypatch.setenv("PIP_INDEX_URL", server.start() + "/simple")
    yield cache
    wheel_cache.end_session()


def _stored(cache: Path, wheel: Path) -> list[Path]:
    """The store's entries holding `wheel`'s bytes."""
    digest = wheel_cache._sha256(wheel)
    return sorted((cache / "store" / digest[:2]).glob(f"{digest}-*"))


def test_a_wheel_fetched_once_is_kept_and_not_fetched_again(own_cache, server):
    server.add(*make_wheel("alpha", "1.0", requires=["beta"]))
    server.add(*make_wheel("beta", "2.0"))

    [exact] = wheel_cache.fetch_wheels(["alpha==1.0"])
    resolved = wheel_cache.fetch_wheels(["alpha"], deps=True)
    assert exact.parent == own_cache / "wheels"
    assert sorted(w.name for w in resolved) == ["alpha-1.0-py3-none-any.whl", "beta-2.0-py3-none-any.whl"]
    assert [os.path.samefile(exact, entry) for entry in _stored(own_cache, exact)] == [True]  # one copy, by content
    assert any(path.startswith("/files/") for path, _ in server.requests)

    server.requests.clear()
    assert wheel_cache.fetch_wheels(["alpha==1.0"]) == [exact]
    assert wheel_cache.fetch_wheels(["alpha"], deps=True) == resolved
    assert wheel_cache.fetch_wheel("beta==2.0") in resolved
    assert server.requests == []


def test_the_bound_removes_the_least_recently_used_wheels_and_their_store_copies(own_cache, server):
    for name in ("old", "new"):
        server.add(*make_wheel(name, "1.0", files={f"{name}/data.bin": os.urandom(4096)}))
    [old] = wheel_cache.fetch_wheels(["old==1.0"])
    [new] = wheel_cache.fetch_wheels(["new==1.0"])
    os.utime(old, (1, 1))
    size, old_stored = old.stat().st_size, _stored(own_cache, old)

    assert wheel_cache.evict_wheels(own_cache, new.stat().st_size) == size
    assert not old.exists() and old_stored and not any(p.exists() for p in old_stored)
    assert new.exists() and _stored(own_cache, new)
    assert wheel_cache.evict_wheels(own_cache, new.stat().st_size) == 0


SAMPLE = '''
import struct

def fetches():
    return fetch_wheels(["a==1"])

def through_a_helper():
    return [fetches() for _ in range(1)]

def by_a_local_import():
    from wheel_cache import build_venv
    return build_venv

class Builder:
    def build(self):
        return registry_python(None, "a")

def through_a_class():
    return Builder().build()

def struct_unpack(data):
    return struct.unpack("<I", data)

def plain():
    return 1
'''


def _sample() -> dict:
    """SAMPLE's functions, compiled as if they were a module of this suite."""
    namespace = {helper.__name__: helper for helper in _network_helpers()}
    exec(compile(SAMPLE, str(TESTS / "network_sample.py"), "exec"), namespace)
    return namespace


def _item(function, marks=(), fixtures=None):
    fixtures = fixtures or {}
    defs = {name: [SimpleNamespace(func=f)] for name, f in fixtures.items()}
    return SimpleNamespace(function=function, fixturenames=list(fixtures), _fixtureinfo=SimpleNamespace(name2fixturedefs=defs),
                           iter_markers=lambda: [SimpleNamespace(name=m) for m in marks])


@pytest.mark.parametrize(("name", "reaches"), [("fetches", True), ("through_a_helper", True), ("by_a_local_import", True),
                                               ("through_a_class", True), ("struct_unpack", False), ("plain", False)])
def test_the_network_mark_follows_the_helpers_a_function_calls(name, reaches):
    assert _reaches_network(_sample()[name], _network_helpers(), {}) is reaches


def test_the_network_mark_follows_marks_and_fixtures():
    sample, helpers = _sample(), _network_helpers()
    assert not needs_network(_item(sample["plain"], ["parametrize"], {"tmp_path": sample["plain"]}), helpers, {})
    assert not needs_network(_item(sample["fetches"], ["offline"]), helpers, {})
    assert needs_network(_item(sample["plain"], ["registry"]), helpers, {})
    assert needs_network(_item(sample["plain"], fixtures={"unpacked": sample["plain"]}), helpers, {})
    assert needs_network(_item(sample["plain"], fixtures={"mine": sample["through_a_helper"]}), helpers, {})


def test_prune_wheels_frees_the_kept_wheels_once_no_session_holds_them(own_cache, server):
    server.add(*make_wheel("gamma", "1.0"))
    [kept] = wheel_cache.fetch_wheels(["gamma==1.0"])
    stored = _stored(own_cache, kept)
    script = [sys.executable, str(TESTS.parent / "scripts" / "test_cache.py"), "--prune-wheels", str(own_cache)]

    held = subprocess.run(script, capture_output=True, text=True)
    assert (held.returncode, kept.exists()) == (0, True), held.stderr
    assert "in use by a test session" in held.stderr

    wheel_cache.end_session()  # this session lets go of wheels.lock
    freed = subprocess.run(script, capture_output=True, text=True)
    assert freed.returncode == 0, freed.stderr
    assert not kept.exists() and stored and not any(p.exists() for p in stored)
    assert not list((own_cache / "wheels" / "sets").iterdir())


def test_a_locks_wheels_are_fetched_once_by_their_sha256(own_cache, server, tmp_path):
    """The `--deep` install tests' path: the wheels a PEP 751 lock names, fetched from its URLs once
    and checked against its sha256; a lock naming other bytes under the same name is refused."""
    filename, data = make_wheel("delta", "1.0")
    server.add(filename, data)
    digest = hashlib.sha256(data).hexdigest()

    def lock(sha256: str) -> Path:
        path = tmp_path / f"pylock-{sha256[:8]}.toml"
        path.write_text(f'lock-version = "1.0"\ncreated-by = "tests"\n[[packages]]\nname = "delta"\nversion = "1.0"\n'
                        f'wheels = [{{ name = "{filename}", url = "{server.url}/files/{filename}", hashes = {{ sha256 = "{sha256}" }} }}]\n')
        return path

    folder = wheel_cache.fetch_locked(lock(digest))
    assert (folder / filename).read_bytes() == data and any(p.startswith("/files/") for p, _ in server.requests)
    server.requests.clear()
    assert wheel_cache.fetch_locked(lock(digest)) == folder and server.requests == []
    with pytest.raises(pytest.fail.Exception, match="does not have the sha256 the lock names"):
        wheel_cache.fetch_locked(lock("0" * 64))
