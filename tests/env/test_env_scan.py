"""The environment scan: distributions, ELF files under site-packages, their owners and their facts."""

from __future__ import annotations

import functools
import os
import shutil
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version
from test_env_distributions import make_dist_info

from cudaresolve.binary.facts import BinaryFacts, SymbolTable
from cudaresolve.binary.wheel import is_shared_object_name
from cudaresolve.env.distributions import Problem
from cudaresolve.env.interpreter import Target, target_for_python, target_for_site_packages
from cudaresolve.env.preloads import WheelList, read_wheel_list
from cudaresolve.env.scan import ElfFile, find_elf_files, scan_environment
from cudaresolve.errors import CudaresolveError

CUSPARSE = "nvidia-cusparse-cu12==12.3.1.170"
NVJITLINK = "nvidia-nvjitlink-cu12==12.1.105"


def stub_facts(path: str) -> BinaryFacts:
    return BinaryFacts(
        path=path, machine="x86_64", elf_type="DYN", soname=os.path.basename(path), needed=(), rpath=(),
        runpath=(), flags=0, flags_1=0, symbols=SymbolTable.of(), version_definitions=(), version_needs=(),
        build_id=None, fatbin=None,
    )


class CountingReader:
    def __init__(self):
        self.paths: list[str] = []

    def __call__(self, path: str) -> BinaryFacts:
        self.paths.append(path)
        return stub_facts(path)


@pytest.fixture(scope="module")
def venv(cuda_venv) -> Path:
    return cuda_venv([CUSPARSE, NVJITLINK])


def _site(venv: Path) -> Path:
    return venv / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"


def test_real_venv_through_its_interpreter(venv):
    target = target_for_python(str(venv / "bin" / "python"))
    site = _site(venv)
    assert target.site_packages == (str(site),)
    reader = CountingReader()
    env = scan_environment(target, facts_for=reader)

    cusparse = env.distribution("nvidia-cusparse-cu12")
    nvjitlink = env.distribution("nvidia-nvjitlink-cu12")
    assert cusparse.version == Version("12.3.1.170")
    assert nvjitlink.version == Version("12.1.105")
    assert cusparse.requires == (Requirement("nvidia-nvjitlink-cu12"),)
    assert nvjitlink.requires == ()
    assert (cusparse.installer, nvjitlink.installer) == ("uv", "uv")  # the installer the cached venvs are built with
    assert cusparse.dist_info == str(site / "nvidia_cusparse_cu12-12.3.1.170.dist-info")

    lib = site / "nvidia"
    assert env.elf_files == (
        ElfFile(str(lib / "cusparse/lib/libcusparse.so.12"), ("nvidia-cusparse-cu12",),
                stub_facts(str(lib / "cusparse/lib/libcusparse.so.12")), None, os.path.realpath(lib / "cusparse/lib/libcusparse.so.12")),
        ElfFile(str(lib / "nvjitlink/lib/libnvJitLink.so.12"), ("nvidia-nvjitlink-cu12",),
                stub_facts(str(lib / "nvjitlink/lib/libnvJitLink.so.12")), None, os.path.realpath(lib / "nvjitlink/lib/libnvJitLink.so.12")),
    )
    # then the interpreter itself, whose DT_RPATH (none here) the loader would search
    program = os.path.realpath(target.executable)
    assert reader.paths == [e.path for e in env.elf_files] + [program]
    assert (env.loader.program, env.loader.program_rpath) == (program, ())
    assert env.problems == ()
    # Every .so in the two lib directories is one of the ELF files found, with its owner.
    for component, owner in (("cusparse", "nvidia-cusparse-cu12"), ("nvjitlink", "nvidia-nvjitlink-cu12")):
        on_disk = sorted(str(p) for p in (lib / component / "lib").iterdir() if is_shared_object_name(p.name))
        assert on_disk and [e.owners for e in env.elf_files if e.path in on_disk] == [(owner,)] * len(on_disk)


def _linked_copy(site: Path, dest: Path) -> Path:
    """site-packages as hard links (copies across file systems): cheap, and the cached venv stays untouched."""

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    shutil.copytree(site, dest, symlinks=True, copy_function=link)
    return dest


