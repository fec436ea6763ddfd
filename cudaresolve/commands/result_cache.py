"""Whole `doctor` results, cached under a key made of everything they depend on, so the doctor a
pip run is followed by costs some stats when nothing changed (figures: docs/performance.md).

The key, made from stats and environment variables (no file is read but the knowledge tables):
- cudaresolve's version, each of its modules' identity (an edited checkout keeps its version; the
  facts cache's format and schema are those of env/cache.py and binary/facts.py, so they are in
  it, without importing the facts classes) and a digest of the knowledge tables (data/*.toml:
  driver libraries, preloaders, floors, advisories...);
- the target (its interpreter's paths and markers), the running interpreter and the kernel (the
  markers of a bare --site-packages);
- the host facts (`HostFacts.to_json()`: probed, read or stated, so probing comes first);
- the loader's inputs: LD_LIBRARY_PATH, LD_PRELOAD, CONDA_PREFIX and its lib/, the working
  directory, /etc/ld.so.cache and the directories the system layout is read from;
- a conda target's conda-meta/ directory (its records are added, renamed or removed by every
  conda install, update or removal);
- the tree: under each site-packages, every file named like a shared object (found by the scan's
  own walk, env/tree.py) and each dist-info's METADATA, RECORD and INSTALLER, by (size, mtime_ns,
  inode, device, mode); a symlink by its own identity and its target's.
An entry also holds what the loader looked at outside the tree (system libraries, found or not)
and the libraries a conda prefix's packages list (`Diagnosis.probed`), and is used only while
each of those is unchanged.

Walking the tree costs more than everything else in the key (os.scandir of every directory), so
an entry also keeps the identity of each directory the walk met: while none has changed (creating,
removing or renaming an entry changes its directory's mtime), the walk would find the same files
and only those are stat-ed. A directory modified within the last TIMESTAMP_SLACK seconds before
the walk could change again within the same timestamp tick unseen, so such a walk keeps no
directories, and its entry is checked by walking.

One entry per target and host, named by a digest of them and replaced whole when the rest of the
key changes (the directory does not grow with every pip run), written atomically and read with
the facts cache's rules (env/store.py: a header naming the format and version, then a pickle
whose unpickler builds no class at all): a damaged, foreign or stale entry is a miss, and is
rewritten. An unwritable cache costs speed, never the answer.
Stored is the rendered report (text, text in colour, JSON, both exit statuses): loading it is a
few string copies, and a hit imports neither the checks, the loader nor the ELF reader. A
diagnosis made while the facts cache could not be written, or while the tree changed, is not kept.

A report whose fixes were judged with the indexes is not kept either: a judged fix depends on what
the indexes offer, which changes (a new release, an index back on the network) while nothing in the
key does. Only a diagnosis that opened no index is kept (a healthy environment, or one whose fixes
need none: a driver, a variable), so its hits stay as fast as before; how the fixes were judged (or
why not: --no-judge-fixes, --site-packages) is in the key, as the report says it.

May import: env/ (identity, tree walk, store), output/doctor.py (`Report`, `NotJudged`) and, for a
fresh diagnosis only, commands/diagnosing and commands/judging; nothing imports this but the commands and integrations.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import stat
import sys
import time
from typing import TYPE_CHECKING, Callable, ContextManager, Mapping, NamedTuple, Optional, Tuple

import cudaresolve
from cudaresolve import __version__
from cudaresolve.caches import read_entry
from cudaresolve.env.identity import Identity, identity_of, path_identity
from cudaresolve.env.store import default_cache_dir, dumps_plain, loads_plain, store_entry
from cudaresolve.env.tree import distinct_directories, shared_object_entries
from cudaresolve.output.doctor import NotJudged, Report

if TYPE_CHECKING:
    from typing_extensions import TypeGuard

    from cudaresolve.commands.judging import Judging
    from cudaresolve.env.interpreter import Target
    from cudaresolve.host.facts import HostFacts
    from cudaresolve.index.access import PackageIndex

# data/, which setuptools' package-dir maps to cudaresolve.data (a mapping mypy does not follow)
data_package = importlib.import_module("cudaresolve.data")

FORMAT = 1
HEADER = f"cudaresolve-results {FORMAT} {__version__}\n".encode()
LOADER_VARIABLES = ("LD_LIBRARY_PATH", "LD_PRELOAD", "CONDA_PREFIX")
LD_SO_CACHE = "/etc/ld.so.cache"
# Where LoaderEnv.from_system reads the system layout (multiarch directories, the dynamic linker).
LAYOUT_DIRECTORIES = ("/lib", "/lib64", "/usr/lib")
DIST_INFO_FILES = ("METADATA", "RECORD", "INSTALLER")  # what env/distributions.py reads
TIMESTAMP_SLACK = 2.0  # seconds; coarser than any file system's timestamp tick


class Tree(NamedTuple):
    """What a walk of the site-packages found: the key's part, and the shortcut to check it."""

    files: tuple[tuple[str, Identity], ...]  # (path, identity) of every file the scan may read, sorted
    directories: tuple[tuple[str, Identity], ...]  # (path, identity) of every directory met; () when some were too recent to trust


