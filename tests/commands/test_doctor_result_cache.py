"""The doctor's cache of whole results (cudaresolve/commands/result_cache.py): a hit prints exactly what a fresh
run prints, every input of the key makes it miss, and a damaged or unwritable cache never changes
the answer.

The environment is made by hand (gcc-built libraries under a tmp site-packages): libconsumer.so
links libfoo.so.1 by RUNPATH, and an older libfoo.so.1 in `stale/` shadows it when
LD_LIBRARY_PATH names that directory. Runs go through `cudaresolve.cli.main`; whether a run hit is
told by whether `diagnosing.examine` was called.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import plant
from test_env_distributions import make_dist_info

from cudaresolve.cli import main
from cudaresolve.commands import diagnosing, result_cache

FOO_V1 = "int foo_old(void) { return 1; }\n"
FOO_V2 = FOO_V1 + "int foo_new(void) { return 2; }\n"
MAP_V1 = "FOO_1.0 { global: foo_old; local: *; };\n"
MAP_V2 = MAP_V1 + "FOO_2.0 { global: foo_new; } FOO_1.0;\n"
HOST = ["--driver", "550.144.03", "--gpu", "8.6"]
HEAVY = (
    "cudaresolve.checks", "cudaresolve.binary.loader", "cudaresolve.binary.elf", "cudaresolve.binary.facts",
    "cudaresolve.binary.fatbin", "cudaresolve.commands.diagnosing", "cudaresolve.env.scan", "cudaresolve.env.cache",
    "cudaresolve.env.distributions", "cudaresolve.knowledge.components", "cudaresolve.index", "cudaresolve.resolve",
    "requests", "resolvelib", "packaging.requirements", "packaging.specifiers", "multiprocessing",
)


@pytest.fixture
def env(elf_builder, tmp_path, monkeypatch):
    monkeypatch.setenv("CUDARESOLVE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    monkeypatch.delenv("CONDA_PREFIX", raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)
    new = elf_builder.build("libfoo.so.1", FOO_V2, soname="libfoo.so.1", version_script=MAP_V2,
                            directory="site/nvidia/foo/lib")
    elf_builder.build("libfoo.so.1", FOO_V1, soname="libfoo.so.1", version_script=MAP_V1, directory="stale")
    elf_builder.build(
        "libconsumer.so",
        "int foo_old(void); int foo_new(void);\nint consume(void) { return foo_old() + foo_new(); }\n",
        link=[new], runpath="$ORIGIN/../../nvidia/foo/lib", directory="site/consumer/lib",
    )
    site = tmp_path / "site"
    make_dist_info(site, "nvidia-foo-cu12", "1.2", files=("nvidia/foo/lib/libfoo.so.1",))
    make_dist_info(site, "consumer-pkg", "1.0", files=("consumer/lib/libconsumer.so",), requires=("nvidia-foo-cu12",))
    return site


@pytest.fixture
def examined(monkeypatch) -> list:
    """Counts fresh diagnoses: a run that adds nothing here was served from the cache."""
    calls: list = []
    real = diagnosing.examine

    def counting(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(diagnosing, "examine", counting)
    return calls


def doctor_run(capsys, site: Path, *args: str) -> tuple[int, str]:
    code = main(["doctor", "--site-packages", str(site), *HOST, *args])
    out, err = capsys.readouterr()
    assert err == ""
    return code, out


def entries(tmp_path: Path) -> list[Path]:
    directory = tmp_path / "cache" / "results"
    return sorted(directory.iterdir()) if directory.is_dir() else []


def next_tick() -> None:
    """A change made now gets a timestamp of its own, even on a file system with coarse ones."""
    time.sleep(0.05)


@pytest.mark.parametrize("args", [(), ("--json",), ("--strict",)])
def test_a_hit_prints_what_a_fresh_run_prints(env, capsys, examined, tmp_path, monkeypatch, args):
    first = doctor_run(capsys, env, *args)
    assert len(examined) == 1 and len(entries(tmp_path)) == 1
    assert doctor_run(capsys, env, *args) == first
    assert len(examined) == 1  # the second run was a hit
    monkeypatch.setenv("CUDARESOLVE_CACHE_DIR", str(tmp_path / "other-cache"))
    assert doctor_run(capsys, env, *args) == first  # and a run with no cache at all agrees
    assert len(examined) == 2


def test_one_entry_answers_text_json_and_strict(env, capsys, examined, tmp_path, monkeypatch):
    monkeypatch.setenv("LD_LIBRARY_PATH", str(tmp_path / "stale"))  # an error and a warning
    text = doctor_run(capsys, env)
    as_json = doctor_run(capsys, env, "--json")
    strict = doctor_run(capsys, env, "--strict")
    assert len(examined) == 1
    assert text[0] == as_json[0] == strict[0] == 2
    assert json.loads(as_json[1])["counts"] == {"error": 1, "warning": 1, "info": 0}
    assert "ERROR" in text[1] and "WARNING" in text[1]


def test_colour_is_served_from_the_entry_too(env, capsys, examined, monkeypatch):
    fresh = doctor_run(capsys, env)
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    coloured = doctor_run(capsys, env)
    assert len(examined) == 1
    assert "\033[" in coloured[1] and "\033[" not in fresh[1]


def test_with_trusted_directories_a_hit_stats_instead_of_walking(env, capsys, examined, monkeypatch):
    monkeypatch.setattr(result_cache, "TIMESTAMP_SLACK", 0.0)
    first = doctor_run(capsys, env)
    walks = []
    real_walk = result_cache.walk_tree
    monkeypatch.setattr(result_cache, "walk_tree", lambda target: walks.append(target) or real_walk(target))
    assert doctor_run(capsys, env) == first
    assert (len(examined), walks) == (1, [])


def test_a_walk_too_close_to_a_change_keeps_no_directories_until_one_is_old_enough(env, capsys, examined, tmp_path,
                                                                                  monkeypatch):
    first = doctor_run(capsys, env)  # everything was just written: the entry keeps no directories
    [entry] = entries(tmp_path)
    assert pickle.loads(entry.read_bytes()[len(result_cache.HEADER):])[2] == ()
    monkeypatch.setattr(result_cache, "TIMESTAMP_SLACK", 0.0)
    assert doctor_run(capsys, env) == first  # a hit, by walking; the walk's directories are kept now
    directories = pickle.loads(entry.read_bytes()[len(result_cache.HEADER):])[2]
    assert str(env) in dict(directories) and str(env / "consumer" / "lib") in dict(directories)
    assert len(examined) == 1


def touch_library(site: Path, tmp_path: Path) -> None:
    path = site / "consumer" / "lib" / "libconsumer.so"
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000))


def add_library(site: Path, tmp_path: Path) -> None:
    (site / "consumer" / "lib" / "plugins").mkdir()
    (site / "consumer" / "lib" / "plugins" / "libplugin.so").write_bytes(
        (site / "nvidia" / "foo" / "lib" / "libfoo.so.1").read_bytes())


def add_dist_info(site: Path, tmp_path: Path) -> None:
    make_dist_info(site, "extra-pkg", "3.0")


def change_record(site: Path, tmp_path: Path) -> None:
    record = site / "consumer_pkg-1.0.dist-info" / "RECORD"
    record.write_text(record.read_text().replace("consumer/lib/libconsumer.so,sha256=x,1\n", ""))


def change_metadata(site: Path, tmp_path: Path) -> None:
    metadata = site / "consumer_pkg-1.0.dist-info" / "METADATA"
    metadata.write_text(metadata.read_text().replace("Version: 1.0", "Version: 1.1"))


def remove_dist_info(site: Path, tmp_path: Path) -> None:
    dist_info = site / "nvidia_foo_cu12-1.2.dist-info"
    for child in dist_info.iterdir():
        child.unlink()
    dist_info.rmdir()


def change_a_probed_system_library(site: Path, tmp_path: Path) -> None:
    """The stale copy on LD_LIBRARY_PATH (outside the tree) is replaced by the good one."""
    (tmp_path / "stale" / "libfoo.so.1").write_bytes((site / "nvidia" / "foo" / "lib" / "libfoo.so.1").read_bytes())


@pytest.mark.parametrize("trusted", [False, True], ids=["walking", "stats"])
@pytest.mark.parametrize("change", [touch_library, add_library, add_dist_info, change_record, change_metadata,
                                    remove_dist_info, change_a_probed_system_library])
def test_a_changed_file_misses(env, capsys, examined, tmp_path, monkeypatch, change, trusted):
    monkeypatch.setenv("LD_LIBRARY_PATH", str(tmp_path / "stale"))
    if trusted:
        monkeypatch.setattr(result_cache, "TIMESTAMP_SLACK", 0.0)
    before = doctor_run(capsys, env)
    next_tick()
    change(env, tmp_path)
    after = doctor_run(capsys, env)
    assert len(examined) == 2
    monkeypatch.setenv("CUDARESOLVE_CACHE_DIR", str(tmp_path / "other-cache"))
    assert doctor_run(capsys, env) == after  # what a fresh run says
    if change is not touch_library:
        assert after != before


@pytest.mark.parametrize("change", [
    lambda monkeypatch, tmp_path: monkeypatch.setenv("LD_LIBRARY_PATH", str(tmp_path / "stale")),
    lambda monkeypatch, tmp_path: monkeypatch.setenv("LD_PRELOAD", str(tmp_path / "stale" / "libfoo.so.1")),
    lambda monkeypatch, tmp_path: monkeypatch.setenv("CONDA_PREFIX", str(tmp_path)),
    lambda monkeypatch, tmp_path: monkeypatch.chdir(tmp_path),
    lambda monkeypatch, tmp_path: monkeypatch.setattr(result_cache, "tables_digest", lambda: "another table"),
    lambda monkeypatch, tmp_path: monkeypatch.setattr(result_cache, "HEADER", b"cudaresolve-results 1 0.0.0\n"),
    lambda monkeypatch, tmp_path: monkeypatch.setattr(result_cache, "LD_SO_CACHE", str(tmp_path / "ld.so.cache")),
], ids=["LD_LIBRARY_PATH", "LD_PRELOAD", "CONDA_PREFIX", "working directory", "tables digest", "version",
        "ld.so.cache"])
def test_a_changed_loader_input_or_knowledge_misses(env, capsys, examined, tmp_path, monkeypatch, change):
    doctor_run(capsys, env)
    change(monkeypatch, tmp_path)
    doctor_run(capsys, env)
    assert len(examined) == 2


def test_the_tables_digest_follows_their_contents(tmp_path, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    (data / "__init__.py").write_text("")
    (data / "gpus.toml").write_text("a = 1\n")
    monkeypatch.setattr(result_cache.data_package, "__file__", str(data / "__init__.py"))
    first = result_cache.tables_digest()
    (data / "gpus.toml").write_text("a = 2\n")
    assert result_cache.tables_digest() != first


def test_an_edited_module_misses(env, capsys, examined, monkeypatch, tmp_path):
    """A checkout edited in place keeps its version: the modules' identities are in the key."""
    doctor_run(capsys, env)
    package = tmp_path / "package"
    package.mkdir()
    (package / "__init__.py").write_text("")
    monkeypatch.setattr(result_cache.cudaresolve, "__file__", str(package / "__init__.py"))
    doctor_run(capsys, env)
    assert len(examined) == 2


