"""How often `doctor --import` (the imports run) and the plain doctor (the imports read) agree, on the
survey's installed stacks (not part of CI).

Usage: python scripts/survey_observe.py WORKDIR [--host DRIVER/CC ...] [--only NAME ...]

For each stack of WORKDIR/venvs that scripts/survey.py finished, both doctors judge it for each host;
a finding is (check, subject, severity), infos left out. Each stack × host is kept in
WORKDIR/json/<stack>@<host>.observe.json, so a run resumes (delete the file to judge again) and a
stack whose venv was dropped after it was observed still counts. Printed:
the disagreements, listed; per host and in all, the agreement on the findings of the checks both run
(findings in both / findings in either), apart from the `import` check's, which only the run has (its
errors are where the run contradicts an exit the static doctor gave); and how many stack × host
cells get the same exit status from both.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HOSTS = ["535.104.05/8.0", "580.65.06/8.6", "580.65.06/6.1"]


def findings(python: Path, host: str, observe: bool) -> tuple[int, list[list[str]]]:
    driver, cc = host.split("/")
    command = [sys.executable, "-m", "cudaresolve", "doctor", "--json", "--no-judge-fixes", "--python", str(python),
               "--driver", driver, "--gpu", cc] + (["--import"] if observe else [])
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=3600)
    if not proc.stdout.strip():
        raise SystemExit(f"{python}: {proc.stderr.strip()[-300:]}")
    return proc.returncode, sorted({(f["check"], f["subject"], f["severity"]) for f in json.loads(proc.stdout)["findings"]
                                    if f["severity"] != "info"})


def cell(workdir: Path, venv: Path, host: str) -> dict:
    """Both doctors' exit and findings for one stack and host, kept in WORKDIR/json."""
    kept = workdir / "json" / f"{venv.name}@{host.replace('/', '-')}.observe.json"
    if kept.exists():
        return json.loads(kept.read_text())
    python = venv / "bin" / "python"
    (read_exit, read), (ran_exit, ran) = findings(python, host, False), findings(python, host, True)
    result = {"read": {"exit": read_exit, "findings": read}, "ran": {"exit": ran_exit, "findings": ran}}
    kept.write_text(json.dumps(result))
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--host", action="append", help=f"default: {' '.join(HOSTS)}")
    parser.add_argument("--only", action="append")
    args = parser.parse_args()
    totals = [0, 0, 0, 0, 0]  # both, either, same exit, cells, import errors
    for host in args.host or HOSTS:
        both = either = same_exit = cells = import_errors = 0
        kept = {path.name.partition("@")[0] for path in (args.workdir / "json").glob(f"*@{host.replace('/', '-')}.observe.json")}
        built = {venv.name for venv in (args.workdir / "venvs").iterdir() if (venv / ".complete").exists()}
        for name in sorted((kept | built) - {"base-torch"}):  # a stack judged before its venv was dropped counts
            if args.only and name not in args.only:
                continue
            venv = args.workdir / "venvs" / name
            result = cell(args.workdir, venv, host)
            read = {tuple(f) for f in result["read"]["findings"]}
            ran = {tuple(f) for f in result["ran"]["findings"]}
            import_errors += sum(1 for check, _, severity in ran if check == "import" and severity == "error")
            static = {finding for finding in ran if finding[0] != "import"}
            both += len(read & static)
            either += len(read | static)
            cells += 1
            same_exit += result["read"]["exit"] == result["ran"]["exit"]
            for finding in sorted(read - ran):
                print(f"{host} {venv.name}: only read: {finding}")
            for finding in sorted(ran - read):
                print(f"{host} {venv.name}: only run:  {finding}")
            sys.stdout.flush()
        print(f"{host}: agreement of the checks both run {both}/{either}"
              + (f" = {both / either:.2f}" if either else "") + f"; import errors {import_errors}; same exit {same_exit}/{cells}")
        totals = [a + b for a, b in zip(totals, [both, either, same_exit, cells, import_errors])]
    both, either, same_exit, cells, import_errors = totals
    print(f"all hosts: agreement {both}/{either}" + (f" = {both / either:.2f}" if either else "")
          + f"; import errors {import_errors}; same exit {same_exit}/{cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
