"""A package's own CUDA runtime sets its driver floor, in the doctor and the lock alike: ale-py 0.12.1
vendors libcudart 12.6.77 under auditwheel's hashed name (no DT_NEEDED names libcudart.so.12),
warp-lang links cudart statically (no DT_NEEDED on a CUDA library at all; 1.12.1 ... 1.17.0 are
CUDA 12.9 builds, 1.18.0 and 1.19.0 CUDA 13.4). Real wheels; readelf is the oracle of what the
binaries need and define, the wheel's CUDA classifier a second reader of warp's major.
"""

from __future__ import annotations

import json
import os
import sys
import venv
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import registry_python
from index_server import make_wheel
from test_doctor_checks import SP, dist, elf, environment
from test_elf import needs_readelf, readelf_dynamic, readelf_versions
from wheel_cache import build_venv, cache_dir, fetch_wheel, fetch_wheels

from cudaresolve.binary.facts import CudaRuntime
from cudaresolve.checks.builds import RuntimeFile, cuda_builds
from cudaresolve.cli import main
from cudaresolve.lockfile.pylock import read_pylock
from cudaresolve.versions import CudaVersion

ALE = "ale-py==0.12.1"
ALE_RUNTIME = "ale_py.libs/libcudart-09529672.so.12.6.77"
DRIVER_470 = ("--driver", "470.256.02", "--gpu", "8.0")
DRIVER_550 = ("--driver", "550.144.03", "--gpu", "8.9")


def doctor(capsys, venv_root: Path, host: tuple[str, ...]) -> tuple[int, list[dict]]:
    capsys.readouterr()
    code = main(["doctor", "--json", "--no-judge-fixes", "--python", str(venv_root / "bin" / "python"), *host])
    out, err = capsys.readouterr()
    assert err == ""
    return code, [f for f in json.loads(out)["findings"] if f["check"] == "driver-floor"]


def runtime_fact(finding: dict) -> dict:
    [fact] = [f for f in finding["facts"] if f["type"] == "cuda-runtime-in"]
    return fact


def site_packages(venv_root: Path) -> Path:
    return venv_root / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"


def warp_classifier_major(version: str, keep: bool = True) -> int:
    """The CUDA major warp-lang's METADATA declares (a reader independent of the binary); the wheel
    is kept in the test cache unless not `keep`."""
    requirement = f"warp-lang=={version}"
    with zipfile.ZipFile(fetch_wheel(requirement) if keep else fetch_wheels([requirement])[0]) as archive:
        metadata = archive.read(f"warp_lang-{version}.dist-info/METADATA").decode()
    [major] = [line.rsplit(":: ", 1)[1] for line in metadata.splitlines() if line.startswith("Classifier: Environment :: GPU :: NVIDIA CUDA ::")]
    return int(major)


# -- the rule, on recorded facts -------------------------------------------------------------------


def runtime_elf(relpath: str, owner: str, runtime: CudaRuntime):
    made = elf(relpath, owner)
    return replace(made, facts=replace(made.facts, cuda_runtime=runtime))


def test_a_packages_own_runtime_is_its_cuda_the_newest_of_one_major():
    """The newest runtime of a package is its CUDA (its release's minor, or the major alone when no
    byte dates it); runtimes of two majors, an undated static one, and the runtime of a package the
    tables know (nvidia-cuda-runtime-cu12 is a libcudart) decide nothing here."""
    static = CudaRuntime("static", 12, "12.9.86", "toolkit note")
    env = environment(
        dist("warp-lang", "1.17.0"), dist("two-majors", "1.0"), dist("undated", "1.0"), dist("plain", "1.0"),
        dist("nvidia-cuda-runtime-cu12", "12.8.90"),
        elf_files=(
            runtime_elf("warp/bin/warp.so", "warp-lang", static),
            runtime_elf("warp/bin/warp-clang.so", "warp-lang", CudaRuntime("static", 12, "12.4.131", "toolkit note")),
            runtime_elf("two/a.so", "two-majors", CudaRuntime("static", 12, "12.9.86", "toolkit note")),
            runtime_elf("two/b.so", "two-majors", CudaRuntime("static", 13, "13.0.88", "toolkit note")),
            runtime_elf("undated/a.so", "undated", CudaRuntime("static", None, None)),
            runtime_elf("plain/libcudart-0a1b2c3d.so.12", "plain", CudaRuntime("shared", 12, None)),
            runtime_elf("nvidia/cuda_runtime/lib/libcudart.so.12", "nvidia-cuda-runtime-cu12", CudaRuntime("shared", 12, None)),
        ),
    )
    builds = {b.dist: b for b in cuda_builds(env)}
    assert builds["warp-lang"].cuda == CudaVersion(12, 9)
    assert builds["warp-lang"].runtime == RuntimeFile(f"{SP}/warp/bin/warp.so", static)
    assert builds["plain"].cuda == CudaVersion(12) and builds["plain"].runtime is not None
    assert "two-majors" not in builds and "undated" not in builds
    assert builds["nvidia-cuda-runtime-cu12"].cuda == CudaVersion(12, 8) and builds["nvidia-cuda-runtime-cu12"].runtime is None


