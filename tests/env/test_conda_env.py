"""Conda prefixes as part of the scanned environment (env/conda.py), the interpreter's DT_RPATH in
the loader (binary/loader.py), and the doctor's findings on conda packages.

The first part is plain data and hand-made prefixes; the second runs the real conda
(conftest.build_conda_venv, as test_conda_plugin does) to make prefixes from a local channel of
gcc-built libraries, puts a Python in them whose DT_RPATH is conda python's `$ORIGIN/../lib`,
installs gcc-built wheels with pip, and checks the doctor against glibc: `ldd -r` (the project's
oracle for symbol verdicts) and real imports in that interpreter.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from dataclasses import replace
from pathlib import Path
from typing import Optional

import pytest
from index_server import make_wheel
from packaging.version import Version
from test_checks_planned import so
from test_doctor_synthetic import HOST
from test_env_distributions import make_dist_info
from test_loader import disk

from cudaresolve.binary.facts import BinaryFacts, Symbol, SymbolTable, VersionNeed
from cudaresolve.binary.loader import RPATH, LoaderEnv, resolve, with_program
from cudaresolve.checks.linking import check_symbol_skew
from cudaresolve.checks.loading import load_packages
from cudaresolve.commands.diagnosing import examine
from cudaresolve.env.conda import CondaMetaError, CondaPrefix, conda_version, parse_record, read_conda_meta, with_conda
from cudaresolve.env.distributions import CondaRecord, Distribution, Problem, read_distributions
from cudaresolve.env.environment import ElfFile, Environment
from cudaresolve.env.interpreter import Target, target_for_python
from cudaresolve.env.preloads import preloaded_libraries
from cudaresolve.env.scan import scan_environment
from cudaresolve.host.facts import Driver
from cudaresolve.knowledge import components
from cudaresolve.output.findings import FindingText, in_report_order, shown
from cudaresolve.versions import CudaVersion, DriverRelease

NO_SUCH_FILE = "cannot open shared object file: No such file or directory"


# -- conda-meta records ------------------------------------------------------------------------------


def record_json(name: str, version: str, files=(), depends=(), build: str = "h0_0", **extra) -> str:
    """A conda-meta record as conda writes it (the fields the scan reads, plus some it does not)."""
    return json.dumps({"name": name, "version": version, "build": build, "build_number": 0,
                       "channel": "https://channels.example.invalid/conda-forge/linux-64", "depends": list(depends),
                       "files": list(files), "paths_data": {"paths": [], "paths_version": 1}, **extra})


def test_a_record_gives_name_version_build_channel_depends_and_absolute_files():
    text = record_json("libnvjitlink", "12.4.127", files=["lib/libnvJitLink.so.12", "targets/x86_64-linux/lib/../lib/x.so"],
                       depends=["cuda-version >=12.4,<12.5.0a0"])
    package = parse_record(text, "/p/conda-meta/libnvjitlink-12.4.127-h0_0.json", "/p/")
    record = package.record
    assert (record.name, record.version, record.build, record.channel, record.depends) == (
        "libnvjitlink", "12.4.127", "h0_0", "https://channels.example.invalid/conda-forge/linux-64",
        ("cuda-version >=12.4,<12.5.0a0",))
    assert record.record == "/p/conda-meta/libnvjitlink-12.4.127-h0_0.json"
    assert package.files == ("/p/lib/libnvJitLink.so.12", "/p/targets/x86_64-linux/lib/x.so")
    assert record.label == "libnvjitlink 12.4.127 (conda)"


@pytest.mark.parametrize("text, reason", [
    ("{", "conda-meta record is not valid JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"),
    ("[]", "conda-meta record is not a JSON object"),
    ('{"version": "1.0"}', "conda-meta record has no name"),
    ('{"name": "nccl", "version": 2.21}', "conda-meta record of nccl has no version"),
    ('{"name": "nccl", "version": "2.21.5.1", "files": "lib/libnccl.so.2"}', "conda-meta record of nccl: files is not a list of paths"),
    ('{"name": "nccl", "version": "2.21.5.1", "depends": [1]}', "conda-meta record of nccl: depends is not a list of strings"),
    # json's RecursionError and its bare ValueError past int()'s 4,300 digits were tracebacks
    ('{"name": "nccl", "x": ' + "[" * 100_000 + "]" * 100_000 + "}", "conda-meta record is not valid JSON: nested too deeply"),
    ('{"name": "nccl", "size": ' + "9" * 5000 + "}",
     "conda-meta record is not valid JSON: Exceeds the limit (4300 digits) for integer string conversion: value has 5000 digits"),
])
def test_a_record_that_cannot_be_used_says_why(text, reason):
    with pytest.raises(CondaMetaError) as raised:
        parse_record(text, "/p/conda-meta/x.json", "/p")
    assert str(raised.value) == reason


@pytest.mark.parametrize("raw, version", [
    ("12.4.127", "12.4.127"), ("2.21.5.1", "2.21.5.1"), ("1.1.1w", "1.1.1"), ("9e", "9"), ("2023c", "2023rc0"), ("abc", "0"),
    ("1." + "9" * 5000, "1." + "9" * 18), ("\u00b2.1", "0"),
])
def test_conda_versions_compare_without_crashing(raw, version):
    """PEP 440 where conda's string is one; else its leading release numbers; else 0 (the record keeps the string)."""
    assert conda_version(raw) == Version(version)


def test_read_conda_meta_keeps_the_good_records_and_says_why_for_the_others(tmp_path):
    meta = tmp_path / "conda-meta"
    meta.mkdir()
    (meta / "nccl-2.21.5.1-h0_0.json").write_text(record_json("nccl", "2.21.5.1", files=["lib/libnccl.so.2"]))
    (meta / "broken-1.0-h0_0.json").write_text('{"name": "broken", ')
    (meta / "latin-1.0-h0_0.json").write_bytes(b'{"name": "caf\xe9"}')
    (meta / "history").write_text("==> 2026-01-01 <==\n")  # not a record
    packages, problems = read_conda_meta(str(tmp_path))
    assert [p.record.name for p in packages] == ["nccl"]
    assert packages[0].files == (f"{tmp_path}/lib/libnccl.so.2",)
    assert problems == (
        Problem(str(meta / "broken-1.0-h0_0.json"),
                "conda-meta record is not valid JSON: Expecting property name enclosed in double quotes: line 1 column 20 (char 19)"),
        Problem(str(meta / "latin-1.0-h0_0.json"), "conda-meta record is not UTF-8 (byte 13)"),
    )


def test_a_prefix_without_conda_meta_is_one_problem(tmp_path):
    assert read_conda_meta(str(tmp_path)) == ((), (Problem(str(tmp_path / "conda-meta"), "cannot list: No such file or directory"),))


def test_a_record_listing_a_dist_info_is_that_python_distribution(tmp_path):
    site = tmp_path / "lib" / "python3.11" / "site-packages"
    dist_info = make_dist_info(site, "numpy", "2.2.3", files=("numpy/_core/_multiarray_umath.so",), installer="conda")
    distributions, _ = read_distributions(str(site))
    numpy = parse_record(record_json("numpy", "2.2.3", files=[
        "lib/python3.11/site-packages/numpy/_core/_multiarray_umath.so", f"lib/python3.11/site-packages/{dist_info.name}/METADATA",
        "lib/libnumpy_helper.so.1",
    ]), str(tmp_path / "conda-meta" / "numpy.json"), str(tmp_path))
    nccl = parse_record(record_json("nccl", "2.21.5.1", files=["lib/libnccl.so.2", "include/nccl.h"]),
                        str(tmp_path / "conda-meta" / "nccl.json"), str(tmp_path))
    merged, listed = with_conda(distributions, [nccl, numpy], [str(site)])
    assert [(d.name, d.kind, d.label, d.installer) for d in merged] == [
        ("nccl", "conda", "nccl 2.21.5.1 (conda)", "conda"), ("numpy", "python", "numpy 2.2.3", "conda")]
    conda_numpy = merged[1]
    assert conda_numpy.conda == numpy.record and conda_numpy.dist_info == str(dist_info)
    assert f"{tmp_path}/lib/libnumpy_helper.so.1" in conda_numpy.files  # its file outside site-packages is its own
    # only shared objects outside site-packages are left for the scan to look at (it walks site-packages itself)
    assert listed == {str(tmp_path / "conda-meta" / "nccl.json"): [f"{tmp_path}/lib/libnccl.so.2"],
                      str(dist_info): [f"{tmp_path}/lib/libnumpy_helper.so.1"]}


