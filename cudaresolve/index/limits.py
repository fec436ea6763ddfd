"""How much index access reads, holds and waits for: every bound on what an index sends, in one place.

An index is outside input. A page that never ends, a wheel whose server ignores `Range` and streams
without end, a METADATA of gigabytes, a zip whose directory claims a huge member or a server that
trickles a byte a second must each stop with one line naming the URL and the limit, not hold the
run's memory, disk or time. Each bound is far above what real indexes serve (the figures below are
measured; docs/index.md, "Limits", gives the same table), and hitting one is `LimitExceeded`
(exit 3). Nothing partial is ever cached.

`DEFAULT` is what `open_index` uses; tests that must hit a cap quickly replace it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from cudaresolve.binary.wheel import MAX_CENTRAL_DIRECTORY, MAX_ELF_MEMBER

MiB = 1 << 20
GiB = 1 << 30


@dataclass(frozen=True)
class Limits:
    # A project page (PEP 691 JSON or PEP 503 HTML) or a find-links page, as received. The largest
    # real page known is ddtrace's: 21 MB of JSON (16.6 MB as HTML) listing 46,724 files.
    page_bytes: int = 64 * MiB
    # Parsing costs more than the bytes: a page of 3-byte `{}` objects or 3-byte `<a>` tags needs 25
    # times its size in objects. Counted before parsing: JSON values (the `{`, `[` and `,` of the
    # text; ddtrace: 521,000) and HTML tags (its `<`; ddtrace: 140,000), and the longest tag
    # (ddtrace: 455 bytes), since a tag's attributes are parsed all at once.
    page_items: int = 2_000_000
    page_tag_bytes: int = 64 * 1024
    # Files of the project one page lists (ddtrace: 46,724), each about 1 KB once parsed.
    page_files: int = 200_000
    # A METADATA, PKG-INFO or PEP 658 .metadata file, compressed or not. Real ones are kilobytes
    # (torch 2.14.1: 38 KB; the largest met, pydantic 2.13's: 109 KB).
    metadata_bytes: int = 16 * MiB
    # A zip's central directory (torch 2.14.1: 14,702 members in 1.4 MB). zipfile keeps a ZipInfo of
    # ~450 bytes per member, so 8 MiB of 46-byte entries costs ~80 MB.
    central_directory_bytes: int = MAX_CENTRAL_DIRECTORY
    # One ELF member inflated into memory for its binary facts (the largest in any CUDA wheel read so
    # far: libcudnn_engines_precompiled.so.9, 560 MB). Only a wheel read for its ELF facts needs it.
    elf_member_bytes: int = MAX_ELF_MEMBER
    # A whole-file download whose size the index states (a JSON page's `size`, else the server's
    # Content-Length) may exceed it by this much; the sha256 check catches any difference anyway.
    download_margin: int = 1 * MiB
    # A download whose size nobody states: above the largest wheels published (torch's CUDA builds
    # on PyTorch's index reach 2.5 GB; cudnn 9: 717 MB). Streamed to a temporary file, never memory.
    download_bytes: int = 4 * GiB
    # Whole files one command downloads, together (wheels read for their binary facts, with --deep
    # every chosen one; files whose metadata or hash is had no other way): checked before each
    # download, so a lock that would read release after release stops with a message instead of
    # downloading without end. A torch 2.x CUDA set read in full is about 4 GB.
    download_budget: int = 8 * GiB
    # An sdist's tar stream read while looking for its PKG-INFO, uncompressed (a gzip bomb stops here).
    sdist_bytes: int = 1 * GiB
    # An sdist whose dependencies only a build gives: pip must have prepared its metadata within this
    # (a pure-Python sdist takes seconds; setting up the isolated build environment most of them).
    build_seconds: float = 300.0
    # Time: a request must have its answer's headers within `request_seconds` (or pip's timeout when
    # that is longer), then keep an average of `min_bytes_per_second`: a request may take
    # request_seconds + bytes received / min_bytes_per_second in all. The socket timeout alone never
    # stops a server that sends a byte every few seconds; this does, whatever the size.
    request_seconds: float = 20.0
    min_bytes_per_second: int = 20_000

    def download_cap(self, declared: Optional[int]) -> int:
        """The most bytes a whole-file download may bring: its stated size and the margin, else the hard cap."""
        return self.download_bytes if declared is None else min(self.download_bytes, declared + self.download_margin)


DEFAULT = Limits()


def size_text(count: int) -> str:
    """A byte count as a limit is written: 64 MiB, 20 KB, 300 bytes."""
    for unit, name in ((GiB, "GiB"), (MiB, "MiB"), (1024, "KiB")):
        if count >= unit and count % unit == 0:
            return f"{count // unit} {name}"
    return f"{count:,} bytes"
