"""The conda plugin: `__cuda_arch` (CEP 46), `conda cudaresolve ...`, and the doctor after
`conda install/update/create` and inside `conda doctor` (docs/conda.md).

Only conda imports this module (entry point group `conda`), so conda is no dependency of
cudaresolve. Nothing here may break a conda command: whatever fails is one line on stderr.
Inside conda, conda's own variables (CONDA_OVERRIDE_CUDA, CONDA_OVERRIDE_CUDA_ARCH, or conda's
`override_virtual_packages` setting) win over cudaresolve's for the same fact, so `__cuda_arch`
agrees with conda's `__cuda` and follows CEP 46 whatever else is set.
"""

from __future__ import annotations

import functools
import os
import sys
from typing import TYPE_CHECKING, Callable, Iterator, Mapping, Optional, Sequence

from conda import plugins
from conda.auxlib import NULL

if TYPE_CHECKING:
    from cudaresolve.host.facts import HostFacts

NAME = "cuda_arch"
# For each fact, conda's variable (and its `override_virtual_packages` key) and cudaresolve's.
CONDA_FACTS = (("CONDA_OVERRIDE_CUDA", "cuda", "CUDARESOLVE_CUDA"), ("CONDA_OVERRIDE_CUDA_ARCH", NAME, "CUDARESOLVE_GPUS"))
# cudaresolve commands that take --python: given the prefix's interpreter.
PREFIX_COMMANDS = ("doctor", "lock", "install", "inspect", "pip")
POST_COMMANDS = {"install", "update", "create"}

_asking_others = False  # set while the other plugins are asked for their virtual packages


def warn(what: str, exc: BaseException) -> None:
    """One line on stderr, never a traceback: a plugin's failure must not stop conda."""
    words = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    print(f"cudaresolve: warning: {what}: {words}", file=sys.stderr, flush=True)


def conda_environ(environ: Mapping[str, str], configured: Mapping[str, str]) -> dict[str, str]:
    """`environ` as cudaresolve should read it inside conda: a fact conda is told (its variable,
    else its `override_virtual_packages` setting) drops cudaresolve's own variable for it."""
    seen = dict(environ)
    for conda_variable, key, ours in CONDA_FACTS:
        if conda_variable not in seen and key in configured:
            seen[conda_variable] = str(configured[key])
        if conda_variable in seen:
            seen.pop(ours, None)
    return seen


@functools.lru_cache(maxsize=None)
def host() -> Optional[HostFacts]:
    """This machine as conda's variables state it, probed once per conda process (~25 ms without
    a driver, one NVML session with one: conda's own `__cuda` probe costs more, and is per process
    too); None, after a warning, when it cannot be read."""
    try:
        from cudaresolve.commands.host_options import stated_by
        from cudaresolve.host.probe import host_for

        environ = conda_environ(os.environ, _configured())
        return host_for(overrides=stated_by(environ), environ=environ)
    except Exception as exc:
        warn("cannot read the host, so no __cuda_arch and no doctor", exc)
        return None


def cuda_arch_version(facts: Optional[HostFacts], environ: Mapping[str, str]) -> Optional[str]:
    """CEP 46: the lowest compute capability of the visible GPUs as MAJOR.MINOR (no a/f suffix);
    none without `__cuda` (an empty CONDA_OVERRIDE_CUDA, or no driver CUDA version) or without GPUs.
    CONDA_OVERRIDE_CUDA_ARCH reaches here as the GPU list (commands/host_options.py); empty, as no GPUs."""
    if facts is None or environ.get("CONDA_OVERRIDE_CUDA", "-").strip() == "" or facts.driver.cuda is None:
        return None
    cc = facts.min_compute_capability
    return None if cc is None else f"{cc.major}.{cc.minor}"


def provided_elsewhere(name: str) -> bool:
    """Whether another registered plugin (or a conda built-in) yields virtual package `name`: two
    providers make every conda command fail with "Conflicting plugins". Each other implementation
    of the hook is called as conda calls it; the built-ins' values are deferred, so this is cheap.
    A plugin that asks us back meanwhile is told nothing, so two careful plugins cannot recurse."""
    global _asking_others
    from conda.base.context import context

    me = sys.modules[__name__]
    _asking_others = True
    try:
        for impl in context.plugin_manager.hook.conda_virtual_packages.get_hookimpls():
            if impl.plugin is me or getattr(impl, "hookwrapper", False) or getattr(impl, "wrapper", False):
                continue
            try:
                if any(getattr(package, "name", None) == name for package in impl.function() or ()):
                    return True
            except Exception:
                continue  # that plugin's failure is conda's to report when conda calls it
        return False
    finally:
        _asking_others = False


def _cuda_arch() -> object:
    """The deferred version conda evaluates when it builds the virtual packages (NULL: absent)."""
    try:
        return cuda_arch_version(host(), conda_environ(os.environ, _configured())) or NULL
    except Exception as exc:
        warn("cannot tell __cuda_arch", exc)
        return NULL


