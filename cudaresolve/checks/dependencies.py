"""Following Requires-Dist through an environment, as it applies there (markers, installed extras).

May import: env/ and knowledge/.
"""

from __future__ import annotations

from typing import AbstractSet, Optional, TypeVar

from cudaresolve.env.environment import Environment
from cudaresolve.knowledge import components, torch

_Name = TypeVar("_Name", bound=Optional[str])  # a distribution's name; None: files no distribution owns


def fold_into_requirers(env: Environment, failing: AbstractSet[_Name]) -> dict[_Name, set[str]]:
    """Failing packages no other failing package requires -> the failing packages they pull in.

    torch 2.14.1 on a GTX 1080 fails along with the dozen CUDA 13 wheels it requires; the fix is
    torch's variant, so those wheels are evidence of one finding, not findings of their own. Only
    requirements that apply count: `extra == "cu13"` when that extra is installed, markers true
    for the target interpreter.
    """
    requires = {d.name: env.requires_names(d) for d in env.distributions}
    pulled: dict[Optional[str], set[str]] = {
        name: _closure(requires, name) & failing if name is not None else set() for name in failing}
    head = torch.distribution()  # the distribution whose CUDA variants data/torch.toml lists
    if head in failing:
        # torch's own fix is its variant: it is never folded into a package built on it (xformers), and
        # the family members whose builds follow its variant (torchvision) are folded into it, their
        # fix being the same move
        own = pulled[head] | {head}
        for other in failing:
            if other is not None and other != head and head in pulled[other]:
                pulled[other] -= own
        for member in following_torch(failing):
            pulled[head] |= {member} | pulled.pop(member)
    roots = {name for name in pulled if not any(name in deps for other, deps in pulled.items() if other != name)}
    return {name: pulled[name] for name in failing if name in roots}


def sole_consumers(env: Environment, roots: AbstractSet[_Name], failing: AbstractSet[_Name]) -> dict[str, list[str]]:
    """NVIDIA component wheels of `roots` that one installed package alone requires, two or more, that
    package neither `failing` nor a component itself -> their names: the CUDA 13 wheels
    cuda-toolkit[all] pulls in failing on a Pascal GPU are one cause, the toolkit's release."""
    held: dict[str, list[str]] = {}
    for name in sorted(n for n in roots if n is not None and components.for_dist(n)):
        requirers = [d.name for d in env.distributions if name in env.requires_names(d)]
        if len(requirers) == 1 and requirers[0] not in failing and not components.for_dist(requirers[0]):
            held.setdefault(requirers[0], []).append(name)
    return {consumer: names for consumer, names in held.items() if len(names) >= 2}


def following_torch(names: AbstractSet[Optional[str]]) -> set[str]:
    """Those of `names` whose builds follow torch's variant (data/torch.toml's labelled family), torch aside."""
    return {name for name in names if name is not None and name != torch.distribution() and name in torch.labelled_family()}


def pulled_in(env: Environment, name: str) -> set[str]:
    """The installed distributions `name` requires here, directly or through one another."""
    requires = {d.name: env.requires_names(d) for d in env.distributions}
    return _closure(requires, name) & {d.name for d in env.distributions}


def _closure(requires: dict[str, set[str]], name: str) -> set[str]:
    """What `name` requires, transitively; never itself (cuda-cccl[cu12] requires cuda-cccl, and a
    package requiring itself with extras pulls in only others)."""
    seen: set[str] = set()
    stack = [name]
    while stack:
        for dep in requires.get(stack.pop(), ()):
            if dep not in seen:
                seen.add(dep)
                stack.append(dep)
    return seen - {name}
