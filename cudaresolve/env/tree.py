"""The walk of a site-packages tree that finds its shared objects, shared by the scan and the
doctor's result cache (which stats what the scan would read, without reading anything).

It imports nothing heavy: a cached `doctor` run walks the tree before it knows whether it needs
the scan at all.
"""

from __future__ import annotations

import os
from typing import Callable, Iterator, Optional

from cudaresolve.binary.names import is_shared_object_name

# pip's uninstall moves what it removes to a name beside it starting with "~" (~orch-2.1.dist-info,
# ~orch/, nvidia/~ublas/) until the new files are in place; an interrupted pip leaves them behind.
# pip never reads them, and neither does the scan: they are not installed.
STASH_PREFIX = "~"


def shared_object_entries(
    top: str, on_error: Callable[[OSError], None], directories: Optional[list[os.DirEntry[str]]] = None
) -> Iterator[os.DirEntry[str]]:
    """Every non-directory entry under `top` named like a shared object, in os.walk's top-down
    order; symlinked directories and pip's stash are not followed, and a directory that cannot be listed goes to
    `on_error` (as os.walk's onerror). Entries come from os.scandir, so a caller that needs a
    file's identity stats it through DirEntry.stat without another lookup by name.
    `directories`, when given, receives the DirEntry of every directory met below `top`,
    symlinked ones included: whoever knows they are unchanged knows the walk would find the same."""
    try:
        scanner = os.scandir(top)
    except OSError as exc:
        on_error(exc)
        return
    subdirectories: list[os.DirEntry[str]] = []
    with scanner:
        while True:
            try:
                entry = next(scanner)
            except StopIteration:
                break
            except OSError as exc:
                on_error(exc)
                return
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            if is_dir:
                if not entry.name.startswith(STASH_PREFIX):
                    subdirectories.append(entry)
            elif is_shared_object_name(entry.name):
                yield entry
    if directories is not None:
        directories.extend(subdirectories)
    for entry in subdirectories:
        try:
            if entry.is_symlink():
                continue
        except OSError:
            continue
        yield from shared_object_entries(entry.path, on_error, directories)


def distinct_directories(directories: tuple[str, ...]) -> list[str]:
    """Each existing directory once, even when purelib and platlib are one directory by two names.

    An interpreter may report a platlib nothing was ever installed into (lib64 on Fedora); that is
    not a problem worth reporting.
    """
    seen = set()
    result = []
    for directory in directories:
        real = os.path.realpath(directory)
        if real not in seen and os.path.isdir(real):
            seen.add(real)
            result.append(directory)
    return result
