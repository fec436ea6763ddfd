"""`doctor --import`: observe what `import` loads instead of modelling it, by running it.

This is the one place cudaresolve runs the target environment's own code (docs/security.md). For each
distribution that ships ELF files, one child process of the target's interpreter (`-I`: no user site,
no PYTHON* variables) imports the distribution's top-level modules (env/imports.py `top_modules`)
one after the other, then reports which failed, with the exception's type and words, and the shared
objects `/proc/self/maps` shows mapped. No GPU is needed: imports that reach the driver only when a
function is called still run. Each child is bounded: its data segment (RLIMIT_DATA, which counts
heap and anonymous mappings but not the libraries it maps), its time, and its output; it runs in a
session of its own and everything it starts is killed when it ends (bounded.run_bounded). The report
comes after a marker line the child is given on stdin, so what the imports print is not taken for it.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
from dataclasses import dataclass
from typing import Collection, Mapping, Optional, Sequence

from cudaresolve.bounded import TooMuchOutput, run_bounded
from cudaresolve.env.distributions import Distribution
from cudaresolve.env.imports import module_index, top_modules

TIMEOUT = 120.0  # seconds for one distribution's imports (torch on 2 CPUs: about 5)
MAX_DATA = 8 << 30  # bytes of heap and anonymous memory the child may take
MAX_OUTPUT = 8 << 20  # bytes of output kept; more stops the child
MAX_MODULES = 64  # top-level modules imported per distribution
MAX_MESSAGE = 2000  # characters of an exception's words kept
MAX_LOADED = 20000  # mapped shared objects kept

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")

# The child: a limit on its memory, the imports, then the marker and the report on stdout.
_CHILD = """
import importlib, json, os, resource, sys
marker, limit, modules = json.loads(sys.stdin.readline())
resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
failed = {}
for name in modules:
    try:
        importlib.import_module(name)
    except BaseException as exc:
        failed[name] = [type(exc).__name__, str(exc)[:%d]]
loaded = set()
with open("/proc/self/maps") as maps:
    for line in maps:
        fields = line.split(None, 5)
        if len(fields) == 6 and ".so" in fields[5]:
            loaded.add(fields[5].strip())
sys.stdout.flush()
os.write(1, ("\\n" + marker + json.dumps({"failed": failed, "loaded": sorted(loaded)}) + "\\n").encode())
""" % MAX_MESSAGE


@dataclass(frozen=True)
class ImportFailure:
    """A module whose import raised: the exception's type and words, as the target printed them."""

    module: str
    kind: str  # "ImportError", "OSError", ...
    message: str


@dataclass(frozen=True)
class Observed:
    """One distribution's import, run: what failed and what was mapped; `error` when it could not be
    observed (the child did not start, ran past its time or output, or gave no report)."""

    distribution: str
    modules: tuple[str, ...]
    failures: tuple[ImportFailure, ...] = ()
    loaded: frozenset[str] = frozenset()  # real paths of the shared objects mapped after the imports
    error: Optional[str] = None

    @property
    def imported(self) -> bool:
        return self.error is None and not self.failures


def observe_imports(
    python: str, distributions: Sequence[Distribution], shipping: Collection[str], site_packages: Sequence[str],
    environ: Mapping[str, str],
) -> dict[str, Observed]:
    """Each distribution of `shipping` (those that ship ELF files) with a module to import, its import
    run by `python`."""
    observed = {}
    for dist in distributions:
        if dist.name not in shipping or dist.kind != "python":
            continue
        index = module_index(dist.files, site_packages)
        modules = [name for name in top_modules(index) if _importable(index[name])][:MAX_MODULES]
        if modules:
            observed[dist.name] = _observe(python, dist.name, tuple(modules), environ)
    return observed


def _importable(path: str) -> bool:
    """A Python module or package, or an extension module tagged for an interpreter (`.cpython-311-
    x86_64-linux-gnu.so`, `.abi3.so`): not a library that happens to lie where a module could
    (`nvidia/cu13/lib/libcupti.so.13` under a namespace package)."""
    name = os.path.basename(path)
    return name.endswith(".py") or (name.endswith(".so") and name.count(".") >= 2)


def _observe(python: str, name: str, modules: tuple[str, ...], environ: Mapping[str, str]) -> Observed:
    marker = f"cudaresolve-observed-{secrets.token_hex(16)}:"
    question = (json.dumps([marker, MAX_DATA, list(modules)]) + "\n").encode()
    try:
        _, out, _ = run_bounded([python, "-I", "-c", _CHILD], question, TIMEOUT, MAX_OUTPUT, env=environ)
    except subprocess.TimeoutExpired:
        return Observed(name, modules, error=f"did not end within {TIMEOUT:.0f} s")
    except TooMuchOutput as exc:
        return Observed(name, modules, error=str(exc))
    except OSError as exc:
        return Observed(name, modules, error=f"cannot run {python}: {exc.strerror or exc}")
    report = _report(out, marker.encode())
    if report is None:
        return Observed(name, modules, error="the interpreter ended before its report (a crash, or an import that exits)")
    failed, loaded = report
    failures = tuple(ImportFailure(module, kind, message) for module, (kind, message) in sorted(failed.items())
                     if module in modules)
    return Observed(name, modules, failures, frozenset(os.path.realpath(path) for path in loaded[:MAX_LOADED]))


def _report(out: bytes, marker: bytes) -> Optional[tuple[dict[str, tuple[str, str]], list[str]]]:
    """The child's report after the last `marker`, validated; None when there is none usable."""
    at = out.rfind(b"\n" + marker)
    if at < 0:
        return None
    line = out[at + 1 + len(marker):].split(b"\n", 1)[0]
    try:
        value = json.loads(line)
        failed, loaded = value["failed"], value["loaded"]
    except (ValueError, TypeError, KeyError):
        return None
    if not isinstance(failed, dict) or not isinstance(loaded, list) or not all(isinstance(p, str) for p in loaded):
        return None
    checked = {}
    for module, entry in failed.items():
        if (not isinstance(entry, list) or len(entry) != 2 or not all(isinstance(part, str) for part in entry)):
            return None
        checked[module] = (_one_line(entry[0][:200]), _one_line(entry[1][:MAX_MESSAGE]))
    return checked, loaded


def _one_line(text: str) -> str:
    """The target's words as one printable line: a control character (an escape sequence a terminal
    would run, a newline) is shown as its code."""
    return _CONTROL.sub(lambda found: f"\\x{ord(found.group()):02x}", text)
