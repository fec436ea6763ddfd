"""CUDA library wheels (data/components.toml): which wheel provides which soname, where it installs,
nvrtc / nvJitLink releases, preloading packages and driver libraries.

May import: records, versions, errors and knowledge/files.
"""

from __future__ import annotations

import fnmatch
import functools
from dataclasses import dataclass, field
from typing import Collection, Mapping, Optional

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from cudaresolve import records
from cudaresolve.errors import UsageError
from cudaresolve.knowledge import compiled, files
from cudaresolve.knowledge.files import CONFIDENCE, REQUIREMENT, SPECIFIER, VERSION
from cudaresolve.versions import CudaVersion

SEARCH_STEPS = ("site-packages", "conda-prefix", "system")


def _canonical(name: str) -> None:
    if canonicalize_name(name) != name:
        raise UsageError(f"not a canonical distribution name: {name!r}")


def _search_step(step: str) -> None:
    if step not in SEARCH_STEPS:
        raise UsageError(f"unknown step {step!r}; known: {', '.join(SEARCH_STEPS)}")


@dataclass(frozen=True)
class Component:
    """One CUDA library wheel for one CUDA major: where it installs and which sonames it provides."""

    name: str  # the cuda-toolkit extra name where one exists ("cudart", "cusparse"), else "cudnn", ...
    cuda_major: int
    dist: str
    lib_dir: str  # relative to site-packages
    sonames: tuple[str, ...]
    dist_versions: Optional[str] = field(default=None, metadata=SPECIFIER)  # only these versions of the dist
    conda: Optional[str] = None  # the conda package that installs these sonames for this major ("libnvjitlink")
    confidence: str = field(default="H", metadata=CONFIDENCE)
    note: Optional[str] = None


@dataclass(frozen=True)
class CudaRelease:
    """A CUDA update release and the nvrtc / nvJitLink wheel versions that belong to it."""

    cuda: str = field(metadata=records.check(CudaVersion.parse))  # "12.8.1", the update release's name
    nvrtc: str = field(metadata=VERSION)
    nvjitlink: str = field(metadata=VERSION)
    confidence: str = field(default="M", metadata=CONFIDENCE)

    @property
    def minor(self) -> CudaVersion:
        """The CUDA minor of the update release (12.8 for "12.8.1")."""
        return CudaVersion.parse(self.cuda)


@dataclass(frozen=True)
class PythonCall:
    """A call a program makes, as the table writes it ("onnxruntime.preload_dlls()")."""

    module: str
    function: str

    @classmethod
    def parse(cls, text: str) -> "PythonCall":
        module, dot, function = text.removesuffix("()").rpartition(".") if text.endswith("()") else ("", "", "")
        if not (dot and all(part.isidentifier() for part in module.split(".")) and function.isidentifier()):
            raise UsageError(f"expected module.function(), got {text!r}")
        return cls(module, function)

    def __str__(self) -> str:
        return f"{self.module}.{self.function}()"


def _sys_path_dir(template: str) -> None:
    if template.startswith("/") or ".." in template.split("/") or not set(template) - set("/"):
        raise UsageError(f"expected a directory under a sys.path entry, got {template!r}")
    try:
        template.format(folder="f", major=0)
    except (KeyError, IndexError, ValueError) as exc:
        raise UsageError(f"{template!r}: only {{folder}} and {{major}} may be filled in ({exc})") from None


@dataclass(frozen=True)
class SysPathLibrary:
    folder: str  # the component's folder name ("cusparse": nvidia/cusparse/lib)
    file: str  # a glob of the file name ("libcusparse.so.*[0-9]")


@dataclass(frozen=True)
class SysPathPreload:
    """Libraries a package's own Python code loads by path, each from the first sys.path entry that
    holds a match (torch's `_preload_cuda_deps`): whichever CUDA major's wheel that file belongs to."""

    versions: str = field(metadata=SPECIFIER)  # the releases of the package that do it this way
    # Under each sys.path entry, in order: {folder} is the library's folder, {major} the CUDA major of
    # the runtime the package's build links (torch.version.cuda)
    dirs: tuple[str, ...] = field(metadata=records.check(_sys_path_dir))
    libraries: tuple[SysPathLibrary, ...]  # in load order
    when: str  # the condition, as read


