"""CudaVersion and DriverRelease: parsing, order and text."""

from __future__ import annotations

import pytest

from cudaresolve.errors import UsageError
from cudaresolve.versions import CudaVersion, DriverRelease


def test_cuda_version():
    assert CudaVersion.parse("13.0") == CudaVersion(13, 0) and str(CudaVersion.parse("13.0")) == "13.0"
    assert str(CudaVersion.parse("12")) == "12" and CudaVersion.parse("12").major == 12
    assert CudaVersion.parse("12.8.1") == CudaVersion(12, 8)
    assert CudaVersion(12) < CudaVersion(12, 0) < CudaVersion(12, 10) < CudaVersion(13)
    for bad in ("cu128", "", "12.x"):
        with pytest.raises(UsageError, match="not a CUDA version"):
            CudaVersion.parse(bad)


def test_driver_release():
    release = DriverRelease.parse(" 550.144.03 ")
    assert str(release) == "550.144.03" and release.branch == 550
    assert DriverRelease.parse("570.26") < DriverRelease.parse("570.124.06") < DriverRelease.parse("573.24")
    assert DriverRelease.parse("570.26.00") == DriverRelease.parse("570.26")
    for bad in ("550", "N/A", "r550.1", "550.144.03.1"):
        with pytest.raises(UsageError, match="not a driver release"):
            DriverRelease.parse(bad)
