"""The ELF reader against real files: gcc-built libraries with version scripts, NVIDIA wheels, damaged files.

Oracles: readelf (binutils) for the dynamic section, version tables and dynamic symbols; pyelftools
for the dynamic symbols with the files their versions come from, DT_FLAGS and the build-id.
Hand-written expectations pin the facts the resolver relies on.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import struct
import subprocess
import zipfile
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

import pytest
from elftools.elf.elffile import ELFFile
from fatbin_bytes import container, cubin, entry, ptx
from wheel_cache import unpack

from cudaresolve.binary.elf import NO_SECTIONS, ElfError, is_elf, read_binary_facts, read_binary_facts_from_buffer
from cudaresolve.binary.facts import BinaryFacts, CudaRuntime, FatbinSummary, Symbol, VersionNeed
from cudaresolve.binary.wheel import read_wheel
from cudaresolve.errors import CudaresolveError

needs_readelf = pytest.mark.skipif(shutil.which("readelf") is None, reason="binutils readelf is not installed")

LIBV_SOURCE = """
int foo_v1(void) { return 1; }
int foo_v2(void) { return 2; }
__asm__(".symver foo_v1, foo@V1");
__asm__(".symver foo_v2, foo@@V2");
int bar(void) { return 3; }
int baz(void) { return 4; }
int counter = 5;
static int helper(void) { return 6; }
int not_exported(void) { return helper(); }
"""
LIBV_MAP = """
V1 { global: bar; foo; local: *; };
V2 { global: baz; counter; foo; } V1;
"""
LIBU_SOURCE = """
#include <stdio.h>
extern int foo(void);
extern int bar(void);
extern int counter;
extern int maybe(void) __attribute__((weak));
int use(void) { printf("%d\\n", foo() + bar() + counter); return maybe ? maybe() : 0; }
"""
MAIN_SOURCE = """
extern int foo(void);
int main(void) { return foo(); }
"""


@pytest.fixture
def built(elf_builder) -> Dict[str, Path]:
    """libv.so.1 (versions V1, V2), libu.so using it (RUNPATH), libr.so (RPATH, -z now), an EXEC."""
    libv = elf_builder.build("libv.so.1", LIBV_SOURCE, soname="libv.so.1", version_script=LIBV_MAP)
    libu = elf_builder.build("libu.so", LIBU_SOURCE, soname="libu.so", link=[libv], runpath="$ORIGIN/lib:/opt/x")
    libr_source = "extern int use(void);\nint r(void) { return use(); }\n"
    libr = elf_builder.build("libr.so", libr_source, link=[libu], rpath="$ORIGIN", extra=["-Wl,-z,now"])
    main = elf_builder.build("main", MAIN_SOURCE, shared=False, link=[libv], extra=["-no-pie"])
    return {"libv": libv, "libu": libu, "libr": libr, "main": main}


# -- oracles -----------------------------------------------------------------------------------


def readelf(*args: str) -> str:
    return subprocess.run(["readelf", "-W", *args], check=True, capture_output=True, text=True).stdout


def readelf_dynamic(path: Path) -> Dict[str, List[str]]:
    """NEEDED/SONAME/RPATH/RUNPATH values as `readelf -d` prints them."""
    found: Dict[str, List[str]] = {"NEEDED": [], "SONAME": [], "RPATH": [], "RUNPATH": []}
    pattern = r"\((NEEDED|SONAME|RPATH|RUNPATH)\)\s+[^\[]*\[(.*)\]$"
    for tag, value in re.findall(pattern, readelf("-d", str(path)), re.M):
        found[tag].append(value)
    return found


def readelf_versions(path: Path) -> Tuple[List[str], List[Tuple[str, List[str]]]]:
    """(verdef names without BASE, [(file, [version, ...])]) as `readelf -V` prints them."""
    definitions: List[str] = []
    needs: List[Tuple[str, List[str]]] = []
    section = None
    for line in readelf("-V", str(path)).splitlines():
        if line.startswith("Version definition section"):
            section = "verdef"
        elif line.startswith("Version needs section"):
            section = "verneed"
        elif line.startswith("Version symbols section"):
            section = None
        elif section == "verdef":
            match = re.search(r"Rev: \d+\s+Flags: (.*?)\s+Index: \d+\s+Cnt: \d+\s+Name: (\S+)$", line)
            if match and "BASE" not in match.group(1):
                definitions.append(match.group(2))
        elif section == "verneed":
            match = re.search(r"Version: \d+\s+File: (\S+)\s+Cnt: \d+$", line)
            if match:
                needs.append((match.group(1), []))
            match = re.search(r"^\s+0x[0-9a-f]+:\s+Name: (\S+)\s+Flags:", line)
            if match:
                needs[-1][1].append(match.group(1))
    return definitions, needs


# Binding 10 prints as UNIQUE in ELFOSABI_GNU files and as `<OS specific>: 10` in ELFOSABI_SYSV ones.
_READELF_BIND = {"GLOBAL": "GLOBAL", "WEAK": "WEAK", "UNIQUE": "GNU_UNIQUE", "<OS specific>: 10": "GNU_UNIQUE"}


def readelf_symbols(path: Path) -> Tuple[Set[tuple], Set[tuple]]:
    """(defined, undefined) global/weak dynamic symbols from `readelf --dyn-syms` as (name, version, binding, type).

    Hidden versions are left to pyelftools: readelf prints a copy-relocated `optarg@GLIBC_2.2.5` in an
    executable like a hidden one.
    """
    defined: Set[tuple] = set()
    undefined: Set[tuple] = set()
    # Num: Value Size Type Bind Vis Ndx Name[@[@]version][ (n)]
    line_re = re.compile(
        r"^\s*\d+: [0-9a-f]+\s+\S+\s+(\S+)\s+(<OS specific>: \d+|\S+)\s+\S+\s+(\S+)\s+(\S+?)(?: \(\d+\))?$"
    )
    for line in readelf("--dyn-syms", str(path)).splitlines():
        match = line_re.match(line)
        if not match or match.group(2) == "LOCAL":
            continue
        kind, bind, ndx, shown = match.groups()
        name, _, version = shown.partition("@")
        item = (name, version.lstrip("@") or None, _READELF_BIND[bind], kind)
        (undefined if ndx == "UND" else defined).add(item)
    return defined, undefined


def as_readelf_shows(symbols) -> Set[tuple]:
    """readelf prints no version on a version node's own symbol (`V1` of version V1)."""
    return {(s.name, None if s.version == s.name else s.version, s.binding, s.type) for s in symbols}