@dataclass(frozen=True)
class Preloader:
    """A package that loads CUDA libraries by absolute path before its extension modules."""

    name: str
    applies_to: tuple[str, ...] = field(metadata=REQUIREMENT)  # the distributions that do it
    top_levels: tuple[str, ...]  # import packages whose extension modules benefit
    search: tuple[str, ...] = field(metadata=records.check(_search_step))  # steps from SEARCH_STEPS, in order
    libraries: tuple[str, ...] = ()  # components it loads for any of its files; () = what its extensions need
    on_call: Optional[PythonCall] = None  # the call a program must make for the preload
    # Files its import loads (globs under site-packages, in load order): what they load is already
    # loaded for the extensions of the packages that require it, or whose own files import it.
    on_import: tuple[str, ...] = ()
    # C++ namespaces of its libraries' API (torch: c10, at): such a name an extension importing it first
    # binds and its libraries lack means the extension was built for another release of it
    abi_namespaces: tuple[str, ...] = ()
    # The package's own list of what it preloads, under site-packages (CuPy 13's cupy/.data/_wheel.json):
    # of `libraries`, only those it lists are loaded, from a wheel of its CUDA major no older than listed
    wheel_list: Optional[str] = None
    sys_path: Optional[SysPathPreload] = None  # what its Python code loads from sys.path at import
    note: Optional[str] = None


# -- the file as written ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Releases:
    confidence: str = field(metadata=CONFIDENCE)
    releases: tuple[CudaRelease, ...]


@dataclass(frozen=True)
class _Preloaders:
    packages: tuple[Preloader, ...]


@dataclass(frozen=True)
class CondaPrefix:
    """Where cuda-pathfinder looks under $CONDA_PREFIX, and the metapackage pinning a prefix's CUDA."""

    lib_dirs: tuple[str, ...]  # relative to the prefix, in search order
    component_dirs: Mapping[str, tuple[str, ...]]  # component -> its own directories instead of lib_dirs
    cuda_version_package: str  # "cuda-version"


@dataclass(frozen=True)
class _Sonames:
    sonames: tuple[str, ...]


@dataclass(frozen=True)
class _CudaVersioned:
    components: tuple[str, ...]


@dataclass(frozen=True)
class _BuildFloors:
    components: tuple[str, ...]


@dataclass(frozen=True)
class _FrameworkRuntime:
    dists: tuple[str, ...]  # shell-style patterns on canonical distribution names


@dataclass(frozen=True)
class _OwnRuntime:
    dists: tuple[str, ...] = field(metadata=records.check(_canonical))


@dataclass(frozen=True)
class _SbsaBuilds:
    dists: tuple[str, ...]  # fnmatch patterns of canonical names


@dataclass(frozen=True)
class Bridge:
    """Undefined symbols an extension takes from another distribution's already-loaded libraries."""

    symbols: tuple[str, ...]  # shell-style patterns on symbol names
    dist: str  # canonical name of the distribution that defines them
    note: Optional[str] = None


@dataclass(frozen=True)
class _Bridges:
    packages: tuple[Bridge, ...]


@dataclass(frozen=True)
class AlternativeBuilds:
    """A package shipping one build per CUDA major, importing the one `selected_by`'s major names."""

    dist: str
    directories: Mapping[str, int]  # directory name -> CUDA major ("cu12" -> 12)
    selected_by: Optional[str] = None  # distribution whose installed major picks the build
    extras: Mapping[str, str] = field(default_factory=dict)  # directory -> extra installing its CUDA libraries


@dataclass(frozen=True)
class _AlternativeBuilds:
    packages: tuple[AlternativeBuilds, ...]


def _cuda_file(template: str) -> None:
    if template.count("{major}") != 1 or template.count("{minor}") != 1 or "{major}{minor}" not in template:
        raise UsageError(f"expected a file name with {{major}}{{minor}}, got {template!r}")


@dataclass(frozen=True)
class PerCudaLibraries:
    """A package shipping one native library per CUDA release and loading, at import, the one the
    CUDA of `selected_by`'s build picks (bitsandbytes: torch.version.cuda)."""

    dist: str = field(metadata=records.check(_canonical))
    applies_to: tuple[str, ...] = field(metadata=REQUIREMENT)
    files: str  # glob under site-packages: every alternative (CUDA, CPU, other vendors')
    cuda_file: str = field(metadata=records.check(_cuda_file))  # "libbitsandbytes_cuda{major}{minor}.so"
    fallback: str  # the file loaded when `selected_by` is no CUDA build
    selected_by: str = field(metadata=records.check(_canonical))
    note: Optional[str] = None

    def cuda_of(self, name: str) -> Optional[tuple[int, int]]:
        """(major, minor) of one of the CUDA libraries' file names ("libbitsandbytes_cuda130.so": (13, 0))."""
        head, _, tail = self.cuda_file.partition("{major}{minor}")
        digits = name[len(head):len(name) - len(tail)] if name.startswith(head) and name.endswith(tail) else ""
        if len(digits) < 3 or not digits.isdigit():
            return None
        return int(digits[:2]), int(digits[2:])


