"""The doctor's checks that judge the environment as a whole: each a pure function over facts.

Checks that follow the loader (symbol skew, missing libraries, shadowing) live in env/linking.py.
"""

from __future__ import annotations

import fnmatch
import re
from collections import defaultdict
from typing import Iterable, Optional

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from cudaresolve.arch import ComputeCapability, Target
from cudaresolve.compat import can_run
from cudaresolve.env.cuda import CudaBuild, component_builds, framework_build
from cudaresolve.env.findings import Finding
from cudaresolve.env.scan import Environment
from cudaresolve.host.facts import HostFacts
from cudaresolve.knowledge import advisories, components, toolkits, torch

# auditwheel renames vendored libraries to libfoo-<8 hex>.so.N; the soname underneath is libfoo.so.N.
_MANGLED = re.compile(r"^(?P<stem>.+?)-[0-9a-f]{8}(?P<suffix>\.so(?:\.\d+)*)$")


def cuda_builds(env: Environment) -> tuple[CudaBuild, ...]:
    """Every installed package whose CUDA build the tables can tell."""
    frameworks = [b for b in (framework_build(d) for d in env.distributions) if b is not None]
    return tuple(frameworks) + component_builds(env.distributions)


# -- driver-floor ---------------------------------------------------------------------------------


def check_driver_floor(env: Environment, builds: Iterable[CudaBuild], host: HostFacts) -> list[Finding]:
    """A package built for a CUDA newer than the driver runs natively or by minor-version compat, or not at all.

    The CUDA wheels a failing package requires fail for the same reason; they are folded into its
    finding as evidence (torch cu130 on driver 550 is one problem, not seventeen).
    """
    driver = host.driver
    if driver.release is None and driver.cuda is None:
        return []
    verdicts = {}
    for build in builds:
        verdict = _driver_verdict(build.cuda, driver.release, driver.cuda)
        if verdict != "native":
            verdicts[build.dist] = (build, verdict)
    errors = {dist for dist, (_, verdict) in verdicts.items() if verdict is None}
    findings = []
    for severity, failing in (("error", errors), ("warning", set(verdicts) - errors)):
        for dist, dependencies in sorted(_fold_into_requirers(env, failing).items()):
            findings.append(_driver_finding(env, verdicts[dist][0], severity, sorted(dependencies), host))
    return findings


def _driver_finding(
    env: Environment, build: CudaBuild, severity: str, dependencies: list[str], host: HostFacts
) -> Finding:
    driver = host.driver
    subject = f"{build.dist} {build.version}"
    have = _describe_driver(host)
    evidence: tuple[str, ...] = (build.evidence, have)
    if dependencies:
        evidence += (f"its CUDA dependencies need that driver too: {', '.join(dependencies)}",)
    if severity == "warning":
        needed = toolkits.get(build.cuda) if "." in build.cuda else None
        return Finding(
            "driver-floor",
            "warning",
            subject,
            f"built for CUDA {build.cuda}, newer than the driver's CUDA {driver.cuda or '?'}: "
            "runs under minor-version compatibility (PTX from the newer toolkit cannot be JIT-compiled)",
            evidence,
            f"upgrade the driver to >= {needed.ga_driver} for native support" if needed else None,
        )
    floor = toolkits.family_floor(int(build.cuda.split(".")[0]))
    return Finding(
        "driver-floor",
        "error",
        subject,
        f"built for CUDA {build.cuda}, which needs a driver >= {floor}; "
        f"{have}: \"CUDA driver version is insufficient for CUDA runtime version\"",
        evidence,
        f"upgrade the driver to >= {floor}, or "
        + (
            _torch_variant_fix(env.distribution(build.dist), host)
            or f"install a build of {build.dist} for CUDA {driver.cuda or 'your driver supports'}"
        ),
    )


def _driver_verdict(cuda: str, release: Optional[str], driver_cuda: Optional[str]) -> Optional[str]:
    """"native", "minor-compat" or None for a build CUDA ("12.8", or just "12") on a driver."""
    if "." not in cuda:
        floor = toolkits.family_floor(int(cuda))
        if release is not None and floor is not None:
            return "native" if Version(release) >= Version(floor) else None
        return "native" if driver_cuda and int(driver_cuda.split(".")[0]) >= int(cuda) else None
    if release is not None:
        return toolkits.driver_support(release, cuda)
    # Only the driver's CUDA version is known (e.g. CONDA_OVERRIDE_CUDA): same major is minor compat.
    want, have = Version(cuda), Version(driver_cuda or "0")
    if have >= want:
        return "native"
    return "minor-compat" if have.major == want.major else None


def _describe_driver(host: HostFacts) -> str:
    driver = host.driver
    parts = [f"driver {driver.release}" if driver.release else "driver release unknown"]
    if driver.cuda:
        parts.append(f"CUDA {driver.cuda}")
    return "host has " + ", ".join(parts)


