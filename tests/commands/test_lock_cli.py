"""`cudaresolve lock` as a command: its files, its output streams, `--check`, and what bad input and
failures do (nothing is written unless the lock succeeded). The scenarios' choices and the pip/uv
oracles are in test_lock_scenarios.py."""

from __future__ import annotations

import json
import os

import pytest

from cudaresolve.cli import main

OLDER_LOCK = 'lock-version = "1.0"\ncreated-by = "cudaresolve 0.0.1"\npackages = []\n'  # one it wrote: it may replace it


def lock(cuda_index, empty_python, *args):
    return main(
        ["lock", "-q", "--python", empty_python, "--index-url", cuda_index.index_url,
         "--torch-index-base", cuda_index.torch_index_base, *args]
    )


def test_writes_the_lock_and_the_pip_files_and_reports_on_stdout(cuda_index, empty_python, hermetic, capsys):
    code = lock(cuda_index, empty_python, "nvidia-cusparse-cu12==12.3.1.170", "--driver", "550.144.03", "--gpu", "8.6",
                "--write-constraints", "constraints.txt", "--write-requirements", "requirements.txt", "--explain")
    out = capsys.readouterr().out
    assert code == 0
    # driver 550 is CUDA 12.4: the nvJitLink it runs natively (12.9.86 would be minor-version compatibility)
    assert "locked 2 distributions for this host" in out and "nvidia-nvjitlink-cu12==12.4.127" in out
    lock_text = (hermetic / "pylock.toml").read_text()
    assert 'name = "nvidia-cusparse-cu12"' in lock_text and 'lock-version = "1.0"' in lock_text
    constraints = (hermetic / "constraints.txt").read_text().splitlines()
    assert f"--index-url {cuda_index.index_url}" in constraints[:2]  # after one comment line
    assert "nvidia-nvjitlink-cu12==12.4.127" in constraints
    assert "--hash=sha256:" in (hermetic / "requirements.txt").read_text()


def test_dash_writes_the_lock_to_stdout_and_the_report_to_stderr(cuda_index, empty_python, hermetic, capsys):
    assert lock(cuda_index, empty_python, "numba>=0.59,<0.60", "--driver", "550.144.03", "-o", "-") == 0
    captured = capsys.readouterr()
    assert captured.out.startswith('lock-version = "1.0"') and "numba==0.59.1" in captured.err
    assert not (hermetic / "pylock.toml").exists()


