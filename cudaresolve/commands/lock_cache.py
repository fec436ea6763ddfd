"""Whole `lock` results, cached under a key of everything they depend on, so a warm lock nothing
changed for costs some stats and the writing of its files (figures: docs/performance.md). The
doctor's result cache (result_cache.py) is the model.

The key, made from stats and variables (no file is read but the knowledge tables):
- cudaresolve's version, its modules' identities and the knowledge tables' digest (the doctor's);
- the command line as parsed (every option, so `--driver=550` and `--driver 550` are one key), the
  working directory, the variables that steer pip, the indexes, the hosts or the loader
  (ENVIRON_PREFIXES, ENVIRON_NAMES and every *_proxy), the running interpreter and the kernel;
- the target interpreter by its identity, not asked: the path --python names (looked up on PATH as
  the lock looks it up), the file it is and the one it runs, and the pyvenv.cfg beside it and one
  level up (a launcher that is not an ELF program is asked every time: no entry); without
  --python, the running interpreter's own answer;
- this machine's host facts (probed, the stated ones on top) unless --host files or a node list
  replace it: the probe runs before the lookup because its answer is part of the key;
- the loader's inputs: /etc/ld.so.cache and the directories the system layout is read from.

An entry also holds what its fresh lock read, and is used only while each is unchanged:
- every file the lock opened and every directory it listed, as an audit hook saw them
  (`Reads`): requirements and constraints files and those they include, pyproject.toml, host files
  and node lists, find-links directories, local indexes, the facts and metadata caches; and pip's
  configuration files, those absent too (a pip.conf created later changes the lock);
- the target's installed tree, walked as the doctor walks it (shared objects and dist-infos);
- every index page it read from the page cache, each only while fresh by the page cache's own rule
  (index/cache.py: the index's caching headers, else PAGE_MAX_AGE): a page the next lock would ask
  its index again for makes the entry a miss. With --offline no page is asked again, and the page's
  identity is enough.
A lock is kept only when it succeeded, nothing it read changed while it ran, and it connected to
nothing (every page fresh, every file cached): what it printed is then what a warm lock prints.

Stored are the rendered outputs: each file's path and text, and what the lock printed on stdout and
stderr. A hit writes the files as a fresh lock does (lockfile/files.py: together, and never over a
file cudaresolve did not write; a file that holds those bytes already is left as it is, sparing its
write and fsync) and prints the same bytes, but for --json's `seconds`, which are its
own. --explain and --json are cached like the text report. --refresh, and any input read from
stdin, bypass the cache. One entry per output file, target and host, replaced whole when the rest
of the key changes, written atomically and read with env/store.py's rules (a header, then a pickle
of plain values): a damaged, foreign or stale entry is a miss, and is rewritten. An unwritable cache
costs speed, never the answer. A hit imports neither the resolver nor the checks.

May import: env/ (identity, store, interpreter), caches, host/ (through commands/hosts,
host_options), lockfile/files (writing), commands/result_cache (the key's shared parts, the tree
walk); index/cache only when an entry is stored.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import re
import shutil
import stat
import sys
import time
from typing import TYPE_CHECKING, Callable, Mapping, Optional, Sequence, TextIO, Tuple, cast

from cudaresolve import __version__
from cudaresolve.caches import read_entry
from cudaresolve.commands.result_cache import (
    LAYOUT_DIRECTORIES,
    LD_SO_CACHE,
    Tree,
    code_identity,
    directory_identity,
    tables_digest,
    tree_now,
    walk_tree,
)
from cudaresolve.env.identity import Identity, identity_of, path_identity
from cudaresolve.env.interpreter import Target, running_target
from cudaresolve.env.store import default_cache_dir, dumps_plain, loads_plain, store_entry
from cudaresolve.errors import CudaresolveError, Exit

if TYPE_CHECKING:
    from typing_extensions import TypeGuard

FORMAT = 1
HEADER = f"cudaresolve-lock-results {FORMAT} {__version__}\n".encode()
# Variables read by pip's configuration, the index access (requests: proxies, certificates, netrc),
# the host probe and overrides, the loader, the interpreter lookup and the caches' places.
ENVIRON_PREFIXES = ("PIP_", "CUDARESOLVE_", "UV_", "CONDA_", "CUDA_", "NVIDIA_", "XDG_", "LD_", "PYTHON", "REQUESTS_", "CURL_", "SSL_")
ENVIRON_NAMES = ("HOME", "PATH", "VIRTUAL_ENV", "NETRC", "NO_COLOR")
# The kernel's files, which the hook does not record: the host facts they give are in the key.
NOT_RECORDED = ("/proc/", "/sys/", "/dev/")
# The `seconds` of a --json report: the run's own, not the stored one's.
_SECONDS = re.compile(r'^  "seconds": [^,\n]*', re.MULTILINE)

# a stored tree's pairs, as walk_tree made them (identities unpickled: only ever compared)
_Tree = Tuple[Tuple[Tuple[str, Identity], ...], Tuple[Tuple[str, Identity], ...]]
Fresh = Callable[[argparse.Namespace], Tuple[Sequence[Tuple[str, str]], Target]]
_Pairs = Tuple[Tuple[str, object], ...]
# (key, site-packages, files, directories, pages (path, identity, fetched, lifetime),
#  tree files, tree directories, (written (path, text) pairs, stdout, stderr))
_Stored = Tuple[str, Tuple[str, ...], _Pairs, _Pairs, Tuple[Tuple[str, object, float, float], ...], _Pairs, _Pairs,
                Tuple[Tuple[Tuple[str, str], ...], str, str]]


def cached_lock(args: argparse.Namespace, fresh: Fresh, environ: Mapping[str, str]) -> int:
    """Run `lock`: from the cache while its entry holds, else `fresh(args)` (which writes the files,
    prints, and returns the files it wrote and the target it asked), kept when it may be."""
    started = time.perf_counter()
    if args.refresh or _reads_stdin(args):
        fresh(args)
        return Exit.OK
    try:
        made = lock_key(args, environ)
    except (CudaresolveError, OSError):  # the fresh lock says what is wrong, as it always does
        made = None
    if made is None:
        fresh(args)
        return Exit.OK
    key, slot = made
    cache = LockCache(default_cache_dir(environ))
    stored = cache.load(slot, key, args.offline)
    if stored is not None:
        _replay(stored, args.json, time.perf_counter() - started)
        return Exit.OK
    reads = Reads(cache.root, outputs=_outputs(args))
    with reads.recording(), _Captured() as captured:
        written, target = fresh(args)
    cache.store(slot, key, reads, target, tuple(written), captured.stdout.getvalue(), captured.stderr.getvalue(), environ)
    return Exit.OK


def _reads_stdin(args: argparse.Namespace) -> bool:
    """Whether a host file or the node list is stdin, which no key can name."""
    return "-" in (args.host or ()) or args.hosts_from_nodes == "-"


def _outputs(args: argparse.Namespace) -> list[str]:
    """The files the lock may write (-o - writes none), as `fresh` names them, absolute."""
    paths = [args.output or os.path.join(args.project or "", "pylock.toml"), args.write_constraints, args.write_requirements]
    return [os.path.abspath(path) for path in paths if path not in (None, "-")]


def lock_key(args: argparse.Namespace, environ: Mapping[str, str]) -> Optional[tuple[str, str]]:
    """(the key, the entry's name): everything a lock depends on but what it read; None when the
    target interpreter is a launcher (`_interpreter`)."""
    request = tuple(sorted((name, repr(value)) for name, value in vars(args).items()))
    interpreter = _interpreter(args.python, environ)
    if interpreter is None:
        return None
    host = _this_host(args)
    key = repr((
        HEADER,
        code_identity(),
        tables_digest(),
        request,
        os.getcwd(),
        tuple(sorted((name, value) for name, value in environ.items() if _steers(name))),
        (sys.version, sys.executable, sys.implementation.name, tuple(os.uname())),
        interpreter,
        host,
        path_identity(LD_SO_CACHE),
        tuple(path_identity(d) for d in LAYOUT_DIRECTORIES),
    ))
    slot = repr((FORMAT, _outputs(args), interpreter[0], host, args.host, args.hosts_from_nodes, os.getcwd()))
    return key, hashlib.sha256(slot.encode("utf-8", "surrogateescape")).hexdigest()


def _steers(name: str) -> bool:
    return name.startswith(ENVIRON_PREFIXES) or name in ENVIRON_NAMES or name.lower().endswith("_proxy")


def _interpreter(python: Optional[str], environ: Mapping[str, str]) -> Optional[tuple[object, ...]]:
    """The target interpreter by what it is: `--python`'s path and its files' identities, or the
    running interpreter's answer. A name not on PATH is left to the fresh lock to refuse. None for a
    program that is not an ELF binary (a pyenv shim, a wrapper script): which Python it starts
    depends on its variables and files, not on its own identity, so it is asked every time."""
    if python is None:
        return (None, running_target())
    located = shutil.which(python, path=environ.get("PATH")) if os.sep not in python else os.path.abspath(python)
    if located is None:
        from cudaresolve.env.errors import EnvError

        raise EnvError(f"no interpreter named {python} on PATH")
    here = os.path.dirname(located)
    own: Identity = identity_of(os.lstat(located))  # an OSError: the fresh lock says why it cannot run it
    if not _elf(located):
        return None
    return (located, own, path_identity(located), os.path.realpath(located),
            path_identity(os.path.join(here, "pyvenv.cfg")), path_identity(os.path.join(os.path.dirname(here), "pyvenv.cfg")))


def _elf(path: str) -> bool:
    """Whether `path` is a regular file starting with ELF's magic (a FIFO is not waited on)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        return stat.S_ISREG(os.fstat(fd).st_mode) and os.read(fd, 4) == b"\x7fELF"
    finally:
        os.close(fd)


def _this_host(args: argparse.Namespace) -> Optional[str]:
    """This machine's host facts as the lock takes them, when it does (no --host, no node list)."""
    if args.host or args.hosts_from_nodes is not None:
        return None
    from cudaresolve.commands.host_options import host_options
    from cudaresolve.host.probe import host_for

    return repr(host_for(host_file=None, overrides=host_options(args), environ=os.environ).to_json())


class Reads:
    """What a fresh lock opened to read and listed, seen by an audit hook while `recording`, each
    file's identity when first opened; and whether it connected anywhere. Files under the cache
    directory (`root`) are cudaresolve's own, rewritten as the lock runs: they are taken as they
    stand at the end. `outputs` are the files the lock writes, not inputs."""

    def __init__(self, root: str, outputs: Sequence[str]):
        self.root = root.rstrip(os.sep) + os.sep
        self.files: dict[str, Identity] = {}
        self.directories: dict[str, Identity] = {}
        self.connected = False
        self.unseen = False  # an event the hook could not read: what the lock read is not known whole
        # the standard library and cudaresolve's own files (in the key), and this cache's entries
        skipped = [os.path.dirname(os.__file__), os.path.dirname(os.path.dirname(__file__)), os.path.join(root, "lock-results")]
        self._skipped = tuple(path.rstrip(os.sep) + os.sep for path in skipped) + NOT_RECORDED
        self._outputs = frozenset(outputs)

    def recording(self) -> "_Recording":
        return _Recording(self)

    def seen(self, event: str, arguments: tuple[object, ...]) -> None:
        if event == "socket.connect":
            self.connected = True
            return
        path = arguments[0] if arguments else None
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str):
            return
        path = os.path.abspath(path)
        if path.startswith(self._skipped) or path in self._outputs:
            return
        if event == "open":
            flags = arguments[2]
            if isinstance(flags, int) and flags & os.O_ACCMODE == os.O_RDONLY and path not in self.files:
                self.files[path] = None if path.startswith(self.root) else path_identity(path)
        elif path not in self.directories:
            self.directories[path] = directory_identity(path)

    def changed(self) -> bool:
        """Whether a file the lock read outside the cache is not what it was when read."""
        return any(path_identity(path) != identity for path, identity in self.files.items() if not path.startswith(self.root))


