"""Binary facts of a wheel that is not installed, without downloading it where possible.

In this order: the knowledge table (data/wheel_facts.toml, generated from the real wheels by
scripts/record_wheel_facts.py), whose rows hold what crosses components (partial facts:
`complete=False`); else, or with `deep`, the wheel itself, its ELF members read one at a time, and
the result cached by the wheel's sha256 so no wheel is read twice. The wheel is downloaded once
(size announced, sha256 checked), unless its shared objects are under 3/4 of its bytes and its host
does range requests: then only they are fetched, in 8 MiB windows, each member checked by its
CRC-32 as metadata read by range is. Reading less of a member cannot work: NVIDIA keeps .dynstr and
.dynamic at the end of 300 MB libraries inside deflated members.
"""

from __future__ import annotations

from typing import Optional

from cudaresolve.binary.wheel import WheelError, WheelFacts, read_wheel
from cudaresolve.env.cache import dumps_facts, loads_facts
from cudaresolve.index.cache import IndexCache, OfflineMiss
from cudaresolve.index.downloads import Progress, download
from cudaresolve.index.http import Http, local_path
from cudaresolve.index.metadata import ranged_wheel
from cudaresolve.index.pages import ProjectFile
from cudaresolve.knowledge import wheel_facts as table
from cudaresolve.knowledge.wheel_facts import from_record

FACTS_BYTES = 256 << 20  # the most of a cached entry of a wheel's facts read back
RANGED_SHARE = 0.75  # a wheel whose shared objects are less of it than this is read by range


def wheel_binary_facts(
    http: Http, cache: IndexCache, file: ProjectFile, *, deep: bool = False, progress: Optional[Progress] = None
) -> WheelFacts:
    """The ELF facts of the wheel `file`: from the table unless `deep`, else read from the wheel."""
    if not deep:
        row = table.find(file.name, str(file.version), file.filename)
        if row is not None:
            return from_record(row)
    limits = http.limits
    bounds = {"max_directory": limits.central_directory_bytes, "max_member": limits.elf_member_bytes}
    if file.url.startswith("file:"):
        path = local_path(file.url)
        try:
            local = open(path, "rb")
        except (OSError, ValueError) as exc:  # ValueError: a NUL byte (%00) in the path
            raise WheelError(file.filename, f"cannot read {path!r}: {getattr(exc, 'strerror', None) or exc}") from None
        with local:
            return read_wheel(local, file.filename, **bounds)
    key = file.sha256 or "url:" + file.url
    stored = cache.blob("wheel-facts", key, FACTS_BYTES)
    if stored is not None:
        facts = loads_facts(stored)
        if isinstance(facts, tuple) and len(facts) == 4:
            label, members, unreadable, not_elf = facts
            return WheelFacts(label, members, unreadable, not_elf)
        cache.discard("wheel-facts", key)
    if cache.offline:
        raise OfflineMiss(f"--offline: the binary facts of {file.filename} are not in the cache")
    ranged = ranged_wheel(http, cache, file)
    if ranged is not None and ranged[1] < RANGED_SHARE:  # range reads of its shared objects cost less than the file
        facts = read_wheel(ranged[0], file.filename, **bounds)
    else:
        with download(http, file, progress) as stream:
            facts = read_wheel(stream, file.filename, **bounds)
    cache.store_blob("wheel-facts", key, dumps_facts((facts.label, facts.members, facts.unreadable, facts.not_elf)))
    return facts
