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
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Optional

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    NormalizedName,
    canonicalize_name,
    parse_sdist_filename,
)
from packaging.version import InvalidVersion, Version

from cudaresolve.index.cache import CachedPage, IndexCache, OfflineMiss
from cudaresolve.index.http import Http, IndexAccessError, local_path

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
    url = project_url(index_url, name)
    page = _fetch_page(http, cache, url, name)
    if page is None:
        return ()
    return parse_page(page.body, page.content_type, page.final_url, name, source=index_url)


def find_links_files(http: Http, cache: IndexCache, location: str, name: str) -> tuple[ProjectFile, ...]:
    """The files of `name` at a find-links location: a local directory (or file:// one), or a page of links."""
    path = _local_path(location)
    if path is not None and os.path.isdir(path):
        found = []
        for entry in sorted(os.listdir(path)):
            full = os.path.join(path, entry)
            if os.path.isfile(full):
                made = _project_file(entry, _file_url(full), name, location, {}, None, None, None, os.path.getsize(full))
                if made is not None:
                    found.append(made)
        return tuple(found)
    url = location if path is None else _file_url(path)
    page = _fetch_page(http, cache, url, name)
    if page is None:
        raise IndexAccessError(f"find-links location {location} does not exist")
    return parse_page(page.body, page.content_type, page.final_url, name, source=location)


def file_from_url(url: str) -> ProjectFile:
    """A wheel or sdist named by URL alone (its `#sha256=` fragment, when present, is its hash)."""
    address, _, fragment = url.partition("#")
    filename = urllib.parse.unquote(address.rsplit("/", 1)[-1])
    hashes = dict([fragment.split("=", 1)]) if "=" in fragment else {}
    try:
        name = parse_sdist_filename(filename)[0] if not filename.endswith(".whl") else _wheel_name_version(filename)[0]
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        raise IndexAccessError(f"{url}: not a wheel or sdist file name") from None
    made = _project_file(filename, address, name, address, hashes, None, None, None, None)
    assert made is not None
    return made


def parse_page(body: bytes, content_type: str, base_url: str, name: str, *, source: str) -> tuple[ProjectFile, ...]:
    """The files of `name` on a PEP 691 JSON or PEP 503 HTML page served from `base_url`."""
    mime = content_type.split(";")[0].strip().lower()
    if mime == JSON_TYPE:
        return _parse_json(body, base_url, name, source)
    if mime in ("text/html", "application/vnd.pypi.simple.v1+html", ""):
        return _parse_html(body, base_url, name, source)
    raise IndexAccessError(f"{base_url} ({name}): unexpected content type {content_type!r} for a project page")


def _fetch_page(http: Http, cache: IndexCache, url: str, name: str) -> Optional[CachedPage]:
    """The page at `url`, from the cache while fresh, revalidated after; None on 404.

    Local pages are read every time: the disk is as fast as the cache and always current.
    """
    now = time.time()
    if url.startswith("file:"):
        reply = http.get(url, what=name)
        if reply.status == 404:
            return None
        return CachedPage(url, reply.url, _file_content_type(reply.url, reply.body), reply.body, None, None, now)
    cached = cache.page(url)
    if cached is not None and (cache.offline or cached.fresh(now)):
        return cached
    if cache.offline:
        raise OfflineMiss(f"--offline: the page {url} ({name}) is not in the cache")
    headers = {"Accept": ACCEPT}
    if cached is not None:
        if cached.etag:
            headers["If-None-Match"] = cached.etag
        if cached.last_modified:
            headers["If-Modified-Since"] = cached.last_modified
    reply = http.get(url, headers=headers, what=name)
    if reply.status == 304 and cached is not None:
        page = CachedPage(cached.url, cached.final_url, cached.content_type, cached.body, cached.etag, cached.last_modified, now)
    elif reply.status == 404:
        return None
    elif reply.status != 200:
        raise IndexAccessError(f"cannot read {url} ({name}): HTTP {reply.status}")
    else:
        page = CachedPage(
            url,
            reply.url,
            reply.headers.get("Content-Type", ""),
            reply.body,
            reply.headers.get("ETag"),
            reply.headers.get("Last-Modified"),
            now,
        )
    cache.store_page(page)
    return page


