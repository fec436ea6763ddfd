"""Regenerate data/wheel_facts.toml: what known NVIDIA CUDA component wheels' ELF files bind and carry.

Usage: python scripts/record_wheel_facts.py [--cache DIR] [--add NAME==VERSION ...]
       python scripts/record_wheel_facts.py --every NAME [--every NAME ...]
       python scripts/record_wheel_facts.py --machine aarch64 --only NAME==VERSION [--only ...] [--drop NAME==VERSION ...]

Why a generated table: NVIDIA keeps .dynstr/.dynamic at the end of 300 MB libraries inside deflated
zip members, so the resolver cannot read a candidate wheel's needs without downloading all of it.
The releases covered (each requirement below expands to the newest release of each X.Y minor among
the index's releases that satisfy it):
  - the CUDA wheels torch 2.14.1 pins (its METADATA, read from the test cache's torch venv), through the
    cuda-toolkit extras it names;
  - the `[ctk]` extra of the newest cupy-cuda12x and cupy-cuda13x, and cuda-cccl 1.2.1's `[cu12]`
    and `[cu13]`: cuda-toolkit==12.* / ==13.* and its extras, read from cuda-toolkit's METADATA;
  - every minor of the components that bind each other by versioned symbols and of cuDNN for CUDA 13
    (EACH_MINOR), the newest cuDNN for CUDA 12, and `--add NAME==VERSION` (also read from the
    table's previous `[releases] added`, so an addition survives a rerun);
  - every minor of the packages that consume CUDA wheels (CONSUMERS: onnxruntime-gpu), so a fix can
    name the newest build for a CUDA major or a GPU. Their rows keep what those fixes judge (needs,
    search paths, device code), not the symbols bound: a package's own symbols cross no wheel.
Versions come from `pip index versions`, wheels from `pip download` (pip's own index configuration,
Linux x86_64 manylinux tags, CPython 3.11). The facts read from each wheel are kept in the cache
directory (default ~/.cache/cudaresolve-wheel-facts), keyed by the wheel's name and version, so a
rerun downloads and reads only the releases it has no facts of; `--drop-wheels` deletes each wheel
once read (45 GB for the whole set), and the requirements of the wheels `expand` reads are kept too.

Rows are per machine: a release read for x86_64 and aarch64 has a row for each wheel. The release
set above is x86_64's (a full run rewrites the x86_64 rows and keeps every other machine's). Another
machine's rows come from `--machine M --only NAME==VERSION ...`, which reads only those releases:
the wheel's URL and sha256 from `pip install --dry-run --report` (pip's index configuration, that
machine's manylinux tags), then its ELF members by HTTP range requests (the zip's directory, then
each shared-object member), so no wheel is stored; it replaces or adds only those rows, keeps the
rest of the table as it is, and lists the releases under `[[releases.machine]]`. A full run keeps
those rows as written; rerunning `--only` with the releases listed there refreshes them. A row
written before that defines what this run's reads bind gets its `defines` redone from the facts
the cache keeps of its wheel (or is named, to rerun). `--machine M --drop NAME==VERSION` removes
a row of that machine.

`--every NAME` covers every release of NAME (x86_64, pre-releases excepted) one wheel at a time:
each release without a row is read by range requests as `--only` reads (no wheel is stored), its
facts kept in the cache directory as soon as read, so an interrupted run resumes where it stopped;
NAME is listed in `[releases] every` and a full run keeps every release of it. A distribution not
covered this way has rows for the releases above only: the rest are read from the wheel on demand.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import zipfile
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Set, Tuple

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import InvalidVersion, Version

from cudaresolve.binary.wheel import is_system_provider, read_wheel
from cudaresolve.env.inspect import provider_needs
from cudaresolve.index.http import Cap, Http
from cudaresolve.knowledge import components

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "data" / "wheel_facts.toml"
TORCH = ("torch", "2.14.1")
CUPY = ("cupy-cuda12x", "cupy-cuda13x")
CCCL = ("cuda-cccl==1.2.1", ("cu12", "cu13"))
EACH_MINOR = tuple(
    f"nvidia-{component}{suffix}"
    for suffix in ("-cu12", "")
    for component in ("nvjitlink", "cuda-nvrtc", "cusparse", "cusolver", "cufft", "cublas")
) + ("nvidia-cublas-cu11", "nvidia-cusparse-cu11", "nvidia-cusolver-cu11", "nvidia-cufft-cu11")
EACH_MINOR += ("nvidia-cudnn-cu13",)
NEWEST = ("nvidia-cudnn-cu12",)
CONSUMERS = ("onnxruntime-gpu>=1.17",)  # 1.17 and 1.18 are CUDA 11.8 builds, 1.19 ... 1.26 CUDA 12, 1.27 on CUDA 13
# Linux x86_64 wheels as pip on a glibc 2.28 machine takes them (torch 2.14.1 is manylinux_2_28).
PLATFORMS = tuple(f"manylinux_2_{minor}_x86_64" for minor in range(28, 4, -1)) + (
    "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64")
TARGET = [flag for platform in PLATFORMS for flag in ("--platform", platform)] + ["--python-version", "3.11"]
# Other machines' wheels (--machine): aarch64's as pip on a glibc 2.35 machine takes them (Grace
# servers run Ubuntu 22.04 or newer; onnxruntime-gpu's aarch64 wheels are manylinux_2_34).
MACHINE_PLATFORMS = {
    "x86_64": PLATFORMS,
    "aarch64": tuple(f"manylinux_2_{minor}_aarch64" for minor in range(35, 16, -1)) + ("manylinux2014_aarch64",),
}
WINDOW = 8 << 20  # bytes one range request fetches at most: the most read past a member's end
MARKERS = {"sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64",
           "python_version": "3.11", "python_full_version": "3.11.0", "os_name": "posix",
           "implementation_name": "cpython", "platform_python_implementation": "CPython"}
READ_FORMAT = 1  # bump when what read_one() keeps changes: cached reads of another format are read again
ABI_SUFFIX = re.compile(r"_(\d+)_(\d+)$")


# -- which releases ---------------------------------------------------------------------------------


def pip(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True)


_VERSIONS: Dict[str, List[Version]] = {}


def index_versions(name: str) -> List[Version]:
    """Every release of `name` on the index with a wheel for the target, newest first."""
    if name not in _VERSIONS:
        out = pip("index", "versions", name, *TARGET, "--only-binary=:all:").stdout
        match = re.search(r"Available versions: (.*)", out)
        found = []
        for text in (match.group(1).split(",") if match else ()):
            try:
                found.append(Version(text.strip()))
            except InvalidVersion:
                continue
        _VERSIONS[name] = sorted(found, reverse=True)
    return _VERSIONS[name]


def newest_of_each_minor(requirement: Requirement, only_newest: bool = False) -> List[str]:
    """The newest release of each X.Y among those the requirement allows (pre-releases excepted)."""
    chosen: Dict[Tuple[int, ...], Version] = {}
    for version in index_versions(str(canonicalize_name(requirement.name))):
        if version.is_prerelease or not requirement.specifier.contains(version, prereleases=False):
            continue
        chosen.setdefault(version.release[:2], version)
    versions = sorted(chosen.values(), reverse=True)
    return [str(v) for v in (versions[:1] if only_newest else versions)]


def every_release(name: str) -> List[str]:
    """Every release of `name` the index has an x86_64 wheel of, pre-releases excepted, oldest first."""
    return [str(v) for v in sorted(index_versions(canonicalize_name(name))) if not v.is_prerelease]


def same_release(filename: str, requirement: str) -> bool:
    name, _, version = requirement.partition("==")
    dist, found, _, _ = parse_wheel_filename(filename)
    return dist == canonicalize_name(name) and found == Version(version)


def download(requirement: str, cache: Path) -> Optional[Path]:
    """The cached wheel of NAME==VERSION, downloaded by pip when absent; None (and a warning) when pip has none."""
    wheels = cache / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)

    def cached() -> Optional[Path]:
        return next((path for path in wheels.glob("*.whl") if same_release(path.name, requirement)), None)

    path = cached()
    if path is None:
        result = pip("download", "--no-deps", "--only-binary=:all:", *TARGET, "-d", str(wheels), requirement)
        path = cached()
        if path is None:
            print(f"  skipped {requirement}: {result.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
    return path


def metadata_requires(source: Path) -> List[str]:
    """Requires-Dist of a wheel, or of an installed METADATA file."""
    if source.name == "METADATA":
        text = source.read_text(encoding="utf-8")
    else:
        with zipfile.ZipFile(source) as archive:
            name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1)
            text = archive.read(name).decode("utf-8")
    return [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Requires-Dist:")]


def requires_of(dist: str, version: str, cache: Path, wheel: Optional[Path] = None) -> List[Requirement]:
    """Requires-Dist of `dist==version`, kept in the cache once read (a rerun downloads no wheel for it)."""
    kept = cache / "requires" / f"{canonicalize_name(dist)}-{version}.json"
    if not kept.exists():
        wheel = wheel or download(f"{dist}=={version}", cache)
        if wheel is None:
            raise SystemExit(f"cannot read the requirements of {dist} {version}")
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(json.dumps(metadata_requires(wheel)))
    return [Requirement(text) for text in json.loads(kept.read_text())]


def expand(dist: str, version: str, extras: Iterable[str], cache: Path, wheel: Optional[Path] = None) -> List[Requirement]:
    """The NVIDIA component requirements `dist==version[extras]` names, through its own extras and cuda-toolkit's."""
    requires = requires_of(dist, version, cache, wheel)
    wanted, seen, found = [""] + list(extras), set(), []
    while wanted:
        extra = wanted.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for req in requires:
            if req.marker is not None and not req.marker.evaluate({**MARKERS, "extra": extra}):
                continue
            if req.marker is None and extra:
                continue  # unconditional requirements are taken once, in the pass of the empty extra
            name = canonicalize_name(req.name)
            if name == canonicalize_name(dist):
                wanted += sorted(req.extras)
            elif name == "cuda-toolkit":
                for toolkit in newest_of_each_minor(req):
                    found += expand("cuda-toolkit", toolkit, sorted(req.extras), cache)
            elif name.startswith("nvidia-"):
                found.append(req)
    return found


