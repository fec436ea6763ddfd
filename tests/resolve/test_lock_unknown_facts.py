"""A release whose device code the tables do not know is not taken as fitting: for a stated GPU it is
ranked below every release whose device code is known, and when it is chosen the plan reads its
wheel, so `lock` and `lock --deep` give the same answer. Find-links wheels of nvidia-cudnn-cu12:
9.27.0.42 (the table's row: no sm_61), 9.26.9.9 (no row; its library's fatbin has no sm_61) and
9.10.2.21 (the table's row: sm_61 in every library)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_cuda_index import Library, _compile
from fatbin_bytes import container, cubin, entry
from index_server import make_wheel

from cudaresolve.cli import main
from cudaresolve.knowledge import wheel_facts

pytestmark = pytest.mark.usefixtures("hermetic")

GTX_1080 = ("--driver", "550.144.03", "--gpu", "6.1")
TAG = "py3-none-manylinux_2_27_x86_64"
KNOWN_BAD, UNKNOWN, KNOWN_GOOD = "9.27.0.42", "9.26.9.9", "9.10.2.21"


MEMBER = "nvidia/cudnn/lib/libcudnn_ops.so.9"


def _library(sms: tuple[int, ...], scratch: Path) -> bytes:
    """A cuDNN library (gcc-built) whose fatbin holds a cubin per SASS arch of `sms`."""
    fatbin = container(*(entry(2, sm, cubin(sm), version=(1, 7)) for sm in sms))
    return _compile(Library(MEMBER, "libcudnn_ops.so.9", ("cudnnCreate",), fatbin=fatbin), scratch)


def _cudnn_wheel(links: Path, version: str, library: bytes) -> None:
    filename, data = make_wheel("nvidia-cudnn-cu12", version, tag=TAG, files={MEMBER: library})
    (links / filename).write_bytes(data)


@pytest.fixture
def cudnn_links(tmp_path, elf_builder) -> Path:
    """The three releases, each wheel with one library whose fatbin holds the SASS its row (or, for
    the one without a row, this test) says."""
    assert wheel_facts.find("nvidia-cudnn-cu12", UNKNOWN) is None
    links, scratch = tmp_path / "links", tmp_path / "scratch"
    links.mkdir()
    scratch.mkdir()
    without = _library((75, 80, 90), scratch)
    _cudnn_wheel(links, KNOWN_BAD, without)
    _cudnn_wheel(links, UNKNOWN, without)
    _cudnn_wheel(links, KNOWN_GOOD, _library((60, 61, 70, 75, 80, 90), scratch))
    return links


def lock(capsys, links: Path, python: str, out: Path, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["lock", "-q", *argv, *GTX_1080, "--python", python, "--no-index", "--find-links", str(links),
                 "-o", str(out)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def locked(path: Path) -> dict[str, str]:
    from cudaresolve.lockfile.pylock import read_pylock

    return {p.name: str(p.version) for p in read_pylock(str(path)).packages}


@pytest.mark.parametrize("deep", [False, True])
def test_a_release_of_unknown_device_code_is_not_taken_over_one_known_to_run(cudnn_links, empty_python, tmp_path, capsys, deep):
    code, _, err = lock(capsys, cudnn_links, empty_python, tmp_path / "pylock.toml", "nvidia-cudnn-cu12",
                        *(["--deep"] if deep else []))
    assert code == 0, err
    assert locked(tmp_path / "pylock.toml")["nvidia-cudnn-cu12"] == KNOWN_GOOD


@pytest.mark.parametrize("deep", [False, True])
def test_a_release_of_unknown_device_code_is_read_and_refused_naming_the_gpu(cudnn_links, empty_python, tmp_path, capsys, deep):
    """Without a release known to run, the one without a row is read: its fatbin has no sm_61."""
    code, _, err = lock(capsys, cudnn_links, empty_python, tmp_path / "pylock.toml", f"nvidia-cudnn-cu12>{KNOWN_GOOD}",
                        *(["--deep"] if deep else []))
    assert code == 2, err
    assert "6.1" in err and UNKNOWN in err, err
    assert not (tmp_path / "pylock.toml").exists()


def test_a_release_whose_wheel_cannot_be_read_is_refused_as_not_known(cudnn_links, empty_python, tmp_path, capsys, monkeypatch):
    """The release without a row cannot be read (as --offline without it cached): it is set aside as
    not known, never joined to the plan unread."""
    from cudaresolve.index.access import PackageIndex
    from cudaresolve.index.cache import OfflineMiss

    read = PackageIndex.binary_facts

    def unreadable(self, file, **options):
        if str(file.version) == UNKNOWN:
            raise OfflineMiss(f"--offline: the binary facts of {file.filename} are not in the cache")
        return read(self, file, **options)

    monkeypatch.setattr(PackageIndex, "binary_facts", unreadable)
    code, _, err = lock(capsys, cudnn_links, empty_python, tmp_path / "pylock.toml", f"nvidia-cudnn-cu12=={UNKNOWN}")
    assert code == 2, err
    assert err.startswith(f"cudaresolve: error: nothing fits nvidia-cudnn-cu12=={UNKNOWN}"), err
    assert (f"nvidia-cudnn-cu12 {UNKNOWN}: its binaries are not known (no table row) and its wheel could not be read: "
            "--offline") in err
    assert not (tmp_path / "pylock.toml").exists()


def test_a_component_the_table_holds_no_release_of_is_read_for_a_stated_gpu(tmp_path, elf_builder, empty_python, capsys):
    """On the real survey, torch 2.7.1's nvidia-cusparselt-cu12 0.6.3 (sm_80 to sm_90 only; the table
    holds no release of it) was locked for a 6.1 GPU unread, and the doctor refused it after install."""
    assert not wheel_facts.releases("nvidia-cusparselt-cu12", "x86_64")
    links, scratch = tmp_path / "links", tmp_path / "scratch"
    links.mkdir()
    scratch.mkdir()
    member = "nvidia/cusparselt/lib/libcusparseLt.so.0"
    fatbin = container(*(entry(2, sm, cubin(sm), version=(1, 7)) for sm in (80, 86, 90)))
    library = _compile(Library(member, "libcusparseLt.so.0", ("cusparseLtInit",), fatbin=fatbin), scratch)
    filename, data = make_wheel("nvidia-cusparselt-cu12", "0.6.3", tag=TAG, files={member: library})
    (links / filename).write_bytes(data)
    code, _, err = lock(capsys, links, empty_python, tmp_path / "pylock.toml", "nvidia-cusparselt-cu12")
    assert code == 2, err
    assert "6.1" in err and "0.6.3" in err, err
