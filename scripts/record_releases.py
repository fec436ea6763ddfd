"""Rewrite the [releases] table of data/advisories.toml: every release on the index of each
distribution an advisory's `affects` or `fixed_in` names.

Usage: python scripts/record_releases.py
Asks `pip index versions NAME` (pip's own index configuration) for each name; the table is what
tests/knowledge/test_knowledge.py checks every advisory's bounds against, so that none can fire on a release
it does not affect or name a fixed release the index does not have.
"""

from __future__ import annotations

import datetime
import re
import subprocess
import sys
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

DATA = Path(__file__).resolve().parent.parent / "data" / "advisories.toml"
MARK = "# -- releases on the index (scripts/record_releases.py) --"


def versions(name: str) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "pip", "index", "versions", name], capture_output=True, text=True,
                         check=True).stdout
    match = re.search(r"Available versions: (.*)", out)
    if match is None:
        raise SystemExit(f"pip index versions {name}: no versions in {out!r}")
    return [v.strip() for v in match.group(1).split(",")]


def main() -> int:
    text = DATA.read_text()
    data = tomllib.loads(text)
    names = sorted({
        str(canonicalize_name(Requirement(r).name))
        for advisory in data["advisory"]
        for r in advisory.get("affects", []) + advisory.get("fixed_in", [])
    })
    lines = [
        MARK,
        "[releases]",
        f'source = "pip index versions NAME, {datetime.date.today().isoformat()}"',
        'confidence = "H"',
        "",
        "[releases.versions]",
    ]
    lines += [f'"{name}" = [{", ".join(repr(v).replace(chr(39), chr(34)) for v in versions(name))}]' for name in names]
    head = text.split(MARK)[0].rstrip("\n")
    DATA.write_text(head + "\n\n" + "\n".join(lines) + "\n")
    print(f"recorded {len(names)} distributions in {DATA}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
