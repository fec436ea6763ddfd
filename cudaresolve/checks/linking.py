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
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import replace
from typing import Iterable, Optional

from cudaresolve.binary.loader import (
    ALREADY_LOADED,
    DEFAULT_DIR,
    INVALID_LIBRARY,
    LD_LIBRARY_PATH,
    LD_SO_CACHE,
    MISSING_LIBRARY,
    MISSING_VERSION,
    PRELOADED,
    RPATH,
    RUNPATH,
    UNDEFINED_SYMBOL,
    Problem,
)
from cudaresolve.checks.findings import Finding, subject
from cudaresolve.checks.fixes import build_fix, conda_fix, provider_dists, provider_fix, provider_requirement
from cudaresolve.checks.loading import PackageLoad
from cudaresolve.checks.mixed_majors import other_major_wheels
from cudaresolve.env.environment import Environment
from cudaresolve.host.facts import HostFacts
from cudaresolve.knowledge import components
from cudaresolve.versions import CudaVersion


def check_foreign_files(env: Environment, loads: Iterable[PackageLoad]) -> list[Finding]:
    """Files built for another machine: this machine's loader cannot load them, so they were not checked."""
    return [
        Finding(
            "environment",
            "warning",
            path,
            f"built for {machine}: this machine's loader cannot load it, so it was not checked",
            (f"installed by {subject(env, load.dist)}",),
            None,
        )
        for load in loads
        for path, machine in load.foreign
    ]


def _library_problems(env: Environment, loads: Iterable[PackageLoad]):
    """(load, problem) for each missing or refused library, once per consumer file and name."""
    seen = set()
    for load in loads:
        for problem in load.result.problems:
            if problem.kind not in (MISSING_LIBRARY, INVALID_LIBRARY):
                continue
            key = (problem.kind, env.identity(problem.consumer), problem.needed)
            if key not in seen:
                seen.add(key)
                yield load, problem


def is_plugin(path: str, linked: set[str], owner: Optional[str]) -> bool:
    """Not linked against by anything, not a Python extension module (`name.so`, `name.cpython-*.so`),
    and not its package's primary plugin (data: onnxruntime-gpu's CUDA provider), which is judged in full."""
    name = os.path.basename(path)
    extension = name.endswith(".so") and not name.startswith("lib")
    return not extension and name not in linked and components.primary_plugin(owner, name) is None


def check_missing_libraries(env: Environment, loads: Iterable[PackageLoad], host: HostFacts) -> list[Finding]:
    """A library the loader cannot find or load: an error in glibc's words; or, when only a package's
    optional layers need it, one info for that package naming the features."""
    linked = env.linked
    findings: list[Finding] = []
    causes: dict[tuple, int] = {}  # (package, consumer, fix) -> its finding's index
    optional: dict[Optional[str], list[tuple[components.OptionalLayer, Problem]]] = defaultdict(list)
    on_call: dict[tuple[Optional[str], str, str], list[Problem]] = defaultdict(list)  # (package, file, call)
    for load, problem in _library_problems(env, loads):
        if problem.kind == MISSING_LIBRARY and is_plugin(problem.consumer, linked, load.dist):
            continue  # check_plugin_libraries
        needed = problem.needed or ""
        dist = env.distribution(load.dist) if load.dist else None
        layer = components.optional_layer(dist.name, dist.version, needed) if dist else None
        if problem.kind == MISSING_LIBRARY and layer is not None:
            optional[load.dist].append((layer, problem))
            continue
        if problem.kind == MISSING_LIBRARY and load.build is None and other_major_wheels(env, needed):
            continue  # another major's wheel of it is installed: check_companion_majors names both sides
        preload = load.preloader
        if problem.kind == MISSING_LIBRARY and preload and preload.on_call and needed in env.preloads.get(load.dist or "", {}):
            on_call[(load.dist, problem.consumer, preload.on_call)].append(problem)
            continue
        fix = None
        if problem.kind == INVALID_LIBRARY:  # ld.so stops at the refused file
            needed = os.path.basename(needed)
            where = f"the loader finds {problem.provider} first ({problem.provider_step}) and cannot load it"
        else:
            copies = env.with_soname(needed)
            if copies:
                where = f"the environment's copy ({', '.join(e.path for e in copies)}) is not on its search path"
                fix = (f"{copies[0].owner or 'the environment'} has it, but not where "
                       f"{os.path.basename(problem.consumer)} looks: put {os.path.dirname(copies[0].path)} on "
                       "LD_LIBRARY_PATH, or install a release of its package that finds it")
            else:
                where = "nothing on its search path, in the environment or in the system provides it"
        fix = (
            fix
            or (build_fix(load.dist, load.build, host) if load.build and load.dist and components.for_soname(needed)
                else None)
            or provider_fix(needed, env, load.dist, None)
        )
        same_cause = (load.dist, env.identity(problem.consumer), fix)  # one fix for several libraries: one finding
        if fix is not None and same_cause in causes:
            found = findings[causes[same_cause]]
            findings[causes[same_cause]] = replace(found, evidence=found.evidence + (f"{problem.consumer} needs {needed}; {where}",))
            continue
        causes[same_cause] = len(findings)
        findings.append(
            Finding(
                "missing-library",
                "error",
                subject(env, load.dist),
                f"{os.path.basename(problem.consumer)}: {problem.message}",
                (f"{problem.consumer} needs {needed}; {where}",),
                fix,
            )
        )
    for dist, problems in optional.items():
        findings.append(_optional_features(env, dist, problems))
    for (dist, consumer, call), problems in on_call.items():
        findings.append(_found_on_call(env, dist, consumer, call, problems))
    return findings


