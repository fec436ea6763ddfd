"""How each package's libraries load: the loader emulation run over an `Environment`.

Every distribution's top-level ELF files are loaded as roots of one namespace, the way importing
that package loads them. Packages that preload CUDA libraries by absolute path (CuPy through
cuda-pathfinder, torch; see `preloaders` in data/components.toml) get those libraries as already
loaded, from where the environment's builder found them (`Environment.preloads`): otherwise every
CuPy environment would look broken, because its extension modules carry no RPATH at all.

Importing a package imports what it requires first: torchvision's extensions link libc10.so and
libcudart.so.13 with no path to them, and find them because `import torch` has loaded them. So a
package whose preloader lists `on_import` files is loaded before the others, and every library
those files load counts as already loaded, by soname, for the packages that require it
(Requires-Dist, transitively) or whose own files import it (env/imports.py): no search path is consulted
for them, so nothing can shadow them. So does every library torch's own sys.path search loads
(`sys_path` of its row: nvidia/cuda_runtime/lib/libcudart.so.12 of a CUDA 12 wheel beside torch's
CUDA 13 serves xformers' CUDA 12 extension), whatever torch's own files need.

A package whose own loader opens plugins by path from a directory (OpenMM's plugin directory,
data/components.toml [plugin_hosts]) has those files loaded after its import, one dlopen each in
the loader's order, whichever distribution installed them (openmm-cuda-12's CUDA plugins): what its
import loaded (libOpenMM.so) and what each plugin loaded before counts as already loaded; a plugin
that fails to load is unloaded again, so what it brought in serves no later one.
"""

from __future__ import annotations

import fnmatch
import os
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Iterable, Mapping, Optional

from cudaresolve.binary.facts import BinaryFacts
from cudaresolve.binary.loader import INVALID_LIBRARY, MISSING_LIBRARY, FactsOf, LoadedObject, LoadResult, resolve
from cudaresolve.checks.builds import Build, build_of
from cudaresolve.checks.import_paths import ImportPlan, plan
from cudaresolve.env.distributions import Distribution
from cudaresolve.env.environment import Environment
from cudaresolve.env.imports import GUARDED, ONE_OF, Reach
from cudaresolve.knowledge import components


@dataclass(frozen=True)
class PackageLoad:
    """How one distribution's libraries load (or one of its per-CUDA-major builds): the loader's
    result and who preloaded what."""

    dist: Optional[str]  # None for files no distribution owns
    roots: tuple[str, ...]
    result: LoadResult
    preloader: Optional[components.Preloader]
    foreign: tuple[tuple[str, str], ...] = ()  # (path, machine) of files built for another machine: not loaded
    build: Optional[Build] = None  # the build these roots belong to, for a package that ships several
    imported_first: tuple[str, ...] = ()  # packages imported before it whose import loads libraries (torch)
    host: Optional[components.PluginHost] = None  # the package whose loader opens these roots by path (openmm)
    reach: Optional[Reach] = None  # for roots its import does not load: how they load later (env/imports.py)
    features: tuple[tuple[str, str], ...] = ()  # (root, the module it serves) of roots loaded later
    preloaded_roots: tuple[str, ...] = ()  # files the import-time code loads by path, first

    def feature_of(self, path: str) -> Optional[str]:
        """The module a later-loaded file serves: its own root's, or that of the root that loaded it."""
        features = dict(self.features)
        loaders = {obj.path: obj.loaded_by for obj in self.result.objects}
        seen = set()
        current: Optional[str] = path
        while current is not None and current not in seen:
            if current in features:
                return features[current]
            seen.add(current)
            current = loaders.get(current)
        return None

    @property
    def loaded_by_import(self) -> bool:
        """Whether the import loads these roots, behind a handler too: a guard is no proof the package
        goes on without them (torchvision's import needs the `_C` it guards). A failure there is an error.
        Of alternatives tried in turn (`one-of`), the ones that load."""
        return self.reach in (None, GUARDED, ONE_OF)

    @property
    def loads_none(self) -> bool:
        """For alternatives tried in turn (`one-of`): ld.so refuses every one, so the import raises."""
        if self.reach != ONE_OF or not self.roots or not self.result.problems:
            return False
        return set(self.roots) <= _refused_roots(self, _roots(self))

    @property
    def selected(self) -> bool:
        """False for a build the package does not import here: its problems are not this environment's."""
        return self.build is None or self.build.selected


