"""`cudaresolve doctor`: diagnose an environment (or the built-in example) for the host.

Kept light: the cached path of result_cache.doctor_report reads no binary when nothing changed, so
this module imports nothing of the lock. With --judge-fixes the fixes are judged on the environments
they plan, with the configured indexes (commands/locking, options), and no cached report is used.
May import: env/interpreter, host/facts (the options' value), output/ (doctor, progress), commands/ (diagnosing, result_cache,
host_options, hosts, locking, options).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable, Optional

from cudaresolve.commands.host_options import host_options
from cudaresolve.commands.hosts import host
from cudaresolve.host.facts import Overrides
from cudaresolve.output.doctor import Report, use_colour
from cudaresolve.output.progress import reading_done, reading_progress


def run(args: argparse.Namespace) -> int:
    stated = host_options(args)
    if args.example and args.observe:
        from cudaresolve.errors import UsageError

        raise UsageError("--import runs the imports of an installed environment; --example has none")
    progress = reading_progress(sys.stderr) if sys.stderr.isatty() else None
    if args.example:
        from cudaresolve.commands.diagnosing import examine_example
        from cudaresolve.output.doctor import report_of

        report = report_of(examine_example(host(args, stated)))
    elif args.judge_fixes or args.observe:
        report = _examined(args, stated, progress)
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


def _examined(args: argparse.Namespace, stated: Overrides, progress: Optional[Callable[[str], None]]) -> Report:
    """The doctor without its result cache: fixes judged with the indexes (--judge-fixes), imports
    run (--import), or both."""
    import contextlib

    from cudaresolve.commands.diagnosing import examine
    from cudaresolve.env.interpreter import target_for
    from cudaresolve.errors import UsageError
    from cudaresolve.output.doctor import report_of

    target = target_for(python=args.python, site_packages=args.site_packages)
    if target.python is None or target.prefix is None:
        needs = "--judge-fixes" if args.judge_fixes else "--import"
        raise UsageError(f"{needs} needs the environment's interpreter (--python), not a bare site-packages directory")
    with contextlib.ExitStack() as stack:
        index, offline = None, False
        if args.judge_fixes:
            from cudaresolve.commands.locking import open_indexes
            from cudaresolve.commands.options import indexes

            asked = indexes(args)
            index, offline = stack.enter_context(open_indexes(target, asked, os.environ)), asked.offline
        return report_of(examine(target, host(args, stated), os.environ, progress=progress, index=index, offline=offline,
                                 observe=args.observe))
