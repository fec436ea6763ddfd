"""build-floor (issue 26): a CUDA library wheel below the release a consumer's Requires-Dist asks,
with the extras that are active, is an error naming the library, the consumer and the floor, whose
fix is the consumer's own range. JAX's CUDA plugin refuses at load time a cuDNN older than it was
built with; after a second `pip install` downgrades the shared wheel, the doctor says so.

Hermetic: dist-info directories written by hand (the check reads metadata, no binaries), a venv
that real pip fills from a --find-links directory of tiny wheels for the fix, a local index for the
lock.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from conftest import hermetic_environ
from fix_steps import pip_arguments
from index_server import make_wheel
from packaging.requirements import Requirement
from packaging.version import Version
from test_checks_planned import dist, planned
from test_doctor_synthetic import HOST
from test_env_distributions import make_dist_info

from cudaresolve.checks import judge
from cudaresolve.checks.findings import Check, Severity
from cudaresolve.checks.fixes import ConsumersRange, Explained, PipInstall
from cudaresolve.checks.floors import below_floor
from cudaresolve.checks.problems import BelowBuildFloor
from cudaresolve.cli import main
from cudaresolve.commands.diagnosing import examine
from cudaresolve.env.interpreter import target_for_python
from cudaresolve.knowledge import components
from cudaresolve.output.findings import shown

GPU = ("--driver", "570.86.15", "--gpu", "8.9")
PLUGIN = "jax-cuda12-plugin"
# jax-cuda12-plugin 0.7.2's [with-cuda], cut to three of its requirements (the real one has a dozen).
WITH_CUDA = (
    'nvidia-cublas-cu12>=12.1.3.1; extra == "with-cuda"',
    'nvidia-cuda-nvcc-cu12>=12.6.85; extra == "with-cuda"',
    'nvidia-cudnn-cu12<10.0,>=9.8; extra == "with-cuda"',
)
OTHERS = {"nvidia-cublas-cu12": "12.8.4.1", "nvidia-cuda-nvcc-cu12": "12.8.93"}


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDARESOLVE_CACHE_DIR", str(tmp_path / "facts-cache"))
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)


def site(tmp_path: Path, cudnn: str, others: dict[str, str] = OTHERS, requires: tuple[str, ...] = WITH_CUDA) -> Path:
    """site-packages holding the plugin, cuDNN `cudnn` and `others`, as dist-info only."""
    root = tmp_path / "site"
    make_dist_info(root, PLUGIN, "0.7.2", requires=requires)
    for name, version in {**others, "nvidia-cudnn-cu12": cudnn}.items():
        make_dist_info(root, name, version)
    return root


def doctor(capsys, root: Path) -> tuple[int, list[dict]]:
    capsys.readouterr()
    code = main(["doctor", "--site-packages", str(root), "--json", *GPU])
    return code, json.loads(capsys.readouterr().out)["findings"]


def test_cudnn_below_the_active_extras_floor_is_an_error_naming_both(tmp_path, capsys):
    code, findings = doctor(capsys, site(tmp_path, "9.5.1.17"))
    assert code == 2
    [floor] = [f for f in findings if f["check"] == "build-floor"]
    assert [f for f in findings if f["severity"] == "error"] == [floor]
    assert floor["severity"] == "error" and floor["subject"] == "jax-cuda12-plugin 0.7.2"
    assert floor["message"] == (
        "requires cuDNN >= 9.8 (its extra [with-cuda]): 'nvidia-cudnn-cu12<10.0,>=9.8', but nvidia-cudnn-cu12 "
        "9.5.1.17 is installed; it refuses an older cuDNN than it was built against when it loads")
    assert floor["fix"] == ('pip install "nvidia-cudnn-cu12<10.0,>=9.8" '
                            "(the range jax-cuda12-plugin 0.7.2 [with-cuda] requires)")
    assert floor["problem"]["type"] == "below-build-floor"


def test_on_a_gpu_the_newest_cudnn_lacks_the_fix_names_the_release_in_range_that_runs(tmp_path, capsys):
    """On a GTX 1080 (6.1) pip's pick from the plugin's range, cuDNN 9.28, has no sm_61 code: the
    printed range would trade this error for "no kernel image". The fix names the newest release in
    the range whose device code the wheel-facts table says runs there (9.10.2.21 carries sm_61);
    a GPU the newest one covers keeps the range (the test above)."""
    capsys.readouterr()
    code = main(["doctor", "--site-packages", str(site(tmp_path, "9.5.1.17")), "--json",
                 "--driver", "580.65.06", "--gpu", "6.1"])
    [floor] = [f for f in json.loads(capsys.readouterr().out)["findings"] if f["check"] == "build-floor"]
    assert code == 2
    assert floor["fix"] == ('pip install "nvidia-cudnn-cu12==9.10.2.21" (in the range jax-cuda12-plugin 0.7.2 '
                            "[with-cuda] requires, the newest release in cudaresolve's table whose device code "
                            "runs on compute capability 6.1)")


def test_a_driver_pin_keeps_to_the_floors_of_an_extra_the_downgrade_broke(tmp_path, capsys):
    """On driver 535 (CUDA 12.2) the CUDA 12.8/12.9 wheels run by minor-version compatibility and
    the warning offers pins to CUDA 12.2. The plugin's [with-cuda] holds nvcc at >= 12.6.85 although
    the cuDNN downgrade left that extra unmet: no pin below it (12.2.140) is offered; cuBLAS, whose
    floor 12.1.3.1 admits CUDA 12.2's 12.2.5.6, is still pinned."""
    capsys.readouterr()
    code = main(["doctor", "--site-packages", str(site(tmp_path, "9.5.1.17")), "--json",
                 "--driver", "535.104.05", "--gpu", "8.0"])
    fixes = {f["subject"]: f["fix"] for f in json.loads(capsys.readouterr().out)["findings"]
             if f["check"] == "driver-floor"}
    assert code == 2
    assert fixes["nvidia-cuda-nvcc-cu12 12.8.93"] == "upgrade the driver to >= 570.26 for native support"
    assert 'pip install "nvidia-cublas-cu12==12.2.5.6"' in fixes["nvidia-cublas-cu12 12.8.4.1"]


