"""run-time-compiler, the pair: a package that hands one compiler's output to nvJitLink
(data/compiler_users.toml [links]: cuda-core, cuda-cccl, numba-cuda) needs an nvJitLink release that
reads it. The survey's miss: cuda-core[cu12] installs NVRTC 12.9 (PTX ISA 8.8, LTO-IR of 12.9), then
`pip install nvidia-nvjitlink-cu12==12.4.127` (links PTX up to 8.4, LTO-IR up to 12.4) is accepted
because cuda-bindings asks only `>=12.3`. Planned environments as plain data, the lock on the
hermetic index, the printed fix applied with real pip, and the survey's real venv where present."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import test_lock_scenarios
from fix_steps import offline_pip
from index_server import make_wheel
from test_checks_compilers import compiler_findings, host
from test_checks_planned import dist

from cudaresolve.checks.findings import exit_code
from cudaresolve.checks.problems import LinkerCannotRead
from cudaresolve.output.findings import shown
from cudaresolve.versions import CudaVersion

lock_cli = test_lock_scenarios.lock_cli  # a fixture of the lock's tests
RTX_3090 = ("575.57.08", "8.6")
SURVEY = Path("/work/survey-stacks/cuda-core-cu12---then-nvJitLink-12.4")


def cuda_core(nvrtc: str, nvjitlink: str):
    """cuda-core[cu12] as pip leaves it (cuda-bindings 12.9.10[all]), with the two compilers given."""
    return (dist("cuda-core", "1.2.2"), dist("cuda-bindings", "12.9.10"), dist("nvidia-cuda-nvrtc-cu12", nvrtc),
            dist("nvidia-nvjitlink-cu12", nvjitlink))


def test_cuda_core_with_nvrtc_12_9_and_nvjitlink_12_4_is_one_error_naming_both():
    found, findings = compiler_findings(*cuda_core("12.9.86", "12.4.127"), on=host(*RTX_3090))
    assert exit_code(findings, strict=False) == 2
    [finding] = found
    assert finding.problem == LinkerCannotRead(
        "cuda-core", finding.problem.consumer_version, "nvrtc", "nvidia-cuda-nvrtc-cu12", "12.9.86",
        "nvidia-nvjitlink-cu12", "12.4.127", ("ptx", "ltoir"), "8.8", "8.4", CudaVersion(12, 9), CudaVersion(12, 4))
    text = shown(finding)
    assert (text.severity, text.subject) == ("error", "nvidia-cuda-nvrtc-cu12 12.9.86")
    assert text.message == (
        "cuda-core 1.2.2 links what NVRTC 12.9.86 writes with nvJitLink 12.4.127, which cannot read it: PTX ISA 8.8 "
        "(it links up to 8.4: \"NVJITLINK_ERROR_PTX_COMPILE\") and LTO-IR of CUDA 12.9 (it reads LTO-IR up to its "
        "own CUDA 12.4: \"may need newer version of nvJitLink library\"); the link fails at its first kernel")
    assert text.fix == ('pip install "nvidia-nvjitlink-cu12>=12.9" (reads what NVRTC 12.9.86 writes), or pip install '
                        '"nvidia-cuda-nvrtc-cu12==12.4.127" (whose output nvJitLink 12.4.127 reads)')


def test_a_cuda_13_nvjitlink_fix_stays_in_its_major():
    """CUDA 13's wheel names carry no major: the nvJitLink floor gets its major's ceiling."""
    found, _ = compiler_findings(dist("cuda-core", "1.2.2"), dist("cuda-bindings", "13.5.0"),
                                 dist("nvidia-cuda-nvrtc", "13.2.86"), dist("nvidia-nvjitlink", "13.0.88"),
                                 on=host("580.65.06", "8.6"))
    [finding] = found
    assert shown(finding).fix == ('pip install "nvidia-nvjitlink<14,>=13.2" (reads what NVRTC 13.2.86 writes), or pip '
                                  'install "nvidia-cuda-nvrtc==13.0.88" (whose output nvJitLink 13.0.88 reads)')


@pytest.mark.parametrize("nvrtc, nvjitlink", [
    ("12.4.127", "12.4.127"),  # one CUDA minor
    ("12.3.107", "12.4.127"),  # an older compiler: nvJitLink reads older LTO-IR and PTX
    ("12.9.86", "12.9.86"),    # the fix's pair
    ("12.9.86", "12.1.105"),   # no nvJitLinkVersion: cuda-core links with the driver (the dlsym row says so)
])
def test_pairs_nvjitlink_reads_are_clean(nvrtc, nvjitlink):
    found, _ = compiler_findings(*cuda_core(nvrtc, nvjitlink), on=host(*RTX_3090))
    assert [f for f in found if isinstance(f.problem, LinkerCannotRead)] == []


def test_cccl_hands_nvjitlink_ltoir_only():
    """cuda-cccl compiles with -dlto: its LTO-IR of CUDA 12.6 is too new for nvJitLink 12.5, whose PTX
    ISA (8.5) NVRTC 12.6 shares — so the finding names LTO-IR alone."""
    found, _ = compiler_findings(dist("cuda-cccl", "1.2.1"), dist("cuda-bindings", "12.9.10"),
                                 dist("nvidia-cuda-nvrtc-cu12", "12.6.85"), dist("nvidia-nvjitlink-cu12", "12.5.82"),
                                 on=host(*RTX_3090))
    [finding] = found
    assert (finding.problem.consumer, finding.problem.inputs) == ("cuda-cccl", ("ltoir",))
    assert shown(finding).fix.startswith('pip install "nvidia-nvjitlink-cu12>=12.6" (reads what NVRTC 12.6.85 writes)')


def test_numba_cuda_hands_nvjitlink_nvvm_ptx():
    """numba-cuda >= 0.16 links NVVM's PTX with nvJitLink when it exports nvJitLinkVersion: NVVM
    12.9 (nvidia-cuda-nvcc-cu12) writes ISA 8.8, nvJitLink 12.4 links up to 8.4."""
    numba = (dist("numba-cuda", "0.30.4"), dist("nvidia-cuda-nvcc-cu12", "12.9.86"))
    found, _ = compiler_findings(*numba, dist("nvidia-nvjitlink-cu12", "12.4.127"), on=host(*RTX_3090))
    [finding] = found
    assert (finding.problem.kind, finding.problem.compiler, finding.problem.inputs) == (
        "nvvm", "nvidia-cuda-nvcc-cu12", ("ptx",))
    assert compiler_findings(*numba, dist("nvidia-nvjitlink-cu12", "12.9.86"), on=host(*RTX_3090))[0] == []


# -- the lock: the same rule on the planned environment (tests/fake_cuda_index.py) -------------------


@pytest.mark.usefixtures("hermetic")
def test_lock_keeps_a_pinned_nvjitlink_and_takes_an_nvrtc_it_reads(lock_cli):
    """cuda-core[cu12] with nvJitLink 12.4.127 asked for: the lock does not pair it with the newest
    NVRTC (12.9.86, which cuda-bindings[all] admits) but takes 12.4.127, and says why 12.9.86 was
    passed over. Unpinned, both are the newest; both pinned apart, refused naming the rule."""
    flags = ("--driver", RTX_3090[0], "--gpu", RTX_3090[1])
    run = lock_cli(["cuda-core[cu12]", "nvidia-nvjitlink-cu12==12.4.127"], *flags)
    assert run.code == 0, run.err
    assert (run.versions["nvidia-cuda-nvrtc-cu12"], run.versions["nvidia-nvjitlink-cu12"]) == ("12.4.127", "12.4.127")
    [decision] = [d for d in run.lock.decisions if d.name == "nvidia-cuda-nvrtc-cu12"]
    [passed_over] = [r.evidence for r in decision.rejected if str(r.candidate.version) == "12.9.86"]
    assert (passed_over.rule.value, passed_over.check, passed_over.problem) == ("judge", "run-time-compiler",
                                                                              "LinkerCannotRead")
    unpinned = lock_cli(["cuda-core[cu12]"], *flags, name="b")
    assert unpinned.code == 0, unpinned.err
    assert (unpinned.versions["nvidia-cuda-nvrtc-cu12"], unpinned.versions["nvidia-nvjitlink-cu12"]) == ("12.9.86", "12.9.86")
    forced = lock_cli(["cuda-core[cu12]", "nvidia-cuda-nvrtc-cu12==12.9.86", "nvidia-nvjitlink-cu12==12.4.127"], *flags,
                      name="c")
    assert forced.code == 2, forced.err
    assert "run-time-compiler" in forced.err and "nvJitLink 12.4.127" in forced.err, forced.err


# -- the printed fix, applied with real pip ------------------------------------------------------------


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> Path:
    """Metadata-only wheels of the survey's distributions (names and versions are what the rule reads)."""
    found = tmp_path_factory.mktemp("compiler-pairs")
    for name, version, requires in [
        ("cuda-core", "1.2.2", ()), ("cuda-bindings", "12.9.10", ("nvidia-nvjitlink-cu12>=12.3",)),
        ("nvidia-cuda-nvrtc-cu12", "12.9.86", ()), ("nvidia-cuda-nvrtc-cu12", "12.4.127", ()),
        ("nvidia-nvjitlink-cu12", "12.4.127", ()), ("nvidia-nvjitlink-cu12", "12.9.86", ()),
    ]:
        filename, data = make_wheel(name, version, requires=requires, files={"nvidia/__init__.py": b""})
        (found / filename).write_bytes(data)
    return found