def test_another_host_misses_and_keeps_its_own_entry(env, capsys, examined, tmp_path):
    ampere = doctor_run(capsys, env)
    main(["doctor", "--site-packages", str(env), "--driver", "550.144.03", "--gpu", "8.9"])
    capsys.readouterr()
    assert len(examined) == 2 and len(entries(tmp_path)) == 2
    assert doctor_run(capsys, env) == ampere
    assert len(examined) == 2


@pytest.mark.parametrize("damage", [
    b"garbage",
    b"",
    "truncated",
    "trailing",
    "foreign",
    "other key",
    "fifo",
    "directory",
])
def test_a_damaged_or_foreign_entry_misses_and_is_rewritten(env, capsys, examined, tmp_path, damage):
    first = doctor_run(capsys, env)
    [entry] = entries(tmp_path)
    good = entry.read_bytes()
    if damage == "truncated":
        data = good[: len(good) // 2]
    elif damage == "trailing":
        data = good + b"\0"
    elif damage == "foreign":  # a pickle that would run a command when unpickled
        data = result_cache.HEADER + pickle.dumps(os.system)
    elif damage == "other key":
        stored = pickle.loads(good[len(result_cache.HEADER):])
        data = result_cache.HEADER + pickle.dumps(("another key",) + stored[1:])
    elif damage in ("fifo", "directory"):
        data = b""
    else:
        data = damage
    if damage in ("fifo", "directory"):
        plant(entry, damage)
    else:
        entry.write_bytes(data)
    assert doctor_run(capsys, env) == first
    assert len(examined) == 2
    assert entry.is_file() and entry.read_bytes() != data  # rewritten: the next run hits
    assert doctor_run(capsys, env) == first
    assert len(examined) == 2


def test_an_unwritable_result_cache_still_answers(env, capsys, examined, tmp_path):
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "results").write_text("a file where the results directory should be")
    first = doctor_run(capsys, env)
    assert doctor_run(capsys, env) == first
    assert len(examined) == 2


