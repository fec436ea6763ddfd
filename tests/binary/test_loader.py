"""Loader emulation: search order and binding on plain data, then gcc-built chains and real NVIDIA
wheels against glibc itself (`ldd -r` is the oracle)."""

from __future__ import annotations

import math
import os
import platform
import re
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Optional

import pytest

from cudaresolve.binary.elf import read_binary_facts
from cudaresolve.binary.facts import BinaryFacts, Symbol, SymbolTable, VersionNeed
from cudaresolve.binary.ldcache import CacheEntry, LdCache
from cudaresolve.binary.loader import (
    ALREADY_LOADED,
    DEFAULT_DIR,
    DRIVER,
    INTERPRETERS,
    INVALID_LIBRARY,
    LD_LIBRARY_PATH,
    LD_SO_CACHE,
    MISSING_LIBRARY,
    MISSING_VERSION,
    NOT_FOUND,
    PATH,
    PRELOADED,
    RPATH,
    RUNPATH,
    UNDEFINED_SYMBOL,
    LoaderEnv,
    Problem,
    Resolution,
    min_provider_version,
    resolve,
    split_library_path,
    system_layout,
    with_program,
)
from cudaresolve.errors import UsageError
from cudaresolve.knowledge import components
from cudaresolve.versions import CudaVersion

DRIVER_LIBRARIES = frozenset(components.driver_libraries())

# -- plain data ------------------------------------------------------------------------------------


def so(path: str, **kw) -> BinaryFacts:
    values = dict(
        path=path,
        machine="x86_64",
        elf_type="DYN",
        soname=os.path.basename(path),
        needed=(),
        rpath=(),
        runpath=(),
        flags=0,
        flags_1=0,
        symbols=SymbolTable.of(kw.pop("undefined", ()), kw.pop("defined", ())),
        version_definitions=(),
        version_needs=(),
        build_id=None,
        fatbin=None,
    )
    values.update({k: tuple(v) if isinstance(v, list) else v for k, v in kw.items()})
    return BinaryFacts(**values)


def world(*objects: BinaryFacts):
    files = {o.path: o for o in objects}
    return files.get


ENV = LoaderEnv(machine="x86_64", default_dirs=("/sys/lib64",), lib="lib64", platform="x86_64")


def needed_of(result, path: str) -> dict:
    [obj] = [o for o in result.objects if o.path == path]
    return {r.needed: r for r in obj.needed}


def test_rpath_is_inherited_down_the_chain():
    files = world(
        so("/app/libtop.so", needed=["libmid.so.1"], rpath=["/app/deps"]),
        so("/app/deps/libmid.so.1", needed=["libleaf.so.1"]),
        so("/app/deps/libleaf.so.1"),
    )
    result = resolve(["/app/libtop.so"], facts_of=files, env=ENV)
    leaf = needed_of(result, "/app/deps/libmid.so.1")["libleaf.so.1"]
    assert leaf == Resolution("libleaf.so.1", "/app/deps/libleaf.so.1", RPATH, rpath_of="/app/libtop.so")
    assert leaf.why == "rpath of /app/libtop.so"
    assert result.problems == ()
    assert [(o.path, o.loaded_by, o.why) for o in result.objects] == [
        ("/app/libtop.so", None, "root"),
        ("/app/deps/libmid.so.1", "/app/libtop.so", "rpath of /app/libtop.so"),
        ("/app/deps/libleaf.so.1", "/app/deps/libmid.so.1", "rpath of /app/libtop.so"),
    ]


def test_runpath_is_not_inherited():
    files = world(
        so("/app/libtop.so", needed=["libmid.so.1"], runpath=["/app/deps"]),
        so("/app/deps/libmid.so.1", needed=["libleaf.so.1"]),
        so("/app/deps/libleaf.so.1"),
    )
    result = resolve(["/app/libtop.so"], facts_of=files, env=ENV)
    assert needed_of(result, "/app/libtop.so")["libmid.so.1"].step == RUNPATH
    assert needed_of(result, "/app/deps/libmid.so.1")["libleaf.so.1"] == Resolution(
        "libleaf.so.1", None, NOT_FOUND, error="libleaf.so.1: cannot open shared object file: No such file or directory"
    )
    assert result.problems == (
        Problem(
            MISSING_LIBRARY,
            "libleaf.so.1: cannot open shared object file: No such file or directory",
            "/app/deps/libmid.so.1",
            "libleaf.so.1",
        ),
    )


def test_an_object_with_runpath_ignores_every_rpath():
    files = world(
        so("/app/libtop.so", needed=["libmid.so.1"], rpath=["/app/deps"]),
        so("/app/deps/libmid.so.1", needed=["libleaf.so.1"], runpath=["/elsewhere"]),
        so("/app/deps/libleaf.so.1"),
        so("/sys/lib64/libleaf.so.1"),
    )
    result = resolve(["/app/libtop.so"], facts_of=files, env=ENV)
    assert needed_of(result, "/app/deps/libmid.so.1")["libleaf.so.1"].path == "/sys/lib64/libleaf.so.1"
    assert needed_of(result, "/app/deps/libmid.so.1")["libleaf.so.1"].step == DEFAULT_DIR


