"""Every release is judged by its own binaries: a release the knowledge table (data/wheel_facts.toml)
lacks borrows nothing from the releases beside it; the lock reads its wheel (once, cached by sha256)
and the doctor reads its installed files, so both reach the verdict the binary gives.
onnxruntime-gpu was the case: the table held one release per minor (1.31.1, 1.30.0, ...), and 1.31.0,
absent from it, was locked for driver 535 though it is a CUDA 13 build like its neighbours. The table
now holds a row of every x86_64 CPython 3.11 release of it (the generator's --every); a wheel it lacks
(another Python's, another machine's) is still read on demand, as are warp-lang's and ale-py's.
"""

from __future__ import annotations

import json
import re
import venv
import zipfile
from pathlib import Path
from typing import Optional

import pytest
from conftest import registry_python
from packaging.utils import canonicalize_name
from packaging.version import Version
from test_checks_planned import PLANNED, X86_64, on, planned, so
from test_elf import needs_readelf, readelf_dynamic
from wheel_cache import build_venv, cache_dir, fetch_wheel

from cudaresolve.binary.wheel import WheelFacts
from cudaresolve.checks.builds import cuda_builds
from cudaresolve.cli import main
from cudaresolve.env.imports import ImportModel
from cudaresolve.index.metadata import CoreMetadata
from cudaresolve.index.pages import ProjectFile
from cudaresolve.index.wheel_facts import LinkBudget
from cudaresolve.knowledge import wheel_facts
from cudaresolve.lockfile.pylock import read_pylock
from cudaresolve.resolve.candidates import Candidate, cuda_build
from cudaresolve.resolve.check import misfits
from cudaresolve.resolve.lock import Lock, LockedPackage, LockedWheel
from cudaresolve.resolve.planned import planned_environment, read_links
from cudaresolve.resolve.reasons import DriverTooOld
from cudaresolve.versions import CudaVersion

PROVIDER = "onnxruntime/capi/libonnxruntime_providers_cuda.so"
DRIVER_535 = ("--driver", "535.104.05", "--gpu", "8.6")


class RecordedIndex:
    """The index seam of `planned_environment`: metadata without requirements, and the binary facts
    recorded for each wheel file, and the import models (`models`: by file name); it notes which
    wheels were read and whose import model was asked for."""

    def __init__(self, facts: dict[str, WheelFacts], models: Optional[dict[str, ImportModel]] = None):
        self.facts = facts
        self.models = models or {}
        self.read: list[str] = []
        self.modelled: list[str] = []

    def metadata(self, file: ProjectFile) -> CoreMetadata:
        return CoreMetadata(file.name, str(file.version), "2.1", (), None, (), "pep658")

    def members(self, file: ProjectFile) -> tuple[str, ...]:
        """The wheel's member names, as its zip directory lists them: those of its recorded facts."""
        recorded = self.facts.get(file.filename)
        return tuple(member.path.split("!", 1)[1] for member in recorded.members) if recorded else ()

    def binary_facts(self, file: ProjectFile, *, deep: bool = False) -> WheelFacts:
        self.read.append(file.filename)
        row = wheel_facts.find(file.name, str(file.version), file.filename)
        return wheel_facts.from_record(row) if row is not None and not deep else self.facts[file.filename]

    def linked_facts(self, file: ProjectFile, budget: LinkBudget) -> WheelFacts:
        self.read.append(file.filename)
        return self.facts[file.filename]

    def import_model(self, file: ProjectFile, site: str) -> Optional[ImportModel]:
        self.modelled.append(file.filename)
        return self.models.get(file.filename)


def candidate(name: str, version: str, filename: str) -> Candidate:
    file = ProjectFile(filename, f"https://index.invalid/{filename}", canonicalize_name(name), Version(version), (),
                       None, None, None, None, "index")
    return Candidate(canonicalize_name(name), Version(version), file)


