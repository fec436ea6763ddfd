"""How often `doctor --import` (the imports run) and the plain doctor (the imports read) agree, on the
survey's installed stacks (not part of CI).

Usage: python scripts/survey_observe.py WORKDIR [--host DRIVER/CC] [--only NAME ...]

For each stack of WORKDIR/venvs that scripts/survey.py finished, both doctors judge it for the host;
a finding is (check, subject, severity), infos left out. Printed: the disagreements, listed; the
agreement on the findings of the checks both run (findings in both / findings in either), apart from
the `import` check's, which only the run has (its errors are where the run contradicts an exit the
static doctor gave); and how many stacks get the same exit status from both.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path


def findings(python: Path, host: str, observe: bool) -> tuple[int, set[tuple[str, str, str]]]:
    driver, cc = host.split("/")
    command = [sys.executable, "-m", "cudaresolve", "doctor", "--json", "--python", str(python),
               "--driver", driver, "--gpu", cc] + (["--import"] if observe else [])
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=3600)
    if not proc.stdout.strip():
        raise SystemExit(f"{python}: {proc.stderr.strip()[-300:]}")
    return proc.returncode, {(f["check"], f["subject"], f["severity"]) for f in json.loads(proc.stdout)["findings"]
                             if f["severity"] != "info"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--host", default="580.65.06/8.6")
    parser.add_argument("--only", action="append")
    args = parser.parse_args()
    both = either = same_exit = stacks = import_errors = 0
    for venv in sorted((args.workdir / "venvs").iterdir()):
        if not (venv / ".complete").exists() or venv.name == "base-torch" or (args.only and venv.name not in args.only):
            continue
        python = venv / "bin" / "python"
        (read_exit, read), (ran_exit, ran) = findings(python, args.host, False), findings(python, args.host, True)
        import_errors += sum(1 for check, _, severity in ran if check == "import" and severity == "error")
        static = {finding for finding in ran if finding[0] != "import"}
        both += len(read & static)
        either += len(read | static)
        stacks += 1
        same_exit += read_exit == ran_exit
        for finding in sorted(read - ran):
            print(f"{venv.name}: only read: {finding}")
        for finding in sorted(ran - read):
            print(f"{venv.name}: only run:  {finding}")
        sys.stdout.flush()
    print(f"agreement of the checks both run: {both}/{either} = {both / either:.2f}" if either else "no findings")
    print(f"import errors (the run only): {import_errors}; same exit status: {same_exit}/{stacks}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