def release_set(cache: Path, added: Iterable[str], every: Iterable[str] = ()) -> Dict[str, Set[str]]:
    """NAME==VERSION -> why it is in the table."""
    chosen: Dict[str, Set[str]] = defaultdict(set)

    def take(requirement: Requirement, why: str, only_newest: bool = False) -> None:
        versions = newest_of_each_minor(requirement, only_newest)
        if not versions:
            print(f"  no release on the index allows {requirement} ({why})", file=sys.stderr)
        for version in versions:
            chosen[f"{canonicalize_name(requirement.name)}=={version}"].add(why)

    # the tests' torch venv holds its METADATA as copied from the wheel
    installed = f"venvs/*/lib/python*/site-packages/{TORCH[0]}-{TORCH[1]}.dist-info/METADATA"
    torch_metadata = next(cache_root_tests().glob(installed), None)
    if torch_metadata is None and not (cache / "requires" / f"{TORCH[0]}-{TORCH[1]}.json").exists():
        raise SystemExit(f"no {TORCH[0]} {TORCH[1]} venv in the test cache: run the tests once (they build it)")
    for req in expand(*TORCH, (), cache, wheel=torch_metadata):
        take(req, f"{TORCH[0]} {TORCH[1]}")
    for dist in CUPY:
        newest = newest_of_each_minor(Requirement(dist), only_newest=True)[0]
        for req in expand(dist, newest, ("ctk",), cache):
            take(req, f"{dist} {newest} [ctk]")
    name, _, version = CCCL[0].partition("==")
    for extra in CCCL[1]:
        for req in expand(name, version, (extra,), cache):
            take(req, f"{name} {version} [{extra}]")
    for dist in EACH_MINOR:
        take(Requirement(dist), "each minor")
    for dist in NEWEST:
        take(Requirement(dist), "newest", only_newest=True)
    for consumer in CONSUMERS:
        take(Requirement(consumer), "consumer, each minor")
    for name in every:
        for version in every_release(name):
            chosen[f"{name}=={version}"].add("every release")
    for requirement in added:
        req = Requirement(requirement)
        (spec,) = req.specifier
        chosen[f"{canonicalize_name(req.name)}=={spec.version}"].add("added")
    return chosen