def test_a_conda_python_package_without_record_owns_the_files_its_conda_record_lists(elf_builder):
    prefix = elf_builder.root / "prefix"
    site = prefix / "lib/python3.11/site-packages"
    ext = elf_builder.build("_ext.so", "int f(void) { return 0; }\n", directory="prefix/lib/python3.11/site-packages/pkg")
    dist_info = make_dist_info(site, "pkg", "1.0", installer="conda")
    (dist_info / "RECORD").unlink()
    (prefix / "conda-meta").mkdir()
    (prefix / "conda-meta" / "pkg-1.0-py_0.json").write_text(record_json("pkg", "1.0", files=[
        f"lib/python3.11/site-packages/{dist_info.name}/METADATA", str(ext.relative_to(prefix))]))
    env = scan_environment(Target(site_packages=(str(site),), prefix=str(prefix), conda=True), facts_for=disk)
    assert [(e.path, e.owners) for e in env.elf_files] == [(str(ext), ("pkg",))]
    assert env.problems == (Problem(str(dist_info), "RECORD is missing; its files are those its conda-meta record lists"),)


# -- a hand-made prefix through the scan -------------------------------------------------------------


def nvjitlink_source(major: int, minor: int) -> tuple[str, str]:
    """(C source, version script) of a libnvJitLink.so.MAJOR of MAJOR.MINOR, as NVIDIA versions it:
    __nvJitLink{Create,Complete}_MAJOR_0 ... _MAJOR_MINOR under the node named like the soname."""
    names = [f"__nvJitLink{call}_{major}_{m}" for m in range(minor + 1) for call in ("Create", "Complete")]
    source = "".join(f"int {name}(void) {{ return {minor}; }}\n" for name in names)
    return source, f"libnvJitLink.so.{major} {{ global: {'; '.join(names)}; local: *; }};\n"


def build_nvjitlink(builder, major: int, minor: int, directory: str, name: Optional[str] = None) -> Path:
    source, script = nvjitlink_source(major, minor)
    return builder.build(name or f"libnvJitLink.so.{major}", source, soname=f"libnvJitLink.so.{major}",
                         version_script=script, directory=directory)


def test_a_conda_library_is_owned_by_its_package_under_every_name(elf_builder):
    """libnvjitlink's real file lives in targets/x86_64-linux/lib, with symlinks there and in lib/
    (conda-forge's layout): three ELF paths of one file, owned by the package; a record that cannot
    be read is a problem; a record without libraries (cuda-version) is no distribution."""
    prefix = elf_builder.root / "prefix"
    real = build_nvjitlink(elf_builder, 12, 4, "prefix/targets/x86_64-linux/lib", "libnvJitLink.so.12.4.127")
    (prefix / "targets/x86_64-linux/lib/libnvJitLink.so.12").symlink_to("libnvJitLink.so.12.4.127")
    (prefix / "lib").mkdir()
    (prefix / "lib/libnvJitLink.so.12").symlink_to("../targets/x86_64-linux/lib/libnvJitLink.so.12.4.127")
    (prefix / "lib/libfoo.so").write_text("INPUT(-lfoo)\n")  # a linker script: not ELF
    site = prefix / "lib/python3.11/site-packages"
    site.mkdir(parents=True)
    meta = prefix / "conda-meta"
    meta.mkdir()
    (meta / "libnvjitlink-12.4.127-h0_0.json").write_text(record_json("libnvjitlink", "12.4.127", files=[
        "lib/libnvJitLink.so.12", "targets/x86_64-linux/lib/libnvJitLink.so.12",
        "targets/x86_64-linux/lib/libnvJitLink.so.12.4.127", "lib/libgone.so.1"]))  # listed, since removed
    (meta / "cuda-version-12.4-h0_0.json").write_text(record_json("cuda-version", "12.4"))
    (meta / "foo-1.0-h0_0.json").write_text(record_json("foo", "1.0", files=["lib/libfoo.so"]))
    (meta / "bad-1.0-h0_0.json").write_text("not json")
    target = Target(site_packages=(str(site),), prefix=str(prefix), conda=True)
    env = scan_environment(target, facts_for=disk)
    assert [(d.name, d.kind, d.label) for d in env.distributions] == [("libnvjitlink", "conda", "libnvjitlink 12.4.127 (conda)")]
    assert [(e.path, e.owners, e.real_path) for e in env.elf_files] == [
        (f"{prefix}/lib/libnvJitLink.so.12", ("libnvjitlink",), str(real)),
        (f"{prefix}/targets/x86_64-linux/lib/libnvJitLink.so.12", ("libnvjitlink",), str(real)),
        (f"{prefix}/targets/x86_64-linux/lib/libnvJitLink.so.12.4.127", ("libnvjitlink",), str(real)),
    ]
    assert all(e.facts is env.elf_files[0].facts for e in env.elf_files)  # one file, read once
    assert env.problems == (Problem(str(meta / "bad-1.0-h0_0.json"),
                                    "conda-meta record is not valid JSON: Expecting value: line 1 column 1 (char 0)"),)
    assert env.conda.path == str(prefix)
    assert [r.name for r in env.conda.records] == ["cuda-version", "foo", "libnvjitlink"]
    assert env.conda.record("cuda-version").version == "12.4"
    # the loader's `bin/../lib` name is the lib/ symlink its package lists
    assert env.elf_file(f"{prefix}/bin/../lib/libnvJitLink.so.12").path == f"{prefix}/lib/libnvJitLink.so.12"


def test_a_venv_made_from_a_conda_python_sees_its_bases_conda_libraries(elf_builder, monkeypatch):
    """`python -m venv` from a conda Python: sys.prefix is the venv, sys.base_prefix the conda prefix,
    whose lib/ the interpreter's RPATH still reaches. The base's CUDA packages are the venv's
    providers; the base's Python packages (numpy's dist-info and extension in the base's
    site-packages) are not the venv's and are left out."""
    from cudaresolve.env.interpreter import running_target

    base = elf_builder.root / "base"
    build_nvjitlink(elf_builder, 12, 4, "base/lib", "libnvJitLink.so.12")
    numpy_ext = elf_builder.build("_multiarray_umath.so", "int f(void) { return 0; }\n",
                                  directory="base/lib/python3.11/site-packages/numpy/core")
    meta = base / "conda-meta"
    meta.mkdir()
    (meta / "libnvjitlink-12.4.127-h0_0.json").write_text(record_json("libnvjitlink", "12.4.127", files=["lib/libnvJitLink.so.12"]))
    (meta / "numpy-2.1.0-py311_0.json").write_text(record_json("numpy", "2.1.0", files=[
        "lib/python3.11/site-packages/numpy-2.1.0.dist-info/METADATA", str(numpy_ext.relative_to(base))]))
    venv_site = elf_builder.root / "venv/lib/python3.11/site-packages"
    venv_site.mkdir(parents=True)
    monkeypatch.setattr(sys, "prefix", str(elf_builder.root / "venv"))
    monkeypatch.setattr(sys, "base_prefix", str(base))
    described = running_target()
    assert (described.conda, described.conda_base, described.conda_prefix) == (False, str(base), str(base))
    env = scan_environment(Target(site_packages=(str(venv_site),), prefix=str(elf_builder.root / "venv"),
                                  conda_base=str(base)), facts_for=disk)
    assert [(d.name, d.kind) for d in env.distributions] == [("libnvjitlink", "conda")]
    assert [(e.path, e.owners) for e in env.elf_files] == [(f"{base}/lib/libnvJitLink.so.12", ("libnvjitlink",))]
    assert env.conda.path == str(base)
    monkeypatch.setattr(sys, "base_prefix", str(elf_builder.root / "venv"))  # not a venv: no base to read
    assert running_target().conda_base is None


def test_a_prefix_that_is_not_the_targets_is_not_read(tmp_path):
    """Only the target interpreter's own prefix is read for conda packages: a CONDA_PREFIX in the
    environment is where preloaders look (as at run time), not part of the environment."""
    (tmp_path / "conda-meta").mkdir()
    (tmp_path / "conda-meta" / "x.json").write_text("broken")
    env = scan_environment(Target(site_packages=(str(tmp_path),), prefix=str(tmp_path), conda=False),
                           facts_for=disk, environ={"CONDA_PREFIX": str(tmp_path)})
    assert (env.conda, env.problems) == (None, ())


