"""Bounded prefix decoder for the LZ4 block format that fatbin entries use under flag 0x2000.

The fatbin reader needs only the first bytes of a compressed payload (a cubin's ELF header, the
`.target` line of PTX), so this decodes until `limit` bytes are out and stops: cost follows the
prefix, not the payload. Verified byte for byte against uncompressed output of the same nvcc 13.0
compile (`-Xfatbin -compress-mode=speed` versus `none`, tests/fixtures/fatbin/) and on the
LZ4-compressed entries embedded in libcufft.so.12 (CUDA 13 wheels), whose prefixes decode to
cubin ELF headers and PTX text whose archs match their entry headers.

Format: a sequence of (token, literals, 2-byte little-endian offset, match). The token's high
nibble is the literal count, its low nibble the match length minus 4; a nibble of 15 continues in
following bytes, each added, until one is not 255. The last sequence has literals only.
"""

from __future__ import annotations

from typing import Union

Buffer = Union[bytes, bytearray, memoryview]


class LzError(ValueError):
    """The input is not a well-formed LZ4 block (runs past its end, or refers before the output)."""


def decode_prefix(source: Buffer, limit: int) -> bytes:
    """The first `limit` decompressed bytes of `source` (fewer if the block is shorter)."""
    src = memoryview(source)
    end = len(src)
    out = bytearray()
    pos = 0
    while pos < end and len(out) < limit:
        token = src[pos]
        pos += 1
        literals = token >> 4
        if literals == 15:
            literals, pos = _extend(src, pos, literals)
        take = min(literals, limit - len(out))
        if pos + take > end:
            raise LzError("literal run past the end of the input")
        out += src[pos : pos + take]
        pos += take
        if take < literals or pos == end or len(out) >= limit:
            break
        if pos + 2 > end:
            raise LzError("match offset past the end of the input")
        offset = src[pos] | (src[pos + 1] << 8)
        pos += 2
        length = (token & 15) + 4
        if length == 19:
            length, pos = _extend(src, pos, length)
        if offset == 0 or offset > len(out):
            raise LzError(f"match offset {offset} outside the {len(out)} bytes decoded so far")
        length = min(length, limit - len(out))
        start = len(out) - offset
        if offset >= length:
            out += out[start : start + length]
        else:
            # Overlapping match: repeats the last `offset` bytes.
            pattern = bytes(out[start:])
            out += (pattern * (length // offset + 1))[:length]
    return bytes(out[:limit])


def _extend(src: memoryview, pos: int, value: int) -> tuple[int, int]:
    """Add the continuation bytes of a length nibble of 15; returns (length, new position)."""
    while True:
        if pos >= len(src):
            raise LzError("length continuation past the end of the input")
        byte = src[pos]
        pos += 1
        value += byte
        if byte != 255:
            return value, pos
