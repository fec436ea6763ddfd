"""Judge real stacks for several hosts and write the table for docs/survey.md (not part of CI).

Usage: python scripts/survey.py WORKDIR [--stack NAME ...] [--venv NAME=PYTHON ...] [--out FILE]

Each stack is built once with plain pip (its own index configuration) into WORKDIR/<stack> and kept
there; `--venv NAME=PYTHON` judges an environment built elsewhere instead (the tests' torch venv).
Every stack is judged by `cudaresolve doctor --json` for every host below, and one row per finding
is printed: stack, host, severity, check, subject, message, fix. Whether each finding is right is decided
by hand, against readelf, `ldd -r`, the wheel's METADATA or by installing the proposed fix, and kept
in docs/survey.md beside the table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

# Each stack is one or more `pip install` steps: a later step installs over what pip's resolver
# would refuse as one set (cuda-bindings 13 over cuda-cccl's CUDA 12 route, as a user upgrading it does).
STACKS = {
    "torch": [["torch==2.14.1"]],
    "cupy-cuda12x[ctk]": [["cupy-cuda12x[ctk]==14.2.0"]],
    "cuda-cccl[minimal-cu12]": [["cuda-cccl[minimal-cu12]==1.2.1"]],
    "cuda-cccl (cuda-bindings 13, CUDA 12 libraries)": [["cuda-cccl[minimal-cu12]==1.2.1"], ["cuda-bindings==13.*"]],
    "numba-cuda[cu12]": [["numba", "numba-cuda[cu12]"]],
    "onnxruntime-gpu[cuda,cudnn]": [["onnxruntime-gpu[cuda,cudnn]==1.31.1"]],
}
HOSTS = [("575.57.08", "8.6"), ("580.65.06", "6.1")]


def python_of(workdir: Path, name: str, steps: list[list[str]]) -> str:
    venv = workdir / name.replace("[", "-").replace("]", "").replace(",", "-")
    python = venv / "bin" / "python"
    if not (venv / ".complete").exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        for requirements in steps:
            subprocess.run([str(python), "-m", "pip", "install", "-q", *requirements], check=True)
        (venv / ".complete").touch()
    return str(python)


def judge(python: str, driver: str, gpu: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "cudaresolve", "doctor", "--json", "--python", python, "--driver", driver, "--gpu", gpu],
        capture_output=True, text=True, env={k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"},
    )
    if proc.returncode == 3:
        raise SystemExit(proc.stderr.strip())
    return json.loads(proc.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("workdir", type=Path)
    parser.add_argument("--stack", action="append", choices=sorted(STACKS), help="only these stacks")
    parser.add_argument("--venv", action="append", default=[], metavar="NAME=PYTHON", help="judge this interpreter")
    parser.add_argument("--out", type=Path, help="write the table here instead of stdout")
    args = parser.parse_args()
    given = dict(item.split("=", 1) for item in args.venv)
    args.workdir.mkdir(parents=True, exist_ok=True)
    rows = ["| stack | host | severity | check | subject | finding | fix |", "|---|---|---|---|---|---|---|"]
    for name in args.stack or list(STACKS):
        python = given.get(name) or python_of(args.workdir, name, STACKS[name])
        for driver, gpu in HOSTS:
            report = judge(python, driver, gpu)
            host = f"driver {driver}, GPU {gpu}"
            if not report["findings"]:
                rows.append(f"| {name} | {host} | — | — | — | no findings | |")
            for finding in report["findings"]:
                message, fix = (text.replace("|", "\\|") for text in (finding["message"], finding["fix"] or ""))
                rows.append(f"| {name} | {host} | {finding['severity']} | {finding['check']} | "
                            f"{finding['subject']} | {message} | {fix} |")
    table = "\n".join(rows) + "\n"
    if args.out:
        args.out.write_text(table)
    else:
        sys.stdout.write(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
