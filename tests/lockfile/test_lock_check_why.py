"""`lock --check`, the notes `lock` gives, and `why`, typed as a user types them: `lock --check`
judges with the lock's own rules (a CUDA major by the rule that chooses it, the doctor's checks)
and names what it could not check; `lock` says what it assumed of a host it half knows and
whether it kept an installed set; `why` walks from what was asked for to the name; an unreachable
index or an unknown name is one plain line. Exact stdout, stderr and exit codes."""

from __future__ import annotations

import json
import sys

import pytest

from cudaresolve.cli import main
from cudaresolve.knowledge import torch

NO_DRIVER = {"CUDARESOLVE_DRIVER": "", "CUDARESOLVE_GPUS": ""}  # this machine's probe states none, whatever it has


@pytest.fixture
def user(cuda_index, empty_python, hermetic, capsys, monkeypatch):
    """`user(*argv)`: (exit code, stdout, stderr) of `cudaresolve *argv` against the fake indexes,
    `lock` for the empty target; the probe of this machine states no driver and no GPU."""
    for name, value in NO_DRIVER.items():
        monkeypatch.setenv(name, value)

    def run(*argv: str) -> tuple[int, str, str]:
        extra = []
        if argv[0] == "lock" and "--check" not in argv:
            extra = ["--python", empty_python, "--index-url", cuda_index.index_url, "--torch-index-base", cuda_index.torch_index_base]
        capsys.readouterr()
        code = main([*argv, *extra])
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


def test_check_refuses_a_cuda_13_lock_for_pascal_and_a_cuda_12_lock_for_kepler(user):
    assert user("lock", "-q", "cupy", "--driver", "580.65.06", "--gpu", "8.6", "-o", "pylock.cu13.toml")[0] == 0
    assert user("lock", "-q", "cupy", "--driver", "550.144.03", "--gpu", "8.6", "-o", "pylock.cu12.toml")[0] == 0
    assert user("lock", "--check", "pylock.cu13.toml", "--gpu", "6.1") == (2, (
        "pylock.cu13.toml does not fit this host:\n"
        "  CUDA 13: CUDA 13.2 builds no code for GPU 0 (6.1)\n"
        "  nvidia-cuda-nvrtc 13.0.88: run-time-compiler: cupy-cuda13x 14.2.0 compiles its kernels at run time with "
        "NVRTC 13.0.88, which has no target for compute capability 6.1 (GPU 0): it targets 7.5 to 12.1\n"
        "  not checked: the driver floors (no driver known: give --driver or --cuda)\n"
    ), "")
    code, out, _ = user("lock", "--check", "pylock.cu12.toml", "--gpu", "3.5")
    assert code == 2 and out.splitlines()[:2] == [
        "pylock.cu12.toml does not fit this host:", "  CUDA 12: CUDA 12.9 builds no code for GPU 0 (3.5)"]
    # the same locks on the hosts they were made for fit
    assert user("lock", "--check", "pylock.cu13.toml", "--driver", "580.65.06", "--gpu", "8.6")[0] == 0
    assert user("lock", "--check", "pylock.cu12.toml", "--driver", "550.144.03", "--gpu", "3.5")[0] == 2