# -- the doctor ------------------------------------------------------------------------------------


@needs_readelf
def test_ale_py_vendored_cuda_12_6_runtime_is_an_error_on_driver_470_and_minor_compat_on_550(capsys):
    """Before: 0 errors on driver 470 (no DT_NEEDED names a CUDA major). Now the version node
    libcudart.so.12 (readelf -V) gives the major and the file name 12.6.77 the release: on 470
    (CUDA 11.4) an error naming the file; on 550 (CUDA 12.4) minor-version compatibility, a warning."""
    root = build_venv([ALE])
    runtime = site_packages(root) / ALE_RUNTIME
    assert readelf_versions(runtime)[0] == ["libcudart.so.12"]
    extension = next((site_packages(root) / "ale_py").glob("_ale_py*.so"))
    assert not [n for n in readelf_dynamic(extension)["NEEDED"] if n.startswith("libcudart.so")]

    code, [finding] = doctor(capsys, root, DRIVER_470)
    assert (code, finding["severity"], finding["subject"]) == (2, "error", "ale-py 0.12.1")
    assert finding["problem"]["cuda"] == "12.6" and finding["problem"]["floor"] == "525.60.13"
    assert runtime_fact(finding) == {"type": "cuda-runtime-in", "file": str(runtime), "linkage": "shared", "major": 12,
                                     "release": "12.6.77", "read_from": "file name"}
    assert str(runtime) in "\n".join(finding["evidence"]) and "12.6.77" in "\n".join(finding["evidence"])
    assert finding["fix"].startswith("upgrade the driver to >= 525.60.13")

    code, [finding] = doctor(capsys, root, DRIVER_550)
    assert (code, finding["severity"]) == (0, "warning")


@needs_readelf
@pytest.mark.parametrize("version, severity", [("1.19.0", "error"), ("1.12.1", "warning")])
def test_warp_static_runtime_sets_its_floor_from_the_toolkit_note(capsys, version, severity):
    """warp.so needs no CUDA library (readelf -d); its cubins' toolkit note gives its runtime's release.
    On driver 550 the CUDA 13.4 build (1.19.0) is an error, the CUDA 12.9 build (1.12.1) runs under
    minor-version compatibility. The major agrees with the wheel's CUDA classifier."""
    root = build_venv([f"warp-lang=={version}"])
    library = site_packages(root) / "warp" / "bin" / "warp.so"
    assert not [n for n in readelf_dynamic(library)["NEEDED"] if "cud" in n]
    code, [finding] = doctor(capsys, root, DRIVER_550)
    fact = runtime_fact(finding)
    assert (fact["file"], fact["linkage"], fact["read_from"]) == (str(library), "static", "toolkit note")
    assert fact["major"] == warp_classifier_major(version)
    assert finding["severity"] == severity and code == (2 if severity == "error" else 0)
    assert finding["problem"]["cuda"] == ".".join(fact["release"].split(".")[:2])
    if severity == "error":
        assert finding["fix"].startswith("upgrade the driver to >= 580.65.06")


# -- the lock --------------------------------------------------------------------------------------


