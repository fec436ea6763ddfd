"""Core metadata of a file an index offers, fetched as cheaply as the index allows.

In this order: the PEP 658 `.metadata` file when the index advertises one; else HTTP range
requests into the wheel (the zip's tail, which holds the end-of-central-directory record and
usually the whole central directory, then only the `*.dist-info/METADATA` member); else the whole
file. A host that answers a range request with the whole file is remembered and not asked again.

The range reads go through the standard library's `zipfile` over a file object backed by range
requests (`_RangeFile`): zipfile already parses ZIP64, data descriptors and checks the member's
CRC-32 when it is read to the end, so the only code here is which bytes to ask for. The tail read
and the member read are each one request (the member's compressed size is known from the central
directory before it is opened), so a wheel's metadata costs two requests whatever its size.

sdists: a `PKG-INFO` of Metadata-Version >= 2.2 whose `Requires-Dist` is not listed as dynamic is
used as it is, read from the archive (bounded, nothing extracted to disk). Any other sdist's
metadata is prepared by pip (index/builds.py) when the caller allows it, which runs its code.
"""

from __future__ import annotations

import bisect
import gzip
import hashlib
import io
import json
import os
import urllib.parse
import zipfile
import zlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO, Optional, cast

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from cudaresolve.binary.names import is_shared_object_name
from cudaresolve.binary.wheel import DirectoryTooLarge, open_zip
from cudaresolve.index.builds import prepared_metadata
from cudaresolve.index.cache import IndexCache, OfflineMiss
from cudaresolve.index.downloads import Progress, download, spend
from cudaresolve.index.http import Cap, Http, IndexAccessError, LimitExceeded, local_path
from cudaresolve.index.limits import Limits, size_text
from cudaresolve.index.pages import ProjectFile

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

# The first range read: the last 1/64 of the wheel, at least 65 KiB (the EOCD with any comment and a
# small central directory), at most 1 MiB. Range requests cost ~0.1 s of latency each on the
# registry's CDN, far more than the bytes: numpy's 17 MB wheel has a 90 KB central directory and its
# METADATA 155 KB from the end, so 65 KiB took three requests where 272 KB takes one.
TAIL_MIN, TAIL_MAX, TAIL_FRACTION = 65 * 1024, 1 << 20, 64
MEMBER_SLACK = 1024  # local header name + extra field beyond what the central directory says
WINDOW = 8 << 20  # a wheel's members read by range: fetched this much at a time (one request per 8 MiB)


@dataclass(frozen=True)
class CoreMetadata:
    """What the resolver needs from a distribution's METADATA / PKG-INFO."""

    name: str
    version: str
    metadata_version: str
    requires_dist: tuple[str, ...]
    requires_python: Optional[str]
    provides_extra: tuple[str, ...]
    how: str  # "pep658", "range", "download", "cache", "local", "build"


class MetadataUnavailable(IndexAccessError):
    """The file's metadata cannot be had without building it (an sdist with dynamic dependencies)."""


def core_metadata(
    http: Http, cache: IndexCache, file: ProjectFile, progress: Optional[Progress] = None,
    build_with: Optional[list[str]] = None,
) -> CoreMetadata:
    """The core metadata of `file`, from the cache, PEP 658, range reads or a full download; for an
    sdist whose PKG-INFO does not give its dependencies, as pip prepares it, given pip's index
    options `build_with` (None: such an sdist's metadata is unavailable).

    A cached entry that does not parse, or describes another file, is discarded and fetched again."""
    key = _cache_key(file)
    if key is not None:
        fields = _cached_fields(cache.blob("metadata", fields_key(key), http.limits.metadata_bytes))
        if fields is not None:
            try:
                return _checked(fields, file, "cache")
            except IndexAccessError:
                cache.discard("metadata", fields_key(key))
        stored = cache.blob("metadata", key, http.limits.metadata_bytes)
        if stored is not None:
            try:
                fields = _parsed(stored, file)
                parsed = _checked(fields, file, "cache")
                cache.store_blob("metadata", fields_key(key), json.dumps(fields).encode())
                return parsed
            except IndexAccessError:
                cache.discard("metadata", key)
        if cache.offline:
            raise OfflineMiss(f"--offline: the metadata of {file.filename} is not in the cache")
    try:
        raw, how = _fetch(http, cache, file, progress)
    except MetadataUnavailable:
        if file.is_wheel or build_with is None:
            raise
        raw, how = prepared_metadata(http, file, build_with, progress), "build"
    fields = _parsed(raw, file)
    parsed = _checked(fields, file, how)
    if key is not None:
        cache.store_blob("metadata", key, raw)
        cache.store_blob("metadata", fields_key(key), json.dumps(fields).encode())
    return parsed


