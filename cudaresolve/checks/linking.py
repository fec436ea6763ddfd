"""What each package's libraries bind to, and what fails: one check per kind of loader problem.

- symbol-skew: a version or symbol the chosen provider lacks (glibc's "version `X' not found",
  "undefined symbol: X, version Y");
- missing-library: a DT_NEEDED nothing on the search path provides, or a file ld.so refuses; the
  library of an optional layer (numba's TBB, CuPy's NCCL) is one info per package;
- plugin libraries nothing links and no import loads (NVSHMEM transports) whose libraries are
  missing: one info per package;
- files built for another machine, which the loader passes over;
- shadowing: the loader picks a library from outside the environment while a wheel in it has it.

Each takes the packages' loads (`loading.load_packages`) and reads nothing from the disk.

May import: binary/loader (its problems), checks/ (findings, suggestions, loads), env/, host/ and
knowledge/; the findings are values, output/ words them.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import replace
from typing import Iterable, Iterator, Optional

from packaging.requirements import Requirement

from cudaresolve.binary.loader import (
    INVALID_LIBRARY,
    LD_LIBRARY_PATH,
    MISSING_LIBRARY,
    MISSING_VERSION,
    PRELOADED,
    UNDEFINED_SYMBOL,
    Problem,
)
from cudaresolve.checks import evidence as e
from cudaresolve.checks import fixes as f
from cudaresolve.checks import problems as p
from cudaresolve.checks.findings import Check, Finding, Severity
from cudaresolve.checks.loading import PackageLoad, loaded_on_import
from cudaresolve.checks.mixed_majors import other_major_wheels
from cudaresolve.checks.ownership import owner_fix, shared_file
from cudaresolve.checks.subjects import Subject, subject
from cudaresolve.checks.suggest import build_fix, conda_fix, provider_dists, provider_fix, provider_requirement
from cudaresolve.env.environment import Environment
from cudaresolve.env.imports import GUARDED, ONE_OF
from cudaresolve.env.ownership import SharedFile
from cudaresolve.host.facts import HostFacts
from cudaresolve.knowledge import components
from cudaresolve.versions import CudaVersion


def check_foreign_files(env: Environment, loads: Iterable[PackageLoad]) -> list[Finding]:
    """Files built for another machine: this machine's loader cannot load them, so they were not checked."""
    return [
        Finding(Check.ENVIRONMENT, Severity.WARNING, Subject(file=path), p.ForeignMachine(machine),
                (e.InstalledBy(subject(env, load.dist)),))
        for load in loads
        for path, machine in load.foreign
    ]


def _library_problems(env: Environment, loads: Iterable[PackageLoad]) -> Iterator[tuple[PackageLoad, Problem]]:
    """(load, problem) for each missing or refused library, once per consumer file and name."""
    seen: set[tuple[str, str, Optional[str]]] = set()
    for load in loads:
        for problem in load.result.problems:
            if problem.kind not in (MISSING_LIBRARY, INVALID_LIBRARY):
                continue
            key = (problem.kind, env.identity(problem.consumer), problem.needed)
            if key not in seen:
                seen.add(key)
                yield load, problem


def is_plugin(env: Environment, load: PackageLoad, path: str) -> bool:
    """Not linked against by anything, not a Python extension module (`name.so`, `name.cpython-*.so`),
    not loaded by its package's import (torch's libtorch_global_deps.so, bitsandbytes' pick of its
    per-CUDA libraries), and not its package's primary plugin (data: onnxruntime-gpu's CUDA provider):
    those are judged in full. A file its host's loader opens from a plugin directory (and what it
    loads) is a plugin whoever links it."""
    name = os.path.basename(path)
    extension = name.endswith(".so") and not name.startswith("lib")
    if load.host is not None:  # opened by its host's loader, which goes on without it (OpenMM's plugins)
        return components.primary_plugin(load.dist, name) is None
    return (not extension and name not in env.linked and components.primary_plugin(load.dist, name) is None
            and not loaded_on_import(env, load, path) and not (load.build is not None and load.build.on_import))


