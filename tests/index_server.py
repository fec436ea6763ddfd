"""A package index on 127.0.0.1 for tests: PEP 691 JSON and PEP 503 HTML pages, wheels with range
requests, PEP 658 metadata files, and switches for what real servers do wrong (failures, slowness,
redirects, no ranges). It counts every request and every body byte it sends, so tests can assert
what a behaviour costs. `make_wheel` builds wheels with real metadata shapes.

Besides the regular index at `/simple/<project>/` it serves further roots added by `add(...,
root=...)`, e.g. PyTorch-style variant indexes at `/whl/cu128/<project>/`; every root's files are
under `/files/`.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import json
import threading
import time
import zipfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Optional, Sequence
from urllib.parse import unquote

from packaging.utils import canonicalize_name, parse_wheel_filename


def make_wheel(
    name: str,
    version: str,
    *,
    requires: Sequence[str] = (),
    extras: Sequence[str] = (),
    requires_python: Optional[str] = None,
    tag: str = "py3-none-any",
    files: Optional[dict[str, bytes]] = None,
    metadata_name: Optional[str] = None,
    dist_info_first: bool = False,
) -> tuple[str, bytes]:
    """(filename, bytes) of a wheel with METADATA, WHEEL and RECORD, deflated like real wheels."""
    stem = f"{canonicalize_name(name).replace('-', '_')}-{version}"
    dist_info = f"{stem}.dist-info"
    lines = ["Metadata-Version: 2.1", f"Name: {metadata_name or name}", f"Version: {version}"]
    if requires_python:
        lines.append(f"Requires-Python: {requires_python}")
    lines += [f"Provides-Extra: {extra}" for extra in extras]
    lines += [f"Requires-Dist: {requirement}" for requirement in requires]
    members = dict(files or {})
    members[f"{dist_info}/METADATA"] = ("\n".join(lines) + "\n\n").encode()
    members[f"{dist_info}/WHEEL"] = f"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: false\nTag: {tag}\n".encode()
    record = []
    for path, data in members.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{dist_info}/RECORD,,")
    members[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
    buffer = io.BytesIO()
    order = sorted(members, key=lambda path: not path.startswith(dist_info)) if dist_info_first else list(members)
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in order:
            data = members[path]
            archive.writestr(path, data)
    return f"{stem}-{tag}.whl", buffer.getvalue()


@dataclass
class Hosted:
    filename: str
    data: bytes
    requires_python: Optional[str] = None
    yanked: Optional[str] = None  # None: not yanked
    metadata: bool = True  # serve and advertise the PEP 658 file
    sha256: Optional[str] = None  # what the page says; defaults to the real digest


@dataclass
class IndexServer:
    """The index: `add(...)` files, then point an index URL at `url + "/simple"` (or `url + "/" + root`)."""

    pages: str = "json"  # "json", "html", or "both" (content negotiation on Accept)
    ranges: bool = True
    projects: dict[str, list[Hosted]] = field(default_factory=lambda: defaultdict(list))  # the "simple" root
    roots: dict[str, dict[str, list[Hosted]]] = field(default_factory=dict)  # "whl/cu128" -> its projects
    fail: dict[str, list[int]] = field(default_factory=dict)  # path -> statuses to answer first, in order
    delay: dict[str, float] = field(default_factory=dict)  # path -> seconds to wait before answering
    redirects: dict[str, str] = field(default_factory=dict)  # path with query -> location
    retry_after: Optional[str] = None  # Retry-After header sent with injected failures
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    sent: Counter = field(default_factory=Counter)  # path -> body bytes sent

    def add(self, filename: str, data: bytes, *, root: str = "simple", **options) -> Hosted:
        project = canonicalize_name(parse_wheel_filename(filename)[0]) if filename.endswith(".whl") else canonicalize_name(filename.split("-")[0])
        hosted = Hosted(filename, data, **options)
        self._root(root)[project].append(hosted)
        return hosted

    def _root(self, root: str) -> dict[str, list[Hosted]]:
        if root == "simple":
            return self.projects
        return self.roots.setdefault(root.strip("/"), defaultdict(list))

    @property
    def bytes_sent(self) -> int:
        return sum(self.sent.values())

    def paths(self) -> list[str]:
        return [path for path, _ in self.requests]

    def start(self) -> str:
        server = self
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(server))
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        return self.url

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    # what the handler serves ------------------------------------------------------------------

    def page(self, project: str, as_json: bool, root: str = "simple") -> tuple[bytes, str]:
        hosted = self._root(root).get(project, [])
        up = "../" * (root.count("/") + 2)  # from /<root>/<project>/ to /
        if as_json:
            files = []
            for h in hosted:
                entry = {"filename": h.filename, "url": f"{up}files/{h.filename}", "hashes": {"sha256": _digest(h)}}
                if h.requires_python:
                    entry["requires-python"] = h.requires_python
                if h.yanked is not None:
                    entry["yanked"] = h.yanked or True
                if h.metadata:
                    entry["core-metadata"] = {"sha256": hashlib.sha256(_metadata_of(h.data)).hexdigest()}
                entry["size"] = len(h.data)
                files.append(entry)
            document = {"meta": {"api-version": "1.1"}, "name": project, "files": files}
            return json.dumps(document).encode(), "application/vnd.pypi.simple.v1+json"
        anchors = []
        for h in hosted:
            attrs = f'href="{up}files/{h.filename}#sha256={_digest(h)}"'
            if h.requires_python:
                attrs += f' data-requires-python="{html.escape(h.requires_python)}"'
            if h.yanked is not None:
                attrs += f' data-yanked="{html.escape(h.yanked)}"'
            if h.metadata:
                attrs += f' data-core-metadata="sha256={hashlib.sha256(_metadata_of(h.data)).hexdigest()}"'
            anchors.append(f"<a {attrs}>{h.filename}</a><br/>")
        return ("<!DOCTYPE html><html><body>" + "".join(anchors) + "</body></html>").encode(), "text/html"

    def file(self, name: str) -> Optional[bytes]:
        for projects in (self.projects, *self.roots.values()):
            for h in (h for hosted in projects.values() for h in hosted):
                if h.filename == name:
                    return h.data
                if h.metadata and name == h.filename + ".metadata":
                    return _metadata_of(h.data)
        return None


def _digest(hosted: Hosted) -> str:
    return hosted.sha256 or hashlib.sha256(hosted.data).hexdigest()


def _metadata_of(wheel: bytes) -> bytes:
    with zipfile.ZipFile(io.BytesIO(wheel)) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        return archive.read(name)


def _handler(server: IndexServer):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            path = self.path.split("?")[0]
            server.requests.append((path, dict(self.headers)))
            if path in server.delay:
                time.sleep(server.delay[path])
            statuses = server.fail.get(path)
            if statuses:
                status = statuses.pop(0)
                extra = {"Retry-After": server.retry_after} if server.retry_after else {}
                return self._send(status, b"failure injected by the test\n", "text/plain", extra, path)
            if self.path in server.redirects:
                return self._send(302, b"", "text/plain", {"Location": server.redirects[self.path]}, path)
            root, _, project = path.strip("/").rpartition("/")
            if root == "simple" or root in server.roots:
                if project not in server._root(root):
                    return self._send(404, b"not found\n", "text/plain", {}, path)
                accept = self.headers.get("Accept", "")
                as_json = server.pages == "json" or (server.pages == "both" and "vnd.pypi.simple.v1+json" in accept)
                body, content_type = server.page(project, as_json, root)
                return self._send(200, body, content_type, {"ETag": f'"{hashlib.sha256(body).hexdigest()[:16]}"'}, path)
            if path.startswith("/files/"):
                data = server.file(unquote(path[len("/files/"):]))  # "+" of a local version arrives as %2B
                if data is None:
                    return self._send(404, b"not found\n", "text/plain", {}, path)
                wanted = self.headers.get("Range")
                if server.ranges and wanted and wanted.startswith("bytes="):
                    first, _, last = wanted[6:].partition("-")
                    if first:
                        start, end = int(first), min(int(last), len(data) - 1) if last else len(data) - 1
                    else:
                        start, end = max(0, len(data) - int(last)), len(data) - 1
                    headers = {"Content-Range": f"bytes {start}-{end}/{len(data)}", "Accept-Ranges": "bytes"}
                    return self._send(206, data[start : end + 1], "application/octet-stream", headers, path)
                return self._send(200, data, "application/octet-stream", {}, path)
            return self._send(404, b"not found\n", "text/plain", {}, path)

        def _send(self, status: int, body: bytes, content_type: str, headers: dict, path: str) -> None:
            etag = headers.get("ETag")
            if etag and self.headers.get("If-None-Match") == etag:
                status, body = 304, b""
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            for key, value in headers.items():
                self.send_header(key, value)
            # counted before the body goes out: the client may read the count as soon as it has the body
            server.sent[path] += len(body)
            try:
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
                server.sent[path] -= len(body)

    return Handler
