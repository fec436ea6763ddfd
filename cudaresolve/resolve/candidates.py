"""Candidates: one `(name, version, wheel)` each, where the wheel fixes the variant (torch `+cu128`
from its variant index, the PyPI default build, an NVIDIA component of one CUDA release), or the
installed distribution kept as it is.

`CandidateFinder` lists a name's candidates best first and records, for `--explain`, every one it
set aside and why, as Rejection records (requires-python and tags are the index's business; here:
yanked, a build that does not run on a host, an sdist that is not locked). A release with no wheel
for the target is its sdist, as pip takes it, unless pip's only-binary refuses it or the name is a
CUDA package the knowledge tables describe (a build from source would be judged by nothing).

May import: arch, checks/builds (which CUDA a release is built for), checks/arch_coverage (whether a
table row's device code runs on a host, as the doctor judges it), env distributions, host facts,
index/, knowledge/ (components, cupy, toolkit_pins, torch, wheel_facts), verdicts/rules, versions,
resolve/ (conda, fit, reasons).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Iterable, Optional, Sequence, Union

from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version

from cudaresolve.arch import PtxTarget
from cudaresolve.checks.arch_coverage import runs_on_host
from cudaresolve.checks.builds import CudaBuild, component_builds, cpu_only_default_build, framework_build
from cudaresolve.env.distributions import Distribution
from cudaresolve.env.environment import Environment
from cudaresolve.host.facts import HostFacts
from cudaresolve.index.access import PackageIndex, wheel_tags
from cudaresolve.index.choices import Formats
from cudaresolve.index.pages import ProjectFile
from cudaresolve.knowledge import components, cupy, toolkit_pins, torch, wheel_facts
from cudaresolve.resolve.conda import CondaProvider
from cudaresolve.resolve.fit import floor_rejection, jetson_rejection, rejection
from cudaresolve.resolve.reasons import (
    CandidateRef,
    CpuOnly,
    DoesNotRun,
    MinorCompat,
    NoBinary,
    NoWheel,
    OtherMajor,
    Rejection,
    RequiresPython,
    SdistOnly,
    Yanked,
)
from cudaresolve.verdicts.rules import minor_compat
from cudaresolve.versions import CudaVersion


@dataclass(frozen=True)
class Candidate:
    name: NormalizedName
    version: Version
    file: Optional[ProjectFile]  # the wheel to install; None: the installed distribution, kept
    installed: Optional[Distribution] = None
    extras: frozenset[str] = frozenset()
    build: Optional[CudaBuild] = field(default=None, compare=False)  # the CUDA it was built for, when known
    # a default build whose wheel holds no CUDA on its machine (torch 2.10.0 for aarch64): build is None
    cpu_only: Optional[CpuOnly] = field(default=None, compare=False)

    @property
    def ref(self) -> CandidateRef:
        return CandidateRef(self.name, self.version)

    @property
    def from_conda(self) -> bool:
        """A conda package standing for this wheel: the lock keeps it and pip installs nothing."""
        return self.installed is not None and self.installed.kind == "conda"

    def with_extras(self, extras: Iterable[str]) -> "Candidate":
        return replace(self, extras=frozenset(extras))


@dataclass
class Rejections:
    """What was set aside, per name, in the order met."""

    by_name: dict[str, list[Rejection]] = field(default_factory=dict)

    def add(self, rejection: Rejection) -> None:
        entries = self.by_name.setdefault(rejection.candidate.name, [])
        if rejection not in entries:
            entries.append(rejection)


class CandidateFinder:
    """A name's candidates from the indexes (and the installed distribution), best first."""

    def __init__(
        self,
        index: PackageIndex,
        hosts: Sequence[tuple[str, HostFacts]],
        installed: dict[str, Distribution],
        *,
        upgrade: bool,
        machine: str,
        conda: Optional[dict[str, CondaProvider]] = None,
        asked: frozenset[str] = frozenset(),
        cuda_pin: Optional[CudaVersion] = None,
        formats: Optional[Formats] = None,
        cpu_wanted: frozenset[str] = frozenset(),
        prefer_binary: bool = False,
        environment: Optional[Environment] = None,
    ):
        self.index = index
        self.hosts = list(hosts)
        self.installed = installed
        self.upgrade = upgrade
        self.machine = machine
        self.conda = conda or {}  # wheel name -> the conda package providing its library in the prefix
        self.asked = asked  # names the user asked for: the only wheels that may shadow a conda library
        self.cuda_pin = cuda_pin  # the prefix's cuda-version: builds for no newer CUDA are preferred
        self.formats = formats or Formats()  # pip's no-binary and only-binary: which of a name's wheels and sdists are candidates
        self.prefer_binary = prefer_binary
        self.environment = environment  # the installed set, against which a table row's device code is judged
        self._fit: dict[Candidate, int] = {}
        self.rejections = Rejections()
        self._major: Optional[int] = None
        self._major_rejections = Rejections()  # set aside for the major being tried, not for good
        self._cache: dict[str, tuple[Candidate, ...]] = {}
        self._pages: dict[str, dict[Optional[str], tuple[ProjectFile, ...]]] = {}  # name -> variant -> files
        self.hosts_known = any(h.driver.release or h.driver.cuda or h.visible_gpus for _, h in self.hosts)
        # family names whose CPU-only builds are asked for (--cpu, or an exact pin of one); for the
        # others, hosts with a GPU or a driver set CPU-only builds aside
        self.cpu_wanted = cpu_wanted
        self.gpus = any(h.visible_gpus for _, h in self.hosts)  # a GPU stated: device code decides

    def prefetch(self, names: Iterable[str]) -> None:
        """Fetch the pages of several names at once (the resolver's next round needs them)."""
        wanted = [n for n in dict.fromkeys(canonicalize_name(n) for n in names) if n not in self._cache]
        pairs = [(name, variant) for name in wanted for variant in self._variants(name)]
        for (name, variant), files in zip(pairs, self.index.files_of_all(pairs)):
            self._pages.setdefault(name, {})[variant] = files

    @property
    def major(self) -> Optional[int]:
        """The environment's one CUDA major, when chosen."""
        return self._major

    @major.setter
    def major(self, major: Optional[int]) -> None:
        """Try another major: what the last one set aside for its major alone is forgotten."""
        self._major = major
        self._major_rejections = Rejections()

    def set_aside_for_major(self, rejection: Rejection) -> None:
        """Set a candidate aside for the major being tried alone (a binary of another major's)."""
        self._major_rejections.add(rejection)

    def rejected(self, name: str) -> list[Rejection]:
        """Every candidate of `name` set aside, this major's included."""
        name = canonicalize_name(name)
        return self.rejections.by_name.get(name, []) + self._major_rejections.by_name.get(name, [])

    def listed(self, name: str) -> bool:
        """Whether any index lists a file of `name` (a name none lists is no project there)."""
        name = canonicalize_name(name)
        if name not in self._pages:
            self.prefetch([name])
        return any(self._pages[name].values())

    def candidates(self, name: str) -> tuple[Candidate, ...]:
        """Every usable candidate of `name`, best first (yanked files included: the provider admits
        them only for an exact pin)."""
        found = self.all_candidates(name)
        if self.major is None:
            return found
        kept = []
        for candidate in found:
            if self.fits_major(candidate):
                kept.append(candidate)
            else:
                assert candidate.build is not None and self.major is not None
                self._major_rejections.add(Rejection(candidate.ref, OtherMajor(candidate.build.cuda.major, self.major)))
        return tuple(kept)

    def all_candidates(self, name: str) -> tuple[Candidate, ...]:
        """The candidates of `name` that run on every host, whatever their CUDA major, best first."""
        name = canonicalize_name(name)
        if name not in self._cache:
            self._cache[name] = self._find(name)
        return self._cache[name]

    def fits_major(self, candidate: Candidate) -> bool:
        return self.major is None or candidate.build is None or candidate.build.cuda.major == self.major

    def _variants(self, name: str) -> list[Optional[str]]:
        """None (the regular indexes) and, for the torch family, every CUDA variant index data/ knows
        (with no driver and no GPU known anywhere, none: only the builds the regular index serves),
        and the CPU variant index when its CPU-only builds are asked for."""
        if name not in torch.family():
            return [None]
        cuda = list(torch.variant_names()) if self.hosts_known else []
        cpu = list(torch.load().cpu_labels) if name in self.cpu_wanted else []
        return [None, *cuda, *cpu]

    def _find(self, name: NormalizedName) -> tuple[Candidate, ...]:
        if name not in self._pages:
            self.prefetch([name])
        pages = self._pages[name]
        best: dict[Version, ProjectFile] = {}
        sdists: dict[Version, ProjectFile] = {}
        listed: dict[Version, list[ProjectFile]] = {}
        for variant in self._variants(name):
            # a variant index serves only its own builds of the torch family
            files = [f for f in pages.get(variant, ()) if variant is None or f.version.local == variant]
            for file in files:
                listed.setdefault(file.version, []).append(file)
            for file in self.index.installable(files):
                if not file.is_wheel:
                    sdists.setdefault(file.version, file)
                    continue
                best.setdefault(file.version, file)  # installable() lists the best tag first
        no_binary: set[Version] = set()
        if self.formats.wheels_refused(name):
            no_binary = set(best) - set(sdists)
            for version in no_binary:
                self.rejections.add(Rejection(CandidateRef(name, version), NoBinary(self.formats.no_binary_via or "")))
            best = {}
        refused = self._sdist_refused(name)
        for version in sorted(set(listed) - set(best), reverse=True):
            why: Union[SdistOnly, RequiresPython, NoWheel]
            if version in sdists and refused is None:
                best[version] = sdists[version]  # as pip takes it: built when its metadata is not static
                continue
            if version in sdists:
                assert refused is not None
                why = refused
            elif version in no_binary:
                continue  # set aside above
            elif not any(self.index.fits_python(f) for f in listed[version]):
                why = RequiresPython(str(listed[version][0].requires_python))
            else:
                why = NoWheel()
            self.rejections.add(Rejection(CandidateRef(name, version), why))
        best = dict(sorted(best.items(), reverse=True))
        for version, file in best.items():
            if file.yanked is not None:
                self.rejections.add(Rejection(CandidateRef(name, version), Yanked(file.yanked)))
        found = []
        conda = self.conda.get(name)
        cpu_on_machine = self._cpu_only_on_machine(name, best)
        for version, file in best.items():
            cpu = cpu_on_machine.get(version)
            candidate = Candidate(name, version, file, build=None if cpu else cuda_build(name, version), cpu_only=cpu)
            reason = (self._does_not_run(candidate) or self._known_misfit(candidate) or self._cpu_set_aside(candidate)
                      or (conda.shadows() if conda is not None and name not in self.asked else None))
            if reason:
                self.rejections.add(Rejection(candidate.ref, reason))
                continue
            found.append(candidate)
        found.sort(key=lambda c: _preference(c, self.cuda_pin, name in self.cpu_wanted, native=self._native(c),
                                             fit=self.device_code_fit(c)), reverse=True)
        if self.prefer_binary:  # pip's prefer-binary: any wheel before any sdist, the order kept within each
            found.sort(key=lambda c: c.file is not None and c.file.is_wheel, reverse=True)
        if conda is not None and conda.same_component:
            package = conda.package
            found.insert(0, Candidate(name, package.version, None, package, build=cuda_build(name, package.version)))
            return tuple(found)
        kept = self.installed.get(name)
        if kept is not None and not self.upgrade:
            cpu = self._installed_cpu_only(kept)
            current = Candidate(name, kept.version, None, kept, build=None if cpu else cuda_build(name, kept.version), cpu_only=cpu)
            reason = self._does_not_run(current) or self._cpu_set_aside(current)
            if reason:
                self.rejections.add(Rejection(current.ref, reason, installed=True))
            else:
                found.insert(0, current)
        return tuple(found)

    def _sdist_refused(self, name: NormalizedName) -> Optional[SdistOnly]:
        """Why the lock does not take an sdist of `name` as pip would: pip's only-binary refuses it, or
        the name is one the knowledge tables describe binaries of (built from source, nothing would
        judge them); None: it is taken."""
        if self.formats.sdists_refused(name):
            return SdistOnly(self.formats.only_binary_via or "")
        if (name in torch.family() or components.for_dist(name) or name in cupy_names() or components.carries_own_runtime(name)
                or wheel_facts.releases(name, self.machine) or wheel_facts.carries_device_code(name, self.machine)):
            return SdistOnly()
        return None

    def _cpu_only_on_machine(self, name: NormalizedName, best: dict[Version, ProjectFile]) -> dict[Version, CpuOnly]:
        """torch's default builds (no local label) for a machine whose default builds data/torch.toml
        does not describe (aarch64): CPU-only there unless the wheel holds the member every CUDA build
        carries, read from its zip directory (the registry's aarch64 2.10.0 holds none, 2.11.0 does).
        Variant builds (+cu128) are CUDA builds by their index's label."""
        if name != torch.distribution():
            return {}
        unknown = []
        for version, file in best.items():
            machine = wheel_machine(file.filename)
            if (version.local is None and machine is not None and not torch.default_build_described(machine)
                    and cuda_build(name, version) is not None):
                unknown.append((version, file, machine))
        member = torch.cuda_member()
        found = self.index.map(self.index.members, [file for _, file, _ in unknown])
        return {version: CpuOnly("", machine, member) for (version, _, machine), names in zip(unknown, found) if member not in names}

    def _installed_cpu_only(self, dist: Distribution) -> Optional[CpuOnly]:
        """The installed torch's default build on a machine the release rows do not describe, as its
        wheel's: CPU-only when its RECORD lists files but not the member every CUDA build carries."""
        if not cpu_only_default_build(dist, self.machine) or cuda_build(dist.name, dist.version) is None:
            return None
        return CpuOnly("", self.machine, torch.cuda_member())

    def _does_not_run(self, candidate: Candidate) -> Optional[DoesNotRun]:
        return release_rejection(candidate.name, candidate.version, candidate.build, self.hosts, self.machine)

    def device_code_fit(self, candidate: Candidate) -> int:
        """How likely a release's device code fits the stated GPUs, for its rank: 2 when the table's
        row says it runs on every host (device code for each GPU, a build each driver runs; the
        doctor recommends the newest of these), or no device code is at stake; 1 when the table
        does not give it (a cuDNN without a row: the plan must read its wheel to judge); 0 when the
        row says it does not run. So the releases known to run are tried first, each one the plan
        would refuse only after, and no wheel is read (with --deep: downloaded) while a release known
        to run is left."""
        if not self.gpus or candidate.file is None or not wheel_facts.carries_device_code(candidate.name, self.machine):
            return 2
        row = wheel_facts.find(candidate.name, str(candidate.version), candidate.file.filename)
        if row is None:
            return 1
        if self.environment is None:
            return 2
        if candidate not in self._fit:
            environment = self.environment
            self._fit[candidate] = 2 if all(runs_on_host(environment, row, host) for _, host in self.hosts if host.visible_gpus) else 0
        return self._fit[candidate]

    def _known_misfit(self, candidate: Candidate) -> Optional[DoesNotRun]:
        """A release whose table row the doctor refuses for a stated GPU (device_code_fit 0), set aside
        before any plan holds it or its wheel is read, naming the GPU and the targets of the first
        library without code for it; None when it may run, or when the row's libraries each run and
        the doctor's refusal has another ground (then it is ranked last and judged)."""
        if candidate.file is None or self.device_code_fit(candidate) != 0:
            return None
        row = wheel_facts.find(candidate.name, str(candidate.version), candidate.file.filename)
        assert row is not None  # a fit of 0 is a row's
        for member in row.member:
            if member.sass is None and member.ptx is None:
                continue
            ptx = tuple(PtxTarget(target, isa or None) for target, _, isa in (text.partition(":") for text in member.ptx or ()))
            found = rejection(None, member.sass or (), ptx, self.hosts)
            if found is not None:
                return found
        return None

    def _native(self, candidate: Candidate) -> bool:
        return self.minor_compat(candidate) is None

    def minor_compat(self, candidate: Candidate) -> Optional[MinorCompat]:
        """The first host whose driver runs the build only by minor-version compatibility, which the
        doctor warns about (and `--strict` fails on); None when every driver runs it natively. A host
        without a driver stated decides nothing. The toolkit metapackage counts by the CUDA its
        release pins its components to (cuda-toolkit 12.9.1: 12.9), so the set it pins follows."""
        cuda = candidate.build.cuda if candidate.build else toolkit_pins.release_cuda(candidate.name, str(candidate.version))
        if cuda is None:
            return None
        return next((found for label, host in self.hosts
                     if (found := minor_compat(cuda, host.driver, label if len(self.hosts) > 1 else None))), None)

    def _cpu_set_aside(self, candidate: Candidate) -> Optional[CpuOnly]:
        """A CPU-only build for hosts with a GPU or a driver, when no one asked for one."""
        if not self.hosts_known or candidate.name in self.cpu_wanted:
            return None
        if candidate.cpu_only is not None:
            return candidate.cpu_only
        if not torch.cpu_only(candidate.name, candidate.version):
            return None
        return CpuOnly(candidate.version.local or "")


