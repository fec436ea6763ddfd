"""The thin I/O readers: files, commands, real pynvml here, and the isolated libcuda child.

The child is exercised for real against stand-in libcuda.so.1 builds (gcc): the point is the
isolation — a driver that hangs or crashes inside cuInit must cost a note, never cudaresolve.
"""

from __future__ import annotations

import json
import os
import sys
import time

import pytest

from cudaresolve.errors import UsageError
from cudaresolve.host.readers import (
    NVIDIA_SMI_DIRECTORIES,
    SourceUnavailable,
    libcuda_environment,
    local_platform,
    locate_nvidia_smi,
    read_text_file,
    run_command,
    run_libcuda,
    system_readers,
)
from cudaresolve.host.sources import parse_libcuda

# A stand-in driver library: two devices, and FAKE_CUDA chooses how cuInit behaves. cuInit also
# fails the way the real one can if the child was not given a clean environment.
FAKE_LIBCUDA = r"""
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
typedef int CUresult;
static const char *mode(void) { const char *m = getenv("FAKE_CUDA"); return m ? m : ""; }
CUresult cuDriverGetVersion(int *v) { *v = 12040; return 0; }
CUresult cuGetErrorName(CUresult e, const char **s) {
    *s = e == 100 ? "CUDA_ERROR_NO_DEVICE" : e == 101 ? "CUDA_ERROR_INVALID_DEVICE"
       : e == 801 ? "CUDA_ERROR_NOT_SUPPORTED" : "CUDA_ERROR_UNKNOWN";
    return 0;
}
CUresult cuInit(unsigned flags) {
    if (getenv("CUDA_VISIBLE_DEVICES")) return 101;
    if (!getenv("CUDA_DEVICE_ORDER") || strcmp(getenv("CUDA_DEVICE_ORDER"), "PCI_BUS_ID")) return 999;
    if (!strcmp(mode(), "nodevice")) return 100;
    if (!strcmp(mode(), "crash")) { volatile int *p = 0; *p = 1; }
    if (!strcmp(mode(), "hang")) sleep(60);
    if (!strcmp(mode(), "spew")) { static char page[65536]; memset(page, '[', sizeof page); for (;;) write(1, page, sizeof page); }
    return 0;
}
CUresult cuDeviceGetCount(int *n) { *n = 2; return 0; }
CUresult cuDeviceGet(int *d, int i) { *d = i; return 0; }
CUresult cuDeviceGetAttribute(int *v, int attribute, int d) {
    if (attribute == 75) { *v = d ? 8 : 7; return 0; }
    if (attribute == 76) { *v = d ? 6 : 5; return 0; }
    return 1;
}
CUresult cuDeviceGetName(char *name, int len, int d) {
    strncpy(name, d ? "NVIDIA GeForce RTX 3090" : "Tesla T4", len);
    return 0;
}
CUresult cuDeviceTotalMem_v2(size_t *bytes, int d) { *bytes = d ? 25438126080UL : 15642329088UL; return 0; }
CUresult cuDeviceGetUuid(unsigned char *uuid, int d) {
    if (d) return 801;
    for (int i = 0; i < 16; i++) uuid[i] = (unsigned char)(0xa0 + i);
    return 0;
}
"""


@pytest.fixture
def fake_driver(elf_builder):
    """An environment whose libcuda.so.1 is the stand-in; set FAKE_CUDA in it to pick a behaviour."""
    library = elf_builder.build("libcuda.so.1", FAKE_LIBCUDA, soname="libcuda.so.1")
    return {**os.environ, "LD_LIBRARY_PATH": str(library.parent), "CUDA_VISIBLE_DEVICES": "1"}


def test_libcuda_child_enumerates_every_device(fake_driver):
    reading = parse_libcuda(run_libcuda(fake_driver, timeout=60))
    assert str(reading.cuda) == "12.4"
    assert [(g.index, g.name, str(g.compute_capability), g.memory_mib, g.uuid) for g in reading.gpus] == [
        (0, "Tesla T4", "7.5", 14917, "GPU-a0a1a2a3-a4a5-a6a7-a8a9-aaabacadaeaf"),
        (1, "NVIDIA GeForce RTX 3090", "8.6", 24259, None),
    ]
    assert [n.message for n in reading.notes] == ["cuDeviceGetUuid(1) failed: CUDA_ERROR_NOT_SUPPORTED (801)"]