def pyelftools_build_id(path: Path) -> Optional[str]:
    """pyelftools rather than readelf: readelf rejects cusparse's build-id note over its alignment padding."""
    with open(path, "rb") as f:
        for section in ELFFile(f).iter_sections():
            if section["sh_type"] == "SHT_NOTE":
                for note in section.iter_notes():
                    if note["n_type"] == "NT_GNU_BUILD_ID":
                        return note["n_desc"]
    return None


_BIND = {"STB_GLOBAL": "GLOBAL", "STB_WEAK": "WEAK", "STB_LOOS": "GNU_UNIQUE"}
_TYPE = {"STT_NOTYPE": "NOTYPE", "STT_OBJECT": "OBJECT", "STT_FUNC": "FUNC", "STT_TLS": "TLS", "STT_LOOS": "IFUNC",
         "STT_COMMON": "COMMON", "STT_SECTION": "SECTION", "STT_FILE": "FILE"}  # fmt: skip


def pyelftools_symbols(path: Path) -> Tuple[List[Symbol], List[Symbol], int, int]:
    """(defined, undefined, DT_FLAGS, DT_FLAGS_1) read by pyelftools, versions resolved through its tables."""
    with open(path, "rb") as f:
        elf = ELFFile(f)
        versions: Dict[int, Tuple[str, Optional[str]]] = {}
        versym = dynsym = None
        flags = {"DT_FLAGS": 0, "DT_FLAGS_1": 0}
        for section in elf.iter_sections():
            kind = section["sh_type"]
            if kind == "SHT_GNU_verdef":
                for entry, names in section.iter_versions():
                    if not entry["vd_flags"] & 1:
                        versions[entry["vd_ndx"]] = (next(names).name, None)
            elif kind == "SHT_GNU_verneed":
                for entry, names in section.iter_versions():
                    for aux in names:
                        versions[aux["vna_other"]] = (aux.name, entry.name)
            elif kind == "SHT_GNU_versym":
                versym = section
            elif kind == "SHT_DYNSYM":
                dynsym = section
            elif kind == "SHT_DYNAMIC":
                for tag in section.iter_tags():
                    if tag.entry.d_tag in flags:
                        flags[tag.entry.d_tag] = tag.entry.d_val
        defined: List[Symbol] = []
        undefined: List[Symbol] = []
        for index, symbol in enumerate(dynsym.iter_symbols() if dynsym is not None else ()):
            bind = symbol["st_info"]["bind"]
            if index == 0 or bind == "STB_LOCAL":
                continue
            raw = versym.get_symbol(index)["ndx"] if versym is not None else 0
            raw = {"VER_NDX_LOCAL": 0, "VER_NDX_GLOBAL": 1}.get(raw, raw)
            version, file = versions[raw & 0x7FFF] if raw & 0x7FFF > 1 else (None, None)
            hidden = bool(raw & 0x8000) and version is not None
            item = Symbol(symbol.name, version, file, _BIND[bind], _TYPE[symbol["st_info"]["type"]], hidden)
            (undefined if symbol["st_shndx"] == "SHN_UNDEF" else defined).append(item)
        return defined, undefined, flags["DT_FLAGS"], flags["DT_FLAGS_1"]


