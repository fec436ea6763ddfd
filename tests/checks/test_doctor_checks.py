"""The doctor's checks as pure functions over plain data, and the text/JSON renderers.

Facts are built by hand (Distribution, ElfFile, BinaryFacts, HostFacts), so each test states
exactly the environment it judges; the knowledge tables in data/ supply the CUDA facts.
"""

from __future__ import annotations

import io
import json
import re
from dataclasses import replace
from typing import Optional

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from cudaresolve.arch import ComputeCapability, PtxTarget
from cudaresolve.binary.elf import NO_SECTIONS
from cudaresolve.binary.facts import BinaryFacts, FatbinSummary, Symbol, SymbolTable
from cudaresolve.checks import Diagnosis, arch_coverage, duplicates, judge, mixed_majors
from cudaresolve.checks import advisories as advisory_check
from cudaresolve.checks.builds import cuda_builds
from cudaresolve.checks.driver_floor import check_driver_floor
from cudaresolve.checks.evidence import BuiltWith, Needs, Said
from cudaresolve.checks.findings import Check, Finding, Severity, exit_code, sort_findings
from cudaresolve.checks.fixes import AdvisoryFix, DriverUpgrade
from cudaresolve.checks.loading import load_packages
from cudaresolve.checks.problems import DriverTooOld, KnownBadRelease, Owner, PluginLibrariesMissing, PrivateCopies
from cudaresolve.checks.subjects import Subject
from cudaresolve.env.distributions import Distribution, Problem
from cudaresolve.env.environment import ElfFile, Environment, installed_extras
from cudaresolve.env.interpreter import Target
from cudaresolve.host.facts import Driver, Gpu, HostFacts, Note
from cudaresolve.knowledge import advisories, toolkits
from cudaresolve.output.doctor import render_json, render_text, use_colour
from cudaresolve.output.findings import FindingText, report_order, shown, version_list
from cudaresolve.versions import CudaVersion, DriverRelease

SP = "/env/site-packages"
MARKERS = {  # CPython 3.11 on x86_64 Linux
    "implementation_name": "cpython", "implementation_version": "3.11.7", "os_name": "posix",
    "platform_machine": "x86_64", "platform_python_implementation": "CPython", "platform_release": "6.1.0",
    "platform_system": "Linux", "platform_version": "#1 SMP", "python_full_version": "3.11.7",
    "python_version": "3.11", "sys_platform": "linux",
}


def advisory_named(advisory_id: str) -> advisories.Advisory:
    return next(a for a in advisories.load() if a.id == advisory_id)


def dist(name: str, version: str, *requires: str) -> Distribution:
    return Distribution(
        name=canonicalize_name(name),
        version=Version(version),
        requires=tuple(Requirement(r) for r in requires),
        installer="pip",
        dist_info=f"{SP}/{name.replace('-', '_')}-{version}.dist-info",
        files=(),
    )


def facts(path: str, *, needed: tuple[str, ...] = (), fatbin: Optional[FatbinSummary] = None,
          soname: Optional[str] = None, undefined: tuple[Symbol, ...] = (), runpath: tuple[str, ...] = ()) -> BinaryFacts:
    return BinaryFacts(
        path=path, machine="x86_64", elf_type="DYN", soname=soname, needed=needed, rpath=(), runpath=runpath,
        flags=0, flags_1=0, symbols=SymbolTable.of(undefined), version_definitions=(), version_needs=(),
        build_id=None, fatbin=fatbin,
    )


def elf(relpath: str, owner: str, **kw) -> ElfFile:
    path = f"{SP}/{relpath}"
    return ElfFile(path, (owner,), facts(path, **kw), None)


def environment(*dists: Distribution, elf_files: tuple[ElfFile, ...] = (), problems=()) -> Environment:
    """An installed environment as the scan builds it: extras whose requirements are installed count as installed."""
    installed = {d.name: d.version for d in dists}
    dists = tuple(replace(d, extras=installed_extras(d, installed, MARKERS)) for d in dists)
    return Environment(
        target=Target(site_packages=(SP,), markers=tuple(sorted(MARKERS.items()))),
        distributions=tuple(sorted(dists, key=lambda d: d.name)),
        elf_files=tuple(sorted(elf_files, key=lambda e: e.path)),
        problems=tuple(problems),
    )


def host(release: Optional[str] = None, *ccs: str, cuda: Optional[str] = None) -> HostFacts:
    driver = DriverRelease.parse(release) if release is not None else None
    reports = CudaVersion.parse(cuda) if cuda is not None else driver and toolkits.max_cuda_for_driver(driver)
    return HostFacts(
        system="Linux",
        machine="x86_64",
        driver=Driver(driver, "override:--driver" if driver else None, reports, "test" if reports else None),
        gpus=tuple(Gpu(ComputeCapability.parse(cc), "override:--gpu", index) for index, cc in enumerate(ccs)),
    )


def fatbin(*sass: str, ptx: tuple[tuple[str, str], ...] = (), entries: int = 40) -> FatbinSummary:
    return FatbinSummary(
        sass=sass, ptx=tuple(PtxTarget(t, isa) for t, isa in ptx), entries=entries, containers=entries,
        sections=(".nv_fatbin",),
    )


INSUFFICIENT = '"CUDA driver version is insufficient for CUDA runtime version"'
NO_KERNEL = '"no kernel image is available for execution on the device"'


def cu126_fix(version: str, replaced: str = "") -> str:
    """torch's cu126 variant; `replaced`: the other major's wheels torch pulls in, uninstalled first."""
    return (f"pip uninstall {replaced}, then " if replaced else "") + (
        f"install the cu126 variant: torch=={version}+cu126 from the PyTorch index (whl/cu126), "
        "with its matching CUDA wheels")


# -- driver-floor ------------------------------------------------------------------------------------


def worded(check):
    """A check whose findings come back as a report words them."""

    def run(*args) -> list[FindingText]:
        return [shown(finding) for finding in check(*args)]

    return run


check_advisories = worded(advisory_check.check_advisories)
check_arch_coverage = worded(arch_coverage.check_arch_coverage)
check_unreadable_device_code = worded(arch_coverage.check_unreadable_device_code)
check_duplicate_libraries = worded(duplicates.check_duplicate_libraries)
check_mixed_majors = worded(mixed_majors.check_mixed_majors)


def driver_floor(env: Environment, on: HostFacts) -> list[FindingText]:
    return [shown(finding) for finding in check_driver_floor(env, cuda_builds(env), on)]


def test_driver_floor_native_is_silent():
    env = environment(dist("torch", "2.8.0"))  # the PyPI build: cu128
    assert driver_floor(env, host("570.124.06")) == []
    assert driver_floor(env, host("580.65.06")) == []


def test_driver_floor_minor_version_compat_is_a_warning():
    env = environment(dist("torch", "2.8.0"))
    assert driver_floor(env, host("550.144.03")) == [
        FindingText(
            "driver-floor",
            "warning",
            "torch 2.8.0",
            "CUDA 12.8 runs on driver 550.144.03 only by minor-version compatibility "
            "(PTX from the newer toolkit cannot be JIT-compiled)",
            ("torch 2.8.0 is the PyPI build, built with CUDA 12.8", "host has driver 550.144.03, CUDA 12.4"),
            "upgrade the driver to >= 570.26 for native support",
        )
    ]


