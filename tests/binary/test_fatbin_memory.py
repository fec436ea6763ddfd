"""The fatbin reader hands back the pages of a mapped file it has passed: a library with hundreds of
MB of sections to look through must not hold them all in the process's memory at once."""

from __future__ import annotations

import mmap
import os
import random

import pytest
from fatbin_bytes import container, cubin, entry

from cudaresolve.binary import fatbin

MB = 1 << 20
SIZE = 4 * fatbin.RELEASE_BYTES


def resident_kb() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


@pytest.mark.skipif(not os.path.exists("/proc/self/status") or not hasattr(mmap, "MADV_DONTNEED"), reason="Linux only")
@pytest.mark.parametrize("how", ["scanned", "walked"])
def test_pages_passed_are_handed_back(tmp_path, monkeypatch, how):
    """Scanned: 128 MB of data without the magic, then one container. Walked (`.nv_fatbin`): a
    container in every MB, zero padding between. The memory grown is measured at each container."""
    one = container(entry(2, 86, cubin(86)))
    block = random.Random(7).randbytes(MB).replace(fatbin.MAGIC, b"\1\2\3\4")
    with open(tmp_path / "data", "wb") as f:
        for i in range(SIZE // MB):
            if how == "scanned":
                f.write(block if i < SIZE // MB - 1 else one + block[len(one):])
            else:
                f.write(one + bytes(MB - len(one)))
    grown = []
    real = fatbin._container

    def measured(*args):
        grown.append(resident_kb() - before)
        return real(*args)

    monkeypatch.setattr(fatbin, "_container", measured)
    with open(tmp_path / "data", "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
        before = resident_kb()
        budget, extents = fatbin._Budget(fatbin.MAX_STEPS), fatbin._Extents(None, len(data))
        if how == "scanned":
            found = list(fatbin._scan(data, 0, len(data), budget, extents))
        else:
            walk = fatbin._Walk(data, 0, len(data), budget, extents)
            found = list(walk)
            assert walk.stop is None
        grown.append(resident_kb() - before)
    assert len(found) == (1 if how == "scanned" else SIZE // MB)
    assert max(grown) < 2 * fatbin.RELEASE_BYTES // 1024, max(grown)