def test_the_human_report_names_cudnn_the_consumer_and_the_floor(tmp_path, capsys):
    capsys.readouterr()
    code = main(["doctor", "--site-packages", str(site(tmp_path, "9.5.1.17")), *GPU])
    out = capsys.readouterr().out
    assert code == 2
    assert "build-floor" in out and "jax-cuda12-plugin 0.7.2" in out and "requires cuDNN >= 9.8" in out


def test_cudnn_at_the_floor_is_no_finding(tmp_path, capsys):
    code, findings = doctor(capsys, site(tmp_path, "9.8.0.87"))
    assert (code, [f for f in findings if f["check"] == "build-floor"]) == (0, [])


def test_an_extra_whose_other_requirements_are_absent_is_not_active(tmp_path, capsys):
    """Without the NVCC wheel [with-cuda] was not installed: cuDNN 9.5 is torch's, not the plugin's."""
    code, findings = doctor(capsys, site(tmp_path, "9.5.1.17", {"nvidia-cublas-cu12": "12.8.4.1"}))
    assert (code, [f for f in findings if f["check"] == "build-floor"]) == (0, [])


def test_an_extra_whose_only_requirement_is_below_is_not_taken_as_asked_for(tmp_path, capsys):
    """An extra naming only cuDNN looks the same asked for or not: the lock's rule (not asked for) holds."""
    root = site(tmp_path, "9.5.1.17", {}, ('nvidia-cudnn-cu12>=9.8; extra == "with-cuda"',))
    code, findings = doctor(capsys, root)
    assert (code, [f for f in findings if f["check"] == "build-floor"]) == (0, [])


def test_a_requirement_without_an_extra_sets_a_floor_too(tmp_path, capsys):
    """torch pins its cuDNN without an extra: a second install that downgrades it is the same error."""
    root = tmp_path / "site"
    make_dist_info(root, "torch", "2.8.0", requires=('nvidia-cudnn-cu12==9.10.2.21; platform_system == "Linux"',))
    make_dist_info(root, "nvidia-cudnn-cu12", "9.5.1.17")
    code, findings = doctor(capsys, root)
    [floor] = [f for f in findings if f["check"] == "build-floor"]
    assert code == 2 and floor["subject"] == "torch 2.8.0"
    assert floor["message"].startswith("requires cuDNN >= 9.10.2.21: 'nvidia-cudnn-cu12==9.10.2.21', but")
    assert floor["fix"] == 'pip install "nvidia-cudnn-cu12==9.10.2.21" (the range torch 2.8.0 requires)'


def test_libraries_consumers_do_not_check_have_no_floor(tmp_path, capsys):
    """The CUDA runtime is not in [build_floors]: a consumer's pin on it missed is pip's business."""
    root = tmp_path / "site"
    make_dist_info(root, "torch", "2.8.0", requires=("nvidia-cuda-runtime-cu12==12.8.90",))
    make_dist_info(root, "nvidia-cuda-runtime-cu12", "12.8.57")
    code, findings = doctor(capsys, root)
    assert [f for f in findings if f["check"] == "build-floor"] == []


