"""The judge on a planned environment: plain data, no files on disk, the same findings as the
installed environment it describes; and requirements followed only where their markers hold."""

from __future__ import annotations

import os
from dataclasses import replace
from typing import Optional

import pytest
from packaging.requirements import Requirement
from packaging.version import Version
from test_doctor_synthetic import FOO_V1, FOO_V2, HOST, MAP_V1, MAP_V2
from test_env_distributions import make_dist_info

from cudaresolve.arch import ComputeCapability
from cudaresolve.binary.facts import BinaryFacts, FatbinSummary, Symbol, SymbolTable, VersionNeed
from cudaresolve.binary.loader import LoaderEnv
from cudaresolve.checks import advisories as advisory_check
from cudaresolve.checks import arch_coverage, driver_floor, judge, metadata, releases
from cudaresolve.checks.builds import cuda_builds
from cudaresolve.commands.diagnosing import examine
from cudaresolve.env.distributions import Distribution
from cudaresolve.env.environment import ElfFile, Environment, installed_extras
from cudaresolve.env.interpreter import Target, target_for_site_packages
from cudaresolve.host.facts import Driver, Gpu, HostFacts
from cudaresolve.knowledge import advisories, wheel_facts
from cudaresolve.output.findings import FindingText, shown
from cudaresolve.output.fixes import render_fix
from cudaresolve.versions import CudaVersion, DriverRelease

PLANNED = "/planned/site-packages"  # nowhere on disk
X86_64 = {
    "implementation_name": "cpython", "implementation_version": "3.11.7", "os_name": "posix",
    "platform_machine": "x86_64", "platform_python_implementation": "CPython", "platform_release": "6.1.0",
    "platform_system": "Linux", "platform_version": "#1 SMP", "python_full_version": "3.11.7",
    "python_version": "3.11", "sys_platform": "linux",
}
# The loader's file-system seam answered from memory: a lookup that reached the disk would fail the test.
NO_DISK = LoaderEnv(
    machine="x86_64", default_dirs=("/nowhere/lib64",), real_path=os.path.normpath, read_header=lambda path: None
)


def so(path: str, *, soname: Optional[str] = None, needed: tuple[str, ...] = (), runpath: tuple[str, ...] = (),
       undefined: tuple[Symbol, ...] = (), defined: tuple[Symbol, ...] = (), version_definitions=(),
       version_needs=(), fatbin: Optional[FatbinSummary] = None) -> BinaryFacts:
    return BinaryFacts(
        path=path, machine="x86_64", elf_type="DYN", soname=soname, needed=needed, rpath=(), runpath=runpath,
        flags=0, flags_1=0, symbols=SymbolTable.of(undefined, defined), version_definitions=version_definitions,
        version_needs=version_needs, build_id=None, fatbin=fatbin,
    )


def dist(name: str, version: str, *requires: str, files: tuple[str, ...] = (), extras=frozenset()) -> Distribution:
    return Distribution(name, Version(version), tuple(Requirement(r) for r in requires), "pip",
                        f"{PLANNED}/{name.replace('-', '_')}-{version}.dist-info", files, frozenset(extras))


def planned(*dists: Distribution, elf_files: tuple[ElfFile, ...] = (), markers=X86_64) -> Environment:
    return Environment(
        target=Target(site_packages=(PLANNED,), markers=tuple(sorted(markers.items()))),
        distributions=tuple(sorted(dists, key=lambda d: d.name)),
        elf_files=tuple(sorted(elf_files, key=lambda e: e.path)),
        loader=NO_DISK,
    )


# -- one judge: a planned environment gets the installed one's finding --------------------------------


