"""An index on 127.0.0.1 that misbehaves on purpose, one way per mode: `/<mode>/simple/demo/` is the
project page of `demo` and `/<mode>/files/...` its files. It sends without end, trickles, serves zip
files whose directory lies, bombs that inflate to gigabytes, and links to file:///dev/zero, so tests
can show each is stopped with bounded memory, disk and time (tests/index/test_index_hostile.py).

`raw_zip` writes a zip by hand, so a member's stated sizes and its bytes can disagree.
"""

from __future__ import annotations

import hashlib
import json
import struct
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Optional

WHEEL = "demo-1.0-py3-none-any.whl"
METADATA = b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n\n"
ENDLESS_CHUNK = b" " * 65536
CLAIMED_SIZE = 4 << 30  # what directory-claims-3gb says its wheel's size is

MODES = (
    "endless-page",  # a JSON page that never ends
    "endless-html-page",  # an HTML page that never ends
    "trickle-headers",  # the status line and headers, one byte every 0.2 s
    "trickle-body",  # a whole page's headers, then its body one byte every 0.2 s
    "endless-wheel",  # ignores Range, 200 and bytes without end; the page states the wheel's size
    "endless-wheel-unsized",  # the same behind an HTML page, which states no size
    "endless-metadata",  # the PEP 658 .metadata file never ends
    "metadata-bomb",  # METADATA deflated from 1 GiB of zeros (1 MB in the zip), its size stated
    "metadata-lies",  # the same bomb, whose directory says it inflates to 49 bytes
    "metadata-claims-4gb",  # the directory says METADATA is 4,000,000,000 bytes
    "directory-claims-3gb",  # the end record says the central directory is 3 GiB
    "file-link",  # the page links file:///dev/zero as the wheel
)


def raw_zip(
    members: list[tuple[str, int, bytes, int, int]], directory_size: Optional[int] = None, directory_offset: Optional[int] = None
) -> bytes:
    """A zip of (name, method, stored bytes, crc32, stated uncompressed size) members, written as
    is; `directory_size` and `directory_offset` override what the end record states."""
    out, directory = bytearray(), bytearray()
    for name, method, data, crc, size in members:
        encoded = name.encode()
        offset = len(out)
        out += struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, method, 0, 0, crc, len(data), size, len(encoded), 0)
        out += encoded + data
        directory += struct.pack(
            "<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, method, 0, 0, crc, len(data), size, len(encoded), 0, 0, 0, 0, 0, offset
        )
        directory += encoded
    start = len(out)
    stated = len(directory) if directory_size is None else directory_size
    offset = start if directory_offset is None else directory_offset
    end = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, len(members), len(members), stated, offset, 0)
    return bytes(out + directory + end)


def deflated_zeros(size: int) -> tuple[bytes, int]:
    """(raw deflate stream, crc32) of `size` zero bytes, made without holding them."""
    compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
    zeros = bytes(16 << 20)
    parts, crc, left = [], 0, size
    while left:
        piece = zeros[: min(left, len(zeros))]
        parts.append(compressor.compress(piece))
        crc = zlib.crc32(piece, crc)
        left -= len(piece)
    parts.append(compressor.flush())
    return b"".join(parts), crc


