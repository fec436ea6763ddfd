"""Apply each fix `doctor --judge-fixes` prints for a survey stack, exactly as printed, in a hard-link copy
of its venv, and judge again (not part of CI; run after scripts/survey.py).

Usage: python scripts/survey_fixes.py WORKDIR [--host DRIVER/CC ...] [--limit N]

Outcomes per fix: converges (its finding is gone and no new error), no change (its finding stays),
harmful (a new error, an import that worked fails, or `pip check` finds a new problem), or not
applicable (the fix is no pip line: a driver upgrade, a variable, a call). A fix whose pip line fails
counts as harmful when it changed the venv, else as failed.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from survey import doctor, slug  # noqa: E402
from survey_oracles import clean_env, import_module  # noqa: E402

IN_PLACE = re.compile(r"^(pip install .*?) in place of ([\w.\-, ]+)$")


def pip_steps(fix: str) -> list[list[str]] | None:
    """The pip commands of a printed fix, in order; None when any part is not a pip line."""
    steps: list[list[str]] = []
    for part in re.split(r", then |; |\bthen\b ", fix):
        part = part.strip().rstrip(".")
        if not part:
            continue
        match = IN_PLACE.match(part)
        if match:
            steps.append(["uninstall", "-y", *(n.strip() for n in match.group(2).split(",") if n.strip())])
            part = match.group(1)
        if part.startswith("pip uninstall "):
            steps.append(["uninstall", "-y", *shlex.split(part[len("pip uninstall "):])])
        elif part.startswith("pip install "):
            steps.append(["install", *shlex.split(part[len("pip install "):])])
        else:
            return None
    return steps or None


def errors_of(report: dict) -> set[tuple[str, str]]:
    return {(f["check"], f["subject"]) for f in report["findings"] if f["severity"] == "error"}


def pip_check(python: Path) -> set[str]:
    proc = subprocess.run([str(python), "-m", "pip", "check"], capture_output=True, text=True, env=clean_env())
    return {line for line in proc.stdout.splitlines() if line.strip() and "No broken requirements" not in line}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--host", action="append")
    parser.add_argument("--limit", type=int, default=1000)
    args = parser.parse_args()
    work = args.workdir
    out_file = work / "fixes.json"
    outcomes = json.loads(out_file.read_text()) if out_file.exists() else {}
    applied = 0
    for labels in sorted((work / "json").glob("*.labels.json")):
        result = json.loads(labels.read_text())
        if not result["installed"]:
            continue
        stack = result["stack"]["name"]
        venv = work / "venvs" / slug(stack)
        python = venv / "bin" / "python"
        if not python.exists():
            continue
        for cell in result["cells"]:
            host = cell["host"]
            if args.host and host not in args.host or not any(f["severity"] == "error" for f in cell["findings"]):
                continue
            stem = work / "fixes" / slug(stack)
            stem.mkdir(parents=True, exist_ok=True)
            judged = doctor_judging(python, host, stem / f"judged@{host.replace('/', '-')}.json")
            before = errors_of(judged)
            for finding in judged["findings"]:
                if finding["severity"] != "error" or not finding.get("fix"):
                    continue
                key = f"{stack} | {host} | {finding['check']} | {finding['subject']}"
                if key in outcomes or applied >= args.limit:
                    continue
                applied += 1
                outcomes[key] = apply(work, venv, result, host, finding, before)
                out_file.write_text(json.dumps(outcomes, indent=1))
                sys.stderr.write(f"{key}: {outcomes[key]['outcome']}\n")
    counts: dict[str, int] = {}
    for outcome in outcomes.values():
        counts[outcome["outcome"]] = counts.get(outcome["outcome"], 0) + 1
    sys.stdout.write(json.dumps(counts) + "\n")
    for key, outcome in outcomes.items():
        sys.stdout.write(f"- {key}: {outcome['outcome']} — {outcome['fix'][:200]} — {outcome['why'][:300]}\n")
    return 0


def doctor_judging(python: Path, host: str, out: Path) -> dict:
    if out.exists():
        return json.loads(out.read_text())
    driver, cc = host.split("/")
    proc = subprocess.run([sys.executable, "-m", "cudaresolve", "doctor", "--json", "--judge-fixes", "--python", str(python),
                           "--driver", driver, "--gpu", cc], capture_output=True, text=True, env=clean_env(), timeout=1800)
    report = json.loads(proc.stdout) if proc.stdout.strip() else {"findings": [], "stderr": proc.stderr[-400:]}
    out.write_text(json.dumps(report))
    return report


def apply(work: Path, venv: Path, result: dict, host: str, finding: dict, before: set[tuple[str, str]]) -> dict:
    fix = finding["fix"]
    steps = pip_steps(fix)
    if steps is None:
        return {"outcome": "not applicable", "fix": fix, "why": "not a pip line"}
    copy = work / "venvs" / "fix-copy"
    if copy.exists():
        shutil.rmtree(copy)
    subprocess.run(["cp", "-al", str(venv), str(copy)], check=True)
    python = copy / "bin" / "python"
    checked_before = pip_check(venv / "bin" / "python")
    log = []
    try:
        for step in steps:
            proc = subprocess.run([str(python), "-m", "pip", *step], capture_output=True, text=True, env=clean_env(), timeout=1800)
            log.append(f"pip {' '.join(step)} -> {proc.returncode}")
            if proc.returncode:
                return {"outcome": "pip failed", "fix": fix, "why": "; ".join(log) + " " + proc.stderr.strip()[-200:]}
        after = doctor(python, host, work / "venvs" / "fix-after.json")
        (work / "venvs" / "fix-after.json").unlink()
        new_errors = errors_of(after) - before
        broken = []
        for modules in result["imports"].values():
            for module, record in modules.items():
                if record["ok"] and not import_module(str(python), module)["ok"]:
                    broken.append(module)
        new_pip = pip_check(python) - checked_before
        gone = (finding["check"], finding["subject"]) not in errors_of(after)
        if new_errors or broken or new_pip:
            outcome = "harmful"
        elif gone:
            outcome = "converges"
        else:
            outcome = "no change"
        return {"outcome": outcome, "fix": fix, "why": f"{'; '.join(log)}; new errors {sorted(new_errors)}; imports broken {broken}; "
                f"pip check new {sorted(new_pip)[:3]}; exit after {after.get('exit')}"}
    finally:
        shutil.rmtree(copy, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
