"""The facts cache by content: a library a RECORD lists is found by the (sha256, size) recorded for it,
so a fresh copy of an environment reads none of its libraries again; a file whose size or sampled
bytes disagree with the entry is read."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import sys
from pathlib import Path

import pytest

from cudaresolve.binary.elf import read_binary_facts
from cudaresolve.binary.facts import BinaryFacts
from cudaresolve.commands import diagnosing as doctor
from cudaresolve.env.cache import SAMPLE_END, FactsCache
from cudaresolve.env.distributions import parse_record_rows, read_distributions
from cudaresolve.env.interpreter import Target, target_for_python

LIBRARY = "pkg/libcontent.so"
PADDING = 300_000  # a data array, so the file has bytes between its sampled blocks


def record_digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def installed(site: Path, library: Path, recorded: bytes) -> Path:
    """`site` holding `library` as pkg/libcontent.so and a dist-info whose RECORD gives `recorded`'s hash and size."""
    (site / "pkg").mkdir(parents=True)
    shutil.copyfile(library, site / LIBRARY)
    dist_info = site / "pkg-1.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: pkg\nVersion: 1.0\n")
    (dist_info / "RECORD").write_text(f"{LIBRARY},{record_digest(recorded)},{len(recorded)}\npkg-1.0.dist-info/RECORD,,\n")
    return site


@pytest.fixture
def reads(monkeypatch) -> list[str]:
    """The paths the doctor's scan reads from the disk (one library: no worker processes are forked)."""
    paths: list[str] = []

    def counting(path: str) -> BinaryFacts:
        paths.append(path)
        return read_binary_facts(path)

    monkeypatch.setattr(doctor, "read_binary_facts", counting)
    return paths


def scanned(site: Path, cache: Path) -> BinaryFacts:
    env, error = doctor.scan(Target(site_packages=(str(site),)), {"CUDARESOLVE_CACHE_DIR": str(cache)})
    assert error is None
    (elf,) = env.elf_files
    assert elf.error is None and elf.facts is not None
    return elf.facts


def test_a_copy_is_found_by_content_and_a_changed_file_is_read(elf_builder, tmp_path, reads):
    library = elf_builder.build("libcontent.so", f"char pad[{PADDING}] = {{1}};\nint content(void) {{ return 1; }}\n",
                                soname="libcontent.so")
    data = library.read_bytes()
    cache = tmp_path / "cache"

    first = scanned(installed(tmp_path / "first", library, data), cache)
    assert reads == [str(tmp_path / "first" / LIBRARY)]

    copy = installed(tmp_path / "copy", library, data)  # another path and inode, the same bytes
    found = scanned(copy, cache)
    assert len(reads) == 1, "the copy's library was read though its RECORD matches a cached entry"
    assert found.path == str(copy / LIBRARY)
    assert found.symbols == first.symbols and found.soname == "libcontent.so"

    grown = tmp_path / "grown.so"
    grown.write_bytes(data + b"\0" * 16)  # another size than RECORD gives
    scanned(installed(tmp_path / "grown", grown, data), cache)
    assert reads[1:] == [str(tmp_path / "grown" / LIBRARY)]

    for where, offset in (("head", SAMPLE_END - 1), ("tail", len(data) - 1)):
        tampered = tmp_path / f"{where}.so"
        tampered.write_bytes(data[:offset] + bytes([data[offset] ^ 0xFF]) + data[offset + 1:])  # the same size
        scanned(installed(tmp_path / where, tampered, data), cache)
        assert reads[-1] == str(tmp_path / where / LIBRARY)
    assert len(reads) == 4

    scanned(installed(tmp_path / "again", library, data), cache)  # the tampered reads did not spoil the entry
    assert len(reads) == 4


def test_a_file_the_record_does_not_vouch_for_is_not_stored_by_content(elf_builder, tmp_path, reads):
    """A file read while its size differs from RECORD's writes no content entry under RECORD's hash."""
    library = elf_builder.build("libcontent.so", "int content(void) { return 1; }\n")
    data = library.read_bytes()
    other = tmp_path / "other.so"
    other.write_bytes(data + b"\0" * 8)
    cache = tmp_path / "cache"
    scanned(installed(tmp_path / "first", other, data), cache)
    scanned(installed(tmp_path / "second", library, data), cache)
    assert len(reads) == 2