_recorder: list[Reads] = []  # the one recording now; the hook, once added, stays for the process


def _hook(event: str, arguments: tuple[object, ...]) -> None:
    if not (_recorder and event in ("open", "os.listdir", "os.scandir", "socket.connect")):
        return
    try:
        if sys._getframe(1).f_code.co_filename.startswith("<frozen importlib"):
            return  # the import system finding modules (sys.path's directories): not the lock's input
        _recorder[0].seen(event, arguments)
    except Exception:  # noqa: BLE001 - a hook that raises would fail the open it watches
        _recorder[0].unseen = True


_hooked: list[bool] = []


class _Recording:
    def __init__(self, reads: Reads):
        self.reads = reads

    def __enter__(self) -> Reads:
        if not _hooked:
            sys.addaudithook(_hook)
            _hooked.append(True)
        _recorder[:] = [self.reads]
        return self.reads

    def __exit__(self, *exc: object) -> None:
        _recorder.clear()


class _Tee(io.TextIOBase):
    """A stream that writes through to `stream` and keeps a copy."""

    def __init__(self, stream: TextIO):
        self.stream, self.kept = stream, io.StringIO()

    def write(self, text: str) -> int:
        self.kept.write(text)
        return self.stream.write(text)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self.stream.encoding

    def getvalue(self) -> str:
        return self.kept.getvalue()


