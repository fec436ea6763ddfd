"""Stated host facts: precedence between flags and variables, the empty-string convention, validation."""

from __future__ import annotations

import pytest

from cudaresolve.arch import ComputeCapability
from cudaresolve.commands.host_options import overrides_from
from cudaresolve.errors import UsageError
from cudaresolve.host.facts import Driver, Overrides
from cudaresolve.versions import CudaVersion, DriverRelease


def test_nothing_stated():
    assert overrides_from(None, None, [], {"PATH": "/usr/bin"}) == Overrides()


def test_flags_beat_cudaresolve_variables_beat_the_ecosystem():
    environ = {
        "CUDARESOLVE_DRIVER": "550.144.03",
        "UV_CUDA_DRIVER_VERSION": "535.104.05",
        "CUDARESOLVE_CUDA": "12.4",
        "CONDA_OVERRIDE_CUDA": "12.2",
        "CUDARESOLVE_GPUS": "8.0,9.0",
        "CONDA_OVERRIDE_CUDA_ARCH": "7.5",
    }
    stated = overrides_from("570.86.15", None, ["8.6"], environ)
    assert stated.driver == Driver(DriverRelease.parse("570.86.15"), "override:--driver", CudaVersion.parse("12.4"), "override:CUDARESOLVE_CUDA")
    assert [(str(g.compute_capability), g.source, g.index) for g in stated.gpus] == [("8.6", "override:--gpu", 0)]

    stated = overrides_from(None, None, [], environ)
    assert stated.driver == Driver(DriverRelease.parse("550.144.03"), "override:CUDARESOLVE_DRIVER", CudaVersion.parse("12.4"), "override:CUDARESOLVE_CUDA")
    assert [(str(g.compute_capability), g.source) for g in stated.gpus] == [
        ("8.0", "override:CUDARESOLVE_GPUS"),
        ("9.0", "override:CUDARESOLVE_GPUS"),
    ]

    ecosystem = {key: value for key, value in environ.items() if not key.startswith("CUDARESOLVE_")}
    stated = overrides_from(None, None, [], ecosystem)
    assert stated.driver == Driver(
        DriverRelease.parse("535.104.05"), "override:UV_CUDA_DRIVER_VERSION", CudaVersion.parse("12.2"),
        "override:CONDA_OVERRIDE_CUDA"
    )
    assert [(g.compute_capability, g.source) for g in stated.gpus] == [
        (ComputeCapability(7, 5), "override:CONDA_OVERRIDE_CUDA_ARCH")
    ]


def test_one_driver_fact_stated_leaves_the_other_open():
    stated = overrides_from(None, "12", [], {})
    assert stated.driver == Driver(None, None, CudaVersion.parse("12.0"), "override:--cuda")
    assert stated.gpus is None


def test_empty_variables_state_none():
    stated = overrides_from(None, None, [], {"CONDA_OVERRIDE_CUDA": "", "CONDA_OVERRIDE_CUDA_ARCH": ""})
    assert stated.driver == Driver(None, None, None, "override:CONDA_OVERRIDE_CUDA")
    assert stated.gpus == ()
    assert overrides_from(None, None, [], {"CUDARESOLVE_GPUS": ""}).gpus == ()
    assert overrides_from(None, None, [], {"UV_CUDA_DRIVER_VERSION": ""}).driver == Driver(
        None, "override:UV_CUDA_DRIVER_VERSION"
    )


def test_cuda_forms():
    assert overrides_from(None, "12.4.1", [], {}).driver.cuda == CudaVersion(12, 4)
    assert overrides_from(None, None, [], {"CONDA_OVERRIDE_CUDA": "11.8"}).driver.cuda == CudaVersion(11, 8)


@pytest.mark.parametrize(
    "args, environ, message",
    [
        (("550", None, []), {}, "--driver: '550' is not a driver release (expected e.g. 535.104.05)"),
        ((None, None, []), {"CUDARESOLVE_DRIVER": "latest"}, "CUDARESOLVE_DRIVER: 'latest' is not a driver release"),
        ((None, None, []), {"UV_CUDA_DRIVER_VERSION": "r550"}, "UV_CUDA_DRIVER_VERSION: 'r550' is not"),
        ((None, "cu124", []), {}, "--cuda: 'cu124' is not a CUDA version (expected e.g. 12.4)"),
        ((None, None, []), {"CONDA_OVERRIDE_CUDA": "twelve"}, "CONDA_OVERRIDE_CUDA: 'twelve' is not a CUDA version"),
        ((None, None, ["86"]), {}, "--gpu: '86' is not a compute capability (expected e.g. 8.6)"),
        ((None, None, []), {"CUDARESOLVE_GPUS": "8.6,,9.0"}, "CUDARESOLVE_GPUS: '' is not a compute capability"),
        ((None, None, []), {"CONDA_OVERRIDE_CUDA_ARCH": "sm_86"}, "CONDA_OVERRIDE_CUDA_ARCH: 'sm_86' is not a compute"),
        ((None, None, ["99.9"]), {}, "--gpu: unknown compute capability 99.9 (known majors: 3, 5, 6, 7, 8, 9, 10, 11, 12)"),
        ((None, None, []), {"CUDARESOLVE_GPUS": "8.6,2.1"}, "CUDARESOLVE_GPUS: unknown compute capability 2.1 ("),
        ((None, None, []), {"CONDA_OVERRIDE_CUDA_ARCH": "13.0"}, "CONDA_OVERRIDE_CUDA_ARCH: unknown compute capability"),
    ],
)
def test_bad_values_name_their_flag_or_variable(args, environ, message):
    with pytest.raises(UsageError) as caught:
        overrides_from(*args, environ)
    assert str(caught.value).startswith(message)


def test_an_unlisted_minor_of_a_known_major_is_accepted():
    """8.8 is in no table, but may be a new GPU of a known family; only an unknown major is a typo."""
    stated = overrides_from(None, None, ["8.8", "3.7"], {})
    assert [g.compute_capability for g in stated.gpus] == [ComputeCapability(8, 8), ComputeCapability(3, 7)]
