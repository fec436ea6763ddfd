"""HTTP for index access: one `requests` session, bounded retries, and the transport policy.

Why requests and not urllib: connection reuse across the many small range reads of one host
(a wheel's metadata is two requests), proxies and `REQUESTS_CA_BUNDLE` as users already set them,
and a session that is safe to share between the fetch threads of one resolution.

Policy: HTTPS always; plain HTTP only for loopback addresses (localhost, 127.0.0.0/8, ::1: pip's
secure origins) and the trusted hosts (pip's `trusted-host`); `file://` URLs are read from disk here
too, so callers handle every index the same way. Retries: connection errors, timeouts, 429 and 5xx
are tried again up to `retries` times, waiting 0.5, 1, 2 ... seconds, or what the server's
`Retry-After` asks (capped at 60 s). Limits (index/limits.py): every body is read in chunks up to a
`Cap` the caller names, and every request has a deadline (`_Watch`); passing either is
`LimitExceeded`, never retried. Every failure that reaches the caller is an `IndexAccessError` of
one line naming the URL and what happened.

requests (and urllib3 under it) is imported with the session, at the first request: a lock whose
pages are all fresh in the cache sends none, and those imports were a fifth of its start.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import os
import socket
import threading
import time
import urllib.parse
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, TypeVar

from cudaresolve import __version__
from cudaresolve.errors import CudaresolveError
from cudaresolve.index.limits import DEFAULT, Limits, size_text

if TYPE_CHECKING:
    import requests
    from _typeshed import SupportsWrite

T = TypeVar("T")

_RETRY_STATUS = frozenset({429, 500, 502, 503, 504})
# pip's SECURE_ORIGINS (pip/_internal/network/session.py) besides https and file: every loopback address.
_LOOPBACK = (ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"))
MAX_RETRY_AFTER = 60.0
CHUNK = 64 * 1024  # small enough that a slow but steady server shows progress to the deadline
MAX_REDIRECTS = 10
WATCH_INTERVAL = 0.1  # how often the watchdog looks at the running requests' deadlines


class IndexAccessError(CudaresolveError):
    """An index, a page or a file could not be read: the message names the URL and the cause."""


class LimitExceeded(IndexAccessError):
    """A response passed one of the bounds of index/limits.py: too large, or too slow."""


@dataclass(frozen=True)
class Cap:
    """The most bytes one response body may have, and what it bounds (for the message)."""

    bytes: int
    of: str  # "a project page", "a metadata file", ...

    def text(self) -> str:
        return f"the limit of {size_text(self.bytes)} for {self.of}"


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
        timeout: Optional[float] = 15.0,
        retries: int = 5,
        trusted_hosts: tuple[str, ...] = (),
        cert: Optional[str] = None,
        client_cert: Optional[str] = None,
        proxy: Optional[str] = None,
        limits: Limits = DEFAULT,
        sleep: Callable[[float], None] = time.sleep,
        give_up: bool = False,
    ):
        self.timeout = timeout or None  # pip: a timeout of 0 sets none
        # give_up: a host that failed once fails every later request at once (the doctor's judge answers
        # without the network in the time of one failure, not one per page)
        self.give_up = give_up
        self._failed: dict[str, str] = {}  # host -> why, with give_up
        self.retries = retries
        self.trusted_hosts = trusted_hosts
        self.limits = limits
        self._cert, self._client_cert, self._proxy = cert, client_cert, proxy
        self._session: Optional[requests.Session] = None
        self._sleep = sleep
        self._lock = threading.Lock()
        self._watchdog = _Watchdog()
        self.bytes_received = 0
        self.requests_made = 0
        self.downloaded = 0  # bytes of whole files downloaded, against limits.download_budget

    def count_download(self, count: int) -> None:
        """Add `count` bytes of a whole-file download to what the budget has spent (fetch threads share it)."""
        with self._lock:
            self.downloaded += count

    @property
    def session(self) -> requests.Session:
        """The one session of this Http's requests, made at the first (fetch threads share it)."""
        with self._lock:
            if self._session is None:
                import requests

                session = requests.Session()
                adapter = _watched_adapter_class()
                session.mount("http://", adapter())
                session.mount("https://", adapter())
                session.headers["User-Agent"] = f"cudaresolve/{__version__}"
                if self._cert:
                    session.verify = self._cert
                if self._client_cert:
                    session.cert = self._client_cert
                if self._proxy:
                    session.proxies = {"http": self._proxy, "https": self._proxy}
                self._session = session
            return self._session

    def get(self, url: str, *, cap: Cap, headers: Optional[Mapping[str, str]] = None, what: str = "") -> Reply:
        """GET `url` whole, at most `cap` bytes of body. 4xx other than 429 come back as replies (a
        404 page is an answer). A range request answered with 200 comes back with an empty body:
        the server would send the whole file, which is the caller's to download, not ours to hold."""
        headers = headers or {}
        if url.startswith("file:"):
            return self._file(url, headers, what, cap)

        def consume(response: requests.Response, watch: _Watch) -> Reply:
            import requests

            if "Range" in headers and response.status_code == 200:
                return Reply(response.url, 200, response.headers, b"")
            body = bytearray()
            try:
                self._read_body(response, watch, url, what, cap, body.extend)
            except requests.RequestException as exc:
                raise _Lost(f"connection lost after {len(body)} bytes ({_reason(exc)})") from None
            return Reply(response.url, response.status_code, response.headers, bytes(body))

        return self._send(url, headers, what, consume)

    def download(
        self,
        url: str,
        sink: SupportsWrite[bytes],
        *,
        cap: Cap,
        what: str = "",
        progress: Optional[Callable[[int, Optional[int]], None]] = None,
    ) -> int:
        """Stream `url` into the binary file object `sink`, at most `cap` bytes; returns the byte count.

        `progress(done, total)` is called first with 0 and the announced size (None if unknown),
        then after every chunk.
        """
        if url.startswith("file:"):
            reply = self._file(url, {}, what, cap)
            sink.write(reply.body)
            if progress:
                progress(len(reply.body), len(reply.body))
            return len(reply.body)

        def consume(response: requests.Response, watch: _Watch) -> int:
            import requests

            if response.status_code != 200:
                raise IndexAccessError(f"cannot download {url}{_for(what)}: HTTP {response.status_code}")
            total = _int(response.headers.get("Content-Length"))
            done = 0
            if progress:
                progress(0, total)

            def write(chunk: bytes) -> None:
                nonlocal done
                sink.write(chunk)
                done += len(chunk)
                if progress:
                    progress(done, total)

            try:
                self._read_body(response, watch, url, what, cap, write)
            except requests.RequestException as exc:
                raise IndexAccessError(f"cannot download {url}{_for(what)}: connection lost after {done} bytes ({_reason(exc)})") from None
            if total is not None and done != total:
                raise IndexAccessError(f"cannot download {url}{_for(what)}: got {done} of {total} bytes")
            return done

        return self._send(url, {}, what, consume)

    def check_transport(self, url: str, what: str = "") -> None:
        """Refuse plain HTTP to anything but loopback addresses and trusted hosts, as pip does."""
        try:
            parts = urllib.parse.urlsplit(url)
            parts.port  # noqa: B018 - a port that is not a number raises here, not later
        except ValueError as exc:
            raise IndexAccessError(f"{url}{_for(what)}: not a valid URL ({exc})") from None
        if parts.scheme == "https" or parts.scheme == "file":
            return
        if parts.scheme == "http" and (_loopback(parts.hostname) or _trusted(parts, self.trusted_hosts)):
            return
        raise IndexAccessError(
            f"refusing {url}{_for(what)}: only https://, file:// and http:// to a loopback address or a trusted host "
            "(pip's trusted-host / --trusted-host) are used"
        )

    def _send(self, url: str, headers: Mapping[str, str], what: str, consume: Callable[[requests.Response, "_Watch"], T]) -> T:
        """_tried, or with `give_up` the failure of an earlier request to the same host at once."""
        host = urllib.parse.urlsplit(url).netloc
        if host in self._failed:
            raise IndexAccessError(f"cannot fetch {url}{_for(what)}: {host} failed earlier in this run ({self._failed[host]})")
        try:
            return self._tried(url, headers, what, consume)
        except LimitExceeded:
            raise  # this response's size or pace, not the host's
        except IndexAccessError as exc:
            if self.give_up:
                with self._lock:
                    self._failed.setdefault(host, str(exc))
            raise

    def _tried(self, url: str, headers: Mapping[str, str], what: str, consume: Callable[[requests.Response, "_Watch"], T]) -> T:
        """One request with retries: `consume` reads the response while the request's deadline runs.

        Connection errors, timeouts, 429/5xx and a body cut short (`_Lost`) are tried again; a
        limit is final (a server that trickles or sends without end does the same again)."""
        import requests

        self.check_transport(url, what)
        base = max(self.limits.request_seconds, self.timeout or 0.0)
        attempt = 0
        while True:
            wait: Optional[float] = None
            watch = _Watch(base, self.limits.min_bytes_per_second)
            self._watchdog.add(watch)
            _current.watch = watch
            try:
                with self._lock:
                    self.requests_made += 1
                response = self._follow(url, headers, what)
                if response.status_code in _RETRY_STATUS:
                    failure = f"HTTP {response.status_code}"
                    wait = _retry_after(response.headers.get("Retry-After"))
                    response.close()
                else:
                    with response:
                        return consume(response, watch)
            except _Lost as lost:
                watch.check(url, what)
                failure = str(lost)
            except requests.Timeout:
                watch.check(url, what)
                failure = f"no answer within {self.timeout:g} s" if self.timeout else "no answer"
            except requests.exceptions.SSLError as exc:
                watch.check(url, what)
                raise IndexAccessError(f"cannot fetch {url}{_for(what)}: TLS failed ({_reason(exc)})") from None
            except requests.ConnectionError as exc:
                watch.check(url, what)
                if _name_unknown(exc):  # no answer will come by waiting: fail now, not after the retries
                    raise IndexAccessError(f"cannot fetch {url}{_for(what)}: cannot resolve the host name ({_reason(exc)})") from None
                failure = f"cannot connect ({_reason(exc)})"
            except requests.RequestException as exc:
                watch.check(url, what)
                raise IndexAccessError(f"cannot fetch {url}{_for(what)}: {_reason(exc)}") from None
            finally:
                _current.watch = None
                self._watchdog.remove(watch)
            if attempt >= self.retries:
                tries = f" after {attempt + 1} tries" if attempt else ""
                raise IndexAccessError(f"cannot fetch {url}{_for(what)}: {failure}{tries}")
            self._sleep(wait if wait is not None else min(MAX_RETRY_AFTER, 0.5 * 2 ** min(attempt, 10)))
            attempt += 1

    def _follow(self, url: str, headers: Mapping[str, str], what: str) -> requests.Response:
        """GET with redirects followed here, so the policy is checked before each hop connects."""
        for _ in range(MAX_REDIRECTS + 1):
            response = self.session.get(url, headers=dict(headers), timeout=self.timeout, stream=True, allow_redirects=False)
            location = response.headers.get("Location")
            if not response.is_redirect or not location:
                return response
            response.close()
            try:
                url = urllib.parse.urljoin(url, location)
            except ValueError:
                raise IndexAccessError(f"cannot fetch {url}{_for(what)}: redirected to {location!r}, not a valid URL") from None
            self.check_transport(url, what)
        raise IndexAccessError(f"cannot fetch {url}{_for(what)}: more than {MAX_REDIRECTS} redirects")

    def _read_body(self, response: requests.Response, watch: "_Watch", url: str, what: str, cap: Cap, sink: Callable[[bytes], None]) -> None:
        """Pass the body to `sink` chunk by chunk, stopping at `cap` bytes or the deadline."""
        announced = _int(response.headers.get("Content-Length"))
        if announced is not None and announced > cap.bytes:
            raise LimitExceeded(f"cannot read {url}{_for(what)}: the server announces {announced:,} bytes, over {cap.text()}")
        done = 0
        for chunk in response.iter_content(CHUNK):
            done += len(chunk)
            if done > cap.bytes:
                raise LimitExceeded(f"cannot read {url}{_for(what)}: stopped after {done:,} bytes, over {cap.text()}")
            watch.received += len(chunk)
            sink(chunk)
            self._count(len(chunk))
        watch.check(url, what)  # a socket shut at the deadline can look like the end of the body

    def _file(self, url: str, headers: Mapping[str, str], what: str, cap: Cap) -> Reply:
        path = local_path(url)
        if os.path.isdir(path):  # a directory index: its index.html, as pip reads it
            path = os.path.join(path, "index.html")
            url = urllib.parse.urljoin(url if url.endswith("/") else url + "/", "index.html")
        try:
            with open(path, "rb") as f:
                wanted = _byte_range(headers.get("Range"), os.fstat(f.fileno()).st_size)
                if wanted is None:
                    body = f.read(cap.bytes + 1)
                    if len(body) > cap.bytes:
                        raise LimitExceeded(f"cannot read {path}{_for(what)}: more than {cap.text()}")
                    return Reply(url, 200, {}, body)
                start, end, size = wanted
                if end - start + 1 > cap.bytes:
                    raise LimitExceeded(f"cannot read {path}{_for(what)}: a range of {end - start + 1:,} bytes, over {cap.text()}")
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


