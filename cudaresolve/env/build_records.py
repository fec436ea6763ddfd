"""What a package's build recorded about the CUDA it was compiled against, read from a file it ships
(tensorflow/python/platform/build_info.py: `build_info = collections.OrderedDict([('cuda_version',
'12.5.1'), ('cudnn_version', '9'), ...])`).

The file is Python, but it is never imported or run: it is hostile input. At most RECORD_LIMIT bytes
are read, parsed with `ast`, and only a literal assigned to the named variable is taken (a dict, or
the list of pairs given to `OrderedDict(...)`/`dict(...)`), through `ast.literal_eval`; of it, only
string keys with string values. Anything else reads as no record.

May import: env/distributions, bounded and knowledge/ (components).
"""

from __future__ import annotations

import ast
import os
from typing import Iterable, Mapping, Optional

from cudaresolve.bounded import read_bounded
from cudaresolve.env.distributions import Distribution
from cudaresolve.knowledge import components

RECORD_LIMIT = 64 * 1024  # tensorflow 2.21.0's build_info.py is 1,145 bytes


def read_build_record(path: str, variable: str) -> Optional[dict[str, str]]:
    """The string fields of the literal `variable` is assigned in the file at `path`; None when the
    file is absent, too large or not Python, or assigns no such literal."""
    try:
        raw = read_bounded(path, RECORD_LIMIT, regular=True)  # a FIFO there would block a plain read
        tree = ast.parse(raw, filename=os.path.basename(path))
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    for node in tree.body:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == variable):
            return _fields(node.value)
    return None


def _fields(value: ast.expr) -> Optional[dict[str, str]]:
    """The string fields of a dict literal, or of `OrderedDict([...])` / `dict([...])` of pairs."""
    if (isinstance(value, ast.Call) and len(value.args) == 1 and not value.keywords
            and _called(value.func) in ("OrderedDict", "dict")):
        value = value.args[0]
    try:
        literal = ast.literal_eval(value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    pairs: Iterable[object] = literal.items() if isinstance(literal, dict) else literal if isinstance(literal, list) else ()
    fields = {}
    for pair in pairs:
        if isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str) and isinstance(pair[1], str):
            fields[pair[0]] = pair[1]
    return fields if fields or isinstance(literal, (dict, list)) else None


def _called(func: ast.expr) -> Optional[str]:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "collections":
        return func.attr
    return None


def build_records(distributions: Iterable[Distribution], site_packages: tuple[str, ...]) -> Mapping[str, Mapping[str, str]]:
    """distribution -> the fields its build record holds, for the distributions data/components.toml
    [build_records] names."""
    found = {}
    for dist in distributions:
        row = components.build_record(dist.name, dist.version)
        if row is None:
            continue
        record = next((fields for sp in site_packages
                       if (fields := read_build_record(os.path.join(sp, row.file), row.variable)) is not None), None)
        if record is not None:
            found[dist.name] = record
    return found