def test_the_cached_report_follows_the_conda_packages(elf_builder, tmp_path):
    """The result cache (commands/result_cache.py) holds while conda-meta and the conda libraries are unchanged: a
    library replaced in place, or a package conda adds, makes the next doctor run diagnose again."""
    from cudaresolve.commands.result_cache import doctor_report

    prefix = elf_builder.root / "prefix"
    library = build_nvjitlink(elf_builder, 12, 4, "prefix/lib")
    site = prefix / "lib/python3.11/site-packages"
    elf_builder.build("_ext.so", "int __nvJitLinkComplete_12_8(void);\nint f(void) { return __nvJitLinkComplete_12_8(); }\n",
                      link=[build_nvjitlink(elf_builder, 12, 8, "stubs")], directory="prefix/lib/python3.11/site-packages/pkg")
    make_dist_info(site, "pkg", "1.0", files=("pkg/_ext.so",))
    (prefix / "conda-meta").mkdir()
    (prefix / "conda-meta/libnvjitlink-12.4.127-h0_0.json").write_text(record_json("libnvjitlink", "12.4.127", files=["lib/libnvJitLink.so.12"]))
    target = Target(site_packages=(str(site),), prefix=str(prefix), conda=True)
    environ = {"CUDARESOLVE_CACHE_DIR": str(tmp_path / "cache"), "LD_LIBRARY_PATH": str(prefix / "lib")}

    def errors() -> list[str]:
        return [f["check"] for f in json.loads(doctor_report(target, HOST, environ).json)["findings"] if f["severity"] == "error"]

    assert errors() == errors() == ["symbol-skew"]  # the second from the cache
    library.write_bytes(build_nvjitlink(elf_builder, 12, 8, "newer").read_bytes())  # in place: lib/ is unchanged
    assert errors() == []
    nccl = elf_builder.build("libnccl.so.2", nccl_source(CONDA_NCCL), soname="libnccl.so.2", directory="prefix/targets")
    (prefix / "conda-meta/nccl-2.21.5.1-h0_0.json").write_text(record_json("nccl", "2.21.5.1", files=[os.path.relpath(nccl, prefix)]))
    assert [d["name"] for d in json.loads(doctor_report(target, HOST, environ).json)["environment"]["distributions"]] == [
        "libnvjitlink", "nccl", "pkg"]


# -- the interpreter's DT_RPATH in the loader (plain data) -------------------------------------------


def facts(path: str, *, soname=None, needed=(), rpath=(), runpath=(), defines=(), undefined=()) -> BinaryFacts:
    return BinaryFacts(
        path=path, machine="x86_64", elf_type="DYN", soname=soname, needed=tuple(needed), rpath=tuple(rpath),
        runpath=tuple(runpath), flags=0, flags_1=0,
        symbols=SymbolTable.of(undefined=[Symbol(n) for n in undefined], defined=[Symbol(n) for n in defines]),
        version_definitions=(), version_needs=(), build_id=None, fatbin=None,
    )


PROGRAM = "/env/bin/python3.11"
LIBX = facts("libx", soname="libx.so.1", defines=("x",))


def load(files: dict[str, BinaryFacts], root: str, program_rpath=("$ORIGIN/../lib",), ld_library_path=()):
    env = with_program(LoaderEnv(machine="x86_64", ld_library_path=ld_library_path, default_dirs=("/nowhere",),
                                 real_path=lambda p: p), PROGRAM, facts(PROGRAM, rpath=program_rpath))
    return resolve([root], facts_of=files.get, env=env)


def chosen(result, needed: str):
    return next(res for obj in result.objects for res in obj.needed if res.needed == needed)


def test_the_programs_rpath_serves_an_extension_without_one():
    """conda's python (DT_RPATH $ORIGIN/../lib, $ORIGIN its own directory) finds lib/ for any library
    loaded into it whose loading object has no DT_RUNPATH: glibc's `RPATH from file <program>`."""
    ext = facts("/sp/ext.so", needed=("libx.so.1",))
    result = load({"/sp/ext.so": ext, "/env/bin/../lib/libx.so.1": LIBX}, "/sp/ext.so")
    res = chosen(result, "libx.so.1")
    assert (res.path, res.step, res.rpath_of, res.why) == ("/env/bin/../lib/libx.so.1", RPATH, PROGRAM, f"rpath of {PROGRAM}")
    assert result.problems == ()


def test_the_loading_objects_rpath_chain_comes_before_the_programs():
    ext = facts("/sp/ext.so", needed=("libmid.so.1",), rpath=("/sp/libs",))
    mid = facts("/sp/libs/libmid.so.1", soname="libmid.so.1", needed=("libx.so.1",))
    files = {"/sp/ext.so": ext, "/sp/libs/libmid.so.1": mid, "/sp/libs/libx.so.1": LIBX, "/env/bin/../lib/libx.so.1": LIBX}
    res = chosen(load(files, "/sp/ext.so"), "libx.so.1")
    assert (res.path, res.rpath_of) == ("/sp/libs/libx.so.1", "/sp/ext.so")  # inherited from ext, searched first


def test_the_programs_rpath_comes_before_ld_library_path():
    ext = facts("/sp/ext.so", needed=("libx.so.1",))
    files = {"/sp/ext.so": ext, "/env/bin/../lib/libx.so.1": LIBX, "/elsewhere/libx.so.1": LIBX}
    res = chosen(load(files, "/sp/ext.so", ld_library_path=("/elsewhere",)), "libx.so.1")
    assert (res.path, res.step) == ("/env/bin/../lib/libx.so.1", RPATH)


def test_a_loading_object_with_runpath_skips_the_programs_rpath():
    ext = facts("/sp/ext.so", needed=("libx.so.1",), runpath=("/sp/none",))
    res = chosen(load({"/sp/ext.so": ext, "/env/bin/../lib/libx.so.1": LIBX}, "/sp/ext.so"), "libx.so.1")
    assert (res.path, res.step) == (None, "not found")


def test_a_program_with_runpath_contributes_no_rpath():
    """pyenv's python carries DT_RUNPATH: nothing of it is searched for libraries loaded into it."""
    env = with_program(LoaderEnv(machine="x86_64"), PROGRAM, facts(PROGRAM, rpath=("/a",), runpath=("/b",)))
    assert (env.program, env.program_rpath) == (PROGRAM, ())


# -- findings on conda providers (plain data) ---------------------------------------------------------

PREFIX = "/envs/p"
SITE = f"{PREFIX}/lib/python3.11/site-packages"
CONDA_NVJITLINK = f"{PREFIX}/lib/libnvJitLink.so.12"
SKEW_EXT = f"{SITE}/skewpkg/_ext.so"


def conda_dist(name: str, version: str, files: tuple[str, ...], depends: tuple[str, ...] = ()) -> Distribution:
    record = CondaRecord(name, version, "h0_0", "conda-forge", depends, f"{PREFIX}/conda-meta/{name}-{version}-h0_0.json")
    return Distribution(name, conda_version(version), (), "conda", record.record, files, conda=record)


def skew_env(ext_rpath=("$ORIGIN/../nvidia/nvjitlink/lib",), cuda_version: Optional[str] = "12.4",
             conda_name: str = "libnvjitlink") -> Environment:
    """skewpkg's extension (no DT_RUNPATH) binds __nvJitLinkComplete_12_8; the interpreter's DT_RPATH
    finds conda's libnvJitLink.so.12 of 12.4 (named `conda_name`)."""
    ext = so(SKEW_EXT, needed=("libnvJitLink.so.12",),
             undefined=(Symbol("__nvJitLinkComplete_12_8", "libnvJitLink.so.12", "libnvJitLink.so.12"),),
             version_needs=(VersionNeed("libnvJitLink.so.12", ("libnvJitLink.so.12",)),))
    ext = replace(ext, rpath=tuple(ext_rpath))
    provider = so(CONDA_NVJITLINK, soname="libnvJitLink.so.12", version_definitions=("libnvJitLink.so.12",),
                  defined=(Symbol("__nvJitLinkComplete_12_4", "libnvJitLink.so.12"),))
    records = [conda_dist(conda_name, "12.4.127", (CONDA_NVJITLINK,))]
    cuda = [CondaRecord("cuda-version", cuda_version, "h0_0", "", (), f"{PREFIX}/conda-meta/cuda-version.json")] if cuda_version else []
    skewpkg = Distribution("skewpkg", Version("1.0"), (), "pip", f"{SITE}/skewpkg-1.0.dist-info", (SKEW_EXT,))
    loader = with_program(LoaderEnv(machine="x86_64", default_dirs=("/nowhere",), real_path=os.path.normpath),
                          f"{PREFIX}/bin/python3.11", facts(f"{PREFIX}/bin/python3.11", rpath=("$ORIGIN/../lib",)))
    by_path = {SKEW_EXT: ext, f"{PREFIX}/bin/../lib/libnvJitLink.so.12": provider}
    return Environment(
        Target(site_packages=(SITE,), prefix=PREFIX, conda=True), (*records, skewpkg),
        (ElfFile(CONDA_NVJITLINK, (conda_name,), provider, None), ElfFile(SKEW_EXT, ("skewpkg",), ext, None)),
        loader=loader, system_facts=by_path.get,
        conda=CondaPrefix(PREFIX, tuple(sorted([*cuda, records[0].conda], key=lambda r: r.name))),
    )