def load_packages(env: Environment) -> tuple[PackageLoad, ...]:
    """Load each distribution's top-level ELF files (and the unowned ones) as one namespace per package."""
    by_owner: dict[Optional[str], list[str]] = defaultdict(list)
    needed: dict[Optional[str], set[str]] = defaultdict(set)  # what each package's roots link, for its preloads
    foreign: dict[Optional[str], list[tuple[str, str]]] = defaultdict(list)
    linked = env.linked
    loader = env.loader
    conda = {d.name for d in env.distributions if d.kind == "conda"}
    hosted = _hosted_plugins(env)
    for elf in env.elf_files:
        if elf.path in hosted:
            continue  # opened by its host's loader, below
        # A library something links against is loaded in its consumers' trees, where the RPATHs it
        # inherits apply (auditwheel's vendored libraries rely on that); loading it alone would
        # report misses no process meets. A conda package's libraries are judged only as providers:
        # conda's solver keeps its packages consistent with each other.
        if elf.facts is None or elf.facts.soname in linked or os.path.basename(elf.path) in linked:
            continue
        if elf.owner in conda:
            continue
        if elf.facts.machine != loader.machine:
            foreign[elf.owner].append((elf.path, elf.facts.machine))
        else:
            by_owner[elf.owner].append(elf.path)
            needed[elf.owner].update(elf.facts.needed)
    facts_of = facts_of_env(env)
    loads = []
    imported: dict[str, dict[str, str]] = {}  # package -> {name: path} its import loads, for its dependents
    for owner in sorted(set(by_owner) | set(foreign), key=lambda o: (o is None, not _on_import(env, o), o or "")):
        dist = env.distribution(owner) if owner else None
        preloader = components.preloader_for(dist.name, dist.version) if dist else None
        # A package shipping one build per CUDA major imports one: each build is its own namespace.
        builds: dict[Optional[Build], list[str]] = {None: []}
        for root in by_owner[owner]:
            builds.setdefault(build_of(env, owner, root), []).append(root)
        preloaded = dict(loader.preloaded)
        searched: dict[str, str] = {}  # what its own sys.path search loads, every library of it (torch)
        if preloader is not None and preloader.on_call is None:  # a call-dependent preload is not assumed
            found = env.preloads.get(owner or "", {})
            if dist is not None and components.sys_path_preload(dist.name, dist.version) is not None:
                searched = dict(found)
                preloaded.update(searched)
            else:
                preloaded.update(_preloaded(preloader, found, needed[owner]))
        first = tuple(required for required in _required(env, owner) if required in imported)
        for required in first:  # imported before this package's extensions
            preloaded.update(imported[required])
        namespace = replace(loader, preloaded=preloaded) if preloaded != loader.preloaded else loader
        imported_first: tuple[str, ...] = ()
        for build, roots in builds.items():
            # the import loads its libraries by path before any build's extension modules
            order = plan(env, owner, roots) if build is None else ImportPlan(imported_first, tuple(roots))
            imported_first = order.preloaded if build is None else imported_first
            if roots or foreign[owner]:
                result = resolve(order.preloaded + order.imported, facts_of=facts_of, env=namespace)
                loads.append(PackageLoad(owner, order.preloaded + order.imported, result, preloader,
                                         tuple(foreign[owner]) if build is None else (), build, first,
                                         preloaded_roots=order.preloaded))
                later = replace(loader, preloaded={**preloaded, **order.later, **_names_of(result)})
                for reach, deferred in order.deferred.items():
                    loads.append(PackageLoad(
                        owner, deferred, resolve(deferred, facts_of=facts_of, env=later), preloader, (), build, first,
                        reach=reach, features=tuple((root, order.features[root]) for root in deferred)))
                if build is None and preloader is not None and preloader.on_import and owner:
                    imported[owner] = {**searched, **_loaded_by_import(env, result, preloader.on_import)}
    hosts = {row.host: row for row in hosted.values()}
    for name, row in sorted(hosts.items()):
        host_load = next((load for load in loads if load.dist == name and load.build is None), None)
        base = dict(loader.preloaded)
        if host_load is not None:
            base.update(_loaded_by_import(env, host_load.result, row.loads))
        plugins = [path for path, of in hosted.items() if of is row]
        loads += _load_plugins(env, row, base, plugins, facts_of)
    return tuple(loads)


