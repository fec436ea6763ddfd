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
from conftest import registry_python
from packaging.requirements import Requirement
from test_elf import needs_readelf
from wheel_cache import build_venv, cache_dir

from cudaresolve.arch import ComputeCapability
from cudaresolve.binary.loader import PRELOADED
from cudaresolve.checks import Diagnosis
from cudaresolve.checks import evidence as e
from cudaresolve.checks import fixes as f
from cudaresolve.checks.findings import Check, Severity
from cudaresolve.checks.problems import PluginHostMismatch, PluginLibrariesMissing
from cudaresolve.cli import main
from cudaresolve.doctor import examine
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
def test_the_lock_refuses_a_plugin_of_another_openmm_release(hermetic, tmp_path, capsys, monkeypatch):
    """`lock openmm==8.3.1 openmm-cuda-12==8.6.1`: before, locked (exit 0). Now both wheels are read
    (by sha256, once) and the pair is refused naming both; with the plugin unpinned the lock takes
    openmm-cuda-12 8.3.1, whose plugins bind what 8.3.1's libOpenMM.so defines."""
    monkeypatch.setenv("CUDARESOLVE_CACHE_DIR", str(cache_dir() / "lock-registry-cache"))
    python = registry_python(tmp_path, "openmm-cuda-12")

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
            "libOpenMM.so lacks 204 C++ symbols") in out, out
    code, out, versions = lock("openmm==8.3.1", "openmm-cuda-12")
    assert code == 0, out
    assert (versions["openmm"], versions["openmm-cuda-12"]) == ("8.3.1", "8.3.1")


def _req(text: str) -> Requirement:
    return Requirement(text)
