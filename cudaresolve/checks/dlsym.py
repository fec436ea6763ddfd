"""Functions found with dlsym: cuda-bindings looks nvJitLink's functions up by their plain names at
run time, cuda-core NVRTC's LTO-IR functions (data/compiler_users.toml [dlsym]), so no DT_NEEDED or
versioned symbol shows these needs and the loader's checks cannot see them. nvJitLink 12.0-12.2
export only `__nvJitLink<Fn>_12_X`: cuda.bindings.nvjitlink fails on the first call there
(FunctionNotFoundError) while every ELF need is met. Which release first exports each function by
its plain name is data/compilers.toml's; the installed (or planned) release of the provider's wheel
is judged by it, as versioned symbols are judged by the provider's definitions.

The provider is the installed wheel of its kind (nvidia-nvjitlink-cu12, nvidia-cuda-nvrtc, ...) of
the consumer's CUDA major: its known build's, else the one major of such wheels installed. Not
judged: a consumer whose major is not known, a provider not installed.

May import: checks/ (builds, evidence, findings, fixes, problems, subjects), env/, knowledge/.
"""

from __future__ import annotations

from typing import Optional

from packaging.requirements import Requirement

from cudaresolve.checks import evidence as e
from cudaresolve.checks import fixes as f
from cudaresolve.checks.builds import CudaBuild
from cudaresolve.checks.findings import Check, Finding, Severity
from cudaresolve.checks.problems import DlsymFunctionsMissing
from cudaresolve.checks.subjects import subject
from cudaresolve.env.distributions import Distribution
from cudaresolve.env.environment import Environment
from cudaresolve.knowledge import compiler_users, compilers


def check_dlsym_needs(env: Environment, builds: tuple[CudaBuild, ...]) -> list[Finding]:
    """One finding per consumer, need and provider release that lacks a function of the need: an
    error where the call fails, a warning where the consumer falls back. The subject is the
    provider's wheel: a newer release of it is the fix."""
    built = {build.dist: build for build in builds}
    findings: list[Finding] = []
    for dist in env.distributions:
        if dist.kind == "conda":
            continue
        for need in compiler_users.dlsym_needs(dist.name, str(dist.version)):
            provider = _provider(env, need.provider, built.get(dist.name))
            if provider is None:
                continue
            missing = tuple(fn for fn in need.functions if not compilers.exports(need.provider, fn, str(provider.version)))
            if not missing:
                continue
            minimum = need.min_release
            findings.append(Finding(
                Check.SYMBOL_SKEW, Severity.ERROR if need.missing == "error" else Severity.WARNING,
                subject(env, provider.name),
                DlsymFunctionsMissing(dist.name, dist.version, need.feature, need.provider, provider.name,
                                      str(provider.version), missing, minimum, need.missing == "fallback"),
                (e.Said(need.source, "data/compiler_users.toml"),) + ((e.Said(need.note),) if need.note else ()),
                f.PipInstall((Requirement(f"{provider.name}>={minimum}"),)),
            ))
    return findings


def _provider(env: Environment, kind: str, build: Optional[CudaBuild]) -> Optional[Distribution]:
    """The installed wheel of compiler `kind` the consumer loads: of its build's CUDA major, else of
    the one major such wheels are installed for; None when none is, or the major is not known."""
    names = {release.dist for release in compilers.releases(kind)}
    wheels = [d for d in env.distributions if d.name in names]
    majors = {build.cuda.major} if build is not None else {d.version.release[0] for d in wheels}
    if len(majors) != 1:
        return None
    [major] = majors
    return next((d for d in wheels if d.version.release[0] == major), None)
