"""Which CUDA each distribution was built for: NVIDIA's component wheels by name and version, torch
by its local label, CuPy by its name, any other package by the CUDA libraries its binaries link;
and, for a package shipping one build per CUDA major, which build a file belongs to and whether the
package imports it here. The driver-floor, mixed-majors, advisory and arch checks judge these.

May import: binary/ (facts, runtime), env/, knowledge/ and versions. `CudaBuild.evidence` is a sentence still made here (the
lock's reasons read it); the rest is values.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass, replace
from typing import Iterable, Iterator, Mapping, Optional, Sequence

from cudaresolve.binary.facts import BinaryFacts, CudaRuntime
from cudaresolve.binary.runtime import runtime_cuda
from cudaresolve.env.distributions import Distribution
from cudaresolve.env.environment import ElfFile, Environment
from cudaresolve.env.imports import picks
from cudaresolve.knowledge import components, cupy, toolkit_pins, toolkits, torch
from cudaresolve.versions import CudaVersion


@dataclass(frozen=True)
class CudaBuild:
    """The CUDA a package was built for, as far as its name, version, the tables or its binaries tell."""

    dist: str
    version: str
    cuda: CudaVersion  # 13.0, or the major alone (12) when only that is known
    evidence: str
    runtime: Optional["RuntimeFile"] = None  # the file whose own CUDA runtime gave `cuda`, when one did


@dataclass(frozen=True)
class RuntimeFile:
    """A distribution's file that is a CUDA runtime (a vendored libcudart) or links one in statically."""

    path: str
    runtime: CudaRuntime


def component_builds(distributions: Iterable[Distribution]) -> tuple[CudaBuild, ...]:
    """CUDA of every installed NVIDIA component wheel: from its version where it follows CUDA's
    (nvidia-cuda-runtime-cu12 12.8.90 -> 12.8), else from the cuda-toolkit release that pins it
    (nvidia-cufft 12.5.0.14 -> 13.5), else its major alone."""
    builds = []
    for dist in distributions:
        rows = components.for_dist(dist.name, str(dist.version))
        if not rows:
            continue
        row = rows[0]
        pinned = toolkit_pins.cuda_of(dist.name, str(dist.version))
        if components.versioned_by_cuda(row.name) and dist.version.release[0] == row.cuda_major:
            cuda = CudaVersion(dist.version.release[0], dist.version.release[1])
            evidence = f"{dist.name} {dist.version} is the CUDA {cuda} {row.name}"
        elif pinned is not None and pinned.major == row.cuda_major:
            cuda = pinned
            evidence = f"{dist.name} {dist.version} is the CUDA {cuda} {row.name} (by the releases cuda-toolkit pins)"
        else:
            cuda = CudaVersion(row.cuda_major)
            evidence = f"{dist.name} {dist.version} is a CUDA {row.cuda_major} component"
        builds.append(CudaBuild(dist.name, str(dist.version), cuda, evidence))
    return tuple(builds)


def framework_build(dist: Distribution, machine: Optional[str] = None) -> Optional[CudaBuild]:
    """CUDA of a framework wheel: torch from its local label or the PyPI default, CuPy from its name.
    On `machine`, a default torch build the wheel's own files show to be CPU-only has none."""
    version = str(dist.version)
    if dist.name == torch.distribution():
        local = dist.version.local
        if local is not None and not local.startswith("cu"):
            return None  # +cpu, +rocm...: not a CUDA build
        if machine is not None and cpu_only_default_build(dist, machine):
            return None
        variant = torch.variant(dist.version.public, local)
        if variant is None:
            return None
        how = f"+{local}" if local else "the PyPI build"
        cuda = variant.cuda
        return CudaBuild(dist.name, version, cuda, f"torch {version} is {how}, built with CUDA {cuda}")
    row = cupy.dist(dist.name, dist.version.public)
    if row is None:
        return None
    major = CudaVersion(row.cuda[0].major)
    return CudaBuild(dist.name, version, major, f"{dist.name} is CuPy's CUDA {major} wheel")


def cpu_only_default_build(dist: Distribution, machine: str) -> bool:
    """Whether `dist` is torch's default (PyPI) build for a machine whose builds the release rows do
    not describe (aarch64: 2.0.0 ... 2.10.0 are CPU-only) and its RECORD lists files but not the
    member every CUDA build carries (torch/lib/libtorch_cuda.so): what the lock reads from the wheel."""
    member = torch.cuda_member()
    return (dist.name == torch.distribution() and dist.version.local is None and bool(dist.files)
            and not torch.default_build_described(machine) and not any(path.endswith("/" + member) for path in dist.files))


