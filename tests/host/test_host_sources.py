"""Each host source's parser on recorded real outputs (tests/fixtures/host/SOURCES.md) and on broken ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cudaresolve.arch import ComputeCapability
from cudaresolve.host.facts import Note
from cudaresolve.host.sources import (
    cuda_from_int,
    parse_libcuda,
    parse_procfs,
    parse_smi_csv,
    parse_smi_xml,
    parse_sysfs,
    parse_tegra,
)


def shown(value: object) -> Optional[str]:
    """A reading's driver release or CUDA version as text, the way the host JSON writes it."""
    return None if value is None else str(value)


HOST = Path(__file__).parents[1] / "fixtures" / "host"


def fixture(name: str) -> str:
    return (HOST / name).read_bytes().decode()


@pytest.mark.parametrize(
    "name, release",
    [
        ("procfs/470.103.01.txt", "470.103.01"),
        ("procfs/525.60.11-open.txt", "525.60.11"),
        ("procfs/565.57.01-open.txt", "565.57.01"),
        ("procfs/580.173.02.txt", "580.173.02"),
        ("procfs/540.4.0-jetson.txt", "540.4.0"),
    ],
)
def test_procfs_release_from_proprietary_and_open_modules(name, release):
    reading = parse_procfs(fixture(name))
    assert (reading.source, shown(reading.release), shown(reading.cuda), reading.gpus, reading.notes) == (
        "procfs",
        release,
        None,
        None,
        (),
    )


def test_procfs_malformed_is_a_note_with_the_line():
    text = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  garbage  Thu Jan  6 2022\nGCC version: 4.8.5\n"
    assert parse_procfs(text).notes == (
        Note("procfs", "no driver release in the NVRM line", text.splitlines()[0]),
    )
    assert parse_procfs("GCC version: 4.8.5\n").notes == (
        Note("procfs", "no NVRM version line", "GCC version: 4.8.5"),
    )


@pytest.mark.parametrize(
    "name, release", [("sysfs/470.103.01.txt", "470.103.01"), ("sysfs/590.48.01.txt", "590.48.01")]
)
def test_sysfs_release(name, release):
    assert shown(parse_sysfs(fixture(name)).release) == release


def test_sysfs_malformed_is_a_note():
    reading = parse_sysfs("\nnvidia 550\n")
    assert shown(reading.release) is None
    assert reading.notes == (Note("sysfs", "not a driver release", "nvidia 550"),)


def test_smi_csv_reads_every_row_by_header_not_position():
    reading = parse_smi_csv(fixture("smi/570.86.15-titanv-rtx5880.csv"))
    assert shown(reading.release) == "570.86.15"
    assert shown(reading.cuda) is None
    assert [(g.index, g.name, str(g.compute_capability), g.source) for g in reading.gpus] == [
        (0, "NVIDIA TITAN V", "7.0", "nvidia-smi"),
        (1, "NVIDIA RTX 5880 Ada Generation", "8.9", "nvidia-smi"),
    ]
    assert reading.notes == ()


def test_smi_csv_eight_mixed_gpus():
    reading = parse_smi_csv(fixture("smi/550.54.15-mixed8.csv"))
    assert shown(reading.release) == "550.54.15"
    assert [str(g.compute_capability) for g in reading.gpus] == ["7.0", "8.6", "7.0", "7.0", "8.0", "8.0", "8.0", "8.0"]
    assert [g.index for g in reading.gpus] == list(range(8))


def test_smi_csv_with_our_full_query_units_and_missing_values():
    stdout = (
        "index, uuid, name, compute_cap, memory.total [MiB], driver_version, mig.mode.current\n"
        "0, GPU-513536b6-7d19-9063-b049-1e69664bb298, NVIDIA A100-SXM4-80GB, 8.0, 81920 MiB, 535.54.03, Enabled\n"
        "1, GPU-b5e386b4-3e71-5837-aca5-80c5914cf07f, NVIDIA L4, 8.9, 23034 MiB, 535.54.03, [N/A]\n"
    )
    a100, l4 = parse_smi_csv(stdout).gpus
    assert (a100.memory_mib, a100.uuid, a100.mig_mode) == (81920, "GPU-513536b6-7d19-9063-b049-1e69664bb298", True)
    assert (l4.memory_mib, l4.mig_mode) == (23034, None)


def test_smi_csv_bad_rows_are_notes_and_the_good_rows_stay():
    stdout = (
        "index, name, compute_cap, driver_version\n"
        "0, NVIDIA GeForce RTX 3090, 8.6, 550.54.15\n"
        "1, NVIDIA GeForce RTX 3090, [N/A], 550.54.15\n"
        "2, NVIDIA GeForce RTX 3090\n"
    )
    reading = parse_smi_csv(stdout)
    assert [g.index for g in reading.gpus] == [0]
    assert reading.notes == (
        Note(
            "nvidia-smi",
            "GPU row without a usable compute_cap; left out",
            "1, NVIDIA GeForce RTX 3090, [N/A], 550.54.15",
        ),
        Note("nvidia-smi", "row has 2 fields, header has 4", "2, NVIDIA GeForce RTX 3090"),
    )