def test_check_with_no_host_known_names_the_checks_skipped_and_can_require_them(user):
    assert user("lock", "-q", "cupy", "--driver", "550.144.03", "--gpu", "8.6")[0] == 0
    skipped = (
        "pylock.toml fits this host as far as it states: every entry has a wheel for its tags, and every check it "
        "allows passed; not checked:\n"
        "  the driver floors (no driver known: give --driver or --cuda)\n"
        "  the device code for its GPUs (no GPU known: give --gpu)\n"
    )
    assert user("lock", "--check", "pylock.toml") == (0, skipped, "")
    assert user("lock", "--check", "pylock.toml", "--require-host") == (2, skipped, "")
    assert user("lock", "--check", "pylock.toml", "--require-host", "--driver", "550.144.03", "--gpu", "8.6") == (0, (
        "pylock.toml fits this host: every entry has a wheel for its tags, and every locked CUDA build runs on its "
        "driver and GPUs\n"), "")
    code, out, err = user("lock", "--check", "pylock.toml", "--json", "--gpu", "3.5")
    document = json.loads(out)  # one document, nothing else on stdout
    assert (code, err, document["fits"], document["hosts"]) == (2, "", False, ["this host"])
    assert document["majors"] == [{"candidate": "CUDA 12", "reason": "CUDA 12.9 builds no code for GPU 0 (3.5)", "major": 12,
                                   "rule": "toolkit-targets", "evidence": {"toolkit": "12.9", "gpu": 0, "capability": "3.5"}}]
    assert document["skipped"] == [{"host": "this host", "checks": ["driver"]}]


def test_check_judges_advisories_with_driver_conditions(user):
    """numba < 0.63 on driver 580 (data/advisories.toml numba-driver-580): the doctor's advisory check,
    which the lock refuses a plan with, refuses the lock on the newer driver."""
    assert user("lock", "-q", "numba>=0.59,<0.61", "--driver", "550.144.03", "--gpu", "8.6")[0] == 0
    assert user("lock", "--check", "pylock.toml", "--driver", "580.65.06", "--gpu", "8.6") == (2, (
        "pylock.toml does not fit this host:\n"
        "  numba 0.60.0: advisory: known problem numba-driver-580: segfault / access violation / IndexError on device "
        "enumeration with numba's built-in numba.cuda (e.g. 0.61.2, 0.62.x) on driver 580 and later\n"), "")
    # accepted as `lock --allow-advisory` accepts it
    assert user("lock", "--check", "pylock.toml", "--driver", "580.65.06", "--gpu", "8.6", "--allow-advisory", "numba-driver-580")[0] == 0


def test_lock_says_what_it_assumed_of_a_host_it_half_knows(user):
    def notes(*host: str) -> list[str]:
        code, _, err = user("lock", "cupy", *host)
        assert code == 0
        return [line for line in err.splitlines() if line.startswith("no ")]

    assert notes("--gpu", "8.6") == [
        "no driver known (no --driver/--cuda): assumed one that runs CUDA 13 (driver >= 580.65.06); give --driver or --cuda to lock for yours"]
    assert notes("--driver", "550.144.03") == [
        "no GPU known (no --gpu): the device code of the locked builds was not checked for any GPU; give --gpu to lock for yours"]
    assert notes() == [
        "no driver and no GPU known (no --driver/--gpu/--host): locking the CUDA builds the regular index serves by default"]
    assert notes("--driver", "550.144.03", "--gpu", "8.6") == []


def test_a_cuda_version_the_driver_cannot_report_is_bad_input(user):
    assert user("lock", "cupy", "--driver", "550.144.03", "--cuda", "12.8") == (3, "", (
        "cudaresolve: error: --cuda 12.8: driver 550.144.03 (--driver) runs CUDA up to 12.4, not 12.8; "
        "give the CUDA version that driver reports, or only one of the two\n"))
    assert user("lock", "-q", "numba>=0.59,<0.61", "--driver", "550.144.03", "--cuda", "12.4", "-o", "-")[0] == 0