class _Lost(Exception):
    """A body cut short while reading a reply: the request is tried again."""


# -- the deadline of one request -----------------------------------------------------------------------
#
# requests' timeout bounds each wait on the socket, so a server that sends a byte every few seconds is
# never stopped by it. Each request therefore has a _Watch: its headers must come within `base`
# seconds, then the body must average `rate` bytes a second. A watchdog thread shuts the sockets of a
# request past its deadline, which ends whatever read is blocked on them (the status line, the
# headers, the TLS handshake or the body); the reader then sees the watch expired and reports it.
# The connections register themselves with the request running in their thread (`_current.watch`)
# when they connect or send: a pooled connection is reused without connecting again.


class _Watch:
    def __init__(self, base: float, rate: int):
        self.started = time.monotonic()
        self.base, self.rate = base, rate
        self.received = 0
        self.expired = False
        self.connections: list[object] = []
        self.sockets: list[socket.socket] = []

    def deadline(self) -> float:
        return self.started + self.base + self.received / self.rate

    def expire(self) -> None:
        """Shut the request's sockets (again each round: one may have been made since): those its
        connections hold now (one in its TLS handshake) and those they held when they sent (a
        response that ends with the connection keeps reading a socket its connection let go)."""
        self.expired = True
        held = [getattr(connection, "sock", None) for connection in self.connections]
        for sock in held + self.sockets:
            if sock is not None:
                with contextlib.suppress(OSError):
                    socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the plain socket's, under TLS too

    def check(self, url: str, what: str) -> None:
        if self.expired:
            elapsed = time.monotonic() - self.started
            raise LimitExceeded(
                f"cannot fetch {url}{_for(what)}: too slow, {self.received:,} bytes in {elapsed:.0f} s "
                f"(the limit: an answer within {self.base:g} s, then {self.rate:,} bytes/s on average)"
            )


