"""aarch64 binaries judged as aarch64 (issue 28, "binary facts per machine"): the x86_64 and aarch64
wheels of one release read side by side, with pyelftools as the oracle of the aarch64 file; the
loader of an aarch64 host judging aarch64 files (and passing over x86_64 ones); the knowledge
table's rows per machine; and `lock` for an aarch64 host refusing the cuSPARSE 12.3 + nvJitLink < 12.4
pair as it does on x86_64, from a local index serving the real aarch64 wheels.

There is no aarch64 cross compiler on the test machines, so the aarch64 ELF files are the real
wheels' (kept in the test cache like every real wheel)."""

from __future__ import annotations

import functools
import importlib.util
import io
import json
import os
import re
import venv
import zipfile
from importlib import resources
from pathlib import Path
from typing import Callable, Optional

import pytest
from elftools.elf.elffile import ELFFile

from cudaresolve.binary.facts import BinaryFacts, SymbolTable
from cudaresolve.binary.loader import MISSING_LIBRARY, UNDEFINED_SYMBOL, for_machine, resolve
from cudaresolve.binary.wheel import read_wheel
from cudaresolve.cli import main
from cudaresolve.errors import UsageError
from cudaresolve.index.http import Http
from cudaresolve.knowledge import wheel_facts
from cudaresolve.knowledge.wheel_facts import from_record

CUSPARSE = "nvidia-cusparse-cu12==12.3.1.170"
AARCH64 = "manylinux2014_aarch64"
LIBCUSPARSE = "nvidia/cusparse/lib/libcusparse.so.12"


def member_bytes(wheel: Path, member: str) -> bytes:
    with zipfile.ZipFile(wheel) as archive:
        return archive.read(member)


@functools.lru_cache(maxsize=None)
def facts_of_member(wheel: Path, member: str) -> BinaryFacts:
    """The facts of one member of a wheel, read once per session (cuSPARSE's wheel is 200 MB)."""
    with open(wheel, "rb") as stream:
        facts = read_wheel(stream, wheel.name)
    return next(m for m in facts.members if m.path.endswith("!" + member))


def nvjitlink_needs(facts: BinaryFacts) -> set[tuple[str, str, str]]:
    return {(s.name, s.version, s.file) for s in facts.undefined if s.file == "libnvJitLink.so.12"}


def pyelftools_versioned_needs(data: bytes) -> tuple[str, dict[str, tuple[str, ...]], set[tuple[str, str]]]:
    """(e_machine, verneed file -> versions, (symbol, version) of the undefined versioned symbols) as pyelftools reads them."""
    elf = ELFFile(io.BytesIO(data))
    verneed = elf.get_section_by_name(".gnu.version_r")
    needs = {need.name: tuple(aux.name for aux in auxes) for need, auxes in verneed.iter_versions()}
    versym = elf.get_section_by_name(".gnu.version")
    names = {aux["vna_other"]: aux.name for _, auxes in verneed.iter_versions() for aux in auxes}
    undefined = set()
    for index, symbol in enumerate(elf.get_section_by_name(".dynsym").iter_symbols()):
        ndx = versym.get_symbol(index)["ndx"]
        if symbol["st_shndx"] == "SHN_UNDEF" and isinstance(ndx, int) and ndx in names:
            undefined.add((symbol.name, names[ndx]))
    return elf["e_machine"], needs, undefined


# -- the same release for two machines --------------------------------------------------------------