def test_a_wheel_absent_from_the_table_gets_no_facts_from_a_neighbour():
    """1.31.0's CPython 3.12 wheel is not in the table; its CPython 3.11 wheel and its neighbours
    1.30.0 and 1.31.1 are CUDA 13 builds there. Nothing says that wheel's CUDA without the wheel: no
    build by name, no row. Planned, its facts are its own wheel's: here a provider that links
    libcublas.so.12, so it is a CUDA 12 build, whatever the wheels beside it are."""
    filename = "onnxruntime_gpu-1.31.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    assert wheel_facts.find("onnxruntime-gpu", "1.31.0", filename) is None
    neighbours = {w.version for w in wheel_facts.releases("onnxruntime-gpu", "x86_64")}
    assert {"1.30.0", "1.31.0", "1.31.1"} <= neighbours
    assert cuda_build("onnxruntime-gpu", Version("1.31.0")) is None
    provider = so(f"{filename}!{PROVIDER}", needed=("libcublas.so.12", "libcudart.so.12"))
    index = RecordedIndex({filename: WheelFacts(filename, (provider,))})
    empty = planned()
    env = planned_environment(empty, [candidate("onnxruntime-gpu", "1.31.0", filename)], index)
    assert index.read == [filename]
    [elf] = env.elf_files
    assert (elf.path, elf.owners, elf.facts.needed) == (f"{PLANNED}/{PROVIDER}", ("onnxruntime-gpu",),
                                                        ("libcublas.so.12", "libcudart.so.12"))
    [build] = cuda_builds(env)
    assert (build.dist, build.version, build.cuda) == ("onnxruntime-gpu", "1.31.0", CudaVersion(12))


def test_a_table_release_is_its_row_and_an_unknown_component_release_joins_with_its_metadata():
    """1.31.1 has its row (no download: the index's reader answers from it); an NVIDIA component
    release the table lacks gets its CUDA from its name and version (data/components.toml), so its
    wheel is not read; a package the tables do not describe that ships shared objects (numpy) is read
    apart from the plan (read_links), so the lock sees what its files link (resolve/undeclared.py)
    without judging them: the plan holds none of its files."""
    row = wheel_facts.find("onnxruntime-gpu", "1.31.1", machine="x86_64")
    assert row is not None
    other = "nvidia_cublas_cu12-12.9.1.4-py3-none-manylinux_2_27_x86_64.whl"
    assert wheel_facts.find("nvidia-cublas-cu12", "12.9.1.4") is None
    numpy = "numpy-2.4.6-cp311-cp311-manylinux_2_28_x86_64.whl"
    index = RecordedIndex({numpy: WheelFacts(numpy, (so(f"{numpy}!numpy/_core/_multiarray_umath.so", needed=("libc.so.6",)),))})
    chosen = [candidate("onnxruntime-gpu", "1.31.1", row.filename), candidate("nvidia-cublas-cu12", "12.9.1.4", other),
              candidate("numpy", "2.4.6", numpy)]
    env = planned_environment(planned(markers=X86_64), chosen, index)
    assert index.read == [row.filename] and not any(elf.owner == "numpy" for elf in env.elf_files)
    links = read_links(env, chosen, index, LinkBudget(1 << 20))
    assert index.read == [row.filename, numpy] and list(links.files) == ["numpy"]
    builds = {b.dist: b.cuda for b in cuda_builds(env)}
    assert builds == {"onnxruntime-gpu": CudaVersion(13), "nvidia-cublas-cu12": CudaVersion(12, 9)}