class _Watchdog:
    """One thread per Http while requests run: it expires the watches whose deadline passed."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watches: set[_Watch] = set()
        self._thread: Optional[threading.Thread] = None

    def add(self, watch: _Watch) -> None:
        with self._lock:
            self._watches.add(watch)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="cudaresolve-deadlines", daemon=True)
                self._thread.start()

    def remove(self, watch: _Watch) -> None:
        with self._lock:
            self._watches.discard(watch)

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._watches:
                    self._thread = None
                    return
                now = time.monotonic()
                late = [w for w in self._watches if now >= w.deadline()]
            for watch in late:
                watch.expire()
            time.sleep(WATCH_INTERVAL)


_current = threading.local()


def _attach(connection: object) -> None:
    """Put `connection`, and the socket it has, under the watch of the request running in this thread."""
    watch = getattr(_current, "watch", None)
    if watch is None:
        return
    if connection not in watch.connections:
        watch.connections.append(connection)
    sock = getattr(connection, "sock", None)
    if sock is not None and sock not in watch.sockets:
        watch.sockets.append(sock)


class _Watched:
    """What the watched connections add to urllib3's: they register with the running request."""

    def connect(self) -> None:
        _attach(self)
        super().connect()  # type: ignore[misc]
        _attach(self)

    def request(self, *args: Any, **kwargs: Any) -> Any:
        _attach(self)
        return super().request(*args, **kwargs)  # type: ignore[misc]


