"""`cudaresolve inspect NAME==VERSION` and wheel URLs through a local index: the table first, else the
wheel downloaded once (size shown first) and its facts cached by sha256; --offline, --deep, errors."""

from __future__ import annotations

import json

import pytest
from index_server import make_wheel

from cudaresolve.cli import main
from cudaresolve.knowledge import wheel_facts

LIB = "int foo_v2(void) { return 2; }\n"


@pytest.fixture
def foo_wheel(elf_builder):
    lib = elf_builder.build("libfoo.so.1", LIB, soname="libfoo.so.1", version_script="FOO_2 { global: foo_v2; local: *; };")
    return make_wheel("foo", "1.0", files={"foo/lib/libfoo.so.1": lib.read_bytes(), "foo/__init__.py": b""})


def inspect(server, *names, extra=()):
    return main(["inspect", "--json", "--index-url", server.url + "/simple", *extra, *names])


def libraries(capsys) -> list[dict]:
    return json.loads(capsys.readouterr().out)["libraries"]


def test_a_wheel_the_table_lacks_is_downloaded_once_then_cached(server, hermetic, foo_wheel, capsys):
    filename, data = foo_wheel
    server.add(filename, data)
    assert inspect(server, "foo==1.0") == 0
    out, err = capsys.readouterr()
    (lib,) = json.loads(out)["libraries"]
    assert lib["path"] == f"{filename}!foo/lib/libfoo.so.1" and lib["source"] == "file"
    assert lib["soname"] == "libfoo.so.1" and lib["defines"] == ["FOO_2"]
    assert f"downloading {filename} ({len(data) / 1e6:,.1f} MB)" in err
    assert server.sent[f"/files/{filename}"] == len(data)
    requests = len(server.requests)
    assert inspect(server, "foo==1.0", extra=["--offline"]) == 0
    assert libraries(capsys)[0]["defines"] == ["FOO_2"]
    assert len(server.requests) == requests  # page and facts from the cache
    assert inspect(server, "foo==1.0", extra=["--refresh"]) == 0
    assert server.sent[f"/files/{filename}"] == 2 * len(data)


def test_a_wheel_the_table_knows_is_not_downloaded(server, hermetic, capsys):
    row = wheel_facts.find("nvidia-cusparse-cu12", "12.3.1.170", machine="x86_64")
    server.add(row.filename, b"not the real wheel: never read", metadata=False)
    assert inspect(server, "nvidia-cusparse-cu12==12.3.1.170") == 0
    (lib,) = [entry for entry in libraries(capsys) if entry["soname"] == "libcusparse.so.12"]
    assert lib["source"] == "table"
    (need,) = [n for n in lib["needs"] if n["file"] == "libnvJitLink.so.12"]
    assert need["min_version"] == "12.4" and "__nvJitLinkComplete_12_4" in need["symbols"]
    assert not any(path.startswith("/files/") for path in server.paths())
    assert inspect(server, "nvidia-cusparse-cu12==12.3.1.170", extra=["--deep"]) == 2  # the wheel itself is garbage
    assert "not a readable wheel" in libraries(capsys)[0]["error"]


def test_a_wheel_url(server, hermetic, foo_wheel, capsys):
    filename, data = foo_wheel
    server.add(filename, data)
    assert inspect(server, f"{server.url}/files/{filename}") == 0
    assert libraries(capsys)[0]["soname"] == "libfoo.so.1"


def test_the_wheel_pip_would_take_and_yanked_only_as_a_last_resort(server, hermetic, foo_wheel, elf_builder, capsys):
    filename, data = foo_wheel
    server.add(filename, data, yanked="bad build")
    server.add(*make_wheel("foo", "1.0", tag="cp27-cp27m-manylinux1_x86_64"))  # fits no Python 3
    assert inspect(server, "foo==1.0") == 0
    assert libraries(capsys)[0]["path"].startswith(filename)


def test_names_that_cannot_be_had_are_errors_and_the_rest_is_read(server, hermetic, foo_wheel, capsys):
    filename, data = foo_wheel
    server.add(filename, data)
    assert inspect(server, "foo==2.0", "foo>=1", "foo==1.0", f"{server.url}/files/README") == 2
    missing, loose, found, url = libraries(capsys)
    assert missing["error"] == f"no wheel of foo 2.0 fits this interpreter on {server.url}/simple"
    assert loose["error"].startswith("give one exact version")
    assert found["soname"] == "libfoo.so.1"
    assert url["error"] == "a URL to inspect must name a .whl file"


def test_offline_miss_is_an_error_for_that_name(server, hermetic, capsys):
    assert inspect(server, "foo==1.0", extra=["--offline"]) == 2
    assert "--offline: the page" in libraries(capsys)[0]["error"]
    assert server.requests == []


def test_an_unreachable_index_is_a_one_line_error(hermetic, capsys, monkeypatch):
    monkeypatch.setenv("PIP_RETRIES", "0")  # pip's --retries: no waits for an index that is not there
    assert main(["inspect", "--index-url", "http://127.0.0.1:9/simple", "foo==1.0"]) == 2
    out = capsys.readouterr().out
    assert "cannot connect" in out and "127.0.0.1:9/simple/foo/" in out