def fields_key(key: str) -> str:
    """The cache key of the fields parsed from the METADATA cached under `key`: kept beside it, as
    JSON, so a warm lock reads them without the email parser (packaging.metadata and the email
    package were a tenth of a warm lock's imports)."""
    return "fields:" + key


_TEXT_FIELDS = ("name", "version", "metadata_version")
_OPTIONAL_FIELDS = ("requires_python",)
_LIST_FIELDS = ("requires_dist", "provides_extra")


def parse_metadata(raw: bytes, file: ProjectFile, how: str) -> CoreMetadata:
    """Parse METADATA/PKG-INFO bytes and check they describe the file they came from: an email
    message with Metadata-Version, Name and Version, of `file`'s project and version."""
    return _checked(_parsed(raw, file), file, how)


def _parsed(raw: bytes, file: ProjectFile) -> dict[str, Any]:
    """The fields CoreMetadata holds, as parsed from METADATA bytes (missing ones: "" or empty)."""
    from packaging.metadata import parse_email  # with the email package: a warm lock reads the cached fields

    fields, _ = parse_email(raw)
    if not fields.get("name") or not fields.get("version") or not fields.get("metadata_version"):
        raise IndexAccessError(f"{file.filename}: its metadata has no Metadata-Version, Name or Version")
    return {
        "name": fields["name"], "version": fields["version"], "metadata_version": fields["metadata_version"],
        "requires_python": fields.get("requires_python"),
        "requires_dist": list(fields.get("requires_dist", ())), "provides_extra": list(fields.get("provides_extra", ())),
    }


def _cached_fields(data: Optional[bytes]) -> Optional[dict[str, Any]]:
    """The fields `_parsed` stored, or None when absent or not of that shape (a damaged or planted entry)."""
    if data is None:
        return None
    try:
        fields = json.loads(data)
    except ValueError:
        return None
    if not (isinstance(fields, dict) and set(fields) == {*_TEXT_FIELDS, *_OPTIONAL_FIELDS, *_LIST_FIELDS}
            and all(isinstance(fields[name], str) and fields[name] for name in _TEXT_FIELDS)
            and all(fields[name] is None or isinstance(fields[name], str) for name in _OPTIONAL_FIELDS)
            and all(isinstance(fields[name], list) and all(isinstance(v, str) for v in fields[name]) for name in _LIST_FIELDS)):
        return None
    return fields


def _checked(fields: dict[str, Any], file: ProjectFile, how: str) -> CoreMetadata:
    """CoreMetadata of `fields`, when they describe `file`'s project and version."""
    name, version = fields["name"], fields["version"]
    try:
        same_version = Version(version) == file.version
    except InvalidVersion:
        same_version = False
    if canonicalize_name(name) != file.name or not same_version:
        raise IndexAccessError(
            f"{file.filename}: its metadata describes {name} {version}, not {file.name} {file.version}"
        )
    return CoreMetadata(
        name=name,
        version=version,
        metadata_version=fields["metadata_version"],
        requires_dist=tuple(fields["requires_dist"]),
        requires_python=fields["requires_python"],
        provides_extra=tuple(fields["provides_extra"]),
        how=how,
    )


def _cache_key(file: ProjectFile) -> Optional[str]:
    """Immutable files are cached by hash; local files are not cached (reading them is as cheap)."""
    if file.url.startswith("file:"):
        return None
    return file.sha256 or "url:" + file.url