def _found_on_call(env: Environment, dist: Optional[str], consumer: str, call: str, problems: list[Problem]) -> Finding:
    """Libraries a file finds only after the program makes its package's preload call
    (onnxruntime.preload_dlls()): it works in programs that make it, so a warning whose fix is the call."""
    name = os.path.basename(consumer)
    plugin = components.primary_plugin(dist, name)
    found = env.preloads.get(dist or "", {})
    return Finding(
        "missing-library",
        "warning",
        subject(env, dist),
        f"{name} finds {', '.join(p.needed or '' for p in problems)} only after the program calls {call}"
        + (f": without it the {plugin.feature} does not load" if plugin else ""),
        tuple(f"{consumer} needs {p.needed}; {call} loads {found[p.needed or '']}" for p in problems),
        f"call {call} before the first use (see the package's documentation for other ways it preloads)",
    )


def _optional_features(
    env: Environment, dist: Optional[str], problems: list[tuple[components.OptionalLayer, Problem]]
) -> Finding:
    """One info for all of a package's optional layers whose library is absent (numba's TBB threading
    layer, CuPy's NCCL and cuTENSOR modules): the package works without them (data: [optional_layers])."""
    features = list(dict.fromkeys(layer.feature for layer, _ in problems))
    sonames = sorted({problem.needed or "" for _, problem in problems})
    installs = []
    for layer, problem in problems:
        if layer.provided_by:
            installs.append(f'"{layer.provided_by}"')
        else:
            found = provider_requirement(problem.needed or "", env, dist, None)
            installs += [found[0]] if found else []
    return Finding(
        "missing-library",
        "info",
        subject(env, dist),
        f"optional feature{'s' if len(features) > 1 else ''} unavailable: {'; '.join(features)} "
        f"({', '.join(sonames)} not installed)",
        tuple(f"{problem.consumer}: {problem.message}" for _, problem in problems),
        f"to enable: pip install {' '.join(dict.fromkeys(installs))}" if installs else None,
    )


