"""Each host source as a pure function: its raw output in, the facts it tells (and its complaints) out.

The reading itself (opening a file, running nvidia-smi, calling NVML) lives in `readers.py`; keeping
the parsing here, over plain text and values, lets recorded real outputs test every source.
A source that cannot be understood says so in a Note naming the offending line; it never raises.

Releases and CUDA versions leave here as values. May import: host/facts, arch, versions, bounded.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Optional

from cudaresolve.arch import ComputeCapability
from cudaresolve.bounded import loads_json
from cudaresolve.errors import UsageError
from cudaresolve.host.facts import Gpu, MigDevice, Note
from cudaresolve.versions import CudaVersion, DriverRelease

# "NVRM version: NVIDIA UNIX x86_64 Kernel Module  470.103.01  Thu Jan ..." (proprietary) and
# "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  565.57.01  Release Build ..." (open).
_NVRM_RE = re.compile(r"Kernel Module(?:\s+for\s+\S+)?\s+(\d+\.\d+(?:\.\d+)?)(?:\s|$)", re.ASCII)
_L4T_RE = re.compile(r"#\s*R(\d+)\s*\(release\),\s*REVISION:\s*(\d+(?:\.\d+)*)", re.ASCII)
_MIB = 1024 * 1024
# cuInit's answer when a driver is installed but no device exists: "no GPUs", not "unknown".
CUDA_ERROR_NO_DEVICE = 100


@dataclass(frozen=True)
class Reading:
    """What one source told. `gpus` is None when the source did not enumerate devices."""

    source: str
    release: Optional[DriverRelease] = None
    cuda: Optional[CudaVersion] = None
    gpus: Optional[tuple[Gpu, ...]] = None
    notes: tuple[Note, ...] = ()


@dataclass(frozen=True)
class NvmlMigDevice:
    uuid: Optional[str]
    name: Optional[str]
    memory_total: Optional[int]  # bytes


@dataclass(frozen=True)
class NvmlDevice:
    """One device's values exactly as pynvml returned them (None where the call failed)."""

    index: int
    name: Optional[str]
    compute_capability: Optional[tuple[int, int]]
    memory_total: Optional[int]  # bytes
    uuid: Optional[str]
    mig_mode: Optional[int]  # current mode: 1 enabled, 0 disabled, None not supported
    mig_devices: tuple[NvmlMigDevice, ...] = ()


@dataclass(frozen=True)
class NvmlValues:
    """Everything read through NVML in one session; `errors` lists calls that failed."""

    driver_version: Optional[str]
    cuda_driver_version: Optional[int]  # 1000*major + 10*minor, e.g. 12040
    devices: Optional[tuple[NvmlDevice, ...]]  # None when the device count itself failed
    errors: tuple[str, ...] = ()


def release_or_none(text: str) -> Optional[DriverRelease]:
    """A driver release ("550.144.03", WSL/Windows "573.24", Jetson "540.4.0") or None."""
    try:
        return DriverRelease.parse(text)
    except UsageError:
        return None


