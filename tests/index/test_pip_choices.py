"""pip's configuration beyond the indexes (index/choices.py): constraint, pre, no-binary/only-binary,
prefer-binary and upgrade-strategy, read as pip reads them. Real pip is the oracle: each scenario's
files and variables are given to pip's own install command, whose parsed options must say what
`pip_choices` says, and `pip config debug` must list the same files and values the reader reads."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from conftest import hermetic_environ

from cudaresolve.errors import UsageError
from cudaresolve.index.choices import Formats, UpgradeStrategy, pip_choices
from cudaresolve.index.config import pip_config_paths, read_pip_files

# pip's own reading of its configuration: the options its install command parses from no arguments.
PIPS_READING = r"""
import json
from pip._internal.commands import create_command
options, _ = create_command("install").parse_args([])
formats = options.format_control
print(json.dumps({
    "constraints": options.constraints, "pre": options.pre, "prefer_binary": options.prefer_binary,
    "upgrade_strategy": options.upgrade_strategy,
    "no_binary": sorted(formats.no_binary), "only_binary": sorted(formats.only_binary),
}))
"""


def environ_for(tmp_path, config: str, variables: dict[str, str]) -> dict[str, str]:
    """A child's environment reading `config` as PIP_CONFIG_FILE, no user or XDG files of this machine."""
    path = tmp_path / "pip.conf"
    path.write_text(config)
    (tmp_path / "home").mkdir(exist_ok=True)
    return hermetic_environ({
        "PIP_CONFIG_FILE": str(path), "HOME": str(tmp_path / "home"), "XDG_CONFIG_DIRS": str(tmp_path / "xdg"),
        "XDG_CONFIG_HOME": str(tmp_path / "home" / ".config"), **variables,
    })


def ours(environ: dict[str, str]) -> dict[str, object]:
    choices = pip_choices(read_pip_files(pip_config_paths(sys.prefix, environ)), environ)
    return {
        "constraints": [c.path for c in choices.constraints], "pre": choices.pre, "prefer_binary": choices.prefer_binary,
        "upgrade_strategy": choices.upgrade_strategy.value,
        "no_binary": sorted(choices.formats.no_binary), "only_binary": sorted(choices.formats.only_binary),
    }


def pips(environ: dict[str, str]) -> dict[str, object]:
    result = subprocess.run([sys.executable, "-c", PIPS_READING], capture_output=True, text=True, env=environ, check=True)
    return json.loads(result.stdout)


SCENARIOS = {
    "files only": ("[global]\nconstraint = a.txt b.txt\npre = yes\n", {}),
    "install beats global, variables beat both": (
        "[global]\nconstraint = a.txt\npre = true\n[install]\nconstraint = b.txt\nprefer-binary = on\n",
        {"PIP_CONSTRAINT": "c.txt  d.txt", "PIP_PRE": "0", "PIP_UPGRADE_STRATEGY": "eager"},
    ),
    "formats edit each other in pip's order": (
        "[global]\nno-binary = :all:\n[install]\nonly-binary = foo,Bar_baz\n",
        {"PIP_NO_BINARY": ":none:,qux,foo"},
    ),
    "all binary but one": ("[global]\nonly-binary = :all:\n", {"PIP_NO_BINARY": "Demo.Pkg"}),
    "another command's section is not read": ("[download]\npre = yes\nconstraint = x.txt\n[freeze]\nno-binary = :all:\n", {}),
}


@pytest.mark.parametrize("config, variables", SCENARIOS.values(), ids=SCENARIOS.keys())
def test_reads_what_pip_reads(tmp_path, config, variables):
    environ = environ_for(tmp_path, config, variables)
    assert ours(environ) == pips(environ)


def test_the_files_and_values_are_those_pip_config_debug_lists(tmp_path):
    environ = environ_for(tmp_path, "[global]\nconstraint = a.txt\n[install]\npre = yes\nno-binary = demo\n", {})
    user = tmp_path / "home" / ".config" / "pip"
    user.mkdir(parents=True)
    (user / "pip.conf").write_text("[global]\nprefer-binary = yes\n")  # a user file: PIP_CONFIG_FILE replaces it
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "debug"], capture_output=True, text=True, env=environ, check=True)
    shown: set[tuple[str, str, str]] = set()
    current = None
    for line in listed.stdout.splitlines():
        found = re.match(r"^  (\S.*), exists: (True|False)$", line)
        if found:
            current = found.group(1) if found.group(2) == "True" else None
        elif current and re.match(r"^    \S", line):
            key, _, value = line.strip().partition(": ")
            shown.add((current, key, value))
    read = {
        (f.path, f"{section}.{name}", value)
        for f in read_pip_files(pip_config_paths(sys.prefix, environ))
        for section, items in f.sections.items()
        for name, value in items.items()
    }
    assert read == shown
    assert (str(tmp_path / "pip.conf"), "global.constraint", "a.txt") in read


def test_origins_name_the_setting_and_no_binary_the_one_that_set_it(tmp_path):
    environ = environ_for(tmp_path, "[global]\nconstraint = a.txt\nno-binary = demo\n", {"PIP_PRE": "yes"})
    choices = pip_choices(read_pip_files(pip_config_paths(sys.prefix, environ)), environ)
    where = f"{tmp_path / 'pip.conf'} [global]"
    assert [(c.path, c.via) for c in choices.constraints] == [("a.txt", where)]
    assert dict(choices.origins) == {"constraint": where, "no-binary": where, "pre": "PIP_PRE"}
    assert choices.formats.wheels_refused("Demo") and choices.formats.no_binary_via == where
    assert not choices.formats.wheels_refused("other")


def test_formats_follow_pips_precedence():
    formats = Formats().applied(":all:", no_binary=True, via="a").applied("keep", no_binary=False, via="b")
    assert formats.wheels_refused("anything") and not formats.wheels_refused("keep")
    assert not Formats().applied(":all:", no_binary=False, via="a").wheels_refused("x")


@pytest.mark.parametrize("variables, message", [
    ({"PIP_PRE": "maybe"}, "pre: 'maybe' (from PIP_PRE) is not a boolean"),
    ({"PIP_UPGRADE_STRATEGY": "always"}, "upgrade-strategy: 'always' (from PIP_UPGRADE_STRATEGY) is not one of only-if-needed, eager"),
    ({"PIP_NO_BINARY": "-x"}, "no-binary: '-x' (from PIP_NO_BINARY): a name, :all: or :none: is needed"),
])
def test_a_value_pip_refuses_is_refused(variables, message):
    with pytest.raises(UsageError, match=re.escape(message)):
        pip_choices((), variables)


def test_nothing_configured_is_pips_default():
    choices = pip_choices((), {"PIP_CONFIG_FILE": os.devnull})
    assert (choices.constraints, choices.pre, choices.formats, choices.upgrade_strategy) == ((), False, Formats(), UpgradeStrategy.ONLY_IF_NEEDED)