def cache_root_tests() -> Path:
    root = os.environ.get("CUDARESOLVE_TEST_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "cudaresolve-tests")
    return Path(root)


# -- reading one wheel ------------------------------------------------------------------------------


def read_one(path: str) -> dict:
    """Everything the table may keep of one wheel: non-system binds, every versioned definition, device code."""
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
        stream.seek(0)
        data = read_stream(stream, os.path.basename(path))
    return {**data, "sha256": digest.hexdigest(), "size": os.path.getsize(path)}


def read_stream(stream, filename: str) -> dict:
    """The facts `read_one` keeps of the wheel in `stream` (seekable), without its sha256 and size."""
    facts = read_wheel(stream, filename)
    if facts.unreadable:
        raise SystemExit(f"{filename}: members the reader refuses: {facts.unreadable}")
    members = []
    for member in facts.members:
        binds = []
        for need in provider_needs(member):
            if is_system_provider(need.versions):
                continue
            symbols = sorted(f"{s.name}@{s.version}" for s in member.undefined if s.file == need.file)
            weak = [s.name for s in member.undefined if s.file == need.file and s.binding == "WEAK"]
            if weak:
                raise SystemExit(f"{member.path}: weak versioned needs {weak[:3]}: the table cannot say so yet")
            binds.append({"file": need.file, "versions": list(need.versions), "symbols": symbols,
                          "min_version": str(need.min_version) if need.min_version else None})
        defined = sorted({f"{s.name}{'@' if s.hidden else '@@'}{s.version}" for s in member.defined
                          if s.version is not None and s.name != s.version})
        fatbin = member.fatbin
        members.append({
            "path": member.path.split("!", 1)[1], "machine": member.machine, "soname": member.soname,
            "needed": list(member.needed), "rpath": list(member.rpath), "runpath": list(member.runpath),
            "version_definitions": list(member.version_definitions), "binds": binds, "defined": defined,
            "fatbin": None if fatbin is None else {
                "sass": list(fatbin.sass), "ptx": [f"{p.target}:{p.isa or ''}" for p in fatbin.ptx],
                "undetermined": list(fatbin.undetermined), "damage": list(fatbin.damage)},
        })
    machines = sorted({m["machine"] for m in members})
    if len(machines) > 1:
        raise SystemExit(f"{filename}: members of several machines {machines}")
    return {"format": READ_FORMAT, "filename": filename, "machine": machines[0] if machines else None,
            "members": members, "not_elf": list(facts.not_elf)}


def data_machine(data: dict) -> str:
    """The machine of a wheel's read facts (reads kept before machines were recorded are x86_64's)."""
    return data.get("machine") or next((m["machine"] for m in data["members"]), "x86_64")


def cached_read(requirement: str, cache: Path, machine: str = "x86_64") -> Optional[dict]:
    """The facts once read from the `machine` wheel of NAME==VERSION, without its wheel; None when
    not read yet, read by another format, or when the wheel in the cache is not the one read."""
    for file in sorted((cache / "facts").glob("*.whl.json")):
        if not same_release(file.name[:-len(".json")], requirement):
            continue
        data = json.loads(file.read_text())
        if data_machine(data) != machine:
            continue
        wheel = cache / "wheels" / data["filename"]
        if data.get("format") == READ_FORMAT and (not wheel.exists() or wheel.stat().st_size == data["size"]):
            return data
    return None


# -- reading one wheel of another machine by range requests (--only) -------------------------------


def locate(requirement: str, machine: str) -> Optional[Tuple[str, str, str]]:
    """(url, file name, sha256) of the `machine` wheel pip would take for NAME==VERSION, from pip's
    own index configuration; pip reads the metadata only (PEP 658, or its own range reads). None
    (and a warning) when the index has no such wheel."""
    target = [flag for platform in MACHINE_PLATFORMS[machine] for flag in ("--platform", platform)]
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
        result = pip("install", "--dry-run", "--ignore-installed", "--no-deps", "--only-binary=:all:", *target,
                     "--python-version", "3.11", "--target", str(Path(scratch) / "t"), "--report", str(report),
                     "--quiet", requirement)
        if result.returncode != 0 or not report.exists():
            print(f"  skipped {requirement}: no {machine} wheel ({result.stderr.strip().splitlines()[-1:]})", file=sys.stderr)
            return None
        [install] = json.loads(report.read_text())["install"]
    info = install["download_info"]
    url = info["url"]
    return url, url.rsplit("/", 1)[1].split("#")[0], info["archive_info"]["hashes"]["sha256"]


class RangeFile(io.RawIOBase):
    """A remote file read through HTTP range requests, one window of at most WINDOW bytes held: a
    member is inflated as it streams in, and only the zip's directory and the members read are fetched."""

    def __init__(self, http: Http, url: str, what: str):
        super().__init__()
        self.http, self.url, self.what = http, url, what
        reply = self._get(0, 0)
        self.size = int(reply.headers["Content-Range"].rsplit("/", 1)[1])
        self.position, self.start, self.window = 0, 0, b""

    def _get(self, start: int, end: int):
        reply = self.http.get(self.url, cap=Cap(end - start + 1, "a range read"), what=self.what,
                              headers={"Range": f"bytes={start}-{end}", "Accept-Encoding": "identity"})
        if reply.status != 206 or len(reply.body) != end - start + 1:
            raise SystemExit(f"{self.url}: bytes {start}-{end}: HTTP {reply.status}, {len(reply.body)} bytes")
        return reply

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.position

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        self.position = max(0, {io.SEEK_SET: 0, io.SEEK_CUR: self.position, io.SEEK_END: self.size}[whence] + offset)
        return self.position

    def read(self, n: int = -1) -> bytes:
        end = self.size if n is None or n < 0 else min(self.size, self.position + n)
        if end <= self.position:
            return b""
        held = self.start + len(self.window)
        if not (self.start <= self.position and end <= held):
            fetch_end = min(self.size, self.position + max(end - self.position, WINDOW))
            if self.start <= self.position < held:  # keep what is held, fetch only the rest
                self.window = self.window[self.position - self.start:] + self._get(held, fetch_end - 1).body
            else:
                self.window = self._get(self.position, fetch_end - 1).body
            self.start = self.position
        data = self.window[self.position - self.start:end - self.start]
        self.position = end
        return data

    def readinto(self, buffer) -> int:
        data = self.read(len(memoryview(buffer)))
        memoryview(buffer)[:len(data)] = data
        return len(data)


def read_remote(requirement: str, machine: str, http: Http) -> Optional[dict]:
    """What `read_one` keeps of the `machine` wheel of NAME==VERSION, read by range requests; the
    sha256 is the index's, and `read_bytes` what this read fetched. None when there is no such wheel."""
    located = locate(requirement, machine)
    if located is None:
        return None
    url, filename, sha256 = located
    before = http.bytes_received
    stream = RangeFile(http, url, requirement)
    data = read_stream(stream, filename)  # type: ignore[arg-type]
    if data["machine"] not in (None, machine):
        raise SystemExit(f"{filename}: its ELF members are {data['machine']}, not {machine}")
    # a wheel without shared objects (nvcc 13's) is the machine's by its tag
    return {**data, "machine": machine, "sha256": sha256, "size": stream.size, "read_bytes": http.bytes_received - before}


def consumer(name: str) -> bool:
    """A package consuming CUDA wheels, whose rows keep no bound symbols nor definitions."""
    return any(canonicalize_name(Requirement(c).name) == name for c in CONSUMERS)


# -- writing the table ------------------------------------------------------------------------------


def abi_suffixed(text: str) -> bool:
    """`__nvJitLinkComplete_12_4@@libnvJitLink.so.12`: a name carrying the CUDA major.minor of its version node's major."""
    name, _, version = text.partition("@")
    suffix, node = ABI_SUFFIX.search(name), re.search(r"\.so\.(\d+)", version)
    return bool(suffix and node and suffix.group(1) == node.group(1))


def own_files(data: dict) -> Set[str]:
    """The sonames and file names of a wheel's members: binds to them list no symbols, since a
    wheel's own files are installed together and cannot skew (cuDNN's libraries bind
    libcudnn_graph.so.9 by ~1,000 symbols per release)."""
    return {member["soname"] for member in data["members"] if member["soname"]} | {
        os.path.basename(member["path"]) for member in data["members"]}


def q(value: str) -> str:
    return json.dumps(value)  # a TOML basic string: JSON's escapes are TOML's


def strings(values: Iterable[str]) -> str:
    return "[" + ", ".join(q(v) for v in values) + "]"


HEADER = [
    "# Generated by scripts/record_wheel_facts.py: do not edit by hand (docs/data.md says how to extend it).",
    "# What known NVIDIA CUDA component wheels' ELF files bind and carry, read from the wheels themselves:",
    "# per shared-object member its DT_SONAME, DT_NEEDED, DT_RPATH/DT_RUNPATH, version definitions,",
    "# `binds` (per non-system provider file: the versions needed, the versioned symbols bound to it as",
    "# NAME@VERSION, and the provider release their names imply), `defines` (versioned definitions",
    "# carrying a CUDA ABI suffix, plus every one some wheel of the same machine here binds; NAME@@VERSION",
    "# is the default definition, NAME@VERSION a hidden one) and the SASS / PTX (TARGET:ISA) of its",
    "# fatbins (absent: none). C/C++ runtime needs (GLIBC_, GLIBCXX_, CXXABI_, GCC_ versions) are left out.",
    "# One row per wheel: a release read for x86_64 and aarch64 has a row of each `machine`.",
    "# x86_64 releases: the newest of each X.Y minor among those allowed by torch 2.14.1's pins, the [ctk]",
    "# extra of the newest cupy-cuda12x/cupy-cuda13x, cuda-cccl 1.2.1's [cu12]/[cu13], every minor of the",
    "# components binding each other (nvjitlink, nvrtc, cusparse, cusolver, cufft, cublas; cu11, cu12",
    "# and CUDA 13), every minor of cuDNN for CUDA 13 and the newest for CUDA 12, every minor of the",
    "# CUDA consumers (onnxruntime-gpu >= 1.17: their binds list no symbols and they define none), and",
    "# [releases] added, and every release of the names [releases] every lists; each wheel's `why` says",
    "# which (a wheel without a row is read on demand). Other machines: the releases [[releases.machine]]",
    "# lists (--machine M --only NAME==VERSION). Binds to a file of the same wheel list no symbols.",
]


def bound_symbols(reads: Iterable[Tuple[str, str, dict]]) -> Set[Tuple[str, str]]:
    """(name, version) of every symbol a wheel binds in another wheel: definitions `defines` keeps."""
    bound: Set[Tuple[str, str]] = set()
    for name, _, data in reads:
        for member in data["members"] if not consumer(name) else ():
            for bind in member["binds"]:
                if bind["file"] not in own_files(data):
                    bound.update(tuple(s.split("@", 1)) for s in bind["symbols"])
    return bound


def render_wheel(name: str, version: str, data: dict, why: Iterable[str], bound: Set[Tuple[str, str]]) -> List[str]:
    """The `[[wheel]]` block of one read wheel."""
    lines = ["[[wheel]]", f"name = {q(name)}", f"version = {q(version)}", f"filename = {q(data['filename'])}",
             f"sha256 = {q(data['sha256'])}", f"why = {strings(why)}", f"machine = {q(data_machine(data))}"]
    if data["not_elf"]:
        lines.append(f"not_elf = {strings(data['not_elf'])}")
    for member in sorted(data["members"], key=lambda m: m["path"]):
        lines += ["[[wheel.member]]", f"path = {q(member['path'])}"]
        if member["soname"] is not None:
            lines.append(f"soname = {q(member['soname'])}")
        for key in ("needed", "rpath", "runpath", "version_definitions"):
            if member[key]:
                lines.append(f"{key} = {strings(member[key])}")
        if member["binds"]:
            lines.append("binds = [")
            for bind in member["binds"]:
                minimum = f", min_version = {q(bind['min_version'])}" if bind["min_version"] else ""
                kept = not consumer(name) and bind["file"] not in own_files(data)
                symbols = f", symbols = {strings(bind['symbols'])}" if kept else ""
                lines.append(f"  {{ file = {q(bind['file'])}, versions = {strings(bind['versions'])}{minimum}{symbols} }},")
            lines.append("]")
        defines = [] if consumer(name) else [
            d for d in member["defined"] if abi_suffixed(d) or tuple(d.replace("@@", "@").split("@", 1)) in bound]
        if defines:
            lines.append(f"defines = {strings(defines)}")
        fatbin = member["fatbin"]
        if fatbin is not None:
            lines += [f"sass = {strings(fatbin['sass'])}", f"ptx = {strings(fatbin['ptx'])}"]
            for key in ("undetermined", "damage"):
                if fatbin[key]:
                    lines.append(f"{key} = {strings(fatbin[key])}")
    return lines


def render(rows: List[Tuple[str, str, dict]], reasons: Dict[str, List[str]], added: List[str], size: int,
           previous: Optional[dict] = None, others: Iterable[Tuple[Tuple[str, Version, str], str, str]] = ()) -> str:
    """The table of a full run: the x86_64 `rows` read, and the `others` machines' blocks of the
    `previous` table (its parsed head) as they were written."""
    bound = bound_symbols(rows)
    blocks = [((name, Version(version), "x86_64"), d["filename"],
               "\n".join(render_wheel(name, version, d, reasons[f"{name}=={version}"], bound)))
              for name, version, d in rows]
    source = source_with((previous or {}).get("source", ""), "x86_64", (
        f"scripts/record_wheel_facts.py, {datetime.date.today().isoformat()}: {len(rows)} Linux x86_64 wheels "
        f"({size} bytes) downloaded with pip and read with cudaresolve.binary.wheel.read_wheel"))
    return write_table(source, added, machine_releases(previous or {}), blocks + list(others),
                       (previous or {}).get("releases", {}).get("every", []))


def table_parts(text: str) -> Tuple[dict, List[Tuple[Tuple[str, Version, str], str, str]]]:
    """The table's head (parsed) and its `[[wheel]]` blocks as written: ((name, version, machine), filename, text)."""
    head, *blocks = text.rstrip("\n").split("\n\n[[wheel]]\n")
    parsed = tomllib.loads(head)
    rows = []
    for block in blocks:
        [wheel] = tomllib.loads("[[wheel]]\n" + block)["wheel"]
        rows.append(((wheel["name"], Version(wheel["version"]), wheel["machine"]), wheel["filename"], "[[wheel]]\n" + block))
    return parsed, rows


def write_table(source: str, added: List[str], machine_added: Dict[str, List[str]],
                blocks: List[Tuple[Tuple[str, Version, str], str, str]], every: Iterable[str] = ()) -> str:
    """The table from its parts: blocks in (name, version, machine) order."""
    lines = HEADER + [
        f"source = {q(source)}",
        'confidence = "H"',
        "",
        "[releases]",
        'source = "scripts/record_wheel_facts.py --add NAME==VERSION (x86_64), --every NAME (x86_64), --machine M --only NAME==VERSION (other machines)"',
        'confidence = "H"',
        f"added = {strings(sorted(added))}",
    ] + ([f"every = {strings(sorted(set(every)))}"] if every else [])
    for machine, requirements in sorted(machine_added.items()):
        lines += ["[[releases.machine]]", f"machine = {q(machine)}", f"added = {strings(sorted(requirements))}"]
    text = "\n".join(lines) + "\n"
    for _, _, block in sorted(blocks, key=lambda b: b[0]):
        text += "\n" + block.rstrip("\n") + "\n"
    return text


def source_with(previous: str, machine: str, segment: str) -> str:
    """The table's source line with `machine`'s segment (`M: ...`, or the x86_64 head) replaced; a
    segment runs to the next `; M: ` (a segment's own text may hold "; ")."""
    head, *others = re.split(r"; (?=[A-Za-z0-9_]+: )", previous) if previous else ("",)
    kept = [s for s in others if not s.startswith(f"{machine}: ")]
    if machine == "x86_64":
        head = segment
    else:
        kept.append(f"{machine}: {segment}")
    return "; ".join([head, *sorted(kept)])


def machine_releases(parsed: dict) -> Dict[str, List[str]]:
    return {entry["machine"]: list(entry["added"]) for entry in parsed.get("releases", {}).get("machine", [])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "cudaresolve-wheel-facts",
                        help="where downloaded wheels and their read facts are kept (default: %(default)s)")
    parser.add_argument("--add", action="append", default=[], metavar="NAME==VERSION",
                        help="also record this release (kept in the table's [releases] added for later runs)")
    parser.add_argument("--drop-wheels", action="store_true",
                        help="delete each downloaded wheel once its facts are read and kept")
    parser.add_argument("--machine", choices=sorted(MACHINE_PLATFORMS), default="x86_64",
                        help="the machine whose wheels --only reads (default: %(default)s)")
    parser.add_argument("--only", action="append", default=[], metavar="NAME==VERSION",
                        help="read only this release's wheel for --machine, by range requests, and replace or add its row")
    parser.add_argument("--every", action="append", default=[], metavar="NAME",
                        help="read every x86_64 release of NAME without a row, one at a time by range requests (resumable)")
    parser.add_argument("--drop", action="append", default=[], metavar="NAME==VERSION",
                        help="remove this release's --machine row (not x86_64's: a full run chooses those)")
    args = parser.parse_args()
    if args.drop and args.machine == "x86_64":
        parser.error("--drop removes another machine's rows: x86_64's are the release set a full run chooses")
    for requirement in args.add + args.only + args.drop:
        req = Requirement(requirement)
        if len(req.specifier) != 1 or next(iter(req.specifier)).operator != "==":
            parser.error(f"{requirement}: expected NAME==VERSION")
    if args.every:
        if args.machine != "x86_64" or args.only or args.drop:
            parser.error("--every reads x86_64 releases, without --only or --drop")
        return every(sorted({canonicalize_name(name) for name in args.every}), args.cache)
    if args.only or args.drop:
        return only(args.only, args.machine, args.cache, args.drop)
    parsed, existing = table_parts(OUT.read_text()) if OUT.exists() else ({}, [])
    previous = parsed["releases"]["added"] if parsed else []
    added = sorted(set(previous) | set(args.add))
    started = time.monotonic()
    print("choosing releases ...", flush=True)
    chosen = release_set(args.cache, added, parsed["releases"].get("every", []) if parsed else [])
    reasons = {requirement: sorted(why) for requirement, why in chosen.items()}
    print(f"{len(chosen)} releases", flush=True)
    reads: Dict[str, dict] = {}
    fetched = 0
    (args.cache / "facts").mkdir(parents=True, exist_ok=True)
    with ProcessPoolExecutor(max_workers=max(1, min(2, os.cpu_count() or 1))) as pool:
        pending = {}

        def harvest(wait: bool) -> None:
            for requirement, (path, future) in list(pending.items()):
                if wait or future.done():
                    reads[requirement] = data = future.result()
                    (args.cache / "facts" / f"{path.name}.json").write_text(json.dumps(data))
                    if args.drop_wheels:
                        path.unlink()
                    del pending[requirement]
                    print(f"  read {requirement}, {time.monotonic() - started:.0f} s", flush=True)

        for requirement in sorted(chosen, key=lambda r: (r.split("==")[0], Version(r.split("==")[1]))):
            data = cached_read(requirement, args.cache)
            if data is not None:
                reads[requirement] = data
                continue
            before = {path.name for path in (args.cache / "wheels").glob("*.whl")}
            path = download(requirement, args.cache)
            if path is None:
                continue
            fetched += path.stat().st_size if path.name not in before else 0
            pending[requirement] = (path, pool.submit(read_one, str(path)))
            print(f"  {requirement}: {path.stat().st_size >> 20} MB, {time.monotonic() - started:.0f} s", flush=True)
            harvest(wait=len(pending) > 4)  # downloads stay a few wheels ahead of the readers
        harvest(wait=True)
    size = sum(data["size"] for data in reads.values())
    rows = sorted(((*r.split("=="), d) for r, d in reads.items()), key=lambda row: (row[0], Version(row[1])))
    OUT.write_text(render(rows, reasons, added, size, parsed, [block for block in existing if block[0][2] != "x86_64"]))
    crossing = sorted({(name, b["file"]) for name, _, d in rows for m in d["members"] for b in m["binds"]})
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes): {len(rows)} wheels ({size} bytes), {fetched} bytes "
          f"downloaded this run, {time.monotonic() - started:.0f} s")
    print("versioned needs of non-system providers (distribution -> file):")
    for name, file in crossing:
        print(f"  {name} -> {file}")
    return 0


