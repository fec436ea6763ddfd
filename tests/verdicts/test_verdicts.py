"""One verdict per host-fit rule (verdicts/), used by the doctor, the lock and `lock --check`: each
rule as a pure function of plain data; the doctor refusing what the lock refuses (an SBSA build on a
Jetson); a package floor added as a data row, said in the same words by `doctor`, `lock --explain`
and `lock --check`; and every record type the renderers meet has its words."""

from __future__ import annotations

import json
import typing
from dataclasses import replace

import pytest
from packaging.utils import NormalizedName
from packaging.version import Version
from test_doctor_checks import dist, environment
from test_env_distributions import make_dist_info

from cudaresolve.arch import ComputeCapability, PtxTarget, Target
from cudaresolve.checks import evidence as e
from cudaresolve.checks import fixes as f
from cudaresolve.checks import judge
from cudaresolve.checks import problems as p
from cudaresolve.cli import main
from cudaresolve.host.facts import Driver, Gpu, HostFacts
from cudaresolve.knowledge import advisories, package_floors
from cudaresolve.knowledge.package_floors import PackageFloor
from cudaresolve.lockfile import reasons as lock_reasons
from cudaresolve.output import findings as finding_words
from cudaresolve.output import fixes as fix_words
from cudaresolve.output.findings import shown
from cudaresolve.output.lock_words import rejection_line
from cudaresolve.output.verdicts import words
from cudaresolve.resolve.candidates import cuda_build, release_rejection
from cudaresolve.resolve.reasons import GROUNDS, CandidateRef, Rejection, Rule
from cudaresolve.verdicts import records as v
from cudaresolve.verdicts import rules
from cudaresolve.versions import CudaVersion, DriverRelease

R550 = DriverRelease.parse("550.144.03")
R580 = DriverRelease.parse("580.65.06")
DRIVER_550 = Driver(R550, "override:--driver", CudaVersion(12, 4), "test")


def jetson(driver: Driver = DRIVER_550) -> HostFacts:
    return HostFacts("Linux", "aarch64", driver, (Gpu(ComputeCapability(8, 7), "override:--gpu", 0),), tegra=True)


# -- the rules, on plain data ------------------------------------------------------------------------


def test_each_rule_returns_its_record_on_the_host_that_breaks_it_and_none_on_the_one_that_fits():
    assert rules.driver_too_old(CudaVersion(13, 0), DRIVER_550) == v.DriverTooOld(CudaVersion(13, 0), R550, CudaVersion(12, 4), R580)
    assert rules.driver_too_old(CudaVersion(13, 0), Driver()) is None  # a driver not stated refuses nothing
    assert rules.minor_compat(CudaVersion(12, 8), DRIVER_550, "b") == v.MinorCompat(CudaVersion(12, 8), R550, CudaVersion(12, 4), "b")
    assert rules.minor_compat(CudaVersion(12, 4), DRIVER_550) is None
    gpu0 = (v.GpuRef(0),)
    assert rules.no_device_code(ComputeCapability(8, 6), gpu0, ("sm_75",), (), DRIVER_550) == v.NoDeviceCode(
        ComputeCapability(8, 6), gpu0, (Target.parse("sm_75"),), ())
    assert rules.no_device_code(ComputeCapability(8, 6), gpu0, ("sm_80",), (), DRIVER_550) is None
    assert rules.no_device_code(ComputeCapability(8, 6), gpu0, (), (PtxTarget("compute_75", "8.4"),), DRIVER_550) is None
    assert rules.no_device_code(ComputeCapability(8, 6), gpu0, (), (), DRIVER_550) is None  # unknown device code
    pascal = HostFacts("Linux", "x86_64", DRIVER_550, (Gpu(ComputeCapability(6, 1), "override:--gpu", 0),))
    assert isinstance(rules.toolkit_targets(13, pascal), v.ToolkitTargets)
    assert rules.toolkit_targets(12, pascal) is None
    assert rules.sbsa_on_jetson("nvidia-cublas-cu12", CudaVersion(12, 8), jetson()) == v.SbsaOnJetson(CudaVersion(12, 8))
    assert rules.sbsa_on_jetson("nvidia-cublas-cu12", CudaVersion(12, 8), pascal) is None
    assert rules.cpu_only_on_machine("aarch64", jetson()) == v.CpuOnly("", "aarch64", "torch/lib/libtorch_cuda.so")
    assert rules.cpu_only_on_machine("aarch64", HostFacts("Linux", "aarch64")) is None