def test_an_unwritable_cache_directory_still_answers(env, capsys, examined, tmp_path, monkeypatch):
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where the cache directory should be")
    monkeypatch.setenv("CUDARESOLVE_CACHE_DIR", str(blocker / "cache"))
    code, out = doctor_run(capsys, env)
    assert "cannot write the facts cache" in out  # said as before, and such a result is not kept
    assert doctor_run(capsys, env) == (code, out)
    assert len(examined) == 2


def test_a_hit_imports_none_of_the_heavy_modules(env, tmp_path):
    """In a new process, as the command runs: the hit loads no checks, loader, ELF reader or index code."""
    code = (
        "import sys\n"
        "from cudaresolve.cli import main\n"
        f"status = main(['doctor', '--site-packages', {str(env)!r}, *{HOST!r}])\n"
        "print(' '.join(sorted(sys.modules)), file=sys.stderr)\n"
        "sys.exit(status)\n"
    )
    environ = {**os.environ, "CUDARESOLVE_CACHE_DIR": str(tmp_path / "cache")}
    fresh = subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True, text=True)
    hit = subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True, text=True)
    assert (hit.returncode, hit.stdout) == (fresh.returncode, fresh.stdout)
    fresh_modules, hit_modules = set(fresh.stderr.split()), set(hit.stderr.split())
    assert "cudaresolve.checks" in fresh_modules
    assert sorted(m for m in hit_modules if m.startswith(HEAVY)) == []


