"""What the doctor's import models cost: parsed cold, and found in the import cache.

Usage: python scripts/bench_imports.py PYTHON [--runs N]

PYTHON is the target environment's interpreter (the torch venv the tests build). In this process,
for the distributions whose models the doctor builds (those shipping ELF files), medians of N runs
(default 3) of:
- cold: every model built by parsing (no cache), its user CPU, and the part of it in `ast.parse`;
- warm: every model from the import cache (env/import_cache.py) filled by a first run;
and, once, the Python files the models read, and how many of them hold none of the words a model
looks for (`import`, a library loader's name): what a byte pre-filter could spare `ast.parse`.
"""

from __future__ import annotations

import argparse
import ast
import re
import resource
import shutil
import statistics
import sys
import tempfile
import time

from cudaresolve.env import imports
from cudaresolve.env.import_cache import ImportModelCache, read_source
from cudaresolve.env.imports import build_model
from cudaresolve.env.interpreter import target_for
from cudaresolve.env.scan import _site_packages, owners_by_path


def user_cpu() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_utime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("python", help="the target environment's interpreter")
    parser.add_argument("--runs", type=int, default=3, help="runs per figure (default 3)")
    args = parser.parse_args()

    target = target_for(python=args.python)
    distributions, paths, _ = _site_packages(target.site_packages)
    owners = owners_by_path(distributions, set(paths))
    shipping = {names[0] for names in owners.values() if names}
    modelled = [d for d in distributions if d.name in shipping and d.kind == "python"]

    read: dict[str, str] = {}

    def recording(path: str, limit: int) -> str | None:
        text = read_source(path, limit)
        if text is not None and path.endswith(".py"):
            read[path] = text
        return text

    parsing = [0.0]
    parse = ast.parse

    def timed_parse(*args: object, **kwargs: object) -> ast.AST:
        start = time.perf_counter()
        try:
            return parse(*args, **kwargs)
        finally:
            parsing[0] += time.perf_counter() - start

    imports.ast.parse = timed_parse
    cold, parsed = [], []
    for _ in range(args.runs):
        parsing[0], start = 0.0, user_cpu()
        for dist in modelled:
            build_model(dist.files, target.site_packages, recording)
        cold.append(user_cpu() - start)
        parsed.append(parsing[0])
    imports.ast.parse = parse

    scratch = tempfile.mkdtemp(prefix="bench-imports-")
    warm = []
    try:
        for dist in modelled:
            ImportModelCache(scratch).model(dist.files, target.site_packages)
        for _ in range(args.runs):
            cache, start = ImportModelCache(scratch), user_cpu()
            for dist in modelled:
                cache.model(dist.files, target.site_packages)
            assert cache.parsed == 0
            warm.append(user_cpu() - start)
    finally:
        shutil.rmtree(scratch)

    words = re.compile("|".join(["import", *sorted(imports._LOADERS)]))
    plain = [path for path, text in read.items() if not words.search(text)]
    spared = sum(statistics.median(timeit(text) for _ in range(3)) for text in (read[p] for p in plain))
    every = sum(timeit(text) for text in read.values())
    print(f"{len(modelled)} distributions modelled, {len(read)} Python files read ({sum(map(len, read.values())) / 1e6:.1f} MB)")
    print(f"cold: {statistics.median(cold):.2f} s user CPU, ast.parse {statistics.median(parsed):.2f} s of it (wall)")
    print(f"warm, from the import cache: {statistics.median(warm):.3f} s user CPU")
    print(f"files with no import or loader word: {len(plain)}, {spared:.3f} s of {every:.2f} s of ast.parse")
    return 0


def timeit(text: str) -> float:
    start = time.perf_counter()
    ast.parse(text)
    return time.perf_counter() - start


if __name__ == "__main__":
    sys.exit(main())