def skew_fix(env: Environment) -> Optional[str]:
    [finding] = [shown(f) for f in check_symbol_skew(env, load_packages(env))]
    assert finding.evidence[-1] == (f"the loader picks {PREFIX}/bin/../lib/libnvJitLink.so.12 "
                                    f"(rpath of {PREFIX}/bin/python3.11), from {env.distributions[0].label}")
    return finding.fix


def test_the_conda_fix_moves_cuda_version_along_and_the_pip_fix_needs_the_wheels_directory():
    assert skew_fix(skew_env()) == (
        'conda install "libnvjitlink>=12.8" "cuda-version>=12.8"; or pip install "nvidia-nvjitlink-cu12>=12.8" '
        f"(_ext.so looks in {SITE}/skewpkg/../nvidia/nvjitlink/lib first)")


def test_without_a_path_to_the_wheel_only_conda_can_fix_it():
    """An extension that finds nvJitLink only through the interpreter: installing the wheel would change nothing."""
    assert skew_fix(skew_env(ext_rpath=())) == 'conda install "libnvjitlink>=12.8" "cuda-version>=12.8"'


@pytest.mark.parametrize("cuda_version, expected", [
    ("12.8", 'conda install "libnvjitlink>=12.8"'),  # the pin already admits it
    (None, 'conda install "libnvjitlink>=12.8"'),  # no cuda-version in the prefix
])
def test_cuda_version_is_named_only_when_it_pins_an_older_cuda(cuda_version, expected):
    assert skew_fix(skew_env(ext_rpath=(), cuda_version=cuda_version)) == expected


def test_the_conda_package_is_named_from_the_data_not_from_the_owner():
    """nvidia channel builds split a library from its lib/ symlinks (cuda-cudart_linux-64 and cuda-cudart):
    the package to install is the component's, data/components.toml `conda`."""
    assert components.conda_packages("libnvJitLink.so.12", 12) == ("libnvjitlink",)
    assert skew_fix(skew_env(ext_rpath=(), conda_name="libnvjitlink_linux-64")).startswith('conda install "libnvjitlink>=12.8"')


def test_cuda_pathfinder_looks_in_lib64_then_lib_and_nvvm_in_its_own_directory():
    on_disk = {f"{PREFIX}/lib/libnvJitLink.so.12", f"{PREFIX}/lib64/libnvJitLink.so.12", f"{PREFIX}/nvvm/lib64/libnvvm.so.4",
               f"{PREFIX}/lib/libnvvm.so.4"}
    cupy = components.preloader_for("cupy-cuda12x", Version("14.2.0"))
    assert preloaded_libraries(["libnvJitLink.so.12", "libnvvm.so.4"], cupy, [SITE], PREFIX, on_disk.__contains__) == {
        "libnvJitLink.so.12": f"{PREFIX}/lib64/libnvJitLink.so.12", "libnvvm.so.4": f"{PREFIX}/nvvm/lib64/libnvvm.so.4"}
    torch = components.preloader_for("torch", Version("2.14.1"))
    assert preloaded_libraries(["libnvJitLink.so.12"], torch, [SITE], PREFIX, on_disk.__contains__) == {}


# -- glibc on a program with DT_RPATH ----------------------------------------------------------------


def ldd_r_in(program: str, extension: str) -> tuple[dict[str, Optional[str]], list[str]]:
    """`ldd -r PROGRAM` with EXTENSION preloaded: ld.so itself (`--preload`, under ldd's variables)
    maps the extension as the program's dependency, as Python's dlopen does, and reports
    ({needed name: path or None}, [undefined-symbol lines for the extension]). Not `LD_PRELOAD=... ldd`:
    ldd is a shell script, and the variable would preload the extension into the shell."""
    interpreter = "/lib64/ld-linux-x86-64.so.2"
    if not os.path.exists(interpreter):
        pytest.skip("no x86_64 dynamic linker here")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LD_")}
    env.update(LD_TRACE_LOADED_OBJECTS="1", LD_WARN="yes", LD_BIND_NOW="yes")
    proc = subprocess.run([interpreter, "--preload", extension, program], capture_output=True, text=True, env=env)
    if "--preload" in proc.stderr:
        pytest.skip("this ld.so has no --preload (glibc < 2.30)")
    found: dict[str, Optional[str]] = {}
    undefined = []
    for line in (proc.stdout + proc.stderr).splitlines():
        if m := re.fullmatch(r"\t(\S+) => not found", line):
            found[m.group(1)] = None
        elif m := re.fullmatch(r"\t(\S+) => (\S+) \(0x[0-9a-f]+\)", line):
            found[m.group(1)] = m.group(2)
        elif (m := re.fullmatch(r"(undefined symbol: .*)\t\((\S+)\)", line)) and m.group(2) == extension:
            undefined.append(m.group(1))
    return found, undefined


def test_glibc_searches_the_programs_rpath_for_a_preloaded_objects_dependency(elf_builder):
    """ld.so maps a preloaded object as the program's dependency, as Python's dlopen of an extension
    is: its DT_NEEDED without a path of its own is found through the program's DT_RPATH. The model,
    given the program's facts, picks the same file."""
    lib = elf_builder.build("libx.so.1", "int x(void) { return 1; }\n", soname="libx.so.1", directory="env/lib")
    program = elf_builder.build("prog", "int main(void) { return 0; }\n", shared=False, rpath="$ORIGIN/../lib",
                                directory="env/bin")
    ext = elf_builder.build("ext.so", "int x(void);\nint y(void) { return x(); }\n", link=[lib], directory="site")
    found, undefined = ldd_r_in(str(program), str(ext))
    assert undefined == []
    assert found["libx.so.1"] == f"{elf_builder.root}/env/bin/../lib/libx.so.1"
    env = with_program(LoaderEnv.from_system({}, driver_libraries=frozenset()), str(program), disk(str(program)))
    res = chosen(resolve([str(ext)], facts_of=disk, env=env), "libx.so.1")
    assert (res.path, res.step, res.rpath_of) == (found["libx.so.1"], RPATH, str(program))


# -- real conda prefixes ------------------------------------------------------------------------------


def conda_package(channel: Path, name: str, version: str, *, files: Optional[dict[str, bytes]] = None,
                  links: Optional[dict[str, str]] = None, depends: tuple[str, ...] = (), subdir: str = "linux-64") -> None:
    """A conda package (.tar.bz2) in `channel`/`subdir`: `files` by path, `links` as symlinks (path ->
    target), in info/paths.json as conda-build writes them (hardlink / softlink)."""
    files, links = files or {}, links or {}
    index = {"name": name, "version": version, "build": "h0_0", "build_number": 0, "depends": list(depends),
             "license": "BSD-3-Clause", "subdir": subdir, "timestamp": 1760000000000}
    if subdir == "noarch":
        index["noarch"] = "generic"
    paths = [{"_path": p, "path_type": "hardlink", "sha256": hashlib.sha256(d).hexdigest(), "size_in_bytes": len(d)}
             for p, d in files.items()]
    for path, target in links.items():
        data = files[os.path.normpath(os.path.join(os.path.dirname(path), target))]
        paths.append({"_path": path, "path_type": "softlink", "sha256": hashlib.sha256(data).hexdigest(),
                      "size_in_bytes": len(data)})
    info = {"info/index.json": json.dumps(index).encode(),
            "info/paths.json": json.dumps({"paths_version": 1, "paths": paths}).encode(),
            "info/files": "".join(f"{p}\n" for p in [*files, *links]).encode()}
    (channel / subdir).mkdir(parents=True, exist_ok=True)
    with tarfile.open(channel / subdir / f"{name}-{version}-h0_0.tar.bz2", "w:bz2") as tf:
        for path, data in {**info, **files}.items():
            member = tarfile.TarInfo(path)
            member.size, member.mode = len(data), 0o755 if path.endswith(".so") or ".so." in path else 0o644
            tf.addfile(member, io.BytesIO(data))
        for path, target in links.items():
            member = tarfile.TarInfo(path)
            member.type, member.linkname = tarfile.SYMTYPE, target
            tf.addfile(member)


