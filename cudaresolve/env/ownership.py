"""Files two distributions own: paths listed, with different contents, in the RECORD of several
installed distributions, and whose bytes are on disk now.

pip lets a wheel overwrite a file another distribution installed (nvidia-nccl-cu12 and -cu13 both
install nvidia/nccl/lib/libnccl.so.2): the last one installed wins, and uninstalling either deletes
the file the other still lists. A path whose owners record the same hash (the empty
nvidia/__init__.py many NVIDIA wheels carry) holds the same bytes whoever wrote it, so it is left
out; so is one an owner records without a hash (a .pyc), whose contents cannot be told apart.

Only the RECORDs of owners of a shared path are read again (for hashes), and only the shared files
whose size matches an owner's recorded size are hashed, within a bound: a file or total above it is
left unjudged, with the reason.
"""

from __future__ import annotations

import base64
import csv
import errno
import hashlib
import os
import stat
from dataclasses import dataclass
from typing import Iterable, Optional

from packaging.version import Version

from cudaresolve.bounded import read_bounded
from cudaresolve.env.distributions import DIGEST, MAX_DIST_INFO_FILE, SIZE, Distribution, Problem
from cudaresolve.env.imports import MAX_NAMESPACE_INIT, is_namespace_init
from cudaresolve.records import shown

# Hashing is bounded: the largest real shared library is a few hundred MiB (libnccl.so.2: ~300 MiB).
MAX_HASHED_FILE = 2 * 1024 * 1024 * 1024
MAX_HASHED_TOTAL = 4 * 1024 * 1024 * 1024



@dataclass(frozen=True)
class Claim:
    """One owner's RECORD row for a shared path."""

    distribution: str  # canonical name
    version: Version
    digest: Optional[str]  # "sha256=<urlsafe base64>"; None: not recorded (a planned wheel's)
    size: Optional[int] = None  # as recorded


@dataclass(frozen=True)
class SharedFile:
    """A path several distributions install with different contents."""

    path: str
    claims: tuple[Claim, ...]  # one per distribution, sorted by name
    on_disk: Optional[str] = None  # the distribution whose recorded hash the file's bytes have
    unjudged: Optional[str] = None  # why the bytes were not compared (planned, too large, unreadable)
    namespace: bool = False  # an __init__.py that only declares a shared namespace (env/imports.py)

    @property
    def owners(self) -> tuple[str, ...]:
        return tuple(claim.distribution for claim in self.claims)


def shared_files(distributions: Iterable[Distribution]) -> tuple[tuple[SharedFile, ...], tuple[Problem, ...]]:
    """The paths several distributions' RECORDs list with different hashes, sorted by path, and what
    could not be read (a RECORD gone since the scan, a malformed hash on a shared path)."""
    owners: dict[str, list[Distribution]] = {}
    for dist in distributions:
        if dist.kind != "python" or dist.conda is not None:
            continue  # conda's files are listed by conda-meta, which holds no hashes
        for path in dist.files:
            owners.setdefault(path, []).append(dist)
    shared = {path: dists for path, dists in owners.items() if len({d.name for d in dists}) > 1}
    if not shared:
        return (), ()
    problems: list[Problem] = []
    rows: dict[str, dict[str, tuple[Optional[str], Optional[int]]]] = {}  # dist-info -> path -> (digest, size)
    for dist in {d.dist_info: d for dists in shared.values() for d in dists}.values():
        rows[dist.dist_info] = _record_rows(dist, set(shared).intersection(dist.files), problems)
    found = []
    budget = [MAX_HASHED_TOTAL]
    for path in sorted(shared):
        claims: dict[str, Claim] = {}
        for dist in shared[path]:
            digest, size = rows[dist.dist_info].get(path, (None, None))
            claims.setdefault(dist.name, Claim(dist.name, dist.version, digest, size))
        if any(claim.digest is None for claim in claims.values()) or len({c.digest for c in claims.values()}) == 1:
            continue
        ordered = tuple(sorted(claims.values(), key=lambda claim: claim.distribution))
        on_disk, unjudged = _whose_bytes(path, ordered, budget)
        found.append(SharedFile(path, ordered, on_disk, unjudged, _namespace(path)))
    return tuple(found), tuple(problems)


def _namespace(path: str) -> bool:
    """Whether the shared file is a namespace package's `__init__.py` (its bytes on disk say so)."""
    if os.path.basename(path) != "__init__.py":
        return False
    try:
        return is_namespace_init(read_bounded(path, MAX_NAMESPACE_INIT, regular=True).decode("utf-8"))
    except (OSError, UnicodeDecodeError):
        return False


def _record_rows(
    dist: Distribution, paths: set[str], problems: list[Problem]
) -> dict[str, tuple[Optional[str], Optional[int]]]:
    """The (digest, size) `dist`'s RECORD gives each of `paths`; a malformed value is None, said once."""
    root = os.path.dirname(dist.dist_info)
    try:
        text = read_bounded(os.path.join(dist.dist_info, "RECORD"), MAX_DIST_INFO_FILE, regular=True).decode("utf-8")
        table = list(csv.reader(text.splitlines()))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        problems.append(Problem(dist.dist_info, f"RECORD cannot be read again for its hashes: {exc}"))
        return {}
    found: dict[str, tuple[Optional[str], Optional[int]]] = {}
    bad = None
    for row in table:
        if not row or not row[0]:
            continue
        path = os.path.normpath(os.path.join(root, row[0]))
        if path not in paths:
            continue
        digest = row[1] if len(row) > 1 and DIGEST.fullmatch(row[1]) else None
        size = int(row[2]) if len(row) > 2 and SIZE.fullmatch(row[2]) else None
        if digest is None and len(row) > 1 and row[1] and bad is None:
            bad = row[1]
        found[path] = (digest, size)
    if bad is not None:
        problems.append(Problem(dist.dist_info, f"RECORD has a hash that is not sha256=<base64> ({shown(bad)}); "
                                                "files it lists so are not judged for a second owner"))
    return found


def _whose_bytes(path: str, claims: tuple[Claim, ...], budget: list[int]) -> tuple[Optional[str], Optional[str]]:
    """(the owner whose recorded hash the file has, None) or (None, why none could be named)."""
    try:
        size = _regular_size(path)
    except OSError as exc:
        return None, f"cannot read: {exc.strerror or exc}"
    candidates = [claim for claim in claims if claim.size is None or claim.size == size]
    if not candidates:
        return None, None  # no owner's size: the bytes are neither's
    if size > MAX_HASHED_FILE or size > budget[0]:
        return None, f"larger than {min(MAX_HASHED_FILE, budget[0]) >> 20} MiB left to hash"
    budget[0] -= size
    try:
        digest = _sha256(path, size)
    except OSError as exc:
        return None, f"cannot read: {exc.strerror or exc}"
    return next((claim.distribution for claim in candidates if claim.digest == digest), None), None


def _regular_size(path: str) -> int:
    info = os.stat(path)
    if not stat.S_ISREG(info.st_mode):
        raise OSError(errno.EINVAL, "not a regular file", path)
    return info.st_size


def _sha256(path: str, size: int) -> str:
    """RECORD's form of the file's hash, reading no more than `size` bytes (the file may grow)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    digest = hashlib.sha256()
    with open(fd, "rb") as stream:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        left = size
        while left > 0:
            chunk = stream.read(min(left, 1 << 20))
            if not chunk:
                break
            digest.update(chunk)
            left -= len(chunk)
        if stream.read(1):
            raise OSError(errno.EAGAIN, "changed while read", path)
    return "sha256=" + base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode("ascii")
