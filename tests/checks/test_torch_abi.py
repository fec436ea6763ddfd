"""An extension built for another torch release: the C++ names it binds that the installed torch's
libraries lack are one torch-abi error per extension distribution, naming the torch it pins and the
torch installed, with a fix that installs a matching pair; never also a symbol skew.

Hermetic cases are gcc-built libraries laid out like wheels (the names carry Itanium mangling, as
torch's do); the real case is torchvision 0.28.0 (Requires-Dist torch==2.13.0) over torch 2.14.1.
`ldd -r` with torch/lib on LD_LIBRARY_PATH is the oracle for the missing names.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from test_checks_planned import PLANNED, dist, planned, so
from test_doctor_synthetic import HOST
from test_env_distributions import make_dist_info

from cudaresolve.binary.facts import Symbol
from cudaresolve.checks import Diagnosis, judge
from cudaresolve.checks import fixes as f
from cudaresolve.checks.findings import Check, Severity
from cudaresolve.checks.problems import FrameworkAbiMismatch
from cudaresolve.checks.torch_abi import outer_namespace
from cudaresolve.commands.diagnosing import examine
from cudaresolve.env.environment import ElfFile
from cudaresolve.env.interpreter import target_for_site_packages
from cudaresolve.host.facts import Driver, HostFacts
from cudaresolve.output.findings import shown
from cudaresolve.versions import CudaVersion, DriverRelease

CHECK = "_ZN3c104cuda5checkEv"  # c10::cuda::check(): the name torch 2.5.0 had and 2.14.1 dropped
ADD = "_ZN2at3addEv"  # at::add(): in both releases
C10_OLD = f"int {CHECK}(void) {{ return 1; }}\nint c10_core(void) {{ return 10; }}\n"
C10_NEW = "int c10_core(void) { return 10; }\n"
TORCH_CPU = f"int {ADD}(void) {{ return 2; }}\n"
TORCH_C = f"int c10_core(void); int {ADD}(void);\nint init(void) {{ return c10_core() + {ADD}(); }}\n"
EXTENSION = (f"int {CHECK}(void); int {ADD}(void); int c10_core(void);\n"
             f"int op(void) {{ return {CHECK}() + {ADD}() + c10_core(); }}\n")


# A driver that runs torch 2.14.1's CUDA 13.0, so that only the loader's findings are left.
DRIVER_580 = HostFacts("Linux", "x86_64", Driver(DriverRelease.parse("580.65.06"), "override:--driver",
                                                  CudaVersion.parse("13.0"), "derived:branch-table"), HOST.gpus)


def run(site: Path, tmp_path: Path) -> Diagnosis:
    return examine(target_for_site_packages(str(site)), DRIVER_580,
                   {"CUDARESOLVE_CACHE_DIR": str(tmp_path / "facts-cache"), "LD_LIBRARY_PATH": "", "LD_PRELOAD": ""})


def fake_torch(elf_builder, c10_source: str) -> tuple[Path, Path]:
    """torch 2.14.1 as its wheel lays it out: torch/lib/libc10.so and libtorch_cpu.so, and torch/_C
    (loaded by `import torch`) finding them by its RPATH. Returns (site, torch/lib)."""
    c10 = elf_builder.build("libc10.so", c10_source, soname="libc10.so", directory="site/torch/lib")
    cpu = elf_builder.build("libtorch_cpu.so", TORCH_CPU, soname="libtorch_cpu.so", link=[c10],
                            directory="site/torch/lib")
    elf_builder.build("_C.cpython-311-x86_64-linux-gnu.so", TORCH_C, link=[c10, cpu], rpath="$ORIGIN/lib",
                      directory="site/torch")
    site = elf_builder.root / "site"
    make_dist_info(site, "torch", "2.14.1", files=("torch/_C.cpython-311-x86_64-linux-gnu.so", "torch/lib/libc10.so",
                                                   "torch/lib/libtorch_cpu.so"))
    return site, c10.parent


def fake_extension(elf_builder, site: Path, torch_lib: Path, requires: tuple[str, ...], source: str = EXTENSION) -> Path:
    """vision-ext 0.20.0: its _C.so links libc10.so and libtorch_cpu.so with no RPATH, as torchvision's does."""
    extension = elf_builder.build("_C.so", source, link=[torch_lib / "libc10.so", torch_lib / "libtorch_cpu.so"],
                                  directory="site/vision_ext")
    make_dist_info(site, "vision-ext", "0.20.0", files=("vision_ext/_C.so",), requires=requires)
    return extension


