"""A fleet folded into classes before anything is resolved: hosts whose facts the judge cannot tell
apart are one class, judged once and recorded once in the lock.

What the judge reads of a host (resolve/fit.py, resolve/candidates.py, resolve/targets.py and the
checks): the system, the machine, tegra and glibc; the driver's release and CUDA version; whether
there are GPUs and each visible GPU's compute capability; the notes only when neither a driver nor
a GPU is known. A GPU's name, memory, UUID and MIG devices only colour words, so `judged` keeps one
GPU per distinct (capability, visibility), with the index and source of the first: 700 identical
GPUs judge as one, and 10,000 nodes that differ in their GPU memory are one class.

Pure values and functions. May import: host/facts, errors.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from cudaresolve.errors import UsageError
from cudaresolve.host.facts import Gpu, HostFacts

MAX_KINDS = 64  # distinct (capability, visibility) GPUs of one host; real machines have one or two
MAX_NOTES = 5  # the judge quotes at most five notes of a host it knows nothing else of
MAX_LABEL = 400  # a class's label in the lock and its report (the lock file allows 1,000)


@dataclass(frozen=True)
class HostClass:
    """Hosts with the same judged facts: one host of the lock."""

    facts: HostFacts
    labels: tuple[str, ...]  # the members' labels, in the order given, each once
    hosts: int  # how many hosts the labels stand for (a node class's label names several nodes)


@dataclass(frozen=True)
class Folding:
    """How many hosts a fleet had and how many classes they folded into."""

    hosts: int
    classes: int


def judged(facts: HostFacts, label: str) -> HostFacts:
    """`facts` reduced to what the judge reads; more than MAX_KINDS kinds of GPU is a UsageError
    naming `label` (the input the host came from)."""
    kinds: dict[tuple[object, bool], Gpu] = {}
    for number, gpu in enumerate(facts.gpus):
        key = (gpu.compute_capability, gpu.visible)
        if key not in kinds:
            index = gpu.index if gpu.index is not None else number
            kinds[key] = Gpu(gpu.compute_capability, source=gpu.source, index=index, visible=gpu.visible)
    if len(kinds) > MAX_KINDS:
        raise UsageError(f"{label}: {len(facts.gpus)} GPUs of {len(kinds)} kinds (compute capability and visibility), "
                         f"more than the {MAX_KINDS} one host can have")
    unknown = facts.driver.release is None and facts.driver.cuda is None and not facts.gpus
    return replace(facts, gpus=tuple(kinds.values()), cuda_visible_devices=None,
                   notes=facts.notes[:MAX_NOTES] if unknown else ())


def fold(members: Sequence[tuple[str, HostFacts, int]]) -> tuple[HostClass, ...]:
    """(label, judged facts, how many hosts the label stands for) folded by their facts, in the
    order each class first appears."""
    labels: dict[HostFacts, dict[str, None]] = {}
    counts: dict[HostFacts, int] = {}
    for label, facts, count in members:
        labels.setdefault(facts, {})[label] = None
        counts[facts] = counts.get(facts, 0) + count
    return tuple(HostClass(facts, tuple(names), counts[facts]) for facts, names in labels.items())


def folding(classes: Sequence[HostClass]) -> Folding:
    """How many hosts `classes` stand for, and how many classes they are."""
    return Folding(sum(c.hosts for c in classes), len(classes))


def class_label(host_class: HostClass) -> str:
    """The members' labels joined, at most about MAX_LABEL characters of them, then `+N more`."""
    shown: list[str] = []
    used = 0
    for label in host_class.labels:
        if shown and used + len(label) > MAX_LABEL:
            break
        shown.append(label)
        used += len(label) + 2
    left = len(host_class.labels) - len(shown)
    return ", ".join(shown + ([f"+{left} more"] if left else []))