def test_driver_floor_pins_a_cuda_versioned_component_to_the_drivers_cuda_where_nothing_forbids_it():
    """nvJitLink 13.5 on a CUDA 13.0 driver: the newest 13.0 release (data/components.toml) fits the
    installed requirements and binaries; one a binary or a requirement rules out is not proposed."""
    toolkit = dist("cuda-toolkit", "13.0.3", "nvidia-nvjitlink<14,>=13.0.88")
    on_580 = host("580.65.06")
    [finding] = driver_floor(environment(toolkit, dist("nvidia-nvjitlink", "13.5.37")), on_580)
    assert (finding.severity, finding.fix) == ("warning", 'pin it to the driver\'s CUDA: pip install "nvidia-nvjitlink==13.0.88"')
    needs_13_5 = elf("app/_ext.so", "app", undefined=(
        Symbol("__nvJitLinkCreate_13_5", "libnvJitLink.so.13", "libnvJitLink.so.13"),))
    [finding] = driver_floor(environment(toolkit, dist("nvidia-nvjitlink", "13.5.37"), dist("app", "1.0"),
                                         elf_files=(needs_13_5,)), on_580)
    assert finding.fix is None
    too_new = dist("cuda-toolkit", "13.5.0", "nvidia-nvjitlink>=13.5")
    [finding] = driver_floor(environment(too_new, dist("nvidia-nvjitlink", "13.5.37")), on_580)
    assert finding.fix is None


def test_driver_floor_reads_a_library_versioned_wheels_cuda_from_the_toolkit_pins_and_pins_its_dependencies_too():
    """cuFFT 12.5.0.14 is the one cuda-toolkit 13.5.0 pins: CUDA 13.5, minor-version compatibility on
    a CUDA 13.0 driver. Its fix pins it and the nvJitLink folded into it to what the 13.0 toolkits pin
    (pinning cuFFT alone would leave nvJitLink 13.5 behind)."""
    env = environment(dist("nvidia-cufft", "12.5.0.14", "nvidia-nvjitlink"), dist("nvidia-nvjitlink", "13.5.37"))
    [finding] = driver_floor(env, host("580.65.06"))
    assert finding.evidence == ("nvidia-cufft 12.5.0.14 is the CUDA 13.5 cufft (by the releases cuda-toolkit pins)",
                                "host has driver 580.65.06, CUDA 13.0",
                                "its CUDA dependencies need that driver too: nvidia-nvjitlink")
    assert finding.fix == ('pin them to the driver\'s CUDA: pip install "nvidia-cufft==12.0.0.61" '
                           '"nvidia-nvjitlink==13.0.88"')
    # the cuFFT CUDA 13.0's toolkits pin is native there: nothing to say
    assert driver_floor(environment(dist("nvidia-cufft", "12.0.0.61")), host("580.65.06")) == []


def test_a_package_the_tables_do_not_know_is_a_cuda_build_of_the_libraries_its_binaries_link():
    """onnxruntime-gpu's CUDA provider links libcublas.so.13: a CUDA 13 build, which driver 575 (CUDA
    12.9) cannot run, whatever its metadata says; on driver 580 it runs."""
    provider = elf("onnxruntime/capi/libonnxruntime_providers_cuda.so", "onnxruntime-gpu",
                   needed=("libcublas.so.13", "libcublasLt.so.13", "libcudart.so.13", "libcurand.so.10"))
    env = environment(dist("onnxruntime-gpu", "1.31.0"), elf_files=(provider,))
    [build] = cuda_builds(env)
    assert (build.dist, str(build.cuda)) == ("onnxruntime-gpu", "13")
    assert build.evidence == "onnxruntime-gpu 1.31.0 is a CUDA 13 build: libonnxruntime_providers_cuda.so links libcublas.so.13"
    [floor] = driver_floor(env, host("575.57.08"))
    assert (floor.severity, floor.subject) == ("error", "onnxruntime-gpu 1.31.0")
    assert floor.message.startswith("built for CUDA 13: driver 575.57.08 < 580.65.06 (CUDA 13.x floor)")
    assert driver_floor(env, host("580.65.06")) == []
    # linking two majors, the package is left undecided
    both = replace(provider, facts=replace(provider.facts, needed=("libcublas.so.13", "libcudart.so.12")))
    assert cuda_builds(environment(dist("onnxruntime-gpu", "1.31.0"), elf_files=(both,))) == ()


def test_a_cuda_13_build_beside_cuda_12_wheels_is_one_mixed_majors_error_naming_both_sides():
    """onnxruntime-gpu's provider links libcublas.so.13, the environment has nvidia-cublas-cu12: the
    loader finds nothing, and the finding says which majors meet, once (not as a missing library)."""
    provider = elf("onnxruntime/capi/libonnxruntime_providers_cuda.so", "onnxruntime-gpu",
                   needed=("libcublas.so.13",))
    env = environment(dist("onnxruntime-gpu", "1.31.1"), dist("nvidia-cublas-cu12", "12.9.2.10"),
                      elf_files=(provider, elf("nvidia/cublas/lib/libcublas.so.12", "nvidia-cublas-cu12",
                                               soname="libcublas.so.12")))
    findings = [shown(finding) for finding in judge(env, host("580.65.06", "8.9")).findings]
    assert [(f.severity, f.check, f.subject) for f in findings if f.severity == "error"] == [
        ("error", "mixed-majors", "onnxruntime-gpu 1.31.1")]
    [mixed] = [f for f in findings if f.check == "mixed-majors"]
    assert mixed.message == "links CUDA 13 libraries, but the environment's wheels of them are CUDA 12"
    assert mixed.evidence == ("libonnxruntime_providers_cuda.so needs libcublas.so.13; installed: nvidia-cublas-cu12",)
    # either side, as releases of the wheel-facts table the driver runs natively (580: CUDA 13.0)
    assert mixed.fix == ('pip install "nvidia-cublas==13.1.2.11" in place of nvidia-cublas-cu12, or '
                         'pip install "onnxruntime-gpu==1.26.0" (the newest CUDA 12 build of onnxruntime-gpu in '
                         "cudaresolve's table)")


def test_driver_floor_names_the_wheel_of_the_drivers_cuda_major():
    """cuSPARSE for CUDA 12 on driver 470 (CUDA 11.4): the CUDA 11 wheel is nvidia-cusparse-cu11."""
    [finding] = driver_floor(environment(dist("nvidia-cusparse-cu12", "12.3.1.170")), host("470.57.02"))
    assert finding.fix == ('upgrade the driver to >= 525.60.13, or use the CUDA 11 build instead: '
                           'pip install "nvidia-cusparse-cu11==11.7.5.86" in place of nvidia-cusparse-cu12')
    # required by another package: that package must change, not the wheel under it
    env = environment(dist("nvidia-cusparse-cu12", "12.3.1.170"), dist("app", "1.0", "nvidia-cusparse-cu12"))
    [finding] = driver_floor(env, host("470.57.02"))
    assert finding.fix == "upgrade the driver to >= 525.60.13, or install a build of app for CUDA 11.4"


