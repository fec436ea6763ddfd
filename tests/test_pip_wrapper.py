"""`cudaresolve pip ...`: other pip commands run unchanged; `pip install` gets the lock as constraints,
the index lines it chose and abstract names made concrete; what cannot be locked goes to pip as is."""

from __future__ import annotations

import json
import os
import venv

import pytest

from cudaresolve.cli import main
from cudaresolve.integrations.pip import split_install_arguments


def test_install_arguments_are_told_from_option_values():
    requirements, options = split_install_arguments(
        ["-r", "req.txt", "torch", "--index-url=http://x/simple", "-cconstraints.txt", "--upgrade", "cupy[ctk]>=14", "--target", "dir"]
    )
    assert requirements == [(2, "torch"), (6, "cupy[ctk]>=14")]
    assert options == {"-r": ["req.txt"], "--index-url": ["http://x/simple"], "-c": ["constraints.txt"], "--upgrade": [""], "--target": ["dir"]}


@pytest.fixture(scope="module")
def pip_venv(tmp_path_factory):
    root = tmp_path_factory.mktemp("pip-venv")
    venv.EnvBuilder(with_pip=True).create(root)
    return str(root / "bin" / "python")


@pytest.fixture
def clean(monkeypatch, tmp_path):
    for key in [k for k in os.environ if k.startswith(("PIP_", "CUDARESOLVE_"))]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")  # pip leaves nothing in the user's cache: no HTTP cache,
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")  # no version-check state
    monkeypatch.setenv("CUDARESOLVE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CUDARESOLVE_DRIVER", "550.144.03")
    monkeypatch.setenv("CUDARESOLVE_GPUS", "8.6")


def test_other_commands_run_unchanged(pip_venv, capfd):
    assert main(["pip", "--python", pip_venv, "--version"]) == 0
    assert capfd.readouterr().out.startswith("pip ")
    assert main(["pip", "--python", pip_venv, "show", "no-such-distribution"]) == 1  # pip's own status


def test_install_adds_the_lock_and_makes_cupy_concrete(cuda_index, pip_venv, clean, tmp_path, capfd):
    report = tmp_path / "report.json"
    code = main(["pip", "--python", pip_venv, "--torch-index-base", cuda_index.torch_index_base, "install", "--dry-run",
                 "--index-url", cuda_index.index_url, "--report", str(report), "cupy"])
    err = capfd.readouterr().err
    assert code == 0, err
    assert "cudaresolve: cupy -> cupy-cuda12x" in err and " -c " in err
    chosen = {item["metadata"]["name"]: item["metadata"]["version"] for item in json.loads(report.read_text())["install"]}
    assert chosen["cupy-cuda12x"] == "14.2.0"


def test_install_of_an_editable_goes_to_pip_unchanged(pip_venv, clean, tmp_path, capfd):
    code = main(["pip", "--python", pip_venv, "install", "--dry-run", "-e", str(tmp_path / "missing-project")])
    assert code != 0  # pip's own refusal, passed through
    assert "passing to pip unchanged (-e)" in capfd.readouterr().err