@pytest.mark.parametrize("trusted", [False, True], ids=["walking", "stats"])
@pytest.mark.parametrize("change", [touch_library, add_library, add_dist_info, change_record, remove_dist_info])
def test_a_change_during_the_diagnosis_is_not_kept(env, capsys, examined, tmp_path, monkeypatch, change, trusted):
    """After the diagnosis the tree is looked at again (by its directories' and files' stats while no
    directory changed, else by walking): a diagnosis made while the tree changed is not stored."""
    if trusted:
        monkeypatch.setattr(result_cache, "TIMESTAMP_SLACK", 0.0)
    real_examine = diagnosing.examine  # the counting one

    def changing(*args, **kwargs):
        diagnosis = real_examine(*args, **kwargs)
        if len(examined) == 1:
            next_tick()
            change(env, tmp_path)
        return diagnosis

    monkeypatch.setattr(diagnosing, "examine", changing)
    doctor_run(capsys, env)
    assert entries(tmp_path) == []
    after = doctor_run(capsys, env)
    assert len(examined) == 2
    monkeypatch.setenv("CUDARESOLVE_CACHE_DIR", str(tmp_path / "other-cache"))
    monkeypatch.setattr(diagnosing, "examine", real_examine)
    assert doctor_run(capsys, env) == after


def test_a_trusted_tree_is_looked_at_again_by_stats_after_a_diagnosis(env, capsys, examined, monkeypatch):
    monkeypatch.setattr(result_cache, "TIMESTAMP_SLACK", 0.0)
    walks = []
    real_walk = result_cache.walk_tree
    monkeypatch.setattr(result_cache, "walk_tree", lambda target: walks.append(target) or real_walk(target))
    doctor_run(capsys, env)
    assert len(walks) == 1 and len(examined) == 1  # the walk before the diagnosis, none after it
