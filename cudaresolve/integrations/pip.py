"""Running the target interpreter's own pip through its public command line: never imported, never
patched. The command is an argument list (no shell), pip's output streams to the user, and its exit
status is the caller's to return. What the lock decided reaches pip only as files pip reads itself
(pinned requirements with hashes, constraints) and index options."""

from __future__ import annotations

import os
import subprocess
from typing import Optional, Sequence

from cudaresolve.env.interpreter import Target


def pip_install_command(python: str, requirements_file: str, *, target_dir: Optional[str] = None, prefix: Optional[str] = None) -> list[str]:
    """`PY -m pip install` of exactly a lock: every pin hash-checked, nothing resolved again (--no-deps:
    the lock already holds the closure)."""
    command = [python, "-m", "pip", "install", "--require-hashes", "--no-deps", "-r", requirements_file]
    if target_dir:
        command += ["--target", target_dir]
    if prefix:
        command += ["--prefix", prefix]
    return command


def run(command: Sequence[str]) -> int:
    """Run pip with its output on this terminal; its exit status."""
    try:
        return subprocess.call(list(command))
    except OSError as exc:
        return _cannot_start(command, exc)


def _cannot_start(command: Sequence[str], exc: OSError) -> int:
    print(f"cudaresolve: cannot run {command[0]}: {exc.strerror or exc}", flush=True)
    return 127


def externally_managed(target: Target) -> Optional[str]:
    """The path of the target's PEP 668 marker when pip would refuse to install into it (not a venv,
    EXTERNALLY-MANAGED in its stdlib directory); None when installing is allowed."""
    if target.venv or not target.stdlib:
        return None
    marker = os.path.join(target.stdlib, "EXTERNALLY-MANAGED")
    return marker if os.path.isfile(marker) else None


def pips_refusal(python: str) -> tuple[int, str]:
    """pip's own words for an externally-managed interpreter: a dry run pip refuses before resolving."""
    done = subprocess.run(
        [python, "-m", "pip", "install", "--dry-run", "--no-index", "--no-deps", "cudaresolve-pep668-check"],
        capture_output=True,
        text=True,
    )
    return done.returncode or 1, (done.stderr or done.stdout).strip()