@pytest.mark.parametrize("requirement, installed, floor", [
    ("x>=9.8,<10", "9.5.1", "9.8"),
    ("x>=9.8,<10", "9.8.0", None),
    ("x>=9.8,<10", "10.1", None),  # above the upper bound: still loads
    ("x==9.10.2.21", "9.10.1", "9.10.2.21"),
    ("x==9.10.2.21", "9.11", None),
    ("x==9.10.*", "9.8", "9.10"),
    ("x==9.10.*", "9.11", None),
    ("x~=9.8", "9.5", "9.8"),
    ("x>9.8", "9.8", "9.8"),
    ("x<10", "9.5", None),
    ("x", "1", None),
])
def test_below_floor(requirement, installed, floor):
    found = below_floor(Requirement(requirement), Version(installed))
    assert found == (Version(floor) if floor else None)


def test_the_libraries_with_floors_are_the_issues_eight():
    assert {c for c in ("cudnn", "cublas", "nccl", "cusparse", "cufft", "cusolver", "nvrtc", "nvjitlink", "cudart",
                        "cupti") if components.checks_build_floor(c)} == {
        "cudnn", "cublas", "nccl", "cusparse", "cufft", "cusolver", "nvrtc", "nvjitlink"}
    assert set(components.load().build_floors.components) <= {row.name for row in components.load().component}


# -- the lock: the same check on a planned environment ------------------------------------------------


def test_the_check_judges_a_planned_environment():
    """A plan keeping the plugin with [with-cuda] asked for beside cuDNN 9.5 gets the finding: the lock
    refuses what the doctor reports."""
    env = planned(dist(PLUGIN, "0.7.2", *WITH_CUDA, extras={"with-cuda"}),
                  dist("nvidia-cudnn-cu12", "9.5.1.17"), dist("nvidia-cublas-cu12", "12.8.4.1"))
    [floor] = [f for f in judge(env, HOST).findings if f.check == Check.BUILD_FLOOR]
    assert floor.severity == Severity.ERROR
    assert floor.problem == BelowBuildFloor("cudnn", "nvidia-cudnn-cu12", Version("9.5.1.17"), "with-cuda",
                                            Requirement("nvidia-cudnn-cu12<10.0,>=9.8"), Version("9.8"))
    assert floor.fix == Explained(PipInstall((Requirement("nvidia-cudnn-cu12<10.0,>=9.8"),)),
                                  ConsumersRange(PLUGIN, Version("0.7.2"), "with-cuda"))


LOCK_WHEELS = (
    (PLUGIN, "0.7.2", WITH_CUDA, ("with-cuda",)),
    ("nvidia-cublas-cu12", "12.8.4.1", (), ()),
    ("nvidia-cuda-nvcc-cu12", "12.8.93", (), ()),
    ("nvidia-cudnn-cu12", "9.5.1.17", (), ()),
    ("nvidia-cudnn-cu12", "9.8.0.87", (), ()),
)


@pytest.mark.usefixtures("hermetic")
def test_a_locks_plan_never_holds_a_library_below_its_floor(server, tmp_path, capsys):
    """cuDNN 9.5 installed, then the plugin with [with-cuda] asked for: the resolver honours the
    extra's Requires-Dist, so the plan upgrades cuDNN and the judge finds nothing on it."""
    for name, version, requires, extras in LOCK_WHEELS:
        filename, data = make_wheel(name, version, requires=requires, extras=extras)
        server.add(filename, data)
    index = server.url + "/simple"
    root = tmp_path / "env"
    venv.create(root)
    python = str(root / "bin" / "python")
    subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-cache-dir",
                    "--index-url", index, "nvidia-cudnn-cu12==9.5.1.17"],
                   check=True, capture_output=True, text=True, env=hermetic_environ())
    capsys.readouterr()
    code = main(["install", f"{PLUGIN}[with-cuda]", *GPU, "--python", python, "--index-url", index, "--dry-run"])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert "nvidia-cudnn-cu12" in out and "9.8.0.87" in out, out
    assert "build-floor" not in out + err


# -- the fix, applied with real pip -----------------------------------------------------------------


@pytest.fixture(scope="module")
def find_links(tmp_path_factory) -> Path:
    found = tmp_path_factory.mktemp("floor-wheels")
    for name, version, requires, extras in LOCK_WHEELS:
        filename, data = make_wheel(name, version, requires=requires, extras=extras)
        (found / filename).write_bytes(data)
    return found


