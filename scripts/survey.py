"""Judge real stacks chosen by a rule for several hosts, label every finding by oracles, and report
precision and recall (not part of CI).

Usage: python scripts/survey.py WORKDIR --choose N [--ranked FILE] [--report FILE] [--host DRIVER/CC ...]
                                [--drop-below GB] [--only NAME ...]

The stacks are chosen by scripts/survey_choose.py's rule from the ranked list (its sha256, the rule and
the rows used are written to WORKDIR/chosen.json and WORKDIR/ranked-rows.tsv): each distribution at the
newest release pip installs here, and the newest release of the previous series for the ten highest
ranked. Each stack is built with plain pip (pip's own configuration, wheels only) into WORKDIR/venvs/<stack>,
one at a time; a stack that requires torch is a hard-link copy of one torch venv (`cp -al`, then
`python -m pip install` into the copy: pip replaces files by unlink and write, so the base is untouched).
Per stack, WORKDIR/json keeps the freeze, the import records and one doctor report per host, so a run
resumes and one stack can be re-judged after a rule changes (delete its json files). The oracles
(scripts/survey_oracles.py) label each error right, wrong or needs-a-look.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from survey_oracles import Judge, device_code, healthy, import_module, modules_of  # noqa: E402

HOSTS = ["535.104.05/8.0", "580.65.06/8.6", "580.65.06/6.1", "470.256.02/7.5"]
OLDER_FOR = 10  # the highest ranked this many get an older release too
TORCH_BASE = ["torch==2.14.1", "numpy"]  # the newest torch pip installs here (/etc/xdg/pip caps it at 2.14.1)
NOT_IMPORTED = ("nvidia-", "cuda-toolkit", "pip", "setuptools", "wheel")
SYSTEM = ("/lib/", "/usr/lib", "/lib64/", "/usr/local/lib/python")


def slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in ".-" else "-" for c in text).strip("-")


def stacks_of(chosen: list[dict]) -> list[dict]:
    """Each chosen distribution at its newest release, then the older release of the highest ranked."""
    stacks = []
    for item in chosen:
        extra = f"[{item['extra']}]" if item.get("extra") else ""
        on_torch = item.get("needs_torch") or item["name"].startswith("torch")
        stacks.append({"name": f"{item['name']}{extra}", "requirement": f"{item['name']}{extra}", "on_torch": on_torch,
                       "rank": item["rank"], "release": "newest"})
    for item in chosen[:OLDER_FOR]:
        if item.get("older"):
            extra = f"[{item['extra']}]" if item.get("extra") else ""
            on_torch = item.get("needs_torch") or item["name"].startswith("torch")  # pip replaces torch in the copy if it must
            stacks.append({"name": f"{item['name']}{extra}=={item['older']}", "requirement": f"{item['name']}{extra}=={item['older']}",
                           "on_torch": on_torch, "rank": item["rank"], "release": "older"})
    return stacks


def pip_install(python: Path, requirements: list[str], log: Path) -> int:
    with log.open("a") as out:
        proc = subprocess.run([str(python), "-m", "pip", "install", "--only-binary=:all:", "-q", *requirements],
                              stdout=out, stderr=subprocess.STDOUT, timeout=1800)
    return proc.returncode


def build(workdir: Path, stack: dict) -> tuple[Path | None, str]:
    """The stack's interpreter, built once (`.complete`); None and why when pip cannot install it."""
    venvs = workdir / "venvs"
    venv = venvs / slug(stack["name"])
    log = workdir / "logs" / f"{slug(stack['name'])}.pip.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    if (venv / ".complete").exists():
        return venv / "bin" / "python", "built before"
    if (venv / ".failed").exists():
        return None, (venv / ".failed").read_text()
    if venv.exists():
        shutil.rmtree(venv)
    if stack["on_torch"]:
        base = venvs / "base-torch"
        if not (base / ".complete").exists():
            subprocess.run([sys.executable, "-m", "venv", "--clear", str(base)], check=True)
            if pip_install(base / "bin" / "python", TORCH_BASE, workdir / "logs" / "base-torch.pip.log"):
                raise SystemExit("the torch base venv cannot be built")
            (base / ".complete").touch()
        subprocess.run(["cp", "-al", str(base), str(venv)], check=True)
        (venv / ".complete").unlink()
    else:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    if pip_install(venv / "bin" / "python", [stack["requirement"]], log):
        why = [line for line in log.read_text().splitlines() if "ERROR" in line][-1:] or ["pip failed"]
        shutil.rmtree(venv)
        venv.mkdir()
        (venv / ".failed").write_text(why[0][:300])
        return None, why[0][:300]
    (venv / ".complete").touch()
    return venv / "bin" / "python", "built"


