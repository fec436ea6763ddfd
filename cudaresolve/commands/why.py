"""`cudaresolve why NAME`: what a lock file records about one distribution, and the path from what
was asked for to it.

May import: lockfile/pylock, output/lock_report, errors, commands/lock (its --json errors).
"""

from __future__ import annotations

import argparse
import sys

from cudaresolve.commands.lock import json_errors
from cudaresolve.errors import Exit, UsageError
from cudaresolve.lockfile.pylock import read_pylock
from cudaresolve.output.lock_report import render_why, render_why_json


def run(args: argparse.Namespace) -> int:
    with json_errors(args.json):
        return _why(args)


def _why(args: argparse.Namespace) -> int:
    lock = read_pylock(args.lock)
    text = render_why_json(lock, args.name, args.lock) if args.json else render_why(lock, args.name)
    if text is None:
        raise UsageError(f"{args.name} is not in {args.lock}, nor asked for as {args.name}")
    sys.stdout.write(text)
    return Exit.OK