def check_missing_libraries(env: Environment, loads: Iterable[PackageLoad], host: HostFacts) -> list[Finding]:
    """A library the loader cannot find or load: an error in glibc's words; or, when only a package's
    optional layers need it, one info for that package naming the features."""
    findings: list[Finding] = []
    causes: dict[tuple[Optional[str], str, Optional[f.Fix]], int] = {}  # (package, consumer, fix) -> its finding's index
    optional: dict[Optional[str], list[tuple[components.OptionalLayer, Problem]]] = defaultdict(list)
    on_call: dict[tuple[Optional[str], str, components.PythonCall], list[Problem]] = defaultdict(list)  # (package, file, call)
    later: dict[tuple[Optional[str], Severity], list[tuple[str, Problem]]] = defaultdict(list)
    none_loads: dict[Optional[str], tuple[PackageLoad, list[Problem]]] = {}
    for load, problem in _library_problems(env, loads):
        if problem.kind == MISSING_LIBRARY and load.reach is None and is_plugin(env, load, problem.consumer):
            continue  # check_plugin_libraries
        if load.reach == ONE_OF:  # alternatives tried in turn: refused ones are not missed while one loads
            if load.loads_none:
                none_loads.setdefault(load.dist, (load, []))[1].append(problem)
            continue
        needed = problem.needed or ""
        dist = env.distribution(load.dist) if load.dist else None
        layer = components.optional_layer(dist.name, dist.version, needed) if dist else None
        if problem.kind == MISSING_LIBRARY and layer is not None:  # the package says it is optional
            optional[load.dist].append((layer, problem))
            continue
        if problem.kind == MISSING_LIBRARY and load.reach is not None:  # not on the import's path
            severity = Severity.INFO if load.reach == GUARDED else Severity.WARNING
            later[(load.dist, severity)].append((load.feature_of(problem.consumer) or "", problem))
            continue
        if problem.kind == MISSING_LIBRARY and load.build is None and other_major_wheels(env, needed):
            continue  # another major's wheel of it is installed: check_companion_majors names both sides
        preload = load.preloader
        if problem.kind == MISSING_LIBRARY and preload and preload.on_call and needed in env.preloads.get(load.dist or "", {}):
            on_call[(load.dist, problem.consumer, preload.on_call)].append(problem)
            continue
        fix: Optional[f.Fix] = None
        if problem.kind == INVALID_LIBRARY:  # ld.so stops at the refused file
            needed = os.path.basename(needed)
            where = e.Unfound(problem.consumer, needed, refused=problem.provider, refused_step=problem.provider_step)
        else:
            copies = env.with_soname(needed)
            where = e.Unfound(problem.consumer, needed, copies=tuple(elf.path for elf in copies))
            if copies:
                fix = f.Explained(
                    f.Alternatives((f.AddToPath(LD_LIBRARY_PATH, os.path.dirname(copies[0].path)), f.ReleaseThatFinds())),
                    f.NotWhereItLooks(copies[0].owner, os.path.basename(problem.consumer)))
        fix = (
            fix
            or (build_fix(load.dist, load.build, host) if load.build and load.dist and components.for_soname(needed)
                else None)
            or _reaching(env, load, problem, needed, provider_fix(needed, env, load.dist, None, problem.consumer))
        )
        same_cause = (load.dist, env.identity(problem.consumer), fix)  # one fix for several libraries: one finding
        if fix is not None and same_cause in causes:
            found = findings[causes[same_cause]]
            findings[causes[same_cause]] = replace(found, evidence=found.evidence + (where,))
            continue
        causes[same_cause] = len(findings)
        findings.append(
            Finding(Check.MISSING_LIBRARY, Severity.ERROR, subject(env, load.dist),
                    p.LibraryNotLoaded(problem.consumer, needed, problem.message), (where,), fix)
        )
    for owner, (load, problems) in none_loads.items():
        findings.append(_none_loads(env, owner, load, problems))
    for owner, layers in optional.items():
        findings.append(_optional_features(env, owner, layers))
    for (owner, severity), lost in later.items():
        findings.append(_features_lost(env, owner, severity, lost))
    for (owner, consumer, call), missing in on_call.items():
        findings.append(_found_on_call(env, owner, consumer, call, missing))
    return findings