def assert_matches_oracles(path: Path) -> BinaryFacts:
    facts = read_binary_facts(path)
    dynamic = readelf_dynamic(path)
    assert list(facts.needed) == dynamic["NEEDED"]
    assert ([facts.soname] if facts.soname is not None else []) == dynamic["SONAME"]
    assert ([":".join(facts.rpath)] if facts.rpath else []) == dynamic["RPATH"]
    assert ([":".join(facts.runpath)] if facts.runpath else []) == dynamic["RUNPATH"]
    definitions, needs = readelf_versions(path)
    assert list(facts.version_definitions) == definitions
    assert [(need.file, list(need.versions)) for need in facts.version_needs] == needs
    assert facts.build_id == pyelftools_build_id(path)
    shown_defined, shown_undefined = readelf_symbols(path)
    assert as_readelf_shows(facts.defined) == shown_defined
    assert as_readelf_shows(facts.undefined) == shown_undefined
    defined, undefined, flags, flags_1 = pyelftools_symbols(path)
    assert list(facts.defined) == defined  # in .dynsym order: the order ld.so relocates in
    assert list(facts.undefined) == undefined
    assert (facts.flags, facts.flags_1) == (flags, flags_1)
    return facts


# -- gcc-built files ---------------------------------------------------------------------------


def test_versioned_exports_default_and_hidden(built):
    facts = read_binary_facts(built["libv"])
    assert (facts.machine, facts.elf_type, facts.soname) == ("x86_64", "DYN", "libv.so.1")
    assert facts.version_definitions == ("V1", "V2")
    assert sorted(facts.defined, key=lambda s: (s.name, s.version)) == [
        Symbol("V1", "V1", None, "GLOBAL", "OBJECT", False),  # the version nodes' own ABS symbols
        Symbol("V2", "V2", None, "GLOBAL", "OBJECT", False),
        Symbol("bar", "V1", None, "GLOBAL", "FUNC", False),
        Symbol("baz", "V2", None, "GLOBAL", "FUNC", False),
        Symbol("counter", "V2", None, "GLOBAL", "OBJECT", False),
        Symbol("foo", "V1", None, "GLOBAL", "FUNC", True),  # foo@V1
        Symbol("foo", "V2", None, "GLOBAL", "FUNC", False),  # foo@@V2
    ]
    assert facts.symbols.definitions["foo"] in ((("V1", True), ("V2", False)), (("V2", False), ("V1", True)))
    assert re.fullmatch(r"[0-9a-f]{40}", facts.build_id)
    assert facts.fatbin is None


def test_verneed_binds_undefined_symbols_to_versions_and_files(built):
    facts = read_binary_facts(built["libu"])
    assert facts.soname == "libu.so"
    assert facts.needed == ("libv.so.1", "libc.so.6")
    assert facts.runpath == ("$ORIGIN/lib", "/opt/x")
    assert facts.rpath == ()
    assert facts.version_definitions == ()
    assert VersionNeed("libv.so.1", ("V1", "V2")) in facts.version_needs
    by_name = {symbol.name: symbol for symbol in facts.undefined}
    assert by_name["foo"] == Symbol("foo", "V2", "libv.so.1", "GLOBAL", "FUNC", False)
    assert by_name["bar"] == Symbol("bar", "V1", "libv.so.1", "GLOBAL", "FUNC", False)
    assert by_name["counter"] == Symbol("counter", "V2", "libv.so.1", "GLOBAL", "OBJECT", False)
    assert by_name["maybe"] == Symbol("maybe", None, None, "WEAK", "NOTYPE", False)
    assert by_name["printf"].version.startswith("GLIBC_") and by_name["printf"].file == "libc.so.6"
    assert [symbol.name for symbol in facts.defined] == ["use"]
    assert "GLIBC_2.2.5" in {version for need in facts.version_needs for version in need.versions}


def test_rpath_and_bind_now_flags(built):
    facts = read_binary_facts(built["libr"])
    assert facts.rpath == ("$ORIGIN",)
    assert facts.runpath == ()
    assert facts.soname is None
    assert facts.needed[0] == "libu.so"
    assert facts.flags == 0  # DT_FLAGS is a "new dtag": --disable-new-dtags leaves it out
    assert facts.flags_1 == 0x1  # DF_1_NOW


def test_executable(built):
    facts = read_binary_facts(built["main"])
    assert facts.elf_type == "EXEC"
    assert facts.soname is None
    assert "libv.so.1" in facts.needed
    assert Symbol("foo", "V2", "libv.so.1", "GLOBAL", "FUNC", False) in facts.undefined


@needs_readelf
def test_gcc_built_files_match_readelf_and_pyelftools(built):
    for path in built.values():
        assert_matches_oracles(path)


def test_buffer_reads_the_same_facts_as_the_file(built):
    data = built["libu"].read_bytes()
    assert read_binary_facts_from_buffer(data, str(built["libu"])) == read_binary_facts(built["libu"])
    assert read_binary_facts_from_buffer(memoryview(data), str(built["libu"])) == read_binary_facts(built["libu"])


def _without_section_headers(data: bytes) -> bytes:
    """The same image with e_shoff/e_shnum/e_shstrndx zeroed, as sstrip leaves it: only segments remain."""
    out = bytearray(data)
    struct.pack_into("<Q", out, 0x28, 0)
    struct.pack_into("<HHH", out, 0x3A, 64, 0, 0)
    return bytes(out)