def test_x86_64_and_aarch64_cusparse_bind_the_same_nvjitlink_12_4_symbols(wheel):
    x86 = wheel(CUSPARSE)
    arm = wheel(CUSPARSE, AARCH64)
    assert "x86_64" in x86.name and "aarch64" in arm.name
    x86_facts, arm_facts = facts_of_member(x86, LIBCUSPARSE), facts_of_member(arm, LIBCUSPARSE)
    assert (x86_facts.machine, arm_facts.machine) == ("x86_64", "aarch64")

    # pyelftools, the reader's oracle, on the aarch64 file: its machine and versioned needs
    e_machine, needs, undefined = pyelftools_versioned_needs(member_bytes(arm, LIBCUSPARSE))
    assert e_machine == "EM_AARCH64"
    assert {need.file: need.versions for need in arm_facts.version_needs} == needs
    assert {(s.name, s.version) for s in arm_facts.undefined if s.version} == undefined
    # glibc's symbol versions start at 2.17 on aarch64 (2.2.5 on x86_64)
    x86_libc = next(n.versions for n in x86_facts.version_needs if n.file == "libc.so.6")
    assert "GLIBC_2.2.5" in x86_libc and "GLIBC_2.2.5" not in needs["libc.so.6"] and "GLIBC_2.17" in needs["libc.so.6"]

    # the same nvJitLink 12.4 ABI on both machines: what makes the pair with nvJitLink < 12.4 fail on either
    bound = nvjitlink_needs(arm_facts)
    assert bound == nvjitlink_needs(x86_facts)
    assert ("__nvJitLinkComplete_12_4", "libnvJitLink.so.12", "libnvJitLink.so.12") in bound
    assert {re.search(r"_(12_\d+)$", name).group(1) for name, _, _ in bound} == {"12_4"}
    assert (arm_facts.soname, arm_facts.runpath) == (x86_facts.soname, x86_facts.runpath)


def test_the_table_has_a_row_per_machine_read_from_each_wheel(wheel):
    for platform, machine in ((None, "x86_64"), (AARCH64, "aarch64")):
        path = wheel(CUSPARSE, platform)
        row = wheel_facts.find("nvidia-cusparse-cu12", "12.3.1.170", machine=machine)
        assert row is not None and row.filename == path.name and row.machine == machine
        assert wheel_facts.find("nvidia-cusparse-cu12", "12.3.1.170", path.name) == row
        assert wheel_facts.min_provider_release("nvidia-cusparse-cu12", "12.3.1.170", path.name) == {"libnvJitLink.so.12": "12.4"}
        table = next(m for m in from_record(row).members if m.path.endswith("!" + LIBCUSPARSE))
        real = facts_of_member(path, LIBCUSPARSE)
        assert table.machine == real.machine == machine
        assert nvjitlink_needs(table) == nvjitlink_needs(real)
        assert (table.needed, table.runpath) == (real.needed, real.runpath)
    with pytest.raises(UsageError, match="name the file or the machine"):
        wheel_facts.find("nvidia-cusparse-cu12", "12.3.1.170")
    assert {w.machine for w in wheel_facts.releases("nvidia-nvjitlink-cu12", "aarch64")} == {"aarch64"}
    assert "12.3.101" in {w.version for w in wheel_facts.releases("nvidia-nvjitlink-cu12", "aarch64")}


# -- the loader of an aarch64 host --------------------------------------------------------------------

SITE = "/venv/lib/python3.11/site-packages"


def system_library(path: str, machine: str) -> BinaryFacts:
    """A stand-in for a C runtime library: its soname, and a symbol table marked partial, so the
    loader blames no glibc symbol on it (only names carrying a CUDA release)."""
    return BinaryFacts(path, machine, "DYN", os.path.basename(path), (), (), (), 0, 0, SymbolTable.of(), (), (), None, None,
                       symbols_complete=False)


def nvjitlink_row(version: str, machine: str) -> BinaryFacts:
    (member,) = from_record(wheel_facts.find("nvidia-nvjitlink-cu12", version, machine=machine)).members
    return member


def aarch64_namespace(wheel, nvjitlink: BinaryFacts) -> Callable[[str], Optional[BinaryFacts]]:
    """facts_of for the loader: cuSPARSE and `nvjitlink` where the wheels install them, the C runtime
    where Ubuntu's aarch64 glibc is."""
    files = {f"{SITE}/{LIBCUSPARSE}": facts_of_member(wheel(CUSPARSE, AARCH64), LIBCUSPARSE),
             f"{SITE}/nvidia/nvjitlink/lib/libnvJitLink.so.12": nvjitlink}
    for name in ("libpthread.so.0", "librt.so.1", "libdl.so.2", "libm.so.6", "libgcc_s.so.1", "libc.so.6", "ld-linux-aarch64.so.1"):
        files[f"/usr/lib/aarch64-linux-gnu/{name}"] = system_library(f"/usr/lib/aarch64-linux-gnu/{name}", "aarch64")
    return lambda path: files.get(os.path.normpath(path))


