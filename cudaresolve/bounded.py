"""Reading outside input within bounds, so every way it can be wrong is one kind of error.

A host file, a requirements file, a pyproject.toml, a dist-info's METADATA or a conda-meta record
may be hostile or broken: larger than any real one, a FIFO, nested deeper than a parser's
recursion, holding an integer past Python's 4,300-digit conversion limit, or naming a path with a
NUL byte. The standard library reports several of these as RecursionError or a bare ValueError that
callers expecting JSONDecodeError or TOMLDecodeError miss, or not at all (a read that never ends).
Here a file read fails with an OSError, a parse with a ValueError (InvalidRequirement for a
requirement), and a program that prints or runs without end is stopped: each with a reason the
callers turn into their one-line error naming the input (docs/security.md).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import selectors
import signal
import stat
import subprocess
import sys
import time
from typing import Any, Mapping, Optional, Sequence

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python < 3.11 only
    import tomli as tomllib

# A host file, a requirements file or a pyproject.toml is a few kB; 16 MiB is far above any real one.
MAX_INPUT_FILE = 16 * 1024 * 1024


def read_bounded(path: str, limit: int = MAX_INPUT_FILE, *, regular: bool = False) -> bytes:
    """The bytes of `path`; an OSError (with strerror) when it cannot be read or is larger than `limit`.

    With `regular`, only a regular file is read: a file an environment or a checkout holds (a dist-info's
    METADATA, a pyproject.toml) or a requirements file names that is a FIFO would otherwise block the
    read forever. Without it, a pipe the user gives (`--host <(...)`) is read like a file.
    """
    try:
        fd = os.open(path, os.O_RDONLY | (os.O_NONBLOCK if regular else 0) | getattr(os, "O_CLOEXEC", 0))
    except ValueError:  # a NUL byte, or a character the file system encoding cannot hold
        raise OSError(errno.EINVAL, "not a valid path", path) from None
    with open(fd, "rb") as stream:
        if regular and not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        data = stream.read(limit + 1)
    if len(data) > limit:
        raise OSError(errno.EFBIG, f"larger than {limit >> 20} MiB", path)
    return data


def loads_json(text: str) -> Any:
    """json.loads; any failure is a ValueError (JSONDecodeError, or the reason it could not be read)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except json.JSONDecodeError:
        raise
    except ValueError as exc:  # an integer past the conversion limit: json does not wrap it
        raise ValueError(_reason(exc)) from None


def loads_toml(text: str) -> Any:
    """tomllib.loads; any failure is a ValueError (TOMLDecodeError, or the reason it could not be read)."""
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except tomllib.TOMLDecodeError:
        raise
    except ValueError as exc:  # an integer past the conversion limit: tomllib does not wrap it
        raise ValueError(_reason(exc)) from None


def _reason(exc: ValueError) -> str:
    """The interpreter's words without its advice to the programmer ("; use sys.set_int_max_str_digits()...")."""
    return str(exc).split(";")[0]


def parse_requirement(text: str) -> Any:
    """packaging's Requirement with every version of its specifier parsed now; InvalidRequirement otherwise.

    packaging parses a specifier's version only when it compares, deep in a resolution, where a
    number past int()'s 4,300 digits fails with a bare ValueError; and packaging before 22 parses
    markers recursively without a depth limit.
    """
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.version import Version

    try:
        requirement = Requirement(text)
    except RecursionError:
        raise InvalidRequirement("its marker is nested too deeply") from None
    for specifier in requirement.specifier:
        if specifier.operator != "===":  # arbitrary equality compares text
            try:
                Version(specifier.version[:-2] if specifier.version.endswith(".*") else specifier.version)
            except ValueError as exc:
                raise InvalidRequirement(_reason(exc)) from None
    return requirement


class TooMuchOutput(Exception):
    """A program printed more than the limit and was stopped."""


# How long the output pipes may stay open once the program itself has ended: what holds them then is
# something it started and left running (a grandchild that called setsid escapes the process group).
LINGER = 1.0