def pip(python: Path, find_links: Path, arguments: list[str]) -> None:
    offline = ["--no-index", "--find-links", str(find_links)] if arguments[0] == "install" else []
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), *arguments, *offline,
                           "--no-cache-dir", "--isolated"], capture_output=True, text=True, env=hermetic_environ())
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_printed_fix_clears_the_floor_in_a_real_venv(find_links, tmp_path):
    """pip install the plugin with [with-cuda], then a second install downgrades cuDNN (as another
    package's pin does): the doctor reports it; pasting its fix restores the plugin's range, and
    nothing is left at error."""
    root = tmp_path / "env"
    venv.create(root)
    python = root / "bin" / "python"
    pip(python, find_links, ["install", f"{PLUGIN}[with-cuda]"])
    pip(python, find_links, ["install", "nvidia-cudnn-cu12==9.5.1.17"])
    assert_the_pasted_floor_fix_clears(python, find_links, tmp_path / "c", 'pip install "nvidia-cudnn-cu12<10.0,>=9.8"')


def assert_the_pasted_floor_fix_clears(python: Path, find_links: Path, cache: Path, printed_start: str) -> None:
    """The venv's one error is a build floor whose printed fix starts `printed_start`; the command a
    person pastes is the fix's value, and applied with pip it leaves nothing at error."""

    def errors() -> list:
        findings = examine(target_for_python(str(python)), HOST, {"CUDARESOLVE_CACHE_DIR": str(cache)}).findings
        return [f for f in findings if f.severity == Severity.ERROR]

    [floor] = errors()
    assert floor.check == Check.BUILD_FLOOR
    printed = shown(floor).fix
    assert printed is not None and printed.startswith(printed_start)
    command = shlex.split(printed.split(" (")[0])  # what a person pastes: the command before the why
    assert [command[1:]] == pip_arguments(floor.fix)
    pip(python, find_links, command[1:])
    assert errors() == []


# -- the real plugin's metadata -----------------------------------------------------------------------

REAL_PLUGIN = "jax-cuda12-plugin==0.10.2"
# What its [with-cuda] installs, at the releases pip picked on 2026-11-26, as metadata-only wheels
# (the real ones are gigabytes); cuDNN held at 9.5, below the plugin's `nvidia-cudnn-cu12<10.0,>=9.8`.
REAL_WITH_CUDA = {
    "jax-cuda12-pjrt": "0.10.2", "nvidia-cublas-cu12": "12.9.1.4", "nvidia-cuda-cupti-cu12": "12.9.79",
    "nvidia-cuda-nvcc-cu12": "12.9.86", "nvidia-cuda-runtime-cu12": "12.9.79", "nvidia-cufft-cu12": "11.4.1.4",
    "nvidia-cusolver-cu12": "11.7.5.82", "nvidia-cusparse-cu12": "12.5.10.65", "nvidia-nccl-cu12": "2.27.7",
    "nvidia-nvjitlink-cu12": "12.9.86", "nvidia-cuda-nvrtc-cu12": "12.9.86", "nvidia-nvshmem-cu12": "3.3.20",
    "nvidia-cudnn-cu12": "9.5.1.17",
}


def test_the_real_plugins_with_cuda_floor_is_found(tmp_path):
    """jax-cuda12-plugin 0.10.2's own wheel (its METADATA with `sys_platform == "linux" and extra ==
    "with-cuda"` markers, its ELF files) beside its [with-cuda] wheels with cuDNN 9.5: the floor is
    named from the real metadata, and its fix clears it."""
    from wheel_cache import fetch_wheel

    plugin = fetch_wheel(REAL_PLUGIN)
    found = tmp_path / "wheels"
    found.mkdir()
    for name, version in (*REAL_WITH_CUDA.items(), ("nvidia-cudnn-cu12", "9.8.0.87")):
        filename, data = make_wheel(name, version)
        (found / filename).write_bytes(data)
    root = tmp_path / "env"
    venv.create(root)
    python = root / "bin" / "python"
    pip(python, found, ["install", "--no-deps", str(plugin), *(f"{n}=={v}" for n, v in REAL_WITH_CUDA.items())])

    def floors() -> list:
        findings = examine(target_for_python(str(python)), HOST, {"CUDARESOLVE_CACHE_DIR": str(tmp_path / "c")}).findings
        return [f for f in findings if f.check == Check.BUILD_FLOOR]

    [floor] = floors()
    assert shown(floor).subject == "jax-cuda12-plugin 0.10.2" and floor.severity == Severity.ERROR
    assert floor.problem == BelowBuildFloor("cudnn", "nvidia-cudnn-cu12", Version("9.5.1.17"), "with-cuda",
                                            Requirement("nvidia-cudnn-cu12<10.0,>=9.8"), Version("9.8"))
    for arguments in pip_arguments(floor.fix):
        pip(python, found, arguments)
    assert floors() == []