def cupy_names() -> frozenset[str]:
    """CuPy's source package and its CUDA wheels' names, from data/cupy.toml."""
    return frozenset({cupy.source_package(), *(canonicalize_name(row.name) for major in cupy.load() for row in major.dists)})


def release_rejection(
    name: str, version: Version, build: Optional[CudaBuild], hosts: Sequence[tuple[str, HostFacts]], machine: str
) -> Optional[DoesNotRun]:
    """Why a release's build cannot run on one of `hosts`: its package floor and its CUDA against each
    driver and, for torch, the arch list data/torch.toml gives its build against every GPU. None when it runs, or
    when its build is unknown. The resolver prunes with it and `lock --check` judges with it."""
    floor = floor_rejection(name, version, hosts)
    if floor is not None:
        return floor
    if build is None:
        return None
    jetson = jetson_rejection(name, build.cuda, hosts)
    if jetson is not None:
        return jetson
    sass: tuple[str, ...] = ()
    ptx: tuple[PtxTarget, ...] = ()
    if name == torch.distribution():
        variant = torch.variant(version.public, version.local)
        if variant is not None:
            sass, ptx = variant.sass(machine), variant.ptx(machine)
    return rejection(build.cuda, sass, ptx, hosts)


def wheel_machine(filename: str) -> Optional[str]:
    """The Linux machine a wheel is built for, from its platform tags (manylinux_2_28_aarch64 ->
    "aarch64"); None for a pure-Python wheel, another system, an sdist or tags of several machines."""
    if not filename.endswith(".whl"):
        return None
    machines = set()
    for tag in wheel_tags(filename):
        found = _LINUX_PLATFORM.fullmatch(tag.platform)
        if found is None:
            return None
        machines.add(found.group(1))
    return machines.pop() if len(machines) == 1 else None