@dataclass(frozen=True)
class _PerCudaLibraries:
    packages: tuple[PerCudaLibraries, ...]


@dataclass(frozen=True)
class BuildRecord:
    """A file a package ships recording what its build was compiled against, and the floor each field
    sets: the CUDA major from `cuda`, and a floor per component from the fields of `floors`."""

    applies_to: tuple[str, ...] = field(metadata=REQUIREMENT)
    file: str  # under site-packages
    variable: str  # the name the literal is assigned to
    cuda: str  # the field holding the CUDA release ("12.5.1"): the major whose wheels are judged
    floors: Mapping[str, str]  # component ("cudnn") -> the field holding the release it was built against
    note: Optional[str] = None


@dataclass(frozen=True)
class _BuildRecords:
    packages: tuple[BuildRecord, ...]


@dataclass(frozen=True)
class _RunTimeCompilers:
    libraries: tuple[str, ...]  # shell-style patterns on file names


@dataclass(frozen=True)
class OptionalLayer:
    """Extension modules a package imports behind a fallback, and the library they need."""

    dists: tuple[str, ...] = field(metadata=REQUIREMENT)  # the packages that have the layer
    sonames: tuple[str, ...]
    feature: str
    provided_by: Optional[str] = None  # the distribution that installs the library; None: the NVIDIA wheel
    by_pip: bool = True  # False: no wheel reaches the modules (CuPy 13's cuDNN module), so no pip install enables it


@dataclass(frozen=True)
class _OptionalLayers:
    layers: tuple[OptionalLayer, ...]


@dataclass(frozen=True)
class OptIn:
    """Libraries whose kernels run only for an opt-in feature of a package."""

    of: str  # the package
    feature: str
    dists: tuple[str, ...] = ()  # distributions wholly serving the feature
    files: tuple[str, ...] = ()  # file names of the package's own libraries serving it


@dataclass(frozen=True)
class _OptIns:
    features: tuple[OptIn, ...]


@dataclass(frozen=True)
class PrimaryPlugin:
    """An on-demand plugin that is its package's main feature (onnxruntime-gpu's CUDA provider)."""

    dist: str
    files: tuple[str, ...]
    feature: str


@dataclass(frozen=True)
class _PrimaryPlugins:
    plugins: tuple[PrimaryPlugin, ...]


@dataclass(frozen=True)
class PluginHost:
    """A package whose own loader opens plugins by path from a directory of its files (OpenMM's
    Platform.loadPluginsFromDirectory), after its import has loaded its libraries."""

    host: str  # the distribution whose import loads the plugins
    loads: tuple[str, ...]  # globs under site-packages of the files its import loads first (its extension)
    directory: str  # the plugin directory, under site-packages
    plugins: tuple[str, ...]  # globs of the distributions that install plugins there
    order: str  # how the loader orders the directory's files: "name-length" (shortest path first, once)
    abi_namespaces: tuple[str, ...] = ()  # C++ namespaces of the host's API ("OpenMM"): defined by its libraries only
    lockstep: bool = False  # the plugin distributions are released with the host's versions (openmm-cuda-12 8.6.1 with openmm 8.6.1)


@dataclass(frozen=True)
class _PluginHosts:
    hosts: tuple[PluginHost, ...]


PLUGIN_ORDERS = ("name-length",)


@dataclass(frozen=True)
class PerMajorExtras:
    """A package whose extras choose its CUDA dependencies per major (cuda-cccl[cu12] / [cu13])."""

    dist: str
    extras: Mapping[str, str]  # CUDA major (as TOML keys are strings) -> extra


@dataclass(frozen=True)
class _PerMajorExtras:
    packages: tuple[PerMajorExtras, ...]


@dataclass(frozen=True)
class UndeclaredLibraries:
    """CUDA libraries a package loads without requiring them, and its own extras that bring them as
    wheels (cupy-cuda12x 14: [ctk]; onnxruntime-gpu: [cuda] and [cudnn])."""

    applies_to: tuple[str, ...] = field(metadata=REQUIREMENT)  # the distributions and releases
    components: tuple[str, ...]  # of the release's CUDA major; checked against [[component]] on load
    extras: tuple[str, ...]  # the extras that require their wheels


