"""The lock's edge, shared by `lock`, `install` and `pip install`: from LockInputs, read the
installed environment, open the indexes and resolve (resolve/resolver.py does the choosing); and
whether a lock read from a file still fits the hosts.

May import: doctor (the environment scan), binary/loader (an empty target's loader), env/, index/, resolve/,
output/progress, commands/options.
"""

from __future__ import annotations

import os
import platform
import sys
from dataclasses import replace
from typing import Mapping, Sequence

from cudaresolve.binary.loader import LoaderEnv
from cudaresolve.commands.options import say
from cudaresolve.doctor import scan
from cudaresolve.env.environment import Environment
from cudaresolve.env.interpreter import Target
from cudaresolve.errors import UsageError
from cudaresolve.host.facts import HostFacts
from cudaresolve.index.access import PackageIndex, open_index
from cudaresolve.index.config import IndexConfig, index_config
from cudaresolve.index.tags import host_platforms
from cudaresolve.output.progress import download_progress, judging_progress
from cudaresolve.resolve.check import misfits
from cudaresolve.resolve.inputs import Indexes, LockInputs
from cudaresolve.resolve.lock import Lock
from cudaresolve.resolve.reasons import Rejection
from cudaresolve.resolve.resolver import lock
from cudaresolve.resolve.targets import (
    HostPythons,
    LockTarget,
    interpreter_python,
    lock_targets,
    runs_installed,
    target_interpreter,
    target_marker,
)
from cudaresolve.resolve.universal import Part, merged


def locked(inputs: LockInputs, environ: Mapping[str, str], *, quiet: bool = False) -> tuple[Lock, Environment]:
    """The lock `inputs` ask for, and the installed Environment it started from: each target resolved
    alone (its tags, markers, requires-python; the installed set only for the interpreter's own),
    one target's lock as it is, several merged into one."""
    if not inputs.requirements:
        raise UsageError("nothing to lock: give requirements, -r FILE or --project DIR")
    if not any(h.driver.release or h.driver.cuda or h.visible_gpus for _, h in inputs.hosts):
        say(quiet, "no driver and no GPU known (no --driver/--gpu/--host): locking the CUDA builds the regular index serves by default")
    target = inputs.target
    where = target if inputs.installed_at is None else replace(target, site_packages=(inputs.installed_at,))
    installed, _ = scan(where, environ)
    parts = []
    for one in targets_of(inputs):
        result = _locked_for(one, inputs, installed, environ, quiet=quiet)
        parts.append(Part(target_marker(one), result))
    if len(parts) == 1:
        return parts[0].lock, installed
    return merged(parts), installed


def targets_of(inputs: LockInputs) -> tuple[LockTarget, ...]:
    """The targets `inputs` name; without any, the hosts running the target interpreter's Python."""
    if inputs.targets:
        return inputs.targets
    python = interpreter_python(inputs.target)
    return lock_targets([HostPythons(label, facts, (python,)) for label, facts in inputs.hosts])


def _locked_for(one: LockTarget, inputs: LockInputs, installed: Environment, environ: Mapping[str, str], *, quiet: bool) -> Lock:
    """The lock of one target: its interpreter's markers, its tags, its hosts, and the installed set
    only where the target is the interpreter itself."""
    interpreter = target_interpreter(one, inputs.target)
    scanned = target_interpreter(one, installed.target)  # where the plan installs (pip --target's directory)
    if runs_installed(one, inputs.target):
        environment = replace(installed, target=scanned)
    else:  # nothing installed; this machine's loader (ld.so.cache, layout) when it is the target's machine
        loader = installed.loader if installed.loader.machine == one.machine else LoaderEnv(machine=one.machine)
        environment = Environment(target=scanned, distributions=(), elf_files=(), loader=loader)
    given = inputs.indexes.tags
    # the full version: the interpreter's own (3.11.7), X.Y.0 for another Python, as pip pads --python-version
    tags = replace(given, python_version=interpreter.version, platforms=given.platforms or host_platforms(one.machine, one.glibc))
    asked = replace(
        inputs, hosts=one.hosts, target=interpreter, indexes=replace(inputs.indexes, tags=tags),
        system_libraries=inputs.system_libraries and one.machine == inputs.target.machine,
    )
    with open_indexes(interpreter, asked.indexes, environ, quiet=quiet) as index:
        return lock(asked, environment, index, progress=lambda judging: say(quiet, judging_progress(judging)))


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
    """Each locked build that does not run on one of `hosts` ([] when the lock fits), judged for this machine's loader."""
    return misfits(locked, hosts, platform.machine())
