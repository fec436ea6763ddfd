"""`cudaresolve lock`: resolve LockInputs into a lock and write its files together, with the report;
`lock --check FILE`: whether a lock still fits the hosts.

May import: env/interpreter, lockfile/, output/ (lock_report, lock_words), commands/.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace

from cudaresolve.commands.hosts import hosts
from cudaresolve.commands.locking import LockedWheels, host_misfits, locked, targets_of
from cudaresolve.commands.options import indexes, lock_inputs, say
from cudaresolve.env.interpreter import target_for
from cudaresolve.errors import Exit
from cudaresolve.lockfile.files import write_together
from cudaresolve.lockfile.pip import constraints_txt, requirements_txt
from cudaresolve.lockfile.pylock import lock_file_name_ok, read_pylock
from cudaresolve.lockfile.writer import pylock_toml
from cudaresolve.output import lock_words
from cudaresolve.output.lock_report import render_fit, render_fit_json, render_json, render_text
from cudaresolve.resolve.check import skipped


def run(args: argparse.Namespace) -> int:
    if args.check is not None:
        return check(args)
    if args.output not in (None, "-"):
        lock_file_name_ok(args.output)
    started = time.perf_counter()
    # Without --python the target is the interpreter running cudaresolve, whose installed set is
    # cudaresolve's own (its venv): the lock is made fresh for its tags and markers.
    inputs = replace(lock_inputs(args, target_for(python=args.python)), keep_installed=args.python is not None)
    say(args.quiet, lock_words.lock_basis(args.python))
    result, _ = locked(inputs, os.environ, quiet=args.quiet)
    targets = targets_of(inputs)
    # Everything is rendered before anything is written, and the files are written together:
    # a refused value or a failed write leaves every output as it was, stdout included.
    outputs = [(args.output or "pylock.toml", pylock_toml(result, lock_words))]
    if args.constraints:
        outputs.append((args.constraints, constraints_txt(result)))
    if args.requirements_out:
        outputs.append((args.requirements_out, requirements_txt(result)))
    report = (render_json(result, time.perf_counter() - started, targets) if args.json
              else render_text(result, explain=args.explain, targets=targets))
    files = [(path, text) for path, text in outputs if path != "-"]
    write_together(files)
    for path, _ in files:
        say(args.quiet, f"wrote {path}")
    if args.output == "-":
        sys.stdout.write(outputs[0][1])
    (sys.stderr if args.output == "-" and not args.json else sys.stdout).write(report)
    return Exit.OK


def check(args: argparse.Namespace) -> int:
    """lock --check FILE: exit 0 when the lock fits every host, 2 with the misfits (and, with
    --require-host, when a check was skipped for a host that does not state its driver or GPUs)."""
    fleet = hosts(args)
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
