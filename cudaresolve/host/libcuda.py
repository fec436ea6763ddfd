"""Ask libcuda for the driver's CUDA version and every device; run alone, in a child process.

A broken or mismatched driver can hang or crash inside cuInit. The parent runs this module with
`python -m cudaresolve.host.libcuda` under a timeout (readers.run_libcuda), so a crash costs a note,
not cudaresolve. On Jetson/Tegra, which has no NVML, this is the source that answers.
Prints one JSON object: driver_version, devices or init_error, and errors of individual calls.
Standard library only, and nothing from cudaresolve, so the child starts fast.
"""

from __future__ import annotations

import ctypes
import json
import sys
from typing import Any, Optional

_LIBRARIES = {"win32": ("nvcuda.dll",)}
_DEFAULT_LIBRARIES = ("libcuda.so.1", "libcuda.so")
_ATTRIBUTE_CC_MAJOR = 75  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
_ATTRIBUTE_CC_MINOR = 76  # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR


def _load() -> tuple[Optional[ctypes.CDLL], list[str]]:
    names = _LIBRARIES.get(sys.platform, _DEFAULT_LIBRARIES)
    failures = []
    for name in names:
        try:
            return ctypes.CDLL(name), []
        except OSError as exc:
            failures.append(str(exc))  # names the library already
    return None, failures


def _error_name(lib: ctypes.CDLL, code: int) -> str:
    name = ctypes.c_char_p()
    if lib.cuGetErrorName(code, ctypes.byref(name)) == 0 and name.value:
        return name.value.decode(errors="replace")
    return "unknown error"


def _uuid(raw: bytes) -> str:
    h = raw.hex()
    return f"GPU-{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def query() -> dict[str, Any]:
    lib, failures = _load()
    if lib is None:
        return {"error": f"cannot load {failures[0]}"}
    result: dict[str, Any] = {}
    errors: list[str] = []

    def call(label: str, fn: Any, *args: Any) -> bool:
        code: int = fn(*args)
        if code != 0:
            errors.append(f"{label} failed: {_error_name(lib, code)} ({code})")
        return code == 0

    version = ctypes.c_int(0)
    # cuDriverGetVersion needs no cuInit: it answers even when no device can be initialised.
    if call("cuDriverGetVersion", lib.cuDriverGetVersion, ctypes.byref(version)):
        result["driver_version"] = version.value
    code = lib.cuInit(0)
    if code != 0:
        result["init_error"] = {"code": code, "name": _error_name(lib, code)}
        result["errors"] = errors
        return result
    count = ctypes.c_int(0)
    if not call("cuDeviceGetCount", lib.cuDeviceGetCount, ctypes.byref(count)):
        result["errors"] = errors
        return result
    devices = []
    for index in range(count.value):
        device = ctypes.c_int(0)
        if not call(f"cuDeviceGet({index})", lib.cuDeviceGet, ctypes.byref(device), index):
            continue
        entry: dict[str, Any] = {"index": index}
        major, minor = ctypes.c_int(0), ctypes.c_int(0)
        if call(f"cuDeviceGetAttribute(75, {index})", lib.cuDeviceGetAttribute, ctypes.byref(major),
                _ATTRIBUTE_CC_MAJOR, device) and call(
                f"cuDeviceGetAttribute(76, {index})", lib.cuDeviceGetAttribute, ctypes.byref(minor),
                _ATTRIBUTE_CC_MINOR, device):
            entry["compute_capability"] = [major.value, minor.value]
        name = ctypes.create_string_buffer(256)
        if call(f"cuDeviceGetName({index})", lib.cuDeviceGetName, name, 256, device):
            entry["name"] = name.value.decode(errors="replace")
        total = ctypes.c_size_t(0)
        if call(f"cuDeviceTotalMem({index})", lib.cuDeviceTotalMem_v2, ctypes.byref(total), device):
            entry["memory_total"] = total.value
        uuid = (ctypes.c_ubyte * 16)()
        if call(f"cuDeviceGetUuid({index})", lib.cuDeviceGetUuid, uuid, device):
            entry["uuid"] = _uuid(bytes(uuid))
        devices.append(entry)
    result["devices"] = devices
    result["errors"] = errors
    return result


if __name__ == "__main__":
    sys.stdout.write(json.dumps(query()) + "\n")
