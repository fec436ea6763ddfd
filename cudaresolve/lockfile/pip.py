"""pip's formats of a lock: a constraints file and a hashed requirements file.

Both are written only from checked values (fields.checked: canonical names, PEP 440 versions,
markers pip's line reader cannot act on, lowercase digests, URLs in RFC 3986's characters), one
requirement or option per line, and each line is refused if it carries a control character, so no
value of a lock, read or built in code, can make a line or an option for pip.

May import: resolve/lock.py and resolve/reasons.py (the model), lockfile/.
"""

from __future__ import annotations

import posixpath
import urllib.parse
from collections import Counter

from cudaresolve.lockfile.check import checked
from cudaresolve.lockfile.fields import BREAKING, LockFileError
from cudaresolve.lockfile.writer import sha256_of, wheel_entries
from cudaresolve.resolve.lock import Lock, LockedPackage
from cudaresolve.resolve.reasons import OriginKind


def _parent_url(url: str) -> str:
    """Where pip's --find-links finds a wheel the lock names by URL alone (no index): the URL of its
    directory, still percent-encoded (a path would let a decoded space split pip's option line)."""
    parsed = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(parsed._replace(path=posixpath.dirname(parsed.path) + "/", query="", fragment=""))


def _index_lines(lock: Lock) -> list[str]:
    """pip options that reach every file of the lock: its indexes (variant indexes included), the
    directories of wheels it found by location, and --no-index when it used no index at all."""
    extra = dict.fromkeys(lock.index_urls[1:])  # ordered, and a lookup per package that does not grow with them
    for package in sorted(lock.packages, key=lambda p: p.name):
        if package.index and package.index not in lock.index_urls[:1]:
            extra.setdefault(package.index)
    lines = [f"--index-url {lock.index_urls[0]}"] if lock.index_urls else []
    lines += [f"--extra-index-url {url}" for url in extra]
    if not lines:
        lines.append("--no-index")
    links = [
        _parent_url(file.url)
        for p in sorted(lock.packages, key=lambda p: p.name)
        if not p.index
        for file in p.files
    ]
    lines += [f"--find-links {link}" for link in dict.fromkeys(links)]
    return lines


def _pin(package: LockedPackage) -> str:
    """`name==version ; marker`."""
    pin = f"{package.name}=={package.version}"
    return f"{pin} ; {package.marker}" if package.marker else pin


def _one_target(lock: Lock, origin: str) -> None:
    """pip's files hold one version per name: a universal lock's forks (several entries of one name,
    each with its marker) are selected for one target first (lockfile/select.py), not written."""
    entries = Counter(package.name for package in lock.packages)  # one pass: a lock may hold 50,000 entries
    forked = sorted(name for name, count in entries.items() if count > 1)
    if forked:
        raise LockFileError(
            f"{origin}: packages (package {forked[0]}): a universal lock with {entries[forked[0]]} entries of "
            f"{forked[0]}; a pip requirements or constraints file holds one version per name: "
            "write it for one target (install --lock selects the entries of its interpreter)"
        )


def _wheels_only(lock: Lock, origin: str) -> None:
    """pip's files pin files by hash: another tool's entry with only an sdist, VCS, directory or
    archive source would let pip fetch and build something no hash of the lock covers."""
    _one_target(lock, origin)
    for package in lock.packages:
        if package.other_source is not None:
            raise LockFileError(
                f"{origin}: {package.other_source} (package {package.name}): only a {package.other_source} source, "
                "which cudaresolve does not install (it installs wheels only; building one runs its code)"
            )


def _text(lines: list[str], origin: str) -> str:
    """The lines as a file; a line with a control character or a line separator (which could end it
    early) is refused, whatever checked() let through."""
    for line in lines:
        found = BREAKING.search(line)
        if found:
            raise LockFileError(f"{origin}: control character U+{ord(found.group()):04X} in a line for pip: {line[:60]!r}")
    return "\n".join(lines) + "\n"


def _conda_comments(lock: Lock) -> list[str]:
    return [
        f"# {p.name}: provided by {p.provided_by}; pip must not install it (cudaresolve install installs with --no-deps)"
        for p in sorted(lock.packages, key=lambda p: p.name)
        if p.provided_by is not None
    ]


def _asked(lock: Lock) -> list[str]:
    """The locked top-level requirements as resolved, e.g. `"cupy-cuda12x[ctk]"` for `cupy`: what pip
    must be asked for with the constraints (asked for `cupy`, pip would build the cupy sdist, which
    no constraint pins). Names and extras are checked, so only brackets need the shell's quotes."""
    asked = []
    for package in sorted(lock.packages, key=lambda p: p.name):
        if package.provided_by is None and any(o.kind is OriginKind.ASKED for o in package.reason.origins):
            extras = package.reason.extras or ()
            asked.append(f'"{package.name}[{",".join(extras)}]"' if extras else package.name)
    return list(dict.fromkeys(asked))


def constraints_txt(lock: Lock, origin: str = "the lock to write", *, indexes: bool = True) -> str:
    """A pip constraints file: `pip install -c FILE REQ...` installs exactly the lock, REQ being the
    top-level requirements as locked, which its header names. Without
    `indexes`, only the pins (the pip wrapper gives pip the indexes on its command line).

    A conda package standing for a wheel cannot be said in pip's terms (a constraint limits what pip
    installs, it cannot tell pip a dependency is already met), so it is a comment."""
    lock = checked(lock, origin)
    _wheels_only(lock, origin)
    pins = sorted({_pin(package) for package in lock.packages if package.provided_by is None})
    asked = " ".join(_asked(lock)) or "REQUIREMENT..."
    header = f"# {lock.created_by}: pip install -c THIS-FILE {asked}; installs exactly this lock"
    return _text([header] + (_index_lines(lock) if indexes else []) + pins + _conda_comments(lock), origin)


def requirements_txt(lock: Lock, origin: str = "the lock to write") -> str:
    """A pip requirements file with every wheel's hash, for `pip install --require-hashes -r FILE`.

    Kept installed distributions have no file to hash, so they are named in comments only. A wheel
    without a sha256 and an entry with only another source are refused, naming `origin` and the
    package."""
    lock = checked(lock, origin)
    _wheels_only(lock, origin)
    lines = [f"# {lock.created_by}: pip install --require-hashes -r THIS-FILE; installs exactly this lock"]
    lines += _index_lines(lock)
    for package in wheel_entries(lock):
        lines.append(_pin(package) + " \\")
        hashes = sorted({sha256_of(package, file, origin) for file in package.files})  # an sdist: pip builds it
        lines += [f"    --hash=sha256:{digest}" + (" \\" if i < len(hashes) - 1 else "") for i, digest in enumerate(hashes)]
    for package in sorted(lock.packages, key=lambda p: p.name):
        if not package.files and package.provided_by is None:
            lines.append(f"# kept installed, no file to hash: {_pin(package)}")
    return _text(lines + _conda_comments(lock), origin)
