"""Which wheels fit the target: its tags, most preferred first, computed with `packaging.tags`.

The target interpreter's tags are computed here from what it told us (version, implementation,
machine, free-threading) and this host's platform tags, not by running code in the target, which
may not have `packaging`. A target of another machine type, or an implementation other than
CPython, needs the explicit options (`--python-version`, `--platform`, `--implementation`,
`--abi`), which work like pip download's: an explicit manylinux platform also admits the older
manylinux tags of its architecture. A lock target's host (its machine and glibc) implies such a
platform: `host_platforms`.
"""

from __future__ import annotations

import platform
import re
from dataclasses import dataclass
from typing import Optional

from packaging import tags
from packaging.tags import Tag

from cudaresolve.env.interpreter import Target
from cudaresolve.errors import UsageError

_MANYLINUX = re.compile(r"^manylinux_(\d+)_(\d+)_(\w+)$")
_LEGACY = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}  # PEP 513/571/599
_LEGACY_MACHINES = {"manylinux2014": ("x86_64", "i686", "aarch64", "ppc64le", "s390x", "armv7l", "ppc64"),
                    "manylinux2010": ("x86_64", "i686"), "manylinux1": ("x86_64", "i686")}


@dataclass(frozen=True)
class TagOverrides:
    """pip download's options for another target; None or () means "as the target interpreter"."""

    python_version: Optional[str] = None  # "3.11" or "311"
    platforms: tuple[str, ...] = ()
    implementation: Optional[str] = None  # "cp", "pp", "py"
    abis: tuple[str, ...] = ()


def target_tags(target: Target, overrides: TagOverrides = TagOverrides()) -> tuple[Tag, ...]:
    """The tags a wheel may carry to install on the target, most preferred first."""
    version = _version(overrides.python_version) if overrides.python_version else _version(target.version or "")
    implementation = overrides.implementation or {"cpython": "cp", "pypy": "pp"}.get(target.implementation or "")
    if overrides.platforms:
        platforms = [p for given in overrides.platforms for p in expand_platform(given)]
    else:
        if target.machine and target.machine != platform.machine():
            raise UsageError(
                f"the target is a {target.machine} interpreter on this {platform.machine()} host: give --platform"
            )
        platforms = list(tags.platform_tags())
    if implementation == "cp":
        abis = list(overrides.abis) or [f"cp{version[0]}{version[1]}{'t' if target.free_threaded else ''}"]
        found = list(tags.cpython_tags(version, abis, platforms))
    elif implementation and overrides.abis:
        interpreter = f"{implementation}{version[0]}{version[1]}"
        found = list(tags.generic_tags(interpreter, list(overrides.abis), platforms))
    elif implementation:
        raise UsageError(f"give --abi with --implementation {implementation} (e.g. the ABI tag of its wheels)")
    else:
        raise UsageError(
            f"cannot compute wheel tags for a {target.implementation or 'unknown'} interpreter: give --implementation and --abi"
        )
    found += tags.compatible_tags(version, f"{implementation}{version[0]}{version[1]}", platforms)
    return tuple(dict.fromkeys(found))


def host_platforms(machine: str, glibc: Optional[tuple[int, int]]) -> tuple[str, ...]:
    """The `--platform` a host of `machine` with `glibc` implies: its manylinux tag, which admits the
    older ones as pip expands it (glibc 2.28 on aarch64: manylinux_2_28_aarch64 and older). () when
    this machine's own tags serve: the same machine, with a glibc unknown or not older than ours.
    Another machine whose glibc is unknown gets manylinux2014 (glibc 2.17), the oldest that CUDA
    wheels are built for."""
    if machine == platform.machine():
        own = _own_glibc()
        if glibc is None or own is not None and own <= glibc:
            return ()
    if glibc is None:
        return (f"manylinux2014_{machine}",)
    return (f"manylinux_{glibc[0]}_{glibc[1]}_{machine}",)


def _own_glibc() -> Optional[tuple[int, int]]:
    """This machine's glibc, as its newest manylinux platform tag says it."""
    found = [(int(m.group(1)), int(m.group(2))) for t in tags.platform_tags() if (m := _MANYLINUX.match(t))]
    return max(found) if found else None


def _version(text: str) -> tuple[int, int]:
    match = re.match(r"^(\d)\.?(\d+)", text.strip())
    if not match:
        raise UsageError(f"not a Python version: {text!r} (give e.g. 3.11)")
    return int(match.group(1)), int(match.group(2))


def expand_platform(given: str) -> list[str]:
    """A manylinux platform and every older manylinux tag of its architecture, as pip expands it
    (the legacy names only where their PEP defines them: manylinux2010 is x86 only)."""
    legacy = next((glibc for prefix, glibc in _LEGACY.items() if given.startswith(prefix + "_")), None)
    if legacy is not None:
        arch = given.split("_", 1)[1]
        major, minor = legacy
    else:
        match = _MANYLINUX.match(given)
        if not match:
            return [given]
        major, minor, arch = int(match.group(1)), int(match.group(2)), match.group(3)
    expanded = []
    for glibc_minor in range(minor, 4, -1):
        expanded.append(f"manylinux_{major}_{glibc_minor}_{arch}")
        expanded += [f"{name}_{arch}" for name, (_, m) in _LEGACY.items() if m == glibc_minor and arch in _LEGACY_MACHINES[name]]
    return expanded
