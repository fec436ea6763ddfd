"""The words of each verdict (verdicts/records.py), made once: the doctor's finding, the lock's
rejection, `lock --explain` and `lock --check` all say a verdict with `words`, each adding only its
own frame (the doctor the runtime's message, the lock what it took instead).

May import: arch, verdicts/records.
"""

from __future__ import annotations

from typing import NoReturn, Optional, Sequence

from cudaresolve.arch import Target
from cudaresolve.verdicts.records import (
    BelowPackageFloor,
    CpuOnly,
    DriverTooOld,
    GpuRef,
    KnownBadRelease,
    MinorCompat,
    NoDeviceCode,
    SbsaOnJetson,
    ToolkitTargets,
    Verdict,
)
from cudaresolve.versions import CudaVersion, DriverRelease


def words(verdict: Verdict) -> str:
    """Why the build does not fit the host, in one line; mypy checks every verdict has its branch."""
    if isinstance(verdict, DriverTooOld):
        have = driver(verdict.driver, verdict.driver_cuda)
        if verdict.floor:
            return f"{have} < {verdict.floor} (CUDA {verdict.cuda.major}.x floor){on(verdict.host)}"
        return f"{have} cannot run CUDA {verdict.cuda}{on(verdict.host)}"
    if isinstance(verdict, MinorCompat):
        have = driver(verdict.driver, verdict.driver_cuda)
        return f"CUDA {verdict.cuda} runs on {have} only by minor-version compatibility{on(verdict.host)}"
    if isinstance(verdict, NoDeviceCode):
        has = f"; has {span(verdict.sass, verdict.ptx)}" if verdict.sass or verdict.ptx else ""
        return f"no kernel image for compute capability {verdict.capability} ({gpus(verdict.gpus)}){on(verdict.host)}{has}"
    if isinstance(verdict, ToolkitTargets):
        return f"CUDA {verdict.toolkit} builds no code for GPU {verdict.gpu} ({verdict.capability}){on(verdict.host)}"
    if isinstance(verdict, CpuOnly):
        if verdict.machine:
            return f"a CPU-only build for {verdict.machine} (its wheel has no {verdict.missing})"
        return "a CPU-only build"
    if isinstance(verdict, SbsaOnJetson):
        return (f"a server-Arm (SBSA) CUDA build; {verdict.host or 'the host'} is a Jetson (tegra), which runs the "
                "CUDA of its JetPack release: install the JetPack wheels NVIDIA publishes for your JetPack release")
    if isinstance(verdict, KnownBadRelease):
        return f"known problem {verdict.advisory}: {verdict.symptom}"
    if isinstance(verdict, BelowPackageFloor):
        return f"needs driver >= {verdict.floor} (a package floor); {verdict.host or 'the host'} has driver {verdict.driver}"
    unworded(verdict)


def unworded(record: NoReturn) -> NoReturn:
    """The end of a chain of isinstance branches over a union (the verdicts here, a rejection's
    grounds in lock_words.py): a type without its branch reaches it, which mypy reports first."""
    raise AssertionError(f"a record without words: {record!r}")


def driver(release: Optional[DriverRelease], cuda: Optional[CudaVersion]) -> str:
    """`driver 550.144.03`, or `the driver's CUDA 12.4` when only that is stated."""
    return f"driver {release}" if release else f"the driver's CUDA {cuda}"


def gpus(refs: Sequence[GpuRef]) -> str:
    """`GPU 0 NVIDIA GeForce GTX 1080, GPU 1`: each GPU by its index ("?" when unknown) and name."""
    return ", ".join(f"GPU {g.index if g.index is not None else '?'} {g.name or ''}".strip() for g in refs)


def on(host: Optional[str]) -> str:
    return f" on {host}" if host else ""


def span(sass: Sequence[Target], ptx: Sequence[Target]) -> str:
    """`sm_75..sm_120` (+ `compute_120` PTX): the range of device code, short enough for one line."""
    targets = sorted(sass, key=lambda t: t.cc)
    text = f"{targets[0]}..{targets[-1]}" if len(targets) > 1 else (str(targets[0]) if targets else "no SASS")
    if ptx:
        text += " + PTX " + ", ".join(sorted({str(t) for t in ptx}))
    return text