# -- arch-coverage --------------------------------------------------------------------------------


def check_arch_coverage(env: Environment, host: HostFacts) -> list[Finding]:
    """Every library with device code must have SASS or JIT-able PTX for every visible GPU.

    A library whose whole device code is one entry (libcufftw.so.12: one sm_75 cubin, nvcc's
    default target) beside a library of the same package that runs on the GPU carries a stub, not
    kernels the package needs: it is not judged.
    """
    findings = []
    ccs = sorted({gpu.compute_capability for gpu in host.visible_gpus})
    failures: dict[tuple[str, ComputeCapability], list[tuple[str, str, int]]] = defaultdict(list)
    runs: set[tuple[str, ComputeCapability]] = set()
    for elf in env.elf_files:
        fatbin = elf.facts.fatbin if elf.facts else None
        if fatbin is None or not (fatbin.sass or fatbin.ptx):
            continue
        owner = elf.owners[0] if elf.owners else "(unowned)"
        for cc in ccs:
            verdict = can_run(cc, fatbin.sass, fatbin.ptx, host.driver.release)
            if verdict.runs:
                runs.add((owner, cc))
            else:
                failures[(owner, cc)].append((elf.path, verdict.reason, fatbin.entries))
    for key in list(failures):
        if key in runs:
            failures[key] = [f for f in failures[key] if f[2] != 1]
            if not failures[key]:
                del failures[key]
    folded = _fold_into_requirers(env, {owner for owner, _ in failures})
    for (owner, cc), files in sorted(failures.items()):
        if owner not in folded:
            continue
        dist = env.distribution(owner)
        subject = f"{owner} {dist.version}" if dist else owner
        gpus = ", ".join(f"GPU {g.index if g.index is not None else '?'} {g.name or ''}".strip()
                         for g in host.visible_gpus if g.compute_capability == cc)
        evidence = tuple(f"{path}: {reason}" for path, reason, _ in files[:3])
        if len(files) > 3:
            evidence += (f"... and {len(files) - 3} more libraries of {owner}",)
        dependencies = sorted(d for d in folded[owner] if (d, cc) in failures)
        if dependencies:
            evidence += (f"its CUDA dependencies lack code for {cc} too: {', '.join(dependencies)}",)
        findings.append(
            Finding(
                "arch-coverage",
                "error",
                subject,
                f"no kernel image for compute capability {cc} ({gpus}): "
                f"\"no kernel image is available for execution on the device\"",
                evidence,
                _arch_fix(dist, cc, host),
            )
        )
    return findings


def _fold_into_requirers(env: Environment, failing: set[str]) -> dict[str, set[str]]:
    """Failing packages no other failing package requires -> the failing packages they pull in.

    torch 2.14.1 on a GTX 1080 fails along with the dozen CUDA 13 wheels it requires; the fix is
    torch's variant, so those wheels are evidence of one finding, not findings of their own.
    """
    requires = {d.name: {r.name for r in d.requires} for d in env.distributions}

    def closure(name: str) -> set[str]:
        seen: set[str] = set()
        stack = [name]
        while stack:
            for dep in requires.get(stack.pop(), ()):
                if dep not in seen:
                    seen.add(dep)
                    stack.append(dep)
        return seen

    pulled = {name: closure(name) & failing for name in failing}
    roots = {name for name in failing if not any(name in deps for other, deps in pulled.items() if other != name)}
    return {name: pulled[name] for name in roots}


def _arch_fix(dist, cc: ComputeCapability, host: HostFacts) -> Optional[str]:
    """Name a variant that runs on `cc` with this driver, where the tables know one."""
    variant = _torch_variant_fix(dist, host)
    if variant:
        return variant
    supporting = [t for t in toolkits.known() if any(Target.parse(s).runs_on(cc) for s in t.sass_targets)]
    if supporting:
        return f"use a build made with CUDA <= {supporting[-1].version} (the newest toolkit that still targets {cc})"
    return None


def _torch_variant_fix(dist, host: HostFacts) -> Optional[str]:
    """The newest variant of the installed torch release that this driver and every visible GPU can run."""
    if dist is None or dist.name != "torch":
        return None
    public = dist.version.public
    release = torch.release(public)
    if release is None:
        return None
    driver = host.driver
    for variant in reversed(release.variants):
        if public not in variant.versions or variant.arch_list_for(host.machine) is None:
            continue
        if (driver.release or driver.cuda) and _driver_verdict(variant.cuda, driver.release, driver.cuda) is None:
            continue
        sass, ptx = variant.sass(host.machine), variant.ptx(host.machine)
        if all(can_run(gpu.compute_capability, sass, ptx, driver.release).runs for gpu in host.visible_gpus):
            return (
                f"install the {variant.name} variant: torch=={public}+{variant.name} from the PyTorch "
                f"index ({torch.index_path(variant.name)}), with its matching CUDA wheels"
            )
    return None


# -- mixed-majors ---------------------------------------------------------------------------------