def test_rpath_of_an_object_with_runpath_is_not_passed_down():
    # mid has both tags: its DT_RPATH is ignored, also for the objects it loads; top's RPATH still counts.
    files = world(
        so("/app/libtop.so", needed=["libmid.so.1"], rpath=["/app/deps"]),
        so("/app/deps/libmid.so.1", needed=["libx.so.1"], rpath=["/mid-rpath"], runpath=["/mid-runpath"]),
        so("/mid-runpath/libx.so.1", needed=["libleaf.so.1"]),
        so("/mid-rpath/libleaf.so.1"),
        so("/app/deps/libleaf.so.1"),
    )
    result = resolve(["/app/libtop.so"], facts_of=files, env=ENV)
    assert needed_of(result, "/mid-runpath/libx.so.1")["libleaf.so.1"] == Resolution(
        "libleaf.so.1", "/app/deps/libleaf.so.1", RPATH, rpath_of="/app/libtop.so"
    )


def test_search_order_rpath_then_ld_library_path_then_runpath_then_cache_then_default():
    everywhere = ["/rpath", "/llp", "/runpath", "/cached", "/sys/lib64"]
    files = world(
        so("/app/rp.so", needed=["libz.so.1"], rpath=["/rpath"]),
        so("/app/rn.so", needed=["libz.so.1"], runpath=["/runpath"]),
        *[so(f"{d}/libz.so.1") for d in everywhere],
    )
    cache = LdCache((CacheEntry("libz.so.1", "/cached/libz.so.1", 0x0303),), "new")
    env = LoaderEnv(machine="x86_64", ld_library_path=("/llp",), cache=cache, default_dirs=("/sys/lib64",))

    def chosen(root, env, facts=files):
        return needed_of(resolve([root], facts_of=facts, env=env), root)["libz.so.1"]

    assert chosen("/app/rp.so", env).path == "/rpath/libz.so.1"
    assert chosen("/app/rn.so", env) == Resolution("libz.so.1", "/llp/libz.so.1", LD_LIBRARY_PATH)
    no_llp = LoaderEnv(machine="x86_64", cache=cache, default_dirs=("/sys/lib64",))
    assert chosen("/app/rn.so", no_llp).path == "/runpath/libz.so.1"
    assert chosen("/app/rp.so", no_llp, world(so("/app/rp.so", needed=["libz.so.1"]), so("/cached/libz.so.1"),
                                               so("/sys/lib64/libz.so.1"))).step == LD_SO_CACHE
    assert chosen("/app/rp.so", no_llp, world(so("/app/rp.so", needed=["libz.so.1"]),
                                               so("/sys/lib64/libz.so.1"))).step == DEFAULT_DIR


def test_nodeflib_skips_cache_entries_in_default_dirs_and_the_default_dirs():
    cache = LdCache(
        (CacheEntry("libsys.so.1", "/sys/lib64/libsys.so.1", 0x0303), CacheEntry("libopt.so.1", "/opt/l/libopt.so.1", 0x0303))
    )
    env = LoaderEnv(machine="x86_64", cache=cache, default_dirs=("/sys/lib64",))
    files = world(
        so("/app/a.so", needed=["libsys.so.1", "libopt.so.1"], flags_1=0x800),
        so("/sys/lib64/libsys.so.1"),
        so("/opt/l/libopt.so.1"),
    )
    res = needed_of(resolve(["/app/a.so"], facts_of=files, env=env), "/app/a.so")
    assert res["libsys.so.1"].step == NOT_FOUND
    assert res["libopt.so.1"] == Resolution("libopt.so.1", "/opt/l/libopt.so.1", LD_SO_CACHE)


def test_other_machine_is_skipped_and_named():
    files = world(
        so("/app/a.so", needed=["libz.so.1"], rpath=["/arm", "/x86"]),
        so("/arm/libz.so.1", machine="aarch64"),
        so("/x86/libz.so.1"),
    )
    res = needed_of(resolve(["/app/a.so"], facts_of=files, env=ENV), "/app/a.so")["libz.so.1"]
    assert res == Resolution("libz.so.1", "/x86/libz.so.1", RPATH, "/app/a.so", skipped=("/arm/libz.so.1",))


def test_preloaded_wins_before_any_search_and_loaded_sonames_are_reused():
    files = world(
        so("/app/a.so", needed=["libnvJitLink.so.12", "libb.so"], rpath=["/app/lib"]),
        so("/app/lib/libnvJitLink.so.12"),
        so("/app/lib/libb.so", needed=["libnvJitLink.so.12"], runpath=["/other"]),
        so("/site/nvidia/nvjitlink/lib/libnvJitLink.so.12"),
        so("/other/libnvJitLink.so.12"),
    )
    env = LoaderEnv(machine="x86_64", preloaded={"libnvJitLink.so.12": "/site/nvidia/nvjitlink/lib/libnvJitLink.so.12"})
    result = resolve(["/app/a.so"], facts_of=files, env=env)
    assert needed_of(result, "/app/a.so")["libnvJitLink.so.12"] == Resolution(
        "libnvJitLink.so.12", "/site/nvidia/nvjitlink/lib/libnvJitLink.so.12", PRELOADED
    )
    assert needed_of(result, "/app/lib/libb.so")["libnvJitLink.so.12"].path == (
        "/site/nvidia/nvjitlink/lib/libnvJitLink.so.12"
    )
    # Without the preload, b's RUNPATH does not matter: a already loaded that soname.
    result = resolve(["/app/a.so"], facts_of=files, env=ENV)
    assert needed_of(result, "/app/lib/libb.so")["libnvJitLink.so.12"] == Resolution(
        "libnvJitLink.so.12", "/app/lib/libnvJitLink.so.12", ALREADY_LOADED
    )


