"""Each input that used to crash a command with a traceback (exit 1) now ends it with exit 3 and one
line naming the input, or, in `inspect`, with exit 2 and the entry's reason: one test per class."""

from __future__ import annotations

import json

import pytest
from budget import budgeted

from cudaresolve.cli import main

HOST = ["--driver", "550.54.14", "--gpu", "8.6"]


def could_not_run(capsys, argv: list[str]) -> str:
    """The one line a command that could not run prints (exit 3, nothing on stdout)."""
    code = main(argv)
    out, err = capsys.readouterr()
    assert (code, out) == (3, ""), err
    assert err.startswith("cudaresolve: error: ") and err.count("\n") == 1, err
    return err[len("cudaresolve: error: "):-1]


@pytest.fixture
def no_overrides(monkeypatch):
    for name in ("CUDARESOLVE_DRIVER", "CUDARESOLVE_CUDA", "CUDARESOLVE_GPUS", "CONDA_OVERRIDE_CUDA",
                 "CONDA_OVERRIDE_CUDA_ARCH", "UV_CUDA_DRIVER_VERSION"):
        monkeypatch.delenv(name, raising=False)


@budgeted
def test_a_host_file_nested_thousands_deep(capsys, tmp_path, no_overrides):
    (tmp_path / "host.json").write_text("[" * 100_000 + "]" * 100_000)
    for command in (["probe"], ["doctor", "--example"], ["lock", "x", "--index-url", str(tmp_path)]):
        assert could_not_run(capsys, [*command, "--host", str(tmp_path / "host.json")]).endswith(
            "host.json: not valid JSON (nested too deeply)")


@pytest.mark.parametrize("where", ["host JSON", "pyproject", "tool.cudaresolve"])
@budgeted
def test_an_integer_past_pythons_4300_digit_limit(capsys, tmp_path, monkeypatch, no_overrides, where):
    huge = "9" * 5000
    monkeypatch.chdir(tmp_path)
    if where == "host JSON":
        (tmp_path / "host.json").write_text('{"schema": 1, "gpus": [{"memory_mib": %s}]}' % huge)
        argv = ["probe", "--host", "host.json"]
    elif where == "pyproject":
        (tmp_path / "pyproject.toml").write_text(f'[project]\nname = "p"\nx = {huge}\n')
        argv = ["lock", "--project", ".", *HOST]
    else:  # the project's [tool.cudaresolve], read for the index configuration of every command that uses one
        (tmp_path / "pyproject.toml").write_text(f"[tool.cudaresolve]\nx = {huge}\n")
        argv = ["inspect", "--index-url", str(tmp_path), "x==1"]
    assert "Exceeds the limit (4300 digits) for integer string conversion: value has 5000 digits" in could_not_run(capsys, argv)


@pytest.mark.parametrize("table", ["project", "tool.cudaresolve"])
@budgeted
def test_toml_nested_past_the_parsers_depth(capsys, tmp_path, monkeypatch, table):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text(f"[{table}]\nx = " + "[" * 5000 + "]" * 5000 + "\n")
    argv = ["lock", "--project", ".", *HOST] if table == "project" else ["inspect", "--index-url", str(tmp_path), "x==1"]
    assert could_not_run(capsys, argv).endswith("pyproject.toml: not valid TOML (nested too deeply)" if table == "project"
                                                 else "pyproject.toml: not valid TOML: nested too deeply")


@pytest.mark.parametrize(
    "data, reason",
    [
        (b"# -*- coding: undefined -*-\npkg\n", "r.txt: not undefined (decoding with 'undefined' codec failed"),
        (b"pkg\n\x00\n", "r.txt:2: a NUL character: not a text file"),
        (b"# coding: latin-1\npkg\xff\n", "r.txt:2: not a valid requirement"),
    ],
)
@budgeted
def test_a_requirements_file_that_does_not_decode(capsys, tmp_path, data, reason):
    (tmp_path / "r.txt").write_bytes(data)
    assert reason in could_not_run(capsys, ["lock", "-r", str(tmp_path / "r.txt"), *HOST])


