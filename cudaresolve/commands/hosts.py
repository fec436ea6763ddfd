"""The hosts a command judges against, from its options: probed, read from --host files or from a
Kubernetes node list (--hosts-from-nodes), with the facts stated by --driver, --cuda, --gpu and the
host variables on top (`stated`: commands/host_options.py reads them once per command).

Light on purpose (the doctor's cached path imports it): may import host/probe, host/fleet and
host/facts; host/nodes and output/host only for --hosts-from-nodes or hosts that folded.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Optional, Sequence

from cudaresolve.errors import UsageError
from cudaresolve.host.facts import HostFacts, Overrides
from cudaresolve.host.fleet import HostClass, class_label, fold, folding, judged
from cudaresolve.host.probe import host_for, stated_over

THIS_HOST = "this host"


def host(args: argparse.Namespace, stated: Overrides) -> HostFacts:
    """The host of a command that judges one."""
    return host_for(host_file=args.host, overrides=stated, environ=os.environ)


def hosts(args: argparse.Namespace, stated: Overrides) -> tuple[tuple[str, HostFacts], ...]:
    """(label, facts) of every class of hosts a lock must fit (`host_classes`)."""
    return tuple((class_label(c), c.facts) for c in host_classes(args, stated))


def host_classes(args: argparse.Namespace, stated: Overrides) -> tuple[HostClass, ...]:
    """Every host a lock must fit — each --host file and each GPU node of --hosts-from-nodes, or else
    this machine — folded into classes by the facts the judge reads (host/fleet.py), before anything
    is resolved; how many hosts made how many classes is said on stderr (unless -q) when some folded."""
    nodes: Optional[str] = getattr(args, "hosts_from_nodes", None)
    if nodes == "-" and "-" in (args.host or []):
        raise UsageError("--host - and --hosts-from-nodes - cannot both read stdin")
    files: Sequence[Optional[str]] = args.host or ([] if nodes is not None else [None])
    members = [
        (path or THIS_HOST, judged(host_for(host_file=path, overrides=stated, environ=os.environ),
                                   THIS_HOST if path is None else f"--host {path}"), 1)
        for path in files
    ]
    classes = fold(members + (_node_classes(nodes, args, stated) if nodes is not None else []))
    made = folding(classes)
    if made.hosts > made.classes and not getattr(args, "quiet", False):
        from cudaresolve.output.host import render_folding

        print(render_folding(made), file=sys.stderr, flush=True)
    return classes


def _node_classes(path: str, args: argparse.Namespace, stated: Overrides) -> list[tuple[str, HostFacts, int]]:
    """(label, facts, how many nodes) of each class of a node list's GPU nodes, the overrides on top
    (classes they make alike are one); the nodes skipped for having no GPU are named on stderr (unless -q)."""
    from cudaresolve.host.nodes import NodeClass, load_cluster, regrouped
    from cudaresolve.host.nodes import class_label as node_class_label
    from cudaresolve.output.host import render_nodes_without_gpu

    cluster = load_cluster(path, sys.stdin)
    if cluster.without_gpu and not getattr(args, "quiet", False):
        print(render_nodes_without_gpu(path, cluster.without_gpu), file=sys.stderr, flush=True)
    classes = [
        NodeClass(judged(stated_over(c.facts, stated), f"--hosts-from-nodes {path}: node {c.nodes[0]}"), c.nodes)
        for c in cluster.classes
    ]
    return [(node_class_label(c), c.facts, c.count) for c in regrouped(classes)]


def probed_here(fleet: Sequence[tuple[str, HostFacts]]) -> bool:
    """Whether the one host is this machine as probed (no --host file, no driver or GPU stated):
    then its own system libraries are the target's."""
    if len(fleet) != 1 or fleet[0][0] != THIS_HOST:
        return False
    facts = fleet[0][1]
    sources = (facts.driver.release_source or "", facts.driver.cuda_source or "")
    return not any(source.startswith("override:") for source in sources) and not any(gpu.stated for gpu in facts.gpus)
