"""Plugins opened by path by their host's loader (OpenMM's plugin directory, data/components.toml
[plugin_hosts]): loaded as OpenMM loads them, after `import openmm` has loaded libOpenMM.so, one
dlopen each, shortest path first, each seeing the plugins loaded before it; and a plugin built for
another release of its host is one plugin-host error naming both, in the doctor and in the lock.

Real wheels: openmm and openmm-cuda-12 8.3.1 and 8.6.1. The oracles: `ldd -r` of the CUDA plugin
with the core's OpenMM.libs/lib on LD_LIBRARY_PATH (194 OpenMM names unbound for 8.6.1's plugin
beside 8.3.1's core, 79 the other way round, none for matching releases), and
`openmm.Platform.getPluginLoadFailures()` after a real `import openmm` (no GPU needed).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from conftest import ElfBuilder, registry_python
from packaging.requirements import Requirement
from packaging.version import Version
from test_elf import needs_readelf
from test_env_distributions import make_dist_info
from wheel_cache import build_venv, cache_dir

from cudaresolve.arch import ComputeCapability
from cudaresolve.binary.loader import PRELOADED
from cudaresolve.checks import Diagnosis
from cudaresolve.checks import evidence as e
from cudaresolve.checks import fixes as f
from cudaresolve.checks.findings import Check, Severity
from cudaresolve.checks.problems import PluginHostMismatch, PluginLibrariesMissing
from cudaresolve.cli import main
from cudaresolve.commands.diagnosing import examine
from cudaresolve.env.interpreter import target_for_site_packages
from cudaresolve.host.facts import Driver, Gpu, HostFacts
from cudaresolve.lockfile.pylock import read_pylock
from cudaresolve.output.findings import shown
from cudaresolve.versions import CudaVersion, DriverRelease

SITE = Path("lib/python3.11/site-packages")
PLUGINS = SITE / "OpenMM.libs/lib/plugins"
SURVEY = Path("/work/survey-stacks/openmm-cuda12")  # the survey's openmm[cuda12]==8.6.1 venv, where present

# driver 575 (CUDA 12.9) and an RTX 30x0 (8.6): the driver's libraries count as present.
HOST = HostFacts("Linux", "x86_64", Driver(DriverRelease.parse("575.57.08"), "override:--driver",
                                            CudaVersion.parse("12.9"), "derived:branch-table"),
                 (Gpu(ComputeCapability(8, 6), "override:--gpu", 0),))


def venv(core: str, plugin: str) -> Path:
    return build_venv([f"openmm=={core}", f"openmm-cuda-12=={plugin}", "numpy==2.4.6"])


def doctor(root: Path, tmp_path: Path) -> Diagnosis:
    return examine(target_for_site_packages(str(root / SITE)), HOST,
                   {"CUDARESOLVE_CACHE_DIR": str(tmp_path / "facts-cache"), "LD_LIBRARY_PATH": "", "LD_PRELOAD": ""})


def ldd_openmm_names(root: Path, plugin: str) -> set[str]:
    """The OpenMM:: and Lepton:: names `ldd -r` says the plugin leaves unbound, the core's libraries on LD_LIBRARY_PATH."""
    environ = dict(os.environ, LD_LIBRARY_PATH=f"{root / SITE / 'OpenMM.libs/lib'}:{root / PLUGINS}")
    out = subprocess.run(["ldd", "-r", str(root / PLUGINS / plugin)], capture_output=True, text=True, env=environ)
    return {m.group(1) for m in re.finditer(r"undefined symbol: (\S*6(?:OpenMM|Lepton)\S*)\s", out.stdout + out.stderr)}


def load_failures(root: Path) -> set[str]:
    """The plugin files a real `import openmm` failed to load (Platform.getPluginLoadFailures())."""
    out = subprocess.run([str(root / "bin/python"), "-c",
                          "import openmm\nfor line in openmm.Platform.getPluginLoadFailures(): print(line)"],
                         capture_output=True, text=True, env={"PATH": os.environ["PATH"]}, check=True)
    return {os.path.basename(m.group(1)) for m in re.finditer(r"Error loading library (\S+):", out.stdout)}