def test_soname_match_reuses_an_object_loaded_under_another_name():
    files = world(
        so("/app/a.so", needed=["/opt/x/libx.so.1.2", "libx.so.1"]),
        so("/opt/x/libx.so.1.2", soname="libx.so.1"),
    )
    res = needed_of(resolve(["/app/a.so"], facts_of=files, env=ENV), "/app/a.so")
    assert res["/opt/x/libx.so.1.2"] == Resolution("/opt/x/libx.so.1.2", "/opt/x/libx.so.1.2", PATH)
    assert res["libx.so.1"] == Resolution("libx.so.1", "/opt/x/libx.so.1.2", ALREADY_LOADED)


def test_dynamic_string_tokens():
    env = LoaderEnv(
        machine="x86_64", lib="lib/x86_64-linux-gnu", platform="x86_64", ld_library_path=("$ORIGIN/llp",)
    )
    files = world(
        so(
            "/pkg/bin/libuser.so",
            needed=["liba.so", "libb.so", "libc1.so", "libd.so"],
            runpath=["$ORIGIN/../lib", "${ORIGIN}/x", "/opt/$LIB", "/p/${PLATFORM}/", "/q/$ORIGINAL"],
        ),
        so("/pkg/bin/../lib/liba.so"),
        so("/pkg/bin/x/libb.so"),
        so("/opt/lib/x86_64-linux-gnu/libc1.so"),
        so("/p/x86_64/libd.so"),
        so("/pkg/bin/llp/liba.so"),  # $ORIGIN in LD_LIBRARY_PATH needs the main program: dropped
    )
    res = needed_of(resolve(["/pkg/bin/libuser.so"], facts_of=files, env=env), "/pkg/bin/libuser.so")
    assert {name: r.path for name, r in res.items()} == {
        "liba.so": "/pkg/bin/../lib/liba.so",
        "libb.so": "/pkg/bin/x/libb.so",
        "libc1.so": "/opt/lib/x86_64-linux-gnu/libc1.so",
        "libd.so": "/p/x86_64/libd.so",
    }


def test_empty_search_entry_is_the_current_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    files = world(so("/app/a.so", needed=["libz.so"], rpath=[""]), so("./libz.so"))
    assert needed_of(resolve(["/app/a.so"], facts_of=files, env=ENV), "/app/a.so")["libz.so"].path == "./libz.so"


def test_driver_libraries_are_provided_and_not_checked():
    files = world(
        so(
            "/app/a.so",
            needed=["libcuda.so.1", "libc.so.6"],
            undefined=[Symbol("cuInit"), Symbol("cuMemAlloc_v2", "libcuda.so.1", "libcuda.so.1")],
            version_needs=[VersionNeed("libcuda.so.1", ("libcuda.so.1",))],
        ),
        so("/sys/lib64/libc.so.6", defined=[Symbol("malloc", "GLIBC_2.2.5")], version_definitions=("GLIBC_2.2.5",)),
    )
    env = LoaderEnv(machine="x86_64", default_dirs=("/sys/lib64",), driver_libraries=frozenset({"libcuda.so.1"}))
    result = resolve(["/app/a.so"], facts_of=files, env=env)
    assert needed_of(result, "/app/a.so")["libcuda.so.1"] == Resolution("libcuda.so.1", None, DRIVER)
    assert result.problems == ()
    # Without knowing libcuda.so.1 is the driver's, it is simply missing.
    result = resolve(["/app/a.so"], facts_of=files, env=ENV)
    assert [p.kind for p in result.problems] == [MISSING_LIBRARY]


GLIBC = so(
    "/sys/lib64/libc.so.6",
    defined=[Symbol("malloc", "GLIBC_2.2.5"), Symbol("secure_getenv", "GLIBC_2.17")],
    version_definitions=("GLIBC_2.2.5", "GLIBC_2.17"),
)


def test_missing_version_and_undefined_symbol_wording():
    files = world(
        so(
            "/app/a.so",
            needed=["libc.so.6"],
            undefined=[Symbol("memfd_secret", "GLIBC_2.99", "libc.so.6"), Symbol("malloc", "GLIBC_2.2.5", "libc.so.6")],
            version_needs=[VersionNeed("libc.so.6", ("GLIBC_2.2.5", "GLIBC_2.99"))],
        ),
        GLIBC,
    )
    result = resolve(["/app/a.so"], facts_of=files, env=ENV)
    assert result.problems == (
        Problem(
            MISSING_VERSION,
            "version `GLIBC_2.99' not found (required by /app/a.so)",
            "/app/a.so",
            "libc.so.6",
            "/sys/lib64/libc.so.6",
            DEFAULT_DIR,
            version="GLIBC_2.99",
        ),
        Problem(
            UNDEFINED_SYMBOL,
            "undefined symbol: memfd_secret, version GLIBC_2.99",
            "/app/a.so",
            "libc.so.6",
            "/sys/lib64/libc.so.6",
            DEFAULT_DIR,
            "memfd_secret",
            "GLIBC_2.99",
        ),
    )


