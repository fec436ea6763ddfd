"""The hosts a command judges against, from its options: probed, read from --host files or from a
Kubernetes node list (--hosts-from-nodes), overridden by --driver, --cuda, --gpu and the host variables.

Light on purpose (the doctor's cached path imports it): may import host/probe; host/nodes and
output/host only for --hosts-from-nodes.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Optional, Sequence

from cudaresolve.errors import UsageError
from cudaresolve.host.facts import HostFacts
from cudaresolve.host.probe import host_for, stated_over

THIS_HOST = "this host"


def host(args: argparse.Namespace) -> HostFacts:
    """The host of a command that judges one."""
    return host_for(host_file=args.host, driver=args.driver, cuda=args.cuda, gpus=args.gpu, environ=os.environ)


def hosts(args: argparse.Namespace) -> tuple[tuple[str, HostFacts], ...]:
    """(label, facts) of every host a lock must fit: each --host file and each class of identical
    GPU nodes of --hosts-from-nodes, or else this machine."""
    nodes: Optional[str] = getattr(args, "hosts_from_nodes", None)
    if nodes == "-" and "-" in (args.host or []):
        raise UsageError("--host - and --hosts-from-nodes - cannot both read stdin")
    files: Sequence[Optional[str]] = args.host or ([] if nodes is not None else [None])
    fleet = tuple(
        (path or THIS_HOST, host_for(host_file=path, driver=args.driver, cuda=args.cuda, gpus=args.gpu, environ=os.environ))
        for path in files
    )
    return fleet + (_node_classes(nodes, args) if nodes is not None else ())


def _node_classes(path: str, args: argparse.Namespace) -> tuple[tuple[str, HostFacts], ...]:
    """The classes of a node list's GPU nodes, the overrides on top; the nodes skipped for having no
    GPU are named on stderr (unless -q)."""
    from cudaresolve.host.nodes import class_label, load_cluster
    from cudaresolve.output.host import render_nodes_without_gpu

    cluster = load_cluster(path, sys.stdin)
    if cluster.without_gpu and not getattr(args, "quiet", False):
        print(render_nodes_without_gpu(path, cluster.without_gpu), file=sys.stderr, flush=True)
    return tuple(
        (class_label(node_class), stated_over(node_class.facts, args.driver, args.cuda, args.gpu, os.environ))
        for node_class in cluster.classes
    )


def probed_here(fleet: Sequence[tuple[str, HostFacts]]) -> bool:
    """Whether the one host is this machine as probed (no --host file, no driver or GPU stated):
    then its own system libraries are the target's."""
    if len(fleet) != 1 or fleet[0][0] != THIS_HOST:
        return False
    facts = fleet[0][1]
    sources = (facts.driver.release_source or "", facts.driver.cuda_source or "")
    return not any(source.startswith("override:") for source in sources) and not any(gpu.stated for gpu in facts.gpus)
