"""Does one build (a CUDA version and the device code it carries) run on every host? The resolver's
cheap early pruning, with the same pure functions the doctor's checks use (`compat.driver_verdict`,
`compat.can_run`), so a variant pruned here is one the judge would have refused.
"""

from __future__ import annotations

from typing import Iterable, Optional, Sequence

from cudaresolve.arch import PtxTarget, Target
from cudaresolve.compat import can_run, driver_verdict
from cudaresolve.host.facts import HostFacts
from cudaresolve.knowledge import toolkits
from cudaresolve.versions import CudaVersion


def rejection(
    cuda: Optional[CudaVersion],
    sass: Sequence[str],
    ptx: Sequence[PtxTarget],
    hosts: Iterable[tuple[str, HostFacts]],
) -> Optional[str]:
    """Why the build cannot run on one of `hosts` ((label, facts) pairs), in one line; None when it
    runs on all. `cuda` None: no CUDA (a CPU build or a pure-Python package); empty `sass` and `ptx`
    mean the device code is unknown, which is not a reason to refuse."""
    hosts = list(hosts)
    for label, host in hosts:
        where = f" on {label}" if len(hosts) > 1 else ""
        driver = host.driver
        if cuda is not None and (driver.release or driver.cuda):
            if driver_verdict(cuda, driver.release, driver.cuda) is None:
                floor = toolkits.family_floor(cuda)
                have = f"driver {driver.release}" if driver.release else f"the driver's CUDA {driver.cuda}"
                return f"{have} < {floor} (CUDA {cuda.major}.x floor){where}" if floor else f"{have} cannot run CUDA {cuda}{where}"
        if not sass and not ptx:
            continue
        for number, gpu in enumerate(host.visible_gpus):
            verdict = can_run(gpu.compute_capability, sass, ptx, driver=driver.release)
            if not verdict.runs:
                index = gpu.index if gpu.index is not None else number
                return f"no SASS or PTX for GPU {index} ({gpu.compute_capability}){where}; has {span(sass, ptx)}"
    return None


def span(sass: Sequence[str], ptx: Sequence[PtxTarget]) -> str:
    """`sm_75..sm_120` (+ `compute_120` PTX): the range of device code, short enough for one line."""
    targets = sorted((Target.parse(t) for t in sass), key=lambda t: t.cc)
    text = f"{targets[0]}..{targets[-1]}" if len(targets) > 1 else (str(targets[0]) if targets else "no SASS")
    if ptx:
        text += " + PTX " + ", ".join(sorted({p.target for p in ptx}))
    return text


def environment_majors(hosts: Iterable[tuple[str, HostFacts]]) -> tuple[int, ...]:
    """The CUDA majors an environment may be built on for every host, newest first: the driver meets
    the major's floor and the major's newest toolkit can build for every GPU (CUDA 13 cannot for
    Pascal). Unknown drivers and GPUs refuse nothing."""
    hosts = list(hosts)
    return tuple(major for major in known_majors() if all(major_rejection(major, host) is None for _, host in hosts))


def major_rejections(hosts: Sequence[tuple[str, HostFacts]]) -> list[tuple[int, str]]:
    """(major, why) of each CUDA major some host cannot run, newest first: for --explain."""
    found = []
    for major in known_majors():
        for label, host in hosts:
            why = major_rejection(major, host)
            if why:
                found.append((major, why + (f" on {label}" if len(hosts) > 1 else "")))
                break
    return found


def known_majors() -> tuple[int, ...]:
    """The CUDA majors the toolkit table knows, newest first."""
    return tuple(sorted({t.major for t in toolkits.known()}, reverse=True))


def major_rejection(major: int, host: HostFacts) -> Optional[str]:
    """Why an environment of CUDA `major` cannot run on `host`, in one line; None when it can."""
    driver = host.driver
    if (driver.release or driver.cuda) and driver_verdict(CudaVersion(major), driver.release, driver.cuda) is None:
        floor = toolkits.family_floor(major)
        have = f"driver {driver.release}" if driver.release else f"the driver's CUDA {driver.cuda}"
        return f"{have} < {floor} (CUDA {major}.x floor)" if floor else f"{have} cannot run CUDA {major}"
    newest = [t for t in toolkits.known() if t.major == major and t.sass_targets][-1:]
    if not newest:
        return None
    for number, gpu in enumerate(host.visible_gpus):
        if not can_run(gpu.compute_capability, newest[0].sass_targets).runs:
            index = gpu.index if gpu.index is not None else number
            return f"CUDA {newest[0].version} builds no code for GPU {index} ({gpu.compute_capability})"
    return None


def fleet_conflict(hosts: Sequence[tuple[str, HostFacts]]) -> Optional[str]:
    """When several hosts share no CUDA major: each host, the majors it runs and why not the others."""
    if len(hosts) < 2 or environment_majors(hosts):
        return None
    parts = []
    for label, host in hosts:
        runs = [m for m in known_majors() if major_rejection(m, host) is None]
        why = [f"not {m}: {major_rejection(m, host)}" for m in known_majors() if m not in runs]
        parts.append(f"{label} runs CUDA {', '.join(map(str, runs)) or 'no major'} ({'; '.join(why)})")
    return "no CUDA major runs on every host: " + "; ".join(parts)