def test_driver_floor_cu121_on_driver_470_is_an_error_naming_a_variant_the_driver_runs():
    env = environment(dist("torch", "2.1.0+cu121"))
    assert driver_floor(env, host("470.82.01")) == [
        FindingText(
            "driver-floor",
            "error",
            "torch 2.1.0+cu121",
            "built for CUDA 12.1: driver 470.82.01 < 525.60.13 (CUDA 12.x floor): "
            + INSUFFICIENT,
            ("torch 2.1.0+cu121 is +cu121, built with CUDA 12.1", "host has driver 470.82.01, CUDA 11.4"),
            "upgrade the driver to >= 525.60.13, or install the cu118 variant: torch==2.1.0+cu118 from the "
            "PyTorch index (whl/cu118), with its matching CUDA wheels",
        )
    ]


def test_driver_floor_folds_the_cuda_wheels_a_failing_package_requires():
    env = environment(
        dist("torch", "2.14.1", "cuda-toolkit[cublas,cudart]==13.0.3"),
        dist("cuda-toolkit", "13.0.3", 'nvidia-cublas==13.1.1.3; extra == "cublas"',
             'nvidia-cuda-runtime==13.0.96; extra == "cudart"'),
        dist("nvidia-cublas", "13.1.1.3"),
        dist("nvidia-cuda-runtime", "13.0.96"),
        dist("nvidia-cufft", "12.0.0.61"),  # required by nothing: a finding of its own
    )
    found = driver_floor(env, host("550.144.03", "8.9"))
    assert [(f.severity, f.subject) for f in sorted(found, key=report_order)] == [
        ("error", "nvidia-cufft 12.0.0.61"),
        ("error", "torch 2.14.1"),
    ]
    [torch] = [f for f in found if f.subject == "torch 2.14.1"]
    assert torch.evidence == (
        "torch 2.14.1 is the PyPI build, built with CUDA 13.0",
        "host has driver 550.144.03, CUDA 12.4",
        "its CUDA dependencies need that driver too: nvidia-cublas, nvidia-cuda-runtime",
    )
    # pip would leave the CUDA 13 wheels beside the variant's CUDA 12 ones: uninstalled first
    assert torch.fix == "upgrade the driver to >= 580.65.06, or " + cu126_fix(
        "2.14.1", "nvidia-cublas nvidia-cuda-runtime (CUDA 13 wheels)")
    [cufft] = [f for f in found if f.subject == "nvidia-cufft 12.0.0.61"]
    # the newest CUDA 12 cuFFT that driver 550 (CUDA 12.4) runs natively: the one cuda-toolkit 12.4 pins
    assert cufft.fix == "upgrade the driver to >= 580.65.06, or use the CUDA 12 build instead: pip install \"nvidia-cufft-cu12==11.2.1.3\" in place of nvidia-cufft"


def test_driver_floor_from_the_driver_cuda_version_alone():
    """CONDA_OVERRIDE_CUDA-style hosts: no release, only the CUDA version the driver supports."""
    env = environment(dist("nvidia-cuda-runtime-cu12", "12.8.90"), dist("nvidia-cublas", "13.1.1.3"))
    found = driver_floor(env, host(None, cuda="12.4"))
    assert [(f.severity, f.subject, f.message.split(" (")[0]) for f in sorted(found, key=report_order)] == [
        # the cuBLAS cuda-toolkit 13.0.3.0 pins
        ("error", "nvidia-cublas 13.1.1.3", "built for CUDA 13.0: the driver's CUDA 12.4 < 580.65.06"),
        ("warning", "nvidia-cuda-runtime-cu12 12.8.90", "CUDA 12.8 runs on the driver's CUDA 12.4 only by minor-version compatibility"),
    ]
    assert driver_floor(env, host()) == []  # nothing known about the driver: nothing to judge


# -- mixed-majors ------------------------------------------------------------------------------------


def family(torch_version: str = "2.14.1") -> Environment:
    """torch with the CUDA 13 runtime wheel it pulls in, torchvision (pinning torch) and torchaudio (pinning
    nothing), each extension linking libcudart.so.13, and xformers (pinning torch) linking libcudart.so.12."""
    return environment(
        dist("torch", torch_version, "cuda-toolkit[cudart]==13.0.3"),
        dist("cuda-toolkit", "13.0.3", 'nvidia-cuda-runtime==13.0.96; extra == "cudart"'),
        dist("nvidia-cuda-runtime", "13.0.96"),
        dist("torchvision", "0.29.1", "torch==2.14.1"),
        dist("torchaudio", "2.11.0"),
        elf_files=(elf("torchvision/_C.so", "torchvision", needed=("libcudart.so.13",), fatbin=fatbin("sm_75", "sm_120")),
                   elf("torchaudio/lib/_torchaudio.abi3.so", "torchaudio", needed=("libcudart.so.13",),
                       fatbin=fatbin("sm_75", "sm_120")),
                   elf("torch/lib/libtorch_cuda.so", "torch", fatbin=fatbin("sm_75", "sm_120"))),
    )


FAMILY_CU126 = ("pip uninstall nvidia-cuda-runtime (CUDA 13 wheels), then install the cu126 variant: torch==2.14.1+cu126 "
                "torchvision==0.29.1+cu126 torchaudio==2.11.0+cu126 from the PyTorch index (whl/cu126), with their "
                "matching CUDA wheels")


def test_torch_extensions_failing_with_torch_fold_into_torch_and_move_with_its_variant():
    """torchvision and torchaudio builds follow torch's variant: one finding, torch's, and one fix that
    moves all three (the extensions as subjects named no release: "a build of torchvision for CUDA 12.9")."""
    [error] = driver_floor(family(), host("575.57.08", "8.6"))
    assert error.subject == "torch 2.14.1"
    assert error.evidence[-2:] == ("its CUDA dependencies need that driver too: nvidia-cuda-runtime",
                                   "the packages built for its variant need that driver too: torchaudio, torchvision")
    assert error.fix == "upgrade the driver to >= 580.65.06, or " + FAMILY_CU126
    [error] = [f for f in check_arch_coverage(family(), cuda_builds(family()), host("580.65.06", "6.1")) if f.severity == "error"]
    assert error.subject == "torch 2.14.1"
    assert error.evidence[-1] == "the packages built for its variant lack code for 6.1 too: torchaudio, torchvision"
    assert error.fix == FAMILY_CU126


