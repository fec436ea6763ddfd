"""On-disk cache of BinaryFacts, so a second look at an environment does not re-read its ELF files.

One entry file per library, named by a hash of (realpath, size, mtime_ns, inode, device): a file
that changes gets a new key, and a run that meets one new library writes one small file.

A file a RECORD lists is also kept by its content, the (sha256, size) pip recorded for it, so a
fresh venv of wheels seen before (a rebuilt venv, a CI runner with this cache restored) reads
none of their libraries again. RECORD is the environment's word, not proof: its entry is used only
for a file of the recorded size whose sampled bytes (the first and last 64 KiB and 16 blocks of
4 KiB spread between, where the ELF headers, dynamic tables and section headers lie) hash as they
did when the entry was written from a read of the file; any other file is read. Hashing whole files
would cost more than reading them (the torch venv's libraries: 5 GB, 3.5 s of sha256 here), so a
file changed only between its samples, size kept, would pass for the recorded one.
Each entry is written to a temporary file in the cache directory and moved into place with
os.replace, so a reader sees a whole entry or none. An entry that does not load cleanly (wrong
header, truncated, foreign classes, wrong key or type) is read again and rewritten, never trusted.

Why pickle, and why one file per library (figures: docs/performance.md, "Facts cache", measured by
scripts/bench_env_cache.py):
- A warm lookup costs a small fraction of reading the file or of `ldd -r` on it: symbols are stored
  as byte columns (facts.SymbolTable), so an entry loads as a few memcpy's whatever the symbol count.
- Pickle needs no hand-written decoder that must follow every change to the facts classes; a JSON
  entry must also encode the byte columns as text, larger and slower to load.
- One file per environment loads a little faster than one per library, but must be rewritten whole
  when one library changes, and merged under a lock when two runs write it. Per-library files need
  neither.
The unpickler only builds the classes of cudaresolve.binary.facts (and the PtxTarget it uses), so a planted entry cannot run
code. Entries of deleted files are not pruned; deleting the directory is always safe.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import os
import pickle
import sys
from typing import TYPE_CHECKING, Callable, Mapping, Optional, Sequence, Tuple

from cudaresolve import __version__
from cudaresolve.binary import facts as facts_module
from cudaresolve.binary.facts import BinaryFacts
from cudaresolve.caches import read_entry
from cudaresolve.env.store import store_entry

if TYPE_CHECKING:
    from multiprocessing.context import BaseContext

CACHE_FORMAT = 2  # 2: BinaryFacts.dlopened

# The dataclasses the facts module defines or imports (PtxTarget lives in cudaresolve.arch).
_FACT_CLASSES = {
    cls.__name__: cls for cls in vars(facts_module).values() if isinstance(cls, type) and dataclasses.is_dataclass(cls)
}


def _schema() -> str:
    """A fingerprint of the facts classes' fields: entries written before a field changed are stale."""
    layout = sorted(
        (name, cls.__module__, tuple(f.name for f in dataclasses.fields(cls))) for name, cls in _FACT_CLASSES.items()
    )
    return hashlib.sha256(repr(layout).encode()).hexdigest()[:16]


HEADER = f"cudaresolve-facts {CACHE_FORMAT} {__version__} {_schema()}\n".encode()