def test_lock_check_reads_a_wheel_the_table_lacks_and_only_the_wheels_the_plan_reads():
    """`lock --check` (resolve.check.misfits) on a lock naming 1.31.0's CPython 3.12 wheel, which the
    table lacks: its build is read from the wheel (here a provider linking libcublas.so.13), so driver
    535 is refused by the CUDA 13 floor, and driver 580 is not. numpy is not read (the plan reads no
    wheel of a package the table does not cover), nor an NVIDIA component (its CUDA is its name and
    version's), which refuses by that: nvidia-cublas-cu12 12.9.1.4 on driver 470."""
    ort = "onnxruntime_gpu-1.31.0-cp312-cp312-manylinux_2_28_x86_64.whl"
    assert wheel_facts.find("onnxruntime-gpu", "1.31.0", ort) is None
    files = {"onnxruntime-gpu": ort, "numpy": "numpy-2.4.6-cp312-cp312-manylinux_2_28_x86_64.whl",
             "nvidia-cublas-cu12": "nvidia_cublas_cu12-12.9.1.4-py3-none-manylinux_2_27_x86_64.whl"}
    versions = {"onnxruntime-gpu": "1.31.0", "numpy": "2.4.6", "nvidia-cublas-cu12": "12.9.1.4"}
    packages = tuple(LockedPackage(canonicalize_name(name), Version(versions[name]), None,
                                   (LockedWheel(filename, f"https://index.invalid/{filename}", "0" * 64, 1),), None, None)
                     for name, filename in files.items())
    lock = Lock(packages=packages, requires_python=None, hosts=(), host_labels=(), index_urls=(), decisions=(),
                created_by="test")
    read: list[str] = []

    def reader(package, wheel):
        read.append(wheel.filename)
        return (so(f"{wheel.filename}!{PROVIDER}", needed=("libcublas.so.13", "libcudart.so.13")),)

    refused = {r.candidate.name: r.evidence for r in misfits(lock, [("h", on("535.104.05", "8.6"))], reader)}
    assert read == [ort]
    assert set(refused) == {"onnxruntime-gpu"} and isinstance(refused["onnxruntime-gpu"], DriverTooOld)
    assert refused["onnxruntime-gpu"].cuda == CudaVersion(13)
    assert misfits(lock, [("h", on("580.65.06", "8.6"))], reader) == []
    assert {r.candidate.name for r in misfits(lock, [("h", on("470.256.02", "8.6"))], reader)} == {
        "onnxruntime-gpu", "nvidia-cublas-cu12"}
    assert misfits(lock, [("h", on("535.104.05", "8.6"))]) == []  # without the reader: the tables alone (before)

# -- the lock against the registry, on real wheels ---------------------------------------------------


def provider_cuda_sonames(version: str, tmp_path: Path) -> list[str]:
    """The cuBLAS and CUDA runtime sonames (their suffix is the CUDA major) the CUDA provider of a
    real onnxruntime-gpu wheel needs, by readelf -d (the wheel is kept in the test cache)."""
    with zipfile.ZipFile(fetch_wheel(f"onnxruntime-gpu=={version}")) as archive:
        target = tmp_path / f"provider-{version}.so"
        target.write_bytes(archive.read(PROVIDER))
    return sorted(n for n in readelf_dynamic(target)["NEEDED"] if n.startswith(("libcublas", "libcudart")))


@pytest.fixture
def registry_lock(hermetic, tmp_path, capsys, monkeypatch, venv_with_pip):
    """`registry_lock(requirement, *host)` -> (exit code, output, locked versions) of `cudaresolve lock`
    against the registry pip uses by default, for an empty target; the lock's cache is kept in the
    test cache, so a wheel's facts are read once (by sha256), not per run."""
    monkeypatch.setenv("CUDARESOLVE_CACHE_DIR", str(cache_dir() / "lock-registry-cache"))
    python = registry_python(venv_with_pip(tmp_path / "target"), "onnxruntime-gpu")  # its pip names the default index

    def run(requirement: str, *host: str) -> tuple[int, str, dict[str, str]]:
        out_dir = tmp_path / f"out-{len(list(tmp_path.glob('out-*')))}"
        out_dir.mkdir()
        capsys.readouterr()
        code = main(["lock", requirement, "--python", python, "-o", str(out_dir / "pylock.toml"),
                     "--explain", *host])
        out, err = capsys.readouterr()
        written = out_dir / "pylock.toml"
        versions = {str(p.name): str(p.version) for p in read_pylock(str(written)).packages} if written.exists() else {}
        return code, out + err, versions

    return run