@pytest.mark.parametrize("hash_style", ["gnu", "sysv"])
def test_file_without_section_headers_reads_through_dynamic_tags(elf_builder, hash_style):
    libv = elf_builder.build("libv.so.1", LIBV_SOURCE, soname="libv.so.1", version_script=LIBV_MAP)
    libu = elf_builder.build(
        "libu.so", LIBU_SOURCE, link=[libv], runpath="$ORIGIN", extra=[f"-Wl,--hash-style={hash_style}"]
    )
    full = read_binary_facts(libu)
    bare = read_binary_facts_from_buffer(_without_section_headers(libu.read_bytes()), str(libu))
    # Only sections locate device code: a file without them says so instead of "none".
    assert full.fatbin is None
    assert bare == dataclasses.replace(full, fatbin=FatbinSummary(damage=(NO_SECTIONS,)))
    assert bare.build_id is not None and bare.version_needs and bare.undefined


def test_machine_aarch64_is_reported(built):
    data = bytearray(built["libv"].read_bytes())
    struct.pack_into("<H", data, 0x12, 183)
    assert read_binary_facts_from_buffer(bytes(data), "x").machine == "aarch64"


# -- NVIDIA wheels -----------------------------------------------------------------------------

WHEELS = ["nvidia-nvjitlink-cu12==12.1.105", "nvidia-nvjitlink-cu12==12.8.93", "nvidia-cusparse-cu12==12.3.1.170"]
NVJITLINK_FUNCTIONS = [
    "AddData", "AddFile", "Complete", "Create", "Destroy", "GetErrorLog", "GetErrorLogSize", "GetInfoLog",
    "GetInfoLogSize", "GetLinkedCubin", "GetLinkedCubinSize", "GetLinkedPtx", "GetLinkedPtxSize",
]  # fmt: skip


def elf_files(root: Path) -> List[Path]:
    return sorted(path for path in root.rglob("*") if path.is_file() and is_elf(path))


def wheel_facts(unpacked, requirement: str) -> BinaryFacts:
    (path,) = [p for p in elf_files(unpacked(requirement)) if p.name.startswith("lib")]
    return read_binary_facts(path)


@needs_readelf
@pytest.mark.parametrize("requirement", WHEELS)
def test_wheel_elf_files_match_readelf_and_pyelftools(unpacked, requirement):
    files = elf_files(unpacked(requirement))
    assert files
    for path in files:
        assert_matches_oracles(path)


def torch_cpu_library() -> Path:
    """libtorch_cpu.so of torch 2.14.1 (446 MB, 75,768 dynamic symbols), extracted once into the test cache."""
    member = "torch/lib/libtorch_cpu.so"
    return unpack("torch==2.14.1", [member]) / member


@needs_readelf
def test_libtorch_cpu_matches_readelf():
    """The large case: 75k symbols, GNU_UNIQUE bindings, a patched layout (.dynstr after .shstrtab)."""
    path = torch_cpu_library()
    facts = read_binary_facts(path)
    dynamic = readelf_dynamic(path)
    assert list(facts.needed) == dynamic["NEEDED"]
    assert [":".join(facts.rpath)] == dynamic["RPATH"]
    assert facts.soname == "libtorch_cpu.so"
    definitions, needs = readelf_versions(path)
    assert list(facts.version_definitions) == definitions == []
    assert [(need.file, list(need.versions)) for need in facts.version_needs] == needs
    defined, undefined = readelf_symbols(path)
    assert as_readelf_shows(facts.defined) == defined
    assert as_readelf_shows(facts.undefined) == undefined
    assert (len(facts.defined), len(facts.undefined)) == (74567, 1198)
    assert sum(s.binding == "GNU_UNIQUE" for s in facts.defined) == 854
    assert facts.build_id == "75c66d5bbd330ab1bc18cd4aab92b62da3c45829"


def test_cusparse_needs_nvjitlink_12_4_symbols(unpacked):
    facts = wheel_facts(unpacked, "nvidia-cusparse-cu12==12.3.1.170")
    assert facts.soname == "libcusparse.so.12"
    assert facts.needed[0] == "libnvJitLink.so.12"
    assert facts.runpath == ("$ORIGIN", "$ORIGIN/../../nvjitlink/lib")
    assert facts.flags == 0x2  # DF_SYMBOLIC
    assert facts.build_id == "5c3a5efa523f0044db7cd711a8da681a55fbe94b"  # from the section; PT_NOTE is stale
    assert ".nv_fatbin" in facts.fatbin.sections and "sm_90" in facts.fatbin.sass  # the fatbin reader is wired in
    assert facts.version_definitions == ("libcusparse.so.12",)
    assert VersionNeed("libnvJitLink.so.12", ("libnvJitLink.so.12",)) in facts.version_needs
    complete = [symbol for symbol in facts.undefined if symbol.name == "__nvJitLinkComplete_12_4"]
    assert complete == [
        Symbol("__nvJitLinkComplete_12_4", "libnvJitLink.so.12", "libnvJitLink.so.12", "GLOBAL", "FUNC")
    ]
    wanted = {symbol.name for symbol in facts.undefined if symbol.file == "libnvJitLink.so.12"}
    used = [
        "AddData", "Complete", "Create", "Destroy", "GetErrorLog", "GetErrorLogSize", "GetLinkedCubin",
        "GetLinkedCubinSize",
    ]  # fmt: skip
    assert wanted == {f"__nvJitLink{fn}_12_4" for fn in used}


