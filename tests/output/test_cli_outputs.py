"""The command line as a new user types it, beside pip and uv: an output never replaces an input,
whatever flag is mistyped; --json is one document on stdout; the constraints file names what to
install with it; and the small things (progress, bare `cudaresolve`, docs by URL, inspect's summary).
Each case checks the exit code, stdout, stderr and the files on disk before and after."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from cudaresolve.bounded import loads_toml
from cudaresolve.cli import main
from cudaresolve.output.docs import DOCS, docs_url

HOST = ("--driver", "550.144.03", "--gpu", "8.6")
USERS = "numpy<2.3\n"  # the user's constraints file
UVS_LOCK = 'lock-version = "1.0"\ncreated-by = "uv"\npackages = []\n'  # another tool's pylock.toml


def run(capfd, cuda_index, empty_python, *args: str, command: str = "lock", quiet: bool = True) -> tuple[int, str, str]:
    capfd.readouterr()
    code = main([command, *(["-q"] if quiet else []), "--python", empty_python, "--index-url", cuda_index.index_url,
                 "--torch-index-base", cuda_index.torch_index_base, *args])
    out, err = capfd.readouterr()
    return code, out, err


def files(where: Path) -> dict[str, str]:
    """Every file the user sees in `where` (the cache aside) and its text."""
    return {p.name: p.read_text() for p in sorted(where.iterdir()) if p.is_file()}


# -- 1. outputs never replace inputs ---------------------------------------------------------------


@pytest.mark.parametrize("flag", ["--constraints", "--constraint", "-c"])
def test_constraints_flags_read_the_users_file(cuda_index, empty_python, hermetic, capfd, flag):
    """Before, `--constraints myc.txt` wrote the lock's pins over myc.txt ("wrote myc.txt"); as in uv it
    is an input: the constraint holds, and myc.txt is as the user wrote it."""
    (hermetic / "myc.txt").write_text("numba<0.59.1\n")
    code, out, err = run(capfd, cuda_index, empty_python, "numba>=0.59,<0.60", *HOST, flag, "myc.txt", "-o", "pylock.t.toml",
                         "--allow-advisory", "numba-0.59.0-cg-cache", quiet=False)
    assert code == 0, err
    assert "numba==0.59.0" in out and "wrote pylock.t.toml" in err and "wrote myc.txt" not in err
    assert (hermetic / "myc.txt").read_text() == "numba<0.59.1\n"
    assert set(files(hermetic)) == {"myc.txt", "pylock.t.toml"}


@pytest.mark.parametrize("flag", ["--requirements", "--requirement", "-r"])
def test_requirements_flags_read_the_users_file(cuda_index, empty_python, hermetic, capfd, flag):
    (hermetic / "req.txt").write_text("numba>=0.59,<0.60\n")
    code, out, err = run(capfd, cuda_index, empty_python, *HOST, flag, "req.txt")
    assert code == 0, err
    assert "numba==0.59.1" in out and (hermetic / "req.txt").read_text() == "numba>=0.59,<0.60\n"
    assert set(files(hermetic)) == {"req.txt", "pylock.toml"}


@pytest.mark.parametrize("args, says", [
    # a prefix of a flag is no longer that flag: each is an error, nothing read or written
    (["--write-constraint", "myc.txt"], "unrecognized arguments: --write-constraint"),
    (["--write-requirement", "myc.txt"], "unrecognized arguments: --write-requirement"),
    (["--write", "myc.txt"], "unrecognized arguments: --write"),
    (["--out", "pylock.toml"], "unrecognized arguments: --out"),
    (["--constr", "myc.txt"], "unrecognized arguments: --constr"),
    # an output flag onto the user's files: refused, naming the file
    (["--write-constraints", "myc.txt"], "myc.txt: not replaced: it exists and cudaresolve did not write it"),
    (["--write-requirements", "myc.txt"], "myc.txt: not replaced: it exists and cudaresolve did not write it"),
    (["--write-constraints", "c.txt", "--write-requirements", "myc.txt"], "myc.txt: not replaced"),
    (["--output", "myc.txt"], "myc.txt: a PEP 751 lock file must be named pylock.toml"),
    (["-o", "pylock.toml"], "pylock.toml: not replaced: it exists and cudaresolve did not write it"),
    ([], "pylock.toml: not replaced: it exists and cudaresolve did not write it"),  # the default output
    (["--output", "pylock.uv.toml"], "pylock.uv.toml: not replaced"),
])
def test_no_mistyped_flag_loses_a_users_file(cuda_index, empty_python, hermetic, capfd, args, says):
    (hermetic / "myc.txt").write_text(USERS)
    (hermetic / "pylock.uv.toml").write_text(UVS_LOCK)
    if says.startswith("pylock.toml"):
        (hermetic / "pylock.toml").write_text(UVS_LOCK)
    before = files(hermetic)
    code, out, err = run(capfd, cuda_index, empty_python, "numba>=0.59,<0.60", *HOST, "-c", "myc.txt", *args)
    assert (code, out, err.count("\n")) == (3, "", 1), err
    assert err.startswith("cudaresolve: error: ") and says in err
    assert files(hermetic) == before


def test_its_own_files_are_replaced(cuda_index, empty_python, hermetic, capfd):
    """A second lock replaces the files the first wrote (their header says cudaresolve wrote them)."""
    outputs = ("--write-constraints", "c.txt", "--write-requirements", "r.txt", "--allow-advisory", "numba-0.59.0-cg-cache")
    assert run(capfd, cuda_index, empty_python, "numba==0.59.0", *HOST, *outputs)[0] == 0
    code, _, err = run(capfd, cuda_index, empty_python, "numba==0.59.1", *HOST, *outputs)
    assert code == 0, err
    written = files(hermetic)
    assert "numba==0.59.1" in written["c.txt"] and "numba==0.59.1" in written["r.txt"]
    assert 'name = "numba"\nversion = "0.59.1"' in written["pylock.toml"]


def test_every_parser_refuses_abbreviations():
    from cudaresolve.commands.parser import build_parser

    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command").choices
    assert not parser.allow_abbrev and not any(sub.allow_abbrev for sub in subparsers.values())


# -- 2. --json is one document on stdout -------------------------------------------------------------


def test_lock_json_refusal_is_a_document_with_typed_causes(cuda_index, empty_python, hermetic, capfd):
    """Before: stdout was empty when no set fit. Now the causes, typed, and the line on stderr."""
    code, out, err = run(capfd, cuda_index, empty_python, "numba==0.59.0", *HOST, "--json")
    assert code == 2 and err.startswith("cudaresolve: error: ") and "numba-0.59.0-cg-cache" in err
    document = json.loads(out)
    assert document["schema"] == 1 and document["exit_code"] == 2 and "error" not in document
    [cause] = document["refused"]["attempts"][0]["causes"]
    assert cause["type"] == "Unsatisfiable" and cause["requirement"] == "numba==0.59.0"
    assert cause["origin"] == {"kind": "asked", "where": "command line"}
    assert cause["rejections"] and all(r["rule"] and r["candidate"].startswith("numba 0.59.0") for r in cause["rejections"])
    assert cause["reason"] in document["refused"]["message"]
    assert files(hermetic) == {}


def test_lock_json_error_is_a_document_too(cuda_index, empty_python, hermetic, capfd):
    code, out, err = run(capfd, cuda_index, empty_python, *HOST, "--json")
    assert code == 3 and err == "cudaresolve: error: nothing to lock: give requirements, -r FILE or --project DIR\n"
    assert json.loads(out) == {"schema": 1, "exit_code": 3, "error": {"message": err[len("cudaresolve: error: "):-1]}}


def test_lock_json_with_the_lock_on_stdout_is_refused(cuda_index, empty_python, hermetic, capfd):
    """Before: --json -o - wrote the TOML, then the JSON, on stdout."""
    code, out, err = run(capfd, cuda_index, empty_python, "numba==0.59.1", *HOST, "--json", "-o", "-")
    assert (code, err.count("\n")) == (3, 1) and "--json" in err and "-o -" in err
    assert json.loads(out) == {"schema": 1, "exit_code": 3, "error": {"message": err[len("cudaresolve: error: "):-1]}}
    assert files(hermetic) == {}


@pytest.mark.parametrize("argv", [
    ["why", "cupy", "--json", "--lock", "pylock.bad.toml"],  # a lock that does not parse
    ["why", "cupy", "--json", "--lock", "missing.toml"],
    ["why", "cupy", "--json"],  # no pylock.toml here
    ["why", "numpyy", "--json", "--lock", "pylock.toml"],  # a name the lock does not hold
    ["why", "cupy", "--json", "--frob"],  # a command line that does not parse
    ["lock", "cupy", "--json", "--frob"],
    ["lock", "--check", "pylock.toml", "--json", "--gpu"],
    ["install", "--dry-run", "cupy", "--json", "--frob"],
])
def test_every_json_error_is_one_document(hermetic, capsys, argv):
    """Before: these printed their error on stderr and nothing on stdout, although --json was given."""
    (hermetic / "pylock.bad.toml").write_text("garbage = [\n")
    (hermetic / "pylock.toml").write_text('lock-version = "1.0"\ncreated-by = "cudaresolve"\npackages = []\n')
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 3 and err.startswith("cudaresolve: error: ") and err.count("\n") == 1
    assert json.loads(out) == {"schema": 1, "exit_code": 3, "error": {"message": err[len("cudaresolve: error: "):-1]}}


def test_a_parse_error_without_json_prints_nothing_on_stdout(capsys):
    assert main(["install", "cupy", "--json", "--frob"]) == 3  # --json promises a document only with --dry-run
    assert capsys.readouterr().out == ""


def test_install_dry_run_json_plan_and_refusal(cuda_index, empty_python, hermetic, capfd):
    code, out, err = run(capfd, cuda_index, empty_python, "numba==0.59.1", *HOST, "--dry-run", "--json", command="install")
    assert code == 0, err
    plan = json.loads(out)
    numba = next(c for c in plan["changes"] if c["name"] == "numba")
    assert (numba["kind"], numba["locked"], numba["installed"]) == ("add", "0.59.1", None)
    assert plan["pip_command"][1:4] == ["-m", "pip", "install"] and "numba==0.59.1" in plan["requirements"]
    code, out, err = run(capfd, cuda_index, empty_python, "numba==0.59.0", *HOST, "--dry-run", "--json", command="install")
    assert code == 2 and json.loads(out)["refused"]["attempts"][0]["causes"][0]["type"] == "Unsatisfiable"
    code, out, err = run(capfd, cuda_index, empty_python, "numba==0.59.1", *HOST, "--json", command="install")
    assert (code, out, err.count("\n")) == (3, "", 1) and "--dry-run" in err
    assert files(hermetic) == {}
    assert run(capfd, cuda_index, empty_python, "cupy", *HOST)[0] == 0  # a CUDA 12 lock, installed on a CUDA 11 driver:
    code, out, err = run(capfd, cuda_index, empty_python, "--lock", "pylock.toml", "--driver", "470.256.02", "--gpu", "8.6",
                         "--dry-run", "--json", command="install")
    document = json.loads(out)
    assert code == 2 and document["exit_code"] == 2 and document["error"]["message"].startswith("pylock.toml does not fit this host:")
    assert err.startswith("cudaresolve: error: pylock.toml does not fit this host:")


# -- 3. the constraints file says what to install with it --------------------------------------------


def test_constraints_header_names_the_requirements_that_install_it(cuda_index, empty_python, hermetic, capfd, tmp_path):
    """Before: the header said `pip install -c THIS-FILE REQUIREMENT...`, and `pip install -c c.txt
    cupy` went for the cupy sdist, which no pin covers. The header's own command installs the lock."""
    code, _, err = run(capfd, cuda_index, empty_python, "cupy", *HOST, "--write-constraints", "c.txt")
    assert code == 0, err
    header = (hermetic / "c.txt").read_text().splitlines()[0]
    assert header.startswith("# cudaresolve ") and ': pip install -c THIS-FILE "cupy-cuda12x[ctk]"; ' in header
    asked = shlex.split(header.split("THIS-FILE", 1)[1].split(";", 1)[0])
    assert asked == ["cupy-cuda12x[ctk]"]
    report = tmp_path / "report.json"
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
                          "--report", str(report), "-c", "c.txt", *asked], capture_output=True, text=True)
    assert pip.returncode == 0, pip.stderr
    chosen = {i["metadata"]["name"]: i["metadata"]["version"] for i in json.loads(report.read_text())["install"]}
    pins = dict(line.split("==") for line in (hermetic / "c.txt").read_text().splitlines() if "==" in line)
    assert chosen == {name: pins[name] for name in chosen} and chosen["cupy-cuda12x"] == "14.2.0"