def test_weak_python_and_scope_rules():
    files = world(
        so(
            "/site/ext.so",
            needed=["libdep.so", "libc.so.6"],
            undefined=[
                Symbol("PyLong_FromLong"),
                Symbol("_Py_NoneStruct", type="OBJECT"),
                Symbol("__gmon_start__", binding="WEAK", type="NOTYPE"),
                Symbol("deep_function"),  # defined by a dependency of a dependency: global scope
                Symbol("nowhere"),
            ],
        ),
        so("/sys/lib64/libdep.so", needed=["libdeeper.so"]),
        so("/sys/lib64/libdeeper.so", defined=[Symbol("deep_function")]),
        GLIBC,
    )
    result = resolve(["/site/ext.so"], facts_of=files, env=ENV)
    assert result.problems == (Problem(UNDEFINED_SYMBOL, "undefined symbol: nowhere", "/site/ext.so", None, symbol="nowhere"),)


def test_unresolved_symbols_are_not_blamed_when_a_library_is_missing():
    files = world(
        so(
            "/app/a.so",
            needed=["libgone.so.1", "libc.so.6"],
            undefined=[Symbol("gone"), Symbol("gone_v", "GONE_1", "libgone.so.1")],
            version_needs=[VersionNeed("libgone.so.1", ("GONE_1",))],
        ),
        GLIBC,
    )
    result = resolve(["/app/a.so"], facts_of=files, env=ENV)
    assert [p.kind for p in result.problems] == [MISSING_LIBRARY]


def test_version_matching_follows_glibc_check_match():
    consumer = so(
        "/app/a.so",
        needed=["libv.so.1"],
        undefined=[
            Symbol("base_def", "V_2", "libv.so.1"),  # an unversioned definition satisfies a versioned reference
            Symbol("old_only", "V_2", "libv.so.1"),  # defined only as old_only@V_1: no
            Symbol("hidden_one"),  # only hidden_one@V_1 (non-default): an unversioned reference does not bind
        ],
        version_needs=[VersionNeed("libv.so.1", ("V_2",))],
    )
    provider = so(
        "/sys/lib64/libv.so.1",
        defined=[
            Symbol("base_def"),
            Symbol("old_only", "V_1"),
            Symbol("hidden_one", "V_1", hidden=True),
        ],
        version_definitions=("V_1", "V_2"),
    )
    result = resolve(["/app/a.so"], facts_of=world(consumer, provider), env=ENV)
    assert [(p.kind, p.symbol) for p in result.problems] == [(UNDEFINED_SYMBOL, "old_only"), (UNDEFINED_SYMBOL, "hidden_one")]


def test_min_provider_version():
    assert min_provider_version(Symbol("__nvJitLinkComplete_12_4", "libnvJitLink.so.12", "libnvJitLink.so.12")) == CudaVersion(12, 4)
    assert min_provider_version(Symbol("__nvJitLinkCreate_13_0", "libnvJitLink.so.13", "libnvJitLink.so.13")) == CudaVersion(13, 0)
    # Major in the name must be the soname's; the version node must be the soname; plain names carry nothing.
    assert min_provider_version(Symbol("__nvJitLinkComplete_12_4", "libnvJitLink.so.13", "libnvJitLink.so.13")) is None
    assert min_provider_version(Symbol("foo_1_2", "FOO_1.2", "libfoo.so.1")) is None
    assert min_provider_version(Symbol("nvJitLinkDestroy", "libnvJitLink.so.12", "libnvJitLink.so.12")) is None
    # A symbol name is a file's text: int() of 5,000 digits (or of "²") was a traceback in inspect and doctor.
    huge = "9" * 5000
    assert min_provider_version(Symbol(f"__x_{huge}_4", f"libx.so.{huge}", f"libx.so.{huge}")) is None
    assert min_provider_version(Symbol("__x_\u00b2_4", "libx.so.\u00b2", "libx.so.\u00b2")) is None


def test_bad_roots_are_usage_errors():
    with pytest.raises(UsageError, match="/nope.so: no such file"):
        resolve(["/nope.so"], facts_of=world(), env=ENV)
    with pytest.raises(UsageError, match="is a aarch64 object"):
        resolve(["/arm.so"], facts_of=world(so("/arm.so", machine="aarch64")), env=ENV)
    with pytest.raises(UsageError, match="preloaded libp.so: no file at /gone/libp.so"):
        env = LoaderEnv(machine="x86_64", preloaded={"libp.so": "/gone/libp.so"})
        resolve(["/a.so"], facts_of=world(so("/a.so", needed=["libp.so"])), env=env)


def test_several_roots_share_the_namespace():
    files = world(
        so("/a/ext1.so", needed=["libshared.so"], rpath=["/a/lib"]),
        so("/b/ext2.so", needed=["libshared.so"], rpath=["/b/lib"]),
        so("/a/lib/libshared.so"),
        so("/b/lib/libshared.so"),
    )
    result = resolve(["/a/ext1.so", "/b/ext2.so"], facts_of=files, env=ENV)
    assert needed_of(result, "/b/ext2.so")["libshared.so"] == Resolution("libshared.so", "/a/lib/libshared.so", ALREADY_LOADED)