def test_a_planned_environment_gets_the_symbol_skew_of_the_installed_one(elf_builder, tmp_path):
    """consumer-pkg is built against libfoo FOO_2.0; nvidia-foo-cu12 ships a libfoo with FOO_1.0 only.
    Installed (gcc-built files, read from disk) and planned (the same two distributions as plain
    data, at paths that do not exist) give one and the same symbol-skew finding."""
    new = elf_builder.build("libfoo.so.1", FOO_V2, soname="libfoo.so.1", version_script=MAP_V2, directory="v2")
    elf_builder.build("libfoo.so.1", FOO_V1, soname="libfoo.so.1", version_script=MAP_V1,
                      directory="site/nvidia/foo/lib")
    elf_builder.build(
        "libconsumer.so",
        "int foo_old(void); int foo_new(void);\nint consume(void) { return foo_old() + foo_new(); }\n",
        link=[new], runpath="$ORIGIN/../../nvidia/foo/lib", directory="site/consumer/lib",
    )
    site = elf_builder.root / "site"
    make_dist_info(site, "nvidia-foo-cu12", "1.2", files=("nvidia/foo/lib/libfoo.so.1",))
    make_dist_info(site, "consumer-pkg", "1.0", files=("consumer/lib/libconsumer.so",), requires=("nvidia-foo-cu12",))
    installed = examine(target_for_site_packages(str(site)), HOST, {"CUDARESOLVE_CACHE_DIR": str(tmp_path / "c")})
    [installed_skew] = [shown(f) for f in installed.findings if f.check == "symbol-skew"]

    foo = f"{PLANNED}/nvidia/foo/lib/libfoo.so.1"
    consumer = f"{PLANNED}/consumer/lib/libconsumer.so"
    env = planned(
        dist("nvidia-foo-cu12", "1.2", files=(foo,)),
        dist("consumer-pkg", "1.0", "nvidia-foo-cu12", files=(consumer,)),
        elf_files=(
            ElfFile(foo, ("nvidia-foo-cu12",), so(
                foo, soname="libfoo.so.1", version_definitions=("libfoo.so.1", "FOO_1.0"),
                defined=(Symbol("foo_old", "FOO_1.0"),),
            ), None),
            ElfFile(consumer, ("consumer-pkg",), so(
                consumer, needed=("libfoo.so.1",), runpath=("$ORIGIN/../../nvidia/foo/lib",),
                undefined=(Symbol("foo_old", "FOO_1.0", "libfoo.so.1"), Symbol("foo_new", "FOO_2.0", "libfoo.so.1")),
                version_needs=(VersionNeed("libfoo.so.1", ("FOO_1.0", "FOO_2.0")),),
            ), None),
        ),
    )
    planned_findings = [shown(f) for f in judge(env, HOST).findings]
    assert [f.check for f in planned_findings] == ["symbol-skew"]
    assert planned_findings[0] == installed_skew._replace(
        message=installed_skew.message.replace(str(site), PLANNED),
        evidence=tuple(e.replace(str(site), PLANNED) for e in installed_skew.evidence),
    )
    assert installed_skew.message == f"libfoo.so.1: version `FOO_2.0' not found (required by {site}/consumer/lib/libconsumer.so)"


@pytest.mark.parametrize("requires, missing", [(("torch>=2.14",), []), ((), ["libc10.so"])])
def test_a_planned_extension_finds_what_the_torch_it_requires_loads_on_import(requires, missing):
    """The lock's judge models the import order as the doctor's does: a chosen wheel whose extension
    links libc10.so with no RPATH finds the copy torch/_C has loaded, when it requires torch."""
    c10, torch_c = f"{PLANNED}/torch/lib/libc10.so", f"{PLANNED}/torch/_C.cpython-311-x86_64-linux-gnu.so"
    extension = f"{PLANNED}/ext_pkg/_ext.cpython-311-x86_64-linux-gnu.so"
    core = Symbol("c10_core")
    env = planned(
        dist("torch", "2.14.1", files=(c10, torch_c)),
        dist("ext-pkg", "1.0", *requires, files=(extension,)),
        elf_files=(
            ElfFile(c10, ("torch",), so(c10, soname="libc10.so", defined=(core,)), None),
            ElfFile(torch_c, ("torch",), replace(so(torch_c, needed=("libc10.so",), undefined=(core,)),
                                                  rpath=("$ORIGIN/lib",)), None),
            ElfFile(extension, ("ext-pkg",), so(extension, needed=("libc10.so",), undefined=(core,)), None),
        ),
    )
    findings = [shown(f) for f in judge(env, HOST).findings if f.check.value == "missing-library"]
    assert [f.message.split(": ")[1] for f in findings] == missing


def worded(check):
    """A check whose findings come back as a report words them."""

    def run(*args) -> list[FindingText]:
        return [shown(finding) for finding in check(*args)]

    return run


check_advisories = worded(advisory_check.check_advisories)
check_arch_coverage = worded(arch_coverage.check_arch_coverage)
check_driver_floor = worded(driver_floor.check_driver_floor)
check_metadata_vs_binary = worded(metadata.check_metadata_vs_binary)