def doctor(python: Path, cache: Path) -> tuple[int, dict[str, Any]]:
    done = subprocess.run([sys.executable, "-m", "cudaresolve", "doctor", "--python", str(python), "--json", "--no-judge-fixes",
                           "--driver", RTX_3090[0], "--gpu", RTX_3090[1]],
                          capture_output=True, text=True, env={**os.environ, "CUDARESOLVE_CACHE_DIR": str(cache)})
    assert done.returncode in (0, 1, 2), done.stderr
    return done.returncode, json.loads(done.stdout)


def pair_findings(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in report["findings"] if f["problem"]["type"] == "linker-cannot-read"]


@pytest.mark.parametrize("option", [0, 1], ids=["newer-nvjitlink", "older-nvrtc"])
def test_either_printed_fix_converges_with_real_pip(wheels, tmp_path, option, venv_with_pip):
    root = venv_with_pip(tmp_path / "venv")
    python = root / "bin" / "python"
    offline_pip(python, wheels, ["install", "cuda-core==1.2.2", "cuda-bindings==12.9.10", "nvidia-cuda-nvrtc-cu12==12.9.86",
                         "nvidia-nvjitlink-cu12==12.9.86"])
    offline_pip(python, wheels, ["install", "nvidia-nvjitlink-cu12==12.4.127"])  # pip is content: >=12.3
    status, report = doctor(python, tmp_path / "cache")
    [finding] = pair_findings(report)
    assert status == 2 and finding["severity"] == "error"
    alternatives = finding["remedy"]
    assert alternatives["type"] == "alternatives"
    chosen = alternatives["options"][option]["fix"]
    assert chosen["type"] == "pip-install"
    offline_pip(python, wheels, ["install", *chosen["options"], *chosen["requirements"]])

    status, after = doctor(python, tmp_path / "cache")
    assert pair_findings(after) == [] and [f for f in after["findings"] if f["severity"] == "error"] == []
    assert status == 0


