"""Issue 13's acceptance scenarios, end to end through `cudaresolve lock` against the fake CUDA index
(tests/fake_cuda_index.py on 127.0.0.1), for a target interpreter that is an empty venv (or one holding
a gcc-built extension), hosts given by flags or by `probe --json` host files.

Every lock is checked by two independent readers (tests/lock_oracles.py): real pip with the written
constraints file and the same requirements picks exactly the locked versions, and uv installs exactly
the pylock.toml's packages into a fresh empty venv. Expected versions and variants are derived from
data/ and the universe's plan where they can be, so a change of data moves them with it.
"""

from __future__ import annotations

import re
import subprocess
import sys
import venv
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

import pytest
from conftest import hermetic_environ
from fake_cuda_index import plan
from lock_oracles import locked, locked_with_source, pip_picks, pip_resolves_freely, uv_installs
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from cudaresolve.binary.loader import LoaderEnv
from cudaresolve.cli import main
from cudaresolve.env.distributions import Distribution
from cudaresolve.env.environment import Environment
from cudaresolve.env.interpreter import Target
from cudaresolve.knowledge import torch as torch_data
from cudaresolve.lockfile.pylock import read_pylock
from cudaresolve.resolve.lock import ExtraFor, Lock, ReasonKind
from cudaresolve.versions import CudaVersion

RTX_4090 = ("--driver", "550.144.03", "--gpu", "8.9")


# -- fixtures ----------------------------------------------------------------------------------------


pytestmark = pytest.mark.usefixtures("hermetic")


@dataclass
class Run:
    code: int
    out: str
    err: str
    pylock: Path
    constraints: Path
    requirements: tuple[str, ...]

    @property
    def lock(self) -> Lock:
        return read_pylock(str(self.pylock))

    @property
    def versions(self) -> dict[str, str]:
        return locked(self.lock)


@pytest.fixture
def lock_cli(cuda_index, empty_python, tmp_path, capsys):
    """`lock_cli(requirements, *flags, python=None, name="a")`: run `cudaresolve lock` in-process."""

    def run(requirements: Sequence[str], *flags: str, python: Optional[str] = None, name: str = "a") -> Run:
        out_dir = tmp_path / name
        out_dir.mkdir()
        pylock, constraints = out_dir / "pylock.toml", out_dir / "constraints.txt"
        argv = ["lock", *requirements, "--python", python or empty_python, "--index-url", cuda_index.index_url,
                "--torch-index-base", cuda_index.torch_index_base, "-o", str(pylock), "--write-constraints", str(constraints),
                "-q", *flags]
        capsys.readouterr()
        code = main(argv)
        captured = capsys.readouterr()
        return Run(code, captured.out, captured.err, pylock, constraints, tuple(requirements))

    return run


@pytest.fixture
def host_file(tmp_path, capsys):
    """`host_file(name, driver, gpu)`: a host JSON file as `cudaresolve probe --json` writes it."""

    def write(name: str, driver: str, gpu: str) -> str:
        capsys.readouterr()
        assert main(["probe", "--json", "--driver", driver, "--gpu", gpu]) == 0
        path = tmp_path / name
        path.write_text(capsys.readouterr().out)
        return str(path)

    return write


# -- checks shared by every scenario ------------------------------------------------------------------


def assert_oracles_agree(run: Run, tmp_path: Path, uv: Path, pip_requirements: Optional[Sequence[str]] = None) -> dict[str, str]:
    """The lock succeeded, and pip (constraints + the same requirements) and uv (pylock.toml) both
    install exactly it. Returns the locked name -> version."""
    assert run.code == 0, run.err
    versions = run.versions
    lock = run.lock
    assert locked_with_source(lock) == versions, "every locked package has a source (the target venv started empty)"
    requirements = list(pip_requirements if pip_requirements is not None else run.requirements)
    assert pip_picks(tmp_path, run.constraints, requirements) == versions
    assert uv_installs(uv, tmp_path, run.pylock) == versions
    for decision in lock.decisions:
        assert decision.chosen not in [r.candidate for r in decision.rejected if not r.installed], f"{decision.chosen} explained as rejected"
    return versions


