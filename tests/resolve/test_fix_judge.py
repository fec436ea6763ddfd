"""A fix is judged on the environment it plans before it is printed (resolve/fix_judge.py).

A real venv of gcc-built wheels (test_fixes_applied's skew: `skewpkg` binds
`__nvJitLinkComplete_12_8@libnvJitLink.so.12` beside nvidia-nvjitlink-cu12 12.1.105, which lacks
it); the index is a --find-links directory. Each refusal is shown with its printed "no fix found
here" or the alternative that passes, and a passing fix is applied with real pip and judged again.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sysconfig
from dataclasses import replace
from pathlib import Path
from typing import Callable

import pytest
from conftest import linked_venv
from fatbin_bytes import container, cubin, entry
from fix_steps import offline_pip, pip_arguments
from index_server import make_wheel
from packaging.requirements import Requirement
from test_conda_env import EXT, HOST_570, TAG, build_nvjitlink, extension_source

from cudaresolve.arch import ComputeCapability
from cudaresolve.checks import fixes as f
from cudaresolve.checks.evidence import DependenciesFailToo
from cudaresolve.checks.findings import Check, Finding
from cudaresolve.commands.diagnosing import examine
from cudaresolve.commands.judging import Judging
from cudaresolve.env.interpreter import target_for_python
from cudaresolve.host.facts import Driver, Gpu, HostFacts
from cudaresolve.index.access import PackageIndex, open_index
from cudaresolve.index.config import IndexSettings, index_config
from cudaresolve.output.findings import shown
from cudaresolve.output.fixes import render_fix
from cudaresolve.resolve.fix_judge import judge_fixes
from cudaresolve.versions import CudaVersion, DriverRelease

SKEW_FIX = 'pip install "nvidia-nvjitlink-cu12>=12.8"'


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """Every wheel the tests offer, each test choosing which its index holds."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    from conftest import ElfBuilder

    root = tmp_path_factory.mktemp("judge")
    builder = ElfBuilder(root / "elf")
    found = root / "wheels"
    found.mkdir()

    def wheel(name: str, version: str, files: dict[str, Path], requires: tuple[str, ...] = (), extras=(), init=b"") -> None:
        members = {member: path.read_bytes() for member, path in files.items()}
        members[f"{name.replace('-', '_')}/__init__.py"] = b"from . import _ext\n" if name == "skewpkg" else init  # its import loads it
        filename, data = make_wheel(name, version, requires=requires, tag=TAG, files=members, extras=extras)
        (found / filename).write_bytes(data)

    stub = build_nvjitlink(builder, 12, 8, "stub")
    wheel("skewpkg", "1.0", {f"skewpkg/_ext{EXT}": builder.build(
        f"_ext{EXT}", extension_source("_ext", "__nvJitLinkComplete_12_8()"), link=[stub],
        rpath="$ORIGIN/../nvidia/nvjitlink/lib", directory="skewpkg", extra=["-I" + sysconfig.get_paths()["include"]])})
    for version, minor in (("12.1.105", 1), ("12.8.93", 8)):
        wheel("nvidia-nvjitlink-cu12", version,
              {"nvidia/nvjitlink/lib/libnvJitLink.so.12": build_nvjitlink(builder, 12, minor, f"nvjitlink-{minor}")})
    # holds nvJitLink below 12.2, through its extra "cuda" only
    wheel("holdpkg", "1.0", {}, requires=('nvidia-nvjitlink-cu12<12.2; extra == "cuda"',), extras=("cuda",))
    wheel("nvidia-cuda-runtime-cu11", "11.8.89", {})
    # archpkg: 1.0 and 3.0 carry sm_75 only, 2.0 sm_75 and sm_86 (the GPU here is 8.6)
    for version, archs in (("1.0", (75,)), ("2.0", (75, 86)), ("3.0", (75,))):
        fatbin = ",".join(map(str, container(*(entry(2, sm, cubin(sm), version=(1, 7)) for sm in archs))))
        source = ('__attribute__((section(".nv_fatbin"), used, aligned(8))) static const unsigned char '
                  f"fatbin[] = {{{fatbin}}};\nint kernels(void) {{ return 0; }}\n")
        wheel("archpkg", version, {"archpkg/libkernels.so": builder.build(
            "libkernels.so", source, soname="libkernels.so", directory=f"arch-{version}")})
    # corepkg: its import loads its extension module _kernels; 1.0 carries sm_75 only, 2.0 and 3.0 sm_75 and sm_86,
    # and 3.0's import also loads its libpkgcore.so by path, which links libabsent_xyz.so.1 that nothing ships
    absent = builder.build("libabsent_xyz.so.1", "int absent_xyz(void) { return 1; }\n", soname="libabsent_xyz.so.1",
                           directory="absent")
    core = builder.build("libpkgcore.so", "int absent_xyz(void);\nint core(void) { return absent_xyz(); }\n",
                         soname="libpkgcore.so", link=[absent], directory="core")
    for version, archs in (("1.0", (75,)), ("2.0", (75, 86)), ("3.0", (75, 86))):
        fatbin = ",".join(map(str, container(*(entry(2, sm, cubin(sm), version=(1, 7)) for sm in archs))))
        source = ('__attribute__((section(".nv_fatbin"), used, aligned(8))) static const unsigned char '
                  f"fatbin[] = {{{fatbin}}};\nint kernels(void) {{ return 0; }}\n")
        files = {f"corepkg/_kernels{EXT}": builder.build(f"_kernels{EXT}", source, directory=f"core-{version}")}
        init = b"from . import _kernels\n"
        if version == "3.0":
            files["corepkg/libpkgcore.so"] = core
            init += b"import ctypes\nimport os\n\n_core = ctypes.CDLL(os.path.join(os.path.dirname(__file__), 'libpkgcore.so'))\n"
        wheel("corepkg", version, files, init=init)
    # cuda-toolkit[all] as two components: CUDA 13.x's carry sm_75 and sm_80 (CUDA 13 dropped Pascal), CUDA 12.x's
    # sm_60, sm_75 and sm_86 (real nvidia-cufft-cu12 11.4.1.4 has sm_60, no sm_61)
    # and NPP, which the components table does not know (no fold, no major from its name)
    toolkits = {"13.5.0": ("", {"cufft": ("12.5.0.14", "libcufft.so.12"), "curand": ("10.4.5.25", "libcurand.so.10"),
                                "npp": ("13.2.0.93", "libnppc.so.13")}),
                "13.4.0": ("", {"cufft": ("12.4.0.34", "libcufft.so.12"), "curand": ("10.4.4.49", "libcurand.so.10"),
                                "npp": ("13.1.2.81", "libnppc.so.13")}),
                "12.9.1": ("-cu12", {"cufft": ("11.4.1.4", "libcufft.so.11"), "curand": ("10.3.10.19", "libcurand.so.10"),
                                     "npp": ("12.4.1.87", "libnppc.so.12")}),
                "12.2.2": ("-cu12", {"cufft": ("11.0.8.103", "libcufft.so.11"), "curand": ("10.3.3.141", "libcurand.so.10"),
                                     "npp": ("12.2.1.4", "libnppc.so.12")})}
    for toolkit, (suffix, parts) in toolkits.items():
        archs = (60, 75, 86) if suffix else (75, 80)
        fatbin = ",".join(map(str, container(*(entry(2, sm, cubin(sm), version=(1, 7)) for sm in archs))))
        source = ('__attribute__((section(".nv_fatbin"), used, aligned(8))) static const unsigned char '
                  f"fatbin[] = {{{fatbin}}};\nint kernels(void) {{ return 0; }}\n")
        for part, (version, soname) in parts.items():
            directory = f"nvidia/{part}/lib" if suffix else "nvidia/cu13/lib"
            wheel(f"nvidia-{part}{suffix}", version, {f"{directory}/{soname}": builder.build(
                soname, source, soname=soname, directory=f"{part}-{version}")})
        # an extra per part besides [all], as the real metapackage has: the fix names [all] alone
        wheel("cuda-toolkit", toolkit, {}, extras=("all", *parts), requires=tuple(
            f'nvidia-{part}{suffix}=={version}.*; extra == "{extra}"' for part, (version, _) in parts.items()
            for extra in ("all", part)))
    return found


