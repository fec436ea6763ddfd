"""Binary facts of a wheel that is not installed, without downloading it where possible.

In this order: the knowledge table (data/wheel_facts.toml, generated from the real wheels by
scripts/record_wheel_facts.py), whose rows hold what crosses components (partial facts:
`complete=False`); else, or with `deep`, the wheel itself: downloaded once (size announced, sha256
checked), its ELF members read one at a time in memory, and the result cached by the wheel's sha256
so no wheel is read twice. Partial reads of a remote wheel cannot work: NVIDIA keeps .dynstr and
.dynamic at the end of 300 MB libraries inside deflated members.
"""

from __future__ import annotations

from typing import Optional

from cudaresolve.binary.wheel import WheelError, WheelFacts, read_wheel
from cudaresolve.env.cache import dumps_facts, loads_facts
from cudaresolve.index.cache import IndexCache, OfflineMiss
from cudaresolve.index.downloads import Progress, download
from cudaresolve.index.http import Http, local_path
from cudaresolve.index.pages import ProjectFile
from cudaresolve.knowledge import wheel_facts as table
from cudaresolve.knowledge.wheel_facts import from_record


def wheel_binary_facts(
    http: Http, cache: IndexCache, file: ProjectFile, *, deep: bool = False, progress: Optional[Progress] = None
) -> WheelFacts:
    """The ELF facts of the wheel `file`: from the table unless `deep`, else read from the wheel."""
    if not deep:
        row = table.find(file.name, str(file.version), file.filename)
        if row is not None:
            return from_record(row)
    if file.url.startswith("file:"):
        path = local_path(file.url)
        try:
            local = open(path, "rb")
        except (OSError, ValueError) as exc:  # ValueError: a NUL byte (%00) in the path
            raise WheelError(file.filename, f"cannot read {path!r}: {getattr(exc, 'strerror', None) or exc}") from None
        with local:
            return read_wheel(local, file.filename)
    key = file.sha256 or "url:" + file.url
    stored = loads_facts(cache.blob("wheel-facts", key) or b"")
    if isinstance(stored, tuple) and len(stored) == 4:
        label, members, unreadable, not_elf = stored
        return WheelFacts(label, members, unreadable, not_elf)
    if cache.offline:
        raise OfflineMiss(f"--offline: the binary facts of {file.filename} are not in the cache")
    with download(http, file, progress) as stream:
        facts = read_wheel(stream, file.filename)
    cache.store_blob("wheel-facts", key, dumps_facts((facts.label, facts.members, facts.unreadable, facts.not_elf)))
    return facts