def run_bounded(
    argv: Sequence[str], question: bytes, timeout: float, limit: int, env: Optional[Mapping[str, str]] = None
) -> tuple[int, bytes, bytes]:
    """Run `argv` in a session of its own with `question` on its stdin (and `env`, default this
    process's environment); (status, stdout, stderr).

    Each stream is kept up to `limit` bytes: a program that prints more, or that has not ended
    within `timeout` seconds, is killed with everything it started, and TooMuchOutput or
    subprocess.TimeoutExpired is raised. OSError when it cannot start. When it ends, its process
    group is killed, and so is any process still holding its output pipes LINGER seconds after
    (one that left the group with setsid): nothing it started outlives the run.
    """
    process = subprocess.Popen(
        list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
        env=None if env is None else dict(env),
    )
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None  # three pipes
    pipes = {os.fstat(stream.fileno()).st_ino for stream in (process.stdin, process.stdout, process.stderr)}
    lingering = True  # until _collect says the pipes closed
    try:
        out, err, lingering = _collect(process, question, timeout, limit)
        return process.returncode, out, err
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        if lingering:
            _kill_holders(pipes)
        process.wait()
        for stream in (process.stdin, process.stdout, process.stderr):
            with contextlib.suppress(OSError):
                stream.close()


def _kill_holders(pipes: set[int]) -> None:
    """SIGKILL every other process holding one of the pipes `pipes` (inode numbers) open, found in
    /proc (Linux; elsewhere the process group is all that is killed)."""
    try:
        pids = [name for name in os.listdir("/proc") if name.isdigit() and int(name) != os.getpid()]
    except OSError:
        return
    for pid in pids:
        try:
            links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        except OSError:  # gone, or not ours to look at
            continue
        if any(link.startswith("pipe:[") and link[6:-1].isdigit() and int(link[6:-1]) in pipes for link in links):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(int(pid), signal.SIGKILL)


def _collect(process: subprocess.Popen[bytes], question: bytes, timeout: float, limit: int) -> tuple[bytes, bytes, bool]:
    """Write `question`, read both outputs until they end and the process exits: one loop over the
    three pipes (and the process, where a pidfd can watch it), no threads. Once the process has
    exited, the pipes get LINGER seconds to close; (stdout, stderr, whether they were still open)."""
    assert process.stdin is not None and process.stdout is not None and process.stderr is not None  # run_bounded opens all three as pipes
    deadline = time.monotonic() + timeout
    collected = {process.stdout.fileno(): bytearray(), process.stderr.fileno(): bytearray()}
    pending = memoryview(question)
    exited = _pidfd(process.pid)
    lingering = False
    with selectors.DefaultSelector() as selector:
        for fd in collected:
            selector.register(fd, selectors.EVENT_READ)
        if exited is not None:
            selector.register(exited, selectors.EVENT_READ)
        stdin = process.stdin.fileno()
        if pending:
            os.set_blocking(stdin, False)
            selector.register(stdin, selectors.EVENT_WRITE)
        else:
            process.stdin.close()
        try:
            while any(fd in selector.get_map() for fd in collected):
                left = deadline - time.monotonic()
                if left <= 0:
                    if process.poll() is not None:  # it ended; what holds its pipes is killed by the caller
                        lingering = True
                        break
                    raise subprocess.TimeoutExpired(process.args, timeout)
                for key, _ in selector.select(left if exited is not None else min(left, 0.1)):
                    if key.fd == exited:
                        selector.unregister(exited)
                        exited = None
                        deadline = min(deadline, time.monotonic() + LINGER)
                        continue
                    if key.fd == stdin:
                        try:
                            pending = pending[os.write(stdin, pending[:65536]):]
                        except BrokenPipeError:  # it does not read its stdin: its output says the rest
                            pending = pending[:0]
                        if not pending:
                            selector.unregister(stdin)
                            process.stdin.close()
                        continue
                    chunk = os.read(key.fd, 65536)
                    if not chunk:
                        selector.unregister(key.fd)
                        continue
                    collected[key.fd] += chunk
                    if len(collected[key.fd]) > limit:
                        raise TooMuchOutput(f"printed more than {limit >> 20} MiB")
                if exited is None and process.poll() is not None:  # no pidfd: polled
                    deadline = min(deadline, time.monotonic() + LINGER)
        finally:
            if exited is not None:
                os.close(exited)
    try:
        process.wait(max(deadline - time.monotonic(), 0))
    except subprocess.TimeoutExpired:
        raise subprocess.TimeoutExpired(process.args, timeout) from None
    return bytes(collected[process.stdout.fileno()]), bytes(collected[process.stderr.fileno()]), lingering


def _pidfd(pid: int) -> Optional[int]:
    """A descriptor that becomes readable when the process `pid` exits (Linux 5.3 and later), else None."""
    try:
        return os.pidfd_open(pid)  # type: ignore[attr-defined,unused-ignore]
    except (AttributeError, OSError):
        return None