class _Captured:
    """sys.stdout and sys.stderr written through and kept while the fresh lock runs."""

    def __enter__(self) -> "_Captured":
        self.stdout, self.stderr = _Tee(sys.stdout), _Tee(sys.stderr)
        self._was = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = cast(TextIO, self.stdout), cast(TextIO, self.stderr)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.stdout, sys.stderr = self._was


def _replay(stored: _Stored, json: bool, seconds: float) -> None:
    """A hit: the files written as the fresh lock wrote them, then what it printed."""
    from cudaresolve.lockfile.files import write_together

    written, stdout, stderr = stored[7]
    changed = [(path, text) for path, text in written if not _holds(path, text)]
    if changed:
        write_together(changed)
    if json:
        stdout = _SECONDS.sub(f'  "seconds": {round(seconds, 3)!r}', stdout, count=1)
    sys.stderr.write(stderr)
    sys.stderr.flush()
    sys.stdout.write(stdout)


def _holds(path: str, text: str) -> bool:
    """Whether the file at `path` is a regular file of exactly `text` as lockfile/files.py writes it
    (UTF-8, "\\n"): then writing it again would change nothing but its inode and times."""
    data = text.encode("utf-8")
    return read_entry(path, len(data)) == data


class LockCache:
    """Lock results by key, in `root`/lock-results/."""

    def __init__(self, root: str):
        self.root = root
        self.directory = os.path.join(root, "lock-results")

    def load(self, slot: str, key: str, offline: bool) -> Optional[_Stored]:
        """The entry for `key` when everything it read is unchanged and its pages fresh (with
        `offline`, unchanged); else None: absent, another key, damaged or stale."""
        data = read_entry(os.path.join(self.directory, slot))
        stored = None if data is None else loads_plain(HEADER, data)
        if not (_well_formed(stored) and stored[0] == key):
            return None
        _, site_packages, files, directories, pages, tree_files, tree_directories, _ = stored
        now = time.time()
        if (
            any(path_identity(path) != identity for path, identity in files)
            or any(directory_identity(path) != identity for path, identity in directories)
            # CachedPage.fresh: used without asking the index while 0 <= age < its lifetime
            or any(path_identity(path) != identity or not (offline or 0 <= now - fetched < lifetime)
                   for path, identity, fetched, lifetime in pages)
            or tree_now(Target(site_packages=site_packages), Tree(*cast(_Tree, (tree_files, tree_directories)))).files != tree_files
        ):
            return None
        return stored

    def store(self, slot: str, key: str, reads: Reads, target: Target, written: tuple[tuple[str, str], ...], stdout: str,
              stderr: str, environ: Mapping[str, str]) -> None:
        """Keep the outputs of a fresh lock that connected to nothing and read nothing that changed
        while it ran; a cache that cannot be written is left as it is."""
        if reads.connected or reads.unseen or reads.changed():
            return
        from cudaresolve.index.config import pip_config_paths

        pages_dir = os.path.join(self.root, "index", "pages") + os.sep
        pages = []
        for path in sorted(path for path in reads.files if path.startswith(pages_dir)):
            lifetime = _page_lifetime(path)
            if lifetime is None:
                return
            pages.append((path, path_identity(path), *lifetime))
        read = [path for path in reads.files if not path.startswith(pages_dir)] + list(pip_config_paths(target.prefix, environ))
        files = tuple(sorted((path, path_identity(path)) for path in set(read)))
        tree = walk_tree(target)
        entry = (key, target.site_packages, files, tuple(sorted(reads.directories.items())), tuple(pages),
                 tree.files, tree.directories, (written, stdout, stderr))
        try:
            store_entry(os.path.join(self.directory, slot), dumps_plain(HEADER, entry))
        except OSError:
            pass