def test_an_advisory_with_a_driver_condition_holds_on_that_driver_only():
    advisory = next(a for a in advisories.load() if a.id == "numba-driver-580")
    on_580 = HostFacts("Linux", "x86_64", Driver(R580, "override:--driver"))
    assert rules.known_bad_release(advisory, Version("0.60.0"), None, on_580) == v.KnownBadRelease(
        "numba-driver-580", advisory.symptom)
    assert rules.known_bad_release(advisory, Version("0.60.0"), None, HostFacts("Linux", "x86_64", DRIVER_550)) is None


FLOOR = PackageFloor("numba>=0.60", DriverRelease.parse("570.86.10"), ("a test row",))


@pytest.fixture
def numba_floor(monkeypatch):
    """A package floor added as one data row: numba 0.60 and later need driver >= 570.86.10."""
    monkeypatch.setattr(package_floors, "load", lambda: (FLOOR,))


def test_a_package_floor_refuses_the_releases_it_names_below_its_driver(numba_floor):
    assert rules.below_package_floor("numba", Version("0.60.0"), DRIVER_550) == v.BelowPackageFloor(FLOOR.driver, R550)
    assert rules.below_package_floor("numba", Version("0.59.1"), DRIVER_550) is None
    assert rules.below_package_floor("numba", Version("0.60.0"), Driver(R580, "override:--driver")) is None
    assert rules.below_package_floor("numba", Version("0.60.0"), Driver(None, None, CudaVersion(12, 4))) is None


# -- the doctor refuses what the lock refuses --------------------------------------------------------


def test_the_doctor_refuses_an_sbsa_build_on_a_jetson_as_the_lock_does():
    env = environment(dist("nvidia-cublas-cu12", "12.8.4.1"))
    findings = [finding for finding in judge(env, jetson()).findings if isinstance(finding.problem, v.SbsaOnJetson)]
    [finding] = findings
    assert (finding.severity.value, str(finding.subject.distribution)) == ("error", "nvidia-cublas-cu12")
    # the lock's rejection of that release on that host is the same verdict, in the same words
    release = CandidateRef(NormalizedName("nvidia-cublas-cu12"), Version("12.8.4.1"))
    refused = release_rejection(release.name, release.version, cuda_build(release.name, release.version),
                                [("this host", jetson())], "aarch64")
    assert refused == finding.problem
    assert rejection_line(Rejection(release, refused)) == f"nvidia-cublas-cu12 12.8.4.1: {shown(finding).message}"
    # not on a server-Arm host, nor for a JetPack build the tables do not name
    assert not [f for f in judge(env, HostFacts("Linux", "aarch64", DRIVER_550)).findings if isinstance(f.problem, v.SbsaOnJetson)]
    jetpack = environment(dist("torch", "2.5.0a0+872d972e41.nv24.8"))
    assert not [f for f in judge(jetpack, jetson()).findings if isinstance(f.problem, v.SbsaOnJetson)]


# -- acceptance: one data row, the same words from doctor, lock --explain and lock --check ------------


FLOOR_WORDS = "needs driver >= 570.86.10 (a package floor); the host has driver 550.144.03"