def doctor(python: Path, host: str, out: Path) -> dict:
    if out.exists():
        return json.loads(out.read_text())
    driver, cc = host.split("/")
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    proc = subprocess.run([sys.executable, "-m", "cudaresolve", "doctor", "--json", "--no-judge-fixes", "--python", str(python),
                           "--driver", driver, "--gpu", cc], capture_output=True, text=True, env=env, timeout=1800)
    if proc.returncode == 3 or not proc.stdout.strip():
        report = {"exit": proc.returncode, "stderr": proc.stderr.strip()[-500:], "findings": [], "libraries": []}
    else:
        report = json.loads(proc.stdout) | {"exit": proc.returncode}
    out.write_text(json.dumps(report))
    return report


def cuda_packages(reports: list[dict]) -> set[str]:
    """Distributions with ELF files that link CUDA libraries, or that a finding names."""
    names = set()
    for report in reports:
        for entry in report.get("libraries", []):
            if any("cu" in n["name"] or "nv" in n["name"] or "libc10" in n["name"] or "torch" in n["name"]
                   for obj in entry["objects"] for n in obj["needed"]):
                names.add(entry["package"])
        for finding in report["findings"]:
            names.add(finding["about"].get("distribution"))
    return {n for n in names if n and not n.startswith(NOT_IMPORTED)}