def _versioned_exports(facts: BinaryFacts) -> Set[str]:
    return {s.name for s in facts.defined if s.name.startswith("__nvJitLink") and s.version == "libnvJitLink.so.12"}


def test_nvjitlink_12_1_lacks_12_4_symbols(unpacked):
    facts = wheel_facts(unpacked, "nvidia-nvjitlink-cu12==12.1.105")
    assert facts.version_definitions == ("libnvJitLink.so.12",)
    expected = {f"__nvJitLink{fn}_12_{minor}" for fn in NVJITLINK_FUNCTIONS for minor in (0, 1)}
    assert _versioned_exports(facts) == expected
    assert "__nvJitLinkComplete_12_4" not in {symbol.name for symbol in facts.defined}


def test_nvjitlink_12_8_has_12_4_and_12_8_symbols(unpacked):
    facts = wheel_facts(unpacked, "nvidia-nvjitlink-cu12==12.8.93")
    exports = _versioned_exports(facts)
    assert {f"__nvJitLink{fn}_12_{minor}" for fn in NVJITLINK_FUNCTIONS for minor in range(9)} <= exports
    assert Symbol("__nvJitLinkComplete_12_4", "libnvJitLink.so.12", None, "GLOBAL", "FUNC") in facts.defined
    assert Symbol("nvJitLinkComplete", "libnvJitLink.so.12", None, "GLOBAL", "FUNC") in facts.defined


# -- the CUDA runtime a file is or links in (binary/runtime.py) ---------------------------------

CUDART_MAP = "libcudart.so.{major} {{ global: cudaMalloc; cudaRuntimeGetVersion; local: *; }};"
CUDART_SOURCE = "int cudaMalloc(void **p, unsigned long n) { return 0; }\nint cudaRuntimeGetVersion(int *v) { *v = 12060; return 0; }\n"
BANNER = b"Cuda compilation tools, release 13.4, V13.4.92\0Build cuda_13.4.r13.4/compiler.38855100_0\0"


def test_vendored_runtime_is_read_from_its_version_node_and_file_name(elf_builder):
    """auditwheel's layout (ale-py 0.12.1): a hashed soname, the version node libcudart.so.12 kept."""
    vendored = elf_builder.build("libcudart-deadbeef.so.12.6.77", CUDART_SOURCE, soname="libcudart-deadbeef.so.12.6.77",
                                 version_script=CUDART_MAP.format(major=12))
    consumer = elf_builder.build("_ext.so", "extern int cudaMalloc(void **, unsigned long);\nint f(void) { return cudaMalloc(0, 0); }\n",
                                 link=[vendored])
    assert read_binary_facts(vendored).cuda_runtime == CudaRuntime("shared", 12, "12.6.77", "file name")
    facts = read_binary_facts(consumer)
    assert facts.cuda_runtime is None and facts.needed[0] == "libcudart-deadbeef.so.12.6.77"
    assert VersionNeed("libcudart-deadbeef.so.12.6.77", ("libcudart.so.12",)) in facts.version_needs
    plain = elf_builder.build("libcudart.so.13", CUDART_SOURCE, soname="libcudart.so.13", version_script=CUDART_MAP.format(major=13))
    assert read_binary_facts(plain).cuda_runtime == CudaRuntime("shared", 13, None)
    # A file name whose release is of another major than the node is not read as the release.
    odd = elf_builder.build("libcudart-0badf00d.so.11.8.89", CUDART_SOURCE, version_script=CUDART_MAP.format(major=12))
    assert read_binary_facts(odd).cuda_runtime == CudaRuntime("shared", 12, None)


def static_library(elf_builder, name: str, *, cubin_tail: bytes = BANNER, register: str = "defined", segment: bool = True,
                   link=(), more: str = "") -> Path:
    """A library laid out as nvcc's host code leaves one: fatbin registration records in
    `.nvFatBinSegment` (unless not `segment`), the fatbin in `.nv_fatbin` (an ELF ABI 8 sm_75 cubin
    whose first bytes hold `cubin_tail`, and PTX of ISA 9.4), and `__cudaRegisterFatBinary` defined
    inside and hidden (a static runtime), left undefined, or absent."""
    blob = container(entry(2, 75, cubin(75, abi=8) + cubin_tail, version=(1, 8)), entry(1, 75, ptx("sm_75", "9.4"), version=(9, 4)))
    array = ", ".join(map(str, blob))
    source = (f'__attribute__((section(".nv_fatbin"), aligned(8), used)) const unsigned char fatbin[] = {{{array}}};\n'
              f'__attribute__((section("{".nvFatBinSegment" if segment else ".data.rel.ro"}"), aligned(8), used)) '
              'const void *wrapper[3] = {0, fatbin, 0};\n')
    if register == "defined":
        source += '__attribute__((visibility("hidden"))) void **__cudaRegisterFatBinary(void *w) { return (void **)w; }\n'
    if register != "absent":
        if register == "undefined":
            source += "extern void **__cudaRegisterFatBinary(void *);\n"
        source += "void **init(void) { return __cudaRegisterFatBinary((void *)wrapper); }\n"
    return elf_builder.build(name, source + more, link=link)