# -- 4. the small items -----------------------------------------------------------------------------


def test_project_lock_goes_beside_the_project_file(cuda_index, empty_python, hermetic, capfd):
    """Before: `lock --project DIR` wrote ./pylock.toml, replacing the one there without a word."""
    project = hermetic / "proj"
    project.mkdir()
    (project / "pyproject.toml").write_text('[project]\nname = "demo"\nversion = "1"\ndependencies = ["numba>=0.59,<0.60"]\n')
    (hermetic / "pylock.toml").write_text(UVS_LOCK)
    code, _, err = run(capfd, cuda_index, empty_python, *HOST, "--project", "proj", quiet=False)
    assert code == 0, err
    assert f"wrote {os.path.join('proj', 'pylock.toml')}" in err and (hermetic / "pylock.toml").read_text() == UVS_LOCK
    assert 'name = "numba"' in (project / "pylock.toml").read_text()
    (project / "pylock.toml").write_text(UVS_LOCK)  # another tool's lock beside the project: kept
    code, out, err = run(capfd, cuda_index, empty_python, *HOST, "--project", "proj")
    assert (code, out) == (3, "") and "proj/pylock.toml: not replaced" in err
    assert (project / "pylock.toml").read_text() == UVS_LOCK


def test_progress_names_each_target_once_in_words(cuda_index, empty_python, hermetic, capfd):
    """Before: `judging 1 distributions on 1 host(s)`, once per set judged, for no named target."""
    code, _, err = run(capfd, cuda_index, empty_python, "numpy", *HOST, "--python-version", "3.11",
                       "--python-version", "3.12", quiet=False)
    assert code == 0, err
    judging = [re.sub(r", glibc \d+\.\d+", "", line) for line in err.splitlines() if line.startswith("judging ")]
    assert judging == ["judging 1 distribution on 1 host for x86_64, Python 3.11",
                       "judging 1 distribution on 1 host for x86_64, Python 3.12"], err
    for name in ("a.json", "b.json"):
        assert main(["probe", "--json", *HOST]) == 0
        (hermetic / name).write_text(capfd.readouterr().out)
    code, _, err = run(capfd, cuda_index, empty_python, "numba>=0.59,<0.60", "--host", "a.json", "--host", "b.json",
                       "-o", "pylock.fleet.toml", quiet=False)
    assert code == 0, err
    judging = [re.sub(r", glibc \d+\.\d+", "", line) for line in err.splitlines() if line.startswith("judging ")]
    assert judging == ["judging 3 distributions on 1 class of 2 hosts for x86_64, Python %d.%d" % sys.version_info[:2]], err