def plugin_findings(diagnosis: Diagnosis, check: Check) -> list:
    return [finding for finding in diagnosis.findings if finding.check == check]


@needs_readelf
def test_a_cuda_plugin_of_another_openmm_release_is_one_error_naming_both(tmp_path):
    """openmm-cuda-12 8.6.1 beside openmm 8.3.1 (pip pairs them: 8.3.1's [cuda12] is unpinned):
    before, 0 errors (the plugins could not find libOpenMM.so, so no symbol was judged). Now one
    plugin-host error on openmm-cuda-12 8.6.1 naming openmm 8.3.1 and its libOpenMM.so, whose
    names for libOpenMMCUDA.so are exactly the OpenMM:: names `ldd -r` lists; no symbol-skew too."""
    root = venv("8.3.1", "8.6.1")
    diagnosis = doctor(root, tmp_path)
    [finding] = plugin_findings(diagnosis, Check.PLUGIN_HOST)
    assert finding.severity == Severity.ERROR
    assert (finding.subject.distribution, str(finding.subject.version)) == ("openmm-cuda-12", "8.6.1")
    problem = finding.problem
    assert isinstance(problem, PluginHostMismatch)
    assert (problem.host, str(problem.installed)) == ("openmm", "8.3.1")
    assert problem.library is not None and problem.library.endswith("OpenMM.libs/lib/libOpenMM.so")
    cuda = str(root / PLUGINS / "libOpenMMCUDA.so")
    assert problem.files[0] == cuda
    oracle = ldd_openmm_names(root, "libOpenMMCUDA.so")
    assert len(oracle) == 194
    ours = {line.message.rsplit(": ", 1)[1] for line in finding.evidence if isinstance(line, e.LoaderError)}
    assert ours <= oracle
    assert oracle <= set(problem.symbols)
    # 8.3.1 pins no plugin release; the two are released in lockstep: either side's matching release
    assert finding.fix == f.Alternatives((f.PipInstall((_req("openmm-cuda-12==8.3.1"),)),
                                          f.PipInstall((_req("openmm==8.6.1"),))))
    assert not plugin_findings(diagnosis, Check.SYMBOL_SKEW)
    text = shown(finding)
    assert text.message.startswith("libOpenMMCUDA.so, libOpenMMRPMDCUDA.so, libOpenMMDrudeCUDA.so, "
                                   "libOpenMMAmoebaCUDA.so: built for another openmm release than openmm 8.3.1 beside "
                                   "them, whose libOpenMM.so lacks 204 C++ symbols they bind"), text.message


@needs_readelf
def test_an_older_plugin_beside_a_newer_core_is_fixed_by_the_cores_own_pin(tmp_path):
    """openmm-cuda-12 8.3.1 beside openmm 8.6.1: `ldd -r` lists 79 OpenMM:: names; the fix is the
    release openmm 8.6.1 pins behind [cuda12] (OpenMM-CUDA-12==8.6.1)."""
    root = venv("8.6.1", "8.3.1")
    [finding] = plugin_findings(doctor(root, tmp_path), Check.PLUGIN_HOST)
    assert isinstance(finding.problem, PluginHostMismatch)
    oracle = ldd_openmm_names(root, "libOpenMMCUDA.so")
    assert len(oracle) == 79 and oracle <= set(finding.problem.symbols)
    assert finding.fix == f.Alternatives((f.PipInstall((_req("openmm-cuda-12==8.6.1"),)),
                                          f.PipInstall((_req("openmm==8.3.1"),))))