def offered(built: Path, tmp_path: Path, *names: str) -> Path:
    """A --find-links directory with the wheels of `names` only."""
    directory = tmp_path / "offered"
    directory.mkdir()
    for wheel in built.iterdir():
        if any(wheel.name.startswith(name.replace("-", "_") + "-") for name in names):
            os.link(wheel, directory / wheel.name)
    return directory


@pytest.fixture(scope="module")
def venv_of(built, tmp_path_factory, venv_with_pip) -> Callable[..., Path]:
    """`venv_of(tmp_path, *requirements)` -> the interpreter of tmp_path/venv, a hard-link copy of a venv
    holding `requirements` from `built`: each set installed by pip once per module, so a test's pip
    steps (which replace files, never write into them) leave the others' venvs as they were."""
    templates: dict[tuple[str, ...], Path] = {}

    def made(tmp_path: Path, *requirements: str) -> Path:
        if requirements not in templates:
            template = venv_with_pip(tmp_path_factory.mktemp("judge-venv") / "venv")
            offline_pip(template / "bin" / "python", built, ["install", "--no-deps", *requirements])
            templates[requirements] = template
        return linked_venv(templates[requirements], tmp_path / "venv") / "bin" / "python"

    return made


def index_for(python: Path, links: Path, tmp_path: Path) -> PackageIndex:
    target = target_for_python(str(python))
    environ = {"CUDARESOLVE_CACHE_DIR": str(tmp_path / "cache"), "PIP_CONFIG_FILE": os.devnull}
    assert target.python is not None and target.prefix is not None
    config = index_config(target.python, target.prefix, environ, None,
                          IndexSettings(no_index=True, find_links=(str(links),)))
    return open_index(config, target, environ)


