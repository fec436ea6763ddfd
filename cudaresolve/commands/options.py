"""What parsed options say, as typed values: the index settings, the wheel tags, and the
LockInputs of `lock` and `install`. Each value is parsed here, at the edge.

May import: env/interpreter, index/ (config, choices, tags), resolve/ (inputs, requirements), errors,
commands/hosts.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from typing import Mapping, Optional, Sequence, cast

from cudaresolve.commands.hosts import hosts, probed_here
from cudaresolve.env.interpreter import Target
from cudaresolve.errors import UsageError
from cudaresolve.index.choices import PipChoices, pip_choices
from cudaresolve.index.config import IndexSettings, pip_config_paths, pip_number, read_pip_files
from cudaresolve.index.tags import TagOverrides
from cudaresolve.resolve.inputs import Indexes, LockInputs, Policy
from cudaresolve.resolve.reasons import Constrained
from cudaresolve.resolve.requirements import RequirementSet, from_command_line, merge, read_project, read_requirements_file


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


def tags(args: argparse.Namespace) -> TagOverrides:
    return TagOverrides(
        python_version=args.python_version,
        platforms=tuple(args.platform or ()),
        implementation=args.implementation,
        abis=tuple(args.abi or ()),
    )


def indexes(args: argparse.Namespace, files: IndexSettings = IndexSettings()) -> Indexes:
    """Where to look: the flags over the index lines of requirements `files`, as in pip."""
    return Indexes(
        settings=index_settings(args).over(files),
        project_dir=getattr(args, "project", None),
        tags=tags(args),
        offline=args.offline,
        refresh=args.refresh,
    )


def lock_inputs(args: argparse.Namespace, target: Target, installed_at: Optional[str] = None) -> LockInputs:
    """What `lock` and `install` are asked: the requirements of the command line, -r files and the
    project, pip's configured constraints and the -c files', the hosts, the indexes and the choices
    (pip's configuration, --pre on top)."""
    environ = dict(os.environ)
    choices, configured = pip_configured(target, environ)
    sets = [from_command_line(args.requirements)]
    sets += [read_requirements_file(path, environ) for path in args.requirement]
    if args.project is not None or args.extra or args.group:
        sets.append(read_project(args.project or os.getcwd(), args.extra, args.group))
    sets += configured
    sets += [read_requirements_file(path, environ, constraint=True) for path in args.constraint]
    asked = merge(sets)
    fleet = hosts(args)
    return LockInputs(
        requirements=asked.requirements,
        constraints=asked.constraints,
        hosts=fleet,
        target=target,
        indexes=indexes(args, asked.index_options),
        policy=policy(choices, upgrade=args.upgrade, pre=args.pre, allow_advisories=tuple(args.allow_advisory), deep=args.deep,
                      cpu=args.cpu),
        installed_at=installed_at,
        system_libraries=probed_here(fleet),
    )


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