def cuda_from_int(value: int) -> Optional[CudaVersion]:
    """Decode cuDriverGetVersion's 1000*major + 10*minor (12040 -> 12.4); None when implausible."""
    if not 1000 <= value <= 99990:
        return None
    return CudaVersion(value // 1000, (value % 1000) // 10)


# -- driver files ---------------------------------------------------------------------------------


def parse_sysfs(text: str) -> Reading:
    """/sys/module/nvidia/version: the loaded kernel module's release, alone on one line."""
    release = release_or_none(text)
    if release is None:
        return Reading("sysfs", notes=(Note("sysfs", "not a driver release", _first_line(text)),))
    return Reading("sysfs", release=release)


def parse_procfs(text: str) -> Reading:
    """/proc/driver/nvidia/version: the release sits in the NVRM line after "Kernel Module"."""
    nvrm = next((line for line in text.splitlines() if line.startswith("NVRM version:")), None)
    if nvrm is None:
        return Reading("procfs", notes=(Note("procfs", "no NVRM version line", _first_line(text)),))
    match = _NVRM_RE.search(nvrm)
    release = release_or_none(match.group(1)) if match else None
    if release is None:
        return Reading("procfs", notes=(Note("procfs", "no driver release in the NVRM line", nvrm),))
    return Reading("procfs", release=release)


def parse_tegra(nv_tegra_release: Optional[str], compatible: Optional[str]) -> Optional[Note]:
    """Jetson/Tegra has no NVML; tell it by /etc/nv_tegra_release or the device tree.

    Returns the note that says so (with the L4T release when known), or None off Tegra.
    """
    l4t = None
    if nv_tegra_release is not None:
        match = _L4T_RE.search(nv_tegra_release)
        if match:
            l4t = f"{match.group(1)}.{match.group(2)}"
    on_tegra = l4t is not None or (compatible is not None and "nvidia,tegra" in compatible)
    if not on_tegra:
        return None
    where = f"L4T {l4t}" if l4t else "device tree nvidia,tegra"
    return Note("tegra", f"Jetson/Tegra ({where}): no NVML here, libcuda reports the driver and GPU")


# -- NVML -----------------------------------------------------------------------------------------


def parse_nvml(values: NvmlValues) -> Reading:
    notes = [Note("nvml", error) for error in values.errors]
    release = None
    if values.driver_version is not None:
        release = release_or_none(values.driver_version)
        if release is None:
            notes.append(Note("nvml", "driver version is not a release", values.driver_version))
    cuda = None
    if values.cuda_driver_version is not None:
        cuda = cuda_from_int(values.cuda_driver_version)
        if cuda is None:
            notes.append(Note("nvml", "implausible CUDA driver version", str(values.cuda_driver_version)))
    gpus: Optional[tuple[Gpu, ...]] = None
    if values.devices is not None:
        found: list[Gpu] = []
        for device in values.devices:
            if device.compute_capability is None:
                notes.append(Note("nvml", f"GPU {device.index} has no compute capability; left out"))
                continue
            found.append(
                Gpu(
                    compute_capability=ComputeCapability(*device.compute_capability),
                    source="nvml",
                    index=device.index,
                    name=device.name,
                    memory_mib=_mib(device.memory_total),
                    uuid=device.uuid,
                    mig_mode=None if device.mig_mode is None else device.mig_mode == 1,
                    mig_devices=tuple(
                        MigDevice(uuid=mig.uuid, name=mig.name, memory_mib=_mib(mig.memory_total))
                        for mig in device.mig_devices
                        if mig.uuid
                    ),
                )
            )
        gpus = tuple(found)
    return Reading("nvml", release=release, cuda=cuda, gpus=gpus, notes=tuple(notes))


# -- libcuda (the isolated child's JSON, see host/libcuda.py) ------------------------------------


def parse_libcuda(stdout: str) -> Reading:
    try:
        data = loads_json(stdout)
        if not isinstance(data, dict):
            raise ValueError("not an object")
    except ValueError:
        note = Note("libcuda", "child output is not a JSON object", _first_line(stdout))
        return Reading("libcuda", notes=(note,))
    notes = []
    cuda = None
    version = data.get("driver_version")
    if isinstance(version, int):
        cuda = cuda_from_int(version)
        if cuda is None:
            notes.append(Note("libcuda", "implausible cuDriverGetVersion value", str(version)))
    errors = data.get("errors")
    for error in errors if isinstance(errors, list) else ():
        notes.append(Note("libcuda", str(error)))
    gpus: Optional[tuple[Gpu, ...]] = None
    init_error = data.get("init_error")
    if isinstance(init_error, dict):
        notes.append(Note("libcuda", f"cuInit failed: {init_error.get('name')} ({init_error.get('code')})"))
        if init_error.get("code") == CUDA_ERROR_NO_DEVICE:
            gpus = ()
    elif isinstance(data.get("devices"), list):
        found = []
        for raw in data["devices"]:
            gpu = _libcuda_gpu(raw)
            if gpu is None:
                notes.append(
                    Note("libcuda", "device entry without a usable compute capability", json.dumps(raw))
                )
            else:
                found.append(gpu)
        gpus = tuple(found)
    if "error" in data:
        notes.append(Note("libcuda", str(data["error"])))
    return Reading("libcuda", cuda=cuda, gpus=gpus, notes=tuple(notes))


def _libcuda_gpu(raw: Any) -> Optional[Gpu]:
    if not isinstance(raw, dict):
        return None
    cc = raw.get("compute_capability")
    if not (isinstance(cc, list) and len(cc) == 2 and all(isinstance(x, int) for x in cc)):
        return None
    memory = raw.get("memory_total")
    return Gpu(
        compute_capability=ComputeCapability(cc[0], cc[1]),
        source="libcuda",
        index=raw.get("index") if isinstance(raw.get("index"), int) else None,
        name=raw.get("name") if isinstance(raw.get("name"), str) else None,
        memory_mib=_mib(memory) if isinstance(memory, int) else None,
        uuid=raw.get("uuid") if isinstance(raw.get("uuid"), str) else None,
    )


# -- nvidia-smi -----------------------------------------------------------------------------------

SMI_FIELDS = ("index", "uuid", "name", "compute_cap", "memory.total", "driver_version", "mig.mode.current")
_SMI_MISSING = {"[n/a]", "n/a", "[not supported]", "[unknown error]", ""}


def parse_smi_csv(stdout: str) -> Reading:
    """`nvidia-smi --query-gpu=... --format=csv`: a header naming the columns, then one row per GPU.

    Columns are found by the header, so any field order (and older outputs without some
    fields) parse; every row is read, not just the first.
    """
    import csv  # only a machine without NVML gets this far

    try:
        rows = [row for row in csv.reader(stdout.splitlines(), skipinitialspace=True) if row]
    except csv.Error as exc:  # e.g. a NUL byte on Python < 3.11
        note = Note("nvidia-smi", f"CSV does not parse ({exc})", _first_line(stdout))
        return Reading("nvidia-smi", notes=(note,))
    if not rows:
        return Reading("nvidia-smi", notes=(Note("nvidia-smi", "empty CSV output"),))
    header = [re.sub(r"\s*\[.*\]$", "", col.strip()) for col in rows[0]]
    if "compute_cap" not in header and "driver_version" not in header:
        return Reading("nvidia-smi", notes=(Note("nvidia-smi", "no CSV header", ",".join(rows[0])),))
    notes: list[Note] = []
    releases: list[DriverRelease] = []
    gpus: list[Gpu] = []
    for number, row in enumerate(rows[1:]):
        line = ", ".join(row)
        if len(row) != len(header):
            notes.append(Note("nvidia-smi", f"row has {len(row)} fields, header has {len(header)}", line))
            continue
        values = {
            key: None if value.strip().lower() in _SMI_MISSING else value.strip()
            for key, value in zip(header, row)
        }
        driver_version = values.get("driver_version")
        if driver_version is not None:
            release = release_or_none(driver_version)
            if release is None:
                notes.append(Note("nvidia-smi", "driver_version is not a release", line))
            elif release not in releases:
                releases.append(release)
        if "compute_cap" not in header:
            continue
        gpu = _smi_gpu(values, number)
        if gpu is None:
            notes.append(Note("nvidia-smi", "GPU row without a usable compute_cap; left out", line))
        else:
            gpus.append(gpu)
    if len(releases) > 1:
        notes.append(Note("nvidia-smi", "GPUs report different driver versions", ", ".join(map(str, releases))))
    enumerated = "compute_cap" in header and (bool(gpus) or len(rows) == 1)
    return Reading(
        "nvidia-smi",
        release=releases[0] if releases else None,
        gpus=tuple(gpus) if enumerated else None,
        notes=tuple(notes),
    )


def _smi_gpu(values: dict[str, Optional[str]], number: int) -> Optional[Gpu]:
    cc_text = values.get("compute_cap")
    if cc_text is None or not re.match(r"^[0-9]{1,2}\.[0-9]$", cc_text):
        return None
    index_text = values.get("index")
    memory_text = values.get("memory.total")
    memory = re.match(r"^([0-9]{1,15})(?:\s*MiB)?$", memory_text) if memory_text else None
    mig_text = (values.get("mig.mode.current") or "").lower()
    return Gpu(
        compute_capability=ComputeCapability.parse(cc_text),
        source="nvidia-smi",
        index=int(index_text) if index_text and re.fullmatch(r"[0-9]{1,9}", index_text) else number,
        name=values.get("name"),
        memory_mib=int(memory.group(1)) if memory else None,
        uuid=values.get("uuid"),
        mig_mode={"enabled": True, "disabled": False}.get(mig_text),
    )


def parse_smi_xml(stdout: str) -> Reading:
    """`nvidia-smi -q -x`: read for the driver's CUDA version, which the CSV query cannot give."""
    import xml.etree.ElementTree as ET  # only a machine without NVML gets this far

    try:
        root = ET.fromstring(stdout)
    except ET.ParseError as exc:
        line_number = exc.position[0]
        lines = stdout.splitlines()
        line = lines[line_number - 1] if 0 < line_number <= len(lines) else None
        return Reading("nvidia-smi", notes=(Note("nvidia-smi", f"XML does not parse ({exc})", line),))
    notes = []
    release = None
    release_text = (root.findtext("driver_version") or "").strip()
    if release_text:
        release = release_or_none(release_text)
        if release is None:
            line = f"<driver_version>{release_text}</driver_version>"
            notes.append(Note("nvidia-smi", "driver_version is not a release", line))
    cuda = None
    cuda_text = (root.findtext("cuda_version") or "").strip()
    if cuda_text:
        cuda = _cuda_or_none(cuda_text)
        if cuda is None:
            line = f"<cuda_version>{cuda_text}</cuda_version>"
            notes.append(Note("nvidia-smi", "cuda_version is not a CUDA version", line))
    return Reading("nvidia-smi", release=release, cuda=cuda, notes=tuple(notes))


def _cuda_or_none(text: str) -> Optional[CudaVersion]:
    """The CUDA version a driver reports, MAJOR.MINOR ("12.4"); None for anything else."""
    try:
        cuda = CudaVersion.parse(text)
    except UsageError:
        return None
    return cuda if cuda.minor is not None and text.count(".") == 1 else None


def command_failure(source: str, returncode: int, stdout: str, stderr: str) -> Note:
    """A command that exited non-zero: its status and the first line it printed (nvidia-smi uses stdout)."""
    return Note(source, f"exited with status {returncode}", _first_line(stdout) or _first_line(stderr))


def _first_line(text: str) -> Optional[str]:
    return next((line.strip() for line in text.splitlines() if line.strip()), None)


def _mib(value: Optional[int]) -> Optional[int]:
    return None if value is None else value // _MIB
