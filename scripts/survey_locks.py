"""Lock the real-stack survey's stacks for each host, compare with pip's set, install a bounded subset from
its lock and judge it with the doctor and the import oracle (not part of CI).

Usage: python scripts/survey_locks.py SURVEY WORKDIR [--also SURVEY ...] [--host DRIVER/CC ...]
                                      [--only NAME ...] [--install N] [--keep-free GB] [--report FILE]

SURVEY is a workdir of scripts/survey.py: its chosen.json gives the stacks (the requirement as
survey.py's `stacks_of` writes it), json/<stack>.freeze pip's set and json/<stack>@<host>.json the
doctor's report on pip's set for that host (the oracle for a disagreement or a refusal). SURVEY is only
read. Per stack x host, WORKDIR/cells/<stack>@<host>/ keeps the lock (pylock.toml), its stdout and stderr
and result.json, so a run resumes.

Each lock runs `cudaresolve lock REQ --driver D --gpu CC` against an empty venv with pip's configured
indexes. The PyTorch variant indexes are unreachable here, so --torch-index-base names a local directory
of empty pages: the lock sees only the registry's torch builds (one CUDA variant per release).

--install N installs from the lock into an empty venv (`cudaresolve install --lock`, which ends with the
doctor for that host) for at most N cells that locked, one per stack first, then runs the import oracle
(survey_oracles.import_module) on the stack's top-level modules; each venv is removed after it is judged,
and nothing is installed while free disk is below --keep-free.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import tomllib

sys.path.insert(0, str(Path(__file__).resolve().parent))

from survey import slug, stacks_of  # noqa: E402
from survey_oracles import import_module, modules_of  # noqa: E402

HOSTS = ["535.104.05/8.0", "580.65.06/8.6", "580.65.06/6.1"]
TORCH_VARIANTS = ["cpu", "cu117", "cu118", "cu121", "cu124", "cu126", "cu128", "cu129", "cu130", "cu132"]
TORCH_FAMILY = ["torch", "torchvision", "torchaudio", "triton", "pytorch-triton"]
LOCK_TIMEOUT = 1800
INSTALL_TIMEOUT = 3600
REFUSAL_LINES, REFUSAL_WIDTH = 5, 200


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def top_name(requirement: str) -> str:
    return canonical(re.split(r"[\[=<>!~ ;]", requirement, maxsplit=1)[0])


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "cudaresolve", *args]


def env_without_library_path() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}


def torch_index(work: Path) -> str:
    """A local PyTorch index base whose variant pages list nothing (the real one is unreachable here)."""
    for variant in TORCH_VARIANTS:
        for name in TORCH_FAMILY:
            page = work / "torch-index" / variant / name / "index.html"
            if not page.exists():
                page.parent.mkdir(parents=True, exist_ok=True)
                page.write_text("<!DOCTYPE html><html><body></body></html>\n")
    return (work / "torch-index").as_uri()


def empty_python(work: Path) -> str:
    venv = work / "empty"
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    return str(venv / "bin" / "python")


def freeze_of(text: str) -> dict[str, str]:
    pins = {}
    for line in text.splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==", 1)
            pins[canonical(name)] = version.strip()
    return pins


def locked_set(pylock: Path) -> dict[str, str]:
    if not pylock.exists():
        return {}
    data = tomllib.loads(pylock.read_text())
    return {canonical(p["name"]): p.get("version", "") for p in data.get("packages", [])}


def set_aside(pylock: Path) -> dict[str, dict[str, str]]:
    """name -> version -> the lock's reason for setting that release aside ([tool.cudaresolve] decisions)."""
    if not pylock.exists():
        return {}
    tool = tomllib.loads(pylock.read_text()).get("tool", {}).get("cudaresolve", {})
    reasons = {canonical(d["name"]): {r["version"]: r.get("reason", r.get("rule", "")) for r in d.get("rejected", [])}
               for d in tool.get("decisions", [])}
    major = tool.get("cuda-major", {})  # a CUDA major the hosts refuse: why no build of it was taken
    reasons[""] = {str(r["major"]): f"CUDA {r['major']}: {r.get('reason', r.get('rule', ''))}" for r in major.get("rejected", [])}
    return reasons