def check_mixed_majors(env: Environment, builds: Iterable[CudaBuild]) -> list[Finding]:
    """Consumers needing different CUDA runtime majors in one environment (one process imports both)."""
    needs: dict[int, set[str]] = defaultdict(set)
    for elf in env.elf_files:
        if elf.facts is None:
            continue
        owner = elf.owners[0] if elf.owners else elf.path
        for needed in elf.facts.needed:
            rows = components.for_soname(_unmangled(needed))
            majors = {c.cuda_major for c in rows}
            if len(majors) == 1 and any(c.name == "cudart" for c in rows):
                needs[majors.pop()].add(owner)
    for build in builds:
        if build.dist in {"torch"} or build.dist.startswith("cupy-cuda"):
            needs[int(build.cuda.split(".")[0])].add(build.dist)
    if len(needs) < 2:
        return []
    evidence = tuple(
        f"CUDA {major}: {', '.join(sorted(owners))}" for major, owners in sorted(needs.items())
    )
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


# -- duplicate-library ----------------------------------------------------------------------------


def check_duplicate_libraries(env: Environment) -> list[Finding]:
    """One soname installed by several distributions: whichever loads first wins, the other is skew."""
    by_soname: dict[str, list[tuple[str, str]]] = defaultdict(list)
    build_ids: dict[str, set] = defaultdict(set)
    for elf in env.elf_files:
        if elf.facts is None or not elf.facts.soname:
            continue
        owner = elf.owners[0] if elf.owners else "(unowned)"
        by_soname[_unmangled(elf.facts.soname)].append((owner, elf.path))
        build_ids[_unmangled(elf.facts.soname)].add(elf.facts.build_id)
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


def _unmangled(soname: str) -> str:
    match = _MANGLED.match(soname)
    return match.group("stem") + match.group("suffix") if match else soname


# -- advisories -----------------------------------------------------------------------------------


def check_advisories(env: Environment, host: HostFacts, builds: Iterable[CudaBuild]) -> list[Finding]:
    """Installed versions that match a known-bad release or combination in data/advisories.toml."""
    installed = {d.name: d for d in env.distributions}
    build_cuda = {b.dist: b.cuda for b in builds}
    findings = []
    for advisory in advisories.load():
        for text in advisory.affects:
            requirement = Requirement(text)
            dist = installed.get(requirement.name)
            if dist is None or not requirement.specifier.contains(dist.version, prereleases=True):
                continue
            if not all(_installed(Requirement(t), installed) for t in advisory.together_with):
                continue
            if any(_installed(Requirement(t), installed) for t in advisory.unless):
                continue
            if not _conditions_hold(advisory, dist, build_cuda.get(dist.name), host):
                continue
            referencing = _referencing(env, advisory.references) if advisory.references else ()
            if advisory.references and not referencing:
                continue
            findings.append(
                Finding(
                    "advisory",
                    "warning",
                    f"{dist.name} {dist.version}",
                    f"known problem {advisory.id}: {advisory.symptom}",
                    tuple(advisory.refs) + referencing,
                    advisory.fix,
                )
            )
    return findings


def _referencing(env: Environment, patterns: Iterable[str]) -> tuple[str, ...]:
    """One line per ELF file that needs (non-weak) a symbol matching one of `patterns`: the file and
    the first such symbol."""
    wanted = []
    for pattern in patterns:
        name, _, version = pattern.partition("@")
        wanted.append((re.compile(fnmatch.translate(name)).match, version or None))
    found = []
    for elf in env.elf_files:
        for symbol in elf.facts.undefined if elf.facts else ():
            if symbol.binding != "WEAK" and any(
                match(symbol.name) and version in (None, symbol.version) for match, version in wanted
            ):
                named = f"{symbol.name}@{symbol.version}" if symbol.version else symbol.name
                found.append(f"{elf.path} references {named}")
                break
    return tuple(found)


def _installed(requirement: Requirement, installed: dict) -> bool:
    dist = installed.get(requirement.name)
    return dist is not None and requirement.specifier.contains(dist.version, prereleases=True)


def _conditions_hold(advisory, dist, cuda: Optional[str], host: HostFacts) -> bool:
    if advisory.cuda is not None and (cuda is None or "." not in cuda or Version(cuda) not in SpecifierSet(advisory.cuda)):
        return False
    if advisory.variants:
        local = dist.version.local or (f"cu{cuda.replace('.', '')}" if cuda and "." in cuda else None)
        if local not in advisory.variants:
            return False
    if advisory.driver is not None:
        if host.driver.release is None or Version(host.driver.release) not in SpecifierSet(advisory.driver):
            return False
    if advisory.gpu is not None:
        spec = SpecifierSet(advisory.gpu)
        if not any(Version(str(g.compute_capability)) in spec for g in host.visible_gpus):
            return False
    if advisory.platform is not None and advisory.platform != host.system:
        return False
    return True