def test_counted_in_words():
    from cudaresolve.output.progress import counted

    assert [counted(1, "host"), counted(2, "host"), counted(1, "library", "libraries"), counted(3, "library", "libraries")] == [
        "1 host", "2 hosts", "1 library", "3 libraries"]


def test_bare_command_prints_help_and_exits_0(capsys):
    """As pip does (uv exits 2); before, argparse's "the following arguments are required: COMMAND"."""
    assert main([]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("usage: cudaresolve ") and "lock " in out and err == ""


@pytest.mark.parametrize("command", [[], ["lock"], ["probe"], ["inspect"], ["doctor"], ["install"]])
def test_help_names_the_docs_by_url(capsys, command):
    assert main([*command, "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # argparse wraps long lines
    assert docs_url("cli.md") in out
    assert not re.search(r"(?<!/)docs/\w", out.replace(DOCS, ""))  # no path only a checkout has


def test_the_project_urls_name_the_same_docs():
    pyproject = loads_toml((Path(__file__).parents[2] / "pyproject.toml").read_text())
    assert pyproject["project"]["urls"]["Documentation"] == docs_url("cli.md")


def test_inspect_prints_a_summary_first(elf_builder, capsys, wheel):
    from test_elf import CUDART_MAP, CUDART_SOURCE

    runtime = elf_builder.build("libcudart.so.12", CUDART_SOURCE, soname="libcudart.so.12", version_script=CUDART_MAP.format(major=12))
    cublas = elf_builder.build("libcublas.so.12", "int cublasCreate_v2(void **h) { return 0; }", soname="libcublas.so.12",
                               directory="elsewhere")
    user = elf_builder.build("libuser.so", "int cudaMalloc(void **p, unsigned long n);\nint cublasCreate_v2(void **h);\n"
                             "int f(void) { return cudaMalloc(0, 0) + cublasCreate_v2(0); }", soname="libuser.so", link=[runtime, cublas])
    assert main(["inspect", str(user), str(runtime)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("summary: 2 libraries read\n  CUDA libraries needed: libcublas.so.12\n  SASS: none; PTX: none\n"
                          "  CUDA runtime carried: this file is a CUDA runtime (libcudart), CUDA 12 (from its version node), "
                          "release unknown in libcudart.so.12\n\ndetail:\n"), out
    whl = wheel("nvidia-cusparse-cu12==12.3.1.170")
    assert main(["inspect", str(whl)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("summary: 1 library read\n  CUDA libraries needed: libnvJitLink.so.12\n"
                          "  SASS: sm_50 to sm_90 (10 targets); PTX: compute_52 to compute_90 (3 targets)\n"), out
    assert out.index("detail:") < out.index("soname:  libcusparse.so.12")



def test_inspect_summary_counts_the_libraries_whose_device_code_was_skipped(elf_builder, hermetic, capsys):
    """A fatbin naming sm_0 is skipped whole: the summary's span leaves it out, and says so rather
    than read as a library without device code ("SASS: none")."""
    from fatbin_bytes import container, entry
    from hostile_binaries import library_with

    bad = library_with(elf_builder, container(entry(2, 0, b"", version=(1, 7))), section=".nv_fatbin", name="libsm0.so")
    good = library_with(elf_builder, container(entry(2, 80, b"", version=(1, 7))), section=".nv_fatbin", name="libsm80.so")
    assert main(["inspect", str(bad), str(good)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("summary: 2 libraries read\n  CUDA libraries needed: none\n"
                          "  SASS: sm_80; PTX: none (device code of 1 library skipped: see below)\n"), out
    assert "device code: skipped: its fatbin names sm_0, which is no CUDA target" in out


def test_lock_report_counts_one_in_the_singular(cuda_index, empty_python, hermetic, capfd):
    """Before: "locked 1 distributions for this host"."""
    code, out, err = run(capfd, cuda_index, empty_python, "numpy", *HOST)
    assert code == 0, err
    assert out.splitlines()[0] == "locked 1 distribution for this host:"

def test_refusal_json_types_each_cause():
    """The JSON of causes the fake index does not easily make: a conflict, and a bound met on one."""
    from packaging.requirements import Requirement

    from cudaresolve.output.lock_report import render_error_json
    from cudaresolve.resolve.causes import Attempt, Bound, Conflict, NoSolution, TooDeep
    from cudaresolve.resolve.reasons import Asked, Constrained, Need

    conflict = Conflict("c", (Need(Requirement("c==1.0"), Asked("command line")), Need(Requirement("c==2.0"), Asked("r.txt:2"))),
                        constraints=(Need(Requirement("c<3"), Constrained("c.txt:1")),))
    document = json.loads(render_error_json(NoSolution((Attempt(None, (conflict, TooDeep(200, Bound.SECONDS, (conflict,)))),))))
    first, second = document["refused"]["attempts"][0]["causes"]
    assert first["type"] == "Conflict" and first["name"] == "c" and first["reason"].startswith("no release of c fits both")
    assert first["needs"] == [{"requirement": "c==1.0", "origin": {"kind": "asked", "where": "command line"}},
                              {"requirement": "c==2.0", "origin": {"kind": "asked", "where": "r.txt:2"}}]
    assert first["constraints"] == [{"requirement": "c<3", "origin": {"kind": "constraint", "where": "c.txt:1"}}]
    assert (second["type"], second["limit"], second["bound"], second["conflict"]) == ("TooDeep", 200, "seconds", [first])