def _fetch(http: Http, cache: IndexCache, file: ProjectFile, progress: Optional[Progress]) -> tuple[bytes, str]:
    what = f"{file.name} {file.version}"
    if file.url.startswith("file:"):
        try:
            with open(local_path(file.url), "rb") as local:
                return _from_archive(local, file, http.limits), "local"
        except OSError as exc:
            raise IndexAccessError(f"cannot read {local_path(file.url)} ({what}): {exc.strerror or exc}") from None
    if file.metadata_hashes is not None:
        reply = http.get(file.url + ".metadata", cap=Cap(http.limits.metadata_bytes, "a metadata file"), what=what)
        if reply.status == 200:
            expected = dict(file.metadata_hashes).get("sha256")
            if expected and hashlib.sha256(reply.body).hexdigest() != expected:
                raise IndexAccessError(f"{file.url}.metadata: sha256 does not match the index's {expected}")
            return reply.body, "pep658"
    if file.is_wheel:
        host = urllib.parse.urlsplit(file.url).netloc
        if not cache.refuses_ranges(host):
            ranged = _range_read(http, cache, file, host)
            if ranged is not None:
                return ranged
    with download(http, file, progress) as whole:
        return _from_archive(whole, file, http.limits), "download"


def _range_read(http: Http, cache: IndexCache, file: ProjectFile, host: str) -> Optional[tuple[bytes, str]]:
    """METADATA through range requests; None when the server does not do ranges (then remembered,
    and the caller downloads the file: a 200 answer's body is not read into memory here)."""
    ranged = _ranged(http, cache, file, host)
    if ranged is None:
        return None
    # A seekable raw binary stream: what zipfile and tarfile call of a BinaryIO, it has.
    return _from_archive(cast(BinaryIO, ranged), file, http.limits), "range"


