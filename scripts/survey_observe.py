"""How often `doctor --import` (the imports run) and the plain doctor (the imports read) agree, on the
survey's installed stacks (not part of CI).

Usage: python scripts/survey_observe.py WORKDIR [--host DRIVER/CC] [--only NAME ...]

For each stack of WORKDIR/venvs that scripts/survey.py finished, both doctors judge it for the host;
a finding is (check, subject, severity). Printed: the findings both give, those only one gives (the
disagreements, listed), and the agreement: findings in both / findings in either.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path


def findings(python: Path, host: str, observe: bool) -> set[tuple[str, str, str]]:
    driver, cc = host.split("/")
    command = [sys.executable, "-m", "cudaresolve", "doctor", "--json", "--python", str(python),
               "--driver", driver, "--gpu", cc] + (["--import"] if observe else [])
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=3600)
    if not proc.stdout.strip():
        raise SystemExit(f"{python}: {proc.stderr.strip()[-300:]}")
    return {(f["check"], f["subject"], f["severity"]) for f in json.loads(proc.stdout)["findings"]
            if f["severity"] != "info"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--host", default="580.65.06/8.6")
    parser.add_argument("--only", action="append")
    args = parser.parse_args()
    both = either = 0
    for venv in sorted((args.workdir / "venvs").iterdir()):
        if not (venv / ".complete").exists() or venv.name == "base-torch" or (args.only and venv.name not in args.only):
            continue
        python = venv / "bin" / "python"
        read, ran = findings(python, args.host, False), findings(python, args.host, True)
        both += len(read & ran)
        either += len(read | ran)
        for finding in sorted(read - ran):
            print(f"{venv.name}: only read: {finding}")
        for finding in sorted(ran - read):
            print(f"{venv.name}: only run:  {finding}")
        sys.stdout.flush()
    print(f"agreement: {both}/{either} = {both / either:.2f}" if either else "no findings")
    return 0


if __name__ == "__main__":
    sys.exit(main())
