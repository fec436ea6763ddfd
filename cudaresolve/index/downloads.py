"""Whole files from an index: downloaded to a temporary file, checked against the index's sha256.

Only what cannot be read any other way is downloaded (a wheel whose metadata a server will not
serve by range, a wheel whose binary facts no table knows, an sdist's PKG-INFO, a file whose index
published no sha256 for the lock). The size is announced before the first byte; nothing from the
file is used until its hash has matched. A download may bring the size the index states plus a
margin, else a hard cap (index/limits.py): a server that streams without end is cut off there, and
the bytes only ever go to a temporary file.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from typing import BinaryIO, Callable, Optional

from cudaresolve.index.cache import IndexCache, OfflineMiss
from cudaresolve.index.http import Cap, Http, IndexAccessError, local_path
from cudaresolve.index.limits import size_text
from cudaresolve.index.pages import ProjectFile

Progress = Callable[[str, int, Optional[int]], None]  # (filename, bytes done, total or None)


class DownloadBudgetSpent(IndexAccessError):
    """A download would take the command past its download budget (index/limits.py)."""


def download(http: Http, file: ProjectFile, progress: Optional[Progress] = None) -> BinaryIO:
    """The file's bytes in a temporary file (deleted on close), positioned at 0, hash checked; within
    what is left of the command's download budget."""
    cap = _within_budget(http, file, download_cap(http, file))
    sink = tempfile.TemporaryFile()
    digest = hashlib.sha256()

    class _Hashing:
        def write(self, chunk: bytes) -> None:
            digest.update(chunk)
            sink.write(chunk)

    report = (lambda done, total: progress(file.filename, done, total)) if progress else None
    try:
        received = http.download(file.url, _Hashing(), cap=cap, what=f"{file.name} {file.version}", progress=report)
        http.count_download(received)
        check_sha256(file, digest.hexdigest())
    except BaseException:
        sink.close()
        raise
    sink.seek(0)
    return sink


def file_sha256(http: Http, cache: IndexCache, file: ProjectFile, progress: Optional[Progress] = None) -> str:
    """The sha256 of `file`: the one its index published, else computed from the file (read from
    disk, or downloaded once and cached by URL, as pip's hash-checking mode and a PEP 751 lock
    need one for every file; a find-links page often lists none)."""
    if file.sha256:
        return file.sha256
    digest = hashlib.sha256()
    if file.url.startswith("file:"):
        try:
            with open(local_path(file.url), "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    digest.update(chunk)
        except OSError as exc:
            raise IndexAccessError(f"cannot read {local_path(file.url)} ({file.name} {file.version}): {exc.strerror or exc}") from None
        return digest.hexdigest()
    key = "url:" + file.url
    stored = cache.blob("sha256", key, 64)
    if stored is not None and re.fullmatch(rb"[0-9a-f]{64}", stored):
        return stored.decode()
    if cache.offline:
        raise OfflineMiss(f"--offline: the sha256 of {file.filename} is not in the cache (its index publishes none)")
    with download(http, file, progress) as whole:
        for chunk in iter(lambda: whole.read(1 << 20), b""):
            digest.update(chunk)
    cache.store_blob("sha256", key, digest.hexdigest().encode())
    return digest.hexdigest()


def spend(http: Http, count: int, what: str) -> None:
    """Count `count` bytes about to be read by range (`what`: the file) against the download budget;
    DownloadBudgetSpent when they do not fit in what is left."""
    budget = http.limits.download_budget
    if http.downloaded + count > budget:
        raise DownloadBudgetSpent(
            f"{what}: {size_text(count)} more does not fit in what is left of the download budget: "
            f"{_amount(http.downloaded)} of {size_text(budget)} downloaded already; --download-budget raises it"
        )
    http.count_download(count)


def _within_budget(http: Http, file: ProjectFile, cap: Cap) -> Cap:
    """`cap`, lowered to what is left of the download budget; DownloadBudgetSpent when the file's
    stated size does not fit in it, or nothing is left."""
    budget = http.limits.download_budget
    left = budget - http.downloaded
    if left <= 0 or (file.size is not None and file.size > left):
        size = "" if file.size is None else f" ({size_text(file.size)})"
        raise DownloadBudgetSpent(
            f"{file.filename}{size} does not fit in what is left of the download budget: "
            f"{_amount(http.downloaded)} of {size_text(budget)} downloaded already; --download-budget raises it"
        )
    return cap if cap.bytes <= left else Cap(left, f"what is left of the download budget of {size_text(budget)}")


def _amount(count: int) -> str:
    """Bytes downloaded, as a person reads them: 7.3 GB, 512 MB, 20 kB."""
    for unit, name in ((10**9, "GB"), (10**6, "MB"), (10**3, "kB")):
        if count >= unit:
            return f"{count / unit:.1f} {name}"
    return f"{count} bytes"


def download_cap(http: Http, file: ProjectFile) -> Cap:
    """How much a download of `file` may bring: what its index states plus the margin, else the hard cap."""
    limits = http.limits
    if file.size is None:
        return Cap(limits.download_cap(None), "a file of unstated size")
    return Cap(limits.download_cap(file.size), f"a file its index says is {file.size:,} bytes (+ {size_text(limits.download_margin)})")


def check_sha256(file: ProjectFile, actual: str) -> None:
    """Refuse bytes whose sha256 is not the one the index published (when it published one)."""
    expected = file.sha256
    if expected is not None and actual != expected:
        raise IndexAccessError(
            f"{file.url}: sha256 {actual} does not match the index's {expected} (file changed or corrupted in transit)"
        )
