"""The conda packages of a prefix, read from its conda-meta/*.json records.

conda writes one record per installed package: name, version, build, channel, `depends` and the
`files` it linked into the prefix (paths relative to the prefix). A record whose files include a
dist-info the site-packages scan reads is that Python distribution, installed by conda; any other
record that ships ELF shared objects becomes a distribution of its own (`Distribution.kind`
"conda"), so a conda `libnvJitLink.so.12` is owned by `libnvjitlink` as a wheel's file is owned
by its wheel. A record that cannot be read is a `Problem` with its reason; the rest are read.

Only the JSON is parsed here; which of the listed files are ELF objects is the scan's business.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from typing import Iterable, Optional, Sequence

from packaging.version import Version

from cudaresolve.binary.names import is_shared_object_name
from cudaresolve.bounded import loads_json, read_bounded
from cudaresolve.env.distributions import CondaRecord, Distribution, Problem
from cudaresolve.errors import UsageError
from cudaresolve.knowledge import components
from cudaresolve.versions import CudaVersion

CONDA_META = "conda-meta"
_RELEASE = re.compile(r"[0-9]{1,18}(?:\.[0-9]{1,18})*")  # int() reads these; "\d" would also take "²"
# A record lists every file of its package (a CUDA toolkit's: a few MB); a bound above any real one.
MAX_RECORD = 64 * 1024 * 1024


@dataclass(frozen=True)
class CondaPackage:
    """One record with the files it lists, as absolute, normalised paths."""

    record: CondaRecord
    files: tuple[str, ...]


@dataclass(frozen=True)
class CondaPrefix:
    """A conda prefix as its records describe it: every package conda installed there, by name."""

    path: str
    records: tuple[CondaRecord, ...]  # sorted by name

    def record(self, name: str) -> Optional[CondaRecord]:
        """The installed package of this name ("cuda-version"), None when there is none."""
        return next((r for r in self.records if r.name == name), None)

    def cuda(self) -> Optional[CudaVersion]:
        """The CUDA the prefix's `cuda-version` package pins ("12.4"); None without one, or when its
        version is not a CUDA version."""
        record = self.record(components.cuda_version_package())
        if record is None:
            return None
        try:
            return CudaVersion.parse(record.version)
        except UsageError:
            return None


class CondaMetaError(ValueError):
    """A conda-meta record that cannot be used; the message is the reason."""


def conda_version(raw: str) -> Version:
    """A conda version as a `Version` for comparisons: itself where it is PEP 440 ("12.4.127"),
    else its leading release numbers ("1.1.1w" -> 1.1.1), else 0. The record keeps the string."""
    try:
        return Version(raw)
    except ValueError:  # InvalidVersion, or a number past int()'s 4,300 digits
        match = _RELEASE.match(raw)
        return Version(match.group(0)) if match else Version("0")


def parse_record(text: str, path: str, prefix: str) -> CondaPackage:
    """One conda-meta record (JSON text read from `path`) with its files made absolute under `prefix`."""
    try:
        data = loads_json(text)
    except ValueError as exc:
        raise CondaMetaError(f"conda-meta record is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise CondaMetaError("conda-meta record is not a JSON object")
    name, version = data.get("name"), data.get("version")
    if not isinstance(name, str) or not name.strip():
        raise CondaMetaError("conda-meta record has no name")
    if not isinstance(version, str) or not version.strip():
        raise CondaMetaError(f"conda-meta record of {name} has no version")
    files, depends = data.get("files", []), data.get("depends", [])
    if not _strings(files):
        raise CondaMetaError(f"conda-meta record of {name}: files is not a list of paths")
    if not _strings(depends):
        raise CondaMetaError(f"conda-meta record of {name}: depends is not a list of strings")
    build, channel = data.get("build", ""), data.get("channel", "")
    record = CondaRecord(
        name=name.strip(),
        version=version.strip(),
        build=build if isinstance(build, str) else "",
        channel=channel if isinstance(channel, str) else "",
        depends=tuple(depends),
        record=path,
    )
    root = os.path.join(os.path.normpath(prefix), "")
    return CondaPackage(record, tuple(_absolute(root, f) for f in files))


def read_conda_meta(prefix: str) -> tuple[tuple[CondaPackage, ...], tuple[Problem, ...]]:
    """Every record in `prefix`/conda-meta, sorted by name; what cannot be read, with why."""
    meta = os.path.join(prefix, CONDA_META)
    try:
        names = sorted(n for n in os.listdir(meta) if n.endswith(".json"))
    except OSError as exc:
        return (), (Problem(meta, f"cannot list: {exc.strerror or exc}"),)
    packages, problems = [], []
    for name in names:
        path = os.path.join(meta, name)
        try:
            packages.append(parse_record(read_bounded(path, MAX_RECORD, regular=True).decode("utf-8"), path, prefix))
        except OSError as exc:
            problems.append(Problem(path, f"cannot read: {exc.strerror or exc}"))
        except UnicodeDecodeError as exc:
            problems.append(Problem(path, f"conda-meta record is not UTF-8 (byte {exc.start})"))
        except CondaMetaError as exc:
            problems.append(Problem(path, str(exc)))
    packages.sort(key=lambda p: (p.record.name, p.record.record))
    return tuple(packages), tuple(problems)


def with_conda(
    distributions: Sequence[Distribution], packages: Iterable[CondaPackage], site_packages: Sequence[str]
) -> tuple[list[Distribution], dict[str, list[str]]]:
    """The distributions with conda's packages merged in, and for each package that may own ELF
    files outside site-packages (the scan finds those inside), the shared-object paths it lists.

    A package listing a dist-info that `distributions` holds is that distribution (`conda` set,
    its name, files added); one listing a dist-info outside `site_packages` is a Python package of
    another environment (a venv's conda base: invisible to the venv) and is left out; any other is
    a conda-kind distribution under conda's name. Which of the listed paths are ELF files, and so
    which conda-kind packages stay, the caller decides.
    """
    by_dist_info = {os.path.normpath(d.dist_info): d for d in distributions}
    inside = tuple(os.path.join(os.path.normpath(sp), "") for sp in site_packages)
    merged: dict[str, Distribution] = {d.dist_info: d for d in distributions}
    shared_objects: dict[str, list[str]] = {}
    for package in packages:
        dist_infos = _dist_infos(package.files)
        python = next((by_dist_info[d] for d in dist_infos if d in by_dist_info), None)
        if python is None and any(not os.path.join(d, "").startswith(inside) for d in dist_infos):
            continue
        outside = [f for f in package.files  # the substring test first: python's record lists 5,000 files
                   if ".so" in f and is_shared_object_name(os.path.basename(f)) and not f.startswith(inside)]
        if python is not None:
            # conda's list stands in for a RECORD that could not be read
            files = tuple(dict.fromkeys((python.files or package.files) + tuple(outside)))
            merged[python.dist_info] = replace(python, conda=package.record, files=files)
            owner = python.dist_info
        else:
            merged[package.record.record] = Distribution(
                name=package.record.name,
                version=conda_version(package.record.version),
                requires=(),
                installer="conda",
                dist_info=package.record.record,
                files=package.files,
                conda=package.record,
            )
            owner = package.record.record
        if outside:
            shared_objects[owner] = outside
    return sorted(merged.values(), key=lambda d: (d.name, d.dist_info)), shared_objects


def _dist_infos(files: Iterable[str]) -> set[str]:
    """The dist-info directories a record's files lie in (directly: METADATA, RECORD, ...)."""
    return {os.path.dirname(f) for f in files if ".dist-info/" in f and os.path.dirname(f).endswith(".dist-info")}


def _strings(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def _absolute(root: str, path: str) -> str:
    """`path` (relative to the prefix, as conda writes it) under `root`, folded like RECORD paths."""
    if "/." in "/" + path or "//" in path or path.startswith("/"):
        return os.path.normpath(os.path.join(root, path))
    return root + path
