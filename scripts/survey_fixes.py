"""Apply each fix the doctor prints (it judges them by default) for a survey stack, exactly as printed, in
a hard-link copy of its venv, and judge again (not part of CI; run after scripts/survey.py).

Usage: python scripts/survey_fixes.py SURVEY_WORKDIR OUT [--host DRIVER/CC ...] [--only STACK ...] [--limit N]

SURVEY_WORKDIR is read, never written: its venvs are copied (`cp -al` into OUT/copies, deleted when judged).
A printed fix is taken as a user takes it: the first alternative made only of `pip install` / `pip
uninstall` lines ("in place of A, B" uninstalls A and B first); remarks in parentheses are not applied.
A fix the doctor could not check (the words "not checked against the indexes") is applied as any
other and marked `unchecked`. Where a fix prints its `cudaresolve install …` line, that line is applied
too, in a copy of its own, and judged the same way (`install` in the outcome). Outcomes per error with a fix:

- converges: its finding is gone and nothing below happened;
- no change: its finding stays, nothing below happened;
- harmful: a new error, an import that worked before fails, or `pip check` finds a new problem;
- circle: the fix printed for a new error, applied in turn, returns the venv to its first state;
- not offered: pip finds no release the fix names (a fix must name only what the indexes offer);
- pip failed: pip refuses the fix for another reason;
- refused: the doctor printed "no fix found here" for it (with why: not offered, index unreadable, ...);
- install refused (an install line only): `cudaresolve install` exits 2 and installs nothing (no set fits);
- not applicable: no alternative is pip lines (a driver upgrade, a variable, advice).

OUT/fixes.json keeps every outcome, so a run resumes; the summary is printed as JSON and one line per fix.
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

from survey import slug  # noqa: E402
from survey_oracles import clean_env, import_module  # noqa: E402

FREE_GB = 20  # a fix is applied only while this much is free: 15 GB kept, and up to 5 GB a fix installs (cuda-toolkit)
IN_PLACE = re.compile(r"^(pip install .*?) in place of ([\w.\-, ]+)$")
INSTALL_LINE = re.compile(r"\(or, locked and judged again: (?:pip uninstall ([\w.\- ]+), then )?cudaresolve install ([^)]*)\)")
UNCHECKED = "not checked against the indexes"
NOT_FOUND = re.compile(r"No matching distribution found|Could not find a version that satisfies")
REFUSALS = {  # why a "no fix found here" was said, by its words (output/fixes.py)
    "index unreadable": re.compile(r"could not be read"),
    "not offered": re.compile(r"on the configured indexes meets|offer no build of|offer no release of"),
    "no major has the code": re.compile(r"release builds code for"),
    "breaks a requirement": re.compile(r"requires \"[^\"]+\"( \(extra [^)]+\))?; it would"),
    "finding stays": re.compile(r"the finding stays after it"),
    "new error": re.compile(r"it brings a new"),
    "wrong major": re.compile(r"it moves the environment from CUDA|which this driver cannot run"),
}


def unparenthesized(text: str) -> str:
    """`text` without its remarks in parentheses (quoted requirements kept whole)."""
    out, depth, quoted = [], 0, False
    for char in text:
        if char == '"':
            quoted = not quoted
        if not quoted and char == "(":
            depth += 1
        elif not quoted and char == ")" and depth:
            depth -= 1
            continue
        if depth == 0:
            out.append(char)
    return re.sub(r"\s+", " ", "".join(out)).strip()


def pip_steps(fix: str) -> list[list[str]] | None:
    """The pip commands of the first alternative of a printed fix that is only pip lines, in order."""
    for alternative in unparenthesized(fix).split(", or "):
        steps = _steps(alternative)
        if steps:
            return steps
    return None


def _steps(alternative: str) -> list[list[str]] | None:
    steps: list[list[str]] = []
    for part in re.split(r", then |; ", alternative):
        part = part.strip().rstrip(".").strip()
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


def key(finding: dict) -> tuple[str, str]:
    """A finding without versions: the same problem of the same package after a change of release."""
    about = finding.get("about") or {}
    return finding["check"], about.get("distribution") or about.get("file") or finding["subject"]


def errors_of(report: dict) -> set[tuple[str, str]]:
    return {key(f) for f in report["findings"] if f["severity"] == "error"}


def pip_check(python: Path) -> set[str]:
    proc = subprocess.run([str(python), "-m", "pip", "check"], capture_output=True, text=True, env=clean_env())
    return {line for line in proc.stdout.splitlines() if line.strip() and "No broken requirements" not in line}


def freeze(python: Path) -> frozenset[str]:
    proc = subprocess.run([str(python), "-m", "pip", "freeze", "--all"], capture_output=True, text=True, env=clean_env())
    return frozenset(line.strip() for line in proc.stdout.splitlines() if line.strip())


def doctor(python: Path, host: str, out: Path) -> dict:
    """The doctor's JSON report on `python` for `host` (its fixes judged, the default), kept in `out`."""
    if out.exists():
        return json.loads(out.read_text())
    driver, cc = host.split("/")
    proc = subprocess.run([sys.executable, "-m", "cudaresolve", "doctor", "--json", "--python", str(python),
                           "--driver", driver, "--gpu", cc],
                          capture_output=True, text=True, env=clean_env(), timeout=3600)
    report = json.loads(proc.stdout) if proc.stdout.strip() else {"findings": []}
    report |= {"exit": proc.returncode, "stderr": proc.stderr.strip()[-400:]}
    out.write_text(json.dumps(report))
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("survey", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--host", action="append")
    parser.add_argument("--only", action="append", help="only these stacks (names as printed)")
    parser.add_argument("--limit", type=int, default=1000)
    args = parser.parse_args()
    out_file = args.out / "fixes.json"
    args.out.mkdir(parents=True, exist_ok=True)
    outcomes = json.loads(out_file.read_text()) if out_file.exists() else {}
    applied = 0
    for labels in sorted((args.survey / "json").glob("*.labels.json")):
        try:
            result = json.loads(labels.read_text())
        except (OSError, ValueError):  # the survey is writing it again: the next pass takes it
            continue
        stack = result["stack"]["name"]
        if not result["installed"] or args.only and stack not in args.only:
            continue
        venv = args.survey / "venvs" / slug(stack)
        if not (venv / ".complete").exists():
            continue
        for cell in result["cells"]:
            host = cell["host"]
            if args.host and host not in args.host or not any(f["severity"] == "error" for f in cell["findings"]):
                continue
            stem = args.out / "judged" / slug(stack)
            stem.mkdir(parents=True, exist_ok=True)
            judged = doctor(venv / "bin" / "python", host, stem / f"{host.replace('/', '-')}.json")
            for finding in judged["findings"]:
                if finding["severity"] != "error" or not finding.get("fix"):
                    continue
                name = f"{stack} | {host} | {finding['check']} | {finding['subject']}"
                if name in outcomes or applied >= args.limit:
                    continue
                if pip_steps(finding["fix"]) is not None and shutil.disk_usage(args.out).free < FREE_GB * 2**30:
                    sys.stderr.write(f"{name}: left for a later run (less than {FREE_GB} GB free)\n")
                    continue
                applied += 1
                outcomes[name] = judge_fix(args.out, venv, result, host, finding, errors_of(judged))
                if UNCHECKED in finding["fix"]:
                    outcomes[name]["unchecked"] = True
                install = INSTALL_LINE.search(finding["fix"])
                if install:
                    outcomes[name]["install"] = judge_install(args.out, venv, result, host, finding, errors_of(judged), install)
                out_file.write_text(json.dumps(outcomes, indent=1))
                sys.stderr.write(f"{name}: {outcomes[name]['outcome']}\n")
    summary(outcomes)
    return 0


def summary(outcomes: dict) -> None:
    counts: dict[str, int] = {}
    for outcome in outcomes.values():
        counts[outcome["outcome"]] = counts.get(outcome["outcome"], 0) + 1
        if outcome.get("unchecked"):
            counts["unchecked"] = counts.get("unchecked", 0) + 1
        if "install" in outcome:
            label = f"install line: {outcome['install']['outcome']}"
            counts[label] = counts.get(label, 0) + 1
    sys.stdout.write(json.dumps(counts) + "\n")
    for name, outcome in outcomes.items():
        sys.stdout.write(f"- {name}: {outcome['outcome']} — {outcome['fix'][:240]} — {outcome['why'][:300]}\n")
        if "install" in outcome:
            sys.stdout.write(f"  install line: {outcome['install']['outcome']} — {outcome['install']['why'][:300]}\n")


def judge_fix(out: Path, venv: Path, result: dict, host: str, finding: dict, before: set[tuple[str, str]]) -> dict:
    fix = finding["fix"]
    steps = pip_steps(fix)
    if steps is None:
        if "no fix found here" in fix:
            reasons = sorted(reason for reason, words in REFUSALS.items() if words.search(fix))
            return {"outcome": "refused", "fix": fix, "why": ", ".join(reasons) or "other"}
        return {"outcome": "not applicable", "fix": fix, "why": "no alternative is pip lines"}
    copy = out / "copies" / "fix"
    python = copy / "bin" / "python"
    try:
        _copy(venv, copy)
        first = freeze(python)
        checked_before = pip_check(python)
        failed = _apply(python, steps)
        if failed is not None:
            outcome = "not offered" if NOT_FOUND.search(failed) else "pip failed"
            return {"outcome": outcome if freeze(python) == first else "harmful", "fix": fix, "why": failed}
        return _judged_again(out, python, result, host, finding, before, first, checked_before, str(steps), fix)
    finally:
        shutil.rmtree(out / "copies", ignore_errors=True)


def judge_install(out: Path, venv: Path, result: dict, host: str, finding: dict, before: set[tuple[str, str]],
                  line: re.Match[str]) -> dict:
    """The fix's `cudaresolve install …` line (after its `pip uninstall`), applied in a copy of its own."""
    copy = out / "copies" / "fix"
    python = copy / "bin" / "python"
    driver, cc = host.split("/")
    try:
        _copy(venv, copy)
        first = freeze(python)
        checked_before = pip_check(python)
        failed = _apply(python, [["uninstall", "-y", *line.group(1).split()]]) if line.group(1) else None
        if failed is None:
            ready = freeze(python)
            proc = subprocess.run([sys.executable, "-m", "cudaresolve", "install", *shlex.split(line.group(2)),
                                   "--python", str(python), "--driver", driver, "--gpu", cc, "-q"],
                                  capture_output=True, text=True, env=clean_env(), timeout=3600)
            if proc.returncode == 2 and freeze(python) == ready:  # 2 with nothing installed: no set fits, the lock refused
                return {"outcome": "install refused", "fix": line.group(0), "why": proc.stderr.strip()[-300:]}
            # 2: installed, and the doctor after it finds an error (judged below); else the lock or pip refused
            failed = None if proc.returncode in (0, 2) else f"cudaresolve install -> {proc.returncode}: {proc.stderr.strip()[-300:]}"
        if failed is not None:
            outcome = "not offered" if NOT_FOUND.search(failed) else "install failed"
            return {"outcome": outcome if freeze(python) == first else "harmful", "fix": line.group(0), "why": failed}
        return _judged_again(out, python, result, host, finding, before, first, checked_before, line.group(0), line.group(0))
    finally:
        shutil.rmtree(out / "copies", ignore_errors=True)


def _judged_again(out: Path, python: Path, result: dict, host: str, finding: dict, before: set[tuple[str, str]],
                  first: frozenset[str], checked_before: set[str], applied: str, shown: str) -> dict:
    """The outcome of `shown` (a fix, or its install line), `applied` to the copy at `python`: the
    doctor, the imports and pip check again."""
    after = doctor(python, host, out / "copies" / "after.json")
    (out / "copies" / "after.json").unlink()
    new_errors = errors_of(after) - before
    broken = [module for modules in result["imports"].values() for module, record in modules.items()
              if record["ok"] and not import_module(str(python), module)["ok"]]
    new_pip = pip_check(python) - checked_before
    gone = key(finding) not in errors_of(after)
    circle = _circles(out, python, host, after, new_errors, first) if new_errors else None
    if circle:
        outcome = "circle"
    elif new_errors or broken or new_pip:
        outcome = "harmful"
    else:
        outcome = "converges" if gone else "no change"
    return {"outcome": outcome, "fix": shown, "why": f"{applied}; new errors {sorted(new_errors)}; imports broken {broken}; "
            f"pip check new {sorted(new_pip)[:3]}; exit after {after.get('exit')}{'; ' + circle if circle else ''}"}


def _copy(venv: Path, copy: Path) -> None:
    if copy.exists():
        shutil.rmtree(copy)
    copy.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-al", str(venv), str(copy)], check=True)


def _apply(python: Path, steps: list[list[str]]) -> str | None:
    """Run the pip steps (pip's temporary files beside the copy, removed with it); None when all
    pass, else pip's last words."""
    tmp = python.parent.parent.parent / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    for step in steps:
        proc = subprocess.run([str(python), "-m", "pip", *step], capture_output=True, text=True,
                              env=clean_env() | {"TMPDIR": str(tmp)}, timeout=3600)
        if proc.returncode:
            return f"pip {' '.join(step)} -> {proc.returncode}: {proc.stderr.strip()[-300:]}"
    return None


def _circles(out: Path, python: Path, host: str, after: dict, new_errors: set, first: frozenset[str]) -> str | None:
    """The fix printed for each new error, applied in a copy of the fixed venv: which returns to `first`."""
    for finding in after["findings"]:
        if key(finding) not in new_errors or not finding.get("fix"):
            continue
        steps = pip_steps(finding["fix"])
        if steps is None:
            continue
        again = out / "copies" / "again"
        _copy(python.parent.parent, again)
        try:
            if _apply(again / "bin" / "python", steps) is None and freeze(again / "bin" / "python") == first:
                return f"the fix of {key(finding)} ({finding['fix'][:120]}) returns to the first state"
        finally:
            shutil.rmtree(again, ignore_errors=True)
    return None


if __name__ == "__main__":
    sys.exit(main())
