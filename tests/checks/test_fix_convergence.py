"""Every kind of fix the doctor gives, applied and judged again (issue 26, "fixes proven").

Each test builds a small environment that shows one finding: a real venv, filled by real pip from a
--find-links directory of gcc-built wheels. It runs the doctor, takes the fix from the finding's
value (never its words), checks that the fix is not already met, applies it — pip steps with the
venv's pip, a loader variable set or unset in the environ the doctor and glibc's loader are given, a
file removed, the host given the driver the fix names — and judges again: the finding is gone and
no new error has appeared. docs/doctor.md lists every kind with the test that proves it, here or in
the test files that already applied it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Optional, Union

import pytest
from fix_steps import pip_arguments, satisfied_fixes
from index_server import make_wheel
from packaging.requirements import Requirement
from test_conda_env import EXT, TAG, extension_source

from cudaresolve.arch import ComputeCapability
from cudaresolve.checks import Diagnosis
from cudaresolve.checks import fixes as f
from cudaresolve.checks.findings import Finding
from cudaresolve.checks.problems import DlopenedNotFound
from cudaresolve.commands.diagnosing import examine
from cudaresolve.env.interpreter import target_for_python
from cudaresolve.host.facts import Driver, Gpu, HostFacts
from cudaresolve.knowledge import advisories, toolkits
from cudaresolve.output.findings import shown
from cudaresolve.versions import CudaVersion, DriverRelease

HOST_550 = HostFacts(
    "Linux", "x86_64",
    Driver(DriverRelease.parse("550.144.03"), "override:--driver", CudaVersion.parse("12.4"), "derived:branch-table"),
    (Gpu(ComputeCapability(8, 6), "override:--gpu", 0),),
)
HOST_570 = replace(HOST_550, driver=replace(HOST_550.driver, release=DriverRelease.parse("570.86.15"),
                                            cuda=CudaVersion.parse("12.8")))  # runs CUDA 12.8 natively
FOO_V1 = "int foo_old(void) { return 1; }\n"
FOO_V2 = FOO_V1 + "int foo_new(void) { return 2; }\n"
MAP_V1 = "FOO_1.0 { global: foo_old; local: *; };\n"
MAP_V2 = MAP_V1 + "FOO_2.0 { global: foo_new; } FOO_1.0;\n"
USES_FOO = "int foo_old(void); int foo_new(void);\nint consume(void) { return foo_old() + foo_new(); }\n"
NVJITLINK_DIR = "nvidia/nvjitlink/lib"


Files = dict[str, Union[Path, bytes]]


@dataclass
class World:
    """A venv, the wheels its pip may install, the variables and host the doctor (and glibc) are given."""

    root: Path
    wheels: Path
    scratch: Path
    host: HostFacts = HOST_550
    environ: dict[str, str] = field(default_factory=lambda: {"LD_LIBRARY_PATH": "", "LD_PRELOAD": ""})
    judged: int = 0
    torch_index_base: Optional[str] = None  # where a TorchVariant's index path is served

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    @property
    def site(self) -> Path:
        return self.root / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"

    def wheel(self, name: str, version: str, files: Files, requires: tuple[str, ...] = ()) -> None:
        members = {member: data if isinstance(data, bytes) else data.read_bytes() for member, data in files.items()}
        for package in {member.split("/")[0] for member in files if not member.startswith("nvidia/")}:
            # `import <package>` imports its extension modules, so their needs are import-time
            modules = sorted(inner.split(".")[0] for member in files if member.startswith(package + "/")
                             and (inner := member[len(package) + 1:]) and "/" not in inner
                             and inner.endswith(".so") and not inner.startswith("lib"))
            members.setdefault(f"{package}/__init__.py", "".join(f"from . import {m}\n" for m in modules).encode())
        filename, data = make_wheel(name, version, requires=requires, tag=TAG, files=members)
        (self.wheels / filename).write_bytes(data)

    def pip(self, arguments: list[str]) -> None:
        """The venv's own pip, offline: the wheels above only, no configuration, no cache."""
        offline = ["--no-index", "--find-links", str(self.wheels), "--no-deps"] if arguments[0] == "install" else []
        done = subprocess.run([str(self.python), "-m", "pip", *arguments, *offline, "--disable-pip-version-check",
                               "--no-cache-dir", "--isolated"], capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr

    def pip_online(self, arguments: list[str], index_url: str) -> None:
        """The venv's pip on a hermetic index on 127.0.0.1, dependencies included."""
        done = subprocess.run([str(self.python), "-m", "pip", *arguments, "--index-url", index_url,
                               "--disable-pip-version-check", "--no-cache-dir", "--isolated"],
                              capture_output=True, text=True, env={**os.environ, "PIP_CONFIG_FILE": os.devnull})
        assert done.returncode == 0, done.stdout + done.stderr

    def judge(self) -> Diagnosis:
        self.judged += 1  # a fresh facts cache each time: what is judged is the change, not a cached result
        environ = {**self.environ, "CUDARESOLVE_CACHE_DIR": str(self.scratch / f"cache-{self.judged}")}
        return examine(target_for_python(str(self.python)), self.host, environ)

    def apply(self, fix: f.Fix) -> None:
        """Each step of `fix` (the first of any alternatives) as the real change it asks for."""
        for step in f.actions(fix):
            if isinstance(step, (f.PipInstall, f.PipUninstall)):
                for arguments in pip_arguments(step):
                    self.pip(arguments)
            elif isinstance(step, f.AddToPath):
                assert step.directory is not None, "a directory to add must be named to be applied"
                entries = [entry for entry in self.environ.get(step.variable, "").split(":") if entry]
                self.environ[step.variable] = ":".join(
                    [step.directory, *entries] if step.first else [*entries, step.directory])
            elif isinstance(step, (f.RemoveFromPath, f.RemoveStaleDirectory)):
                entry = step.entry if isinstance(step, f.RemoveFromPath) else step.directory
                entries = self.environ.get(step.variable, "").replace(" ", ":").split(":")
                assert entry in entries, f"{entry} is not in {step.variable}"
                self.environ[step.variable] = ":".join(e for e in entries if e and e != entry)
            elif isinstance(step, f.TorchVariant):
                assert self.torch_index_base is not None, "a PyTorch-style index must be served to apply a torch variant"
                self.pip_online(["install", str(step.requirement)], f"{self.torch_index_base}/{step.index_path}")
            elif isinstance(step, f.RemoveCopy):
                os.remove(step.path)
            elif isinstance(step, f.DriverUpgrade):
                assert step.minimum is not None, "an upgrade must name its driver to be applied"
                self.host = replace(self.host, driver=Driver(step.minimum, "override:--driver",
                                                             toolkits.max_cuda_for_driver(step.minimum), "derived:branch-table"))
            else:
                raise AssertionError(f"no way to apply {step!r} here")

    def dlopen(self, path: Path) -> str:
        """glibc's word on loading `path` under this world's variables: "" when it loads."""
        env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
        env.update({k: v for k, v in self.environ.items() if v})
        code = "import ctypes, sys\ntry:\n    ctypes.CDLL(sys.argv[1])\nexcept OSError as e:\n    print(e)\n"
        return subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, env=env,
                              check=True).stdout.strip()