def _configured() -> Mapping[str, str]:
    """conda's `override_virtual_packages` setting (.condarc), by virtual package name."""
    from conda.base.context import context

    return context.override_virtual_packages or {}


@plugins.hookimpl
def conda_virtual_packages() -> Iterator[plugins.CondaVirtualPackage]:
    """`__cuda_arch=X.Y=0`, unless another plugin provides it. No override_entity: conda would
    apply CONDA_OVERRIDE_CUDA_ARCH even without `__cuda`, which CEP 46 forbids; `cuda_arch_version`
    applies it instead. build None is conda's "0", as for its own `__cuda`."""
    if _asking_others:
        return
    try:
        if provided_elsewhere(NAME):
            return
    except Exception as exc:
        warn("cannot list conda's other virtual packages, so no __cuda_arch", exc)
        return
    yield plugins.CondaVirtualPackage(name=NAME, version=_cuda_arch, build=None)


def prefix_python(prefix: str) -> str:
    """The interpreter of a conda prefix, where conda puts it."""
    return os.path.join(prefix, "python.exe") if os.name == "nt" else os.path.join(prefix, "bin", "python")


def command_line(argv: Sequence[str], default_prefix: str, prefix_named: Callable[[str], str]) -> list[str]:
    """`conda cudaresolve` arguments as cudaresolve's: -p/--prefix PREFIX, or -n/--name NAME (a
    prefix in conda's envs dirs, through `prefix_named`; default: the active prefix) becomes the
    prefix's --python for the commands that take one, unless given."""
    words: list[str] = []
    prefix = default_prefix
    rest = list(argv)
    while rest:
        word = rest.pop(0)
        if word in ("-p", "--prefix") and rest:
            prefix = rest.pop(0)
        elif word.startswith("--prefix="):
            prefix = word.partition("=")[2]
        elif word in ("-n", "--name") and rest:
            prefix = prefix_named(rest.pop(0))
        elif word.startswith("--name="):
            prefix = prefix_named(word.partition("=")[2])
        else:
            words.append(word)
    stated = any(w in ("--python", "--site-packages", "--example") or w.startswith("--python=") for w in words)
    if words[:1] and words[0] in PREFIX_COMMANDS and not stated:
        words[1:1] = ["--python", prefix_python(os.path.abspath(prefix))]
    return words


def _subcommand(argv: tuple[str, ...]) -> int:
    """cudaresolve's command line on the prefix; an unknown -n NAME is conda's own error
    (EnvironmentNameNotFound), which conda prints in one line, as for its own commands."""
    from conda.base.context import context, locate_prefix_by_name

    from cudaresolve.cli import main

    return main(command_line(argv, context.target_prefix, locate_prefix_by_name))


@plugins.hookimpl
def conda_subcommands() -> Iterator[plugins.CondaSubcommand]:
    yield plugins.CondaSubcommand(
        name="cudaresolve",
        summary="cudaresolve doctor|lock|install ... on the active, -n NAME or -p PREFIX environment",
        action=_subcommand,
    )


def doctor_text(prefix: str) -> Optional[str]:
    """The doctor's report on `prefix`'s Python (the cached path: stats when nothing changed);
    None when the prefix has no Python, or when the host cannot be read (already warned)."""
    python = prefix_python(prefix)
    facts = host()
    if facts is None or not os.path.isfile(python):
        return None
    from cudaresolve.commands.result_cache import doctor_report
    from cudaresolve.env.interpreter import target_for
    from cudaresolve.output.doctor import use_colour

    report = doctor_report(target_for(python=python), facts, os.environ)
    return report.text_colour if use_colour(sys.stdout, os.environ) else report.text


def _after(command: str) -> None:
    """The doctor after conda changed a prefix; on stderr under --json, so conda's JSON stays whole."""
    try:
        from conda.base.context import context

        text = doctor_text(context.target_prefix)
        if text:
            stream = sys.stderr if context.json else sys.stdout
            stream.write(f"cudaresolve doctor after conda {command}:\n{text}")
            stream.flush()
    except Exception as exc:
        warn(f"the doctor after conda {command} did not run", exc)


@plugins.hookimpl
def conda_post_commands() -> Iterator[plugins.CondaPostCommand]:
    yield plugins.CondaPostCommand(name="cudaresolve-doctor", action=_after, run_for=POST_COMMANDS)


def _health(prefix: str, verbose: bool) -> None:
    try:
        if not os.path.isfile(prefix_python(prefix)):
            print(f"cudaresolve: no Python in {prefix}: nothing to check")
            return
        sys.stdout.write(doctor_text(prefix) or "")
    except Exception as exc:
        warn("the doctor did not run", exc)


@plugins.hookimpl
def conda_health_checks() -> Iterator[plugins.CondaHealthCheck]:
    yield plugins.CondaHealthCheck(
        name="cudaresolve",
        action=_health,
        summary="CUDA libraries of the prefix's Python packages: symbols, libraries, archs, driver",
    )