def test_the_variant_fix_reinstalls_a_twin_whose_files_its_uninstall_deletes():
    """jax[cuda12], then torch: nvidia-cudnn-cu12 (JAX's) and -cu13 (torch's) install one libcudnn.so.9.
    Uninstalling the cu13 wheel deletes that file, and pip counts the cu12 wheel as installed: the fix
    reinstalls it after the variant (applied in the survey's stack: JAX's cuDNN files are back)."""
    from cudaresolve.env.ownership import Claim, SharedFile

    env = environment(
        dist("torch", "2.14.1", "nvidia-cudnn-cu13==9.24.0.43"),
        dist("nvidia-cudnn-cu13", "9.24.0.43"),
        dist("nvidia-cudnn-cu12", "9.28.0.42"),
        dist("jax-cuda12-plugin", "0.10.2", "nvidia-cudnn-cu12>=9.8"),
        elf_files=(elf("torch/lib/libtorch_cuda.so", "torch", needed=("libcudart.so.13",), fatbin=fatbin("sm_75", "sm_120")),),
    )
    env = replace(env, shared_files=(SharedFile(f"{SP}/nvidia/cudnn/lib/libcudnn.so.9", (
        Claim("nvidia-cudnn-cu12", Version("9.28.0.42"), "sha256=a"), Claim("nvidia-cudnn-cu13", Version("9.24.0.43"), "sha256=b"))),))
    [error] = [f for f in check_arch_coverage(env, cuda_builds(env), host("580.65.06", "6.1")) if f.severity == "error"]
    assert error.subject == "torch 2.14.1"
    assert error.fix.startswith("pip uninstall nvidia-cudnn-cu13 (CUDA 13 wheels), then install the cu126 variant: ")
    assert error.fix.endswith(', then pip install --force-reinstall --no-deps "nvidia-cudnn-cu12==9.28.0.42"')


def test_a_torch_extension_failing_alone_gets_torchs_variant_fix():
    """torch's cu126 build runs on driver 575, torchvision's default (CUDA 13) build does not: torchvision
    is the subject, and its fix is the family's variant (torch's own requirement already met)."""
    env = environment(
        dist("torch", "2.14.1+cu126"),
        dist("torchvision", "0.29.1", "torch==2.14.1"),
        elf_files=(elf("torchvision/_C.so", "torchvision", needed=("libcudart.so.13",)),),
    )
    [error] = driver_floor(env, host("575.57.08", "8.6"))
    assert error.subject == "torchvision 0.29.1"
    assert error.fix == ("upgrade the driver to >= 580.65.06, or install the cu126 variant: torch==2.14.1+cu126 "
                         "torchvision==0.29.1+cu126 from the PyTorch index (whl/cu126), with their matching CUDA wheels")


def test_torch_is_not_folded_into_an_extension_built_on_it():
    """xformers requires torch; both lack code for 6.1. torch's cause has a fix (its variant), xformers'
    has not: one finding each, torch's CUDA wheels in torch's."""
    env = environment(
        dist("torch", "2.14.1", "cuda-toolkit[cudart]==13.0.3"),
        dist("cuda-toolkit", "13.0.3", 'nvidia-cuda-runtime==13.0.96; extra == "cudart"'),
        dist("nvidia-cuda-runtime", "13.0.96"),
        dist("xformers", "0.0.35", "torch==2.14.1"),
        elf_files=(elf("torch/lib/libtorch_cuda.so", "torch", fatbin=fatbin("sm_75", "sm_120")),
                   elf("nvidia/cu13/lib/libcudart.so.13", "nvidia-cuda-runtime", fatbin=fatbin("sm_75")),
                   elf("xformers/_C.so", "xformers", needed=("libcudart.so.12",), fatbin=fatbin("sm_75", "sm_80"))),
    )
    found = {f.subject: f for f in check_arch_coverage(env, cuda_builds(env), host("580.65.06", "6.1")) if f.severity == "error"}
    assert set(found) == {"torch 2.14.1", "xformers 0.0.35"}
    assert found["torch 2.14.1"].evidence[-1] == "its CUDA dependencies lack code for 6.1 too: nvidia-cuda-runtime"
    assert found["torch 2.14.1"].fix == cu126_fix("2.14.1", "nvidia-cuda-runtime (CUDA 13 wheels)")
    assert not any("torch" in line for line in found["xformers 0.0.35"].evidence)


def test_mixed_majors_cupy_cuda12x_beside_torch_cu13():
    env = environment(dist("cupy-cuda12x", "14.0.0"), dist("torch", "2.14.1"))
    assert check_mixed_majors(env, cuda_builds(env), host()) == [
        FindingText(
            "mixed-majors",
            "error",
            "environment",
            "packages need different CUDA majors (12, 13); two CUDA runtimes in one process do not share "
            "contexts, memory or streams",
            ("CUDA 12: cupy-cuda12x", "CUDA 13: torch"),
            'pip uninstall cupy-cuda12x, then pip install "cupy-cuda13x==14.0.0" (the same CuPy release built '
            "for CUDA 13; only one CuPy may be installed)",
        )
    ]
    # CuPy 13.0.0 had no CUDA 13 build (cupy-cuda13x starts at 13.6.0): rather than naming the package
    # to find a build of, torch moves to CUDA 12 through its variant (a release and an index)
    env = environment(dist("cupy-cuda12x", "13.0.0"), dist("torch", "2.14.1"))
    [finding] = check_mixed_majors(env, cuda_builds(env), host())
    assert finding.fix == cu126_fix("2.14.1")


def test_mixed_majors_counts_extension_modules_linking_a_cudart():
    env = environment(
        dist("torch", "2.14.1"),
        dist("my-ext", "1.0"),
        elf_files=(elf("my_ext/_C.so", "my-ext", needed=("libcudart.so.12", "libc.so.6")),),
    )
    [finding] = check_mixed_majors(env, cuda_builds(env), host())
    assert finding.evidence == ("CUDA 12: my-ext", "CUDA 13: torch")
    assert finding.fix == cu126_fix("2.14.1")  # not "install the CUDA 13 builds of: my-ext": no release, no index
    # where neither move names a release, the packages of the other majors than the newest are named
    env = environment(
        dist("other-ext", "1.0"),
        dist("my-ext", "1.0"),
        elf_files=(elf("my_ext/_C.so", "my-ext", needed=("libcudart.so.12", "libc.so.6")),
                   elf("other_ext/_C.so", "other-ext", needed=("libcudart.so.13", "libc.so.6"))),
    )
    [finding] = check_mixed_majors(env, cuda_builds(env), host())
    assert finding.fix == "install the CUDA 13 builds of: my-ext"
    one_major = environment(dist("cupy-cuda12x", "14.0.0"), dist("torch", "2.8.0"))
    assert check_mixed_majors(one_major, cuda_builds(one_major), host()) == []


# -- advisories --------------------------------------------------------------------------------------


def advisory_ids(env: Environment, on: HostFacts) -> set[str]:
    """The advisories that apply, by their id: a finding's field, not its words."""
    found = advisory_check.check_advisories(env, on, cuda_builds(env))
    assert {f.check for f in found} <= {Check.ADVISORY}
    return {f.problem.advisory for f in found if isinstance(f.problem, KnownBadRelease)}


