"""The host facts the command line and the environment state instead of probing: flags,
cudaresolve's variables, then the ecosystem's, read once into one `Overrides` value that every
command hands to the host code (host/probe.py applies it).

Per fact, the first source present wins:
  driver release: --driver, CUDARESOLVE_DRIVER, UV_CUDA_DRIVER_VERSION (uv's variable)
  driver CUDA:    --cuda, CUDARESOLVE_CUDA, CONDA_OVERRIDE_CUDA (conda's __cuda)
  GPUs:           --gpu (repeatable), CUDARESOLVE_GPUS (comma-separated), CONDA_OVERRIDE_CUDA_ARCH
                  (conda's __cuda_arch: one capability standing for every GPU)
A variable set to the empty string states "none" (conda's convention: an empty CONDA_OVERRIDE_CUDA
means no CUDA driver), so a CPU-only CI job can say so without a GPU being probed.
Overriding either driver fact replaces the whole probed driver, since the two describe one driver;
stated together, the CUDA version must be one the release can report (550 reports at most 12.4).

Each value is read here, once, by its value type's parser. May import: host/facts, arch, versions,
errors, knowledge/toolkits (the CUDA each driver branch reports).
"""

from __future__ import annotations

import argparse
import os
from typing import Mapping, Optional, Sequence

from cudaresolve.arch import ComputeCapability
from cudaresolve.errors import UsageError
from cudaresolve.host.facts import Driver, Gpu, Overrides, check_known
from cudaresolve.knowledge import toolkits
from cudaresolve.versions import CudaVersion, DriverRelease

RELEASE_VARIABLES = ("CUDARESOLVE_DRIVER", "UV_CUDA_DRIVER_VERSION")
CUDA_VARIABLES = ("CUDARESOLVE_CUDA", "CONDA_OVERRIDE_CUDA")


def host_options(args: argparse.Namespace, environ: Mapping[str, str] = os.environ) -> Overrides:
    """What a command's --driver, --cuda and --gpu, and the host variables of `environ`, state."""
    return overrides_from(args.driver, args.cuda, args.gpu or (), environ)


def stated_by(environ: Mapping[str, str]) -> Overrides:
    """What the host variables of `environ` alone state (pip's wrapper and the conda plugin take no flags)."""
    return overrides_from(None, None, (), environ)


def overrides_from(
    driver: Optional[str], cuda: Optional[str], gpus: Sequence[str], environ: Mapping[str, str]
) -> Overrides:
    """Validate and pick the stated facts; a bad value is a UsageError naming its flag or variable."""
    release_pick = _pick(("--driver", driver), *((name, environ.get(name)) for name in RELEASE_VARIABLES))
    cuda_pick = _pick(("--cuda", cuda), *((name, environ.get(name)) for name in CUDA_VARIABLES))
    stated_driver = None
    if release_pick or cuda_pick:
        stated_driver = Driver(
            release=_release(*release_pick) if release_pick else None,
            release_source=f"override:{release_pick[0]}" if release_pick else None,
            cuda=_cuda(*cuda_pick) if cuda_pick else None,
            cuda_source=f"override:{cuda_pick[0]}" if cuda_pick else None,
        )
        _one_driver(stated_driver, release_pick, cuda_pick)
    return Overrides(driver=stated_driver, gpus=_gpus(gpus, environ))


def _one_driver(driver: Driver, release_pick: Optional[tuple[str, str]], cuda_pick: Optional[tuple[str, str]]) -> None:
    """A CUDA version newer than the driver release reports states a driver that does not exist."""
    if driver.release is None or driver.cuda is None or release_pick is None or cuda_pick is None:
        return
    top = toolkits.max_cuda_for_driver(driver.release)
    if top is not None and top < driver.cuda:
        raise UsageError(
            f"{cuda_pick[0]} {cuda_pick[1]}: driver {driver.release} ({release_pick[0]}) runs CUDA up to {top}, "
            f"not {driver.cuda}; give the CUDA version that driver reports, or only one of the two"
        )


def _pick(*candidates: tuple[str, Optional[str]]) -> Optional[tuple[str, str]]:
    return next(((name, value) for name, value in candidates if value is not None), None)


def _release(where: str, value: str) -> Optional[DriverRelease]:
    if value == "" and where != "--driver":
        return None
    try:
        return DriverRelease.parse(value)
    except UsageError:
        raise UsageError(f"{where}: {value!r} is not a driver release (expected e.g. 535.104.05)") from None


def _cuda(where: str, value: str) -> Optional[CudaVersion]:
    """The CUDA version a driver reports is a minor: a major alone ("12", as CONDA_OVERRIDE_CUDA
    may say) means its .0."""
    if value == "" and where != "--cuda":
        return None
    try:
        cuda = CudaVersion.parse(value)
    except UsageError:
        raise UsageError(f"{where}: {value!r} is not a CUDA version (expected e.g. 12.4)") from None
    return CudaVersion(cuda.major, cuda.minor or 0)


def _gpus(flags: Sequence[str], environ: Mapping[str, str]) -> Optional[tuple[Gpu, ...]]:
    if flags:
        return tuple(_gpu("--gpu", text, i) for i, text in enumerate(flags))
    listed = environ.get("CUDARESOLVE_GPUS")
    if listed is not None:
        items = listed.split(",") if listed.strip() else []
        return tuple(_gpu("CUDARESOLVE_GPUS", item, i) for i, item in enumerate(items))
    arch = environ.get("CONDA_OVERRIDE_CUDA_ARCH")
    if arch is not None:
        return (_gpu("CONDA_OVERRIDE_CUDA_ARCH", arch, 0),) if arch != "" else ()
    return None


def _gpu(where: str, text: str, index: int) -> Gpu:
    try:
        cc = ComputeCapability.parse(text)
    except UsageError:
        raise UsageError(f"{where}: {text!r} is not a compute capability (expected e.g. 8.6)") from None
    try:
        check_known(cc)
    except UsageError as exc:
        raise UsageError(f"{where}: {exc}") from None
    return Gpu(compute_capability=cc, source=f"override:{where}", index=index)