TARGETS = "targets/x86_64-linux/lib"
NVJITLINK_RELEASES = {"12.4.127": (12, 4), "12.8.93": (12, 8)}
EXT = sysconfig.get_config_var("EXT_SUFFIX")
TAG = f"cp{sys.version_info[0]}{sys.version_info[1]}-cp{sys.version_info[0]}{sys.version_info[1]}-linux_x86_64"
CONDA_NCCL, WHEEL_NCCL = 21, 27  # what each libnccl.so.2 build's nccl_build() returns


def nccl_source(build: int) -> str:
    return f"int nccl_build(void) {{ return {build}; }}\n"


def extension_source(module: str, calls: str) -> str:
    """A Python extension module `module` whose `run()` returns `calls` (a C expression)."""
    return (
        "#include <Python.h>\n"
        "int __nvJitLinkComplete_12_8(void);\nint nccl_build(void);\n"
        f"static PyObject *run(PyObject *self, PyObject *args) {{ return PyLong_FromLong({calls}); }}\n"
        'static PyMethodDef methods[] = {{"run", run, METH_NOARGS, NULL}, {NULL, NULL, 0, NULL}};\n'
        f'static struct PyModuleDef module = {{PyModuleDef_HEAD_INIT, "{module}", NULL, -1, methods}};\n'
        f"PyMODINIT_FUNC PyInit_{module}(void) {{ return PyModule_Create(&module); }}\n"
    )


class Payloads:
    """The gcc-built libraries and wheels of these tests, built once per module."""

    def __init__(self, root: Path):
        from conftest import ElfBuilder

        self.root = root
        self.builder = ElfBuilder(root / "elf")
        include = ["-I" + sysconfig.get_paths()["include"]]
        stub_nvjitlink = build_nvjitlink(self.builder, 12, 8, "stubs")  # what the extensions were linked against
        stub_nccl = self.builder.build("libnccl.so.2", nccl_source(0), soname="libnccl.so.2", directory="stubs")
        self.wheels = root / "wheels"
        self.wheels.mkdir()
        # skewpkg: built against nvJitLink 12.8 (binds __nvJitLinkComplete_12_8@libnvJitLink.so.12), with
        # DT_RPATH to where nvidia-nvjitlink-cu12 installs: a package that takes the wheel when there is one.
        # It declares the wheel, but in a conda prefix it is installed with --no-deps: conda provides CUDA.
        self.wheel("skewpkg", "1.0", {f"skewpkg/_ext{EXT}": self.builder.build(
            f"_ext{EXT}", extension_source("_ext", "__nvJitLinkComplete_12_8()"), link=[stub_nvjitlink],
            rpath="$ORIGIN/../nvidia/nvjitlink/lib", directory="skewpkg", extra=include)},
            requires=("nvidia-nvjitlink-cu12>=12.8",), init=b"from . import _ext\n")  # its import loads it
        self.wheel("nvidia-nvjitlink-cu12", "12.8.93", {
            "nvidia/nvjitlink/lib/libnvJitLink.so.12": build_nvjitlink(self.builder, 12, 8, "wheel-nvjitlink")})
        self.wheel("nvidia-nccl-cu12", "2.27.3", {"nvidia/nccl/lib/libnccl.so.2": self.builder.build(
            "libnccl.so.2", nccl_source(WHEEL_NCCL), soname="libnccl.so.2", directory="wheel-nccl")})
        # CuPy 14 links libnccl.so.2 with no RPATH: cuda-pathfinder preloads it (site-packages first)
        self.wheel("cupy-cuda12x", "14.2.0", {f"cupy/cuda/nccl{EXT}": self.builder.build(
            f"nccl{EXT}", extension_source("nccl", "nccl_build()"), link=[stub_nccl], directory="cupy", extra=include)})
        # other-pkg links libnccl.so.2 with no RPATH either: in a conda prefix, the interpreter's finds it
        self.wheel("other-pkg", "1.0", {f"other_pkg/_ext{EXT}": self.builder.build(
            f"_ext{EXT}", extension_source("_ext", "nccl_build()"), link=[stub_nccl], directory="other", extra=include)})
        # CuPy for CUDA 13, without libraries: what an abstract `cupy` becomes where CUDA 13 is preferred
        filename, data = make_wheel("cupy-cuda13x", "14.2.0", tag=TAG, files={"cupy/__init__.py": b""})
        (self.wheels / filename).write_bytes(data)
        self.channel: dict[str, tuple] = {}
        for version, (major, minor) in NVJITLINK_RELEASES.items():
            real = f"{TARGETS}/libnvJitLink.so.{version}"
            library = build_nvjitlink(self.builder, major, minor, f"conda-nvjitlink-{version}")
            self.channel[f"libnvjitlink-{version}"] = ("libnvjitlink", version, {real: library.read_bytes()}, {
                f"{TARGETS}/libnvJitLink.so.{major}": f"libnvJitLink.so.{version}",
                f"lib/libnvJitLink.so.{major}": f"../{TARGETS}/libnvJitLink.so.{version}"},
                (f"cuda-version >={major}.{minor},<{major}.{minor + 1}.0a0",), "linux-64")
            self.channel[f"cuda-version-{major}.{minor}"] = ("cuda-version", f"{major}.{minor}", {}, {}, (), "noarch")
        nccl = self.builder.build("libnccl.so.2.21.5", nccl_source(CONDA_NCCL), soname="libnccl.so.2", directory="conda-nccl")
        self.channel["nccl"] = ("nccl", "2.21.5.1", {"lib/libnccl.so.2.21.5": nccl.read_bytes()},
                                {"lib/libnccl.so.2": "libnccl.so.2.21.5"}, ("cuda-version >=12,<13.0a0",), "linux-64")
        self.launcher = self.python_launcher()

    def wheel(self, name: str, version: str, libraries: dict[str, Path], requires: tuple[str, ...] = (),
              init: bytes = b"") -> None:
        files = {member: path.read_bytes() for member, path in libraries.items()}
        for member in list(files):
            files.setdefault(os.path.join(member.split("/")[0], "__init__.py"), init)
        filename, data = make_wheel(name, version, requires=requires, tag=TAG, files=files)
        (self.wheels / filename).write_bytes(data)

    def wheel_file(self, name: str) -> str:
        return str(next(self.wheels.glob(f"{name.replace('-', '_')}-*.whl")))

    def python_launcher(self) -> Path:
        """conda python's shape: a program with DT_RPATH `$ORIGIN/../lib` that runs Python (this
        interpreter's libpython, whose directory follows in the RPATH as it is not a system one)."""
        libdir = sysconfig.get_config_var("LIBDIR")
        library = sysconfig.get_config_var("LDLIBRARY") or ""
        if not sysconfig.get_config_var("Py_ENABLE_SHARED") or not os.path.exists(os.path.join(libdir, library)):
            pytest.skip("this Python has no shared libpython to build a conda-like interpreter with")
        source = "#include <Python.h>\nint main(int argc, char **argv) { return Py_BytesMain(argc, argv); }\n"
        name = library.split(".so")[0][3:]  # libpython3.11.so -> python3.11
        return self.builder.build("python", source, shared=False, rpath=f"$ORIGIN/../lib:{libdir}", directory="launcher",
                                  extra=["-I" + sysconfig.get_paths()["include"], f"-L{libdir}", f"-l{name}"])


@pytest.fixture(scope="module")
def payloads(tmp_path_factory):
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    return Payloads(tmp_path_factory.mktemp("payloads"))


@pytest.fixture(scope="module")
def conda(conda_venv, payloads, tmp_path_factory):
    """The real conda (test_conda_plugin's runner) with a channel of the packages above."""
    from test_conda_plugin import Conda

    runner = Conda(conda_venv, tmp_path_factory.mktemp("conda"))
    for name, version, files, links, depends, subdir in payloads.channel.values():
        conda_package(runner.channel, name, version, files=files, links=links, depends=depends, subdir=subdir)
    subprocess.run([runner.python, "-m", "conda_index", str(runner.channel)], check=True, capture_output=True)
    return runner