def cuda_major(name: str, version: str) -> Optional[int]:
    """The CUDA major a distribution is built for, by the naming conventions alone (an oracle that
    does not use cudaresolve's tables): -cuNN suffix, cupy-cudaNNx, torch +cuNNN, unsuffixed nvidia-*
    (NVIDIA's CUDA 13 wheels)."""
    name = canonicalize_name(name)
    suffix = re.search(r"-cu(\d\d)$", name)
    if suffix:
        return int(suffix.group(1))
    cupy = re.fullmatch(r"cupy-cuda(\d\d)x", name)
    if cupy:
        return int(cupy.group(1))
    if name in ("torch", "torchvision", "torchaudio"):
        local = Version(version).local or ""
        return int(local[2:4]) if local.startswith("cu") else None
    if name.startswith("nvidia-"):
        return 13
    if name == "cuda-toolkit":
        return Version(version).major
    return None


def assert_one_major(versions: dict[str, str], major: int) -> None:
    majors = {name: cuda_major(name, version) for name, version in versions.items()}
    found = {name: m for name, m in majors.items() if m is not None}
    assert found, "no CUDA package in the lock"
    assert set(found.values()) == {major}, found


def universe_torch() -> dict[str, Optional[str]]:
    """Every torch build the fake index serves: version -> its variant name (None: the PyPI default)."""
    return {s.version: Version(s.version).local for s in plan() if s.name == "torch"}


def variant_cuda_major(version: str) -> int:
    """The CUDA major of a universe torch build, the PyPI default's from data/torch.toml."""
    parsed = Version(version)
    if parsed.local:
        return int(parsed.local[2:4])
    release = torch_data.release(parsed.public)
    default = next(v for v in release.variants if v.pypi_default and parsed.public in v.versions)
    return default.cuda.major


def label(version: str) -> str:
    return f"torch {version}"


# -- 1. RTX 4090, driver 550: torch==2.7.1 -> +cu128 ------------------------------------------------


def test_rtx4090_driver_550_torch_271_takes_cu128(lock_cli, tmp_path, uv, cuda_index):
    run = lock_cli(["torch==2.7.1"], *RTX_4090, "--explain")
    versions = assert_oracles_agree(run, tmp_path, uv)
    assert pip_resolves_freely(tmp_path, cuda_index.index_url, ["torch==2.7.1"])["torch"] == "2.7.1"  # the lock made the difference
    assert versions["torch"] == "2.7.1+cu128"
    assert_one_major(versions, 12)
    for text in torch_data.variant("2.7.1", "cu128").requires:  # every exact CUDA pin data/torch.toml gives
        requirement = Requirement(text)
        for spec in requirement.specifier:
            if spec.operator == "==" and "*" not in spec.version:
                assert Version(versions[canonicalize_name(requirement.name)]) == Version(spec.version), text
    assert "torch 2.7.1+cu118: older CUDA than +cu128, which runs here" in run.out
    assert "torch 2.7.1+cu126: older CUDA than +cu128, which runs here" in run.out
    for version, _variant in universe_torch().items():
        if variant_cuda_major(version) == 13:
            assert f"{label(version)}: driver 550.144.03 < " in run.out, version


# -- 2. GTX 1080 (6.1), driver 580: the newest torch with a cu126 build ------------------------------


def test_gtx1080_driver_580_takes_the_newest_cu126_build_not_the_pypi_default(lock_cli, tmp_path, uv):
    run = lock_cli(["torch"], "--driver", "580.65.06", "--gpu", "6.1", "--explain")
    versions = assert_oracles_agree(run, tmp_path, uv)
    builds = universe_torch()
    newest_cu126 = max((Version(v) for v, variant in builds.items() if variant == "cu126"), key=lambda v: Version(v.public))
    assert versions["torch"] == str(newest_cu126)
    newest = max((Version(v).public for v in builds), key=Version)
    assert Version(newest) > Version(newest_cu126.public)  # the PyPI default of a newer torch exists, and lost
    assert f"torch {newest}: no kernel image for compute capability 6.1 (GPU 0)" in run.out
    assert_one_major(versions, 12)


# -- 3. A800 (8.0), driver 470: the newest torch with a cu118 build -----------------------------------


def test_a800_driver_470_takes_the_newest_cu118_build_and_says_why_not_cuda_12_or_13(lock_cli, tmp_path, uv):
    run = lock_cli(["torch"], "--driver", "470.82.01", "--gpu", "8.0", "--explain")
    versions = assert_oracles_agree(run, tmp_path, uv)
    builds = universe_torch()
    newest_cu118 = max((Version(v) for v, variant in builds.items() if variant == "cu118"), key=lambda v: Version(v.public))
    assert versions["torch"] == str(newest_cu118)
    assert_one_major(versions, 11)
    for version in builds:
        major = variant_cuda_major(version)
        if major >= 12:
            assert re.search(rf"^  {re.escape(label(version))}: driver 470\.82\.01 < [\d.]+ \(CUDA {major}\.x floor\)$", run.out, re.M), version


