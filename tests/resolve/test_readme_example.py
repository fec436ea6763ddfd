"""The README's example, read from README.md: its lock, installed into an empty venv, gets a set the
doctor finds nothing to warn about on the example's host. On the fake CUDA index, whose cuSPARSE 12
binds its own release's nvJitLink while declaring nvJitLink without a version, as the real ones do: a
host whose set is CUDA 12 (driver 550) gets the doctor's metadata-vs-binary warning."""

from __future__ import annotations

import json
import shlex
import venv
from pathlib import Path

import pytest

from cudaresolve.cli import main

pytestmark = pytest.mark.usefixtures("hermetic")
README = Path(__file__).resolve().parents[2] / "README.md"


def readme_lock_arguments() -> list[str]:
    """The arguments after `cudaresolve lock` in the README's example command, without its output options."""
    [line] = [line for line in README.read_text().splitlines() if line.startswith("    ") and "cudaresolve lock " in line]
    words = shlex.split(line.split("cudaresolve lock ", 1)[1])
    kept = []
    for word in words:
        if kept and kept[-1] == "-o":
            kept.pop()
        elif word != "--explain":
            kept.append(word)
    return kept


def host_of(arguments: list[str]) -> list[str]:
    return [w for i, w in enumerate(arguments) if w in ("--driver", "--gpu") or i and arguments[i - 1] in ("--driver", "--gpu")]


def doctor_after_install(cuda_index, empty_python: str, tmp_path: Path, capsys, arguments: list[str]) -> dict:
    index = ["--index-url", cuda_index.index_url, "--torch-index-base", cuda_index.torch_index_base]
    lock = tmp_path / "pylock.toml"
    assert main(["lock", "-q", *arguments, "--python", empty_python, *index, "-o", str(lock)]) == 0, capsys.readouterr().err
    target = tmp_path / "target"
    venv.create(target, with_pip=True)
    python = str(target / "bin" / "python")
    assert main(["install", "-q", "--lock", str(lock), "--python", python, *host_of(arguments)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    main(["doctor", "--json", "--python", python, *host_of(arguments)])
    return json.loads(capsys.readouterr().out)


def test_the_readme_examples_lock_installs_a_set_the_doctor_does_not_warn_about(cuda_index, empty_python, tmp_path, capsys):
    arguments = readme_lock_arguments()
    assert arguments[:2] == ["cupy", "cuda-cccl"] and "--driver" in arguments, arguments
    report = doctor_after_install(cuda_index, empty_python, tmp_path, capsys, arguments)
    assert [(f["severity"], f["check"], f["subject"]) for f in report["findings"] if f["severity"] in ("error", "warning")] == []


def test_a_cuda_12_host_for_the_same_request_gets_the_metadata_warning(cuda_index, empty_python, tmp_path, capsys):
    """The oracle that the test above can fail: the same request for driver 550 (CUDA 12.4)."""
    report = doctor_after_install(cuda_index, empty_python, tmp_path, capsys,
                                  ["cupy", "cuda-cccl", "--driver", "550.144.03", "--gpu", "8.6"])
    warned = {(f["check"], f["subject"]) for f in report["findings"] if f["severity"] == "warning"}
    assert ("metadata-vs-binary", "nvidia-cusparse-cu12 12.3.1.170") in warned, report["findings"]
