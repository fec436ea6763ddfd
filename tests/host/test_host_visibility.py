"""CUDA_VISIBLE_DEVICES semantics over recorded GPU lists."""

from __future__ import annotations

import pytest

from cudaresolve.arch import ComputeCapability
from cudaresolve.host.facts import Gpu, MigDevice, Note
from cudaresolve.host.visibility import apply_visible_devices

# The A100 of DataDog/datadog-agent#33120 (two of its MIG instances) and the two GPUs of
# triton-inference-server/server#8070.
A100 = Gpu(
    ComputeCapability(8, 0),
    "nvml",
    index=0,
    name="NVIDIA A100-SXM4-80GB",
    uuid="GPU-7fdaf0a5-179b-f636-d15d-daf243e3ff16",
    mig_mode=True,
    mig_devices=(
        MigDevice("MIG-feb88891-0321-5fef-9c87-d4af3b54259e", "MIG 1g.10gb"),
        MigDevice("MIG-a25704ba-3a06-5299-a795-fd7cf4d13973", "MIG 1g.10gb"),
    ),
)
TITAN_V = Gpu(
    ComputeCapability(7, 0), "nvml", index=0, name="NVIDIA TITAN V", uuid="GPU-b5169cef-2205-c30e-f2b3-220cfa14bafd"
)
RTX_5880 = Gpu(
    ComputeCapability(8, 9),
    "nvml",
    index=1,
    name="NVIDIA RTX 5880 Ada Generation",
    uuid="GPU-7518f6b0-991f-ce2b-3d37-c779130d3137",
)
MIXED = (TITAN_V, RTX_5880)


def visible(gpus, value, order=None):
    result, notes = apply_visible_devices(gpus, value, order)
    return [gpu.visible for gpu in result], notes


def test_unset_changes_nothing():
    assert apply_visible_devices(MIXED, None) == (MIXED, ())


@pytest.mark.parametrize("value", ["", "-1", "NoDevFiles"])
def test_hide_all(value):
    flags, notes = visible(MIXED, value)
    assert flags == [False, False]
    assert notes[0] == Note("CUDA_VISIBLE_DEVICES", "0 of 2 GPU(s) visible to CUDA")
    assert notes[1].line == value
    assert notes[1].message == f"entry {value!r} names no GPU; CUDA ignores it and every entry after it"


def test_index_order_warning_for_mixed_models():
    flags, notes = visible(MIXED, "1")
    assert flags == [False, True]
    assert notes[-1].message.startswith("indices follow NVML/PCI order here, but CUDA numbers mixed GPUs fastest-first")
    flags, notes = visible(MIXED, "1", order="PCI_BUS_ID")
    assert notes == (Note("CUDA_VISIBLE_DEVICES", "1 of 2 GPU(s) visible to CUDA"),)


def test_uuid_prefix_and_invalid_entry_stops_the_list():
    flags, notes = visible(MIXED, "GPU-7518f6b0,7,0")
    assert flags == [False, True]  # "7" names no GPU, so the "0" after it is ignored too
    assert notes[1].message == "entry '7' names no GPU; CUDA ignores it and every entry after it"


def test_ambiguous_uuid_prefix_names_nothing():
    assert visible(MIXED, "GPU-")[0] == [False, False]


def test_mig_uuid_makes_its_parent_visible():
    other = Gpu(
        ComputeCapability(8, 0), "nvml", index=1, name="NVIDIA A100-SXM4-80GB", uuid="GPU-513536b6-7d19-9063-b049-1e69664bb298"
    )
    assert visible((A100, other), "MIG-a25704ba-3a06-5299-a795-fd7cf4d13973")[0] == [True, False]
    # Drivers before R470 named instances MIG-GPU-<parent>/<gpu instance>/<compute instance>.
    assert visible((A100, other), "MIG-GPU-513536b6-7d19-9063-b049-1e69664bb298/1/0")[0] == [False, True]


def test_whitespace_and_duplicates():
    assert visible(MIXED, " 0 , 0,1")[0] == [True, True]
