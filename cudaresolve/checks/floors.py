"""build-floor: an installed CUDA library wheel below the release a consumer's metadata requires.

JAX's CUDA plugin, XLA (under JAX and TensorFlow) and torch refuse at load time a cuDNN (cuBLAS,
cuFFT, cuSPARSE ...) older than the one they were built against ("Loaded runtime CuDNN library:
9.5.1 but source was compiled with: 9.8.0"), and write that floor in their Requires-Dist, often
behind an extra (`jax-cuda12-plugin[with-cuda]`: `nvidia-cudnn-cu12>=9.8,<10`). A second
`pip install` that downgrades the shared wheel to another package's pin leaves the consumer below
its floor. The libraries judged are data/components.toml's [build_floors]; the provider is the
installed wheel of that library (the consumer finds it by path or preload, not by DT_NEEDED, so the
wheel, not a loaded file, is what is judged). Only the lower side is judged: a release above a
consumer's upper bound still loads.

Which extras are active: installers record none, so `Distribution.extras` holds an extra only when
every one of its requirements is installed in a version it admits (env.environment.installed_extras,
the lock's rule) -- which this check's finding breaks. Here an extra also counts as active when each
of its requirements (whose marker holds) names an installed distribution and at least one of them
is met: all named, not any, because the CUDA wheels an extra pulls in are shared (torch installs
cuDNN and cuBLAS too), so one of them present says little; one met besides, because an extra whose
only requirement is the library below the floor looks the same whether it was asked for or not
(jax-cuda12-plugin installed plain beside cuDNN 9.5), and the lock then treats it as not asked for
too. A planned environment's extras (asked for in the lock) are active as they are.

The fix is the consumer's range, unless the newest release of it in the wheel-facts table lacks
device code for the host's GPUs while an older one in the range has it (cuDNN 9.28 has no sm_61,
9.10 has): then that release, or pip's pick from the range trades this error for no kernel image.

May import: checks/ (findings, fixes, arch_coverage), env/, host/ and knowledge/; the findings are
values, output/ words them.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Iterator, Optional

from packaging.requirements import Requirement
from packaging.specifiers import Specifier
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import InvalidVersion, Version

from cudaresolve.checks.arch_coverage import runs_on_host
from cudaresolve.checks.findings import Check, Finding, Severity
from cudaresolve.checks.fixes import BuiltAgainst, ConsumersRange, Explained, Fix, PipInstall
from cudaresolve.checks.problems import BelowBuildFloor
from cudaresolve.checks.subjects import Subject
from cudaresolve.env.distributions import Distribution
from cudaresolve.env.environment import Environment, extras_named
from cudaresolve.host.facts import HostFacts
from cudaresolve.knowledge import components, wheel_facts

_LOWER = (">=", ">", "==", "~=")  # the operators that set a floor


def check_build_floors(env: Environment, host: Optional[HostFacts] = None) -> list[Finding]:
    """For each consumer and each CUDA library wheel its applicable requirements name: an error when
    the installed release is below the requirement's floor."""
    findings = []
    for consumer in env.distributions:
        for extra, requirement in applicable_requirements(env, consumer):
            provider = env.distribution(canonicalize_name(requirement.name))
            if provider is None or provider.name == consumer.name:
                continue  # not installed: not a floor (a missing library is the loader's finding)
            library = next((c.name for c in components.for_dist(provider.name, str(provider.version))
                            if components.checks_build_floor(c.name)), None)
            floor = below_floor(requirement, provider.version)
            if library is None or floor is None:
                continue
            wanted = Requirement(f"{provider.name}{requirement.specifier}")  # the consumer's range, no marker
            findings.append(
                Finding(
                    Check.BUILD_FLOOR, Severity.ERROR,
                    Subject(distribution=NormalizedName(consumer.name), version=consumer.version),
                    BelowBuildFloor(library, NormalizedName(provider.name), provider.version, extra, wanted, floor),
                    (),
                    in_range_that_runs(env, wanted, ConsumersRange(consumer.name, consumer.version, extra), host),
                )
            )
    judged = {(f.subject.distribution, f.problem.provider) for f in findings if isinstance(f.problem, BelowBuildFloor)}
    return findings + [f for f in recorded_floors(env)
                       if isinstance(f.problem, BelowBuildFloor) and (f.subject.distribution, f.problem.provider) not in judged]