def test_smi_csv_all_rows_bad_does_not_claim_no_gpus():
    reading = parse_smi_csv("index, compute_cap\n0, ?\n")
    assert reading.gpus is None


def test_smi_csv_error_text_is_not_mistaken_for_csv():
    reading = parse_smi_csv(fixture("smi/470.182.03-no-compute-cap.txt"))
    assert (shown(reading.release), reading.gpus) == (None, None)
    assert reading.notes == (Note("nvidia-smi", "no CSV header", 'Field "compute_cap" is not a valid field to query.'),)


@pytest.mark.parametrize(
    "name, release, cuda",
    [
        ("smi/535.54.03-a100-mig.xml", "535.54.03", "12.2"),
        ("smi/590.44.01-rtxpro6000.xml", "590.44.01", "13.1"),
        ("smi/510.06-wsl.xml", "510.06", "11.6"),
    ],
)
def test_smi_xml_gives_the_driver_cuda_version(name, release, cuda):
    reading = parse_smi_xml(fixture(name))
    assert (shown(reading.release), shown(reading.cuda), reading.gpus, reading.notes) == (release, cuda, None, ())


def test_smi_xml_malformed_names_the_line():
    text = fixture("smi/590.44.01-rtxpro6000.xml").replace("Blackwell Max-Q", "Blackwell & Max-Q")
    reading = parse_smi_xml(text)
    assert shown(reading.release) is None
    assert len(reading.notes) == 1
    assert reading.notes[0].message.startswith("XML does not parse (not well-formed (invalid token)")
    assert reading.notes[0].line == (
        "\t\t<product_name>NVIDIA RTX PRO 6000 Blackwell & Max-Q Workstation Edition</product_name>"
    )


def test_smi_xml_cuda_err_is_a_note():
    # WSL after a broken update prints "CUDA Version: ERR!" (microsoft/WSL#11589).
    text = fixture("smi/510.06-wsl.xml").replace("<cuda_version>11.6", "<cuda_version>ERR!")
    reading = parse_smi_xml(text)
    assert (shown(reading.release), shown(reading.cuda)) == ("510.06", None)
    assert reading.notes == (
        Note("nvidia-smi", "cuda_version is not a CUDA version", "<cuda_version>ERR!</cuda_version>"),
    )


def test_libcuda_jetson_orin():
    reading = parse_libcuda(fixture("libcuda/12090-orin.json"))
    assert (shown(reading.release), shown(reading.cuda)) == (None, "12.9")
    (orin,) = reading.gpus
    assert (orin.name, orin.compute_capability, orin.memory_mib, orin.uuid, orin.source) == (
        "Orin",
        ComputeCapability(8, 7),
        54792,  # 54792.6 MiB: deviceQuery rounds up, cudaresolve floors
        None,
        "libcuda",
    )


def test_libcuda_no_device_means_no_gpus_not_unknown():
    reading = parse_libcuda(fixture("libcuda/no-device.json"))
    assert (shown(reading.cuda), reading.gpus) == ("12.4", ())
    assert reading.notes == (Note("libcuda", "cuInit failed: CUDA_ERROR_NO_DEVICE (100)"),)


def test_libcuda_other_init_failure_leaves_gpus_unknown():
    reading = parse_libcuda('{"driver_version": 12080, "init_error": {"code": 999, "name": "CUDA_ERROR_UNKNOWN"}}')
    assert (shown(reading.cuda), reading.gpus) == ("12.8", None)


def test_libcuda_garbage_output_is_a_note():
    reading = parse_libcuda("Segmentation fault\n")
    assert reading.notes == (Note("libcuda", "child output is not a JSON object", "Segmentation fault"),)


def test_tegra_detection():
    release = fixture("tegra/nv_tegra_release-r35.4.1.txt")
    compatible = fixture("tegra/compatible-agx-orin.bin")
    assert parse_tegra(release, None) == Note(
        "tegra", "Jetson/Tegra (L4T 35.4.1): no NVML here, libcuda reports the driver and GPU"
    )
    assert parse_tegra(None, compatible).message.startswith("Jetson/Tegra (device tree nvidia,tegra)")
    assert parse_tegra(None, "raspberrypi,4-model-b\0brcm,bcm2711\0") is None
    assert parse_tegra(None, None) is None


@pytest.mark.parametrize("value, text", [(12040, "12.4"), (13010, "13.1"), (11080, "11.8"), (0, None), (999999, None)])
def test_cuda_from_int(value, text):
    assert shown(cuda_from_int(value)) == text


@settings(max_examples=150, deadline=None)
@given(st.text())
def test_no_parser_raises_on_any_text(text):
    for parse in (parse_sysfs, parse_procfs, parse_smi_csv, parse_smi_xml, parse_libcuda):
        assert parse(text).source in ("sysfs", "procfs", "nvidia-smi", "libcuda")


CHILD_KEYS = ("driver_version", "devices", "errors", "init_error", "error", "compute_capability", "code", "name")
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner) | st.dictionaries(st.sampled_from(CHILD_KEYS + ("memory_total", "uuid")), inner),
)


@settings(max_examples=100, deadline=None)
@given(JSON_VALUES)
def test_libcuda_parser_survives_any_json_shape(value):
    assert parse_libcuda(json.dumps(value)).source == "libcuda"
