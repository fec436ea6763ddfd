"""Judge real stacks for several hosts and write the table for docs/survey.md (not part of CI).

Usage: python scripts/survey.py WORKDIR [--stack NAME ...] [--venv NAME=PYTHON ...] [--out FILE] [--drop-below GB]

Each stack is built once with plain pip (its own index configuration) into WORKDIR/<stack> and kept
there (or deleted after judging with --drop-below, when the disk runs short); `--venv NAME=PYTHON`
judges an environment built elsewhere instead (the tests' torch venv). Each report is kept as
WORKDIR/json/<stack>@<driver>-<gpu>.json and each stack's `pip freeze` as WORKDIR/json/<stack>.freeze.
Every stack is judged by `cudaresolve doctor --json` for every host below, and one row per finding
is printed: stack, host, severity, check, subject, message, fix. Whether each finding is right is decided
by hand, against readelf, `ldd -r`, the wheel's METADATA or by installing the proposed fix, and kept
in docs/survey.md beside the table.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

# Each stack is one or more `pip install` steps: a later step installs over what pip's resolver
# would refuse as one set (cuda-bindings 13 over cuda-cccl's CUDA 12 route, as a user upgrading it does),
# or what a user adds to an environment later (torch into a JAX or TensorFlow venv). Top-level releases
# are pinned so the table can be rebuilt; WORKDIR/json/<stack>.freeze records what pip chose beneath.
STACKS = {
    "torch": [["torch==2.14.1"]],
    "cupy-cuda12x[ctk]": [["cupy-cuda12x[ctk]==14.2.0"]],
    "cuda-cccl[minimal-cu12]": [["cuda-cccl[minimal-cu12]==1.2.1"]],
    "cuda-cccl (cuda-bindings 13, CUDA 12 libraries)": [["cuda-cccl[minimal-cu12]==1.2.1"], ["cuda-bindings==13.5.0"]],
    "numba-cuda[cu12]": [["numba==0.68.1", "numba-cuda[cu12]==0.30.4"]],
    "onnxruntime-gpu[cuda,cudnn]": [["onnxruntime-gpu[cuda,cudnn]==1.31.1"]],
    "torch + torchvision + torchaudio": [["torch==2.14.1", "torchvision==0.29.1", "torchaudio==2.11.0"]],
    "xformers": [["torch==2.14.1", "xformers==0.0.35"]],
    "xformers (healthy, CUDA 12)": [["torch==2.10.0", "xformers==0.0.34"]],
    "jax[cuda12], then torch": [["jax[cuda12]==0.10.2"], ["torch==2.14.1"]],
    "jax[cuda12], then cuDNN 9.5": [["jax[cuda12]==0.10.2"], ["nvidia-cudnn-cu12==9.5.1.17"]],
    "tensorflow[and-cuda], then torch": [["tensorflow[and-cuda]==2.21.0"], ["torch==2.14.1"]],
    "nvidia-nccl-cu12, then nvidia-nccl-cu13": [["nvidia-nccl-cu12==2.27.7"], ["nvidia-nccl-cu13==2.28.9"]],
    "torch 2.1.2 (CUDA 12.1)": [["torch==2.1.2"]],
    "onnxruntime-gpu 1.18.1": [["onnxruntime-gpu==1.18.1"]],
    "onnxruntime-gpu 1.19.2 + cuDNN 9.1": [["onnxruntime-gpu==1.19.2", "nvidia-cudnn-cu12==9.1.0.70"]],
    "cupy-cuda12x 13": [["cupy-cuda12x==13.6.0"]],
    "cupy-cuda12x 13 + CUDA 12 wheels": [["cupy-cuda12x==13.6.0",
                                          "cuda-toolkit[cublas,cudart,cufft,curand,cusolver,cusparse,nvrtc]==12.9.*"]],
    "cupy-cuda12x 14": [["cupy-cuda12x==14.2.0"]],
    "openmm[cuda12]": [["openmm[cuda12]==8.6.1"]],
    "warp-lang": [["warp-lang==1.19.0"]],
    "cuda-core[cu12], then nvJitLink 12.4": [["cuda-core[cu12]==1.2.2"], ["nvidia-nvjitlink-cu12==12.4.127"]],
}
# What pip freeze prints, also for venvs made without pip (the tests' are made by another installer).
FREEZE = ("import importlib.metadata as m; print('\\n'.join(sorted(f\"{d.metadata['Name']}=={d.version}\" "
          "for d in m.distributions())))")
HOSTS = [("575.57.08", "8.6"), ("580.65.06", "6.1"), ("535.104.05", "8.0")]


def venv_of(workdir: Path, name: str) -> Path:
    return workdir / "".join(c if c.isalnum() or c in ".-" else "-" for c in name).strip("-")


def python_of(workdir: Path, name: str, steps: list[list[str]]) -> str | None:
    """The stack's interpreter, built once; None (and a note on stderr) when pip cannot install it."""
    venv = venv_of(workdir, name)
    python = venv / "bin" / "python"
    if not (venv / ".complete").exists():
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        for requirements in steps:
            if subprocess.run([str(python), "-m", "pip", "install", "-q", *requirements]).returncode:
                sys.stderr.write(f"{name}: pip install {' '.join(requirements)} failed\n")
                return None
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
    parser.add_argument("--drop-below", type=float, metavar="GB",
                        help="delete a stack's venv after judging it when the disk has less than GB free")
    args = parser.parse_args()
    given = dict(item.split("=", 1) for item in args.venv)
    reports = args.workdir / "json"
    reports.mkdir(parents=True, exist_ok=True)
    rows = ["| stack | host | severity | check | subject | finding | fix |", "|---|---|---|---|---|---|---|"]
    for name in args.stack or list(STACKS):
        python = given.get(name) or python_of(args.workdir, name, STACKS[name])
        if python is None:
            rows.append(f"| {name} | — | — | — | — | pip could not install it | |")
            continue
        stem = venv_of(reports, name)
        freeze = subprocess.run([python, "-c", FREEZE], capture_output=True, text=True, check=True)
        Path(f"{stem}.freeze").write_text(freeze.stdout)
        for driver, gpu in HOSTS:
            report = judge(python, driver, gpu)
            Path(f"{stem}@{driver}-{gpu}.json").write_text(json.dumps(report, indent=1))
            host = f"driver {driver}, GPU {gpu}"
            if not report["findings"]:
                rows.append(f"| {name} | {host} | — | — | — | no findings | |")
            for finding in report["findings"]:
                message, fix = (text.replace("|", "\\|") for text in (finding["message"], finding["fix"] or ""))
                rows.append(f"| {name} | {host} | {finding['severity']} | {finding['check']} | "
                            f"{finding['subject']} | {message} | {fix} |")
        if name not in given and args.drop_below and shutil.disk_usage(args.workdir).free < args.drop_below * 2**30:
            shutil.rmtree(venv_of(args.workdir, name))
    table = "\n".join(rows) + "\n"
    if args.out:
        args.out.write_text(table)
    else:
        sys.stdout.write(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
