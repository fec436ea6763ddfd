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
from cudaresolve.knowledge import components, wheel_facts
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

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "record_wheel_facts.py"


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
    again = script.write_table(parsed["source"], parsed["releases"]["added"], script.machine_releases(parsed), blocks,
                               parsed["releases"]["every"])
    assert again == text
    head = parsed["source"].split("; aarch64: ")[0]
    every = "; every: " + parsed["source"].split("; every: ")[1]  # the --every rows' segment stays
    assert script.source_with(parsed["source"], "aarch64", "X; Y") == head + "; aarch64: X; Y" + every
    assert script.source_with(head + "; aarch64: X; Y", "aarch64", "Z") == head + "; aarch64: Z"  # the whole segment replaced


def test_generator_drop_removes_a_row_and_redoes_the_defines_of_the_rows_it_bound(wheel, tmp_path, monkeypatch, capsys):
    """`--drop` removes a machine's row and its [[releases.machine]] entry; a provider row written
    before loses the definitions only the dropped row bound, redone from its wheel's kept facts;
    every other row stays as written."""
    script = generator()
    table = tmp_path / "wheel_facts.toml"
    text = resources.files("cudaresolve.data").joinpath("wheel_facts.toml").read_text()
    table.write_text(text)
    monkeypatch.setattr(script, "OUT", table)
    path = wheel(CUSPARSE, AARCH64)
    (tmp_path / "facts").mkdir()
    (tmp_path / "facts" / f"{path.name}.json").write_text(json.dumps(script.read_one(str(path))))
    cusolvers = ["nvidia-cusolver-cu12==11.7.5.82", "nvidia-cusolver==12.4.1.2"]  # both bind libcusparse.so.12
    assert script.only([], "aarch64", tmp_path, drop=cusolvers) == 0
    assert "redone from their kept facts: nvidia-cusparse-cu12==12.3.1.170" in capsys.readouterr().out
    before, after = (script.table_parts(t) for t in (text, table.read_text()))
    assert set(cusolvers) <= set(script.machine_releases(before[0])["aarch64"])
    assert not set(cusolvers) & set(script.machine_releases(after[0])["aarch64"])
    old, new = ({key: block for key, _, block in parts[1]} for parts in (before, after))
    assert set(old) - set(new) == {("nvidia-cusolver-cu12", script.Version("11.7.5.82"), "aarch64"),
                                   ("nvidia-cusolver", script.Version("12.4.1.2"), "aarch64")}
    changed = {key for key in new if new[key] != old[key]}
    assert changed == {("nvidia-cusparse-cu12", script.Version("12.3.1.170"), "aarch64")}
    assert "cusparseCreateMatDescr@@libcusparse.so.12" in old[next(iter(changed))]
    assert "cusparseCreateMatDescr@@libcusparse.so.12" not in new[next(iter(changed))]


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




# -- the x86_64 and aarch64 rows of one release agree on what the lock uses -------------------------

LOADER = {"x86_64": "ld-linux-x86-64.so.2", "aarch64": "ld-linux-aarch64.so.1"}  # the machine's dynamic loader
ABI_SUFFIXED = re.compile(r"_[0-9]+_[0-9]+$")
# GPUs only aarch64 hosts have: Thor (sm_110, CUDA 12's sm_101) and GB10 (sm_121, DGX Spark)
AARCH64_ONLY = {"sm_110", "sm_110a", "sm_110f", "sm_121", "sm_121a", "sm_121f"}


