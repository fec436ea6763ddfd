"""Will this device code run on this GPU with this driver? A pure function over plain facts.

The rules (cuda-facts §5.2, §1.1): SASS `sm_XY` runs on the same major with minor >= Y; `sm_XYa`
only on exactly X.Y; `sm_XYf` on its family (same major, minor >= Y). PTX `compute_XY` runs on any
capability >= X.Y, but only if the driver's JIT knows the PTX ISA version, i.e. the driver is at
least the GA driver of the toolkit that produced it. The driver prefers SASS; PTX is the fallback.

Takes values (ComputeCapability, DriverRelease, CudaVersion) and gives a `Verdict` with the facts
behind it; output/findings.py words it. May import: arch, versions and knowledge/toolkits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional, Union

from cudaresolve.arch import ComputeCapability, PtxTarget, Target
from cudaresolve.knowledge import toolkits
from cudaresolve.versions import CudaVersion, DriverRelease


@dataclass(frozen=True)
class JitFailure:
    """A PTX entry that would run on the GPU but the driver cannot JIT: its ISA needs a driver >= `needs`
    (None: newer than every toolkit known) and the host's is `driver`."""

    target: str  # "compute_86"
    isa: Optional[str]
    needs: Optional[DriverRelease]
    driver: Optional[DriverRelease]


@dataclass(frozen=True)
class Verdict:
    """Whether device code runs on one GPU: how (`via` a `target`), or why not (`has`, the targets
    the code carries, and the PTX the driver cannot JIT); output/ words it."""

    runs: bool
    via: Optional[str]  # "sass" or "ptx" when it runs
    target: Optional[str]  # the target that runs ("sm_86", "compute_120")
    cc: ComputeCapability
    needs_driver: Optional[DriverRelease] = None  # minimum driver for the PTX path, when that path is taken
    has: tuple[str, ...] = ()  # when it does not run: the SASS then the PTX targets, newest first
    jit_failures: tuple[JitFailure, ...] = ()


def can_run(
    cc: ComputeCapability,
    sass: Iterable[str] = (),
    ptx: Iterable[Union[PtxTarget, tuple[str, Optional[str]]]] = (),
    driver: Optional[DriverRelease] = None,
) -> Verdict:
    """Decide whether code built for `sass` targets and `ptx` targets (with ISA) runs on `cc`.

    `driver` is the driver release; None means unknown, in which case a PTX path is taken as
    runnable and `needs_driver` says what it requires.
    """
    sass_targets = sorted((Target.parse(t) for t in sass), key=lambda t: t.cc, reverse=True)
    for target in sass_targets:
        if target.kind == "sass" and target.runs_on(cc):
            return Verdict(True, "sass", str(target), cc)

    ptx_entries = [p if isinstance(p, PtxTarget) else PtxTarget(*p) for p in ptx]
    candidates = sorted(
        ((Target.parse(p.target), p.isa) for p in ptx_entries), key=lambda t: t[0].cc, reverse=True
    )
    jit_failures: list[JitFailure] = []
    for target, isa in candidates:
        if not target.runs_on(cc):
            continue
        needs = _jit_driver(isa)
        if needs is not None and (driver is None or driver >= needs):
            return Verdict(True, "ptx", str(target), cc, needs_driver=needs)
        jit_failures.append(JitFailure(str(target), isa, needs, driver if needs is not None else None))
    has = tuple(str(t) for t in sass_targets) + tuple(str(t) for t, _ in candidates)
    return Verdict(False, None, None, cc, has=has, jit_failures=tuple(jit_failures))


def _jit_driver(isa: Optional[str]) -> Optional[DriverRelease]:
    """The minimum driver whose JIT accepts PTX of this ISA: the GA driver of its toolkit."""
    if isa is None:
        # Without the ISA we cannot do better than the oldest toolkit's driver.
        return toolkits.known()[0].ga_driver
    toolkit = toolkits.for_ptx_isa(isa)
    return toolkit.ga_driver if toolkit else None


def driver_verdict(
    want: CudaVersion, release: Optional[DriverRelease], have: Optional[CudaVersion]
) -> Optional[str]:
    """How a driver runs code built with CUDA `want` (12.8, or the major alone, 12): "native",
    "minor-compat", or None (it cannot). `release` is the driver release, `have` the CUDA
    version it reports; either may be unknown (CONDA_OVERRIDE_CUDA gives only the latter)."""
    if want.minor is None:
        floor = toolkits.family_floor(want)
        if release is not None and floor is not None:
            return "native" if release >= floor else None
        return "native" if have is not None and have.major >= want.major else None
    if release is not None:
        return toolkits.driver_support(release, want)
    # Only the driver's CUDA version is known: the same major is minor-version compatibility.
    if have is not None and have >= want:
        return "native"
    return "minor-compat" if have is not None and have.major == want.major else None
