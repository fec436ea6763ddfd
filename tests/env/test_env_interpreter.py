"""The target environment: the running interpreter, another one asked in a subprocess, or a directory."""

from __future__ import annotations

import json
import os
import platform
import stat
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest
from packaging.markers import default_environment

from cudaresolve.env.errors import EnvError
from cudaresolve.env.interpreter import (
    Target,
    running_target,
    target_for,
    target_for_python,
    target_for_site_packages,
)
from cudaresolve.errors import CudaresolveError, UsageError


def _venv(root: Path) -> Path:
    """A bare venv (no pip): enough for an interpreter with its own prefix and site-packages."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    return root / "bin" / "python"


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_running_target_is_this_interpreter():
    target = running_target()
    assert target.python == sys.executable
    assert target.prefix == sys.prefix
    assert target.site_packages[0] == os.path.normpath(sysconfig.get_paths()["purelib"])
    assert target.version == platform.python_version()
    assert target.implementation == sys.implementation.name
    assert target.machine == platform.machine()
    assert target.marker_environment() == default_environment()
    assert target_for() == target


def test_another_venv_is_asked_for_its_paths(tmp_path):
    python = _venv(tmp_path / "venv")
    target = target_for_python(str(python))
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    assert target == Target(
        site_packages=(str(tmp_path / "venv" / "lib" / version / "site-packages"),),
        python=str(python),
        executable=str(python),  # sys.executable: the venv's own name for it
        prefix=str(tmp_path / "venv"),
        version=platform.python_version(),
        implementation=sys.implementation.name,
        machine=platform.machine(),
        conda=False,
        stdlib=sysconfig.get_path("stdlib"),  # a venv's stdlib is its base interpreter's
        venv=True,
        markers=tuple(sorted(default_environment().items())),  # the same base interpreter as this one
    )
    assert target_for(python=str(python)) == target


def test_conda_env_is_recognised_by_conda_meta(tmp_path):
    python = _venv(tmp_path / "env")
    (tmp_path / "env" / "conda-meta").mkdir()
    assert target_for_python(str(python)).conda is True


def test_interpreter_found_on_path_by_name(tmp_path, monkeypatch):
    python = _venv(tmp_path / "venv")
    monkeypatch.setenv("PATH", str(python.parent))
    assert target_for_python("python").prefix == str(tmp_path / "venv")


def test_site_packages_directory_target(tmp_path):
    assert target_for(site_packages=str(tmp_path)) == Target(site_packages=(str(tmp_path),))
    assert Target(site_packages=(str(tmp_path),)).marker_environment() is None
    assert target_for_site_packages(str(tmp_path) + "/x/..") == Target(site_packages=(str(tmp_path),))


def _odd_answer() -> str:
    """Every field present, but the markers are not a table."""
    answer = {field: "x" for field in ("purelib", "platlib", "prefix", "version", "implementation", "machine")}
    answer.update(conda=False, markers=["linux"])
    return f"echo '{json.dumps(answer)}'\n"


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda d: d / "missing" / "python", "interpreter {} does not exist"),
        (lambda d: d, "{} is a directory; give the interpreter, e.g. {}/bin/python"),
        (lambda d: _script(d / "quiet", "exit 0\n"), "{} did not answer like a Python interpreter"),
        (lambda d: _script(d / "chatty", "echo '{\"purelib\": 1}'\n"), "{} did not answer like a Python interpreter"),
        (lambda d: _script(d / "odd", _odd_answer()), "{} did not answer like a Python interpreter"),
        (
            lambda d: _script(d / "crash", "echo 'Fatal Python error: init' >&2\nexit 3\n"),
            "{} is not a usable Python interpreter (exit status 3: Fatal Python error: init)",
        ),
    ],
    ids=["missing", "directory", "no-output", "wrong-answer", "wrong-types", "crash"],
)
def test_unusable_interpreters_give_clear_errors(tmp_path, make, message):
    path = make(tmp_path)
    with pytest.raises(EnvError) as excinfo:
        target_for_python(str(path))
    assert str(excinfo.value) == message.format(path, path)
    assert excinfo.value.exit_code == 3
    assert isinstance(excinfo.value, CudaresolveError)


def test_non_executable_file(tmp_path):
    path = tmp_path / "python"
    path.write_text("not a program")
    with pytest.raises(EnvError, match=f"^cannot run {path}: Permission denied$"):
        target_for_python(str(path))


def test_unknown_name_on_path(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EnvError, match="^no interpreter named python9 on PATH$"):
        target_for_python("python9")


def test_hanging_interpreter_times_out_and_its_children_are_ended(tmp_path):
    pid_file = tmp_path / "child.pid"
    hang = _script(tmp_path / "hang", f"sleep 30 &\necho $! > {pid_file}\nwait\n")
    with pytest.raises(EnvError, match=f"^{hang} did not answer within 0.5 s$"):
        target_for_python(str(hang), timeout=0.5)
    status = Path(f"/proc/{int(pid_file.read_text())}/status")

    def ended() -> bool:
        try:
            return "State:\tZ" in status.read_text()
        except FileNotFoundError:
            return True

    # The grandchild got SIGKILL with the process group; it is gone (or a zombie) once the kernel delivers it.
    for _ in range(100):
        if ended():
            break
        time.sleep(0.05)
    assert ended()


def test_both_options_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match="^give --python or --site-packages, not both$"):
        target_for(python=sys.executable, site_packages=str(tmp_path))


def test_missing_site_packages_directory(tmp_path):
    missing = tmp_path / "nope"
    with pytest.raises(EnvError, match=f"^site-packages directory {missing} does not exist or is not a directory$"):
        target_for_site_packages(str(missing))


def test_the_target_runs_none_of_its_pth_files_or_sitecustomize(tmp_path):
    """-I -S: a .pth line that imports runs code at every start of the interpreter; asking for paths needs none of it."""
    python = _venv(tmp_path / "venv")
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"
    site = tmp_path / "venv" / "lib" / version / "site-packages"
    flag = tmp_path / "ran"
    (site / "evil.pth").write_text(f"import os; open({str(flag)!r}, 'a').write('pth')\n")
    (site / "sitecustomize.py").write_text(f"open({str(flag)!r}, 'a').write('sitecustomize'); print('noise' * 100)\n")
    subprocess.run([str(python), "-c", "pass"], check=True)  # what a normal start does
    assert flag.read_text().endswith("pthsitecustomize")  # lib64 -> lib: a venv may list the directory twice
    flag.unlink()
    target = target_for_python(str(python))
    assert not flag.exists()
    # What site would have made of the prefixes is still what the target reports.
    with_site = json.loads(subprocess.run(
        [str(python), "-I", "-c", "import json, sys, sysconfig; print(json.dumps([sysconfig.get_paths()['purelib'], sys.prefix]))"],
        capture_output=True, text=True, check=True).stdout.splitlines()[-1])
    assert (target.site_packages, target.prefix, target.venv) == ((str(site),), with_site[1], True) and with_site[0] == str(site)


def test_an_interpreter_that_prints_without_end_is_stopped(tmp_path):
    """`--python /usr/bin/yes`: its output is read up to 1 MiB, then it is killed; exit 3 naming it."""
    endless = _script(tmp_path / "endless", "exec yes\n")
    started = time.monotonic()
    with pytest.raises(EnvError, match=f"^{endless} printed more than 1 MiB when asked for its paths: "
                                       "it is not answering like a Python interpreter$"):
        target_for_python(str(endless))
    assert time.monotonic() - started < 10
    noisy = _script(tmp_path / "noisy", "exec yes >&2\n")  # stderr is bounded the same way
    with pytest.raises(EnvError, match="printed more than 1 MiB"):
        target_for_python(str(noisy))
