"""The doctor's loader-based checks: what each package's libraries bind to, and what fails.

Every distribution's ELF files are loaded as roots of one namespace, the way importing that package
loads them. Packages that preload CUDA libraries by absolute path (CuPy through cuda-pathfinder,
torch; see `preloaders` in data/components.toml) get those libraries as already loaded, found
where their search finds them: otherwise every CuPy environment would look broken, because its
extension modules carry no RPATH at all.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Callable, Iterable, Mapping, Optional

from packaging.requirements import Requirement
from packaging.version import Version

from cudaresolve.binary.facts import BinaryFacts
from cudaresolve.binary.loader import (
    LD_LIBRARY_PATH,
    LD_SO_CACHE,
    DEFAULT_DIR,
    INVALID_LIBRARY,
    MISSING_VERSION,
    PRELOADED,
    LoaderEnv,
    LoadResult,
    Problem,
    min_provider_version,
    resolve,
)
from cudaresolve.env.cuda import framework_build
from cudaresolve.env.distributions import Distribution
from cudaresolve.env.findings import Finding
from cudaresolve.env.scan import Environment
from cudaresolve.knowledge import components

FactsOf = Callable[[str], Optional[BinaryFacts]]


@dataclass(frozen=True)
class PackageLoad:
    """How one distribution's libraries load: the loader's result and who preloaded what."""

    dist: Optional[str]  # None for files no distribution owns
    roots: tuple[str, ...]
    result: LoadResult
    preloader: Optional[components.Preloader]
    foreign: tuple[tuple[str, str], ...] = ()  # (path, machine) of files built for another machine: not loaded


def preloader_of(dist: Optional[Distribution]) -> Optional[components.Preloader]:
    if dist is None:
        return None
    for preloader in components.preloaders():
        for text in preloader.applies_to:
            requirement = Requirement(text)
            if requirement.name == dist.name and requirement.specifier.contains(dist.version, prereleases=True):
                return preloader
    return None


def preloaded_libraries(
    wanted: Iterable[str], preloader: components.Preloader, site_packages: Iterable[str], conda_prefix: Optional[str]
) -> dict[str, str]:
    """soname -> path for the CUDA libraries `preloader` would load by absolute path, in its search order.

    The "system" step is the OS loader's own search, so it is left to the loader emulation.
    """
    found: dict[str, str] = {}
    for soname in sorted(set(wanted)):
        rows = components.for_soname(soname)
        if not rows:
            continue
        for step in preloader.search:
            path = None
            if step == "site-packages":
                path = next(
                    (
                        os.path.join(sp, row.lib_dir, soname)
                        for sp in site_packages
                        for row in rows
                        if os.path.isfile(os.path.join(sp, row.lib_dir, soname))
                    ),
                    None,
                )
            elif step == "conda-prefix" and conda_prefix:
                candidate = os.path.join(conda_prefix, "lib", soname)
                path = candidate if os.path.isfile(candidate) else None
            if path:
                found[soname] = path
                break
    return found


def load_packages(env: Environment, loader_env: LoaderEnv, facts_of: FactsOf, environ: Mapping[str, str]) -> tuple[PackageLoad, ...]:
    """Load each distribution's top-level ELF files (and the unowned ones) as one namespace per package."""
    by_owner: dict[Optional[str], list[str]] = defaultdict(list)
    needed: dict[Optional[str], set[str]] = defaultdict(set)  # what each package's roots link, for its preloads
    foreign: dict[Optional[str], list[tuple[str, str]]] = defaultdict(list)
    linked = _linked_names(env)
    for elf in env.elf_files:
        # A library something links against is loaded in its consumers' trees, where the RPATHs it
        # inherits apply (auditwheel's vendored libraries rely on that); loading it alone would
        # report misses no process meets.
        if elf.facts is None or elf.facts.soname in linked or os.path.basename(elf.path) in linked:
            continue
        owner = elf.owners[0] if elf.owners else None
        if elf.facts.machine != loader_env.machine:
            foreign[owner].append((elf.path, elf.facts.machine))
        else:
            by_owner[owner].append(elf.path)
            needed[owner].update(elf.facts.needed)
    conda_prefix = env.target.prefix if env.target.conda else environ.get("CONDA_PREFIX")
    loads = []
    for owner in sorted(set(by_owner) | set(foreign), key=lambda o: (o is None, o or "")):
        roots = tuple(by_owner[owner])
        preloader = preloader_of(env.distribution(owner) if owner else None)
        namespace = loader_env
        if preloader is not None:
            extra = preloaded_libraries(needed[owner], preloader, env.target.site_packages, conda_prefix)
            namespace = _with_preloaded(loader_env, extra)
        result = resolve(roots, facts_of=facts_of, env=namespace)
        loads.append(PackageLoad(owner, roots, result, preloader, tuple(foreign[owner])))
    return tuple(loads)


