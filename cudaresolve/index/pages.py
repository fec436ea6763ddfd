"""Project pages: the files one index offers for one project.

Read as PEP 691 JSON when the index speaks it, else as PEP 503 HTML (pip's order of preference), from
`https://`, trusted `http://` and `file://` indexes, and from find-links locations (a directory or an
HTML page of links). Each file keeps what pip uses to choose it: hashes, `requires-python`, PEP 592
yanked status, PEP 658/714 metadata availability. Files whose names are not valid wheel or sdist
names for the project are left out, as pip leaves them out.
"""

from __future__ import annotations

import html
import json
import os
import pathlib
import re
import time
import urllib.parse
from dataclasses import dataclass, replace
from html.parser import HTMLParser
from typing import Any, Optional

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    NormalizedName,
    canonicalize_name,
    parse_sdist_filename,
)
from packaging.version import InvalidVersion, Version

from cudaresolve.index.cache import CachedPage, IndexCache, OfflineMiss, freshness, storable
from cudaresolve.index.http import Cap, Http, IndexAccessError, LimitExceeded, local_path
from cudaresolve.index.limits import DEFAULT, Limits

_SHA256 = re.compile(r"[0-9a-f]{64}")
_HEX = re.compile(r"[0-9a-f]+")
ACCEPT = (
    "application/vnd.pypi.simple.v1+json, "
    "application/vnd.pypi.simple.v1+html; q=0.1, "
    "text/html; q=0.01"
)
JSON_TYPE = "application/vnd.pypi.simple.v1+json"


@dataclass(frozen=True)
class ProjectFile:
    """One file an index offers for a project."""

    filename: str
    url: str  # absolute, without the hash fragment
    name: NormalizedName
    version: Version
    hashes: tuple[tuple[str, str], ...]  # (algorithm, hex digest), sorted
    requires_python: Optional[str]
    yanked: Optional[str]  # None: not yanked; "" yanked without a reason; else the reason
    metadata_hashes: Optional[tuple[tuple[str, str], ...]]  # None: no PEP 658 file; () one without hashes
    size: Optional[int]
    source: str  # the index or find-links location it was listed by

    @property
    def is_wheel(self) -> bool:
        return self.filename.endswith(".whl")

    @property
    def sha256(self) -> Optional[str]:
        return dict(self.hashes).get("sha256")


def project_url(index_url: str, name: str) -> str:
    """PEP 503: the project's page is the index URL joined with the normalized name and a slash."""
    return index_url.rstrip("/") + "/" + canonicalize_name(name) + "/"


def index_files(http: Http, cache: IndexCache, index_url: str, name: str) -> tuple[ProjectFile, ...]:
    """The files `index_url` offers for `name`; none when the index has no such project (404)."""
    files = _page_files(http, cache, project_url(index_url, name), name, index_url)
    return () if files is None else files


def find_links_files(http: Http, cache: IndexCache, location: str, name: str) -> tuple[ProjectFile, ...]:
    """The files of `name` at a find-links location: a local directory (or file:// one), or a page of links."""
    try:
        path = _local_path(location)
    except ValueError as exc:
        raise IndexAccessError(f"find-links location {location!r} is not a valid URL ({exc})") from None
    if path is not None and os.path.isdir(path):
        found = []
        for entry in sorted(os.listdir(path)):
            full = os.path.join(path, entry)
            if os.path.isfile(full):
                made = _project_file(entry, _file_url(full), {}, None, None, None, os.path.getsize(full), name=name, source=location)
                if made is not None:
                    found.append(made)
        return tuple(found)
    url = location if path is None else _file_url(path)
    files = _page_files(http, cache, url, name, location)
    if files is None:
        raise IndexAccessError(f"find-links location {location} does not exist")
    return files


def file_from_url(url: str) -> ProjectFile:
    """A wheel or sdist named by URL alone (its `#sha256=` fragment, when present, is its hash)."""
    address, _, fragment = url.partition("#")
    filename = urllib.parse.unquote(address.rsplit("/", 1)[-1])
    hashes = _fragment_hashes(fragment)
    try:
        name = parse_sdist_filename(filename)[0] if not filename.endswith(".whl") else _wheel_name_version(filename)[0]
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        raise IndexAccessError(f"{url}: not a wheel or sdist file name") from None
    made = _project_file(filename, address, hashes, None, None, None, None, name=name, source=address)
    assert made is not None
    return made


