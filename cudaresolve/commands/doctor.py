"""`cudaresolve doctor`: diagnose an environment (or the built-in example) for the host.

Kept light: the cached path of result_cache.doctor_report reads no binary when nothing changed, so
this module imports nothing of the lock. May import: env/interpreter, output/ (doctor, progress),
commands/ (diagnosing, result_cache, host_options, hosts).
"""

from __future__ import annotations

import argparse
import os
import sys

from cudaresolve.commands.host_options import host_options
from cudaresolve.commands.hosts import host
from cudaresolve.output.doctor import use_colour
from cudaresolve.output.progress import reading_done, reading_progress


def run(args: argparse.Namespace) -> int:
    stated = host_options(args)
    progress = reading_progress(sys.stderr) if sys.stderr.isatty() else None
    if args.example:
        from cudaresolve.commands.diagnosing import examine_example
        from cudaresolve.output.doctor import report_of

        report = report_of(examine_example(host(args, stated)))
    else:
        from cudaresolve.commands.result_cache import doctor_report
        from cudaresolve.env.interpreter import target_for

        target = target_for(python=args.python, site_packages=args.site_packages)
        report = doctor_report(target, host(args, stated), os.environ, progress=progress)
    if progress:
        reading_done(sys.stderr)
    if args.json:
        sys.stdout.write(report.json)
    else:
        sys.stdout.write(report.text_colour if use_colour(sys.stdout, os.environ) else report.text)
    return report.strict_exit_code if args.strict else report.exit_code