# -- 4. an installed extension binding __nvJitLink*_12_9 ----------------------------------------------


@pytest.fixture
def extension_python(tmp_path, elf_builder) -> str:
    """A venv holding `nvext` 1.0: dist-info with RECORD, and nvext/_link.so binding
    __nvJitLinkCreate_12_9 / __nvJitLinkComplete_12_9 at version node libnvJitLink.so.12 of a
    gcc-built stub (RUNPATH to where the nvJitLink wheel installs it, as real extensions do)."""
    root = tmp_path / "ext-target"
    venv.create(root, with_pip=False)
    [site] = list((root / "lib").glob("python*/site-packages"))
    names = ("__nvJitLinkCreate_12_9", "__nvJitLinkComplete_12_9")
    stub = elf_builder.build(
        "libnvJitLink.so.12", "".join(f"int {n}(void) {{ return 0; }}\n" for n in names), soname="libnvJitLink.so.12",
        version_script=f"libnvJitLink.so.12 {{ global: {'; '.join(names)}; local: *; }};\n", directory="stub",
    )
    elf_builder.build(
        "_link.so", "".join(f"int {n}(void);\n" for n in names) + f"int nvext_link(void) {{ return {' + '.join(f'{n}()' for n in names)}; }}\n",
        soname="_link.so", link=[stub], runpath="$ORIGIN/../nvidia/nvjitlink/lib", directory=str(site / "nvext"),
    )
    dist_info = site / "nvext-1.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: nvext\nVersion: 1.0\n\n")
    (dist_info / "INSTALLER").write_text("pip\n")
    (dist_info / "RECORD").write_text(
        "nvext/_link.so,sha256=x,1\nnvext-1.0.dist-info/METADATA,,\nnvext-1.0.dist-info/INSTALLER,,\nnvext-1.0.dist-info/RECORD,,\n"
    )
    undefined = subprocess.run(["readelf", "-W", "--dyn-syms", str(site / "nvext" / "_link.so")], capture_output=True, text=True, check=True).stdout
    assert "__nvJitLinkComplete_12_9@libnvJitLink.so.12" in undefined  # the versioned binding the scenario needs
    return str(root / "bin" / "python")


def test_installed_extension_needing_nvjitlink_12_9_moves_torch_280_to_cu129(lock_cli, extension_python, tmp_path, uv):
    run = lock_cli(["torch==2.8.0"], "--driver", "575.57.08", "--gpu", "8.9", python=extension_python)
    versions = assert_oracles_agree(run, tmp_path, uv)
    assert versions["torch"] == "2.8.0+cu129"
    assert versions["nvidia-nvjitlink-cu12"] == "12.9.86"
    assert "nvext" not in versions  # installed, not asked for: stays out of the lock


def test_the_extensions_need_is_a_constraint_not_a_preference(lock_cli, extension_python, tmp_path, uv):
    """What makes scenario 4 the extension's doing: capped below 12.9, nvJitLink can only be +cu128's
    12.8.93, which the empty venv locks and the extension's venv refuses."""
    capped = ["torch==2.8.0", "nvidia-nvjitlink-cu12<12.9"]
    host = ("--driver", "575.57.08", "--gpu", "8.9")
    free = lock_cli(capped, *host, name="empty")
    versions = assert_oracles_agree(free, tmp_path, uv)
    assert (versions["torch"], versions["nvidia-nvjitlink-cu12"]) == ("2.8.0+cu128", "12.8.93")
    refused = lock_cli(capped, *host, python=extension_python, name="ext")
    assert refused.code == 2, refused.err
    extension = Path(extension_python).parents[1] / "lib"
    # both sides of the conflict, the extension's with its file and the symbol it binds
    assert re.search(r"no release of nvidia-nvjitlink-cu12 fits both: the request \(command line\) needs nvidia-nvjitlink-cu12<12\.9, "
                     rf"{re.escape(str(extension))}/python[\d.]+/site-packages/nvext/_link\.so \(nvext 1\.0, binding "
                     r"__nvJitLink(Create|Complete)_12_9\) needs nvidia-nvjitlink-cu12>=12\.9", refused.err.replace("\n  ", " ")), refused.err
    assert not refused.pylock.exists() and not refused.constraints.exists()


