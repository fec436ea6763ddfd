"""dlsym needs (data/compiler_users.toml [dlsym]): cuda-bindings finds nvJitLink's functions by
their plain names at run time, cuda-core NVRTC's LTO-IR functions; nvJitLink 12.0-12.2 export only
`__nvJitLink<Fn>_12_X` (data/compilers.toml), so every ELF need is met and the first call fails.
Planned environments as plain data (names and versions are all the rule reads), and the lock on the
hermetic CUDA index."""

from __future__ import annotations

import pytest
import test_lock_scenarios
from test_checks_compilers import host
from test_checks_planned import dist, planned

from cudaresolve.checks import judge
from cudaresolve.checks.findings import exit_code
from cudaresolve.checks.problems import DlsymFunctionsMissing
from cudaresolve.output.findings import shown

lock_cli = test_lock_scenarios.lock_cli  # a fixture of the lock's tests
NVJITLINK_FUNCTIONS = ("nvJitLinkCreate", "nvJitLinkAddData", "nvJitLinkComplete", "nvJitLinkGetLinkedCubinSize",
                       "nvJitLinkGetLinkedCubin", "nvJitLinkDestroy")


def dlsym_findings(*dists):
    findings = judge(planned(*dists), host("550.144.03", "8.6")).findings
    return [f for f in findings if isinstance(f.problem, DlsymFunctionsMissing)], findings


def test_cuda_bindings_and_core_with_nvjitlink_12_0_is_an_error_naming_the_functions_and_the_release():
    """cuda-bindings 12.9.10 with nvJitLink 12.0.140: an error naming the plain-named functions and
    12.3.52, the first release exporting them; cuda-core's nvJitLinkVersion lookup falls back to
    the driver's linker, a warning. Both name the nvJitLink wheel, whose newer release is the fix."""
    found, findings = dlsym_findings(dist("cuda-bindings", "12.9.10"), dist("cuda-core", "1.2.2"),
                                     dist("nvidia-nvjitlink-cu12", "12.0.140"))
    assert exit_code(findings, strict=False) == 2
    error, warning = sorted(found, key=lambda f: f.severity != "error")
    assert error.problem == DlsymFunctionsMissing("cuda-bindings", error.problem.consumer_version, "cuda.bindings.nvjitlink",
                                                  "nvjitlink", "nvidia-nvjitlink-cu12", "12.0.140", NVJITLINK_FUNCTIONS,
                                                  "12.3.52", False)
    text = shown(error)
    assert (text.check, text.severity, text.subject) == ("symbol-skew", "error", "nvidia-nvjitlink-cu12 12.0.140")
    assert text.message == (
        "cuda-bindings 12.9.10 finds " + ", ".join(NVJITLINK_FUNCTIONS) + " with dlsym at run time "
        "(cuda.bindings.nvjitlink); nvJitLink 12.0.140 (nvidia-nvjitlink-cu12) does not export them, "
        "nvidia-nvjitlink-cu12 12.3.52 is the first release that does: the first call fails")
    assert text.fix == 'pip install "nvidia-nvjitlink-cu12>=12.3.52"'
    assert (warning.severity, warning.problem.consumer, warning.problem.functions, warning.problem.fallback) == (
        "warning", "cuda-core", ("nvJitLinkVersion",), True)


def test_cuda_bindings_and_core_with_nvjitlink_12_4_is_clean():
    found, _ = dlsym_findings(dist("cuda-bindings", "12.9.10"), dist("cuda-core", "1.2.2"),
                              dist("nvidia-nvjitlink-cu12", "12.4.127"))
    assert found == []


def test_no_provider_or_two_majors_is_not_judged():
    """Without nvJitLink nothing is found by dlsym to judge; with wheels of two majors and no known
    build of the consumer, which one it loads is not known."""
    assert dlsym_findings(dist("cuda-bindings", "12.9.10"))[0] == []
    assert dlsym_findings(dist("cuda-bindings", "12.9.10"), dist("nvidia-nvjitlink-cu12", "12.0.140"),
                          dist("nvidia-nvjitlink", "13.0.88"))[0] == []


@pytest.mark.usefixtures("hermetic")
def test_lock_refuses_an_nvjitlink_cuda_bindings_cannot_find_its_functions_in(lock_cli):
    """Before: `lock cuda-bindings==12.9.10 'nvidia-nvjitlink-cu12<12.4'` locked nvJitLink 12.1.105
    (its metadata allows it, and cuda-bindings has no DT_NEEDED on it). Now the judge refuses it for
    the functions cuda-bindings finds with dlsym; below 12.5 the lock takes 12.4.127."""
    run = lock_cli(["cuda-bindings==12.9.10", "nvidia-nvjitlink-cu12<12.4"], "--driver", "550.144.03", "--gpu", "8.6")
    assert run.code == 2, run.err
    assert ("nvidia-nvjitlink-cu12 12.1.105: symbol-skew: cuda-bindings 12.9.10 finds nvJitLinkCreate" in run.err), run.err
    capped = lock_cli(["cuda-bindings==12.9.10", "nvidia-nvjitlink-cu12<12.5"], "--driver", "550.144.03", "--gpu", "8.6",
                      name="b")
    assert capped.code == 0, capped.err
    assert capped.versions["nvidia-nvjitlink-cu12"] == "12.4.127"
