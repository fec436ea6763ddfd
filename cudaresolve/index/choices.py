"""What pip's configuration says about which releases and files may be installed, beyond where the
indexes are: `constraint` files, `pre`, `no-binary` / `only-binary`, `prefer-binary` and
`upgrade-strategy`, as pip's install command reads them.

The files, sections and order are index/config.py's (`pip_items`): [global], then [install], then
the `PIP_*` variables, a later one replacing an earlier one; except `no-binary` and `only-binary`,
whose every setting is applied in that order, each one editing the sets the earlier ones left
(pip's FormatControl: `:all:`, `:none:` and names, comma-separated). `constraint` is a
whitespace-separated list of files, as pip splits it. A value pip refuses is refused here too.

What the lock does with each is in docs/lock.md, "What the lock takes from pip's configuration".

Pure functions of plain data. May import: packaging, errors, index/config.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence

from packaging.utils import canonicalize_name

from cudaresolve.errors import UsageError
from cudaresolve.index.config import PipFile, pip_bool, pip_items

ALL = ":all:"
NONE = ":none:"


class UpgradeStrategy(enum.Enum):
    """pip's --upgrade-strategy: what --upgrade does to the dependencies of what is asked for."""

    ONLY_IF_NEEDED = "only-if-needed"
    EAGER = "eager"


@dataclass(frozen=True)
class ConstraintFile:
    """A constraints file pip's configuration names."""

    path: str  # as configured: pip opens a relative one from the current directory
    via: str  # the setting that names it: "PIP_CONSTRAINT", "/etc/pip.conf [global]"


@dataclass(frozen=True)
class Formats:
    """pip's --no-binary and --only-binary: canonical names, or `:all:`."""

    no_binary: frozenset[str] = frozenset()
    only_binary: frozenset[str] = frozenset()
    no_binary_via: Optional[str] = None  # the last setting that changed `no_binary`
    only_binary_via: Optional[str] = None  # the last setting that changed `only_binary`

    def wheels_refused(self, name: str) -> bool:
        """Whether pip may not install a wheel of `name` (pip's get_allowed_formats lacks "binary")."""
        name = canonicalize_name(name)
        if name in self.only_binary:
            return False
        if name in self.no_binary:
            return True
        return ALL not in self.only_binary and ALL in self.no_binary

    def sdists_refused(self, name: str) -> bool:
        """Whether pip may not build an sdist of `name` (pip's get_allowed_formats lacks "source")."""
        name = canonicalize_name(name)
        if name in self.no_binary:
            return False
        if name in self.only_binary:
            return True
        return ALL in self.only_binary

    def applied(self, text: str, *, no_binary: bool, via: str) -> "Formats":
        """These formats after one `no-binary` (or `only-binary`) value, as pip's handle_mutual_excludes edits them."""
        target, other = (set(self.no_binary), set(self.only_binary)) if no_binary else (set(self.only_binary), set(self.no_binary))
        if text.startswith("-"):
            raise UsageError(f"{'no' if no_binary else 'only'}-binary: {text!r} (from {via}): a name, :all: or :none: is needed")
        names = text.split(",")
        while ALL in names:
            other.clear()
            target.clear()
            target.add(ALL)
            del names[: names.index(ALL) + 1]
            if NONE not in names:
                names = []
        for name in names:
            if name == NONE:
                target.clear()
                continue
            key = canonicalize_name(name)
            other.discard(key)
            target.add(key)
        no, only = (target, other) if no_binary else (other, target)
        no_changed = no_binary or frozenset(no) != self.no_binary
        only_changed = not no_binary or frozenset(only) != self.only_binary
        return Formats(frozenset(no), frozenset(only), via if no_changed else self.no_binary_via,
                       via if only_changed else self.only_binary_via)


@dataclass(frozen=True)
class PipChoices:
    """What pip's configuration chooses for an install, besides the indexes."""

    constraints: tuple[ConstraintFile, ...] = ()
    pre: bool = False
    formats: Formats = field(default_factory=Formats)
    prefer_binary: bool = False
    upgrade_strategy: UpgradeStrategy = UpgradeStrategy.ONLY_IF_NEEDED
    origins: tuple[tuple[str, str], ...] = ()  # (pip's option name, where its value came from)


def pip_choices(files: Sequence[PipFile], environ: Mapping[str, str], command: str = "install") -> PipChoices:
    """pip's choices for `command` from its configuration `files` and the `PIP_*` variables of `environ`."""
    constraints: tuple[ConstraintFile, ...] = ()
    pre = prefer_binary = False
    formats = Formats()
    strategy = UpgradeStrategy.ONLY_IF_NEEDED
    origins: dict[str, str] = {}
    for name, text, origin in pip_items(files, environ, command):
        if name == "constraint":
            constraints = tuple(ConstraintFile(path, origin) for path in text.split())
        elif name == "pre":
            pre = pip_bool(name, text, origin)
        elif name == "prefer-binary":
            prefer_binary = pip_bool(name, text, origin)
        elif name in ("no-binary", "only-binary"):
            formats = formats.applied(text, no_binary=name == "no-binary", via=origin)
        elif name == "upgrade-strategy":
            try:
                strategy = UpgradeStrategy(text)
            except ValueError:
                known = ", ".join(s.value for s in UpgradeStrategy)
                raise UsageError(f"upgrade-strategy: {text!r} (from {origin}) is not one of {known}") from None
        else:
            continue
        origins[name] = origin
    return PipChoices(constraints, pre, formats, prefer_binary, strategy, tuple(sorted(origins.items())))
