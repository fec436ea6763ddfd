"""The targets of a lock: a host class (machine, tegra) x a Python version. Hosts that share a class
and a Python are resolved together (the lock must fit every one), those the judge cannot tell apart
folded into one (host/fleet.py); each target is resolved alone, with its own wheel tags, marker
environment and requires-python, and the targets' locks are merged.

A target's marker environment starts from the target interpreter's (`--python`) and replaces what
the target decides: `platform_machine`, `python_version` and `python_full_version` (X.Y.0 for a
Python other than the interpreter's own, whose micro is unknown). The implementation stays CPython
(the only one a CUDA wheel is built for); `implementation_version` follows the full version. The
kernel and OS fields (`platform_release`, `sys_platform`, ...) stay the interpreter's: a host file
does not say them, and a Linux host is all a lock is made for.

Pure values and functions. May import: env/interpreter (Target), host facts and host/fleet, errors.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Optional, Sequence

from cudaresolve.env.interpreter import Target
from cudaresolve.errors import UsageError
from cudaresolve.host.facts import HostFacts
from cudaresolve.host.fleet import class_label, fold

PythonVersion = tuple[int, int]  # (3, 12)

_PYTHON = re.compile(r"^(\d)\.(\d{1,2})$")
_GLIBC = re.compile(r"^(\d+)\.(\d+)")


@dataclass(frozen=True)
class HostPythons:
    """One host to lock for, and the Pythons it runs (from the command line or the project's fleet)."""

    label: str
    facts: HostFacts
    pythons: tuple[PythonVersion, ...]
    count: int = 1  # how many hosts the label stands for (a class of nodes, of folded hosts)


@dataclass(frozen=True)
class LockTarget:
    """One resolution of a lock: the hosts of one class that run one Python."""

    machine: str  # "x86_64", "aarch64"
    tegra: bool  # Jetson: its own CUDA, a class apart from server Arm
    python: PythonVersion
    glibc: Optional[tuple[int, int]]  # the oldest glibc of the hosts; None when no host says it
    hosts: tuple[tuple[str, HostFacts], ...]  # (label, facts) of each class of hosts, in the order given
    host_count: int = 0  # how many hosts the classes stand for


def python_version(text: str, where: str) -> PythonVersion:
    """A Python version X.Y given at `where` (an option, a key of a file)."""
    match = _PYTHON.match(text.strip())
    if not match:
        raise UsageError(f"{where}: {text!r} is not a Python version X.Y (e.g. 3.12)")
    return int(match.group(1)), int(match.group(2))


def interpreter_python(interpreter: Target) -> PythonVersion:
    """The interpreter's own Python, X.Y."""
    match = re.match(r"^(\d+)\.(\d+)", interpreter.version or "")
    if not match:
        raise UsageError(f"{interpreter.python or 'the target interpreter'}: no Python version known to lock for (give --python-version)")
    return int(match.group(1)), int(match.group(2))


def glibc_version(facts: HostFacts, label: str) -> Optional[tuple[int, int]]:
    """The host's glibc as (major, minor); None when its facts do not say."""
    if facts.glibc is None:
        return None
    match = _GLIBC.match(facts.glibc.strip())
    if not match:
        raise UsageError(f"{label}: glibc {facts.glibc!r} is not a glibc version (e.g. 2.28)")
    return int(match.group(1)), int(match.group(2))


def lock_targets(hosts: Sequence[HostPythons]) -> tuple[LockTarget, ...]:
    """The targets `hosts` make: one per (machine, tegra, Python), holding every host of that class
    that runs that Python, hosts of the same facts folded into one; ordered by machine, Jetson last,
    then Python."""
    grouped: dict[tuple[str, bool, PythonVersion], list[tuple[str, HostFacts, int]]] = {}
    for host in hosts:
        for python in dict.fromkeys(host.pythons):
            grouped.setdefault((host.facts.machine, host.facts.tegra, python), []).append((host.label, host.facts, host.count))
    targets = []
    for (machine, tegra, python), members in sorted(grouped.items(), key=lambda item: item[0]):
        known = [g for g in (glibc_version(facts, label) for label, facts, _ in members) if g is not None]
        classes = fold(members)
        targets.append(LockTarget(machine, tegra, python, min(known) if known else None,
                                  tuple((class_label(c), c.facts) for c in classes), sum(c.hosts for c in classes)))
    return tuple(targets)


def target_marker(target: LockTarget) -> str:
    """The PEP 508 marker that holds on exactly this target's machine and Python (a Jetson class and a
    server class of one machine share it: markers cannot tell them apart)."""
    major, minor = target.python
    return f'platform_machine == "{target.machine}" and python_version == "{major}.{minor}"'


def runs_installed(target: LockTarget, interpreter: Target) -> bool:
    """Whether the target is the interpreter itself (its machine and Python): only then does the
    installed set count; any other target starts from an empty environment."""
    return target.machine == interpreter.machine and target.python == interpreter_python(interpreter)


def target_interpreter(target: LockTarget, interpreter: Target) -> Target:
    """The interpreter as the target sees it: its machine, version and marker environment replaced."""
    major, minor = target.python
    own = interpreter.version if interpreter_python(interpreter) == target.python and interpreter.version else f"{major}.{minor}.0"
    markers = dict(interpreter.markers)
    markers.update(
        platform_machine=target.machine,
        python_version=f"{major}.{minor}",
        python_full_version=own,
    )
    if own != interpreter.version:  # another Python: CPython's, at X.Y.0
        markers.update(implementation_name="cpython", platform_python_implementation="CPython", implementation_version=own)
    return replace(interpreter, machine=target.machine, version=own, markers=tuple(sorted(markers.items())))
