"""The human table of `cudaresolve probe`."""

from __future__ import annotations

from cudaresolve.arch import ComputeCapability
from cudaresolve.host.facts import Driver, Gpu, HostFacts, MigDevice, Note
from cudaresolve.output.host import render_host
from cudaresolve.versions import CudaVersion, DriverRelease


def test_render_gpus_driver_sources_and_notes():
    # Values of triton-inference-server/server#8070 and DataDog/datadog-agent#33120.
    facts = HostFacts(
        system="Linux",
        machine="x86_64",
        glibc="2.35",
        driver=Driver(DriverRelease.parse("535.216.01"), "sysfs", CudaVersion.parse("12.2"), "nvml"),
        gpus=(
            Gpu(
                ComputeCapability(7, 0),
                "nvml",
                0,
                "NVIDIA TITAN V",
                12288,
                "GPU-b5169cef-2205-c30e-f2b3-220cfa14bafd",
                mig_mode=False,
                visible=False,
            ),
            Gpu(
                ComputeCapability(8, 0),
                "nvml",
                1,
                "NVIDIA A100-SXM4-80GB",
                81920,
                "GPU-7fdaf0a5-179b-f636-d15d-daf243e3ff16",
                True,
                (MigDevice("MIG-feb88891-0321-5fef-9c87-d4af3b54259e", "MIG 1g.10gb"),),
            ),
        ),
        cuda_visible_devices="GPU-7fdaf0a5",
        notes=(
            Note("CUDA_VISIBLE_DEVICES", "1 of 2 GPU(s) visible to CUDA"),
            Note("procfs", "no driver release in the NVRM line", "NVRM version: garbage"),
        ),
    )
    assert render_host(facts) == (
        "host     Linux x86_64, glibc 2.35\n"
        "driver   535.216.01 (sysfs), CUDA 12.2 (nvml)\n"
        "CUDA_VISIBLE_DEVICES='GPU-7fdaf0a5'\n"
        "\n"
        "GPU  NAME                   CC   MEMORY     UUID                                      VISIBLE  MIG                SOURCE\n"
        "0    NVIDIA TITAN V         7.0  12288 MiB  GPU-b5169cef-2205-c30e-f2b3-220cfa14bafd  no       off                nvml\n"
        "1    NVIDIA A100-SXM4-80GB  8.0  81920 MiB  GPU-7fdaf0a5-179b-f636-d15d-daf243e3ff16  yes      on, 1 instance(s)  nvml\n"
        "\n"
        "notes\n"
        "  CUDA_VISIBLE_DEVICES: 1 of 2 GPU(s) visible to CUDA\n"
        "  procfs: no driver release in the NVRM line\n"
        "    | NVRM version: garbage\n"
    )


def test_render_nothing_found_and_stated_none():
    facts = HostFacts("Linux", "aarch64", tegra=True, driver=Driver(cuda_source="override:CONDA_OVERRIDE_CUDA"))
    assert render_host(facts) == (
        "host     Linux aarch64, Jetson/Tegra\n"
        "driver   release unknown, no CUDA (override:CONDA_OVERRIDE_CUDA)\n"
        "GPUs     none found\n"
    )
