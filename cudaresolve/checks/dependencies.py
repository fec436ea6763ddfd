"""Following Requires-Dist through an environment, as it applies there (markers, installed extras)."""

from __future__ import annotations

from cudaresolve.env.environment import Environment


def fold_into_requirers(env: Environment, failing: set[str]) -> dict[str, set[str]]:
    """Failing packages no other failing package requires -> the failing packages they pull in.

    torch 2.14.1 on a GTX 1080 fails along with the dozen CUDA 13 wheels it requires; the fix is
    torch's variant, so those wheels are evidence of one finding, not findings of their own. Only
    requirements that apply count: `extra == "cu13"` when that extra is installed, markers true
    for the target interpreter.
    """
    requires = {d.name: env.requires_names(d) for d in env.distributions}

    def closure(name: str) -> set[str]:
        seen: set[str] = set()
        stack = [name]
        while stack:
            for dep in requires.get(stack.pop(), ()):
                if dep not in seen:
                    seen.add(dep)
                    stack.append(dep)
        return seen

    # A package requiring itself with extras (cuda-cccl[cu12] -> cuda-cccl) pulls in only others.
    pulled = {name: (closure(name) & failing) - {name} for name in failing}
    roots = {name for name in failing if not any(name in deps for other, deps in pulled.items() if other != name)}
    return {name: pulled[name] for name in roots}