def test_advisory_numba_0_59_0_cooperative_groups_cache():
    env = environment(dist("numba", "0.59.0"))
    assert advisory_ids(env, host("570.124.06")) == {"numba-0.59.0-cg-cache"}
    assert advisory_ids(env, host("580.65.06")) == {"numba-0.59.0-cg-cache", "numba-driver-580"}
    [finding] = check_advisories(env, host(), ())
    assert finding.subject == "numba 0.59.0"
    assert finding.fix == advisory_named("numba-0.59.0-cg-cache").fix
    assert finding.evidence == ("numba/numba#9432", "numba/numba#9447")
    assert advisory_ids(environment(dist("numba", "0.59.1")), host("570.124.06")) == set()


def test_advisory_numba_0_61_2_on_driver_580_unless_numba_cuda():
    numba = dist("numba", "0.61.2")
    assert advisory_ids(environment(numba), host("580.65.06")) == {"numba-driver-580", "numba-builtin-deprecated"}
    assert advisory_ids(environment(numba), host("570.124.06")) == {"numba-builtin-deprecated"}
    assert advisory_ids(environment(numba, dist("numba-cuda", "0.22.2")), host("580.65.06")) == set()
    assert advisory_ids(environment(dist("numba", "0.63.0")), host("580.65.06")) == {"numba-builtin-deprecated"}


def test_advisory_conditions_on_variant_and_gpu():
    assert advisory_ids(environment(dist("torch", "2.14.1")), host("580.65.06", "6.1")) == {"pascal-cu128"}
    # cu126 carries Pascal SASS; nvJitLink skew is the symbol-skew check's to find, from the binaries.
    assert advisory_ids(environment(dist("torch", "2.14.1+cu126")), host("580.65.06", "6.1")) == set()
    assert advisory_ids(environment(dist("torch", "2.11.0+cu128")), host("580.65.06", "7.0")) == {"volta-cu128-2.11"}


def test_advisory_on_references_needs_a_binary_that_makes_them():
    """nvjitlink-no-inline: nvJitLink 12.0-12.2 exports no unversioned names, which only binaries
    built with NVJITLINK_NO_INLINE call; an old nvJitLink alone is not the problem."""
    old, new = dist("nvidia-nvjitlink-cu12", "12.1.105"), dist("nvidia-nvjitlink-cu12", "12.8.93")
    node = "libnvJitLink.so.12"
    inline = elf("cusparse/libcusparse.so.12", "cusparse", undefined=(Symbol("__nvJitLinkComplete_12_4", node, node),))
    no_inline = elf("app/_ext.so", "app", undefined=(
        Symbol("malloc", "GLIBC_2.2.5", "libc.so.6"), Symbol("nvJitLinkDestroy", node, node),
        Symbol("nvJitLinkCreate", node, node)))
    unversioned = elf("other/_ext.so", "other", undefined=(Symbol("nvJitLinkDestroy"),))
    weak = elf("weak/_ext.so", "weak", undefined=(Symbol("nvJitLinkDestroy", node, node, binding="WEAK"),))
    assert advisory_ids(environment(old, elf_files=(inline, unversioned, weak)), host()) == set()
    assert advisory_ids(environment(new, elf_files=(inline, no_inline)), host()) == set()
    [finding] = check_advisories(environment(old, elf_files=(inline, no_inline)), host(), ())
    assert finding.subject == "nvidia-nvjitlink-cu12 12.1.105"
    assert finding.message.startswith("known problem nvjitlink-no-inline: undefined symbol: nvJitLinkDestroy")
    assert finding.evidence == ("NVIDIA/cccl#10083", f"{SP}/app/_ext.so references nvJitLinkDestroy@libnvJitLink.so.12")


# -- arch-coverage -----------------------------------------------------------------------------------


def test_arch_coverage_folds_the_cuda_wheels_into_the_package_that_requires_them():
    env = environment(
        dist("torch", "2.14.1", "nvidia-cublas==13.1.1.3"),
        dist("nvidia-cublas", "13.1.1.3"),
        dist("other-kernels", "1.0"),
        elf_files=(
            elf("torch/lib/libtorch_cuda.so", "torch", fatbin=fatbin("sm_75", "sm_80", "sm_90")),
            elf("torch/lib/libtorch_cuda_linalg.so", "torch", fatbin=fatbin("sm_80", "sm_90")),
            elf("nvidia/cu13/lib/libcublas.so.13", "nvidia-cublas",
                fatbin=fatbin("sm_75", "sm_120", ptx=(("compute_120", "9.0"),))),
            elf("other_kernels/libk.so", "other-kernels", fatbin=fatbin("sm_86")),
            elf("plain/libplain.so", "other-kernels"),  # no device code: never judged
        ),
    )
    found = check_arch_coverage(env, cuda_builds(env), host("580.65.06", "6.1"))
    assert [f.subject for f in found] == ["other-kernels 1.0", "torch 2.14.1"]
    torch = found[1]
    assert torch == FindingText(
        "arch-coverage",
        "error",
        "torch 2.14.1",
        f"no kernel image for compute capability 6.1 (GPU 0): {NO_KERNEL}",
        (
            f"{SP}/torch/lib/libtorch_cuda.so: no SASS for compute capability 6.1 and no usable PTX "
            "(has sm_90, sm_80, sm_75)",
            f"{SP}/torch/lib/libtorch_cuda_linalg.so: no SASS for compute capability 6.1 and no usable PTX "
            "(has sm_90, sm_80)",
            "its CUDA dependencies lack code for 6.1 too: nvidia-cublas",
        ),
        cu126_fix("2.14.1", "nvidia-cublas (CUDA 13 wheels)"),
    )
    assert found[0].fix == ("use a build made with CUDA <= 12.9 (the newest toolkit that still targets 6.1 and this "
                            "driver runs)")
    # on an RTX 3090 with driver 550 (CUDA 12.4), CUDA 13 still targets 8.6, but the driver cannot run it
    env = environment(dist("other-kernels", "1.0"), elf_files=(elf("k/libk.so", "other-kernels", fatbin=fatbin("sm_90")),))
    [finding] = check_arch_coverage(env, cuda_builds(env), host("550.144.03", "8.6"))
    assert finding.fix == ("use a build made with CUDA <= 12.9 (the newest toolkit that still targets 8.6 and this "
                           "driver runs)")


def test_libraries_of_an_opt_in_feature_lacking_a_gpu_are_one_warning_naming_the_feature():
    env = environment(
        dist("torch", "2.14.1", "nvidia-nvshmem-cu12"),
        dist("nvidia-nvshmem-cu12", "3.4.5"),
        elf_files=(elf("torch/lib/libtorch_cuda.so", "torch", fatbin=fatbin("sm_61", "sm_90")),
                   elf("torch/lib/libtorch_nvshmem.so", "torch", fatbin=fatbin("sm_90")),
                   elf("nvidia/nvshmem/lib/libnvshmem_host.so.3", "nvidia-nvshmem-cu12", fatbin=fatbin("sm_90"))),
    )
    [finding] = check_arch_coverage(env, cuda_builds(env), host("580.65.06", "6.1"))
    assert (finding.severity, finding.subject) == ("warning", "torch 2.14.1")
    assert finding.message == ("opt-in feature unavailable on compute capability 6.1: NVSHMEM symmetric memory "
                               "(torch.distributed._symmetric_memory) has no kernel image for it")
    assert [line.split(":")[0] for line in finding.evidence] == [
        f"{SP}/nvidia/nvshmem/lib/libnvshmem_host.so.3", f"{SP}/torch/lib/libtorch_nvshmem.so"]