def doctor(python: Path, tmp_path: Path, index=None, host: HostFacts = HOST_570) -> tuple[Finding, ...]:
    environ = {"CUDARESOLVE_CACHE_DIR": str(tmp_path / "cache"), "LD_LIBRARY_PATH": "", "LD_PRELOAD": ""}
    judging = Judging(lambda: contextlib.nullcontext(index)) if index is not None else None
    return examine(target_for_python(str(python)), host, environ, judging=judging).findings


def skew(findings: tuple[Finding, ...]) -> Finding:
    [found] = [finding for finding in findings if finding.check == Check.SYMBOL_SKEW]
    return found


def test_a_fix_that_passes_is_printed_with_its_install_line_and_converges_with_real_pip(built, venv_of, tmp_path):
    python = venv_of(tmp_path, "skewpkg==1.0", "nvidia-nvjitlink-cu12==12.1.105")
    links = offered(built, tmp_path, "skewpkg", "nvidia-nvjitlink-cu12")
    with index_for(python, links, tmp_path) as index:
        finding = skew(doctor(python, tmp_path, index))
    assert finding.fix == f.WithInstall(f.PipInstall((Requirement("nvidia-nvjitlink-cu12>=12.8"),)),
                                        (Requirement("nvidia-nvjitlink-cu12>=12.8"),))
    assert shown(finding).fix == (f'{SKEW_FIX} (or, locked and judged again: '
                                  'cudaresolve install "nvidia-nvjitlink-cu12>=12.8")')
    for arguments in pip_arguments(finding.fix):
        offline_pip(python, links, arguments)
    assert [shown(f) for f in doctor(python, tmp_path / "after") if f.severity == "error"] == []


def test_a_release_the_index_does_not_offer_is_not_printed(built, venv_of, tmp_path):
    python = venv_of(tmp_path, "skewpkg==1.0", "nvidia-nvjitlink-cu12==12.1.105")
    links = offered(built, tmp_path, "skewpkg")  # no nvJitLink at all: 12.8 is not offered
    with index_for(python, links, tmp_path) as index:
        finding = skew(doctor(python, tmp_path, index))
    assert finding.fix == f.NoFixFound((f.Refused(
        f.PipInstall((Requirement("nvidia-nvjitlink-cu12>=12.8"),)),
        f.NotOffered(Requirement("nvidia-nvjitlink-cu12>=12.8"))),))
    assert shown(finding).fix == (f'no fix found here ({SKEW_FIX}: no release of nvidia-nvjitlink-cu12 on the '
                                  'configured indexes meets "nvidia-nvjitlink-cu12>=12.8")')


def test_a_fix_that_breaks_what_an_installed_extra_requires_names_both_ranges(built, venv_of, tmp_path):
    """holdpkg[cuda] pins nvJitLink below 12.2, skewpkg needs 12.8: no release serves both."""
    python = venv_of(tmp_path, "skewpkg==1.0", "nvidia-nvjitlink-cu12==12.1.105", "holdpkg[cuda]==1.0")
    links = offered(built, tmp_path, "skewpkg", "nvidia-nvjitlink-cu12", "holdpkg")
    with index_for(python, links, tmp_path) as index:
        finding = skew(doctor(python, tmp_path, index))
    assert isinstance(finding.fix, f.NoFixFound)
    [refused] = finding.fix.tried
    assert refused.why == f.BreaksRequirement("holdpkg", refused.why.version, Requirement("nvidia-nvjitlink-cu12<12.2"),
                                              "cuda", refused.why.planned)
    assert str(refused.why.planned) == "12.8.93"
    assert shown(finding).fix == (f'no fix found here ({SKEW_FIX}: holdpkg 1.0 requires "nvidia-nvjitlink-cu12<12.2" '
                                  '(extra cuda); it would install 12.8.93)')


