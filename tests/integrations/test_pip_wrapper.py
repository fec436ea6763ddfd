"""`cudaresolve pip ...`: other pip commands run unchanged; `pip install` gets the lock as constraints,
the index lines it chose and abstract names made concrete; what cannot be locked goes to pip as is."""

from __future__ import annotations

import json

import pytest

from cudaresolve.cli import main
from cudaresolve.commands import pip as pip_command
from cudaresolve.errors import UsageError
from cudaresolve.integrations.pip import split_install_arguments


def test_install_arguments_are_told_from_option_values():
    requirements, options = split_install_arguments(
        ["-r", "req.txt", "torch", "--index-url=http://x/simple", "-cconstraints.txt", "--upgrade", "cupy[ctk]>=14", "--target", "dir"]
    )
    assert requirements == [(2, "torch"), (6, "cupy[ctk]>=14")]
    assert options == {"--requirement": ["req.txt"], "--index-url": ["http://x/simple"], "--constraint": ["constraints.txt"],
                       "--upgrade": [""], "--target": ["dir"]}


def test_options_are_read_as_pips_parser_reads_them():
    """A unique prefix of a long option is that option (optparse's rule, which pip uses); short
    options cluster; aliases are one option."""
    _, options = split_install_arguments(["--prefi=DIR", "--index-u", "http://x/simple", "-Uqt/t", "--no-dependencies", "--pypi-url=u"])
    assert options == {"--prefix": ["DIR"], "--index-url": ["http://x/simple", "u"], "--upgrade": [""], "--quiet": [""],
                       "--target": ["/t"], "--no-deps": [""]}
    for words, words_said in ((["--pr", "x"], "is ambiguous"), (["--no-dep"], "is ambiguous"), (["--no-such-option"], "is not one"),
                              (["--no-deps=1"], "takes no value"), (["--requirement"], "needs a value"), (["-Z"], "is not one")):
        with pytest.raises(UsageError, match=words_said):
            split_install_arguments(words)


def test_the_option_table_is_pips():
    """Every spelling this pip's install parser takes is in the table, taking a value as pip's does."""
    from pip._internal.commands import create_command

    from cudaresolve.integrations.pip import _SPELLINGS

    for option in create_command("install").parser._get_all_options():
        for spelling in option._short_opts + option._long_opts:
            assert _SPELLINGS[spelling][1] == option.takes_value(), spelling


@pytest.fixture(scope="module")
def pip_venv(tmp_path_factory, venv_with_pip):
    root = venv_with_pip(tmp_path_factory.mktemp("pip-venv") / "venv")
    return str(root / "bin" / "python")


@pytest.fixture
def clean(hermetic, monkeypatch):
    """Hermetic, with the host in the variables `cudaresolve pip` reads: driver 550, a GPU of 8.6; pip
    keeps no HTTP cache and no version-check state in the user's cache."""
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
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
    assert "passing to pip unchanged (--editable)" in capfd.readouterr().err


def test_pips_arguments_are_the_same_lock_inputs_with_every_index_option(tmp_path, clean, monkeypatch):
    """pip install's words become the LockInputs `lock` resolves: its requirements with their origin,
    -r and -c files, every index option pip has (trusted hosts, certificates, timeout, retries,
    proxy included) over the files' index lines, --upgrade and --target."""
    from cudaresolve.commands.pip import PipCommand, pip_lock_inputs
    from cudaresolve.env.interpreter import target_for
    from cudaresolve.index.config import IndexSettings
    from cudaresolve.resolve.reasons import Asked, Constrained

    (tmp_path / "r.txt").write_text("--trusted-host files.invalid\n--extra-index-url https://e.invalid/simple\nnumpy<3\n")
    (tmp_path / "c.txt").write_text("scipy<2\n")
    arguments = ["-r", str(tmp_path / "r.txt"), "-c", str(tmp_path / "c.txt"), "--index-url", "https://i.invalid/simple",
                 "--trusted-host", "i.invalid", "--cert", "/ca.pem", "--client-cert", "/me.pem", "--timeout", "7",
                 "--retries", "2", "--proxy", "http://proxy.invalid:3128", "-U", "--target", str(tmp_path / "t"), "cupy"]
    positions, options = split_install_arguments(arguments)
    command = PipCommand(None, "https://t.invalid", True, ("install", *arguments))
    inputs = pip_lock_inputs(command, target_for(), positions, options)
    assert [(str(n.requirement), n.origin) for n in inputs.requirements] == [
        ("cupy", Asked("pip's command line")), ("numpy<3", Asked(f"{tmp_path / 'r.txt'}:3"))]
    assert [(str(n.requirement), n.origin) for n in inputs.constraints] == [("scipy<2", Constrained(f"{tmp_path / 'c.txt'}:1"))]
    assert inputs.indexes.settings == IndexSettings(
        index_url="https://i.invalid/simple", extra_index_urls=("https://e.invalid/simple",), trusted_hosts=("i.invalid",),
        cert="/ca.pem", client_cert="/me.pem", timeout=7.0, retries=2, proxy="http://proxy.invalid:3128",
        torch_index_base="https://t.invalid")
    assert inputs.policy.upgrade and inputs.installed_at == str(tmp_path / "t")
    assert [label for label, _ in inputs.hosts] == ["this host"] and str(inputs.hosts[0][1].driver.release) == "550.144.03"


@pytest.mark.parametrize("given", [["--user"], ["--prefix", "{tmp}/p"], ["--root", "{tmp}/r"], ["--prefi={tmp}/p"], ["--us"],
                                   "PIP_PREFIX={tmp}/p", "PIP_ROOT={tmp}/r", "PIP_USER=yes"])
def test_an_install_elsewhere_than_the_locked_site_packages_is_refused_before_anything(
        pip_venv, clean, tmp_path, monkeypatch, capsys, given):
    """pip would install where the lock did not read the installed set: exit 3 before locking."""
    monkeypatch.setattr(pip_command, "locked", lambda *a, **k: pytest.fail("locked anyway"))
    options = []
    if isinstance(given, str):
        name, value = given.split("=", 1)
        monkeypatch.setenv(name, value.format(tmp=tmp_path))
    else:
        options = [word.format(tmp=tmp_path) for word in given]
    assert main(["pip", "--python", pip_venv, "install", *options, "cupy"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("cudaresolve: error: ") and err.count("\n") == 1, err
    assert not (tmp_path / "p").exists()


def test_an_abbreviated_index_option_is_the_index_the_lock_reads(pip_venv, clean, monkeypatch):
    seen = []

    def locked(inputs, environ, quiet):
        seen.append(inputs.indexes.settings.index_url)
        raise Stop

    monkeypatch.setattr(pip_command, "locked", locked)
    with pytest.raises(Stop):
        main(["pip", "--python", pip_venv, "install", "--index-u=http://127.0.0.1:9/simple", "cupy"])
    assert seen == ["http://127.0.0.1:9/simple"]


class Stop(Exception):
    """Ends a command where the test has seen what it needs."""


def test_a_target_in_pips_configuration_is_where_the_lock_reads_the_installed_set(pip_venv, clean, tmp_path, monkeypatch):
    seen = []

    def locked(inputs, environ, quiet):
        seen.append(inputs.installed_at)
        raise Stop

    monkeypatch.setattr(pip_command, "locked", locked)
    monkeypatch.setenv("PIP_TARGET", str(tmp_path / "t"))
    with pytest.raises(Stop):
        main(["pip", "--python", pip_venv, "install", "cupy"])
    assert seen == [str(tmp_path / "t")]