def _wheels() -> dict[str, bytes]:
    """The wheel each mode serves, where it serves a real one."""
    wheel_member = (b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
    plain = [
        ("demo-1.0.dist-info/WHEEL", 0, wheel_member, zlib.crc32(wheel_member), len(wheel_member)),
        ("demo-1.0.dist-info/METADATA", 0, METADATA, zlib.crc32(METADATA), len(METADATA)),
    ]
    bomb, bomb_crc = deflated_zeros(1 << 30)
    padding = b"\0" * (2 << 20)  # so the range reads do not take the whole file at once
    pad = [("demo/padding.bin", 0, padding, zlib.crc32(padding), len(padding))]
    return {
        "endless-wheel": raw_zip(plain),
        "endless-wheel-unsized": raw_zip(plain),
        "endless-metadata": raw_zip(plain),
        "metadata-bomb": raw_zip(pad + [plain[0], ("demo-1.0.dist-info/METADATA", 8, bomb, bomb_crc, 1 << 30)]),
        "metadata-lies": raw_zip(pad + [plain[0], ("demo-1.0.dist-info/METADATA", 8, bomb, bomb_crc, len(METADATA))]),
        "metadata-claims-4gb": raw_zip(pad + [plain[0], ("demo-1.0.dist-info/METADATA", 0, METADATA, zlib.crc32(METADATA), 4_000_000_000)]),
        # served as the last bytes of a 4 GiB file, so the end record's claim is consistent
        "directory-claims-3gb": raw_zip(pad + plain, directory_size=3 << 30, directory_offset=CLAIMED_SIZE - 22 - (3 << 30)),
    }


class HostileIndex:
    """Start it, then use `url + "/<mode>/simple"` as the index URL of one mode."""

    def __init__(self) -> None:
        self.wheels = _wheels()

    def start(self) -> str:
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        return self.url

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def page(self, mode: str) -> tuple[bytes, str]:
        data = self.wheels.get(mode, b"")
        entry: dict = {"filename": WHEEL, "url": f"/{mode}/files/{WHEEL}", "hashes": {"sha256": hashlib.sha256(data).hexdigest()}}
        if mode == "file-link":
            entry["url"] = "file:///dev/zero"
        elif mode == "endless-metadata":
            entry["core-metadata"] = {"sha256": "0" * 64}
        if mode == "endless-wheel-unsized":
            return f'<html><body><a href="/{mode}/files/{WHEEL}#sha256={"0" * 64}">{WHEEL}</a></body></html>'.encode(), "text/html"
        entry["size"] = CLAIMED_SIZE if mode == "directory-claims-3gb" else len(data)
        return json.dumps({"meta": {"api-version": "1.1"}, "name": "demo", "files": [entry]}).encode(), "application/vnd.pypi.simple.v1+json"


def _handler(index: HostileIndex):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # bodies without a length end when the connection closes

        def log_message(self, *args) -> None:
            pass

        def do_GET(self) -> None:
            try:
                self._answer()
            except (BrokenPipeError, ConnectionResetError):  # the client stopped reading: the test's point
                pass

        def _answer(self) -> None:
            mode, _, rest = self.path.lstrip("/").partition("/")
            if rest == "simple/demo/":
                if mode == "endless-page":
                    return self._endless("application/vnd.pypi.simple.v1+json", b'{"files": [')
                if mode == "endless-html-page":
                    return self._endless("text/html", b"<html><body>")
                if mode == "trickle-headers":
                    return self._trickle(b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n" + b"X-Slow: " + b"." * 10**6)
                body, content_type = index.page(mode)
                if mode == "trickle-body":
                    self._headers(200, "text/html", None)
                    return self._trickle(b"<html>" + b" " * 10**6)
                self._headers(200, content_type, len(body))
                return self.wfile.write(body)
            if rest == f"files/{WHEEL}.metadata" and mode == "endless-metadata":
                return self._endless("application/octet-stream", b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\nSummary: ")
            if rest == f"files/{WHEEL}" and mode in index.wheels:
                data = index.wheels[mode]
                if mode.startswith("endless-wheel"):
                    return self._endless("application/octet-stream", data)  # whatever Range asked
                return self._ranged(data, CLAIMED_SIZE if mode == "directory-claims-3gb" else len(data))
            self._headers(404, "text/plain", 0)

        def _headers(self, status: int, content_type: str, length: Optional[int], extra: Optional[dict] = None) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            if length is not None:
                self.send_header("Content-Length", str(length))
            for key, value in (extra or {}).items():
                self.send_header(key, value)
            self.end_headers()

        def _endless(self, content_type: str, start: bytes) -> None:
            self._headers(200, content_type, None)
            self.wfile.write(start)
            while True:
                self.wfile.write(ENDLESS_CHUNK)

        def _trickle(self, data: bytes) -> None:
            for position in range(len(data)):
                self.wfile.write(data[position : position + 1])
                self.wfile.flush()
                time.sleep(0.2)

        def _ranged(self, data: bytes, size: int) -> None:
            """Ranges of a file of `size` bytes that ends with `data` (zeros before it)."""
            wanted = self.headers.get("Range", "")
            first, _, last = wanted[6:].partition("-")
            if not wanted.startswith("bytes=") or size != len(data) and not (last and not first):
                self._headers(416 if size != len(data) else 200, "application/octet-stream", len(data))
                return self.wfile.write(data)
            if first:
                start, end = int(first), min(int(last), size - 1) if last else size - 1
            else:
                start, end = max(0, size - int(last)), size - 1
            padded = max(0, (size - len(data)) - start)
            body = bytes(min(padded, end - start + 1)) + data[max(0, start - (size - len(data))) : end + 1 - (size - len(data))]
            extra = {"Content-Range": f"bytes {start}-{end}/{size}"}
            self._headers(206, "application/octet-stream", len(body), extra)
            self.wfile.write(body)

    return Handler