def only(requirements: List[str], machine: str, cache: Path, drop: Iterable[str] = ()) -> int:
    """Read the `machine` wheels of `requirements` by range requests and replace or add their rows;
    remove the `machine` rows of the releases in `drop`."""
    started = time.monotonic()
    parsed, blocks = table_parts(OUT.read_text())
    dropped = {release_key(requirement) for requirement in drop}
    blocks = [b for b in blocks if not (b[0][2] == machine and b[0][:2] in dropped)]
    http = Http()
    reads: List[Tuple[str, str, dict]] = []
    (cache / "facts").mkdir(parents=True, exist_ok=True)
    for requirement in requirements:
        name, _, version = requirement.partition("==")
        name = canonicalize_name(name)
        data = read_remote(f"{name}=={version}", machine, http)
        if data is None:
            continue
        (cache / "facts" / f"{data['filename']}.json").write_text(json.dumps(data))
        reads.append((name, version, data))
        print(f"  read {name}=={version} ({data['filename']}): {data['read_bytes']} of {data['size']} bytes, "
              f"{time.monotonic() - started:.0f} s", flush=True)
    # `defines` keeps what the machine's rows bind: this run's reads and the rows already written
    written = [(w["name"], w["version"], {"filename": w["filename"], "members": [
        {"soname": m.get("soname"), "path": m["path"],
         "binds": [{"file": b["file"], "symbols": b.get("symbols", [])} for b in m.get("binds", [])]}
        for m in w.get("member", [])]})
        for _, _, text in blocks for w in tomllib.loads(text)["wheel"] if w["machine"] == machine]
    bound = bound_symbols(reads + written)
    new = {data["filename"]: ((name, Version(version), machine), data["filename"],
                              "\n".join(render_wheel(name, version, data, ["added"], bound)))
           for name, version, data in reads}
    refreshed = refresh_providers(blocks, new, machine, bound, cache)
    keys = {key for key, _, _ in new.values()}
    blocks = [b for b in blocks if b[1] not in new and b[0] not in keys] + list(new.values())
    listed = machine_releases(parsed)
    listed[machine] = sorted({r for r in listed.get(machine, []) if release_key(r) not in dropped}
                             | {f"{name}=={version}" for name, version, _ in reads})
    rows = sum(1 for block in blocks if block[0][2] == machine)
    read_bytes = sum(data["read_bytes"] for _, _, data in reads)
    size = sum(data["size"] for _, _, data in reads)
    segment = (f"{rows} Linux {machine} wheels, their ELF members read with cudaresolve.binary.wheel.read_wheel through "
               f"HTTP range requests (sha256 as the index lists it); the run of {datetime.date.today().isoformat()} read "
               f"{len(reads)} ({read_bytes} of their {size} bytes)" + (f" and dropped {len(dropped)}" if dropped else ""))
    OUT.write_text(write_table(source_with(parsed["source"], machine, segment), parsed["releases"]["added"], listed, blocks))
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes): {len(reads)} {machine} wheels read, {read_bytes} bytes by "
          f"{http.requests_made} range requests, {time.monotonic() - started:.1f} s"
          + (f"; `defines` of {len(refreshed)} rows written before redone from their kept facts: {', '.join(refreshed)}"
             if refreshed else ""))
    return 0