@dataclass(frozen=True)
class _UndeclaredLibraries:
    packages: tuple[UndeclaredLibraries, ...]


@dataclass(frozen=True)
class Tables:
    confidence: str = field(metadata=CONFIDENCE)
    component: tuple[Component, ...]
    cuda_releases: _Releases
    preloaders: _Preloaders
    conda_prefix: CondaPrefix
    driver_libraries: _Sonames
    system_libraries: _Sonames
    cuda_versioned: _CudaVersioned
    build_floors: _BuildFloors
    framework_runtime: _FrameworkRuntime
    own_runtime: _OwnRuntime
    sbsa_builds: _SbsaBuilds
    bridges: _Bridges
    alternative_builds: _AlternativeBuilds
    per_cuda_libraries: _PerCudaLibraries
    build_records: _BuildRecords
    run_time_compilers: _RunTimeCompilers
    optional_layers: _OptionalLayers
    opt_in: _OptIns
    primary_plugins: _PrimaryPlugins
    plugin_hosts: _PluginHosts
    per_major_extras: _PerMajorExtras
    undeclared_libraries: _UndeclaredLibraries


@compiled.table("components.toml")
def load() -> Tables:
    tables = files.read("components.toml", Tables)
    known = {row.name for row in tables.component}
    for record in tables.build_records.packages:
        if not set(record.floors) <= set(tables.build_floors.components):
            raise ValueError(f"components.toml [build_records]: {record.file}: a floor outside [build_floors]")
    for row in tables.undeclared_libraries.packages:
        unknown = sorted(set(row.components) - known)
        if unknown:
            raise ValueError(f"components.toml [undeclared_libraries]: {', '.join(unknown)} not a [[component]] name")
    for host in tables.plugin_hosts.hosts:
        if host.order not in PLUGIN_ORDERS:
            raise ValueError(f"components.toml [plugin_hosts]: order {host.order!r} is not one of {', '.join(PLUGIN_ORDERS)}")
    return tables


# -- accessors --------------------------------------------------------------------------------------


def for_soname(soname: str) -> tuple[Component, ...]:
    """The wheels that provide `soname`, across CUDA majors (libcurand.so.10 is in cu11, cu12 and 13)."""
    return _by_soname().get(soname, ())


@compiled.derived(load)
def _by_soname(tables: Tables) -> Mapping[str, tuple[Component, ...]]:
    """The component rows by soname, in table order: indexed once, since the doctor asks once per
    missing library and a module can need thousands."""
    found: dict[str, list[Component]] = {}
    for row in tables.component:
        for soname in dict.fromkeys(row.sonames):
            found.setdefault(soname, []).append(row)
    return {soname: tuple(rows) for soname, rows in found.items()}


@compiled.derived(load)
def _by_dist(tables: Tables) -> Mapping[str, tuple[Component, ...]]:
    """The component rows by canonical distribution name (the doctor and the lock ask per distribution)."""
    found: dict[str, list[Component]] = {}
    for row in tables.component:
        found.setdefault(canonicalize_name(row.dist), []).append(row)
    return {dist: tuple(rows) for dist, rows in found.items()}


def for_dist(dist: str, version: Optional[str] = None) -> tuple[Component, ...]:
    """The rows for distribution `dist`, restricted to those that apply to `version` when given."""
    rows = list(_by_dist().get(canonicalize_name(dist), ()))
    if version is not None:
        parsed = Version(version)
        rows = [c for c in rows if c.dist_versions is None or parsed in SpecifierSet(c.dist_versions)]
    return tuple(rows)


def for_component(name: str, cuda_major: int) -> tuple[Component, ...]:
    """The wheels of component `name` ("cusparse") for one CUDA major (nvidia-cusparse-cu11 for 11)."""
    return tuple(c for c in load().component if c.name == name and c.cuda_major == cuda_major)


def same_component(dist: str) -> tuple[str, ...]:
    """Every CUDA major's wheel of the component(s) `dist` installs, newest major first
    (nvidia-cublas -> nvidia-cublas, nvidia-cublas-cu12, nvidia-cublas-cu11): where a build for
    another major is found."""
    names = {row.name for row in for_dist(dist)}
    rows = sorted((c for c in load().component if c.name in names), key=lambda c: -c.cuda_major)
    return tuple(dict.fromkeys(row.dist for row in rows))