def test_a_binary_need_nothing_fits_names_the_installed_file_and_its_symbol(lock_cli, extension_python, tmp_path):
    """Under pip's constraint below 12.9, no nvJitLink meets the extension's binding: the refusal
    says which installed file of which distribution binds which symbol."""
    (tmp_path / "c.txt").write_text("nvidia-nvjitlink-cu12<12.9\n")
    refused = lock_cli(["torch==2.8.0"], "--driver", "575.57.08", "--gpu", "8.9", "-c", str(tmp_path / "c.txt"), python=extension_python)
    assert refused.code == 2, refused.err
    assert re.search(r"nothing fits nvidia-nvjitlink-cu12>=12\.9 \(required by /\S+/site-packages/nvext/_link\.so \(nvext 1\.0\), "
                     r"which binds __nvJitLink(Create|Complete)_12_9\) under pip's constraint nvidia-nvjitlink-cu12<12\.9",
                     refused.err.replace("\n  ", " ")), refused.err


# -- the lock prefers what the doctor will not warn about -------------------------------------------


def test_a_driver_of_cuda_130_gets_a_cuda_130_nvjitlink_the_doctor_does_not_warn_about(lock_cli, tmp_path, uv):
    """nvJitLink 13.0.88 and 13.2.86 both run on driver 580 (CUDA 13.0); 13.2 only by minor-version
    compatibility, which the doctor warns about (so `--strict` fails): the lock takes 13.0, and the
    doctor's checks on the planned environment find nothing to warn about."""
    from cudaresolve.host.facts import HostFacts

    run = lock_cli(["nvidia-nvjitlink"], "--driver", "580.65.06", "--gpu", "8.9")
    versions = assert_oracles_agree(run, tmp_path, uv)
    newest = max((Version(v) for n, v in plan_versions("nvidia-nvjitlink")), default=None)
    assert newest is not None and newest.release[:2] > (13, 0)  # the universe has a newer minor to refuse
    assert versions == {"nvidia-nvjitlink": "13.0.88"}
    [decision] = run.lock.decisions
    assert [(str(r.candidate.version), r.rule.value) for r in decision.rejected] == [(str(newest), "minor-compat")]
    [host] = [HostFacts.from_dict(facts) for facts in run.lock.hosts]
    assert host.driver.cuda == CudaVersion(13, 0)
    assert minor_version_warnings(versions, host) == []
    # the same check does warn about the newer release the lock passed over: the test can fail
    assert minor_version_warnings({"nvidia-nvjitlink": str(newest)}, host) == ["nvidia-nvjitlink"]


def test_a_driver_of_cuda_128_gets_torch_280s_cu128_build_not_cu129(lock_cli, tmp_path, uv):
    """torch 2.8.0 has +cu129 and +cu128 builds; driver 570 (CUDA 12.8) runs +cu129 only by
    minor-version compatibility: the lock takes +cu128, with the nvJitLink it pins, and the doctor's
    checks on the planned environment warn about neither."""
    from cudaresolve.host.facts import HostFacts

    run = lock_cli(["torch==2.8.0"], "--driver", "570.86.15", "--gpu", "8.9")
    versions = assert_oracles_agree(run, tmp_path, uv)
    assert (versions["torch"], versions["nvidia-nvjitlink-cu12"]) == ("2.8.0+cu128", "12.8.93")
    [host] = [HostFacts.from_dict(facts) for facts in run.lock.hosts]
    assert minor_version_warnings(versions, host) == []
    assert minor_version_warnings({**versions, "torch": "2.8.0+cu129"}, host) == ["torch"]


def minor_version_warnings(versions: dict[str, str], host) -> list[str]:
    """The distributions the doctor's checks warn about on `host` for minor-version compatibility,
    were `versions` installed (a planned environment of their metadata)."""
    from cudaresolve.checks import judge
    from cudaresolve.verdicts.records import MinorCompat

    planned = [Distribution(name, Version(version), (), "pip", f"/planned/{name}-{version}.dist-info", ()) for name, version in versions.items()]
    findings = judge(planned_environment_of(planned), host).findings
    return sorted(str(f.subject.distribution) for f in findings if isinstance(f.problem, MinorCompat))


def plan_versions(name: str) -> list[tuple[str, str]]:
    return [(spec.name, spec.version) for spec in plan() if canonicalize_name(spec.name) == name]


