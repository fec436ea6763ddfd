"""`cudaresolve doctor` end to end on real environments built by pip, through `cudaresolve.cli.main`.

Two small venvs (cuSPARSE 12.3 beside nvJitLink 12.1 or 12.8, `--no-deps`) and one full torch 2.14.1
venv (~5.4 GB), all built once into the test cache. Hosts come from overrides or a `probe --json`
file, so no test depends on this machine's driver or GPUs. glibc (`ldd -r`) is the oracle for
symbol errors.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version
from wheel_cache import build_venv, build_venv_on

from cudaresolve.cli import main
from cudaresolve.commands import diagnosing
from cudaresolve.env.interpreter import target_for
from cudaresolve.errors import UsageError

CUSPARSE = "nvidia-cusparse-cu12==12.3.1.170"
OLD_NVJITLINK = "nvidia-nvjitlink-cu12==12.1.105"
NEW_NVJITLINK = "nvidia-nvjitlink-cu12==12.8.93"
AMPERE_ON_550 = ["--driver", "550.144.03", "--gpu", "8.6"]
TORCH = "torch==2.14.1"


@pytest.fixture(scope="module")
def facts_cache(tmp_path_factory) -> Path:
    """One facts cache per module: the first doctor run reads the libraries, later runs reuse them."""
    return tmp_path_factory.mktemp("facts-cache")


@pytest.fixture(autouse=True)
def isolated(monkeypatch, facts_cache):
    monkeypatch.setenv("CUDARESOLVE_CACHE_DIR", str(facts_cache))
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


def doctor_json(capsys, *args: str) -> tuple[int, dict]:
    code = main(["doctor", "--json", "--no-judge-fixes", *args])
    out, err = capsys.readouterr()
    assert err == ""
    return code, json.loads(out)


def site_packages(venv: Path) -> Path:
    return venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"


def ldd_undefined(path: str) -> list[str]:
    """glibc's `undefined symbol: ...` lines for `path`, in the order ld.so reports them."""
    if shutil.which("ldd") is None:
        pytest.skip("ldd is not installed")
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
    proc = subprocess.run(["ldd", "-r", path], capture_output=True, text=True, env=env)
    return [m.group(1) for m in re.finditer(r"^(undefined symbol: [^\t]*)\t\(", proc.stdout + proc.stderr, re.M)]


def ldd_not_found(path: str) -> list[str]:
    """The DT_NEEDED names glibc's loader finds nowhere for `path` (`ldd`'s "=> not found" lines), in order."""
    if shutil.which("ldd") is None:
        pytest.skip("ldd is not installed")
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
    proc = subprocess.run(["ldd", path], capture_output=True, text=True, env=env)
    return re.findall(r"^\t(\S+) => not found$", proc.stdout, re.M)


# -- cuSPARSE beside nvJitLink -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def skewed_venv(cuda_venv) -> Path:
    return cuda_venv([CUSPARSE, OLD_NVJITLINK])


@pytest.fixture(scope="module")
def fixed_venv(cuda_venv) -> Path:
    return cuda_venv([CUSPARSE, NEW_NVJITLINK])


CONSTRAIN = 'constrain it: pip install "nvidia-nvjitlink-cu12>=12.4" (or add it to your constraints file)'
KEEP = 'keep the release installed: add "nvidia-nvjitlink-cu12>=12.4" to your constraints file (pip\'s -c FILE or PIP_CONSTRAINT)'


def metadata_warning(site: Path, fix: str = CONSTRAIN) -> dict:
    """cuSPARSE 12.3 binds __nvJitLink*_12_4 but its metadata requires nvidia-nvjitlink-cu12 unpinned:
    the fix installs the floor, or keeps it where the installed release meets it (KEEP)."""
    cusparse = f"{site}/nvidia/cusparse/lib/libcusparse.so.12"
    return {
        "check": "metadata-vs-binary",
        "severity": "warning",
        "subject": "nvidia-cusparse-cu12 12.3.1.170",
        "message": "needs nvidia-nvjitlink-cu12 >= 12.4 (libcusparse.so.12 binds __nvJitLinkComplete_12_4) but "
        "declares 'nvidia-nvjitlink-cu12', which admits 12.0.76 … 12.3.101, 9 releases",
        "evidence": [f"{cusparse} needs __nvJitLinkComplete_12_4 from libnvJitLink.so.12"],
        "fix": fix,
    }


def worded(finding: dict) -> dict:
    """A JSON finding's text keys, without the values they are made from."""
    return {key: finding[key] for key in ("check", "severity", "subject", "message", "evidence", "fix")}


