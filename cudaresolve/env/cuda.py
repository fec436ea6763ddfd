"""The environment's CUDA picture: which installed distribution is which CUDA component, and which
CUDA version each package was built for. Data only; the checks judge it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional

from cudaresolve.env.distributions import Distribution
from cudaresolve.knowledge import components, cupy, torch

# Components whose wheel version is the CUDA release itself (12.8.90 -> CUDA 12.8); the library
# wheels (cuBLAS 13.1.0.3 under CUDA 13.0) are versioned by their library instead.
_VERSIONED_LIKE_CUDA = ("cudart", "nvrtc", "nvjitlink", "cupti", "nvtx")


@dataclass(frozen=True)
class CudaBuild:
    """The CUDA a package was built for, as far as its name, version or the tables tell."""

    dist: str
    version: str
    cuda: str  # "13.0", or the major alone ("12") when only that is known
    evidence: str


def component_builds(distributions: Iterable[Distribution]) -> tuple[CudaBuild, ...]:
    """CUDA of every installed NVIDIA component wheel (nvidia-cuda-runtime-cu12 12.8.90 -> 12.8)."""
    builds = []
    for dist in distributions:
        rows = components.for_dist(dist.name, str(dist.version))
        if not rows:
            continue
        row = rows[0]
        if row.name in _VERSIONED_LIKE_CUDA and dist.version.release[0] == row.cuda_major:
            cuda = f"{dist.version.release[0]}.{dist.version.release[1]}"
            evidence = f"{dist.name} {dist.version} is the CUDA {cuda} {row.name}"
        else:
            cuda = str(row.cuda_major)
            evidence = f"{dist.name} {dist.version} is a CUDA {row.cuda_major} component"
        builds.append(CudaBuild(dist.name, str(dist.version), cuda, evidence))
    return tuple(builds)


def framework_build(dist: Distribution) -> Optional[CudaBuild]:
    """CUDA of a framework wheel: torch from its local label or the PyPI default, CuPy from its name."""
    version = str(dist.version)
    if dist.name == "torch":
        local = dist.version.local
        if local is not None and not local.startswith("cu"):
            return None  # +cpu, +rocm...: not a CUDA build
        variant = torch.variant(dist.version.public, local)
        if variant is None:
            return None
        how = f"+{local}" if local else "the PyPI build"
        return CudaBuild(dist.name, version, variant.cuda, f"torch {version} is {how}, built with CUDA {variant.cuda}")
    row = cupy.dist(dist.name, dist.version.public) if dist.name.startswith("cupy-cuda") else None
    if row is None:
        return None
    major = row.cuda[0].split(".")[0]
    return CudaBuild(dist.name, version, major, f"{dist.name} is CuPy's CUDA {major} wheel")
