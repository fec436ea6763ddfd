"""Plugins opened by path by their host's loader, built for another release of the host: an OpenMM
CUDA plugin (openmm-cuda-12) binds the C++ names of the libOpenMM.so of its own release; beside
another openmm release some are gone, and the plugin cannot be used ("undefined symbol"). That is
one cause, so one error per plugin distribution, naming it, the host release installed, the host
library it binds (libOpenMM.so) and some of the names; the symbol-skew check does not also report them.

A name counts as the host's when it lies in one of the C++ namespaces the host's row lists
(data/components.toml [plugin_hosts] `abi_namespaces`) and nothing the plugin loads defines it: only
the host's libraries do. Judged from the files alone, so even where the plugin's other libraries
(the driver's libcuda.so.1) are not here to read.

May import: binary/ (its facts and problems), checks/ (findings, loads, torch_abi's name reader),
env/ and knowledge/.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from typing import Iterable, Optional

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from cudaresolve.binary.loader import MISSING_LIBRARY, UNDEFINED_SYMBOL
from cudaresolve.checks import evidence as e
from cudaresolve.checks import fixes as f
from cudaresolve.checks import problems as p
from cudaresolve.checks.findings import Check, Finding, Severity
from cudaresolve.checks.loading import PackageLoad
from cudaresolve.checks.subjects import subject
from cudaresolve.checks.torch_abi import outer_namespace
from cudaresolve.env.distributions import Distribution
from cudaresolve.env.environment import Environment
from cudaresolve.knowledge import components

SYMBOLS_SHOWN = 5  # loader lines shown per finding; the rest are counted


def check_plugin_hosts(env: Environment, loads: Iterable[PackageLoad]) -> tuple[list[Finding], tuple[PackageLoad, ...]]:
    """One error per plugin distribution whose plugins leave names of their host's API unbound; and
    the loads without those names' problems, for the other symbol checks."""
    unbound: dict[str, dict[str, list[str]]] = defaultdict(dict)  # plugin distribution -> file -> names
    host_library: dict[str, str] = {}  # plugin distribution -> the host's library its first such file links
    host_of: dict[str, components.PluginHost] = {}
    rest: list[PackageLoad] = []
    for load in loads:
        row = load.host
        if row is None or load.dist is None or not row.abi_namespaces:
            rest.append(load)
            continue
        names = _unbound_host_names(env, load, row.abi_namespaces)
        if names:
            for path, found in names.items():
                unbound[load.dist][path] = found
                host_of[load.dist] = row
                library = _host_library(env, load, path, row.host)
                if library is not None:
                    host_library.setdefault(load.dist, library)
            taken = {symbol for found in names.values() for symbol in found}
            kept = tuple(problem for problem in load.result.problems
                         if not (problem.kind == UNDEFINED_SYMBOL and problem.consumer in names and problem.symbol in taken))
            load = replace(load, result=replace(load.result, problems=kept))
        rest.append(load)
    findings = []
    for name, files in sorted(unbound.items()):
        row = host_of[name]
        plugin, host = env.distribution(name), env.distribution(row.host)
        if plugin is None or host is None:
            continue
        findings.append(_finding(env, plugin, host, host_library.get(name), files, row.lockstep))
    return findings, tuple(rest)


def _unbound_host_names(env: Environment, load: PackageLoad, namespaces: tuple[str, ...]) -> dict[str, list[str]]:
    """file -> the non-weak names in `namespaces` each of the load's own files references that no
    object of its load defines (in .dynsym order). A library of the environment that the load
    needed and did not find (a sibling plugin that failed: libOpenMMOpenCL.so without an OpenCL
    loader) counts as defining what it defines: that plugin's failure is its own finding."""
    providers = [env.elf_file(obj.path) for obj in load.result.objects]
    providers += [elf for problem in load.result.problems if problem.kind == MISSING_LIBRARY and problem.needed
                  for elf in env.with_soname(problem.needed)]
    defined: set[str] = set()
    for elf in providers:
        if elf is not None and elf.facts is not None:
            defined.update(name for name, definitions in elf.facts.symbols.definitions.items()
                           if any(not hidden for _, hidden in definitions))
    found: dict[str, list[str]] = {}
    for root in load.roots:
        elf = env.elf_file(root)
        if elf is None or elf.facts is None or load.dist not in elf.owners:
            continue
        names = [symbol.name for symbol in elf.facts.undefined
                 if symbol.binding != "WEAK" and symbol.version is None and symbol.name not in defined
                 and outer_namespace(symbol.name) in namespaces]
        if names:
            found[root] = list(dict.fromkeys(names))
    return found


def _host_library(env: Environment, load: PackageLoad, path: str, host: str) -> Optional[str]:
    """The first library of `host` the plugin at `path` links (libOpenMM.so), as the loader found it."""
    for obj in load.result.objects:
        if obj.path != path:
            continue
        for res in obj.needed:
            elf = env.elf_file(res.path) if res.path else None
            if elf is not None and host in elf.owners:
                return elf.path
    return None


def host_pin(env: Environment, host: Distribution, plugin: str) -> Optional[Requirement]:
    """The host's own exact pin on the plugin distribution (openmm 8.6.1's [cuda12] extra:
    OpenMM-CUDA-12==8.6.1), whatever the extra or marker; None when it pins none."""
    for requirement in host.requires:
        if canonicalize_name(requirement.name) != plugin:
            continue
        specs = list(requirement.specifier)
        if len(specs) == 1 and specs[0].operator == "==" and "*" not in specs[0].version:
            return Requirement(f"{plugin}=={specs[0].version}")
    return None


def _finding(
    env: Environment, plugin: Distribution, host: Distribution, library: Optional[str], files: dict[str, list[str]],
    lockstep: bool,
) -> Finding:
    """The error, with the fix: the plugin release the host pins (openmm 8.6.1's OpenMM-CUDA-12==8.6.1),
    else, for plugins released in lockstep with their host, the plugin of the host's version, or
    the host of the plugin's."""
    symbols = tuple(dict.fromkeys(symbol for found in files.values() for symbol in found))
    shown = [(path, symbol) for path, found in files.items() for symbol in found][:SYMBOLS_SHOWN]
    evidence: list[e.Evidence] = [e.LoaderError(path, f"undefined symbol: {symbol}") for path, symbol in shown]
    total = sum(len(found) for found in files.values())
    if total > len(shown):
        evidence.append(e.More(total - len(shown)))
    pin = host_pin(env, host, plugin.name) or (Requirement(f"{plugin.name}=={host.version}") if lockstep else None)
    fix: Optional[f.Fix] = None
    if pin is not None and not pin.specifier.contains(plugin.version, prereleases=True):
        fix = f.Alternatives((f.PipInstall((pin,)), f.PipInstall((Requirement(f"{host.name}=={plugin.version}"),))))
    return Finding(
        Check.PLUGIN_HOST, Severity.ERROR, subject(env, plugin.name),
        p.PluginHostMismatch(tuple(files), host.name, host.version, library, symbols),
        tuple(evidence),
        fix,
    )
