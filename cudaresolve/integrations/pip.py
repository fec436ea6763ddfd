"""Running the target interpreter's own pip through its public command line: never imported, never
patched. The command is an argument list (no shell), pip's output streams to the user, and its exit
status is the caller's to return. What the lock decided reaches pip only as files pip reads itself
(pinned requirements with hashes, constraints) and index options. The wrapper's reading of pip's
own arguments is here too (`split_install_arguments`).

May import: env/interpreter, index/config (pip's configuration), inputs (bounded runs).
"""

from __future__ import annotations

import os
import subprocess
from typing import Mapping, Optional, Sequence

from cudaresolve.env.interpreter import Target, pip_command
from cudaresolve.index.config import pip_bool, pip_config_paths, pip_settings, read_pip_files
from cudaresolve.inputs import TooMuchOutput, run_bounded

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


# pip install's options that carry a value, by every spelling pip documents: the wrapper must know
# them to tell a requirement from an option's value; any other option passes through untouched.
VALUE_OPTIONS = frozenset({
    "-r", "--requirement", "-c", "--constraint", "-e", "--editable", "-t", "--target", "--platform",
    "--python-version", "--implementation", "--abi", "--root", "--prefix", "--src", "--upgrade-strategy",
    "-C", "--config-settings", "--global-option", "--no-binary", "--only-binary", "--progress-bar",
    "--root-user-action", "--report", "-i", "--index-url", "--extra-index-url", "-f", "--find-links",
    "--log", "--proxy", "--retries", "--timeout", "--exists-action", "--trusted-host", "--cert",
    "--client-cert", "--cache-dir", "--use-feature", "--use-deprecated", "--python", "--keyring-provider",
    "--resume-retries", "--group",
})


def split_install_arguments(arguments: Sequence[str]) -> tuple[list[tuple[int, str]], dict[str, list[str]]]:
    """pip install's arguments as (position, requirement) pairs and {option: values}, following
    pip's spellings (`-r FILE`, `--requirement=FILE`, `-rFILE`)."""
    requirements: list[tuple[int, str]] = []
    options: dict[str, list[str]] = {}
    position = 0
    while position < len(arguments):
        word = arguments[position]
        if word == "--":
            requirements += [(i, w) for i, w in enumerate(arguments[position + 1 :], position + 1)]
            break
        if word.startswith("--") and "=" in word:
            name, _, value = word.partition("=")
            options.setdefault(name, []).append(value)
        elif word in VALUE_OPTIONS and position + 1 < len(arguments):
            options.setdefault(word, []).append(arguments[position + 1])
            position += 1
        elif len(word) > 2 and word[:2] in VALUE_OPTIONS and not word.startswith("--"):
            options.setdefault(word[:2], []).append(word[2:])
        elif word.startswith("-"):
            options.setdefault(word, []).append("")
        else:
            requirements.append((position, word))
        position += 1
    return requirements, options