def test_cusparse_with_too_old_nvjitlink_is_symbol_skew(skewed_venv, capsys):
    code, data = doctor_json(capsys, "--python", str(skewed_venv / "bin" / "python"), *AMPERE_ON_550)
    site = site_packages(skewed_venv)
    cusparse = f"{site}/nvidia/cusparse/lib/libcusparse.so.12"
    provider = f"{site}/nvidia/cusparse/lib/../../nvjitlink/lib/libnvJitLink.so.12"
    glibc = ldd_undefined(cusparse)
    assert len(glibc) == 8
    assert "undefined symbol: __nvJitLinkComplete_12_4, version libnvJitLink.so.12" in glibc

    assert code == 2
    # No nvjitlink-no-inline advisory: cusparse calls the versioned __nvJitLink*_12_4 names, not the
    # unversioned ones that nvJitLink 12.1 lacks.
    assert data["counts"] == {"error": 1, "warning": 1, "info": 0}
    skew, metadata = data["findings"]
    assert worded(skew) == {
        "check": "symbol-skew",
        "severity": "error",
        "subject": "nvidia-cusparse-cu12 12.3.1.170",
        # the line ld.so prints first, then glibc's lines in its order (.dynsym order)
        "message": "libcusparse.so.12: undefined symbol: __nvJitLinkComplete_12_4, version libnvJitLink.so.12",
        "evidence": [f"{cusparse}: {line}" for line in glibc[:5]]
        + ["... and 3 more", f"the loader picks {provider} (runpath)"],
        "fix": 'pip install "nvidia-nvjitlink-cu12>=12.4"',
    }
    assert skew["message"] == f"libcusparse.so.12: {glibc[0]}"
    # the same, as values: what the resolver and any other reader take, never the words
    assert skew["about"]["distribution"] == "nvidia-cusparse-cu12" and skew["about"]["version"] == "12.3.1.170"
    assert skew["problem"]["type"] == "symbol-skew" and skew["problem"]["minimum"] == "12.4"
    assert skew["problem"]["symbols"] == [line.split(": ", 1)[1].split(",")[0] for line in glibc]
    assert skew["remedy"] == {"type": "pip-install", "requirements": ["nvidia-nvjitlink-cu12>=12.4"], "replaces": [],
                              "options": []}
    assert worded(metadata) == metadata_warning(site)

    [load] = [lib for lib in data["libraries"] if lib["package"] == "nvidia-cusparse-cu12"]
    [obj] = load["objects"]
    assert obj["path"] == cusparse
    assert {"name": "libnvJitLink.so.12", "path": provider, "step": "runpath", "rpath_of": None} in obj["needed"]


def test_cusparse_with_new_enough_nvjitlink_binds(fixed_venv, capsys):
    python = str(fixed_venv / "bin" / "python")
    code, data = doctor_json(capsys, "--python", python, *AMPERE_ON_550)
    assert ldd_undefined(f"{site_packages(fixed_venv)}/nvidia/cusparse/lib/libcusparse.so.12") == []
    assert code == 0
    assert data["counts"] == {"error": 0, "warning": 2, "info": 0}
    driver_floor, metadata = data["findings"]
    assert (driver_floor["check"], driver_floor["severity"], driver_floor["subject"]) == (
        "driver-floor", "warning", "nvidia-nvjitlink-cu12 12.8.93"
    )
    # about the metadata: it stays, and a `pip install` of what is installed would change nothing
    assert worded(metadata) == metadata_warning(site_packages(fixed_venv), KEEP)
    assert doctor_json(capsys, "--python", python, "--strict", *AMPERE_ON_550)[0] == 1


