"""The test cache: real wheels fetched through pip once per machine, each file kept once, venvs and
extracted wheel members made of hard links to that one copy.

    <cache>/store/ab/<sha256>-<mode>   every file installed, extracted or fetched here, once per content and mode
    <cache>/venvs/<key>/               venvs keyed by their requirements (and Python), installed by uv, files
                                       linked from the store
    <cache>/unpacked/<name>/           wheel members as site-packages holds them, linked from the store
    <cache>/wheels/                    every wheel fetched, linked from the store; wheels/sets/ records
                                       which files a fetch of requirements that are not all exact got
    <cache>/wheels.lock                held shared by every session using the wheels
    <cache>/fetched.log                a line for every fetch from the registry (a warm run adds none)
    <cache>/downloads/<session>/       pip's and uv's scratch for this session; gone when it ends

Every wheel comes through `fetch_wheels` (pip download or pip wheel, pip's own index
configuration, pip's cache off) and is kept: a second run asks the registry for none of them.
The kept wheels weigh at most CUDARESOLVE_TEST_WHEELS_GIB (30 GiB unless set): the last session
to end removes the least recently used past it. Every entry can be deleted on its own: the next
run rebuilds it (scripts/test_cache.py prints the sizes, counting linked files once, and
`--prune-wheels` frees the kept wheels).
"""

from __future__ import annotations

import base64
import csv
import fcntl
import hashlib
import io
import os
import re
import secrets
import shutil
import stat
import subprocess
import sys
import time
import zipfile
from pathlib import Path
from typing import Callable, Optional, Sequence

import pytest
from packaging.tags import sys_tags
from packaging.utils import canonicalize_name, parse_wheel_filename