def test_static_runtime_takes_its_release_from_the_toolkit_note(elf_builder):
    facts = read_binary_facts(static_library(elf_builder, "libstatic.so"))
    assert "__cudaRegisterFatBinary" not in {s.name for s in facts.defined + facts.undefined}  # stripped like warp.so
    assert facts.fatbin.toolkit == "13.4.92" and facts.fatbin.ptx[0].isa == "9.4"
    assert facts.cuda_runtime == CudaRuntime("static", 13, "13.4.92", "toolkit note")
    # No note (ABI 7 cubins, CUDA <= 12.7): static, release unknown; the PTX ISA is still there.
    bare = read_binary_facts(static_library(elf_builder, "libbare.so", cubin_tail=b""))
    assert bare.cuda_runtime == CudaRuntime("static", None, None) and bare.fatbin.toolkit is None
    # A banner whose release and version disagree is not taken.
    mixed = read_binary_facts(static_library(elf_builder, "libmixed.so", cubin_tail=BANNER.replace(b"release 13.4", b"release 12.4")))
    assert mixed.cuda_runtime == CudaRuntime("static", None, None)
    # Fatbins without nvcc's registration records are loaded through the driver API (CUPTI does so):
    # no runtime registers them.
    unregistered = read_binary_facts(static_library(elf_builder, "libnoreg.so", register="absent", segment=False))
    assert unregistered.cuda_runtime is None and unregistered.fatbin.toolkit == "13.4.92"


def test_dynamic_runtime_is_not_a_static_one(elf_builder):
    """`__cudaRegisterFatBinary` left undefined (found in a preloaded runtime), or a libcudart needed."""
    assert read_binary_facts(static_library(elf_builder, "libundef.so", register="undefined")).cuda_runtime is None
    stub = elf_builder.build("libcudart.so.12", CUDART_SOURCE, soname="libcudart.so.12", version_script=CUDART_MAP.format(major=12))
    calls = "extern int cudaMalloc(void **, unsigned long);\nint g(void) { return cudaMalloc(0, 0); }\n"
    linked = read_binary_facts(static_library(elf_builder, "liblinked.so", link=[stub], more=calls))
    assert "libcudart.so.12" in linked.needed and linked.cuda_runtime is None
    plain = elf_builder.build("libplain.so", "int f(void) { return 1; }\n")
    assert read_binary_facts(plain).cuda_runtime is None


@needs_readelf
def test_ale_py_vendors_a_cuda_12_6_runtime_its_extension_binds_by_version_node(wheel):
    """ale-py 0.12.1 (3 MB): auditwheel's libcudart-09529672.so.12.6.77, which no DT_NEEDED names as
    libcudart.so.12; readelf is the oracle of its version node and of its consumer's bind."""
    facts = {m.path.split("!")[1]: m for m in read_wheel(open(wheel("ale-py==0.12.1"), "rb"), "ale").members}
    runtime = facts["ale_py.libs/libcudart-09529672.so.12.6.77"]
    assert runtime.cuda_runtime == CudaRuntime("shared", 12, "12.6.77", "file name")
    (extension,) = [m for path, m in facts.items() if path.startswith("ale_py/_ale_py")]
    assert VersionNeed("libcudart-09529672.so.12.6.77", ("libcudart.so.12",)) in extension.version_needs
    assert extension.cuda_runtime is None and not any(n.startswith("libcudart.so") for n in extension.needed)
    path = unpack("ale-py==0.12.1", ["ale_py.libs/libcudart-09529672.so.12.6.77"]) / "ale_py.libs" / "libcudart-09529672.so.12.6.77"
    assert readelf_versions(path)[0] == ["libcudart.so.12"] and readelf_dynamic(path)["SONAME"] == ["libcudart-09529672.so.12.6.77"]


@needs_readelf
@pytest.mark.parametrize("version,major,release,isa", [("1.12.1", 12, "12.9.86", "8.8"), ("1.19.0", 13, "13.4.92", "9.4")])
def test_warp_links_its_cuda_runtime_statically(wheel, version, major, release, isa):
    """warp-lang's warp.so links cudart_static (no libcudart needed); its CUDA comes from its cubins'
    toolkit note and agrees with the wheel's classifier and its PTX ISA (8.8 is CUDA 12.9, 9.4 13.4)."""
    whl = wheel(f"warp-lang=={version}")
    with zipfile.ZipFile(whl) as archive:
        metadata = archive.read(f"warp_lang-{version}.dist-info/METADATA").decode()
    assert f"Classifier: Environment :: GPU :: NVIDIA CUDA :: {major}\n" in metadata
    path = unpack(f"warp-lang=={version}", ["warp/bin/warp.so"]) / "warp" / "bin" / "warp.so"
    facts = read_binary_facts(path)
    assert not [n for n in readelf_dynamic(path)["NEEDED"] if "cud" in n]
    assert facts.cuda_runtime == CudaRuntime("static", major, release, "toolkit note")
    assert {p.isa for p in facts.fatbin.ptx} == {isa}