def test_matching_releases_load_their_plugins_as_openmm_does(tmp_path):
    """openmm and openmm-cuda-12 8.6.1 (no CUDA wheels here): no plugin-host or symbol error, and
    the plugins the doctor says cannot load are the ones a real `import openmm` fails to load:
    the OpenCL ones (no libOpenCL.so.1; the Amoeba/Drude/RPMD ones also need libOpenMMOpenCL.so,
    which failed) and the CUDA ones. libOpenMMAmoebaCUDA.so finds libOpenMM.so as loaded by the
    import, never by a search."""
    root = venv("8.6.1", "8.6.1")
    diagnosis = doctor(root, tmp_path)
    assert not plugin_findings(diagnosis, Check.PLUGIN_HOST) and not plugin_findings(diagnosis, Check.SYMBOL_SKEW)
    infos = [finding.problem for finding in plugin_findings(diagnosis, Check.MISSING_LIBRARY)
             if isinstance(finding.problem, PluginLibrariesMissing)]
    failing = {name for problem in infos for name in problem.plugins}
    assert failing == load_failures(root), infos
    assert {name for problem in infos for name in problem.libraries} == {
        "libOpenCL.so.1", "libOpenMMOpenCL.so", "libOpenMMCUDA.so", "libcufft.so.11", "libnvrtc.so.12"}
    amoeba = str(root / PLUGINS / "libOpenMMAmoebaCUDA.so")
    [load] = [load for load in diagnosis.loads if load.roots == (amoeba,)]
    [obj] = [obj for obj in load.result.objects if obj.path == amoeba]
    [core] = [res for res in obj.needed if res.needed == "libOpenMM.so"]
    assert core.step == PRELOADED and core.path is not None and core.path.endswith("OpenMM.libs/lib/libOpenMM.so")


@pytest.mark.skipif(not (SURVEY / "bin/python").exists(), reason="the survey's openmm[cuda12] venv is not built here")
def test_the_survey_stack_has_no_cuda_plugin_info(tmp_path):
    """openmm[cuda12]==8.6.1 with its CUDA wheels, driver 575: before, an info said the Amoeba/Drude/
    RPMD CUDA plugins miss libOpenMM.so, libOpenMMCUDA.so, libcufft.so.11 and libnvrtc.so.12. In
    OpenMM's loading libOpenMMCUDA.so finds cuFFT and NVRTC by its RUNPATH and loads before them,
    so with a driver every CUDA plugin loads: only the OpenCL info (no libOpenCL.so.1) stays."""
    diagnosis = doctor(SURVEY, tmp_path)
    assert not [finding for finding in diagnosis.findings if finding.severity == Severity.ERROR]
    infos = [finding for finding in plugin_findings(diagnosis, Check.MISSING_LIBRARY)]
    assert [(str(finding.subject.distribution), finding.problem.libraries) for finding in infos] == [
        ("openmm", ("libOpenCL.so.1", "libOpenMMOpenCL.so"))]


@needs_readelf
@pytest.mark.registry
def test_the_lock_refuses_a_plugin_of_another_openmm_release(hermetic, tmp_path, capsys, monkeypatch, venv_with_pip):
    """`lock openmm==8.3.1 openmm-cuda-12==8.6.1`: before, locked (exit 0). Now both wheels are read
    (by sha256, once) and the pair is refused naming both; with the plugin unpinned the lock takes
    openmm-cuda-12 8.3.1, whose plugins bind what 8.3.1's libOpenMM.so defines."""
    monkeypatch.setenv("CUDARESOLVE_CACHE_DIR", str(cache_dir() / "lock-registry-cache"))
    python = registry_python(venv_with_pip(tmp_path / "target"), "openmm-cuda-12")

    def lock(*requirements: str) -> tuple[int, str, dict[str, str]]:
        out_dir = tmp_path / f"out-{len(list(tmp_path.glob('out-*')))}"
        out_dir.mkdir()
        capsys.readouterr()
        code = main(["lock", *requirements, "--python", python, "-o", str(out_dir / "pylock.toml"),
                     "--driver", "575.57.08", "--gpu", "8.6"])
        out, err = capsys.readouterr()
        written = out_dir / "pylock.toml"
        versions = {str(p.name): str(p.version) for p in read_pylock(str(written)).packages} if written.exists() else {}
        return code, out + err, versions

    code, out, versions = lock("openmm==8.3.1", "openmm-cuda-12==8.6.1")
    assert (code, versions) == (2, {}), out
    assert ("openmm-cuda-12 8.6.1: plugin-host: libOpenMMCUDA.so, libOpenMMRPMDCUDA.so, libOpenMMDrudeCUDA.so, "
            "libOpenMMAmoebaCUDA.so: built for another openmm release than openmm 8.3.1 beside them, whose "
            "libOpenMM.so lacks 204 C++ symbols") in " ".join(out.split()), out  # a refusal's lines wrap at 200 characters
    code, out, versions = lock("openmm==8.3.1", "openmm-cuda-12")
    assert code == 0, out
    assert (versions["openmm"], versions["openmm-cuda-12"]) == ("8.3.1", "8.3.1")


