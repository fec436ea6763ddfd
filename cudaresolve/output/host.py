"""`cudaresolve probe` for people: the driver, one row per GPU, and what each source said.

May import: host/ values (host/nodes to shorten node names, host/fleet's Folding); never the doctor's edge.
"""

from __future__ import annotations

from typing import Optional

from cudaresolve.host.facts import Gpu, HostFacts
from cudaresolve.host.fleet import Folding
from cudaresolve.host.nodes import shortened

_COLUMNS = ("GPU", "NAME", "CC", "MEMORY", "UUID", "VISIBLE", "MIG", "SOURCE")


def render_host(facts: HostFacts) -> str:
    lines = [f"host     {_platform(facts)}", f"driver   {_driver(facts)}"]
    if facts.cuda_visible_devices is not None:
        lines.append(f"CUDA_VISIBLE_DEVICES={facts.cuda_visible_devices!r}")
    if facts.gpus:
        rows = [_COLUMNS] + [_row(gpu) for gpu in facts.gpus]
        widths = [max(len(row[i]) for row in rows) for i in range(len(_COLUMNS))]
        lines.append("")
        for row in rows:
            lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    else:
        lines.append("GPUs     none found")
    if facts.notes:
        lines.append("")
        lines.append("notes")
        for note in facts.notes:
            lines.append(f"  {note.source}: {note.message}")
            if note.line is not None:
                lines.append(f"    | {note.line}")
    return "\n".join(lines) + "\n"


def _platform(facts: HostFacts) -> str:
    parts = [f"{facts.system} {facts.machine}"]
    if facts.glibc:
        parts.append(f"glibc {facts.glibc}")
    if facts.tegra:
        parts.append("Jetson/Tegra")
    return ", ".join(parts)


def _driver(facts: HostFacts) -> str:
    driver = facts.driver
    release = _fact(driver.release, driver.release_source, "release unknown", "no driver")
    cuda = _fact(driver.cuda and f"CUDA {driver.cuda}", driver.cuda_source, "CUDA unknown", "no CUDA")
    return f"{release}, {cuda}"


def _fact(value: object, source: Optional[str], unknown: str, stated_none: str) -> str:
    """A fact and its source; without a value, a source means an override stated "none"."""
    if value is not None:
        return f"{value} ({source})"
    return f"{stated_none} ({source})" if source else unknown


def _row(gpu: Gpu) -> tuple[str, ...]:
    if gpu.mig_mode is None:
        mig = "-"
    elif gpu.mig_mode:
        mig = f"on, {len(gpu.mig_devices)} instance(s)"
    else:
        mig = "off"
    return (
        "-" if gpu.index is None else str(gpu.index),
        gpu.name or "-",
        str(gpu.compute_capability),
        "-" if gpu.memory_mib is None else f"{gpu.memory_mib} MiB",
        gpu.uuid or "-",
        "yes" if gpu.visible else "no",
        mig,
        gpu.source,
    )


def render_nodes_without_gpu(path: str, names: tuple[str, ...]) -> str:
    """The one line naming the nodes of a --hosts-from-nodes list that no lock host stands for."""
    count = f"{len(names)} node{'s' if len(names) != 1 else ''}"
    return f"--hosts-from-nodes {path}: skipped {count} with no NVIDIA GPU (no GPU Feature Discovery label): {shortened(names)}"


def render_folding(made: Folding) -> str:
    """The line saying how many hosts folded into how many classes, each judged once."""
    classes = f"{made.classes} class{'es' if made.classes != 1 else ''}"
    return (f"{made.hosts} hosts fold into {classes} by what the judge reads (system, machine, glibc, driver, "
            f"CUDA version, distinct compute capabilities): each class is resolved and recorded once")
