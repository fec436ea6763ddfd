"""`cudaresolve inspect` on a real NVIDIA wheel (read inside the zip), a directory, a dist name and bad input."""

import json

import pytest

from cudaresolve.cli import main


def test_inspect_wheel_reads_members_in_place(wheel, capsys, tmp_path, monkeypatch):
    whl = wheel("nvidia-cusparse-cu12==12.3.1.170")
    monkeypatch.chdir(tmp_path)
    assert main(["inspect", "--json", str(whl)]) == 0
    data = json.loads(capsys.readouterr().out)
    (lib,) = [l for l in data["libraries"] if l["path"].endswith("!nvidia/cusparse/lib/libcusparse.so.12")]
    assert lib["soname"] == "libcusparse.so.12"
    assert lib["runpath"] == ["$ORIGIN", "$ORIGIN/../../nvjitlink/lib"]
    (jit,) = [n for n in lib["needs"] if n["file"] == "libnvJitLink.so.12"]
    assert jit["min_version"] == "12.4"
    assert "__nvJitLinkComplete_12_4" in jit["symbols"]
    assert "sm_90" in lib["device_code"]["sass"]
    assert list(tmp_path.iterdir()) == []  # nothing extracted


def test_inspect_directory_and_text(wheel, unpacked, capsys):
    root = unpacked(wheel("nvidia-nvjitlink-cu12==12.1.105"))
    assert main(["inspect", str(root)]) == 0
    out = capsys.readouterr().out
    assert "libnvJitLink.so.12" in out
    assert "defines: libnvJitLink.so.12" in out


def test_inspect_installed_distribution_of_another_python(cuda_venv, capsys):
    venv = cuda_venv(["nvidia-nvjitlink-cu12==12.8.93"])
    assert main(["inspect", "--python", str(venv / "bin" / "python"), "nvidia-nvjitlink-cu12"]) == 0
    assert "nvidia/nvjitlink/lib/libnvJitLink.so.12" in capsys.readouterr().out


@pytest.mark.parametrize("content", [b"", b"not an elf at all"])
def test_inspect_a_file_that_is_not_elf_is_a_problem_found(tmp_path, capsys, content):
    bad = tmp_path / "x.so"
    bad.write_bytes(content)
    assert main(["inspect", str(bad)]) == 2
    assert capsys.readouterr() == (f"{bad}\n  error: not an ELF file, directory, wheel or installed distribution\n", "")


def test_inspect_unknown_name_is_reported_and_the_others_still_read(capsys):
    assert main(["inspect", "--json", "no-such-distribution-xyz", "/bin/sh"]) == 2
    out, err = capsys.readouterr()
    (unknown, sh) = json.loads(out)["libraries"]
    assert unknown["path"] == "no-such-distribution-xyz" and "no distribution of that name" in unknown["error"]
    assert sh["error"] is None and err == ""


def test_inspect_corrupt_wheel(tmp_path, capsys):
    bad = tmp_path / "x-1.0-py3-none-any.whl"
    bad.write_bytes(b"PK\x03\x04garbage")
    assert main(["inspect", str(bad)]) == 2
    assert "error: not a readable wheel" in capsys.readouterr().out