@pytest.fixture
def links(tmp_path) -> Path:
    """A --find-links directory with the real warp-lang 1.12.1 and 1.19.0 and ale-py 0.12.1 wheels
    (linked from the test cache) and a stand-in numpy, which all of them require."""
    found = tmp_path / "links"
    found.mkdir()
    for requirement in ("warp-lang==1.12.1", "warp-lang==1.19.0", ALE):
        wheel = fetch_wheel(requirement)
        os.link(wheel, found / wheel.name)
    name, data = make_wheel("numpy", "2.0.0")
    (found / name).write_bytes(data)
    return found


@pytest.fixture
def lock_links(hermetic, tmp_path, links, capsys):
    """`lock_links(requirement, *host)` -> (exit code, output, locked versions or None) for an empty target."""
    target = tmp_path / "target"
    venv.create(target, with_pip=False)

    def run(requirement: str, *host: str) -> tuple[int, str, dict[str, str]]:
        out_dir = tmp_path / f"out-{len(list(tmp_path.glob('out-*')))}"
        out_dir.mkdir()
        capsys.readouterr()
        code = main(["lock", requirement, "--python", str(target / "bin" / "python"), "--no-index", "--find-links", str(links),
                     "-o", str(out_dir / "pylock.toml"), "--explain", *host])
        out, err = capsys.readouterr()
        written = out_dir / "pylock.toml"
        versions = {str(p.name): str(p.version) for p in read_pylock(str(written)).packages} if written.exists() else {}
        return code, out + err, versions

    return run


def test_lock_warp_on_driver_550_refuses_the_cuda_13_build_and_takes_the_cuda_12_one(lock_links):
    """Before: `lock warp-lang` on driver 550 locked 1.19.0 (CUDA 13.4: its runtime cannot start on a
    CUDA 12.4 driver). Now the planned environment carries the wheel's binary facts, the judge
    refuses 1.19.0 for its toolkit note's CUDA and the lock takes 1.12.1."""
    code, out, versions = lock_links("warp-lang", *DRIVER_550)
    assert code == 0, out
    assert versions["warp-lang"] == "1.12.1"
    assert "warp-lang 1.19.0: driver-floor: built for CUDA 13.4: driver 550.144.03 < 580.65.06 (CUDA 13.x floor)" in out


def test_lock_ale_py_on_driver_470_is_refused_naming_its_runtime_floor(lock_links):
    """Before: ale-py 0.12.1 was locked for driver 470. Now its vendored CUDA 12.6 runtime refuses it;
    on driver 550 (CUDA 12 by minor-version compatibility) it is locked."""
    code, out, versions = lock_links("ale-py", *DRIVER_470)
    assert (code, versions) == (2, {}), out
    assert "ale-py 0.12.1: driver-floor: built for CUDA 12.6: driver 470.256.02 < 525.60.13 (CUDA 12.x floor)" in out
    code, out, versions = lock_links("ale-py", *DRIVER_550)
    assert code == 0 and versions["ale-py"] == "0.12.1", out


@pytest.mark.registry
def test_registry_lock_warp_on_driver_550_takes_the_newest_cuda_12_release(hermetic, tmp_path, capsys, monkeypatch, venv_with_pip):
    """Unpinned `lock warp-lang` against the registry pip uses by default: every release newer than
    the one locked is refused by the driver floor its own wheel gives, and the locked release is a
    CUDA 12 build by its wheel's classifier. The lock's
    cache is kept under the test cache: each wheel's facts are read once (by sha256), not per run."""
    monkeypatch.setenv("CUDARESOLVE_CACHE_DIR", str(cache_dir() / "lock-registry-cache"))
    python = registry_python(venv_with_pip(tmp_path / "target"), "warp-lang")  # its pip names the default index
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    capsys.readouterr()
    code = main(["lock", "warp-lang", "--python", python, "-o", str(out_dir / "pylock.toml"),
                 "--explain", *DRIVER_550])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    [warp] = [p for p in read_pylock(str(out_dir / "pylock.toml")).packages if p.name == "warp-lang"]
    version = str(warp.version)
    assert warp_classifier_major(version, keep=False) == 12
    refused = [line for line in (out + err).splitlines() if line.strip().startswith("warp-lang ") and "driver-floor" in line]
    assert refused and all("built for CUDA 13." in line for line in refused), out + err
