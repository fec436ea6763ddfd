"""The lock's cache of whole results (cudaresolve/commands/lock_cache.py): a hit writes and prints what
the fresh lock did, every part of the key and every input the lock read makes it miss, a page past
its freshness makes it miss, and a damaged or unwritable cache never changes the answer.

Locks run in-process against the generated universe on 127.0.0.1 (tests/fake_cuda_index.py); whether
a run hit is told by whether the fresh lock (`lock._lock`) was called. The first lock of a cache
asks the index for its pages, so it is never kept: `warm` runs it, then the lock that is kept."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import subprocess
import sys
import time
import types
import venv
from pathlib import Path

import pytest
from test_env_distributions import make_dist_info

from cudaresolve.cli import main
from cudaresolve.commands import lock as lock_command
from cudaresolve.commands import lock_cache
from cudaresolve.host import probe
from cudaresolve.index.cache import PAGE_MAX_AGE

HOST = ("--driver", "550.144.03", "--gpu", "8.6")


@pytest.fixture
def fresh(monkeypatch):
    """The fresh locks run, counted."""
    calls = []
    real = lock_command._lock

    def counted(args):
        calls.append(args)
        return real(args)

    monkeypatch.setattr(lock_command, "_lock", counted)
    return calls


@pytest.fixture
def locking(cuda_index, empty_python, hermetic, capsys, fresh):
    """A lock of -r requirements.txt -c constraints.txt for a target: run(*more) -> (exit, stdout,
    stderr, the files' texts), with `python` the target and `fresh` the fresh runs made."""
    (hermetic / "requirements.txt").write_text("numba>=0.59,<0.60\n")
    (hermetic / "constraints.txt").write_text("llvmlite>=0.40\n")
    state = types.SimpleNamespace(python=empty_python, fresh=fresh, root=hermetic)

    def run(*more: str):
        code = main(["lock", "--python", state.python, "--index-url", cuda_index.index_url, "--torch-index-base",
                     cuda_index.torch_index_base, *HOST, "-r", "requirements.txt", "-c", "constraints.txt",
                     "--write-constraints", "pinned.txt", *more])
        captured = capsys.readouterr()
        files = {name: (hermetic / name).read_text() for name in ("pylock.toml", "pinned.txt")}
        return code, captured.out, captured.err, files

    state.run = run
    return state


def warm(locking, *more: str):
    """The first lock (it asks the index) and the second (kept): what the second made."""
    locking.run(*more)
    before = len(locking.fresh)
    made = locking.run(*more)
    assert made[0] == 0 and len(locking.fresh) == before + 1
    return made


def entries(root: Path) -> list[Path]:
    return sorted((root / "cudaresolve-cache" / "lock-results").glob("*"))


def test_a_hit_writes_and_prints_what_the_fresh_lock_did(locking):
    made = warm(locking, "--explain")
    assert len(entries(locking.root)) == 1
    for name in made[3]:
        (locking.root / name).unlink()
    assert locking.run("--explain") == made  # exit, stdout, stderr and both files, byte for byte
    assert len(locking.fresh) == 2  # the cold lock and the kept one; the hit ran none
    assert "wrote pylock.toml" in made[2] and "numba==0.59.1" in made[1]
    lock_file, pinned = locking.root / "pylock.toml", locking.root / "pinned.txt"
    inode = lock_file.stat().st_ino
    pinned.write_text(pinned.read_text() + "edited==1.0\n")
    assert locking.run("--explain") == made and len(locking.fresh) == 2
    assert lock_file.stat().st_ino == inode  # it held the lock's bytes already: left as it was


def test_a_json_hit_is_the_same_document_with_its_own_seconds(locking):
    made = warm(locking, "--json")
    hit = locking.run("--json")
    assert len(locking.fresh) == 2
    assert {**json.loads(hit[1]), "seconds": None} == {**json.loads(made[1]), "seconds": None}
    assert hit[1].replace(f'"seconds": {json.loads(hit[1])["seconds"]!r}', "") == made[1].replace(
        f'"seconds": {json.loads(made[1])["seconds"]!r}', "")


def _other_interpreter(locking, monkeypatch):
    root = locking.root / "target"
    venv.create(root, with_pip=False)
    locking.python = str(root / "bin" / "python")
    return lambda: (root / "pyvenv.cfg").write_text((root / "pyvenv.cfg").read_text() + "# edited\n")


def _installed(locking, monkeypatch):
    root = locking.root / "target"
    venv.create(root, with_pip=False)
    locking.python = str(root / "bin" / "python")
    site = next(root.glob("lib/python*/site-packages"))
    return lambda: make_dist_info(site, "demo", "1.0")


def _probed_host(locking, monkeypatch):
    real = probe.host_for
    return lambda: monkeypatch.setattr(probe, "host_for", lambda **kw: dataclasses.replace(real(**kw), glibc="2.99"))


# Each changes one thing a lock depends on (set up first, when it needs to); the next lock must miss.
KEY_PARTS = {
    "an option": lambda locking, monkeypatch: lambda: locking.extra.append("--pre"),
    "the requirements file": lambda locking, monkeypatch: lambda: (locking.root / "requirements.txt").write_text("numba>=0.59,<0.61\n"),
    "the constraints file": lambda locking, monkeypatch: lambda: (locking.root / "constraints.txt").write_text("llvmlite>=0.41\n"),
    "a file a requirements file includes": lambda locking, monkeypatch: (
        (locking.root / "more.txt").write_text("\n"),
        (locking.root / "constraints.txt").write_text("llvmlite>=0.40\n-c more.txt\n"),
        lambda: (locking.root / "more.txt").write_text("llvmlite<1\n"),
    )[-1],
    "a variable that steers pip": lambda locking, monkeypatch: lambda: monkeypatch.setenv("PIP_RETRIES", "2"),
    "a pip configuration file created": lambda locking, monkeypatch: (  # in a directory nothing lists
        (locking.root / "conf").mkdir(), monkeypatch.setenv("PIP_CONFIG_FILE", str(locking.root / "conf" / "pip.conf")),
        lambda: (locking.root / "conf" / "pip.conf").write_text("[global]\n"),
    )[-1],
    "the working directory": lambda locking, monkeypatch: lambda: (
        (locking.root / "elsewhere").mkdir(), monkeypatch.chdir(locking.root / "elsewhere"),
        [(locking.root / "elsewhere" / name).write_text((locking.root / name).read_text())
         for name in ("requirements.txt", "constraints.txt")]),
    "the target interpreter": _other_interpreter,
    "the installed distributions": _installed,
    "the host probed": _probed_host,
    "the knowledge tables": lambda locking, monkeypatch: lambda: monkeypatch.setattr(lock_cache, "tables_digest", lambda: "other"),
    "cudaresolve's code": lambda locking, monkeypatch: lambda: monkeypatch.setattr(lock_cache, "code_identity", lambda: ()),
}


@pytest.mark.parametrize("part", KEY_PARTS, ids=list(KEY_PARTS))
def test_each_part_of_the_key_changed_is_a_miss(locking, monkeypatch, part):
    locking.extra = []
    change = KEY_PARTS[part](locking, monkeypatch)
    warm(locking)
    runs = len(locking.fresh)
    assert locking.run(*locking.extra)[0] == 0 and len(locking.fresh) == runs  # unchanged: a hit
    change()
    assert locking.run(*locking.extra)[0] == 0 and len(locking.fresh) == runs + 1


def test_a_page_past_its_freshness_is_a_miss_but_not_offline(locking, monkeypatch):
    warm(locking)
    assert locking.run("--offline")[0] == 0 and len(locking.fresh) == 3  # kept: the pages were in the cache
    later = types.SimpleNamespace(time=lambda: time.time() + PAGE_MAX_AGE + 1, perf_counter=time.perf_counter)
    monkeypatch.setattr(lock_cache, "time", later)
    runs = len(locking.fresh)
    assert locking.run("--offline")[0] == 0 and len(locking.fresh) == runs  # no page is asked again offline
    assert locking.run()[0] == 0 and len(locking.fresh) == runs + 1


@pytest.mark.parametrize("damage", [b"garbage", b"cudaresolve-lock-results 1 ", b""])
def test_a_damaged_entry_is_a_miss_and_rewritten(locking, damage):
    made = warm(locking)
    (entry,) = entries(locking.root)
    kept = entry.read_bytes()
    entry.write_bytes(damage + kept[len(damage):len(kept) // 2])
    assert locking.run() == made and len(locking.fresh) == 3
    assert entry.read_bytes() != damage + kept[len(damage):len(kept) // 2]
    assert locking.run() == made and len(locking.fresh) == 3  # rewritten: a hit again


def test_an_unwritable_cache_gives_the_same_answer(locking):
    (locking.root / "cudaresolve-cache").mkdir(exist_ok=True)
    (locking.root / "cudaresolve-cache" / "lock-results").write_text("not a directory")
    made = warm(locking)
    assert locking.run() == made and len(locking.fresh) == 3


def test_a_lock_of_a_host_read_from_stdin_is_not_kept(locking, monkeypatch):
    host = probe.host_for(host_file=None, overrides=probe.Overrides(), environ={}).to_json()
    monkeypatch.setattr(sys, "stdin", io.StringIO(host))
    assert locking.run("--host", "-")[0] == 0
    monkeypatch.setattr(sys, "stdin", io.StringIO(host))
    assert locking.run("--host", "-")[0] == 0 and len(locking.fresh) == 2
    assert not entries(locking.root)


def test_a_launcher_for_an_interpreter_is_never_answered_from_the_cache(locking):
    """A wrapper script (a pyenv shim) starts whichever Python its variables and files name: its
    identity says nothing of the answer, so every lock with it resolves."""
    launcher = locking.root / "python-launcher"
    launcher.write_text(f'#!/bin/sh\nexec {locking.python} "$@"\n')
    launcher.chmod(0o755)
    locking.python = str(launcher)
    assert [locking.run()[0] for _ in range(3)] == [0, 0, 0] and len(locking.fresh) == 3
    assert not entries(locking.root)


def test_a_hit_in_a_new_process(cuda_index, empty_python, tmp_path):
    """From a new process (the audit hook, the streams): the same outputs, and the entry as it was
    (a miss would replace it)."""
    from conftest import hermetic_environ

    argv = [sys.executable, "-m", "cudaresolve", "lock", "-o", str(tmp_path / "pylock.toml"), "--python", empty_python,
            "--index-url", cuda_index.index_url, "--torch-index-base", cuda_index.torch_index_base, *HOST, "numba>=0.59,<0.60"]
    environ = hermetic_environ({"CUDARESOLVE_CACHE_DIR": str(tmp_path / "cache")})
    done = [subprocess.run(argv, capture_output=True, text=True, env=environ, cwd=tmp_path, timeout=300) for _ in range(2)]
    (entry,) = (tmp_path / "cache" / "lock-results").iterdir()
    kept = entry.stat().st_ino
    done.append(subprocess.run(argv, capture_output=True, text=True, env=environ, cwd=tmp_path, timeout=300))
    assert [d.returncode for d in done] == [0, 0, 0]
    assert (done[2].stdout, done[2].stderr) == (done[1].stdout, done[1].stderr)
    assert entry.stat().st_ino == kept


def test_what_the_import_system_lists_is_not_an_input(tmp_path, monkeypatch):
    """A lock run by `python -m` has the working directory on sys.path, which the import system lists
    again whenever it changed: that is no input of the lock (it would make every entry stale), while
    the lock's own listing of a directory is."""
    (tmp_path / "listed").mkdir()
    monkeypatch.syspath_prepend(str(tmp_path))
    reads = lock_cache.Reads(str(tmp_path / "cache"), outputs=())
    with reads.recording():
        with pytest.raises(ImportError):
            __import__("no_such_module_here")
        os.listdir(tmp_path / "listed")
    assert list(reads.directories) == [str(tmp_path / "listed")]