@pytest.fixture
def world(venv_with_pip, tmp_path) -> World:
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    (tmp_path / "wheels").mkdir()
    return World(venv_with_pip(tmp_path / "venv"), tmp_path / "wheels", tmp_path)


def key(finding: Finding) -> tuple[str, str]:
    text = shown(finding)
    return (text.check, text.subject)


def errors(diagnosis: Diagnosis) -> set[tuple[str, str]]:
    return {key(finding) for finding in diagnosis.findings if finding.severity == "error"}


def converges(world: World, finding: Finding, before: Diagnosis, apply=None) -> Diagnosis:
    """Apply `finding`'s fix (or `apply`, a part of it chosen by the test) and judge again: the
    finding is gone and no error appeared that was not there before. The fix must change something:
    no `pip install` in it is met already."""
    assert satisfied_fixes(before.findings, before.environment) == []
    world.apply(apply if apply is not None else finding.fix)
    after = world.judge()
    assert key(finding) not in {key(other) for other in after.findings}, [shown(x) for x in after.findings]
    assert errors(after) <= errors(before), [shown(x) for x in after.findings]
    return after


def found(diagnosis: Diagnosis, check: str) -> Finding:
    matching = [finding for finding in diagnosis.findings if finding.check == check]
    assert len(matching) == 1, [shown(finding) for finding in diagnosis.findings]
    return matching[0]


# -- loader variables ----------------------------------------------------------------------------------


@pytest.fixture
def foo_world(world, elf_builder) -> tuple[World, Path, Path]:
    """nvidia-foo-cu12 ships libfoo.so.1 with FOO_2.0; consumer-pkg's libconsumer.so needs FOO_2.0 and
    finds the wheel's copy through its RUNPATH; an older libfoo.so.1 (FOO_1.0 only) lies in `stale/`,
    outside the venv. Returns the world, the installed consumer and the stale directory."""
    new = elf_builder.build("libfoo.so.1", FOO_V2, soname="libfoo.so.1", version_script=MAP_V2, directory="site/nvidia/foo/lib")
    stale = elf_builder.build("libfoo.so.1", FOO_V1, soname="libfoo.so.1", version_script=MAP_V1, directory="stale")
    consumer = elf_builder.build("libconsumer.so", USES_FOO, link=[new], runpath="$ORIGIN/../../nvidia/foo/lib",
                                 directory="site/consumer/lib")
    world.wheel("nvidia-foo-cu12", "1.2", {"nvidia/foo/lib/libfoo.so.1": new})
    world.wheel("consumer-pkg", "1.0", {"consumer/lib/libconsumer.so": consumer}, requires=("nvidia-foo-cu12",))
    world.pip(["install", "consumer-pkg", "nvidia-foo-cu12"])
    assert world.judge().findings == ()
    return world, world.site / "consumer/lib/libconsumer.so", stale.parent