# -- markers and extras --------------------------------------------------------------------------------


def on(release: str, *ccs: str) -> HostFacts:
    return HostFacts("Linux", "x86_64", Driver(DriverRelease.parse(release), "test", CudaVersion(12, 4), "test"),
                     tuple(Gpu(ComputeCapability.parse(cc), "test", i) for i, cc in enumerate(ccs)))


CUDA13_LIB = f"{PLANNED}/nvidia/cu13/lib/libcudart.so.13"
TORCH_LIB = f"{PLANNED}/torch/lib/libtorch_cuda.so"
LACKING_SM61 = (  # torch cu130 and its CUDA runtime wheel both lack code for a GTX 1080 (6.1)
    ElfFile(CUDA13_LIB, ("nvidia-cuda-runtime",),
            so(CUDA13_LIB, fatbin=FatbinSummary(("sm_75", "sm_90"), (), 40, 40, (".nv_fatbin",))), None),
    ElfFile(TORCH_LIB, ("torch",), so(TORCH_LIB, fatbin=FatbinSummary(("sm_75",), (), 40, 40, (".nv_fatbin",))), None),
)


def torch_requiring(marker: str, extras=()) -> Environment:
    return planned(dist("torch", "2.14.1", f"nvidia-cuda-runtime==13.0.96; {marker}", extras=extras),
                   dist("nvidia-cuda-runtime", "13.0.96"), elf_files=LACKING_SM61)


IGNORED = [
    pytest.param('extra == "cu13"', (), id="extra-not-installed"),
    pytest.param('platform_machine == "aarch64"', (), id="aarch64-only"),
    pytest.param('extra == "cu13" and platform_machine == "aarch64"', ("cu13",), id="extra-installed-aarch64-only"),
]
FOLLOWED = [
    pytest.param('extra == "cu13"', ("cu13",), id="extra-installed"),
    pytest.param('platform_machine == "x86_64"', (), id="x86_64"),
]


@pytest.mark.parametrize("marker, extras", IGNORED)
def test_requirements_whose_markers_do_not_hold_are_not_followed(marker, extras):
    """The runtime wheel fails on its own account: its findings are not folded into torch's."""
    env = torch_requiring(marker, extras)
    assert env.requirements(env.distribution("torch")) == ()
    gtx_1080_on_550 = on("550.144.03", "6.1")
    both = ["nvidia-cuda-runtime 13.0.96", "torch 2.14.1"]
    assert sorted(f.subject for f in check_arch_coverage(env, cuda_builds(env), gtx_1080_on_550)) == both
    assert sorted(f.subject for f in check_driver_floor(env, cuda_builds(env), gtx_1080_on_550)) == both


@pytest.mark.parametrize("marker, extras", FOLLOWED)
def test_requirements_whose_markers_hold_are_followed(marker, extras):
    """torch pulls the runtime wheel in: one finding each for arch and driver, the wheel as evidence."""
    env = torch_requiring(marker, extras)
    assert env.requires_names(env.distribution("torch")) == {"nvidia-cuda-runtime"}
    gtx_1080_on_550 = on("550.144.03", "6.1")
    [arch] = check_arch_coverage(env, cuda_builds(env), gtx_1080_on_550)
    [floor] = check_driver_floor(env, cuda_builds(env), gtx_1080_on_550)
    assert arch.subject == floor.subject == "torch 2.14.1"
    assert "its CUDA dependencies lack code for 6.1 too: nvidia-cuda-runtime" in arch.evidence
    assert "its CUDA dependencies need that driver too: nvidia-cuda-runtime" in floor.evidence


def test_metadata_vs_binary_counts_only_requirements_that_apply():
    """cusparse binds nvJitLink 12.4 symbols; a `>=12.4` requirement only for another extra or machine
    is no declaration at all here."""
    lib = f"{PLANNED}/nvidia/cusparse/lib/libcusparse.so.12"
    needs_12_4 = ElfFile(lib, ("nvidia-cusparse-cu12",), so(
        lib, needed=("libnvJitLink.so.12",),
        undefined=(Symbol("__nvJitLinkComplete_12_4", "libnvJitLink.so.12", "libnvJitLink.so.12"),),
    ), None)
    for requirement, declared in (
        ("nvidia-nvjitlink-cu12>=12.4", True),
        ('nvidia-nvjitlink-cu12>=12.4; extra == "jit"', False),
        ('nvidia-nvjitlink-cu12>=12.4; platform_machine == "aarch64"', False),
    ):
        env = planned(dist("nvidia-cusparse-cu12", "12.3.1.170", requirement), elf_files=(needs_12_4,))
        messages = [f.message for f in check_metadata_vs_binary(env)]
        if declared:
            assert messages == []
        else:
            assert len(messages) == 1 and "does not declare nvidia-nvjitlink-cu12" in messages[0], requirement


