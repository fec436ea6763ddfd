"""Releases a fix may name: those of the knowledge table (data/wheel_facts.toml), the only ones whose
device code and CUDA build are known here, judged by the same rules as the installed files. A fix
names one as a requirement (`name==X`), or says that the table holds none that works.

May import: checks/builds, dependencies and fixes, compat, env/, host/ and knowledge/.
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Callable, Iterable, Optional

from packaging.requirements import Requirement
from packaging.utils import NormalizedName
from packaging.version import Version

from cudaresolve.checks.builds import CudaBuild, component_builds, soname_major
from cudaresolve.checks.dependencies import pulled_in
from cudaresolve.checks.fixes import Explained, Fix, NoneFitsEither, PipInstall, PipUninstall, Steps, WheelsOfMajors
from cudaresolve.compat import driver_verdict
from cudaresolve.env.distributions import Distribution
from cudaresolve.env.environment import ElfFile, Environment
from cudaresolve.host.facts import HostFacts
from cudaresolve.knowledge import components, wheel_facts
from cudaresolve.knowledge.wheel_facts import Wheel
from cudaresolve.versions import CudaVersion

TABLE = "cudaresolve's table"


def known(names: Iterable[str], machine: str) -> list[str]:
    """Those of `names` the table holds releases of for `machine`: only for them can a fix name a release."""
    return [name for name in names if wheel_facts.releases(name, machine)]


def newest(names: Iterable[str], works: Callable[[Wheel], bool], machine: str, installed: Optional[Version] = None) -> Optional[Wheel]:
    """The first release for `machine` that `works`, taking `names` in order and each one's releases
    newest first; never the `installed` release, which a fix must not propose again."""
    return next((wheel for name in names for wheel in wheel_facts.releases(name, machine)
                 if Version(wheel.version) != installed and works(wheel)), None)


def requirement(wheel: Wheel) -> Requirement:
    return Requirement(f"{wheel.name}=={wheel.version}")


def build_of_release(wheel: Wheel) -> Optional[CudaBuild]:
    """The CUDA a table release is built for, as the installed wheel's would be read: an NVIDIA
    component's from its name and version, a consumer's (onnxruntime-gpu) from the one CUDA major
    its libraries link."""
    builds = component_builds([_distribution(wheel.name, Version(wheel.version), "")])
    if builds:
        return builds[0]
    linked = {(major, member.path, soname) for member in wheel.member for soname in member.needed
              for major in [soname_major(soname)] if major is not None}
    if len({major for major, _, _ in linked}) != 1:
        return None
    major, path, soname = min(linked)
    return CudaBuild(wheel.name, wheel.version, CudaVersion(major),
                     f"{wheel.name} {wheel.version} is a CUDA {major} build: {os.path.basename(path)} links {soname}")


def driver_runs_release(wheel: Wheel, host: HostFacts, natively: bool = False) -> bool:
    """Whether the host's driver runs the release's CUDA build (`natively`: without minor-version
    compatibility); True when the driver is unknown, as for any other fix."""
    driver = host.driver
    if not (driver.release or driver.cuda):
        return True
    build = build_of_release(wheel)
    verdict = driver_verdict(build.cuda, driver.release, driver.cuda) if build else "native"
    return verdict == "native" if natively else verdict is not None


def for_driver(names: Iterable[str], host: HostFacts) -> Optional[Wheel]:
    """The newest release the driver runs natively, else the newest it runs by minor-version
    compatibility (which leaves a warning), taking `names` in order."""
    names = list(names)
    return (newest(names, lambda w: driver_runs_release(w, host, natively=True), host.machine)
            or newest(names, lambda w: driver_runs_release(w, host), host.machine))


def install(env: Environment, chosen: Wheel, pick: Callable[[list[str]], Optional[Wheel]]) -> Fix:
    """`pip install` of the table's release `chosen`, with the extras installed with its namesake
    (onnxruntime-gpu[cuda,cudnn]) and, for each NVIDIA wheel the namesake pulls in that is of
    another CUDA major than the release, the same component's wheel for that major: the release
    `pick` chooses among the table's, or its bare name where the table holds none (or none that
    `pick` accepts, which the command says). The wheels it replaces are uninstalled first: pip would
    leave them in place."""
    installed = env.distribution(chosen.name)
    extras = f"[{','.join(sorted(installed.extras))}]" if installed is not None and installed.extras else ""
    parts = [Requirement(f"{chosen.name}{extras}=={chosen.version}")]
    replaced: list[NormalizedName] = []
    unfit: list[str] = []
    made = build_of_release(chosen)
    for dep in sorted(pulled_in(env, chosen.name)) if made is not None else ():
        assert made is not None  # the loop runs only for a known build
        dist = env.distribution(dep)
        rows = components.for_dist(dep, str(dist.version)) if dist is not None else ()
        names = for_major(dep, made.cuda.major) if rows and rows[0].cuda_major != made.cuda.major else []
        if not names:
            continue
        companion = pick(known(names, chosen.machine))
        parts.append(requirement(companion) if companion else Requirement(names[0]))
        unfit += [] if companion or not known(names, chosen.machine) else [names[0]]
        replaced.append(NormalizedName(dep))
    fix: Fix = PipInstall(tuple(parts))
    if replaced:
        fix = Steps((Explained(PipUninstall(tuple(replaced)), WheelsOfMajors(majors_of(env, replaced))), fix))
    return Explained(fix, NoneFitsEither(tuple(unfit))) if unfit else fix


def majors_of(env: Environment, names: list[NormalizedName]) -> tuple[int, ...]:
    """The CUDA majors of installed NVIDIA wheels (12, 13)."""
    return tuple(sorted({row.cuda_major for name in names for dist in [env.distribution(name)] if dist is not None
                         for row in components.for_dist(name, str(dist.version))[:1]}))


def for_major(dist: str, major: int) -> list[str]:
    """The wheels of `dist`'s component built for CUDA `major` (nvidia-curand, 12 -> nvidia-curand-cu12)."""
    return [name for name in components.same_component(dist)
            if any(row.cuda_major == major for row in components.for_dist(name))]


def with_release(env: Environment, wheel: Wheel) -> Environment:
    """`env` with the table's release in place of the installed one of that name: its members at the
    paths they would be installed at, so the checks judge it as they judge the installed files."""
    site = env.target.site_packages[-1]
    files = [elf for elf in env.elf_files if wheel.name not in elf.owners]
    paths = []
    for facts in wheel_facts.from_record(wheel).members:
        path = os.path.normpath(os.path.join(site, facts.path.split("!", 1)[1]))
        paths.append(path)
        files.append(ElfFile(path, (wheel.name,), replace(facts, path=path), None))
    stem = f"{wheel.name.replace('-', '_')}-{wheel.version}"
    candidate = _distribution(wheel.name, Version(wheel.version), os.path.join(site, f"{stem}.dist-info"), tuple(paths))
    distributions = [d for d in env.distributions if d.name != wheel.name] + [candidate]
    return replace(env, distributions=tuple(sorted(distributions, key=lambda d: (d.name, d.dist_info))),
                   elf_files=tuple(sorted(files, key=lambda e: e.path)))


def _distribution(name: str, version: Version, dist_info: str, files: tuple[str, ...] = ()) -> Distribution:
    return Distribution(name, version, (), TABLE, dist_info, files)
