"""Installed distributions, read from the `*.dist-info` directories of a site-packages directory.

Reads the files pip writes (METADATA, RECORD, INSTALLER) directly rather than through
importlib.metadata, because the target is usually another interpreter's environment and a broken
dist-info must become a problem record with its reason, not an exception halfway through the scan.
A dist-info whose name or version cannot be read is left out; one whose RECORD, INSTALLER or a
Requires-Dist line is bad is kept with what could be read. Both are reported as `Problem`s. pip's
uninstall stash (`~`-prefixed names) is not read at all, as pip does not read it.
"""

from __future__ import annotations

import csv
import os
import re
from dataclasses import dataclass
from typing import Optional

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from cudaresolve.binary.names import is_shared_object_name
from cudaresolve.bounded import parse_requirement, read_bounded
from cudaresolve.env.tree import STASH_PREFIX
from cudaresolve.records import shown

# A METADATA or RECORD file is kB (torch's RECORD: 3 MB); a bound above any real one.
MAX_DIST_INFO_FILE = 64 * 1024 * 1024
# METADATA is parsed as an email message, which costs far more per byte than RECORD's CSV: its own
# bounds (a description in the file is rarely past 100 kB; apache-airflow's lists ~800 Requires-Dist),
# docs/security.md "Work budgets".
MAX_METADATA_FILE = 4 * 1024 * 1024
MAX_REQUIRES = 5000

UNOWNED_FILES = "; its files count as unowned"  # what an unusable RECORD costs, said in its problem

DIGEST = re.compile(r"sha256=[A-Za-z0-9_-]{43}")  # RECORD's hash: urlsafe base64 of 32 bytes, unpadded
SIZE = re.compile(r"[0-9]{1,15}")


@dataclass(frozen=True)
class CondaRecord:
    """A package conda installed in a prefix, as its conda-meta/<name>-<version>-<build>.json says."""

    name: str  # conda's name, as conda writes it ("libnvjitlink", "_openmp_mutex")
    version: str  # conda's version string: not always PEP 440 ("1.1.1w", "2023c")
    build: str  # "h99ab3db_1"; "" when the record has none
    channel: str  # as recorded ("https://channels.example.invalid/conda-forge/linux-64", a URL); "" when absent
    depends: tuple[str, ...]  # conda match specs, unparsed ("cuda-version >=12.4,<12.5.0a0")
    record: str  # absolute path of the conda-meta JSON file

    @property
    def label(self) -> str:
        """How findings name it: "libnvjitlink 12.4.127 (conda)"."""
        return f"{self.name} {self.version} (conda)"


@dataclass(frozen=True)
class Distribution:
    name: str  # canonical: "nvidia-cusparse-cu12"; a conda package's own name (`kind` "conda")
    version: Version  # local label kept: Version("2.5.1+cu124").local == "cu124"; for conda, `conda_version`
    requires: tuple[Requirement, ...]  # Requires-Dist, markers and extras unevaluated
    installer: Optional[str]  # INSTALLER's first line ("pip", "uv", "conda"); None when absent
    dist_info: str  # absolute path of the .dist-info directory; a conda package's: its conda-meta record
    files: tuple[str, ...]  # RECORD entries as absolute, normalised paths; () when RECORD is unusable
    extras: frozenset[str] = frozenset()  # extras installed with it (normalised names)
    conda: Optional[CondaRecord] = None  # the conda package that installed it, when conda did
    # (path as in `files`, "sha256=<urlsafe base64>", size) of the RECORD rows naming a shared object
    # with a well-formed hash and size: the facts cache finds a file's facts by them (env/cache.py)
    recorded: tuple[tuple[str, str, int], ...] = ()

    @property
    def kind(self) -> str:
        """"conda" for a conda package that is no Python distribution (libnvjitlink, nccl: read from
        conda-meta alone), "python" for one with a dist-info (conda may have installed it)."""
        return "conda" if self.conda is not None and self.dist_info == self.conda.record else "python"

    @property
    def label(self) -> str:
        """How findings name it: "torch 2.14.1", or a conda package with conda's version string."""
        return self.conda.label if self.conda is not None and self.kind == "conda" else f"{self.name} {self.version}"


@dataclass(frozen=True)
class Problem:
    """Something in the environment that could not be read as expected, and why."""

    path: str
    reason: str


@dataclass(frozen=True)
class Metadata:
    name: str
    version: Version
    requires: tuple[Requirement, ...]
    bad_requires: tuple[str, ...]  # Requires-Dist values that do not parse


class MetadataError(ValueError):
    """METADATA lacks a usable Name or Version; the message is the reason."""