def refusal_shape(stderr: str) -> dict:
    """The refusal as a person reads it: its lines, whether it fits, and its first line (the cause)."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    return {"lines": len(lines), "widest": max((len(line) for line in lines), default=0),
            "fits": 0 < len(lines) <= REFUSAL_LINES and all(len(line) <= REFUSAL_WIDTH for line in lines),
            "first": lines[0] if lines else ""}


def oracle(survey: Path, stack: str, host: str) -> dict:
    """The doctor's verdict on pip's set for this host, and the survey's healthy label, when judged."""
    report = survey / "json" / f"{slug(stack)}@{host.replace('/', '-')}.json"
    labels = survey / "json" / f"{slug(stack)}.labels.json"
    verdict: dict = {"doctor_exit": None, "healthy": None, "errors": []}
    if report.exists():
        data = json.loads(report.read_text())
        verdict["doctor_exit"] = data.get("exit")
        verdict["errors"] = sorted({f"{f['check']} {f['about'].get('distribution') or f['subject']}"
                                    for f in data.get("findings", []) if f["severity"] == "error"})[:12]
    if labels.exists():
        for cell in json.loads(labels.read_text()).get("cells", []):
            if cell["host"] == host:
                verdict["healthy"] = cell["healthy"]
    return verdict


def compare(requirement: str, locked: dict[str, str], pip: dict[str, str], on_torch: bool, aside: dict) -> dict:
    """Top-level names (the requirement's distribution, and torch for a torch stack), with the lock's
    reason for passing over pip's release where they differ, and the whole-set diff."""
    # torch for a torch stack whose lock holds torch (pip's torch stacks start from a torch venv: a
    # stack that does not require torch has it there only for that)
    tops = [top_name(requirement)] + (["torch"] if on_torch and top_name(requirement) != "torch" and "torch" in locked else [])
    top = {name: {"lock": locked.get(name), "pip": pip.get(name), "why": None} for name in tops}
    for name, pair in top.items():
        if pair["lock"] != pair["pip"]:
            by_major = aside.get("", {}).get((pair["pip"] or "").split(".")[0], "")  # cuda-toolkit 13.5.0: CUDA 13 refused
            pair["why"] = (aside.get(name, {}).get(pair["pip"] or "") or (by_major if name.startswith("cuda-") else "")
                           or newest_reason(aside.get(name, {}), pair["lock"]))
    shared = set(locked) & set(pip)
    return {"top": top, "top_agrees": all(v["lock"] == v["pip"] for v in top.values()),
            "only_lock": sorted(set(locked) - set(pip) - {"pip", "setuptools", "wheel"}),
            "only_pip": sorted(set(pip) - set(locked) - {"pip", "setuptools", "wheel"}),
            "versions_differ": sorted(f"{n} {pip[n]} -> {locked[n]}" for n in shared if pip[n] != locked[n])}


def newest_reason(reasons: dict[str, str], chosen: str | None) -> str:
    """The lock's reason for the newest release it set aside above its choice, said as that release's:
    pip's freeze may be older than the release pip takes from the index today, which the lock names."""
    pip_skips = ("requires Python", "yanked", "a pre-release")  # releases pip would not take either
    newer = [v for v, why in reasons.items() if chosen and _version(v) > _version(chosen) and not _version(v).is_prerelease
             and not why.startswith(pip_skips)]
    if not newer:
        return ""
    newest = max(newer, key=_version)
    return f"{newest}: {reasons[newest]}"


def _version(text: str):
    from packaging.version import InvalidVersion, Version

    try:
        return Version(text)
    except InvalidVersion:
        return Version("0")