def ldd_undefined(path: Path, search: object) -> list[str]:
    """The names `ldd -r` says `path` lacks with `search` (torch's lib directory, or several joined
    by ":") on LD_LIBRARY_PATH, sorted."""
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    env["LD_LIBRARY_PATH"] = str(search)
    out = subprocess.run(["ldd", "-r", str(path)], capture_output=True, text=True, env=env)
    return sorted(set(re.findall(rf"undefined symbol: (\S+)\s+\({re.escape(str(path))}\)", out.stdout + out.stderr)))


@pytest.fixture
def ldd():
    if shutil.which("ldd") is None:
        pytest.skip("ldd is not installed")


def test_an_extension_pinning_another_torch_is_one_torch_abi_error(elf_builder, tmp_path, ldd):
    site, torch_lib = fake_torch(elf_builder, C10_NEW)
    extension = fake_extension(elf_builder, site, torch_lib, ("torch==2.5.0", "numpy"))
    assert ldd_undefined(extension, torch_lib) == [CHECK]

    diagnosis = run(site, tmp_path)
    [finding] = [f for f in diagnosis.findings if f.severity == Severity.ERROR]
    assert (finding.check, finding.subject.distribution, str(finding.subject.version)) == (
        Check.TORCH_ABI, "vision-ext", "0.20.0")
    problem = finding.problem
    assert isinstance(problem, FrameworkAbiMismatch)
    assert (problem.files, problem.framework, str(problem.installed), str(problem.built_for), problem.symbols) == (
        (str(extension),), "torch", "2.14.1", "2.5.0", (CHECK,))
    assert [f.check for f in diagnosis.findings if CHECK in str(f)] == [Check.TORCH_ABI]  # no symbol skew too
    text = shown(finding)
    assert text.message == ("_C.so: built for torch 2.5.0 (its exact pin), but torch 2.14.1 is installed, whose "
                            "libraries lack 1 C++ symbol it binds (\"undefined symbol\" at import)")
    assert text.evidence == (f"{extension}: undefined symbol: {CHECK}",)
    assert text.fix == ('pip install "torch==2.5.0", or pip install --upgrade "vision-ext" "torch==2.14.1" '
                        "(the vision-ext release made for torch 2.14.1)")
    assert finding.fix is not None
    assert [(type(step), tuple(map(str, step.requirements))) for step in f.actions(finding.fix)
            if isinstance(step, f.PipInstall)] == [(f.PipInstall, ("torch==2.5.0",))]


def test_the_pair_the_extension_was_built_for_is_healthy(elf_builder, tmp_path, ldd):
    site, torch_lib = fake_torch(elf_builder, C10_OLD)
    extension = fake_extension(elf_builder, site, torch_lib, ("torch==2.14.1",))
    assert ldd_undefined(extension, torch_lib) == []
    assert [shown(f) for f in run(site, tmp_path).findings if f.severity != Severity.INFO] == []


def test_without_an_exact_pin_the_torch_it_was_built_for_is_unknown(elf_builder, tmp_path):
    site, torch_lib = fake_torch(elf_builder, C10_NEW)
    fake_extension(elf_builder, site, torch_lib, ("torch>=2.0",))
    [finding] = [f for f in run(site, tmp_path).findings if f.check == Check.TORCH_ABI]
    assert isinstance(finding.problem, FrameworkAbiMismatch) and finding.problem.built_for is None
    text = shown(finding)
    assert text.message.startswith("_C.so: built for another torch release (unknown: it pins none), but torch 2.14.1")
    assert text.fix == 'pip install --upgrade "vision-ext" "torch==2.14.1" (the vision-ext release made for torch 2.14.1)'


def test_other_missing_names_stay_symbol_skew(elf_builder, tmp_path, ldd):
    """Only torch's C++ namespaces are torch's: a plain C name nothing defines is a symbol skew as before."""
    site, torch_lib = fake_torch(elf_builder, C10_NEW)
    source = EXTENSION + "int plain_missing(void);\nint other(void) { return plain_missing(); }\n"
    extension = fake_extension(elf_builder, site, torch_lib, ("torch==2.5.0",), source)
    assert ldd_undefined(extension, torch_lib) == [CHECK, "plain_missing"]
    found = {f.check: f for f in run(site, tmp_path).findings if f.severity == Severity.ERROR}
    assert sorted(found) == [Check.SYMBOL_SKEW, Check.TORCH_ABI]
    assert shown(found[Check.SYMBOL_SKEW]).message == "_C.so: undefined symbol: plain_missing"


