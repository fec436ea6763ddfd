"""The fix for a package carrying its own CUDA runtime (warp-lang, ale-py) names the newest release
of data/own_runtime.toml whose runtime the driver runs and whose device code runs on the GPUs
(issue 26: a fix names the release the binary facts say works): on plain data, on the table read
from the real wheels, and applied with real pip to a venv holding the real warp-lang wheel."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace

import pytest
from fix_steps import satisfied_fixes
from packaging.version import Version
from test_fix_convergence import World, errors, found, key, world  # noqa: F401
from wheel_cache import cache_dir, fetch_wheel

from cudaresolve.arch import ComputeCapability
from cudaresolve.checks import fixes as f
from cudaresolve.checks.suggest import own_runtime_fix
from cudaresolve.env.distributions import Distribution
from cudaresolve.host.facts import Driver, Gpu, HostFacts
from cudaresolve.knowledge import components, own_runtime, toolkits
from cudaresolve.knowledge.own_runtime import Release, RuntimeFile
from cudaresolve.output.findings import shown
from cudaresolve.output.fixes import render_fix
from cudaresolve.versions import CudaVersion, DriverRelease


def host(driver: str, gpu: str) -> HostFacts:
    release = DriverRelease.parse(driver)
    return HostFacts("Linux", "x86_64", Driver(release, "override:--driver", toolkits.max_cuda_for_driver(release),
                                              "derived:branch-table"),
                     (Gpu(ComputeCapability.parse(gpu), "override:--gpu", 0),))


def row(version: str, runtime: str, sass: tuple[str, ...], ptx: tuple[str, ...] = ()) -> Release:
    return Release("warp-lang", version, "x86_64", f"warp_lang-{version}-py3-none-manylinux_2_28_x86_64.whl", "0" * 64,
                   (RuntimeFile("warp/bin/warp.so", runtime, sass, ptx),))


ROWS = (row("3.0", "13.4.92", ("sm_75", "sm_120"), ("compute_120:9.4",)),
        row("2.0", "12.9.86", ("sm_75", "sm_86"), ("compute_75:8.8",)),
        row("1.0", "12.2.140", ("sm_61", "sm_86")))
INSTALLED = Distribution("warp-lang", Version("3.0"), (), "pip", "", ())


@pytest.fixture
def rows(monkeypatch):
    monkeypatch.setattr(own_runtime, "releases", lambda name, machine: ROWS if name == "warp-lang" else ())


def pinned(fix) -> str:
    assert isinstance(fix, f.Explained) and isinstance(fix.fix, f.PipInstall), fix
    [requirement] = fix.fix.requirements
    return str(requirement)


def test_newest_release_whose_runtime_the_driver_runs_natively(rows):
    fix = own_runtime_fix(INSTALLED, host("575.57.08", "8.6"))
    assert pinned(fix) == "warp-lang==2.0"
    assert fix.why == f.NewestOwnRuntime(CudaVersion(12, 9), DriverRelease.parse("575.57.08"), ())
    assert render_fix(fix) == ('pip install "warp-lang==2.0" (the newest release whose own CUDA runtime, 12.9, '
                               'driver 575.57.08 runs)')


def test_native_before_minor_version_compatibility(rows):
    """Driver 535 (CUDA 12.2) runs 1.0 natively; 2.0's 12.9 only by minor-version compatibility."""
    assert pinned(own_runtime_fix(INSTALLED, host("535.104.05", "8.6"))) == "warp-lang==1.0"
    two = (ROWS[0], ROWS[1])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(own_runtime, "releases", lambda name, machine: two)
        fix = own_runtime_fix(INSTALLED, host("535.104.05", "8.6"))
    assert pinned(fix) == "warp-lang==2.0" and fix.why.compatibility
    assert render_fix(fix).endswith("driver 535.104.05 runs by minor-version compatibility)")


def test_device_code_must_run_on_the_gpu(rows):
    """On 6.1 only 1.0 carries sm_61; 2.0's compute_75 PTX does not run there."""
    fix = own_runtime_fix(INSTALLED, host("580.65.06", "6.1"), (ComputeCapability(6, 1),))
    assert pinned(fix) == "warp-lang==1.0" and fix.why.ccs == (ComputeCapability(6, 1),)