@functools.lru_cache(maxsize=None)
def _watched_adapter_class() -> type:
    """requests' adapter, whose connections (direct or through an HTTP proxy) register with the
    running request's watch. SOCKS proxies keep their own connections: there only the body's
    reads see the deadline. Made once, with the first session (it subclasses urllib3's classes)."""
    import requests.adapters
    import urllib3.connection
    import urllib3.connectionpool

    class WatchedHTTPConnection(_Watched, urllib3.connection.HTTPConnection):
        pass

    class WatchedHTTPSConnection(_Watched, urllib3.connection.HTTPSConnection):
        pass

    class WatchedPool(urllib3.connectionpool.HTTPConnectionPool):
        ConnectionCls = WatchedHTTPConnection

    class WatchedTLSPool(urllib3.connectionpool.HTTPSConnectionPool):
        ConnectionCls = WatchedHTTPSConnection

    pools = {"http": WatchedPool, "https": WatchedTLSPool}

    class WatchedAdapter(requests.adapters.HTTPAdapter):
        def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
            super().init_poolmanager(*args, **kwargs)
            self.poolmanager.pool_classes_by_scheme = pools

        def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
            manager = super().proxy_manager_for(proxy, **proxy_kwargs)
            if not proxy.lower().startswith("socks"):
                manager.pool_classes_by_scheme = pools
            return manager

    return WatchedAdapter


def local_path(url: str) -> str:
    """The file system path a file:// URL names."""
    import urllib.request  # ~10 ms, for file:// indexes only

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


def _loopback(host: Optional[str]) -> bool:
    """localhost, 127.0.0.0/8 and ::1: the addresses pip treats as secure over plain HTTP."""
    if host is None:
        return False
    if host.lower() == "localhost":
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return any(address in network for network in _LOOPBACK)


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
    import email.utils  # with calendar and socket: only a Retry-After date needs it

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
    pending: list[Optional[BaseException]] = [exc]
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
