"""Reading *.dist-info: METADATA, RECORD and INSTALLER, and a problem record for each broken one."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from cudaresolve.env.distributions import (
    Distribution,
    MetadataError,
    Problem,
    parse_metadata,
    parse_record,
    read_distributions,
)


def make_dist_info(
    site: Path,
    name: str,
    version: str,
    *,
    files: tuple[str, ...] = (),
    requires: tuple[str, ...] = (),
    installer: Optional[str] = "pip",
) -> Path:
    """A dist-info as pip writes it (RECORD lists the dist-info's own files too)."""
    dist_info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    dist_info.mkdir(parents=True)
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    lines += [f"Requires-Dist: {r}" for r in requires]
    (dist_info / "METADATA").write_text("\n".join(lines) + "\n\nlong description\n")
    own = [f"{dist_info.name}/METADATA", f"{dist_info.name}/RECORD"]
    if installer is not None:
        (dist_info / "INSTALLER").write_text(installer + "\n")
        own.append(f"{dist_info.name}/INSTALLER")
    (dist_info / "RECORD").write_text("".join(f"{f},sha256=x,1\n" for f in files) + "".join(f"{f},,\n" for f in own))
    return dist_info


def test_metadata_fields():
    metadata = parse_metadata(
        "Metadata-Version: 2.1\nName: Torch\nVersion: 2.5.1+cu124\n"
        'Requires-Dist: nvidia-cublas-cu12==12.4.5.8; platform_system == "Linux" and platform_machine == "x86_64"\n'
        "Requires-Dist: sympy (>=1.13.1) ; extra == 'opt'\n\nbody: not a header\n"
    )
    assert metadata.name == "torch"
    assert metadata.version == Version("2.5.1+cu124")
    assert metadata.version.local == "cu124"
    assert metadata.requires == (
        Requirement('nvidia-cublas-cu12==12.4.5.8; platform_system == "Linux" and platform_machine == "x86_64"'),
        Requirement("sympy>=1.13.1; extra == 'opt'"),
    )
    assert metadata.bad_requires == ()


def test_metadata_name_is_canonicalised():
    assert parse_metadata("Name: Nvidia_CuSparse.CU12\nVersion: 12.3.1.170\n").name == "nvidia-cusparse-cu12"


@pytest.mark.parametrize(
    "text, reason",
    [
        ("Version: 1.0\n", "METADATA has no Name"),
        ("Name: x\n", "METADATA has no Version"),
        ("Name: x\nVersion: 1.0-cuda-twelve\n", "invalid version '1.0-cuda-twelve' in METADATA"),
    ],
)
def test_metadata_errors(text, reason):
    with pytest.raises(MetadataError, match=f"^{reason}$"):
        parse_metadata(text)


def test_record_paths_are_absolute_and_normalised():
    text = 'nvidia/cusparse/lib/libcusparse.so.12,sha256=abc,264876688\n"odd,name.py",,\n../../../bin/tool,,\n\n'
    assert parse_record(text, "/env/lib/python3.11/site-packages") == (
        "/env/lib/python3.11/site-packages/nvidia/cusparse/lib/libcusparse.so.12",
        "/env/lib/python3.11/site-packages/odd,name.py",
        "/env/bin/tool",
    )
    odd = ["a/./b.so", "a//b.so", "./c.so", "/abs/d.so", "e/.hidden/f.so", "numpy.libs/g.so", "h/..so", "i/"]
    root = "/env/lib/python3.11/./site-packages/"
    expected = tuple(os.path.normpath(os.path.join(root, name)) for name in odd)
    assert parse_record("\n".join(odd), root) == expected


def test_reads_well_formed_distributions(tmp_path):
    make_dist_info(tmp_path, "nvidia-nvjitlink-cu12", "12.1.105", files=("nvidia/nvjitlink/lib/libnvJitLink.so.12",))
    make_dist_info(tmp_path, "cupy-cuda12x", "13.3.0", requires=("numpy<2.3,>=1.22",), installer="uv")
    (tmp_path / "not-a-dist").mkdir()
    (tmp_path / "stray.dist-info").write_text("a file, not a directory")
    distributions, problems = read_distributions(str(tmp_path))
    assert problems == ()
    assert [(d.name, str(d.version), d.installer) for d in distributions] == [
        ("cupy-cuda12x", "13.3.0", "uv"),
        ("nvidia-nvjitlink-cu12", "12.1.105", "pip"),
    ]
    assert distributions[0].requires == (Requirement("numpy<2.3,>=1.22"),)
    jit = distributions[1]
    assert jit.dist_info == str(tmp_path / "nvidia_nvjitlink_cu12-12.1.105.dist-info")
    assert jit.files[0] == str(tmp_path / "nvidia" / "nvjitlink" / "lib" / "libnvJitLink.so.12")
    assert len(jit.files) == 4


def test_missing_installer_is_none_not_a_problem(tmp_path):
    make_dist_info(tmp_path, "a", "1", installer=None)
    distributions, problems = read_distributions(str(tmp_path))
    assert distributions[0].installer is None
    assert problems == ()


def _one_good_and(tmp_path: Path) -> Path:
    """A good distribution beside the broken one, to show the scan goes on."""
    make_dist_info(tmp_path, "good", "1.0")
    return make_dist_info(tmp_path, "broken", "2.0", files=("broken/lib.so",))


def _read(tmp_path: Path) -> tuple[list[str], tuple[Problem, ...]]:
    distributions, problems = read_distributions(str(tmp_path))
    return [d.name for d in distributions], problems


def test_missing_record_keeps_the_distribution_without_files(tmp_path):
    broken = _one_good_and(tmp_path)
    (broken / "RECORD").unlink()
    distributions, problems = read_distributions(str(tmp_path))
    assert [(d.name, d.files) for d in distributions if d.name == "broken"] == [("broken", ())]
    assert problems == (Problem(str(broken), "RECORD is missing; its files count as unowned"),)


def test_metadata_not_utf8_drops_the_distribution(tmp_path):
    broken = _one_good_and(tmp_path)
    (broken / "METADATA").write_bytes(b"Name: broken\nVersion: 2.0\nSummary: caf\xe9\n")
    assert _read(tmp_path) == (["good"], (Problem(str(broken), "METADATA is not UTF-8 (byte 38)"),))


def test_invalid_version_drops_the_distribution(tmp_path):
    broken = _one_good_and(tmp_path)
    (broken / "METADATA").write_text("Name: broken\nVersion: twelve\n")
    assert _read(tmp_path) == (["good"], (Problem(str(broken), "invalid version 'twelve' in METADATA"),))


def test_bad_requires_dist_is_skipped_with_a_problem(tmp_path):
    broken = make_dist_info(tmp_path, "broken", "2.0", requires=("nvidia-cublas-cu12 (>=12", "numpy"))
    distributions, problems = read_distributions(str(tmp_path))
    assert distributions[0].requires == (Requirement("numpy"),)
    assert problems == (Problem(str(broken), "unparsable Requires-Dist 'nvidia-cublas-cu12 (>=12' skipped"),)


def test_metadata_that_is_a_directory(tmp_path):
    broken = _one_good_and(tmp_path)
    (broken / "METADATA").unlink()
    (broken / "METADATA").mkdir()
    assert _read(tmp_path) == (["good"], (Problem(str(broken), "METADATA is unreadable: Is a directory"),))


def test_metadata_that_is_a_dangling_symlink(tmp_path):
    broken = _one_good_and(tmp_path)
    (broken / "METADATA").unlink()
    (broken / "METADATA").symlink_to(tmp_path / "gone")
    assert _read(tmp_path) == (["good"], (Problem(str(broken), "METADATA is missing"),))


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a mode-000 file anyway")
def test_unreadable_record(tmp_path):
    broken = _one_good_and(tmp_path)
    (broken / "RECORD").chmod(0)
    try:
        names, problems = _read(tmp_path)
    finally:
        (broken / "RECORD").chmod(0o644)
    assert names == ["broken", "good"]
    assert problems == (Problem(str(broken), "RECORD is unreadable: Permission denied; its files count as unowned"),)


def test_unreadable_installer(tmp_path):
    broken = _one_good_and(tmp_path)
    (broken / "INSTALLER").unlink()
    (broken / "INSTALLER").mkdir()
    distributions, problems = read_distributions(str(tmp_path))
    assert [d.installer for d in distributions] == [None, "pip"]
    assert problems == (Problem(str(broken), "INSTALLER is unreadable: Is a directory"),)


def test_unlistable_site_packages(tmp_path):
    missing = tmp_path / "gone"
    assert read_distributions(str(missing)) == ((), (Problem(str(missing), "cannot list: No such file or directory"),))


def test_two_dist_infos_of_one_name_are_both_reported(tmp_path):
    make_dist_info(tmp_path, "nvidia-nvjitlink-cu12", "12.1.105")
    make_dist_info(tmp_path, "nvidia-nvjitlink-cu12", "12.8.93")
    distributions, _ = read_distributions(str(tmp_path))
    assert [str(d.version) for d in distributions] == ["12.1.105", "12.8.93"]
    assert all(isinstance(d, Distribution) for d in distributions)


def _stash(path: Path) -> Path:
    """Move `path` where pip's uninstall stashes it while it installs the new version (pip's own code names it)."""
    from pip._internal.utils.temp_dir import AdjacentTempDirectory

    stash = Path(AdjacentTempDirectory(str(path), delete=False).path)
    stash.rmdir()
    path.rename(stash)
    return stash


def test_pips_uninstall_stash_is_not_installed(tmp_path):
    """An interrupted upgrade leaves ~orch-2.1.dist-info beside torch-2.2.dist-info: pip lists only 2.2."""
    import json
    import subprocess
    import sys

    stash = _stash(make_dist_info(tmp_path, "torch", "2.1"))
    make_dist_info(tmp_path, "torch", "2.2")
    assert stash.name == "~orch-2.1.dist-info"
    listed = subprocess.run([sys.executable, "-m", "pip", "list", "--path", str(tmp_path), "--format", "json"],
                            capture_output=True, text=True, check=True).stdout
    assert [(d["name"], d["version"]) for d in json.loads(listed)] == [("torch", "2.2")]
    distributions, problems = read_distributions(str(tmp_path))
    assert ([(d.name, str(d.version)) for d in distributions], problems) == ([("torch", "2.2")], ())


@pytest.mark.parametrize(
    "metadata, problem",
    [
        # int()'s 4,300-digit limit is a bare ValueError, which packaging does not turn into InvalidVersion.
        ("Name: broken\nVersion: 1." + "9" * 5000 + "\n", "invalid version '1.99999"),
        ("Name: broken\nVersion: 1.0-garbage\n", "invalid version '1.0-garbage' in METADATA"),
    ],
)
def test_a_version_that_does_not_parse_drops_the_distribution(tmp_path, metadata, problem):
    broken = _one_good_and(tmp_path)
    (broken / "METADATA").write_text(metadata)
    names, problems = _read(tmp_path)
    assert names == ["good"] and [p.path for p in problems] == [str(broken)] and problems[0].reason.startswith(problem)
    assert len(problems[0].reason) < 120


def test_a_requirement_that_would_fail_deep_in_a_resolution_is_skipped_here(tmp_path):
    broken = _one_good_and(tmp_path)
    (broken / "METADATA").write_text(
        "Name: broken\nVersion: 2.0\nRequires-Dist: a==1." + "9" * 5000 + "\nRequires-Dist: b; " + "(" * 3000
        + "os_name == 'posix'" + ")" * 3000 + "\nRequires-Dist: c>=1\n"
    )
    distributions, problems = read_distributions(str(tmp_path))
    assert [r.name for d in distributions if d.name == "broken" for r in d.requires] == ["c"]
    assert [p.reason[:32] for p in problems] == ["unparsable Requires-Dist 'a==1.9", 'unparsable Requires-Dist "b; (((']


def test_a_fifo_in_a_dist_info_is_a_problem_not_a_hang(tmp_path):
    """A planted METADATA FIFO would block a plain read forever."""
    import threading

    broken = _one_good_and(tmp_path)
    (broken / "METADATA").unlink()
    os.mkfifo(broken / "METADATA")
    found = []
    reader = threading.Thread(target=lambda: found.append(_read(tmp_path)), daemon=True)
    reader.start()
    reader.join(10)
    assert found == [(["good"], (Problem(str(broken), "METADATA is unreadable: not a regular file"),))]