def test_no_release_runs_says_so(rows):
    assert own_runtime_fix(INSTALLED, host("470.256.02", "8.6")) == f.NoKnownRelease(("warp-lang",))
    fix = own_runtime_fix(INSTALLED, host("470.256.02", "5.0"), (ComputeCapability(5, 0),))
    assert fix == f.NoKnownRelease(("warp-lang",), runs_on=(ComputeCapability(5, 0),))


def test_never_the_installed_release_nor_a_package_the_table_lacks(rows):
    installed = replace(INSTALLED, version=Version("2.0"))
    assert pinned(own_runtime_fix(installed, host("575.57.08", "8.6"))) == "warp-lang==1.0"
    other = replace(INSTALLED, name="numpy")
    assert own_runtime_fix(other, host("575.57.08", "8.6")) is None


def test_the_table_read_from_the_wheels():
    """warp-lang 1.12.1 ... 1.17.0 carry a CUDA 12.9 runtime, 1.18.0 and 1.19.0 13.4 (as
    data/components.toml [own_runtime] records); every name is one that carries its own runtime."""
    warp = {r.version: r for r in own_runtime.releases("warp-lang", "x86_64")}
    assert {v: str(r.cuda) for v, r in warp.items() if v in ("1.12.1", "1.17.0", "1.18.0", "1.19.0")} == {
        "1.12.1": "12.9", "1.17.0": "12.9", "1.18.0": "13.4", "1.19.0": "13.4"}
    assert "sm_61" in warp["1.17.0"].file[0].sass and "sm_61" not in warp["1.19.0"].file[0].sass
    assert [r.version for r in own_runtime.releases("warp-lang", "x86_64")][:2] == ["1.19.0", "1.18.0"]
    assert str(own_runtime.releases("ale-py", "x86_64")[0].cuda) == "12.6"
    assert all(components.carries_own_runtime(r.name) for r in own_runtime.load())


# -- applied with real pip -----------------------------------------------------------------------------


def warp_wheels(world: World, *versions: str) -> None:  # noqa: F811 (the fixture imported above)
    """The real warp-lang wheels in the world's --find-links directory; skipped when one is not in
    the test cache and the registry is not reachable."""
    kept = cache_dir() / "wheels"
    for version in versions:
        if not list(kept.glob(f"warp_lang-{version}-*.whl")):
            listed = subprocess.run([sys.executable, "-m", "pip", "index", "versions", "warp-lang", "--only-binary=:all:"],
                                    capture_output=True, text=True)
            if listed.returncode != 0:
                pytest.skip(f"the registry is not reachable: {listed.stderr.strip().splitlines()[-1:]}")
        wheel = fetch_wheel(f"warp-lang=={version}")
        (world.wheels / wheel.name).symlink_to(wheel)


def pip_part(fix: f.Fix) -> f.Fix:
    """The pip alternative of "upgrade the driver, or pip install ..." (the fix itself otherwise)."""
    return next(o for o in fix.options if not isinstance(o, f.DriverUpgrade)) if isinstance(fix, f.Alternatives) else fix


HOSTS = (("575.57.08", "8.6", "driver-floor"), ("535.104.05", "8.0", "driver-floor"), ("580.65.06", "6.1", "arch-coverage"))


def test_the_named_warp_release_converges(world):  # noqa: F811 (the fixture imported above)
    """warp-lang 1.19.0 (CUDA 13.4 runtime, no sm_61) on three hosts: each host's fix names 1.17.0 (12.9,
    sm_61); pip installs its real wheel once (the same step for all three), and judged again on each
    host the finding is gone and no error is left."""
    warp_wheels(world, "1.19.0", "1.17.0")
    world.pip(["install", "warp-lang==1.19.0"])
    judged = []
    for driver, gpu, check in HOSTS:
        world.host = host(driver, gpu)
        before = world.judge()
        finding = found(before, check)
        assert finding.severity == "error"
        assert satisfied_fixes(before.findings, before.environment) == []
        fix = pip_part(finding.fix)
        assert pinned(fix) == "warp-lang==1.17.0"
        judged.append((world.host, before, finding, fix))
    world.apply(judged[0][3])
    for facts, before, finding, _ in judged:
        world.host = facts
        after = world.judge()
        assert key(finding) not in {key(other) for other in after.findings}, [shown(x) for x in after.findings]
        assert errors(after) <= errors(before), [shown(x) for x in after.findings]
        assert [x for x in after.findings if x.severity == "error"] == [], facts