def _none_loads(env: Environment, dist: Optional[str], load: PackageLoad, problems: list[Problem]) -> Finding:
    """The import tries files in turn and raises when none loads, and none does: an error, with the
    libraries each misses; the fix installs them where a wheel provides them."""
    sonames = tuple(sorted({os.path.basename(problem.needed or "") for problem in problems}))
    installs = [found[0] for soname in sonames if (found := provider_requirement(soname, env, dist, None))]
    first = list({problem.consumer: problem for problem in reversed(problems)}.values())[::-1]  # the first refusal of each file
    evidence: list[e.Evidence] = [e.LoaderError(problem.consumer, problem.message) for problem in first[:5]]
    if len(first) > 5:
        evidence.append(e.More(len(first) - 5))
    return Finding(
        Check.MISSING_LIBRARY, Severity.ERROR, subject(env, dist),
        p.NoAlternativeLoads(tuple(sorted({module for _, module in load.features})),
                             tuple(sorted(os.path.basename(root) for root in load.roots)), sonames),
        tuple(evidence),
        f.PipInstall(tuple(dict.fromkeys(installs))) if installs else None,
    )


def _found_on_call(
    env: Environment, dist: Optional[str], consumer: str, call: components.PythonCall, problems: list[Problem]
) -> Finding:
    """Libraries a file finds only after the program makes its package's preload call
    (onnxruntime.preload_dlls()): it works in programs that make it, so a warning whose fix is the call."""
    plugin = components.primary_plugin(dist, os.path.basename(consumer))
    found = env.preloads.get(dist or "", {})
    return Finding(
        Check.MISSING_LIBRARY, Severity.WARNING, subject(env, dist),
        p.FoundOnlyAfterCall(consumer, tuple(problem.needed or "" for problem in problems), call.module, call.function,
                             plugin.feature if plugin else None),
        tuple(e.LoadedByCall(consumer, problem.needed or "", call.module, call.function, found[problem.needed or ""])
              for problem in problems),
        f.Call(call.module, call.function),
    )


def _optional_features(
    env: Environment, dist: Optional[str], problems: list[tuple[components.OptionalLayer, Problem]]
) -> Finding:
    """One info for all of a package's optional layers whose library is absent (numba's TBB threading
    layer, CuPy's NCCL and cuTENSOR modules): the package works without them (data: [optional_layers])."""
    features = tuple(dict.fromkeys(layer.feature for layer, _ in problems))
    sonames = tuple(sorted({problem.needed or "" for _, problem in problems}))
    installs: list[Requirement] = []
    for layer, problem in problems:
        if not layer.by_pip:
            continue
        if layer.provided_by:
            installs.append(Requirement(layer.provided_by))
        else:
            found = provider_requirement(problem.needed or "", env, dist, None)
            installs += [found[0]] if found else []
    return Finding(
        Check.MISSING_LIBRARY, Severity.INFO, subject(env, dist), p.OptionalFeaturesMissing(features, sonames),
        tuple(e.LoaderError(problem.consumer, problem.message) for _, problem in problems),
        f.Explained(f.PipInstall(tuple(dict.fromkeys(installs))), f.ToEnable()) if installs else None,
    )


def _features_lost(env: Environment, dist: Optional[str], severity: Severity, lost: list[tuple[str, Problem]]) -> Finding:
    """One finding for the modules of a package that load after its import (env/imports.py: behind a
    handler, an environment variable, a function, or imported by none of its modules) and whose
    libraries are absent: those features are lost, the import works. An info when the package
    catches the failure itself."""
    features = tuple(sorted({feature for feature, _ in lost if feature}))
    sonames = tuple(sorted({problem.needed or "" for _, problem in lost}))
    installs = [found[0] for soname in sonames if (found := provider_requirement(soname, env, dist, None))]
    return Finding(
        Check.MISSING_LIBRARY, severity, subject(env, dist), p.OptionalFeaturesMissing(features, sonames),
        tuple(e.LoaderError(problem.consumer, problem.message) for _, problem in lost),
        f.Explained(f.PipInstall(tuple(dict.fromkeys(installs))), f.ToEnable()) if installs else None,
    )