def test_the_programs_tree_is_the_global_scope_searched_before_each_roots_own():
    """An old extension calls sin without linking libm: it binds to the libm the interpreter's
    libpython loaded. A soname the program loaded is already loaded for every root; what the
    program's tree misses is not the roots' problem; a symbol nobody defines is still blamed."""
    program = so("/py/bin/python3.11", soname=None, needed=["libpython3.11.so.1.0", "libgone.so.1"], runpath=["/py/lib"],
                 defined=[Symbol("program_function")])
    files = world(
        program,
        so("/py/lib/libpython3.11.so.1.0", needed=["libm.so.6", "libc.so.6"], defined=[Symbol("PyFloat_FromDouble")]),
        so("/sys/lib64/libm.so.6", defined=[Symbol("sin", "GLIBC_2.2.5"), Symbol("pow", "GLIBC_2.29")],
           version_definitions=("GLIBC_2.2.5", "GLIBC_2.29")),
        GLIBC,
        so("/site/old.so", needed=["libc.so.6"], undefined=[Symbol("sin"), Symbol("pow"), Symbol("nowhere"), Symbol("program_function")]),
        so("/site/new.so", needed=["libm.so.6"], undefined=[Symbol("pow", "GLIBC_2.29", "libm.so.6")],
           version_needs=[VersionNeed("libm.so.6", ("GLIBC_2.29",))]),
    )
    alone = resolve(["/site/old.so"], facts_of=files, env=ENV)
    assert sorted(p.symbol for p in alone.problems) == ["nowhere", "pow", "program_function", "sin"]
    env = with_program(ENV, "/py/bin/python3.11", program)
    result = resolve(["/site/old.so", "/site/new.so"], facts_of=files, env=env)
    assert result.problems == (Problem(UNDEFINED_SYMBOL, "undefined symbol: nowhere", "/site/old.so", None, symbol="nowhere"),)
    assert needed_of(result, "/site/new.so")["libm.so.6"] == Resolution("libm.so.6", "/sys/lib64/libm.so.6", ALREADY_LOADED)
    # the program's objects are listed only where a root needs one: libc.so.6 and libm.so.6
    assert [(o.path, o.loaded_by) for o in result.objects] == [
        ("/sys/lib64/libm.so.6", "/py/lib/libpython3.11.so.1.0"),
        ("/sys/lib64/libc.so.6", "/py/lib/libpython3.11.so.1.0"),
        ("/site/old.so", None),
        ("/site/new.so", None),
    ]


def test_helpers():
    assert split_library_path("") == ()
    assert split_library_path("/a:/b;/c::") == ("/a", "/b", "/c", "", "")
    assert system_layout("x86_64", True) == (
        ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib", "/usr/lib"),
        "lib/x86_64-linux-gnu",
    )
    assert system_layout("aarch64", False) == (("/lib64", "/usr/lib64"), "lib64")


def test_from_system(tmp_path):
    env = LoaderEnv.from_system(
        {"LD_LIBRARY_PATH": "/a:/b", "LD_PRELOAD": "/x/libx.so.1 libnotapath.so:/y/liby.so"},
        driver_libraries=frozenset({"libcuda.so.1", "libnvidia-ml.so.1"}),
        cache_path=str(tmp_path / "none"),
    )
    assert env.machine == platform.machine()
    assert env.ld_library_path == ("/a", "/b")
    assert env.cache.entries == () and "cannot read" in env.cache.note
    assert env.preloaded["libx.so.1"] == "/x/libx.so.1" and env.preloaded["liby.so"] == "/y/liby.so"
    assert "libnotapath.so" not in env.preloaded
    assert env.cwd == os.getcwd()
    assert {"libcuda.so.1", "libnvidia-ml.so.1"} <= env.driver_libraries
    interpreter = INTERPRETERS.get(env.machine)
    if interpreter is None or not os.path.exists(interpreter):
        pytest.skip("no known dynamic linker on this machine")
    assert env.preloaded[os.path.basename(interpreter)] == interpreter
    # ld.so (glibc >= 2.33) lists its own default directories.
    help_text = subprocess.run([interpreter, "--help"], capture_output=True, text=True).stdout
    system_dirs = tuple(re.findall(r"^  (\S+) \(system search path\)$", help_text, re.M))
    if not system_dirs:
        pytest.skip("this ld.so does not print its search path")
    assert env.default_dirs == system_dirs


# -- real files against ldd -r ---------------------------------------------------------------------


def ldd_r(path: str, ld_library_path: Optional[str] = None, cwd: Optional[Path] = None, preload: Optional[str] = None):
    """glibc's own answer: ({needed name: path or None}, {(kind, message, consumer)}, fatal error or None)."""
    if shutil.which("ldd") is None:
        pytest.skip("ldd is not installed")
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
    if ld_library_path is not None:
        env["LD_LIBRARY_PATH"] = ld_library_path
    if preload is not None:
        env["LD_PRELOAD"] = preload
    proc = subprocess.run(["ldd", "-r", path], capture_output=True, text=True, env=env, cwd=cwd)
    found, problems, fatal = {}, set(), None
    for line in (proc.stdout + proc.stderr).splitlines():
        if m := re.fullmatch(r"\t(\S+) => not found", line):
            found[m.group(1)] = None
        elif m := re.fullmatch(r"\t(\S+) => (\S+) \(0x[0-9a-f]+\)", line):
            found[m.group(1)] = m.group(2)
        elif m := re.fullmatch(r"(undefined symbol: .*)\t\((\S+)\)", line):
            problems.add((UNDEFINED_SYMBOL, m.group(1), m.group(2)))
        elif m := re.fullmatch(r"\S+: \S+: (version `[^']+' not found \(required by (\S+)\))", line):
            problems.add((MISSING_VERSION, m.group(1), m.group(2)))
        elif m := re.search(r"error while loading shared libraries: (.*)", line):
            fatal = m.group(1)
    return found, problems, fatal