def cuda_releases() -> tuple[CudaRelease, ...]:
    """CUDA update releases with their nvrtc / nvJitLink wheel versions, oldest first."""
    return load().cuda_releases.releases


def wheel_releases(component: str) -> tuple[tuple[CudaVersion, str], ...]:
    """(CUDA minor, wheel version) of each known release of a component's wheel: the table covers
    nvrtc and nvjitlink, whose versions follow CUDA's; () for every other component."""
    if component not in ("nvrtc", "nvjitlink"):
        return ()
    return tuple((release.minor, getattr(release, component)) for release in cuda_releases())


def preloaders() -> tuple[Preloader, ...]:
    """Packages that preload CUDA libraries by absolute path."""
    return load().preloaders.packages


def _names(requirements: tuple[str, ...], dist: str, version: Version) -> bool:
    """Whether one of a row's requirements names this distribution (canonical name) at this version."""
    return any(
        canonicalize_name(r.name) == dist and r.specifier.contains(version, prereleases=True)
        for r in map(_requirement, requirements)
    )


@functools.lru_cache(maxsize=None)
def _requirement(text: str) -> Requirement:
    """Parsed once: every distribution of an environment is asked about the same few rows."""
    return Requirement(text)


def preloader_for(dist: str, version: Version) -> Optional[Preloader]:
    """The preloader whose `applies_to` names this distribution (canonical name) at this version."""
    return next((p for p in preloaders() if _names(p.applies_to, dist, version)), None)


def sys_path_preload(dist: str, version: Version) -> Optional[SysPathPreload]:
    """What this distribution's import loads from sys.path by its own search, at this release."""
    row = preloader_for(dist, version)
    if row is None or row.sys_path is None or not SpecifierSet(row.sys_path.versions).contains(version, prereleases=True):
        return None
    return row.sys_path


def conda_prefix_dirs(component: str) -> tuple[str, ...]:
    """Where cuda-pathfinder looks for `component`'s library under $CONDA_PREFIX, in order."""
    table = load().conda_prefix
    return table.component_dirs.get(component, table.lib_dirs)


def conda_packages(soname: str, cuda_major: Optional[int] = None) -> tuple[str, ...]:
    """The conda packages that install `soname` (for one CUDA major when given), sorted."""
    return tuple(sorted({c.conda for c in for_soname(soname) if c.conda and cuda_major in (None, c.cuda_major)}))


def cuda_version_package() -> str:
    """The conda metapackage whose version pins a prefix's CUDA libraries ("cuda-version")."""
    return load().conda_prefix.cuda_version_package


def driver_libraries() -> tuple[str, ...]:
    """Sonames the NVIDIA driver provides (libcuda.so.1, libnvidia-ml.so.1, ...), never a wheel."""
    return load().driver_libraries.sonames


def system_libraries() -> tuple[str, ...]:
    """Sonames of the C/C++ runtime every glibc host provides (libc.so.6, libstdc++.so.6, ...), its dynamic linker aside."""
    return load().system_libraries.sonames


def versioned_by_cuda(component: str) -> bool:
    """Whether the wheels of `component` ("cudart") carry the CUDA release as their version.

    nvidia-cuda-runtime-cu12 12.8.90 is CUDA 12.8; a library wheel such as cuBLAS 13.1.0.3 (CUDA 13.0)
    is versioned by its library instead, so only its major tells the CUDA it belongs to.
    """
    return component in load().cuda_versioned.components


def checks_build_floor(component: str) -> bool:
    """Whether consumers of `component` ("cudnn") refuse a loaded release below the one they were built
    against, so that an installed wheel below a consumer's Requires-Dist breaks it at load time."""
    return component in load().build_floors.components


def needs_build_runtime(dist: str) -> bool:
    """Whether framework `dist` (torch, cupy-cuda12x) needs at run time the CUDA runtime major it was
    built with, so that its build CUDA counts as a runtime need when majors are mixed."""
    name = canonicalize_name(dist)
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in load().framework_runtime.dists)


def carries_own_runtime(dist: str) -> bool:
    """Whether `dist`'s wheels carry their own CUDA runtime (warp-lang, ale-py), so that only its
    bytes tell a release's CUDA: the lock reads such a wheel when the wheel-facts table lacks it."""
    return canonicalize_name(dist) in load().own_runtime.dists