def _with_preloaded(loader_env: LoaderEnv, extra: Mapping[str, str]) -> LoaderEnv:
    merged = dict(loader_env.preloaded)
    merged.update(extra)
    return replace(loader_env, preloaded=merged)


# -- checks ---------------------------------------------------------------------------------------


def check_linking(env: Environment, loads: Iterable[PackageLoad]) -> list[Finding]:
    """symbol-skew and missing-library findings from the loader's problems, one per cause.

    A library that nothing in the environment links against and that is not an extension module
    is a plugin its package dlopens on demand (NVSHMEM transports, cuFile RDMA): its missing system
    libraries are reported once per package as info, not as a broken environment. Files built
    for another machine, which the loader passed over, are reported as warnings.
    """
    findings: dict[tuple, Finding] = {}
    skew: dict[tuple[str, Optional[str]], list[Problem]] = defaultdict(list)
    linked = _linked_names(env)
    plugins: dict[Optional[str], dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for load in loads:
        subject = _subject(env, load.dist)
        for path, machine in load.foreign:
            findings[("foreign", path)] = Finding(
                "environment",
                "warning",
                path,
                f"built for {machine}: this machine's loader cannot load it, so it was not checked",
                (f"installed by {subject}",),
                None,
            )
        optional = set(load.preloader.optional_sonames) if load.preloader else set()
        for problem in load.result.problems:
            if problem.kind in ("undefined-symbol", "missing-version"):
                skew[(problem.consumer, problem.provider)].append(problem)
                continue
            needed = problem.message.split(":", 1)[0]
            key = (problem.kind, os.path.realpath(problem.consumer), needed)
            if key in findings:
                continue
            if problem.kind == "missing-library" and _is_plugin(problem.consumer, linked):
                plugins[load.dist][os.path.basename(problem.consumer)].add(needed)
                continue
            if needed in optional:
                findings[key] = Finding(
                    "missing-library",
                    "warning",
                    subject,
                    f"optional feature unavailable: {os.path.basename(problem.consumer)} needs {needed}, "
                    f"which is not installed ({load.preloader.optional_features or 'loaded only on use'})",
                    (f"{problem.consumer}: {problem.message}",),
                    _provider_fix(needed, env, load.dist, None),
                )
            else:
                copies = [e.path for e in env.elf_files if e.facts and e.facts.soname == needed]
                if problem.kind == INVALID_LIBRARY:  # `needed` is the refused file: ld.so stops there
                    needed = os.path.basename(needed)
                    where = f"the loader finds {problem.provider} first ({problem.provider_step}) and cannot load it"
                elif copies:
                    where = f"the environment's copy ({', '.join(copies)}) is not on its search path"
                else:
                    where = "nothing on its search path, in the environment or in the system provides it"
                findings[key] = Finding(
                    "missing-library",
                    "error",
                    subject,
                    f"{os.path.basename(problem.consumer)}: {problem.message}",
                    (f"{problem.consumer} needs {needed}; {where}",),
                    _provider_fix(needed, env, load.dist, None),
                )
    for dist, by_plugin in plugins.items():
        missing = sorted({n for names in by_plugin.values() for n in names})
        findings[("plugins", dist)] = Finding(
            "missing-library",
            "info",
            _subject(env, dist),
            ("1 plugin library loads only on demand and needs" if len(by_plugin) == 1
             else f"{len(by_plugin)} plugin libraries load only on demand and need")
            + f" libraries that are not on their search path ({', '.join(missing)}); the features they provide are "
            "unavailable here",
            tuple(f"{plugin} needs {', '.join(sorted(names))}" for plugin, names in sorted(by_plugin.items())),
            None,
        )
    for (consumer, provider), problems in skew.items():
        key = ("symbol-skew", os.path.realpath(consumer), provider and os.path.realpath(provider))
        if key in findings:
            continue
        owner = _owner(env, consumer)
        first = problems[0]
        versions = [p.min_provider_version for p in problems if p.min_provider_version]
        minimum = max(versions, key=Version) if versions else None
        # glibc names the provider in a version error and the consumer in a symbol error.
        evidence = [f"{_named_by_glibc(p)}: {p.message}" for p in problems[:5]]
        if len(problems) > 5:
            evidence.append(f"... and {len(problems) - 5} more")
        if provider:
            evidence.append(f"the loader picks {provider} ({first.provider_step})")
        needed_file = first.version if first.kind == "undefined-symbol" else None
        findings[key] = Finding(
            "symbol-skew",
            "error",
            _subject(env, owner),
            f"{os.path.basename(_named_by_glibc(first))}: {first.message}",
            tuple(evidence),
            _provider_fix(needed_file or (os.path.basename(provider) if provider else ""), env, owner, minimum),
        )
    return list(findings.values())


def check_shadowing(env: Environment, loads: Iterable[PackageLoad]) -> list[Finding]:
    """The loader picks a library from outside the environment while a wheel in it has that soname."""
    in_env: dict[str, list[str]] = defaultdict(list)
    for elf in env.elf_files:
        if elf.facts is not None and elf.facts.soname:
            in_env[elf.facts.soname].append(elf.path)
    roots = tuple(os.path.realpath(sp) + os.sep for sp in env.target.site_packages)
    findings: dict[tuple, Finding] = {}
    for load in loads:
        for obj in load.result.objects:
            for res in obj.needed:
                if res.path is None or res.step == PRELOADED or res.needed not in in_env:
                    continue
                if os.path.realpath(res.path).startswith(roots):
                    continue
                key = (res.needed, os.path.realpath(res.path), res.step)
                if key in findings:
                    continue
                wheel_copies = in_env[res.needed]
                owners = sorted({o for p in wheel_copies for o in _owners(env, p)})
                how = {
                    LD_LIBRARY_PATH: "LD_LIBRARY_PATH",
                    LD_SO_CACHE: "the system's ld.so.cache",
                    DEFAULT_DIR: "the system's default directory",
                }.get(res.step, f"the {res.step}" + (f" of {res.rpath_of}" if res.rpath_of else ""))
                findings[key] = Finding(
                    "shadowing",
                    "warning",
                    res.needed,
                    f"{how} makes the loader pick {res.path} for {os.path.basename(obj.path)}, "
                    f"not the environment's copy from {', '.join(owners) or 'an unowned file'}",
                    (f"{obj.path} needs {res.needed}: chosen {res.path} ({res.step})",)
                    + tuple(f"environment copy: {p}" for p in wheel_copies),
                    "remove the stale directory from LD_LIBRARY_PATH"
                    if res.step == LD_LIBRARY_PATH
                    else "make the package find its wheel's copy (fix its RPATH or the preload order)",
                )
    return list(findings.values())


def check_metadata_vs_binary(env: Environment) -> list[Finding]:
    """A dependency the metadata leaves open below what the binary binds (cusparse needs nvjitlink >= 12.4)."""
    findings = []
    for dist in env.distributions:
        needs: dict[str, tuple[str, str, str]] = {}  # provider soname -> (min version, symbol, consumer)
        for elf in env.elf_files:
            if elf.facts is None or dist.name not in elf.owners:
                continue
            for symbol in elf.facts.undefined:
                minimum = min_provider_version(symbol)
                if minimum and (symbol.file not in needs or Version(minimum) > Version(needs[symbol.file][0])):
                    needs[symbol.file] = (minimum, symbol.name, elf.path)
        for soname, (minimum, symbol, consumer) in sorted(needs.items()):
            for provider in _provider_dists(soname, int(minimum.split(".")[0])):
                requirement = next((r for r in dist.requires if r.name == provider), None)
                lower = _admitted_older(provider, requirement, minimum)
                if requirement is not None and not lower:
                    continue
                declared = f"declares '{requirement}'" if requirement else f"does not declare {provider}"
                findings.append(
                    Finding(
                        "metadata-vs-binary",
                        "warning",
                        f"{dist.name} {dist.version}",
                        f"needs {provider} >= {minimum} ({os.path.basename(consumer)} binds {symbol}) but "
                        f"{declared}" + (f", which admits {', '.join(lower)}" if lower else ""),
                        (f"{consumer} needs {symbol} from {soname}",),
                        f"constrain it: pip install \"{provider}>={minimum}\" (or add it to your constraints file)",
                    )
                )
    return findings


# -- helpers --------------------------------------------------------------------------------------


def _named_by_glibc(problem: Problem) -> str:
    """The file glibc puts before a binding error: the provider for `version ... not found`, else the consumer."""
    if problem.kind == MISSING_VERSION and problem.provider:
        return problem.provider
    return problem.consumer


def _linked_names(env: Environment) -> set[str]:
    """Every name some ELF file of the environment lists in DT_NEEDED."""
    return {needed for elf in env.elf_files if elf.facts for needed in elf.facts.needed}


def _is_plugin(path: str, linked: set[str]) -> bool:
    """Not linked against by anything, and not a Python extension module (`name.so`, `name.cpython-*.so`)."""
    name = os.path.basename(path)
    extension = name.endswith(".so") and not name.startswith("lib")
    return not extension and name not in linked


def _provider_dists(soname: str, major: Optional[int]) -> list[str]:
    rows = components.for_soname(soname)
    return sorted({r.dist for r in rows if major is None or r.cuda_major == major})


def _admitted_older(provider: str, requirement: Optional[Requirement], minimum: str) -> list[str]:
    """Known releases of `provider` below `minimum` that `requirement` admits (all of them if undeclared)."""
    component = next((c.name for c in components.for_dist(provider)), None)
    if component not in ("nvrtc", "nvjitlink"):
        return []
    versions = sorted({getattr(r, component) for r in components.cuda_releases()}, key=Version)
    major = int(minimum.split(".")[0])
    older = [v for v in versions if Version(v).major == major and Version(v) < Version(minimum)]
    if requirement is not None:
        older = [v for v in older if requirement.specifier.contains(v, prereleases=True)]
    return older


def _provider_fix(soname: str, env: Environment, consumer_dist: Optional[str], minimum: Optional[str]) -> Optional[str]:
    """`pip install "<wheel that provides soname>[>=minimum]"`, choosing the consumer's CUDA major."""
    major = None
    dist = env.distribution(consumer_dist) if consumer_dist else None
    build = framework_build(dist) if dist else None
    if minimum:
        major = int(minimum.split(".")[0])
    elif build is not None:
        major = int(build.cuda.split(".")[0])
    providers = _provider_dists(soname, major)
    if not providers:
        return None
    spec = f">={minimum}" if minimum else ""
    return "pip install " + " ".join(f'"{p}{spec}"' for p in providers[:1]) + (
        f" (also provided by {', '.join(providers[1:])})" if len(providers) > 1 else ""
    )


def _owners(env: Environment, path: str) -> tuple[str, ...]:
    return next((e.owners for e in env.elf_files if e.path == path), ())


def _owner(env: Environment, path: str) -> Optional[str]:
    real = os.path.realpath(path)
    for elf in env.elf_files:
        if elf.owners and (elf.path == path or os.path.realpath(elf.path) == real):
            return elf.owners[0]
    return None


def _subject(env: Environment, owner: Optional[str]) -> str:
    dist = env.distribution(owner) if owner else None
    return f"{dist.name} {dist.version}" if dist else (owner or "(unowned files)")
