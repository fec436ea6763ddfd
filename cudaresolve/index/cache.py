"""What index access fetched, kept in `<cache dir>/index/` so it is never fetched twice.

Two kinds of entries:
- immutable blobs keyed by the file's sha256 (core metadata, a wheel's binary facts, the sha256 of a
  file its index published none for): a file with a given hash never changes, so these never expire;
- project pages keyed by URL (and an index's 404 for a project it does not have), stored with their
  ETag / Last-Modified, fetch time and freshness lifetime: used as they are while fresh, then
  revalidated with a conditional request. Fresh is what the index's own caching headers say, as pip's
  and uv's HTTP caches read them (`freshness`: Cache-Control max-age, no-cache and no-store, Expires,
  Age; at most MAX_PAGE_AGE), and PAGE_MAX_AGE when it says nothing: without it every warm lock
  would ask each index again for every page.
Plus one marker per host that answered a range request with the whole file, so it is not asked again.

A cache can be damaged (a disk that filled, a copy cut short, an edit) or tampered with, so every entry
starts with the sha256 of the rest of it, and is read back only whole and matching; callers then
check that it parses (`discard` drops one that does not). A bad entry is deleted and fetched again
as if it had never been there, so a damaged page is never revalidated with its old ETag. Reads are
bounded by the same limits as what the index sends.

Every write goes to a temporary file in the same directory and is moved into place (os.replace),
so two processes at once each see a whole entry or none. `offline` serves only what is here (a
miss is an error naming what is missing); `refresh` ignores what was here before the run and fetches
it again (once: what this run wrote is used).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import time
from dataclasses import dataclass
from typing import Mapping, Optional

from cudaresolve.caches import read_entry
from cudaresolve.env.store import store_entry
from cudaresolve.errors import CudaresolveError
from cudaresolve.index.limits import DEFAULT, Limits

PAGE_MAX_AGE = 600.0  # seconds a page is used without asking the index again, when its headers say nothing
MAX_PAGE_AGE = 86400.0  # the longest an index's headers keep a page from being revalidated
_HEAD = 1 << 16  # room for a page's header line (URLs, ETag) beyond its body


class OfflineMiss(CudaresolveError):
    """--offline and the cache lacks what is needed."""


@dataclass(frozen=True)
class CachedPage:
    url: str  # the URL asked for
    final_url: str  # after redirects: relative links resolve against it
    content_type: str
    body: bytes
    etag: Optional[str]
    last_modified: Optional[str]
    fetched: float  # time.time() of the last fetch or revalidation
    max_age: Optional[float] = None  # seconds fresh by the index's headers; None: they said nothing
    missing: bool = False  # the index answered 404: it has no such project

    def fresh(self, now: float) -> bool:
        return 0 <= now - self.fetched < (PAGE_MAX_AGE if self.max_age is None else self.max_age)


def freshness(headers: Mapping[str, str]) -> Optional[float]:
    """Seconds a response is fresh by its own caching headers (RFC 9111, section 4.2.1, for a private
    cache), at most MAX_PAGE_AGE; None when they say nothing. `headers` are matched without case
    (requests' reply headers). no-cache and no-store are 0: used only after a revalidation.
    Malformed values make a response stale, as the RFC asks."""
    directives = _directives(headers)
    if "no-store" in directives or "no-cache" in directives:
        return 0.0
    if "max-age" in directives:
        lifetime = _seconds(directives["max-age"])
    elif headers.get("Expires") is not None:
        expires, date = _http_date(headers.get("Expires")), _http_date(headers.get("Date"))
        lifetime = 0.0 if expires is None else expires - (date if date is not None else time.time())
    else:
        return None
    return max(0.0, min(lifetime - (_seconds(headers.get("Age") or "0")), MAX_PAGE_AGE))


def storable(headers: Mapping[str, str]) -> bool:
    """Whether a response may be kept at all (no `no-store`)."""
    return "no-store" not in _directives(headers)


def _directives(headers: Mapping[str, str]) -> dict[str, str]:
    found = {}
    for part in (headers.get("Cache-Control") or "").split(","):
        name, _, value = part.partition("=")
        found[name.strip().lower()] = value.strip().strip('"')
    return found


def _seconds(value: str) -> float:
    """HTTP delta-seconds; anything else (what a broken or hostile server sends) is 0."""
    return float(value) if value.isascii() and value.isdigit() and len(value) <= 12 else 0.0


def _http_date(value: Optional[str]) -> Optional[float]:
    import email.utils  # only a response with Expires needs it

    try:
        return email.utils.parsedate_to_datetime(value).timestamp() if value else None
    except (TypeError, ValueError, OverflowError, IndexError):
        return None


class IndexCache:
    """The on-disk cache; `directory` is `<cache dir>/index`. A cache that cannot be written slows
    things down but never stops them: `write_error` keeps the first failure."""

    def __init__(self, directory: str, *, offline: bool = False, refresh: bool = False, limits: Limits = DEFAULT):
        self.directory = directory
        self.offline = offline
        self.refresh = refresh
        self.limits = limits
        self.write_error: Optional[str] = None
        self._written: set[str] = set()  # entries this run wrote: `refresh` ignores only older ones

    # immutable blobs -------------------------------------------------------------------------

    def blob(self, kind: str, key: str, max_bytes: int) -> Optional[bytes]:
        """The stored bytes of (kind, key), or None when absent, damaged or over `max_bytes`."""
        path = self._blob_path(kind, key)
        if self.refresh and path not in self._written:
            return None
        return self._read(path, max_bytes)

    def store_blob(self, kind: str, key: str, data: bytes) -> None:
        self._write(self._blob_path(kind, key), data)

    def discard(self, kind: str, key: str) -> None:
        """Drop an entry that read back whole but does not hold what its kind must (it is fetched again)."""
        _remove(self._blob_path(kind, key))

    def _blob_path(self, kind: str, key: str) -> str:
        name = hashlib.sha256(key.encode()).hexdigest() if not _is_sha256(key) else key
        return os.path.join(self.directory, kind, name[:2], name)

    # project pages -----------------------------------------------------------------------------

    def page(self, url: str) -> Optional[CachedPage]:
        """The stored page of `url`, or None when absent or damaged (then deleted)."""
        path = self._page_path(url)
        if self.refresh and path not in self._written:
            return None
        data = self._read(path, self.limits.page_bytes + _HEAD)
        if data is None:
            return None
        head, _, body = data.partition(b"\n")
        try:
            fields = json.loads(head)
            page = CachedPage(
                url=_text(fields["url"]),
                final_url=_text(fields["final_url"]),
                content_type=_text(fields["content_type"]),
                body=body,
                etag=_optional_text(fields.get("etag")),
                last_modified=_optional_text(fields.get("last_modified")),
                fetched=float(fields["fetched"]),
                max_age=_max_age(fields.get("max_age")),
                missing=fields.get("missing", False) is True,
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            _remove(path)
            return None
        if page.url != url:
            _remove(path)
            return None
        return page

    def store_page(self, page: CachedPage) -> None:
        head = {
            "url": page.url,
            "final_url": page.final_url,
            "content_type": page.content_type,
            "etag": page.etag,
            "last_modified": page.last_modified,
            "fetched": page.fetched,
            "max_age": page.max_age,
            "missing": page.missing,
        }
        self._write(self._page_path(page.url), json.dumps(head).encode() + b"\n" + page.body)

    def discard_page(self, url: str) -> None:
        _remove(self._page_path(url))

    def _page_path(self, url: str) -> str:
        return os.path.join(self.directory, "pages", hashlib.sha256(url.encode()).hexdigest())

    # hosts that answer a range request with the whole file ---------------------------------------

    def refuses_ranges(self, host: str) -> bool:
        return self._read(self._host_path(host), _HEAD) is not None

    def remember_refuses_ranges(self, host: str) -> None:
        self._write(self._host_path(host), f"{host} answered a range request with the whole file, {time.ctime()}\n".encode())

    def _host_path(self, host: str) -> str:
        return os.path.join(self.directory, "no-ranges", hashlib.sha256(host.encode()).hexdigest())

    # ---------------------------------------------------------------------------------------------

    def _read(self, path: str, max_bytes: int) -> Optional[bytes]:
        """The entry's content when the file is whole: its first line is the sha256 of the rest.
        A damaged entry is deleted."""
        data = read_entry(path, 65 + max_bytes)  # a regular file only: a FIFO there is a miss, not a wait
        if data is None:
            return None
        digest, newline, content = data[:64], data[64:65], data[65:]
        if newline != b"\n" or len(content) > max_bytes or hashlib.sha256(content).hexdigest().encode() != digest:
            _remove(path)
            return None
        return content

    def _write(self, path: str, data: bytes) -> None:
        if self.write_error is not None:
            return
        try:
            store_entry(path, hashlib.sha256(data).hexdigest().encode() + b"\n" + data)
            self._written.add(path)
        except OSError as exc:
            self.write_error = f"cannot write the index cache in {self.directory}: {exc.strerror or exc}"


def _is_sha256(key: str) -> bool:
    return len(key) == 64 and all(c in "0123456789abcdef" for c in key)


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise TypeError("not a string")
    return value


def _optional_text(value: object) -> Optional[str]:
    return None if value is None else _text(value)


def _max_age(value: object) -> Optional[float]:
    """A stored lifetime, within 0 and MAX_PAGE_AGE (NaN: 0): an edited entry cannot stay fresh for ever."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError("not a number")
    return 0.0 if math.isnan(value) else max(0.0, min(float(value), MAX_PAGE_AGE))


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
