"""driver-floor: a package built for a CUDA newer than the driver runs natively, by minor-version
compatibility, or not at all ("CUDA driver version is insufficient for CUDA runtime version")."""

from __future__ import annotations

from typing import Iterable

from cudaresolve.knowledge import toolkits
from cudaresolve.checks.builds import CudaBuild
from cudaresolve.checks.dependencies import fold_into_requirers
from cudaresolve.checks.findings import Finding, Severity
from cudaresolve.checks.fixes import torch_variant_fix
from cudaresolve.compat import driver_verdict
from cudaresolve.env.environment import Environment
from cudaresolve.host.facts import HostFacts


def check_driver_floor(env: Environment, builds: Iterable[CudaBuild], host: HostFacts) -> list[Finding]:
    """One finding per failing package; the CUDA wheels it requires fail for the same reason and are
    folded into its finding as evidence (torch cu130 on driver 550 is one problem, not seventeen)."""
    driver = host.driver
    if driver.release is None and driver.cuda is None:
        return []
    verdicts = {}
    for build in builds:
        verdict = driver_verdict(build.cuda, driver.release, driver.cuda)
        if verdict != "native":
            verdicts[build.dist] = (build, verdict)
    errors = {dist for dist, (_, verdict) in verdicts.items() if verdict is None}
    findings = []
    severity: Severity
    for severity, failing in (("error", errors), ("warning", set(verdicts) - errors)):
        for dist, dependencies in sorted(fold_into_requirers(env, failing).items()):
            findings.append(_finding(env, verdicts[dist][0], severity, sorted(dependencies), host))
    return findings


def _finding(env: Environment, build: CudaBuild, severity: Severity, dependencies: list[str], host: HostFacts) -> Finding:
    driver = host.driver
    subject = f"{build.dist} {build.version}"
    have = _describe_driver(host)
    evidence: tuple[str, ...] = (build.evidence, have)
    if dependencies:
        evidence += (f"its CUDA dependencies need that driver too: {', '.join(dependencies)}",)
    if severity == "warning":
        needed = toolkits.get(build.cuda) if build.cuda.minor is not None else None
        return Finding(
            "driver-floor",
            "warning",
            subject,
            f"built for CUDA {build.cuda}, newer than the driver's CUDA {driver.cuda or '?'}: "
            "runs under minor-version compatibility (PTX from the newer toolkit cannot be JIT-compiled)",
            evidence,
            f"upgrade the driver to >= {needed.ga_driver} for native support" if needed else None,
        )
    floor = toolkits.family_floor(build.cuda)
    return Finding(
        "driver-floor",
        "error",
        subject,
        f"built for CUDA {build.cuda}, which needs a driver >= {floor}; "
        f"{have}: \"CUDA driver version is insufficient for CUDA runtime version\"",
        evidence,
        f"upgrade the driver to >= {floor}, or "
        + (
            torch_variant_fix(env.distribution(build.dist), host)
            or f"install a build of {build.dist} for CUDA {driver.cuda or 'your driver supports'}"
        ),
    )


def _describe_driver(host: HostFacts) -> str:
    driver = host.driver
    parts = [f"driver {driver.release}" if driver.release else "driver release unknown"]
    if driver.cuda:
        parts.append(f"CUDA {driver.cuda}")
    return "host has " + ", ".join(parts)
