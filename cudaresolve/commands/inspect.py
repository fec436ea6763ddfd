"""`cudaresolve inspect NAME...`: the ELF facts of files, directories, wheels, installed
distributions, wheel URLs and NAME==VERSION from the indexes.

May import: env/ (inspect, interpreter), index/inspect, output/inspect, commands/ (options, locking).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Optional

from cudaresolve.commands.locking import config_for, open_indexes
from cudaresolve.commands.options import indexes
from cudaresolve.commands.parser import INDEX_FLAGS
from cudaresolve.env.inspect import inspect_names
from cudaresolve.env.interpreter import target_for
from cudaresolve.errors import Exit
from cudaresolve.index.access import PackageIndex
from cudaresolve.output.inspect import render_json, render_text


def run(args: argparse.Namespace) -> int:
    target = target_for(python=args.python)
    where = indexes(args)
    if INDEX_FLAGS & {name for name, value in vars(args).items() if value is not None}:
        config_for(target, where, os.environ)  # a bad index value is bad input even when no name needs an index
    items = []
    index: Optional[PackageIndex] = None
    try:
        for name in args.paths:
            if os.path.exists(name) or not _is_index_name(name):
                items += inspect_names([name], target)
                continue
            from cudaresolve.index.inspect import inspect_index_name

            index = index or open_indexes(target, where, os.environ)
            items += inspect_index_name(index, name, deep=args.deep)
    finally:
        if index is not None:
            index.close()
    sys.stdout.write(render_json(items) if args.json else render_text(items))
    return Exit.OK if all(item.facts is not None for item in items) else Exit.PROBLEMS


def _is_index_name(name: str) -> bool:
    """A wheel URL or a requirement with a version (NAME==VERSION): read through the indexes (a local
    path wins). Any specifier counts, so `foo>=1` is told to name one version, not sought on disk."""
    return name.startswith(("http://", "https://", "file://")) or any(c in name for c in "<>=!~")