def test_an_aarch64_loader_judges_aarch64_cusparse_against_nvjitlink_12_3(wheel):
    files = aarch64_namespace(wheel, nvjitlink_row("12.3.101", "aarch64"))
    env = for_machine("aarch64")
    assert "/usr/lib/aarch64-linux-gnu" in env.default_dirs and env.lib == "lib/aarch64-linux-gnu"
    result = resolve([f"{SITE}/{LIBCUSPARSE}"], facts_of=files, env=env)
    [cusparse] = [o for o in result.objects if o.soname == "libcusparse.so.12"]
    steps = {r.needed: (r.step, r.path) for r in cusparse.needed}
    assert steps["libnvJitLink.so.12"] == ("runpath", f"{SITE}/nvidia/cusparse/lib/../../nvjitlink/lib/libnvJitLink.so.12")
    assert steps["libc.so.6"] == ("default dir", "/usr/lib/aarch64-linux-gnu/libc.so.6")
    missing = {p.symbol for p in result.problems if p.kind == UNDEFINED_SYMBOL}
    assert "__nvJitLinkComplete_12_4" in missing and all(s.endswith("_12_4") for s in missing)
    assert [p for p in result.problems if p.kind != UNDEFINED_SYMBOL] == []
    # nvJitLink 12.4 binds every one of them
    files = aarch64_namespace(wheel, nvjitlink_row("12.4.127", "aarch64"))
    assert resolve([f"{SITE}/{LIBCUSPARSE}"], facts_of=files, env=env).problems == ()


def test_files_of_another_machine_stay_foreign(wheel):
    """An x86_64 nvJitLink where the aarch64 cuSPARSE looks is passed over, as ld.so does; and an
    x86_64 loader does not take the aarch64 cuSPARSE as its own."""
    files = aarch64_namespace(wheel, nvjitlink_row("12.4.127", "x86_64"))
    result = resolve([f"{SITE}/{LIBCUSPARSE}"], facts_of=files, env=for_machine("aarch64"))
    [problem] = result.problems
    assert (problem.kind, problem.needed) == (MISSING_LIBRARY, "libnvJitLink.so.12")
    [cusparse] = [o for o in result.objects if o.soname == "libcusparse.so.12"]
    [nvjitlink] = [r for r in cusparse.needed if r.needed == "libnvJitLink.so.12"]
    assert nvjitlink.skipped == (f"{SITE}/nvidia/cusparse/lib/../../nvjitlink/lib/libnvJitLink.so.12",)
    with pytest.raises(UsageError, match="is a aarch64 object; the loader environment is x86_64"):
        resolve([f"{SITE}/{LIBCUSPARSE}"], facts_of=files, env=for_machine("x86_64"))
    with pytest.raises(UsageError, match="no loader model for machine 'ppc64le'"):
        for_machine("ppc64le")


# -- lock for an aarch64 host -------------------------------------------------------------------------


@pytest.fixture
def aarch64_index(wheel, server):
    """A local index serving the real aarch64 wheels of cuSPARSE 12.3.1.170 and nvJitLink 12.3 / 12.4."""
    for requirement in (CUSPARSE, "nvidia-nvjitlink-cu12==12.3.101", "nvidia-nvjitlink-cu12==12.4.127"):
        path = wheel(requirement, AARCH64)
        server.add(path.name, path.read_bytes())
    return server


@pytest.fixture
def aarch64_host(tmp_path, capsys) -> str:
    """A GH200-like host file: driver 570, a 9.0 GPU, aarch64, glibc 2.35."""
    capsys.readouterr()
    assert main(["probe", "--json", "--driver", "570.124.06", "--gpu", "9.0"]) == 0
    host = json.loads(capsys.readouterr().out)
    host.update(machine="aarch64", glibc="2.35")
    path = tmp_path / "gh200.json"
    path.write_text(json.dumps(host))
    return str(path)


