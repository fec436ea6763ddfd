"""Inputs that once cost minutes of CPU or gigabytes end within their work budget, or are reported
for that input alone (docs/security.md, "Work budgets"), each at a larger size than it was found at.
Every case runs under the per-case CPU budget of tests/budget.py."""

from __future__ import annotations

import io
import json
import os
import struct
import sysconfig
import zipfile

import pytest
from budget import budgeted
from fatbin_bytes import MAGIC, container, cubin, entry
from hostile_binaries import chained_fakes, library_with, many_entries, sparse_fatbin
from test_env_distributions import make_dist_info
from test_fatbin import ALLOC, PROGBITS, fatbin_library, layout

from cudaresolve.binary import elf, fatbin, wheel
from cudaresolve.binary.elf import ElfError, read_binary_facts
from cudaresolve.binary.facts import SKIP_BAD_ARCH, SKIP_STEPS, SKIP_TARGETS, DeviceCodeSkip, FatbinSummary
from cudaresolve.binary.fatbin import summarize_fatbins
from cudaresolve.binary.wheel import read_wheel
from cudaresolve.cli import main
from cudaresolve.env.cache import dumps_facts, loads_facts
from cudaresolve.env.distributions import MAX_METADATA_FILE, MAX_REQUIRES, read_distributions

FOUR_MB = 4 << 20
GOOD = container(entry(2, 86, cubin(86), version=(1, 7)))


