import pytest

from cudaresolve.arch import ComputeCapability, Target, parse_arch_list
from cudaresolve.errors import UsageError


def test_compute_capability_parse_and_order():
    assert ComputeCapability.parse("8.6") == ComputeCapability(8, 6)
    assert ComputeCapability.parse("12.0") > ComputeCapability.parse("9.0")
    assert str(ComputeCapability.from_arch_number(121)) == "12.1"
    with pytest.raises(UsageError):
        ComputeCapability.parse("eighty-six")


@pytest.mark.parametrize(
    "target, gpu, runs",
    [
        ("sm_60", "6.1", True),  # same major, higher minor
        ("sm_61", "6.0", False),
        ("sm_90", "10.0", False),  # SASS never crosses majors
        ("sm_90a", "9.0", True),
        ("sm_100a", "10.3", False),  # arch-specific: exactly 10.0
        ("sm_100f", "10.3", True),  # family
        ("sm_120f", "12.1", True),
        ("compute_90", "12.0", True),  # PTX runs forward
        ("compute_90a", "10.0", False),
        ("compute_120", "8.6", False),
    ],
)
def test_target_runs_on(target, gpu, runs):
    assert Target.parse(target).runs_on(ComputeCapability.parse(gpu)) is runs


def test_parse_arch_list_with_ptx():
    targets = parse_arch_list("7.5;8.0;12.0+PTX")
    assert [str(t) for t in targets] == ["sm_75", "sm_80", "sm_120", "compute_120"]
    with pytest.raises(UsageError):
        parse_arch_list("7.5;banana")