class FactsCache:
    """BinaryFacts by file identity, in `directory`/facts/.

    An unusable cache directory never stops a scan: lookups miss, and the first failed write is
    kept in `write_error` (and no further writes are tried) so the caller can say why it was slow.
    """

    def __init__(self, directory: str):
        self.directory = os.path.join(directory, "facts")
        self.write_error: Optional[str] = None

    def facts_for(self, path: str, *, read: Callable[[str], BinaryFacts], recorded: Optional[Recorded] = None) -> BinaryFacts:
        """The facts of the file at `path`, from the cache (by identity, then by the content
        `recorded` claims for it) or from `read(realpath)`.

        OSError from stat-ing or sampling the file and any error from `read` propagate unchanged.
        """
        real, key, entry = self._locate(path)
        cached = _load(entry, key)
        if cached is not None:
            return cached
        by_content = recorded is not None and recorded[1] == key[1]
        if by_content:
            assert recorded is not None
            content_key = (*recorded, sampled(real, key[1]))
            content_entry = self._content_entry(content_key)
            found = _load(content_entry, content_key)
            if found is not None:
                return dataclasses.replace(found, path=real)
        facts = read(real)
        if _key(real, os.stat(real)) == key:  # unchanged while it was read
            self._store(entry, key, facts)
            if by_content:
                self._store(content_entry, content_key, facts)
        return facts

    def fill(
        self,
        paths: Sequence[str],
        *,
        read: Callable[[str], BinaryFacts],
        progress: Optional[Callable[[str], None]] = None,
        recorded: Mapping[str, Recorded] = {},
    ) -> None:
        """Read the files of `paths` the cache lacks, in one worker process per CPU, into the cache.

        A first scan of an environment is CPU-bound (fatbin scanning), so this shortens it where
        there are two CPUs or more (docs/performance.md). Workers are forked: they start in
        milliseconds and inherit the imported modules and `read`. Nothing here can
        stop a scan: files that fail, a cache that cannot be written and a pool that cannot start
        or loses a worker all leave the work to `facts_for`, which reports what goes wrong.
        """
        missing = []
        for path in paths:
            try:
                _, key, entry = self._locate(path)
                claim = recorded.get(path)
                if claim is not None and claim[1] == key[1] and os.path.exists(self._content_entry((*claim, sampled(path, key[1])))):
                    continue
            except OSError:
                continue
            if not os.path.exists(entry):
                missing.append((key[1], path))
        workers = min(len(missing), _usable_cpus())
        context = _fork_context() if workers >= 2 else None
        if context is None or not self._writable():
            return
        from concurrent.futures import ProcessPoolExecutor, as_completed  # only a scan with misses needs them
        from concurrent.futures.process import BrokenProcessPool

        missing.sort(reverse=True)  # largest first, so no worker is left with a big file at the end
        global _fill_read
        _fill_read = read  # reaches the workers by fork, so `read` need not be picklable
        try:
            with ProcessPoolExecutor(workers, mp_context=context, initializer=_die_with_parent, initargs=(os.getpid(),)) as pool:
                futures = {pool.submit(_fill_one, self, path, recorded.get(path)): path for _, path in missing}
                for future in as_completed(futures):
                    future.result()
                    if progress:
                        progress(futures[future])
        except (OSError, BrokenProcessPool):
            return
        finally:
            _fill_read = None

    def _writable(self) -> bool:
        try:
            os.makedirs(self.directory, mode=0o700, exist_ok=True)
        except OSError:
            return False
        return os.access(self.directory, os.W_OK | os.X_OK)

    def _locate(self, path: str) -> tuple[str, _Key, str]:
        """(realpath, identity key, entry file) of `path`; OSError when it cannot be stat-ed."""
        real = os.path.realpath(path)
        key = _key(real, os.stat(real))
        return real, key, os.path.join(self.directory, hashlib.sha256(repr(key).encode("utf-8", "surrogateescape")).hexdigest())

    def _content_entry(self, content_key: Tuple[str, int, str]) -> str:
        """The entry of (digest, size, sample): one per sampled content, so a tampered file's entry
        never takes the place of the genuine one's."""
        return os.path.join(self.directory, hashlib.sha256(repr(("content", *content_key)).encode()).hexdigest())

    def _store(self, entry: str, key: object, facts: BinaryFacts) -> None:
        if self.write_error is not None:
            return
        try:
            store_entry(entry, dumps_facts((key, facts)))
        except OSError as exc:
            self.write_error = f"cannot write the facts cache in {self.directory}: {exc.strerror or exc}"