def test_advisory_requirements_carry_markers(monkeypatch):
    """numba 0.61.2 on driver 580 unless numba-cuda is installed: an `unless` (or `affects`) that
    names another machine neither excuses nor accuses this one."""
    real = next(a for a in advisories.load() if "numba-cuda" in " ".join(a.unless))
    rows = (
        replace(real, id="unless-on-arm", unless=('numba-cuda; platform_machine == "aarch64"',)),
        replace(real, id="affects-arm", affects=('numba==0.61.2; platform_machine == "aarch64"',), unless=()),
        replace(real, id="unless-here", unless=('numba-cuda; platform_machine == "x86_64"',)),
    )
    monkeypatch.setattr(advisories, "load", lambda: rows)
    host = on("580.65.06", "8.6")
    def found(env):
        return {f"known problem {f.problem.advisory}"
                             for f in advisory_check.check_advisories(env, host, cuda_builds(env))}
    arm = {**X86_64, "platform_machine": "aarch64"}
    both = (dist("numba", "0.61.2"), dist("numba-cuda", "0.15.0"))
    assert found(planned(*both)) == {"known problem unless-on-arm"}
    assert found(planned(*both, markers=arm)) == {"known problem affects-arm", "known problem unless-here"}


def test_installed_extras_are_those_whose_requirements_are_installed():
    installed = {"nvidia-cublas": Version("13.1.1.3"), "nvidia-cuda-runtime": Version("13.0.96")}
    toolkit = dist("cuda-toolkit", "13.0.3", 'nvidia-cublas==13.1.1.3; extra == "cublas"',
                   'nvidia-cuda-runtime==13.0.96; extra == "cudart"', 'nvidia-cufft; extra == "cufft"',
                   'nvidia-cublas==13.1.1.3; extra == "arm" and platform_machine == "aarch64"')
    assert installed_extras(toolkit, installed, X86_64) == {"cublas", "cudart"}
    wrong_version = {**installed, "nvidia-cublas": Version("13.0.0.19")}
    assert installed_extras(toolkit, wrong_version, X86_64) == {"cudart"}


def test_a_package_build_directory_is_looked_for_below_site_packages_only():
    """cuda-cccl's cu12/ and cu13/ builds: a venv that happens to live under a directory named cu13
    does not make every file part of the cu13 build."""
    from cudaresolve.checks.builds import build_of

    root = "/opt/cu13/venv/site-packages"
    env = replace(planned(dist("cuda-cccl", "1.2.1"), dist("cuda-bindings", "12.9.10")),
                  target=Target(site_packages=(root,), markers=tuple(sorted(X86_64.items()))))
    assert build_of(env, "cuda-cccl", f"{root}/cuda/compute/_bindings.py") is None
    cu12 = build_of(env, "cuda-cccl", f"{root}/cuda/compute/cu12/cccl/libcccl.c.parallel.so")
    cu13 = build_of(env, "cuda-cccl", f"{root}/cuda/compute/cu13/cccl/libcccl.c.parallel.so")
    assert (cu12.directory, cu12.cuda_major, cu12.selected) == ("cu12", 12, True)
    assert (cu13.directory, cu13.selected) == ("cu13", False)  # cuda-bindings 12 selects cu12


# -- fixes that name a release of the wheel-facts table ---------------------------------------------


def from_table(name: str, version: str, *requires: str) -> tuple[Distribution, tuple[ElfFile, ...]]:
    """A table release as a planned environment would hold it: its members at their install paths."""
    members = wheel_facts.from_record(wheel_facts.find(name, version, machine="x86_64")).members
    files = tuple(ElfFile(f"{PLANNED}/{m.path.split('!', 1)[1]}", (name,),
                          replace(m, path=f"{PLANNED}/{m.path.split('!', 1)[1]}"), None) for m in members)
    return dist(name, version, *requires, files=tuple(f.path for f in files)), files