def _parse_json(body: bytes, base_url: str, name: str, source: str) -> tuple[ProjectFile, ...]:
    try:
        document = json.loads(body)
        entries = document["files"]
        if not isinstance(entries, list):
            raise TypeError("files is not a list")
    except (ValueError, KeyError, TypeError) as exc:
        raise IndexAccessError(f"{base_url} ({name}): not a PEP 691 project page ({exc})") from None
    found = []
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("url"), str):
            continue
        yanked = entry.get("yanked", False)
        metadata = entry.get("core-metadata", entry.get("dist-info-metadata", False))
        made = _project_file(
            str(entry.get("filename", "")),
            urllib.parse.urljoin(base_url, entry["url"]),
            name,
            source,
            entry.get("hashes") if isinstance(entry.get("hashes"), dict) else {},
            entry.get("requires-python") or None,
            (yanked if isinstance(yanked, str) else "") if yanked else None,
            (metadata if isinstance(metadata, dict) else {}) if metadata else None,
            entry.get("size") if isinstance(entry.get("size"), int) else None,
        )
        if made is not None:
            found.append(made)
    return tuple(found)


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.base: Optional[str] = None
        self.anchors: list[dict[str, Optional[str]]] = []

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag == "base" and self.base is None:
            self.base = dict(attrs).get("href")
        elif tag == "a":
            self.anchors.append(dict(attrs))


def _parse_html(body: bytes, base_url: str, name: str, source: str) -> tuple[ProjectFile, ...]:
    parser = _Anchors()
    parser.feed(body.decode("utf-8", "replace"))
    base = urllib.parse.urljoin(base_url, parser.base) if parser.base else base_url
    found = []
    for anchor in parser.anchors:
        href = anchor.get("href")
        if not href:
            continue
        url, _, fragment = urllib.parse.urljoin(base, href).partition("#")
        filename = urllib.parse.unquote(url.rsplit("/", 1)[-1])
        hashes = dict([fragment.split("=", 1)]) if "=" in fragment else {}
        metadata_attr = anchor.get("data-core-metadata", anchor.get("data-dist-info-metadata"))
        metadata: Optional[dict] = None
        if metadata_attr is not None and metadata_attr != "false":
            metadata = dict([metadata_attr.split("=", 1)]) if "=" in metadata_attr else {}
        yanked = anchor.get("data-yanked")
        made = _project_file(
            filename,
            url,
            name,
            source,
            hashes,
            html.unescape(anchor["data-requires-python"]) if anchor.get("data-requires-python") else None,
            yanked if yanked is not None else None,
            metadata,
            None,
        )
        if made is not None:
            found.append(made)
    return tuple(found)


def _project_file(
    filename: str,
    url: str,
    name: str,
    source: str,
    hashes: dict,
    requires_python: Optional[str],
    yanked: Optional[str],
    metadata: Optional[dict],
    size: Optional[int],
) -> Optional[ProjectFile]:
    """A ProjectFile when `filename` is a valid wheel or sdist name of project `name`, else None."""
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
    return ProjectFile(
        filename=filename,
        url=url,
        name=parsed_name,
        version=version,
        hashes=tuple(sorted((str(k).lower(), str(v).lower()) for k, v in hashes.items())),
        requires_python=requires_python,
        yanked=yanked,
        metadata_hashes=None if metadata is None else tuple(sorted((str(k).lower(), str(v).lower()) for k, v in metadata.items())),
        size=size,
        source=source,
    )


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


def _file_url(path: str) -> str:
    return urllib.parse.urljoin("file:", urllib.request.pathname2url(os.path.abspath(path)))


def _file_content_type(url: str, body: bytes) -> str:
    """A local page has no headers: JSON if it parses as a PEP 691 document, else HTML."""
    if url.endswith(".json") or body.lstrip()[:1] == b"{":
        return JSON_TYPE
    return "text/html"