_LINUX_PLATFORM = re.compile(r"(?:many|musl)?linux(?:_\d+_\d+|1|2010|2014)?_(\w+)")


def cuda_build(name: str, version: Version) -> Optional[CudaBuild]:
    """The CUDA a release of `name` is built for, by the tables the doctor uses (checks.builds)."""
    planned = Distribution(name, version, (), None, "", ())
    return framework_build(planned) or next(iter(component_builds([planned])), None)


def _preference(
    candidate: Candidate, cuda_pin: Optional[CudaVersion] = None, cpu: bool = False, *, native: bool = True,
    fit: int = 2,
) -> tuple[bool, int, Union[str, Version], bool, bool, bool, tuple[int, int], Version]:
    """An NVIDIA component, or a toolkit metapackage release (which pins a set of them), the hosts'
    drivers run natively before a newer one they run only by minor-version compatibility (nvJitLink
    13.0 before 13.2 for a driver of CUDA 13.0: the doctor warns about the newer); then by the `fit`
    of its device code (known to run, then unknown, then known not to run:
    CandidateFinder.device_code_fit); then newer public version
    first; among one version's builds, the
    CPU-only one when CPU builds are asked for (`cpu`), then one for no newer CUDA than the conda
    prefix's `cuda_pin` (its libraries are that CUDA's), then one the drivers run natively, then the
    newest CUDA (every build left has passed the hosts' driver and GPUs), a known build before an
    unknown one."""
    cuda = candidate.build.cuda if candidate.build else None
    fits_pin = cuda_pin is None or cuda is None or (cuda.major == cuda_pin.major and not cuda_pin < cuda)
    cpu_first = cpu and (candidate.cpu_only is not None or torch.cpu_only(candidate.name, candidate.version))
    of_a_toolkit = components.for_dist(candidate.name, str(candidate.version)) or toolkit_pins.release_cuda(
        candidate.name, str(candidate.version))
    component_native = native or not of_a_toolkit
    return (component_native, fit, candidate.version.public and Version(candidate.version.public), cpu_first, fits_pin, native,
            _cuda_key(cuda), candidate.version)


def _cuda_key(cuda: Optional[CudaVersion]) -> tuple[int, int]:
    if cuda is None:
        return (-1, -1)
    return (cuda.major, cuda.minor if cuda.minor is not None else -1)
