"""Independent readers of a lock, for the acceptance scenarios (tests/resolve/test_lock_scenarios.py).

- pip: `pip install --dry-run --ignore-installed --report` with the lock's constraints file (which
  carries the index lines at its top) and the same requirements must pick exactly the locked versions.
- uv: a second PEP 751 reader; `uv pip install -r pylock.toml` into a fresh, empty venv (files
  downloaded, hashes checked) must install exactly the lock's packages.

Both run with this machine's pip/uv configuration switched off, so only the files steer them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import venv
from pathlib import Path
from typing import Sequence

from conftest import hermetic_environ
from packaging.utils import canonicalize_name

from cudaresolve.resolve.lock import Lock


def pip_picks(tmp_path: Path, constraints: Path, requirements: Sequence[str]) -> dict[str, str]:
    """name -> version real pip would install for `requirements` under `-c constraints`."""
    report = tmp_path / "pip-report.json"
    command = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-cache-dir", "--quiet",
               "--report", str(report), "-c", str(constraints), *requirements]
    result = subprocess.run(command, capture_output=True, text=True, env=hermetic_environ())
    assert result.returncode == 0, f"pip refused the lock's constraints:\n{result.stderr}"
    return {canonicalize_name(i["metadata"]["name"]): i["metadata"]["version"] for i in json.loads(report.read_text())["install"]}


def pip_resolves_freely(tmp_path: Path, index_url: str, requirements: Sequence[str]) -> dict[str, str]:
    """name -> version pip picks from the index alone (no lock): what the metadata allows."""
    report = tmp_path / "pip-free-report.json"
    command = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-cache-dir", "--quiet",
               "--report", str(report), "--index-url", index_url, *requirements]
    result = subprocess.run(command, capture_output=True, text=True, env=hermetic_environ())
    assert result.returncode == 0, result.stderr
    return {canonicalize_name(i["metadata"]["name"]): i["metadata"]["version"] for i in json.loads(report.read_text())["install"]}


def uv_installs(uv: Path, tmp_path: Path, pylock: Path) -> dict[str, str]:
    """name -> version uv installs from `pylock` into a new, empty venv."""
    target = tmp_path / "uv-target"
    venv.create(target, with_pip=False)
    env = hermetic_environ({"UV_CACHE_DIR": str(tmp_path / "uv-cache")})
    common = ["--no-config", "--preview-features", "pylock", "--python", str(target / "bin" / "python")]
    result = subprocess.run([str(uv), "pip", "install", *common, "-r", str(pylock)], capture_output=True, text=True, env=env)
    assert result.returncode == 0, f"uv refused the pylock:\n{result.stderr}"
    listed = subprocess.run([str(uv), "pip", "list", *common, "--format", "json"], capture_output=True, text=True, env=env, check=True)
    return {canonicalize_name(item["name"]): item["version"] for item in json.loads(listed.stdout)}


def locked(lock: Lock) -> dict[str, str]:
    """name -> version of every package of the lock (kept ones included)."""
    return {canonicalize_name(p.name): str(p.version) for p in lock.packages}


def locked_with_source(lock: Lock) -> dict[str, str]:
    """name -> version of the packages a PEP 751 reader can install: those with a wheel."""
    return {canonicalize_name(p.name): str(p.version) for p in lock.packages if p.wheels}