def cuda_builds(env: Environment) -> tuple[CudaBuild, ...]:
    """Every distribution of `env` whose CUDA build is known: frameworks and NVIDIA components from the
    tables, then any other package from the CUDA libraries its binaries link."""
    frameworks = [b for b in (framework_build(d, env.loader.machine) for d in env.distributions) if b is not None]
    components_ = component_builds(env.distributions)
    known = {b.dist for b in frameworks} | {b.dist for b in components_}
    runtimes = runtime_builds(env, known)
    return tuple(frameworks) + components_ + runtimes + binary_builds(env, known | {b.dist for b in runtimes})


def runtime_builds(env: Environment, known: set[str]) -> tuple[CudaBuild, ...]:
    """The CUDA of packages the tables do not know that carry their own CUDA runtime: a vendored
    libcudart (ale-py's `libcudart-09529672.so.12.6.77`, version node libcudart.so.12) or one linked
    in statically (warp-lang's warp.so, its cubins' toolkit note 13.4.92). binary/runtime.py says
    which bytes tell the release. The runtime API needs a driver of its CUDA minor (or of its major,
    by minor-version compatibility), so the newest runtime a package carries is its CUDA; a package
    whose runtimes are of two majors is left undecided, as are runtimes no byte dates."""
    found: dict[str, list[tuple[CudaVersion, RuntimeFile]]] = {}
    for elf in env.elf_files:
        runtime = dated_runtime(elf.facts) if elf.facts is not None else None
        cuda = runtime_cuda(runtime) if runtime is not None else None
        if runtime is None or cuda is None or elf.owner is None or elf.owner in known:
            continue
        build = build_of(env, elf.owner, elf.path)
        if build is not None and not build.selected:
            continue
        found.setdefault(elf.owner, []).append((cuda, RuntimeFile(elf.path, runtime)))
    builds = []
    for name, files in sorted(found.items()):
        dist = env.distribution(name)
        carried = _runtime_build(name, str(dist.version), files) if dist is not None else None
        if carried is not None:
            builds.append(carried)
    return tuple(builds)


def dated_runtime(facts: BinaryFacts) -> Optional[CudaRuntime]:
    """The runtime a file carries, a static one without a toolkit note (CUDA <= 12.7 cubins) dated by
    its PTX: the oldest toolkit that writes the newest PTX ISA among its entries (8.7: CUDA 12.8), so
    the floor it gives is never above the real one. Undated when it has no PTX the table places."""
    runtime = facts.cuda_runtime
    if runtime is None or runtime.major is not None or facts.fatbin is None:
        return runtime
    dated = [cuda for ptx in facts.fatbin.ptx if ptx.isa and (cuda := toolkits.oldest_writing_ptx_isa(ptx.isa)) is not None]
    if not dated:
        return runtime
    cuda = max(dated, key=lambda c: (c.major, c.minor or 0))
    return replace(runtime, major=cuda.major, release=str(cuda), release_from="PTX ISA")


def _runtime_build(name: str, version: str, files: Sequence[tuple[CudaVersion, RuntimeFile]]) -> Optional[CudaBuild]:
    """The CUDA of a release from the runtimes its files carry: the newest, when all are of one major."""
    if not files or len({cuda.major for cuda, _ in files}) != 1:
        return None
    cuda, newest = max(files, key=lambda pair: (pair[0], pair[1].path))
    how = "linked in statically" if newest.runtime.linkage == "static" else "vendored"
    return CudaBuild(name, version, cuda,
                     f"{name} {version} carries its own CUDA {newest.runtime.release or cuda} runtime ({how}, "
                     f"{os.path.basename(newest.path)})", newest)


def binary_builds(env: Environment, known: set[str]) -> tuple[CudaBuild, ...]:
    """The CUDA major of packages the tables do not know, read from their binaries: a file that links
    `libcublas.so.13` (a soname only CUDA 13 wheels provide) is a CUDA 13 consumer, whatever its
    metadata says. A package whose files link two majors is left undecided."""
    needs: dict[str, dict[int, tuple[str, str]]] = {}  # dist -> major -> (file, soname)
    for elf, soname, major in major_needs(env):
        assert elf.owner is not None  # major_needs yields owned files only
        if elf.owner not in known:
            needs.setdefault(elf.owner, {}).setdefault(major, (elf.path, soname))
    builds = []
    for name, by_major in sorted(needs.items()):
        dist = env.distribution(name)
        build = _linked_build(name, str(dist.version), by_major) if dist is not None else None
        if build is not None:
            builds.append(build)
    return tuple(builds)


