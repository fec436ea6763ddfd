"""Running the target interpreter's own pip through its public command line: never imported, never
patched. The command is an argument list (no shell), pip's output streams to the user, and its exit
status is the caller's to return. What the lock decided reaches pip only as files pip reads itself
(pinned requirements with hashes, constraints) and index options. The wrapper's reading of pip's
own arguments is here too (`split_install_arguments`).

May import: env/interpreter, errors, index/config (pip's configuration), bounded (bounded runs).
"""

from __future__ import annotations

import os
import subprocess
from typing import Mapping, Optional, Sequence

from cudaresolve.bounded import TooMuchOutput, run_bounded
from cudaresolve.env.interpreter import Target, pip_command
from cudaresolve.errors import UsageError
from cudaresolve.index.config import pip_bool, pip_config_paths, pip_settings, read_pip_files

PIP_TIMEOUT = 120.0  # pip's own start and refusal take a second; a hung pip must not hang us
PIP_OUTPUT_LIMIT = 1024 * 1024


def pip_install_command(python: str, requirements_file: str, *, target_dir: Optional[str] = None, prefix: Optional[str] = None) -> list[str]:
    """`PY -m pip install` of exactly a lock: every pin hash-checked, nothing resolved again (--no-deps:
    the lock already holds the closure)."""
    command = [python, "-m", "pip", "install", "--require-hashes", "--no-deps", "-r", requirements_file]
    if target_dir:
        command += ["--target", target_dir]
    if prefix:
        command += ["--prefix", prefix]
    return command


def run(command: Sequence[str]) -> int:
    """Run pip with its output on this terminal; its exit status."""
    try:
        return subprocess.call(list(command))
    except OSError as exc:
        return _cannot_start(command, exc)


def _cannot_start(command: Sequence[str], exc: OSError) -> int:
    print(f"cudaresolve: cannot run {command[0]}: {exc.strerror or exc}", flush=True)
    return 127


# pip install's options that its configuration (files and PIP_* variables) may set and that change
# what `install` reproduces: where pip installs, and whether it honours PEP 668.
_INSTALL_SETTINGS = {name: name for name in ("break-system-packages", "target", "prefix", "root", "user")}