def _ranged(http: Http, cache: IndexCache, file: ProjectFile, host: str) -> Optional["_RangeFile"]:
    """The remote file as a `_RangeFile` holding its tail; None when the server does not do ranges."""
    what = f"{file.name} {file.version}"
    tail = min(TAIL_MAX, max(TAIL_MIN, (file.size or 0) // TAIL_FRACTION))
    headers = {"Range": f"bytes=-{tail}", "Accept-Encoding": "identity"}
    reply = http.get(file.url, cap=Cap(tail, "a range read"), headers=headers, what=what)
    if reply.status == 200:
        cache.remember_refuses_ranges(host)
        return None
    if reply.status != 206:
        if reply.status in (404, 410):
            raise IndexAccessError(f"cannot read {file.url} ({what}): HTTP {reply.status}")
        return None
    size = _total_size(reply.headers.get("Content-Range"))
    if size is None or len(reply.body) > size:
        return None
    ranged = _RangeFile(http, file.url, size, what)
    ranged.add(size - len(reply.body), reply.body)
    return ranged


def ranged_wheel(http: Http, cache: IndexCache, file: ProjectFile) -> Optional[tuple[BinaryIO, float]]:
    """The remote wheel `file` as a seekable stream of range reads, with the share of its bytes its
    shared objects hold (by its zip directory). The stream fetches what is read in windows of at
    most WINDOW bytes that end where the next member begins, holding only the file's tail (its zip
    directory) and the last window, each counted against the download budget. None for a local
    file, a host that does not do ranges, or a directory that does not read (the download then
    says why). Members read through it are checked by their CRC-32, not the file by its sha256."""
    if file.url.startswith("file:") or not file.is_wheel:
        return None
    host = urllib.parse.urlsplit(file.url).netloc
    if cache.refuses_ranges(host):
        return None
    ranged = _ranged(http, cache, file, host)
    if ranged is None:
        return None
    spend(http, ranged.size - ranged.tail_start, file.filename)  # its tail, against the budget as every window
    try:
        with open_zip(cast(BinaryIO, ranged), http.limits.central_directory_bytes) as archive:
            infos = archive.infolist()
            directory = archive.start_dir
    except (DirectoryTooLarge, zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError):
        return None
    shared = sum(info.compress_size for info in infos if is_shared_object_name(os.path.basename(info.filename)))
    ranged.window, ranged.stops = WINDOW, sorted({info.header_offset for info in infos} | {directory})
    return cast(BinaryIO, ranged), shared / max(1, ranged.size)


def open_ranged(http: Http, cache: IndexCache, file: ProjectFile) -> Optional["_RangeFile"]:
    """The remote wheel as a seekable file whose reads are range requests (its tail already held);
    None when it is local or its server does not do ranges."""
    host = urllib.parse.urlsplit(file.url).netloc
    if file.url.startswith("file:") or cache.refuses_ranges(host):
        return None
    return _ranged(http, cache, file, host)


def wheel_members(http: Http, cache: IndexCache, file: ProjectFile, progress: Optional[Progress] = None) -> tuple[str, ...]:
    """The member names of the wheel `file`, from its zip directory alone: through range reads (torch's
    450 MB aarch64 wheel: its 1 MB tail, one request), else the whole file; cached by sha256. Whether
    a build is a CUDA one can be in its members alone (torch's aarch64 wheels up to 2.10 hold no
    libtorch_cuda.so)."""
    key = _cache_key(file)
    if key is not None:
        stored = cache.blob("members", key, http.limits.central_directory_bytes)
        if stored is not None:
            names = _stored_names(stored)
            if names is not None:
                return names
            cache.discard("members", key)
        if cache.offline:
            raise OfflineMiss(f"--offline: the member list of {file.filename} is not in the cache")
    names = _members(http, cache, file, progress)
    if key is not None:
        cache.store_blob("members", key, json.dumps(names).encode())
    return names


def _stored_names(stored: bytes) -> Optional[tuple[str, ...]]:
    try:
        names = json.loads(stored)
    except ValueError:
        return None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        return None
    return tuple(names)


def _members(http: Http, cache: IndexCache, file: ProjectFile, progress: Optional[Progress]) -> tuple[str, ...]:
    if not file.is_wheel:
        raise IndexAccessError(f"{file.filename}: not a wheel")
    if file.url.startswith("file:"):
        try:
            with open(local_path(file.url), "rb") as local:
                with _open_zip(local, file, http.limits) as archive:
                    return tuple(archive.namelist())
        except OSError as exc:
            raise IndexAccessError(f"cannot read {local_path(file.url)} ({file.name} {file.version}): {exc.strerror or exc}") from None
    host = urllib.parse.urlsplit(file.url).netloc
    ranged = _ranged(http, cache, file, host) if not cache.refuses_ranges(host) else None
    if ranged is not None:
        with _open_zip(cast(BinaryIO, ranged), file, http.limits) as archive:
            return tuple(archive.namelist())
    with download(http, file, progress) as whole:
        with _open_zip(whole, file, http.limits) as archive:
            return tuple(archive.namelist())


def _from_archive(stream: BinaryIO, file: ProjectFile, limits: Limits) -> bytes:
    """METADATA from a wheel, PKG-INFO from an sdist (zip or tar.gz), read from `stream`."""
    if file.is_wheel:
        return _wheel_metadata(stream, file, limits)
    if file.filename.endswith(".zip"):
        with _open_zip(stream, file, limits) as archive:
            names = [n for n in archive.namelist() if n.count("/") == 1 and n.endswith("/PKG-INFO")]
            return _static_pkg_info(_read_member(archive, names, file, limits), file)
    return _static_pkg_info(_tar_pkg_info(stream, file, limits), file)


def _tar_pkg_info(stream: BinaryIO, file: ProjectFile, limits: Limits) -> bytes:
    """The top-level PKG-INFO of a .tar.gz sdist. At most `sdist_bytes` of the uncompressed tar are
    read looking for it (a gzip bomb stops there), and no single read, a member or a pax header,
    may be larger than `metadata_bytes` (tarfile would hold it whole)."""
    import tarfile  # sdists only

    try:
        with gzip.GzipFile(fileobj=stream) as unzipped:
            bounded = _BoundedReads(unzipped, limits.sdist_bytes, limits.metadata_bytes)
            with tarfile.open(fileobj=bounded, mode="r:") as archive:
                for member in archive:
                    if member.name.count("/") == 1 and member.name.endswith("/PKG-INFO") and member.isfile():
                        extracted = archive.extractfile(member)
                        assert extracted is not None
                        return extracted.read()
    except _TooLarge as exc:
        raise LimitExceeded(f"{file.url}: {exc}") from None
    except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
        raise IndexAccessError(f"{file.filename}: not a readable sdist ({exc})") from None
    raise MetadataUnavailable(f"{file.filename}: no PKG-INFO at the top of the sdist")


class _TooLarge(Exception):
    pass


class _BoundedReads(io.RawIOBase):
    """A seekable read-only view of `source` that ends at `total` bytes and refuses a read of more than `each`."""

    def __init__(self, source: io.BufferedIOBase, total: int, each: int) -> None:
        super().__init__()
        self._source, self._total, self._each = source, total, each

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._source.tell()

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        position = self._source.seek(offset, whence)
        self._within(position)
        return position

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0 or n > self._each:
            raise _TooLarge(f"a tar member or header larger than {size_text(self._each)}, the limit for a metadata file")
        data = self._source.read(n)
        self._within(self._source.tell())
        return data

    def readinto(self, buffer: WriteableBuffer) -> int:
        view = memoryview(buffer)
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)

    def _within(self, position: int) -> None:
        if position > self._total:
            raise _TooLarge(f"no PKG-INFO in the first {size_text(self._total)} of the uncompressed sdist, the limit for an sdist")


def _wheel_metadata(stream: BinaryIO, file: ProjectFile, limits: Limits) -> bytes:
    with _open_zip(stream, file, limits) as archive:
        names = [n for n in archive.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
        if len(names) == 1:
            info = _bounded_member(archive, names[0], file, limits)
            if isinstance(stream, _RangeFile):
                stream.prefetch(info.header_offset, 30 + len(info.filename) + MEMBER_SLACK + info.compress_size)
        return _read_member(archive, names, file, limits)


def _open_zip(stream: BinaryIO, file: ProjectFile, limits: Limits) -> zipfile.ZipFile:
    try:
        return open_zip(stream, limits.central_directory_bytes)
    except DirectoryTooLarge:
        raise LimitExceeded(
            f"{file.url}: its zip directory is larger than {size_text(limits.central_directory_bytes)}, the limit for a wheel's directory"
        ) from None
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError) as exc:
        raise IndexAccessError(f"{file.url}: not a readable zip ({exc})") from None


def _bounded_member(archive: zipfile.ZipFile, name: str, file: ProjectFile, limits: Limits) -> zipfile.ZipInfo:
    """The member's entry, refused when it claims more than a metadata file may have."""
    info = archive.getinfo(name)
    claimed = max(info.file_size, info.compress_size)
    if claimed > limits.metadata_bytes:
        raise LimitExceeded(f"{file.url}: {name} claims {claimed:,} bytes, over {_metadata_cap(limits).text()}")
    return info


def _read_member(archive: zipfile.ZipFile, names: list[str], file: ProjectFile, limits: Limits) -> bytes:
    if len(names) != 1:
        found = "none" if not names else ", ".join(names)
        raise IndexAccessError(f"{file.url}: expected one top-level metadata file, found {found}")
    info = _bounded_member(archive, names[0], file, limits)
    try:
        with archive.open(info) as member:
            data = member.read(limits.metadata_bytes + 1)
            if len(data) > limits.metadata_bytes:  # zipfile stops at the stated size; never trust that alone
                raise LimitExceeded(f"{file.url}: {names[0]} inflates past {_metadata_cap(limits).text()}")
            return data  # read to its end, where zipfile checks the CRC-32
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError, zlib.error) as exc:
        raise IndexAccessError(f"{file.url}: {names[0]} is damaged ({exc})") from None