def _linked_build(name: str, version: str, by_major: dict[int, tuple[str, str]]) -> Optional[CudaBuild]:
    """The CUDA major of a release from the sonames its files link (major -> (file, soname)): the one major, else None."""
    if len(by_major) != 1:
        return None
    [(major, (path, soname))] = by_major.items()
    return CudaBuild(name, version, CudaVersion(major), f"{name} {version} is a CUDA {major} build: {os.path.basename(path)} links {soname}")


def wheel_build(name: str, version: str, files: Sequence[BinaryFacts]) -> Optional[CudaBuild]:
    """The CUDA of one release read from its own files (a wheel's ELF members, from its table row or
    the wheel): the doctor's rules for a package the tables do not know (runtime_builds, then
    binary_builds), with every per-major build of the wheel counted (no installed distribution
    chooses one). None when its files tell no single CUDA."""
    dated = [(facts.path, runtime) for facts in files if (runtime := dated_runtime(facts)) is not None]
    runtimes = [(cuda, RuntimeFile(path, runtime)) for path, runtime in dated if (cuda := runtime_cuda(runtime)) is not None]
    build = _runtime_build(name, version, runtimes)
    if build is not None:
        return build
    by_major: dict[int, tuple[str, str]] = {}
    for facts in files:
        for soname in facts.needed:
            major = soname_major(soname)
            if major is not None:
                by_major.setdefault(major, (facts.path, soname))
    return _linked_build(name, version, by_major)


def major_needs(env: Environment) -> Iterator[tuple[ElfFile, str, int]]:
    """(file, soname, CUDA major) for each DT_NEEDED of a distribution's files that only one CUDA
    major's wheels provide (libcublas.so.13: 13; not libcurand.so.10, in three majors). Files of a
    build their package does not import here do not count."""
    for elf in env.elf_files:
        if elf.facts is None or elf.owner is None:
            continue
        build = build_of(env, elf.owner, elf.path)
        if build is not None and not build.selected:
            continue
        for soname in elf.facts.needed:
            major = soname_major(soname)
            if major is not None:
                yield elf, soname, major


def soname_major(soname: str) -> Optional[int]:
    """The CUDA major of a soname only one major's wheels provide (libcublas.so.13: 13); None for
    one of several majors (libcurand.so.10) or of no known wheel."""
    majors = {row.cuda_major for row in components.for_soname(soname)}
    return majors.pop() if len(majors) == 1 else None


@dataclass(frozen=True)
class Build:
    """Which of a package's per-CUDA builds a file belongs to, and whether the package imports it."""

    directory: str  # "cu12"; for a per-CUDA-release library, its file name ("libbitsandbytes_cuda130.so")
    cuda_major: Optional[int]  # None for a library of no CUDA (bitsandbytes' CPU, ROCm and XPU ones)
    selected: bool
    on_import: bool = False  # the package's import loads it by path (bitsandbytes' pick): judged in full


def build_of(env: Environment, dist: Optional[str], path: str) -> Optional[Build]:
    """The build of `dist` that `path` belongs to (data/components.toml [alternative_builds] and
    [per_cuda_libraries]); None for files of a package with one build, or outside its build files.

    The selected build is the one whose major the `selected_by` distribution has (cuda-cccl imports
    cu13/ when cuda-bindings 13 is installed); without it, the one major of the environment's NVIDIA
    component wheels; failing both, every build counts as selected.
    """
    row = components.alternative_builds(dist) if dist else None
    if row is None:
        return _per_cuda_library(env, dist, path) or _named_alternative(env, dist, path)
    inside = _inside(env, path)
    directory = next((part for part in inside.split("/") if part in row.directories), None)
    if directory is None:
        return None
    major = row.directories[directory]
    chooser = env.distribution(row.selected_by) if row.selected_by else None
    if chooser is not None:
        chosen = {chooser.version.release[0]}
    else:
        chosen = {build.cuda.major for build in component_builds(env.distributions)}
    return Build(directory, major, len(chosen) != 1 or major in chosen)