def used(row: wheel_facts.Wheel) -> dict[str, dict[str, object]]:
    """Member path -> field -> what the lock and the loader model use of it: the soname, the needed
    names of other wheels (in order) and of the host (glibc, the C/C++ runtime and the machine's
    dynamic loader as `<loader>`), search paths, binds (file, versions, the release their names
    imply, the symbols bound in another wheel), the definitions carrying a CUDA ABI suffix or bound
    by an aarch64 row (the rest of `defines` is what x86_64's 237 rows bind), and of a fatbin the
    SASS, the PTX targets and their ISAs."""
    system = set(components.system_libraries()) | {LOADER[row.machine]}
    return {member.path: {
        "soname": member.soname,
        "needed": tuple(n for n in member.needed if n not in system),
        "host libraries needed": tuple(sorted("<loader>" if n == LOADER[row.machine] else n
                                              for n in member.needed if n in system)),
        "search path": (member.rpath, member.runpath),
        "binds": tuple(sorted((b.file, b.versions, b.min_version, b.symbols) for b in member.binds)),
        "defines": tuple(d for d in member.defines
                         if ABI_SUFFIXED.search(d.split("@", 1)[0]) or d.replace("@@", "@") in aarch64_bound()),
        "sass": member.sass,
        "ptx targets": None if member.ptx is None else tuple(p.split(":")[0] for p in member.ptx),
        "ptx isa": member.ptx,
    } for member in row.member}


@functools.lru_cache(maxsize=None)
def aarch64_bound() -> frozenset[str]:
    """NAME@VERSION of every symbol an aarch64 row binds in another wheel."""
    return frozenset(symbol for w in wheel_facts.load() if w.machine == "aarch64"
                     for m in w.member for b in m.binds for symbol in b.symbols)


Difference = tuple[str, str, str, str, object, object]  # name, version, member file, field, x86_64's, aarch64's

# Each difference the two machines' rows of a release may show, with why the lock may ignore it.
ALLOWED: dict[str, Callable[[Difference], bool]] = {
    "x86_64 builds name ld-linux-x86-64.so.2 in DT_NEEDED, most aarch64 builds do not name ld-linux-aarch64.so.1, "
    "and CUDA 13's libcudart.so.13 needs the C++ runtime on one machine and not the other (13.0 on aarch64, "
    "13.1 and newer on x86_64): every one is the host's (components.toml [system_libraries]), never a wheel's":
        lambda d: d[3] == "host libraries needed",
    "x86_64's NVRTC 12.8, 12.9 and 13.0 ship an alternative libnvrtc.alt.so with its builtins, the aarch64 wheels "
    "do not; no row needs it (test below)":
        lambda d: d[3] == "member" and ".alt.so." in d[2] and d[4:] == (True, False),
    "the aarch64 cuBLAS, cuRAND and cuSOLVER of CUDA 13 carry SASS for GPUs only aarch64 hosts have (sm_110: "
    "Thor; cuSOLVER also sm_121: GB10) besides every x86_64 target":
        lambda d: d[0] in ("nvidia-cublas", "nvidia-curand", "nvidia-cusolver") and d[3] == "sass"
        and set(d[4]) <= set(d[5]) and set(d[5]) - set(d[4]) <= AARCH64_ONLY,  # type: ignore[arg-type]
    "onnxruntime-gpu 1.31.1's aarch64 CUDA provider is built for sm_89, sm_90a, sm_120a and sm_121a (GB10, an "
    "aarch64-only GPU) with no PTX, x86_64's from sm_75 (Turing, Ampere): an aarch64 host is judged by its own row, "
    "so an aarch64 Ampere host gets no CUDA provider of this release (test below)":
        lambda d: d[:4] == ("onnxruntime-gpu", "1.31.1", "libonnxruntime_providers_cuda.so", "sass"),
    "onnxruntime-gpu 1.31.1's aarch64 wheel has no TensorRT provider":
        lambda d: d[:4] == ("onnxruntime-gpu", "1.31.1", "libonnxruntime_providers_tensorrt.so", "member") and d[4:] == (True, False),
}
EXTENSION_MACHINE = re.compile(r"-(x86_64|aarch64)-linux-gnu\.so$")  # a CPython extension's file name names its machine


