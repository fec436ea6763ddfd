"""`cudaresolve lock`: resolve LockInputs into a lock and write its files together, with the report;
`lock --check FILE`: whether a lock still fits the hosts.

With --json, stdout holds one JSON document, whatever happens (a command line that does not parse included).

Light at the top: a lock served from its result cache (commands/lock_cache.py) imports neither the
resolver nor the checks; each path imports what it uses.
May import: errors, env/interpreter, lockfile/, output/ (lock_report, lock_words), resolve/causes, resolve/check, commands/.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Iterator

from cudaresolve.errors import CudaresolveError, Exit, UsageError

if TYPE_CHECKING:
    from cudaresolve.env.interpreter import Target


def run(args: argparse.Namespace) -> int:
    if args.check is not None:
        with json_errors(args.json):
            return check(args)
    with json_errors(args.json), whole_refusal(args.explain and not args.json):
        if args.json and args.output == "-":
            raise UsageError("--json prints the decisions on stdout, where -o - would print the lock: give -o FILE with --json")
        from cudaresolve.commands.lock_cache import cached_lock

        return cached_lock(args, _lock, os.environ)


@contextlib.contextmanager
def whole_refusal(asked: bool) -> Iterator[None]:
    """With --explain, a refusal prints its whole record on stdout (every cause in full, every
    candidate set aside), and its few short lines on stderr as ever."""
    try:
        yield
    except CudaresolveError as exc:
        from cudaresolve.resolve.causes import NoSolution

        if asked and isinstance(exc, NoSolution):
            from cudaresolve.output import lock_words

            sys.stdout.write(lock_words.no_solution(exc, whole=True) + "\n")
        raise


@contextlib.contextmanager
def json_errors(asked: bool) -> Iterator[None]:
    """With --json, a command that stops still prints one JSON document on stdout (the refusal's
    typed causes, or the error), and its one line on stderr as ever."""
    try:
        yield
    except CudaresolveError as exc:
        if asked:
            from cudaresolve.output.lock_report import render_error_json

            sys.stdout.write(render_error_json(exc))
        raise


def _lock(args: argparse.Namespace) -> tuple[list[tuple[str, str]], Target]:
    """Resolve, write the lock's files and print its report: the files written, and the target
    interpreter as asked (the result cache keeps both)."""
    from cudaresolve.commands.host_options import host_options
    from cudaresolve.commands.locking import locked, targets_of
    from cudaresolve.commands.options import lock_inputs, say
    from cudaresolve.env.interpreter import target_for
    from cudaresolve.lockfile.files import replaceable, write_together
    from cudaresolve.lockfile.pip import constraints_txt, requirements_txt
    from cudaresolve.lockfile.pylock import lock_file_name_ok
    from cudaresolve.lockfile.writer import pylock_toml
    from cudaresolve.output import lock_words
    from cudaresolve.output.lock_report import render_json, render_text

    if args.output not in (None, "-"):
        lock_file_name_ok(args.output)
    paths = [args.output or os.path.join(args.project or "", "pylock.toml"), args.write_constraints, args.write_requirements]
    for path in paths:
        if path not in (None, "-"):
            replaceable(path)  # a user's file named by a mistyped flag: refused before any work
    started = time.perf_counter()
    stated = host_options(args)
    # Without --python the target is the interpreter running cudaresolve, whose installed set is
    # cudaresolve's own (its venv): the lock is made fresh for its tags and markers.
    inputs = replace(lock_inputs(args, target_for(python=args.python), stated), keep_installed=args.python is not None)
    say(args.quiet, lock_words.lock_basis(args.python))
    result, _ = locked(inputs, os.environ, quiet=args.quiet)
    targets = targets_of(inputs)
    # Everything is rendered before anything is written, and the files are written together:
    # a refused value or a failed write leaves every output as it was, stdout included.
    outputs = [(paths[0], pylock_toml(result, lock_words))]
    if args.write_constraints:
        outputs.append((args.write_constraints, constraints_txt(result)))
    if args.write_requirements:
        outputs.append((args.write_requirements, requirements_txt(result)))
    report = (render_json(result, time.perf_counter() - started, targets) if args.json
              else render_text(result, explain=args.explain, targets=targets))
    files = [(path, text) for path, text in outputs if path != "-"]
    write_together(files)
    for path, _ in files:
        say(args.quiet, f"wrote {path}")
    if args.output == "-":
        sys.stdout.write(outputs[0][1])
    (sys.stderr if args.output == "-" else sys.stdout).write(report)
    return files, inputs.target


def check(args: argparse.Namespace) -> int:
    """lock --check FILE: exit 0 when the lock fits every host, 2 with the misfits (and, with
    --require-host, when a check was skipped for a host that does not state its driver or GPUs)."""
    from cudaresolve.commands.host_options import host_options
    from cudaresolve.commands.hosts import hosts
    from cudaresolve.commands.locking import LockedWheels, host_misfits
    from cudaresolve.commands.options import indexes
    from cudaresolve.env.interpreter import target_for
    from cudaresolve.lockfile.pylock import read_pylock
    from cudaresolve.output.lock_report import render_fit, render_fit_json
    from cudaresolve.resolve.check import skipped

    fleet = hosts(args, host_options(args))
    target = target_for(python=args.python)
    base = target.marker_environment() or {}
    with LockedWheels(target, indexes(args), os.environ, quiet=args.quiet) as read:
        found, unfit, majors = host_misfits(read_pylock(args.check), fleet, base, args.check, read, args.allow_advisory)
    unchecked = [(label, skipped(host)) for label, host in fleet]
    unchecked = [(label, checks) for label, checks in unchecked if checks]
    labels = [label for label, _ in fleet]
    sys.stdout.write(render_fit_json(args.check, labels, found, unfit, majors, unchecked) if args.json
                     else render_fit(args.check, labels, found, unfit, majors, unchecked))
    return Exit.PROBLEMS if found or unfit or majors or (args.require_host and unchecked) else Exit.OK