def parse_page(
    body: bytes, content_type: str, base_url: str, name: str, *, source: str, limits: Limits = DEFAULT
) -> tuple[ProjectFile, ...]:
    """The files of `name` on a PEP 691 JSON or PEP 503 HTML page served from `base_url`.

    Within `limits` (page_items, page_tag_bytes, page_files), checked before and while parsing, so
    that a page crafted to cost many times its size in memory stops with LimitExceeded. A remote
    page may only link http(s) files: a file:// or other link on it is refused."""
    mime = content_type.split(";")[0].strip().lower()
    if mime == JSON_TYPE:
        entries = _json_entries(body, base_url, name, limits)
    elif mime in ("text/html", "application/vnd.pypi.simple.v1+html", ""):
        entries = _html_entries(body, base_url, name, limits)
    else:
        raise IndexAccessError(f"{base_url} ({name}): unexpected content type {content_type!r} for a project page")
    remote = _scheme(base_url) in ("http", "https")
    found = []
    for entry in entries:
        made = _project_file(*entry, name=name, source=source)
        if made is None:
            continue
        if remote and _scheme(made.url) not in ("http", "https"):
            raise IndexAccessError(f"{base_url} ({name}): refusing its link to {made.url}: a remote page may only link http(s):// files")
        found.append(made)
        if len(found) > limits.page_files:
            raise LimitExceeded(f"{base_url} ({name}): more than {limits.page_files:,} files of {name}, the limit for one page")
    return tuple(found)


def _page_files(http: Http, cache: IndexCache, url: str, name: str, source: str) -> Optional[tuple[ProjectFile, ...]]:
    """The files of `name` on the page at `url`, from the cache while fresh, revalidated after; None
    on 404 (kept like a page: an index without the project is not asked again while that is fresh).
    A cached page that no longer parses is discarded and fetched afresh, without its ETag. A
    response marked no-store is not kept.

    Local pages are read every time: the disk is as fast as the cache and always current.
    """
    now = time.time()
    page_cap = Cap(http.limits.page_bytes, "a project page")
    if url.startswith("file:"):
        reply = http.get(url, cap=page_cap, what=name)
        if reply.status == 404:
            return None
        return parse_page(reply.body, _file_content_type(reply.url, reply.body), reply.url, name, source=source, limits=http.limits)
    cached = cache.page(url)
    cached_files: tuple[ProjectFile, ...] = ()
    if cached is not None and not cached.missing:
        try:
            cached_files = parse_page(cached.body, cached.content_type, cached.final_url, name, source=source, limits=http.limits)
        except IndexAccessError:
            cache.discard_page(url)
            cached = None
    if cached is not None and (cache.offline or cached.fresh(now)):
        return None if cached.missing else cached_files
    if cache.offline:
        raise OfflineMiss(f"--offline: the page {url} ({name}) is not in the cache")
    headers = {"Accept": ACCEPT}
    if cached is not None and not cached.missing:
        if cached.etag:
            headers["If-None-Match"] = cached.etag
        if cached.last_modified:
            headers["If-Modified-Since"] = cached.last_modified
    reply = http.get(url, cap=page_cap, headers=headers, what=name)
    lifetime = freshness(reply.headers)
    kept = storable(reply.headers)
    if reply.status == 304 and cached is not None and not cached.missing:
        if kept:  # a 304 without caching headers leaves the stored ones in force
            cache.store_page(replace(cached, fetched=now, max_age=cached.max_age if lifetime is None else lifetime))
        return cached_files
    if reply.status == 404:
        if kept:
            cache.store_page(CachedPage(url, reply.url, "", b"", None, None, now, lifetime, missing=True))
        return None
    if reply.status != 200:
        raise IndexAccessError(f"cannot read {url} ({name}): HTTP {reply.status}")
    page = CachedPage(
        url,
        reply.url,
        reply.headers.get("Content-Type", ""),
        reply.body,
        reply.headers.get("ETag"),
        reply.headers.get("Last-Modified"),
        now,
        lifetime,
    )
    files = parse_page(page.body, page.content_type, page.final_url, name, source=source, limits=http.limits)
    if kept:
        cache.store_page(page)  # only a page that parsed
    return files