def planned_environment_of(distributions: list[Distribution]) -> Environment:
    """A planned environment of plain distributions (no files), as the lock's judge sees one."""
    markers = {"platform_machine": "x86_64", "sys_platform": "linux", "python_version": "3.11"}
    loader = LoaderEnv(machine="x86_64", default_dirs=(), real_path=lambda p: p, read_header=lambda path: None)
    return Environment(target=Target(site_packages=("/planned",), markers=tuple(sorted(markers.items()))),
                       distributions=tuple(distributions), elf_files=(), loader=loader)


# -- 5. torch + cupy: one CUDA major ---------------------------------------------------------------


@pytest.mark.parametrize(
    "host, major",
    [(RTX_4090, 12), (("--driver", "580.65.06", "--gpu", "8.9"), 13)],
    ids=["driver-550", "driver-580-ada"],
)
def test_torch_and_cupy_share_one_cuda_major(lock_cli, tmp_path, uv, host, major):
    run = lock_cli(["torch", "cupy"], *host)
    assert run.code == 0, run.err
    cupys = [name for name in run.versions if name.startswith("cupy-cuda")]
    assert cupys == [f"cupy-cuda{major}x"]
    # pip has no abstract cupy; the lock asks for [ctk] when torch's set lacks CuPy's libraries
    # (torch's cu130 build declares none of them)
    added = next(p.reason.added_extras for p in run.lock.packages if p.name == cupys[0])
    assert (added == ()) == (major == 12)
    versions = assert_oracles_agree(run, tmp_path, uv, ["torch", cupys[0] + (f"[{','.join(added)}]" if added else "")])
    assert cuda_major("torch", versions["torch"]) == major
    assert_one_major(versions, major)


def test_cupy_alone_on_a_host_given_by_flags_gets_its_ctk_extra(lock_cli, tmp_path, uv):
    """CuPy loads its CUDA libraries undeclared; a host given by flags has none of this machine's,
    so the lock asks for CuPy's own [ctk] extra, and says why."""
    run = lock_cli(["cupy"], "--driver", "550.144.03", "--gpu", "8.6")
    versions = assert_oracles_agree(run, tmp_path, uv, ["cupy-cuda12x[ctk]"])
    assert versions["cupy-cuda12x"] == "14.2.0" and Version(versions["cuda-toolkit"]).major == 12
    package = next(p for p in run.lock.packages if p.name == "cupy-cuda12x")
    assert (package.reason.added_extras, package.reason.extra_for, package.reason.extras) == (("ctk",), ExtraFor.LIBRARIES, ("ctk",))
    assert {"nvidia-cublas-cu12", "nvidia-cuda-runtime-cu12", "nvidia-cufft-cu12", "nvidia-curand-cu12",
            "nvidia-cusolver-cu12", "nvidia-cusparse-cu12", "nvidia-cuda-nvrtc-cu12"} <= set(versions)
    assert_one_major(versions, 12)
    # driver 550 is CUDA 12.4: the toolkit set it runs natively (cuSPARSE 12.3.1.170 binds nvJitLink 12.4)
    assert (versions["cuda-toolkit"], versions["nvidia-nvjitlink-cu12"]) == ("12.4.1", "12.4.127")
    # on driver 575 (CUDA 12.9) the 12.9 set: the index's cuSPARSE wheel has no row in the table
    # (another file name): the lock reads it, finds it binds __nvJitLinkComplete_12_9 and takes
    # nvJitLink 12.9, as the row gives on the registry (not an nvJitLink whose library lacks that name)
    newer = lock_cli(["cupy"], "--driver", "575.57.08", "--gpu", "8.6", name="b")
    assert newer.code == 0, newer.err
    assert Version(newer.versions["nvidia-nvjitlink-cu12"]) >= Version("12.9")


def test_cupy_beside_torch_takes_torchs_libraries_and_no_extra(lock_cli):
    run = lock_cli(["torch", "cupy"], *RTX_4090)
    assert run.code == 0, run.err
    package = next(p for p in run.lock.packages if p.name == "cupy-cuda12x")
    assert package.reason.added_extras == () and package.reason.extras is None


# -- 6. numba and its advisory ---------------------------------------------------------------------


def test_numba_range_takes_0591(lock_cli, tmp_path, uv):
    run = lock_cli(["numba>=0.59,<0.60"], *RTX_4090)
    assert assert_oracles_agree(run, tmp_path, uv)["numba"] == "0.59.1"


