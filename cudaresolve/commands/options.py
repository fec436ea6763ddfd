"""What parsed options say, as typed values: the index settings, the wheel tags, and the
LockInputs of `lock` and `install`. Each value is parsed here, at the edge.

May import: env/interpreter, host/probe, host/fleet and host/facts (the fleet's host files), index/ (config,
choices, tags), resolve/ (inputs, requirements, targets), errors, commands/hosts.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from typing import Mapping, Optional, Sequence, cast

from cudaresolve.commands.hosts import host_classes, probed_here
from cudaresolve.env.interpreter import Target
from cudaresolve.errors import UsageError
from cudaresolve.host.facts import Overrides
from cudaresolve.host.fleet import class_label, judged
from cudaresolve.host.probe import host_for
from cudaresolve.index.choices import PipChoices, pip_choices
from cudaresolve.index.config import IndexSettings, ProjectSettings, pip_config_paths, pip_number, read_pip_files
from cudaresolve.index.config import read_project as read_project_settings
from cudaresolve.index.tags import TagOverrides
from cudaresolve.resolve.inputs import Indexes, LockInputs, Policy
from cudaresolve.resolve.reasons import Constrained
from cudaresolve.resolve.requirements import RequirementSet, from_command_line, merge, read_project, read_requirements_file
from cudaresolve.resolve.targets import HostPythons, PythonVersion, interpreter_python, lock_targets, python_version


def index_settings(args: argparse.Namespace) -> IndexSettings:
    """The index flags given; None where a flag is not."""
    return IndexSettings(
        index_url=args.index_url,
        extra_index_urls=_listed(args.extra_index_url),
        find_links=_listed(args.find_links),
        no_index=args.no_index,
        trusted_hosts=_listed(args.trusted_host),
        cert=args.cert,
        client_cert=args.client_cert,
        # pip_number gives a float for "timeout" and an int for "retries" (it is typed object)
        timeout=None if args.timeout is None else cast(float, pip_number("timeout", args.timeout, "--timeout")),
        retries=None if args.retries is None else cast(int, pip_number("retries", args.retries, "--retries")),
        proxy=args.proxy,
        torch_index_base=args.torch_index_base,
    )


def _listed(values: Optional[Sequence[str]]) -> Optional[tuple[str, ...]]:
    return None if values is None else tuple(values)


def python_versions(args: argparse.Namespace) -> tuple[PythonVersion, ...]:
    """Each --python-version given, validated, once each in the order given."""
    return tuple(dict.fromkeys(python_version(text, "--python-version") for text in args.python_version or ()))


def tags(args: argparse.Namespace, *, several_pythons: bool = False) -> TagOverrides:
    """pip download's wheel options; --python-version only when one is given (`lock` makes a target
    of each when `several_pythons`)."""
    versions = python_versions(args)
    if len(versions) > 1 and not several_pythons:
        raise UsageError("give --python-version once here: only lock takes several")
    return TagOverrides(
        python_version="%d.%d" % versions[0] if len(versions) == 1 else None,
        platforms=tuple(args.platform or ()),
        implementation=args.implementation,
        abis=tuple(args.abi or ()),
    )


def indexes(args: argparse.Namespace, files: IndexSettings = IndexSettings(), *, several_pythons: bool = False) -> Indexes:
    """Where to look: the flags over the index lines of requirements `files`, as in pip."""
    return Indexes(
        settings=index_settings(args).over(files),
        project_dir=getattr(args, "project", None),
        tags=tags(args, several_pythons=several_pythons),
        offline=args.offline,
        refresh=args.refresh,
        download_budget=None if getattr(args, "download_budget", None) is None else byte_size(args.download_budget, "--download-budget"),
    )


_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40}


def byte_size(text: str, option: str) -> int:
    """A size as a person writes it: 8GiB, 500MB, 1000000 (bytes)."""
    number = text.strip().rstrip("bBiIkKmMgGtT ")
    unit = text.strip()[len(number):].strip().lower()
    if not number.isdigit() or unit not in _UNITS or int(number) == 0:
        raise UsageError(f"{option} {text!r}: not a size (a whole number above 0, optionally with B, kB, MB, GB, KiB, MiB or GiB)")
    return int(number) * _UNITS[unit]


def lock_inputs(args: argparse.Namespace, target: Target, stated: Overrides, installed_at: Optional[str] = None) -> LockInputs:
    """What `lock` and `install` are asked: the requirements of the command line, -r files and the
    project, pip's configured constraints and the -c files', the hosts (the `stated` facts on top),
    the indexes and the choices (pip's configuration, --pre on top)."""
    environ = dict(os.environ)
    choices, configured = pip_configured(target, environ)
    sets = [from_command_line(args.requirements)]
    sets += [read_requirements_file(path, environ) for path in args.requirement]
    if args.project is not None or args.extra or args.group:
        sets.append(read_project(args.project or os.getcwd(), args.extra, args.group))
    sets += configured
    sets += [read_requirements_file(path, environ, constraint=True) for path in args.constraint]
    asked = merge(sets)
    each = lock_hosts(args, target, stated)
    fleet = tuple((host.label, host.facts) for host in each)
    return LockInputs(
        requirements=asked.requirements,
        constraints=asked.constraints,
        hosts=fleet,
        target=target,
        targets=lock_targets(each),
        indexes=indexes(args, asked.index_options, several_pythons=True),
        policy=policy(formats_given(choices, args), upgrade=args.upgrade, pre=args.pre, allow_advisories=tuple(args.allow_advisory), deep=args.deep,
                      cpu=args.cpu),
        installed_at=installed_at,
        system_libraries=probed_here(fleet),
    )


def lock_hosts(args: argparse.Namespace, target: Target, stated: Overrides) -> tuple[HostPythons, ...]:
    """The hosts to lock for, each with its Pythons: the --host files (or this machine), each running
    every --python-version (default: the target interpreter's); without either, the project's
    `[tool.cudaresolve] fleet` when it has one."""
    pythons = python_versions(args)
    if not args.host and not pythons:
        project = read_project_settings(getattr(args, "project", None) or os.getcwd())
        if project is not None and project.fleet is not None:
            return fleet_hosts(project, target, stated)
    own = pythons or (interpreter_python(target),)
    return tuple(HostPythons(class_label(c), c.facts, own, c.hosts) for c in host_classes(args, stated))


def fleet_hosts(project: ProjectSettings, target: Target, stated: Overrides) -> tuple[HostPythons, ...]:
    """The project's fleet table: each host file, relative to the pyproject.toml, with its Pythons
    (default: the target interpreter's), the `stated` facts applied as to --host."""
    assert project.fleet is not None
    where = f"{project.path}: tool.cudaresolve.fleet"
    if not project.fleet:
        raise UsageError(f"{where}: is empty (list the hosts, or leave the key out)")
    base = os.path.dirname(os.path.abspath(project.path))
    found = []
    for number, entry in enumerate(project.fleet):
        if entry.python is not None and not entry.python:
            raise UsageError(f"{where}[{number}].python: is empty (list the Pythons, e.g. [\"3.12\"], or leave the key out)")
        pythons = tuple(dict.fromkeys(python_version(text, f"{where}[{number}].python") for text in entry.python or ()))
        if not entry.host.strip():
            raise UsageError(f"{where}[{number}].host: is empty (give a host file, e.g. hosts/h100.json)")
        path = os.path.join(base, entry.host)
        try:
            facts = judged(host_for(host_file=path, overrides=stated, environ=os.environ), f"--host {path}")
        except UsageError as exc:
            raise UsageError(f"{where}[{number}].host: {exc}") from None
        found.append(HostPythons(entry.host, facts, pythons or (interpreter_python(target),)))
    return tuple(found)


def pip_configured(target: Target, environ: Mapping[str, str]) -> tuple[PipChoices, list[RequirementSet]]:
    """pip's choices for `target` from its configuration files and `PIP_*` variables, and the
    constraints files they name, read as -c files are (each constraint keeps the setting that
    named its file)."""
    choices = pip_choices(read_pip_files(pip_config_paths(target.prefix, environ)), environ)
    sets = []
    for named in choices.constraints:
        try:
            found = read_requirements_file(named.path, dict(environ), constraint=True)
        except UsageError as exc:
            raise UsageError(f"{exc} (a constraints file named by {named.via})") from None
        constraints = tuple(
            dataclasses.replace(need, origin=dataclasses.replace(need.origin, via=named.via))
            if isinstance(need.origin, Constrained) else need
            for need in found.constraints
        )
        sets.append(dataclasses.replace(found, constraints=constraints))
    return choices, sets


def formats_given(choices: PipChoices, args: argparse.Namespace) -> PipChoices:
    """pip's configured choices with the command's --no-binary and --only-binary applied after them, in
    the order given, as pip applies its command line after its configuration."""
    formats = choices.formats
    for option, text in getattr(args, "formats", None) or ():
        formats = formats.applied(text, no_binary=option == "no_binary", via="--" + option.replace("_", "-"))
    return dataclasses.replace(choices, formats=formats)


def policy(
    choices: PipChoices, *, upgrade: bool, pre: bool, allow_advisories: tuple[str, ...] = (), deep: bool = False, cpu: bool = False
) -> Policy:
    """How the lock chooses: the command's flags over pip's configured choices."""
    return Policy(
        upgrade=upgrade,
        allow_advisories=allow_advisories,
        deep=deep,
        cpu=cpu,
        pre=pre or choices.pre,
        formats=choices.formats,
        prefer_binary=choices.prefer_binary,
        upgrade_strategy=choices.upgrade_strategy,
    )


def say(quiet: bool, text: str) -> None:
    """Progress on stderr, unless -q."""
    if not quiet:
        print(text, file=sys.stderr, flush=True)