@budgeted
def test_a_requirement_chain_1200_deep_and_a_cycle(capsys, tmp_path):
    for i in range(1200):
        (tmp_path / f"r{i}.txt").write_text(f"-r r{i + 1}.txt\n")
    (tmp_path / "r1200.txt").write_text("pkg\n")
    assert could_not_run(capsys, ["lock", "-r", str(tmp_path / "r0.txt"), *HOST]).endswith(
        "r99.txt:1: -r r100.txt: files include files more than 100 deep")
    (tmp_path / "a.txt").write_text("-c b.txt\n")
    (tmp_path / "b.txt").write_text("-r a.txt\n")
    assert "files include each other" in could_not_run(capsys, ["lock", "-r", str(tmp_path / "a.txt"), *HOST])


@budgeted
def test_a_file_url_that_does_not_exist_in_inspect(capsys, tmp_path):
    url = (tmp_path / "gone" / "pkg-1.0-py3-none-any.whl").as_uri()
    assert main(["inspect", url]) == 2
    out, err = capsys.readouterr()
    assert (out, err) == (f"{url}\n  error: cannot read '{tmp_path}/gone/pkg-1.0-py3-none-any.whl': No such file or directory\n", "")


@budgeted
def test_a_version_that_is_not_pep_440_deep_in_the_plan(capsys, tmp_path):
    """`install --lock` compares each locked version with the installed one; a lock from elsewhere may say anything."""
    (tmp_path / "pylock.toml").write_text(
        'lock-version = "1.0"\ncreated-by = "cudaresolve"\n\n[[packages]]\nname = "foo"\nversion = "1.0"\n'
        'wheels = [{url = "https://x.invalid/foo-1.0-py3-none-any.whl", hashes = {sha256 = "%s"}}]\n\n'
        '[[tool.cudaresolve.kept]]\nname = "bar"\nversion = "1.0-garbage"\n' % ("0" * 64)
    )
    assert "1.0-garbage" in could_not_run(capsys, ["install", "--lock", str(tmp_path / "pylock.toml"), "--dry-run", *HOST])


def _claims(data: bytearray, info, size: int) -> None:
    """Make the local header and the central directory entry of `info` claim `size` uncompressed bytes."""
    import struct

    struct.pack_into("<I", data, info.header_offset + 22, size)
    entry = data.find(b"PK\x01\x02")
    while entry != -1:
        (offset,) = struct.unpack_from("<I", data, entry + 42)
        if offset == info.header_offset:
            struct.pack_into("<I", data, entry + 24, size)
            return
        entry = data.find(b"PK\x01\x02", entry + 4)
    raise AssertionError("no central directory entry")


@pytest.mark.parametrize("method", ["stored", "deflated"])
@pytest.mark.parametrize(
    "claim, error",
    [
        (0xFFFF_FFFF, "x/libx.so claims 4,294,967,295 bytes, over the limit of 2,147,483,648 for one member"),
        (0x7FFF_0000, "not a readable wheel (x/libx.so: "),  # under the member limit: read, never allocated
    ],
)
@budgeted
def test_a_wheel_member_claiming_gigabytes_is_not_allocated(capsys, tmp_path, elf_builder, method, claim, error):
    """inspect reads a wheel in place: a member whose headers claim gigabytes is an error, refused by
    the member limit or found short while inflating, and memory stays small either way."""
    import tracemalloc
    import zipfile

    library = elf_builder.build("libx.so", "int x(void) { return 1; }\n", soname="libx.so")
    wheel = tmp_path / "x-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_STORED if method == "stored" else zipfile.ZIP_DEFLATED) as archive:
        archive.write(library, "x/libx.so")
    data = bytearray(wheel.read_bytes())
    with zipfile.ZipFile(wheel) as archive:
        _claims(data, archive.getinfo("x/libx.so"), claim)
    wheel.write_bytes(bytes(data))
    tracemalloc.start()
    try:
        assert main(["inspect", str(wheel)]) == 2
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    out, err = capsys.readouterr()
    assert err == "" and out.startswith(f"{wheel}\n  error: {error}")
    assert peak < 50 * 1024 * 1024


