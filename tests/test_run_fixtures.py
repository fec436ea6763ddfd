"""The fixtures built once per test run (tests/conftest.py): what one worker builds the others reuse,
and a venv copied by hard links takes pip's installs and removals without changing its template."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from conftest import built_once, linked_venv
from index_server import make_wheel


def test_built_once_builds_on_the_first_call_only(tmp_path_factory):
    builds = []

    def build(path: Path) -> None:
        builds.append(path)
        path.mkdir()
        (path / "made").write_text("1")

    first = built_once(tmp_path_factory, "built-once-case", build)
    again = built_once(tmp_path_factory, "built-once-case", build)
    assert first == again and builds == [first] and (first / "made").read_text() == "1"


def test_a_linked_copy_takes_pips_changes_and_leaves_its_template_as_it_was(venv_with_pip, tmp_path):
    template = venv_with_pip(tmp_path / "template")
    copy = linked_venv(template, tmp_path / "copy")
    site = next((copy / "lib").glob("python*/site-packages"))
    shared = next(site.glob("pip-*.dist-info")) / "RECORD"
    assert os.path.samefile(shared, template / shared.relative_to(copy))  # a link, not a copy
    assert str(copy) in (copy / "bin" / "pip").read_text() and str(template) not in (copy / "bin" / "pip").read_text()
    assert not os.path.samefile(copy / "pyvenv.cfg", template / "pyvenv.cfg")

    filename, data = make_wheel("linkedpkg", "1.0", files={"linkedpkg/__init__.py": b"X = 1\n"})
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / filename).write_bytes(data)
    python = str(copy / "bin" / "python")
    pip = [python, "-m", "pip", "--disable-pip-version-check", "--isolated"]
    subprocess.run([*pip, "install", "--no-index", "--find-links", str(wheels), "linkedpkg"], check=True, capture_output=True)
    subprocess.run([*pip, "uninstall", "-y", "setuptools"], check=True, capture_output=True)

    listed = subprocess.run([str(template / "bin" / "python"), "-m", "pip", "list", "--disable-pip-version-check", "--isolated"],
                            check=True, capture_output=True, text=True).stdout
    assert "setuptools" in listed and "linkedpkg" not in listed
    assert "linkedpkg" in subprocess.run([*pip, "list"], check=True, capture_output=True, text=True).stdout