def check_plugin_libraries(env: Environment, loads: Iterable[PackageLoad]) -> list[Finding]:
    """Plugins a package dlopens on demand (nothing links them, no import loads them) whose libraries
    are missing: the features they provide are unavailable, the environment is not broken."""
    linked = env.linked
    plugins: dict[Optional[str], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for load, problem in _library_problems(env, loads):
        if problem.kind == MISSING_LIBRARY and is_plugin(problem.consumer, linked, load.dist):
            plugins[load.dist][os.path.basename(problem.consumer)].add(problem.needed or "")
    findings = []
    for dist, by_plugin in plugins.items():
        missing = sorted({n for names in by_plugin.values() for n in names})
        findings.append(
            Finding(
                "missing-library",
                "info",
                subject(env, dist),
                ("1 plugin library loads only on demand and needs" if len(by_plugin) == 1
                 else f"{len(by_plugin)} plugin libraries load only on demand and need")
                + f" libraries that are not on their search path ({', '.join(missing)}); the features they "
                "provide are unavailable here",
                tuple(f"{plugin} needs {', '.join(sorted(names))}" for plugin, names in sorted(by_plugin.items())),
                None,
            )
        )
    return findings


def check_symbol_skew(env: Environment, loads: Iterable[PackageLoad]) -> list[Finding]:
    """Versions and symbols the chosen provider lacks: one finding per consumer file and provider file,
    naming the newest provider release the consumer's versioned names imply."""
    skew: dict[tuple[str, Optional[str]], list[Problem]] = defaultdict(list)
    load_of: dict[tuple[str, Optional[str]], PackageLoad] = {}
    bridges = _Bridges(env)
    for load in loads:
        for problem in load.result.problems:
            if problem.kind in (UNDEFINED_SYMBOL, MISSING_VERSION) and not bridges.take(load, problem):
                skew[(problem.consumer, problem.provider)].append(problem)
                load_of.setdefault((problem.consumer, problem.provider), load)
    findings: dict = {("bridge", consumer): finding for consumer, finding in bridges.unused().items()}
    for (consumer, provider), problems in skew.items():
        key = (env.identity(consumer), provider and env.identity(provider))
        if key in findings:
            continue
        elf = env.elf_file(consumer)
        owner = elf.owner if elf is not None else None
        first = problems[0]
        versions = [p.min_provider_version for p in problems if p.min_provider_version]
        minimum = max(versions) if versions else None
        # glibc names the provider in a version error and the consumer in a symbol error.
        evidence = [f"{_named_by_glibc(p)}: {p.message}" for p in problems[:5]]
        if len(problems) > 5:
            evidence.append(f"... and {len(problems) - 5} more")
        if provider:
            chosen = env.elf_file(provider)
            conda = chosen is not None and chosen.owner is not None and _conda_installed(env, chosen.owner)
            evidence.append(f"the loader picks {provider} ({first.provider_step})"
                            + (f", from {subject(env, chosen.owner)}" if conda else ""))
        soname = first.needed or (os.path.basename(provider) if provider else "")
        findings[key] = Finding(
            "symbol-skew",
            "error",
            subject(env, owner),
            f"{os.path.basename(_named_by_glibc(first))}: {first.message}",
            tuple(evidence),
            _loader_cause_fix(env, first, soname)
            or _conda_provider_fix(env, load_of[(consumer, provider)], first, soname, owner, minimum)
            or _installed_elsewhere_fix(env, first, soname, owner, minimum)
            or provider_fix(soname, env, owner, minimum),
        )
    return list(findings.values())


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
                "bridge",
                "info",
                subject(self.env, package),
                f"bridge unused: {os.path.basename(consumer)} binds {len(symbols)} symbols of {provider}, which is "
                f"not installed; it is imported only with {provider}",
                (f"{consumer} needs {', '.join(sorted(symbols)[:3])}"
                 + (f" and {len(symbols) - 3} more" if len(symbols) > 3 else "") + f", which {provider} defines",),
                None,
            )
            for consumer, (provider, package, symbols) in sorted(self.absent.items())
        }


def _loader_cause_fix(env: Environment, problem: Problem, soname: str) -> Optional[str]:
    """When the provider is a file from outside the environment that LD_LIBRARY_PATH or LD_PRELOAD put
    first, that setting is the cause, whatever is installed."""
    provider = problem.provider
    if provider is None or env.elf_file(provider) is not None:
        return None
    if problem.provider_step == LD_LIBRARY_PATH:
        return f"remove {os.path.dirname(provider)} from LD_LIBRARY_PATH: the loader takes its {soname} first"
    if problem.provider_step == PRELOADED and provider in env.loader.preloaded.values():
        return f"remove {provider} from LD_PRELOAD: it is loaded before everything and serves {soname}"
    return None


def _conda_installed(env: Environment, name: str) -> bool:
    dist = env.distribution(name)
    return dist is not None and dist.conda is not None


def _conda_provider_fix(
    env: Environment, load: PackageLoad, problem: Problem, soname: str, owner: Optional[str],
    minimum: Optional[CudaVersion],
) -> Optional[str]:
    """When the file the loader picks is a conda package's: the conda command that replaces it, and
    the wheel that provides it where the consumer would find that wheel before the conda copy."""
    provider = env.elf_file(problem.provider) if problem.provider else None
    conda = conda_fix(env, soname, provider.owner if provider else None, minimum.as_release() if minimum else None)
    if conda is None:
        return None
    reason = _wheel_found_first(env, load, problem, soname, minimum)
    pip = provider_fix(soname, env, owner, minimum) if reason else None
    return f"{conda}; or {pip} ({reason})" if pip else conda


