"""`cudaresolve install`: lock (or read --lock), show the plan, run the target's own pip on exactly
the lock, then the doctor. What pip's configuration would make it do elsewhere is refused first.

May import: env/, host/facts, index/tags, integrations/pip, lockfile/, output/ (plan, doctor), resolve/ (plan,
check), commands/.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from typing import Optional

from cudaresolve.commands.host_options import host_options
from cudaresolve.commands.hosts import hosts
from cudaresolve.commands.lock import json_errors
from cudaresolve.commands.locking import LockedWheels, locked, misfits_on
from cudaresolve.commands.options import indexes, lock_inputs
from cudaresolve.env.distributions import Distribution, read_distributions
from cudaresolve.env.interpreter import Target, target_for, target_for_site_packages
from cudaresolve.errors import CudaresolveError, Exit, UsageError
from cudaresolve.host.facts import Overrides
from cudaresolve.index.tags import target_tags
from cudaresolve.integrations.pip import (
    externally_managed,
    installs_elsewhere,
    pip_install_command,
    pip_install_settings,
    pips_refusal,
)
from cudaresolve.integrations.pip import (
    run as run_pip,
)
from cudaresolve.lockfile.pip import requirements_txt
from cudaresolve.lockfile.pylock import read_pylock
from cudaresolve.lockfile.select import select, selected_lock
from cudaresolve.output.lock_report import render_fit
from cudaresolve.output.plan import render_plan, render_plan_json, render_state
from cudaresolve.resolve.check import major_misfits
from cudaresolve.resolve.plan import install_plan


class LockUnfit(CudaresolveError):
    """install --lock --json: the lock does not fit the hosts (exit 2), said in the JSON document."""

    exit_code = Exit.PROBLEMS


def run(args: argparse.Namespace) -> int:
    """Lock, show the plan, then run the target's own pip on exactly the lock; doctor after."""
    if args.json and not args.dry_run:
        raise UsageError("--json prints the plan of a dry run: give --dry-run with it (pip's own output is not JSON)")
    with json_errors(args.json):
        return _install(args)


def _install(args: argparse.Namespace) -> int:
    if args.target_dir and args.prefix:
        raise UsageError("give --target or --prefix, not both")
    stated = host_options(args)
    target = target_for(python=args.python)
    assert target.python is not None  # an interpreter's target (no site_packages given) names it
    settings = pip_install_settings(target, os.environ)
    elsewhere = installs_elsewhere(settings)
    if elsewhere:
        raise UsageError(f"{elsewhere}: unset it, and give cudaresolve install --target or --prefix instead")
    if externally_managed(target, settings) and not args.target_dir and not args.prefix:
        code, words = pips_refusal(target)
        sys.stderr.write(words + "\n")
        return code
    site = args.target_dir or (_prefix_site_packages(target, args.prefix) if args.prefix else None)
    if args.lock is not None:
        if args.requirements or args.requirement:
            raise UsageError("--lock installs a lock as it is: give no requirements with it")
        # The target interpreter's part of the lock, as PEP 751 installers select it: the entries
        # whose markers hold for it, each with the best wheel its tags allow.
        environment = target.marker_environment() or {}
        whole = read_pylock(args.lock)
        selection = select(whole, environment, target_tags(target), target.python, args.lock)
        lock = selected_lock(whole, selection, environment, args.lock)
        # pip's input first: an entry cudaresolve cannot install (only an sdist, VCS, directory or
        # archive source; a wheel without a sha256) is refused, naming it, before anything else.
        pinned = requirements_txt(lock, origin=args.lock)
        fleet = hosts(args, stated)
        with LockedWheels(target, indexes(args), os.environ, quiet=args.quiet) as read:
            found = misfits_on(lock, fleet, read)
        majors = major_misfits(lock, fleet)
        if found or selection.unfit or majors:
            fit = render_fit(args.lock, [label for label, _ in fleet], found, selection.unfit, majors)
            if args.json:
                raise LockUnfit(fit.rstrip("\n"))
            sys.stdout.write(fit)
            return Exit.PROBLEMS
        installed = _installed(target, site)
    else:
        lock, env = locked(lock_inputs(args, target, stated, site), os.environ, quiet=args.quiet)
        pinned = requirements_txt(lock)
        installed = env.distributions
    changes = install_plan(lock, installed)  # the lock `pinned` was written from: the plan shows what pip gets
    with tempfile.TemporaryDirectory(prefix="cudaresolve-install-") as scratch:
        requirements = os.path.join(scratch, "requirements.txt")
        with open(requirements, "w", encoding="utf-8") as f:
            f.write(pinned)
        command = pip_install_command(target.python, requirements, target_dir=args.target_dir, prefix=args.prefix)
        if args.json:
            sys.stdout.write(render_plan_json(changes, command, pinned))
            return Exit.OK
        sys.stdout.write(render_plan(changes, command if args.dry_run else None, pinned))
        sys.stdout.flush()
        if args.dry_run or not any(change.touches for change in changes):
            return Exit.OK
        code = run_pip(command)
    after = {d.name: d.version for d in _installed(target, site)}
    if code != 0:
        sys.stdout.write(render_state(changes, after, code))
        return code
    if not args.no_verify:
        return _verify(args, stated, target, site)
    return Exit.OK


def _installed(target: Target, site: Optional[str]) -> tuple[Distribution, ...]:
    found: list[Distribution] = []
    for directory in (site,) if site else target.site_packages:
        if os.path.isdir(directory):
            found += read_distributions(directory)[0]
    return tuple(found)


def _prefix_site_packages(target: Target, prefix: str) -> str:
    """Where pip --prefix puts packages for this interpreter (lib/pythonX.Y/site-packages)."""
    version = ".".join((target.version or "").split(".")[:2])
    return os.path.join(os.path.abspath(prefix), "lib", f"python{version}", "site-packages")


def _verify(args: argparse.Namespace, stated: Overrides, target: Target, site: Optional[str]) -> int:
    """The doctor on what pip left, the way `cudaresolve doctor` runs it (its result cached for the
    next look); its findings are shown, and its exit status is the command's: 2 when it finds an
    error on any host (pip succeeded, yet the environment it leaves will not work)."""
    from cudaresolve.commands.result_cache import doctor_report
    from cudaresolve.output.doctor import use_colour

    where = target_for_site_packages(site) if site else target
    fleet = hosts(args, stated)
    code: int = Exit.OK
    for label, host in fleet:
        report = doctor_report(where, host, os.environ)
        if len(fleet) > 1:
            sys.stdout.write(f"doctor for {label}:\n")
        sys.stdout.write(report.text_colour if use_colour(sys.stdout, os.environ) else report.text)
        code = max(code, report.exit_code)
    return code