@budgeted
def test_a_fifo_for_a_pyproject_is_refused_not_waited_on(capsys, tmp_path, monkeypatch):
    """Every command that uses an index reads the current directory's pyproject.toml ([tool.cudaresolve])."""
    import os
    import threading

    monkeypatch.chdir(tmp_path)
    os.mkfifo(tmp_path / "pyproject.toml")
    done = []
    command = threading.Thread(target=lambda: done.append(could_not_run(capsys, ["inspect", "--index-url", str(tmp_path), "x==1"])),
                               daemon=True)
    command.start()
    command.join(10)
    assert done == [f"{tmp_path}/pyproject.toml: cannot be read: not a regular file"]


@budgeted
def test_a_fifo_for_a_pip_configuration_file_is_refused_not_waited_on(capsys, tmp_path, monkeypatch):
    """The target's prefix holds a pip.conf pip reads (site configuration): an environment may plant a FIFO there."""
    import os
    import threading

    os.mkfifo(tmp_path / "pip.conf")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(tmp_path / "pip.conf"))
    done = []
    command = threading.Thread(target=lambda: done.append(could_not_run(capsys, ["inspect", "--index-url", str(tmp_path), "x==1"])),
                               daemon=True)
    command.start()
    command.join(10)
    assert done == [f"pip configuration file {tmp_path}/pip.conf: not a regular file"]


@pytest.mark.parametrize("where", ["command line", "nested"])
@pytest.mark.parametrize("option", ["-r", "-c"])
def test_a_fifo_for_a_requirements_or_constraints_file_is_refused_not_waited_on(capsys, tmp_path, monkeypatch, where, option):
    """pip waits on a FIFO named by -r or -c; cudaresolve reads regular files only, on its command line
    and inside a requirements file."""
    import os
    import threading

    monkeypatch.chdir(tmp_path)
    os.mkfifo(tmp_path / "fifo.txt")
    if where == "nested":
        (tmp_path / "requirements.txt").write_text(f"{option} fifo.txt\nsix\n")
        given = ["-r", str(tmp_path / "requirements.txt")]
    else:
        given = [option, str(tmp_path / "fifo.txt"), "six"]
    done = []
    command = threading.Thread(target=lambda: done.append(could_not_run(capsys, ["lock", *given, "--no-index", *HOST])),
                               daemon=True)
    command.start()
    command.join(10)
    assert done == [f"cannot read {tmp_path / 'fifo.txt'}: not a regular file"]


@pytest.mark.parametrize("command", [["lock", "--check"], ["install", "--dry-run", "--lock"], ["why", "six", "--lock"]])
def test_a_fifo_for_a_lock_file_is_refused_not_waited_on(capsys, tmp_path, command):
    """A lock file is read only when it is a regular file: a FIFO with no writer would block
    `lock --check`, `install --lock` and `why` forever."""
    import os
    import threading

    os.mkfifo(tmp_path / "pylock.toml")
    done = []
    argv = [*command, str(tmp_path / "pylock.toml")] + (list(HOST) if command[0] != "why" else [])
    runner = threading.Thread(target=lambda: done.append(could_not_run(capsys, argv)), daemon=True)
    runner.start()
    runner.join(10)
    assert done == [f"cannot read {tmp_path / 'pylock.toml'}: not a regular file"]


@pytest.mark.parametrize("escape", ["\x1b]0;owned\x07", "\r", "\x9b2J", "\x00"])
@budgeted
def test_a_host_file_string_with_a_terminal_control_is_refused_not_printed(capsys, tmp_path, no_overrides, escape):
    """A GPU name (or any string) in a host file holding a control character is an input error
    naming the key, and the character never reaches the terminal."""
    assert main(["probe", "--json", *HOST]) == 0
    facts = json.loads(capsys.readouterr().out)
    facts["gpus"][0]["name"] = "NVIDIA RTX" + escape
    (tmp_path / "host.json").write_text(json.dumps(facts))
    line = could_not_run(capsys, ["probe", "--host", str(tmp_path / "host.json")])
    assert line.endswith(f"gpus[0].name: holds the control character U+{ord(escape[0]):04X}"), line
    assert escape[0] not in line