def test_an_extension_that_does_not_import_torch_first_is_no_torch_abi_case(elf_builder, tmp_path):
    site, torch_lib = fake_torch(elf_builder, C10_NEW)
    fake_extension(elf_builder, site, torch_lib, ())
    assert [f for f in run(site, tmp_path).findings if f.check == Check.TORCH_ABI] == []


@pytest.mark.parametrize("symbol, namespace", [
    ("_ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_jb", "c10"),
    ("_ZNK2at10TensorBase4sizeEl", "at"),
    ("_ZTVN5torch8autograd8FunctionE", "torch"),
    ("_ZNSt6vectorIiSaIiEE9push_backERKi", None),  # std::, whatever its arguments
    ("_Z3addv", None),  # the global namespace
    ("c10_core", None),
    ("_ZN9", None),  # cut short
])
def test_outer_namespace_of_a_mangled_name(symbol, namespace):
    assert outer_namespace(symbol) == namespace


def test_the_lock_judges_a_planned_torch_against_an_extension_that_stays():
    """The lock's judge is the doctor's: an installed extension that stays beside a planned torch whose
    libc10.so lacks a name it binds is the same torch-abi error (a pinned extension never gets there:
    its Requires-Dist is a root of the resolution, resolve/needs.py)."""
    c10, torch_c = f"{PLANNED}/torch/lib/libc10.so", f"{PLANNED}/torch/_C.cpython-311-x86_64-linux-gnu.so"
    extension = f"{PLANNED}/vision_ext/_C.so"
    core = Symbol("c10_core")
    env = planned(
        dist("torch", "2.14.1", files=(c10, torch_c)),
        dist("vision-ext", "0.20.0", "torch", files=(extension,)),
        elf_files=(
            ElfFile(c10, ("torch",), so(c10, soname="libc10.so", defined=(core,)), None),
            ElfFile(torch_c, ("torch",), so(torch_c, needed=("libc10.so",), undefined=(core,), runpath=("$ORIGIN/lib",)),
                    None),
            ElfFile(extension, ("vision-ext",), so(extension, needed=("libc10.so",), undefined=(core, Symbol(CHECK))),
                    None),
        ),
    )
    found = [(f.check, f.subject.distribution) for f in judge(env, DRIVER_580).findings if f.severity == Severity.ERROR]
    assert found == [(Check.TORCH_ABI, "vision-ext")]


# -- the fix, applied with pip: either alternative makes a matching pair -----------------------------


def test_each_alternative_of_the_fix_converges(elf_builder, tmp_path, venv_with_pip):
    """torch 2.14.1 with vision-ext 0.20.0 (built for torch 2.5.0) installed by pip from wheels; the
    fix's first alternative (torch 2.5.0) and its second (vision-ext 0.21.0, made for torch 2.14.1, which
    pip picks when asked for vision-ext with torch held) are each applied with real pip to a copy of the
    venv: the torch-abi error is gone and no other error appears."""
    from fix_steps import offline_pip, pip_arguments
    from index_server import make_wheel
    from test_conda_env import TAG
    from test_fixes_applied import installed

    from cudaresolve.env.interpreter import target_for_python

    found = tmp_path / "wheels"
    found.mkdir()

    def wheel(name: str, version: str, files: dict[str, Path], requires: tuple[str, ...] = ()) -> None:
        members = {member: path.read_bytes() for member, path in files.items()}
        members[f"{next(iter(files)).split('/')[0]}/__init__.py"] = b"from . import _C\n"  # as their imports load it
        filename, data = make_wheel(name, version, requires=requires, tag=TAG, files=members)
        (found / filename).write_bytes(data)

    for version, c10_source in (("2.14.1", C10_NEW), ("2.5.0", C10_OLD)):
        built = elf_builder.root / f"torch-{version}"
        _, lib = fake_torch(elf_builder, c10_source)
        wheel("torch", version, {f"torch/lib/{name}": lib / name for name in ("libc10.so", "libtorch_cpu.so")}
              | {"torch/_C.cpython-311-x86_64-linux-gnu.so": lib.parent / "_C.cpython-311-x86_64-linux-gnu.so"})
        shutil.move(str(elf_builder.root / "site"), str(built))
    for version, source, pin in (("0.20.0", EXTENSION, "2.5.0"), ("0.21.0", TORCH_C, "2.14.1")):
        lib = elf_builder.root / f"torch-{pin}" / "torch" / "lib"  # built against the torch it pins
        extension = elf_builder.build("_C.so", source, link=[lib / "libc10.so", lib / "libtorch_cpu.so"],
                                      directory=f"vision-{version}/vision_ext")
        wheel("vision-ext", version, {"vision_ext/_C.so": extension}, (f"torch=={pin}",))

    template = venv_with_pip(tmp_path / "template")
    offline_pip(template / "bin" / "python", found, ["install", "--no-deps", "torch==2.14.1", "vision-ext==0.20.0"])

    def errors(root: Path) -> list:
        return [f for f in examine(target_for_python(str(root / "bin" / "python")), DRIVER_580,
                                   {"CUDARESOLVE_CACHE_DIR": str(tmp_path / "cache")}).findings
                if f.severity == Severity.ERROR]

    [error] = errors(template)
    assert error.check == Check.TORCH_ABI and isinstance(error.fix, f.Alternatives)
    for number, (option, pair) in enumerate(zip(error.fix.options, [("2.5.0", "0.20.0"), ("2.14.1", "0.21.0")])):
        copy = tmp_path / f"option-{number}"
        shutil.copytree(template, copy, symlinks=True)
        for arguments in pip_arguments(option):
            offline_pip(copy / "bin" / "python", found, arguments)
        assert installed(copy / "bin" / "python") == {"torch": pair[0], "vision-ext": pair[1]}
        assert errors(copy) == []