def test_an_opt_in_feature_is_the_installed_package_s():
    """NVSHMEM beside JAX without torch (jax[cuda12] on a GTX 1080) serves XLA's opt-in collectives,
    not torch's symmetric memory: the warning names the plugin, never a torch that is not installed.
    With no package installed that uses it as an opt-in, the library is judged as any other."""
    nvshmem = elf("nvidia/nvshmem/lib/libnvshmem_host.so.3", "nvidia-nvshmem-cu12", fatbin=fatbin("sm_70", "sm_90"))
    env = environment(dist("jax-cuda12-plugin", "0.10.2", "nvidia-nvshmem-cu12"), dist("nvidia-nvshmem-cu12", "3.8.0"),
                      elf_files=(nvshmem,))
    [finding] = check_arch_coverage(env, cuda_builds(env), host("580.65.06", "6.1"))
    assert (finding.severity, finding.subject) == ("warning", "jax-cuda12-plugin 0.10.2")
    assert finding.message == ("opt-in feature unavailable on compute capability 6.1: NVSHMEM collectives "
                               "(XLA flag --xla_gpu_experimental_enable_nvshmem) has no kernel image for it")
    env = environment(dist("nvidia-nvshmem-cu12", "3.8.0"), elf_files=(nvshmem,))
    [finding] = check_arch_coverage(env, cuda_builds(env), host("580.65.06", "6.1"))
    assert (finding.severity, finding.subject) == ("error", "nvidia-nvshmem-cu12 3.8.0")


def test_unreadable_device_code_is_said_not_taken_for_none():
    note = ".nv_fatbin: device code unreadable from container 7 (offset 0x1a2b0) on: entry chain overruns fat_size"
    damaged = FatbinSummary(sass=("sm_80",), entries=6, containers=6, sections=(".nv_fatbin",), damage=(note,))
    env = environment(
        dist("pkg", "1.0"),
        elf_files=(elf("pkg/libk.so", "pkg", fatbin=damaged),
                   elf("pkg/libstripped.so", "pkg", fatbin=FatbinSummary(damage=(NO_SECTIONS,))),
                   elf("pkg/libplain.so", "pkg")),
    )
    assert check_unreadable_device_code(env) == [
        FindingText("environment", "warning", f"{SP}/pkg/libk.so",
                f"device code partly unreadable ({note}): its GPU coverage is judged on what could be read",
                (note, "installed by pkg 1.0")),
        FindingText("environment", "info", "pkg 1.0",
                "1 library has no section header table: its device code, if any, could not be looked for",
                (f"{SP}/pkg/libstripped.so",)),
    ]


def test_an_arch_fix_never_describes_what_the_installed_build_already_is():
    """cuDNN for CUDA 12 lacking sm_61: "a build made with CUDA <= 12.9" is already true of it; the
    fix names the newest release of the wheel-facts table whose libraries all carry sm_61 SASS."""
    env = environment(dist("nvidia-cudnn-cu12", "9.28.0.42"),
                      elf_files=(elf("nvidia/cudnn/lib/libcudnn_ops.so.9", "nvidia-cudnn-cu12",
                                     fatbin=fatbin("sm_75", "sm_80", "sm_90a")),))
    [finding] = check_arch_coverage(env, cuda_builds(env), host("580.65.06", "6.1"))
    assert finding.fix == ('pip install "nvidia-cudnn-cu12==9.10.2.21" (the newest release in cudaresolve\'s table '
                           "whose device code runs on compute capability 6.1)")
    # a package the table does not know keeps the description, which its build does not already meet
    env = environment(dist("nvidia-cudnn-cu11", "9.1.0.70"),
                      elf_files=(elf("nvidia/cudnn/lib/libcudnn_ops.so.9", "nvidia-cudnn-cu11", fatbin=fatbin("sm_75")),))
    [finding] = check_arch_coverage(env, cuda_builds(env), host("580.65.06", "6.1"))
    assert finding.fix.startswith("nvidia-cudnn-cu11 9.1.0.70 is built with CUDA 11 and still lacks code for 6.1")


def test_a_package_requiring_itself_with_extras_is_not_its_own_dependency():
    """cuda-cccl[cu12] requires cuda-cccl: its arch finding's evidence names no dependency."""
    env = environment(dist("cuda-cccl", "1.2.1", 'cuda-cccl[cu12]; extra == "minimal-cu12"'),
                      elf_files=(elf("cuda/compute/libk.so", "cuda-cccl", fatbin=fatbin("sm_90")),))
    env = replace(env, distributions=tuple(replace(d, extras=frozenset({"minimal-cu12"})) for d in env.distributions))
    [finding] = check_arch_coverage(env, cuda_builds(env), host("550.144.03", "8.6"))
    assert not any("dependencies" in line for line in finding.evidence)


def test_arch_coverage_one_library_short_of_a_gpu_is_reported_but_a_lone_stub_entry_is_not():
    """libtorch_cuda_linalg.so lacks sm_75 while libtorch_cuda.so has it: torch.linalg fails on a T4.
    libcufftw.so.12 carries one sm_75 cubin (nvcc's default target) beside libcufft.so.12's kernels."""
    env = environment(
        dist("torch", "2.14.1"),
        dist("nvidia-cufft", "12.0.0.61"),
        elf_files=(
            elf("torch/lib/libtorch_cuda.so", "torch", fatbin=fatbin("sm_75", "sm_80", "sm_89", "sm_90")),
            elf("torch/lib/libtorch_cuda_linalg.so", "torch", fatbin=fatbin("sm_80", "sm_90")),
            elf("nvidia/cu13/lib/libcufft.so.12", "nvidia-cufft", fatbin=fatbin("sm_75", "sm_80", "sm_89")),
            elf("nvidia/cu13/lib/libcufftw.so.12", "nvidia-cufft", fatbin=fatbin("sm_75", entries=1)),
        ),
    )
    on_t4 = check_arch_coverage(env, cuda_builds(env), host("580.65.06", "7.5"))
    assert [(f.subject, len(f.evidence)) for f in on_t4] == [("torch 2.14.1", 1)]
    assert on_t4[0].evidence[0].startswith(f"{SP}/torch/lib/libtorch_cuda_linalg.so: no SASS for compute capability 7.5")
    assert check_arch_coverage(env, cuda_builds(env), host("580.65.06", "8.9")) == []
    # Without a sibling that runs, the one entry is all the package has: judged.
    alone = environment(
        dist("nvidia-cufft", "12.0.0.61"),
        elf_files=(elf("nvidia/cu13/lib/libcufftw.so.12", "nvidia-cufft", fatbin=fatbin("sm_75", entries=1)),),
    )
    assert [f.subject for f in check_arch_coverage(alone, cuda_builds(alone), host("580.65.06", "8.9"))] == ["nvidia-cufft 12.0.0.61"]


