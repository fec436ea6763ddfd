"""How long a cached project page (or an index's 404) is used without asking the index again: what the
index's own caching headers say, as pip's and uv's HTTP caches read them, PAGE_MAX_AGE when they
say nothing; and a warm read sends nothing and imports no HTTP library."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import replace

import pytest
from index_server import make_wheel
from requests.structures import CaseInsensitiveDict

from cudaresolve.index import cache as cache_module
from cudaresolve.index.cache import MAX_PAGE_AGE, IndexCache, freshness, storable
from cudaresolve.index.http import Http, IndexAccessError
from cudaresolve.index.pages import find_links_files, index_files

NOW = "Wed, 25 Nov 2026 12:00:00 GMT"


@pytest.fixture
def cache(tmp_path):
    return IndexCache(str(tmp_path / "index"))


def http() -> Http:
    return Http(sleep=lambda seconds: None)


@pytest.mark.parametrize(
    "headers, seconds",
    [
        ({}, None),
        ({"ETag": '"abc"', "Last-Modified": NOW}, None),
        ({"Cache-Control": "max-age=600, public"}, 600.0),  # the registry's
        ({"cache-control": "public,max-age=60"}, 60.0),
        ({"Cache-Control": 'max-age="120"'}, 120.0),
        ({"Cache-Control": "max-age=0, must-revalidate"}, 0.0),
        ({"Cache-Control": "no-cache"}, 0.0),
        ({"Cache-Control": "no-store, max-age=600"}, 0.0),
        ({"Cache-Control": "max-age=600", "Age": "100"}, 500.0),
        ({"Cache-Control": "max-age=600", "Age": "900"}, 0.0),
        ({"Cache-Control": "max-age=600", "Expires": "Thu, 01 Jan 1970 00:00:00 GMT"}, 600.0),  # max-age wins
        ({"Cache-Control": "max-age=31536000"}, MAX_PAGE_AGE),
        ({"Expires": "Wed, 25 Nov 2026 12:05:00 GMT", "Date": NOW}, 300.0),
        ({"Expires": "Wed, 25 Nov 2026 11:00:00 GMT", "Date": NOW}, 0.0),
        # malformed: stale, never an exception
        ({"Cache-Control": "max-age=ten"}, 0.0),
        ({"Cache-Control": "max-age=-5"}, 0.0),
        ({"Cache-Control": "max-age=" + "9" * 5000}, 0.0),
        ({"Cache-Control": "max-age=\u0661\u0662"}, 0.0),  # Arabic-Indic digits: isdigit() but not HTTP
        ({"Expires": "0"}, 0.0),
        ({"Expires": "Wed, 25 Nov 99999 12:05:00 GMT", "Date": NOW}, 0.0),
        ({"Cache-Control": "max-age=600", "Age": "x"}, 600.0),
    ],
)
def test_freshness_from_the_headers(headers, seconds):
    assert freshness(CaseInsensitiveDict(headers)) == seconds


def test_no_store_is_not_kept():
    assert storable(CaseInsensitiveDict({"Cache-Control": "max-age=60"}))
    assert not storable(CaseInsensitiveDict({"cache-control": "private, No-Store"}))


def test_a_page_fresh_by_its_headers_is_used_without_asking(server, cache, monkeypatch):
    server.add(*make_wheel("demo", "1.0"))
    server.page_headers = {"Cache-Control": "max-age=3600"}
    monkeypatch.setattr(cache_module, "PAGE_MAX_AGE", 0.0)  # what the headers say wins over the default
    index_files(http(), cache, server.url + "/simple", "demo")
    assert len(index_files(http(), cache, server.url + "/simple", "demo")) == 1
    assert len(server.requests) == 1
    index_files(http(), IndexCache(cache.directory, refresh=True), server.url + "/simple", "demo")
    assert len(server.requests) == 2  # --refresh asks anyway


@pytest.mark.parametrize("cache_control", ["max-age=0", "no-cache"])
def test_a_page_its_index_marks_stale_is_revalidated_every_time(cache_control, server, cache):
    server.add(*make_wheel("demo", "1.0"))
    server.page_headers = {"Cache-Control": cache_control}
    for _ in range(3):
        assert len(index_files(http(), cache, server.url + "/simple", "demo")) == 1
    assert len(server.requests) == 3
    assert all("If-None-Match" in headers for _, headers in server.requests[1:])  # answered 304, no body


def test_a_304_keeps_the_lifetime_it_does_not_restate(server, cache, monkeypatch):
    server.add(*make_wheel("demo", "1.0"))
    server.page_headers = {"Cache-Control": "max-age=3600"}
    index_files(http(), cache, server.url + "/simple", "demo")
    page = cache.page(server.url + "/simple/demo/")
    cache.store_page(replace(page, fetched=time.time() - 7200))  # fetched two hours ago
    server.page_headers = {}
    index_files(http(), cache, server.url + "/simple", "demo")
    assert server.requests[-1][1]["If-None-Match"]
    index_files(http(), cache, server.url + "/simple", "demo")
    assert len(server.requests) == 2 and cache.page(server.url + "/simple/demo/").max_age == 3600


def test_a_no_store_page_is_never_kept(server, cache):
    server.add(*make_wheel("demo", "1.0"))
    server.page_headers = {"Cache-Control": "no-store"}
    index_files(http(), cache, server.url + "/simple", "demo")
    index_files(http(), cache, server.url + "/simple", "demo")
    assert len(server.requests) == 2 and "If-None-Match" not in server.requests[1][1]
    assert cache.page(server.url + "/simple/demo/") is None


def test_an_index_without_the_project_is_not_asked_again_while_fresh(server, cache, monkeypatch):
    assert index_files(http(), cache, server.url + "/simple", "absent") == ()
    assert index_files(http(), cache, server.url + "/simple", "absent") == ()
    assert len(server.requests) == 1
    assert index_files(http(), IndexCache(cache.directory, offline=True), server.url + "/simple", "absent") == ()
    monkeypatch.setattr(cache_module, "PAGE_MAX_AGE", 0.0)
    server.add(*make_wheel("absent", "1.0"))  # now it is there: a stale 404 is asked again
    assert len(index_files(http(), cache, server.url + "/simple", "absent")) == 1
    assert len(server.requests) == 2 and "If-None-Match" not in server.requests[1][1]


def test_a_find_links_page_that_is_missing_stays_an_error(server, cache):
    for _ in range(2):
        with pytest.raises(IndexAccessError, match="does not exist"):
            find_links_files(http(), cache, server.url + "/simple/absent/", "absent")
    assert len(server.requests) == 1


@pytest.mark.parametrize("stored, fresh", [(1e308, False), (float("nan"), False), ("600", None), (True, None), (-5, False)])
def test_a_stored_lifetime_is_read_within_bounds(stored, fresh, server, cache):
    """An edited entry cannot keep a page fresh for ever; one that is not a number is no entry."""
    server.add(*make_wheel("demo", "1.0"))
    index_files(http(), cache, server.url + "/simple", "demo")
    url = server.url + "/simple/demo/"
    path = cache._page_path(url)
    head, _, body = open(path, "rb").read().split(b"\n", 1)[1].partition(b"\n")
    fields = json.loads(head)
    fields.update(max_age=stored, fetched=time.time() - 2 * MAX_PAGE_AGE)
    cache._write(path, json.dumps(fields).encode() + b"\n" + body)
    page = cache.page(url)
    if fresh is None:
        assert page is None and not os.path.exists(path)  # damaged: deleted, fetched again in full
    else:
        assert page.fresh(time.time()) is fresh


def test_a_warm_page_read_sends_nothing_and_imports_no_http_library(server, cache):
    server.add(*make_wheel("demo", "1.0"))
    index_files(http(), cache, server.url + "/simple", "demo")
    code = (
        "import sys\n"
        "from cudaresolve.index.cache import IndexCache\n"
        "from cudaresolve.index.http import Http\n"
        "from cudaresolve.index.pages import index_files\n"
        f"files = index_files(Http(), IndexCache({cache.directory!r}), {server.url + '/simple'!r}, 'demo')\n"
        "print(len(files), sorted(m for m in ('requests', 'urllib3') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split("\n")[0] == "1 []" and len(server.requests) == 1