def pip_install_settings(target: Target, environ: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """{option: (text, origin)} of _INSTALL_SETTINGS as the target's pip reads its configuration for install."""
    files = read_pip_files(pip_config_paths(target.prefix or "", environ))
    return pip_settings(files, environ, "install", _INSTALL_SETTINGS)


def installs_elsewhere(settings: Mapping[str, tuple[str, str]]) -> Optional[str]:
    """Why pip, so configured, would install somewhere other than the target's site-packages that the
    plan reads (--target, --prefix, --root, --user set in its configuration); None when it would not."""
    for key in ("target", "prefix", "root", "user"):
        if key in settings:
            text, origin = settings[key]
            if key != "user" or pip_bool(key, text, origin):
                return f"pip's configuration sets {key} ({origin}), so pip would install elsewhere than the plan"
    return None


def externally_managed(target: Target, settings: Mapping[str, tuple[str, str]]) -> Optional[str]:
    """The path of the target's PEP 668 marker when pip would refuse to install into it (not a venv,
    EXTERNALLY-MANAGED in its stdlib directory, break-system-packages not set in pip's `settings`);
    None when installing is allowed."""
    if target.venv or not target.stdlib:
        return None
    if "break-system-packages" in settings and pip_bool("break-system-packages", *settings["break-system-packages"]):
        return None
    marker = os.path.join(target.stdlib, "EXTERNALLY-MANAGED")
    return marker if os.path.isfile(marker) else None


def pips_refusal(target: Target) -> tuple[int, str]:
    """pip's own words for an externally-managed interpreter: a dry run pip refuses before resolving,
    run without site (none of the target's .pth files or sitecustomize runs) and bounded like any
    answer of the target."""
    assert target.python is not None  # an interpreter's target
    command = pip_command(target.python, target.site_packages, ["install", "--dry-run", "--no-index", "--no-deps", "cudaresolve-pep668-check"])
    try:
        status, out, err = run_bounded(command, b"", PIP_TIMEOUT, PIP_OUTPUT_LIMIT)
    except (OSError, subprocess.TimeoutExpired, TooMuchOutput) as exc:
        return 1, f"cudaresolve: {target.python} is externally managed (PEP 668), and its pip did not say so ({exc})"
    return status or 1, (err or out).decode("utf-8", "replace").strip()


# Every option `pip install` takes (its own and pip's general ones), each as its spellings (the first
# long one is the name the wrapper uses) and whether it takes a value; from pip 23.0 to 25.1's
# option parser (`pip install --help`, and the aliases it hides). pip's parser (optparse) takes any
# unique prefix of a long option for it (`--prefi=DIR` is `--prefix`), so the wrapper reads them the
# same way; a long option not in this table is refused rather than guessed at.
_INSTALL_OPTIONS: tuple[tuple[tuple[str, ...], bool], ...] = (
    # pip install's own
    (("-r", "--requirement"), True), (("-c", "--constraint"), True), (("-e", "--editable"), True),
    (("-t", "--target"), True), (("--platform",), True), (("--python-version",), True),
    (("--implementation",), True), (("--abi",), True), (("--root",), True), (("--prefix",), True),
    (("--src", "--source", "--source-dir", "--source-directory"), True), (("--upgrade-strategy",), True),
    (("-C", "--config-settings"), True), (("--global-option",), True), (("--install-option",), True),
    (("--no-binary",), True), (("--only-binary",), True), (("--progress-bar",), True),
    (("--root-user-action",), True), (("--report",), True), (("--group",), True),
    (("-i", "--index-url", "--pypi-url"), True), (("--extra-index-url",), True), (("-f", "--find-links"), True),
    (("--dry-run",), False), (("--user",), False), (("--no-user",), False), (("-U", "--upgrade"), False),
    (("--force-reinstall",), False), (("-I", "--ignore-installed"), False), (("--ignore-requires-python",), False),
    (("--no-build-isolation",), False), (("--use-pep517",), False), (("--no-use-pep517",), False),
    (("--check-build-dependencies",), False), (("--break-system-packages",), False), (("--compile",), False),
    (("--no-compile",), False), (("--no-warn-script-location",), False), (("--no-warn-conflicts",), False),
    (("--prefer-binary",), False), (("--require-hashes",), False), (("--no-clean",), False),
    (("--no-index",), False), (("--pre",), False), (("--no-deps", "--no-dependencies"), False),
    # pip's general options, which every command takes
    (("--python",), True), (("--log", "--log-file", "--local-log"), True), (("--keyring-provider",), True),
    (("--proxy",), True), (("--retries",), True), (("--resume-retries",), True),
    (("--timeout", "--default-timeout"), True), (("--exists-action",), True), (("--trusted-host",), True),
    (("--cert",), True), (("--client-cert",), True), (("--cache-dir",), True), (("--use-feature",), True),
    (("--use-deprecated",), True), (("-h", "--help"), False), (("--debug",), False), (("--isolated",), False),
    (("--require-virtualenv", "--require-venv"), False), (("-v", "--verbose"), False), (("-V", "--version"), False),
    (("-q", "--quiet"), False), (("--no-input",), False), (("--no-cache-dir",), False),
    (("--disable-pip-version-check",), False), (("--no-color",), False), (("--no-python-version-warning",), False),
)
# spelling -> (the wrapper's name for it, takes a value)
_SPELLINGS = {
    spelling: (next(s for s in spellings if s.startswith("--")), takes_value)
    for spellings, takes_value in _INSTALL_OPTIONS
    for spelling in spellings
}
_LONG = sorted(spelling for spelling in _SPELLINGS if spelling.startswith("--"))


def long_option(given: str) -> str:
    """The long option `given` names as pip's parser reads it: itself, or the one long option it is a
    prefix of; a UsageError when it names none or several."""
    if given in _SPELLINGS:
        return given
    matches = [spelling for spelling in _LONG if spelling.startswith(given)]
    if len(matches) == 1:  # optparse's rule: two spellings of one option are ambiguous too
        return matches[0]
    if matches:
        raise UsageError(f"pip install option {given} is ambiguous ({', '.join(matches)}): spell it out")
    raise UsageError(f"pip install option {given} is not one cudaresolve knows: spell it out, or run pip itself")


def split_install_arguments(arguments: Sequence[str]) -> tuple[list[tuple[int, str]], dict[str, list[str]]]:
    """pip install's arguments as (position, requirement) pairs and {option: values}, read as pip's
    parser reads them: `-r FILE`, `--requirement=FILE`, `-rFILE`, `-Ur FILE`, `--req FILE`. Each
    option is keyed by its long name (`--requirement`), a flag's value is ""; an option pip would
    not take (unknown, ambiguous, a value missing or given to a flag) is a UsageError."""
    requirements: list[tuple[int, str]] = []
    options: dict[str, list[str]] = {}
    for position, name, value in _read_install_arguments(arguments):
        if name is None:
            requirements.append((position, value))
        else:
            options.setdefault(name, []).append(value)
    return requirements, options


def ordered_options(arguments: Sequence[str], names: Sequence[str]) -> list[tuple[str, str]]:
    """The (option, value) pairs of `names` (long names) in the order pip's parser meets them, which
    matters where one option edits what another set (--no-binary and --only-binary)."""
    return [(name, value) for _, name, value in _read_install_arguments(arguments) if name is not None and name in names]


def _read_install_arguments(arguments: Sequence[str]) -> list[tuple[int, Optional[str], str]]:
    """(position, long option name, value) per option and (position, None, word) per requirement, in order."""
    found: list[tuple[int, Optional[str], str]] = []
    position = 0

    def value_at(name: str, position: int) -> str:
        if position >= len(arguments):
            raise UsageError(f"pip install option {name} needs a value")
        return arguments[position]

    while position < len(arguments):
        word = arguments[position]
        if word == "--":
            found += [(i, None, w) for i, w in enumerate(arguments[position + 1 :], position + 1)]
            break
        if word.startswith("--"):
            given, equals, value = word.partition("=")
            name, takes_value = _SPELLINGS[long_option(given)]
            if takes_value and not equals:
                position += 1
                value = value_at(name, position)
            elif equals and not takes_value:
                raise UsageError(f"pip install option {name} takes no value ({word})")
            found.append((position, name, value))
        elif word.startswith("-") and word != "-":
            for at in range(1, len(word)):  # a cluster of short options: -Uq, -rFILE, -Ur FILE
                if "-" + word[at] not in _SPELLINGS:
                    raise UsageError(f"pip install option -{word[at]} (in {word}) is not one cudaresolve knows")
                name, takes_value = _SPELLINGS["-" + word[at]]
                if not takes_value:
                    found.append((position, name, ""))
                    continue
                if at + 1 < len(word):
                    value = word[at + 1 :]
                else:
                    position += 1
                    value = value_at(name, position)
                found.append((position, name, value))
                break
        else:
            found.append((position, None, word))
        position += 1
    return found