def test_lock_without_python_locks_fresh_and_with_it_keeps_the_installed_set(server, hermetic, capsys):
    """Run by the interpreter cudaresolve is installed in (this test's), `lock packaging` does not keep
    the packaging of cudaresolve's own venv; `--python` that interpreter keeps it."""
    from importlib.metadata import version

    from index_server import make_wheel

    server.add(*make_wheel("packaging", "99.0"))
    argv = ["lock", "packaging", "--index-url", server.url + "/simple", "--driver", "550.144.03", "-o", "-"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert 'version = "99.0"' in captured.out and "packaging==99.0  the newest release that fits" in captured.err
    assert captured.err.splitlines()[0] == ("locking fresh for this interpreter's tags and markers, keeping nothing installed "
                                            "(give --python PY to keep what PY has installed)")
    assert main([*argv, "--python", sys.executable]) == 0
    captured = capsys.readouterr()
    assert f'version = "{version("packaging")}"' in captured.out and "installed, kept" in captured.err
    assert captured.err.splitlines()[0] == f"keeping what {sys.executable} has installed where it fits (--upgrade to choose anew)"


def test_why_walks_from_what_was_asked_for(user):
    assert user("lock", "-q", "cupy", "--driver", "550.144.03", "--gpu", "8.6")[0] == 0
    code, out, err = user("why", "cupy")
    assert (code, err) == (0, "")
    assert out.splitlines()[1:] == ["  asked for as cupy (command line)"]
    assert out.startswith("cupy-cuda12x==14.2.0: asked for as cupy: ")
    code, out, _ = user("why", "nvidia-cublas-cu12")
    assert code == 0 and out.splitlines()[:4] == [
        "nvidia-cublas-cu12==12.4.5.8: nvidia-cublas-cu12 12.4.5.8 is the CUDA 12.4 cublas (by the releases cuda-toolkit pins)",
        "  required by cuda-toolkit 12.4.1 [cublas]: nvidia-cublas-cu12==12.4.5.8.*",
        "    required by cupy-cuda12x 14.2.0 [ctk]: cuda-toolkit[cublas,cudart,cufft,curand,cusolver,cusparse,nvrtc]==12.*",
        "      asked for as cupy (command line)",
    ]
    code, out, _ = user("why", "numpy", "--json")
    document = json.loads(out)
    assert code == 0 and document["asked"] == "numpy" and [p["name"] for p in document["packages"]] == ["numpy"]
    path = document["packages"][0]["paths"][0]
    assert path["step"] == "required by cupy-cuda12x 14.2.0: numpy<2.6,>=2.0"
    assert path["origin"]["requirement"] == "numpy<2.6,>=2.0" and path["parent"] == {"name": "cupy-cuda12x", "version": "14.2.0"}
    assert path["up"][0]["step"] == "asked for as cupy (command line)" and path["up"][0]["up"] == []
    assert user("why", "cupyy") == (3, "", "cudaresolve: error: cupyy is not in pylock.toml, nor asked for as cupyy\n")


def test_an_unreachable_pytorch_index_is_one_line_naming_its_setting(cuda_index, empty_python, hermetic, capsys, monkeypatch):
    monkeypatch.setenv("PIP_RETRIES", "0")
    code = main(["lock", "-q", "--python", empty_python, "--index-url", cuda_index.index_url,
                 "--torch-index-base", "http://127.0.0.1:9", "torch", "--driver", "550.144.03", "--gpu", "8.6"])
    variants = ",".join(torch.variant_names())
    assert (code, capsys.readouterr().err) == (3, (
        f"cudaresolve: error: cannot fetch http://127.0.0.1:9/whl/{{{variants}}}/torch/ (torch): cannot connect "
        "(Connection refused) (the PyTorch indexes: --torch-index-base moves them)\n"))


def test_a_name_no_index_has_says_so(user):
    assert user("lock", "-q", "cupyy", "--driver", "550.144.03") == (
        2, "", "cudaresolve: error: no project named cupyy on any index; the nearest CUDA name known: cupy\n")
    assert user("lock", "-q", "zzz-nothing", "--driver", "550.144.03") == (
        2, "", "cudaresolve: error: no project named zzz-nothing on any index\n")


def test_cupy_with_no_build_for_the_gpu_is_not_called_unknown(user):
    """No CUDA major builds for compute 3.0, so `cupy` is never rewritten to a wheel's name; it is
    a project all the same (before: "no project named cupy on any index")."""
    code, out, err = user("lock", "-q", "cupy", "--driver", "550.144.03", "--gpu", "3.0")
    assert (code, out) == (2, "") and err.startswith("cudaresolve: error: nothing fits cupy") and "no project" not in err
