"""A plain `cudaresolve doctor` judges each fix before it prints it (commands/doctor.py,
resolve/fix_judge.py), against the indexes the target's pip settings and the index options name.

The environment: cuda-core[cu12] with NVRTC 12.9.86 beside nvJitLink 12.4.127 (run-time-compiler: the
linker cannot read what the compiler writes), installed by real pip from the hermetic index
(tests/fake_cuda_index.py), and holdpkg, which requires nvJitLink < 12.5. The tables' fix names a
newer nvJitLink first (it would break holdpkg), then an older NVRTC.
"""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path
from typing import Any, Iterator

import pytest
from conftest import hermetic_environ
from index_server import make_wheel

from cudaresolve.cli import main

RTX_3090 = ("--driver", "575.57.08", "--gpu", "8.6")
OLDER_NVRTC = "nvidia-cuda-nvrtc-cu12==12.4.127"


def pip(python: Path, *arguments: str) -> str:
    done = subprocess.run([str(python), "-m", "pip", *arguments, "--no-cache-dir"], capture_output=True, text=True,
                          env=hermetic_environ())
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture
def held_pair(cuda_index, hermetic, venv_with_pip, tmp_path) -> Path:
    links = tmp_path / "links"
    links.mkdir()
    filename, data = make_wheel("holdpkg", "1.0", requires=("nvidia-nvjitlink-cu12<12.5",), files={"holdpkg/__init__.py": b""})
    (links / filename).write_bytes(data)
    python = venv_with_pip(tmp_path / "venv") / "bin" / "python"
    pip(python, "install", "--index-url", cuda_index.index_url, "--find-links", str(links), "cuda-core[cu12]==1.2.2",
        "nvidia-cuda-nvrtc-cu12==12.9.86", "nvidia-nvjitlink-cu12==12.4.127", "holdpkg==1.0")
    return python


def doctor(capsys, python: Path, *options: str) -> tuple[int, dict[str, Any]]:
    code = main(["doctor", "--json", "--python", str(python), *RTX_3090, *options])
    return code, json.loads(capsys.readouterr().out)


def compiler_finding(report: dict[str, Any]) -> dict[str, Any]:
    [finding] = [f for f in report["findings"] if f["check"] == "run-time-compiler"]
    return finding


def pip_requirements(remedy: dict[str, Any]) -> Iterator[str]:
    """The requirements of every pip-install in a remedy value."""
    if remedy.get("type") == "pip-install":
        yield from remedy["requirements"]
    for value in remedy.values():
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, dict):
                yield from pip_requirements(item)


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_plain_doctor_refuses_the_harmful_fix_and_prints_the_passing_alternative(held_pair, cuda_index, capsys):
    unjudged_code, unjudged = doctor(capsys, held_pair, "--no-judge-fixes")
    assert compiler_finding(unjudged)["fix"].startswith('pip install "nvidia-nvjitlink-cu12>=12.9"')  # holdpkg's breaker
    assert unjudged["fix_judging"] == {"judged": False, "why_not": "not-asked"}

    code, report = doctor(capsys, held_pair, "--index-url", cuda_index.index_url)
    finding = compiler_finding(report)
    assert (code, report["fix_judging"]) == (unjudged_code, {"judged": True, "why_not": None}) and code == 2
    assert "nvidia-nvjitlink-cu12>=12.9" not in finding["fix"]
    assert finding["fix"].startswith(f'pip install "{OLDER_NVRTC}"')
    assert finding["fix"].endswith(f'(or, locked and judged again: cudaresolve install "{OLDER_NVRTC}")')
    assert finding["remedy"]["type"] == "with-install"

    pip(held_pair, "install", "--index-url", cuda_index.index_url, *pip_requirements(finding["remedy"]))
    code, after = doctor(capsys, held_pair, "--no-judge-fixes")
    assert code == 0 and [f for f in after["findings"] if f["severity"] == "error"] == []
    assert "No broken requirements" in pip(held_pair, "check")  # holdpkg still has its nvJitLink


def test_an_unreachable_index_leaves_the_fix_printed_as_not_checked_and_the_exit_status_the_same(held_pair, capsys):
    unjudged_code, unjudged = doctor(capsys, held_pair, "--no-judge-fixes")
    index = f"http://127.0.0.1:{closed_port()}/simple"
    code, report = doctor(capsys, held_pair, "--index-url", index)
    finding = compiler_finding(report)
    assert code == unjudged_code == 2
    assert finding["remedy"] == {"type": "unchecked", "fix": compiler_finding(unjudged)["remedy"],
                                 "unreadable": finding["remedy"]["unreadable"]}
    assert finding["remedy"]["unreadable"].startswith(f"cannot fetch {index}/")
    assert finding["fix"] == (f"{compiler_finding(unjudged)['fix']} (not checked against the indexes: an index could "
                              f"not be read: {finding['remedy']['unreadable']})")


def test_offline_without_the_pages_cached_the_fix_says_it_was_not_checked(held_pair, cuda_index, capsys):
    code, report = doctor(capsys, held_pair, "--index-url", cuda_index.index_url, "--offline")
    finding = compiler_finding(report)
    assert code == 2 and finding["remedy"]["type"] == "unchecked" and finding["remedy"]["unreadable"] is None
    assert finding["fix"].endswith("(not checked against the indexes: the cached index pages (--offline) lack what it needs)")


def test_a_judged_report_is_not_kept_and_a_healthy_one_is(held_pair, cuda_index, venv_with_pip, hermetic, capsys):
    """A judged fix depends on what the index offers, which no key of the result cache sees."""
    results = hermetic / "cudaresolve-cache" / "results"
    doctor(capsys, held_pair, "--index-url", cuda_index.index_url)
    assert not results.exists() or list(results.iterdir()) == []
    healthy = venv_with_pip(hermetic / "healthy") / "bin" / "python"
    assert doctor(capsys, healthy, "--index-url", cuda_index.index_url)[0] == 0
    assert len(list(results.iterdir())) == 1


def test_a_bad_index_option_is_exit_3_even_with_no_fix_to_judge(hermetic, venv_with_pip, capsys):
    healthy = venv_with_pip(hermetic / "healthy") / "bin" / "python"
    assert main(["doctor", "--python", str(healthy), "--timeout", "soon", *RTX_3090]) == 3
    [line] = capsys.readouterr().err.splitlines()
    assert "--timeout" in line and "soon" in line