def every(names: List[str], cache: Path) -> int:
    """Read every x86_64 release of `names` the table has no row of, one wheel at a time by range
    requests, and add their rows; facts read before (the cache directory) are not read again, and the
    table is written after each release, so a run stopped anywhere resumes where it stopped."""
    carrying = [name for name in names if components.carries_own_runtime(name)]
    if carrying:  # a row keeps no runtime's version: the plan reads such wheels, never their rows
        raise SystemExit(f"{', '.join(carrying)}: carries its own CUDA runtime, which a row cannot hold; read on demand")
    started = time.monotonic()
    parsed, blocks = table_parts(OUT.read_text())
    listed = sorted(set(parsed["releases"].get("every", [])) | set(names))
    http = Http()
    read = cached = skipped = 0
    for name in names:
        for version in every_release(name):
            if any(key == (name, Version(version), "x86_64") for key, _, _ in blocks):
                continue
            requirement = f"{name}=={version}"
            data = cached_read(requirement, cache)
            if data is None or "sha256" not in data:
                data = read_remote(requirement, "x86_64", http)
                if data is None:
                    skipped += 1
                    continue
                (cache / "facts").mkdir(parents=True, exist_ok=True)
                (cache / "facts" / f"{data['filename']}.json").write_text(json.dumps(data))
                read += 1
            else:
                cached += 1
            written = [(w["name"], w["version"], {"filename": w["filename"], "members": [
                {"soname": m.get("soname"), "path": m["path"],
                 "binds": [{"file": b["file"], "symbols": b.get("symbols", [])} for b in m.get("binds", [])]}
                for m in w.get("member", [])]})
                for _, _, text in blocks for w in tomllib.loads(text)["wheel"] if w["machine"] == "x86_64"]
            bound = bound_symbols([(name, version, data)] + written)
            block = ((name, Version(version), "x86_64"), data["filename"],
                     "\n".join(render_wheel(name, version, data, ["every release"], bound)))
            blocks = [b for b in blocks if b[1] != data["filename"]] + [block]
            rows = sum(1 for key, _, _ in blocks if key[0] in listed and key[2] == "x86_64")
            segment = (f"every x86_64 release of {', '.join(listed)} ({rows} wheels), those without a row of the full run "
                       f"read through HTTP range requests one at a time (sha256 as the index lists it), "
                       f"{datetime.date.today().isoformat()}")
            OUT.write_text(write_table(source_with(parsed["source"], "every", segment), parsed["releases"]["added"],
                                       machine_releases(parsed), blocks, listed))
            print(f"  {requirement} ({data['filename']}): {data.get('read_bytes', 0)} of {data['size']} bytes read, "
                  f"{http.bytes_received} bytes in all, {time.monotonic() - started:.0f} s", flush=True)
    print(f"wrote {OUT}: {read} releases read ({http.bytes_received} bytes by {http.requests_made} range requests), "
          f"{cached} from kept facts, {skipped} without an x86_64 wheel for CPython 3.11, {time.monotonic() - started:.0f} s")
    return 0


