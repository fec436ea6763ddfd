"""mixed-majors: consumers needing different CUDA runtime majors in one environment (one process
imports both, and two CUDA runtimes do not share contexts, memory or streams)."""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable

from cudaresolve.checks.builds import CudaBuild
from cudaresolve.checks.duplicates import unmangled
from cudaresolve.checks.findings import Finding
from cudaresolve.env.environment import Environment
from cudaresolve.knowledge import components


def check_mixed_majors(env: Environment, builds: Iterable[CudaBuild]) -> list[Finding]:
    """Files linking a cudart of one major, and frameworks built for one, grouped by major."""
    needs: dict[int, set[str]] = defaultdict(set)
    for elf in env.elf_files:
        if elf.facts is None:
            continue
        owner = elf.owner or elf.path
        for needed in elf.facts.needed:
            rows = components.for_soname(unmangled(needed))
            majors = {c.cuda_major for c in rows}
            if len(majors) == 1 and any(c.name == "cudart" for c in rows):
                needs[majors.pop()].add(owner)
    for build in builds:
        if components.needs_build_runtime(build.dist):
            needs[build.cuda.major].add(build.dist)
    if len(needs) < 2:
        return []
    evidence = tuple(f"CUDA {major}: {', '.join(sorted(owners))}" for major, owners in sorted(needs.items()))
    newest = max(needs)
    return [
        Finding(
            "mixed-majors",
            "error",
            "environment",
            f"packages need different CUDA majors ({', '.join(str(m) for m in sorted(needs))}); "
            "two CUDA runtimes in one process do not share contexts, memory or streams",
            evidence,
            f"install the CUDA {newest} builds of: "
            + ", ".join(sorted(set().union(*(owners for m, owners in needs.items() if m != newest)))),
        )
    ]
