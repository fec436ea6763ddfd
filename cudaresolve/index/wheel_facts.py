"""Binary facts of a wheel that is not installed, without downloading it where possible.

In this order: the knowledge table (data/wheel_facts.toml, generated from the real wheels by
scripts/record_wheel_facts.py), whose rows hold what crosses components (partial facts:
`complete=False`); else, or with `deep`, the wheel itself, its ELF members read one at a time, and
the result cached by the wheel's sha256 so no wheel is read twice. The wheel is downloaded once
(size announced, sha256 checked), unless it is 1 MiB or more, its shared objects are under 3/4 of its bytes and its host
does range requests: then only they are fetched, in 8 MiB windows, each member checked by its
CRC-32 as metadata read by range is. Reading less of a member cannot work: NVIDIA keeps .dynstr and
.dynamic at the end of 300 MB libraries inside deflated members.

A wheel the tables do not know is read for what it links (`wheel_linked_facts`) through range
requests where its server allows them: the zip directory, then each shared-object member in one
request, never its Python files or data; else it is downloaded. What that fetches is charged to
the lock's `LinkBudget` before any member is fetched. Only what the links and a runtime's floor use
is kept and cached (no symbol tables).
"""

from __future__ import annotations

import os
import zipfile
from dataclasses import replace
from typing import BinaryIO, Optional, cast

from cudaresolve.binary.facts import SymbolTable
from cudaresolve.binary.names import is_shared_object_name
from cudaresolve.binary.wheel import DirectoryTooLarge, WheelError, WheelFacts, open_zip, read_wheel
from cudaresolve.env.cache import dumps_facts, loads_facts
from cudaresolve.index.cache import IndexCache, OfflineMiss
from cudaresolve.index.downloads import Progress, download
from cudaresolve.index.http import Http, local_path
from cudaresolve.index.metadata import MEMBER_SLACK, open_ranged, ranged_wheel
from cudaresolve.index.pages import ProjectFile
from cudaresolve.knowledge import wheel_facts as table
from cudaresolve.knowledge.wheel_facts import from_record

FACTS_BYTES = 256 << 20  # the most of a cached entry of a wheel's facts read back
RANGED_SHARE = 0.75  # a wheel whose shared objects are less of it than this is read by range
RANGED_MIN = 1 << 20  # a wheel smaller than this is fetched whole: its range reads would cost more requests than bytes


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
    stored = _stored(cache, "wheel-facts", key)
    if stored is not None:
        return stored
    if cache.offline:
        raise OfflineMiss(f"--offline: the binary facts of {file.filename} are not in the cache")
    ranged = ranged_wheel(http, cache, file) if (file.size or 0) >= RANGED_MIN else None
    if ranged is not None and ranged[1] < RANGED_SHARE:  # range reads of its shared objects cost less than the file
        facts = read_wheel(ranged[0], file.filename, **bounds)
    else:
        with download(http, file, progress) as stream:
            facts = read_wheel(stream, file.filename, **bounds)
            if facts.members:  # the plan reads its import model too (index/wheel_imports.py): from this pass
                from cudaresolve.index.wheel_imports import model_of_wheel, store_model  # a warm lock never comes here

                stream.seek(0)
                store_model(cache, file, model_of_wheel(stream, limits))
    cache.store_blob("wheel-facts", key, dumps_facts((facts.label, facts.members, facts.unreadable, facts.not_elf)))
    return facts


class LinkBudget:
    """The bytes one lock may fetch to read what wheels the tables do not know link."""

    def __init__(self, limit: int) -> None:
        self.limit, self.spent = limit, 0

    def take(self, cost: int) -> bool:
        """Charge `cost`; False (nothing charged) when it would overrun the budget."""
        if self.spent + cost > self.limit:
            return False
        self.spent += cost
        return True


class BudgetSpent(Exception):
    """Reading a wheel's links would overrun the lock's `LinkBudget`."""

    def __init__(self, cost: int, budget: LinkBudget):
        super().__init__(f"{cost} bytes over a budget of {budget.limit} with {budget.spent} spent")
        self.cost, self.budget = cost, budget


def wheel_linked_facts(
    http: Http, cache: IndexCache, file: ProjectFile, budget: LinkBudget, progress: Optional[Progress] = None
) -> WheelFacts:
    """The ELF facts of a wheel the tables do not know, for what its files link and the runtime they
    carry: cached by sha256 as `wheel_binary_facts` caches them; else only its shared-object members,
    by range requests, else the whole wheel. BudgetSpent, before a member is fetched, when the
    bytes it takes would overrun `budget`."""
    limits = http.limits
    bounds = {"max_directory": limits.central_directory_bytes, "max_member": limits.elf_member_bytes}
    key = file.sha256 or "url:" + file.url
    stored = _stored(cache, "wheel-links", key) or _stored(cache, "wheel-facts", key)
    if stored is not None:
        return _links_only(stored)
    if file.url.startswith("file:"):
        return _links_only(wheel_binary_facts(http, cache, file, deep=True, progress=progress))
    if cache.offline:
        raise OfflineMiss(f"--offline: the binary facts of {file.filename} are not in the cache")
    ranged = open_ranged(http, cache, file)
    if ranged is None:
        cost = file.size if file.size is not None else budget.limit
        if not budget.take(cost):
            raise BudgetSpent(cost, budget)
        with download(http, file, progress) as stream:
            facts = read_wheel(stream, file.filename, **bounds)
    else:
        try:
            with open_zip(cast(BinaryIO, ranged), limits.central_directory_bytes) as archive:
                infos = [i for i in archive.infolist() if i.filename and not i.is_dir()
                         and is_shared_object_name(os.path.basename(i.filename))]
        except (DirectoryTooLarge, zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
            raise WheelError(file.filename, f"not a readable wheel ({exc})") from None
        too_large = next((i for i in infos if i.file_size > limits.elf_member_bytes), None)
        if too_large is not None:
            raise WheelError(file.filename, f"{too_large.filename} claims {too_large.file_size:,} bytes, "
                                            f"over the limit of {limits.elf_member_bytes:,} for one member")
        spans = [(i.header_offset, 30 + len(i.orig_filename.encode()) + i.compress_size + MEMBER_SLACK) for i in infos]
        cost = sum(length for _, length in spans)
        if not budget.take(cost):
            raise BudgetSpent(cost, budget)
        ranged.in_spans(spans)  # one request per member, one member held at a time
        facts = read_wheel(cast(BinaryIO, ranged), file.filename, **bounds)
    facts = _links_only(facts)
    cache.store_blob("wheel-links", key, dumps_facts((facts.label, facts.members, facts.unreadable, facts.not_elf)))
    return facts


def _links_only(facts: WheelFacts) -> WheelFacts:
    """`facts` without the symbol tables and version nodes, which the links and a runtime's floor do
    not use: a wheel of 136k symbols is held and cached at the size of its DT_NEEDED and fatbin summary."""
    members = tuple(replace(member, symbols=SymbolTable.of(), version_definitions=(), version_needs=(), symbols_complete=False)
                    for member in facts.members)
    return replace(facts, members=members, complete=False)


def _stored(cache: IndexCache, kind: str, key: str) -> Optional[WheelFacts]:
    stored = cache.blob(kind, key, FACTS_BYTES)
    if stored is None:
        return None
    facts = loads_facts(stored)
    if isinstance(facts, tuple) and len(facts) == 4:
        label, members, unreadable, not_elf = facts
        return WheelFacts(label, members, unreadable, not_elf)
    cache.discard(kind, key)
    return None