# A stored entry: (key, files, directories, probed, (text, text_colour, json, exit_code, strict_exit_code)),
# each (path, identity) pair's identity as unpickled: only ever compared.
_Pairs = Tuple[Tuple[str, object], ...]
_Stored = Tuple[str, _Pairs, _Pairs, _Pairs, Tuple[str, str, str, int, int]]


def doctor_report(
    target: Target,
    host: HostFacts,
    environ: Mapping[str, str],
    *,
    progress: Optional[Callable[[str], None]] = None,
    judging: "Judging | NotJudged | None" = None,
) -> Report:
    """The report of `target` for `host`: the cached one while its key holds, else a fresh
    diagnosis (diagnosing.examine), kept when nothing it depends on changed while it was made and
    it opened no index. `judging`: how its fixes are judged, or why not (None: not asked)."""
    not_judged = NotJudged.NOT_ASKED if judging is None else judging if isinstance(judging, NotJudged) else None
    mode = "judged" if not_judged is None else not_judged.value
    cache = ResultCache(default_cache_dir(environ))
    key = result_key(target, host, environ, mode)
    report, tree = cache.load(target, host, key)
    if report is not None:
        return report
    from cudaresolve.commands.diagnosing import examine
    from cudaresolve.commands.judging import Judging
    from cudaresolve.output.doctor import report_of

    opened: list[bool] = []
    if isinstance(judging, Judging):
        indexes = judging.indexes

        def opening() -> ContextManager[PackageIndex]:
            opened.append(True)
            return indexes()

        judging = Judging(opening, judging.offline)
    tree = tree or walk_tree(target)
    diagnosis = examine(target, host, environ, progress=progress, judging=judging if isinstance(judging, Judging) else None)
    report = report_of(diagnosis, not_judged)
    after = tree_now(target, tree)
    if (diagnosis.cache_error is None and not opened and after.files == tree.files
            and result_key(target, host, environ, mode) == key):
        cache.store(target, host, key, after, diagnosis.probed, report)
    return report


class ResultCache:
    """Reports by result key, in `directory`/results/."""

    def __init__(self, directory: str):
        self.directory = os.path.join(directory, "results")

    def load(self, target: Target, host: HostFacts, key: str) -> tuple[Optional[Report], Optional[Tree]]:
        """The stored report when the entry is for `key` and its tree and probes are unchanged
        (else None: absent, another key, damaged, or stale), and the tree when it was walked.
        An entry checked by walking gets the walk's directories once they are old enough to trust."""
        data = read_entry(self._entry(target, host))
        if data is None:
            return None, None
        stored = loads_plain(HEADER, data)
        if not (_well_formed(stored) and stored[0] == key):
            return None, None
        _, files, directories, probed, fields = stored
        tree = None
        if directories and all(directory_identity(path) == identity for path, identity in directories):
            current = tuple((path, file_identity(path)) for path, _ in files)  # the walk would find these
        else:
            tree = walk_tree(target)
            current = tree.files
        if current != files or any(path_identity(path) != identity for path, identity in probed):
            return None, tree
        if tree is not None and tree.directories:  # walked, and now old enough to trust: next time, stats only
            self._write(target, host, (key, files, tree.directories, probed, fields))
        return Report(*fields), tree

    def store(
        self,
        target: Target,
        host: HostFacts,
        key: str,
        tree: Tree,
        probed: tuple[tuple[str, Identity], ...],
        report: Report,
    ) -> None:
        """Keep `report` for `key`; a cache that cannot be written is left as it is."""
        fields = (report.text, report.text_colour, report.json, report.exit_code, report.strict_exit_code)
        self._write(target, host, (key, tree.files, tree.directories, probed, fields))

    def _write(self, target: Target, host: HostFacts, entry: tuple[object, ...]) -> None:
        try:
            store_entry(self._entry(target, host), dumps_plain(HEADER, entry))
        except OSError:
            pass

    def _entry(self, target: Target, host: HostFacts) -> str:
        slot = repr((FORMAT, target, host.to_json())).encode("utf-8", "surrogateescape")
        return os.path.join(self.directory, hashlib.sha256(slot).hexdigest())


def _well_formed(stored: object) -> TypeGuard[_Stored]:
    """An entry as `store` writes it: (key, files, directories, probed, (3 texts, 2 statuses))."""
    if not (isinstance(stored, tuple) and len(stored) == 5 and isinstance(stored[0], str)):
        return False
    _, files, directories, probed, fields = stored
    return (
        all(
            isinstance(pairs, tuple) and all(isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) for p in pairs)
            for pairs in (files, directories, probed)
        )
        and isinstance(fields, tuple)
        and len(fields) == 5
        and all(isinstance(f, str) for f in fields[:3])
        and all(type(f) is int for f in fields[3:])
    )


