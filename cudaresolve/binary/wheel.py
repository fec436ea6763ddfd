"""The ELF facts of a wheel, read from the wheel itself.

Why a reader of the whole wheel: NVIDIA keeps .dynstr/.dynamic at the end of 300 MB libraries inside
deflated zip members, so no partial read of a remote wheel can give them. `read_wheel` takes any
seekable file object (a wheel on disk, or a download in memory or in a temporary file) and inflates
one shared-object member at a time: into memory, or, past SPILL_MEMBER, into an unnamed temporary
file that is mapped and gone once read (libtorch_cuda.so is ~1 GB); nothing is extracted where a
name could be seen.

`knowledge.wheel_facts` builds the same WheelFacts from a row of data/wheel_facts.toml, so a planned
environment is built from table entries exactly as from a read wheel. Those facts are partial: only
the symbols that cross components are kept, which `WheelFacts.complete` says.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import re
import struct
import tempfile
import zipfile
import zlib
from dataclasses import dataclass
from typing import IO, BinaryIO, Callable, Iterable, Optional, Union

from cudaresolve.binary.elf import read_binary_facts_from_buffer
from cudaresolve.binary.facts import ELF_MAGIC, BinaryFacts
from cudaresolve.binary.names import is_shared_object_name
from cudaresolve.errors import CudaresolveError

# Version nodes of the C/C++ runtime (glibc with libm/libdl/libpthread/librt/ld-linux, libstdc++,
# libgcc_s): a provider whose versions all belong to these families is the system's, not a wheel's.
_SYSTEM_VERSION = re.compile(r"^(GLIBC|GLIBCXX|CXXABI|GCC)_")

Buffer = Union[bytearray, mmap.mmap]

# Bounds on what a zip may make us hold (index/limits.py explains them beside the index's own):
# zipfile reads the whole central directory at once and keeps a ZipInfo per member, and an ELF
# member is inflated into memory whole.
MAX_CENTRAL_DIRECTORY = 8 << 20
MAX_ELF_MEMBER = 2 << 30
SPILL_MEMBER = 64 << 20  # a member past this is inflated into a temporary file, not memory
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
            with contextlib.ExitStack() as held:  # one member at a time: its buffer, or its spilled file and mapping
                try:
                    data = _elf_member(archive, info, held)
                except _ZIP_FAILURES as exc:
                    raise WheelError(label, f"not a readable wheel ({info.filename}: {exc})") from None
                if data is None:
                    not_elf.append(info.filename)
                    continue
                try:
                    members.append(read_binary_facts_from_buffer(data, where))
                except CudaresolveError as exc:
                    unreadable.append((info.filename, str(exc)))
                del data
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


def _elf_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, held: contextlib.ExitStack) -> Optional[Buffer]:
    """The member inflated, or None when it does not start with the ELF magic: into memory up to
    SPILL_MEMBER bytes, past that into an unnamed temporary file mapped read-only (entered into
    `held`), whose pages the readers hand back as they pass them (fatbin.RELEASE_BYTES), so a
    library of gigabytes costs its headers in memory, not its size.

    What is written grows with what actually inflates, so a directory entry that claims a huge
    size costs nothing until the bytes exist (zipfile stops at the claimed size and checks the CRC)."""
    with archive.open(info) as member:
        magic = member.read(4)
        if magic != ELF_MAGIC:
            return None
        if info.file_size <= SPILL_MEMBER:
            data = bytearray(magic)
            _inflate(member, info, data.extend, len(data))
            return data
        spill = held.enter_context(tempfile.TemporaryFile())
        spill.write(magic)
        _inflate(member, info, spill.write, len(magic))
        spill.flush()
        return held.enter_context(mmap.mmap(spill.fileno(), 0, access=mmap.ACCESS_READ))


def _inflate(member: IO[bytes], info: zipfile.ZipInfo, write: Callable[[bytes], object], done: int) -> None:
    """The rest of `member` to `write`, in chunks; EOFError when it ends before its stated size."""
    while done < info.file_size:
        chunk = member.read(min(_INFLATE_CHUNK, info.file_size - done))
        if not chunk:
            raise EOFError(f"{info.filename}: member ends after {done} of {info.file_size} bytes")
        write(chunk)
        done += len(chunk)


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
