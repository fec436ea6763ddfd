"""What index access fetched, kept in `<cache dir>/index/` so it is never fetched twice.

Two kinds of entries:
- immutable blobs keyed by the file's sha256 (core metadata, a wheel's binary facts): a file with a
  given hash never changes, so these never expire;
- project pages keyed by URL, stored with their ETag / Last-Modified and fetch time: used as they
  are for `PAGE_MAX_AGE` seconds, then revalidated with a conditional request.
Plus one marker per host that answered a range request with the whole file, so it is not asked again.

Every write goes to a temporary file in the same directory and is moved into place (os.replace),
so two processes at once each see a whole entry or none. `offline` serves only what is here (a
miss is an error naming what is missing); `refresh` ignores what is here and fetches again.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from typing import Optional

from cudaresolve.env.store import store_entry
from cudaresolve.errors import CudaresolveError

PAGE_MAX_AGE = 600.0  # seconds a project page is used without asking the index again


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

    def fresh(self, now: float) -> bool:
        return 0 <= now - self.fetched < PAGE_MAX_AGE


class IndexCache:
    """The on-disk cache; `directory` is `<cache dir>/index`. A cache that cannot be written slows
    things down but never stops them: `write_error` keeps the first failure."""

    def __init__(self, directory: str, *, offline: bool = False, refresh: bool = False):
        self.directory = directory
        self.offline = offline
        self.refresh = refresh
        self.write_error: Optional[str] = None

    # immutable blobs -------------------------------------------------------------------------

    def blob(self, kind: str, key: str) -> Optional[bytes]:
        """The stored bytes of (kind, key), or None; `refresh` always misses."""
        if self.refresh:
            return None
        try:
            with open(self._blob_path(kind, key), "rb") as f:
                return f.read()
        except OSError:
            return None

    def store_blob(self, kind: str, key: str, data: bytes) -> None:
        self._write(self._blob_path(kind, key), data)

    def _blob_path(self, kind: str, key: str) -> str:
        name = hashlib.sha256(key.encode()).hexdigest() if not _is_sha256(key) else key
        return os.path.join(self.directory, kind, name[:2], name)

    # project pages -----------------------------------------------------------------------------

    def page(self, url: str) -> Optional[CachedPage]:
        if self.refresh:
            return None
        try:
            with open(self._page_path(url), "rb") as f:
                head, _, body = f.read().partition(b"\n")
            fields = json.loads(head)
            return CachedPage(
                url=fields["url"],
                final_url=fields["final_url"],
                content_type=fields["content_type"],
                body=body,
                etag=fields.get("etag"),
                last_modified=fields.get("last_modified"),
                fetched=float(fields["fetched"]),
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def store_page(self, page: CachedPage) -> None:
        head = {
            "url": page.url,
            "final_url": page.final_url,
            "content_type": page.content_type,
            "etag": page.etag,
            "last_modified": page.last_modified,
            "fetched": page.fetched,
        }
        self._write(self._page_path(page.url), json.dumps(head).encode() + b"\n" + page.body)

    def _page_path(self, url: str) -> str:
        return os.path.join(self.directory, "pages", hashlib.sha256(url.encode()).hexdigest())

    # hosts that answer a range request with the whole file ---------------------------------------

    def refuses_ranges(self, host: str) -> bool:
        return os.path.exists(self._host_path(host))

    def remember_refuses_ranges(self, host: str) -> None:
        self._write(self._host_path(host), f"{host} answered a range request with the whole file, {time.ctime()}\n".encode())

    def _host_path(self, host: str) -> str:
        return os.path.join(self.directory, "no-ranges", hashlib.sha256(host.encode()).hexdigest())

    # ---------------------------------------------------------------------------------------------

    def _write(self, path: str, data: bytes) -> None:
        if self.write_error is not None:
            return
        try:
            store_entry(path, data)
        except OSError as exc:
            self.write_error = f"cannot write the index cache in {self.directory}: {exc.strerror or exc}"


def _is_sha256(key: str) -> bool:
    return len(key) == 64 and all(c in "0123456789abcdef" for c in key)