def result_key(target: Target, host: HostFacts, environ: Mapping[str, str], judging: str) -> str:
    """Everything a report depends on but the tree and what the loader looks at, as one string;
    `judging`: "judged", or why the fixes were not (output/doctor.py's NotJudged)."""
    conda_prefix = target.prefix if target.conda else environ.get("CONDA_PREFIX")
    return repr((
        HEADER,
        judging,
        code_identity(),
        tables_digest(),
        target,
        (sys.version, sys.implementation.name, tuple(os.uname())),
        host.to_json(),
        tuple(environ.get(name) for name in LOADER_VARIABLES),
        os.getcwd(),
        conda_prefix and path_identity(os.path.join(conda_prefix, "lib")),
        # conda rewrites a record on every install, update or removal: the scan reads them all
        target.conda_prefix and directory_identity(os.path.join(target.conda_prefix, "conda-meta")),
        path_identity(LD_SO_CACHE),
        tuple(path_identity(d) for d in LAYOUT_DIRECTORIES),
    ))


def walk_tree(target: Target) -> Tree:
    """Walk each site-packages of `target` as the scan does, stat-ing instead of reading."""
    started = time.time_ns()
    files: list[tuple[str, Identity]] = []
    met: list[os.DirEntry[str]] = []
    trusted = True

    def on_error(exc: OSError) -> None:
        nonlocal trusted
        trusted = False
        files.append((exc.filename or "", f"cannot list: errno {exc.errno}"))

    tops = distinct_directories(target.site_packages)
    for top in tops:
        for entry in shared_object_entries(top, on_error, met):
            try:
                own = entry.stat(follow_symlinks=False)
                files.append((entry.path, _symlink_identity(entry.path, own)))
            except OSError as exc:
                files.append((entry.path, f"errno {exc.errno}"))
        for entry in met:
            if entry.name.endswith(".dist-info") and os.path.dirname(entry.path) == top and entry.is_dir():
                for name in DIST_INFO_FILES:
                    path = os.path.join(entry.path, name)
                    files.append((path, file_identity(path)))
    files.sort(key=lambda item: item[0])
    directories = []
    walked: list[tuple[str, Optional[os.DirEntry[str]]]] = [(top, None) for top in tops] + [(entry.path, entry) for entry in met]
    for path, met_entry in walked:
        try:
            st = met_entry.stat(follow_symlinks=False) if met_entry is not None else os.lstat(path)
        except OSError:
            trusted = False
            continue
        trusted = trusted and max(st.st_mtime_ns, st.st_ctime_ns) < started - TIMESTAMP_SLACK * 1e9
        directories.append((path, directory_identity(path, st)))
    return Tree(tuple(files), tuple(directories) if trusted else ())


def tree_now(target: Target, tree: Tree) -> Tree:
    """The tree as a walk would find it now. While none of `tree`'s directories changed (creating,
    removing or renaming an entry changes its directory), the walk would meet the same files, and
    only they are stat-ed (a few ms where a walk of a torch venv takes ~0.1 s); otherwise, and for
    a tree whose directories were too recent to trust, it is walked."""
    if tree.directories and all(directory_identity(path) == identity for path, identity in tree.directories):
        return Tree(tuple((path, file_identity(path)) for path, _ in tree.files), tree.directories)
    return walk_tree(target)


def file_identity(path: str) -> Identity:
    """A tree file's identity (a symlink: its own and its target's), as the walk records it."""
    try:
        own = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as exc:
        return f"errno {exc.errno}"
    return _symlink_identity(path, own)


def _symlink_identity(path: str, own: os.stat_result) -> Identity:
    return (identity_of(own), path_identity(path)) if stat.S_ISLNK(own.st_mode) else identity_of(own)


def directory_identity(path: str, own: Optional[os.stat_result] = None) -> Identity:
    """A directory's identity with its ctime (mtime can be set back; ctime cannot), a symlinked
    one with its target's too (a target that stops being a directory changes what the walk finds)."""
    try:
        own = own or os.lstat(path)
    except OSError as exc:
        return f"errno {exc.errno}"
    identity = identity_of(own) + (own.st_ctime_ns,)
    return (identity, path_identity(path)) if stat.S_ISLNK(own.st_mode) else identity


def code_identity() -> tuple[tuple[str, Identity], ...]:
    """(path, identity) of cudaresolve's own modules."""
    found = []
    for directory, names, files in os.walk(os.path.dirname(cudaresolve.__file__)):
        names[:] = sorted(n for n in names if n != "__pycache__")
        for name in sorted(files):
            if name.endswith(".py"):
                path = os.path.join(directory, name)
                found.append((path, path_identity(path)))
    return tuple(found)


def tables_digest() -> str:
    """A digest of the knowledge tables' contents."""
    assert data_package.__file__ is not None  # a regular package: data/__init__.py
    directory = os.path.dirname(data_package.__file__)
    digest = hashlib.sha256()
    for name in sorted(n for n in os.listdir(directory) if n.endswith(".toml")):
        with open(os.path.join(directory, name), "rb") as f:
            content = f.read()
        digest.update(f"{name} {len(content)}\n".encode())
        digest.update(content)
    return digest.hexdigest()