def test_an_alternative_on_an_older_cuda_major_is_refused_and_the_next_one_printed(built, venv_of, tmp_path):
    """A CUDA 11 runtime in a CUDA 12 environment the driver runs is passed over for the next alternative."""
    python = venv_of(tmp_path, "skewpkg==1.0", "nvidia-nvjitlink-cu12==12.1.105")
    links = offered(built, tmp_path, "skewpkg", "nvidia-nvjitlink-cu12", "nvidia-cuda-runtime-cu11")
    findings = doctor(python, tmp_path)
    eleven = f.PipInstall((Requirement("nvidia-cuda-runtime-cu11"),))
    twelve = f.PipInstall((Requirement("nvidia-nvjitlink-cu12>=12.8"),))
    posed = replace(skew(findings), fix=f.Alternatives((eleven, twelve)))
    env = examine(target_for_python(str(python)), HOST_570, {"CUDARESOLVE_CACHE_DIR": str(tmp_path / "cache")}).environment
    with index_for(python, links, tmp_path) as index:
        [judged] = judge_fixes(env, HOST_570, (posed,), index)
        [only] = judge_fixes(env, HOST_570, (replace(posed, fix=eleven),), index)
        upgrade = f.DriverUpgrade(None)  # a step this room does not plan stays beside the refusal
        [mixed] = judge_fixes(env, HOST_570, (replace(posed, fix=f.Alternatives((upgrade, eleven))),), index)
    assert judged.fix == f.WithInstall(twelve, twelve.requirements)
    assert only.fix == f.NoFixFound((f.Refused(eleven, f.LeavesDriverMajor(11, 12)),))
    assert mixed.fix == f.Alternatives((upgrade, only.fix))

    assert render_fix(only.fix) == ('no fix found here (pip install "nvidia-cuda-runtime-cu11": it moves the '
                                    'environment from CUDA 12 to CUDA 11)')


def test_the_pip_steps_of_a_fix_a_loader_path_finishes_are_judged_for_the_major_they_bring(built, venv_of, tmp_path):
    """`pip install X, then put DIR on LD_LIBRARY_PATH`: the plan cannot follow the path, so the finding
    is not asked to clear, but what pip's steps bring is judged: a CUDA 11 runtime in the CUDA 12
    environment the driver runs is refused; a CUDA 12 wheel passes, printed as it is (no install line)."""
    python = venv_of(tmp_path, "skewpkg==1.0", "nvidia-nvjitlink-cu12==12.1.105")
    links = offered(built, tmp_path, "skewpkg", "nvidia-nvjitlink-cu12", "nvidia-cuda-runtime-cu11")
    findings = doctor(python, tmp_path)
    path = f.AddToPath("LD_LIBRARY_PATH", str(tmp_path / "lib"))
    eleven = f.Steps((f.PipInstall((Requirement("nvidia-cuda-runtime-cu11"),)), path))
    twelve = f.Steps((f.PipInstall((Requirement("nvidia-nvjitlink-cu12>=12.8"),)), path))
    env = examine(target_for_python(str(python)), HOST_570, {"CUDARESOLVE_CACHE_DIR": str(tmp_path / "cache")}).environment
    with index_for(python, links, tmp_path) as index:
        [refused] = judge_fixes(env, HOST_570, (replace(skew(findings), fix=eleven),), index)
        [kept] = judge_fixes(env, HOST_570, (replace(skew(findings), fix=twelve),), index)
    assert refused.fix == f.NoFixFound((f.Refused(eleven, f.LeavesDriverMajor(11, 12)),))
    assert kept.fix == twelve


