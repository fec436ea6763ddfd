"""The I/O behind each host source: open a file, run a command, call NVML, ask libcuda in a child.

Everything here is thin on purpose. `Readers` bundles these callables so the probe can be given
recorded outputs instead (tests, or another machine's captures); parsing lives in `sources.py`.
A reader that cannot get its raw input raises SourceUnavailable with the reason.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Sequence

from cudaresolve.bounded import TooMuchOutput, run_bounded
from cudaresolve.errors import UsageError
from cudaresolve.host.sources import NvmlDevice, NvmlMigDevice, NvmlValues

# nvidia-smi and cuInit can take seconds on a big machine with persistence mode off; a hung driver
# must not hang us.
COMMAND_TIMEOUT = 30.0
LIBCUDA_TIMEOUT = 30.0
# nvidia-smi -q -x on an 8-GPU machine prints ~200 kB; a program printing more is not answering.
OUTPUT_LIMIT = 16 * 1024 * 1024
# nvidia-smi is taken from where the driver puts it, never from PATH: inside a venv PATH starts with
# the venv's bin/, where any installed package may have put a program of that name. The places:
# the driver's packages and its .run installer (/usr/bin, /usr/local/bin, /bin, /usr/sbin), WSL2
# (/usr/lib/wsl/lib), NVIDIA's container toolkit (which mounts the host's nvidia-smi at the
# container's /usr/bin), Kubernetes device plugins and nvidia-docker 1 (/usr/local/nvidia/bin), and
# the GPU operator's driver container (/run/nvidia/driver/usr/bin). The variable names another.
NVIDIA_SMI_VARIABLE = "CUDARESOLVE_NVIDIA_SMI"
NVIDIA_SMI_DIRECTORIES = (
    "/usr/bin", "/usr/local/bin", "/bin", "/usr/sbin", "/usr/lib/wsl/lib", "/usr/local/nvidia/bin",
    "/run/nvidia/driver/usr/bin",
)
_MACHINES = {"amd64": "x86_64", "x64": "x86_64", "arm64": "aarch64"}


class SourceUnavailable(Exception):
    """A source could not be read at all (absent, not installed, timed out); the message says why."""


@dataclass(frozen=True)
class CommandResult:
    returncode: int
    stdout: str
    stderr: str


@dataclass(frozen=True)
class Readers:
    """How to reach each source. Every callable returns raw input or raises SourceUnavailable."""

    nvml: Callable[[], NvmlValues]
    read_file: Callable[[str], str]
    run: Callable[[Sequence[str]], CommandResult]  # runs nvidia-smi: argv[0] is its name, not its path
    libcuda: Callable[[], str]  # the isolated child's stdout (host/libcuda.py)
    platform: Callable[[], tuple[str, str, Optional[str]]]  # system, machine, glibc


def system_readers(environ: Mapping[str, str]) -> Readers:
    """The real machine."""
    return Readers(
        nvml=_read_pynvml,
        read_file=read_text_file,
        run=lambda argv: run_command([locate_nvidia_smi(environ), *argv[1:]], COMMAND_TIMEOUT, name="nvidia-smi"),
        libcuda=lambda: run_libcuda(environ, LIBCUDA_TIMEOUT),
        platform=local_platform,
    )


def read_text_file(path: str) -> str:
    try:
        return Path(path).read_bytes().decode("utf-8", errors="replace")
    except FileNotFoundError:
        raise SourceUnavailable(f"{path} does not exist") from None
    except OSError as exc:
        raise SourceUnavailable(f"{path}: {exc.strerror or exc}") from None


def locate_nvidia_smi(environ: Mapping[str, str], directories: Sequence[str] = NVIDIA_SMI_DIRECTORIES) -> str:
    """The nvidia-smi to run: the one CUDARESOLVE_NVIDIA_SMI names (an absolute path to a program, or
    a UsageError), else the first in `directories`; SourceUnavailable when there is none."""
    named = environ.get(NVIDIA_SMI_VARIABLE)
    if named:
        if not os.path.isabs(named):
            raise UsageError(f"{NVIDIA_SMI_VARIABLE}: {named!r} is not an absolute path (PATH is not searched)")
        if not (os.path.isfile(named) and os.access(named, os.X_OK)):
            raise UsageError(f"{NVIDIA_SMI_VARIABLE}: {named} is not an executable file")
        return named
    for directory in directories:
        path = os.path.join(directory, "nvidia-smi")
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise SourceUnavailable(f"nvidia-smi is not in {', '.join(directories)} (PATH is not searched; {NVIDIA_SMI_VARIABLE} names another)")


def run_command(
    argv: Sequence[str], timeout: float, env: Optional[Mapping[str, str]] = None, name: Optional[str] = None
) -> CommandResult:
    """Run `argv` (nothing on its stdin, its output read up to OUTPUT_LIMIT); `name` is what messages
    call it (default argv[0])."""
    name = name or argv[0]
    try:
        status, out, err = run_bounded(argv, b"", timeout, OUTPUT_LIMIT, env=env)
    except FileNotFoundError:
        raise SourceUnavailable(f"{name} does not exist" if os.sep in argv[0] else f"{name} is not on PATH") from None
    except subprocess.TimeoutExpired:
        raise SourceUnavailable(f"{name} gave no answer within {timeout:g} s") from None
    except TooMuchOutput as exc:
        raise SourceUnavailable(f"{name} {exc}: stopped") from None
    except OSError as exc:
        raise SourceUnavailable(f"{name} could not run: {exc.strerror or exc}") from None
    return CommandResult(status, _text(out), _text(err))


def _text(data: bytes) -> str:
    """A program's output as text, as subprocess's text mode gives it (undecodable bytes replaced, universal newlines)."""
    return data.decode("utf-8", "replace").replace("\r\n", "\n").replace("\r", "\n")


def libcuda_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The child's environment: every device enumerated, in NVML's (PCI bus) order.

    CUDA_VISIBLE_DEVICES is dropped because an empty or invalid value makes cuInit fail, and
    visibility is applied afterwards from the full list; PCI_BUS_ID order makes CUDA's indices
    match NVML's and nvidia-smi's. PYTHONPATH gains this package's root so `-m` finds it.
    """
    env = {key: value for key, value in environ.items() if key != "CUDA_VISIBLE_DEVICES"}
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
    package_root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, environ.get("PYTHONPATH")) if p)
    return env


