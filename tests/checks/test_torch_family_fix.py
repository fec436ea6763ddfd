"""torch's variant fix for the whole family: torch with torchvision from plain pip (the CUDA 13.0
default build) on a driver or GPU it cannot run is one finding about torch, torchvision folded in, and
its fix names torch's and torchvision's builds of one variant from one index path. Applied with real
pip from the PyTorch-style index on 127.0.0.1 (tests/fake_cuda_index.py), the finding is gone and no
error is left; torch moved alone would leave torchvision on CUDA 13.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import hermetic_environ
from fix_steps import pip_arguments
from packaging.version import Version
from test_doctor_checks import host

from cudaresolve.checks import evidence as e
from cudaresolve.checks import fixes as f
from cudaresolve.checks.findings import Check, Severity
from cudaresolve.commands.diagnosing import examine
from cudaresolve.env.interpreter import target_for_python
from cudaresolve.output.findings import shown

TORCH, VISION = "2.14.1", "0.29.1"
FAMILY_CU126 = (f"install the cu126 variant: torch=={TORCH}+cu126 torchvision=={VISION}+cu126 from the PyTorch index "
                "(whl/cu126), with their matching CUDA wheels")


def pip(python: Path, *arguments: str) -> None:
    done = subprocess.run([str(python), "-m", "pip", *arguments, "--no-cache-dir"], capture_output=True, text=True,
                          env=hermetic_environ())
    assert done.returncode == 0, done.stdout + done.stderr


def installed(python: Path) -> dict[str, str]:
    done = subprocess.run([str(python), "-m", "pip", "list", "--format=json"], capture_output=True, text=True,
                          check=True, env=hermetic_environ())
    return {row["name"]: row["version"] for row in json.loads(done.stdout)}


@pytest.fixture
def family_python(cuda_index, tmp_path, venv_with_pip) -> Path:
    """torch 2.14.1 and torchvision 0.29.1 as plain pip installs them from the regular index."""
    root = venv_with_pip(tmp_path / "venv")
    python = root / "bin" / "python"
    pip(python, "install", f"torch=={TORCH}", f"torchvision=={VISION}", "--index-url", cuda_index.index_url)
    return python


def errors(python: Path, facts, tmp_path: Path) -> list:
    found = examine(target_for_python(str(python)), facts, {"CUDARESOLVE_CACHE_DIR": str(tmp_path / "cache")}).findings
    return [finding for finding in found if finding.severity == Severity.ERROR]


@pytest.mark.parametrize("facts, check", [
    (host("575.57.08", "8.6"), Check.DRIVER_FLOOR),
    (host("580.65.06", "6.1"), Check.ARCH_COVERAGE),
], ids=["driver-575", "gtx-1080"])
def test_the_family_variant_fix_converges(family_python, cuda_index, tmp_path, facts, check):
    assert installed(family_python)["torchvision"] == VISION
    [error] = errors(family_python, facts, tmp_path)
    assert (error.check, str(error.subject.distribution)) == (check, "torch")
    assert any(isinstance(item, e.FamilyFailsToo) and item.names == ("torchvision",) for item in error.evidence)
    fix = error.fix.options[-1] if isinstance(error.fix, f.Alternatives) else error.fix  # not the driver upgrade
    uninstall, variant = f.actions(fix)
    assert variant == f.TorchVariant(Version(TORCH), "cu126", "whl/cu126", (("torchvision", Version(VISION)),))
    # pip would leave the CUDA 13 wheels torch pulled in beside the CUDA 12 ones: they go first
    assert isinstance(uninstall, f.PipUninstall) and {"nvidia-cuda-runtime", "nvidia-cublas"} <= set(uninstall.names)
    assert not any(name.endswith("-cu12") for name in uninstall.names)
    printed = shown(error).fix
    assert f"pip uninstall {' '.join(uninstall.names)} (CUDA 13 wheels), then {FAMILY_CU126}" in printed

    for arguments in pip_arguments(fix, cuda_index.torch_index_base):
        pip(family_python, *arguments)
    now = installed(family_python)
    assert (now["torch"], now["torchvision"]) == (f"{TORCH}+cu126", f"{VISION}+cu126")
    assert [shown(finding) for finding in errors(family_python, facts, tmp_path)] == []


@pytest.fixture
def xformers_python(cuda_index, tmp_path, venv_with_pip) -> Path:
    """torch 2.14.1 (CUDA 13.0) and xformers 0.0.35 (a CUDA 12 build) as plain pip installs them."""
    root = venv_with_pip(tmp_path / "venv")
    python = root / "bin" / "python"
    pip(python, "install", f"torch=={TORCH}", "xformers==0.0.35", "--index-url", cuda_index.index_url)
    return python


def by_check(found: list) -> dict[tuple[str, str], object]:
    return {(finding.check.value, str(finding.subject.distribution or finding.subject.scope.value)): finding
            for finding in found}


def cu126(fix) -> f.TorchVariant:
    """The torch variant a fix installs (after uninstalling the CUDA 13 wheels)."""
    steps = list(f.actions(fix))
    assert isinstance(steps[0], f.PipUninstall) and "nvidia-cuda-runtime" in steps[0].names
    assert steps[1:] == [f.TorchVariant(Version(TORCH), "cu126", "whl/cu126")]
    return steps[1]


def test_xformers_beside_cuda_13_torch_moves_to_torchs_cuda_12_variant(xformers_python, cuda_index, tmp_path):
    """xformers' _C.so links libcudart.so.12 beside torch's CUDA 13. Swapping nvidia-cuda-runtime for the
    CUDA 12 wheel (the fix printed before) removes torch's libcudart.so.13; torch's cu126 variant puts
    the whole process on CUDA 12, and xformers (pinning torch==2.14.1) stays as it is."""
    facts = host("575.57.08", "8.6")
    found = by_check(errors(xformers_python, facts, tmp_path))
    assert set(found) == {("driver-floor", "torch"), ("mixed-majors", "environment"), ("mixed-majors", "xformers")}
    environment, extension = found[("mixed-majors", "environment")], found[("mixed-majors", "xformers")]
    cu126(environment.fix)
    assert isinstance(extension.fix, f.Alternatives)
    cu126(extension.fix.options[0])
    assert extension.fix.options[1:] == (f.BuildOf("xformers", 13),)
    assert "in place of" not in shown(extension).fix

    for arguments in pip_arguments(environment.fix, cuda_index.torch_index_base):
        pip(xformers_python, *arguments)
    assert (installed(xformers_python)["torch"], installed(xformers_python)["xformers"]) == (f"{TORCH}+cu126", "0.0.35")
    assert [shown(finding) for finding in errors(xformers_python, facts, tmp_path)] == []


def test_on_a_gtx_1080_torch_keeps_its_own_finding_and_fix_beside_xformers(xformers_python, cuda_index, tmp_path):
    """On compute capability 6.1 both lack code: torch is not folded into xformers (which requires it),
    so its cu126 fix is kept; the environment's two majors move to CUDA 12 through that variant
    rather than to "the CUDA 13 builds of xformers" (no release, no index). After it, xformers'
    own missing sm_61 is the one error left, as it is on the real wheel."""
    facts = host("580.65.06", "6.1")
    found = by_check(errors(xformers_python, facts, tmp_path))
    assert {("arch-coverage", "torch"), ("arch-coverage", "xformers"), ("mixed-majors", "environment")} <= set(found)
    torch_error, xformers_error = found[("arch-coverage", "torch")], found[("arch-coverage", "xformers")]
    cu126(torch_error.fix)
    cu126(found[("mixed-majors", "environment")].fix)
    assert not any(isinstance(item, e.DependenciesFailToo) and "torch" in item.names for item in xformers_error.evidence)

    for arguments in pip_arguments(torch_error.fix, cuda_index.torch_index_base):
        pip(xformers_python, *arguments)
    assert [(finding.check.value, str(finding.subject.distribution)) for finding in errors(xformers_python, facts, tmp_path)] == [
        ("arch-coverage", "xformers")]