def make_prefix(conda, payloads, name: str, *specs: str, wheels: tuple[str, ...] = ()) -> Path:
    """`conda create -n NAME SPECS`, then a conda-like python in it and `pip install` of `wheels`."""
    done = conda("create", "-n", name, *specs)
    assert done.returncode == 0, done.stdout + done.stderr
    prefix = conda.root / "envs" / name
    (prefix / "bin").mkdir(exist_ok=True)
    shutil.copy2(payloads.launcher, prefix / "bin" / "python")
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    (prefix / "pyvenv.cfg").write_text(
        f"home = {os.path.join(sys.base_prefix, 'bin')}\ninclude-system-site-packages = false\nversion = {version}.0\n")
    (prefix / "lib" / f"python{version}" / "site-packages").mkdir(parents=True)
    if wheels:
        pip(prefix, "install", *(payloads.wheel_file(w) for w in wheels))
    return prefix


def pip(prefix: Path, *args: str) -> None:
    """This interpreter's pip acting on the prefix's Python (`pip --python`), offline."""
    command = [sys.executable, "-m", "pip", "--python", str(prefix / "bin" / "python"), "--disable-pip-version-check", *args]
    if args[0] == "install":
        command += ["--no-index", "--no-deps"]
    else:
        command += ["-y"]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def in_prefix(prefix: Path, code: str) -> subprocess.CompletedProcess:
    """`code` run by the prefix's Python from a clean environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LD_", "PYTHON", "CONDA"))}
    return subprocess.run([str(prefix / "bin" / "python"), "-c", code], capture_output=True, text=True, env=env)


# A driver that runs CUDA 12.8 natively, as the 12.8 libraries here need (HOST's 550 is CUDA 12.4).
HOST_570 = replace(HOST, driver=Driver(DriverRelease.parse("570.86.15"), "override:--driver", CudaVersion.parse("12.8"), "derived:branch-table"))


def texts(diagnosis) -> tuple[FindingText, ...]:
    """The findings of a diagnosis as the report words them, in its order."""
    return tuple(shown(finding) for finding in in_report_order(diagnosis.findings))


def doctor(prefix: Path, tmp_path: Path):
    target = target_for_python(str(prefix / "bin" / "python"))
    return examine(target, HOST_570, {"CUDARESOLVE_CACHE_DIR": str(tmp_path / "cache")})


def site_of(prefix: Path) -> Path:
    return prefix / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"


@pytest.mark.conda
def test_the_prefix_python_is_conda_pythons_shape(conda, payloads):
    """The interpreter of these prefixes: DT_RPATH (not RUNPATH) `$ORIGIN/../lib` first, sys.prefix the
    conda prefix, and pip installs into it."""
    prefix = make_prefix(conda, payloads, "shape", "cuda-version=12.4", wheels=("other-pkg",))
    program = disk(str(prefix / "bin" / "python"))
    assert program.rpath[0] == "$ORIGIN/../lib" and program.runpath == ()
    target = target_for_python(str(prefix / "bin" / "python"))
    assert (target.prefix, target.conda, target.executable) == (str(prefix), True, str(prefix / "bin" / "python"))
    assert (site_of(prefix) / "other_pkg" / f"_ext{EXT}").is_file()


@pytest.fixture(scope="module")
def skew(conda, payloads):
    """conda's libnvjitlink 12.4.127 (pinned by cuda-version 12.4) and skewpkg, built against 12.8."""
    return make_prefix(conda, payloads, "skew", "libnvjitlink=12.4.127", "cuda-version=12.4", wheels=("skewpkg",))


@pytest.mark.conda
def test_a_conda_nvjitlink_older_than_a_wheel_needs_is_symbol_skew_naming_both(skew, tmp_path):
    ext = site_of(skew) / "skewpkg" / f"_ext{EXT}"
    conda_copy = f"{skew}/bin/../lib/libnvJitLink.so.12"
    # glibc: ldd -r in the prefix's python, and the import itself
    found, undefined = ldd_r_in(str(skew / "bin" / "python"), str(ext))
    assert found["libnvJitLink.so.12"] == conda_copy
    assert undefined == ["undefined symbol: __nvJitLinkComplete_12_8, version libnvJitLink.so.12"]
    imported = in_prefix(skew, "import skewpkg._ext")
    assert imported.returncode != 0
    assert f"{ext}: undefined symbol: __nvJitLinkComplete_12_8, version libnvJitLink.so.12" in imported.stderr
    # the doctor
    diagnosis = doctor(skew, tmp_path)
    [skewed] = [f for f in texts(diagnosis) if f.severity == "error"]
    assert skewed == FindingText(
        "symbol-skew",
        "error",
        "skewpkg 1.0",
        f"_ext{EXT}: undefined symbol: __nvJitLinkComplete_12_8, version libnvJitLink.so.12",
        (f"{ext}: undefined symbol: __nvJitLinkComplete_12_8, version libnvJitLink.so.12",
         f"the loader picks {conda_copy} (rpath of {skew}/bin/python), from libnvjitlink 12.4.127 (conda)"),
        'conda install "libnvjitlink>=12.8" "cuda-version>=12.8"; or pip install "nvidia-nvjitlink-cu12>=12.8" '
        f"(_ext{EXT} looks in {site_of(skew)}/skewpkg/../nvidia/nvjitlink/lib first)",
    )


@pytest.mark.conda
def test_both_fixes_of_the_skew_work(conda, payloads, tmp_path):
    """The pip side (the wheel lands where skewpkg's RPATH looks first) and the conda side (the fix's
    own command, run by conda, whose post-command doctor then reports nothing wrong)."""
    prefix = make_prefix(conda, payloads, "fixes", "libnvjitlink=12.4.127", "cuda-version=12.4", wheels=("skewpkg",))
    ext = site_of(prefix) / "skewpkg" / f"_ext{EXT}"
    pip(prefix, "install", payloads.wheel_file("nvidia-nvjitlink-cu12"))
    wheel_copy = f"{site_of(prefix)}/skewpkg/../nvidia/nvjitlink/lib/libnvJitLink.so.12"
    assert ldd_r_in(str(prefix / "bin" / "python"), str(ext)) == ({**ldd_r_in(str(prefix / "bin" / "python"), str(ext))[0],
                                                                    "libnvJitLink.so.12": wheel_copy}, [])
    assert in_prefix(prefix, "import skewpkg._ext; print(skewpkg._ext.run())").stdout == "8\n"
    diagnosis = doctor(prefix, tmp_path)
    assert [f for f in texts(diagnosis) if f.severity != "info"] == []
    [both] = [f for f in texts(diagnosis) if f.check == "duplicate-library"]
    assert both.message == ("libnvJitLink.so.12 is installed by 2 distributions (libnvjitlink (conda), nvidia-nvjitlink-cu12); "
                            "at most one copy is found by the loader, the others are private copies or a conda package's, "
                            "which no package judged here loads")
    pip(prefix, "uninstall", "nvidia-nvjitlink-cu12")
    assert [f.check for f in texts(doctor(prefix, tmp_path)) if f.severity == "error"] == ["symbol-skew"]
    done = conda("install", "-n", "fixes", "libnvjitlink>=12.8", "cuda-version>=12.8", **recorded_host())
    assert done.returncode == 0, done.stdout + done.stderr
    assert "cudaresolve doctor after conda install:" in done.stdout
    assert "result: 0 errors, 0 warnings, 0 infos" in done.stdout
    found, undefined = ldd_r_in(str(prefix / "bin" / "python"), str(ext))
    assert (found["libnvJitLink.so.12"], undefined) == (f"{prefix}/bin/../lib/libnvJitLink.so.12", [])
    assert in_prefix(prefix, "import skewpkg._ext; print(skewpkg._ext.run())").stdout == "8\n"
    assert texts(doctor(prefix, tmp_path)) == ()


def recorded_host() -> dict[str, str]:
    """A recorded host as the conda process reads it (test_conda_plugin's: driver 570, GPUs 7.0 and 8.9)."""
    from test_conda_plugin import MIXED, recorded

    return recorded(MIXED)