def recorded_floors(env: Environment) -> list[Finding]:
    """For each consumer whose build record (env.build_records) names the CUDA release and a
    library's release it was compiled against: an error for an installed wheel of that library, of
    that CUDA major, below it. The fix is the consumer's own range on it raised to the floor."""
    findings = []
    for consumer in env.distributions:
        fields = env.build_records.get(consumer.name)
        row = components.build_record(consumer.name, consumer.version) if fields else None
        if fields is None or row is None:
            continue
        cuda = _release(fields.get(row.cuda, ""))
        for library, name in sorted(row.floors.items()):
            floor = _release(fields.get(name, ""))
            if cuda is None or floor is None:
                continue
            for wheel in sorted({c.dist for c in components.for_component(library, cuda.release[0])}):
                provider = env.distribution(canonicalize_name(wheel))
                if provider is None or provider.version >= floor:
                    continue
                own = next((r.specifier for _, r in applicable_requirements(env, consumer)
                            if canonicalize_name(r.name) == provider.name), None)
                wanted = Requirement(f"{provider.name}{','.join(filter(None, (str(own or ''), f'>={floor}')))}")
                findings.append(
                    Finding(
                        Check.BUILD_FLOOR, Severity.ERROR,
                        Subject(distribution=NormalizedName(consumer.name), version=consumer.version),
                        BelowBuildFloor(library, NormalizedName(provider.name), provider.version, None, wanted, floor,
                                        (row.file, name, fields[name])),
                        (),
                        Explained(PipInstall((wanted,)), BuiltAgainst(consumer.name, consumer.version, row.file)),
                    )
                )
    return findings


def in_range_that_runs(env: Environment, wanted: Requirement, why: ConsumersRange, host: Optional[HostFacts]) -> Fix:
    """`pip install` of the consumer's range; where the table's newest release in it has no device
    code for the host's GPUs but an older one in it has, that release instead."""
    ranged = Explained(PipInstall((wanted,)), why)
    if host is None or not host.visible_gpus:
        return ranged
    admitted = [w for w in wheel_facts.releases(wanted.name, host.machine)
                if wanted.specifier.contains(w.version, prereleases=True)]
    if not admitted or runs_on_host(env, admitted[0], host):
        return ranged
    chosen = next((w for w in admitted[1:] if runs_on_host(env, w, host)), None)
    if chosen is None:
        return ranged
    ccs = tuple(sorted({gpu.compute_capability for gpu in host.visible_gpus}))
    return Explained(PipInstall((Requirement(f"{chosen.name}=={chosen.version}"),)), replace(why, runs_on=ccs))


def _release(text: str) -> Optional[Version]:
    """A recorded release ("12.5.1", "9"), or None for anything that is not a plain release."""
    try:
        version = Version(text)
    except ValueError:  # InvalidVersion, or a number past int()'s 4,300 digits
        return None
    return version if str(version) == text and not (version.pre or version.post or version.dev or version.local) else None


def applicable_requirements(env: Environment, dist: Distribution) -> Iterator[tuple[Optional[str], Requirement]]:
    """(extra, requirement) for each Requires-Dist of `dist` that applies here: its marker holds for the
    target with no extra (extra None), or with one of the active extras (see the module's docstring)."""
    markers = env.marker_environment
    active = dist.extras | present_extras(env, dist)
    for requirement in dist.requires:
        if requirement.marker is None or requirement.marker.evaluate({**markers, "extra": ""}):
            yield None, requirement
            continue
        extra = next((e for e in sorted(extras_named((requirement,)) & active)
                      if requirement.marker.evaluate({**markers, "extra": e})), None)
        if extra is not None:
            yield extra, requirement


def present_extras(env: Environment, dist: Distribution) -> frozenset[str]:
    """The extras of `dist` whose every requirement (where its marker holds) names an installed
    distribution, at least one of them in a version it admits."""
    markers = env.marker_environment
    installed = {d.name: d.version for d in env.distributions}
    needs: dict[str, list[Requirement]] = {}
    for requirement in dist.requires:
        if requirement.marker is None or requirement.marker.evaluate({**markers, "extra": ""}):
            continue  # required without an extra
        for extra in extras_named((requirement,)):
            needed = needs.setdefault(extra, [])
            if requirement.marker.evaluate({**markers, "extra": extra}):
                needed.append(requirement)
    return frozenset(
        extra for extra, needed in needs.items()
        if needed and all(canonicalize_name(r.name) in installed for r in needed)
        and any(r.specifier.contains(installed[canonicalize_name(r.name)], prereleases=True) for r in needed)
    )


def below_floor(requirement: Requirement, installed: Version) -> Optional[Version]:
    """The floor of `requirement` that `installed` is below (`>=9.8` and 9.5.1 -> 9.8), or None:
    the release meets every lower bound (an upper bound it misses does not stop it loading)."""
    for spec in requirement.specifier:
        if spec.operator not in _LOWER or _meets(spec, installed):
            continue
        try:
            floor = Version(spec.version.removesuffix(".*"))
        except InvalidVersion:
            continue
        if installed < floor or (spec.operator == ">" and installed <= floor):
            return floor
    return None


def _meets(spec: Specifier, installed: Version) -> bool:
    return spec.contains(installed, prereleases=True)