def machine_differences() -> list[Difference]:
    """The differences of each release with rows of both machines; a member one row lacks is one
    difference, field `member` (whether each row has it)."""
    found: list[Difference] = []
    for arm in (w for w in wheel_facts.load() if w.machine == "aarch64"):
        x86 = wheel_facts.find(arm.name, arm.version, machine="x86_64")
        if x86 is None:
            continue
        x86_used, arm_used = ({EXTENSION_MACHINE.sub("-<machine>-linux-gnu.so", path): facts for path, facts in used(row).items()}
                              for row in (x86, arm))
        for path in sorted(x86_used.keys() | arm_used.keys()):
            file = os.path.basename(path)
            if path not in x86_used or path not in arm_used:
                found.append((arm.name, arm.version, file, "member", path in x86_used, path in arm_used))
                continue
            found += [(arm.name, arm.version, file, field, value, arm_used[path][field])
                      for field, value in x86_used[path].items() if value != arm_used[path][field]]
    return found


def test_x86_64_and_aarch64_rows_of_a_release_differ_only_as_explained():
    both = {(w.name, w.version) for w in wheel_facts.load() if w.machine == "aarch64"
            and wheel_facts.find(w.name, w.version, machine="x86_64") is not None}
    assert {("nvidia-cusparse-cu12", "12.5.10.65"), ("nvidia-nvjitlink-cu12", "12.9.86"), ("nvidia-cublas-cu12", "12.9.2.10"),
            ("nvidia-cusolver-cu12", "11.7.5.82"), ("nvidia-cusparse", "12.9.4.2"), ("nvidia-nvjitlink", "13.5.37")} <= both
    found = machine_differences()
    unexplained = [d for d in found if not any(rule(d) for rule in ALLOWED.values())]
    assert not unexplained, "\n".join(f"{n} {v} {f} {field}: x86_64 {x!r}, aarch64 {a!r}" for n, v, f, field, x, a in unexplained)
    unused = [why for why, rule in ALLOWED.items() if not any(rule(d) for d in found)]
    assert not unused, f"an explained difference is gone: drop it from ALLOWED: {unused}"


def test_no_row_needs_a_member_only_one_machine_has():
    """Nothing in the table needs an x86_64-only member: no wheel's file reaches it by name."""
    only_one = {d[2] for d in machine_differences() if d[3] == "member"}
    assert only_one and not {n for w in wheel_facts.load() for m in w.member for n in m.needed} & only_one


def test_aarch64_cusparse_binds_nvjitlink_as_on_x86_64():
    """CUDA 12.9's cuSPARSE binds nvJitLink 12.9 by name on both machines; CUDA 13.5's binds no nvJitLink."""
    for name, version, floor in (("nvidia-cusparse-cu12", "12.5.10.65", {"libnvJitLink.so.12": "12.9"}),
                                 ("nvidia-cusparse", "12.9.4.2", {})):
        for machine in ("x86_64", "aarch64"):
            assert wheel_facts.min_provider_release(name, version, machine=machine) == floor


def test_onnxruntime_gpu_aarch64_cuda_provider_has_no_kernel_for_ampere_where_x86_64_has():
    """What an aarch64 A100 host is judged by: its own machine's row (`lock onnxruntime-gpu` for it exits 2
    with arch-coverage for 1.29 ... 1.31), not the x86_64 build's sm_80 SASS."""
    provider = "onnxruntime/capi/libonnxruntime_providers_cuda.so"
    rows = {machine: wheel_facts.find("onnxruntime-gpu", "1.31.1", machine=machine) for machine in ("x86_64", "aarch64")}
    sass = {machine: next(m for m in row.member if m.path == provider).sass for machine, row in rows.items() if row}
    ptx = {machine: next(m for m in row.member if m.path == provider).ptx for machine, row in rows.items() if row}
    assert "sm_80" in sass["x86_64"] and ptx == {"x86_64": (), "aarch64": ()}
    assert sass["aarch64"] == ("sm_89", "sm_90a", "sm_120a", "sm_121a")
