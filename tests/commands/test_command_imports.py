"""A command starts by importing only what it uses: `--help` reads argparse's parser and nothing of
the pipeline, and each command's module is imported only when that command runs (cli.main). The
budgets count cudaresolve's modules as `python -X importtime` lists them, in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import hermetic_environ

# cudaresolve, cudaresolve.cli, .errors, .commands, .commands.parser, and .output with .output.docs
# (the docs' URL every help text names)
HELP_BUDGET = 7
# probe for a stated host: the host's readers and facts, the GPU and toolkit tables, output/host;
# none of the resolver, the index, the checks or the lock files
PROBE_BUDGET = 28


def imported(*argv: str) -> list[str]:
    """The cudaresolve modules `python -m cudaresolve ARGV...` imports, in order."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "cudaresolve", *argv],
                          capture_output=True, text=True, env=hermetic_environ(), timeout=60)
    names = [line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")]
    return [name for name in names if name == "cudaresolve" or name.startswith("cudaresolve.")]


@pytest.mark.parametrize("argv", [("--help",), ("lock", "--help"), ("probe", "--help"), ("install", "--help")])
def test_help_imports_only_the_parser(argv):
    modules = imported(*argv)
    assert "cudaresolve.commands.parser" in modules
    assert len(modules) <= HELP_BUDGET, modules


def test_probe_imports_no_resolver_index_or_checks():
    modules = imported("probe", "--driver", "550.144.03", "--gpu", "8.6", "--json")
    assert "cudaresolve.commands.hosts" in modules
    assert not [m for m in modules if m.split(".")[1:2] in (["resolve"], ["index"], ["checks"], ["lockfile"])], modules
    assert len(modules) <= PROBE_BUDGET, modules