@pytest.mark.conda
def test_a_clean_prefix_has_no_findings(conda, payloads, tmp_path):
    prefix = make_prefix(conda, payloads, "clean", "libnvjitlink=12.8.93", "cuda-version=12.8", "nccl",
                         wheels=("skewpkg", "other-pkg"))
    python = str(prefix / "bin" / "python")
    for module, answer in (("skewpkg._ext", 8), ("other_pkg._ext", CONDA_NCCL)):
        found, undefined = ldd_r_in(python, str(site_of(prefix).joinpath(*module.split(".")).with_suffix("")) + EXT)
        assert undefined == [] and None not in found.values()
        assert in_prefix(prefix, f"import {module}; print({module}.run())").stdout == f"{answer}\n"
    diagnosis = doctor(prefix, tmp_path)
    assert texts(diagnosis) == ()
    env = diagnosis.environment
    assert [(d.name, d.kind, d.label) for d in env.distributions] == [
        ("libnvjitlink", "conda", "libnvjitlink 12.8.93 (conda)"), ("nccl", "conda", "nccl 2.21.5.1 (conda)"),
        ("other-pkg", "python", "other-pkg 1.0"), ("skewpkg", "python", "skewpkg 1.0")]
    assert [r.name for r in env.conda.records] == ["cuda-version", "libnvjitlink", "nccl"]
    # the conda package's libraries are providers, not judged as roots: only the wheels' are loaded
    assert {load.dist for load in diagnosis.loads} == {"other-pkg", "skewpkg"}


@pytest.mark.conda
def test_a_conda_nccl_beside_a_wheel_nccl_is_a_duplicate_naming_both(conda, payloads, tmp_path):
    """CuPy preloads nvidia-nccl-cu12's libnccl.so.2 (cuda-pathfinder: site-packages first); other-pkg's
    extension, with no RPATH, finds conda's through the interpreter's. Two builds, one soname: glibc
    serves whichever loads first to both."""
    prefix = make_prefix(conda, payloads, "nccl", "nccl", "cuda-version=12.4",
                         wheels=("nvidia-nccl-cu12", "cupy-cuda12x", "other-pkg"))
    python, site = str(prefix / "bin" / "python"), site_of(prefix)
    other = site / "other_pkg" / f"_ext{EXT}"
    cupy = site / "cupy" / "cuda" / f"nccl{EXT}"
    wheel_copy = site / "nvidia" / "nccl" / "lib" / "libnccl.so.2"
    assert ldd_r_in(python, str(other))[0]["libnccl.so.2"] == f"{prefix}/bin/../lib/libnccl.so.2"
    assert in_prefix(prefix, "import other_pkg._ext as e; print(e.run())").stdout == f"{CONDA_NCCL}\n"
    preloaded_first = f"import ctypes; ctypes.CDLL('{wheel_copy}', ctypes.RTLD_GLOBAL); import other_pkg._ext as e; print(e.run())"
    assert in_prefix(prefix, preloaded_first).stdout == f"{WHEEL_NCCL}\n"
    diagnosis = doctor(prefix, tmp_path)
    [clash] = [f for f in texts(diagnosis) if f.check == "duplicate-library"]
    assert clash == FindingText(
        "duplicate-library",
        "error",
        "libnccl.so.2",
        "libnccl.so.2 is loaded from different builds for different consumers (nccl (conda), nvidia-nccl-cu12): "
        "in one process the first copy loaded serves every consumer",
        (f"{prefix}/lib/libnccl.so.2 (from nccl (conda)) is what {other} loads",
         f"{wheel_copy} (from nvidia-nccl-cu12) is what {cupy} loads"),
        "install releases of these packages that load one build of it (the evidence says who loads which)",
    )
    # once the wheel is required (by other-pkg here), the conda package is the one to go
    pip(prefix, "uninstall", "other-pkg")
    wheel = payloads.wheel_file("other-pkg")
    required = tmp_path / Path(wheel).name
    filename, data = make_wheel("other-pkg", "1.0", requires=("nvidia-nccl-cu12",), tag=TAG, files=dict(
        (info.filename, zipfile.ZipFile(wheel).read(info)) for info in zipfile.ZipFile(wheel).infolist()
        if ".dist-info/" not in info.filename))
    required.write_bytes(data)
    pip(prefix, "install", str(required))
    [clash] = [f for f in texts(doctor(prefix, tmp_path)) if f.check == "duplicate-library"]
    assert clash.fix == "keep one build: conda remove nccl, which nothing installed requires, or install releases that share one provider"


@pytest.mark.conda
def test_conda_cudaresolve_names_an_environment_with_n(conda, skew):
    done = conda("cudaresolve", "doctor", "-n", "skew", "--no-judge-fixes", **recorded_host())
    assert done.returncode == 2, done.stderr
    assert f"env:  {skew}/bin/python — 2 distributions (1 of them conda packages with libraries)" in done.stdout
    assert f"; conda prefix {skew} (2 packages)" in done.stdout
    assert "- [symbol-skew] skewpkg 1.0: " in done.stdout
    assert 'fix: conda install "libnvjitlink>=12.8" "cuda-version>=12.8"; or pip install' in done.stdout
    by_name = conda("cudaresolve", "doctor", "--name=skew", "--json", **recorded_host())
    environment = json.loads(by_name.stdout)["environment"]
    assert (environment["python"], environment["conda_prefix"]) == (f"{skew}/bin/python", str(skew))
    assert environment["distributions"][0] == {
        "name": "libnvjitlink", "version": "12.4.127", "kind": "conda",
        "conda": {"name": "libnvjitlink", "version": "12.4.127", "build": "h0_0",
                  "channel": f"{conda.channel.as_uri()}/linux-64"}}
    missing = conda("cudaresolve", "doctor", "-n", "nosuch", **recorded_host())
    assert missing.returncode != 0
    assert "Traceback" not in missing.stdout + missing.stderr
    assert "EnvironmentNameNotFound: Could not find conda environment: nosuch" in missing.stderr


# -- lock and install in a conda prefix --------------------------------------------------------------


def lock_in(prefix: Path, tmp_path: Path, wheels: Path, *argv: str, driver: str = "570.86.15") -> subprocess.CompletedProcess:
    """`cudaresolve ARGV` for the prefix's Python, the payload wheels as the only index, a GPU of 8.6."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "CUDARESOLVE_", "CONDA", "LD_"))}
    env.update(CUDARESOLVE_CACHE_DIR=str(tmp_path / "cache"), PIP_CONFIG_FILE=os.devnull,
               PIP_DISABLE_PIP_VERSION_CHECK="1")
    command, rest = argv[0], argv[1:]
    return subprocess.run(
        [sys.executable, "-m", "cudaresolve", command, "--python", str(prefix / "bin" / "python"), "--no-index",
         "--find-links", str(wheels), "--driver", driver, "--gpu", "8.6", *rest],
        capture_output=True, text=True, env=env, cwd=tmp_path)


@pytest.mark.conda
def test_the_lock_takes_condas_library_for_the_wheel_it_stands_for_and_install_keeps_it(conda, payloads, tmp_path):
    """skewpkg requires nvidia-nvjitlink-cu12>=12.8; conda's libnvjitlink 12.8.93 is that release, so
    the lock plans no wheel over it, and install leaves conda's library the one the loader picks."""
    prefix = make_prefix(conda, payloads, "lock-new", "libnvjitlink=12.8.93", "cuda-version=12.8")
    done = lock_in(prefix, tmp_path, payloads.wheels, "lock", "skewpkg", "-o", "pylock.toml",
                   "--write-constraints", "constraints.txt", "--json", "-q")
    assert done.returncode == 0, done.stderr
    packages = {p["name"]: p for p in json.loads(done.stdout)["packages"]}
    assert set(packages) == {"skewpkg", "nvidia-nvjitlink-cu12"}
    assert packages["skewpkg"]["wheel"]["filename"].startswith("skewpkg-1.0-")
    nvjitlink = packages["nvidia-nvjitlink-cu12"]
    assert (nvjitlink["version"], nvjitlink["wheel"], nvjitlink["provided_by"]) == (
        "12.8.93", None, "libnvjitlink 12.8.93 (conda)")
    assert nvjitlink["reason"] == "provided by libnvjitlink 12.8.93 (conda): pip must not replace it"
    constraints = (tmp_path / "constraints.txt").read_text()
    assert "nvidia-nvjitlink-cu12==" not in constraints and "skewpkg==1.0" in constraints
    assert "# nvidia-nvjitlink-cu12: provided by libnvjitlink 12.8.93 (conda); pip must not install it" in constraints
    from cudaresolve.lockfile.pylock import read_pylock

    [kept] = [p for p in read_pylock(str(tmp_path / "pylock.toml")).packages if not p.wheels]
    assert (kept.name, kept.provided_by) == ("nvidia-nvjitlink-cu12", "libnvjitlink 12.8.93 (conda)")

    assert subprocess.run([str(prefix / "bin" / "python"), "-m", "ensurepip"], capture_output=True).returncode == 0
    installed = lock_in(prefix, tmp_path, payloads.wheels, "install", "skewpkg")
    assert installed.returncode == 0, installed.stdout + installed.stderr
    assert "  keep      nvidia-nvjitlink-cu12 12.8.93: provided by libnvjitlink 12.8.93 (conda)" in installed.stdout
    assert not (site_of(prefix) / "nvidia").exists()  # no wheel beside conda's library
    assert "result: 0 errors" in installed.stdout
    assert in_prefix(prefix, "import skewpkg._ext as e; print(e.run())").stdout == "8\n"
    # the same lock through conda's own command line, naming the environment
    through_conda = conda("cudaresolve", "lock", "-n", "lock-new", "--no-index", "--find-links", str(payloads.wheels),
                          "skewpkg", "--json", "-q", "-o", str(tmp_path / "pylock.conda.toml"),
                          CUDARESOLVE_CACHE_DIR=str(tmp_path / "cache"), **recorded_host())
    assert through_conda.returncode == 0, through_conda.stderr
    assert [(p["name"], p["provided_by"]) for p in json.loads(through_conda.stdout)["packages"]] == [
        ("nvidia-nvjitlink-cu12", "libnvjitlink 12.8.93 (conda)"), ("skewpkg", None)]