def test_libcuda_child_no_device(fake_driver):
    stdout = run_libcuda({**fake_driver, "FAKE_CUDA": "nodevice"}, timeout=60)
    assert json.loads(stdout) == {
        "driver_version": 12040,
        "init_error": {"code": 100, "name": "CUDA_ERROR_NO_DEVICE"},
        "errors": [],
    }


def test_libcuda_crash_is_contained(fake_driver):
    with pytest.raises(SourceUnavailable, match=r"^the libcuda child process died \(signal 11\)$"):
        run_libcuda({**fake_driver, "FAKE_CUDA": "crash"}, timeout=60)


def test_libcuda_hang_is_cut_off(fake_driver):
    with pytest.raises(SourceUnavailable, match=r"^the libcuda child process gave no answer within 1 s$"):
        run_libcuda({**fake_driver, "FAKE_CUDA": "hang"}, timeout=1)


def test_libcuda_that_prints_without_end_is_cut_off(fake_driver):
    """A driver library writing to the child's stdout without end: read up to 16 MiB, then the child is killed."""
    with pytest.raises(SourceUnavailable, match=r"^the libcuda child process printed more than 16 MiB: stopped$"):
        run_libcuda({**fake_driver, "FAKE_CUDA": "spew"}, timeout=60)


def test_libcuda_absent_on_this_machine():
    environ = {key: value for key, value in os.environ.items() if key != "LD_LIBRARY_PATH"}
    data = json.loads(run_libcuda(environ, timeout=60))
    assert list(data) == ["error"]
    assert data["error"].startswith("cannot load libcuda.so.1: ")


def test_libcuda_environment_is_clean_and_finds_the_package():
    env = libcuda_environment({"CUDA_VISIBLE_DEVICES": "", "PYTHONPATH": "/elsewhere", "HOME": "/root"})
    assert "CUDA_VISIBLE_DEVICES" not in env
    assert env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    root, rest = env["PYTHONPATH"].split(os.pathsep)
    assert os.path.isfile(os.path.join(root, "cudaresolve", "host", "libcuda.py"))
    assert (rest, env["HOME"]) == ("/elsewhere", "/root")


def test_run_command_reports_what_happened():
    result = run_command([sys.executable, "-c", "print('hi'); raise SystemExit(3)"], 60)
    assert (result.returncode, result.stdout) == (3, "hi\n")
    with pytest.raises(SourceUnavailable, match="^nvidia-smi-that-does-not-exist is not on PATH$"):
        run_command(["nvidia-smi-that-does-not-exist", "-L"], 60)


def test_read_text_file(tmp_path):
    (tmp_path / "version").write_text("550.144.03\n")
    assert read_text_file(str(tmp_path / "version")) == "550.144.03\n"
    with pytest.raises(SourceUnavailable, match=f"^{tmp_path}/missing does not exist$"):
        read_text_file(str(tmp_path / "missing"))


def test_real_pynvml_without_libnvidia_ml():
    # This machine has nvidia-ml-py installed but no driver: NVML cannot even start.
    with pytest.raises(SourceUnavailable, match="^nvmlInit failed: NVML Shared Library Not Found$"):
        system_readers(os.environ).nvml()


def test_local_platform():
    system, machine, glibc = local_platform()
    assert (system, machine) == (os.uname().sysname, os.uname().machine)
    assert glibc == os.confstr("CS_GNU_LIBC_VERSION").split()[1]


# -- where nvidia-smi comes from ----------------------------------------------------------------------

SMI_FIXTURES = os.path.join(os.path.dirname(__file__), "..", "fixtures", "host", "smi")