def run_libcuda(environ: Mapping[str, str], timeout: float) -> str:
    result = run_command(
        # -S: no site-packages (the child needs the standard library and this package, which
        # PYTHONPATH names), which halves its start: ~10 of the probe's ~20 ms without a driver.
        [sys.executable, "-S", "-m", "cudaresolve.host.libcuda"],
        timeout,
        env=libcuda_environment(environ),
        name="the libcuda child process",
    )
    if result.returncode != 0:
        how = f"signal {-result.returncode}" if result.returncode < 0 else f"status {result.returncode}"
        last = next((line.strip() for line in reversed(result.stderr.splitlines()) if line.strip()), None)
        raise SourceUnavailable(f"the libcuda child process died ({how})" + (f": {last}" if last else ""))
    return result.stdout


def local_platform() -> tuple[str, str, Optional[str]]:
    machine = platform.machine()
    return platform.system(), _MACHINES.get(machine.lower(), machine), _glibc()


def _glibc() -> Optional[str]:
    try:
        value = os.confstr("CS_GNU_LIBC_VERSION")  # "glibc 2.36"
    except (AttributeError, ValueError, OSError):
        return None
    if value and value.startswith("glibc "):
        return value.split()[1]
    return None


def _read_pynvml() -> NvmlValues:
    try:
        import pynvml
    except ImportError:
        raise SourceUnavailable("nvidia-ml-py (pynvml) is not installed") from None
    return read_nvml(pynvml)


def read_nvml(nvml: Any) -> NvmlValues:
    """Read the driver and every device through an NVML binding (the pynvml module, or a stand-in)."""
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        raise SourceUnavailable(f"nvmlInit failed: {exc}") from None
    errors: list[str] = []

    def call(label: str, fn: Callable[..., Any], *args: Any, expected: bool = False) -> Any:
        """One NVML call; a failure is recorded unless it is `expected` (MIG on a non-MIG GPU)."""
        try:
            return fn(*args)
        except nvml.NVMLError as exc:
            if not expected:
                errors.append(f"{label} failed: {exc}")
            return None

    try:
        driver = call("nvmlSystemGetDriverVersion", nvml.nvmlSystemGetDriverVersion)
        cuda = call("nvmlSystemGetCudaDriverVersion_v2", nvml.nvmlSystemGetCudaDriverVersion_v2)
        count = call("nvmlDeviceGetCount", nvml.nvmlDeviceGetCount)
        devices: Optional[tuple[NvmlDevice, ...]] = None
        if count is not None:
            found: list[NvmlDevice] = []
            for index in range(count):
                handle = call(f"nvmlDeviceGetHandleByIndex({index})", nvml.nvmlDeviceGetHandleByIndex, index)
                if handle is not None:
                    found.append(_nvml_device(nvml, call, index, handle))
            devices = tuple(found)
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass
    return NvmlValues(driver_version=driver, cuda_driver_version=cuda, devices=devices, errors=tuple(errors))


def _nvml_device(nvml: Any, call: Callable[..., Any], index: int, handle: Any) -> NvmlDevice:
    cc = call(f"nvmlDeviceGetCudaComputeCapability({index})", nvml.nvmlDeviceGetCudaComputeCapability, handle)
    memory = call(f"nvmlDeviceGetMemoryInfo({index})", nvml.nvmlDeviceGetMemoryInfo, handle)
    mig_mode = call(f"nvmlDeviceGetMigMode({index})", nvml.nvmlDeviceGetMigMode, handle, expected=True)
    current = mig_mode[0] if mig_mode is not None else None
    migs = []
    if current == 1:
        slots = call(f"nvmlDeviceGetMaxMigDeviceCount({index})", nvml.nvmlDeviceGetMaxMigDeviceCount, handle)
        for slot in range(slots or 0):
            # Unused slots answer NOT_FOUND: expected, not an error.
            mig = call("", nvml.nvmlDeviceGetMigDeviceHandleByIndex, handle, slot, expected=True)
            if mig is None:
                continue
            where = f"{index}/MIG {slot}"
            mig_memory = call(f"nvmlDeviceGetMemoryInfo({where})", nvml.nvmlDeviceGetMemoryInfo, mig)
            migs.append(
                NvmlMigDevice(
                    uuid=call(f"nvmlDeviceGetUUID({where})", nvml.nvmlDeviceGetUUID, mig),
                    name=call(f"nvmlDeviceGetName({where})", nvml.nvmlDeviceGetName, mig),
                    memory_total=None if mig_memory is None else mig_memory.total,
                )
            )
    return NvmlDevice(
        index=index,
        name=call(f"nvmlDeviceGetName({index})", nvml.nvmlDeviceGetName, handle),
        compute_capability=None if cc is None else (cc[0], cc[1]),
        memory_total=None if memory is None else memory.total,
        uuid=call(f"nvmlDeviceGetUUID({index})", nvml.nvmlDeviceGetUUID, handle),
        mig_mode=current,
        mig_devices=tuple(migs),
    )
