"""`cudaresolve why NAME`: what a lock file records about one distribution.

May import: lockfile/pylock, output/lock_report, errors.
"""

from __future__ import annotations

import argparse
import sys

from cudaresolve.errors import Exit, UsageError
from cudaresolve.lockfile.pylock import read_pylock
from cudaresolve.output.lock_report import render_why


def run(args: argparse.Namespace) -> int:
    text = render_why(read_pylock(args.lock), args.name)
    if text is None:
        raise UsageError(f"{args.name} is not in {args.lock}")
    sys.stdout.write(text)
    return Exit.OK
