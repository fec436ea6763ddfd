"""`cudaresolve doctor`: diagnose an environment (or the built-in example) for the host.

Kept light: the cached path of result_cache.doctor_report reads no binary when nothing changed, so
this module imports nothing of the lock. The fixes are judged on the environments they plan, with
the indexes the target interpreter's pip settings name (commands/locking, options), opened only when
a fix needs them; --no-judge-fixes prints them as the tables give them.
May import: env/interpreter, host/facts (the options' value), output/ (doctor, progress), commands/ (diagnosing, result_cache,
host_options, hosts, locking, options).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Union

from cudaresolve.commands.host_options import host_options
from cudaresolve.commands.hosts import host
from cudaresolve.output.doctor import NotJudged, use_colour
from cudaresolve.output.progress import reading_done, reading_progress

if TYPE_CHECKING:
    from cudaresolve.commands.judging import Judging
    from cudaresolve.env.interpreter import Target
    from cudaresolve.index.access import PackageIndex
    from cudaresolve.resolve.inputs import Indexes

# What the judge waits for an index unless --timeout / --retries say otherwise: an index that cannot
# be reached costs the doctor one failure of this length, never pip's 15 s times 5 retries per page.
JUDGE_TIMEOUT = 5.0  # seconds
JUDGE_RETRIES = 1


def run(args: argparse.Namespace) -> int:
    stated = host_options(args)
    from cudaresolve.errors import UsageError

    if args.example and args.observe:
        raise UsageError("--import runs the imports of an installed environment; --example has none")
    progress = reading_progress(sys.stderr) if sys.stderr.isatty() else None
    if args.example:
        from cudaresolve.commands.diagnosing import examine_example
        from cudaresolve.output.doctor import report_of

        report = report_of(examine_example(host(args, stated)), NotJudged.EXAMPLE)
    else:
        from cudaresolve.env.interpreter import target_for

        target = target_for(python=args.python, site_packages=args.site_packages)
        if (args.judge_fixes or args.observe) and (target.python is None or target.prefix is None):
            needs = "--judge-fixes" if args.judge_fixes else "--import"
            raise UsageError(f"{needs} needs the environment's interpreter (--python), not a bare site-packages directory")
        judging = _judging(args, target)
        if args.observe:
            from cudaresolve.commands.diagnosing import examine
            from cudaresolve.output.doctor import report_of

            diagnosis = examine(target, host(args, stated), os.environ, progress=progress, observe=True,
                                judging=None if isinstance(judging, NotJudged) else judging)
            report = report_of(diagnosis, judging if isinstance(judging, NotJudged) else None)
        else:
            from cudaresolve.commands.result_cache import doctor_report

            report = doctor_report(target, host(args, stated), os.environ, progress=progress, judging=judging)
    if progress:
        reading_done(sys.stderr)
    if args.json:
        sys.stdout.write(report.json)
    else:
        sys.stdout.write(report.text_colour if use_colour(sys.stdout, os.environ) else report.text)
    return report.strict_exit_code if args.strict else report.exit_code


def _judging(args: argparse.Namespace, target: Target) -> Union[Judging, NotJudged]:
    """How this run judges its fixes: with the indexes of the target interpreter's pip settings and
    the command's index options, bounded in time (JUDGE_TIMEOUT), or why not. The index options are
    read when given (a bad one is exit 3), else when a fix first needs the indexes: a cached report
    imports nothing of them."""
    if args.judge_fixes is False:
        return NotJudged.NOT_ASKED
    if target.python is None or target.prefix is None:
        return NotJudged.NO_INTERPRETER
    from cudaresolve.commands.judging import Judging
    from cudaresolve.commands.parser import INDEX_OPTIONS

    given = [name for name in INDEX_OPTIONS if getattr(args, name, None) not in (None, False)]
    asked = _asked(args) if given else None

    def opened() -> PackageIndex:
        from cudaresolve.commands.locking import open_indexes

        return open_indexes(target, asked or _asked(args), os.environ, give_up=True)

    return Judging(opened, bool(args.offline))


def _asked(args: argparse.Namespace) -> Indexes:
    """The index options of the command line, the judge's bounds where --timeout and --retries are not given."""
    from dataclasses import replace

    from cudaresolve.commands.options import indexes

    asked = indexes(args)
    settings = asked.settings
    return replace(asked, settings=replace(
        settings, timeout=JUDGE_TIMEOUT if settings.timeout is None else settings.timeout,
        retries=JUDGE_RETRIES if settings.retries is None else settings.retries))