def test_unowned_and_unreadable_files_are_reported(venv, tmp_path):
    site = _linked_copy(_site(venv), tmp_path / "site-packages")
    lib = site / "nvidia" / "cusparse" / "lib"
    shutil.copy2("/bin/sh", lib / "libcusparse_dropped.so")  # a real ELF that no RECORD lists
    (site / "libc.so").write_text("/* GNU ld script */\nGROUP ( /lib/libc.so.6 )\n")  # named .so, not ELF
    (site / "libgone.so.1").symlink_to(tmp_path / "nowhere")
    env = scan_environment(target_for_site_packages(str(site)), facts_for=stub_facts)
    assert [(e.path, e.owners) for e in env.elf_files] == [
        (str(lib / "libcusparse.so.12"), ("nvidia-cusparse-cu12",)),
        (str(lib / "libcusparse_dropped.so"), ()),
        (str(site / "nvidia/nvjitlink/lib/libnvJitLink.so.12"), ("nvidia-nvjitlink-cu12",)),
    ]
    assert env.problems == (Problem(str(site / "libgone.so.1"), "cannot read: No such file or directory"),)


def test_file_listed_by_two_records_has_both_owners(tmp_path):
    shutil.copy2("/bin/sh", tmp_path / "libshared.so.1")
    make_dist_info(tmp_path, "b-overwriter", "1", files=("libshared.so.1",))
    make_dist_info(tmp_path, "a-original", "1", files=("libshared.so.1",))
    env = scan_environment(target_for_site_packages(str(tmp_path)), facts_for=stub_facts)
    assert [(e.path, e.owners) for e in env.elf_files] == [(str(tmp_path / "libshared.so.1"), ("a-original", "b-overwriter"))]


def test_record_path_climbing_out_of_site_packages_is_matched(tmp_path):
    purelib = tmp_path / "lib" / "site-packages"
    platlib = tmp_path / "lib64" / "site-packages"
    (platlib / "pkg").mkdir(parents=True)
    shutil.copy2("/bin/sh", platlib / "pkg" / "_ext.so")
    make_dist_info(purelib, "pkg", "1", files=("../../lib64/site-packages/pkg/_ext.so",))
    env = scan_environment(Target(site_packages=(str(purelib), str(platlib))), facts_for=stub_facts)
    assert [(e.path, e.owners) for e in env.elf_files] == [(str(platlib / "pkg" / "_ext.so"), ("pkg",))]


def test_reader_errors_become_the_files_error(tmp_path):
    for name in ("liba.so", "libb.so"):
        shutil.copy2("/bin/sh", tmp_path / name)

    def failing(path: str) -> BinaryFacts:
        if path.endswith("liba.so"):
            raise CudaresolveError(f"{path}: truncated dynamic section")
        raise PermissionError(13, "Permission denied", path)

    env = scan_environment(target_for_site_packages(str(tmp_path)), facts_for=failing)
    assert env.elf_files == (
        ElfFile(str(tmp_path / "liba.so"), (), None, f"{tmp_path / 'liba.so'}: truncated dynamic section",
                os.path.realpath(tmp_path / "liba.so")),
        ElfFile(str(tmp_path / "libb.so"), (), None, "cannot read: Permission denied", os.path.realpath(tmp_path / "libb.so")),
    )


def test_same_directory_under_two_names_is_scanned_once(tmp_path):
    shutil.copy2("/bin/sh", tmp_path / "liba.so")
    (tmp_path / "alias").symlink_to(tmp_path, target_is_directory=True)
    make_dist_info(tmp_path, "a", "1", files=("liba.so",))
    env = scan_environment(Target(site_packages=(str(tmp_path), str(tmp_path / "alias"))), facts_for=stub_facts)
    assert [d.name for d in env.distributions] == ["a"]
    assert [(e.path, e.owners) for e in env.elf_files] == [(str(tmp_path / "liba.so"), ("a",))]


def test_platlib_that_was_never_created_is_no_problem(tmp_path):
    make_dist_info(tmp_path, "a", "1")
    env = scan_environment(Target(site_packages=(str(tmp_path), str(tmp_path / "lib64"))), facts_for=stub_facts)
    assert ([d.name for d in env.distributions], env.problems) == (["a"], ())


def test_shared_object_names():
    assert [n for n in ("libx.so", "libx.so.12", "libx.so.12.1.105", "_c.cpython-311-x86_64-linux-gnu.so",
                        "libx.sox", "x.so.py", "libx.a", "so") if is_shared_object_name(n)] == [
        "libx.so", "libx.so.12", "libx.so.12.1.105", "_c.cpython-311-x86_64-linux-gnu.so", "x.so.py"]


def test_find_elf_files_skips_directories_named_like_libraries(tmp_path):
    (tmp_path / "libdir.so").mkdir()
    shutil.copy2("/bin/sh", tmp_path / "libdir.so" / "libinner.so")
    (tmp_path / "x.so.py").write_text("print('a name that matches *.so.*, but not ELF')\n")
    assert find_elf_files(str(tmp_path)) == ((str(tmp_path / "libdir.so" / "libinner.so"),), ())



