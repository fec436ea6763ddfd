"""What a lock is asked for, as one value: the requirements and constraints with their origins,
the hosts, the target interpreter, the index settings and the choices. `cudaresolve lock`,
`install` and `pip install` each build one from their own arguments (commands/), and the lock is
made from it alone (commands/locking.py, then resolve/resolver.py).

Pure data. May import: env/interpreter (Target), host facts, index/ (IndexSettings, TagOverrides, pip's choices),
resolve/reasons.py, resolve/targets.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from cudaresolve.env.interpreter import Target
from cudaresolve.host.facts import HostFacts
from cudaresolve.index.choices import Formats, UpgradeStrategy
from cudaresolve.index.config import IndexSettings
from cudaresolve.index.tags import TagOverrides
from cudaresolve.resolve.reasons import Need
from cudaresolve.resolve.targets import LockTarget


@dataclass(frozen=True)
class Policy:
    """How the lock chooses, beyond the requirements."""

    upgrade: bool = False  # do not keep installed versions
    allow_advisories: tuple[str, ...] = ()  # known-bad releases accepted, by advisory id
    deep: bool = False  # judge every chosen wheel's own ELF files (downloading those the table lacks)
    cpu: bool = False  # CPU-only builds of the CUDA-capable families are wanted (--cpu), even on a GPU host
    # pip's choices (its configuration, then --pre): docs/lock.md, "What the lock takes from pip's configuration"
    pre: bool = False  # pre-releases may be chosen for any requirement
    formats: Formats = field(default_factory=Formats)  # no-binary: nothing fits a name whose wheels pip may not install
    prefer_binary: bool = False  # pip's prefer-binary: any wheel is a better candidate than any sdist
    upgrade_strategy: UpgradeStrategy = UpgradeStrategy.ONLY_IF_NEEDED  # carried: --upgrade replaces every installed version


@dataclass(frozen=True)
class Indexes:
    """Where the lock looks: the command's index settings over pip's configuration and the project's
    [tool.cudaresolve], the wheel tags of the target, and how the cache is used."""

    settings: IndexSettings = field(default_factory=IndexSettings)
    project_dir: Optional[str] = None  # whose pyproject.toml [tool.cudaresolve] is read; None: the current directory
    tags: TagOverrides = field(default_factory=TagOverrides)
    offline: bool = False  # only what the cache holds
    refresh: bool = False  # ignore what was cached before this run
    download_budget: Optional[int] = None  # bytes of whole files one run may download; None: index/limits.py's


@dataclass(frozen=True)
class LockInputs:
    """Everything one lock is made from."""

    requirements: tuple[Need, ...]
    constraints: tuple[Need, ...]
    hosts: tuple[tuple[str, HostFacts], ...]  # (label, facts): the lock must fit every one
    target: Target  # the interpreter: wheel tags, markers and the installed set
    indexes: Indexes = field(default_factory=Indexes)
    policy: Policy = field(default_factory=Policy)
    installed_at: Optional[str] = None  # read the installed set here instead of the target's site-packages (pip --target)
    # Keep the target's installed versions (install, lock --python); False: lock fresh for its tags and
    # markers, as `lock` run by the interpreter cudaresolve itself is installed in must not keep that set.
    keep_installed: bool = True
    # The target is this machine as probed: its own CUDA libraries (a system toolkit ld.so finds) count
    # for a package that loads them undeclared. False for hosts given by flags or files.
    system_libraries: bool = False
    # The machines and Pythons to resolve for, each with its hosts (resolve/targets.py); () is one
    # target: `hosts`, running the target interpreter's own Python.
    targets: tuple[LockTarget, ...] = ()
