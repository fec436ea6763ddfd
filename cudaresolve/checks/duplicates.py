"""duplicate-library: one soname installed by several distributions; whichever loads first wins and
the other copy is skew."""

from __future__ import annotations

import re
from collections import defaultdict

from cudaresolve.checks.findings import UNOWNED, Finding
from cudaresolve.env.environment import Environment

# auditwheel renames vendored libraries to libfoo-<8 hex>.so.N; the soname underneath is libfoo.so.N.
_MANGLED = re.compile(r"^(?P<stem>.+?)-[0-9a-f]{8}(?P<suffix>\.so(?:\.\d+)*)$")


def unmangled(soname: str) -> str:
    """The soname before auditwheel renamed it (libcudart-a1b2c3d4.so.12 -> libcudart.so.12)."""
    match = _MANGLED.match(soname)
    return match.group("stem") + match.group("suffix") if match else soname


def check_duplicate_libraries(env: Environment) -> list[Finding]:
    """One finding per set of distributions sharing sonames; one build vendored twice is not a duplicate."""
    by_soname: dict[str, list[tuple[str, str]]] = defaultdict(list)
    build_ids: dict[str, set] = defaultdict(set)
    for elf in env.elf_files:
        if elf.facts is None or not elf.facts.soname:
            continue
        by_soname[unmangled(elf.facts.soname)].append((elf.owner or UNOWNED, elf.path))
        build_ids[unmangled(elf.facts.soname)].add(elf.facts.build_id)
    # One finding per set of distributions: a package vendoring a whole SDK (triton's CUPTI: five
    # libraries) is one decision for the user, not five.
    groups: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for soname, copies in sorted(by_soname.items()):
        owners = tuple(sorted({owner for owner, _ in copies}))
        if len(owners) < 2:
            continue
        if len(build_ids[soname]) == 1 and None not in build_ids[soname]:
            continue  # one build vendored twice (numpy.libs and scipy.libs): whichever loads, it is the same code
        groups[owners].append(soname)
    findings = []
    for owners, sonames in sorted(groups.items()):
        names = ", ".join(sonames)
        findings.append(
            Finding(
                "duplicate-library",
                "warning",
                names if len(sonames) == 1 else f"{len(sonames)} libraries of {', '.join(owners)}",
                f"{names} {'is' if len(sonames) == 1 else 'are each'} installed by {len(owners)} distributions "
                f"({', '.join(owners)}); a process can load both copies, or the older one first",
                tuple(f"{path} (from {owner})" for soname in sonames for owner, path in sorted(by_soname[soname])),
                "keep one provider: uninstall the distribution you do not need, or pin both to one version",
            )
        )
    return findings