def check_plugin_libraries(env: Environment, loads: Iterable[PackageLoad]) -> list[Finding]:
    """Plugins a package dlopens on demand (nothing links them, no import loads them) whose libraries
    are missing: the features they provide are unavailable, the environment is not broken."""
    plugins: dict[Optional[str], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for load, problem in _library_problems(env, loads):
        if problem.kind == MISSING_LIBRARY and load.reach is None and is_plugin(env, load, problem.consumer):
            plugins[load.dist][os.path.basename(problem.consumer)].add(problem.needed or "")
    findings = []
    for dist, by_plugin in plugins.items():
        missing = sorted({n for names in by_plugin.values() for n in names})
        findings.append(
            Finding(
                Check.MISSING_LIBRARY, Severity.INFO, subject(env, dist),
                p.PluginLibrariesMissing(tuple(sorted(by_plugin)), tuple(missing)),
                tuple(e.Needs(plugin, tuple(sorted(names))) for plugin, names in sorted(by_plugin.items())),
            )
        )
    return findings


def check_symbol_skew(env: Environment, loads: Iterable[PackageLoad]) -> list[Finding]:
    """Versions and symbols the chosen provider lacks: one finding per consumer file and provider file,
    naming the newest provider release the consumer's versioned names imply. An error when the
    import loads the consumer (behind a handler too); a warning when only code that runs later
    does, or it is one of the files a computed name picks from (import_paths.py)."""
    skew: dict[tuple[str, Optional[str]], list[Problem]] = defaultdict(list)
    load_of: dict[tuple[str, Optional[str]], PackageLoad] = {}
    at_import: set[tuple[str, Optional[str]]] = set()  # skews a load on the import's path meets: errors
    bridges = _Bridges(env)
    for load in loads:
        for problem in load.result.problems:
            if problem.kind in (UNDEFINED_SYMBOL, MISSING_VERSION) and not bridges.take(load, problem):
                skew[(problem.consumer, problem.provider)].append(problem)
                load_of.setdefault((problem.consumer, problem.provider), load)
                if load.loaded_by_import:
                    at_import.add((problem.consumer, problem.provider))
    findings: dict[tuple[str, Optional[str]], Finding] = {("bridge", consumer): finding for consumer, finding in bridges.unused().items()}
    for (consumer, provider), problems in skew.items():
        key = (env.identity(consumer), provider and env.identity(provider))
        if key in findings:
            continue
        elf = env.elf_file(consumer)
        owner = elf.owner if elf is not None else None
        first = problems[0]
        versions = [problem.min_provider_version for problem in problems if problem.min_provider_version]
        minimum = max(versions) if versions else None
        # glibc names the provider in a version error and the consumer in a symbol error.
        evidence: list[e.Evidence] = [e.LoaderError(_named_by_glibc(problem), problem.message) for problem in problems[:5]]
        if len(problems) > 5:
            evidence.append(e.More(len(problems) - 5))
        if provider:
            chosen = env.elf_file(provider)
            chosen_owner = chosen.owner if chosen is not None else None
            conda = chosen_owner is not None and _conda_installed(env, chosen_owner)
            evidence.append(e.LoaderPicks(provider, first.provider_step, subject(env, chosen_owner) if conda else None))
        shared = _shared_provider(env, consumer, provider)
        if shared is not None:  # the cause: two owners of the provider, the wrong one's bytes there
            evidence.append(e.SharedBy(shared.path, shared.owners, shared.on_disk))
        soname = first.needed or (os.path.basename(provider) if provider else "")
        findings[key] = Finding(  # a file only later code loads costs that feature: a warning
            Check.SYMBOL_SKEW, Severity.ERROR if (consumer, provider) in at_import else Severity.WARNING, subject(env, owner),
            p.SymbolSkew(consumer, provider, first.provider_step, soname,
                         tuple(problem.symbol or problem.version or "" for problem in problems), _named_by_glibc(first),
                         first.message, minimum),
            tuple(evidence),
            (owner_fix(env, shared.owners, None) if shared is not None else None)  # the bytes there fail it
            or _loader_cause_fix(env, first, soname)
            or _conda_provider_fix(env, load_of[(consumer, provider)], first, soname, owner, minimum)
            or _installed_elsewhere_fix(env, load_of[(consumer, provider)], first, soname, owner, minimum)
            or provider_fix(soname, env, owner, minimum),
        )
    return list(findings.values())


def _shared_provider(env: Environment, consumer: str, provider: Optional[str]) -> Optional[SharedFile]:
    """The file several distributions own that provides what `consumer` lacks: the provider glibc
    names, else (an undefined symbol names no provider) the one shared library the consumer links."""
    if not env.shared_files:
        return None
    if provider:
        chosen = env.elf_file(provider)
        return shared_file(env, chosen.path if chosen is not None else provider)
    elf = env.elf_file(consumer)
    needed = set(elf.facts.needed) if elf is not None and elf.facts is not None else set()
    linked = [shared for shared in env.shared_files
              if (lib := env.files_by_path.get(shared.path)) is not None and lib.facts is not None
              and lib.facts.soname in needed]
    return linked[0] if len(linked) == 1 else None


class _Bridges:
    """Extensions that bind another distribution's symbols without linking its libraries (cuda-core's
    _tensor_bridge and torch's aoti_torch_*; data/components.toml [bridges]): they are imported only
    after that distribution, whose libraries then provide the symbols. Judged against those libraries
    when it is installed; when it is not, the bridge is unused, which is information."""

    def __init__(self, env: Environment):
        self.env = env
        self.defined: dict[str, set[str]] = {}  # distribution -> names its libraries export
        self.absent: dict[str, tuple[str, Optional[str], set[str]]] = {}  # consumer -> (provider, package, symbols)

    def take(self, load: PackageLoad, problem: Problem) -> bool:
        """True when `problem` is a bridged symbol that is provided, or recorded as an unused bridge."""
        if problem.kind != UNDEFINED_SYMBOL or problem.needed is not None or problem.symbol is None:
            return False
        provider = components.bridge_provider(problem.symbol)
        if provider is None:
            return False
        if self.env.distribution(provider) is None:
            self.absent.setdefault(problem.consumer, (provider, load.dist, set()))[2].add(problem.symbol)
            return True
        return problem.symbol in self._exported(provider)

    def _exported(self, dist: str) -> set[str]:
        if dist not in self.defined:
            self.defined[dist] = {
                name
                for elf in self.env.elf_files if elf.facts is not None and dist in elf.owners
                for name, definitions in elf.facts.symbols.definitions.items()
                if any(not hidden for _, hidden in definitions)
            }
        return self.defined[dist]

    def unused(self) -> dict[str, Finding]:
        return {
            consumer: Finding(
                Check.BRIDGE, Severity.INFO, subject(self.env, package),
                p.UnusedBridge(consumer, provider, tuple(sorted(symbols))),
                (e.BridgeSymbols(consumer, tuple(sorted(symbols)), provider),),
            )
            for consumer, (provider, package, symbols) in sorted(self.absent.items())
        }


def _loader_cause_fix(env: Environment, problem: Problem, soname: str) -> Optional[f.Fix]:
    """When the provider is a file from outside the environment that LD_LIBRARY_PATH or LD_PRELOAD put
    first, that setting is the cause, whatever is installed."""
    provider = problem.provider
    if provider is None or env.elf_file(provider) is not None:
        return None
    if problem.provider_step == LD_LIBRARY_PATH:
        return f.Explained(f.RemoveFromPath(LD_LIBRARY_PATH, os.path.dirname(provider)), f.TakenFirst(soname))
    if problem.provider_step == PRELOADED and provider in env.loader.preloaded.values():
        return f.Explained(f.RemoveFromPath("LD_PRELOAD", provider), f.PreloadServes(soname))
    return None


def _conda_installed(env: Environment, name: str) -> bool:
    dist = env.distribution(name)
    return dist is not None and dist.conda is not None


def _conda_provider_fix(
    env: Environment, load: PackageLoad, problem: Problem, soname: str, owner: Optional[str],
    minimum: Optional[CudaVersion],
) -> Optional[f.Fix]:
    """When the file the loader picks is a conda package's: the conda command that replaces it, and
    the wheel that provides it where the consumer would find that wheel before the conda copy."""
    provider = env.elf_file(problem.provider) if problem.provider else None
    conda = conda_fix(env, soname, provider.owner if provider else None, minimum.as_release() if minimum else None)
    if conda is None:
        return None
    reason = _wheel_found_first(env, load, problem, soname, minimum)
    pip = provider_fix(soname, env, owner, minimum) if reason else None
    return f.OrElse(conda, f.Explained(pip, reason)) if pip and reason else conda


def _wheel_found_first(
    env: Environment, load: PackageLoad, problem: Problem, soname: str, minimum: Optional[CudaVersion]
) -> Optional[f.Why]:
    """Why a wheel of `soname`, once installed, would be found before the conda copy: the package's
    preloader searches site-packages first, or the consumer's RPATH chain (its RUNPATH) names the
    wheel's directory. None when neither: installing the wheel would change nothing."""
    preloader = load.preloader
    if (problem.provider_step == PRELOADED and preloader is not None
            and env.preloads.get(load.dist or "", {}).get(soname) == problem.provider
            and "conda-prefix" in preloader.search
            and "site-packages" in preloader.search[:preloader.search.index("conda-prefix")]):
        return f.PreloaderLooksFirst(preloader.name)
    major = minimum.major if minimum else None
    wheel_dirs = {os.path.normpath(os.path.join(site, row.lib_dir))
                  for site in env.target.site_packages for row in components.for_soname(soname)
                  if major is None or row.cuda_major == major}
    for directory in search_dirs(env, load, problem.consumer):
        if os.path.normpath(directory) in wheel_dirs:
            return f.LooksFirstIn(os.path.basename(problem.consumer), directory)
    return None


def _reaching(env: Environment, load: PackageLoad, problem: Problem, soname: str, fix: Optional[f.Fix]) -> Optional[f.Fix]:
    """The wheel's `pip install`, then its directory on LD_LIBRARY_PATH when the consumer would not
    look there: no RUNPATH or inherited RPATH names it, LD_LIBRARY_PATH does not, and no preloader
    of the package loads that library from site-packages. Installing alone would change nothing
    (the 2026-11-26 survey: onnxruntime-gpu 1.18's provider, CuPy 13's cuBLAS)."""
    install = fix.fix if isinstance(fix, f.Explained) else fix
    if not isinstance(install, f.PipInstall) or not env.target.site_packages:
        return fix
    name = install.requirements[0].name
    rows = [row for row in components.for_dist(name) if soname in row.sonames]
    if not rows:
        return fix
    directory = os.path.normpath(os.path.join(env.target.site_packages[-1], rows[0].lib_dir))
    preloader = load.preloader
    if (preloader is not None and preloader.on_call is None and "site-packages" in preloader.search
            and (not preloader.libraries or rows[0].name in preloader.libraries)):
        return fix
    searched = search_dirs(env, load, problem.consumer) + list(env.loader.ld_library_path)
    if any(os.path.normpath(d) == directory for d in searched if d):
        return fix
    return f.Steps((fix, f.AddToPath(LD_LIBRARY_PATH, directory))) if fix else None


def search_dirs(env: Environment, load: PackageLoad, consumer: str) -> list[str]:
    """The directories `consumer` searches before the program's RPATH: its DT_RUNPATH when it has
    one, else the DT_RPATH of it and of each object up its load chain ($ORIGIN expanded; entries
    with other tokens left out)."""
    objects = {obj.path: obj for obj in load.result.objects}
    found: list[str] = []
    obj = objects.get(consumer)
    while obj is not None:
        elf = env.elf_file(obj.path)
        if elf is None or elf.facts is None:
            break
        if elf.facts.runpath:  # an object with DT_RUNPATH contributes no DT_RPATH
            if obj.path == consumer:
                return _origin_expanded(elf.facts.runpath, consumer)
        else:
            found += _origin_expanded(elf.facts.rpath, obj.path)
        obj = objects.get(obj.loaded_by) if obj.loaded_by else None
    return found


def _origin_expanded(entries: Iterable[str], path: str) -> list[str]:
    origin = os.path.dirname(path)
    expanded = (entry.replace("${ORIGIN}", origin).replace("$ORIGIN", origin) for entry in entries)
    return [entry for entry in expanded if "$" not in entry]


def _installed_elsewhere_fix(
    env: Environment, load: PackageLoad, problem: Problem, soname: str, owner: Optional[str], minimum: Optional[CudaVersion]
) -> Optional[f.Fix]:
    """A wheel that would satisfy the consumer is installed, but the loader picked another file: say
    where the right copy is instead of asking to install it again."""
    major = minimum.major if minimum else None
    for name in provider_dists(soname, major):
        dist = env.distribution(name)
        if dist is None or (minimum and dist.version < minimum.as_release()):
            continue
        copies = [elf.path for elf in env.elf_files if elf.owner == name and elf.facts and elf.facts.soname == soname]
        first = f.AddToPath(LD_LIBRARY_PATH, os.path.dirname(copies[0]) if copies else None, first=True)
        # Removing the picked copy helps only where the consumer looks in the right copy's directory next.
        searched = {os.path.normpath(d) for d in search_dirs(env, load, problem.consumer) + list(env.loader.ld_library_path) if d}
        reached = bool(copies) and os.path.dirname(copies[0]) in searched
        return f.Explained(
            f.Alternatives((f.RemoveCopy(problem.provider or ""), first)) if reached else first,
            f.PickedOther(name, dist.version, copies[0] if copies else None, os.path.basename(problem.consumer),
                          problem.provider or "", problem.provider_step))
    return None


def check_shadowing(env: Environment, loads: Iterable[PackageLoad]) -> list[Finding]:
    """The loader picks a library from outside the site-packages (the system's, or a conda package's)
    while a wheel in the environment has that soname."""
    roots = tuple(env.loader.real_path(sp) + os.sep for sp in env.target.site_packages)
    conda = {d.name for d in env.distributions if d.kind == "conda"}
    findings: dict[tuple[str, str, str], Finding] = {}  # (soname, file chosen, step)
    for load in loads:
        for obj in load.result.objects:
            for res in obj.needed:
                wheel_copies = [elf for elf in env.with_soname(res.needed) if elf.owner not in conda]
                if res.path is None or res.step == PRELOADED or not wheel_copies:
                    continue
                real = env.identity(res.path)
                if real.startswith(roots):
                    continue
                key = (res.needed, real, res.step)
                if key in findings:
                    continue
                owners = tuple(sorted({o for elf in wheel_copies for o in elf.owners}))
                chosen = env.elf_file(res.path)
                conda_owner = chosen.owner if chosen is not None and chosen.owner in conda else None
                findings[key] = Finding(
                    Check.SHADOWING, Severity.WARNING, Subject(file=res.needed),
                    p.Shadowed(obj.path, res.needed, res.path, res.step, res.rpath_of,
                               subject(env, conda_owner) if conda_owner else None, owners),
                    (e.Chosen(obj.path, res.needed, res.path, res.step),)
                    + tuple(e.EnvironmentCopy(elf.path) for elf in wheel_copies),
                    f.RemoveStaleDirectory(LD_LIBRARY_PATH, os.path.dirname(res.path)) if res.step == LD_LIBRARY_PATH
                    else f.FindWheelCopy(),
                )
    return list(findings.values())


def _named_by_glibc(problem: Problem) -> str:
    """The file glibc puts before a binding error: the provider for `version ... not found`, else the consumer."""
    if problem.kind == MISSING_VERSION and problem.provider:
        return problem.provider
    return problem.consumer
