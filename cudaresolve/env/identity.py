"""What a file is, as `stat` tells it: the identity the doctor records for every path the loader
looked at, and the result cache compares before it trusts a kept report.

Imports only the standard library: a cached `doctor` run needs it before it knows whether to scan.
"""

from __future__ import annotations

import os
from typing import Tuple, Union

# (size, mtime_ns, inode, device, mode); None: no file there; a string: why it could not be stat-ed;
# for a symlink in the tree, (its own identity, its target's).
Identity = Union[Tuple[int, ...], None, str, Tuple[object, object]]


def identity_of(st: os.stat_result) -> Tuple[int, ...]:
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev, st.st_mode)


def path_identity(path: str) -> Identity:
    """The identity of the file at `path`, symlinks followed."""
    try:
        return identity_of(os.stat(path))
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        return f"errno {exc.errno}"