def test_the_install_line_of_a_fix_that_uninstalls_first_uninstalls_the_same(built, venv_of, tmp_path):
    """`pip uninstall A, then pip install B`: its `cudaresolve install B` line keeps the uninstall, or
    the lock would keep A (a lock installs, it removes nothing)."""
    python = venv_of(tmp_path, "skewpkg==1.0", "nvidia-nvjitlink-cu12==12.1.105", "nvidia-cuda-runtime-cu11==11.8.89")
    links = offered(built, tmp_path, "skewpkg", "nvidia-nvjitlink-cu12")
    twelve = f.PipInstall((Requirement("nvidia-nvjitlink-cu12>=12.8"),))
    steps = f.Steps((f.PipUninstall(("nvidia-cuda-runtime-cu11",)), twelve))
    env = examine(target_for_python(str(python)), HOST_570, {"CUDARESOLVE_CACHE_DIR": str(tmp_path / "cache")}).environment
    with index_for(python, links, tmp_path) as index:
        [judged] = judge_fixes(env, HOST_570, (replace(skew(doctor(python, tmp_path)), fix=steps),), index)
    assert judged.fix == f.WithInstall(steps, twelve.requirements, ("nvidia-cuda-runtime-cu11",))
    assert render_fix(judged.fix).endswith("(or, locked and judged again: pip uninstall nvidia-cuda-runtime-cu11, then "
                                           'cudaresolve install "nvidia-nvjitlink-cu12>=12.8")')