# -- a real stack: torchvision 0.28.0 (built for torch 2.13.0) over torch 2.14.1 ------------------------


@pytest.mark.torch_venv
def test_torchvision_built_for_torch_2_13_over_torch_2_14_is_one_torch_abi_error(capsys, ldd):
    """torchvision 0.28.0 pins torch==2.13.0; over torch 2.14.1 its _C.so and image.so bind
    c10::cuda::c10_cuda_check_implementation, which 2.14.1's libc10_cuda.so no longer exports. The
    oracle is `ldd -r` with torch's and the CUDA wheels' lib directories on LD_LIBRARY_PATH: the names
    it says the extensions lack, less the Py* ones the interpreter provides, are the finding's."""
    from test_doctor import TORCH, doctor_json, site_packages
    from wheel_cache import build_venv, build_venv_on

    venv = build_venv_on(build_venv([TORCH], deps=True), ["torchvision==0.28.0", "numpy==2.4.6", "pillow==13.0.0"])
    code, data = doctor_json(capsys, "--python", str(venv / "bin" / "python"), "--driver", "580.65.06", "--gpu", "8.6")
    assert code == 2
    [error] = [finding for finding in data["findings"] if finding["severity"] == "error"]
    site = site_packages(venv)
    files = [str(site / "torchvision" / "_C.so"), str(site / "torchvision" / "image.so")]
    assert (error["check"], error["subject"]) == ("torch-abi", "torchvision 0.28.0")
    assert error["problem"] == {"type": "framework-abi-mismatch", "files": files, "framework": "torch",
                                "installed": "2.14.1", "built_for": "2.13.0", "symbols": [
                                    "_ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_jb"]}
    assert error["fix"] == ('pip install "torch==2.13.0", or pip install --upgrade "torchvision" "torch==2.14.1" '
                            "(the torchvision release made for torch 2.14.1)")
    assert [f for f in data["findings"] if f["check"] == "symbol-skew"] == []
    search = ":".join(str(d) for d in (site / "torch" / "lib", site / "nvidia" / "cu13" / "lib", site / "torchvision.libs"))
    for file in files:
        lacking = [name for name in ldd_undefined(Path(file), search) if not name.startswith(("Py", "_Py"))]
        assert lacking == error["problem"]["symbols"]


@pytest.mark.torch_venv
def test_the_observed_import_of_that_stack_fails_as_the_real_one_does(capsys):
    """`doctor --import` on the same venv: torch's import runs; torchvision's raises what a program's own
    `import torchvision` raises there, an error beside the static torch-abi one."""
    import subprocess

    from test_doctor import TORCH, doctor_json
    from wheel_cache import build_venv, build_venv_on

    venv = build_venv_on(build_venv([TORCH], deps=True), ["torchvision==0.28.0", "numpy==2.4.6", "pillow==13.0.0"])
    python = str(venv / "bin" / "python")
    code, data = doctor_json(capsys, "--import", "--python", python, "--driver", "580.65.06", "--gpu", "8.6")
    assert code == 2
    real = subprocess.run([python, "-c", "import torchvision"], capture_output=True, text=True)
    last = real.stderr.strip().splitlines()[-1]  # "RuntimeError: operator torchvision::nms does not exist"
    observed = [(f["severity"], f["subject"], f["message"]) for f in data["findings"] if f["check"] == "import"]
    assert observed == [("error", "torchvision 0.28.0", f"import torchvision fails: {last}")]
    assert {f["check"] for f in data["findings"] if f["severity"] == "error"} == {"import", "torch-abi"}