def test_the_facts_cache_is_reused(fixed_venv, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("CUDARESOLVE_CACHE_DIR", str(tmp_path))
    reads: list[str] = []
    real_read = diagnosing.read_binary_facts

    def counting_read(path):  # counts the reads of this process; forked fill workers count their own
        reads.append(path)
        return real_read(path)

    monkeypatch.setattr(diagnosing, "read_binary_facts", counting_read)
    python = str(fixed_venv / "bin" / "python")
    first = doctor_json(capsys, "--python", python, *AMPERE_ON_550)
    entries = {entry.name: entry.stat().st_mtime_ns for entry in os.scandir(tmp_path / "facts")}
    assert len(entries) >= 2  # libcusparse.so.12 and libnvJitLink.so.12, then what the loader reaches
    reads.clear()
    shutil.rmtree(tmp_path / "results")  # not the cached result: a new diagnosis, from the facts cache
    assert doctor_json(capsys, "--python", python, *AMPERE_ON_550) == first
    assert reads == []  # nothing read here, and nothing by workers either: no entry was written again
    assert {entry.name: entry.stat().st_mtime_ns for entry in os.scandir(tmp_path / "facts")} == entries


# -- the command line --------------------------------------------------------------------------------


def test_text_output_is_plain_when_not_a_terminal(fixed_venv, capsys, monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    python = str(fixed_venv / "bin" / "python")
    assert main(["doctor", "--python", python, "--no-judge-fixes", *AMPERE_ON_550]) == 0
    out, err = capsys.readouterr()
    site = site_packages(fixed_venv)
    assert out.splitlines()[:5] == [
        "host: 550.144.03 (CUDA 12.4); GPU (8.6)",
        f"env:  {python} — 2 distributions, 2 ELF files, {site}",  # exactly the two wheels: no pip in the venv
        "result: 0 errors, 2 warnings, 0 infos",
        "",
        "WARNINGS",
    ]
    assert "\033" not in out and err == ""


def test_a_bad_python_or_host_is_exit_3_with_one_line(tmp_path, capsys):
    missing = tmp_path / "nope" / "python"
    assert main(["doctor", "--python", str(missing)]) == 3
    assert capsys.readouterr() == ("", f"cudaresolve: error: interpreter {missing} does not exist\n")
    assert main(["doctor", "--python", "/bin/false"]) == 3
    assert capsys.readouterr().err == (
        "cudaresolve: error: /bin/false is not a usable Python interpreter (exit status 1)\n"
    )
    assert main(["doctor", "--site-packages", str(tmp_path / "absent")]) == 3
    assert capsys.readouterr().err == (
        f"cudaresolve: error: site-packages directory {tmp_path / 'absent'} does not exist or is not a directory\n"
    )
    # A bad host is the doctor not running too: 3, never 2 (which means "errors found").
    assert main(["doctor", "--site-packages", str(tmp_path), "--gpu", "x.y"]) == 3
    assert capsys.readouterr() == ("", "cudaresolve: error: --gpu: 'x.y' is not a compute capability (expected e.g. 8.6)\n")
    (tmp_path / "host.json").write_text('{"schema": 2}')
    assert main(["doctor", "--site-packages", str(tmp_path), "--host", str(tmp_path / "host.json")]) == 3
    assert capsys.readouterr().err.startswith(f"cudaresolve: error: --host {tmp_path / 'host.json'}: schema is 2")


def test_python_and_site_packages_together_are_refused(tmp_path, capsys):
    assert main(["doctor", "--python", sys.executable, "--site-packages", str(tmp_path)]) == 3
    assert capsys.readouterr() == (
        "",
        "cudaresolve: error: argument --site-packages: not allowed with argument --python "
        "(see 'cudaresolve doctor --help')\n",
    )
    with pytest.raises(UsageError, match="^give --python or --site-packages, not both$"):
        target_for(python=sys.executable, site_packages=str(tmp_path))


# -- torch 2.14.1 ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def torch_python() -> str:
    """A venv holding torch 2.14.1 and its dependencies as pip resolves them."""
    return str(build_venv([TORCH], deps=True) / "bin" / "python")


NO_KERNEL = '"no kernel image is available for execution on the device"'
# the CUDA 13 wheels torch 2.14.1 pulls in go first: pip would leave them beside the variant's CUDA 12 ones
CU126 = ("pip uninstall nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cudnn-cu13 "
         "nvidia-cufft nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13 "
         "nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx (CUDA 13 wheels), then "
         "install the cu126 variant: torch==2.14.1+cu126 from the PyTorch index (whl/cu126), "
         "with its matching CUDA wheels")


def errors_of(data: dict) -> list[dict]:
    return [f for f in data["findings"] if f["severity"] == "error"]


@pytest.mark.torch_venv
def test_torch_on_a_gtx_1080_has_no_kernel_image(torch_python, capsys):
    code, data = doctor_json(capsys, "--python", torch_python, "--gpu", "6.1", "--driver", "580.65.06")
    assert code == 2
    [error] = errors_of(data)
    site = site_packages(Path(torch_python).parent.parent)
    assert error["check"] == "arch-coverage"
    assert error["subject"] == "torch 2.14.1"
    assert error["message"] == f"no kernel image for compute capability 6.1 (GPU 0): {NO_KERNEL}"
    assert error["fix"] == CU126
    assert error["evidence"][0].startswith(
        f"{site}/torch/lib/libtorch_cuda.so: no SASS for compute capability 6.1 and no usable PTX (has "
    )
    assert error["evidence"][-1] == (
        "its CUDA dependencies lack code for 6.1 too: nvidia-cublas, nvidia-cuda-cupti, nvidia-cudnn-cu13, "
        "nvidia-cufft, nvidia-cufile, nvidia-curand, nvidia-cusolver, nvidia-cusparse, nvidia-cusparselt-cu13, "
        "nvidia-nccl-cu13, triton"
    )
    pascal = [f for f in data["findings"] if f["message"].startswith("known problem pascal-cu128:")]
    assert [(f["severity"], f["subject"]) for f in pascal] == [("warning", "torch 2.14.1")]
    # NVSHMEM serves an opt-in feature: a warning naming it, apart from the error
    [nvshmem] = [f for f in data["findings"] if f["check"] == "arch-coverage" and f["severity"] == "warning"]
    assert nvshmem["message"] == ("opt-in feature unavailable on compute capability 6.1: NVSHMEM symmetric memory "
                                  "(torch.distributed._symmetric_memory) has no kernel image for it")
    assert [line.split(": ")[0].rsplit("/", 1)[1] for line in nvshmem["evidence"]] == [
        "libnvshmem_host.so.3", "libtorch_nvshmem.so"]


@pytest.mark.torch_venv
def test_torch_on_an_rtx_4090_with_driver_550_needs_a_newer_driver(torch_python, capsys):
    code, data = doctor_json(capsys, "--python", torch_python, "--gpu", "8.9", "--driver", "550.144.03")
    assert code == 2
    [error] = errors_of(data)
    assert error["check"] == "driver-floor"
    assert error["subject"] == "torch 2.14.1"
    assert error["message"] == (
        "built for CUDA 13.0: driver 550.144.03 < 580.65.06 (CUDA 13.x floor): "
        '"CUDA driver version is insufficient for CUDA runtime version"'
    )
    assert error["evidence"][:2] == [
        "torch 2.14.1 is the PyPI build, built with CUDA 13.0",
        "host has driver 550.144.03, CUDA 12.4",
    ]
    assert error["evidence"][2].startswith("its CUDA dependencies need that driver too: nvidia-cublas, ")
    assert error["fix"] == "upgrade the driver to >= 580.65.06, or " + CU126


@pytest.mark.torch_venv
def test_torch_on_an_rtx_4090_with_driver_580_runs(torch_python, capsys):
    """Every library has sm_89 SASS or its package has it elsewhere (libcufftw's lone sm_75 stub)."""
    code, data = doctor_json(capsys, "--python", torch_python, "--gpu", "8.9", "--driver", "580.65.06")
    assert (code, errors_of(data)) == (0, [])
    assert {"name": "torch", "version": "2.14.1"} in data["environment"]["distributions"]
    assert [f for f in data["findings"] if f["check"] == "arch-coverage"] == []


@pytest.mark.torch_venv
def test_torch_on_an_h100_with_driver_580_has_one_warning_a_user_can_act_on(torch_python, capsys):
    """triton's private CUPTI is information, not a duplicate to remove; what is left under --strict is
    nvJitLink 13.5 on a CUDA 13.0 driver, with a pin the installed requirements admit."""
    code, data = doctor_json(capsys, "--python", torch_python, "--strict", "--gpu", "9.0", "--driver", "580.65.06")
    warnings = [f for f in data["findings"] if f["severity"] == "warning"]
    assert (code, [(f["check"], f["subject"]) for f in warnings]) == (1, [("driver-floor", "nvidia-nvjitlink 13.5.37")])
    assert warnings[0]["fix"] == 'pin it to the driver\'s CUDA: pip install "nvidia-nvjitlink==13.0.88"'
    [cupti] = [f for f in data["findings"] if f["check"] == "duplicate-library"]
    assert (cupti["severity"], cupti["subject"]) == ("info", "5 libraries of nvidia-cuda-cupti, triton")


@pytest.mark.torch_venv
def test_torch_judged_for_a_host_file_written_by_probe(torch_python, capsys, tmp_path):
    assert main(["probe", "--json", "--gpu", "6.1", "--driver", "580.65.06"]) == 0
    probe_json = capsys.readouterr().out
    host_file = tmp_path / "gtx1080.json"
    host_file.write_text(probe_json)
    code, from_file = doctor_json(capsys, "--python", torch_python, "--host", str(host_file))
    code_overrides, from_overrides = doctor_json(capsys, "--python", torch_python, "--gpu", "6.1",
                                                 "--driver", "580.65.06")
    assert code == code_overrides == 2
    assert from_file["host"] == json.loads(probe_json)
    assert from_file["findings"] == from_overrides["findings"]
    assert [(f["check"], f["subject"]) for f in errors_of(from_file)] == [("arch-coverage", "torch 2.14.1")]


# torchvision's wheel for torch 2.14 (Requires-Dist: torch>=2.14.0) and its other requirements, as
# pip picks them; torchaudio's current wheel (+cu130, no Requires-Dist at all)
TORCH_LIBRARIES = ["torchvision==0.29.1", "numpy==2.4.6", "pillow==13.0.0", "torchaudio==2.11.0"]


@pytest.fixture(scope="module")
def torchvision_python() -> str:
    """torch 2.14.1's venv (linked, not fetched again) with torchvision, torchaudio, numpy and pillow over it."""
    return str(build_venv_on(build_venv([TORCH], deps=True), TORCH_LIBRARIES) / "bin" / "python")


@pytest.mark.torch_venv
def test_torchvision_and_torchaudio_extensions_find_what_importing_torch_loaded(torchvision_python, capsys):
    """torchvision's _C_stable.so and image_stable.so, and torchaudio's lib/*.abi3.so, link libc10.so,
    libtorch*.so and libcudart.so.13 with no path that reaches them (an RPATH into the build
    machine's conda, $ORIGIN and torchvision.libs, or none), so `ldd` on them says "not found" and a
    lone ld.so.cache lookup finds a system toolkit's libcudart. But both packages' __init__ import
    torch first, whose _C has loaded those libraries from torch/lib and nvidia/cu13/lib; ld.so
    matches a DT_NEEDED to an already loaded object by soname before any search, so nothing is
    missing and nothing shadows. torchvision's private torchvision.libs/libz.915b4635.so.1 is no
    copy for libcudnn's or numpy's libz.so.1. The oracle is the import itself, with the extensions loaded."""
    code, data = doctor_json(capsys, "--python", torchvision_python, "--driver", "580.65.06", "--gpu", "8.6")
    for name, version in [("torchvision", "0.29.1"), ("torchaudio", "2.11.0")]:
        assert {"name": name, "version": version} in data["environment"]["distributions"]
    assert (code, errors_of(data)) == (0, [])
    assert [f for f in data["findings"] if f["check"] in ("missing-library", "shadowing") and f["severity"] != "info"] == []
    assert [f for f in data["findings"] if "torchvision" in json.dumps(f) or "torchaudio" in json.dumps(f)] == []
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
    loaded = subprocess.run(
        [torchvision_python, "-c", "from torchvision.extension import _has_ops, _load_library\n"
                                   "from torchaudio._extension import _IS_TORCHAUDIO_EXT_AVAILABLE\n"
                                   "print(_has_ops(), _load_library('image_stable'), _IS_TORCHAUDIO_EXT_AVAILABLE)"],
        capture_output=True, text=True, env=env, check=True)
    assert loaded.stdout.split() == ["True", "True", "True"]


# -- cuda-cccl: one build per CUDA major, pathfinder preloads, kernels compiled at run time -----------

CCCL = ["cuda-cccl==1.2.1", "cuda-core==1.2.2", "cuda-pathfinder==1.9.0", "nvidia-cuda-nvrtc-cu12==12.9.86",
        "nvidia-cuda-runtime-cu12==12.9.79", "nvidia-nvjitlink-cu12==12.9.86"]


def test_cuda_cccl_cu12_on_driver_550_has_no_errors(cuda_venv, capsys):
    """cuda-bindings 12 selects cuda/compute/cu12/; cuda.pathfinder preloads the cu12 wheels' nvrtc and
    nvJitLink that its libcccl.c.parallel.so needs; that library's sm_75 stub is not its kernels (NVRTC
    12.9 compiles them for the 8.6 GPU); the unselected cu13/ build is not judged."""
    python = str(cuda_venv(CCCL + ["cuda-bindings==12.9.10"]) / "bin" / "python")
    code, report = doctor_json(capsys, "--python", python, *AMPERE_ON_550)
    assert (code, report["counts"]["error"]) == (0, 0)
    assert {f["check"] for f in report["findings"]} <= {"driver-floor", "bridge"}  # 12.9 wheels on a 12.4 driver
    cccl = [lib for lib in report["libraries"] if lib["package"] == "cuda-cccl"]
    assert [(lib["build"], lib["selected"], lib["preloader"]) for lib in cccl] == [
        ("cu12", True, "cuda-cccl"), ("cu13", False, "cuda-cccl"),
    ]


@pytest.mark.parametrize("driver, fix", [
    ("580.65.06", 'pip install "cuda-cccl[cu13]" (the CUDA 13 libraries its cu13 build needs)'),
    ("550.144.03", 'this driver cannot run CUDA 13; take the CUDA 12 route: pip install "cuda-bindings<13" '
                   '"cuda-cccl[cu12]"'),
])
def test_cuda_cccl_selected_by_cuda_bindings_13_without_cuda_13_libraries(cuda_venv, capsys, driver, fix):
    python = str(cuda_venv(CCCL + ["cuda-bindings==13.5.0"]) / "bin" / "python")
    code, report = doctor_json(capsys, "--python", python, "--driver", driver, "--gpu", "8.6")
    assert code == 2
    [missing] = [f for f in report["findings"] if f["check"] == "missing-library"]
    assert missing["message"] == ("libcccl.c.parallel.so: libnvrtc.so.13: cannot open shared object file: "
                                  "No such file or directory")
    assert [line.split(" needs ")[1].split(";")[0] for line in missing["evidence"]] == [
        "libnvrtc.so.13", "libnvJitLink.so.13"]
    # glibc's loader agrees (the CUDA 13 libraries are nowhere; nothing of CUDA 12 stands in for them)
    cu13 = site_packages(Path(python).parent.parent) / "cuda/compute/cu13/cccl/libcccl.c.parallel.so"
    assert ldd_not_found(str(cu13))[:2] == ["libnvrtc.so.13", "libnvJitLink.so.13"]
    assert missing["fix"] == fix
    # the selected build is CUDA 13: below driver 580 a driver-floor error, whose way out is the same route
    floors = [f["fix"] for f in report["findings"] if f["check"] == "driver-floor" and f["severity"] == "error"]
    assert floors == ([] if driver == "580.65.06" else
                      ['upgrade the driver to >= 580.65.06, or take the CUDA 12 route: pip install "cuda-bindings<13" '
                       '"cuda-cccl[cu12]"'])


def test_cuda_cccl_cu13_on_pascal_is_one_error_for_one_cause(cuda_venv, capsys):
    """cuda-cccl's CUDA 13 build with NVRTC and nvJitLink 13.0 on a GTX 1080 (6.1) under driver 580:
    NVRTC 13 has no sm_61, so its first kernel fails (NVRTC_ERROR_INVALID_OPTION). That is one error,
    the compiler's, whose fix also replaces nvJitLink 13; the library's sm_75 stub is not judged
    as a second (arch-coverage) error for the same cause."""
    cu13 = ["cuda-cccl==1.2.1", "cuda-core==1.2.2", "cuda-pathfinder==1.9.0", "cuda-bindings==13.5.0",
            "nvidia-cuda-nvrtc==13.0.88", "nvidia-nvjitlink==13.0.88", "nvidia-cuda-runtime==13.0.96"]
    python = str(cuda_venv(cu13) / "bin" / "python")
    code, report = doctor_json(capsys, "--python", python, "--driver", "580.65.06", "--gpu", "6.1")
    errors = [(f["check"], f["subject"]) for f in report["findings"] if f["severity"] == "error"]
    assert (code, errors) == (2, [("run-time-compiler", "nvidia-cuda-nvrtc 13.0.88")])
    [error] = [f for f in report["findings"] if f["severity"] == "error"]
    assert error["fix"] == 'take the CUDA 12 route: pip install "cuda-bindings<13" "cuda-cccl[cu12]"'


def test_the_built_in_example_is_judged_as_the_real_environment_it_was_made_from(skewed_venv, capsys):
    """data/example.toml is cuSPARSE 12.3 beside nvJitLink 12.1 reduced to what lies between them
    (scripts/make_example.py): as a planned environment it gets the real venv's findings."""
    code, example = doctor_json(capsys, "--example", *AMPERE_ON_550)
    real_code, real = doctor_json(capsys, "--python", str(skewed_venv / "bin" / "python"), *AMPERE_ON_550)
    site = str(site_packages(skewed_venv))
    as_example = json.loads(json.dumps(real["findings"]).replace(site, "/example/site-packages"))
    assert (code, example["findings"]) == (real_code, as_example)
    assert code == 2 and [f["check"] for f in as_example] == ["symbol-skew", "metadata-vs-binary"]
    assert example["environment"]["site_packages"] == ["/example/site-packages"]


# -- onnxruntime-gpu: a primary plugin, a preload the program must call, a CUDA major read from binaries --

ORT = ["onnxruntime-gpu==1.31.1", "nvidia-cublas==13.1.1.3", "nvidia-cuda-runtime==13.0.96", "nvidia-curand==10.4.0.35"]


@pytest.mark.parametrize("driver, errors", [
    ("575.57.08", ["nvidia-cublas 13.1.1.3", "nvidia-cuda-runtime 13.0.96", "nvidia-curand 10.4.0.35",
                   "onnxruntime-gpu 1.31.1"]),
    ("580.65.06", []),
])
def test_onnxruntime_gpu_cuda_provider_is_judged_in_full(cuda_venv, capsys, driver, errors):
    """The CUDA provider is why onnxruntime-gpu is installed: the wheels' libraries it links are found
    only once the program calls onnxruntime.preload_dlls() (a warning with that fix, not a plugin info),
    and it links libcublas.so.13, so the package is a CUDA 13 build that driver 575 cannot run; so are
    the CUDA 13 wheels beside it, whose fixes name their -cu12 builds. (libcudart.so.13 may also come
    from a system toolkit in ld.so.cache: the assertions leave that to the machine.)"""
    python = str(cuda_venv(ORT) / "bin" / "python")
    code, report = doctor_json(capsys, "--python", python, "--driver", driver, "--gpu", "8.9")
    assert sorted(f["subject"] for f in report["findings"] if f["severity"] == "error") == errors
    assert {f["check"] for f in report["findings"] if f["severity"] == "error"} <= {"driver-floor"}
    assert code == (2 if errors else 0)
    # (the libraries opened by name with dlopen are other warnings of the same check: checks/dlopen.py)
    [provider] = [f for f in report["findings"] if f["problem"]["type"] == "found-only-after-call"]
    assert provider["severity"] == "warning" and provider["check"] == "missing-library"
    assert provider["message"].startswith("libonnxruntime_providers_cuda.so finds libcublasLt.so.13, libcublas.so.13, "
                                          "libcurand.so.10")
    assert provider["message"].endswith("only after the program calls onnxruntime.preload_dlls(): without it the CUDA "
                                        "execution provider (CUDAExecutionProvider) does not load")
    assert provider["fix"].startswith("call onnxruntime.preload_dlls() before the first use")
    # glibc's loader, without the call: the wheels' libraries are not on the provider's search path
    provider_so = site_packages(Path(python).parent.parent) / "onnxruntime/capi/libonnxruntime_providers_cuda.so"
    assert {"libcublasLt.so.13", "libcublas.so.13", "libcurand.so.10"} <= set(ldd_not_found(str(provider_so)))
    if errors:
        floors = {f["subject"]: f for f in report["findings"] if f["check"] == "driver-floor"}
        ort = floors["onnxruntime-gpu 1.31.1"]
        assert ort["message"].startswith("built for CUDA 13: driver 575.57.08 < 580.65.06 (CUDA 13.x floor)")
        assert ort["evidence"][0] == ("onnxruntime-gpu 1.31.1 is a CUDA 13 build: libonnxruntime_providers_cuda.so "
                                      "links libcublasLt.so.13")
        assert floors["nvidia-cublas 13.1.1.3"]["fix"] == (
            'upgrade the driver to >= 580.65.06, or use the CUDA 12 build instead: pip install "nvidia-cublas-cu12==12.9.3.13" '
            "in place of nvidia-cublas")


# -- cuDNN on a Pascal GPU: the fix names a release, and that release runs -----------------------------

CUDNN_NEWEST = "nvidia-cudnn-cu12==9.28.0.42"
PASCAL_ON_575 = ["--driver", "575.57.08", "--gpu", "6.1"]


@functools.lru_cache(maxsize=None)  # one answer per session, as the index's pages are read once
def pip_resolves(requirement: str) -> str:
    """The release `pip install --no-deps` takes for `requirement`: the newest release pip's finder
    offers this interpreter as a wheel (`pip index versions`) that the requirement admits. Read from
    the index's pages, so a warm run downloads no wheel; the venv built from the answer fetches it."""
    wanted = Requirement(requirement)
    done = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "--only-binary=:all:", "--no-cache-dir",
                           "--disable-pip-version-check", wanted.name], capture_output=True, text=True)
    listed = re.search(r"^Available versions: (.+)$", done.stdout, re.M)
    if done.returncode != 0 or listed is None:
        pytest.skip(f"the registry is not reachable: {done.stderr.strip().splitlines()[-1:]}")
    admitted = [v for v in listed.group(1).split(", ") if wanted.specifier.contains(v)]
    assert admitted, f"pip offers no release for {requirement}: {listed.group(1)}"
    return str(max(admitted, key=Version))


