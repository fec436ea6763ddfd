"""`cudaresolve inspect` on a real NVIDIA wheel (read inside the zip), a directory, a dist name and bad input."""

import json
import struct

import pytest
from test_fatbin import container, cubin, entry, fatbin_library

from cudaresolve.cli import main


def test_inspect_wheel_reads_members_in_place(wheel, capsys, tmp_path, monkeypatch):
    whl = wheel("nvidia-cusparse-cu12==12.3.1.170")
    monkeypatch.chdir(tmp_path)
    assert main(["inspect", "--json", str(whl)]) == 0
    data = json.loads(capsys.readouterr().out)
    (lib,) = [lib for lib in data["libraries"] if lib["path"].endswith("!nvidia/cusparse/lib/libcusparse.so.12")]
    assert lib["soname"] == "libcusparse.so.12"
    assert lib["runpath"] == ["$ORIGIN", "$ORIGIN/../../nvjitlink/lib"]
    (jit,) = [n for n in lib["needs"] if n["file"] == "libnvJitLink.so.12"]
    assert jit["min_version"] == "12.4"
    assert "__nvJitLinkComplete_12_4" in jit["symbols"]
    assert "sm_90" in lib["device_code"]["sass"]
    assert list(tmp_path.iterdir()) == []  # nothing extracted


def test_inspect_directory_and_text(unpacked, capsys):
    root = unpacked("nvidia-nvjitlink-cu12==12.1.105")
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


def test_inspect_shows_damaged_device_code_in_text_and_json(elf_builder, capsys):
    good = container(entry(2, 80, cubin(80), version=(1, 7)))
    library = fatbin_library(elf_builder, good + good)
    data = bytearray(library.read_bytes())
    second = data.index(good, data.index(good) + 1)
    struct.pack_into("<Q", data, second + 8, 0x10)  # its fat_size
    library.write_bytes(bytes(data))
    note = f".nv_fatbin: device code unreadable from container 2 (offset {second:#x}) on: fat_size 0x10 cannot hold an entry"
    assert main(["inspect", str(library)]) == 0
    assert f"  device code: SASS sm_80\n    damaged: {note}\n" in capsys.readouterr().out
    assert main(["inspect", "--json", str(library)]) == 0
    (lib,) = json.loads(capsys.readouterr().out)["libraries"]
    assert (lib["device_code"]["sass"], lib["device_code"]["containers"], lib["device_code"]["damage"]) == (["sm_80"], 1, [note])
    struct.pack_into("<Q", data, 0x28, 0)  # e_shoff: nothing can be looked for
    library.write_bytes(bytes(data))
    assert main(["inspect", str(library)]) == 0
    out = capsys.readouterr().out
    assert "  device code: unknown, none could be read\n    damaged: no section header table: device code could not be looked for\n" in out


def test_inspect_shows_a_static_and_a_vendored_cuda_runtime_in_text_and_json(elf_builder, capsys):
    from test_elf import CUDART_MAP, CUDART_SOURCE, static_library

    static = static_library(elf_builder, "libstatic.so")
    vendored = elf_builder.build("libcudart-deadbeef.so.12.6.77", CUDART_SOURCE, soname="libcudart-deadbeef.so.12.6.77",
                                 version_script=CUDART_MAP.format(major=12))
    assert main(["inspect", str(static), str(vendored)]) == 0
    out = capsys.readouterr().out
    assert "; built by CUDA 13.4.92 (cubin toolkit note)\n  CUDA runtime: linked in statically, CUDA 13.4.92 (from the toolkit note)\n" in out
    assert "  CUDA runtime: this file is a CUDA runtime (libcudart), CUDA 12.6.77 (from the file name)\n" in out
    assert main(["inspect", "--json", str(static), str(vendored)]) == 0
    first, second = json.loads(capsys.readouterr().out)["libraries"]
    assert first["device_code"]["toolkit"] == "13.4.92"
    assert first["cuda_runtime"] == {"linkage": "static", "major": 13, "release": "13.4.92", "release_from": "toolkit note"}
    assert (second["device_code"], second["cuda_runtime"]) == (
        None, {"linkage": "shared", "major": 12, "release": "12.6.77", "release_from": "file name"})
