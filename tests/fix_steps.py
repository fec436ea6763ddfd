"""A doctor's fix as the pip commands that apply it, built from the fix's value, never from its words.

`pip_arguments(fix)` is what a test (or a tool) runs with `python -m pip`: one argument list per
step, in order. Only pip steps can be applied here; a fix with any other step (a conda command, a
driver upgrade, a loader variable, advice) is refused, so a test cannot pass by applying half a fix.
"""

from __future__ import annotations

from typing import Optional

from cudaresolve.checks.fixes import Fix, PipInstall, PipUninstall, TorchVariant, actions


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