@lru_cache(maxsize=None)
def _cached_facts(path: str, mtime: float):
    return read_binary_facts(path) if os.path.isfile(path) else None  # no file: what open() failing is for ld.so


def disk(path: str):
    """The facts of a real file (None where there is none), memoized per file version: system
    libraries are read by every test."""
    try:
        mtime = os.stat(path).st_mtime
    except OSError:
        return None
    return _cached_facts(path, mtime)


def ours(root: str, ld_library_path: Optional[str] = None, preloaded: Optional[dict] = None):
    """Our answer in ldd's terms, plus the full result."""
    environ = {"LD_LIBRARY_PATH": ld_library_path} if ld_library_path else {}
    if preloaded:
        environ["LD_PRELOAD"] = " ".join(preloaded.values())
    env = LoaderEnv.from_system(environ, driver_libraries=DRIVER_LIBRARIES)
    result = resolve([root], facts_of=disk, env=env)
    found = {}
    for obj in result.objects:
        for res in obj.needed:
            if res.step not in (PRELOADED, ALREADY_LOADED, DRIVER):
                found[res.needed] = res.path
    problems = {
        (p.kind, p.message, p.consumer) for p in result.problems if p.kind in (UNDEFINED_SYMBOL, MISSING_VERSION)
    }
    return found, problems, result


def assert_same_as_ldd(
    root: str, ld_library_path: Optional[str] = None, cwd: Optional[Path] = None, preloaded: Optional[dict] = None
):
    """Our chosen paths and problems equal ldd's; `preloaded` goes to ldd as LD_PRELOAD."""
    found, problems, result = ours(root, ld_library_path, preloaded)
    preload = " ".join(preloaded.values()) if preloaded else None
    expected_found, expected_problems, fatal = ldd_r(root, ld_library_path, cwd, preload)
    assert fatal is None
    assert found == expected_found
    if None in expected_found.values():
        # ld.so stops at a missing library; ldd goes on with an empty stand-in and so reports every
        # symbol that library would have provided. We blame the library only.
        expected_problems = {p for p in expected_problems if p[0] != UNDEFINED_SYMBOL}
    assert problems == expected_problems
    return result


LEAF = "int leaf(void) { return 1; }\n"
MID = "int leaf(void);\nint mid(void) { return leaf(); }\n"
TOP = "int mid(void);\nint top(void) { return mid(); }\n"


def _chain(elf_builder, **paths):
    leaf = elf_builder.build("libleaf.so.1", LEAF, soname="libleaf.so.1", directory="deps")
    mid = elf_builder.build("libmid.so.1", MID, soname="libmid.so.1", link=[leaf], directory="deps")
    return elf_builder.build("libtop.so", TOP, link=[mid], **paths)


def test_gcc_rpath_inherited_through_chain(elf_builder):
    top = _chain(elf_builder, rpath="$ORIGIN/deps")
    result = assert_same_as_ldd(str(top))
    deps = f"{elf_builder.root}/deps"
    assert needed_of(result, f"{deps}/libmid.so.1")["libleaf.so.1"] == Resolution(
        "libleaf.so.1", f"{deps}/libleaf.so.1", RPATH, rpath_of=str(top)
    )
    assert result.problems == ()


def test_gcc_runpath_not_inherited(elf_builder):
    top = _chain(elf_builder, runpath="$ORIGIN/deps")
    result = assert_same_as_ldd(str(top))
    assert [(p.kind, p.message, p.consumer) for p in result.problems] == [
        (
            MISSING_LIBRARY,
            "libleaf.so.1: cannot open shared object file: No such file or directory",
            f"{elf_builder.root}/deps/libmid.so.1",
        )
    ]


def test_gcc_origin_chain_relative_root(elf_builder, monkeypatch):
    dep = elf_builder.build("libdep.so.1", LEAF, soname="libdep.so.1", directory="pkg/lib")
    elf_builder.build("libuser.so", "int leaf(void);\nint user(void) { return leaf(); }\n",
                      link=[dep], runpath="${ORIGIN}/../lib", directory="pkg/bin")
    monkeypatch.chdir(elf_builder.root)
    # Given relatively, ld.so builds $ORIGIN as cwd + "/" + "./pkg/bin", unnormalized.
    result = assert_same_as_ldd("./pkg/bin/libuser.so", cwd=elf_builder.root)
    assert needed_of(result, "./pkg/bin/libuser.so")["libdep.so.1"].path == f"{elf_builder.root}/./pkg/bin/../lib/libdep.so.1"


@pytest.mark.parametrize("tag, winner", [("rpath", "rpathdir"), ("runpath", "llpdir")])
def test_gcc_ld_library_path_between_rpath_and_runpath(elf_builder, tag, winner):
    for d in ("rpathdir", "llpdir"):
        dep = elf_builder.build("libdep.so.1", LEAF, soname="libdep.so.1", directory=d)
    user = elf_builder.build("libuser.so", "int leaf(void);\nint user(void) { return leaf(); }\n",
                             link=[dep], **{tag: f"{elf_builder.root}/rpathdir"})
    result = assert_same_as_ldd(str(user), ld_library_path=f"{elf_builder.root}/llpdir")
    assert needed_of(result, str(user))["libdep.so.1"].path == f"{elf_builder.root}/{winner}/libdep.so.1"


