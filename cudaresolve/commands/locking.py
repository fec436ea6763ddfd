"""The lock's edge, shared by `lock`, `install` and `pip install`: from LockInputs, read the
installed environment, open the indexes and resolve (resolve/resolver.py does the choosing); and
whether a lock read from a file still fits the hosts.

May import: commands/diagnosing (the environment scan), binary/loader (an empty target's loader), env/, index/, resolve/,
lockfile/select, output/ (progress, lock_words), commands/options.
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from typing import Mapping, Optional, Sequence, Union

from cudaresolve.binary.facts import BinaryFacts
from cudaresolve.binary.loader import for_machine
from cudaresolve.commands.diagnosing import scan
from cudaresolve.commands.options import say
from cudaresolve.env.environment import Environment
from cudaresolve.env.interpreter import Target
from cudaresolve.env.store import default_cache_dir
from cudaresolve.errors import UsageError
from cudaresolve.host.facts import HostFacts
from cudaresolve.index.access import PackageIndex, open_index
from cudaresolve.index.cache import IndexCache, OfflineMiss
from cudaresolve.index.config import IndexConfig, index_config
from cudaresolve.index.http import Http
from cudaresolve.index.pages import ProjectFile
from cudaresolve.index.tags import host_platforms
from cudaresolve.index.wheel_facts import wheel_binary_facts
from cudaresolve.knowledge import components, toolkits
from cudaresolve.lockfile.select import Unfit, host_environment, host_tags, lock_pythons, select, selected_lock
from cudaresolve.output import lock_words
from cudaresolve.output.progress import download_progress, judging_progress
from cudaresolve.resolve.check import WheelReader, major_misfits, misfits, skipped
from cudaresolve.resolve.inputs import Indexes, LockInputs
from cudaresolve.resolve.lock import Lock, LockedPackage, LockedWheel
from cudaresolve.resolve.reasons import MajorRejection, Rejection
from cudaresolve.resolve.resolver import Judging, Unjudged, lock
from cudaresolve.resolve.targets import (
    HostPythons,
    LockTarget,
    interpreter_python,
    lock_targets,
    runs_installed,
    target_interpreter,
    target_marker,
)
from cudaresolve.resolve.universal import MergeConflict, Part, merged


def locked(inputs: LockInputs, environ: Mapping[str, str], *, quiet: bool = False) -> tuple[Lock, Environment]:
    """The lock `inputs` ask for, and the installed Environment it started from: each target resolved
    alone (its tags, markers, requires-python; the installed set only for the interpreter's own),
    one target's lock as it is, several merged into one."""
    if not inputs.requirements:
        raise UsageError("nothing to lock: give requirements, -r FILE or --project DIR")
    unstated = [(label, checks) for label, host in inputs.hosts if (checks := skipped(host))]
    several = len(inputs.hosts) > 1
    for label, checks in unstated:
        if len(checks) == 2:
            say(quiet, lock_words.assumed(label, checks, None, None, several))
    target = inputs.target
    where = target if inputs.installed_at is None else replace(target, site_packages=(inputs.installed_at,))
    installed, _ = scan(where, environ)
    targets = targets_of(inputs)
    parts = [Part(target_marker(one), _locked_for(one, inputs, installed, environ, quiet=quiet)) for one in targets]
    majors = {p.reason.build.cuda.major for part in parts for p in part.lock.packages if p.reason.build is not None}
    newest = max(majors, default=None)
    for label, checks in unstated:
        if len(checks) == 1 and newest is not None:  # a lock of no CUDA build assumed nothing
            say(quiet, lock_words.assumed(label, checks, newest, None if newest is None else toolkits.family_floor(newest), several))
    if len(parts) == 1:
        if targets[0].machine == inputs.target.machine:
            return parts[0].lock, installed
        # a lock for another machine says so, or an installer here would take it for its own
        return replace(parts[0].lock, environments=(parts[0].marker,)), installed
    try:
        return merged(parts), installed
    except MergeConflict as exc:  # one file name with two digests from the targets' indexes
        raise UsageError(f"the targets' locks cannot be merged: {exc}") from None


def targets_of(inputs: LockInputs) -> tuple[LockTarget, ...]:
    """The targets `inputs` name; without any, the hosts running the target interpreter's Python."""
    if inputs.targets:
        return inputs.targets
    python = interpreter_python(inputs.target)
    return lock_targets([HostPythons(label, facts, (python,)) for label, facts in inputs.hosts])


def _locked_for(one: LockTarget, inputs: LockInputs, installed: Environment, environ: Mapping[str, str], *, quiet: bool) -> Lock:
    """The lock of one target: its interpreter's markers, its tags, its hosts, and the installed set
    only where the target is the interpreter itself and the inputs keep it."""
    interpreter = target_interpreter(one, inputs.target)
    scanned = target_interpreter(one, installed.target)  # where the plan installs (pip --target's directory)
    if inputs.keep_installed and runs_installed(one, inputs.target):
        environment = replace(installed, target=scanned)
    elif installed.loader.machine == one.machine:  # nothing installed; this machine's loader and system files
        environment = Environment(target=scanned, distributions=(), elf_files=(), loader=installed.loader,
                                  system_facts=installed.system_facts)
    else:  # nothing installed, another machine: its loader model, whose system files are not here
        loader = for_machine(one.machine, driver_libraries=installed.loader.driver_libraries,
                             system_libraries=frozenset(components.system_libraries()))
        environment = Environment(target=scanned, distributions=(), elf_files=(), loader=loader)
    given = inputs.indexes.tags
    # the full version: the interpreter's own (3.11.7), X.Y.0 for another Python, as pip pads --python-version
    tags = replace(given, python_version=interpreter.version, platforms=given.platforms or host_platforms(one.machine, one.glibc))
    asked = replace(
        inputs, hosts=one.hosts, target=interpreter, indexes=replace(inputs.indexes, tags=tags),
        system_libraries=inputs.system_libraries and one.machine == inputs.target.machine,
    )
    said: list[Judging] = []  # the resolver judges a set per try; the first is said, once per target

    def progress(judging: Union[Judging, Unjudged]) -> None:
        if isinstance(judging, Unjudged):
            for line in lock_words.unjudged(judging):
                print(line, file=sys.stderr, flush=True)
        elif not said:
            said.append(judging)
            say(quiet, judging_progress(judging, one))

    with open_indexes(interpreter, asked.indexes, environ, quiet=quiet) as index:
        return lock(asked, environment, index, progress=progress)


def config_for(target: Target, indexes: Indexes, environ: Mapping[str, str]) -> IndexConfig:
    """The index configuration for `target`: pip's, the project's, then the command's settings."""
    assert target.python is not None and target.prefix is not None  # an interpreter's target: every command's here
    project_dir = indexes.project_dir or os.getcwd()
    return index_config(target.python, target.prefix, environ, project_dir, indexes.settings, site_packages=target.site_packages)


def open_indexes(target: Target, indexes: Indexes, environ: Mapping[str, str], *, quiet: bool = False,
                 give_up: bool = False) -> PackageIndex:
    """The configured indexes for `target`, caching as asked, downloads shown on stderr (not when quiet);
    `give_up`: a host that failed once is not asked again (the doctor's judge)."""
    return open_index(
        config_for(target, indexes, environ),
        target,
        environ,
        offline=indexes.offline,
        refresh=indexes.refresh,
        download_budget=indexes.download_budget,
        tag_overrides=indexes.tags,
        progress=None if quiet else download_progress(sys.stderr),
        give_up=give_up,
    )


class LockedWheels:
    """The binary facts of a lock's wheels, for `lock --check` and `install --lock`: each from its
    table row, else read from the wheel at the lock's URL (size bounded, sha256 checked, cached by
    sha256 as the lock's own reads are). The indexes (pip's configuration: proxy, certificates) are
    opened only for a wheel to download: a row, a local file or facts already cached need none."""

    def __init__(self, target: Target, indexes: Indexes, environ: Mapping[str, str], *, quiet: bool = False):
        self._target, self._indexes, self._environ, self._quiet = target, indexes, environ, quiet
        self._kept = IndexCache(os.path.join(default_cache_dir(environ), "index"), offline=True)
        self._index: Optional[PackageIndex] = None

    def __call__(self, package: LockedPackage, wheel: LockedWheel) -> tuple[BinaryFacts, ...]:
        assert package.version is not None
        file = ProjectFile(wheel.filename, wheel.url, package.name, package.version,
                           (("sha256", wheel.sha256),) if wheel.sha256 else (), None, None, None, wheel.size, wheel.url)
        try:
            return wheel_binary_facts(Http(), self._kept, file).members
        except OfflineMiss:
            if self._indexes.offline:
                raise
        if self._index is None:
            self._index = open_indexes(self._target, self._indexes, self._environ, quiet=self._quiet)
        return self._index.binary_facts(file).members

    def __enter__(self) -> "LockedWheels":
        return self

    def __exit__(self, *exc: object) -> None:
        if self._index is not None:
            self._index.close()


def misfits_on(locked: Lock, hosts: Sequence[tuple[str, HostFacts]], read: Optional[WheelReader] = None) -> list[Rejection]:
    """Each locked build that does not run on one of `hosts` ([] when the lock fits), each host judged with its machine."""
    return misfits(locked, hosts, read)


def host_misfits(
    locked: Lock, hosts: Sequence[tuple[str, HostFacts]], base: Mapping[str, str], origin: str,
    read: Optional[WheelReader] = None, advisories: Sequence[str] = (),
) -> tuple[list[Rejection], list[Unfit], list[MajorRejection]]:
    """`lock --check`: each host's part of the lock (lockfile/select.py) for every Python the lock's
    `environments` name for the host's machine (for a lock that names none, the interpreter's of
    `base` or the one its requires-python allows), its wheels matched to the host's machine and
    glibc, its builds and its CUDA majors judged on the host. The builds that do not run, what the
    lock cannot install there, and the majors the host cannot run; all empty when it fits."""
    rejections: list[Rejection] = []
    unfit: list[Unfit] = []
    majors: list[MajorRejection] = []
    for label, host in hosts:
        # a universal lock for other machines only: select() says so, with the interpreter's Python
        pythons = lock_pythons(locked, base, host.machine) or (base.get("python_version", ""),)
        for python in pythons:
            environment = host_environment(base, host.machine, python)
            target = label if len(pythons) == 1 else f"{label} (Python {python})"
            selection = select(locked, environment, host_tags(host.machine, host.glibc, python), target, origin)
            unfit += [u for u in selection.unfit if u not in unfit]
            part = selected_lock(locked, selection, environment, origin)
            rejections += [r for r in misfits(part, [(label, host)], read, advisories) if r not in rejections]
            majors += [m for m in major_misfits(part, [(label, host)]) if m.major not in {k.major for k in majors}]
    return rejections, unfit, majors