def _wheel_found_first(
    env: Environment, load: PackageLoad, problem: Problem, soname: str, minimum: Optional[CudaVersion]
) -> Optional[str]:
    """Why a wheel of `soname`, once installed, would be found before the conda copy: the package's
    preloader searches site-packages first, or the consumer's RPATH chain (its RUNPATH) names the
    wheel's directory. None when neither: installing the wheel would change nothing."""
    preloader = load.preloader
    if (problem.provider_step == PRELOADED and preloader is not None
            and env.preloads.get(load.dist or "", {}).get(soname) == problem.provider
            and "conda-prefix" in preloader.search
            and "site-packages" in preloader.search[:preloader.search.index("conda-prefix")]):
        return f"{preloader.name}'s preloader looks in site-packages first"
    major = minimum.major if minimum else None
    wheel_dirs = {os.path.normpath(os.path.join(site, row.lib_dir))
                  for site in env.target.site_packages for row in components.for_soname(soname)
                  if major is None or row.cuda_major == major}
    for directory in _search_dirs(env, load, problem.consumer):
        if os.path.normpath(directory) in wheel_dirs:
            return f"{os.path.basename(problem.consumer)} looks in {directory} first"
    return None


def _search_dirs(env: Environment, load: PackageLoad, consumer: str) -> list[str]:
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
    env: Environment, problem: Problem, soname: str, owner: Optional[str], minimum: Optional[CudaVersion]
) -> Optional[str]:
    """A wheel that would satisfy the consumer is installed, but the loader picked another file: say
    where the right copy is instead of asking to install it again."""
    major = minimum.major if minimum else None
    for name in provider_dists(soname, major):
        dist = env.distribution(name)
        if dist is None or (minimum and dist.version < minimum.as_release()):
            continue
        copies = [e.path for e in env.elf_files if e.owner == name and e.facts and e.facts.soname == soname]
        where = f" ({copies[0]})" if copies else ""
        return (f"{name} {dist.version}{where} has what {os.path.basename(problem.consumer)} needs, but the loader "
                f"picks {problem.provider} ({problem.provider_step}) first: remove that copy, or put "
                f"{os.path.dirname(copies[0]) if copies else 'its directory'} first on LD_LIBRARY_PATH")
    return None


def check_shadowing(env: Environment, loads: Iterable[PackageLoad]) -> list[Finding]:
    """The loader picks a library from outside the site-packages (the system's, or a conda package's)
    while a wheel in the environment has that soname."""
    roots = tuple(env.loader.real_path(sp) + os.sep for sp in env.target.site_packages)
    conda = {d.name for d in env.distributions if d.kind == "conda"}
    findings: dict[tuple, Finding] = {}
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
                owners = sorted({o for elf in wheel_copies for o in elf.owners})
                how = {
                    LD_LIBRARY_PATH: "LD_LIBRARY_PATH",
                    LD_SO_CACHE: "the system's ld.so.cache",
                    DEFAULT_DIR: "the system's default directory",
                    RPATH: f"the RPATH of {res.rpath_of}",
                    RUNPATH: f"the RUNPATH of {os.path.basename(obj.path)}",
                    ALREADY_LOADED: "a copy another library of the package loaded first",
                }.get(res.step, f"the name {res.needed}")
                chosen = env.elf_file(res.path)
                conda_owner = chosen.owner if chosen is not None and chosen.owner in conda else None
                findings[key] = Finding(
                    "shadowing",
                    "warning",
                    res.needed,
                    f"{how} makes the loader pick {res.path}"
                    + (f" (from {subject(env, conda_owner)})" if conda_owner else "")
                    + f" for {os.path.basename(obj.path)}, "
                    f"not the environment's copy from {', '.join(owners) or 'an unowned file'}",
                    (f"{obj.path} needs {res.needed}: chosen {res.path} ({res.step})",)
                    + tuple(f"environment copy: {elf.path}" for elf in wheel_copies),
                    "remove the stale directory from LD_LIBRARY_PATH"
                    if res.step == LD_LIBRARY_PATH
                    else "make the package find its wheel's copy (fix its RPATH or the preload order)",
                )
    return list(findings.values())


def _named_by_glibc(problem: Problem) -> str:
    """The file glibc puts before a binding error: the provider for `version ... not found`, else the consumer."""
    if problem.kind == MISSING_VERSION and problem.provider:
        return problem.provider
    return problem.consumer
