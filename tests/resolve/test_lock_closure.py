"""The lock closes the planned set over the CUDA libraries its binaries link (resolve/undeclared.py
`unprovided_libraries`), keeps one CUDA major, and judges a statically linked runtime's floor.

Small gcc-built packages the tables do not know, served beside the fake CUDA universe
(tests/fake_cuda_index.py) on 127.0.0.1: `linkapp`, whose extension links libcublas.so.12 without
requiring any wheel; `oldapp`, a CUDA 11 build (libcublas.so.11); `gompapp`, which links libgomp.so.1
(a library of the target's system, not of any wheel), besides libcublas.so.12 on x86_64 only;
`hookapp`, which ships one hook per CUDA major (hook_cu12.so linking libcudart.so.12 beside
hook_cu13.so linking libcudart.so.13) and an unsuffixed hook.so linking libcudart.so.12, as
torch-memory-saver 0.0.10 does (its loader picks `<stem>_cu<major>`; the unsuffixed one is ROCm's);
`codecapp`, whose 2.0 is a CUDA 13 build by its binary alone (libcudart.so.13, as torchcodec 0.17.0)
and 1.0 a CUDA 12 one; `staticapp`, whose library links a CUDA 12.8 runtime in statically, dated by its cubins' toolkit
note (1.0) or, with none, by its PTX ISA 8.7 alone (1.1), beside a release built with CUDA 11.4
(0.9, PTX ISA 7.4), and `wantapp`, whose 2.0 requires staticapp>=1.0 and 1.0 any staticapp; `mysteryapp`, whose static runtime no byte dates (PTX of an ISA no toolkit writes).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import zipfile
from pathlib import Path

import pytest
from conftest import hermetic_environ
from fatbin_bytes import container, cubin, entry, ptx
from index_server import IndexServer, make_wheel
from lock_oracles import locked
from packaging.tags import sys_tags

from cudaresolve.binary.elf import read_binary_facts
from cudaresolve.binary.facts import CudaRuntime
from cudaresolve.checks.builds import dated_runtime
from cudaresolve.cli import main
from cudaresolve.host.facts import HostFacts
from cudaresolve.index.cache import IndexCache
from cudaresolve.index.http import Http
from cudaresolve.index.pages import index_files
from cudaresolve.index.wheel_facts import BudgetSpent, LinkBudget, wheel_linked_facts
from cudaresolve.lockfile.pylock import read_pylock
from cudaresolve.resolve import resolver

AMPERE = ("--driver", "550.144.03", "--gpu", "8.6")  # given by flags: this machine's libraries do not count
DRIVER_470 = ("--driver", "470.256.02", "--gpu", "8.6")  # CUDA 11.4
BANNER = b"Cuda compilation tools, release 12.8, V12.8.93\0Build cuda_12.8.r12.8/compiler.35583870_0\0"


def _tag() -> str:
    accepted = {t.platform for t in sys_tags()}
    platform = next(p for p in ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "linux_x86_64") if p in accepted)
    return f"py3-none-{platform}"


def _stub(elf_builder, soname: str, function: str) -> Path:
    return elf_builder.build(soname, f"int {function}(void) {{ return 0; }}\n", soname=soname, directory="stubs")


def _linking(elf_builder, package: str, soname: str, function: str, lib_dir: str, version: str = "1.0") -> tuple[str, bytes]:
    """A wheel of `package` `version` whose extension calls `function` of `soname`, found through its
    RUNPATH in `lib_dir` (where the NVIDIA wheel installs it), and which requires nothing."""
    stub = _stub(elf_builder, soname, function)
    ext = elf_builder.build(f"{package}_{version}_ext.so", f"extern int {function}(void);\nint f(void) {{ return {function}(); }}\n",
                            link=[stub], runpath=f"$ORIGIN/../{lib_dir}", directory=f"{package}-{version}")
    # its import loads the extension, so what the extension links is needed at import (env/imports.py)
    files = {f"{package}/__init__.py": b"from . import _ext\n", f"{package}/_ext.so": ext.read_bytes()}
    return make_wheel(package, version, files=files, tag=_tag())


def _gomp(elf_builder, tag: str, *, cublas: bool) -> tuple[str, bytes]:
    """`gompapp` 1.0: an extension linking libgomp.so.1 (as numba's omppool does) and, with `cublas`,
    libcublas.so.12, neither shipped nor required."""
    gomp = _stub(elf_builder, "libgomp.so.1", "omp_get_max_threads")
    link = [gomp, _stub(elf_builder, "libcublas.so.12", "cublasCreate_v2")] if cublas else [gomp]
    calls = "omp_get_max_threads()" + (" + cublasCreate_v2()" if cublas else "")
    ext = elf_builder.build(f"gompapp_{tag}.so", "extern int cublasCreate_v2(void);\nextern int omp_get_max_threads(void);\n"
                            f"int f(void) {{ return {calls}; }}\n", link=link, directory="gompapp")
    return make_wheel("gompapp", "1.0", files={"gompapp/__init__.py": b"", "gompapp/_ext.so": ext.read_bytes()}, tag=tag)


def _hooks(elf_builder) -> tuple[str, bytes]:
    """`hookapp` 1.0: one hook library per CUDA major, each linking its major's runtime; requires nothing."""
    files = {"hookapp/__init__.py": b""}
    for major, suffix in ((12, "_cu12"), (13, "_cu13"), (12, "")):
        runtime = _stub(elf_builder, f"libcudart.so.{major}", "cudaGetDeviceCount")
        hook = elf_builder.build(f"hook{suffix}.so", "extern int cudaGetDeviceCount(void);\nint f(void) { return cudaGetDeviceCount(); }\n",
                                 link=[runtime], directory=f"hookapp{major}{suffix}")
        files[f"hookapp/hook{suffix}.so"] = hook.read_bytes()
    return make_wheel("hookapp", "1.0", files=files, tag=_tag())


def _static(elf_builder, name: str, *, note: bool, isa: str) -> bytes:
    """A library laid out as nvcc's host code with `-cudart static` leaves one (tests/test_elf.py
    `static_library`): an sm_86 cubin (ELF ABI 8 with the 12.8 toolkit note, else ABI 7 without)
    and PTX of ISA `isa`, registered through a runtime defined inside."""
    code = cubin(86, abi=8) + BANNER if note else cubin(86)
    blob = container(entry(2, 86, code, version=(1, 8)), entry(1, 86, ptx("sm_86", isa), version=tuple(map(int, isa.split(".")))))
    source = (f'__attribute__((section(".nv_fatbin"), aligned(8), used)) const unsigned char fatbin[] = {{{", ".join(map(str, blob))}}};\n'
              '__attribute__((section(".nvFatBinSegment"), aligned(8), used)) const void *wrapper[3] = {0, fatbin, 0};\n'
              '__attribute__((visibility("hidden"))) void **__cudaRegisterFatBinary(void *w) { return (void **)w; }\n'
              "void **init(void) { return __cudaRegisterFatBinary((void *)wrapper); }\n")
    return elf_builder.build(name, source, directory="static").read_bytes()


@pytest.fixture
def closure_index(cuda_index, elf_builder):
    """The fake CUDA universe and the packages above on one server."""
    universe = cuda_index.universe
    server = IndexServer()
    for filename, roots in sorted(universe.wheels.items()):
        for root in roots:
            server.add(filename, (universe.root / filename).read_bytes(), root=root,
                       requires_python=universe.requires_python.get(filename))
    server.add(*_linking(elf_builder, "linkapp", "libcublas.so.12", "cublasCreate_v2", "nvidia/cublas/lib"))
    server.add(*_linking(elf_builder, "oldapp", "libcublas.so.11", "cublasCreate_v2", "nvidia/cublas/lib"))
    server.add(*_linking(elf_builder, "codecapp", "libcudart.so.13", "cudaGetDeviceCount", "nvidia/cu13/lib", "2.0"))
    server.add(*_linking(elf_builder, "codecapp", "libcudart.so.12", "cudaGetDeviceCount", "nvidia/cuda_runtime/lib", "1.0"))
    for version, note, isa in (("1.1", False, "8.7"), ("1.0", True, "8.7"), ("0.9", False, "7.4")):
        library = _static(elf_builder, f"libstatic-{version}.so", note=note, isa=isa)
        server.add(*make_wheel("staticapp", version, files={"staticapp/__init__.py": b"", "staticapp/_core.so": library}, tag=_tag()))
    server.add(*make_wheel("wantapp", "2.0", requires=["staticapp>=1.0"]))
    server.add(*make_wheel("wantapp", "1.0", requires=["staticapp"]))
    mystery = _static(elf_builder, "libmystery.so", note=False, isa="1.0")
    server.add(*make_wheel("mysteryapp", "1.0", files={"mysteryapp/__init__.py": b"", "mysteryapp/_core.so": mystery}, tag=_tag()))
    server.add(*_gomp(elf_builder, _tag(), cublas=True))
    server.add(*_gomp(elf_builder, "py3-none-manylinux_2_17_aarch64", cublas=False))
    server.add(*_hooks(elf_builder))
    server.start()
    yield ("--index-url", server.url + "/simple", "--torch-index-base", server.url)
    server.stop()


@pytest.fixture
def run(hermetic, capfd):
    def cli(*argv: str) -> tuple[int, str, str]:
        capfd.readouterr()
        code = main(list(argv))
        captured = capfd.readouterr()
        return code, captured.out, captured.err

    return cli


def _lock(run, tmp_path: Path, python: str, *argv: str) -> tuple[int, str, str, dict[str, str]]:
    out = tmp_path / "pylock.toml"
    code, stdout, stderr = run("lock", *argv, "--python", python, "-o", str(out))
    return code, stdout, stderr, locked(read_pylock(str(out))) if code == 0 else {}


def test_an_undeclared_linked_library_brings_its_wheel_of_the_sets_major_and_the_doctor_after_install_is_clean(
        run, closure_index, empty_python, tmp_path, venv_with_pip):
    code, out, err, lock = _lock(run, tmp_path, empty_python, "linkapp", *AMPERE, *closure_index)
    assert code == 0, out + err
    assert lock["linkapp"] == "1.0" and lock["nvidia-cublas-cu12"].startswith("12."), lock
    assert "nvidia-cublas" not in " ".join(n for n in lock if n != "nvidia-cublas-cu12")  # no CUDA 13 cuBLAS
    assert "linkapp 1.0's linkapp/_ext.so links libcublas.so.12, which nothing else of the set provides" in out + err

    target = venv_with_pip(tmp_path / "target")
    python = str(target / "bin" / "python")
    code, out, err = run("install", "linkapp", "--python", python, "-q", *AMPERE, *closure_index)
    assert code == 0, out + err
    report = json.loads(run("doctor", "--python", python, "--json", "--no-judge-fixes", *AMPERE)[1])
    assert report["counts"]["error"] == 0, report["findings"]
    assert "nvidia-cublas-cu12" in subprocess.run([python, "-m", "pip", "list"], capture_output=True, text=True,
                                                  env=hermetic_environ()).stdout


def test_plain_pip_leaves_linkapp_without_its_library(run, closure_index, tmp_path, venv_with_pip):
    """The oracle: pip installs linkapp alone and the doctor finds libcublas.so.12 missing."""
    target = venv_with_pip(tmp_path / "plain")
    python = str(target / "bin" / "python")
    subprocess.run([python, "-m", "pip", "install", "--index-url", closure_index[1], "linkapp"], check=True,
                   capture_output=True, env=hermetic_environ({"PIP_NO_CACHE_DIR": "1"}))
    report = json.loads(run("doctor", "--python", python, "--json", "--no-judge-fixes", *AMPERE)[1])
    assert [(f["check"], f["subject"]) for f in report["findings"] if f["severity"] == "error"] == [("missing-library", "linkapp 1.0")]


def test_a_cuda_11_binary_beside_the_sets_cuda_12_is_refused_naming_library_binary_and_wheel(
        run, closure_index, empty_python, tmp_path):
    code, out, err, _ = _lock(run, tmp_path, empty_python, "oldapp", "nvidia-cublas-cu12", *AMPERE, *closure_index)
    assert code == 2, out + err
    assert ("oldapp 1.0's oldapp/_ext.so links libcublas.so.11, which no wheel of CUDA 12 installs "
            "(nvidia-cublas-cu11 is CUDA 11's)") in err, err
    assert "Traceback" not in err
    code, out, _ = run("lock", "oldapp", "nvidia-cublas-cu12", "--python", empty_python, "--json", *AMPERE, *closure_index)
    causes = [c for a in json.loads(out)["refused"]["attempts"] for c in a["causes"] if c["type"] == "NoProvider"]
    assert code == 2 and causes[0]["soname"] == "libcublas.so.11" and causes[0]["file"] == "oldapp/_ext.so"
    assert causes[0]["consumer"] == "oldapp 1.0" and causes[0]["other_majors"] == [{"cuda_major": 11, "wheel": "nvidia-cublas-cu11"}]


@pytest.mark.parametrize("host", [("--driver", "535.104.05", "--gpu", "8.0"), ("--driver", "580.65.06", "--gpu", "6.1")],
                         ids=["driver-535", "pascal"])
def test_a_release_linking_another_majors_runtime_is_set_aside_for_an_older_one_of_the_sets_major(
        host, run, closure_index, empty_python, tmp_path):
    """CUDA 13 is not tried (driver 535; CUDA 13 builds nothing for 6.1): codecapp 2.0 links
    libcudart.so.13, so codecapp 1.0, a CUDA 12 build, is locked with the CUDA 12 runtime, and the
    lock says why 2.0 was set aside."""
    code, out, err, lock = _lock(run, tmp_path, empty_python, "codecapp", "--explain", *host, *closure_index)
    assert code == 0, out + err
    assert lock["codecapp"] == "1.0" and lock["nvidia-cuda-runtime-cu12"].startswith("12."), lock
    assert "codecapp 2.0: a CUDA 13 build: its codecapp/_ext.so links libcudart.so.13; the environment is CUDA 12" in out, out
    code, out, err, _ = _lock(run, tmp_path, empty_python, "codecapp==2.0", *host, *closure_index)
    assert code == 2 and "links libcudart.so.13" in err and "Traceback" not in err, out + err


def test_a_release_of_a_major_the_host_runs_is_locked_with_that_major_not_walked_past(run, closure_index, empty_python, tmp_path):
    """Driver 580 on 8.6 runs CUDA 13: codecapp 2.0 is locked with the CUDA 13 runtime (a CUDA 11 build
    on driver 550, which runs CUDA 11, refuses CUDA 12 instead: the tests of oldapp)."""
    code, out, err, lock = _lock(run, tmp_path, empty_python, "codecapp", "--driver", "580.65.06", "--gpu", "8.6", *closure_index)
    assert code == 0 and lock["codecapp"] == "2.0" and lock["nvidia-cuda-runtime"].startswith("13."), out + err


def test_a_static_runtime_without_a_toolkit_note_is_dated_by_its_ptx(elf_builder):
    _static(elf_builder, "old.so", note=False, isa="7.4")
    facts = read_binary_facts(elf_builder.root / "static" / "old.so")
    assert facts.cuda_runtime == CudaRuntime("static", None, None)  # ABI 7 cubins: no toolkit note
    assert dated_runtime(facts) == CudaRuntime("static", 11, "11.4", "PTX ISA")
    _static(elf_builder, "noted.so", note=True, isa="8.7")
    noted = read_binary_facts(elf_builder.root / "static" / "noted.so")
    assert dated_runtime(noted) == noted.cuda_runtime == CudaRuntime("static", 12, "12.8.93", "toolkit note")
    _static(elf_builder, "unplaced.so", note=False, isa="1.0")
    assert dated_runtime(read_binary_facts(elf_builder.root / "static" / "unplaced.so")) == CudaRuntime("static", None, None)


@pytest.mark.parametrize("deep", [(), ("--deep",)], ids=["row-less", "deep"])
def test_a_static_cuda_12_8_runtime_is_not_locked_for_a_470_driver(deep, run, closure_index, empty_python, tmp_path):
    code, out, err, lock = _lock(run, tmp_path, empty_python, "staticapp", *deep, *DRIVER_470, *closure_index)
    assert code == 0, out + err
    assert lock["staticapp"] == "0.9", lock  # 1.1's and 1.0's CUDA 12.8 runtime needs a newer driver: its CUDA 11.4 release
    for version in ("1.1", "1.0"):
        code, out, err, _ = _lock(run, tmp_path, empty_python, f"staticapp=={version}", *deep, *DRIVER_470, *closure_index)
        assert code == 2 and f"staticapp {version}" in err and "12.8" in err, out + err


def test_the_release_pip_takes_is_set_aside_naming_the_requirement_only_refused_releases_meet(
        run, closure_index, empty_python, tmp_path):
    """wantapp 2.0 needs staticapp>=1.0, whose releases the judge refuses for a 470 driver (as
    flashinfer-python 0.7.4 needs nccl-extensions 0.1.0, refused beside torch's NCCL): the lock takes
    wantapp 1.0 and says why not 2.0."""
    code, out, err, lock = _lock(run, tmp_path, empty_python, "wantapp", "--explain", *DRIVER_470, *closure_index)
    assert code == 0 and lock["wantapp"] == "1.0" and lock["staticapp"] == "0.9", out + err
    assert "wantapp 2.0: needs staticapp>=1.0, and nothing here fits it: staticapp 1." in out, out


def test_a_static_runtime_no_byte_dates_is_a_warning_not_silence(elf_builder):
    from dataclasses import replace

    from test_doctor_checks import SP, dist, elf, environment

    from cudaresolve.checks.driver_floor import check_driver_floor
    from cudaresolve.checks.findings import Severity
    from cudaresolve.checks.problems import UndatedRuntime
    from cudaresolve.host.facts import Driver, HostFacts
    from cudaresolve.output.findings import render_problem
    from cudaresolve.versions import DriverRelease

    _static(elf_builder, "unplaced.so", note=False, isa="1.0")
    facts = read_binary_facts(elf_builder.root / "static" / "unplaced.so")
    made = elf("mystery/_core.so", "mystery")
    env = environment(dist("mystery", "2.0"), elf_files=(replace(made, facts=replace(facts, path=made.path)),))
    host = HostFacts("Linux", "x86_64", Driver(DriverRelease.parse("470.256.02"), "override:--driver"), ())
    [finding] = check_driver_floor(env, (), host)
    assert finding.severity == Severity.WARNING and finding.problem == UndatedRuntime((f"{SP}/mystery/_core.so",))
    assert render_problem(finding.problem).startswith("_core.so links a CUDA runtime in statically whose release no byte tells")
    dated = replace(made, facts=replace(read_binary_facts(elf_builder.root / "static" / "unplaced.so"), path=made.path,
                                        cuda_runtime=CudaRuntime("static", 12, "12.8.93", "toolkit note")))
    assert check_driver_floor(environment(dist("mystery", "2.0"), elf_files=(dated,)), (), host) == []


def test_a_library_of_the_targets_system_is_not_known_missing_and_never_refuses(run, closure_index, empty_python, tmp_path):
    """libgomp.so.1 is no wheel's: on a target given by flags, or another machine's, it is not known
    to be missing (the doctor judges the files after install); libcublas.so.12 is still closed over."""
    code, out, err, lock = _lock(run, tmp_path, empty_python, "gompapp", *AMPERE, *closure_index)
    assert code == 0, out + err
    assert lock["gompapp"] == "1.0" and lock["nvidia-cublas-cu12"].startswith("12."), lock
    host = tmp_path / "gh200.json"
    host.write_text(HostFacts(system="Linux", machine="aarch64", glibc="2.28").to_json())
    code, out, err, lock = _lock(run, tmp_path, empty_python, "gompapp", "--host", str(host), "--platform", "manylinux_2_17_aarch64",
                                 *closure_index)
    assert code == 0, out + err
    assert lock == {"gompapp": "1.0"}, lock


def test_a_cuda_11_binary_alone_is_locked_with_cuda_11_libraries_and_never_beside_cuda_12_ones(
        run, closure_index, empty_python, tmp_path):
    code, out, err, lock = _lock(run, tmp_path, empty_python, "oldapp", *AMPERE, *closure_index)
    assert code == 0, out + err
    assert lock["nvidia-cublas-cu11"].startswith("11.") and not any(n.endswith("-cu12") for n in lock), lock
    code, out, err, _ = _lock(run, tmp_path, empty_python, "oldapp", "linkapp", *AMPERE, *closure_index)
    assert code == 2, out + err
    assert "links libcublas.so.11, which no wheel of CUDA 12 installs" in err and "Traceback" not in err


def test_a_static_runtime_no_byte_dates_is_locked_with_a_warning(run, closure_index, empty_python, tmp_path):
    code, out, err, lock = _lock(run, tmp_path, empty_python, "mysteryapp", *DRIVER_470, *closure_index)
    assert code == 0 and lock["mysteryapp"] == "1.0", out + err
    assert "warning: mysteryapp 1.0: _core.so links a CUDA runtime in statically whose release no byte tells" in err, err


def test_linked_wheels_past_the_locks_budget_join_unread_and_the_lock_says_so(run, closure_index, empty_python, tmp_path, monkeypatch):
    monkeypatch.setattr(resolver, "MAX_LINKED_BYTES", 100)
    code, out, err, lock = _lock(run, tmp_path, empty_python, "linkapp", *AMPERE, *closure_index)
    assert code == 0 and "nvidia-cublas-cu12" not in lock, out + err
    assert ("warning: the libraries linkapp 1.0 links were not read: this lock's budget of 0 MB for reading wheels "
            "the knowledge tables do not know is spent") in err, err


def test_a_linked_wheel_is_read_by_range_for_its_shared_objects_alone_and_charged_to_the_budget(server, elf_builder, tmp_path):
    """The payload (2 MB, incompressible) is never fetched; what is costs the budget once, then the
    cache serves it; a wheel over what is left of the budget is not fetched at all."""
    filename, data = _linking(elf_builder, "linkapp", "libcublas.so.12", "cublasCreate_v2", "nvidia/cublas/lib")
    with zipfile.ZipFile(io.BytesIO(data)) as archive:  # the shared object first: the zip's tail does not hold it
        payload = {"linkapp/_ext.so": archive.read("linkapp/_ext.so"), "linkapp/__init__.py": b"",
                   "linkapp/payload.bin": os.urandom(2_000_000)}
    for version in ("1.0", "2.0"):
        server.add(*make_wheel("linkapp", version, files=payload, tag=_tag()))
    cache, http = IndexCache(str(tmp_path / "cache")), Http(sleep=lambda seconds: None)
    first, second = sorted(index_files(http, cache, server.url + "/simple", "linkapp"), key=lambda f: f.version)
    budget, before, requests = LinkBudget(1_000_000), server.bytes_sent, len(server.requests)
    facts = wheel_linked_facts(http, cache, first, budget)
    assert len(server.requests) - requests == 2  # the zip's tail, then the one shared object
    assert [f.path.split("!")[1] for f in facts.members] == ["linkapp/_ext.so"] and "libcublas.so.12" in facts.members[0].needed
    assert 0 < budget.spent < 100_000 and server.bytes_sent - before < 0.1 * (first.size or 0)
    again, before = LinkBudget(1_000_000), server.bytes_sent
    assert wheel_linked_facts(http, cache, first, again) == facts and again.spent == 0
    with pytest.raises(BudgetSpent):
        wheel_linked_facts(http, cache, second, LinkBudget(100))
    assert server.bytes_sent - before < 0.1 * (second.size or 0)  # its directory alone


def test_pure_wheels_and_wheels_the_tables_know_are_never_read_for_their_links(elf_builder):
    """read_links asks a wheel's member list only of a platform wheel the tables do not know, and
    reads only one whose members hold a shared object; the plan gains none of their files."""
    from types import SimpleNamespace

    from packaging.version import Version

    from cudaresolve.resolve.planned import read_links

    asked, read = [], []

    class Index:
        def members(self, file):
            asked.append(file.filename)
            return ("pkg/__init__.py", "pkg/_ext.cpython-312-x86_64-linux-gnu.so") if file.filename.startswith("native") else ("pkg/x.py",)

        def linked_facts(self, file, budget):
            read.append(file.filename)
            return SimpleNamespace(members=())

    def wheel(name, filename):
        return SimpleNamespace(name=name, version=Version("1.0"), file=SimpleNamespace(filename=filename), ref=None)

    chosen = [wheel("native", "native-1.0-cp312-cp312-manylinux_2_28_x86_64.whl"), wheel("plain", "plain-1.0-py3-none-any.whl"),
              wheel("tagged", "tagged-1.0-cp312-cp312-manylinux_2_28_x86_64.whl"),
              wheel("nvidia-cublas-cu12", "nvidia_cublas_cu12-12.9.1.4-py3-none-manylinux_2_27_x86_64.whl")]
    plan = SimpleNamespace(elf_files=())
    links = read_links(plan, chosen, Index(), LinkBudget(1 << 20))
    assert asked == ["native-1.0-cp312-cp312-manylinux_2_28_x86_64.whl", "tagged-1.0-cp312-cp312-manylinux_2_28_x86_64.whl"]
    assert read == ["native-1.0-cp312-cp312-manylinux_2_28_x86_64.whl"] and dict(links.files) == {"native": ()}


def test_the_closure_needs_only_table_sonames_and_skips_an_optional_layer():
    """Plain data: CuPy 13.6's NCCL module (an optional layer, data/components.toml) and numba's
    omppool (libgomp.so.1, no wheel's) need nothing of the closure; what a linked wheel read apart
    from the plan needs (libcublas.so.12) is, with the wheel of the set's major that installs it;
    a soname another linked wheel provides is provided."""
    from test_checks_planned import PLANNED, dist, planned, so
    from test_per_release import candidate

    from cudaresolve.env.environment import ElfFile
    from cudaresolve.resolve.undeclared import unprovided_libraries

    nccl = f"{PLANNED}/cupy_backends/cuda/libs/nccl.so"
    plan = planned(dist("cupy-cuda12x", "13.6.0"), dist("numba", "0.61.2"), dist("linkapp", "1.0"),
                   elf_files=(ElfFile(nccl, ("cupy-cuda12x",), so(nccl, needed=("libnccl.so.2",)), None),))
    chosen = [candidate("cupy-cuda12x", "13.6.0", "cupy_cuda12x-13.6.0-cp311-cp311-manylinux2014_x86_64.whl"),
              candidate("numba", "0.61.2", "numba-0.61.2-cp311-cp311-manylinux2014_x86_64.whl"),
              candidate("linkapp", "1.0", "linkapp-1.0-py3-none-manylinux_2_28_x86_64.whl")]
    links = {"numba": (so("numba.whl!numba/np/ufunc/omppool.so", needed=("libgomp.so.1", "libc.so.6")),),
             "linkapp": (so("linkapp.whl!linkapp/_ext.so", needed=("libcublas.so.12", "libcudart.so.12")),
                         so("linkapp.whl!linkapp/libcudart.so.12", soname="libcudart.so.12"))}
    [found] = unprovided_libraries(plan, chosen, 12, system=False, links=links)
    assert (found.consumer.name, found.file, found.soname) == ("linkapp", "linkapp/_ext.so", "libcublas.so.12")
    assert [row.dist for row in found.providers] == ["nvidia-cublas-cu12"]
    assert unprovided_libraries(plan, chosen[:2], 12, system=False, links={"numba": links["numba"]}) == ()


def test_a_hook_of_another_major_beside_its_own_does_not_refuse_the_major(run, closure_index, empty_python, tmp_path):
    """On the real survey, torch-memory-saver's *_cu12 hook beside its *_cu13 one made the lock refuse
    CUDA 13 for sglang on a 580 driver ("links libcudart.so.12, which no wheel of CUDA 13 installs")
    and fall back to an old CUDA 12 set. A process loads the hook of its own major only."""
    code, out, err, lock = _lock(run, tmp_path, empty_python, "hookapp", "--driver", "580.65.06", "--gpu", "8.6", *closure_index)
    assert code == 0, err
    assert lock["hookapp"] == "1.0" and lock["nvidia-cuda-runtime"].startswith("13."), lock
    assert "nvidia-cuda-runtime-cu12" not in lock, lock