def test_remove_from_ld_library_path_and_remove_the_stale_directory_converge(foo_world):
    """A stale directory on LD_LIBRARY_PATH: symbol-skew (RemoveFromPath) and shadowing
    (RemoveStaleDirectory), one change clears both, in the doctor's judgement and glibc's."""
    world, consumer, stale = foo_world
    world.environ["LD_LIBRARY_PATH"] = str(stale)
    before = world.judge()
    skew, shadowing = found(before, "symbol-skew"), found(before, "shadowing")
    assert skew.fix == f.Explained(f.RemoveFromPath("LD_LIBRARY_PATH", str(stale)), f.TakenFirst("libfoo.so.1"))
    assert shadowing.fix == f.RemoveStaleDirectory("LD_LIBRARY_PATH", str(stale))
    assert "version `FOO_2.0' not found" in world.dlopen(consumer)
    saved = dict(world.environ)
    after = converges(world, skew, before)
    assert after.findings == () and world.dlopen(consumer) == ""
    world.environ = saved
    after = converges(world, shadowing, before)
    assert after.findings == () and world.dlopen(consumer) == ""


def test_remove_from_ld_preload_converges(foo_world):
    world, consumer, stale = foo_world
    world.environ["LD_PRELOAD"] = str(stale / "libfoo.so.1")
    before = world.judge()
    skew = found(before, "symbol-skew")
    assert skew.fix == f.Explained(f.RemoveFromPath("LD_PRELOAD", str(stale / "libfoo.so.1")), f.PreloadServes("libfoo.so.1"))
    assert "version `FOO_2.0' not found" in world.dlopen(consumer)
    after = converges(world, skew, before)
    assert after.findings == () and world.dlopen(consumer) == ""


def test_add_to_path_converges_where_the_environment_has_the_library_elsewhere(world, elf_builder):
    """consumer-pkg's extension names no RUNPATH; the wheel's libfoo.so.1 is installed but not where it looks."""
    new = elf_builder.build("libfoo.so.1", FOO_V2, soname="libfoo.so.1", version_script=MAP_V2, directory="site/nvidia/foo/lib")
    consumer = extension(elf_builder, "consumer", "foo_new()", [new], None)
    world.wheel("nvidia-foo-cu12", "1.2", {"nvidia/foo/lib/libfoo.so.1": new})
    world.wheel("consumer-pkg", "1.0", {f"consumer/_ext{EXT}": consumer}, requires=("nvidia-foo-cu12",))
    world.pip(["install", "consumer-pkg", "nvidia-foo-cu12"])
    before = world.judge()
    missing = found(before, "missing-library")
    assert missing.fix == f.Explained(
        f.Alternatives((f.AddToPath("LD_LIBRARY_PATH", str(world.site / "nvidia/foo/lib")), f.ReleaseThatFinds())),
        f.NotWhereItLooks("nvidia-foo-cu12", f"_ext{EXT}"))
    installed = world.site / f"consumer/_ext{EXT}"
    assert "libfoo.so.1: cannot open shared object file" in world.dlopen(installed)
    after = converges(world, missing, before)
    assert after.findings == () and world.dlopen(installed) == ""


# -- nvJitLink: a known component, its wheel named by the fix ---------------------------------------------


def nvjitlink(builder, version: str, *, unversioned: tuple[str, ...] = ()) -> Path:
    """A libnvJitLink.so.12 of `version` as NVIDIA versions it (__nvJitLink{Create,Complete}_12_0 ...
    _12_MINOR under the node libnvJitLink.so.12), with `unversioned` names in that node too."""
    minor = int(version.split(".")[1])
    names = [f"__nvJitLink{call}_12_{m}" for m in range(minor + 1) for call in ("Create", "Complete")] + list(unversioned)
    source = "".join(f"int {name}(void) {{ return {minor}; }}\n" for name in names)
    script = f"libnvJitLink.so.12 {{ global: {'; '.join(names)}; local: *; }};\n"
    return builder.build("libnvJitLink.so.12", source, soname="libnvJitLink.so.12", version_script=script,
                         directory=f"nvjitlink-{version}")


def extension(builder, package: str, calls: str, link: list[Path], runpath: Optional[str]) -> Path:
    declared = "".join(f"int {name}(void);\n" for name in calls.replace("()", "").split(" + "))
    source = extension_source("_ext", calls).replace("#include <Python.h>\n", "#include <Python.h>\n" + declared)
    return builder.build(f"_ext{EXT}", source, link=link, runpath=runpath, directory=package,
                         extra=["-I" + sysconfig.get_paths()["include"]])


def install_skewpkg_with_an_old_copy(world, elf_builder, runpath: str) -> None:
    """skewpkg's extension binds __nvJitLinkComplete_12_8 and ships nvJitLink 12.1 beside itself,
    with `runpath`; nvidia-nvjitlink-cu12 12.8.93 is installed too; the host runs CUDA 12.8."""
    old, new = nvjitlink(elf_builder, "12.1.105"), nvjitlink(elf_builder, "12.8.93")
    ext = extension(elf_builder, "skewpkg", "__nvJitLinkComplete_12_8()", [new], runpath)
    world.wheel("skewpkg", "1.0", {f"skewpkg/_ext{EXT}": ext, "skewpkg/libnvJitLink.so.12": old},
                requires=("nvidia-nvjitlink-cu12",))
    world.wheel("nvidia-nvjitlink-cu12", "12.8.93", {f"{NVJITLINK_DIR}/libnvJitLink.so.12": new})
    world.pip(["install", "skewpkg", "nvidia-nvjitlink-cu12"])
    world.host = HOST_570


