"""HTTP for index access: one `requests` session, bounded retries, and the transport policy.

Why requests and not urllib: connection reuse across the many small range reads of one host
(a wheel's metadata is two requests), proxies and `REQUESTS_CA_BUNDLE` as users already set them,
and a session that is safe to share between the fetch threads of one resolution.

Policy: HTTPS always; plain HTTP only for localhost and the trusted hosts (pip's `trusted-host`);
`file://` URLs are read from disk here too, so callers handle every index the same way. Retries:
connection errors, timeouts, 429 and 5xx are tried again up to `retries` times, waiting
0.5, 1, 2 ... seconds, or what the server's `Retry-After` asks (capped at 60 s). Every failure
that reaches the caller is an `IndexAccessError` of one line naming the URL and what happened.
"""

from __future__ import annotations

import email.utils
import os
import socket
import threading
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Callable, Mapping, Optional

import requests

from cudaresolve import __version__
from cudaresolve.errors import CudaresolveError

_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})
MAX_RETRY_AFTER = 60.0
CHUNK = 1 << 20
MAX_REDIRECTS = 10


class IndexAccessError(CudaresolveError):
    """An index, a page or a file could not be read: the message names the URL and the cause."""


@dataclass(frozen=True)
class Reply:
    """A whole response: small things only (pages, metadata, range reads)."""

    url: str  # after redirects
    status: int
    headers: Mapping[str, str]  # case-insensitive
    body: bytes