# (filename, absolute URL without fragment, hashes, requires-python, yanked, metadata hashes, size)
_Entry = tuple[str, str, dict[str, Any], Optional[str], Optional[str], Optional[dict[str, Any]], Optional[int]]


def _json_entries(body: bytes, base_url: str, name: str, limits: Limits) -> list[_Entry]:
    values = body.count(b"{") + body.count(b"[") + body.count(b",")
    if values > limits.page_items:
        raise LimitExceeded(f"{base_url} ({name}): about {values:,} JSON values, over the limit of {limits.page_items:,} for one page")
    try:
        document = json.loads(body)
        entries = document["files"]
        if not isinstance(entries, list):
            raise TypeError("files is not a list")
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise IndexAccessError(f"{base_url} ({name}): not a PEP 691 project page ({exc})") from None
    found: list[_Entry] = []
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("url"), str) or not isinstance(entry.get("filename"), str):
            continue
        try:
            url = urllib.parse.urljoin(base_url, entry["url"]).partition("#")[0]
        except ValueError:
            continue  # not a URL (a broken IPv6 literal): no file pip could fetch either
        yanked = entry.get("yanked", False)
        metadata = entry.get("core-metadata", entry.get("dist-info-metadata", False))
        size = entry.get("size")
        requires_python = entry.get("requires-python")
        found.append((
            entry["filename"],
            url,
            entry["hashes"] if isinstance(entry.get("hashes"), dict) else {},
            requires_python if isinstance(requires_python, str) and requires_python else None,
            (yanked if isinstance(yanked, str) else "") if yanked else None,
            (metadata if isinstance(metadata, dict) else {}) if metadata else None,
            size if type(size) is int and size >= 0 else None,
        ))
    return found


# The attributes of an anchor that say something about its file (PEP 503, 592, 658, 714).
_ANCHOR_ATTRIBUTES = frozenset({"href", "data-requires-python", "data-yanked", "data-core-metadata", "data-dist-info-metadata"})


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.base: Optional[str] = None
        self.anchors: list[dict[str, Optional[str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, Optional[str]]]) -> None:
        if tag == "base" and self.base is None:
            self.base = dict(attrs).get("href")
        elif tag == "a":
            self.anchors.append({key: value for key, value in attrs if key in _ANCHOR_ATTRIBUTES})


def _html_entries(body: bytes, base_url: str, name: str, limits: Limits) -> list[_Entry]:
    _check_tags(body, base_url, name, limits)
    parser = _Anchors()
    parser.feed(body.decode("utf-8", "replace"))
    parser.close()
    try:
        base = urllib.parse.urljoin(base_url, parser.base) if parser.base else base_url
    except ValueError:
        base = base_url
    found: list[_Entry] = []
    for anchor in parser.anchors:
        href = anchor.get("href")
        if not href:
            continue
        try:
            url, _, fragment = urllib.parse.urljoin(base, href).partition("#")
        except ValueError:
            continue  # not a URL (a broken IPv6 literal): no file pip could fetch either
        filename = urllib.parse.unquote(url.rsplit("/", 1)[-1])
        metadata_attr = anchor.get("data-core-metadata", anchor.get("data-dist-info-metadata"))
        metadata: Optional[dict[str, Any]] = None
        if metadata_attr is not None and metadata_attr != "false":
            metadata = dict([metadata_attr.split("=", 1)]) if "=" in metadata_attr else {}
        requires_python = anchor.get("data-requires-python")
        found.append((
            filename,
            url,
            _fragment_hashes(fragment),
            html.unescape(requires_python) if requires_python else None,
            anchor.get("data-yanked"),
            metadata,
            None,
        ))
    return found


