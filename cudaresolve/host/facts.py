"""Host facts: the frozen, serialisable record of a machine that every later stage judges against.

The JSON form (`to_json` / `from_json`) is the `--host FILE` format and is documented in
docs/host-json.md; `schema` is bumped on any incompatible change.

A driver release and CUDA version are values (`DriverRelease`, `CudaVersion`), read from the JSON
by their own parsers. May import: the base values, records and bounded; knowledge/gpus only to check
a stated GPU.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, Optional, Union

from cudaresolve import records
from cudaresolve.arch import ComputeCapability
from cudaresolve.bounded import loads_json
from cudaresolve.errors import UsageError
from cudaresolve.versions import CudaVersion, DriverRelease

SCHEMA = 1


@dataclass(frozen=True)
class Driver:
    """The kernel driver release and the highest CUDA version it supports, each with its source.

    A source is one of: "nvml", "sysfs", "procfs", "libcuda", "nvidia-smi", "override:<where>"
    (e.g. "override:--driver", "override:CONDA_OVERRIDE_CUDA"), "derived:<table>" or "host-file".
    """

    release: Optional[DriverRelease] = None  # 550.144.03
    release_source: Optional[str] = None
    cuda: Optional[CudaVersion] = None  # 12.4 (cuDriverGetVersion, major.minor)
    cuda_source: Optional[str] = None

    @property
    def branch(self) -> Optional[int]:
        """The driver branch (first field of the release), e.g. 550."""
        return None if self.release is None else self.release.branch


@dataclass(frozen=True)
class MigDevice:
    """A MIG instance of a GPU: CUDA enumerates these, not the parent, when MIG mode is on."""

    uuid: str
    name: Optional[str] = None
    memory_mib: Optional[int] = None


def check_known(cc: ComputeCapability) -> None:
    """Refuse a stated capability of a major data/gpus.toml does not know.

    A typo (99.9, 86.0) would otherwise judge every package unable to run on the GPU. A new minor
    of a known major (8.8) may be a GPU newer than the table, so it passes. Probed GPUs are never
    checked (`Gpu.stated`): the driver's answer is the truth, even of a major newer than the table.
    """
    from cudaresolve.knowledge import gpus as known_gpus  # a table to parse: only stated GPUs need it

    majors = known_gpus.known_majors()
    if cc.major not in majors:
        raise UsageError(f"unknown compute capability {cc} (known majors: {', '.join(map(str, majors))})")


@dataclass(frozen=True)
class Gpu:
    """One physical GPU as the driver enumerates it."""

    compute_capability: ComputeCapability
    source: str = "host-file"  # what a host file that does not name the source gets
    index: Optional[int] = None
    name: Optional[str] = None
    memory_mib: Optional[int] = None
    uuid: Optional[str] = None
    mig_mode: Optional[bool] = None
    mig_devices: tuple[MigDevice, ...] = ()
    visible: bool = True  # False when CUDA_VISIBLE_DEVICES hides it from CUDA programs

    @property
    def stated(self) -> bool:
        """Stated by a user (an override, or a host file naming no source) rather than probed."""
        return self.source == "host-file" or self.source.startswith("override:")


@dataclass(frozen=True)
class Note:
    """What a source said when it did not simply answer: absent, failed, or malformed (with the line)."""

    source: str
    message: str
    line: Optional[str] = None


@dataclass(frozen=True)
class Overrides:
    """Facts stated instead of probed, made once per command by commands/host_options.py from
    --driver, --cuda, --gpu and the host variables: `driver` is set when any driver fact is stated;
    `gpus` when the GPUs are."""

    driver: Optional[Driver] = None
    gpus: Optional[tuple[Gpu, ...]] = None


NOTHING_STATED = Overrides()


@dataclass(frozen=True)
class HostFacts:
    system: str  # platform.system(): "Linux", "Windows", "Darwin"
    machine: str  # normalised: "x86_64", "aarch64"
    driver: Driver = field(default_factory=Driver)
    gpus: tuple[Gpu, ...] = ()
    glibc: Optional[str] = None  # e.g. "2.36"; None on non-glibc systems
    tegra: bool = False  # Jetson/Tegra: no NVML, facts come from libcuda
    cuda_visible_devices: Optional[str] = None  # the variable as seen, None when unset
    notes: tuple[Note, ...] = ()

    @property
    def visible_gpus(self) -> tuple[Gpu, ...]:
        return tuple(gpu for gpu in self.gpus if gpu.visible)

    @property
    def min_compute_capability(self) -> Optional[ComputeCapability]:
        """The lowest visible capability (CEP 46 `__cuda_arch`): what every package must run on."""
        ccs = [gpu.compute_capability for gpu in self.visible_gpus]
        return min(ccs) if ccs else None

    def with_notes(self, *notes: Note) -> "HostFacts":
        return replace(self, notes=self.notes + tuple(notes))

    # -- JSON ------------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "system": self.system,
            "machine": self.machine,
            "glibc": self.glibc,
            "tegra": self.tegra,
            "driver": {
                "release": _text(self.driver.release),
                "release_source": self.driver.release_source,
                "cuda": _text(self.driver.cuda),
                "cuda_source": self.driver.cuda_source,
            },
            "cuda_visible_devices": self.cuda_visible_devices,
            "gpus": [
                {
                    "index": gpu.index,
                    "name": gpu.name,
                    "compute_capability": str(gpu.compute_capability),
                    "memory_mib": gpu.memory_mib,
                    "uuid": gpu.uuid,
                    "mig_mode": gpu.mig_mode,
                    "mig_devices": [
                        {"uuid": mig.uuid, "name": mig.name, "memory_mib": mig.memory_mib}
                        for mig in gpu.mig_devices
                    ],
                    "visible": gpu.visible,
                    "source": gpu.source,
                }
                for gpu in self.gpus
            ],
            "notes": [{"source": n.source, "message": n.message, "line": n.line} for n in self.notes],
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"

    @classmethod
    def from_dict(cls, data: Any, origin: str = "host JSON") -> "HostFacts":
        """Read the `to_dict` form back; any shape error is a UsageError naming `origin` and the key."""
        if isinstance(data, dict) and data.get("schema") != SCHEMA:
            raise UsageError(f"{origin}: schema is {data.get('schema')!r}, this cudaresolve reads schema {SCHEMA}")
        try:
            return records.load(cls, data, records.JSON)
        except records.RecordError as exc:
            if exc.message is not None:
                raise UsageError(f"{origin}: {exc.path}: {exc.message}") from None
            where = f"{exc.path!r}" if exc.path else "top level"
            raise UsageError(f"{origin}: {where} must be {exc.expected}, got {records.shown(exc.value)}") from None

    @classmethod
    def from_json(cls, text: str, origin: str = "host JSON") -> "HostFacts":
        try:
            data = loads_json(text)
        except ValueError as exc:
            raise UsageError(f"{origin}: not valid JSON ({exc})") from None
        return cls.from_dict(data, origin)


def _text(value: Union[DriverRelease, CudaVersion, None]) -> Optional[str]:
    return None if value is None else str(value)