def test_a_fifo_named_like_a_library_is_skipped_not_waited_on(tmp_path):
    """Opening a FIFO for reading blocks until a writer comes: a planted libx.so FIFO hung the doctor."""
    import threading

    os.mkfifo(tmp_path / "libx.so")
    shutil.copy2("/bin/sh", tmp_path / "liby.so")
    found = []
    reader = threading.Thread(target=lambda: found.append(find_elf_files(str(tmp_path))), daemon=True)
    reader.start()
    reader.join(10)
    assert found == [((str(tmp_path / "liby.so"),), ())]


def test_pips_uninstall_stash_is_not_scanned(tmp_path):
    """What an interrupted upgrade leaves (torch's dist-info and package directory, a namespace
    package's subdirectory, each stashed under the name pip's own code gives it) is not installed."""
    from test_env_distributions import _stash

    for version in ("2.1", "2.2"):
        (tmp_path / "torch" / "lib").mkdir(parents=True)
        shutil.copy2("/bin/sh", tmp_path / "torch" / "lib" / "libtorch.so")
        (tmp_path / "nvidia" / "cublas" / "lib").mkdir(parents=True, exist_ok=True)
        shutil.copy2("/bin/sh", tmp_path / "nvidia" / "cublas" / "lib" / "libcublas.so.12")
        make_dist_info(tmp_path, "torch", version, files=("torch/lib/libtorch.so", "nvidia/cublas/lib/libcublas.so.12"))
        if version == "2.1":
            stashed = [_stash(tmp_path / name) for name in ("torch-2.1.dist-info", "torch", "nvidia/cublas")]
    assert [p.relative_to(tmp_path).as_posix() for p in stashed] == ["~orch-2.1.dist-info", "~orch", "nvidia/~ublas"]
    env = scan_environment(target_for_site_packages(str(tmp_path)), facts_for=stub_facts)
    assert [(d.name, str(d.version)) for d in env.distributions] == [("torch", "2.2")]
    assert [(os.path.relpath(e.path, tmp_path), e.owners) for e in env.elf_files] == [
        ("nvidia/cublas/lib/libcublas.so.12", ("torch",)), ("torch/lib/libtorch.so", ("torch",))]
    assert env.problems == ()


def test_real_venv_with_the_elf_reader_and_the_cache(venv, tmp_path):
    """End to end: the first scan reads each library, the second takes every one from the cache."""
    from cudaresolve.binary.elf import read_binary_facts
    from cudaresolve.env.cache import FactsCache

    reader = CountingReader()

    def read(path: str) -> BinaryFacts:
        reader.paths.append(path)
        return read_binary_facts(path)

    target = target_for_python(str(venv / "bin" / "python"))
    scans = []
    for _ in range(2):  # two runs, each with its own cache object on the same directory
        cache = FactsCache(str(tmp_path))
        scans.append(scan_environment(target, facts_for=functools.partial(cache.facts_for, read=read)))
    assert scans[0] == scans[1]
    assert len(reader.paths) == 3  # the two libraries and the interpreter, once
    cusparse, nvjitlink = scans[0].elf_files
    assert cusparse.facts.soname == "libcusparse.so.12"
    assert "libnvJitLink.so.12" in cusparse.facts.needed
    assert nvjitlink.facts.soname == "libnvJitLink.so.12"
    assert (cusparse.error, nvjitlink.error) == (None, None)


@pytest.mark.parametrize("content, expected", [
    ('{"cuda": "12.x", "nccl": {"version": "2.25.1", "min_pypi_version": "2.16.5"}, "cudnn": {"version": "8.8.1"}}',
     WheelList(12, {"nccl": Version("2.16.5")})),
    ('{"cuda": "12.x", "nccl": {"min_pypi_version": "not a version"}, "packaging": "pip"}', WheelList(12, {})),
    ('{"cuda": "twelve", "nccl": {"min_pypi_version": "2.16.5"}}', None),
    ('{"cuda": "1234.x"}', None),
    ('["cuda", "12.x"]', None),
    ('{"cuda": "12.x"', None),
    ('{"cuda": "12.x", "pad": "' + "x" * 70000 + '"}', None),  # larger than any list: not read
])
def test_a_packages_own_preload_list_is_read_as_hostile_input(tmp_path, content, expected):
    path = tmp_path / "_wheel.json"
    path.write_text(content)
    assert read_wheel_list(str(path)) == expected
    assert read_wheel_list(str(tmp_path / "absent.json")) is None


def test_a_preload_list_that_is_a_fifo_is_not_read(tmp_path):
    """A FIFO where the list should be would block a plain read forever: it is no list."""
    import os

    os.mkfifo(tmp_path / "_wheel.json")
    assert read_wheel_list(str(tmp_path / "_wheel.json")) is None
