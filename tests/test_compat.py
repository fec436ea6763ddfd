"""can_run: device code against a GPU and a driver, with the arch lists taken from the torch table;
its verdict as output/ words it."""

from __future__ import annotations

from cudaresolve.arch import ComputeCapability, PtxTarget
from cudaresolve.compat import can_run
from cudaresolve.knowledge import torch
from cudaresolve.output.findings import render_verdict
from cudaresolve.versions import DriverRelease

GTX_1080 = ComputeCapability(6, 1)
RTX_5090 = ComputeCapability(12, 0)
H100 = ComputeCapability(9, 0)
B200 = ComputeCapability(10, 0)


def torch_code(version: str):
    """(sass, ptx) of an official torch wheel, from the knowledge table."""
    variant = torch.variant(version)
    assert variant is not None, version
    return variant.sass(), variant.ptx()


def test_gtx_1080_cannot_run_torch_cu130():
    sass, ptx = torch_code("2.14.1+cu130")
    verdict = can_run(GTX_1080, sass, ptx, driver=DriverRelease.parse("580.95.05"))
    assert not verdict.runs and verdict.via is None
    assert "no SASS for compute capability 6.1" in render_verdict(verdict)
    assert "compute_120" in render_verdict(verdict)  # what the wheel does have


def test_gtx_1080_runs_torch_cu126_via_sm_60():
    sass, ptx = torch_code("2.14.1+cu126")
    verdict = can_run(GTX_1080, sass, ptx, driver=DriverRelease.parse("580.95.05"))
    assert (verdict.runs, verdict.via, verdict.target) == (True, "sass", "sm_60")


def test_rtx_5090_cannot_run_torch_2_6_cu124():
    sass, ptx = torch_code("2.6.0+cu124")
    assert ptx == ()
    verdict = can_run(RTX_5090, sass, ptx, driver=DriverRelease.parse("570.124.06"))
    assert not verdict.runs
    assert "sm_90" in render_verdict(verdict)


def test_rtx_5090_runs_torch_2_8_cu128():
    sass, ptx = torch_code("2.8.0+cu128")
    verdict = can_run(RTX_5090, sass, ptx, driver=DriverRelease.parse("570.124.06"))
    assert (verdict.runs, verdict.via, verdict.target) == (True, "sass", "sm_120")


def test_arch_specific_sass_runs_only_on_its_exact_capability():
    h100 = can_run(H100, ["sm_90a"])
    assert (h100.runs, h100.via, h100.target) == (True, "sass", "sm_90a")
    b200 = can_run(B200, ["sm_90a"])
    assert not b200.runs and "sm_90a" in render_verdict(b200)


# numba-cuda#163: PTX `.version 8.7` (CUDA 12.8) on a 12.4-era driver whose JIT knows 8.4.
def test_ptx_newer_than_the_driver_does_not_run():
    verdict = can_run(ComputeCapability.parse("8.6"), ptx=[PtxTarget("compute_86", "8.7")], driver=DriverRelease.parse("550.144.03"))
    assert not verdict.runs
    assert "ISA 8.7" in render_verdict(verdict) and ">= 570.26" in render_verdict(verdict)
    assert "CUDA_ERROR_UNSUPPORTED_PTX_VERSION" in render_verdict(verdict)


def test_same_ptx_on_a_new_enough_driver_runs_via_ptx():
    verdict = can_run(ComputeCapability.parse("8.6"), ptx=[PtxTarget("compute_86", "8.7")], driver=DriverRelease.parse("570.124.06"))
    assert (verdict.runs, verdict.via, verdict.target) == (True, "ptx", "compute_86")
    assert str(verdict.needs_driver) == "570.26"


def test_torch_ptx_fallback_follows_the_driver():
    """A capability newer than every SASS in torch cu130 falls back to its compute_120 PTX (ISA 9.0)."""
    sass, ptx = torch_code("2.14.1+cu130")
    future = ComputeCapability(13, 0)
    old = can_run(future, sass, ptx, driver=DriverRelease.parse("575.57.08"))
    assert not old.runs and "ISA 9.0" in render_verdict(old) and ">= 580.65.06" in render_verdict(old)
    new = can_run(future, sass, ptx, driver=DriverRelease.parse("580.95.05"))
    assert (new.runs, new.via, new.target, new.needs_driver) == (True, "ptx", "compute_120", DriverRelease.parse("580.65.06"))


def test_unknown_driver_takes_the_ptx_path_and_states_its_need():
    verdict = can_run(ComputeCapability.parse("8.9"), ptx=[("compute_80", "8.5")])
    assert (verdict.runs, verdict.via, str(verdict.needs_driver)) == (True, "ptx", "555.42.02")


def test_ptx_newer_than_every_known_toolkit():
    verdict = can_run(ComputeCapability.parse("9.0"), ptx=[("compute_90", "9.9")], driver=DriverRelease.parse("615.10"))
    assert not verdict.runs and "newer than every toolkit" in render_verdict(verdict)
