"""`cudaresolve lock` as a command: its files, its output streams, `--check`, and what bad input and
failures do (nothing is written unless the lock succeeded). The scenarios' choices and the pip/uv
oracles are in test_lock_scenarios.py."""

from __future__ import annotations

import json
import os

import pytest

from cudaresolve.cli import main


@pytest.fixture
def clean(monkeypatch, tmp_path):
    for key in [k for k in os.environ if k.startswith(("PIP_", "CUDARESOLVE_"))]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("CUDARESOLVE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture(scope="module")
def empty_python(tmp_path_factory):
    """An interpreter with nothing installed: a venv without pip."""
    import venv

    root = tmp_path_factory.mktemp("empty-venv")
    venv.EnvBuilder(with_pip=False).create(root)
    return str(root / "bin" / "python")


def lock(cuda_index, empty_python, *args):
    return main(
        ["lock", "-q", "--python", empty_python, "--index-url", cuda_index.index_url,
         "--torch-index-base", cuda_index.torch_index_base, *args]
    )


def test_writes_the_lock_and_the_pip_files_and_reports_on_stdout(cuda_index, empty_python, clean, capsys):
    code = lock(cuda_index, empty_python, "nvidia-cusparse-cu12==12.3.1.170", "--driver", "550.144.03", "--gpu", "8.6",
                "--constraints", "constraints.txt", "--requirements", "requirements.txt", "--explain")
    out = capsys.readouterr().out
    assert code == 0
    assert "locked 2 distributions for this host" in out and "nvidia-nvjitlink-cu12==12.9.86" in out
    lock_text = (clean / "pylock.toml").read_text()
    assert 'name = "nvidia-cusparse-cu12"' in lock_text and 'lock-version = "1.0"' in lock_text
    constraints = (clean / "constraints.txt").read_text().splitlines()
    assert f"--index-url {cuda_index.index_url}" in constraints[:2]  # after one comment line
    assert "nvidia-nvjitlink-cu12==12.9.86" in constraints
    assert "--hash=sha256:" in (clean / "requirements.txt").read_text()


def test_dash_writes_the_lock_to_stdout_and_the_report_to_stderr(cuda_index, empty_python, clean, capsys):
    assert lock(cuda_index, empty_python, "numba>=0.59,<0.60", "--driver", "550.144.03", "-o", "-") == 0
    captured = capsys.readouterr()
    assert captured.out.startswith('lock-version = "1.0"') and "numba==0.59.1" in captured.err
    assert not (clean / "pylock.toml").exists()


def test_json_report(cuda_index, empty_python, clean, capsys):
    assert lock(cuda_index, empty_python, "torch==2.7.1", "--driver", "550.144.03", "--gpu", "8.9", "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["schema"] == 1 and report["hosts"][0]["label"] == "this host"
    torch = next(p for p in report["packages"] if p["name"] == "torch")
    assert torch["version"] == "2.7.1+cu128" and torch["index"].endswith("/whl/cu128")
    decision = next(d for d in report["decisions"] if d["name"] == "torch")
    assert {"candidate": "torch 2.7.1+cu118", "reason": "older CUDA than +cu128, which runs here"} in decision["rejected"]


def test_no_set_fits_exits_2_and_writes_nothing(cuda_index, empty_python, clean, capsys):
    (clean / "pylock.toml").write_text("an older lock\n")
    assert lock(cuda_index, empty_python, "numba==0.59.0", "--driver", "550.144.03", "--constraints", "c.txt") == 2
    err = capsys.readouterr().err
    assert "numba-0.59.0-cg-cache" in err and "Traceback" not in err
    assert (clean / "pylock.toml").read_text() == "an older lock\n" and not (clean / "c.txt").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["torch", "-o", "lock.toml"], "pylock"),
        ([], "nothing to lock"),
        (["torch", "--index-url", "ftp://x"], "index-url"),
    ],
)
def test_bad_input_could_not_run(cuda_index, empty_python, clean, capsys, args, message):
    assert lock(cuda_index, empty_python, *args) == 3
    assert message in capsys.readouterr().err


def test_an_unreachable_index_could_not_run(empty_python, clean, capsys, monkeypatch):
    monkeypatch.setenv("PIP_RETRIES", "0")  # pip's --retries: no waits for an index that is not there
    code = main(["lock", "-q", "--python", empty_python, "--index-url", "http://127.0.0.1:9/simple", "numba", "--driver", "550.144.03"])
    assert code == 3
    assert "cannot connect" in capsys.readouterr().err


def test_check_says_whether_a_lock_still_fits(cuda_index, empty_python, clean, capsys):
    assert lock(cuda_index, empty_python, "torch==2.7.1", "--driver", "550.144.03", "--gpu", "8.9") == 0
    capsys.readouterr()
    assert main(["lock", "--check", "pylock.toml", "--driver", "550.144.03", "--gpu", "8.9"]) == 0
    assert "fits this host" in capsys.readouterr().out
    assert main(["lock", "--check", "pylock.toml", "--driver", "550.144.03", "--gpu", "6.1"]) == 2
    out = capsys.readouterr().out
    assert "torch 2.7.1+cu128: no SASS or PTX for GPU 0 (6.1)" in out
    assert main(["lock", "--check", "pylock.toml", "--driver", "470.82.01", "--gpu", "8.9"]) == 2
    assert "< 525.60.13 (CUDA 12.x floor)" in capsys.readouterr().out


def test_why_reads_the_lock(cuda_index, empty_python, clean, capsys):
    assert lock(cuda_index, empty_python, "torch==2.7.1", "--driver", "550.144.03", "--gpu", "8.9") == 0
    capsys.readouterr()
    assert main(["why", "torch"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("torch==2.7.1+cu128: torch 2.7.1+cu128 is +cu128, built with CUDA 12.8")
    assert "  torch 2.7.1+cu118: older CUDA than +cu128, which runs here" in out
    assert main(["why", "numba"]) == 3
    assert "numba is not in pylock.toml" in capsys.readouterr().err


def test_deep_judges_wheels_the_table_lacks_by_reading_them(cuda_index, empty_python, clean):
    def torch_bytes() -> int:
        return sum(n for path, n in cuda_index.server.sent.items() if "/torch-2.7.1" in path and not path.endswith(".metadata"))

    before = torch_bytes()
    assert lock(cuda_index, empty_python, "torch==2.7.1", "--driver", "550.144.03", "--gpu", "8.9") == 0
    assert torch_bytes() == before  # metadata only: the table does not know the generated torch wheel
    assert lock(cuda_index, empty_python, "torch==2.7.1", "--driver", "550.144.03", "--gpu", "8.9", "--deep") == 0
    assert torch_bytes() > before  # read once for the judge
