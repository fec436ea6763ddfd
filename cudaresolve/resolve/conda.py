"""A conda prefix in a lock: its CUDA libraries are providers pip must not replace.

In a conda prefix, `libnvjitlink`, `cuda-nvrtc`, `nccl` … are conda's: a wheel of the same soname
would sit beside them and win wherever site-packages is searched first (cuda-pathfinder, a wheel's
RPATH), so the two package managers would each think they own the library. The lock therefore
takes the conda package as the installed release of the wheel it stands for (conda's
`libnvjitlink 12.8.93` satisfies `nvidia-nvjitlink-cu12>=12.8`; NVIDIA numbers both from one
release) and sets aside every wheel that would shadow a conda library, unless the user names that
wheel. The prefix's `cuda-version` says which CUDA its packages were chosen for; builds that fit it
are preferred.

May import: env/, knowledge/components, resolve/reasons.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.utils import canonicalize_name

from cudaresolve.env.distributions import Distribution
from cudaresolve.env.environment import Environment
from cudaresolve.knowledge import components
from cudaresolve.resolve.reasons import ShadowsConda


@dataclass(frozen=True)
class CondaProvider:
    """The conda package that provides a wheel's soname in the prefix."""

    package: Distribution  # kind "conda"
    soname: str
    same_component: bool  # the package is that wheel's component for conda (data: components.toml `conda`)

    @property
    def label(self) -> str:
        return self.package.label

    def shadows(self) -> ShadowsConda:
        """Why a wheel of the soname is set aside."""
        return ShadowsConda(self.soname, self.label)


def conda_providers(env: Environment) -> dict[str, CondaProvider]:
    """Wheel name -> the conda package that provides one of its sonames in `env`'s prefix."""
    packages = {d.name: d for d in env.distributions if d.kind == "conda"}
    found: dict[str, CondaProvider] = {}
    for elf in env.elf_files:
        package = packages.get(elf.owner or "")
        if package is None or elf.facts is None or not elf.facts.soname:
            continue
        for row in components.for_soname(elf.facts.soname):
            provider = CondaProvider(package, elf.facts.soname, row.conda == package.name)
            current = found.get(canonicalize_name(row.dist))
            if current is None or (provider.same_component and not current.same_component):
                found[canonicalize_name(row.dist)] = provider
    return found