def test_arch_coverage_ptx_needs_a_driver_that_can_jit_it():
    env = environment(
        dist("kernels", "1.0"),
        elf_files=(elf("kernels/libk.so", "kernels", fatbin=fatbin("sm_80", ptx=(("compute_80", "8.7"),))),),
    )
    assert check_arch_coverage(env, cuda_builds(env), host("580.65.06", "9.0")) == []  # JIT from compute_80
    [finding] = check_arch_coverage(env, cuda_builds(env), host("550.144.03", "9.0"))
    assert "CUDA_ERROR_UNSUPPORTED_PTX_VERSION" in finding.evidence[0]


# -- duplicate-library -------------------------------------------------------------------------------


def test_duplicate_library_counts_auditwheel_renamed_copies_but_they_never_clash():
    """auditwheel renames a vendored libgomp: the same library, but ld.so knows it by another name, so
    each package's consumer binds its own copy: private copies, information only."""
    env = environment(
        dist("a-pkg", "1.0"),
        dist("b-pkg", "2.0"),
        elf_files=(
            elf("a_pkg/lib/libgomp.so.1", "a-pkg", soname="libgomp.so.1"),
            elf("a_pkg/_ext.so", "a-pkg", needed=("libgomp.so.1",), runpath=("$ORIGIN/lib",)),
            elf("b_pkg.libs/libgomp-a34b3233.so.1", "b-pkg", soname="libgomp-a34b3233.so.1"),
            elf("b_pkg/_ext.so", "b-pkg", needed=("libgomp-a34b3233.so.1",), runpath=("$ORIGIN/../b_pkg.libs",)),
            elf("b_pkg/lib/libonly.so.1", "b-pkg", soname="libonly.so.1"),
        ),
    )
    assert check_duplicate_libraries(env, load_packages(env)) == [
        FindingText(
            "duplicate-library",
            "info",
            "libgomp.so.1",
            "libgomp.so.1 is installed by 2 distributions (a-pkg, b-pkg); at most one copy is found by the "
            "loader, the others are private copies their package loads by path",
            (f"{SP}/a_pkg/lib/libgomp.so.1 (from a-pkg): found by the loader for {SP}/a_pkg/_ext.so",
             f"{SP}/b_pkg.libs/libgomp-a34b3233.so.1 (from b-pkg): found by the loader for {SP}/b_pkg/_ext.so"),
            None,
        )
    ]


def test_a_package_private_copies_beside_the_wheel_the_loader_finds_are_one_info():
    """triton vendors CUPTI under its own tree and loads it by path; torch's libraries find
    nvidia-cuda-cupti's copy. No consumer can bind triton's: one info for the set, no warning."""
    env = environment(
        dist("nvidia-cuda-cupti", "13.0.85"),
        dist("torch", "2.14.1"),
        dist("triton", "3.8.0"),
        elf_files=(
            elf("nvidia/cu13/lib/libcupti.so.13", "nvidia-cuda-cupti", soname="libcupti.so.13"),
            elf("nvidia/cu13/lib/libnvperf_host.so", "nvidia-cuda-cupti", soname="libnvperf_host.so"),
            elf("torch/lib/libtorch_cuda.so", "torch", needed=("libcupti.so.13",),
                runpath=("$ORIGIN/../../nvidia/cu13/lib",)),
            elf("triton/backends/nvidia/lib/cupti/libcupti.so.13", "triton", soname="libcupti.so.13"),
            elf("triton/backends/nvidia/lib/cupti/libnvperf_host.so", "triton", soname="libnvperf_host.so"),
        ),
    )
    [finding] = check_duplicate_libraries(env, load_packages(env))
    assert (finding.severity, finding.subject) == ("info", "2 libraries of nvidia-cuda-cupti, triton")
    assert finding.message.startswith("libcupti.so.13, libnvperf_host.so are each installed by 2 distributions")
    assert finding.evidence[0] == (
        f"{SP}/nvidia/cu13/lib/libcupti.so.13 (from nvidia-cuda-cupti): found by the loader for "
        f"{SP}/torch/lib/libtorch_cuda.so"
    )
    assert finding.evidence[1] == f"{SP}/triton/backends/nvidia/lib/cupti/libcupti.so.13 (from triton): loaded by path only"
    assert finding.fix is None


def test_two_builds_found_by_the_loader_for_different_consumers_clash():
    env = environment(
        dist("a-pkg", "1.0"),
        dist("b-pkg", "2.0", "a-pkg"),
        elf_files=(
            elf("a_pkg/lib/libdup.so.1", "a-pkg", soname="libdup.so.1"),
            elf("a_pkg/_ext.so", "a-pkg", needed=("libdup.so.1",), runpath=("$ORIGIN/lib",)),
            elf("b_pkg/lib/libdup.so.1", "b-pkg", soname="libdup.so.1"),
            elf("b_pkg/_ext.so", "b-pkg", needed=("libdup.so.1",), runpath=("$ORIGIN/lib",)),
        ),
    )
    [finding] = check_duplicate_libraries(env, load_packages(env))
    assert (finding.severity, finding.subject) == ("error", "libdup.so.1")
    assert finding.evidence == (
        f"{SP}/a_pkg/lib/libdup.so.1 (from a-pkg) is what {SP}/a_pkg/_ext.so loads",
        f"{SP}/b_pkg/lib/libdup.so.1 (from b-pkg) is what {SP}/b_pkg/_ext.so loads",
    )
    # b-pkg requires a-pkg, so only b-pkg could go
    assert finding.fix.startswith("keep one build: uninstall b-pkg, which nothing installed requires")


# -- judge, exit codes ----------------------------------------------------------------------------


def test_judge_reports_scan_problems_and_an_absent_driver():
    env = Environment(
        target=Target(site_packages=(SP,)),
        distributions=(),
        elf_files=(ElfFile(f"{SP}/x/libbad.so", (), None, f"{SP}/x/libbad.so: file too short"),),
        problems=(Problem(f"{SP}/bad-1.0.dist-info", "METADATA has no Version"),),
    )
    no_gpu = host().with_notes(Note("nvml", "libnvidia-ml.so.1 not found"))
    assert tuple(shown(finding) for finding in judge(env, no_gpu).findings) == (
        FindingText("environment", "warning", f"{SP}/bad-1.0.dist-info", "METADATA has no Version"),
        FindingText("environment", "warning", f"{SP}/x/libbad.so",
                f"cannot read its binary facts: {SP}/x/libbad.so: file too short"),
        FindingText("host", "info", "host", "no NVIDIA driver or GPU found: driver and GPU checks were skipped",
                ("nvml: libnvidia-ml.so.1 not found",),
                "judge for a GPU machine with --host FILE (from `cudaresolve probe --json` there) or --driver/--gpu"),
    )


