"""What the lock takes from pip's configuration (docs/lock.md): `constraint` and PIP_CONSTRAINT bind
it, `pre` / PIP_PRE / --pre and pip's pre-release rule decide whether a pre-release may be chosen,
no-binary leaves a name nothing to lock. Each runs on a hermetic index on 127.0.0.1; real pip, under
the same configuration, is the oracle for what the lock chose."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import hermetic_environ
from index_server import make_wheel
from packaging.utils import canonicalize_name

from cudaresolve.cli import main
from cudaresolve.lockfile.pylock import read_pylock
from cudaresolve.resolve.lock import PreRelease


@pytest.fixture
def demo(server):
    """demo 1.0, 2.0 and 3.0rc1; app 1.0 needs dep, whose newest release is a dev release; solo has
    only pre-releases."""
    for version in ("1.0", "2.0", "3.0rc1"):
        server.add(*make_wheel("demo", version))
    for version in ("0.9b1", "1.0b1"):
        server.add(*make_wheel("solo", version))
    server.add(*make_wheel("app", "1.0", requires=["dep"]))
    for version in ("1.0", "1.1.dev1"):
        server.add(*make_wheel("dep", version))
    return server.url + "/simple"


def lock(index_url, python, *args):
    return main(["lock", "-q", "--python", python, "--index-url", index_url, "--driver", "550.144.03", "--json", *args])


def report(capsys) -> dict[str, dict]:
    return {p["name"]: p for p in json.loads(capsys.readouterr().out)["packages"]}


def pip_picks(tmp_path, environ: dict[str, str], *arguments: str) -> dict[str, str]:
    """name -> version real pip would install (into nothing), with `environ`'s configuration."""
    out = tmp_path / "pip-report.json"
    command = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-cache-dir", "--quiet",
               "--report", str(out), *arguments]
    result = subprocess.run(command, capture_output=True, text=True, env=hermetic_environ(environ))
    assert result.returncode == 0, result.stderr
    return {canonicalize_name(i["metadata"]["name"]): i["metadata"]["version"] for i in json.loads(out.read_text())["install"]}


def test_pip_constraint_variable_binds_the_lock_and_pip_installs_it(demo, empty_python, hermetic, monkeypatch, capsys):
    (hermetic / "c.txt").write_text("demo<2\n")
    monkeypatch.setenv("PIP_CONSTRAINT", str(hermetic / "c.txt"))
    assert lock(demo, empty_python, "demo", "--write-constraints", "locked.txt") == 0
    chosen = report(capsys)["demo"]
    assert chosen["version"] == "1.0"
    assert {"kind": "constraint", "where": f"{hermetic / 'c.txt'}:1", "via": "PIP_CONSTRAINT"} in chosen["why"]["origins"]
    assert chosen["reason"] == f"the newest release that fits; within pip's constraint at {hermetic / 'c.txt'}:1, named by PIP_CONSTRAINT"
    configured = {"PIP_CONSTRAINT": str(hermetic / "c.txt")}
    assert pip_picks(hermetic, configured, "-c", str(hermetic / "locked.txt"), "demo") == {"demo": "1.0"}


