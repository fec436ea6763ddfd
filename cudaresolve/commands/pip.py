"""`cudaresolve pip install ...`: pip's own arguments, read into the same LockInputs `lock` resolves,
then pip run with them plus what the lock decided (a constraints file, the index lines of the
indexes it chose, and abstract names made concrete). Any other pip command runs unchanged.

cudaresolve's own options come before pip's command (`--python`, `--torch-index-base`, `-q`); from
the first word that is not one of them, everything is pip's, which argparse cannot keep apart
(pip's own --version or --python), so they are read here.

May import: env/interpreter, errors, index/config, integrations/pip, lockfile/pip, resolve/ (inputs,
lock, requirements), errors, commands/.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from dataclasses import dataclass
from typing import Optional, Sequence, cast

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from cudaresolve.commands.host_options import stated_by
from cudaresolve.commands.hosts import THIS_HOST, probed_here
from cudaresolve.commands.locking import locked
from cudaresolve.commands.options import pip_configured, policy, say
from cudaresolve.commands.parser import build_parser
from cudaresolve.env.interpreter import Target, target_for
from cudaresolve.errors import UsageError
from cudaresolve.host.probe import host_for
from cudaresolve.index.config import IndexSettings, pip_number
from cudaresolve.integrations.pip import installs_elsewhere, ordered_options, pip_install_settings, split_install_arguments
from cudaresolve.integrations.pip import run as run_pip
from cudaresolve.lockfile.pip import constraints_txt
from cudaresolve.resolve.inputs import Indexes, LockInputs
from cudaresolve.resolve.lock import Lock
from cudaresolve.resolve.requirements import from_command_line, merge, read_requirements_file

PIP_COMMAND_LINE = "pip's command line"
# pip install's options that leave nothing to lock: pip gets the command as it was.
UNLOCKABLE = ("--editable", "--no-deps", "--no-index")
# pip install's options that install somewhere the lock does not read: refused rather than planned wrong.
ELSEWHERE = ("--prefix", "--root", "--user")


@dataclass(frozen=True)
class PipCommand:
    """`cudaresolve pip [ours] PIP-ARGS...` read: cudaresolve's options, then pip's words."""

    python: Optional[str]
    torch_index_base: Optional[str]
    quiet: bool
    arguments: tuple[str, ...]


def parse(words: Sequence[str]) -> PipCommand:
    """Our options first; from the first word that is not one of them, everything is pip's."""
    ours = {"--python": "python", "--torch-index-base": "torch_index_base"}
    values: dict[str, Optional[str]] = {"python": None, "torch_index_base": None}
    quiet = False
    position = 0
    while position < len(words):
        word = words[position]
        name, equals, value = word.partition("=")
        if name in ours and equals:
            values[ours[name]] = value
        elif word in ours and position + 1 < len(words):
            values[ours[word]] = words[position + 1]
            position += 1
        elif word in ("-q", "--quiet"):
            quiet = True
        elif word in ("-h", "--help") and position == 0:
            build_parser().parse_args(["pip", "--help"])
        else:
            break
        position += 1
    return PipCommand(values["python"], values["torch_index_base"], quiet, tuple(words[position:]))


def main(words: Sequence[str]) -> int:
    command = parse(words)
    target = target_for(python=command.python)
    assert target.python is not None  # an interpreter's target (no site_packages given) names it
    pip = [target.python, "-m", "pip"]
    if command.arguments[:1] != ("install",):
        return run_pip(pip + list(command.arguments))
    arguments = list(command.arguments[1:])
    positions, options = split_install_arguments(arguments)
    unlockable = [o for o in UNLOCKABLE if o in options]
    if unlockable or any(_is_direct(text) for _, text in positions) or "--help" in options:
        say(command.quiet, f"cudaresolve: passing to pip unchanged ({', '.join(unlockable) or 'nothing to lock'})")
        return run_pip(pip + list(command.arguments))
    elsewhere = [o for o in ELSEWHERE if o in options]
    if elsewhere:
        raise UsageError(f"pip's {elsewhere[0]} installs elsewhere than the site-packages the lock reads: "
                         "give --target, or run pip itself")
    settings = pip_install_settings(target, os.environ)
    configured = installs_elsewhere({key: value for key, value in settings.items() if key != "target"})
    if configured:
        raise UsageError(f"{configured}: unset it, or give --target on pip's command line")
    inputs = pip_lock_inputs(command, target, positions, options)
    if inputs.installed_at is None and "target" in settings:
        inputs = dataclasses.replace(inputs, installed_at=settings["target"][0])  # pip installs there, the lock reads it
    lock, _ = locked(inputs, os.environ, quiet=command.quiet)
    rewritten = list(arguments)
    for position, text in positions:
        replacement = concrete(text, lock)
        if replacement != text:
            rewritten[position] = replacement
            say(command.quiet, f"cudaresolve: {text} -> {replacement}")
    given = set(_values(options, "--index-url", "--extra-index-url"))
    extra = [url for url in lock.index_urls if url not in given]
    with tempfile.TemporaryDirectory(prefix="cudaresolve-pip-") as scratch:
        constraints = os.path.join(scratch, "constraints.txt")
        with open(constraints, "w", encoding="utf-8") as f:
            f.write(constraints_txt(lock, indexes=False))
        line = pip + ["install", *rewritten, "-c", constraints] + [w for url in extra for w in ("--extra-index-url", url)]
        conda = [p for p in lock.packages if p.provided_by]
        if conda:
            # pip would install these dependencies' wheels over conda's libraries: name every pin instead
            pins = sorted(f"{p.name}=={p.version}" for p in lock.packages if p.files)
            line += ["--no-deps", *pins]
            provided = ", ".join(f"{p.name} ({p.provided_by})" for p in conda)
            say(command.quiet, f"cudaresolve: conda provides {provided}: pip runs with --no-deps and every pin of the lock")
        say(command.quiet, "cudaresolve: " + " ".join(line))
        return run_pip(line)