def _hosted_plugins(env: Environment) -> dict[str, components.PluginHost]:
    """path -> host row of every ELF file in the plugin directory of an installed host package,
    owned by a distribution that row says installs plugins there."""
    hosted: dict[str, components.PluginHost] = {}
    for row in components.plugin_hosts():
        if env.distribution(row.host) is None:
            continue  # nothing opens them: judged as any package's files
        directories = {os.path.normpath(os.path.join(site, row.directory)) for site in env.target.site_packages}
        for elf in env.elf_files:
            if (elf.facts is not None and os.path.dirname(os.path.normpath(elf.path)) in directories
                    and any(fnmatch.fnmatchcase(owner, pattern) for owner in elf.owners for pattern in row.plugins)):
                hosted[elf.path] = row
    return hosted


def _load_plugins(
    env: Environment, row: components.PluginHost, base: Mapping[str, str], plugins: list[str], facts_of: FactsOf
) -> list[PackageLoad]:
    """Each plugin opened by its host's loader, one dlopen at a time in the loader's order
    ("name-length": the shortest path first, std::sort's ties taken by name), each seeing as
    already loaded what the host's import loaded and every plugin that loaded before it."""
    loaded = dict(base)
    loads = []
    for path in sorted(plugins, key=lambda path: (len(path), path)):
        elf = env.elf_file(path)
        if elf is None or elf.facts is None or elf.facts.machine != env.loader.machine:
            continue
        result = resolve((path,), facts_of=facts_of, env=replace(env.loader, preloaded=loaded))
        owner = next((o for o in elf.owners if any(fnmatch.fnmatchcase(o, p) for p in row.plugins)), elf.owner)
        loads.append(PackageLoad(owner, (path,), result, None, host=row))
        if not any(problem.kind in (MISSING_LIBRARY, INVALID_LIBRARY) for problem in result.problems):
            loaded = {**loaded, **_names_of(result)}
    return loads


def _names_of(result: LoadResult) -> dict[str, str]:
    """name -> path of every object a load brought in, under its soname and the names that found it."""
    names: dict[str, str] = {}
    for obj in result.objects:
        if obj.soname:
            names.setdefault(obj.soname, obj.path)
        for res in obj.needed:
            if res.path is not None and not res.error:
                names.setdefault(res.needed, res.path)
    return names


def _on_import(env: Environment, owner: Optional[str]) -> bool:
    """Whether importing `owner` loads files its dependents rely on (it is loaded first)."""
    dist = env.distribution(owner) if owner else None
    preloader = components.preloader_for(dist.name, dist.version) if dist else None
    return preloader is not None and bool(preloader.on_import)


def _required(env: Environment, owner: Optional[str]) -> list[str]:
    """The installed distributions importing `owner` imports first, nearest first: those it requires,
    directly or through others, and those whose preloader row says it imports them undeclared."""
    dist = env.distribution(owner) if owner else None
    if dist is None:
        return []
    order: list[str] = []
    todo = [dist]
    seen = {dist.name}
    while todo:
        current = todo.pop(0)
        for name in sorted(env.requires_names(current) | _imported_undeclared(env, current)):
            required = env.distribution(name)
            if required is not None and name not in seen:
                seen.add(name)
                order.append(name)
                todo.append(required)
    return order


def _imported_undeclared(env: Environment, dist: Distribution) -> set[str]:
    """The installed packages with a preloader row whose modules `dist`'s import imports without
    requiring them, read from its files (env/imports.py: torchaudio 2.11 and deep_gemm `import torch`
    and list no Requires-Dist on it)."""
    model = env.imports.get(dist.name)
    if model is None or not model.imports:
        return set()
    imported = {env.module_owners.get(name) for name in model.imports}
    return {other.name for other in env.distributions
            if other.name in imported and components.preloader_for(other.name, other.version) is not None}


def loaded_on_import(env: Environment, load: PackageLoad, path: str) -> bool:
    """Whether importing the package loads the file at `path` (its preloader's `on_import`: torch's
    lib/libtorch_global_deps.so, loaded by path): the import fails when it cannot load, so it is
    judged in full, never as an on-demand plugin."""
    return path in load.preloaded_roots or (load.preloader is not None and _matches(env, path, load.preloader.on_import))


def _matches(env: Environment, path: str, files: tuple[str, ...]) -> bool:
    """Whether `path` matches one of `files` (globs under site-packages)."""
    return any(fnmatch.fnmatch(os.path.relpath(path, site), pattern)
               for pattern in files for site in env.target.site_packages)