FOO_V1 = "int foo_old(void) { return 1; }\n"
FOO_V2 = FOO_V1 + "int foo_new(void) { return 2; }\n"
MAP_V1 = "FOO_1.0 { global: foo_old; local: *; };\n"
MAP_V2 = MAP_V1 + "FOO_2.0 { global: foo_new; } FOO_1.0;\n"


def test_gcc_versioned_symbol_missing_in_too_old_provider(elf_builder):
    elf_builder.build("libfoo.so.1", FOO_V1, soname="libfoo.so.1", version_script=MAP_V1, directory="old")
    v2 = elf_builder.build("libfoo.so.1", FOO_V2, soname="libfoo.so.1", version_script=MAP_V2, directory="new")
    consumer = elf_builder.build(
        "libconsumer.so",
        "int foo_old(void); int foo_new(void);\nint consume(void) { return foo_old() + foo_new(); }\n",
        link=[v2],
        runpath="$ORIGIN/old",
    )
    result = assert_same_as_ldd(str(consumer))
    old = f"{elf_builder.root}/old/libfoo.so.1"
    assert result.problems == (
        Problem(MISSING_VERSION, f"version `FOO_2.0' not found (required by {consumer})", str(consumer), "libfoo.so.1", old,
                RUNPATH, version="FOO_2.0"),
        Problem(UNDEFINED_SYMBOL, "undefined symbol: foo_new, version FOO_2.0", str(consumer), "libfoo.so.1",
                old, RUNPATH, "foo_new", "FOO_2.0"),
    )
    # LD_LIBRARY_PATH is searched before RUNPATH: the new provider wins and nothing fails.
    fixed = assert_same_as_ldd(str(consumer), ld_library_path=f"{elf_builder.root}/new")
    assert fixed.problems == ()


@pytest.mark.parametrize(
    "content, message",
    [(b"GROUP ( libfoo.so.2 )\n", "file too short"), (b"/* linker script */\n" * 8, "invalid ELF header")],
)
def test_gcc_non_elf_file_in_the_path_stops_the_search(elf_builder, content, message):
    real = elf_builder.build("libdep.so.1", LEAF, soname="libdep.so.1", directory="good")
    user = elf_builder.build("libuser.so", "int leaf(void);\nint user(void) { return leaf(); }\n", link=[real])
    bad = elf_builder.root / "bad"
    bad.mkdir()
    (bad / "libdep.so.1").write_bytes(content)
    llp = f"{bad}:{elf_builder.root}/good"
    _, _, fatal = ldd_r(str(user), llp)
    assert fatal == f"{bad}/libdep.so.1: {message}"
    _, _, result = ours(str(user), llp)
    assert [(p.kind, p.message, p.provider_step) for p in result.problems] == [
        (INVALID_LIBRARY, f"{bad}/libdep.so.1: {message}", LD_LIBRARY_PATH)
    ]


def test_gcc_other_elf_class_is_skipped(elf_builder):
    real = elf_builder.build("libdep.so.1", LEAF, soname="libdep.so.1", directory="good")
    user = elf_builder.build("libuser.so", "int leaf(void);\nint user(void) { return leaf(); }\n", link=[real])
    other = elf_builder.root / "elf32"
    other.mkdir()
    (other / "libdep.so.1").write_bytes(b"\x7fELF\x01\x01\x01" + bytes(100))  # a 32-bit ELF header
    llp = f"{other}:{elf_builder.root}/good"
    result = assert_same_as_ldd(str(user), llp)
    assert needed_of(result, str(user))["libdep.so.1"] == Resolution(
        "libdep.so.1", f"{elf_builder.root}/good/libdep.so.1", LD_LIBRARY_PATH, skipped=(f"{other}/libdep.so.1",)
    )


OLD_MATH = """#include <Python.h>
double sin(double); double pow(double, double); int %(missing)s(void);
static PyObject *run(PyObject *self, PyObject *arg) {
    double x = PyFloat_AsDouble(arg);
    return PyFloat_FromDouble(sin(x) + pow(x, 2.0)%(call)s);
}
static PyMethodDef methods[] = {{"run", run, METH_O, NULL}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "%(name)s", NULL, -1, methods};
PyMODINIT_FUNC PyInit_%(name)s(void) { return PyModule_Create(&module); }
"""


def old_math_extension(elf_builder, name: str, missing: Optional[str] = None) -> Path:
    """A Python extension module `name` calling libm's sin and pow without linking libm (as old
    extensions built with distutils do), and `missing` (a function no library defines) if given."""
    source = OLD_MATH % {"name": name, "missing": missing or "unused", "call": f" + {missing}()" if missing else ""}
    return elf_builder.build(f"{name}{sysconfig.get_config_var('EXT_SUFFIX')}", source, directory="site",
                             extra=["-fno-builtin", f"-I{sysconfig.get_paths()['include']}"])


