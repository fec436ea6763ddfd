"""Print the test cache's disk use by entry, counting a hard-linked file once; optionally prune it.

Usage: python scripts/test_cache.py [--prune] [--prune-wheels] [CACHE]

CACHE is $CUDARESOLVE_TEST_CACHE, else ~/.cache/cudaresolve-tests (tests/wheel_cache.py describes
the layout). One line per entry: each venv, each extracted wheel, the store, the kept wheels, ...
  disk  the blocks of the entry's files, each file once (as `du`)
  own   of which no other entry links: what deleting the entry frees
The store holds one copy of each file that venvs and extracted wheels link to, so its `own` is what
nothing links to any more. Any entry can be deleted (rm -r); the next test run rebuilds what it
needs. --prune deletes the store's files nothing links to and the downloads of sessions that ended
without removing them; run it while no test session uses the cache. --prune-wheels also deletes
the kept wheels (every wheel the tests fetched, kept so that the next run fetches none), unless a
test session holds wheels.lock; the next run fetches again those it needs.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import stat
import sys
from collections import defaultdict
from pathlib import Path

# Top-level folders made by the tests; those whose subfolders are entries of their own.
KNOWN = ("store", "venvs", "unpacked", "wheels", "wheels.lock", "downloads", "conda", "fake-cuda-index", "nvcc", "pip-cache",
         "lock-registry-cache")
SPLIT = ("venvs", "unpacked", "conda", "downloads")


def entries(cache: Path) -> list[tuple[str, Path]]:
    """(label, path) of each entry: the subfolders of SPLIT folders, every other top-level item."""
    found = []
    for top in sorted(cache.iterdir()):
        if top.name in SPLIT and top.is_dir():
            found += [(f"{top.name}/{sub.name}", sub) for sub in sorted(top.iterdir()) if sub.is_dir()]
            found.append((f"{top.name}/ (lock files)", top))
        else:
            found.append((top.name, top))
    return found


def files_of(path: Path, shallow: bool) -> list[os.stat_result]:
    """lstat of `path` and everything under it (with `shallow`, only what is not a folder in it)."""
    stats = [path.lstat()]
    if shallow:
        return stats + [p.lstat() for p in path.iterdir() if p.is_symlink() or not p.is_dir()]
    if path.is_dir() and not path.is_symlink():
        for directory, dirs, names in os.walk(path):
            stats += [os.lstat(os.path.join(directory, name)) for name in dirs + names]
    return stats


def describe(label: str, path: Path) -> str:
    """What an entry holds, from its marker (a venv's recipe, an extraction's requirement)."""
    marker = path / ".complete"
    if label.split("/")[0] in ("venvs", "conda", "unpacked") and marker.is_file():
        lines = [line for line in marker.read_text(errors="replace").splitlines() if line]
        if label.startswith("conda/"):
            return "conda's venv for " + (lines[1] if len(lines) > 1 else "?")
        if label.startswith("venvs/") and not (lines and lines[0].startswith("python ")):
            return "an older layout's venv, not used: " + ", ".join(lines)[:60]
        return ", ".join(line for line in lines if not line.startswith("python "))[:100]
    if label.startswith(("venvs/", "unpacked/", "conda/")) and not label.endswith("(lock files)"):
        return "incomplete"
    if label == "store":
        return "one copy of each file the entries below link to"
    if label == "wheels":
        return f"{sum(1 for _ in path.glob('*.whl'))} wheels fetched, kept for the next run"
    if label.split("/")[0] not in KNOWN:
        return "not made by these tests"
    return ""


def mib(blocks: int) -> str:
    return f"{blocks * 512 / 2**20:,.1f}"


def report(cache: Path) -> None:
    listed = entries(cache)
    inodes: dict[tuple[int, int], set[int]] = defaultdict(set)  # inode -> entries that link it
    links_seen: dict[tuple[int, int], int] = defaultdict(int)
    blocks: dict[tuple[int, int], int] = {}
    nlink: dict[tuple[int, int], int] = {}
    per_entry = []
    for index, (label, path) in enumerate(listed):
        stats = files_of(path, shallow=label.endswith("(lock files)"))
        mine = set()
        for st in stats:
            key = (st.st_dev, st.st_ino)
            links_seen[key] += 1
            if key in mine:
                continue  # a second link inside the same entry
            mine.add(key)
            inodes[key].add(index)
            blocks[key] = st.st_blocks
            nlink[key] = 1 if stat.S_ISDIR(st.st_mode) else st.st_nlink  # a folder's count is its subfolders
        per_entry.append(mine)
    width = max(len(label) for label, _ in listed) + 2
    print(f"{'entry':<{width}}{'disk MiB':>12}{'own MiB':>12}  what")
    for index, (label, path) in enumerate(listed):
        disk = sum(blocks[k] for k in per_entry[index])
        own = sum(blocks[k] for k in per_entry[index] if inodes[k] == {index})
        print(f"{label:<{width}}{mib(disk):>12}{mib(own):>12}  {describe(label, path)}")
    total = sum(blocks.values())
    outside = sum(blocks[k] for k in blocks if nlink[k] > links_seen[k])
    print(f"{'total, each file once':<{width}}{mib(total):>12}{'':>12}  {total * 512 / 2**30:.2f} GiB in {cache}")
    if outside:
        print(f"(of which {mib(outside)} MiB is also linked from outside the cache)")


def prune_wheels(cache: Path) -> None:
    """Unlink every kept wheel and the record of the sets fetched, holding wheels.lock alone; the
    store's copies, linked from nowhere then, go with prune()."""
    with open(cache / "wheels.lock", "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print("the kept wheels are in use by a test session; not pruned", file=sys.stderr)
            return
        for path in [*(cache / "wheels").glob("*.whl"), *(cache / "wheels" / "sets").glob("*")]:
            path.unlink()


def prune(cache: Path) -> None:
    freed = 0
    store = cache / "store"
    if store.is_dir():
        for directory, _, names in os.walk(store):
            for name in names:
                path = os.path.join(directory, name)
                st = os.lstat(path)
                if st.st_nlink == 1:
                    freed += st.st_blocks
                    os.unlink(path)
    downloads = cache / "downloads"
    if downloads.is_dir():
        for lock_path in downloads.glob("*.lock"):
            with open(lock_path, "a") as lock:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # a live session's
                folder = lock_path.with_suffix("")
                if folder.is_dir():
                    freed += sum(st.st_blocks for st in files_of(folder, shallow=False))
                    shutil.rmtree(folder)
                lock_path.unlink()
    print(f"pruned {mib(freed)} MiB")


def main(argv: list[str]) -> int:
    do_wheels = "--prune-wheels" in argv
    do_prune = "--prune" in argv or do_wheels
    rest = [a for a in argv if a not in ("--prune", "--prune-wheels")]
    if len(rest) > 1 or any(a.startswith("-") for a in rest):
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    default = os.environ.get("CUDARESOLVE_TEST_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "cudaresolve-tests")
    cache = Path(rest[0] if rest else default)
    if not cache.is_dir():
        print(f"no test cache at {cache}", file=sys.stderr)
        return 1
    if do_wheels:
        prune_wheels(cache)
    if do_prune:
        prune(cache)
    report(cache)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