def loaded_after_import(env: Environment, loads: Iterable[PackageLoad]) -> dict[str, str]:
    """Path -> the module it serves, for each file the import leaves out of the process: what only
    later code loads (a lazy, opt-in or unreached module, one of the files a computed name picks
    from), and the tree of a guarded root that ld.so refuses, which the handler goes on without
    (xformers' `_C` where no libcudart.so.12 is found). A file no load reaches counts as imported."""
    at_import: set[str] = set()
    later: dict[str, str] = {}
    for load in loads:
        refused = refused_when_guarded(load)
        for obj in load.result.objects:
            elf = env.elf_file(obj.path)
            path = elf.path if elf is not None else obj.path
            if load.loaded_by_import and obj.path not in refused:
                at_import.add(path)
            elif (feature := load.feature_of(obj.path)) is not None:
                later.setdefault(path, feature)
    return {path: feature for path, feature in later.items() if path not in at_import}


def refused_when_guarded(load: PackageLoad) -> frozenset[str]:
    """The objects of a guarded load's roots that ld.so refuses (a root with a problem anywhere in its
    DT_NEEDED tree), which the handler goes on without: they never enter the process. So do the
    alternatives a loop tries in turn that are refused."""
    if load.reach not in (GUARDED, ONE_OF) or not load.result.problems:
        return frozenset()
    root = _roots(load)
    refused = _refused_roots(load, root)
    return frozenset(path for path, top in root.items() if top in refused)


def _refused_roots(load: PackageLoad, root: Mapping[str, str]) -> set[Optional[str]]:
    """The roots of `load` with a problem anywhere in their DT_NEEDED tree (`root`: `_roots(load)`)."""
    return {root.get(problem.consumer) for problem in load.result.problems}


def _roots(load: PackageLoad) -> dict[str, str]:
    """Path -> the root whose DT_NEEDED chain brought it into `load` (a root: itself)."""
    loaders = {obj.path: obj.loaded_by for obj in load.result.objects}
    roots: dict[str, str] = {}
    for path in loaders:
        chain = [path]
        while (parent := loaders.get(chain[-1])) is not None and parent not in chain and parent not in roots:
            chain.append(parent)
        top = roots.get(loaders.get(chain[-1]) or "", chain[-1])
        roots.update((step, top) for step in chain)
    return roots


def _loaded_by_import(env: Environment, result: LoadResult, files: tuple[str, ...]) -> dict[str, str]:
    """name -> path of every object that loading the roots matching `files` (globs under
    site-packages) brings in, under each name ld.so knows it by: its soname and the DT_NEEDED
    names that found it. The roots themselves are extension modules, which nobody links."""
    objects = {obj.path: obj for obj in result.objects}
    todo: list[LoadedObject] = [
        obj for pattern in files for obj in result.objects
        if obj.loaded_by is None and obj.why == "root" and _matches(env, obj.path, (pattern,))
    ]
    seen = {obj.path for obj in todo}
    names: dict[str, str] = {}
    while todo:
        obj = todo.pop(0)
        for res in obj.needed:
            if res.path is None or res.error or res.path not in objects:
                continue
            names.setdefault(res.needed, res.path)
            target = objects[res.path]
            if target.soname:
                names.setdefault(target.soname, res.path)
            if res.path not in seen:
                seen.add(res.path)
                todo.append(target)
    return names


def _preloaded(preloader: components.Preloader, found: Mapping[str, str], roots_need: set[str]) -> dict[str, str]:
    """What `preloader` loads before the package's extensions: the listed components wherever its files
    need them (cuda-pathfinder users), else what its extension modules themselves need (CuPy, torch)."""
    if preloader.libraries:
        return {
            soname: path for soname, path in found.items()
            if any(row.name in preloader.libraries for row in components.for_soname(soname))
        }
    return {soname: path for soname, path in found.items() if soname in roots_need}


def facts_of_env(env: Environment) -> FactsOf:
    """The environment's own files from memory (the scan read them), anything else through its seam."""
    by_path = env.files_by_path

    def facts_of(path: str) -> Optional[BinaryFacts]:
        elf = by_path.get(path) or by_path.get(os.path.normpath(path))
        if elf is not None and elf.facts is not None:
            return elf.facts
        return env.system_facts(path)

    return facts_of
