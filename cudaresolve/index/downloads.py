"""Whole files from an index: downloaded to a temporary file, checked against the index's sha256.

Only what cannot be read any other way is downloaded (a wheel whose metadata a server will not
serve by range, a wheel whose binary facts no table knows, an sdist's PKG-INFO). The size is
announced before the first byte; nothing from the file is used until its hash has matched.
"""

from __future__ import annotations

import hashlib
import tempfile
from typing import IO, Callable, Optional

from cudaresolve.index.http import Http, IndexAccessError
from cudaresolve.index.pages import ProjectFile

Progress = Callable[[str, int, Optional[int]], None]  # (filename, bytes done, total or None)


def download(http: Http, file: ProjectFile, progress: Optional[Progress] = None) -> IO[bytes]:
    """The file's bytes in a temporary file (deleted on close), positioned at 0, hash checked."""
    sink = tempfile.TemporaryFile()
    digest = hashlib.sha256()

    class _Hashing:
        def write(self, chunk: bytes) -> None:
            digest.update(chunk)
            sink.write(chunk)

    report = (lambda done, total: progress(file.filename, done, total)) if progress else None
    try:
        http.download(file.url, _Hashing(), what=f"{file.name} {file.version}", progress=report)
        check_sha256(file, digest.hexdigest())
    except BaseException:
        sink.close()
        raise
    sink.seek(0)
    return sink


def check_sha256(file: ProjectFile, actual: str) -> None:
    """Refuse bytes whose sha256 is not the one the index published (when it published one)."""
    expected = file.sha256
    if expected is not None and actual != expected:
        raise IndexAccessError(
            f"{file.url}: sha256 {actual} does not match the index's {expected} (file changed or corrupted in transit)"
        )