def cudnn_arch_errors(capsys, venv: Path) -> list[dict]:
    code, report = doctor_json(capsys, "--python", str(venv / "bin" / "python"), *PASCAL_ON_575)
    return [f for f in report["findings"]
            if f["check"] == "arch-coverage" and f["subject"].startswith("nvidia-cudnn-cu12 ") and f["severity"] == "error"]


@pytest.mark.registry
def test_cudnn_on_pascal_the_fix_names_a_release_that_runs(cuda_venv, capsys):
    """The newest cuDNN for CUDA 12 keeps sm_61 SASS in one library only: an arch-coverage error whose
    fix is a requirement. pip resolves it; in a venv with that release the error is gone."""
    [error] = cudnn_arch_errors(capsys, cuda_venv([CUDNN_NEWEST]))
    assert error["subject"] == "nvidia-cudnn-cu12 9.28.0.42"
    found = re.fullmatch(r'pip install "(nvidia-cudnn-cu12(?:==|<)[0-9.]+)" \(.*\)', error["fix"])
    assert found, error["fix"]
    release = pip_resolves(found.group(1))
    assert release != "9.28.0.42"
    assert cudnn_arch_errors(capsys, cuda_venv([f"nvidia-cudnn-cu12=={release}"])) == []


# -- onnxruntime-gpu for CUDA 13 on a CUDA 12 driver or a Pascal GPU: the fix's set installs and runs -----

