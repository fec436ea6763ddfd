"""run-time-compiler: packages that compile kernels at run time (data/compiler_users.toml) judged by
the compiler release the environment holds (data/compilers.toml): its arch list against the GPUs,
its PTX ISA against the driver's. Planned environments as plain data (names and versions are all
the rule reads), and the doctor's command line on a site-packages made by hand."""

from __future__ import annotations

import pytest
import test_lock_scenarios
from test_checks_planned import dist, planned
from test_env_distributions import make_dist_info

from cudaresolve.arch import ComputeCapability
from cudaresolve.checks import judge
from cudaresolve.checks.findings import exit_code
from cudaresolve.checks.problems import CompilerCannotTargetGpu, CompilerPtxTooNew
from cudaresolve.cli import main
from cudaresolve.host.facts import Driver, Gpu, HostFacts
from cudaresolve.knowledge import toolkits
from cudaresolve.output.findings import shown
from cudaresolve.versions import DriverRelease

GTX_1080 = "6.1"
lock_cli = test_lock_scenarios.lock_cli  # a fixture of the lock's tests


def host(driver: str, *ccs: str) -> HostFacts:
    """A host as --driver/--gpu give it: the driver's CUDA version from its branch."""
    release = DriverRelease.parse(driver)
    return HostFacts("Linux", "x86_64", Driver(release, "test", toolkits.max_cuda_for_driver(release), "test"),
                     tuple(Gpu(ComputeCapability.parse(cc), "test", i, "GeForce GTX 1080" if cc == GTX_1080 else None)
                           for i, cc in enumerate(ccs)))


def compiler_findings(*dists, on: HostFacts):
    findings = judge(planned(*dists), on).findings
    return [f for f in findings if f.check == "run-time-compiler"], findings


def cccl(major: int):
    """cuda-cccl with what its [cuXX] extra installs for its compilers (the real pins of cuda-toolkit)."""
    if major == 13:
        return (dist("cuda-cccl", "1.2.1"), dist("cuda-bindings", "13.5.0"), dist("nvidia-cuda-nvrtc", "13.0.88"),
                dist("nvidia-nvjitlink", "13.0.88"))
    return (dist("cuda-cccl", "1.2.1"), dist("cuda-bindings", "12.9.10"), dist("nvidia-cuda-nvrtc-cu12", "12.9.86"),
            dist("nvidia-nvjitlink-cu12", "12.9.86"))


def test_cccl_cu13_on_pascal_is_an_error_naming_nvrtc_13_and_the_gpu():
    """NVRTC 13 has no sm_61 (its list starts at 7.5): cuda.compute fails at its first kernel with
    NVRTC_ERROR_INVALID_OPTION, although driver 580 runs CUDA 13. nvJitLink 13, which links its
    LTO-IR into CUBIN, cannot target it either, but that is the same cause with the same fix (the
    CUDA 12 route replaces both): one error, not two."""
    found, findings = compiler_findings(*cccl(13), on=host("580.65.06", GTX_1080))
    assert exit_code(findings, strict=False) == 2
    [nvrtc] = found
    assert [f.check for f in findings if f.severity == "error"] == ["run-time-compiler"]
    assert nvrtc.problem == CompilerCannotTargetGpu(
        "cuda-cccl", nvrtc.problem.consumer_version, "nvrtc", "nvidia-cuda-nvrtc", "13.0.88", ComputeCapability(6, 1),
        nvrtc.problem.gpus, ComputeCapability(7, 5), ComputeCapability(12, 1))
    text = shown(nvrtc)
    assert (text.severity, text.subject) == ("error", "nvidia-cuda-nvrtc 13.0.88")
    assert text.message == ("cuda-cccl 1.2.1 compiles its kernels at run time with NVRTC 13.0.88, which has no target "
                            "for compute capability 6.1 (GPU 0 GeForce GTX 1080): it targets 7.5 to 12.1")
    assert text.fix == 'take the CUDA 12 route: pip install "cuda-bindings<13" "cuda-cccl[cu12]"'


