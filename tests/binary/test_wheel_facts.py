"""The wheel reader (index.wheel_facts), the generated table (data/wheel_facts.toml) and its loader:
the table against real wheels, the reader against gcc-built ones, a table row round-tripped back to
BinaryFacts, and malformed input refused with a clear error."""

from __future__ import annotations

import hashlib
import importlib.util
import io
import re
import sys
import zipfile
from importlib import resources
from pathlib import Path

import pytest

from cudaresolve import records
from cudaresolve.binary.elf import read_binary_facts
from cudaresolve.binary.wheel import WheelError, is_system_provider, read_wheel
from cudaresolve.env.inspect import provider_needs
from cudaresolve.errors import DataError
from cudaresolve.index.wheel_facts import from_record
from cudaresolve.knowledge import files, wheel_facts
from cudaresolve.versions import CudaVersion

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "record_wheel_facts.py"


def table_facts(name: str, version: str, machine: str = "x86_64"):
    """The table row of a release's `machine` wheel as the WheelFacts the resolver gets."""
    return from_record(wheel_facts.find(name, version, machine=machine))


def cross_component(facts) -> tuple:
    """provider_needs without the C/C++ runtime's: what the table keeps."""
    return tuple(need for need in provider_needs(facts) if not is_system_provider(need.versions))


def read_path(path: Path):
    with open(path, "rb") as stream:
        return read_wheel(stream, path.name)


