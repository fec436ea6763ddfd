"""The ELF facts of a wheel, read from the wheel itself.

Why a reader of the whole wheel: NVIDIA keeps .dynstr/.dynamic at the end of 300 MB libraries inside
deflated zip members, so no partial read of a remote wheel can give them. `read_wheel` takes any
seekable file object (a wheel on disk, or a download in memory or in a temporary file) and inflates
one shared-object member at a time into memory; nothing is extracted to disk.

`knowledge.wheel_facts` builds the same WheelFacts from a row of data/wheel_facts.toml, so a planned
environment is built from table entries exactly as from a read wheel. Those facts are partial: only
the symbols that cross components are kept, which `WheelFacts.complete` says.
"""

from __future__ import annotations

import os
import re
import struct
import zipfile
import zlib
from dataclasses import dataclass
from typing import BinaryIO, Iterable, Optional

from cudaresolve.binary.elf import read_binary_facts_from_buffer
from cudaresolve.binary.facts import ELF_MAGIC, BinaryFacts
from cudaresolve.binary.names import is_shared_object_name
from cudaresolve.errors import CudaresolveError

# Version nodes of the C/C++ runtime (glibc with libm/libdl/libpthread/librt/ld-linux, libstdc++,
# libgcc_s): a provider whose versions all belong to these families is the system's, not a wheel's.
_SYSTEM_VERSION = re.compile(r"^(GLIBC|GLIBCXX|CXXABI|GCC)_")

# Bounds on what a zip may make us hold (index/limits.py explains them beside the index's own):
# zipfile reads the whole central directory at once and keeps a ZipInfo per member, and an ELF
# member is inflated into memory whole.
MAX_CENTRAL_DIRECTORY = 8 << 20
MAX_ELF_MEMBER = 2 << 30
_INFLATE_CHUNK = 8 << 20


class WheelError(CudaresolveError):
    """The wheel is not a readable zip archive (truncated, damaged, not a zip at all)."""

    def __init__(self, label: str, reason: str):
        self.label, self.reason = label, reason
        super().__init__(f"{label}: {reason}")


@dataclass(frozen=True)
class WheelFacts:
    """The ELF members of one wheel, in archive order; each BinaryFacts.path is "<label>!<member>".

    `complete` is False for facts rebuilt from the knowledge table: they hold only the symbols that
    cross components (versioned needs of non-system providers, and the definitions those bind), so
    an absent symbol there proves nothing.
    """

    label: str  # the wheel's file name or path
    members: tuple[BinaryFacts, ...]
    unreadable: tuple[tuple[str, str], ...] = ()  # (member, why) of ELF members the reader refused
    not_elf: tuple[str, ...] = ()  # members named like shared objects that are not ELF (the loader refuses them)
    complete: bool = True


def read_wheel(
    stream: BinaryIO, label: str, *, max_directory: int = MAX_CENTRAL_DIRECTORY, max_member: int = MAX_ELF_MEMBER
) -> WheelFacts:
    """Facts of every ELF shared-object member of the wheel in `stream` (seekable, opened in binary mode).

    A member larger than `max_member` is refused (WheelError) before any of it is inflated."""
    members: list[BinaryFacts] = []
    unreadable: list[tuple[str, str]] = []
    not_elf: list[str] = []
    open_failures: tuple[type[BaseException], ...] = (DirectoryTooLarge, *_ZIP_FAILURES)
    try:
        archive = open_zip(stream, max_directory)
        infos = archive.infolist()
    except open_failures as exc:
        raise WheelError(label, f"not a readable wheel ({exc})") from None
    with archive:
        for info in infos:
            # A damaged directory can give a member no name at all (ZipInfo.is_dir indexes it).
            if not info.filename or info.is_dir() or not is_shared_object_name(os.path.basename(info.filename)):
                continue
            where = f"{label}!{info.filename}"
            if info.file_size > max_member:
                raise WheelError(label, f"{info.filename} claims {info.file_size:,} bytes, over the limit of {max_member:,} for one member")
            try:
                data = _elf_member(archive, info)
            except _ZIP_FAILURES as exc:
                raise WheelError(label, f"not a readable wheel ({info.filename}: {exc})") from None
            if data is None:
                not_elf.append(info.filename)
                continue
            try:
                members.append(read_binary_facts_from_buffer(data, where))
            except CudaresolveError as exc:
                unreadable.append((info.filename, str(exc)))
            del data  # one member in memory at a time
    return WheelFacts(label, tuple(members), tuple(unreadable), tuple(not_elf))