def findings_of(check: str, *releases: tuple[Distribution, tuple[ElfFile, ...]], host: HostFacts) -> list[FindingText]:
    env = planned(*(d for d, _ in releases), elf_files=tuple(f for _, files in releases for f in files))
    return [shown(f) for f in judge(env, host).findings if f.check == check]


def test_cudnn_on_pascal_names_the_newest_release_whose_libraries_all_carry_sm_61():
    """cuDNN 9.11 onwards keeps sm_61 SASS in libcudnn_engines_precompiled only; 9.10.2.21 is the
    newest release of the table whose every library runs on a GTX 1080."""
    [finding] = findings_of("arch-coverage", from_table("nvidia-cudnn-cu12", "9.28.0.42"), host=on("575.57.08", "6.1"))
    assert (finding.severity, finding.subject) == ("error", "nvidia-cudnn-cu12 9.28.0.42")
    assert finding.fix == ('pip install "nvidia-cudnn-cu12==9.10.2.21" (the newest release in cudaresolve\'s table '
                           "whose device code runs on compute capability 6.1)")
    # that release, planned in its place, has no arch-coverage finding: the fix is one the check accepts
    assert findings_of("arch-coverage", from_table("nvidia-cudnn-cu12", "9.10.2.21"), host=on("575.57.08", "6.1")) == []


def test_a_release_must_run_on_every_gpu_of_the_host():
    """Beside an RTX 5090 (12.0) cuDNN 9.0's compute_90 PTX (ISA 8.3) serves sm_120, so 9.10.2.21 still runs on both."""
    [finding] = findings_of("arch-coverage", from_table("nvidia-cudnn-cu12", "9.28.0.42"),
                            host=on("575.57.08", "6.1", "12.0"))
    assert finding.fix == ('pip install "nvidia-cudnn-cu12==9.10.2.21" (the newest release in cudaresolve\'s table '
                           "whose device code runs on every GPU here (compute capabilities 6.1, 12.0))")


def test_no_release_of_the_table_runs_is_said_plainly():
    """cuDNN for CUDA 13 dropped everything below Turing: no release in the table runs on 6.1."""
    [finding] = findings_of("arch-coverage", from_table("nvidia-cudnn-cu13", "9.28.1.4"), host=on("580.65.06", "6.1"))
    assert finding.fix == "no release of nvidia-cudnn-cu13 in cudaresolve's table runs on compute capability 6.1"


@pytest.mark.parametrize("driver, cuda, release", [
    ("575.57.08", "12.9", "12.9.79"),  # the newest CUDA 12 runtime, native on 12.9
    ("550.144.03", "12.4", "12.4.127"),  # the newest one this driver runs natively, not 12.9 by minor-version compatibility
])
def test_driver_floor_names_the_newest_release_of_the_drivers_major(driver, cuda, release):
    """The CUDA 12 build of the unsuffixed CUDA 13 runtime wheel is nvidia-cuda-runtime-cu12."""
    host = HostFacts("Linux", "x86_64", Driver(DriverRelease.parse(driver), "test", CudaVersion.parse(cuda), "test"),
                     (Gpu(ComputeCapability.parse("8.9"), "test", 0),))
    [finding] = findings_of("driver-floor", from_table("nvidia-cuda-runtime", "13.0.96"), host=host)
    assert finding.fix == (f'upgrade the driver to >= 580.65.06, or use the CUDA 12 build instead: pip install '
                           f'"nvidia-cuda-runtime-cu12=={release}" in place of nvidia-cuda-runtime')


def test_mixed_majors_moves_to_the_hosts_cuda_major_with_a_release_of_the_table():
    """cuRAND 10.4.5 (CUDA 13, links libcudart.so.13) beside CuPy for CUDA 12: on a 575 driver (CUDA 12.9)
    the fix is cuRAND's CUDA 12 wheel at a release the table knows; on 580, the same CuPy release's CUDA 13 build."""
    releases = (from_table("nvidia-curand", "10.4.5.25"), (dist("cupy-cuda12x", "14.0.0"), ()))
    [finding] = findings_of("mixed-majors", *releases, host=on("575.57.08", "8.6"))
    assert finding.fix == 'pip install "nvidia-curand-cu12==10.3.10.19" in place of nvidia-curand'
    [finding] = findings_of("mixed-majors", *releases, host=on("580.65.06", "8.6"))
    assert finding.fix == ('pip uninstall cupy-cuda12x, then pip install "cupy-cuda13x==14.0.0" (the same CuPy '
                           "release built for CUDA 13; only one CuPy may be installed)")


