"""CUDA_VISIBLE_DEVICES: which of the enumerated GPUs a CUDA program in this environment can use.

CUDA reads the list left to right: an index, a GPU UUID (any unique prefix of "GPU-..."), or a
MIG instance UUID ("MIG-..."). The first entry that names no device ends the list, so "" , "-1"
and "NoDevFiles" (set by some schedulers) hide every GPU. A GPU the list leaves out stays in the
facts with visible=False: the driver still has it, CUDA programs here do not see it.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Optional

from cudaresolve.host.facts import Gpu, Note

SOURCE = "CUDA_VISIBLE_DEVICES"
_INDEX = re.compile(r"[0-9]+")  # str.isdigit() also takes "²", which int() refuses


def apply_visible_devices(
    gpus: tuple[Gpu, ...], value: Optional[str], device_order: Optional[str] = None
) -> tuple[tuple[Gpu, ...], tuple[Note, ...]]:
    """Mark each GPU visible or not under `value`; `device_order` is CUDA_DEVICE_ORDER."""
    if value is None:
        return gpus, ()
    chosen: list[int] = []  # positions in `gpus`
    notes: list[Note] = []
    for entry in (part.strip() for part in value.split(",")):
        position = _match(gpus, entry)
        if position is None:
            notes.append(
                Note(SOURCE, f"entry {entry!r} names no GPU; CUDA ignores it and every entry after it", value)
            )
            break
        if position not in chosen:
            chosen.append(position)
    result = tuple(replace(gpu, visible=i in chosen) for i, gpu in enumerate(gpus))
    notes.insert(0, Note(SOURCE, f"{len(chosen)} of {len(gpus)} GPU(s) visible to CUDA"))
    names = {gpu.name for gpu in gpus}
    by_index = any(_INDEX.fullmatch(entry.strip()) for entry in value.split(","))
    if by_index and len(names) > 1 and device_order != "PCI_BUS_ID":
        notes.append(
            Note(
                SOURCE,
                "indices follow NVML/PCI order here, but CUDA numbers mixed GPUs fastest-first "
                "unless CUDA_DEVICE_ORDER=PCI_BUS_ID; prefer GPU UUIDs",
            )
        )
    return result, tuple(notes)


def _match(gpus: tuple[Gpu, ...], entry: str) -> Optional[int]:
    if _INDEX.fullmatch(entry):
        digits = entry.lstrip("0") or "0"
        if len(digits) > 9:  # no machine has that many GPUs (and int() refuses 4,300 digits)
            return None
        wanted = int(digits)
        return next((i for i, gpu in enumerate(gpus) if gpu.index == wanted), None)
    lowered = entry.lower()
    if lowered.startswith("gpu-"):
        hits = [i for i, gpu in enumerate(gpus) if gpu.uuid and gpu.uuid.lower().startswith(lowered)]
        return hits[0] if len(hits) == 1 else None
    if lowered.startswith("mig-"):
        for i, gpu in enumerate(gpus):
            # Old drivers named MIG instances MIG-GPU-<parent uuid>/<gi>/<ci>.
            if gpu.uuid and lowered.startswith("mig-" + gpu.uuid.lower() + "/"):
                return i
            if any(mig.uuid.lower() == lowered for mig in gpu.mig_devices):
                return i
    return None