def test_a_package_floor_row_is_said_alike_by_doctor_lock_explain_and_lock_check(
        numba_floor, cuda_index, empty_python, hermetic, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("CUDARESOLVE_DRIVER", "")
    monkeypatch.setenv("CUDARESOLVE_GPUS", "")
    index = ["--python", empty_python, "--index-url", cuda_index.index_url, "--torch-index-base", cuda_index.torch_index_base]

    def run(*argv: str) -> tuple[int, str]:
        capsys.readouterr()
        code = main(list(argv))
        return code, capsys.readouterr().out

    site = tmp_path / "site-packages"
    make_dist_info(site, "numba", "0.60.0")
    code, out = run("doctor", "--site-packages", str(site), "--json", "--driver", "550.144.03", "--gpu", "8.6")
    doctor = [finding for finding in json.loads(out)["findings"] if finding["problem"]["type"] == "below-package-floor"]
    assert (code, [(d["severity"], d["subject"], d["message"]) for d in doctor]) == (
        2, [("error", "numba 0.60.0", FLOOR_WORDS)])

    code, out = run("lock", "numba>=0.59", "--explain", "--driver", "550.144.03", "--gpu", "8.6", "-o", str(tmp_path / "pylock.explained.toml"), *index)
    assert code == 0 and f"numba: chose numba 0.59.1\n  numba 0.60.0: {FLOOR_WORDS}\n" in out, out

    lock = tmp_path / "pylock.toml"
    assert run("lock", "-q", "numba>=0.59", "--driver", "575.57.08", "--gpu", "8.6", "-o", str(lock), *index)[0] == 0
    code, out = run("lock", "--check", str(lock), "--driver", "550.144.03", "--gpu", "8.6")
    assert (code, out) == (2, f"{lock} does not fit this host:\n  numba 0.60.0: {FLOOR_WORDS}\n")


# -- every record type has its words -------------------------------------------------------------------


def unworded(union: object, table: dict[type, object]) -> set[type]:
    """The types of `union` without an entry in a renderer's `table`."""
    return set(typing.get_args(union)) - set(table)


def test_every_problem_evidence_and_fix_type_has_a_renderer():
    assert unworded(p.Problem, finding_words._PROBLEMS) == set()
    assert unworded(e.Evidence, finding_words._EVIDENCE) == set()
    combinators = {f.Alternatives, f.OrElse, f.Steps, f.Each, f.Explained}
    assert unworded(f.Fix, fix_words._RENDER) - combinators == set()
    assert combinators <= set(fix_words._RENDER)
    assert unworded(f.Why, fix_words._WHY) == set()
    assert unworded(p.Problem, {}) == set(typing.get_args(p.Problem))  # the comparison sees a missing one


SAMPLES = (
    v.DriverTooOld(CudaVersion(13, 0), R550, CudaVersion(12, 4), R580),
    v.DriverTooOld(CudaVersion(13, 0), None, CudaVersion(12, 4), None, "b"),
    v.MinorCompat(CudaVersion(12, 8), R550, CudaVersion(12, 4)),
    v.NoDeviceCode(ComputeCapability(8, 6), (v.GpuRef(0, "NVIDIA RTX A6000"), v.GpuRef(2)), (Target.parse("sm_75"),), ()),
    v.ToolkitTargets(CudaVersion(13, 0), 0, ComputeCapability(6, 1)),
    v.CpuOnly("cpu"),
    v.CpuOnly("", "aarch64", "torch/lib/libtorch_cuda.so"),
    v.SbsaOnJetson(CudaVersion(12)),
    v.KnownBadRelease("x", "y"),
    v.BelowPackageFloor(DriverRelease.parse("570.86.10"), R550),
)


def test_every_verdict_has_its_words_once_for_the_doctor_and_the_lock():
    assert {type(sample) for sample in SAMPLES} == set(v.VERDICTS)
    assert all(words(sample) for sample in SAMPLES)
    assert words(v.BelowPackageFloor(DriverRelease.parse("570.86.10"), R550, "b")) == (
        "needs driver >= 570.86.10 (a package floor); b has driver 550.144.03")
    # the doctor's words of a verdict are its words, framed
    assert finding_words.render_problem(SAMPLES[0]) == (
        'built for CUDA 13.0: driver 550.144.03 < 580.65.06 (CUDA 13.x floor): '
        '"CUDA driver version is insufficient for CUDA runtime version"')
    assert finding_words.render_problem(SAMPLES[-1]) == words(SAMPLES[-1])
    # one record for "no device code": the lock says what the build has, the doctor (its targets in
    # its evidence, file by file) adds the runtime's message
    assert words(SAMPLES[3]) == "no kernel image for compute capability 8.6 (GPU 0 NVIDIA RTX A6000, GPU 2); has sm_75"
    assert finding_words.render_problem(replace(SAMPLES[3], sass=())) == (
        'no kernel image for compute capability 8.6 (GPU 0 NVIDIA RTX A6000, GPU 2): '
        '"no kernel image is available for execution on the device"')


# -- lock files keep their rule names ----------------------------------------------------------------


WRITTEN_RULES = {  # every rule name a lock file written before the verdicts room may hold
    "sdist-only", "no-binary", "requires-python", "no-wheel", "yanked", "driver", "device-code", "toolkit-targets",
    "conda-shadow", "other-major", "judge", "older-cuda", "not-needed", "pre-release", "cpu-only", "no-extra",
    "minor-compat", "breaks-installed", "sbsa-on-jetson", "facts-unknown",
}


def test_a_lock_reads_every_rule_name_it_wrote_and_a_verdict_round_trips_through_its_table():
    assert WRITTEN_RULES <= {rule.value for rule in Rule} == {rule.value for rule in GROUNDS}
    for sample in SAMPLES:
        if hasattr(sample, "rule"):
            rejected = Rejection(CandidateRef(NormalizedName("numba"), Version("0.60.0")), sample)
            table = lock_reasons.rejection_table(rejected)
            assert table["rule"] == sample.rule.value
            assert lock_reasons.read_rejection(table, NormalizedName("numba")) == rejected