# -- onnxruntime-gpu: the newest CUDA 12 build, with its companion wheels ------------------------------

ORT_CUDA13 = {  # onnxruntime-gpu[cuda,cudnn] 1.31.1 as pip installed it (the survey's venv), reduced to four wheels
    "nvidia-cuda-runtime": "13.0.96", "nvidia-curand": "10.4.0.35", "nvidia-cudnn-cu13": "9.28.1.4",
    "nvidia-cublas": "13.1.1.3",
}


def onnxruntime(version: str, companions: dict, extras=frozenset({"cuda", "cudnn"})) -> list:
    """onnxruntime-gpu from the table with its [cuda] and [cudnn] extras installed, and the companion
    wheels from the table; cuDNN requires cuBLAS, as the real wheels do."""
    cudnn = next(name for name in companions if name.startswith("nvidia-cudnn"))
    cublas = next(name for name in companions if name.startswith("nvidia-cublas"))
    requires = [f'{name}; extra == "{"cudnn" if name == cudnn else "cuda"}"' for name in companions if name != cublas]
    ort, files = from_table("onnxruntime-gpu", version, *requires)
    planned_ort = (replace(ort, extras=frozenset(extras)), files)
    return [planned_ort] + [from_table(name, release, *([cublas] if name == cudnn else []))
                            for name, release in companions.items()]


def test_onnxruntime_builds_are_read_from_the_binaries_of_the_table():
    """1.27.0 is the first release whose CUDA provider links libcublas.so.13; 1.17 and 1.18 are CUDA 11."""
    built = {w.version: build.cuda.major for w in wheel_facts.releases("onnxruntime-gpu", "x86_64")
             if (build := releases.build_of_release(w)) is not None}
    assert {v: m for v, m in built.items() if v in ("1.17.1", "1.18.1", "1.19.2", "1.26.0", "1.27.0", "1.31.1")} == {
        "1.17.1": 11, "1.18.1": 11, "1.19.2": 12, "1.26.0": 12, "1.27.0": 13, "1.31.1": 13}
    assert releases.build_of_release(wheel_facts.find("onnxruntime-gpu", "1.27.0")).evidence == (
        "onnxruntime-gpu 1.27.0 is a CUDA 13 build: libonnxruntime_providers_cuda.so links libcublas.so.13")


def test_onnxruntime_cuda_13_on_driver_575_names_the_newest_cuda_12_build_with_its_wheels():
    """Driver 575 runs CUDA 12.9 at most: the fix is the driver, or onnxruntime-gpu 1.26.0 with its
    extras and the CUDA 12 wheels in place of the CUDA 13 ones; planned, that set has no error."""
    host = on("575.57.08", "8.9")
    [floor] = [f for f in findings_of("driver-floor", *onnxruntime("1.31.1", ORT_CUDA13), host=host) if f.severity == "error"]
    assert floor.subject == "onnxruntime-gpu 1.31.1"
    assert floor.evidence[-1] == ("its CUDA dependencies need that driver too: nvidia-cublas, nvidia-cuda-runtime, "
                                  "nvidia-cudnn-cu13, nvidia-curand")
    assert floor.fix == (
        "upgrade the driver to >= 580.65.06, or pip uninstall nvidia-cublas nvidia-cuda-runtime nvidia-cudnn-cu13 "
        'nvidia-curand (CUDA 13 wheels), then pip install "onnxruntime-gpu[cuda,cudnn]==1.26.0" '
        '"nvidia-cublas-cu12==12.9.3.13" "nvidia-cuda-runtime-cu12==12.9.79" "nvidia-cudnn-cu12==9.28.0.42" '
        "\"nvidia-curand-cu12==10.3.10.19\" (the newest release in cudaresolve's table built for a CUDA this "
        "driver runs: CUDA 12)")
    fixed = onnxruntime("1.26.0", {"nvidia-cuda-runtime-cu12": "12.9.79", "nvidia-curand-cu12": "10.3.10.19",
                                   "nvidia-cudnn-cu12": "9.28.0.42", "nvidia-cublas-cu12": "12.9.3.13"})
    env = planned(*(d for d, _ in fixed), elf_files=tuple(f for _, files in fixed for f in files))
    assert [f for f in judge(env, host).findings if f.check in ("driver-floor", "mixed-majors", "arch-coverage")] == []
    assert findings_of("driver-floor", *onnxruntime("1.31.1", ORT_CUDA13), host=on("580.65.06", "8.9")) == []