def _req(text: str) -> Requirement:
    return Requirement(text)


# -- hermetic: gcc-built libraries laid out as the openmm and openmm-cuda-12 wheels lay them out ----

CORE_NAME = "_ZN6OpenMM6SystemC1Ev"  # OpenMM::System::System(), in both fake core releases
NEW_NAME = "_ZN6OpenMM9NewMethodEv"  # OpenMM::NewMethod(), only in the newer fake core


def fake_openmm(elf_builder, *, core_defines: tuple[str, ...], plugin_binds: tuple[str, ...], cufft: bool,
                core: str = "8.3.1", plugin: str = "8.6.1") -> Path:
    """site-packages with openmm `core` (its extension linking libOpenMM.so by RPATH, as the wheel's
    does) and openmm-cuda-12 `plugin`: libOpenMMCUDA.so (libOpenMM.so with no path to it, cuFFT by
    RUNPATH) and libOpenMMAmoebaCUDA.so (libOpenMMCUDA.so and cuFFT with no path at all)."""
    lib = "site/OpenMM.libs/lib"
    stub = elf_builder.build("libcufft.so.11", "int cufftPlan1d(void) { return 0; }\n", soname="libcufft.so.11",
                             directory="stubs" if not cufft else "site/nvidia/cufft/lib")
    core_lib = elf_builder.build("libOpenMM.so", "".join(f"int {name}(void) {{ return 1; }}\n" for name in core_defines),
                                 soname="libOpenMM.so", directory=lib)
    elf_builder.build("_openmm.cpython-311-x86_64-linux-gnu.so", f"int {CORE_NAME}(void);\nint init(void) {{ return {CORE_NAME}(); }}\n",
                      link=[core_lib], rpath="$ORIGIN/../OpenMM.libs/lib", directory="site/openmm")
    calls = "".join(f"int {name}(void);\n" for name in plugin_binds)
    body = " + ".join(f"{name}()" for name in plugin_binds) or "0"
    cuda = elf_builder.build("libOpenMMCUDA.so", f"{calls}int cufftPlan1d(void);\nint cuda(void) {{ return {body} + cufftPlan1d(); }}\n",
                             soname="libOpenMMCUDA.so", link=[core_lib, stub],
                             runpath="$ORIGIN/..:$ORIGIN/../../../nvidia/cufft/lib", directory=f"{lib}/plugins")
    elf_builder.build("libOpenMMAmoebaCUDA.so", f"int cuda(void); int cufftPlan1d(void); int {CORE_NAME}(void);\n"
                      f"int amoeba(void) {{ return cuda() + cufftPlan1d() + {CORE_NAME}(); }}\n",
                      soname="libOpenMMAmoebaCUDA.so", link=[cuda, core_lib, stub], directory=f"{lib}/plugins")
    site = elf_builder.root / "site"
    make_dist_info(site, "openmm", core, files=("openmm/_openmm.cpython-311-x86_64-linux-gnu.so", "OpenMM.libs/lib/libOpenMM.so"),
                   requires=('OpenMM-CUDA-12; platform_system != "Darwin" and extra == "cuda12"',))
    make_dist_info(site, "openmm-cuda-12", plugin, files=("OpenMM.libs/lib/plugins/libOpenMMCUDA.so",
                                                          "OpenMM.libs/lib/plugins/libOpenMMAmoebaCUDA.so"))
    if cufft:
        make_dist_info(site, "nvidia-cufft-cu12", "11.4.1.4", files=("nvidia/cufft/lib/libcufft.so.11",))
    return site


def hermetic_doctor(site: Path, tmp_path: Path) -> Diagnosis:
    return examine(target_for_site_packages(str(site)), HOST,
                   {"CUDARESOLVE_CACHE_DIR": str(tmp_path / "facts-cache"), "LD_LIBRARY_PATH": "", "LD_PRELOAD": ""})