def test_version_list_names_a_few_versions_and_summarises_many():
    assert version_list(()) == ""
    assert version_list(("12.0.76", "12.1.105")) == "12.0.76, 12.1.105"
    assert version_list(("1", "2", "3", "4")) == "1, 2, 3, 4"
    assert version_list(tuple(f"12.{n}.0" for n in range(9))) == "12.0.0 … 12.8.0, 9 releases"


def test_exit_codes():
    error, warning, info = (Finding(Check.HOST, severity, Subject(), KnownBadRelease("x", "y")) for severity in Severity)
    assert exit_code([], strict=False) == 0
    assert exit_code([info], strict=True) == 0
    assert exit_code([warning, info], strict=False) == 0
    assert exit_code([warning, info], strict=True) == 1
    assert exit_code([info, warning, error], strict=False) == 2
    assert exit_code([error], strict=True) == 2


# -- rendering ---------------------------------------------------------------------------------------


DRIVER_TOO_OLD = ("built for CUDA 13.0: driver 550.144.03 < 580.65.06 (CUDA 13.x floor): "
                  + INSUFFICIENT)
TWO_COPIES = ("libz.so.1 is installed by 2 distributions (a, b); at most one copy is found by the loader, the others "
              "are private copies their package loads by path")
ONE_PLUGIN = ("1 plugin library loads only on demand and needs libraries that are not on their search path (b); the "
              "features they provide are unavailable here")


def sample_diagnosis() -> Diagnosis:
    env = environment(dist("torch", "2.14.1"), dist("numba", "0.61.2"))
    def about(name: str, version: str) -> Subject:
        return Subject(distribution=canonicalize_name(name), version=Version(version))

    findings = sort_findings([
        Finding(Check.ADVISORY, Severity.WARNING, about("numba", "0.61.2"), KnownBadRelease("x", "y"),
                (Said("numba/numba#1"),), AdvisoryFix("x", "upgrade numba")),
        Finding(Check.MISSING_LIBRARY, Severity.INFO, about("nvidia-cufile", "1.15.1.6"),
                PluginLibrariesMissing(("a",), ("b",)), (Needs("a", ("b",)),)),
        Finding(Check.DRIVER_FLOOR, Severity.ERROR, about("torch", "2.14.1"),
                DriverTooOld(CudaVersion(13, 0), DriverRelease.parse("550.144.03"), CudaVersion(12, 4),
                             DriverRelease.parse("580.65.06")),
                (BuiltWith("e1"), BuiltWith("e2")), DriverUpgrade(DriverRelease.parse("580.65.06"))),
        Finding(Check.DUPLICATE_LIBRARY, Severity.WARNING, Subject(file="libz.so.1"),
                PrivateCopies(("libz.so.1",), (Owner("a"), Owner("b")))),
    ])
    return Diagnosis(host("550.144.03", "8.9", "8.6"), env, (), findings)



def test_render_text_counts_one_in_the_singular():
    """Before: "1 distributions, 1 ELF files"."""
    env = environment(dist("numba", "0.61.2"))
    env = replace(env, elf_files=(ElfFile(f"{SP}/x/libx.so", (), None, None),))
    text = render_text(Diagnosis(host("550.144.03", "8.6"), env, (), ()))
    assert text.splitlines()[1] == f"env:  site-packages — 1 distribution, 1 ELF file, {SP}"

def test_render_text_summary_first_then_findings_grouped_by_severity():
    assert render_text(sample_diagnosis()) == "\n".join([
        "host: 550.144.03 (CUDA 12.4); GPU (8.9), GPU (8.6)",
        f"env:  site-packages — 2 distributions, 0 ELF files, {SP}",
        "result: 1 error, 2 warnings, 1 info",
        "",
        "ERROR",
        "- [driver-floor] torch 2.14.1: " + DRIVER_TOO_OLD,
        "    e1",
        "    e2",
        "    fix: upgrade the driver to >= 580.65.06",
        "",
        "WARNINGS",
        "- [advisory] numba 0.61.2: known problem x: y",
        "    numba/numba#1",
        "    fix: upgrade numba",
        "- [duplicate-library] libz.so.1: " + TWO_COPIES,
        "",
        "INFO",
        "- [missing-library] nvidia-cufile 1.15.1.6: " + ONE_PLUGIN,
        "    a needs b",
        "",
    ])


def test_render_text_colour_paints_only_counts_and_headings():
    text = render_text(sample_diagnosis(), colour=True)
    assert text.splitlines()[2] == (
        "result: \033[31m1 error\033[0m, \033[33m2 warnings\033[0m, \033[36m1 info\033[0m"
    )
    assert "\033[31mERROR\033[0m\n" in text and "\033[33mWARNINGS\033[0m\n" in text
    assert re.sub(r"\033\[\d+m", "", text) == render_text(sample_diagnosis())
    assert "\033" not in render_text(sample_diagnosis(), colour=False)


class FakeTty(io.StringIO):
    def __init__(self, tty: bool):
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize(
    "tty, environ, expected",
    [
        (True, {}, True),
        (True, {"NO_COLOR": "1"}, False),
        (True, {"NO_COLOR": "anything"}, False),
        (True, {"NO_COLOR": ""}, True),  # no-color.org: an empty value does not count
        (False, {}, False),
        (False, {"NO_COLOR": "1"}, False),
    ],
)
def test_use_colour(tty, environ, expected):
    assert use_colour(FakeTty(tty), environ) is expected


def test_render_json_schema_1():
    data = json.loads(render_json(sample_diagnosis()))
    assert list(data) == ["schema", "host", "environment", "counts", "fix_judging", "findings", "libraries"]
    assert data["schema"] == 1
    assert data["fix_judging"] == {"judged": True, "why_not": None}
    assert data["host"] == sample_diagnosis().host.to_dict()
    assert data["environment"] == {
        "python": None,
        "site_packages": [SP],
        "distributions": [{"name": "numba", "version": "0.61.2"}, {"name": "torch", "version": "2.14.1"}],
        "elf_files": 0,
        "conda_prefix": None,
    }
    assert data["counts"] == {"error": 1, "warning": 2, "info": 1}
    assert data["findings"][0] == {
        "check": "driver-floor",
        "severity": "error",
        "subject": "torch 2.14.1",
        "message": DRIVER_TOO_OLD,
        "evidence": ["e1", "e2"],
        "fix": "upgrade the driver to >= 580.65.06",
        "about": {"distribution": "torch", "version": "2.14.1", "conda_version": None, "conda": False, "file": None,
                  "libraries": [], "owners": [], "scope": None},
        "problem": {"type": "driver-too-old", "cuda": "13.0", "driver": "550.144.03", "driver_cuda": "12.4",
                    "floor": "580.65.06", "host": None},
        "facts": [{"type": "built-with", "text": "e1"}, {"type": "built-with", "text": "e2"}],
        "remedy": {"type": "driver-upgrade", "minimum": "580.65.06"},
    }
    assert [f["severity"] for f in data["findings"]] == ["error", "warning", "warning", "info"]
    assert data["findings"][2]["fix"] is None
    assert data["libraries"] == []