def parse_metadata(text: str) -> Metadata:
    """The fields the scan needs from a METADATA file (an email-header document)."""
    from email.parser import HeaderParser  # a lock whose target holds no distribution does without it

    headers = HeaderParser().parsestr(text)
    name = headers.get("Name")
    raw_version = headers.get("Version")
    if not name or not name.strip():
        raise MetadataError("METADATA has no Name")
    if not raw_version or not raw_version.strip():
        raise MetadataError("METADATA has no Version")
    try:
        version = Version(raw_version.strip())
    except ValueError:  # InvalidVersion, or a number past int()'s 4,300 digits
        raise MetadataError(f"invalid version {shown(raw_version.strip())} in METADATA") from None
    values = headers.get_all("Requires-Dist") or ()
    if len(values) > MAX_REQUIRES:
        raise MetadataError(f"METADATA has {len(values):,} Requires-Dist fields, more than {MAX_REQUIRES:,}")
    requires = []
    bad = []
    for value in values:
        try:
            requires.append(parse_requirement(value))
        except InvalidRequirement:
            bad.append(value)
    return Metadata(
        name=canonicalize_name(name.strip()),
        version=version,
        requires=tuple(requires),
        bad_requires=tuple(bad),
    )


def parse_record(text: str, root: str) -> tuple[str, ...]:
    """RECORD's paths made absolute against `root` (the directory holding the dist-info).

    Paths are relative to `root` and may climb out of it with `..` (scripts, data files);
    normpath folds those so they compare equal to paths found by walking the tree.
    """
    return parse_record_rows(text, root)[0]


def parse_record_rows(text: str, root: str) -> tuple[tuple[str, ...], tuple[tuple[str, str, int], ...]]:
    """`parse_record`'s paths, and (path, digest, size) of the rows naming a shared object whose hash
    and size are well formed (a malformed one is left out: its file is then read, not looked up)."""
    prefix = os.path.join(os.path.normpath(root), "")
    paths = []
    recorded = []
    for row in csv.reader(text.splitlines()):
        if not row or not row[0]:
            continue
        name = row[0]
        if name[0] == "/" or name[-1] == "/" or "//" in name or "/." in "/" + name:
            path = os.path.normpath(os.path.join(root, name))
        else:  # nothing to fold (torch's RECORD: 20k such rows): normpath would return prefix + name
            path = prefix + name
        paths.append(path)
        if (".so" in name and len(row) == 3 and DIGEST.fullmatch(row[1]) and SIZE.fullmatch(row[2])
                and is_shared_object_name(os.path.basename(path))):
            recorded.append((path, row[1], int(row[2])))
    return tuple(paths), tuple(recorded)


def read_distributions(site_packages: str) -> tuple[tuple[Distribution, ...], tuple[Problem, ...]]:
    """Every `*.dist-info` directly under `site_packages` but pip's stash, sorted by name then dist-info path."""
    try:
        entries = sorted(os.listdir(site_packages))
    except OSError as exc:
        return (), (Problem(site_packages, f"cannot list: {exc.strerror or exc}"),)
    distributions = []
    problems: list[Problem] = []
    for entry in entries:
        if not entry.endswith(".dist-info") or entry.startswith(STASH_PREFIX):
            continue
        dist_info = os.path.join(site_packages, entry)
        if not os.path.isdir(dist_info):
            continue
        distribution = _read_dist_info(dist_info, site_packages, problems)
        if distribution is not None:
            distributions.append(distribution)
    distributions.sort(key=lambda d: (d.name, d.dist_info))
    return tuple(distributions), tuple(problems)


def _read_dist_info(dist_info: str, root: str, problems: list[Problem]) -> Optional[Distribution]:
    metadata_path = os.path.join(dist_info, "METADATA")
    try:
        metadata = parse_metadata(_read_text(metadata_path, MAX_METADATA_FILE))
    except (OSError, UnicodeDecodeError, MetadataError) as exc:
        problems.append(Problem(dist_info, _reason("METADATA", exc)))
        return None
    for value in metadata.bad_requires:
        problems.append(Problem(dist_info, f"unparsable Requires-Dist {shown(value)} skipped"))

    files: tuple[str, ...] = ()
    recorded: tuple[tuple[str, str, int], ...] = ()
    try:
        files, recorded = parse_record_rows(_read_text(os.path.join(dist_info, "RECORD")), root)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        problems.append(Problem(dist_info, _reason("RECORD", exc) + UNOWNED_FILES))

    installer = None
    try:
        lines = _read_text(os.path.join(dist_info, "INSTALLER")).splitlines()
        installer = lines[0].strip() if lines else None
    except FileNotFoundError:
        pass
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(Problem(dist_info, _reason("INSTALLER", exc)))

    return Distribution(
        name=metadata.name,
        version=metadata.version,
        requires=metadata.requires,
        installer=installer or None,
        dist_info=dist_info,
        files=files,
        recorded=recorded,
    )


def _read_text(path: str, limit: int = MAX_DIST_INFO_FILE) -> str:
    return read_bounded(path, limit, regular=True).decode("utf-8")


def _reason(what: str, exc: Exception) -> str:
    if isinstance(exc, FileNotFoundError):
        return f"{what} is missing"
    if isinstance(exc, OSError):
        return f"{what} is unreadable: {exc.strerror or exc}"
    if isinstance(exc, UnicodeDecodeError):
        return f"{what} is not UTF-8 (byte {exc.start})"
    if isinstance(exc, csv.Error):
        return f"{what} is not valid CSV: {exc}"
    return str(exc)