def test_remove_copy_converges_where_the_consumer_looks_for_the_wheel_next(world, elf_builder):
    """skewpkg ships an old libnvJitLink.so.12 beside its extension, found first ($ORIGIN), and looks in
    the nvJitLink wheel's directory next; nvidia-nvjitlink-cu12 12.8 is installed. Removing the copy
    converges; so does the other alternative, the wheel's directory first on LD_LIBRARY_PATH."""
    install_skewpkg_with_an_old_copy(world, elf_builder, f"$ORIGIN:$ORIGIN/../{NVJITLINK_DIR}")
    template = world.root.parent / "template"
    shutil.copytree(world.root, template, symlinks=True)
    before = world.judge()
    skew = found(before, "symbol-skew")
    copy = str(world.site / "skewpkg/libnvJitLink.so.12")
    remove, first = f.RemoveCopy(copy), f.AddToPath("LD_LIBRARY_PATH", str(world.site / NVJITLINK_DIR), first=True)
    assert isinstance(skew.fix, f.Explained) and skew.fix.fix == f.Alternatives((remove, first))
    after = converges(world, skew, before)
    assert [shown(x) for x in after.findings if x.severity == "error"] == []
    shutil.rmtree(world.root)
    shutil.copytree(template, world.root, symlinks=True)
    after = converges(world, skew, before, apply=first)
    assert [shown(x) for x in after.findings if x.severity == "error"] == []


def test_remove_copy_where_the_consumer_looks_nowhere_else(world, elf_builder):
    """The same copy, but the extension's RUNPATH is $ORIGIN alone: removing the copy leaves
    libnvJitLink.so.12 unfound, so that alternative must not be offered first; the wheel's
    directory first on LD_LIBRARY_PATH converges."""
    install_skewpkg_with_an_old_copy(world, elf_builder, "$ORIGIN")
    before = world.judge()
    skew = found(before, "symbol-skew")
    options = [step for step in f.actions(skew.fix)]
    assert len(options) == 1
    after = converges(world, skew, before)
    assert [shown(x) for x in after.findings if x.severity == "error"] == []


def test_a_pip_install_then_add_to_path_converges(world, elf_builder):
    """An extension needs libnvJitLink.so.12 with no RUNPATH and nothing provides it: the wheel's
    `pip install`, then its directory on LD_LIBRARY_PATH (installing alone changes nothing)."""
    built_against = nvjitlink(elf_builder, "12.8.93")
    ext = extension(elf_builder, "needy", "__nvJitLinkComplete_12_0()", [built_against], None)
    world.wheel("needy", "1.0", {f"needy/_ext{EXT}": ext})
    world.pip(["install", "needy"])
    world.host = HOST_570
    before = world.judge()
    missing = found(before, "missing-library")
    steps = list(f.actions(missing.fix))
    assert [type(step) for step in steps] == [f.PipInstall, f.AddToPath]
    install = steps[0]
    assert isinstance(install, f.PipInstall) and install.requirements[0].name == "nvidia-nvjitlink-cu12"
    for version in ("12.1.105", "12.8.93"):  # what the index offers
        world.wheel("nvidia-nvjitlink-cu12", version,
                    {f"{NVJITLINK_DIR}/libnvJitLink.so.12": nvjitlink(elf_builder, version)})
    after = converges(world, missing, before)
    assert [shown(x) for x in after.findings if x.severity == "error"] == []
    assert world.dlopen(world.site / f"needy/_ext{EXT}") == ""


# -- the advisory's fix, the driver, one build of a duplicated library -------------------------------------


def test_the_advisorys_fix_converges(world, elf_builder):
    """An extension built with NVJITLINK_NO_INLINE calls nvJitLinkDestroy@libnvJitLink.so.12, which
    nvJitLink 12.1 lacks: the advisory's fix is prose, so the test installs its `fixed_in` release."""
    destroy = ("nvJitLinkDestroy",)
    ext = extension(elf_builder, "app", "nvJitLinkDestroy()", [nvjitlink(elf_builder, "12.8.93", unversioned=destroy)],
                    f"$ORIGIN/../{NVJITLINK_DIR}")
    world.wheel("app", "1.0", {f"app/_ext{EXT}": ext}, requires=("nvidia-nvjitlink-cu12",))
    [advisory] = [a for a in advisories.load() if a.id == "nvjitlink-no-inline"]
    [fixed] = map(Requirement, advisory.fixed_in)
    for version in ("12.1.105", str(fixed.specifier).lstrip("=")):
        world.wheel("nvidia-nvjitlink-cu12", version,
                    {f"{NVJITLINK_DIR}/libnvJitLink.so.12": nvjitlink(elf_builder, version, unversioned=destroy[:int(
                        version.split(".")[1]) >= 3])})
    world.pip(["install", "app", "nvidia-nvjitlink-cu12==12.1.105"])
    before = world.judge()
    warning = found(before, "advisory")
    assert warning.fix == f.AdvisoryFix("nvjitlink-no-inline", advisory.fix)
    after = converges(world, warning, before, apply=f.PipInstall((fixed,)))
    assert [shown(x) for x in after.findings if x.severity == "error"] == []