def _metadata_cap(limits: Limits) -> Cap:
    return Cap(limits.metadata_bytes, "a metadata file")


def _static_pkg_info(raw: bytes, file: ProjectFile) -> bytes:
    """PKG-INFO only when its dependencies are static (Metadata 2.2+, Requires-Dist not dynamic)."""
    from packaging.metadata import parse_email  # with the email package: a warm lock reads cached metadata

    fields, _ = parse_email(raw)
    version = fields.get("metadata_version", "0")
    dynamic = {d.lower() for d in fields.get("dynamic", ())}
    try:
        recent = Version(version) >= Version("2.2")
    except InvalidVersion:
        recent = False
    if not recent or "requires-dist" in dynamic:
        why = f"Metadata-Version {version}" if not recent else "Requires-Dist is dynamic"
        raise MetadataUnavailable(
            f"{file.filename}: the sdist's dependencies are not static ({why}); only a build gives them"
        )
    return raw


def _total_size(content_range: Optional[str]) -> Optional[int]:
    """The total of `bytes a-b/total`; None when the server did not say."""
    if not content_range or "/" not in content_range:
        return None
    total = content_range.rsplit("/", 1)[1].strip()
    return int(total) if total.isdigit() else None


class _RangeFile(io.RawIOBase):
    """A read-only, seekable view of a remote file: regions already fetched are served from memory,
    anything else is one range request for exactly what is missing."""

    def __init__(self, http: Http, url: str, size: int, what: str) -> None:
        super().__init__()
        self._http, self._url, self._size, self._what = http, url, size, what
        self._regions: list[tuple[int, bytes]] = []  # (start, data), non-overlapping in practice
        self._position = 0
        self.window = 0  # 0: fetch exactly what is missing; else up to this much, keeping only the first region and the last window
        self.stops: list[int] = []  # where a window ends at the latest (the members' starts), sorted
        self._spans: list[tuple[int, int]] = []  # `in_spans`
        self._fixed = 0  # the regions `in_spans` keeps

    def add(self, start: int, data: bytes) -> None:
        self._regions.append((start, data))

    def prefetch(self, start: int, length: int) -> None:
        end = min(self._size, start + length)
        if self._find(start, end - start) is None:
            self._fetch(start, end)

    def in_spans(self, spans: list[tuple[int, int]]) -> None:
        """Read what falls in one of `spans` (start, length: a zip member with its local header) by
        fetching the whole span in one request, dropping the span fetched before: the regions held
        are the first ones (the tail) and one span."""
        self._spans, self._fixed = sorted(spans), len(self._regions)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._size}[whence]
        self._position = max(0, base + offset)
        return self._position

    def read(self, n: int = -1) -> bytes:
        end = self._size if n is None or n < 0 else min(self._size, self._position + n)
        if end <= self._position:
            return b""
        data = self._find(self._position, end - self._position)
        if data is None:
            span = next(((start, min(self._size, start + length)) for start, length in self._spans
                         if start <= self._position and end <= start + length), None)
            if span is not None:
                del self._regions[self._fixed:]
                self._fetch(*span)
            else:
                fetched = max(end, min(self._size, self._position + self.window, self._stop_after(self._position)))
                if self.window:
                    del self._regions[1:]  # the tail (the zip directory) stays, the windows read before go
                    spend(self._http, fetched - self._position, self._what)
                self._fetch(self._position, fetched)
            data = self._find(self._position, end - self._position)
            assert data is not None
        self._position = end
        return data

    def readinto(self, buffer: WriteableBuffer) -> int:
        view = memoryview(buffer)
        data = self.read(len(view))
        view[: len(data)] = data
        return len(data)

    @property
    def size(self) -> int:
        return self._size

    @property
    def tail_start(self) -> int:
        """Where the first region added (the file's tail) begins."""
        return self._regions[0][0]

    def _stop_after(self, position: int) -> int:
        """The first stop after `position` (the file's end when none)."""
        at = bisect.bisect_right(self.stops, position)
        return self.stops[at] if at < len(self.stops) else self._size

    def _find(self, start: int, length: int) -> Optional[bytes]:
        for region_start, data in self._regions:
            if region_start <= start and start + length <= region_start + len(data):
                return data[start - region_start : start - region_start + length]
        return None

    def _fetch(self, start: int, end: int) -> None:
        reply = self._http.get(
            self._url,
            cap=Cap(end - start, "a range read"),
            headers={"Range": f"bytes={start}-{end - 1}", "Accept-Encoding": "identity"},
            what=self._what,
        )
        if reply.status != 206 or len(reply.body) != end - start:
            raise IndexAccessError(
                f"cannot read bytes {start}-{end - 1} of {self._url} ({self._what}): HTTP {reply.status}, {len(reply.body)} bytes"
            )
        self._regions.append((start, reply.body))