# Read once, when the test session starts: a test that clears the environment (monkeypatch) still
# finds the cache it was given.
CACHE = Path(os.environ.get("CUDARESOLVE_TEST_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "cudaresolve-tests"))
UMASK = os.umask(0o022)
os.umask(UMASK)
PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-cache-dir"]


def cache_dir() -> Path:
    """The test cache (CUDARESOLVE_TEST_CACHE, else ~/.cache/cudaresolve-tests)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    return CACHE


# -- fetching ------------------------------------------------------------------------------------


class _Session:
    """This session's download directory, made on first use and removed by `end_session`. Its lock
    is held while the session lives, so a later session removes only the directories of dead ones.
    `fetching` says whether the running test may fetch (it is marked `network`)."""

    directory: Optional[Path] = None
    lock: Optional[io.TextIOWrapper] = None
    fetching = True


def allow_fetching(allowed: bool) -> None:
    """Whether the test about to run may fetch from the registry (conftest: it is marked `network`)."""
    _Session.fetching = allowed


def _may_fetch(requirements: Sequence[str]) -> None:
    if not _Session.fetching:
        pytest.fail(f"this test fetches {' '.join(requirements)} but is not marked network: "
                    "tests/conftest.py marks a test by the fixtures and helpers it uses")


def downloads() -> Path:
    """This session's download directory (pip's downloads before they are kept, uv's cache)."""
    if _Session.directory is None:
        root = cache_dir() / "downloads"
        root.mkdir(exist_ok=True)
        for lock_path in root.glob("*.lock"):  # sessions that ended without cleaning up
            with open(lock_path, "a") as other:
                try:
                    fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue
                shutil.rmtree(lock_path.with_suffix(""), ignore_errors=True)
                lock_path.unlink()
        name = f"{os.getpid()}-{secrets.token_hex(4)}"
        _Session.lock = open(root / f"{name}.lock", "w")
        fcntl.flock(_Session.lock, fcntl.LOCK_EX)
        _Session.directory = root / name
        _Session.directory.mkdir()
    return _Session.directory


def end_session() -> None:
    """Remove this session's downloads and bound the kept wheels (pytest_sessionfinish)."""
    if _Kept.lock is not None:
        _bound_kept_wheels()
        _Kept.lock.close()
        _Kept.lock = None
    if _Session.directory is not None:
        shutil.rmtree(_Session.directory, ignore_errors=True)
        Path(f"{_Session.directory}.lock").unlink(missing_ok=True)
        assert _Session.lock is not None
        _Session.lock.close()
        _Session.directory = _Session.lock = None


def _exact(requirement: str) -> Optional[str]:
    """The wheel file name prefix of an exact `name==version` requirement, else None."""
    name, sep, version = requirement.partition("==")
    if not sep or not re.fullmatch(r"[A-Za-z0-9._-]+", name) or not re.fullmatch(r"[A-Za-z0-9.+!]+", version):
        return None
    return canonicalize_name(name).replace("-", "_") + "-" + version + "-"


def _fits(wheel: Path, platform: Optional[str]) -> bool:
    """Whether a wheel file is one this interpreter installs (`platform` None) or one for `platform`
    (a manylinux tag such as manylinux2014_aarch64): the kept wheels hold several machines' builds."""
    try:
        tags = parse_wheel_filename(wheel.name)[3]
    except ValueError:
        return False
    if platform is None:
        return not tags.isdisjoint(_here())
    return any(tag.platform in ("any", platform) for tag in tags)


def _here() -> frozenset:
    return frozenset(sys_tags())


def fetch_wheels(requirements: Sequence[str], *, deps: bool = False, platform: Optional[str] = None) -> list[Path]:
    """The wheels of `requirements`, kept in the cache's wheels/: with `deps`, those of what pip
    resolves for them too (`pip wheel`: a release the index has only as source is built, as pip
    install would), else exactly the index's wheels (`pip download --only-binary :all: --no-deps`);
    with `platform`, the wheels for that platform tag (another machine's). Fetched once per machine:
    an exact `name==version` wheel already kept, or a set fetched before for the same requirements
    and Python (its file names recorded in wheels/sets/), is not fetched again. Skips the test with
    pip's last words when pip cannot fetch them (the registry is not reachable)."""
    key = hashlib.sha256("\n".join([sys.version, str(platform), str(deps), *requirements]).encode()).hexdigest()[:16]
    recorded = _recorded_set(key)
    if recorded is not None:
        return recorded
    # xdist workers (and other sessions) asking for the same wheels at once: one fetches, the rest wait
    with open(kept_wheels() / "sets" / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _recorded_set(key) or _fetch_wheels(key, requirements, deps, platform)


def _fetch_wheels(key: str, requirements: Sequence[str], deps: bool, platform: Optional[str]) -> list[Path]:
    if deps:
        _may_fetch(requirements)
        _log_fetch(requirements)
        target = downloads() / key
        done = subprocess.run(PIP + ["wheel", "-w", str(target), *requirements], capture_output=True, text=True)
        fetched = [_keep(w) for w in sorted(target.glob("*.whl"))]
    else:
        found = {r: _found_kept(r, platform) for r in requirements}
        wanted = [r for r, w in found.items() if w is None]
        if not wanted:
            return [_used(w) for w in found.values() if w is not None]
        _may_fetch(wanted)
        _log_fetch(wanted)
        target = downloads() / key
        tag = ["--platform", platform] if platform else []
        done = subprocess.run(PIP + ["download", "--only-binary=:all:", "--no-deps", *tag, "-d", str(target), *wanted],
                              capture_output=True, text=True)
        fetched = [w for w in found.values() if w is not None] + [_keep(w) for w in sorted(target.glob("*.whl"))]
    if done.returncode != 0 or not fetched:
        last = [line for line in done.stderr.splitlines() if line.startswith("ERROR")][-1:] or done.stderr.splitlines()[-1:]
        pytest.skip(f"cannot fetch {' '.join(requirements)}: {last}")
    _record_set(key, requirements, fetched)
    return fetched


def fetch_wheel(requirement: str, platform: Optional[str] = None) -> Path:
    """One exact wheel (`name==version`) kept in the cache's wheels/, for tests that read the file:
    this interpreter's, or with `platform` (manylinux2014_aarch64) that platform's."""
    assert _exact(requirement), f"not an exact requirement: {requirement}"
    [found] = fetch_wheels([requirement], platform=platform)
    return found


def fetch_locked(lock_file: Path) -> Path:
    """The kept wheels' folder, holding every wheel of a PEP 751 lock that this interpreter installs:
    each found by its sha256 in the store, else fetched once by pip from the lock's URL and checked
    against that sha256. `pip install --no-index --find-links FOLDER` then installs the lock's wheels
    without asking the registry (pip checks the hashes again)."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:
        import tomli as tomllib

    with open(lock_file, "rb") as f:
        locked = [w for p in tomllib.load(f).get("packages", []) for w in p.get("wheels", [])]
    for listed in locked:
        name, url, digest = listed.get("name") or "", listed.get("url") or "", listed.get("hashes", {}).get("sha256") or ""
        if not name or "/" in name or not _fits(Path(name), None):
            continue
        kept = kept_wheels() / name
        if kept.exists() and os.path.exists(stored := _entry(digest, kept.stat().st_mode)) and os.path.samefile(kept, stored):
            _used(kept)
            continue
        _may_fetch([url])
        target = downloads() / digest[:16]
        _log_fetch([url])
        done = subprocess.run(PIP + ["download", "--no-deps", "-d", str(target), url], capture_output=True, text=True)
        fetched = target / name
        if done.returncode != 0 or not fetched.is_file():
            pytest.skip(f"cannot fetch {url}: {done.stderr.splitlines()[-1:]}")
        if _sha256(fetched) != digest:
            pytest.fail(f"{url} does not have the sha256 the lock names")
        kept.unlink(missing_ok=True)
        _keep(fetched)
    return kept_wheels()


def _log_fetch(requirements: Sequence[str]) -> None:
    """One line in the cache's fetched.log per fetch from the registry: a warm run adds none."""
    with open(cache_dir() / "fetched.log", "a") as log:
        log.write(f"{int(time.time())} {os.getpid()} {' '.join(requirements)}\n")


# -- the kept wheels -----------------------------------------------------------------------------
# Every fetched wheel is a store entry (its bytes once, by sha256) linked as wheels/<file name>.
# Sessions hold wheels.lock shared while they live; the last one to end, holding it alone, removes
# the least recently used wheels until the kept ones weigh at most WHEELS_BOUND bytes.

WHEELS_BOUND = int(float(os.environ.get("CUDARESOLVE_TEST_WHEELS_GIB") or 30) * 2**30)


class _Kept:
    lock: Optional[io.TextIOWrapper] = None


def kept_wheels() -> Path:
    """The kept wheels' folder, this session holding wheels.lock shared from its first use on."""
    kept = cache_dir() / "wheels"
    (kept / "sets").mkdir(parents=True, exist_ok=True)
    if _Kept.lock is None:
        _Kept.lock = open(cache_dir() / "wheels.lock", "a")
        fcntl.flock(_Kept.lock, fcntl.LOCK_SH)
    return kept


def _used(wheel: Path) -> Path:
    """`wheel`, its time of last use now (the bound removes the least recently used first)."""
    try:
        os.utime(wheel)
    except OSError:
        pass  # read-only cache: the order is only a preference
    return wheel


def _keep(fetched: Path) -> Path:
    """A fetched wheel into the store and linked as wheels/<its name>; that link."""
    kept = kept_wheels() / fetched.name
    if not kept.exists():
        _link_or_copy(_into_store(fetched, _sha256(fetched)), kept)
    fetched.unlink()
    return _used(kept)


def _found_kept(requirement: str, platform: Optional[str] = None) -> Optional[Path]:
    """The kept wheel of an exact requirement, for `platform` or else for this interpreter."""
    prefix = _exact(requirement)
    if prefix is None:
        return None
    wheels = sorted(kept_wheels().glob("*.whl"))
    return next((w for w in wheels if w.name.lower().startswith(prefix) and _fits(w, platform)), None)


def _recorded_set(key: str) -> Optional[list[Path]]:
    """The kept wheels a fetch with this key got before, if every one is still kept."""
    record = kept_wheels() / "sets" / key
    try:
        names = record.read_text().splitlines()[1:]
    except OSError:
        return None
    wheels = [kept_wheels() / name for name in names]
    if not names or not all(w.is_file() for w in wheels):
        return None
    return [_used(w) for w in wheels]


def _record_set(key: str, requirements: Sequence[str], wheels: Sequence[Path]) -> None:
    record = kept_wheels() / "sets" / key
    part = record.with_name(f".{key}.{secrets.token_hex(4)}")
    part.write_text(" ".join(requirements) + "\n" + "".join(f"{w.name}\n" for w in wheels))
    os.replace(part, record)


def _bound_kept_wheels() -> None:
    """Remove the least recently used kept wheels (and their store copies) past WHEELS_BOUND, when
    no other session holds wheels.lock; a set record naming a removed wheel no longer answers."""
    assert _Kept.lock is not None
    try:
        fcntl.flock(_Kept.lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return  # another session uses the wheels: the last one to end bounds them
    evict_wheels(cache_dir(), WHEELS_BOUND)


def evict_wheels(cache: Path, bound: int) -> int:
    """Remove the least recently used wheels under `cache`/wheels until the rest weigh at most
    `bound` bytes, with their store copies; the bytes removed. The caller holds wheels.lock alone."""
    wheels = sorted((w.stat().st_mtime, w) for w in (cache / "wheels").glob("*.whl"))
    total = sum(w.stat().st_size for _, w in wheels)
    freed = 0
    for _, wheel in wheels:
        if total <= bound:
            break
        size = wheel.stat().st_size
        stored = _entry(_sha256(wheel), wheel.stat().st_mode, cache)
        wheel.unlink()
        if stored.exists() and stored.stat().st_nlink == 1:
            stored.unlink()
        total -= size
        freed += size
    return freed


# -- the store -----------------------------------------------------------------------------------


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def _entry(digest: str, mode: int, cache: Optional[Path] = None) -> Path:
    return (cache or cache_dir()) / "store" / digest[:2] / f"{digest}-{mode & 0o777:o}"


def _link_or_copy(source: Path, dest: Path) -> None:
    """`dest` as a hard link to `source`; a copy where the file system cannot link (another device,
    too many links)."""
    part = dest.with_name(f".{dest.name}.{secrets.token_hex(4)}")
    try:
        os.link(source, part)
    except OSError:
        shutil.copy2(source, part)
    os.replace(part, dest)


def _into_store(path: Path, digest: str) -> Path:
    """The store's entry for the file at `path`, whose sha256 is `digest` (checked by the caller):
    `path` itself becomes the entry unless one is there already."""
    entry = _entry(digest, os.lstat(path).st_mode)
    if not entry.exists():
        entry.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(path, entry)
        except FileExistsError:
            pass  # another session stored the same bytes first
        except OSError:
            _link_or_copy(path, entry)  # no link here: the store keeps a copy, the caller copies back
    return entry


def _record_digest(field: str) -> Optional[str]:
    """The hex sha256 of a RECORD hash field (`sha256=<urlsafe base64>`), else None."""
    if not field.startswith("sha256="):
        return None
    try:
        raw = base64.urlsafe_b64decode(field[len("sha256="):] + "==")
    except ValueError:
        return None
    return raw.hex() if len(raw) == 32 else None


def link_installed(venv: Path) -> None:
    """Replace every file an installer wrote under `venv` (its RECORDs' hashed rows) by a link to
    the store's copy of the same bytes; a file whose bytes are not what its RECORD says stays. A
    file that is the store's copy already (uv linked it from the wheel another venv had) is not read."""
    root = os.path.abspath(venv)
    for record in Path(root).glob("lib/python*/site-packages/*.dist-info/RECORD"):
        site = record.parent.parent
        with open(record, newline="") as f:
            rows = list(csv.reader(f))
        for row in rows:
            digest = _record_digest(row[1]) if len(row) == 3 else None
            if digest is None:
                continue
            path = Path(os.path.normpath(site / row[0]))
            if not str(path).startswith(root + os.sep):
                continue
            try:
                st = os.lstat(path)
            except OSError:
                continue
            if not stat.S_ISREG(st.st_mode) or st.st_size == 0:
                continue
            try:
                stored: Optional[os.stat_result] = os.stat(_entry(digest, st.st_mode))
            except OSError:
                stored = None
            if stored is not None and (stored.st_ino, stored.st_dev) == (st.st_ino, st.st_dev):
                continue
            if _sha256(path) != digest:
                continue
            entry = _into_store(path, digest)
            if not os.path.samefile(entry, path):
                _link_or_copy(entry, path)


def unpack(requirement: str, members: Optional[Sequence[str]] = None) -> Path:
    """A directory holding the files of the wheel for `requirement` (`name==version`), or only
    `members`, as site-packages would: linked from the store, extracted once."""
    prefix = _exact(requirement) if isinstance(requirement, str) else None
    if prefix is None:
        pytest.fail(f"unpacked() takes an exact requirement (name==version), not {requirement!r}")
    name = prefix.rstrip("-")
    if members is not None:
        name += "-" + hashlib.sha256("\n".join(sorted(members)).encode()).hexdigest()[:12]
    root = cache_dir() / "unpacked"
    root.mkdir(exist_ok=True)
    dest = root / name
    marker = dest / ".complete"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists():
            return dest
        if dest.exists():
            shutil.rmtree(dest)
        [wheel] = fetch_wheels([requirement])
        with zipfile.ZipFile(wheel) as archive:
            listed = _record_of(archive)
            for info in archive.infolist():
                if info.is_dir() or (members is not None and info.filename not in members):
                    continue
                target = dest / info.filename
                if not os.path.normpath(target).startswith(str(dest) + os.sep):
                    pytest.fail(f"{wheel.name}: member {info.filename!r} lies outside the wheel's root")
                target.parent.mkdir(parents=True, exist_ok=True)
                mode = 0o777 & ~UMASK if (info.external_attr >> 16) & 0o111 else 0o666 & ~UMASK  # as pip sets it
                digest = listed.get(info.filename)
                entry = _entry(digest, mode) if digest else None
                if entry is None or not entry.exists():
                    entry = _extract(archive, info, wheel.name, digest, mode)
                _link_or_copy(entry, target)
        marker.write_text(requirement + "\n" + "\n".join(members or ()))
    return dest


def _record_of(archive: zipfile.ZipFile) -> dict[str, str]:
    """member -> hex sha256 from the wheel's RECORD."""
    [record] = [n for n in archive.namelist() if n.count("/") == 1 and n.endswith(".dist-info/RECORD")]
    rows = csv.reader(io.StringIO(archive.read(record).decode()))
    return {row[0]: digest for row in rows if len(row) == 3 and (digest := _record_digest(row[1]))}


def _extract(archive: zipfile.ZipFile, info: zipfile.ZipInfo, wheel: str, listed: Optional[str], mode: int) -> Path:
    """One member into the store, its sha256 checked against the wheel's RECORD."""
    scratch = cache_dir() / "store" / f".part-{secrets.token_hex(8)}"
    scratch.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    try:
        with archive.open(info) as source, open(scratch, "wb") as target:
            while chunk := source.read(1 << 20):
                digest.update(chunk)
                target.write(chunk)
        os.chmod(scratch, mode)
        if listed is not None and digest.hexdigest() != listed:
            pytest.fail(f"{wheel}: {info.filename} does not have the sha256 its RECORD lists")
        return _into_store(scratch, digest.hexdigest())
    finally:
        scratch.unlink(missing_ok=True)


# -- venvs ---------------------------------------------------------------------------------------


def cached_venv(folder: str, recipe: Sequence[str], check: Sequence[str], build: Callable[[Path], None]) -> Path:
    """A venv under the test cache's `folder`, keyed by `recipe`, made once by `build(venv)`.

    Rebuilt when its marker is missing or `python CHECK...` no longer succeeds. A file lock keeps
    concurrent test sessions from building the same venv twice.
    """
    key = hashlib.sha256("\n".join(recipe).encode()).hexdigest()[:16]
    root = cache_dir() / folder
    root.mkdir(exist_ok=True)
    venv = root / key
    marker = venv / ".complete"
    with open(root / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists() and subprocess.run([str(venv / "bin" / "python"), *check], capture_output=True).returncode == 0:
            return venv
        if venv.exists():
            shutil.rmtree(venv)
        build(venv)
        marker.write_text("\n".join(recipe) + "\n")
    return venv


def run_or_fail(command: Sequence[str]) -> None:
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        pytest.fail(f"{' '.join(command)} failed:\n{result.stderr}")


def build_venv(requirements: Sequence[str], *, deps: bool = False) -> Path:
    """A venv holding exactly the wheels of `requirements` (with what pip resolves for them if
    `deps`), installed by uv from the fetched wheels, built once, its files linked from the store.
    Keyed by the requirements and this Python, so a built venv needs no wheel. uv installs (hard
    links from its cache, which lives in the session's downloads), pip only fetches: pip installing
    the same wheels took 2.6 times as long (scripts/bench_test_venvs.py, docs/performance.md)."""
    from uv import find_uv_bin

    recipe = [f"python {sys.version_info[0]}.{sys.version_info[1]}", "with dependencies" if deps else "no dependencies",
              *sorted(requirements), "installed by uv"]

    def build(venv: Path) -> None:
        wheels = fetch_wheels(requirements, deps=deps)
        run_or_fail([sys.executable, "-m", "venv", "--without-pip", str(venv)])
        run_or_fail([find_uv_bin(), "pip", "install", "--quiet", "--no-config", "--python", str(venv / "bin" / "python"),
                     "--offline", "--no-index", "--no-deps", "--link-mode=hardlink", "--cache-dir", str(downloads() / "uv-cache"),
                     *map(str, wheels)])
        link_installed(venv)

    return cached_venv("venvs", recipe, ["-c", "pass"], build)


def build_venv_on(base: Path, requirements: Sequence[str]) -> Path:
    """A venv holding `base`'s site-packages (hard links, nothing copied) and exactly the wheels of
    `requirements` installed over it by uv: a stack grown from a cached venv without fetching the
    base's wheels again (torch's are 5 GB). Keyed by `base`'s recipe and the requirements."""
    from uv import find_uv_bin

    recipe = [*(base / ".complete").read_text().splitlines(), "then", *sorted(requirements), "installed by uv"]
    version = f"python{sys.version_info[0]}.{sys.version_info[1]}"

    def build(venv: Path) -> None:
        wheels = fetch_wheels(requirements)
        run_or_fail([sys.executable, "-m", "venv", "--without-pip", str(venv)])
        site = venv / "lib" / version / "site-packages"
        shutil.rmtree(site)
        shutil.copytree(base / "lib" / version / "site-packages", site, symlinks=True, copy_function=os.link)
        run_or_fail([find_uv_bin(), "pip", "install", "--quiet", "--no-config", "--python", str(venv / "bin" / "python"),
                     "--offline", "--no-index", "--no-deps", "--link-mode=hardlink", "--cache-dir", str(downloads() / "uv-cache"),
                     *map(str, wheels)])
        link_installed(venv)

    return cached_venv("venvs", recipe, ["-c", "pass"], build)
