"""The host-fit rules the lock applies to a release, applied to the installed one: a server-Arm
(SBSA) CUDA build on a Jetson (tegra) host, and a release below its package floor
(data/package_floors.toml). Both are errors, as the lock refuses both (verdicts/rules.py).

May import: checks/ (builds, evidence, findings, fixes, subjects), env/, host/ and verdicts/.
"""

from __future__ import annotations

from packaging.utils import NormalizedName

from cudaresolve.checks.builds import component_builds, framework_build
from cudaresolve.checks.evidence import BuiltWith, HostDriver
from cudaresolve.checks.findings import Check, Finding, Severity
from cudaresolve.checks.fixes import DriverUpgrade
from cudaresolve.checks.subjects import Subject
from cudaresolve.env.environment import Environment
from cudaresolve.host.facts import HostFacts
from cudaresolve.verdicts.rules import below_package_floor, sbsa_on_jetson


def check_sbsa_on_jetson(env: Environment, host: HostFacts) -> list[Finding]:
    """An error per installed CUDA build that is a server-Arm (SBSA) build, on a Jetson host. Only the
    builds the tables name (a framework's variant, an NVIDIA component wheel) are judged, as the lock
    judges them: a JetPack build (torch +nv24.08) is none of them."""
    if not host.tegra:
        return []
    builds = [b for d in env.distributions if (b := framework_build(d, env.loader.machine)) is not None]
    builds += component_builds(env.distributions)
    return [
        Finding(Check.ENVIRONMENT, Severity.ERROR, Subject(distribution=NormalizedName(build.dist), version=dist.version),
                verdict, (BuiltWith(build.evidence),))
        for build in builds
        if (verdict := sbsa_on_jetson(build.dist, build.cuda, host)) is not None
        and (dist := env.distribution(build.dist)) is not None
    ]


def check_package_floors(env: Environment, host: HostFacts) -> list[Finding]:
    """An error per installed release whose package floor is above the host's driver release."""
    return [
        Finding(Check.DRIVER_FLOOR, Severity.ERROR, Subject(distribution=NormalizedName(dist.name), version=dist.version),
                verdict, (HostDriver(host.driver.release, host.driver.cuda),), DriverUpgrade(verdict.floor))
        for dist in env.distributions
        if (verdict := below_package_floor(dist.name, dist.version, host.driver)) is not None
    ]