def fake_smi(directory) -> str:
    """A program called nvidia-smi that answers like the real one on WSL (driver 510.06, one GPU)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "nvidia-smi"
    path.write_text(
        "#!/bin/sh\n"
        f'case "$1" in -q) cat {SMI_FIXTURES}/510.06-wsl.xml ;; *) cat {SMI_FIXTURES}/510.06-wsl.csv ;; esac\n'
    )
    path.chmod(0o755)
    return str(path)


def test_nvidia_smi_is_taken_from_the_drivers_directories_in_order(tmp_path):
    first, second = tmp_path / "usr-bin", tmp_path / "wsl"
    fake_smi(second)
    assert locate_nvidia_smi({}, (str(first), str(second))) == str(second / "nvidia-smi")
    fake_smi(first)
    assert locate_nvidia_smi({}, (str(first), str(second))) == str(first / "nvidia-smi")
    (second / "nvidia-smi").chmod(0o644)
    with pytest.raises(SourceUnavailable, match=rf"^nvidia-smi is not in {second} \(PATH is not searched; CUDARESOLVE_NVIDIA_SMI names another\)$"):
        locate_nvidia_smi({}, (str(second),))


def test_a_named_nvidia_smi_must_be_an_absolute_path_to_a_program(tmp_path):
    program = fake_smi(tmp_path / "elsewhere")
    assert locate_nvidia_smi({"CUDARESOLVE_NVIDIA_SMI": program}, ()) == program
    with pytest.raises(UsageError, match=r"^CUDARESOLVE_NVIDIA_SMI: 'nvidia-smi' is not an absolute path \(PATH is not searched\)$"):
        locate_nvidia_smi({"CUDARESOLVE_NVIDIA_SMI": "nvidia-smi"}, ())
    with pytest.raises(UsageError, match=rf"^CUDARESOLVE_NVIDIA_SMI: {tmp_path}/missing is not an executable file$"):
        locate_nvidia_smi({"CUDARESOLVE_NVIDIA_SMI": str(tmp_path / "missing")}, ())


@pytest.mark.skipif(any(os.path.exists(os.path.join(d, "nvidia-smi")) for d in NVIDIA_SMI_DIRECTORIES),
                    reason="this machine has a real nvidia-smi")
def test_probe_runs_no_nvidia_smi_from_path_only_the_named_one(tmp_path, monkeypatch, capsys):
    """A venv's bin/ comes first on PATH; an nvidia-smi there is not the driver's and is not run."""
    from cudaresolve.cli import main

    for name in ("CUDARESOLVE_DRIVER", "CUDARESOLVE_CUDA", "CUDARESOLVE_GPUS", "CONDA_OVERRIDE_CUDA",
                 "CONDA_OVERRIDE_CUDA_ARCH", "UV_CUDA_DRIVER_VERSION", "CUDARESOLVE_NVIDIA_SMI", "LD_LIBRARY_PATH"):
        monkeypatch.delenv(name, raising=False)
    program = fake_smi(tmp_path / "venv" / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'venv' / 'bin'}{os.pathsep}{os.environ['PATH']}")
    assert main(["probe", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["driver"]["release"], data["gpus"]) == (None, [])
    assert data["notes"][-1]["message"].startswith("nvidia-smi is not in /usr/bin, ")
    monkeypatch.setenv("CUDARESOLVE_NVIDIA_SMI", program)
    assert main(["probe", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["driver"]["release"], data["driver"]["release_source"]) == ("510.06", "nvidia-smi")
    assert [g["source"] for g in data["gpus"]] == ["nvidia-smi"]


def gone(pid: int) -> bool:
    """The process has ended (a zombie no parent reaped yet counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def wait_gone(pid: int) -> bool:
    """Whether `pid` ends within 10 s of a SIGKILL sent to it (the kernel needs a moment to tear it down)."""
    for _ in range(200):
        if gone(pid):
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("program", ["ends", "hangs"])
def test_a_grandchild_that_leaves_the_process_group_is_killed_too(tmp_path, monkeypatch, program):
    """A fake nvidia-smi starts a grandchild that calls setsid (out of the process group the probe
    kills) and keeps the output pipe open: the probe still ends, with nvidia-smi's output when it
    ended or "no answer" when it hung, and the grandchild is killed."""
    if not os.path.isdir("/proc/self/fd"):
        pytest.skip("no /proc to find what holds a pipe")
    pidfile = tmp_path / "grandchild.pid"
    escape = f"import os, time; os.setsid(); open({str(pidfile)!r}, 'w').write(str(os.getpid())); time.sleep(1000)"
    script = tmp_path / "nvidia-smi"
    script.write_text(f"#!/bin/sh\n{sys.executable} -c \"{escape}\" &\necho partial\n"
                      + ("exec sleep 1000\n" if program == "hangs" else "exit 0\n"))
    script.chmod(0o755)
    monkeypatch.setenv("CUDARESOLVE_NVIDIA_SMI", str(script))
    if program == "ends":
        result = run_command([locate_nvidia_smi(os.environ), "-q"], 30, name="nvidia-smi")
        assert (result.returncode, result.stdout) == (0, "partial\n")
    else:
        with pytest.raises(SourceUnavailable, match="nvidia-smi gave no answer within 3 s"):
            run_command([locate_nvidia_smi(os.environ), "-q"], 3, name="nvidia-smi")
    for _ in range(200):
        if pidfile.exists() and pidfile.read_text():
            break
        time.sleep(0.05)
    assert wait_gone(int(pidfile.read_text()))