def lock_for(index, host: str, tmp_path: Path, capsys, requirements: list[str], *flags: str) -> tuple[int, str, Path]:
    target = tmp_path / "target"
    if not target.exists():
        venv.create(target, with_pip=False)
    out = tmp_path / f"pylock.run{len(list(tmp_path.glob('pylock.*')))}.toml"
    capsys.readouterr()
    code = main(["lock", *requirements, "--python", str(target / "bin" / "python"), "--index-url", f"{index.url}/simple",
                 "--host", host, "--platform", AARCH64, "-o", str(out), "-q", *flags])
    return code, capsys.readouterr().err, out


@pytest.mark.usefixtures("hermetic")
@pytest.mark.parametrize("deep", [False, True])
def test_lock_for_an_aarch64_host_refuses_cusparse_12_3_with_nvjitlink_12_3(aarch64_index, aarch64_host, tmp_path, capsys, deep):
    flags = ("--deep",) if deep else ()
    code, err, out = lock_for(aarch64_index, aarch64_host, tmp_path, capsys, [CUSPARSE], *flags)
    assert code == 0, err
    text = out.read_text()
    assert 'version = "12.4.127"' in text and "manylinux2014_aarch64" in text and "x86_64" not in text
    code, err, out = lock_for(aarch64_index, aarch64_host, tmp_path, capsys, [CUSPARSE, "nvidia-nvjitlink-cu12<12.4"], *flags)
    assert code == 2, err
    assert "nvidia-nvjitlink-cu12" in err and re.search(r"__nvJitLink\w+_12_4", err), err
    assert not out.exists()


# -- the generator's rows of another machine -------------------------------------------------------------

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "record_wheel_facts.py"


def generator():
    spec = importlib.util.spec_from_file_location("record_wheel_facts", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generator_reads_a_wheel_by_range_requests_as_from_the_file(wheel, server):
    """`--only` reads the wheel's directory and shared-object members by range requests: the same
    facts as reading the whole file, and the table's aarch64 row is that wheel's (its sha256)."""
    script = generator()
    path = wheel("nvidia-nvjitlink-cu12==12.4.127", AARCH64)
    server.add(path.name, path.read_bytes())
    http = Http()
    stream = script.RangeFile(http, f"{server.url}/files/{path.name}", "test")
    ranged = script.read_stream(stream, path.name)
    whole = script.read_one(str(path))
    assert ranged == {key: value for key, value in whole.items() if key not in ("sha256", "size")}
    assert ranged["machine"] == "aarch64"
    assert http.bytes_received <= path.stat().st_size  # each byte fetched once, none past the end
    assert all("Range" in headers for _, headers in server.requests)
    row = wheel_facts.find("nvidia-nvjitlink-cu12", "12.4.127", path.name)
    assert row is not None and row.sha256 == whole["sha256"] and row.machine == "aarch64"


def test_generator_keeps_the_rows_it_does_not_read_as_written():
    """A table split into its head and blocks and written back is the same text, header aside:
    an `--only` run rewrites only the rows it read."""
    script = generator()
    text = resources.files("cudaresolve.data").joinpath("wheel_facts.toml").read_text()
    parsed, blocks = script.table_parts(text)
    assert {block[0][2] for block in blocks} == {"x86_64", "aarch64"}
    again = script.write_table(parsed["source"], parsed["releases"]["added"], script.machine_releases(parsed), blocks)
    assert again == text
    assert script.source_with(parsed["source"], "aarch64", "X").startswith(parsed["source"].split("; ")[0] + "; aarch64: X")


@pytest.mark.usefixtures("hermetic")
def test_deep_lock_judges_the_aarch64_files_with_the_aarch64_loader(aarch64_index, aarch64_host, tmp_path, capsys, monkeypatch):
    """Without the table's binary need (the resolver learns nothing from the rows), --deep reads the
    real aarch64 wheels and the judge, with the aarch64 host's loader, refuses the pair: before, the
    loader was this machine's and passed over every aarch64 file as foreign, and the pair was locked."""
    monkeypatch.setattr("cudaresolve.resolve.provider.binary_requirements", lambda *args: iter(()))
    code, err, out = lock_for(aarch64_index, aarch64_host, tmp_path, capsys, [CUSPARSE, "nvidia-nvjitlink-cu12<12.4"], "--deep")
    assert code == 2, err
    assert "symbol-skew" in err and re.search(r"undefined symbol: __nvJitLink\w+_12_4", err), err
    assert not out.exists()