@budgeted
def test_chained_fake_containers_in_rodata_are_scanned_once():
    """52,428 fakes (4 MB): restarting one byte after each failed chain walked 1.4 billion entries."""
    fakes = chained_fakes(FOUR_MB // 80)
    data, table = layout((".rodata", fakes + GOOD, ALLOC, PROGBITS))
    assert summarize_fatbins(data, table) == FatbinSummary(sass=("sm_86",), containers=1, entries=1, sections=(".rodata",))


@budgeted
def test_a_failed_chain_of_one_entry_does_not_hide_the_container_after_its_magic():
    """A failure before a whole entry was passed costs one step: the scan goes on from the next byte."""
    fake = struct.pack("<IHHQ", MAGIC, 1, 16, 64) + b"\x07" * 4
    data, table = layout((".rodata", fake + GOOD, ALLOC, PROGBITS))
    assert summarize_fatbins(data, table).sass == ("sm_86",)


@budgeted
def test_chained_fakes_in_a_gcc_built_library(elf_builder):
    path = library_with(elf_builder, chained_fakes(FOUR_MB // 80) + GOOD)
    assert read_binary_facts(path).fatbin.sass == ("sm_86",)


@budgeted
def test_fifty_thousand_entries_are_folded_not_kept():
    data, table = layout((".nv_fatbin", many_entries(50_000), ALLOC, PROGBITS))
    summary = summarize_fatbins(data, table)
    assert (summary.sass, summary.entries, summary.skipped) == (("sm_80",), 50_000, None)


@budgeted
def test_a_file_past_its_step_budget_is_skipped_whole():
    data, table = layout((".rodata", GOOD, ALLOC, PROGBITS), (".nv_fatbin", many_entries(50_000), ALLOC, PROGBITS))
    assert summarize_fatbins(data, table, max_steps=10_000) == FatbinSummary(skipped=DeviceCodeSkip(SKIP_STEPS, 10_000))


@budgeted
def test_magic_after_magic_costs_a_step_each():
    data, table = layout((".rodata", fatbin.MAGIC * (FOUR_MB // 4), ALLOC, PROGBITS))
    assert summarize_fatbins(data, table) == FatbinSummary(skipped=DeviceCodeSkip(SKIP_STEPS, fatbin.MAX_STEPS))


@budgeted
def test_more_distinct_headers_than_kept_skip_the_file():
    entries = [entry(8, 80, b"", flags=0x11, version=(major, minor)) for major in range(70) for minor in range(70)]
    data, table = layout((".nv_fatbin", container(*entries), ALLOC, PROGBITS))
    assert summarize_fatbins(data, table).skipped == DeviceCodeSkip(SKIP_TARGETS, fatbin.MAX_HEADER_KEYS)


@pytest.mark.parametrize(("kind", "arch", "ptx_target"), [(2, 0, False), (2, 1, False), (2, 1_000_000_000, False),
                                                          (1, 5, True), (4, 1000, False)])
@budgeted
def test_an_arch_no_target_has_skips_the_file(kind, arch, ptx_target):
    data, table = layout((".nv_fatbin", GOOD + container(entry(kind, arch, b"")), ALLOC, PROGBITS))
    assert summarize_fatbins(data, table) == FatbinSummary(skipped=DeviceCodeSkip(SKIP_BAD_ARCH, arch, ptx_target))


@budgeted
def test_eight_gib_of_holes_are_not_read(elf_builder):
    """16 KB on disk, a `.nv_fatbin` of one container and 8 GiB of holes: once 66 s and 4.1 GB."""
    path = fatbin_library(elf_builder, GOOD)
    sparse_fatbin(path, GOOD, 8 << 30)
    if os.stat(path).st_blocks * 512 >= os.path.getsize(path):
        pytest.skip("this file system does not keep holes")
    assert read_binary_facts(path).fatbin == FatbinSummary(sass=("sm_86",), containers=1, entries=1, sections=(".nv_fatbin",))


@pytest.mark.parametrize("spilled", [False, True])
@budgeted
def test_a_wheel_member_with_fifty_thousand_entries(elf_builder, monkeypatch, spilled):
    """Spilled: a member past SPILL_MEMBER is inflated into a temporary file and mapped, not held."""
    if spilled:
        monkeypatch.setattr(wheel, "SPILL_MEMBER", 1 << 20)
    library = library_with(elf_builder, many_entries(50_000), section=".nv_fatbin")
    stream = io.BytesIO()
    with zipfile.ZipFile(stream, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.write(library, "pkg/libhostile.so")
    stream.seek(0)
    (member,) = read_wheel(stream, "hostile-1.0-py3-none-any.whl").members
    assert (member.fatbin.sass, member.fatbin.entries) == (("sm_80",), 50_000)


def test_one_bad_library_is_skipped_and_the_rest_judged(elf_builder, tmp_path, monkeypatch, capsys):
    """sm_0 in one library once stopped `doctor` with exit 3 and no file named."""
    monkeypatch.setenv("CUDARESOLVE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    bad = library_with(elf_builder, container(entry(2, 0, b"")), ".nv_fatbin", "libbad.so")
    old = library_with(elf_builder, container(entry(2, 75, cubin(75), version=(1, 7))), ".nv_fatbin", "libold.so")
    site = tmp_path / "site"
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    for name, library in (("bad", bad), ("old", old)):
        (site / name).mkdir(parents=True)
        os.replace(library, site / name / f"_core{suffix}")
        make_dist_info(site, name, "1.0", files=(f"{name}/_core{suffix}",))
    code = main(["doctor", "--site-packages", str(site), "--json", "--driver", "550.144.03", "--gpu", "8.6"])
    out, err = capsys.readouterr()
    found = {(f["check"], f["severity"], f["subject"], f["message"]) for f in json.loads(out)["findings"]}
    assert ("environment", "warning", str(site / "bad" / f"_core{suffix}"),
            "device code skipped: its fatbin names sm_0, which is no CUDA target; its GPU coverage is not judged") in found
    assert any(check == "arch-coverage" and subject == "old 1.0" for check, _, subject, _ in found)
    assert (code, err) == (2, "")  # the arch-coverage error


@budgeted
def test_a_metadata_past_its_bound_is_a_problem_not_minutes(tmp_path):
    big = make_dist_info(tmp_path, "big", "1.0")
    (big / "METADATA").write_text("Name: big\nVersion: 1.0\n" + "Requires-Dist: a\n" * (MAX_METADATA_FILE // 17 + 1))
    many = make_dist_info(tmp_path, "many", "1.0")
    (many / "METADATA").write_text("Name: many\nVersion: 1.0\n" + "Requires-Dist: a\n" * (MAX_REQUIRES + 1))
    distributions, problems = read_distributions(str(tmp_path))
    assert distributions == ()
    assert sorted(problem.reason for problem in problems) == [
        f"METADATA has {MAX_REQUIRES + 1:,} Requires-Dist fields, more than {MAX_REQUIRES:,}",
        "METADATA is unreadable: larger than 4 MiB",
    ]


def test_four_thousand_missing_libraries_are_searched_for_a_fix_once_each(elf_builder, tmp_path, monkeypatch, capsys):
    """A module needing 3,000 libraries none of which exists once kept the doctor a minute on its fix
    search (every missing library re-read the module's DT_NEEDED list against the whole table)."""
    monkeypatch.setenv("CUDARESOLVE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    count = 4000
    stub = elf_builder.build("stub.so", "", soname="libmissing_00000.so", extra=["-nostdlib", "-s"]).read_bytes()
    stubs = tmp_path / "stubs"
    stubs.mkdir()
    for i in range(count):
        (stubs / f"{i}.so").write_bytes(stub.replace(b"libmissing_00000.so", b"libmissing_%05d.so" % i))
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    elf_builder.build(f"_core{suffix}", "int v(void) { return 1; }\n", directory="site/victim",
                      extra=["-Wl,--no-as-needed", *(str(stubs / f"{i}.so") for i in range(count))])
    site = elf_builder.root / "site"
    make_dist_info(site, "victim", "1.0", files=(f"victim/_core{suffix}",))
    run = budgeted(main)
    code = run(["doctor", "--site-packages", str(site), "--json", "--driver", "550.144.03", "--gpu", "8.6"])
    findings = json.loads(capsys.readouterr().out)["findings"]
    assert code == 2 and sum(f["check"] == "missing-library" for f in findings) == count


def test_a_skipped_summary_is_kept_in_the_facts_cache():
    """A skipped file is not parsed again on the next run: the cache unpickles its reason."""
    summary = FatbinSummary(skipped=DeviceCodeSkip(SKIP_BAD_ARCH, 0))
    assert loads_facts(dumps_facts(summary)) == summary


def test_version_tables_past_their_step_budget_are_one_error_naming_the_file(elf_builder, monkeypatch):
    """Version records can point back at one another (every need re-walking one long chain of
    names): their walk counts steps, and a file past the budget is an ElfError naming it."""
    library = elf_builder.build("libneeds.so", '#include <stdio.h>\nvoid f(void) { puts("x"); }\n')
    assert read_binary_facts(library).version_needs
    monkeypatch.setattr(elf, "MAX_TABLE_STEPS", 1)
    with pytest.raises(ElfError, match=f"^{library}: .gnu.version_r did not parse within 1 steps$"):
        read_binary_facts(library)
