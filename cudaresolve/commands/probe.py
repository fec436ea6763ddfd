"""`cudaresolve probe`: the host's facts, as text or the host JSON.

May import: output/host, commands/ (host_options, hosts).
"""

from __future__ import annotations

import argparse
import sys

from cudaresolve.commands.host_options import host_options
from cudaresolve.commands.hosts import host
from cudaresolve.errors import Exit
from cudaresolve.output.host import render_host


def run(args: argparse.Namespace) -> int:
    facts = host(args, host_options(args))
    sys.stdout.write(facts.to_json() if args.json else render_host(facts))
    return Exit.OK