def sbsa_build(dist: str) -> bool:
    """Whether `dist`'s CUDA builds for Linux aarch64 are server-Arm (SBSA) builds, which Jetson's
    CUDA does not run (nvidia-cublas-cu12, cupy-cuda12x, torch): the lock refuses them for a tegra host."""
    name = canonicalize_name(dist)
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in load().sbsa_builds.dists)


def bridge_provider(symbol: str) -> Optional[str]:
    """The distribution whose libraries define `symbol` for extensions that link none of them
    ("aoti_torch_dtype_bool" -> "torch"); None for any other symbol."""
    for bridge in load().bridges.packages:
        if any(fnmatch.fnmatchcase(symbol, pattern) for pattern in bridge.symbols):
            return bridge.dist
    return None


def alternative_builds(dist: str) -> Optional[AlternativeBuilds]:
    """How `dist` (canonical name) ships and selects one build per CUDA major, if it does."""
    return next((row for row in load().alternative_builds.packages if row.dist == dist), None)


def per_cuda_libraries(dist: str, version: Version) -> Optional[PerCudaLibraries]:
    """How `dist` (canonical name) at `version` picks one of its per-CUDA-release libraries, if it does."""
    return next((row for row in load().per_cuda_libraries.packages if _names(row.applies_to, dist, version)), None)


def build_record(dist: str, version: Version) -> Optional[BuildRecord]:
    """Where `dist` (canonical name) at `version` records the releases it was built against, if it does."""
    return next((row for row in load().build_records.packages if _names(row.applies_to, dist, version)), None)


def compiles_at_run_time(file_name: str) -> bool:
    """Whether a library's kernels are compiled at run time (libcccl.c.parallel.so), its fatbin a stub."""
    return any(fnmatch.fnmatchcase(file_name, pattern) for pattern in load().run_time_compilers.libraries)


def optional_layer(dist: str, version: Version, soname: str) -> Optional[OptionalLayer]:
    """The optional layer of `dist` (canonical name) at `version` whose modules need `soname`, if any."""
    return next((layer for layer in load().optional_layers.layers
                 if soname in layer.sonames and _names(layer.dists, dist, version)), None)


def opt_in_feature(owner: Optional[str], file_name: str, installed: Collection[str]) -> Optional[OptIn]:
    """The opt-in feature a library serves (owned by one of its distributions, or one of its files)
    for a package in `installed`: NVSHMEM beside JAX alone serves JAX's collectives, not torch's."""
    return next((row for row in load().opt_in.features
                 if (owner in row.dists or file_name in row.files) and row.of in installed), None)


def primary_plugin(owner: Optional[str], file_name: str) -> Optional[PrimaryPlugin]:
    """The primary plugin row for a file of `owner`, if the file is one."""
    return next((row for row in load().primary_plugins.plugins if row.dist == owner and file_name in row.files), None)


def plugin_hosts() -> tuple[PluginHost, ...]:
    """The packages whose loader opens plugins by path from a directory (openmm)."""
    return load().plugin_hosts.hosts


def plugin_host_of(dist: str) -> Optional[PluginHost]:
    """The row of the host whose plugin directory `dist` (canonical name) installs files in, if any."""
    return next((row for row in load().plugin_hosts.hosts
                 if any(fnmatch.fnmatchcase(dist, pattern) for pattern in row.plugins)), None)


def per_major_extra(dist: str, cuda_major: int) -> Optional[str]:
    """The extra of `dist` that brings CUDA `cuda_major` ("cu12"); None when it has no such extras."""
    row = next((r for r in load().per_major_extras.packages if r.dist == canonicalize_name(dist)), None)
    return row.extras.get(str(cuda_major)) if row else None


def per_major_extras(dist: str) -> frozenset[str]:
    """Every per-major extra of `dist` (an explicit one among a requirement's extras is respected)."""
    row = next((r for r in load().per_major_extras.packages if r.dist == canonicalize_name(dist)), None)
    return frozenset(row.extras.values()) if row else frozenset()


def undeclared_libraries(name: str, version: str) -> Optional[UndeclaredLibraries]:
    """The row for distribution `name` at `version` ("cupy-cuda12x", "14.2.0"): which CUDA libraries
    it loads undeclared and the extras that bring them; None when it declares what it loads."""
    wanted, parsed = canonicalize_name(name), Version(version)
    for row in load().undeclared_libraries.packages:
        for text in row.applies_to:
            requirement = _requirement(text)
            if canonicalize_name(requirement.name) == wanted and requirement.specifier.contains(parsed, prereleases=True):
                return row
    return None
