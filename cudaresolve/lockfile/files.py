"""Putting a command's lock files on disk: all of them or none, and never over a file a user wrote.

`lock -o pylock.toml --write-constraints c.txt --write-requirements r.txt` renders every text first;
here each is written to a temporary file beside its destination and flushed to disk, and only when
all are written are they moved into place (os.replace), so a reader sees the old files or the new
ones, and a failure on the third file leaves the first one as it was.

Before any of that, each destination that exists must be one cudaresolve wrote (its generator
marker at the top: the pip files' `# cudaresolve ...` header line, pylock.toml's
`created-by = "cudaresolve ..."`) or empty: a requirements or constraints file of the user's, or
another tool's pylock.toml, named by a mistyped flag, is refused, not replaced.

Light on purpose (a cached lock writes its files without importing the lock's types): may import errors.
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
from typing import Optional, Sequence

from cudaresolve.errors import UsageError

TOOL = "cudaresolve"  # the generator named by every file cudaresolve writes
HEAD = 4096  # bytes read of a file to replace: the markers are on its first lines
_MARKER = re.compile(rf'\A# {TOOL} |^created-by = "{TOOL} ', re.MULTILINE)


def replaceable(path: str) -> None:
    """Refuse, naming `path`, to replace a file cudaresolve did not write (an absent or empty one
    may be written); only a bounded head of a regular file is read."""
    try:
        status = os.stat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from None
    if stat.S_ISDIR(status.st_mode):
        raise UsageError(f"cannot write {path}: it is a directory")
    if not stat.S_ISREG(status.st_mode):
        raise UsageError(f"cannot write {path}: it is not a regular file")
    if status.st_size == 0:
        return
    try:
        with open(path, "rb") as stream:
            head = stream.read(HEAD).decode("utf-8", errors="replace")
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from None
    if not _MARKER.search(head):
        raise UsageError(
            f"{path}: not replaced: it exists and {TOOL} did not write it (no {TOOL} header at its top); "
            "name another file, or remove it first"
        )


def _mode(path: str) -> int:
    """The mode a replaced file keeps, or a new file's under the umask."""
    try:
        return os.stat(path).st_mode & 0o777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
    except OSError as exc:
        raise UsageError(f"cannot write {path}: {exc.strerror}") from None


def _staged(path: str, text: str) -> str:
    """`text` in a temporary file in `path`'s directory, on disk, with the mode `path` will have."""
    mode = _mode(path)
    if os.path.isdir(path):
        raise UsageError(f"cannot write {path}: it is a directory")
    temp = None
    try:
        fd, temp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(path)), prefix=f".{os.path.basename(path)}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temp, mode)
        return temp
    except OSError as exc:
        _remove(temp)
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None


def _remove(temp: Optional[str]) -> None:
    if temp is not None:
        try:
            os.unlink(temp)
        except OSError:
            pass


def write_together(outputs: Sequence[tuple[str, str]]) -> None:
    """Write every (path, text); none is replaced unless all were written, and none at all when
    one of them is a file cudaresolve did not write."""
    for path, _ in outputs:
        replaceable(path)
    paths = [os.path.realpath(path) for path, _ in outputs]
    twice = next((path for path, real in zip((p for p, _ in outputs), paths) if paths.count(real) > 1), None)
    if twice is not None:
        raise UsageError(f"{twice} is named for two of the outputs")
    staged: list[tuple[str, str]] = []
    try:
        for path, text in outputs:
            staged.append((_staged(path, text), path))
        replaced: list[str] = []
        for temp, path in staged:
            try:
                os.replace(temp, path)
            except OSError as exc:
                done = f" ({', '.join(replaced)} already replaced)" if replaced else ""
                raise UsageError(f"cannot write {path}: {exc.strerror or exc}{done}") from None
            replaced.append(path)
    finally:
        for temp, _ in staged:
            if os.path.exists(temp):
                _remove(temp)