@pytest.mark.parametrize("version, severity", [("12.8.93", "warning"), ("13.0.88", "error")])
def test_a_driver_upgrade_converges(world, elf_builder, version, severity):
    """An nvJitLink wheel newer than the driver (CUDA 12.4): judged with the driver the fix names,
    the driver-floor finding is gone (no GPU here: the upgrade is the host the doctor is given)."""
    major = version.split(".")[0]
    source = f"int __nvJitLinkCreate_{major}_0(void) {{ return 0; }}\n"
    library = elf_builder.build(f"libnvJitLink.so.{major}", source, soname=f"libnvJitLink.so.{major}",
                                version_script=f"libnvJitLink.so.{major} {{ global: __nvJitLinkCreate_{major}_0; local: *; }};\n")
    name = "nvidia-nvjitlink-cu12" if major == "12" else "nvidia-nvjitlink"
    lib_dir = NVJITLINK_DIR if major == "12" else "nvidia/cu13/lib"
    world.wheel(name, version, {f"{lib_dir}/libnvJitLink.so.{major}": library})
    world.pip(["install", name])
    before = world.judge()
    floor = found(before, "driver-floor")
    assert floor.severity == severity
    upgrade = next(step for step in f.actions(floor.fix))
    assert isinstance(upgrade, f.DriverUpgrade) and upgrade.minimum is not None
    after = converges(world, floor, before, apply=upgrade)
    assert after.findings == ()


def test_keep_one_build_converges(world, elf_builder):
    """cupy-cuda12x preloads nvidia-nccl-cu12's libnccl.so.2 (it requires that wheel); other-pkg's
    extension links its own build: two builds in one process. The fix removes other-pkg, the one
    nothing requires."""
    from cudaresolve.knowledge import components

    [row] = [c for c in components.for_soname("libnccl.so.2") if c.dist == "nvidia-nccl-cu12"]
    wheel_nccl = elf_builder.build("libnccl.so.2", "int nccl_build(void) { return 12; }\n", soname="libnccl.so.2",
                                   directory="wheel")
    own_nccl = elf_builder.build("libnccl.so.2", "int nccl_build(void) { return 99; }\n", soname="libnccl.so.2",
                                 directory="own")
    calls = "int nccl_build(void);\nint which(void) { return nccl_build(); }\n"
    cupy = elf_builder.build(f"nccl{EXT}", calls, link=[wheel_nccl], directory="cupy")
    other = elf_builder.build(f"_ext{EXT}", calls, link=[own_nccl], runpath="$ORIGIN/lib", directory="other")
    world.wheel("nvidia-nccl-cu12", "2.27.3", {f"{row.lib_dir}/libnccl.so.2": wheel_nccl})
    world.wheel("cupy-cuda12x", "14.2.0", {f"cupy/cuda/nccl{EXT}": cupy}, requires=("nvidia-nccl-cu12",))
    world.wheel("other-pkg", "1.0", {f"other_pkg/_ext{EXT}": other, "other_pkg/lib/libnccl.so.2": own_nccl})
    world.pip(["install", "nvidia-nccl-cu12", "cupy-cuda12x", "other-pkg"])
    world.host = HOST_570
    before = world.judge()
    [clash] = [x for x in before.findings if x.check == "duplicate-library" and x.severity == "error"]
    assert clash.fix == f.KeepOneBuild("other-pkg")
    converges(world, clash, before)


def test_a_pip_install_in_place_of_another_majors_wheel_converges(world, elf_builder):
    """app's extension links libcublas.so.13; the environment's cuBLAS wheel is nvidia-cublas-cu12: one
    mixed-majors error whose fix installs the CUDA 13 wheel in place of the CUDA 12 one (pip would
    leave that in place, so applying it uninstalls it first)."""
    from cudaresolve.knowledge import components

    lib_dir = {row.cuda_major: row.lib_dir for row in components.for_soname("libcublas.so.13")
               + components.for_soname("libcublas.so.12")}
    def cublas(major: int) -> Path:
        return elf_builder.build(f"libcublas.so.{major}", f"int cublasCreate_v2(void) {{ return {major}; }}\n",
                                 soname=f"libcublas.so.{major}", directory=f"cublas-{major}")
    ext = extension(elf_builder, "app", "cublasCreate_v2()", [cublas(13)], f"$ORIGIN/../{lib_dir[13]}")
    world.wheel("app", "1.0", {f"app/_ext{EXT}": ext})
    world.wheel("nvidia-cublas-cu12", "12.9.1.4", {f"{lib_dir[12]}/libcublas.so.12": cublas(12)})
    world.pip(["install", "app", "nvidia-cublas-cu12"])
    world.host = replace(HOST_550, driver=replace(HOST_550.driver, release=DriverRelease.parse("580.65.06"),
                                                  cuda=CudaVersion.parse("13.0")))
    before = world.judge()
    mixed = found(before, "mixed-majors")
    install = next(f.actions(mixed.fix))
    assert isinstance(install, f.PipInstall) and install.replaces == ("nvidia-cublas-cu12",)
    [wanted] = install.requirements
    world.wheel(wanted.name, str(wanted.specifier).lstrip("="), {f"{lib_dir[13]}/libcublas.so.13": cublas(13)})
    after = converges(world, mixed, before)
    assert [shown(x) for x in after.findings if x.severity == "error"] == []
    assert "nvidia-cublas-cu12" not in {dist.name for dist in after.environment.distributions}


