"""`--deep` that finishes: releases are tried in the order most likely to fit (the table's rows whose
device code runs on the stated GPU, newest first, which is the doctor's own recommendation; then
releases without a row, which must be read; then rows known not to run), so the lock reads no wheel
while a release known to run is left; and whole-file downloads stop at a budget, with one line
saying so. Served over HTTP on 127.0.0.1, so what is downloaded is counted: nvidia-cudnn-cu12
9.27.0.42 (the table's row: no sm_61), 9.26.9.9 (no row; its fatbin has no sm_61) and 9.10.2.21
(the table's row: sm_61 in every library), for a GTX 1080 (6.1)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_cuda_index import Library, _compile
from fatbin_bytes import container, cubin, entry
from index_server import make_wheel

from cudaresolve.cli import main
from cudaresolve.lockfile.pylock import read_pylock

pytestmark = pytest.mark.usefixtures("hermetic")

GTX_1080 = ("--driver", "550.144.03", "--gpu", "6.1")
TAG = "py3-none-manylinux_2_27_x86_64"
KNOWN_BAD, UNKNOWN, KNOWN_GOOD = "9.27.0.42", "9.26.9.9", "9.10.2.21"
MEMBER = "nvidia/cudnn/lib/libcudnn_ops.so.9"


@pytest.fixture
def cudnn(server, tmp_path, elf_builder) -> dict[str, str]:
    """The three releases on the server: version -> the path of its wheel there."""
    def library(sms: tuple[int, ...]) -> bytes:
        fatbin = container(*(entry(2, sm, cubin(sm), version=(1, 7)) for sm in sms))
        return _compile(Library(MEMBER, "libcudnn_ops.so.9", ("cudnnCreate",), fatbin=fatbin), tmp_path)

    without, good = library((75, 80, 90)), library((60, 61, 70, 75, 80, 90))
    paths = {}
    for version, member in ((KNOWN_BAD, without), (UNKNOWN, without), (KNOWN_GOOD, good)):
        filename, data = make_wheel("nvidia-cudnn-cu12", version, tag=TAG, files={MEMBER: member})
        server.add(filename, data)
        paths[version] = f"/files/{filename}"
    return paths


def lock(server, python: str, out: Path, capsys, *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["lock", "-q", *argv, *GTX_1080, "--python", python, "--index-url", server.url + "/simple", "-o", str(out)])
    return code, capsys.readouterr().err


def read_files(server, paths: dict[str, str]) -> set[str]:
    """The versions whose wheel was read, whole or by range (its metadata is its own file)."""
    return {version for version, path in paths.items() for requested, _ in server.requests if requested == path}


@pytest.mark.parametrize("deep", [False, True])
def test_the_release_known_to_run_is_taken_and_the_known_bad_one_never_planned(server, cudnn, empty_python, tmp_path, capsys, deep):
    """The row known not to run (newer) is set aside by its row, naming the GPU, before any plan holds
    it; the release without a row (newer) ranks below the row known to run. The lock takes 9.10.2.21
    with and without --deep alike, reading no wheel whole."""
    code, err = lock(server, empty_python, tmp_path / "pylock.toml", capsys, "nvidia-cudnn-cu12", *(["--deep"] if deep else []))
    assert code == 0, err
    made = read_pylock(str(tmp_path / "pylock.toml"))
    assert {p.name: str(p.version) for p in made.packages} == {"nvidia-cudnn-cu12": KNOWN_GOOD}
    rejected = {str(r.candidate.version): r.evidence.rule.value for d in made.decisions for r in d.rejected}
    assert rejected.get(KNOWN_BAD) == "device-code", rejected
    assert read_files(server, cudnn) == set()


@pytest.mark.parametrize("deep", [False, True])
def test_without_a_release_known_to_run_the_unknown_one_is_read_before_the_known_bad_one(server, cudnn, empty_python, tmp_path, capsys, deep):
    """Above 9.10.2.21 the release without a row is read first (its fatbin has no sm_61), then the row
    known not to run is refused as the doctor refuses it: exit 2 naming the GPU, with and without --deep."""
    code, err = lock(server, empty_python, tmp_path / "pylock.toml", capsys, f"nvidia-cudnn-cu12>{KNOWN_GOOD}",
                     *(["--deep"] if deep else []))
    assert code == 2 and "6.1" in err and UNKNOWN in err and KNOWN_BAD in err, err
    assert UNKNOWN in read_files(server, cudnn)


def test_a_spent_download_budget_stops_the_lock_in_one_line(server, cudnn, empty_python, tmp_path, capsys):
    """The release without a row must be read: a budget one byte short of its wheel stops the lock
    before downloading it, exit 3 in one line; its size lets the read and the judgement finish."""
    server.ranges = False  # read whole: a download, which the budget checks before its first byte
    size = len(server.file(cudnn[UNKNOWN].rsplit("/", 1)[1]))
    asked = f"nvidia-cudnn-cu12=={UNKNOWN}"
    code, err = lock(server, empty_python, tmp_path / "pylock.toml", capsys, asked, "--deep", "--download-budget", str(size - 1))
    assert code == 3, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err
    assert lines[0].endswith(f"does not fit in what is left of the download budget: 0 bytes of {size - 1:,} bytes downloaded "
                             "already; --download-budget raises it"), err
    assert not [path for path, headers in server.requests if path == cudnn[UNKNOWN] and "Range" not in headers]  # no download
    code, err = lock(server, empty_python, tmp_path / "pylock.toml", capsys, asked, "--deep", "--download-budget", str(size))
    assert code == 2 and "6.1" in err, err
    assert read_files(server, cudnn) == {UNKNOWN}


def test_a_download_budget_that_is_no_size_is_refused(empty_python, tmp_path, capsys):
    code = main(["lock", "-q", "--python", empty_python, "--no-index", "demo", "--download-budget", "lots"])
    assert code == 3
    assert "--download-budget 'lots': not a size" in capsys.readouterr().err


def test_a_wheel_mostly_not_shared_objects_is_read_by_range(server, tmp_path, elf_builder):
    """A wheel of one small library beside 4 MB of other data: its facts are read by range (its tail,
    then the library's member, each counted against the budget), the same facts a whole read gives,
    for a small part of its bytes; a host that answers ranges with the whole file gets a whole read."""
    import os

    from cudaresolve.binary.wheel import read_wheel
    from cudaresolve.index.cache import IndexCache
    from cudaresolve.index.http import Http
    from cudaresolve.index.pages import index_files
    from cudaresolve.index.wheel_facts import wheel_binary_facts

    fatbin = container(entry(2, 61, cubin(61), version=(1, 7)))
    library = _compile(Library(MEMBER, "libcudnn_ops.so.9", ("cudnnCreate",), fatbin=fatbin), tmp_path)
    filename, data = make_wheel("nvidia-cudnn-cu12", "9.99.0.1", tag=TAG,
                                files={MEMBER: library, "nvidia/cudnn/data.bin": os.urandom(4 << 20)})
    server.add(filename, data)

    def facts(cache: str):
        http = Http()
        (file,) = index_files(http, IndexCache(str(tmp_path / cache)), server.url + "/simple", "nvidia-cudnn-cu12")
        return wheel_binary_facts(http, IndexCache(str(tmp_path / cache)), file, deep=True), http.downloaded

    ranged, spent = facts("ranged")
    sent = server.sent[f"/files/{filename}"]
    assert sent < len(data) // 20 and spent == sent, (sent, spent, len(data))
    whole = read_wheel(__import__("io").BytesIO(data), filename)
    assert [(m.path.split("!")[1], m.needed) for m in ranged.members] == [(m.path.split("!")[1], m.needed) for m in whole.members]
    assert [m.fatbin.sass for m in ranged.members if m.fatbin] == [("sm_61",)]
    server.ranges = False
    server.sent.clear()
    assert [m.path for m in facts("whole")[0].members] == [m.path for m in ranged.members]
    assert server.sent[f"/files/{filename}"] >= len(data)
