"""owned-twice: two distributions that install one path (nvidia-nccl-cu11 and -cu12's
nvidia/nccl/lib/libnccl.so.2), found from their RECORDs, and the printed fix proven to converge
with real pip in a throwaway venv.

The wheels are gcc-built: the cu11-like libnccl.so.2 lacks `ncclCommInitRankScalable`, which the
cu12-like one and `ncclpkg`'s extension (requiring nvidia-nccl-cu12) have. Installing cu12, then
cu11, leaves cu11's bytes at the shared path: the doctor must name both owners, say whose bytes are
there, and fix it by uninstalling cu11 and reinstalling cu12 over what that leaves.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fix_steps import offline_pip
from index_server import make_wheel
from packaging.version import Version

from cudaresolve.checks import ownership
from cudaresolve.checks.findings import Check, Severity
from cudaresolve.checks.fixes import Explained, PipInstall, PipUninstall, RightOwner, Steps
from cudaresolve.env.distributions import read_distributions
from cudaresolve.env.environment import Environment
from cudaresolve.env.interpreter import Target
from cudaresolve.env.ownership import Claim, SharedFile, shared_files
from cudaresolve.output.findings import shown

TAG = f"cp{sys.version_info[0]}{sys.version_info[1]}-cp{sys.version_info[0]}{sys.version_info[1]}-linux_x86_64"
NCCL = "nvidia/nccl/lib/libnccl.so.2"
HOST = ["--driver", "570.86.15", "--cuda", "12.8"]


@pytest.fixture(scope="module")
def wheels(tmp_path_factory) -> Path:
    """nvidia-nccl-cu11 2.21.5, nvidia-nccl-cu12 2.27.3 and ncclpkg 1.0, as a --find-links directory."""
    import shutil

    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    from conftest import ElfBuilder

    root = tmp_path_factory.mktemp("owned-twice")
    builder = ElfBuilder(root / "elf")
    found = root / "wheels"
    found.mkdir()

    def wheel(name: str, version: str, files: dict[str, bytes], requires: tuple[str, ...] = ()) -> None:
        filename, data = make_wheel(name, version, requires=requires, tag=TAG, files=files)
        (found / filename).write_bytes(data)

    old = builder.build("libnccl.so.2", "int ncclGetVersion(int *v) { *v = 22105; return 0; }\n",
                        soname="libnccl.so.2", directory="cu11")
    new = builder.build("libnccl.so.2", "int ncclGetVersion(int *v) { *v = 22703; return 0; }\n"
                        "int ncclCommInitRankScalable(void) { return 0; }\n", soname="libnccl.so.2", directory="cu12")
    ext = builder.build("_ext.so", "int ncclCommInitRankScalable(void);\nint run(void) { return ncclCommInitRankScalable(); }\n",
                        link=[new], rpath="$ORIGIN/../nvidia/nccl/lib", directory="ncclpkg")
    # both carry the empty nvidia/__init__.py many NVIDIA wheels do: the same bytes, never a finding
    wheel("nvidia-nccl-cu11", "2.21.5", {NCCL: old.read_bytes(), "nvidia/__init__.py": b""})
    wheel("nvidia-nccl-cu12", "2.27.3", {NCCL: new.read_bytes(), "nvidia/__init__.py": b""})
    # `import ncclpkg` imports its extension: its needs are import-time
    wheel("ncclpkg", "1.0", {"ncclpkg/_ext.so": ext.read_bytes(), "ncclpkg/__init__.py": b"from . import _ext\n"},
          requires=("nvidia-nccl-cu12",))
    return found



def doctor(python: Path, cache: Path) -> tuple[int, dict[str, Any]]:
    done = subprocess.run([sys.executable, "-m", "cudaresolve", "doctor", "--python", str(python), "--json", "--no-judge-fixes", *HOST],
                          capture_output=True, text=True, env={**os.environ, "CUDARESOLVE_CACHE_DIR": str(cache)})
    assert done.returncode in (0, 1, 2), done.stderr
    return done.returncode, json.loads(done.stdout)


def errors(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [finding for finding in report["findings"] if finding["severity"] == "error"]


def pip_commands(remedy: dict[str, Any]) -> list[list[str]]:
    """The pip commands of a fix as `doctor --json` gives it (its typed `remedy`), in order."""
    kind = remedy["type"]
    if kind == "explained":
        return pip_commands(remedy["fix"])
    if kind == "steps":
        return [command for step in remedy["steps"] for command in pip_commands(step)]
    if kind == "pip-uninstall":
        return [["uninstall", "-y", *remedy["names"]]]
    if kind == "pip-install":
        assert not remedy["replaces"]
        return [["install", *remedy["options"], *remedy["requirements"]]]
    raise AssertionError(f"not a pip step: {kind}")


def test_two_owners_of_one_file_are_one_error_and_its_fix_converges(wheels, tmp_path, venv_with_pip):
    root = venv_with_pip(tmp_path / "venv")
    python = root / "bin" / "python"
    offline_pip(python, wheels, ["install", "--no-deps", "ncclpkg==1.0", "nvidia-nccl-cu12==2.27.3"])
    offline_pip(python, wheels, ["install", "--no-deps", "nvidia-nccl-cu11==2.21.5"])  # installed last: its bytes win

    status, report = doctor(python, tmp_path / "cache")
    assert status == 2
    [owned] = [finding for finding in report["findings"] if finding["check"] == "owned-twice"]
    site = json.loads(subprocess.run([str(python), "-c", "import json, sysconfig; print(json.dumps(sysconfig.get_paths()['platlib']))"],
                                     capture_output=True, text=True, check=True).stdout)
    path = os.path.join(site, NCCL)
    assert owned["severity"] == "error"
    assert owned["problem"] == {
        "type": "owned-twice", "owners": [{"type": "installed", "name": "nvidia-nccl-cu11", "version": "2.21.5"},
                                          {"type": "installed", "name": "nvidia-nccl-cu12", "version": "2.27.3"}],
        "files": [path], "on_disk": "nvidia-nccl-cu11"}
    assert owned["subject"] == path
    assert owned["message"] == ("installed by both nvidia-nccl-cu11 2.21.5 and nvidia-nccl-cu12 2.27.3 with "
                                "different contents: the last installed wins, and uninstalling either deletes it; "
                                "the bytes there are nvidia-nccl-cu11's")
    assert owned["fix"] == ('keep nvidia-nccl-cu12 (ncclpkg requires it): pip uninstall nvidia-nccl-cu11, then '
                            'pip install --force-reinstall --no-deps "nvidia-nccl-cu12==2.27.3"')
    # the symptom it causes points to it, with the same fix
    [skew] = [finding for finding in report["findings"] if finding["check"] == "symbol-skew"]
    assert [fact for fact in skew["facts"] if fact["type"] == "shared-by"] == [
        {"type": "shared-by", "path": path, "owners": ["nvidia-nccl-cu11", "nvidia-nccl-cu12"],
         "on_disk": "nvidia-nccl-cu11"}]
    assert skew["remedy"] == owned["remedy"]

    commands = pip_commands(owned["remedy"])
    assert commands == [["uninstall", "-y", "nvidia-nccl-cu11"],
                        ["install", "--force-reinstall", "--no-deps", "nvidia-nccl-cu12==2.27.3"]]
    for arguments in commands:
        offline_pip(python, wheels, arguments)

    status, report = doctor(python, tmp_path / "cache")
    assert errors(report) == [] and status == 0
    assert Path(path).read_bytes() == (wheels.parent / "elf" / "cu12" / "libnccl.so.2").read_bytes()


def test_the_plain_reinstall_the_doctor_printed_before_does_not_converge(wheels, tmp_path, venv_with_pip):
    """Why the fix has its two steps: reinstalling the right owner alone is already satisfied, and
    uninstalling the wrong one alone deletes the file the right one lists."""
    root = venv_with_pip(tmp_path / "venv")
    python = root / "bin" / "python"
    offline_pip(python, wheels, ["install", "--no-deps", "ncclpkg==1.0", "nvidia-nccl-cu12==2.27.3"])
    offline_pip(python, wheels, ["install", "--no-deps", "nvidia-nccl-cu11==2.21.5"])
    offline_pip(python, wheels, ["install", "--no-deps", "nvidia-nccl-cu12==2.27.3"])  # "already satisfied"
    _, report = doctor(python, tmp_path / "cache")
    assert {finding["check"] for finding in errors(report)} == {"owned-twice", "symbol-skew"}
    offline_pip(python, wheels, ["uninstall", "-y", "nvidia-nccl-cu11"])
    _, report = doctor(python, tmp_path / "cache")
    assert [finding["check"] for finding in errors(report)] == ["missing-library"]  # cu12's file is gone too


# -- env/ownership.py on plain files ---------------------------------------------------------------


def _digest(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def _dist_info(site: Path, name: str, version: str, rows: list[str]) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n")
    (info / "RECORD").write_text("\n".join(rows) + "\n")


def _site(tmp_path: Path, on_disk: bytes, a: bytes = b"a-build", b: bytes = b"b-build") -> Path:
    site = tmp_path / "site"
    (site / "pkg").mkdir(parents=True)
    (site / "pkg" / "lib.so").write_bytes(on_disk)
    (site / "pkg" / "__init__.py").write_bytes(b"")
    same = f"pkg/__init__.py,{_digest(b'')},0"
    _dist_info(site, "a-dist", "1.0", [f"pkg/lib.so,{_digest(a)},{len(a)}", same, "pkg/__pycache__/x.pyc,,"])
    _dist_info(site, "b-dist", "2.0", [f"pkg/lib.so,{_digest(b)},{len(b)}", same, "pkg/__pycache__/x.pyc,,"])
    return site


def test_only_paths_with_different_recorded_contents_are_shared(tmp_path):
    site = _site(tmp_path, b"b-build")
    found, problems = shared_files(read_distributions(str(site))[0])
    assert problems == ()
    assert found == (SharedFile(str(site / "pkg" / "lib.so"), (
        Claim("a-dist", Version("1.0"), _digest(b"a-build"), 7), Claim("b-dist", Version("2.0"), _digest(b"b-build"), 7)),
        on_disk="b-dist"),)


def test_a_shared_file_is_judged_as_the_owner_whose_bytes_are_there(tmp_path):
    """Every other check (arch-coverage, driver-floor) names the file's owner: with b-dist's bytes at
    the path, that is b-dist, although a-dist sorts first."""
    from cudaresolve.env.interpreter import target_for_site_packages
    from cudaresolve.env.scan import scan_environment
    from cudaresolve.errors import CudaresolveError

    def unread(path: str) -> Any:
        raise CudaresolveError("not read in this test")

    for on_disk, owners in ((b"\x7fELF-b", ("b-dist", "a-dist")), (b"\x7fELF-a", ("a-dist", "b-dist"))):
        site = _site(tmp_path / on_disk.decode()[-1], on_disk, b"\x7fELF-a", b"\x7fELF-b")
        [elf] = scan_environment(target_for_site_packages(str(site)), facts_for=unread).elf_files
        assert (elf.owners, elf.owner) == (owners, owners[0])


def test_bytes_of_no_owner_and_a_fifo_are_said_so(tmp_path):
    site = _site(tmp_path, b"c-build")
    [found], _ = shared_files(read_distributions(str(site))[0])
    assert (found.on_disk, found.unjudged) == (None, None)
    (site / "pkg" / "lib.so").unlink()
    os.mkfifo(site / "pkg" / "lib.so")  # never opened for reading: it would block
    [found], _ = shared_files(read_distributions(str(site))[0])
    assert (found.on_disk, found.unjudged) == (None, "cannot read: not a regular file")


@pytest.mark.parametrize("row", [
    "pkg/lib.so,md5=abc,7",  # another algorithm
    "pkg/lib.so,sha256=" + "A" * 5000 + ",7",  # no real digest is that long
    "pkg/lib.so,sha256=" + "A" * 43 + "," + "9" * 5000,  # a size past int()'s limit
])
def test_a_hostile_record_row_is_a_note_not_a_traceback(tmp_path, row):
    site = _site(tmp_path, b"b-build")
    (site / "b_dist-2.0.dist-info" / "RECORD").write_text(f"{row}\n")
    found, problems = shared_files(read_distributions(str(site))[0])
    if row.startswith("pkg/lib.so,sha256=" + "A" * 43 + ","):
        assert [claim.size for claim in found[0].claims] == [7, None]  # the bad size is unknown, the hash kept
    else:
        assert found == ()  # its contents cannot be told apart: not judged
        assert [p.path for p in problems] == [str(site / "b_dist-2.0.dist-info")]
        assert "not sha256=<base64>" in problems[0].reason


def _env(tmp_path: Path, shared: SharedFile, requirer: bool) -> Environment:
    site = _site(tmp_path, b"b-build")
    if requirer:
        info = site / "user-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: user\nVersion: 1.0\nRequires-Dist: a-dist\n\n")
        (info / "RECORD").write_text("")
    distributions, _ = read_distributions(str(site))
    return Environment(Target(site_packages=(str(site),)), distributions, (), shared_files=(shared,))


@pytest.mark.parametrize("requirer", [True, False])
def test_the_owner_to_keep_is_the_required_one_else_the_one_on_disk(tmp_path, requirer):
    shared = SharedFile("/x/pkg/lib.so", (Claim("a-dist", Version("1.0"), "sha256=a"), Claim("b-dist", Version("2.0"), "sha256=b")),
                        on_disk="b-dist")
    [finding] = ownership.check_owned_twice(_env(tmp_path, shared, requirer))
    assert finding.check == Check.OWNED_TWICE and finding.severity == Severity.ERROR
    keep, drop, version = ("a-dist", "b-dist", "1.0") if requirer else ("b-dist", "a-dist", "2.0")
    assert finding.fix == Explained(
        Steps((PipUninstall((drop,)), PipInstall((finding.fix.fix.steps[1].requirements[0],), options=("--force-reinstall", "--no-deps")))),  # type: ignore[union-attr]
        RightOwner(keep, "required", ("user",)) if requirer else RightOwner(keep, "on-disk"))
    assert str(finding.fix.fix.steps[1].requirements[0]) == f"{keep}=={version}"  # type: ignore[union-attr]
    assert shown(finding).subject == "/x/pkg/lib.so"


def test_files_of_one_owner_pair_are_one_finding(tmp_path):
    claims = (Claim("a-dist", Version("1.0"), "sha256=a"), Claim("b-dist", Version("2.0"), "sha256=b"))
    env = _env(tmp_path, SharedFile("/x/1", claims), False)
    from dataclasses import replace
    env = replace(env, shared_files=tuple(SharedFile(f"/x/lib{n}.so", claims) for n in range(5)))
    [finding] = ownership.check_owned_twice(env)
    text = shown(finding)
    assert text.subject == "files of a-dist, b-dist"
    assert text.message.startswith("5 files are installed by both a-dist 1.0 and b-dist 2.0")
    assert text.evidence[-1] == "... and 2 more"
    assert text.fix == ('pip uninstall b-dist, then pip install --force-reinstall --no-deps "a-dist==1.0", or '
                        'pip uninstall a-dist, then pip install --force-reinstall --no-deps "b-dist==2.0"')


# -- the planned environment: a lock that would install two owners of one path ----------------------


def test_a_plan_with_two_owners_of_one_path_is_refused_and_one_owner_is_not():
    """nvidia-nccl-cu12 installed and kept, nvidia-nccl-cu13 chosen: both install
    nvidia/nccl/lib/libnccl.so.2 (data/components.toml), read or not. The judge errs on it, so the
    lock refuses the set; cu13 alone is no clash."""
    from test_checks_planned import PLANNED, dist, planned
    from test_doctor_synthetic import HOST
    from test_per_release import RecordedIndex, candidate

    from cudaresolve.checks import judge
    from cudaresolve.resolve.planned import planned_environment

    installed = planned(dist("nvidia-nccl-cu12", "2.27.3", files=(f"{PLANNED}/{NCCL}",)))
    wheel = "nvidia_nccl_cu13-2.30.7-py3-none-manylinux_2_18_x86_64.whl"
    env = planned_environment(installed, [candidate("nvidia-nccl-cu13", "2.30.7", wheel)], RecordedIndex({}))
    assert env.shared_files == (SharedFile(f"{PLANNED}/{NCCL}", (
        Claim("nvidia-nccl-cu12", Version("2.27.3"), None), Claim("nvidia-nccl-cu13", Version("2.30.7"), None)),
        unjudged="planned"),)
    [owned] = [f for f in judge(env, HOST).findings if f.check == Check.OWNED_TWICE]
    assert owned.severity == Severity.ERROR
    assert shown(owned).evidence == (f"{PLANNED}/{NCCL}: nvidia-nccl-cu12 records no hash, nvidia-nccl-cu13 records "
                                     "no hash; not compared (planned)",)

    alone = planned_environment(planned(), [candidate("nvidia-nccl-cu13", "2.30.7", wheel)], RecordedIndex({}))
    assert alone.shared_files == ()


def test_no_fix_when_each_owner_is_required_by_another_package_and_a_header_is_a_warning(tmp_path):
    """jax[cuda12] requires nvidia-nccl-cu12, torch cu130 nvidia-nccl-cu13: removing either owner
    breaks one consumer (the survey applied such a fix and left JAX on CUDA 13 libraries), so no fix
    is printed. A shared file nothing loads (openmm's SWIG header) is a warning with no fix: the fix
    would uninstall the package itself."""
    shared = SharedFile("/x/pkg/lib.so", (Claim("a-dist", Version("1.0"), "sha256=a"), Claim("b-dist", Version("2.0"), "sha256=b")),
                        on_disk="b-dist")
    env = _env(tmp_path, shared, True)
    info = Path(env.target.site_packages[0]) / "other-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: other\nVersion: 1.0\nRequires-Dist: b-dist\n\n")
    (info / "RECORD").write_text("")
    distributions, _ = read_distributions(env.target.site_packages[0])
    from dataclasses import replace
    [finding] = ownership.check_owned_twice(replace(env, distributions=distributions))
    assert (finding.severity, finding.fix) == (Severity.ERROR, None)
    header = SharedFile("/x/swig/OpenMMSwigHeaders.i", shared.claims, on_disk="b-dist")
    [finding] = ownership.check_owned_twice(replace(env, shared_files=(header,)))
    assert (finding.severity, finding.fix) == (Severity.WARNING, None)