def test_a_constraint_keeps_what_the_metadata_leaves_open(world, elf_builder):
    """skewpkg binds __nvJitLinkComplete_12_8 but requires nvidia-nvjitlink-cu12 unpinned; 12.8.93 is
    installed. The metadata-vs-binary warning stays (it is about the metadata); its fix is no `pip
    install` of what is there but a constraint, and with it pip refuses the older release."""
    new = nvjitlink(elf_builder, "12.8.93")
    ext = extension(elf_builder, "skewpkg", "__nvJitLinkComplete_12_8()", [new], f"$ORIGIN/../{NVJITLINK_DIR}")
    world.wheel("skewpkg", "1.0", {f"skewpkg/_ext{EXT}": ext}, requires=("nvidia-nvjitlink-cu12",))
    for version in ("12.1.105", "12.8.93"):
        world.wheel("nvidia-nvjitlink-cu12", version,
                    {f"{NVJITLINK_DIR}/libnvJitLink.so.12": nvjitlink(elf_builder, version)})
    world.pip(["install", "skewpkg", "nvidia-nvjitlink-cu12==12.8.93"])
    world.host = HOST_570
    before = world.judge()
    warning = found(before, "metadata-vs-binary")
    assert warning.fix == f.AddConstraint(Requirement("nvidia-nvjitlink-cu12>=12.8"))
    assert satisfied_fixes(before.findings, before.environment) == []
    constraints = world.scratch / "constraints.txt"
    constraints.write_text(f"{warning.fix.requirement}\n")
    done = subprocess.run([str(world.python), "-m", "pip", "install", "--no-index", "--find-links", str(world.wheels),
                           "-c", str(constraints), "nvidia-nvjitlink-cu12==12.1.105", "--disable-pip-version-check",
                           "--isolated"], capture_output=True, text=True)
    assert done.returncode != 0 and "conflict" in (done.stdout + done.stderr).lower()


def test_a_torch_variant_converges(world, cuda_index):
    """torch 2.14.1 as the regular index builds it (CUDA 13, no code for compute capability 6.1) on a GTX
    1080: the fix uninstalls torch's CUDA 13 wheels, then installs torch's cu126 variant from the
    PyTorch-style index; applied with pip, the arch-coverage error is gone and no new error appears."""
    world.pip_online(["install", "torch==2.14.1"], cuda_index.index_url)
    world.torch_index_base = cuda_index.torch_index_base
    world.host = HostFacts("Linux", "x86_64",
                           Driver(DriverRelease.parse("580.65.06"), "override:--driver", CudaVersion.parse("13.0"),
                                  "derived:branch-table"),
                           (Gpu(ComputeCapability(6, 1), "override:--gpu", 0),))
    before = world.judge()
    [coverage] = [x for x in before.findings if x.check == "arch-coverage" and x.severity == "error"]
    uninstall, variant = list(f.actions(coverage.fix))  # torch's CUDA 13 wheels go first: pip would keep them
    assert isinstance(uninstall, f.PipUninstall) and "nvidia-cuda-runtime" in uninstall.names
    assert isinstance(variant, f.TorchVariant) and variant.variant == "cu126"
    after = converges(world, coverage, before)
    assert [shown(x) for x in after.findings if x.severity == "error"] == []


ORT = ["onnxruntime-gpu==1.31.1", "nvidia-cublas==13.1.1.3", "nvidia-cuda-runtime==13.0.96", "nvidia-curand==10.4.0.35"]


def test_the_call_makes_the_provider_load_in_the_process_that_makes_it(cuda_venv, unpacked, tmp_path):
    """onnxruntime-gpu 1.31.1's CUDA provider finds the wheels' libraries only after the program calls
    onnxruntime.preload_dlls(): a warning whose fix is that call, which this release has. The doctor
    cannot see a call a program makes, so the test makes it: in a fresh interpreter of the venv the
    provider does not load without the call and loads after it (here, without a driver: it then
    wants only libcuda.so.1)."""
    root = cuda_venv(ORT)
    host = HostFacts("Linux", "x86_64", Driver(DriverRelease.parse("580.65.06"), "override:--driver",
                                               CudaVersion.parse("13.0"), "derived:branch-table"),
                     (Gpu(ComputeCapability(8, 9), "override:--gpu", 0),))
    before = examine(target_for_python(str(root / "bin" / "python")), host,
                     {"CUDARESOLVE_CACHE_DIR": str(tmp_path / "cache"), "LD_LIBRARY_PATH": ""})
    # (its dlopen-by-soname warnings, checks/dlopen.py, are another finding of the same check)
    [warning] = [x for x in before.findings if x.check == "missing-library" and x.severity == "warning"
                 and not isinstance(x.problem, DlopenedNotFound)]
    [call] = list(f.actions(warning.fix))
    assert call == f.Call("onnxruntime", "preload_dlls")
    assert satisfied_fixes(before.findings, before.environment) == []
    [site] = target_for_python(str(root / "bin" / "python")).site_packages
    provider = Path(site) / "onnxruntime/capi/libonnxruntime_providers_cuda.so"
    numpy = unpacked("numpy==2.2.6")  # onnxruntime imports it; the venv holds the CUDA wheels only
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
    env["PYTHONPATH"] = str(numpy)

    def load(first: str) -> subprocess.CompletedProcess[str]:
        code = f"import ctypes, sys\n{first}\nctypes.CDLL(sys.argv[1])\n"
        return subprocess.run([str(root / "bin" / "python"), "-c", code, str(provider)], capture_output=True, text=True,
                              env=env, cwd=tmp_path)

    without = load("")
    assert without.returncode != 0 and "libcublasLt.so.13: cannot open shared object file" in without.stderr
    made = load(f"import {call.module}\n{call.module}.{call.function}()")
    # what is left unfound is the driver's own library, which a machine without a GPU does not have
    assert made.returncode == 0 or made.stderr.strip().endswith(
        "OSError: libcuda.so.1: cannot open shared object file: No such file or directory"), made.stderr