def test_plugins_load_in_the_hosts_order_each_seeing_those_loaded_before(elf_builder, tmp_path):
    """libOpenMMAmoebaCUDA.so has no path to libOpenMMCUDA.so, libOpenMM.so or cuFFT: it finds them
    because `import openmm` loaded libOpenMM.so and OpenMM's loader opened libOpenMMCUDA.so (a
    shorter path, with cuFFT by its RUNPATH) before it. Nothing is reported."""
    site = fake_openmm(elf_builder, core_defines=(CORE_NAME,), plugin_binds=(CORE_NAME,), cufft=True)
    diagnosis = hermetic_doctor(site, tmp_path)
    assert [finding for finding in diagnosis.findings if finding.check != Check.OWNED_TWICE] == []
    amoeba = str(site / "OpenMM.libs/lib/plugins/libOpenMMAmoebaCUDA.so")
    [load] = [load for load in diagnosis.loads if load.roots == (amoeba,)]
    assert load.dist == "openmm-cuda-12" and load.host is not None and load.host.host == "openmm"
    [obj] = [obj for obj in load.result.objects if obj.path == amoeba]
    assert {res.needed: res.step for res in obj.needed if res.needed.startswith(("libOpenMM", "libcufft"))} == {
        "libOpenMMCUDA.so": PRELOADED, "libOpenMM.so": PRELOADED, "libcufft.so.11": PRELOADED}


def test_a_plugin_that_fails_serves_none_after_it(elf_builder, tmp_path):
    """Without cuFFT libOpenMMCUDA.so fails to load, so libOpenMMAmoebaCUDA.so finds neither it nor
    cuFFT: one info for openmm-cuda-12 naming both plugins, not an error (OpenMM goes on without them)."""
    site = fake_openmm(elf_builder, core_defines=(CORE_NAME,), plugin_binds=(CORE_NAME,), cufft=False)
    [finding] = [finding for finding in hermetic_doctor(site, tmp_path).findings if finding.check == Check.MISSING_LIBRARY]
    assert finding.severity == Severity.INFO and str(finding.subject.distribution) == "openmm-cuda-12"
    assert finding.problem == PluginLibrariesMissing(("libOpenMMAmoebaCUDA.so", "libOpenMMCUDA.so"),
                                                     ("libOpenMMCUDA.so", "libcufft.so.11"))


def test_a_plugin_binding_what_its_hosts_release_lacks_is_a_plugin_host_error(elf_builder, tmp_path):
    """libOpenMMCUDA.so of openmm-cuda-12 8.6.1 binds OpenMM::NewMethod(), which the libOpenMM.so of
    openmm 8.3.1 lacks: one plugin-host error naming both; openmm pins no plugin release, and they
    are released in lockstep, so the fix is either side's matching release. libOpenMMAmoebaCUDA.so
    binds only what both releases define: it is not named."""
    site = fake_openmm(elf_builder, core_defines=(CORE_NAME,), plugin_binds=(CORE_NAME, NEW_NAME), cufft=True)
    diagnosis = hermetic_doctor(site, tmp_path)
    [finding] = [finding for finding in diagnosis.findings if finding.severity == Severity.ERROR]
    assert finding.check == Check.PLUGIN_HOST
    assert finding.problem == PluginHostMismatch((str(site / "OpenMM.libs/lib/plugins/libOpenMMCUDA.so"),), "openmm",
                                                 Version("8.3.1"), str(site / "OpenMM.libs/lib/libOpenMM.so"), (NEW_NAME,))
    assert finding.fix == f.Alternatives((f.PipInstall((_req("openmm-cuda-12==8.3.1"),)), f.PipInstall((_req("openmm==8.6.1"),))))
    assert shown(finding).message == (
        "libOpenMMCUDA.so: built for another openmm release than openmm 8.3.1 beside it, whose libOpenMM.so lacks 1 C++ "
        f"symbol it binds ({NEW_NAME}); openmm loads it by path: \"undefined symbol\"")
    # the matching core release defines it: nothing to report
    other = tmp_path / "matching"
    other.mkdir()
    matching = fake_openmm(ElfBuilder(other), core_defines=(CORE_NAME, NEW_NAME), plugin_binds=(CORE_NAME, NEW_NAME),
                           cufft=True, core="8.6.1")
    assert [finding for finding in hermetic_doctor(matching, tmp_path).findings if finding.severity == Severity.ERROR] == []