def pip_lock_inputs(
    command: PipCommand, target: Target, positions: Sequence[tuple[int, str]], options: dict[str, list[str]]
) -> LockInputs:
    """The LockInputs pip's install arguments ask for: its requirements, -r and -c files, index
    options (each one pip has), --upgrade, --pre, --no-binary and --only-binary (in their order,
    after pip's configuration, as pip applies them), --prefer-binary and --target, and what pip's
    configuration chooses (its constraints files included); the host is this machine or the host
    variables."""
    environ = dict(os.environ)
    choices, configured = pip_configured(target, environ)
    formats = choices.formats
    for option, text in ordered_options(command.arguments[1:], ("--no-binary", "--only-binary")):
        formats = formats.applied(text, no_binary=option == "--no-binary", via=option)
    choices = dataclasses.replace(choices, formats=formats, prefer_binary=choices.prefer_binary or "--prefer-binary" in options)
    sets = [from_command_line([text for _, text in positions], PIP_COMMAND_LINE)]
    sets += [read_requirements_file(path, environ) for path in _values(options, "--requirement")]
    sets += configured
    sets += [read_requirements_file(path, environ, constraint=True) for path in _values(options, "--constraint")]
    asked = merge(sets)
    timeout, retries = _last(options, "--timeout"), _last(options, "--retries")
    settings = IndexSettings(
        index_url=_last(options, "--index-url"),
        extra_index_urls=tuple(_values(options, "--extra-index-url")) or None,
        find_links=tuple(_values(options, "--find-links")) or None,
        trusted_hosts=tuple(_values(options, "--trusted-host")) or None,
        cert=_last(options, "--cert"),
        client_cert=_last(options, "--client-cert"),
        # pip_number gives a float for "timeout" and an int for "retries" (it is typed object)
        timeout=None if timeout is None else cast(float, pip_number("timeout", timeout, "pip's --timeout")),
        retries=None if retries is None else cast(int, pip_number("retries", retries, "pip's --retries")),
        proxy=_last(options, "--proxy"),
        torch_index_base=command.torch_index_base,
    )
    fleet = ((THIS_HOST, host_for(overrides=stated_by(os.environ), environ=os.environ)),)
    return LockInputs(
        requirements=asked.requirements,
        constraints=asked.constraints,
        hosts=fleet,
        target=target,
        indexes=Indexes(settings=settings.over(asked.index_options)),
        policy=policy(choices, upgrade=bool(_values(options, "--upgrade")), pre="--pre" in options),
        installed_at=_last(options, "--target"),
        system_libraries=probed_here(fleet),
    )


def _values(options: dict[str, list[str]], *names: str) -> list[str]:
    return [value for name in names for value in options.get(name, [])]


def _last(options: dict[str, list[str]], *names: str) -> Optional[str]:
    values = _values(options, *names)
    return values[-1] if values else None


def _is_direct(text: str) -> bool:
    """A direct reference, a path or a URL: pip installs it as it is, there is nothing to lock."""
    return "@" in text or "/" in text or text.endswith((".whl", ".tar.gz", ".zip"))


def concrete(text: str, lock: Lock) -> str:
    """A requested name the lock made concrete: `cupy` -> `cupy-cuda12x`, `cuda-cccl` -> `cuda-cccl[cu12]`
    (the locked packages' `asked_as` and `added_extras`)."""
    try:
        requirement = Requirement(text)
    except InvalidRequirement:
        return text
    name = canonicalize_name(requirement.name)
    for package in lock.packages:
        if package.reason.asked_as == name:
            changed = Requirement(text.replace(requirement.name, package.name, 1))
            changed.extras = set(changed.extras) | set(package.reason.added_extras)  # cupy -> cupy-cuda12x[ctk]
            return str(changed)
        if package.name == name and package.reason.added_extras:
            changed = Requirement(text)
            changed.extras = set(requirement.extras) | set(package.reason.added_extras)
            return str(changed)
    return text