def test_gcc_an_old_extension_takes_libm_through_the_interpreter(elf_builder):
    """`ldd -r` alone finds sin and pow undefined; in the interpreter's process (ld.so preloading the
    extension into it, and a real import) they bind to the libm its tree loaded. Given the
    interpreter as the program, the model agrees, and still blames a symbol nobody defines."""
    from test_conda_env import ldd_r_in  # it imports this module

    program = os.path.realpath(sys.executable)
    ext = old_math_extension(elf_builder, "oldmath")
    assert "libm.so.6" not in disk(str(ext)).needed
    _, alone, _ = ldd_r(str(ext))
    assert {message for _, message, _ in alone} >= {"undefined symbol: sin", "undefined symbol: pow"}
    found, undefined = ldd_r_in(program, str(ext))
    assert "libm.so.6" in found and undefined == []
    imported = subprocess.run([sys.executable, "-c", "import oldmath; print(oldmath.run(2.0))"], cwd=ext.parent,
                              capture_output=True, text=True, check=True)
    assert float(imported.stdout) == pytest.approx(math.sin(2.0) + 4.0)
    env = with_program(LoaderEnv.from_system({}, driver_libraries=DRIVER_LIBRARIES), program, disk(program))
    assert resolve([str(ext)], facts_of=disk, env=env).problems == ()
    assert [p.symbol for p in resolve([str(ext)], facts_of=disk, env=replace(env, program=None)).problems] == ["sin", "pow"]
    broken = old_math_extension(elf_builder, "broken", missing="in_no_library")
    _, undefined = ldd_r_in(program, str(broken))
    assert undefined == ["undefined symbol: in_no_library"]
    assert [p.message for p in resolve([str(broken)], facts_of=disk, env=env).problems] == undefined


# -- real NVIDIA wheels --------------------------------------------------------------------------------


def _site_packages(tmp_path: Path, unpacked, *requirements: str) -> Path:
    """Lay the wheels' nvidia/*/lib files out under one site-packages, as pip does (files symlinked from the cache)."""
    site = tmp_path / "site-packages"
    for requirement in requirements:
        root = unpacked(requirement)
        for lib in (root / "nvidia").glob("*/lib/*.so*"):
            target = site / lib.relative_to(root)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(lib)
    return site


NVJITLINK_12_4 = {
    f"__nvJitLink{fn}_12_4"
    for fn in (
        "AddData",
        "Complete",
        "Create",
        "Destroy",
        "GetErrorLog",
        "GetErrorLogSize",
        "GetLinkedCubin",
        "GetLinkedCubinSize",
    )
}


def test_wheels_cusparse_with_too_old_nvjitlink(tmp_path, unpacked):
    site = _site_packages(
        tmp_path, unpacked, "nvidia-cusparse-cu12==12.3.1.170", "nvidia-nvjitlink-cu12==12.1.105"
    )
    cusparse = str(site / "nvidia/cusparse/lib/libcusparse.so.12")
    result = assert_same_as_ldd(cusparse)
    provider = f"{site}/nvidia/cusparse/lib/../../nvjitlink/lib/libnvJitLink.so.12"
    assert needed_of(result, cusparse)["libnvJitLink.so.12"] == Resolution("libnvJitLink.so.12", provider, RUNPATH)
    assert {p.symbol for p in result.problems} == NVJITLINK_12_4
    assert {(p.kind, p.consumer, p.provider, p.provider_step, p.version, p.min_provider_version) for p in result.problems} == {
        (UNDEFINED_SYMBOL, cusparse, provider, RUNPATH, "libnvJitLink.so.12", CudaVersion(12, 4))
    }
    assert (
        "undefined symbol: __nvJitLinkComplete_12_4, version libnvJitLink.so.12" in {p.message for p in result.problems}
    )


def test_wheels_cusparse_with_new_enough_nvjitlink(tmp_path, unpacked):
    site = _site_packages(
        tmp_path, unpacked, "nvidia-cusparse-cu12==12.3.1.170", "nvidia-nvjitlink-cu12==12.8.93"
    )
    result = assert_same_as_ldd(str(site / "nvidia/cusparse/lib/libcusparse.so.12"))
    assert result.problems == ()
    assert [o.path for o in result.objects][:2] == [
        f"{site}/nvidia/cusparse/lib/libcusparse.so.12",
        f"{site}/nvidia/cusparse/lib/../../nvjitlink/lib/libnvJitLink.so.12",
    ]


def test_wheels_stale_nvjitlink_on_ld_library_path_beats_runpath(tmp_path, unpacked):
    site = _site_packages(
        tmp_path, unpacked, "nvidia-cusparse-cu12==12.3.1.170", "nvidia-nvjitlink-cu12==12.8.93"
    )
    stale = unpacked("nvidia-nvjitlink-cu12==12.1.105") / "nvidia/nvjitlink/lib"
    result = assert_same_as_ldd(str(site / "nvidia/cusparse/lib/libcusparse.so.12"), ld_library_path=str(stale))
    assert {(p.symbol, p.provider, p.provider_step, p.min_provider_version) for p in result.problems} == {
        (symbol, f"{stale}/libnvJitLink.so.12", LD_LIBRARY_PATH, CudaVersion(12, 4)) for symbol in NVJITLINK_12_4
    }


def test_wheels_preloaded_old_nvjitlink_wins(tmp_path, unpacked):
    site = _site_packages(
        tmp_path, unpacked, "nvidia-cusparse-cu12==12.3.1.170", "nvidia-nvjitlink-cu12==12.8.93"
    )
    stale = str(unpacked("nvidia-nvjitlink-cu12==12.1.105") / "nvidia/nvjitlink/lib/libnvJitLink.so.12")
    result = assert_same_as_ldd(
        str(site / "nvidia/cusparse/lib/libcusparse.so.12"), preloaded={"libnvJitLink.so.12": stale}
    )
    assert {(p.symbol, p.provider, p.provider_step) for p in result.problems} == {
        (symbol, stale, PRELOADED) for symbol in NVJITLINK_12_4
    }