def test_doctor_judge_fixes_prints_no_fix_found_here(built, venv_of, tmp_path):
    """The command line: `doctor --judge-fixes` with the indexes of its options."""
    import subprocess
    import sys

    from conftest import hermetic_environ

    python = venv_of(tmp_path, "skewpkg==1.0", "nvidia-nvjitlink-cu12==12.1.105")
    links = offered(built, tmp_path, "skewpkg")
    done = subprocess.run(
        [sys.executable, "-m", "cudaresolve", "doctor", "--python", str(python), "--judge-fixes", "--no-index",
         "--find-links", str(links), "--driver", "570.86.15", "--gpu", "8.6"],
        capture_output=True, text=True, timeout=300,
        env=hermetic_environ({"CUDARESOLVE_CACHE_DIR": str(tmp_path / "cache")}), cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "no fix found here (pip install" in " ".join(done.stdout.split())


def arch(findings: tuple[Finding, ...]) -> Finding:
    [found] = [finding for finding in findings if finding.check == Check.ARCH_COVERAGE]
    return found


def test_an_arch_fix_names_the_newest_offered_release_whose_code_runs_and_it_converges(built, venv_of, tmp_path):
    """Without a table row, the releases the index offers are read newest first: 3.0 lacks sm_86, 2.0 has it."""
    python = venv_of(tmp_path, "archpkg==1.0")
    links = offered(built, tmp_path, "archpkg")
    assert isinstance(arch(doctor(python, tmp_path / "plain")).fix, f.BuildWithCuda)  # no release named without the index
    with index_for(python, links, tmp_path) as index:
        finding = arch(doctor(python, tmp_path, index))
    install = f.PipInstall((Requirement("archpkg==2.0"),))
    assert finding.fix == f.WithInstall(f.Explained(install, f.OfferedThatRuns((HOST_570.gpus[0].compute_capability,))),
                                        install.requirements)
    assert shown(finding).fix.startswith('pip install "archpkg==2.0" (the newest release the indexes offer whose device '
                                         "code runs on compute capability 8.6)")
    for arguments in pip_arguments(finding.fix):
        offline_pip(python, links, arguments)
    assert [shown(f) for f in doctor(python, tmp_path / "after") if f.severity == "error"] == []


def test_an_arch_fix_says_no_offered_release_has_the_code(built, venv_of, tmp_path):
    python = venv_of(tmp_path, "archpkg==1.0")
    links = tmp_path / "only-3"
    links.mkdir()
    for wheel in built.glob("archpkg-3.0-*.whl"):
        os.link(wheel, links / wheel.name)
    with index_for(python, links, tmp_path) as index:
        finding = arch(doctor(python, tmp_path, index))
    assert finding.fix == f.NoFixFound((f.Refused(f.PipInstall((Requirement("archpkg==3.0"),)), f.KeepsFinding()),))
    assert shown(finding).fix == 'no fix found here (pip install "archpkg==3.0": the finding stays after it)'


def test_an_arch_fix_passes_over_a_release_whose_import_fails(built, venv_of, tmp_path):
    """corepkg 3.0 has the code, but its import loads libpkgcore.so, which needs a library nothing
    ships: judged by 3.0's own import model (not 1.0's, installed, which loads no such file), the plan
    of 3.0 adds that error, so the fix names 2.0; with 3.0 alone offered, no fix is found."""
    python = venv_of(tmp_path, "corepkg==1.0")
    with index_for(python, offered(built, tmp_path, "corepkg"), tmp_path) as index:
        finding = arch(doctor(python, tmp_path, index))
    install = f.PipInstall((Requirement("corepkg==2.0"),))
    assert finding.fix == f.WithInstall(f.Explained(install, f.OfferedThatRuns((HOST_570.gpus[0].compute_capability,))),
                                        install.requirements)
    links = tmp_path / "only-3"
    links.mkdir()
    for wheel in built.glob("corepkg-3.0-*.whl"):
        os.link(wheel, links / wheel.name)
    with index_for(python, links, tmp_path / "only") as index:
        finding = arch(doctor(python, tmp_path / "only", index))
    assert finding.fix == f.NoFixFound((f.Refused(f.PipInstall((Requirement("corepkg==3.0"),)),
                                                  f.AddsError("missing-library", "corepkg")),))


def test_a_build_older_than_the_gpus_first_cuda_is_sent_to_a_newer_release():
    """sm_120 is first targeted by CUDA 12.8: a CUDA 12.1 build lacking it has no older release that carries it."""
    from packaging.version import Version

    from cudaresolve.arch import ComputeCapability
    from cudaresolve.checks.builds import CudaBuild
    from cudaresolve.checks.suggest import arch_fix
    from cudaresolve.env.distributions import Distribution
    from cudaresolve.host.facts import Gpu
    from cudaresolve.versions import CudaVersion

    blackwell = ComputeCapability(12, 0)
    host = replace(HOST_570, gpus=(Gpu(blackwell, "override:--gpu", 0),))
    dist = Distribution("somepkg", Version("1.0"), (), "pip", "/site/somepkg-1.0.dist-info", ())
    fix = arch_fix(dist, blackwell, host, CudaBuild("somepkg", "1.0", CudaVersion(12, 1), "test"))
    assert isinstance(fix, f.NewerReleaseNeeded) and fix.minimum == CudaVersion(12, 8)
    assert "older release" not in render_fix(fix).replace("no older release carries it", "")
    major_only = arch_fix(dist, blackwell, host, CudaBuild("somepkg", "1.0", CudaVersion(12), "test"))
    assert isinstance(major_only, f.NewerReleaseNeeded)
    # a build of a CUDA that still targets the GPU keeps the older-release advice (sm_61 dropped by CUDA 13)
    pascal = ComputeCapability(6, 1)
    older = arch_fix(dist, pascal, replace(HOST_570, gpus=(Gpu(pascal, "override:--gpu", 0),)),
                     CudaBuild("somepkg", "1.0", CudaVersion(12, 1), "test"))
    assert isinstance(older, f.OlderReleaseMayCarry)


class ListedIndex:
    """An index's listing as plain data: name -> the versions of its wheels."""

    def __init__(self, listed: dict[str, tuple[str, ...]]):
        self.listed = listed

    def files(self, name: str, torch_variant=None):
        from types import SimpleNamespace

        from packaging.version import Version

        return tuple(SimpleNamespace(version=Version(v), is_wheel=True, yanked=None) for v in self.listed.get(name, ()))

    def installable(self, files):
        return tuple(files)


def test_a_build_no_index_offers_is_said_so_and_one_it_may_offer_stays():
    from cudaresolve.resolve.fix_judge import offered_builds
    from cudaresolve.versions import CudaVersion, DriverRelease

    index = ListedIndex({"nvidia-cusparse-cu12": ("12.5.8.93", "12.5.10.65"), "somepkg": ("1.0",)})
    upgrade = f.DriverUpgrade(DriverRelease.parse("525.60.13"))
    eleven = f.InstallBuild(("nvidia-cusparse-cu12",), CudaVersion(11, 4))
    judged = offered_builds(f.Alternatives((upgrade, eleven)), HOST_570, index)
    assert judged == f.Alternatives((upgrade, f.NoFixFound((f.Refused(eleven, f.NoBuildOffered("nvidia-cusparse-cu12", 11)),))))
    assert render_fix(judged).endswith("or no fix found here (install a build of nvidia-cusparse-cu12 for CUDA 11.4: "
                                       "the configured indexes offer no build of nvidia-cusparse-cu12 for CUDA 11)")
    missing = f.InstallBuild(("jax-cuda13-plugin",), CudaVersion(12, 8))
    assert offered_builds(missing, HOST_570, index) == f.NoFixFound((f.Refused(missing, f.NotOffered(Requirement("jax-cuda13-plugin"))),))
    unknown = f.InstallBuild(("somepkg",), CudaVersion(11, 4))  # the tables know no build of it: the advice stays
    assert offered_builds(unknown, HOST_570, index) == unknown


def test_component_errors_of_one_consumer_fold_into_its_finding():
    """A framework of no known build requiring two CUDA 12 wheels on a CUDA 11.4 driver: one finding,
    the framework's, with the wheels as evidence; a lone wheel no one requires keeps its own."""
    from test_checks_planned import dist, planned

    from cudaresolve.checks import judge
    from cudaresolve.checks.evidence import DependenciesFailToo
    from cudaresolve.host.facts import Driver
    from cudaresolve.versions import CudaVersion, DriverRelease

    host = replace(HOST_570, driver=Driver(DriverRelease.parse("470.256.02"), "override:--driver", CudaVersion(11, 4),
                                           "derived:branch-table"))
    env = planned(dist("someframework", "1.0", "nvidia-cublas-cu12", "nvidia-cufft-cu12"),
                  dist("nvidia-cublas-cu12", "12.8.4.1"), dist("nvidia-cufft-cu12", "11.3.3.83"),
                  dist("nvidia-curand-cu12", "10.3.9.90"))
    floors = [finding for finding in judge(env, host).findings if finding.check == Check.DRIVER_FLOOR]
    assert sorted(str(finding.subject.distribution) for finding in floors) == ["nvidia-curand-cu12", "someframework"]
    [framework] = [finding for finding in floors if finding.subject.distribution == "someframework"]
    assert DependenciesFailToo(("nvidia-cublas-cu12", "nvidia-cufft-cu12")) in framework.evidence
    assert "someframework" in shown(framework).fix


def test_an_index_that_cannot_be_read_leaves_the_fix_unchecked_saying_why(built, venv_of, tmp_path):
    """The PyTorch index seen from a machine that cannot reach it: the fix whose release only that index
    would serve is printed as the tables give it, marked not checked with the index's failure; the
    finding and its severity stand."""
    from cudaresolve.index.http import IndexAccessError

    python = venv_of(tmp_path, "skewpkg==1.0", "nvidia-nvjitlink-cu12==12.1.105")
    links = offered(built, tmp_path, "skewpkg", "nvidia-nvjitlink-cu12")
    failure = "cannot fetch http://127.0.0.1:9/simple/nvidia-nvjitlink-cu12/: connection refused"
    with index_for(python, links, tmp_path) as index:
        real = index.files

        def files(name, *rest):
            if name == "nvidia-nvjitlink-cu12":
                raise IndexAccessError(failure)
            return real(name, *rest)

        index.files = files
        finding = skew(doctor(python, tmp_path, index))
    assert finding.fix == f.Unchecked(f.PipInstall((Requirement("nvidia-nvjitlink-cu12>=12.8"),)), failure)
    assert finding.severity.value == "error"
    assert shown(finding).fix == f"{SKEW_FIX} (not checked against the indexes: an index could not be read: {failure})"


PASCAL_580 = replace(HOST_570, driver=Driver(DriverRelease.parse("580.65.06"), "override:--driver", CudaVersion(13, 0),
                                             "derived:branch-table"),
                     gpus=(Gpu(ComputeCapability(6, 1), "override:--gpu", 0),))


def toolkit_13(venv_of, tmp_path: Path) -> Path:
    return venv_of(tmp_path, "cuda-toolkit[all]==13.5.0", "nvidia-cufft==12.5.0.14", "nvidia-curand==10.4.5.25",
                     "nvidia-npp==13.2.0.93")


THE_13_WHEELS = ("nvidia-cufft", "nvidia-curand", "nvidia-npp")


def test_component_arch_errors_of_one_toolkit_are_one_finding_whose_fix_is_the_cuda_12_toolkit(built, venv_of, tmp_path):
    """cuda-toolkit[all] 13.5.0 on a Pascal GPU: its CUDA 13 wheels lack sm_61, as every CUDA 13 release does. One
    finding, the toolkit's; 13.4.0 is not tried; 12.9.1 comes in place of the CUDA 13 wheels, applied with pip."""
    python = toolkit_13(venv_of, tmp_path)
    plain = [finding for finding in doctor(python, tmp_path / "plain", host=PASCAL_580) if finding.severity == "error"]
    assert [(found.check, found.subject.distribution) for found in plain] == [
        (Check.ARCH_COVERAGE, "cuda-toolkit"), (Check.ARCH_COVERAGE, "nvidia-npp")]
    assert DependenciesFailToo(("nvidia-cufft", "nvidia-curand"), ComputeCapability(6, 1)) in plain[0].evidence
    links = offered(built, tmp_path, "cuda-toolkit", *THE_13_WHEELS, *(f"{name}-cu12" for name in THE_13_WHEELS))
    with index_for(python, links, tmp_path) as index:
        finding, npp = [found for found in doctor(python, tmp_path, index, host=PASCAL_580) if found.severity == "error"]
    install = f.PipInstall((Requirement("cuda-toolkit[all]==12.9.1"),), replaces=THE_13_WHEELS)
    assert finding.fix == f.WithInstall(f.Explained(install, f.OfferedThatRuns((ComputeCapability(6, 1),))),
                                        install.requirements, install.replaces)
    assert npp.fix == finding.fix  # a wheel the toolkit pins moves with the toolkit's release
    assert shown(finding).fix == ('pip install "cuda-toolkit[all]==12.9.1" in place of nvidia-cufft, nvidia-curand, '
                                  "nvidia-npp (the newest release the indexes offer whose device code runs on compute "
                                  "capability 6.1) (or, locked and judged again: pip uninstall nvidia-cufft nvidia-curand "
                                  'nvidia-npp, then cudaresolve install "cuda-toolkit[all]==12.9.1")')
    for arguments in pip_arguments(finding.fix):
        offline_pip(python, links, arguments)
    assert [shown(f) for f in doctor(python, tmp_path / "after", host=PASCAL_580) if f.severity == "error"] == []


def test_an_arch_fix_says_no_release_of_the_major_has_the_code_when_the_older_major_is_not_offered(built, venv_of, tmp_path):
    python = toolkit_13(venv_of, tmp_path)
    links = tmp_path / "only-13"
    links.mkdir()
    for wheel in built.iterdir():
        if wheel.name.startswith(("cuda_toolkit-13", "nvidia_cufft-", "nvidia_curand-", "nvidia_npp-")):
            os.link(wheel, links / wheel.name)
    with index_for(python, links, tmp_path) as index:
        finding, npp = [found for found in doctor(python, tmp_path, index, host=PASCAL_580) if found.severity == "error"]
    assert npp.fix == finding.fix
    assert isinstance(finding.fix, f.NoFixFound)
    [refused] = finding.fix.tried
    assert refused.why == f.NoMajorTargets("cuda-toolkit", (13,), (ComputeCapability(6, 1),), CudaVersion(12, 9))
    assert shown(finding).fix.endswith(": no CUDA 13 release builds code for compute capability 6.1; the newest CUDA "
                                       "that does is 12.9, and the configured indexes offer no release of cuda-toolkit "
                                       "built with it)")


def test_a_build_for_the_drivers_cuda_is_the_newest_offered_release_of_that_cuda_in_place_of_the_other_majors(built, venv_of, tmp_path):
    """cuda-toolkit[all] 13.5.0 on driver 535 (CUDA 12.2): "a build for CUDA 12.2" is cuda-toolkit 12.2.2 (12.9.1 is
    newer than the driver's CUDA), in place of the CUDA 13 wheels; applied with pip, no error stays."""
    python = toolkit_13(venv_of, tmp_path)
    host = replace(HOST_570, driver=Driver(DriverRelease.parse("535.104.05"), "override:--driver", CudaVersion(12, 2),
                                           "derived:branch-table"))
    links = offered(built, tmp_path, "cuda-toolkit", *THE_13_WHEELS, *(f"{name}-cu12" for name in THE_13_WHEELS))
    install = f.PipInstall((Requirement("cuda-toolkit[all]==12.2.2"),), replaces=THE_13_WHEELS)
    with index_for(python, links, tmp_path) as index:
        [finding] = [found for found in doctor(python, tmp_path, index, host=host) if found.severity == "error"]
        # of two names, the one that pulls in the other is moved
        env = examine(target_for_python(str(python)), host, {"CUDARESOLVE_CACHE_DIR": str(tmp_path / "cache")}).environment
        both = replace(finding, fix=f.InstallBuild(("nvidia-cufft", "cuda-toolkit"), CudaVersion(12, 2)))
        [judged] = judge_fixes(env, host, (both,), index)
    assert judged.fix == f.WithInstall(install, install.requirements, install.replaces)
    assert finding.check == Check.DRIVER_FLOOR and finding.subject.distribution == "cuda-toolkit"
    assert isinstance(finding.fix, f.Alternatives), finding.fix
    assert finding.fix.options[1] == f.WithInstall(install, install.requirements, install.replaces), finding.fix
    assert ', or pip install "cuda-toolkit[all]==12.2.2" in place of nvidia-cufft, nvidia-curand, nvidia-npp' in shown(finding).fix
    for arguments in pip_arguments(finding.fix.options[1]):
        offline_pip(python, links, arguments)
    assert [shown(f) for f in doctor(python, tmp_path / "after", host=host) if f.severity == "error"] == []