class Http:
    """Requests through one session, with the policy above; counts the body bytes it received."""

    def __init__(
        self,
        *,
        timeout: float = 15.0,
        retries: int = 5,
        trusted_hosts: tuple[str, ...] = (),
        cert: Optional[str] = None,
        client_cert: Optional[str] = None,
        proxy: Optional[str] = None,
        session: Optional[requests.Session] = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.timeout = timeout
        self.retries = retries
        self.trusted_hosts = trusted_hosts
        self.session = session or requests.Session()
        self.session.headers["User-Agent"] = f"cudaresolve/{__version__}"
        if cert:
            self.session.verify = cert
        if client_cert:
            self.session.cert = client_cert
        if proxy:
            self.session.proxies = {"http": proxy, "https": proxy}
        self._sleep = sleep
        self._lock = threading.Lock()
        self.bytes_received = 0
        self.requests_made = 0

    def get(self, url: str, *, headers: Optional[Mapping[str, str]] = None, what: str = "") -> Reply:
        """GET `url` whole. 4xx other than 429 come back as replies (a 404 page is an answer)."""
        if url.startswith("file:"):
            return self._file(url, headers or {}, what)
        response = self._send(url, headers or {}, what, stream=False)
        self._count(len(response.content))
        return Reply(response.url, response.status_code, response.headers, response.content)

    def download(
        self,
        url: str,
        sink,
        *,
        what: str = "",
        progress: Optional[Callable[[int, Optional[int]], None]] = None,
    ) -> int:
        """Stream `url` into the binary file object `sink`; returns the byte count.

        `progress(done, total)` is called first with 0 and the announced size (None if unknown),
        then after every chunk.
        """
        if url.startswith("file:"):
            reply = self._file(url, {}, what)
            sink.write(reply.body)
            if progress:
                progress(len(reply.body), len(reply.body))
            return len(reply.body)
        response = self._send(url, {}, what, stream=True)
        with response:
            if response.status_code != 200:
                raise IndexAccessError(f"cannot download {url}{_for(what)}: HTTP {response.status_code}")
            total = _int(response.headers.get("Content-Length"))
            done = 0
            if progress:
                progress(0, total)
            try:
                for chunk in response.iter_content(CHUNK):
                    sink.write(chunk)
                    done += len(chunk)
                    self._count(len(chunk))
                    if progress:
                        progress(done, total)
            except requests.RequestException as exc:
                raise IndexAccessError(f"cannot download {url}{_for(what)}: connection lost after {done} bytes ({_reason(exc)})") from None
        if total is not None and done != total:
            raise IndexAccessError(f"cannot download {url}{_for(what)}: got {done} of {total} bytes")
        return done

    def check_transport(self, url: str, what: str = "") -> None:
        """Refuse plain HTTP to anything but localhost and trusted hosts, as pip does."""
        parts = urllib.parse.urlsplit(url)
        if parts.scheme == "https" or parts.scheme == "file":
            return
        if parts.scheme == "http" and (parts.hostname in _LOCAL_HOSTS or _trusted(parts, self.trusted_hosts)):
            return
        raise IndexAccessError(
            f"refusing {url}{_for(what)}: only https://, file:// and http:// to localhost or a trusted host "
            "(pip's trusted-host / --trusted-host) are used"
        )

    def _send(self, url: str, headers: Mapping[str, str], what: str, *, stream: bool) -> requests.Response:
        self.check_transport(url, what)
        attempt = 0
        while True:
            wait: Optional[float] = None
            try:
                with self._lock:
                    self.requests_made += 1
                response = self._follow(url, headers, what, stream)
            except requests.Timeout:
                failure = f"no answer within {self.timeout:g} s"
            except requests.exceptions.SSLError as exc:
                raise IndexAccessError(f"cannot fetch {url}{_for(what)}: TLS failed ({_reason(exc)})") from None
            except requests.ConnectionError as exc:
                if _name_unknown(exc):  # no answer will come by waiting: fail now, not after the retries
                    raise IndexAccessError(f"cannot fetch {url}{_for(what)}: cannot resolve the host name ({_reason(exc)})") from None
                failure = f"cannot connect ({_reason(exc)})"
            except requests.RequestException as exc:
                raise IndexAccessError(f"cannot fetch {url}{_for(what)}: {_reason(exc)}") from None
            else:
                if response.status_code not in _RETRY_STATUS:
                    return response
                failure = f"HTTP {response.status_code}"
                wait = _retry_after(response.headers.get("Retry-After"))
                response.close()
            if attempt >= self.retries:
                tries = f" after {attempt + 1} tries" if attempt else ""
                raise IndexAccessError(f"cannot fetch {url}{_for(what)}: {failure}{tries}")
            self._sleep(wait if wait is not None else 0.5 * 2**attempt)
            attempt += 1

    def _follow(self, url: str, headers: Mapping[str, str], what: str, stream: bool) -> requests.Response:
        """GET with redirects followed here, so the policy is checked before each hop connects."""
        for _ in range(MAX_REDIRECTS + 1):
            response = self.session.get(url, headers=dict(headers), timeout=self.timeout, stream=stream, allow_redirects=False)
            location = response.headers.get("Location")
            if not response.is_redirect or not location:
                return response
            response.close()
            url = urllib.parse.urljoin(url, location)
            self.check_transport(url, what)
        raise IndexAccessError(f"cannot fetch {url}{_for(what)}: more than {MAX_REDIRECTS} redirects")

    def _file(self, url: str, headers: Mapping[str, str], what: str) -> Reply:
        path = local_path(url)
        if os.path.isdir(path):  # a directory index: its index.html, as pip reads it
            path = os.path.join(path, "index.html")
            url = urllib.parse.urljoin(url if url.endswith("/") else url + "/", "index.html")
        try:
            with open(path, "rb") as f:
                wanted = _byte_range(headers.get("Range"), os.fstat(f.fileno()).st_size)
                if wanted is None:
                    return Reply(url, 200, {}, f.read())
                start, end, size = wanted
                f.seek(start)
                body = f.read(end - start + 1)
                return Reply(url, 206, {"Content-Range": f"bytes {start}-{end}/{size}"}, body)
        except FileNotFoundError:
            return Reply(url, 404, {}, b"")
        except OSError as exc:
            raise IndexAccessError(f"cannot read {path}{_for(what)}: {exc.strerror or exc}") from None

    def _count(self, n: int) -> None:
        with self._lock:
            self.bytes_received += n


def local_path(url: str) -> str:
    """The file system path a file:// URL names."""
    return urllib.request.url2pathname(urllib.parse.urlsplit(url).path)


def _byte_range(header: Optional[str], size: int) -> Optional[tuple[int, int, int]]:
    """(start, end inclusive, size) of a single `bytes=` range header over a file of `size` bytes."""
    if not header or not header.startswith("bytes=") or "," in header:
        return None
    first, _, last = header[len("bytes="):].partition("-")
    if not first:
        start = max(0, size - int(last))
        return start, size - 1, size
    start = int(first)
    end = min(int(last), size - 1) if last else size - 1
    return start, end, size


def _trusted(parts: urllib.parse.SplitResult, trusted_hosts: tuple[str, ...]) -> bool:
    """pip's rule: a trusted host matches by host name, or by host:port when a port is given."""
    for entry in trusted_hosts:
        host, _, port = entry.partition(":")
        if parts.hostname == host.lower() and (not port or str(parts.port) == port):
            return True
    return False


def _retry_after(value: Optional[str]) -> Optional[float]:
    """Seconds from a Retry-After header (delta seconds or an HTTP date), capped."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return min(float(value), MAX_RETRY_AFTER)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return min(max(0.0, when.timestamp() - time.time()), MAX_RETRY_AFTER)


def _int(value: Optional[str]) -> Optional[int]:
    return int(value) if value and value.isdigit() else None


def _for(what: str) -> str:
    return f" ({what})" if what else ""


def _name_unknown(exc: BaseException) -> bool:
    """Whether a connection failed because the host name does not resolve (a socket.gaierror
    among its causes): the network or the name is wrong, which retrying does not change."""
    pending: list = [exc]
    seen: set[int] = set()
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, socket.gaierror):
            return True
        pending += [current.__cause__, current.__context__, getattr(current, "reason", None)]
        pending += [a for a in getattr(current, "args", ()) if isinstance(a, BaseException)]
    return False


def _reason(exc: BaseException) -> str:
    """The innermost cause of a requests error, without urllib3's object reprs."""
    while exc.__context__ is not None and exc.__context__ is not exc:
        exc = exc.__context__
    text = str(exc.args[-1] if exc.args else exc)
    return text.split(": ", 1)[-1] if "object at 0x" in text else text