@pytest.mark.conda
def test_the_lock_sets_aside_a_wheel_over_an_older_conda_library_unless_it_is_named(conda, payloads, tmp_path):
    prefix = make_prefix(conda, payloads, "lock-old", "libnvjitlink=12.4.127", "cuda-version=12.4")
    refused = lock_in(prefix, tmp_path, payloads.wheels, "lock", "skewpkg", "-o", "-", "-q")
    assert refused.returncode == 2, refused.stderr
    assert "Traceback" not in refused.stderr
    assert ("nothing fits nvidia-nvjitlink-cu12>=12.8 (required by skewpkg 1.0); libnvjitlink 12.4.127 (conda) does "
            'not satisfy >=12.8: conda install "libnvjitlink>=12.8" "cuda-version>=12.8"; nvidia-nvjitlink-cu12 12.8.93: '
            "would shadow libnvJitLink.so.12 of libnvjitlink 12.4.127 (conda): pip must not replace conda's library; "
            "update it with conda, or name nvidia-nvjitlink-cu12 in the requirements") in refused.stderr.replace("\n  ", " ")
    asked = lock_in(prefix, tmp_path, payloads.wheels, "lock", "skewpkg", "nvidia-nvjitlink-cu12", "--json", "-q",
                    "-o", "pylock.toml")
    assert asked.returncode == 0, asked.stderr
    packages = {p["name"]: p for p in json.loads(asked.stdout)["packages"]}
    assert packages["nvidia-nvjitlink-cu12"]["wheel"]["filename"].startswith("nvidia_nvjitlink_cu12-12.8.93-")


def test_conda_providers_map_wheels_to_the_conda_package_with_their_soname():
    from cudaresolve.resolve.conda import conda_providers
    from cudaresolve.versions import CudaVersion

    providers = conda_providers(skew_env())
    assert {name: (p.label, p.soname, p.same_component) for name, p in providers.items()} == {
        "nvidia-nvjitlink-cu12": ("libnvjitlink 12.4.127 (conda)", "libnvJitLink.so.12", True)}
    # a package that is not the component for conda (one bundling the library) still may not be shadowed,
    # but does not stand for the wheel's releases
    assert not conda_providers(skew_env(conda_name="some-bundle"))["nvidia-nvjitlink-cu12"].same_component
    assert skew_env().conda.cuda() == CudaVersion(12, 4)
    assert skew_env(cuda_version=None).conda.cuda() is None
    assert skew_env(cuda_version="not-a-version").conda.cuda() is None


def test_builds_for_no_newer_cuda_than_the_prefixs_are_preferred():
    from cudaresolve.resolve.candidates import Candidate, _preference, cuda_build
    from cudaresolve.versions import CudaVersion

    builds = [Candidate("torch", Version(v), None, build=cuda_build("torch", Version(v)))
              for v in ("2.9.0+cu124", "2.9.0+cu126", "2.9.0+cu128", "2.8.0+cu126")]
    def order(pin):
        return [str(c.version) for c in sorted(builds, key=lambda c: _preference(c, pin), reverse=True)]
    assert order(None) == ["2.9.0+cu128", "2.9.0+cu126", "2.9.0+cu124", "2.8.0+cu126"]
    assert order(CudaVersion(12, 6)) == ["2.9.0+cu126", "2.9.0+cu124", "2.9.0+cu128", "2.8.0+cu126"]


@pytest.mark.conda
def test_the_prefixs_cuda_version_picks_the_cuda_major(conda, payloads, tmp_path):
    """On a driver that runs CUDA 13, an abstract `cupy` is CuPy for CUDA 13, unless the prefix's
    cuda-version says its CUDA is 12."""
    chosen = {}
    for name, specs in (("unpinned", ()), ("pinned", ("cuda-version=12.4",))):
        prefix = make_prefix(conda, payloads, f"major-{name}", *specs)
        done = lock_in(prefix, tmp_path, payloads.wheels, "lock", "cupy", "--json", "-q", "-o", f"pylock.{name}.toml",
                       driver="580.65.06")
        assert done.returncode == 0, done.stderr
        chosen[name] = [p["name"] for p in json.loads(done.stdout)["packages"]]
    assert chosen == {"unpinned": ["cupy-cuda13x"], "pinned": ["cupy-cuda12x"]}


@pytest.mark.conda
def test_cudaresolve_pip_install_puts_no_wheel_over_a_conda_library(conda, payloads, tmp_path):
    prefix = make_prefix(conda, payloads, "pip-wrapper", "libnvjitlink=12.8.93", "cuda-version=12.8")
    assert subprocess.run([str(prefix / "bin" / "python"), "-m", "ensurepip"], capture_output=True).returncode == 0
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "CUDARESOLVE_", "CONDA", "LD_"))}
    env.update(CUDARESOLVE_CACHE_DIR=str(tmp_path / "cache"), PIP_CONFIG_FILE=os.devnull, CUDARESOLVE_DRIVER="570.86.15",
               CUDARESOLVE_GPUS="8.6", PIP_DISABLE_PIP_VERSION_CHECK="1")
    done = subprocess.run([sys.executable, "-m", "cudaresolve", "pip", "--python", str(prefix / "bin" / "python"), "install",
                           "--find-links", str(payloads.wheels), "--index-url", (tmp_path / "empty").as_uri(), "skewpkg"],
                          capture_output=True, text=True, env=env, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert ("cudaresolve: conda provides nvidia-nvjitlink-cu12 (libnvjitlink 12.8.93 (conda)): pip runs with --no-deps "
            "and every pin of the lock") in done.stderr
    assert not (site_of(prefix) / "nvidia").exists()
    assert in_prefix(prefix, "import skewpkg._ext as e; print(e.run())").stdout == "8\n"


def test_a_conda_library_without_code_for_the_gpu_is_named_as_conda_and_fixed_through_cuda_version():
    """CUDA 13 builds no SASS below sm_75: conda's libcublas 13 on a GTX 1080 (6.1). The fix moves the
    prefix's cuda-version, which pins every conda CUDA package's CUDA; a pip release would not help."""
    from test_doctor_checks import fatbin, host

    from cudaresolve.checks.arch_coverage import check_arch_coverage

    library = f"{PREFIX}/lib/libcublasLt.so.13"
    facts = replace(so(library, soname="libcublasLt.so.13"), fatbin=fatbin("sm_75", "sm_80", "sm_90", "sm_120"))
    env = Environment(Target(site_packages=(SITE,), prefix=PREFIX, conda=True),
                      (conda_dist("libcublas", "13.1.0.3", (library,)),), (ElfFile(library, ("libcublas",), facts, None),))
    [finding] = [shown(f) for f in check_arch_coverage(env, (), host("580.65.06", "6.1"))]
    assert (finding.check, finding.severity, finding.subject) == ("arch-coverage", "error", "libcublas 13.1.0.3 (conda)")
    assert finding.fix == ('conda install "cuda-version<=12.9" (the newest CUDA that still targets 6.1 and this driver '
                           "runs; libcublas comes with the prefix's CUDA)")