# -- bad files ---------------------------------------------------------------------------------


def _error(data: bytes) -> str:
    with pytest.raises(ElfError) as caught:
        read_binary_facts_from_buffer(data, "bad.so")
    assert str(caught.value).startswith("bad.so: ")
    return str(caught.value)


def test_error_class_is_a_cudaresolve_error():
    assert issubclass(ElfError, CudaresolveError)


def test_zero_length_and_non_elf_files(tmp_path):
    empty = tmp_path / "empty.so"
    empty.write_bytes(b"")
    text = tmp_path / "script.py"
    text.write_text("print('not an ELF file')\n")
    with pytest.raises(ElfError, match="empty file"):
        read_binary_facts(empty)
    with pytest.raises(ElfError, match="not an ELF file"):
        read_binary_facts(text)
    with pytest.raises(ElfError, match="not an ELF file"):
        read_binary_facts_from_buffer(b"\x7fEL", "short")
    assert not is_elf(empty) and not is_elf(text)
    assert not is_elf(tmp_path / "missing.so") and not is_elf(tmp_path)


def test_missing_path_and_directory(tmp_path):
    with pytest.raises(ElfError, match="cannot read"):
        read_binary_facts(tmp_path / "missing.so")
    with pytest.raises(ElfError, match="not a regular file"):
        read_binary_facts(tmp_path)


def test_is_elf_on_a_library(built):
    assert is_elf(built["libv"]) and is_elf(str(built["main"]))