def generator():
    spec = importlib.util.spec_from_file_location("record_wheel_facts", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- the table against real wheels ------------------------------------------------------------------


def test_cusparse_row_binds_nvjitlink_12_4_like_the_wheel(wheel):
    path = wheel("nvidia-cusparse-cu12==12.3.1.170")
    row = wheel_facts.find("nvidia-cusparse-cu12", "12.3.1.170", machine="x86_64")
    assert row is not None and row.filename == path.name
    assert row.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert wheel_facts.min_provider_release("nvidia-cusparse-cu12", "12.3.1.170", path.name) == {"libnvJitLink.so.12": "12.4"}

    table = table_facts("nvidia-cusparse-cu12", "12.3.1.170")
    real = read_path(path)
    assert table.complete is False and real.complete is True
    table_lib = next(m for m in table.members if m.path.endswith("!nvidia/cusparse/lib/libcusparse.so.12"))
    real_lib = next(m for m in real.members if m.path == table_lib.path)
    (need,) = cross_component(table_lib)
    assert need.file == "libnvJitLink.so.12" and need.min_version == CudaVersion(12, 4)
    assert "__nvJitLinkComplete_12_4" in need.symbols
    # the conversion round-trips: the row gives the real file's cross-component needs, soname, paths, device code
    assert cross_component(table_lib) == cross_component(real_lib)
    for attribute in ("soname", "needed", "rpath", "runpath", "version_definitions", "machine"):
        assert getattr(table_lib, attribute) == getattr(real_lib, attribute), attribute
    assert table_lib.fatbin.sass == real_lib.fatbin.sass and table_lib.fatbin.ptx == real_lib.fatbin.ptx


@pytest.mark.parametrize("version, has_12_4", [("12.1.105", False), ("12.9.86", True)])
def test_nvjitlink_rows_define_every_abi_suffixed_symbol_of_the_wheel(wheel, version, has_12_4):
    real = read_path(wheel(f"nvidia-nvjitlink-cu12=={version}"))
    (real_lib,) = real.members
    (table_lib,) = table_facts("nvidia-nvjitlink-cu12", version).members
    suffixed = {(s.name, s.version, s.hidden) for s in real_lib.defined if re.search(r"_12_\d+$", s.name)}
    assert suffixed and {(s.name, s.version, s.hidden) for s in table_lib.defined} == suffixed
    assert ("__nvJitLinkComplete_12_4" in table_lib.symbols.definitions) is has_12_4


def test_a_planned_cusparse_binds_only_a_new_enough_nvjitlink_from_the_table():
    """The row of each provider satisfies its consumers in the table: what the resolver relies on."""
    (cusparse,) = [m for m in table_facts("nvidia-cusparse-cu12", "12.3.1.170").members
                   if m.soname == "libcusparse.so.12"]
    wanted = [s for s in cusparse.undefined if s.file == "libnvJitLink.so.12"]

    def missing(version: str) -> list:
        (provider,) = table_facts("nvidia-nvjitlink-cu12", version).members
        return [s.name for s in wanted if (s.version, False) not in provider.symbols.definitions.get(s.name, ())]

    assert missing("12.9.86") == [] and "__nvJitLinkComplete_12_4" in missing("12.1.105")


def test_every_versioned_bind_on_a_library_of_the_table_is_defined_by_some_row():
    """Providers outside the table (libibverbs, libfabric: RDMA stacks of the system) are not judged."""
    sonames, defined = set(), set()
    for row in wheel_facts.load():
        for member in from_record(row).members:
            sonames.add(member.soname)
            defined.update((s.name, s.version) for s in member.defined)
    checked = 0
    for row in wheel_facts.load():
        for member in row.member:
            for bind in member.binds:
                if bind.file in sonames:
                    checked += 1
                    assert {tuple(s.split("@")) for s in bind.symbols} <= defined, (row.filename, member.path, bind.file)
    assert checked > 100


def test_table_is_generated_sorted_and_small():
    text = resources.files("cudaresolve.data").joinpath("wheel_facts.toml").read_text()
    assert text.startswith("# Generated by scripts/record_wheel_facts.py")
    # 0.82 MB for 237 x86_64 wheels, 1.03 MB with 58 aarch64 ones: binds within a wheel and consumers list no symbols
    assert len(text.encode()) < 1_200_000
    rows = [(w.name, tuple(int(p) for p in w.version.split("."))) for w in wheel_facts.load()]
    assert rows == sorted(rows) and len(rows) > 50
    for row in wheel_facts.load():
        paths = [m.path for m in row.member]
        assert paths == sorted(paths)
    assert not any(v.startswith(("GLIBC_", "GLIBCXX_", "CXXABI_", "GCC_"))
                   for row in wheel_facts.load() for m in row.member for b in m.binds for v in b.versions)


def test_a_release_not_in_the_table_has_no_row():
    assert wheel_facts.find("nvidia-cusparse-cu12", "0.0.1") is None
    assert wheel_facts.min_provider_release("nvidia-cusparse-cu12", "0.0.1") == {}


# -- the reader on gcc-built wheels -----------------------------------------------------------------


PROVIDER = """int provFoo_12_4(void) { return 1; }
int provBar(void) { return 2; }
int provOld(void) { return 3; }
__asm__(".symver provOld, provOld_12_1@libprov.so.12");
"""  # provOld_12_1@libprov.so.12: a hidden (non-default) definition
PROVIDER_MAP = "libprov.so.12 { global: provFoo_12_4; provBar; provOld_12_1; local: *; };\n"
CONSUMER = "extern int provFoo_12_4(void);\nextern int provBar(void);\nint use(void) { return provFoo_12_4() + provBar(); }\n"


@pytest.fixture
def tiny_wheel(elf_builder, tmp_path):
    """A wheel holding a provider, a consumer bound to its `provFoo_12_4@libprov.so.12`, a linker script
    named like a shared object and a directory entry; returns (wheel path, provider path, consumer path)."""
    provider = elf_builder.build("libprov.so.12", PROVIDER, soname="libprov.so.12", version_script=PROVIDER_MAP)
    consumer = elf_builder.build("libcons.so.1", CONSUMER, soname="libcons.so.1", link=[provider], runpath="$ORIGIN")
    path = tmp_path / "tiny-1.0-py3-none-manylinux_2_17_x86_64.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("tiny/lib/", b"")
        archive.write(provider, "tiny/lib/libprov.so.12")
        archive.write(consumer, "tiny/lib/libcons.so.1")
        archive.writestr("tiny/lib/libscript.so", b"/* GNU ld script */\nINPUT(libprov.so.12)\n")
        archive.writestr("tiny-1.0.dist-info/METADATA", b"Metadata-Version: 2.1\nName: tiny\nVersion: 1.0\n")
    return path, provider, consumer


def test_reader_gives_the_facts_of_the_files_from_a_file_or_memory(tiny_wheel):
    path, provider, consumer = tiny_wheel
    for stream in (open(path, "rb"), io.BytesIO(path.read_bytes())):
        with stream:
            found = read_wheel(stream, "tiny.whl")
        assert [m.path for m in found.members] == ["tiny.whl!tiny/lib/libprov.so.12", "tiny.whl!tiny/lib/libcons.so.1"]
        assert found.not_elf == ("tiny/lib/libscript.so",) and found.unreadable == ()
        for member, original in zip(found.members, (provider, consumer)):
            on_disk = read_binary_facts(original)
            assert member.symbols == on_disk.symbols and member.version_needs == on_disk.version_needs
            assert (member.soname, member.needed, member.runpath) == (on_disk.soname, on_disk.needed, on_disk.runpath)
    (need,) = cross_component(found.members[1])
    assert (need.file, need.min_version, need.symbols) == ("libprov.so.12", CudaVersion(12, 4), ("provBar", "provFoo_12_4"))


def test_generator_row_round_trips_to_the_same_needs_and_definitions(tiny_wheel):
    """The provider and consumer as two wheels: the bind crosses wheels, so the row keeps its symbols."""
    path, _, _ = tiny_wheel
    script = generator()
    data = script.read_one(str(path))
    provider_only = {**data, "members": [m for m in data["members"] if m["soname"] == "libprov.so.12"]}
    consumer_only = {**data, "members": [m for m in data["members"] if m["soname"] == "libcons.so.1"],
                     "filename": "cons-1.0-py3-none-manylinux_2_17_x86_64.whl"}
    text = script.render([("cons", "1.0", consumer_only), ("tiny", "1.0", provider_only)],
                         {"tiny==1.0": ["test"], "cons==1.0": ["test"]}, [], path.stat().st_size)
    table = records.load(wheel_facts._File, tomllib.loads(text))
    consumer_row, row = table.wheel
    assert row.sha256 == hashlib.sha256(path.read_bytes()).hexdigest() and row.filename == path.name
    real = {m.path.split("!", 1)[1]: m for m in read_path(path).members}
    for table_row in (consumer_row, row):
        rebuilt = from_record(table_row)
        assert rebuilt.complete is False
        for member in rebuilt.members:
            assert cross_component(member) == cross_component(real[member.path.split("!", 1)[1]])
    provider = next(m for m in from_record(row).members if m.soname == "libprov.so.12")
    # provFoo_12_4 and provOld_12_1 carry an ABI suffix, provBar is bound by the consumer: all kept, hidden kept hidden
    assert provider.symbols.definitions == {"provFoo_12_4": (("libprov.so.12", False),),
                                            "provBar": (("libprov.so.12", False),),
                                            "provOld_12_1": (("libprov.so.12", True),)}
    assert row.not_elf == ("tiny/lib/libscript.so",) and provider.fatbin is None


def test_generator_keeps_no_symbols_a_wheel_binds_within_itself_nor_those_of_consumers(tiny_wheel):
    """A wheel's own files are installed together and cannot skew; a consumer's symbols cross no
    wheel: their binds keep the provider file, versions and release, not the symbols."""
    path, _, _ = tiny_wheel
    script = generator()
    data = script.read_one(str(path))
    for name in ("tiny", "onnxruntime-gpu"):
        text = script.render([(name, "1.0", data)], {f"{name}==1.0": ["test"]}, [], path.stat().st_size)
        (row,) = records.load(wheel_facts._File, tomllib.loads(text)).wheel
        consumer = next(m for m in row.member if m.soname == "libcons.so.1")
        (bind,) = consumer.binds
        assert (bind.file, bind.versions, bind.min_version, bind.symbols) == ("libprov.so.12", ("libprov.so.12",), "12.4", ())
        provider = next(m for m in row.member if m.soname == "libprov.so.12")
        # only the ABI-suffixed definitions stay, and none of a consumer's
        assert provider.defines == (() if name == "onnxruntime-gpu" else
                                    ("provFoo_12_4@@libprov.so.12", "provOld_12_1@libprov.so.12"))


def test_truncated_wheel_is_a_wheel_error(tiny_wheel):
    path, _, _ = tiny_wheel
    data = path.read_bytes()
    with pytest.raises(WheelError, match=r"^tiny\.whl: not a readable wheel \(File is not a zip file\)$"):
        read_wheel(io.BytesIO(data[: len(data) // 2]), "tiny.whl")


def test_damaged_member_is_a_wheel_error_not_a_traceback(tiny_wheel):
    path, _, _ = tiny_wheel
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo("tiny/lib/libcons.so.1")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    data[start + 100 : start + 140] = bytes(40)  # inside the deflated stream
    with pytest.raises(WheelError, match=r"^tiny\.whl: not a readable wheel \("):
        read_wheel(io.BytesIO(bytes(data)), "tiny.whl")


def test_member_that_is_elf_but_damaged_is_listed_unreadable(tmp_path):
    path = tmp_path / "bad-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("bad/libbad.so", b"\x7fELF" + bytes(12))
    found = read_path(path)
    (member, why) = found.unreadable[0]
    assert found.members == () and member == "bad/libbad.so" and "libbad.so" in why


# -- the loader refuses a malformed table -----------------------------------------------------------


@pytest.fixture
def table(tmp_path, monkeypatch):
    """A copy of the data directory the loader reads instead of the package's, the table's cache cleared."""
    for name in (p.name for p in resources.files("cudaresolve.data").iterdir() if p.name.endswith(".toml")):
        (tmp_path / name).write_bytes(resources.files("cudaresolve.data").joinpath(name).read_bytes())
    monkeypatch.setattr(files.resources, "files", lambda package: Path(tmp_path))
    wheel_facts.load.cache_clear()
    yield tmp_path / "wheel_facts.toml"
    wheel_facts.load.cache_clear()


@pytest.mark.parametrize(
    "pattern, new, message",
    [
        (r'sha256 = "[0-9a-f]+"', 'sha256 = "XYZ"', "wheel_facts.toml: wheel[0].sha256: not a sha256"),
        (r'version = "[^"]+"', 'version = "12.x"', "wheel_facts.toml: wheel[0].version: '12.x' does not parse"),
        (r'name = "[^"]+"', 'name = "Nvidia_Cublas"', "wheel[0].name: not a canonical distribution name"),
        (r'filename = "[^"]+"', 'filename = "nvidia_other-1.0-py3-none-any.whl"', "wheel[0].filename: 'nvidia_other"),
        (r'sass = \["sm_\d+', 'sass = ["compute_50', "sass: not a SASS target: 'compute_50'"),
        (r'ptx = \["compute_\d+', 'ptx = ["sm_90', "ptx: expected compute_XY:ISA"),
        (r'symbols = \["[^"@]+@', 'symbols = ["nope', ".symbols: expected NAME@VERSION"),
        (r'min_version = "[^"]+"', 'min_version = "twelve"', ".min_version: 'twelve' does not parse"),
        (r'confidence = "H"', 'confidence = "Q"', "wheel_facts.toml: confidence"),
    ],
)
def test_malformed_table_is_a_data_error_naming_the_key(table, pattern, new, message):
    text = table.read_text()
    assert re.search(pattern, text), pattern
    table.write_text(re.sub(pattern, new, text, count=1))
    with pytest.raises(DataError) as info:
        wheel_facts.load()
    assert message in str(info.value)


def test_a_define_of_a_version_the_member_lacks_is_a_data_error(table):
    text = table.read_text()
    match = re.search(r'defines = \["([^"@]+)@@?([^"]+)"', text)
    table.write_text(text.replace(match.group(0), f'defines = ["{match.group(1)}@@NOPE_1.0"', 1))
    with pytest.raises(DataError, match=r"wheel_facts\.toml: wheel\[\d+\]\.member\[\d+\]\.defines: versions the member"):
        wheel_facts.load()
