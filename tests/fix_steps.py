"""A doctor's fix as the pip commands that apply it, built from the fix's value, never from its words.

`pip_arguments(fix)` is what a test (or a tool) runs with `python -m pip`: one argument list per
step, in order. Only pip steps can be applied here; a fix with any other step (a conda command, a
driver upgrade, a loader variable, advice) is refused, so a test cannot pass by applying half a fix.

`already_satisfied(fix, installed)` finds the `pip install` a fix offers that the environment meets
already: such a fix changes nothing, and no test should accept one.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Iterable, Mapping, Optional

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from cudaresolve.checks.findings import Finding
from cudaresolve.checks.fixes import (
    Alternatives,
    Each,
    Explained,
    Fix,
    OrElse,
    PipInstall,
    PipUninstall,
    Steps,
    TorchVariant,
    Unchecked,
    WithInstall,
    actions,
)
from cudaresolve.env.environment import Environment


def pip_arguments(fix: Fix, torch_index_base: Optional[str] = None) -> list[list[str]]:
    """[["uninstall", "-y", ...], ["install", ...]]: the pip commands of `fix`, taking the first of
    any alternatives. A PipInstall that stands in for other distributions uninstalls them first. A
    torch variant installs its requirements from its index path under `torch_index_base` (the PyTorch
    index the test serves), as the PyTorch install instructions do (`--index-url`)."""
    commands: list[list[str]] = []
    for step in actions(fix):
        if isinstance(step, TorchVariant) and torch_index_base is not None:
            commands.append(["install", *(str(r) for r in step.requirements), "--index-url",
                             f"{torch_index_base.rstrip('/')}/{step.index_path}"])
            continue
        if isinstance(step, PipUninstall):
            commands.append(["uninstall", "-y", *step.names])
        elif isinstance(step, PipInstall):
            if step.replaces:
                commands.append(["uninstall", "-y", *step.replaces])
            commands.append(["install", *step.options, *(str(requirement) for requirement in step.requirements)])
        else:
            raise ValueError(f"not a pip step: {step!r}")
    if not commands:
        raise ValueError(f"nothing to apply in {fix!r}")
    return commands


CHANGING = {"--upgrade", "-U", "--force-reinstall"}  # pip options that change what is met already


def already_satisfied(fix: Fix, installed: Mapping[str, tuple[Version, frozenset[str]]]) -> list[PipInstall]:
    """The `pip install` steps anywhere in `fix` (every alternative, not only the first) whose
    requirements the environment meets already: applying one changes nothing. `installed` maps a
    canonical name to its version and installed extras. A step that upgrades or reinstalls, stands
    in for other distributions, or follows the uninstall of a name it installs is not one of them."""
    found: list[PipInstall] = []

    def walk(fix: Fix, uninstalled: frozenset[str]) -> None:
        if isinstance(fix, (Explained, WithInstall, Unchecked)):
            walk(fix.fix, uninstalled)
        elif isinstance(fix, Alternatives):
            for option in fix.options:
                walk(option, uninstalled)
        elif isinstance(fix, OrElse):
            walk(fix.first, uninstalled)
            walk(fix.second, uninstalled)
        elif isinstance(fix, (Steps, Each)):
            gone = set(uninstalled)
            for step in fix.steps if isinstance(fix, Steps) else fix.fixes:
                walk(step, frozenset(gone))
                if isinstance(fix, Steps):
                    gone |= {name for action in actions(step) if isinstance(action, PipUninstall) for name in action.names}
        elif isinstance(fix, PipInstall) and not fix.replaces and not set(fix.options) & CHANGING:
            if all(_met(requirement, installed, uninstalled) for requirement in fix.requirements):
                found.append(fix)

    walk(fix, frozenset())
    return found


def _met(requirement: Requirement, installed: Mapping[str, tuple[Version, frozenset[str]]], uninstalled: frozenset[str]) -> bool:
    name = canonicalize_name(requirement.name)
    if name in uninstalled or name not in installed or requirement.url:
        return False
    version, extras = installed[name]
    return (requirement.specifier.contains(version, prereleases=True)
            and {canonicalize_name(extra) for extra in requirement.extras} <= extras)


def satisfied_fixes(findings: Iterable[Finding], environment: Environment) -> list[tuple[Finding, PipInstall]]:
    """Each finding whose fix offers a `pip install` the environment's distributions meet already."""
    installed = {dist.name: (dist.version, dist.extras) for dist in environment.distributions if dist.kind == "python"}
    return [(finding, step) for finding in findings if finding.fix is not None
            for step in already_satisfied(finding.fix, installed)]


def offline_pip(python: Path, wheels: Path, arguments: list[str]) -> None:
    """A venv's pip, offline: the wheels in the --find-links directory `wheels` only, no configuration,
    no cache (how the tests that apply a fix install its steps)."""
    offline = ["--no-index", "--find-links", str(wheels)] if arguments[0] == "install" else []
    done = subprocess.run([str(python), "-m", "pip", *arguments, *offline, "--disable-pip-version-check",
                           "--no-cache-dir", "--isolated"], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