def test_a_pip_install_the_environment_meets_is_found_in_any_alternative():
    from fix_steps import already_satisfied
    from packaging.version import Version

    installed = {"torch": (Version("2.14.1"), frozenset()), "onnxruntime-gpu": (Version("1.26.0"), frozenset({"cuda"})),
                 "nvidia-nccl-cu12": (Version("2.27.3"), frozenset())}

    def install(*requirements: str, **kwargs) -> f.PipInstall:
        return f.PipInstall(tuple(map(Requirement, requirements)), **kwargs)

    met = install("torch==2.14.1")
    assert already_satisfied(met, installed) == [met]
    assert already_satisfied(f.Alternatives((install("torch>=2.15"), f.Explained(met, f.ToEnable()))), installed) == [met]
    assert already_satisfied(f.OrElse(f.CondaUpdate("libnccl"), install("nvidia-nccl-cu12")), installed) != []
    assert already_satisfied(install("onnxruntime-gpu[cuda]"), installed) != []
    for changes in (install("torch>=2.15"), install("torch", "triton"), install("onnxruntime-gpu[cuda,cudnn]"),
                    install("torch==2.14.1", options=("--upgrade",)),
                    install("nvidia-nccl-cu12==2.27.3", options=("--force-reinstall", "--no-deps")),
                    install("torch==2.14.1", replaces=("torch-nightly",)),
                    f.Steps((f.PipUninstall(("nvidia-nccl-cu12",)), install("nvidia-nccl-cu12==2.27.3")))):
        assert already_satisfied(changes, installed) == [], changes


def conda_package(channel: Path, name: str, version: str, files: dict[str, bytes]) -> None:
    """A linux-64 conda package (.tar.bz2) holding `files`, as test_conda_plugin.make_package lays them."""
    import hashlib
    import io
    import json
    import tarfile

    index = {"name": name, "version": version, "build": "h0_0", "build_number": 0, "depends": [],
             "license": "BSD-3-Clause", "subdir": "linux-64", "timestamp": 1760000000000}
    paths = {"paths_version": 1, "paths": [{"_path": path, "path_type": "hardlink", "sha256": hashlib.sha256(data).hexdigest(),
                                            "size_in_bytes": len(data)} for path, data in files.items()]}
    members = {"info/index.json": json.dumps(index).encode(), "info/paths.json": json.dumps(paths).encode(),
               "info/files": ("\n".join(files) + "\n").encode(), **files}
    (channel / "linux-64").mkdir(parents=True, exist_ok=True)
    with tarfile.open(channel / "linux-64" / f"{name}-{version}-h0_0.tar.bz2", "w:bz2") as archive:
        for path, data in members.items():
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(data), 0o755 if path.endswith((".so", ".12")) else 0o644
            archive.addfile(info, io.BytesIO(data))


