"""An sdist's metadata as pip prepares it, for an sdist whose PKG-INFO does not give its dependencies
(Metadata-Version before 2.2, `Requires-Dist` listed in `Dynamic`, or no PKG-INFO).

pip's own machinery does it, run as a program: `pip install --dry-run --no-deps --report` of the
downloaded, hash-checked file, which prepares the metadata in pip's isolated build environment
(the build backend's `prepare_metadata_for_build_wheel`, or a wheel build where the backend has
none) and writes it as JSON. Not `pip wheel`: that builds the whole wheel, C extensions included,
where only the metadata is needed. This runs the sdist's code, as `pip install` of it would; pip's
only-binary (`--only-binary :all:`) refuses sdists before anything gets here.

The pip is that of the interpreter cudaresolve runs in: the target may hold none (a fresh venv),
and the build environment is pip's own, isolated from both. pip is given the lock's indexes for
the build requirements and reads its configuration as it always does. The run is bounded in time
and output, the report in size; the metadata is cached by the sdist's sha256 like any metadata.

May import: env/interpreter, inputs (bounded runs), index/ (downloads, http, limits, pages).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Any, Optional

from packaging.utils import canonicalize_name

from cudaresolve.bounded import TooMuchOutput, run_bounded
from cudaresolve.index.downloads import Progress, download
from cudaresolve.index.http import Http, IndexAccessError, local_path
from cudaresolve.index.limits import size_text
from cudaresolve.index.pages import ProjectFile

OUTPUT_LIMIT = 1 << 20  # pip is run quiet; a backend printing more than this is stopped
_LISTS = ("requires_dist", "provides_extra")
_SINGLE = ("metadata_version", "name", "version", "requires_python")


class BuildFailed(IndexAccessError):
    """pip could not prepare the sdist's metadata (its build failed, took too long or said too much)."""


def prepared_metadata(http: Http, file: ProjectFile, index_options: list[str], progress: Optional[Progress] = None) -> bytes:
    """The core metadata of the sdist `file` as pip prepares it, written as a METADATA file."""
    what = f"{file.filename} ({file.name} {file.version})"
    extension = ".zip" if file.filename.endswith(".zip") else ".tar.gz"
    with tempfile.TemporaryDirectory(prefix="cudaresolve-sdist-") as scratch:
        # a name of our own making: the index's may hold anything its URL decodes to
        sdist = os.path.join(scratch, f"{canonicalize_name(file.name).replace('-', '_')}-{file.version}{extension}")
        with open(sdist, "wb") as out:
            if file.url.startswith("file:"):
                try:
                    with open(local_path(file.url), "rb") as local:
                        shutil.copyfileobj(local, out)
                except OSError as exc:
                    raise IndexAccessError(f"cannot read {local_path(file.url)} ({file.name} {file.version}): {exc.strerror or exc}") from None
            else:
                with download(http, file, progress) as whole:
                    shutil.copyfileobj(whole, out)
        report = os.path.join(scratch, "report.json")
        command = [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--ignore-installed",
                   "--ignore-requires-python", "--quiet", "--no-input", "--disable-pip-version-check",
                   "--report", report, *index_options, sdist]
        seconds = http.limits.build_seconds
        try:
            status, _, err = run_bounded(command, b"", seconds, OUTPUT_LIMIT)
        except subprocess.TimeoutExpired:
            raise BuildFailed(f"{what}: pip did not prepare its metadata within {seconds:.0f} s, the limit for an sdist's build") from None
        except TooMuchOutput:
            raise BuildFailed(f"{what}: pip's build printed more than {size_text(OUTPUT_LIMIT)}") from None
        except OSError as exc:
            raise BuildFailed(f"{what}: cannot run {sys.executable} -m pip to prepare its metadata: {exc.strerror or exc}") from None
        if status != 0:
            raise BuildFailed(f"{what}: pip could not prepare its metadata (exit {status}): {_last_line(err)}")
        try:
            with open(report, "rb") as found:
                body = found.read(http.limits.metadata_bytes + 1)
        except OSError as exc:
            raise BuildFailed(f"{what}: pip wrote no report ({exc.strerror or exc})") from None
    if len(body) > http.limits.metadata_bytes:
        raise BuildFailed(f"{what}: pip's report is larger than {size_text(http.limits.metadata_bytes)}, the limit for a metadata file")
    return metadata_file(body, what)


def metadata_file(report: bytes, what: str) -> bytes:
    """The one installed item's metadata in pip's JSON report, as a METADATA file (PEP 566's JSON form
    turned back into its email form). A value that could break a line is refused."""
    try:
        items = json.loads(report)["install"]
        if not isinstance(items, list) or len(items) != 1 or not isinstance(items[0], dict):
            raise TypeError("not one item to install")
        metadata: Any = items[0]["metadata"]
        if not isinstance(metadata, dict):
            raise TypeError("metadata is not a table")
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        raise BuildFailed(f"{what}: pip's report does not hold its metadata ({exc})") from None
    lines = []
    for key in _SINGLE:
        value = metadata.get(key)
        if value is not None:
            lines.append(f"{_header(key)}: {_one_line(value, key, what)}")
    for key in _LISTS:
        values = metadata.get(key) or []
        if not isinstance(values, list):
            raise BuildFailed(f"{what}: pip's report: {key} is not a list")
        lines += [f"{_header(key)}: {_one_line(value, key, what)}" for value in values]
    return ("\n".join(lines) + "\n\n").encode()


def _header(key: str) -> str:
    return "-".join(part.capitalize() for part in key.split("_"))


def _one_line(value: Any, key: str, what: str) -> str:
    if not isinstance(value, str) or "\n" in value or "\r" in value:
        raise BuildFailed(f"{what}: pip's report: {key} is not one line of text: {str(value)[:80]!r}")
    return value


def _last_line(err: bytes) -> str:
    lines = [line.strip() for line in err.decode("utf-8", "replace").splitlines() if line.strip()]
    errors = [line for line in lines if line.lower().startswith("error")]
    shown = (errors or lines or ["(it said nothing)"])[-1]
    return shown if len(shown) <= 300 else shown[:300] + "…"