def test_truncated_at_many_cut_points(built, tmp_path):
    data = built["libu"].read_bytes()
    with open(built["libu"], "rb") as f:
        elf = ELFFile(f)
        sections = list(elf.iter_sections())
    boundaries = {s["sh_offset"] for s in sections} | {s["sh_offset"] + s["sh_size"] for s in sections}
    cuts = {1, 4, 5, 16, 18, 40, 63, 64, 65, 100, 120, 200, len(data) // 2, len(data) - 64, len(data) - 1}
    cuts |= {cut for cut in boundaries if 0 < cut < len(data)}
    for cut in sorted(cuts):
        _error(data[:cut])
    cut_file = tmp_path / "cut.so"
    cut_file.write_bytes(data[:64])
    with pytest.raises(ElfError):
        read_binary_facts(cut_file)


def test_32_bit_object(tmp_path, built):
    source = tmp_path / "t.c"
    source.write_text("int f(void) { return 1; }\n")
    obj = tmp_path / "t32.o"
    compiled = subprocess.run(["gcc", "-m32", "-c", "-o", str(obj), str(source)], capture_output=True)
    if compiled.returncode == 0:
        data = obj.read_bytes()
        assert data[4] == 1
    else:  # no 32-bit compiler support: the class byte is what matters
        data = bytearray(built["libv"].read_bytes())
        data[4] = 1
    assert "32-bit" in _error(bytes(data))


def test_big_endian_invalid_class_and_encoding(built):
    data = bytearray(built["libv"].read_bytes())
    data[5] = 2
    assert "big-endian" in _error(bytes(data))
    data[5] = 7
    assert "invalid ELF data encoding 7" in _error(bytes(data))
    data[5], data[4] = 1, 9
    assert "invalid ELF class 9" in _error(bytes(data))


def test_unsupported_machine_and_relocatable_object(built, tmp_path):
    data = bytearray(built["libv"].read_bytes())
    struct.pack_into("<H", data, 0x12, 40)  # EM_ARM
    assert "unsupported machine e_machine=40" in _error(bytes(data))
    source = tmp_path / "o.c"
    source.write_text("int f(void) { return 1; }\n")
    subprocess.run(["gcc", "-c", "-o", str(tmp_path / "o.o"), str(source)], check=True)
    assert "ELF type 1 is not a shared object or executable" in _error((tmp_path / "o.o").read_bytes())


class Image:
    """A writable copy of an ELF file with its layout located by pyelftools (an independent parser)."""

    def __init__(self, path: Path):
        self.data = bytearray(path.read_bytes())
        with open(path, "rb") as f:
            elf = ELFFile(f)
            self.shoff = elf["e_shoff"]
            self.sections = {s.name: (i, s["sh_offset"], s["sh_size"]) for i, s in enumerate(elf.iter_sections())}
            dynamic = elf.get_section_by_name(".dynamic")
            start = dynamic["sh_offset"]
            self.dynamic = [(start + 16 * i, tag.entry.d_tag) for i, tag in enumerate(dynamic.iter_tags())]

    def header_of(self, name: str) -> int:
        return self.shoff + 64 * self.sections[name][0]

    def dynamic_entry(self, tag: str) -> int:
        return next(offset for offset, name in self.dynamic if name == tag)

    def put(self, fmt: str, offset: int, *values: int) -> bytes:
        struct.pack_into(fmt, self.data, offset, *values)
        return bytes(self.data)


HUGE = 0x7FFF_FFFF_0000

CORRUPTIONS = {
    "e_shoff past the end": (lambda im: im.put("<Q", 0x28, len(im.data) + 8), "section header table"),
    "e_phoff past the end": (lambda im: im.put("<Q", 0x20, HUGE), "program header table"),
    "e_shentsize": (lambda im: im.put("<H", 0x3A, 40), "section header entry size 40"),
    "e_phentsize": (lambda im: im.put("<H", 0x36, 32), "program header entry size 32"),
    "e_shstrndx": (lambda im: im.put("<H", 0x3E, 500), "section name table index 500"),
    "e_shnum huge": (lambda im: im.put("<H", 0x3C, 0xFF00), "section header table"),
    ".dynsym offset": (lambda im: im.put("<Q", im.header_of(".dynsym") + 0x18, HUGE), "section"),
    ".dynsym size": (lambda im: im.put("<Q", im.header_of(".dynsym") + 0x20, HUGE), "lies outside the file"),
    ".dynsym entsize": (lambda im: im.put("<Q", im.header_of(".dynsym") + 0x38, 16), ".dynsym entry size 16"),
    ".dynsym sh_link": (lambda im: im.put("<I", im.header_of(".dynsym") + 0x28, 0), "not a string table"),
    ".gnu.version size": (
        lambda im: im.put("<Q", im.header_of(".gnu.version") + 0x20, 2),
        ".gnu.version has 1 entries",
    ),
    "DT_NEEDED string": (lambda im: im.put("<Q", im.dynamic_entry("DT_NEEDED") + 8, HUGE), "string offset"),
    "DT_STRTAB address": (
        lambda im: im.put("<Q", im.dynamic_entry("DT_STRTAB") + 8, HUGE),
        "lies in no loaded segment",
    ),
    "DT_STRSZ": (lambda im: im.put("<Q", im.dynamic_entry("DT_STRSZ") + 8, HUGE), "dynamic string table"),
    "vn_next": (lambda im: im.put("<I", im.sections[".gnu.version_r"][1] + 12, 0x7FFF0000), "runs past .gnu.version_r"),
    "vn_aux": (lambda im: im.put("<I", im.sections[".gnu.version_r"][1] + 8, 0x7FFF0000), "runs past .gnu.version_r"),
    "vn_file string": (lambda im: im.put("<I", im.sections[".gnu.version_r"][1] + 4, 0x7FFF0000), "string offset"),
    "versym index": (lambda im: im.put("<H", im.sections[".gnu.version"][1] + 2, 0x7FF0), "version index 32752"),
}


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
def test_corrupted_fields(built, name):
    corrupt, message = CORRUPTIONS[name]
    assert message in _error(corrupt(Image(built["libu"])))


def test_damaged_note_loses_only_the_build_id(built):
    image = Image(built["libu"])
    data = image.put("<I", image.sections[".note.gnu.build-id"][1] + 4, 0x10000)  # descsz past the section
    facts = read_binary_facts_from_buffer(data, "x")
    assert facts.build_id is None
    assert facts.needed == ("libv.so.1", "libc.so.6")


@pytest.mark.parametrize("tag", ["DT_NEEDED", "DT_SONAME"])
def test_bad_dynamic_string_offset_blames_dynstr_not_the_table_read_first(elf_builder, tag):
    # Version definitions and no RPATH/RUNPATH: .gnu.version_d is the first user of .dynstr, whose
    # name the error once carried for every later user.
    libv = elf_builder.build("libv.so.1", LIBV_SOURCE, soname="libv.so.1", version_script=LIBV_MAP)
    libd = elf_builder.build("libd.so", "extern int bar(void);\nint d(void) { return bar(); }\n", soname="libd.so",
                             version_script="D1 { global: d; local: *; };\n", link=[libv])
    image = Image(libd)
    message = _error(image.put("<Q", image.dynamic_entry(tag) + 8, HUGE))
    assert message == f"bad.so: {tag} string offset {HUGE:#x} is outside the dynamic string table (.dynstr)"


def test_bad_version_definition_name_names_dynstr_as_linked_from_version_d(elf_builder):
    libv = elf_builder.build("libv.so.1", LIBV_SOURCE, soname="libv.so.1", version_script=LIBV_MAP)
    image = Image(libv)
    verdaux = image.sections[".gnu.version_d"][1] + struct.unpack_from("<I", image.data, image.sections[".gnu.version_d"][1] + 12)[0]
    message = _error(image.put("<I", verdaux, 0x7FFF0000))
    assert message == "bad.so: string offset 0x7fff0000 is outside .dynstr, the string table of .gnu.version_d"