def test_json_report(cuda_index, empty_python, hermetic, capsys):
    assert lock(cuda_index, empty_python, "torch==2.7.1", "--driver", "550.144.03", "--gpu", "8.9", "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["schema"] == 1 and report["hosts"][0]["label"] == "this host"
    torch = next(p for p in report["packages"] if p["name"] == "torch")
    assert torch["version"] == "2.7.1+cu128" and torch["index"].endswith("/whl/cu128")
    assert torch["why"]["kind"] == "index" and torch["why"]["build"]["cuda"] == "12.8"
    assert {"kind": "asked", "where": "command line"} in torch["why"]["origins"]
    decision = next(d for d in report["decisions"] if d["name"] == "torch")
    assert decision["chosen"] == "torch 2.7.1+cu128"
    assert {"candidate": "torch 2.7.1+cu118", "reason": "older CUDA than +cu128, which runs here", "version": "2.7.1+cu118",
            "rule": "older-cuda", "evidence": {"chosen_local": "cu128"}} in decision["rejected"]
    floor = next(r for r in decision["rejected"] if r["rule"] == "driver")
    assert floor["evidence"]["driver"] == "550.144.03" and floor["evidence"]["floor"] == "580.65.06"
    major = next(d for d in report["decisions"] if d["name"] == "CUDA major")
    assert major["chosen"] == "CUDA 12" and major["rejected"][0]["major"] == 13 and major["rejected"][0]["rule"] == "driver"


def test_no_set_fits_exits_2_and_writes_nothing(cuda_index, empty_python, hermetic, capsys):
    (hermetic / "pylock.toml").write_text(OLDER_LOCK)
    assert lock(cuda_index, empty_python, "numba==0.59.0", "--driver", "550.144.03", "--write-constraints", "c.txt") == 2
    err = capsys.readouterr().err
    assert "numba-0.59.0-cg-cache" in err and "Traceback" not in err
    assert (hermetic / "pylock.toml").read_text() == OLDER_LOCK and not (hermetic / "c.txt").exists()


@pytest.mark.parametrize("output", ["pylock.toml", "-"])
def test_a_failed_write_replaces_no_output_and_prints_no_lock(cuda_index, empty_python, hermetic, capfd, output):
    """--write-requirements cannot be written (its directory is missing): -o is not replaced (or, for -o -,
    the lock is not printed), --write-constraints is not written, no temporary file stays."""
    (hermetic / "pylock.toml").write_text(OLDER_LOCK)
    code = lock(cuda_index, empty_python, "numba>=0.59,<0.60", "--driver", "550.144.03", "-o", output,
                "--write-constraints", "c.txt", "--write-requirements", "missing/r.txt")
    captured = capfd.readouterr()
    assert code == 3
    assert captured.err.startswith("cudaresolve: error: cannot write missing/r.txt") and len(captured.err.splitlines()) == 1
    assert captured.out == ""
    assert sorted(os.listdir(hermetic)) == ["cudaresolve-cache", "pylock.toml"] and (hermetic / "pylock.toml").read_text() == OLDER_LOCK
    assert lock(cuda_index, empty_python, "numba>=0.59,<0.60", "--driver", "550.144.03", "-o", output,
                "--write-constraints", "c.txt", "--write-requirements", "r.txt") == 0  # the same, writable: all written
    captured = capfd.readouterr()
    assert (hermetic / "c.txt").is_file() and (hermetic / "r.txt").is_file()
    if output == "-":
        assert captured.out.startswith('lock-version = "1.0"') and (hermetic / "pylock.toml").read_text() == OLDER_LOCK
    else:
        assert (hermetic / "pylock.toml").read_text().startswith('lock-version = "1.0"')


@pytest.mark.parametrize(
    "args, message",
    [
        (["torch", "-o", "lock.toml"], "pylock"),
        ([], "nothing to lock"),
        (["torch", "--index-url", "ftp://x"], "index-url"),
    ],
)
def test_bad_input_could_not_run(cuda_index, empty_python, hermetic, capsys, args, message):
    assert lock(cuda_index, empty_python, *args) == 3
    assert message in capsys.readouterr().err


def test_an_unreachable_index_could_not_run(empty_python, hermetic, capsys, monkeypatch):
    monkeypatch.setenv("PIP_RETRIES", "0")  # pip's --retries: no waits for an index that is not there
    code = main(["lock", "-q", "--python", empty_python, "--index-url", "http://127.0.0.1:9/simple", "numba", "--driver", "550.144.03"])
    assert code == 3
    assert "cannot connect" in capsys.readouterr().err


def test_check_says_whether_a_lock_still_fits(cuda_index, empty_python, hermetic, capsys):
    assert lock(cuda_index, empty_python, "torch==2.7.1", "--driver", "550.144.03", "--gpu", "8.9") == 0
    capsys.readouterr()
    assert main(["lock", "--check", "pylock.toml", "--driver", "550.144.03", "--gpu", "8.9"]) == 0
    assert "fits this host" in capsys.readouterr().out
    assert main(["lock", "--check", "pylock.toml", "--driver", "550.144.03", "--gpu", "6.1"]) == 2
    out = capsys.readouterr().out
    assert "torch 2.7.1+cu128: no kernel image for compute capability 6.1 (GPU 0)" in out
    assert main(["lock", "--check", "pylock.toml", "--driver", "470.82.01", "--gpu", "8.9"]) == 2
    assert "< 525.60.13 (CUDA 12.x floor)" in capsys.readouterr().out


def test_why_reads_the_lock(cuda_index, empty_python, hermetic, capsys):
    assert lock(cuda_index, empty_python, "torch==2.7.1", "--driver", "550.144.03", "--gpu", "8.9") == 0
    capsys.readouterr()
    assert main(["why", "torch"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("torch==2.7.1+cu128: torch 2.7.1+cu128 is +cu128, built with CUDA 12.8")
    assert "  torch 2.7.1+cu118: older CUDA than +cu128, which runs here" in out
    assert main(["why", "numba"]) == 3
    assert "numba is not in pylock.toml" in capsys.readouterr().err


def test_deep_judges_wheels_the_table_lacks_by_reading_them(cuda_index, empty_python, hermetic):
    def torch_bytes() -> int:
        return sum(n for path, n in cuda_index.server.sent.items() if "/torch-2.7.1" in path and not path.endswith(".metadata"))

    before = torch_bytes()
    assert lock(cuda_index, empty_python, "torch==2.7.1", "--driver", "550.144.03", "--gpu", "8.9") == 0
    assert torch_bytes() == before  # metadata only: the table does not know the generated torch wheel
    assert lock(cuda_index, empty_python, "torch==2.7.1", "--driver", "550.144.03", "--gpu", "8.9", "--deep") == 0
    assert torch_bytes() > before  # read once for the judge


def test_quiet_silences_download_progress(server, empty_python, hermetic, capsys):
    from index_server import make_wheel

    server.ranges = False  # so the metadata comes from a download, which shows progress
    server.add(*make_wheel("demo", "1.0"), metadata=False)
    command = ["lock", "--python", empty_python, "--index-url", server.url + "/simple", "--driver", "550.144.03", "-o", "-", "demo"]
    assert main(command) == 0
    assert "downloading demo-1.0-py3-none-any.whl" in capsys.readouterr().err
    assert main(command + ["-q", "--refresh"]) == 0
    assert "downloading" not in capsys.readouterr().err and server.paths().count("/files/demo-1.0-py3-none-any.whl") == 3


def test_abstract_requests_are_recorded_as_asked_and_made_concrete_from_the_records(cuda_index, empty_python, hermetic, capsys):
    """cupy and cuda-cccl for CUDA 12: the lock records the name asked for and the extra added as fields,
    the report words them, and the pip wrapper's rewrite reads the fields back."""
    from cudaresolve.commands.pip import concrete
    from cudaresolve.lockfile.pylock import read_pylock

    assert lock(cuda_index, empty_python, "cupy", "cuda-cccl", "--driver", "550.144.03", "--gpu", "8.6", "--json") == 0
    report = {p["name"]: p for p in json.loads(capsys.readouterr().out)["packages"]}
    cupy, cccl = report["cupy-cuda12x"], report["cuda-cccl"]
    assert (cupy["why"]["asked_as"], cupy["why"]["cuda_major"]) == ("cupy", 12)
    assert cupy["reason"].startswith("asked for as cupy: CuPy's wheel for the environment's CUDA 12; ")
    assert (cccl["why"]["added_extras"], cccl["reason"].split(";")[0]) == (["cu12"], "asked for without a CUDA extra: [cu12] for the environment's CUDA 12")
    assert {"kind": "asked", "where": "command line"} in cupy["why"]["origins"]
    parent = {"kind": "requires-dist", "parent": {"name": "cuda-cccl", "version": cccl["version"]}, "extra": "cu12"}
    # each requires-dist origin holds the parent's requirement too, for `why`
    assert any({k: v for k, v in origin.items() if k != "requirement"} == parent and origin["requirement"]
               for p in report.values() for origin in p["why"]["origins"])
    locked = read_pylock(str(hermetic / "pylock.toml"))
    # cuda-cccl[cu12] brings three of CuPy's seven CUDA libraries: the lock asks for CuPy's [ctk] too
    assert (cupy["why"]["added_extras"], cupy["why"]["extra_for"], cccl["why"]["extra_for"]) == (["ctk"], "libraries", "cuda-major")
    assert "; [ctk] added: its CUDA 12 libraries are not on the target" in cupy["reason"]
    assert [concrete(text, locked) for text in ("cupy>=13", "cuda-cccl", "numpy")] == ["cupy-cuda12x[ctk]>=13", "cuda-cccl[cu12]", "numpy"]
