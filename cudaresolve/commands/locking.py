"""The lock's edge, shared by `lock`, `install` and `pip install`: from LockInputs, read the
installed environment, open the indexes and resolve (resolve/resolver.py does the choosing); and
whether a lock read from a file still fits the hosts.

May import: doctor (the environment scan), env/, index/, resolve/, lockfile/select, output/progress,
commands/options.
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from typing import Mapping, Sequence

from cudaresolve.commands.options import say
from cudaresolve.doctor import scan
from cudaresolve.env.environment import Environment
from cudaresolve.env.interpreter import Target
from cudaresolve.errors import UsageError
from cudaresolve.host.facts import HostFacts
from cudaresolve.index.access import PackageIndex, open_index
from cudaresolve.index.config import IndexConfig, index_config
from cudaresolve.lockfile.select import Unfit, host_environment, host_tags, lock_pythons, select, selected_lock
from cudaresolve.output.progress import download_progress, judging_progress
from cudaresolve.resolve.check import misfits
from cudaresolve.resolve.inputs import Indexes, LockInputs
from cudaresolve.resolve.lock import Lock
from cudaresolve.resolve.reasons import Rejection
from cudaresolve.resolve.resolver import lock


def locked(inputs: LockInputs, environ: Mapping[str, str], *, quiet: bool = False) -> tuple[Lock, Environment]:
    """The lock `inputs` ask for, and the installed Environment it started from."""
    if not inputs.requirements:
        raise UsageError("nothing to lock: give requirements, -r FILE or --project DIR")
    if not any(h.driver.release or h.driver.cuda or h.visible_gpus for _, h in inputs.hosts):
        say(quiet, "no driver and no GPU known (no --driver/--gpu/--host): locking the CUDA builds the regular index serves by default")
    target = inputs.target
    where = target if inputs.installed_at is None else replace(target, site_packages=(inputs.installed_at,))
    installed, _ = scan(where, environ, machine=hosts_machine(inputs.hosts))
    with open_indexes(target, inputs.indexes, environ, quiet=quiet) as index:
        result = lock(inputs, installed, index, progress=lambda judging: say(quiet, judging_progress(judging)))
    return result, installed


def hosts_machine(hosts: Sequence[tuple[str, HostFacts]]) -> str:
    """The machine whose loader and binary facts judge the plan: the hosts'. One lock is made for one
    machine; hosts of several are locked one machine at a time."""
    machines = sorted({host.machine for _, host in hosts})
    if len(machines) != 1:
        raise UsageError(f"the hosts are of several machines ({', '.join(machines)}): lock one machine at a time")
    return machines[0]


def config_for(target: Target, indexes: Indexes, environ: Mapping[str, str]) -> IndexConfig:
    """The index configuration for `target`: pip's, the project's, then the command's settings."""
    assert target.python is not None and target.prefix is not None  # an interpreter's target: every command's here
    project_dir = indexes.project_dir or os.getcwd()
    return index_config(target.python, target.prefix, environ, project_dir, indexes.settings, site_packages=target.site_packages)


def open_indexes(target: Target, indexes: Indexes, environ: Mapping[str, str], *, quiet: bool = False) -> PackageIndex:
    """The configured indexes for `target`, caching as asked, downloads shown on stderr (not when quiet)."""
    return open_index(
        config_for(target, indexes, environ),
        target,
        environ,
        offline=indexes.offline,
        refresh=indexes.refresh,
        tag_overrides=indexes.tags,
        progress=None if quiet else download_progress(sys.stderr),
    )


def misfits_on(locked: Lock, hosts: Sequence[tuple[str, HostFacts]]) -> list[Rejection]:
    """Each locked build that does not run on one of `hosts` ([] when the lock fits), each host judged with its machine."""
    return misfits(locked, hosts)


def host_misfits(
    locked: Lock, hosts: Sequence[tuple[str, HostFacts]], base: Mapping[str, str], origin: str
) -> tuple[list[Rejection], list[Unfit]]:
    """`lock --check`: each host's part of the lock (lockfile/select.py) for every Python the lock's
    `environments` name for the host's machine (for a lock that names none, the interpreter's of
    `base` or the one its requires-python allows), its wheels matched to the host's machine and
    glibc and its builds judged on the host. The builds that do not run, and what the lock cannot
    install there; both empty when it fits."""
    rejections: list[Rejection] = []
    unfit: list[Unfit] = []
    for label, host in hosts:
        # a universal lock for other machines only: select() says so, with the interpreter's Python
        pythons = lock_pythons(locked, base, host.machine) or (base.get("python_version", ""),)
        for python in pythons:
            environment = host_environment(base, host.machine, python)
            target = label if len(pythons) == 1 else f"{label} (Python {python})"
            selection = select(locked, environment, host_tags(host.machine, host.glibc, python), target, origin)
            unfit += [u for u in selection.unfit if u not in unfit]
            found = misfits(selected_lock(locked, selection, environment, origin), [(label, host)])
            rejections += [r for r in found if r not in rejections]
    return rejections, unfit
