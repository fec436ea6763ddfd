"""GPU compute capabilities and compilation targets (sm_90, sm_90a, sm_100f, compute_90).

One concept, shared by the host probe (what the GPU is), the fatbin reader (what a library carries)
and the compatibility rules (whether one runs on the other).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from cudaresolve.errors import UsageError

_CC_RE = re.compile(r"^\s*(?:sm_?)?(\d{1,2})\.(\d)\s*$", re.ASCII)
_TARGET_RE = re.compile(r"^(sm|compute)_(\d{2,3})([af]?)$", re.ASCII)


@dataclass(frozen=True, order=True)
class ComputeCapability:
    """A device's compute capability, e.g. 8.6 for an RTX 3090."""

    major: int
    minor: int

    @classmethod
    def parse(cls, text: str) -> "ComputeCapability":
        """Parse "8.6" (the form nvidia-smi, NVML and CONDA_OVERRIDE_CUDA_ARCH use)."""
        match = _CC_RE.match(str(text))
        if not match:
            raise UsageError(f"not a compute capability: {text!r} (expected MAJOR.MINOR, e.g. 8.6)")
        return cls(int(match.group(1)), int(match.group(2)))

    @classmethod
    def from_arch_number(cls, number: int) -> "ComputeCapability":
        """The decimal SM number of fatbins and nvcc (86, 90, 100, 121) as a capability."""
        return cls(number // 10, number % 10)

    @property
    def arch_number(self) -> int:
        return self.major * 10 + self.minor

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}"


@dataclass(frozen=True)
class Target:
    """A compilation target: SASS for one real arch (`sm_XY`) or PTX for a virtual arch (`compute_XY`).

    `suffix` is "" (portable), "a" (arch-specific: exactly X.Y) or "f" (family: same major, minor >= Y).
    """

    kind: str  # "sass" or "ptx"
    cc: ComputeCapability
    suffix: str = ""

    @classmethod
    def parse(cls, text: str) -> "Target":
        match = _TARGET_RE.match(text.strip())
        if not match:
            raise UsageError(f"not a CUDA target: {text!r} (expected e.g. sm_90, sm_90a, compute_100f)")
        kind = "sass" if match.group(1) == "sm" else "ptx"
        return cls(kind, ComputeCapability.from_arch_number(int(match.group(2))), match.group(3))

    def runs_on(self, gpu: ComputeCapability) -> bool:
        """The architecture rule alone (a PTX target also needs a driver that can JIT its ISA)."""
        if self.suffix == "a":
            return gpu == self.cc
        if self.kind == "ptx" and self.suffix == "":
            return gpu >= self.cc
        # SASS, and family PTX: same major, minor at least the target's.
        return gpu.major == self.cc.major and gpu.minor >= self.cc.minor

    def __str__(self) -> str:
        prefix = "sm" if self.kind == "sass" else "compute"
        return f"{prefix}_{self.cc.arch_number}{self.suffix}"


@dataclass(frozen=True)
class PtxTarget:
    """A PTX entry: its virtual arch and the PTX ISA version the producing toolkit wrote."""

    target: str  # "compute_90", "compute_90a"
    isa: Optional[str]  # "8.4"; None when the header did not carry it


def parse_arch_list(text: str) -> tuple[Target, ...]:
    """Parse a TORCH_CUDA_ARCH_LIST ("7.5;8.0;9.0;12.0+PTX"): SASS for each entry, PTX where +PTX."""
    targets: list[Target] = []
    for item in re.split(r"[;\s]+", text.strip()):
        if not item:
            continue
        with_ptx = item.upper().endswith("+PTX")
        number = item[:-4] if with_ptx else item
        match = re.match(r"^(\d{1,2})\.(\d)([af]?)$", number, re.ASCII)
        if not match:
            raise UsageError(f"not an arch list entry: {item!r} in {text!r}")
        cc = ComputeCapability(int(match.group(1)), int(match.group(2)))
        targets.append(Target("sass", cc, match.group(3)))
        if with_ptx:
            targets.append(Target("ptx", cc, match.group(3)))
    return tuple(targets)