def test_a_linker_needing_its_own_fix_is_its_own_error():
    """NVRTC and nvJitLink 12.4 both stop at 9.0: on a Blackwell GPU (12.0) each needs its own newer
    release (two pins, two errors), unlike the CUDA 13 pair on Pascal above."""
    dists = (dist("cuda-cccl", "1.2.1"), dist("cuda-bindings", "12.9.10"), dist("nvidia-cuda-nvrtc-cu12", "12.4.127"),
             dist("nvidia-nvjitlink-cu12", "12.4.127"))
    found, _ = compiler_findings(*dists, on=host("580.65.06", "12.0"))
    texts = sorted((f.problem.kind, (shown(f).fix or "").split(" (")[0]) for f in found)
    assert texts == [("nvjitlink", 'pip install "nvidia-nvjitlink-cu12==12.9.86"'),
                     ("nvrtc", 'pip install "nvidia-cuda-nvrtc-cu12==12.9.86"')], texts


def test_cccl_cu12_on_pascal_is_clean():
    """The fix's route: NVRTC and nvJitLink 12.9 still target 6.1."""
    found, _ = compiler_findings(*cccl(12), on=host("580.65.06", GTX_1080))
    assert found == []


def test_a_release_not_in_the_table_is_not_judged():
    """No guess from a neighbouring release: an NVRTC 13 data/compilers.toml does not hold says nothing."""
    cu13 = cccl(13)
    found, _ = compiler_findings(*cu13[:2], dist("nvidia-cuda-nvrtc", "13.0.1"), dist("nvidia-nvjitlink", "13.0.1"),
                                 on=host("580.65.06", GTX_1080))
    assert found == []


def openmm(nvrtc: str):
    return dist("openmm", "8.3.1"), dist("nvidia-cuda-nvrtc-cu12", nvrtc)


def test_ptx_from_nvrtc_12_9_is_an_error_on_driver_550():
    """openmm hands NVRTC's PTX to the driver: 12.9 writes ISA 8.8, driver 550 (CUDA 12.4) loads up
    to 8.4. The fix is the newest NVRTC 12 whose PTX it loads, or the driver that loads 8.8."""
    found, findings = compiler_findings(*openmm("12.9.86"), on=host("550.144.03", "8.6"))
    assert exit_code(findings, strict=False) == 2
    [finding] = found
    assert finding.problem == CompilerPtxTooNew("openmm", finding.problem.consumer_version, "nvrtc",
                                                "nvidia-cuda-nvrtc-cu12", "12.9.86", "8.8",
                                                DriverRelease.parse("550.144.03"), finding.problem.driver_cuda, "8.4")
    text = shown(finding)
    assert text.subject == "nvidia-cuda-nvrtc-cu12 12.9.86"
    assert text.message == ("openmm 8.3.1 hands the driver PTX from NVRTC 12.9.86: PTX ISA 8.8, newer than the 8.4 "
                            "driver 550.144.03 (CUDA 12.4) loads (\"CUDA_ERROR_UNSUPPORTED_PTX_VERSION\" at the first "
                            "launch; minor-version compatibility does not cover PTX)")
    assert text.fix == ('pip install "nvidia-cuda-nvrtc-cu12==12.4.127" (the newest release in cudaresolve\'s table '
                        "that targets compute capability 8.6 and whose PTX this driver loads (ISA <= 8.4)), or "
                        "upgrade the driver to >= 575.51.03")


@pytest.mark.parametrize("nvrtc", ["12.4.127", "12.0.76"])
def test_ptx_the_driver_loads_is_clean(nvrtc):
    found, _ = compiler_findings(*openmm(nvrtc), on=host("550.144.03", "8.6"))
    assert found == []


def test_ptx_to_the_driver_serves_a_gpu_newer_than_the_compiler():
    """openmm asks NVRTC 12.4 for compute_90 PTX on an RTX 5090 (12.0): the driver JIT-compiles it.
    CuPy asks for a CUBIN, whose sm_90 SASS does not run on 12.0: an error."""
    assert compiler_findings(*openmm("12.4.127"), on=host("575.57.08", "12.0"))[0] == []
    found, _ = compiler_findings(dist("cupy-cuda12x", "14.2.0"), dist("nvidia-cuda-nvrtc-cu12", "12.4.127"),
                                 on=host("575.57.08", "12.0"))
    assert [(f.problem.consumer, f.problem.cc) for f in found] == [("cupy-cuda12x", ComputeCapability(12, 0))]


def test_cupy_compiles_cubin_so_its_ptx_never_meets_the_driver():
    """CuPy >= 9.4 asks NVRTC for CUBIN: NVRTC 12.9 on driver 550 is no PTX problem."""
    found, _ = compiler_findings(dist("cupy-cuda12x", "14.2.0"), dist("nvidia-cuda-nvrtc-cu12", "12.9.86"),
                                 on=host("550.144.03", "8.6"))
    assert found == []