def test_onnxruntime_on_pascal_names_the_newest_release_whose_provider_runs_there():
    """1.31.1's provider carries sm_75 and newer; 1.26.0's sm_60 SASS runs on a GTX 1080, and so does
    cuDNN 9.10.2.21 among its CUDA 12 companions. On a Maxwell GPU (5.0) no release in the table runs."""
    [arch] = [f for f in findings_of("arch-coverage", *onnxruntime("1.31.1", ORT_CUDA13), host=on("580.65.06", "6.1"))
              if f.subject == "onnxruntime-gpu 1.31.1"]
    assert arch.fix == (
        "pip uninstall nvidia-cublas nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-curand (CUDA 13 wheels), then "
        'pip install "onnxruntime-gpu[cuda,cudnn]==1.26.0" "nvidia-cublas-cu12==12.9.3.13" '
        '"nvidia-cuda-runtime-cu12==12.9.79" "nvidia-cudnn-cu12==9.10.2.21" "nvidia-curand-cu12==10.3.10.19" '
        "(the newest release in cudaresolve's table whose device code runs on compute capability 6.1)")
    fixed = onnxruntime("1.26.0", {"nvidia-cuda-runtime-cu12": "12.9.79", "nvidia-curand-cu12": "10.3.10.19",
                                   "nvidia-cudnn-cu12": "9.10.2.21", "nvidia-cublas-cu12": "12.9.3.13"})
    assert [f for f in findings_of("arch-coverage", *fixed, host=on("580.65.06", "6.1")) if f.severity == "error"] == []
    [arch] = [f for f in findings_of("arch-coverage", *onnxruntime("1.31.1", ORT_CUDA13), host=on("580.65.06", "5.0"))
              if f.subject == "onnxruntime-gpu 1.31.1"]
    assert arch.fix == "no release of onnxruntime-gpu in cudaresolve's table runs on compute capability 5.0"


def test_cudnn_for_cuda_13_is_judged_over_every_minor_of_the_table():
    """nvidia-cudnn-cu13 9.12 … 9.28: 9.12 to 9.20 keep sm_70 SASS in some libraries, but in none of
    them in all, so on a V100 (7.0) as on a GTX 1080 no release of the table runs."""
    minors = {tuple(int(p) for p in w.version.split(".")[:2]) for w in wheel_facts.releases("nvidia-cudnn-cu13", "x86_64")}
    assert minors == {(9, minor) for minor in range(12, 29)}
    [finding] = findings_of("arch-coverage", from_table("nvidia-cudnn-cu13", "9.20.0.48"), host=on("580.65.06", "7.0"))
    assert finding.fix == "no release of nvidia-cudnn-cu13 in cudaresolve's table runs on compute capability 7.0"


def test_a_companion_the_table_holds_no_fitting_release_of_is_named_bare_and_said():
    """Where `pick` accepts no release of a companion's wheel, pip's choice of it is unchecked: the
    command names it without a version and says so."""
    fixed = onnxruntime("1.31.1", ORT_CUDA13)
    env = planned(*(d for d, _ in fixed), elf_files=tuple(f for _, files in fixed for f in files))
    command = render_fix(releases.install(env, wheel_facts.find("onnxruntime-gpu", "1.26.0"), lambda names: None))
    assert command == (
        "pip uninstall nvidia-cublas nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-curand (CUDA 13 wheels), then "
        'pip install "onnxruntime-gpu[cuda,cudnn]==1.26.0" "nvidia-cublas-cu12" "nvidia-cuda-runtime-cu12" '
        '"nvidia-cudnn-cu12" "nvidia-curand-cu12" (no release of nvidia-cublas-cu12, nvidia-cuda-runtime-cu12, '
        "nvidia-cudnn-cu12, nvidia-curand-cu12 in cudaresolve's table fits here either)")
