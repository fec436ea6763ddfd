"""Extensions built for another release of torch: torch's C++ API changes between releases, so an
extension (torchvision, torchaudio, xformers, a C++ extension) binds names of one torch release's
libc10.so and libtorch*.so. Against another release some are gone, and the import fails with
"undefined symbol: _ZN3c10…". That is one cause, so one error per extension distribution, naming
the torch it was built for (its Requires-Dist's exact pin on torch) and the torch installed; the
symbol-skew check does not also report those names.

A name counts as torch's when the extension's package imports torch first (`PackageLoad.imported_first`)
and the name is in one of the C++ namespaces torch's preloader row lists (data/components.toml
`abi_namespaces`): unbound, it can only have come from torch's libraries.

May import: binary/loader (its problems), checks/ (findings, loads), env/ and knowledge/.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import replace
from typing import Iterable, Optional

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from cudaresolve.binary.loader import UNDEFINED_SYMBOL, Problem
from cudaresolve.checks import evidence as e
from cudaresolve.checks import fixes as f
from cudaresolve.checks import problems as p
from cudaresolve.checks.findings import Check, Finding, Severity
from cudaresolve.checks.loading import PackageLoad
from cudaresolve.checks.subjects import subject
from cudaresolve.env.distributions import Distribution
from cudaresolve.env.environment import Environment
from cudaresolve.knowledge import components

EVIDENCE_SHOWN = 3  # loader errors shown per finding; the rest are counted

# An Itanium-mangled nested name, `_ZN3c104cuda…` (or a vtable/typeinfo of one, `_ZTVN2at…`), up to
# the length of its outermost namespace.
_NESTED = re.compile(r"_Z(?:T[VIS])?N[rVKRO]*([1-9][0-9]*)")


def outer_namespace(symbol: str) -> Optional[str]:
    """The outermost namespace of a mangled C++ name ("c10" for `_ZN3c104cuda…`); None for others."""
    match = _NESTED.match(symbol)
    if match is None:
        return None
    start, length = match.end(), int(match.group(1))
    return symbol[start:start + length] if len(symbol) >= start + length else None


def check_torch_abi(env: Environment, loads: Iterable[PackageLoad]) -> tuple[list[Finding], tuple[PackageLoad, ...]]:
    """One error per extension distribution whose files bind C++ names the torch it imports first
    lacks (a warning when only files that load later than the import and unguarded do: that feature
    is lost); and the loads without those problems, for the other symbol checks."""
    taken: dict[tuple[str, str], list[Problem]] = defaultdict(list)  # (extension, framework) -> its problems
    at_import: set[tuple[str, str]] = set()  # pairs whose failing files the import loads: errors
    rest: list[PackageLoad] = []
    for load in loads:
        kept: list[Problem] = []
        for problem in load.result.problems:
            framework = _framework_of(env, load, problem)
            if framework is None or load.dist is None:
                kept.append(problem)
            else:
                taken[(load.dist, framework.name)].append(problem)
                if load.loaded_by_import:
                    at_import.add((load.dist, framework.name))
        result = load.result if len(kept) == len(load.result.problems) else replace(load.result, problems=tuple(kept))
        rest.append(load if result is load.result else replace(load, result=result))
    findings = []
    for (name, framework_name), problems in taken.items():
        extension = env.distribution(name)
        framework = env.distribution(framework_name)
        assert extension is not None and framework is not None  # both named by installed loads
        findings.append(_finding(env, extension, framework, problems, (name, framework_name) in at_import))
    return findings, tuple(rest)


def _framework_of(env: Environment, load: PackageLoad, problem: Problem) -> Optional[Distribution]:
    """The framework imported before `load`'s package whose C++ namespace an unbound name of one of
    that package's own files is in; None for any other problem."""
    if problem.kind != UNDEFINED_SYMBOL or problem.needed is not None or problem.symbol is None:
        return None
    elf = env.elf_file(problem.consumer)
    if elf is None or load.dist not in elf.owners:
        return None  # a file of another package loaded in its tree: not this extension's build
    namespace = outer_namespace(problem.symbol)
    if namespace is None:
        return None
    for name in load.imported_first:
        dist = env.distribution(name)
        row = components.preloader_for(dist.name, dist.version) if dist else None
        if dist is not None and row is not None and namespace in row.abi_namespaces:
            return dist
    return None


def built_for(env: Environment, extension: Distribution, framework: str) -> Optional[Version]:
    """The framework release `extension` pins exactly in its Requires-Dist (torchvision 0.28.0:
    torch==2.13.0); None when it pins none."""
    for requirement in env.requirements(extension):
        if canonicalize_name(requirement.name) != framework:
            continue
        specs = list(requirement.specifier)
        if len(specs) == 1 and specs[0].operator in ("==", "===") and "*" not in specs[0].version:
            try:
                return Version(specs[0].version)
            except InvalidVersion:
                return None
    return None


def _finding(env: Environment, extension: Distribution, framework: Distribution, problems: list[Problem],
             at_import: bool) -> Finding:
    pinned = built_for(env, extension, framework.name)
    files = tuple(dict.fromkeys(problem.consumer for problem in problems))
    symbols = tuple(sorted({problem.symbol or "" for problem in problems}))
    shown = [next(problem for problem in problems if problem.consumer == file) for file in files][:EVIDENCE_SHOWN]
    evidence: list[e.Evidence] = [e.LoaderError(problem.consumer, problem.message) for problem in shown]
    if len(problems) > len(shown):
        evidence.append(e.More(len(problems) - len(shown)))
    return Finding(
        Check.TORCH_ABI, Severity.ERROR if at_import else Severity.WARNING, subject(env, extension.name),
        p.FrameworkAbiMismatch(files, framework.name, framework.version, pinned, symbols),
        tuple(evidence),
        _matching_pair(extension, framework, pinned),
    )


def _matching_pair(extension: Distribution, framework: Distribution, pinned: Optional[Version]) -> Optional[f.Fix]:
    """The framework release the extension pins; or the extension's release made for the installed
    framework, which pip picks when asked for both with the framework held at its release. None when
    the pin names the installed release already: neither would change anything."""
    installed = Version(framework.version.public)
    if pinned is not None and Version(pinned.public) == installed:
        return None
    paired = f.Explained(
        f.PipInstall((Requirement(extension.name), Requirement(f"{framework.name}=={installed}")), options=("--upgrade",)),
        f.MadeFor(extension.name, framework.name, installed))
    if pinned is None:
        return paired
    return f.Alternatives((f.PipInstall((Requirement(f"{framework.name}=={pinned}"),)), paired))