@pytest.mark.parametrize("row", [
    "pkg/libx.so,sha256=short,10",  # not 32 bytes of base64
    "pkg/libx.so,sha256=" + "A" * 43 + ",ten",  # size not a number
    "pkg/libx.so,sha256=" + "A" * 43 + ",1234567890123456",  # size past any file
    "pkg/libx.so,md5=" + "A" * 22 + ",10",  # another algorithm
    "pkg/libx.so,sha256=" + "A" * 43 + ",10,extra",  # a fourth column
    "pkg/libx.so,,",  # no hash
    "pkg/readme.txt,sha256=" + "A" * 43 + ",10",  # not a shared object's name
])
def test_a_malformed_or_foreign_record_row_gives_no_content(row):
    paths, recorded = parse_record_rows(row + "\n", "/site")
    assert paths == ("/site/" + row.split(",")[0],) and recorded == ()


def test_a_well_formed_record_row_gives_its_content():
    digest = "sha256=" + "A" * 43
    assert parse_record_rows(f"pkg/libx.so.12,{digest},10\n../../bin/tool,{digest},3\n", "/env/site") == (
        ("/env/site/pkg/libx.so.12", "/bin/tool"), (("/env/site/pkg/libx.so.12", digest, 10),))


def test_a_real_wheel_copied_to_a_new_venv_is_not_read_again(cuda_venv, tmp_path):
    """nvJitLink's wheel as pip installs it, its site-packages copied to a new place (new paths and
    inodes): the second scan finds the library's facts by the RECORD's hash."""
    venv = cuda_venv(["nvidia-nvjitlink-cu12==12.1.105"])
    target = target_for_python(str(venv / "bin" / "python"))
    (site,) = target.site_packages
    copy = tmp_path / "copy" / "site-packages"
    shutil.copytree(site, copy, symlinks=True)
    reads: list[str] = []

    def read(path: str) -> BinaryFacts:
        reads.append(path)
        return read_binary_facts(path)

    cache = FactsCache(str(tmp_path / "cache"))
    recorded = {}
    for root in (site, str(copy)):
        for dist in read_distributions(root)[0]:
            recorded.update({path: (digest, size) for path, digest, size in dist.recorded})
    library = os.path.join(site, "nvidia", "nvjitlink", "lib", "libnvJitLink.so.12")
    copied = str(copy / "nvidia" / "nvjitlink" / "lib" / "libnvJitLink.so.12")
    assert recorded[library] == recorded[copied] and recorded[library][1] == os.path.getsize(library)
    first = cache.facts_for(library, read=read, recorded=recorded[library])
    second = cache.facts_for(copied, read=read, recorded=recorded[copied])
    assert reads == [os.path.realpath(library)]
    assert second.path == os.path.realpath(copied) and second.symbols == first.symbols and second.fatbin == first.fatbin


if sys.platform != "linux":  # pragma: no cover - the doctor's scan reads Linux ELF files
    pytestmark = pytest.mark.skip("Linux only")


def test_the_parallel_fill_leaves_out_the_files_found_by_content(elf_builder, tmp_path, monkeypatch):
    """Two libraries cached by content under other paths: the fill finds nothing to read, so starts no workers."""
    from cudaresolve.env import cache as cache_module

    libraries = [elf_builder.build(f"lib{n}.so", f"int f{n}(void) {{ return {n}; }}\n") for n in (1, 2)]
    cache = FactsCache(str(tmp_path / "cache"))
    copies, recorded = [], {}
    for library in libraries:
        data = library.read_bytes()
        copy = tmp_path / "copy" / library.name
        copy.parent.mkdir(exist_ok=True)
        copy.write_bytes(data)
        claim = (record_digest(data), len(data))
        cache.facts_for(str(library), read=read_binary_facts, recorded=claim)
        copies.append(str(copy))
        recorded[str(copy)] = claim

    def no_workers():
        raise AssertionError("the fill started workers for files the cache holds by content")

    monkeypatch.setattr(cache_module, "_fork_context", no_workers)
    monkeypatch.setattr(cache_module, "_usable_cpus", lambda: 2)  # two misses would start two workers
    cache.fill(copies, read=read_binary_facts, recorded=recorded)
    with pytest.raises(AssertionError):  # without the claims both are missing
        cache.fill(copies, read=read_binary_facts)
