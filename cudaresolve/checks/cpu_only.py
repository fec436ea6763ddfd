"""A CPU-only build where the host has a GPU: torch's default aarch64 wheels 2.0.0 ... 2.10.0 hold no
torch/lib/libtorch_cuda.so (data/torch.toml), so such a torch never uses the GPU, though the release
rows (x86_64's) name a CUDA for it. The installed wheel's RECORD tells, as the wheel's members tell
the lock, which takes such a build only when asked.

May import: checks/ (builds, findings, subjects), env/, host/ and verdicts/.
"""

from __future__ import annotations

from cudaresolve.checks.builds import cpu_only_default_build
from cudaresolve.checks.findings import Check, Finding, Severity
from cudaresolve.checks.subjects import subject
from cudaresolve.env.environment import Environment
from cudaresolve.host.facts import HostFacts
from cudaresolve.verdicts.rules import cpu_only_on_machine


def check_cpu_only_builds(env: Environment, host: HostFacts) -> list[Finding]:
    """A warning per CPU-only default build installed for a host with a GPU or a driver."""
    machine = env.loader.machine
    return [
        Finding(Check.ENVIRONMENT, Severity.WARNING, subject(env, dist.name), verdict)
        for dist in env.distributions
        if cpu_only_default_build(dist, machine) and (verdict := cpu_only_on_machine(machine, host)) is not None
    ]