@needs_readelf
@pytest.mark.registry
def test_registry_lock_onnxruntime_on_driver_535_reads_the_release_the_table_lacks(registry_lock, tmp_path):
    """Before: `lock 'onnxruntime-gpu>=1.30,<1.32'` on driver 535 refused 1.31.1 (its row: CUDA 13)
    and locked 1.31.0, which the table lacked. Now 1.31.0 is judged by its own row (read from its wheel
    by the generator's --every; without the row, from the wheel itself: the same facts), its build
    CUDA 13, and refused for the same driver floor, which its CUDA 13 wheels meet first; readelf -d
    agrees that its provider needs CUDA 13 libraries. Unpinned, with
    the CUDA wheels of its extras, the lock chooses a release whose provider needs CUDA 12 ones."""
    code, out, versions = registry_lock("onnxruntime-gpu>=1.30,<1.32", *DRIVER_535)
    assert (code, versions) == (2, {}), out
    # its CUDA wheels ([cuda], added: the target has none) are CUDA 13's, which driver 535 cannot run
    assert re.search(r"\(required by onnxruntime-gpu 1\.31\.0\); nvidia-cuda-nvrtc 13\.[0-9.]+: driver 535\.104\.05 < 580\.65\.06 \(CUDA 13\.x floor\)", out), out
    needed = provider_cuda_sonames("1.31.0", tmp_path)
    assert "libcublas.so.13" in needed and all(n.endswith(".so.13") for n in needed), needed

    code, out, versions = registry_lock("onnxruntime-gpu[cuda,cudnn]", *DRIVER_535)
    assert code == 0, out
    chosen = versions["onnxruntime-gpu"]
    needed = provider_cuda_sonames(chosen, tmp_path)
    assert "libcublas.so.12" in needed and all(n.endswith(".so.12") for n in needed), needed

    # Asked for without its extras (before: 25 sets refused for libcurand.so.10, then "gave up"),
    # the lock adds [cuda,cudnn] and reaches the same release with the same CUDA wheels.
    code, plain_out, plain = registry_lock("onnxruntime-gpu", *DRIVER_535)
    assert (code, plain) == (0, versions), plain_out
    assert "[cuda,cudnn] added: its CUDA 12 libraries are not on the target" in plain_out, plain_out


# -- doctor, lock and lock --check agree on releases the table lacks, from the wheel itself --------

DRIVER_470 = ("--driver", "470.256.02", "--gpu", "8.0")
DRIVER_550 = ("--driver", "550.144.03", "--gpu", "8.9")
DRIVER_580 = ("--driver", "580.65.06", "--gpu", "8.9")
# (requirement, the host, the verdict: exit code of doctor, lock and lock --check alike, the CUDA the binary gives)
ABSENT = [
    ("warp-lang==1.19.0", DRIVER_550, 2, "13.4"),  # warp.so links the CUDA 13.4 runtime statically
    ("warp-lang==1.12.1", DRIVER_550, 0, "12.9"),  # CUDA 12.9 on a 12.4 driver: minor-version compatibility
    ("ale-py==0.12.1", DRIVER_470, 2, "12.6"),  # a vendored libcudart-<hash>.so.12.6.77
]


@pytest.fixture
def absent_links(tmp_path) -> Path:
    """A --find-links directory with the real wheels of ABSENT (from the test cache) and a stand-in
    numpy, which all of them require."""
    from index_server import make_wheel

    found = tmp_path / "links"
    found.mkdir()
    for requirement, *_ in ABSENT:
        wheel = fetch_wheel(requirement)
        (found / wheel.name).hardlink_to(wheel)
    name, data = make_wheel("numpy", "2.0.0")
    (found / name).write_bytes(data)
    return found