# -- the survey's venv (read-only), where this machine has it ------------------------------------------


@pytest.mark.skipif(not (SURVEY / "bin" / "python").exists(), reason="the survey's cuda-core venv is not here")
def test_the_survey_venv_is_an_error_and_nvjitlink_there_refuses_nvrtcs_ptx(tmp_path):
    """The doctor's verdict and the oracle (no GPU needed): NVRTC 12.9.86 of that venv writes
    `.version 8.8` and its nvJitLink 12.4.127 fails nvJitLinkAddData with NVJITLINK_ERROR_PTX_COMPILE."""
    status, report = doctor(SURVEY / "bin" / "python", tmp_path / "cache")
    [finding] = pair_findings(report)
    assert status == 2
    assert (finding["problem"]["release"], finding["problem"]["linker_release"]) == ("12.9.86", "12.4.127")

    site = next((SURVEY / "lib").glob("python3.*/site-packages"))
    nvrtc = ctypes.CDLL(str(site / "nvidia/cuda_nvrtc/lib/libnvrtc.so.12"))
    program = ctypes.c_void_p()
    assert nvrtc.nvrtcCreateProgram(ctypes.byref(program), b'extern "C" __global__ void k(int *a) { a[0] = 1; }',
                                    b"k.cu", 0, None, None) == 0
    options = (ctypes.c_char_p * 2)(b"-arch=compute_80", b"-rdc=true")
    assert nvrtc.nvrtcCompileProgram(program, 2, options) == 0
    size = ctypes.c_size_t()
    nvrtc.nvrtcGetPTXSize(program, ctypes.byref(size))
    ptx = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetPTX(program, ptx)
    assert b"\n.version 8.8\n" in ptx.raw

    nvjitlink = ctypes.CDLL(str(site / "nvidia/nvjitlink/lib/libnvJitLink.so.12"))
    handle = ctypes.c_void_p()
    assert nvjitlink.nvJitLinkCreate(ctypes.byref(handle), 1, (ctypes.c_char_p * 1)(b"-arch=sm_80")) == 0
    NVJITLINK_INPUT_PTX, NVJITLINK_ERROR_PTX_COMPILE = 2, 4
    result = nvjitlink.nvJitLinkAddData(handle, NVJITLINK_INPUT_PTX, ptx.raw, ctypes.c_size_t(len(ptx.raw)), b"k")
    nvjitlink.nvJitLinkDestroy(ctypes.byref(handle))
    assert result == NVJITLINK_ERROR_PTX_COMPILE