def release_key(requirement: str) -> Tuple[str, Version]:
    name, _, version = requirement.partition("==")
    return canonicalize_name(name), Version(version)


def refresh_providers(blocks: List[Tuple[Tuple[str, Version, str], str, str]], new: Dict[str, Tuple[Tuple[str, Version, str], str, str]],
                      machine: str, bound: Set[Tuple[str, str]], cache: Path) -> List[str]:
    """A `machine` row written before may define what this run's reads bind (aarch64 cuSOLVER read
    after cuSPARSE binds cusparseCreateMatDescr): its `defines` is rendered again, into `new`, from
    the facts the cache keeps of its wheel (every versioned definition). Without them, the row is
    named: rerun --only with its release. Returns the releases rendered again."""
    refreshed = []
    for key, filename, text in blocks:
        if key[2] != machine or filename in new:
            continue
        [row] = tomllib.loads(text)["wheel"]
        kept = cache / "facts" / f"{filename}.json"
        data = json.loads(kept.read_text()) if kept.exists() else None
        if data is None or data.get("format") != READ_FORMAT or data_machine(data) != machine:
            lacking = {(name, version) for name, version in bound for member in row.get("member", [])
                       if version in member.get("version_definitions", ()) and version != name
                       and f"{name}@@{version}" not in member.get("defines", ()) and f"{name}@{version}" not in member.get("defines", ())}
            if lacking:
                print(f"  {row['name']}=={row['version']} ({machine}) may define {len(lacking)} symbols newly bound, "
                      f"e.g. {sorted(lacking)[0]}, and its kept facts are gone: rerun --only with it", file=sys.stderr)
            continue
        again = "\n".join(render_wheel(row["name"], row["version"], data, row["why"], bound))
        if again != text.rstrip("\n"):
            new[filename] = (key, filename, again)
            refreshed.append(f"{row['name']}=={row['version']}")
    return refreshed


if __name__ == "__main__":
    sys.exit(main())