def _check_tags(body: bytes, base_url: str, name: str, limits: Limits) -> None:
    """Refuse an HTML page of more tags, or a longer tag, than `limits` allow, before parsing it:
    HTMLParser holds every attribute of a tag at once, and each anchor is kept until the end."""
    tags = body.count(b"<")
    if tags > limits.page_items:
        raise LimitExceeded(f"{base_url} ({name}): about {tags:,} HTML tags, over the limit of {limits.page_items:,} for one page")
    start = body.find(b"<")
    while start != -1:
        end = body.find(b">", start)
        if (len(body) if end == -1 else end) - start > limits.page_tag_bytes:
            raise LimitExceeded(f"{base_url} ({name}): an HTML tag longer than the limit of {limits.page_tag_bytes:,} bytes")
        start = -1 if end == -1 else body.find(b"<", end)


def _project_file(
    filename: str,
    url: str,
    hashes: dict[str, Any],
    requires_python: Optional[str],
    yanked: Optional[str],
    metadata: Optional[dict[str, Any]],
    size: Optional[int],
    *,
    name: str,
    source: str,
) -> Optional[ProjectFile]:
    """A ProjectFile when `filename` is a valid wheel or sdist name of project `name`, else None.

    Hashes are hex digests: a sha256 (of the file or its metadata) that is not 64 hex digits is
    refused, since it would otherwise travel into a lock and a pip command line."""
    try:
        if filename.endswith(".whl"):
            parsed_name, version = _wheel_name_version(filename)
        elif filename.endswith((".tar.gz", ".zip")):
            parsed_name, version = parse_sdist_filename(filename)
        else:
            return None
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None
    if parsed_name != canonicalize_name(name):
        return None
    if any(c.isspace() or not c.isprintable() for c in url):
        raise IndexAccessError(f"{source} ({name}): the URL of {filename} holds white space or control characters: {url!r}")
    return ProjectFile(
        filename=filename,
        url=url,
        name=parsed_name,
        version=version,
        hashes=_digests(hashes, url),
        requires_python=requires_python,
        yanked=yanked,
        metadata_hashes=None if metadata is None else _digests(metadata, url + ".metadata"),
        size=size,
        source=source,
    )


def _digests(hashes: dict[str, Any], url: str) -> tuple[tuple[str, str], ...]:
    """(algorithm, hex digest) pairs, sorted. Entries that are not hex digests are left out (no
    algorithm pip knows has another form); a sha256 that is not 64 hex digits is refused."""
    found = {}
    for algorithm, digest in hashes.items():
        algorithm, digest = str(algorithm).lower(), str(digest).lower()
        if algorithm == "sha256" and not _SHA256.fullmatch(digest):
            raise IndexAccessError(f"{url}: its sha256 {digest[:80]!r} is not 64 hex digits")
        if algorithm.isidentifier() and _HEX.fullmatch(digest):
            found[algorithm] = digest
    return tuple(sorted(found.items()))


def _fragment_hashes(fragment: str) -> dict[str, str]:
    """`sha256=...` pairs of a URL fragment, separated by `&` as pip reads them."""
    return dict(part.split("=", 1) for part in fragment.split("&") if "=" in part)


def _wheel_name_version(filename: str) -> tuple[NormalizedName, Version]:
    """Name and version of a wheel file name; its tags are parsed only for the files a caller
    considers (`access.wheel_tags`): a page of thousands of wheels costs a tenth as much this way."""
    parts = filename[: -len(".whl")].split("-")
    if len(parts) not in (5, 6) or not parts[0] or "__" in parts[0]:
        raise InvalidWheelFilename(f"invalid wheel filename: {filename!r}")
    return canonicalize_name(parts[0]), Version(parts[1])


def _local_path(location: str) -> Optional[str]:
    """The file system path of a file:// URL or a plain path; None for a remote URL."""
    scheme = urllib.parse.urlsplit(location).scheme
    if scheme == "file":
        return local_path(location)
    if scheme in ("http", "https"):
        return None
    return os.path.abspath(os.path.expanduser(location))


def _scheme(url: str) -> str:
    return url.partition(":")[0].lower() if ":" in url else ""


def _file_url(path: str) -> str:
    """The file: URL of `path`, as pathlib writes it (urllib.request would bring http.client and ssl)."""
    return pathlib.Path(os.path.abspath(path)).as_uri()


def _file_content_type(url: str, body: bytes) -> str:
    """A local page has no headers: JSON if it parses as a PEP 691 document, else HTML."""
    if url.endswith(".json") or body.lstrip()[:1] == b"{":
        return JSON_TYPE
    return "text/html"
