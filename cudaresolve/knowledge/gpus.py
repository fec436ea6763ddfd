"""Compute capabilities (data/gpus.toml): architecture names and example GPUs for humans, and the
majors a stated capability must belong to."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from cudaresolve.arch import ComputeCapability
from cudaresolve.knowledge import compiled, files
from cudaresolve.knowledge.files import CONFIDENCE


@dataclass(frozen=True)
class GpuArch:
    """A compute capability with its architecture name and example GPUs."""

    cc: ComputeCapability
    arch: str
    examples: tuple[str, ...]
    confidence: str = field(default="H", metadata=CONFIDENCE)
    note: Optional[str] = None


@dataclass(frozen=True)
class _File:
    confidence: str = field(metadata=CONFIDENCE)
    gpu: tuple[GpuArch, ...]


@compiled.table("gpus.toml")
def load() -> tuple[GpuArch, ...]:
    """Every known compute capability, lowest first."""
    return tuple(sorted(files.read("gpus.toml", _File).gpu, key=lambda g: g.cc))


def known_majors() -> tuple[int, ...]:
    """The majors of the known capabilities, lowest first."""
    return tuple(sorted({g.cc.major for g in load()}))