def test_numba_0590_is_refused_for_its_advisory_unless_allowed(lock_cli, tmp_path, uv):
    refused = lock_cli(["numba==0.59.0"], *RTX_4090, name="refused")
    assert refused.code == 2
    assert "numba-0.59.0-cg-cache" in refused.err
    assert "Traceback" not in refused.err and "resolvelib" not in refused.err
    assert not refused.pylock.exists() and not refused.constraints.exists()
    allowed = lock_cli(["numba==0.59.0"], *RTX_4090, "--allow-advisory", "numba-0.59.0-cg-cache", name="allowed")
    assert assert_oracles_agree(allowed, tmp_path, uv)["numba"] == "0.59.0"


# -- 7. fleets ------------------------------------------------------------------------------------


def test_fleet_that_shares_no_cuda_major_names_both_hosts_and_their_facts(lock_cli, host_file):
    old = host_file("old-driver.json", "470.82.01", "8.0")
    blackwell = host_file("blackwell.json", "575.57.08", "12.0")
    run = lock_cli(["torch"], "--host", old, "--host", blackwell)
    assert run.code == 2, run.err
    first = run.err.replace("\n  ", " ").splitlines()[0]  # the cause, its wrapped lines joined
    for fact in (old, "470.82.01", blackwell, "(12.0)"):
        assert fact in first, first
    assert not run.pylock.exists()


def test_fleet_that_fits_gets_one_lock_valid_on_both(lock_cli, host_file, tmp_path, uv):
    ampere = host_file("ampere.json", "550.144.03", "8.6")
    blackwell = host_file("blackwell.json", "575.57.08", "12.0")
    run = lock_cli(["torch"], "--host", ampere, "--host", blackwell)
    versions = assert_oracles_agree(run, tmp_path, uv)
    # CUDA 12 (driver 550) with sm_120 code: the newest such build in the universe is 2.8.0+cu129
    # (2.14.1's cu126 stops at sm_90).
    assert versions["torch"] == "2.8.0+cu129"
    assert_one_major(versions, 12)
    assert run.lock.host_labels == (ampere, blackwell)


# -- the binary need metadata leaves unpinned ------------------------------------------------------


def test_cusparse_123_brings_an_nvjitlink_it_can_load(lock_cli, tmp_path, uv, cuda_index):
    run = lock_cli(["nvidia-cusparse-cu12==12.3.1.170"], *RTX_4090, name="alone")
    versions = assert_oracles_agree(run, tmp_path, uv)
    assert Version(versions["nvidia-nvjitlink-cu12"]) >= Version("12.4")
    # Capped, the lock takes the one release that binds: 12.4, not 12.1 ...
    capped = lock_cli(["nvidia-cusparse-cu12==12.3.1.170", "nvidia-nvjitlink-cu12<12.5"], *RTX_4090, name="capped")
    assert assert_oracles_agree(capped, tmp_path, uv)["nvidia-nvjitlink-cu12"] == "12.4.127"
    # ... and below 12.4 nothing fits, though the metadata alone lets pip take 12.1.
    too_old = ["nvidia-cusparse-cu12==12.3.1.170", "nvidia-nvjitlink-cu12<12.4"]
    assert pip_resolves_freely(tmp_path, cuda_index.index_url, too_old)["nvidia-nvjitlink-cu12"] == "12.1.105"
    refused = lock_cli(too_old, *RTX_4090, name="too-old")
    assert refused.code == 2
    assert "nvidia-nvjitlink-cu12" in refused.err and "12.4" in refused.err


# -- a kept installed version is locked with its wheel ---------------------------------------------


def test_kept_installed_versions_are_in_the_lock_with_their_wheels(lock_cli, tmp_path, uv, cuda_index):
    target = tmp_path / "kept-target"
    venv.create(target, with_pip=False)
    python = str(target / "bin" / "python")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-cache-dir", "--index-url",
         cuda_index.index_url, "numba==0.59.1"],
        check=True, capture_output=True, text=True, env=hermetic_environ(),
    )
    run = lock_cli(["numba"], *RTX_4090, python=python)
    versions = assert_oracles_agree(run, tmp_path, uv)
    assert versions["numba"] == "0.59.1"  # kept, not upgraded to 0.60.0
    assert all(p.reason.kind is ReasonKind.KEPT for p in run.lock.packages)
    assert re.search(r"^  numba==0.59.1 +installed, kept$", run.out, re.M), run.out