def imports_of(python: Path, packages: set[str], out: Path) -> dict:
    """dist -> module -> the import record, each top-level module in its own child process."""
    if out.exists():
        return json.loads(out.read_text())
    modules = {name.lower().replace("_", "-"): info for name, info in modules_of(str(python)).items()}
    jobs = [(dist, module) for dist in sorted(packages) for module in modules.get(dist, {}).get("modules", [])[:4]]
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda job: import_module(str(python), job[1]), jobs))
    records: dict = {}
    for (dist, module), record in zip(jobs, results):
        records.setdefault(dist, {})[module] = record
    out.write_text(json.dumps(records))
    return records


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--choose", type=int, default=40, metavar="N")
    parser.add_argument("--ranked", type=Path, default=Path("/work/.library/env/packages/pypi.tsv"))
    parser.add_argument("--host", action="append", metavar="DRIVER/CC", help=f"default: {' '.join(HOSTS)}")
    parser.add_argument("--report", type=Path)
    parser.add_argument("--drop-below", type=float, default=15.0, metavar="GB")
    parser.add_argument("--only", action="append", help="only these stacks (names as printed)")
    parser.add_argument("--judge-only", action="store_true", help="build nothing: report on what is judged")
    args = parser.parse_args()
    hosts = args.host or HOSTS
    work = args.workdir
    (work / "json").mkdir(parents=True, exist_ok=True)
    chosen_file = work / "chosen.json"
    if not chosen_file.exists():
        from survey_choose import choose

        choose(args.ranked, args.choose, chosen_file)
    chosen = json.loads(chosen_file.read_text())
    names = {c["name"] for c in chosen["chosen"]}
    rows = [line for line in args.ranked.read_text().splitlines()[1:] if line.split("\t")[0].lower().replace("_", "-") in names]
    (work / "ranked-rows.tsv").write_text("\n".join(rows) + "\n")
    cuobjdump = str(next((work / "tools").glob("lib/python3*/site-packages/nvidia/*/bin/cuobjdump"), ""))
    if not cuobjdump:
        sys.stderr.write(f"no cuobjdump under {work / 'tools'} (a venv with the nvidia-cuda-cuobjdump wheel): "
                         "arch-coverage findings are left to a person\n")
    code_cache_file = work / "json" / "cuobjdump.json"
    code_cache = json.loads(code_cache_file.read_text()) if code_cache_file.exists() else {}
    stacks = [s for s in stacks_of(chosen["chosen"]) if not args.only or s["name"] in args.only]
    results = []
    for stack in stacks:
        stem = work / "json" / slug(stack["name"])
        done = Path(f"{stem}.labels.json")
        if done.exists():
            results.append(json.loads(done.read_text()))
            continue
        if args.judge_only:
            continue
        try:  # several runs may share WORKDIR: each stack is built and judged by one of them
            os.close(os.open(f"{stem}.lock", os.O_CREAT | os.O_EXCL))
        except FileExistsError:
            continue
        python, how = build(work, stack)
        sys.stderr.write(f"{stack['name']}: {how}\n")
        if python is None:
            result = {"stack": stack, "installed": False, "why": how}
            done.write_text(json.dumps(result))
            results.append(result)
            continue
        freeze = subprocess.run([str(python), "-m", "pip", "freeze", "--all"], capture_output=True, text=True)
        Path(f"{stem}.freeze").write_text(freeze.stdout)
        with ThreadPoolExecutor(2) as pool:
            reports = list(pool.map(doctor, [python] * len(hosts), hosts, [Path(f"{stem}@{h.replace('/', '-')}.json") for h in hosts]))
        imports = imports_of(python, cuda_packages(reports), Path(f"{stem}.imports.json"))
        objects = {e["package"]: [o["path"] for o in e["objects"]] for e in reports[0].get("libraries", []) if e["package"]}
        judge = Judge(imports, cuobjdump, code_cache, objects, str(python))
        cells = []
        for host, report in zip(hosts, reports):
            driver, cc = host.split("/")
            loaded = sorted({p for rs in imports.values() for r in rs.values() for p in r["loaded"]
                             if "site-packages" in p and not p.startswith(SYSTEM)})
            if not any(imports.values()):  # nothing to import: every library of the stack is what it offers
                loaded = sorted({o["path"] for e in report.get("libraries", []) for o in e["objects"]})
            code = {p: device_code(cuobjdump, p, code_cache) for p in loaded} if cuobjdump else {}  # cached by inode: once a file
            labelled = []
            for finding in report["findings"]:
                if finding["severity"] == "info":
                    continue
                try:
                    label, evidence = judge.label(finding, driver, cc)
                except Exception as exc:  # an oracle that cannot run leaves the finding to a person
                    label, evidence = "needs-a-look", f"oracle failed: {exc}"
                labelled.append({"severity": finding["severity"], "check": finding["check"], "subject": finding["subject"],
                                 "message": finding["message"], "fix": finding.get("fix"), "label": label,
                                 "evidence": evidence})
            ok, why = healthy(imports, code, driver, cc, loaded, judge.unloadable)
            cells.append({"host": host, "exit": report["exit"], "counts": report.get("counts"), "healthy": ok,
                          "healthy_why": why, "findings": labelled, "stderr": report.get("stderr")})
        code_cache_file.write_text(json.dumps(code_cache))
        result = {"stack": stack, "installed": True, "imports": {d: {m: {"ok": r["ok"], "error": r["error"], "kind": r["kind"]}
                                                                      for m, r in rs.items()}
                                                                  for d, rs in imports.items()}, "cells": cells}
        done.write_text(json.dumps(result))
        results.append(result)
        if shutil.disk_usage(work).free < args.drop_below * 2**30:
            shutil.rmtree(work / "venvs" / slug(stack["name"]))
    text = report_text(results, chosen, hosts)
    sys.stdout.write(text)
    if args.report:
        args.report.write_text(text)
    return 0


def report_text(results: list[dict], chosen: dict, hosts: list[str]) -> str:
    from survey_report import render

    return render(results, chosen, hosts)


if __name__ == "__main__":
    sys.exit(main())