_fill_read: Optional[Callable[[str], BinaryFacts]] = None  # FactsCache.fill's reader, for its forked workers


def _usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the OS has one, as on Linux)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _fork_context() -> Optional[BaseContext]:
    """fork's multiprocessing context, or None where fork is missing (Windows) or unsafe (macOS,
    whose system libraries may not survive it): there `fill` leaves all reads to `facts_for`."""
    import multiprocessing

    if sys.platform == "darwin" or "fork" not in multiprocessing.get_all_start_methods():
        return None
    return multiprocessing.get_context("fork")


def _die_with_parent(parent: int) -> None:
    """A worker's first step: end when the scan that forked it ends, even by SIGKILL, which gives
    the pool no chance to stop it and leaves it waiting on its task queue for ever. Linux's
    PR_SET_PDEATHSIG has the kernel kill it then; a parent gone before that took effect is seen here."""
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:
        os._exit(1)


_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


def _fill_one(cache: FactsCache, path: str, recorded: Optional[Recorded]) -> None:
    """One file's facts into the cache, in a worker process; any failure is the caller's to meet again."""
    assert _fill_read is not None
    with contextlib.suppress(Exception):
        cache.facts_for(path, read=_fill_read, recorded=recorded)


_Key = Tuple[str, int, int, int, int]  # (realpath, size, mtime_ns, inode, device): a file's identity
Recorded = Tuple[str, int]  # ("sha256=<urlsafe base64>", size): what a RECORD says a file holds

SAMPLE_END = 64 << 10  # bytes hashed at each end of a file
SAMPLE_BLOCK = 4 << 10
SAMPLE_BLOCKS = 16  # blocks hashed between the ends, evenly spaced


def sampled(real: str, size: int) -> str:
    """A sha256 of the sampled bytes of the `size`-byte file at `real` (the module docstring says which)."""
    spans = [(0, SAMPLE_END), (max(0, size - SAMPLE_END), SAMPLE_END)]
    spans += [(size * (i + 1) // (SAMPLE_BLOCKS + 1), SAMPLE_BLOCK) for i in range(SAMPLE_BLOCKS)]
    digest = hashlib.sha256()
    fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        for offset, length in spans:
            digest.update(os.pread(fd, length, offset))
    finally:
        os.close(fd)
    return digest.hexdigest()


def _key(real: str, st: os.stat_result) -> _Key:
    return (real, st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev)


class _FactsUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> type:
        cls = _FACT_CLASSES.get(name)
        if cls is not None and cls.__module__ == module:
            return cls
        raise pickle.UnpicklingError(f"{module}.{name} is not a facts class")


def dumps_facts(value: object) -> bytes:
    """`value` (tuples, strings, numbers and facts objects) as bytes `loads_facts` reads back."""
    return HEADER + pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


def loads_facts(data: bytes) -> Optional[object]:
    """What `dumps_facts` wrote, or None for anything else (another version's entry, garbage, a
    pickle naming classes other than the facts classes, which is never unpickled)."""
    if not data.startswith(HEADER):
        return None
    try:
        value: object = _FactsUnpickler(io.BytesIO(data[len(HEADER):])).load()
        return value
    except Exception:  # noqa: BLE001 - garbage can fail to unpickle in any way; the caller reads again
        return None


def _load(entry: str, key: object) -> Optional[BinaryFacts]:
    """The entry's facts, or None when it is absent, stale or corrupt."""
    data = read_entry(entry)
    if data is None or not data.startswith(HEADER):
        return None
    stream = io.BytesIO(data)
    stream.seek(len(HEADER))
    try:
        stored = _FactsUnpickler(stream).load()
    except Exception:  # noqa: BLE001 - garbage can fail to unpickle in any way; it is rebuilt
        return None
    if stream.read(1):
        return None
    if not (isinstance(stored, tuple) and len(stored) == 2 and stored[0] == key):
        return None
    facts = stored[1]
    return facts if isinstance(facts, BinaryFacts) else None