def driver_floor(capsys, argv: list[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out + err


@needs_readelf
@pytest.mark.parametrize("requirement, host, verdict, cuda", ABSENT, ids=[case[0] for case in ABSENT])
def test_doctor_lock_and_check_reach_one_verdict_on_a_release_the_table_lacks(
        hermetic, tmp_path, capsys, absent_links, requirement, host, verdict, cuda):
    """A release without a row of its own (`wheel_facts.find` is None, and no table gives its build by
    name): the doctor on a venv holding its real wheel, a fresh lock of it, and `lock --check` of a
    lock written for a newer driver all judge the CUDA its own binary carries, and agree. Before,
    `lock --check` read the tables only and passed every one of them (exit 0)."""
    name, _, version = requirement.partition("==")
    wheel = fetch_wheel(requirement)
    assert wheel_facts.find(name, version, wheel.name) is None and cuda_build(name, Version(version)) is None
    venv_root = build_venv([requirement])
    code, out = driver_floor(capsys, ["doctor", "--json", "--no-judge-fixes", "--python", str(venv_root / "bin" / "python"), *host])
    [finding] = [f for f in json.loads(out)["findings"] if f["check"] == "driver-floor"]
    assert (code, finding["problem"]["cuda"]) == (verdict, cuda), out
    floor = finding["problem"].get("floor")  # the doctor's driver floor, for an error

    target = tmp_path / "target"
    venv.create(target, with_pip=False)
    common = ["--python", str(target / "bin" / "python"), "--no-index", "--find-links", str(absent_links)]
    code, out = driver_floor(capsys, ["lock", requirement, *common, "-o", str(tmp_path / "pylock.fresh.toml"), *host])
    assert code == verdict, out
    if verdict:
        assert f"{name} {version}: driver-floor: built for CUDA {cuda}" in out, out

    code, out = driver_floor(capsys, ["lock", requirement, *common, "-o", str(tmp_path / "pylock.toml"), *DRIVER_580])
    assert code == 0, out
    code, out = driver_floor(capsys, ["lock", "--check", str(tmp_path / "pylock.toml"), *common, *host])
    assert code == verdict, out
    if verdict:
        assert f"{name} {version}: driver {host[1]} < {floor}" in out, out


def test_lock_check_offline_names_a_wheel_whose_facts_are_not_cached(hermetic, tmp_path, capsys, absent_links):
    """A locked wheel the table lacks, at a URL not fetched yet: `--offline` is one line naming the
    wheel, exit 3, not a pass; the same lock with the wheel on disk (file: URL) needs no index or pip
    configuration and is judged (ale-py's vendored CUDA 12.6 runtime on driver 470: exit 2)."""
    target = tmp_path / "target"
    venv.create(target, with_pip=False)
    python = ["--python", str(target / "bin" / "python")]
    lock_file = tmp_path / "pylock.toml"
    code, out = driver_floor(capsys, ["lock", "ale-py==0.12.1", *python, "--no-index", "--find-links", str(absent_links),
                                      "-o", str(lock_file), *DRIVER_580])
    assert code == 0, out
    code, out = driver_floor(capsys, ["lock", "--check", str(lock_file), *python, *DRIVER_470])
    assert code == 2 and "ale-py 0.12.1: driver 470.256.02 < 525.60.13" in out, out
    remote = tmp_path / "pylock.remote.toml"
    remote.write_text(lock_file.read_text().replace(absent_links.as_uri() + "/", "https://files.invalid/"))
    code, out = driver_floor(capsys, ["lock", "--check", str(remote), *python, "--offline", *DRIVER_470])
    assert code == 3 and out.strip().splitlines() == [
        f"cudaresolve: error: --offline: the binary facts of {fetch_wheel('ale-py==0.12.1').name} are not in the cache"], out


def test_a_component_release_without_a_row_is_read_when_its_component_binds_versioned_symbols():
    """cuSPARSE binds nvJitLink's versioned names (`__nvJitLinkGetErrorLogSize_12_9`), which only a
    release's own bytes tell: one the table lacks is read; the CUDA runtime binds none, so its CUDA
    (by name and version) is all the plan needs of it."""
    from cudaresolve.resolve.planned import judged_by_binaries

    [row] = [w for w in wheel_facts.releases("nvidia-cusparse-cu12", "x86_64") if w.version == "12.5.10.65"]
    assert judged_by_binaries(row.name, Version(row.version), row.filename, "x86_64")  # its row
    absent = "nvidia_cusparse_cu12-12.9.99.1-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"
    assert wheel_facts.find("nvidia-cusparse-cu12", "12.9.99.1", absent) is None
    assert judged_by_binaries("nvidia-cusparse-cu12", Version("12.9.99.1"), absent, "x86_64")
    runtime = "nvidia_cuda_runtime_cu12-12.99.1-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl"
    assert not judged_by_binaries("nvidia-cuda-runtime-cu12", Version("12.99.1"), runtime, "x86_64")


@pytest.mark.registry
def test_registry_lock_torchcodec_on_driver_535_takes_an_older_cuda_12_release(registry_lock):
    """torchcodec's newest releases are CUDA 13 builds by their binaries alone (libcudart.so.13) and
    driver 535 runs no CUDA 13: each is set aside, naming the file, and an older CUDA 12 release is
    locked (before: exit 2 naming torchcodec 0.17.0's libcudart.so.13)."""
    code, out, versions = registry_lock("torchcodec", "--driver", "535.104.05", "--gpu", "8.0")
    assert code == 0, out
    aside = [line.strip() for line in out.splitlines()
             if line.strip().startswith("torchcodec ") and ": a CUDA 13 build: its torchcodec/" in line and "links libcudart.so.13" in line]
    assert aside and all(not line.startswith(f"torchcodec {versions['torchcodec']}:") for line in aside), out