def _page_lifetime(path: str) -> Optional[tuple[float, float]]:
    """(fetched, seconds fresh) of the page cache's entry at `path`, read as the page cache reads it
    (its URL from the entry's head); None when it is not a whole page entry."""
    import json

    from cudaresolve.index.cache import PAGE_MAX_AGE, IndexCache

    data = read_entry(path)
    try:
        url = json.loads(data.split(b"\n", 2)[1])["url"] if data is not None else None
    except (ValueError, IndexError, KeyError, TypeError):
        return None
    page = IndexCache(os.path.dirname(os.path.dirname(path))).page(url) if isinstance(url, str) else None
    if page is None:
        return None
    return page.fetched, PAGE_MAX_AGE if page.max_age is None else page.max_age


def _well_formed(stored: object) -> TypeGuard[_Stored]:
    """An entry as `store` writes it."""
    if not (isinstance(stored, tuple) and len(stored) == 8 and isinstance(stored[0], str)):
        return False
    _, site_packages, files, directories, pages, tree_files, tree_directories, outputs = stored
    return (
        isinstance(site_packages, tuple) and all(isinstance(path, str) for path in site_packages)
        and all(
            isinstance(pairs, tuple) and all(isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) for p in pairs)
            for pairs in (files, directories, tree_files, tree_directories)
        )
        and isinstance(pages, tuple)
        and all(isinstance(p, tuple) and len(p) == 4 and isinstance(p[0], str) and all(type(n) is float for n in p[2:]) for p in pages)
        and isinstance(outputs, tuple) and len(outputs) == 3
        and isinstance(outputs[0], tuple)
        and all(isinstance(w, tuple) and len(w) == 2 and all(isinstance(t, str) for t in w) for w in outputs[0])
        and all(isinstance(text, str) for text in outputs[1:])
    )