@pytest.mark.parametrize("major, code", [(13, 2), (12, 0)])
def test_the_doctor_on_cccl_on_pascal(major, code, tmp_path, capsys, monkeypatch):
    """The command line on a site-packages holding cuda-cccl[cuXX]'s distributions (metadata only)."""
    monkeypatch.setenv("CUDARESOLVE_CACHE_DIR", str(tmp_path / "cache"))
    site = tmp_path / "site"
    for d in cccl(major):
        make_dist_info(site, d.name, str(d.version))
    assert main(["doctor", "--site-packages", str(site), "--driver", "580.65.06", "--gpu", GTX_1080]) == code
    said = "NVRTC 13.0.88, which has no target for compute capability 6.1" in capsys.readouterr().out
    assert said == (major == 13)


# -- the lock: the same rule on the planned environment (tests/fake_cuda_index.py) -------------------


@pytest.mark.usefixtures("hermetic")
def test_lock_of_cccl_on_pascal_chooses_the_cu12_build(lock_cli):
    """CUDA 13 is not tried on a GTX 1080 (its toolkit builds nothing for 6.1): cuda-cccl gets [cu12],
    whose NVRTC and nvJitLink 12.9 the run-time-compiler rule passes."""
    run = lock_cli(["cuda-cccl"], "--driver", "580.65.06", "--gpu", GTX_1080)
    assert run.code == 0, run.err
    versions = run.versions
    assert (versions["nvidia-cuda-nvrtc-cu12"], versions["nvidia-nvjitlink-cu12"]) == ("12.9.86", "12.9.86")
    assert "nvidia-cuda-nvrtc" not in versions and "nvidia-nvjitlink" not in versions
    assert "cuda-cccl==1.2.1 " in run.out and "[cu12] for the environment's CUDA 12" in run.out


@pytest.mark.usefixtures("hermetic")
def test_lock_of_cccl_cu13_on_pascal_is_refused_naming_the_gpu(lock_cli):
    """An explicit [cu13] only CUDA 13 wheels meet: exit 2, saying first why CUDA 13 is not tried here."""
    run = lock_cli(["cuda-cccl[cu13]"], "--driver", "580.65.06", "--gpu", GTX_1080)
    assert run.code == 2
    newest = [t.version for t in toolkits.known() if t.major == 13 and t.sass_targets][-1]
    assert run.err.splitlines()[0] == f"cudaresolve: error: CUDA 13 is not tried: CUDA {newest} builds no code for GPU 0 (6.1)"


@pytest.mark.usefixtures("hermetic")
def test_lock_of_openmm_on_driver_550_chooses_an_nvrtc_whose_ptx_it_loads(lock_cli):
    """openmm-cuda-12 requires nvidia-cuda-nvrtc-cu12 unpinned: the newest (12.9.86) writes PTX ISA
    8.8, which driver 550 cannot load. The lock takes 12.4.127 (8.4), the NVRTC of the driver's own
    CUDA 12.4: the newer ones it runs only by minor-version compatibility rank below. Asked for a
    newer NVRTC, the judge refuses both newer releases for their PTX (the rule applies to the lock).
    On driver 575 (CUDA 12.9: 8.8) the newest stays."""
    run = lock_cli(["openmm[cuda12]"], "--driver", "550.144.03", "--gpu", "8.6")
    assert run.code == 0, run.err
    assert run.versions["nvidia-cuda-nvrtc-cu12"] == "12.4.127"
    [decision] = [d for d in run.lock.decisions if d.name == "nvidia-cuda-nvrtc-cu12"]
    assert {str(r.candidate.version): r.rule.value for r in decision.rejected
            if str(r.candidate.version) in ("12.9.86", "12.6.85")} == dict.fromkeys(("12.9.86", "12.6.85"), "minor-compat")
    forced = lock_cli(["openmm[cuda12]", "nvidia-cuda-nvrtc-cu12>=12.5"], "--driver", "550.144.03", "--gpu", "8.6", name="forced")
    assert forced.code == 2, forced.err
    assert "run-time-compiler" in forced.err, forced.err
    newer = lock_cli(["openmm[cuda12]"], "--driver", "575.57.08", "--gpu", "8.6", name="b")
    assert newer.code == 0, newer.err
    assert newer.versions["nvidia-cuda-nvrtc-cu12"] == "12.9.86"
