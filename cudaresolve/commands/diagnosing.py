"""The doctor's I/O edge: scan an installed environment, judge it, hand the result to the renderer.

The facts cache, the machine's loader and the environment variables are read here; `checks.judge`
does the judging on the value the scan builds. `lock` (commands/locking.py) starts from the same scan.

May import: every room below output/ (binary, env, host, knowledge, checks; index and
resolve/fix_judge for judging fixes, with commands/judging's value); not output/ or the rest of
commands/ (commands/result_cache.py imports it to make a fresh report).
"""

from __future__ import annotations

import os
from dataclasses import replace
from typing import TYPE_CHECKING, Callable, Mapping, Optional, Sequence

from cudaresolve.binary.elf import read_binary_facts
from cudaresolve.binary.facts import BinaryFacts
from cudaresolve.binary.loader import LoaderEnv
from cudaresolve.checks import Diagnosis, judge
from cudaresolve.checks.findings import Check, Finding, Severity, sort_findings
from cudaresolve.checks.problems import CacheUnwritable
from cudaresolve.checks.subjects import Scope, Subject
from cudaresolve.env.cache import FactsCache, Recorded
from cudaresolve.env.environment import Environment
from cudaresolve.env.identity import Identity, path_identity
from cudaresolve.env.import_cache import ImportModelCache
from cudaresolve.env.interpreter import Target
from cudaresolve.env.scan import scan_environment
from cudaresolve.env.store import default_cache_dir
from cudaresolve.host.facts import HostFacts
from cudaresolve.knowledge import components

if TYPE_CHECKING:  # a type only: the lock examines planned environments and never judges fixes
    from cudaresolve.commands.judging import Judging


def examine(
    target: Target,
    host: HostFacts,
    environ: Mapping[str, str],
    *,
    progress: Optional[Callable[[str], None]] = None,
    judging: Optional[Judging] = None,
    observe: bool = False,
) -> Diagnosis:
    """Gather the facts of `target` (through the on-disk facts cache) and judge them for `host`; with
    `judging`, each fix is judged on the environment it plans before it is given (resolve/fix_judge.py);
    with `observe`, the imports are run too (env/observe.py: the target's code runs)."""
    env, cache_error = scan(target, environ, progress=progress)
    if observe and target.python is not None:
        from cudaresolve.env.observe import observe_imports

        shipping = {elf.owner for elf in env.elf_files if elf.owner is not None}
        env = replace(env, observed=observe_imports(target.python, env.distributions, shipping, target.site_packages, environ))
    # The libraries a conda prefix's packages list lie outside the tree the result cache walks.
    inside = tuple(os.path.join(site, "") for site in target.site_packages)
    probed: dict[str, Identity] = {e.path: path_identity(e.path) for e in env.elf_files if not e.path.startswith(inside)}
    system_facts = env.system_facts

    def recorded(path: str) -> Optional[BinaryFacts]:
        if path not in probed:
            probed[path] = path_identity(path)  # before the read: a change during it makes a stale entry miss
        return system_facts(path)

    env = replace(env, system_facts=recorded)
    judgement = judge(env, host)
    findings = judgement.findings
    if judging is not None and findings:
        findings = _fixes_judged(env, host, findings, judging)
    if cache_error:
        unwritable = Finding(Check.ENVIRONMENT, Severity.INFO, Subject(scope=Scope.CACHE), CacheUnwritable(cache_error))
        findings = sort_findings(findings + (unwritable,))
    return Diagnosis(host, env, judgement.loads, findings, tuple(probed.items()), cache_error)


def _fixes_judged(env: Environment, host: HostFacts, findings: tuple[Finding, ...], judging: Judging) -> tuple[Finding, ...]:
    """`findings` with their fixes judged with the indexes `judging` opens, when one needs them; the
    indexes that cannot be opened (pip's configuration unreadable) leave those fixes Unchecked."""
    from cudaresolve.errors import CudaresolveError
    from cudaresolve.resolve.fix_judge import judge_fixes, needs_index, unchecked

    if not any(needs_index(finding) for finding in findings):
        return findings
    try:
        opened = judging.indexes()
    except CudaresolveError as exc:
        return unchecked(findings, str(exc))
    with opened as index:
        return judge_fixes(env, host, findings, index, offline=judging.offline)


def scan(
    target: Target, environ: Mapping[str, str], *, progress: Optional[Callable[[str], None]] = None,
    machine: Optional[str] = None,
) -> tuple[Environment, Optional[str]]:
    """The installed environment of `target` as the machine's loader sees it, and why the facts cache
    could not be written (None when it could); `lock` starts from the same value, with the loader of
    its hosts' `machine` (None: this machine's)."""
    cache = FactsCache(default_cache_dir(environ))
    models = ImportModelCache(default_cache_dir(environ))
    seen: dict[str, BinaryFacts] = {}  # the loader asks for a system library once per package that loads it
    contents: dict[str, Recorded] = {}  # what the RECORDs say the files hold, as the scan hands it to prefetch

    def cached(path: str) -> BinaryFacts:
        if path not in seen:
            if progress:
                progress(path)
            seen[path] = cache.facts_for(path, read=read_binary_facts, recorded=contents.get(path))
        return seen[path]

    def prefetch(paths: Sequence[str], recorded: Mapping[str, Recorded]) -> None:
        contents.update(recorded)
        cache.fill(paths, read=read_binary_facts, progress=progress, recorded=recorded)

    env = scan_environment(
        target,
        facts_for=cached,
        prefetch=prefetch,
        loader=LoaderEnv.from_system(environ, driver_libraries=frozenset(components.driver_libraries()), machine=machine,
                                     system_libraries=frozenset(components.system_libraries())),
        environ=environ,
        import_models_cache=models,
    )
    return env, cache.write_error


def examine_example(host: HostFacts) -> Diagnosis:
    """Judge the built-in example (env/example.py) for `host`: nothing is read from the disk."""
    from cudaresolve.env.example import example_environment  # only this command's example needs it

    env = example_environment()
    judgement = judge(env, host)
    return Diagnosis(host, env, judgement.loads, judgement.findings)