def _zip_failures() -> tuple[type[BaseException], ...]:
    """What zipfile raises for a damaged archive: besides its own errors, the decompressors' and
    whatever a lying header leads to (a negative seek, a name that is not UTF-8, an "encrypted" flag)."""
    failures: list[type[BaseException]] = [
        zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, EOFError, OSError, NotImplementedError,
        RuntimeError, ValueError, struct.error, OverflowError,
    ]
    try:
        import lzma  # absent from some Python builds; zipfile then cannot read LZMA members either
    except ImportError:  # pragma: no cover
        pass
    else:
        failures.append(lzma.LZMAError)
    return tuple(failures)


_ZIP_FAILURES = _zip_failures()


def _elf_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> Optional[bytearray]:
    """The member inflated into one buffer, or None when it does not start with the ELF magic.

    The buffer grows with what actually inflates, so a directory entry that claims a huge size costs
    nothing until the bytes exist (zipfile stops at the claimed size and checks the CRC)."""
    with archive.open(info) as member:
        magic = member.read(4)
        if magic != ELF_MAGIC:
            return None
        data = bytearray(magic)
        while len(data) < info.file_size:
            chunk = member.read(min(_INFLATE_CHUNK, info.file_size - len(data)))
            if not chunk:
                raise EOFError(f"{info.filename}: member ends after {len(data)} of {info.file_size} bytes")
            data += chunk
        return data


def open_zip(stream: BinaryIO, max_directory: int = MAX_CENTRAL_DIRECTORY) -> zipfile.ZipFile:
    """zipfile.ZipFile over `stream`, refusing a central directory larger than `max_directory`.

    zipfile reads the directory in one read of the size the end record states; while the archive
    opens, any read larger than the bound raises zipfile.LargeZipFile, so a directory that claims
    gigabytes is refused (DirectoryTooLarge) before a byte of it is fetched or parsed."""
    guard = _ReadBound(stream, max_directory)
    archive = zipfile.ZipFile(guard)
    guard.bound = None
    return archive


class DirectoryTooLarge(Exception):
    """A zip's central directory is larger than the bound `open_zip` was given."""

    def __init__(self, bound: int):
        self.bound = bound
        super().__init__(f"its central directory is larger than {bound >> 20} MiB")


class _ReadBound:
    """A file object that passes reads through to `stream` while they are at most `bound` bytes."""

    def __init__(self, stream: BinaryIO, bound: int):
        self._stream = stream
        self.bound: Optional[int] = bound  # None: reads pass unchecked

    def read(self, n: int = -1) -> bytes:
        if self.bound is not None:
            if n is None or n < 0:  # zipfile reads the end record to the end of the file
                here = self._stream.tell()
                n = self._stream.seek(0, os.SEEK_END) - here
                self._stream.seek(here)
            if n > self.bound:
                raise DirectoryTooLarge(self.bound)
        return self._stream.read(n)

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        return self._stream.seek(offset, whence)

    def tell(self) -> int:
        return self._stream.tell()

    def seekable(self) -> bool:
        return True


def is_system_provider(versions: Iterable[str]) -> bool:
    """True when every version needed from a file is the C/C++ runtime's (GLIBC_*, GLIBCXX_*, CXXABI_*, GCC_*)."""
    versions = tuple(versions)
    return bool(versions) and all(_SYSTEM_VERSION.match(v) for v in versions)


def split_symbol(text: str) -> tuple[str, str]:
    """"name@version" or "name@@version" (the default definition) -> (name, version)."""
    name, _, version = text.partition("@")
    return name, version.lstrip("@")