ORT_CUDA13 = ["onnxruntime-gpu==1.31.1", "nvidia-cuda-nvrtc==13.0.88", "nvidia-cuda-runtime==13.0.96",
              "nvidia-cufft==12.0.0.61", "nvidia-curand==10.4.0.35", "nvidia-cudnn-cu13==9.24.0.43",
              "nvidia-cublas==13.1.1.3", "nvidia-nvjitlink==13.0.88"]  # onnxruntime-gpu[cuda,cudnn], --no-deps


def fix_requirements(fix: str) -> tuple[list[str], list[str]]:
    """(the wheels a fix uninstalls, the requirements it installs) from `pip uninstall A B (...), then
    pip install "X==1" "Y==2" (...)`."""
    found = re.search(r"pip uninstall ([^(]+) \(CUDA \d+ wheels\), then pip install ((?:\"[^\"]+\" ?)+)", fix)
    assert found, fix
    return found.group(1).split(), re.findall(r'"([^"]+)"', found.group(2))


@pytest.mark.registry
@pytest.mark.parametrize("host, check", [(["--driver", "575.57.08", "--gpu", "8.9"], "driver-floor"),
                                         (["--driver", "580.65.06", "--gpu", "6.1"], "arch-coverage")])
def test_onnxruntime_cuda_13_the_fix_names_a_cuda_12_set_that_installs_and_runs(cuda_venv, capsys, host, check):
    """onnxruntime-gpu 1.31.1 with its [cuda,cudnn] wheels: on driver 575 a driver-floor error, on a GTX
    1080 an arch-coverage error, each fixed by the newest CUDA 12 release with its extras and the CUDA 12
    wheels in place of the CUDA 13 ones. pip resolves every requirement; the release's own Requires-Dist
    for its extras admits them; a venv of that set has no error on the same host."""
    code, report = doctor_json(capsys, "--python", str(cuda_venv(ORT_CUDA13) / "bin" / "python"), *host)
    [error] = [f for f in report["findings"] if f["severity"] == "error" and f["subject"] == "onnxruntime-gpu 1.31.1"]
    assert (code, error["check"]) == (2, check)
    removed, wanted = fix_requirements(error["fix"])
    assert sorted(removed) == sorted(r.split("==")[0] for r in ORT_CUDA13[1:])
    assert wanted[0] == "onnxruntime-gpu[cuda,cudnn]==1.26.0" and all(r.split("==")[0].endswith("-cu12") for r in wanted[1:])
    resolved = [f"{Requirement(r).name}=={pip_resolves(r)}" for r in wanted]
    fixed = cuda_venv(resolved)
    metadata = (site_packages(fixed) / "onnxruntime_gpu-1.26.0.dist-info" / "METADATA").read_text()  # the wheel's, as pip copies it
    extras = [Requirement(line.split(":", 1)[1]) for line in metadata.splitlines() if line.startswith("Requires-Dist: nvidia-")]
    versions = {r.split("==")[0]: r.split("==")[1] for r in resolved}
    assert extras and all(r.specifier.contains(versions[r.name], prereleases=True) for r in extras), (extras, versions)
    _, after = doctor_json(capsys, "--python", str(fixed / "bin" / "python"), *host)
    assert [f for f in after["findings"] if f["severity"] == "error"] == []