def _inside(env: Environment, path: str) -> str:
    """`path` relative to the site-packages directory holding it (itself when none does)."""
    return next((path[len(sp.rstrip("/")) + 1:] for sp in env.target.site_packages if path.startswith(sp.rstrip("/") + "/")), path)


def _per_cuda_library(env: Environment, dist: Optional[str], path: str) -> Optional[Build]:
    """For one of the libraries a package ships per CUDA release (bitsandbytes'): selected when it is
    the one the package's import picks for the CUDA of the `selected_by` build (torch's); every file
    counts as selected, none as loaded at import, when that build is not installed or not known."""
    installed = env.distribution(dist) if dist else None
    row = components.per_cuda_libraries(installed.name, installed.version) if installed else None
    if installed is None or row is None or not fnmatch.fnmatchcase(_inside(env, path), row.files):
        return None
    name = os.path.basename(path)
    cuda = row.cuda_of(name)
    chooser = env.distribution(row.selected_by)
    build = framework_build(chooser) if chooser is not None else None
    picked: Optional[str]
    if build is not None:
        shipped = {found: other for other in _files_of(env, row, installed.name) if (found := row.cuda_of(other))}
        picked = pick_cuda_library(shipped, (build.cuda.major, build.cuda.minor or 0))
    elif chooser is not None and chooser.version.local == "cpu":  # torch's CPU build
        picked = row.fallback
    else:
        return Build(name, cuda[0] if cuda else None, True)
    return Build(name, cuda[0] if cuda else None, name == picked, name == picked)


def _files_of(env: Environment, row: components.PerCudaLibraries, dist: str) -> Iterator[str]:
    """The names of `dist`'s files that are among `row`'s alternatives."""
    for elf in env.elf_files:
        if elf.owner == dist and fnmatch.fnmatchcase(_inside(env, elf.path), row.files):
            yield os.path.basename(elf.path)


def pick_cuda_library(shipped: Mapping[tuple[int, int], str], runtime: tuple[int, int]) -> Optional[str]:
    """bitsandbytes' pick among its per-CUDA libraries ({(13, 0): file}) for a runtime CUDA: the same
    release, else the newest of its major below it, else the oldest of its major above it; None when
    none is of its major (the import then fails to find the library)."""
    if runtime in shipped:
        return shipped[runtime]
    same = sorted(cuda for cuda in shipped if cuda[0] == runtime[0])
    below = [cuda for cuda in same if cuda < runtime]
    if below:
        return shipped[below[-1]]
    return shipped[same[0]] if same else None


def _named_alternative(env: Environment, dist: Optional[str], path: str) -> Optional[Build]:
    """For a file a package ships once per CUDA release, named for it (lib<name>_cuda<NNN>.so,
    _cu12/ directories: env/imports.py `alternatives`): selected when it is the one a process of the
    environment's CUDA runtime loads; all count as selected when that runtime is not known."""
    model = env.imports.get(dist) if dist else None
    cuda = model.alternatives.get(path) if model is not None else None
    if model is None or cuda is None:
        return None
    runtime = process_runtime(env)
    name = os.path.basename(path)
    major = cuda[0] or None  # NO_CUDA: the build of no CUDA release
    if runtime is None:
        return Build(name, major, True)
    return Build(name, major, path in picks(model.alternatives, runtime))


def process_runtime(env: Environment) -> Optional[tuple[int, int]]:
    """The CUDA runtime release a process of this environment loads: the one CUDA runtime wheel's,
    else the one framework build's ([framework_runtime]: torch's; a minor not known counts as the newest
    of its major); with runtime wheels of two majors, the one of the framework's major. None when
    these tell no one release."""
    runtimes = {(build.cuda.major, build.cuda.minor if build.cuda.minor is not None else 99)
                for build in component_builds(env.distributions)
                if any(row.name == "cudart" for row in components.for_dist(build.dist, build.version))}
    if len(runtimes) == 1:
        return runtimes.pop()
    frameworks = {(build.cuda.major, build.cuda.minor if build.cuda.minor is not None else 99)
                  for dist in env.distributions if components.needs_build_runtime(dist.name)
                  and (build := framework_build(dist)) is not None}
    if not runtimes:
        return frameworks.pop() if len(frameworks) == 1 else None
    # runtime wheels of two majors: the process loads the one its framework links, when one does
    framework = frameworks.pop() if len(frameworks) == 1 else None
    of_framework = sorted(runtime for runtime in runtimes if framework is not None and runtime[0] == framework[0])
    return of_framework[-1] if of_framework else None