def test_pip_config_constraint_binds_the_lock_and_pip_installs_it(demo, empty_python, hermetic, monkeypatch, capsys):
    (hermetic / "c.txt").write_text("demo<2\n")
    (hermetic / "pip.conf").write_text(f"[global]\nconstraint = {hermetic / 'c.txt'}\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(hermetic / "pip.conf"))
    assert lock(demo, empty_python, "demo", "-o", "pylock.toml", "--write-constraints", "locked.txt") == 0
    assert report(capsys)["demo"]["version"] == "1.0"
    origins = read_pylock(str(hermetic / "pylock.toml")).packages[0].reason.origins
    assert [(o.where, o.via) for o in origins if o.kind.value == "constraint"] == [
        (f"{hermetic / 'c.txt'}:1", f"{hermetic / 'pip.conf'} [global]")
    ]
    configured = {"PIP_CONFIG_FILE": str(hermetic / "pip.conf")}
    assert pip_picks(hermetic, configured, "-c", str(hermetic / "locked.txt"), "demo") == {"demo": "1.0"}


def test_a_command_line_constraint_adds_to_the_configured_ones(demo, empty_python, hermetic, monkeypatch, capsys):
    (hermetic / "c.txt").write_text("demo<2\n")
    (hermetic / "more.txt").write_text("demo!=1.0\n")
    monkeypatch.setenv("PIP_CONSTRAINT", str(hermetic / "c.txt"))
    assert lock(demo, empty_python, "demo", "-c", "more.txt") == 2  # <2 and !=1.0: nothing fits
    assert "nothing fits demo under pip's constraint demo<2" in capsys.readouterr().err


def test_a_constraint_that_leaves_nothing_names_itself(demo, empty_python, hermetic, monkeypatch, capsys):
    (hermetic / "c.txt").write_text("demo<1\n")
    monkeypatch.setenv("PIP_CONSTRAINT", str(hermetic / "c.txt"))
    assert lock(demo, empty_python, "demo") == 2
    assert f"nothing fits demo under pip's constraint demo<1 ({hermetic / 'c.txt'}:1, named by PIP_CONSTRAINT)" in capsys.readouterr().err


def test_a_configured_constraints_file_that_cannot_be_read_is_bad_input(demo, empty_python, hermetic, monkeypatch, capsys):
    monkeypatch.setenv("PIP_CONSTRAINT", str(hermetic / "missing.txt"))
    assert lock(demo, empty_python, "demo") == 3
    assert "(a constraints file named by PIP_CONSTRAINT)" in capsys.readouterr().err


def test_no_pre_release_when_a_final_release_fits(demo, empty_python, hermetic, capsys):
    assert lock(demo, empty_python, "demo", "app") == 0
    chosen = report(capsys)
    assert (chosen["demo"]["version"], chosen["dep"]["version"]) == ("2.0", "1.0")
    assert "prerelease" not in chosen["demo"]["why"]
    assert pip_picks(hermetic, {}, "--index-url", demo, "demo", "app") == {"demo": "2.0", "app": "1.0", "dep": "1.0"}


@pytest.mark.parametrize("how", ["--pre", "PIP_PRE", "config"])
def test_pre_takes_the_pre_release(demo, empty_python, hermetic, monkeypatch, capsys, how):
    args = ["demo", "app", "-o", "pylock.toml"]
    if how == "--pre":
        args.append("--pre")
    elif how == "PIP_PRE":
        monkeypatch.setenv("PIP_PRE", "1")
    else:
        (hermetic / "pip.conf").write_text("[install]\npre = yes\n")
        monkeypatch.setenv("PIP_CONFIG_FILE", str(hermetic / "pip.conf"))
    assert lock(demo, empty_python, *args) == 0
    chosen = report(capsys)
    assert (chosen["demo"]["version"], chosen["dep"]["version"]) == ("3.0rc1", "1.1.dev1")
    assert chosen["demo"]["why"]["prerelease"] == "pre"
    assert chosen["demo"]["reason"].endswith("; a pre-release: pip's pre option allows them")
    assert {p.name: p.reason.prerelease for p in read_pylock(str(hermetic / "pylock.toml")).packages}["demo"] is PreRelease.PRE
    assert pip_picks(hermetic, {}, "--index-url", demo, "--pre", "demo", "app") == {"demo": "3.0rc1", "app": "1.0", "dep": "1.1.dev1"}


def test_only_a_pre_release_fits_and_the_reason_says_so(demo, empty_python, hermetic, capsys):
    assert lock(demo, empty_python, "solo") == 0
    chosen = report(capsys)["solo"]
    assert (chosen["version"], chosen["why"]["prerelease"]) == ("1.0b1", "only")
    assert chosen["reason"] == "the newest release that fits; a pre-release: the only kind of release it has"
    assert pip_picks(hermetic, {}, "--index-url", demo, "solo") == {"solo": "1.0b1"}


def test_a_version_range_takes_no_pre_release_unasked_as_pip(demo, empty_python, hermetic, capsys):
    """pip falls back to pre-releases only for a requirement that names no version."""
    assert lock(demo, empty_python, "demo>2") == 2
    assert "nothing fits demo>2; demo 3.0rc1: a pre-release, and nothing asks for one" in capsys.readouterr().err
    found = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--index-url", demo, "demo>2"],
                           capture_output=True, text=True, env=hermetic_environ())
    assert found.returncode == 1 and "No matching distribution found for demo>2" in found.stderr
    assert lock(demo, empty_python, "demo>2", "--pre") == 0


def test_a_requirement_naming_a_pre_release_allows_them(demo, empty_python, hermetic, capsys):
    assert lock(demo, empty_python, "demo>=1.0rc1") == 0
    chosen = report(capsys)["demo"]
    assert (chosen["version"], chosen["why"]["prerelease"]) == ("3.0rc1", "named")
    assert pip_picks(hermetic, {}, "--index-url", demo, "demo>=1.0rc1") == {"demo": "3.0rc1"}


def test_no_binary_leaves_nothing_to_lock_and_says_why(demo, empty_python, hermetic, monkeypatch, capsys):
    monkeypatch.setenv("PIP_NO_BINARY", "demo")
    assert lock(demo, empty_python, "demo", "app") == 2
    # the releases refused for the same words are named once, newest first
    assert ("demo 3.0rc1, 2.0 and 1 more: pip's no-binary (from PIP_NO_BINARY) refuses its wheels, and it has no sdist"
            in capsys.readouterr().err)


def test_the_pip_wrapper_reads_the_same_configuration_with_pips_pre_on_top(hermetic, monkeypatch):
    from cudaresolve.commands.pip import PipCommand, pip_lock_inputs
    from cudaresolve.env.interpreter import target_for
    from cudaresolve.integrations.pip import split_install_arguments
    from cudaresolve.resolve.reasons import Constrained

    monkeypatch.setenv("CUDARESOLVE_DRIVER", "550.144.03")
    (hermetic / "c.txt").write_text("demo<2\n")
    monkeypatch.setenv("PIP_CONSTRAINT", str(hermetic / "c.txt"))
    monkeypatch.setenv("PIP_NO_BINARY", "other")
    for arguments, pre in ((["demo"], False), (["--pre", "demo"], True)):
        positions, options = split_install_arguments(arguments)
        inputs = pip_lock_inputs(PipCommand(None, None, True, ("install", *arguments)), target_for(), positions, options)
        assert [(str(n.requirement), n.origin) for n in inputs.constraints] == [
            ("demo<2", Constrained(f"{hermetic / 'c.txt'}:1", "PIP_CONSTRAINT"))]
        assert inputs.policy.pre is pre and inputs.policy.formats.wheels_refused("other")
