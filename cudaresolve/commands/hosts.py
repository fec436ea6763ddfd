"""The hosts a command judges against, from its options: probed, read from --host files,
overridden by --driver, --cuda, --gpu and the host variables.

Light on purpose (the doctor's cached path imports it): may import host/probe only.
"""

from __future__ import annotations

import argparse
import os
from typing import Optional, Sequence

from cudaresolve.host.facts import HostFacts
from cudaresolve.host.probe import host_for

THIS_HOST = "this host"


def host(args: argparse.Namespace) -> HostFacts:
    """The host of a command that judges one."""
    return host_for(host_file=args.host, driver=args.driver, cuda=args.cuda, gpus=args.gpu, environ=os.environ)


def hosts(args: argparse.Namespace) -> tuple[tuple[str, HostFacts], ...]:
    """(label, facts) of every host a lock must fit: each --host file, or this machine."""
    files: Sequence[Optional[str]] = args.host or [None]
    return tuple(
        (path or THIS_HOST, host_for(host_file=path, driver=args.driver, cuda=args.cuda, gpus=args.gpu, environ=os.environ))
        for path in files
    )


def probed_here(fleet: Sequence[tuple[str, HostFacts]]) -> bool:
    """Whether the one host is this machine as probed (no --host file, no driver or GPU stated):
    then its own system libraries are the target's."""
    if len(fleet) != 1 or fleet[0][0] != THIS_HOST:
        return False
    facts = fleet[0][1]
    sources = (facts.driver.release_source or "", facts.driver.cuda_source or "")
    return not any(source.startswith("override:") for source in sources) and not any(gpu.stated for gpu in facts.gpus)
