"""The verdicts: one frozen dataclass per host-fit rule, its facts as fields, and the names of every
rule a lock file says (`Rule`). A record carries its rule's name, so a lock file writes it under the
name it has always written; `host` is the host's label when a fleet is judged, else None.

Pure data. May import: the value types (arch, versions).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import ClassVar, Optional, Union

from cudaresolve.arch import ComputeCapability, Target
from cudaresolve.versions import CudaVersion, DriverRelease


class Rule(enum.Enum):
    """The rule that set a candidate aside; the value is what files and JSON say."""

    SDIST_ONLY = "sdist-only"
    NO_BINARY = "no-binary"
    REQUIRES_PYTHON = "requires-python"
    NO_WHEEL = "no-wheel"
    YANKED = "yanked"
    DRIVER = "driver"
    DEVICE_CODE = "device-code"
    TOOLKIT_TARGETS = "toolkit-targets"
    CONDA_SHADOW = "conda-shadow"
    OTHER_MAJOR = "other-major"
    JUDGE = "judge"
    OLDER_CUDA = "older-cuda"
    NOT_NEEDED = "not-needed"
    PRE_RELEASE = "pre-release"
    CPU_ONLY = "cpu-only"
    NO_EXTRA = "no-extra"
    MINOR_COMPAT = "minor-compat"
    BREAKS_INSTALLED = "breaks-installed"
    SBSA_ON_JETSON = "sbsa-on-jetson"
    FACTS_UNKNOWN = "facts-unknown"
    PACKAGE_FLOOR = "package-floor"
    NEEDS_SET_ASIDE = "needs-set-aside"


@dataclass(frozen=True)
class DriverTooOld:
    """The host's driver cannot run code built with `cuda` (a build's CUDA, or a major alone)."""

    rule: ClassVar[Rule] = Rule.DRIVER
    cuda: CudaVersion
    driver: Optional[DriverRelease]  # the release, when the host states it
    driver_cuda: Optional[CudaVersion]  # the CUDA version the driver supports, when the host states it
    floor: Optional[DriverRelease]  # the lowest driver of `cuda`'s major, when the table knows it
    host: Optional[str] = None


@dataclass(frozen=True)
class MinorCompat:
    """A build for a newer CUDA minor than the driver's: it runs only by minor-version compatibility
    (PTX from the newer toolkit cannot be JIT-compiled); the doctor warns, the lock prefers another."""

    rule: ClassVar[Rule] = Rule.MINOR_COMPAT
    cuda: CudaVersion  # the build's CUDA: 13.2
    driver: Optional[DriverRelease]
    driver_cuda: Optional[CudaVersion]
    host: Optional[str] = None


@dataclass(frozen=True)
class GpuRef:
    """A GPU of a host: its index and its name, when the host states them."""

    index: Optional[int]
    name: Optional[str] = None


@dataclass(frozen=True)
class NoDeviceCode:
    """A build carries no SASS or PTX the GPUs of one compute capability can run ("no kernel image is
    available for execution on the device"). The lock gives the build's targets; the doctor, which
    judges file by file, leaves them empty and names each file in its evidence."""

    rule: ClassVar[Rule] = Rule.DEVICE_CODE
    capability: ComputeCapability
    gpus: tuple[GpuRef, ...]  # the host's GPUs of that capability
    sass: tuple[Target, ...] = ()  # what the build has: sm_75 ...
    ptx: tuple[Target, ...] = ()  # compute_120 ...
    host: Optional[str] = None


@dataclass(frozen=True)
class ToolkitTargets:
    """A CUDA major's newest toolkit builds no code for a GPU (CUDA 13 for Pascal)."""

    rule: ClassVar[Rule] = Rule.TOOLKIT_TARGETS
    toolkit: CudaVersion
    gpu: int
    capability: ComputeCapability
    host: Optional[str] = None


@dataclass(frozen=True)
class CpuOnly:
    """A CPU-only build of a CUDA-capable family for hosts with a GPU or a driver: by its local label
    (torch 2.8.0+cpu), or by its wheel's members on a machine (torch 2.10.0 for aarch64 has no
    torch/lib/libtorch_cuda.so). It never uses the host's GPU."""

    rule: ClassVar[Rule] = Rule.CPU_ONLY
    label: str  # the build's local label: "cpu"; "" for a default build CPU-only on its machine
    machine: Optional[str] = None  # the machine whose wheel is CPU-only though its release has a CUDA default build
    missing: Optional[str] = None  # the member every CUDA build carries, absent from that wheel


@dataclass(frozen=True)
class SbsaOnJetson:
    """A server-Arm (SBSA) CUDA build (data/components.toml [sbsa_builds]) for a Jetson (tegra) host,
    whose CUDA is its JetPack release's: what works there is the JetPack wheels NVIDIA publishes."""

    rule: ClassVar[Rule] = Rule.SBSA_ON_JETSON
    cuda: CudaVersion  # the build's CUDA (a major alone when only that is known)
    host: Optional[str] = None


@dataclass(frozen=True)
class KnownBadRelease:
    """A release matching an advisory of data/advisories.toml; `advisory` is its id."""

    advisory: str
    symptom: str  # as the table words it


@dataclass(frozen=True)
class BelowPackageFloor:
    """A release (the finding's subject, the rejection's candidate) that needs a newer driver than the
    host's (data/package_floors.toml): it fails on this driver although the driver runs its CUDA."""

    rule: ClassVar[Rule] = Rule.PACKAGE_FLOOR
    floor: DriverRelease  # the lowest driver the release runs on
    driver: DriverRelease
    host: Optional[str] = None


Verdict = Union[DriverTooOld, MinorCompat, NoDeviceCode, ToolkitTargets, CpuOnly, SbsaOnJetson, KnownBadRelease,
                BelowPackageFloor]
VERDICTS: tuple[type, ...] = Verdict.__args__  # type: ignore[attr-defined]
