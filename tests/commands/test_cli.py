"""The exit-code contract (docs/cli.md), the same for every command: whatever stops a command is 3,
one `cudaresolve: error:` line on stderr and nothing on stdout, a bad command line included."""

from __future__ import annotations

import pytest

from cudaresolve.cli import main

HOST_OVERRIDES = ("CUDARESOLVE_DRIVER", "CUDARESOLVE_CUDA", "CUDARESOLVE_GPUS", "CONDA_OVERRIDE_CUDA",
                  "CONDA_OVERRIDE_CUDA_ARCH", "UV_CUDA_DRIVER_VERSION")


@pytest.fixture(autouse=True)
def clean_environ(monkeypatch, tmp_path):
    for name in HOST_OVERRIDES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CUDARESOLVE_CACHE_DIR", str(tmp_path / "cache"))  # the doctor's results stay out of the user's cache
    return monkeypatch


def could_not_run(capsys, argv: list[str]) -> str:
    """Run argv, check it is exit 3 with one stderr line and no stdout, and return that line's reason."""
    code = main(argv)
    out, err = capsys.readouterr()
    assert (code, out, err.count("\n")) == (3, "", 1), (argv, code, out, err)
    assert err.startswith("cudaresolve: error: ")
    return err[len("cudaresolve: error: "):-1]


@pytest.fixture
def commands(tmp_path):
    """Each command with arguments that would otherwise run (doctor on an empty site-packages)."""
    return {
        "probe": ["probe", "--driver", "550.144.03", "--gpu", "8.6"],
        "inspect": ["inspect", "/bin/sh"],
        "doctor": ["doctor", "--site-packages", str(tmp_path), "--driver", "550.144.03", "--gpu", "8.6"],
    }


@pytest.mark.parametrize("command", ["probe", "inspect", "doctor"])
def test_an_unknown_flag_could_not_run(capsys, commands, command):
    assert could_not_run(capsys, [*commands[command], "--frobnicate"]).startswith(
        "unrecognized arguments: --frobnicate"
    )


@pytest.mark.parametrize(
    "argv, reason",
    [
        (["probe", "--gpu"], "argument --gpu: expected one argument (see 'cudaresolve probe --help')"),
        (["inspect"], "the following arguments are required: NAME (see 'cudaresolve inspect --help')"),
        (["doctor", "--python"], "argument --python: expected one argument (see 'cudaresolve doctor --help')"),
        (["uninstall"], "argument COMMAND: invalid choice: 'uninstall' (choose from 'probe', 'inspect', 'doctor', "
                        "'lock', 'install', 'pip', 'why') (see 'cudaresolve --help')"),
    ],
)
def test_a_missing_argument_or_unknown_command_could_not_run(capsys, argv, reason):
    assert could_not_run(capsys, argv) == reason


@pytest.mark.parametrize("command", ["probe", "doctor"])
def test_a_bad_host_option_variable_or_file_could_not_run(capsys, clean_environ, commands, tmp_path, command):
    argv = commands[command]
    assert could_not_run(capsys, [*argv, "--gpu", "99.9"]) == (
        "--gpu: unknown compute capability 99.9 (known majors: 3, 5, 6, 7, 8, 9, 10, 11, 12)"
    )
    assert could_not_run(capsys, [*argv, "--driver", "abc"]).startswith("--driver: 'abc' is not a driver release")
    host = tmp_path / "host.json"
    host.write_text("{")
    assert could_not_run(capsys, [command, "--host", str(host)]).startswith(f"--host {host}: not valid JSON")
    clean_environ.setenv("CONDA_OVERRIDE_CUDA", "twelve")
    assert could_not_run(capsys, [command, "--gpu", "8.6"]).startswith("CONDA_OVERRIDE_CUDA: 'twelve' is not")


@pytest.mark.parametrize("command", ["probe", "doctor"])
def test_an_unlisted_minor_of_a_known_major_runs(capsys, commands, command):
    assert main([*commands[command], "--gpu", "8.8"]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("command", ["inspect", "doctor"])
def test_a_missing_interpreter_could_not_run(capsys, tmp_path, command):
    missing = tmp_path / "nope" / "python"
    paths = ["/bin/sh"] if command == "inspect" else []
    assert could_not_run(capsys, [command, "--python", str(missing), *paths]) == f"interpreter {missing} does not exist"


@pytest.mark.parametrize("argv", [["--help"], ["doctor", "--help"], ["--version"]])
def test_help_and_version_return_0(capsys, argv):
    assert main(argv) == 0
    assert capsys.readouterr().out