@pytest.mark.conda
@pytest.mark.parametrize("calls", ["__nvJitLinkComplete_12_9()", "nvJitLinkDestroy()"])
def test_a_conda_install_or_update_converges(conda_venv, elf_builder, tmp_path, calls):
    """A conda prefix whose libnvjitlink 12.4 lacks what app's extension binds: symbol-skew whose fix
    is `conda install "libnvjitlink>=12.9"` where the versioned name implies 12.9, else `conda update
    libnvjitlink`; the real conda applies it from a file:// channel holding 12.4 and 12.9."""
    from test_conda_plugin import Conda

    conda = Conda(conda_venv, tmp_path / "conda")
    for version in ("12.4.127", "12.9.86"):
        library = nvjitlink(elf_builder, version, unversioned=("nvJitLinkDestroy",) if version.startswith("12.9") else ())
        conda_package(conda.channel, "libnvjitlink", version, {"lib/libnvJitLink.so.12": library.read_bytes()})
    subprocess.run([conda.python, "-m", "conda_index", str(conda.channel)], check=True, capture_output=True)
    prefix = conda.root / "envs" / "app"
    done = conda("create", "-p", str(prefix), "libnvjitlink==12.4.127")
    assert done.returncode == 0, done.stderr
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True)
    [site] = target_for_python(str(prefix / "bin" / "python")).site_packages
    ext = extension(elf_builder, "app", calls, [nvjitlink(elf_builder, "12.9.86", unversioned=("nvJitLinkDestroy",))],
                    "$ORIGIN/../../../../lib")
    (Path(site) / "app").mkdir()
    shutil.copy2(ext, Path(site) / "app" / ext.name)
    from test_env_distributions import make_dist_info

    make_dist_info(Path(site), "app", "1.0", files=(f"app/{ext.name}",))
    host = replace(HOST_550, driver=replace(HOST_550.driver, release=DriverRelease.parse("575.57.08"),
                                            cuda=CudaVersion.parse("12.9")))

    def judge(n: int) -> Diagnosis:
        return examine(target_for_python(str(prefix / "bin" / "python")), host,
                       {"CUDARESOLVE_CACHE_DIR": str(tmp_path / f"cache-{n}"), "LD_LIBRARY_PATH": ""})

    before = judge(1)
    skew = found(before, "symbol-skew")
    [step] = list(f.actions(skew.fix))
    if calls.startswith("__"):
        assert isinstance(step, f.CondaInstall)
        [spec] = step.specs
        assert (spec.name, spec.relation, str(spec.version)) == ("libnvjitlink", ">=", "12.9")
        done = conda("install", "-p", str(prefix), f"{spec.name}{spec.relation}{spec.version}")
    else:
        assert step == f.CondaUpdate("libnvjitlink")
        done = conda("update", "-p", str(prefix), "--override-channels", "-c", conda.channel.as_uri(), step.package)
    assert done.returncode == 0, done.stderr
    after = judge(2)
    assert key(skew) not in {key(x) for x in after.findings} and errors(after) <= errors(before), \
        [shown(x) for x in after.findings]


def test_each_package_moved_to_the_drivers_major_converges(world, elf_builder):
    """app links the CUDA 13 runtime; the cuRAND and cuFFT wheels beside it are CUDA 12 builds linking
    the CUDA 12 runtime: one mixed-majors error whose fix is one `pip install` per wheel (each in place
    of its CUDA 12 namesake), all of them applied."""
    from cudaresolve.knowledge import components

    def lib_dir(dist: str) -> str:
        return components.for_dist(dist)[0].lib_dir

    def library(soname: str, links: Optional[Path] = None) -> Path:
        uses = "libcudart_id()" if links else "1"  # a call, so the link is kept (--as-needed)
        source = f"int libcudart_id(void);\nint {soname.split('.')[0]}_id(void) {{ return {uses}; }}\n"
        return elf_builder.build(soname, source, soname=soname,
                                 link=[links] if links else [], runpath="$ORIGIN" if links else None,
                                 directory=f"{soname}-{links.name if links else 'leaf'}")

    cudart = {major: library(f"libcudart.so.{major}") for major in (12, 13)}
    world.wheel("nvidia-cuda-runtime", "13.0.96", {f"{lib_dir('nvidia-cuda-runtime')}/libcudart.so.13": cudart[13]})
    world.wheel("nvidia-cuda-runtime-cu12", "12.9.79", {f"{lib_dir('nvidia-cuda-runtime-cu12')}/libcudart.so.12": cudart[12]})
    for name, version, soname in (("nvidia-curand-cu12", "10.3.10.19", "libcurand.so.10"),
                                  ("nvidia-cufft-cu12", "11.4.1.4", "libcufft.so.11")):
        built = library(soname, cudart[12])
        world.wheel(name, version, {f"{lib_dir(name)}/{soname}": built})
    ext = extension(elf_builder, "app", "libcudart_id()", [cudart[13]], f"$ORIGIN/../{lib_dir('nvidia-cuda-runtime')}")
    world.wheel("app", "1.0", {f"app/_ext{EXT}": ext})
    world.pip(["install", "app", "nvidia-cuda-runtime", "nvidia-cuda-runtime-cu12", "nvidia-curand-cu12",
               "nvidia-cufft-cu12"])
    world.host = replace(HOST_550, driver=replace(HOST_550.driver, release=DriverRelease.parse("580.65.06"),
                                                  cuda=CudaVersion.parse("13.0")))
    before = world.judge()
    mixed = found(before, "mixed-majors")
    assert isinstance(mixed.fix, f.Each)
    installs = list(f.actions(mixed.fix))
    assert sorted(step.replaces for step in installs if isinstance(step, f.PipInstall)) == [
        ("nvidia-cufft-cu12",), ("nvidia-curand-cu12",)]
    for step in installs:
        assert isinstance(step, f.PipInstall)
        [wanted] = step.requirements
        row = components.for_dist(wanted.name)[0]
        soname = row.sonames[0]  # libcurand.so.10, libcufft.so.12
        world.wheel(wanted.name, str(wanted.specifier).lstrip("="), {f"{row.lib_dir}/{soname}": library(soname, cudart[13])})
    after = converges(world, mixed, before)
    assert [shown(x) for x in after.findings if x.severity == "error"] == []