def lock_cell(work: Path, stack: dict, host: str, python: str, index: str) -> dict | None:
    cell = cell_of(work, stack["name"], host)
    result_file = cell / "result.json"
    if result_file.exists():
        return json.loads(result_file.read_text())
    cell.mkdir(parents=True, exist_ok=True)
    try:  # several runs may share WORKDIR: each cell is locked by one of them
        os.close(os.open(cell / "claimed", os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return None
    driver, cc = host.split("/")
    started = time.monotonic()
    try:
        proc = subprocess.run(cli("lock", stack["requirement"], "--driver", driver, "--gpu", cc, "--python", python,
                                  "--torch-index-base", index, "-q", "-o", str(cell / "pylock.toml")),
                              capture_output=True, text=True, timeout=LOCK_TIMEOUT, env=env_without_library_path())
        code, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        code, out, err = -1, str(exc.stdout or ""), f"timed out after {LOCK_TIMEOUT} s"
    seconds = round(time.monotonic() - started, 1)
    (cell / "stdout.txt").write_text(out)
    (cell / "stderr.txt").write_text(err)
    locked = locked_set(cell / "pylock.toml") if code == 0 else {}
    result = {"stack": stack["name"], "requirement": stack["requirement"], "on_torch": stack["on_torch"], "host": host,
              "exit": code, "seconds": seconds, "refusal": refusal_shape(err) if code == 2 else None, "locked": locked,
}
    result_file.write_text(json.dumps(result, indent=1))
    return result


def cell_of(work: Path, stack: str, host: str) -> Path:
    return work / "cells" / f"{slug(stack)}@{host.replace('/', '-')}"


def judged(surveys: list[Path], work: Path, result: dict) -> dict:
    """The cell with pip's set and the oracle from the first survey workdir that judged its stack."""
    for survey in surveys:
        freeze_file = survey / "json" / f"{slug(result['stack'])}.freeze"
        if freeze_file.exists():
            pip = freeze_of(freeze_file.read_text())
            return result | {"survey": str(survey), "pip_installed": True,
                             "oracle": oracle(survey, result["stack"], result["host"]),
                             "compare": compare(result["requirement"], result["locked"], pip, result["on_torch"], set_aside(cell_of(work, result["stack"], result["host"]) / "pylock.toml"))
                             if result["exit"] == 0 else None}
    return result | {"survey": None, "pip_installed": False, "oracle": {"doctor_exit": None, "healthy": None, "errors": []},
                     "compare": None}


def install_cell(work: Path, result: dict, keep_free: float) -> dict | None:
    """Install the cell's lock into an empty venv, the doctor for its host, then the import oracle."""
    cell = cell_of(work, result["stack"], result["host"])
    out_file = cell / "install.json"
    if out_file.exists():
        return json.loads(out_file.read_text())
    if shutil.disk_usage(work).free < keep_free * 2**30:
        return None
    try:  # several runs may share WORKDIR: each cell is installed by one of them
        os.close(os.open(cell / "install.claimed", os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return None
    venv = work / "venvs" / cell.name
    if venv.exists():
        shutil.rmtree(venv)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = str(venv / "bin" / "python")
    driver, cc = result["host"].split("/")
    started = time.monotonic()
    try:
        proc = subprocess.run(cli("install", "--lock", str(cell / "pylock.toml"), "--python", python,
                                  "--driver", driver, "--gpu", cc),
                              capture_output=True, text=True, timeout=INSTALL_TIMEOUT, env=env_without_library_path())
        code, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired:
        code, out, err = -1, "", f"timed out after {INSTALL_TIMEOUT} s"
    seconds = round(time.monotonic() - started, 1)
    (cell / "install.stdout.txt").write_text(out)
    (cell / "install.stderr.txt").write_text(err)
    doctor = subprocess.run(cli("doctor", "--json", "--no-judge-fixes", "--python", python, "--driver", driver, "--gpu", cc),
                            capture_output=True, text=True, timeout=INSTALL_TIMEOUT, env=env_without_library_path())
    report = json.loads(doctor.stdout) if doctor.stdout.strip().startswith("{") else {}
    findings = [f"{f['severity']} {f['check']} {f['about'].get('distribution') or f['subject']}"
                for f in report.get("findings", []) if f["severity"] in ("error", "warning")]
    imports = {}
    if code != -1:
        top = top_name(result["requirement"])
        modules = {canonical(n): info for n, info in modules_of(python).items()}
        for module in modules.get(top, {}).get("modules", [])[:4]:
            record = import_module(python, module)
            imports[module] = {"ok": record["ok"], "error": record["error"]}
    done = {"install_exit": code, "seconds": seconds, "doctor_exit": doctor.returncode, "findings": findings,
            "imports": imports, "size_mb": round(sum(f.stat().st_size for f in venv.rglob("*") if f.is_file()) / 2**20)}
    out_file.write_text(json.dumps(done, indent=1))
    shutil.rmtree(venv)
    return done


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("survey", type=Path, nargs=1)
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--host", action="append", metavar="DRIVER/CC", help=f"default: {' '.join(HOSTS)}")
    parser.add_argument("--only", action="append", help="only these stacks (names as survey.py prints them)")
    parser.add_argument("--install", type=int, default=0, metavar="N")
    parser.add_argument("--install-cell", action="append", default=[], metavar="STACK@DRIVER/CC",
                        help="install these cells first (names as the report prints them)")
    parser.add_argument("--keep-free", type=float, default=20.0, metavar="GB")
    parser.add_argument("--report", type=Path)
    parser.add_argument("--also", type=Path, action="append", default=[], metavar="SURVEY",
                        help="another survey workdir of the same stacks, read where SURVEY has not judged a stack yet")
    parser.add_argument("--no-lock", action="store_true", help="lock nothing new: report on the cells done")
    parser.add_argument("--reverse", action="store_true", help="the stacks in reverse order (a second run sharing WORKDIR)")
    args = parser.parse_args()
    hosts = args.host or HOSTS
    work = args.workdir
    work.mkdir(parents=True, exist_ok=True)
    stacks = [s for s in stacks_of(json.loads((args.survey[0] / "chosen.json").read_text())["chosen"])
              if not args.only or s["name"] in args.only]
    if args.reverse:
        stacks.reverse()
    python, index = empty_python(work), torch_index(work)
    results = []
    for stack in stacks:
        for host in hosts:
            done = cell_of(work, stack["name"], host) / "result.json"
            if args.no_lock and not done.exists():
                continue
            locked = lock_cell(work, stack, host, python, index)
            if locked is None:
                continue
            result = judged(args.survey + args.also, work, locked)
            sys.stderr.write(f"{stack['name']} @ {host}: exit {result['exit']} ({result['seconds']} s)\n")
            results.append(result)
    installed: dict[str, dict] = {}
    for result in results:  # installs judged by an earlier run
        done_install = cell_of(work, result["stack"], result["host"]) / "install.json"
        if done_install.exists():
            installed[f"{result['stack']}@{result['host']}"] = json.loads(done_install.read_text())
    if args.install:
        locked = [r for r in results if r["exit"] == 0]
        firsts = {r["stack"]: r for r in reversed(locked)}  # one cell per stack first, then the rest
        named = [r for r in locked if f"{r['stack']}@{r['host']}" in args.install_cell]
        order = named + [r for r in firsts.values() if r not in named] + [r for r in locked if r not in firsts.values() and r not in named]
        for result in order[:args.install]:
            outcome = install_cell(work, result, args.keep_free)
            if outcome is not None:
                installed[f"{result['stack']}@{result['host']}"] = outcome
                sys.stderr.write(f"install {result['stack']} @ {result['host']}: {outcome['install_exit']}, "
                                 f"doctor {outcome['doctor_exit']}\n")
    text = report(results, installed)
    sys.stdout.write(text)
    if args.report:
        args.report.write_text(text)
    return 0


def disagreement(r: dict) -> str:
    """How a top-level difference stands: the lock names a reason and the oracle (the doctor on pip's
    set for that host) refuses pip's set or warns about it, or not."""
    named = all(v["why"] for v in r["compare"]["top"].values() if v["lock"] != v["pip"])
    refused = r["oracle"]["doctor_exit"] == 2 or r["oracle"]["healthy"] is False
    unjudged = r["oracle"]["doctor_exit"] is None and r["oracle"]["healthy"] is None
    return ("named, confirmed" if named and refused else "named, no oracle for pip's set on this host" if named and unjudged
            else "named, pip's set passes the doctor" if named else "no reason named")


def report(results: list[dict], installed: dict[str, dict]) -> str:
    exits: dict[int, int] = {}
    for r in results:
        exits[r["exit"]] = exits.get(r["exit"], 0) + 1
    compared = [r for r in results if r["compare"]]
    agree = [r for r in compared if r["compare"]["top_agrees"]]
    kinds: dict[str, int] = {}
    for r in compared:
        if not r["compare"]["top_agrees"]:
            kinds[disagreement(r)] = kinds.get(disagreement(r), 0) + 1
    refusals = [r for r in results if r["refusal"]]
    unfit = [r for r in refusals if not r["refusal"]["fits"]]
    pip_failed = [r for r in refusals if not r["pip_installed"]]
    pip_refused = [r for r in refusals if r["pip_installed"] and (r["oracle"]["doctor_exit"] == 2 or r["oracle"]["healthy"] is False)]
    pip_unjudged = [r for r in refusals if r["pip_installed"] and r not in pip_refused
                    and r["oracle"]["doctor_exit"] is None and r["oracle"]["healthy"] is None]
    judged_installs = [o for o in installed.values() if o["install_exit"] != -1]
    passed = [o for o in judged_installs if o["doctor_exit"] == 0 and all(i["ok"] for i in o["imports"].values())]
    lines = [f"cells: {len(results)}; exits: " + ", ".join(f"{k}: {v}" for k, v in sorted(exits.items())),
             f"lock vs pip, top-level (cells that lock and whose stack pip installed): {len(agree)}/{len(compared)} agree; "
             "differ: " + ", ".join(f"{k}: {v}" for k, v in sorted(kinds.items())),
             f"locks where pip installs nothing: {len([r for r in results if r['exit'] == 0 and not r['pip_installed']])}",
             f"refusals: {len(refusals)} (pip installs nothing: {len(pip_failed)}; the doctor refuses pip's set there: "
             f"{len(pip_refused)}; no oracle for pip's set on this host: {len(pip_unjudged)}; "
             f"other: {len(refusals) - len(pip_failed) - len(pip_refused) - len(pip_unjudged)}); "
             f"not within {REFUSAL_LINES} lines of <= {REFUSAL_WIDTH} characters: {len(unfit)}",
             f"install -> doctor exit 0 and imports load: {len(passed)}/{len(judged_installs)}", ""]
    for r in results:
        tag = f"{r['stack']} @ {r['host']}: exit {r['exit']} ({r['seconds']} s)"
        if r["refusal"]:
            tag += (f"; refusal {r['refusal']['lines']} lines, widest {r['refusal']['widest']}; pip's set: "
                    f"{'not installed' if not r['pip_installed'] else 'doctor exit ' + str(r['oracle']['doctor_exit'])}: "
                    f"{r['refusal']['first'][:200]}")
        elif r["compare"] and not r["compare"]["top_agrees"]:
            tag += (f"; differs ({disagreement(r)}; pip's set: doctor exit {r['oracle']['doctor_exit']}, healthy "
                    f"{r['oracle']['healthy']}): " + "; ".join(f"{n} {v['pip']} -> {v['lock']}: {(v['why'] or '')[:200]}"
                                                             for n, v in r["compare"]["top"].items() if v["lock"] != v["pip"]))
        elif r["exit"] == 0 and not r["pip_installed"]:
            tag += "; pip installs nothing (wheels only)"
        lines.append(tag)
    for key, outcome in installed.items():
        lines.append(f"install {key}: install exit {outcome['install_exit']} ({outcome['seconds']} s), doctor exit "
                     f"{outcome['doctor_exit']}, imports {outcome['imports']}, {outcome['size_mb']} MB; {outcome['findings'][:6]}")
    return "\n".join(lines) + "\n"

if __name__ == "__main__":
    sys.exit(main())
