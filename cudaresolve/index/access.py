"""One object the resolver and `inspect` ask about distributions: which files the configured indexes
offer for a name, which of them fit the target, their core metadata and their binary facts.

Independent fetches (the pages of several indexes, the metadata of many files) run in a bounded
thread pool over one HTTP session, so a resolution's first round costs about one round trip per
wave of names, not one per file.
"""

from __future__ import annotations

import dataclasses
import os
from concurrent.futures import Future, ThreadPoolExecutor
from functools import lru_cache, partial
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, TypeVar

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.tags import Tag
from packaging.utils import InvalidWheelFilename, canonicalize_name, parse_wheel_filename
from packaging.version import Version

from cudaresolve.binary.wheel import WheelFacts
from cudaresolve.env.imports import ImportModel
from cudaresolve.env.interpreter import Target
from cudaresolve.env.store import default_cache_dir
from cudaresolve.index import limits as index_limits
from cudaresolve.index.cache import IndexCache
from cudaresolve.index.config import IndexConfig
from cudaresolve.index.downloads import Progress, file_sha256
from cudaresolve.index.http import Http, IndexAccessError
from cudaresolve.index.metadata import CoreMetadata, core_metadata, wheel_members
from cudaresolve.index.pages import ProjectFile, find_links_files, index_files
from cudaresolve.index.tags import TagOverrides, target_tags
from cudaresolve.index.wheel_facts import LinkBudget, wheel_binary_facts, wheel_linked_facts
from cudaresolve.knowledge import torch

WORKERS = 8  # concurrent requests: enough to hide round trips, few enough to be polite to an index

_VARIANT_INDEX = "\0variant-index\0"  # where a variant index's URL stood in an error's words

T = TypeVar("T")
R = TypeVar("R")


class PackageIndex:
    """The configured indexes as the target sees them. `config` is an `IndexConfig`."""

    def __init__(
        self,
        config: IndexConfig,
        cache: IndexCache,
        http: Http,
        tags: tuple[Tag, ...],
        python_version: Optional[str],
        progress: Optional[Progress] = None,
    ) -> None:
        self.config = config
        self.cache = cache
        self.http = http
        self.ranks = {tag: rank for rank, tag in enumerate(tags)}
        self.python_version = Version(python_version) if python_version else None
        self.progress = progress
        self._pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="cudaresolve-index")
        self._models: dict[tuple[str, str], Optional[ImportModel]] = {}  # (wheel URL, site) -> import_model's answer

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> "PackageIndex":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def files(self, name: str, torch_variant: Optional[str] = None) -> tuple[ProjectFile, ...]:
        """Every file the indexes for `name` and the find-links locations list, each URL once.

        Fetched one source after another in the calling thread, so a task running in the pool may
        call it; `files_of_all` fetches many names' pages at once."""
        seen: dict[str, ProjectFile] = {}
        for fetch in self._sources(name, torch_variant):
            for file in fetch():
                seen.setdefault(file.url, file)
        return tuple(seen.values())

    def files_of_all(self, wanted: Sequence[tuple[str, Optional[str]]]) -> list[tuple[ProjectFile, ...]]:
        """`files` of several (name, torch variant) pairs, every page fetched in one parallel wave.
        When pages cannot be read, the error names each of them (every variant index of an
        unreachable PyTorch mirror), not only the first."""
        fetches = [(position, fetch) for position, (name, variant) in enumerate(wanted) for fetch in self._sources(name, variant)]
        futures = [self._pool.submit(fetch) for _, fetch in fetches]
        seen: list[dict[str, ProjectFile]] = [{} for _ in wanted]
        failed: list[tuple[str, Optional[str], IndexAccessError]] = []  # (name, variant, why)
        for (position, _), future in zip(fetches, futures):
            try:
                listed = future.result()
            except IndexAccessError as exc:
                failed.append((*wanted[position], exc))
                continue
            for file in listed:
                seen[position].setdefault(file.url, file)
        if len(failed) == 1:
            raise failed[0][2]
        if failed:
            raise IndexAccessError("\n".join(self._unreachable(failed)))
        return [tuple(found.values()) for found in seen]

    def _unreachable(self, failed: Sequence[tuple[str, Optional[str], IndexAccessError]]) -> list[str]:
        """One line per index that could not be read, with the setting that moves it: the PyTorch
        variant indexes that failed alike as one line under --torch-index-base."""
        config = self.config
        variants: dict[str, list[str]] = {}  # the words, with the variant index's URL taken out -> the variants
        lines: list[str] = []
        for name, variant, exc in failed:
            if variant is not None and canonicalize_name(name) in torch.family():
                words = str(exc).replace(config.torch_variant_index(variant), _VARIANT_INDEX)
                variants.setdefault(words, []).append(variant)
                continue
            lines.append(f"{exc} ({_setting(config, str(exc))})")
        for words, names in variants.items():
            listed = names[0] if len(names) == 1 else "{" + ",".join(dict.fromkeys(names)) + "}"
            lines.append(f"{words.replace(_VARIANT_INDEX, config.torch_variant_index(listed))} "
                         "(the PyTorch indexes: --torch-index-base moves them)")
        return list(dict.fromkeys(lines))

    def _sources(self, name: str, variant: Optional[str]) -> list[Callable[[], tuple[ProjectFile, ...]]]:
        """One fetch per index and find-links location that may list `name`."""
        fetches: list[Callable[[], tuple[ProjectFile, ...]]] = [
            partial(index_files, self.http, self.cache, url, name) for url in self.config.indexes_for(name, variant)
        ]
        fetches += [partial(find_links_files, self.http, self.cache, link, name) for link in self.config.find_links]
        return fetches

    def installable(self, files: Iterable[ProjectFile]) -> tuple[ProjectFile, ...]:
        """The files that fit the target: wheels with a matching tag, sdists, and requires-python
        satisfied. Wheels come first, best tag first; yanked files are kept (pip takes one only for
        an exact == pin) and the caller decides."""
        fitting = []
        for file in files:
            if not self.fits_python(file):
                continue
            if file.is_wheel:
                try:
                    tags = wheel_tags(file.filename)
                except InvalidWheelFilename:
                    continue  # pip skips a file whose name it cannot read
                rank = min((self.ranks[t] for t in tags if t in self.ranks), default=None)
                if rank is None:
                    continue
            else:
                rank = len(self.ranks)
            fitting.append((rank, file))
        fitting.sort(key=lambda pair: pair[0])
        return tuple(file for _, file in fitting)

    def fits_python(self, file: ProjectFile) -> bool:
        if self.python_version is None or not file.requires_python:
            return True
        return _python_fits(file.requires_python, self.python_version)

    def metadata(self, file: ProjectFile) -> CoreMetadata:
        """The file's core metadata; an sdist's as pip prepares it when its PKG-INFO does not give it."""
        return core_metadata(self.http, self.cache, file, self.progress, build_with=self.pip_index_options())

    def pip_index_options(self) -> list[str]:
        """pip's options naming these indexes, for the pip that prepares an sdist's metadata (its build
        requirements come from where the lock's files do)."""
        config = self.config
        options = ["--no-index"] if config.no_index or config.index_url is None else ["--index-url", config.index_url]
        for url in config.extra_index_urls:
            options += ["--extra-index-url", url]
        for link in config.find_links:
            options += ["--find-links", link]
        for host in config.trusted_hosts:
            options += ["--trusted-host", host]
        if config.cert:
            options += ["--cert", config.cert]
        if config.client_cert:
            options += ["--client-cert", config.client_cert]
        return options

    def members(self, file: ProjectFile) -> tuple[str, ...]:
        """The member names of a wheel, from its zip directory (range reads; cached by sha256)."""
        return wheel_members(self.http, self.cache, file, self.progress)

    def sha256(self, file: ProjectFile) -> str:
        """The file's sha256 for a lock: the index's, else computed from the file (downloaded once)."""
        return file_sha256(self.http, self.cache, file, self.progress)

    def binary_facts(self, file: ProjectFile, *, deep: bool = False) -> WheelFacts:
        """The ELF facts of a wheel: the knowledge table's (partial) unless `deep`, else the wheel's own."""
        return wheel_binary_facts(self.http, self.cache, file, deep=deep, progress=self.progress)

    def import_model(self, file: ProjectFile, site: str) -> Optional[ImportModel]:
        """What importing the wheel `file` installed in `site` loads, read from its Python members;
        None when it has no model or it cannot be read (index/wheel_imports.py)."""
        key = (file.url, site)
        if key not in self._models:  # a lock plans again each round, a fix judge each alternative
            from cudaresolve.index.wheel_imports import wheel_import_model  # only a plan that reads a wheel needs it

            self._models[key] = wheel_import_model(self.http, self.cache, file, site, self.progress)
        return self._models[key]

    def linked_facts(self, file: ProjectFile, budget: LinkBudget) -> WheelFacts:
        """The ELF facts of a wheel the tables do not know, its shared objects read by range where
        the server allows, charged to `budget` (BudgetSpent when it would overrun)."""
        return wheel_linked_facts(self.http, self.cache, file, budget, self.progress)

    def best_wheel(self, name: str, version: Version, torch_variant: Optional[str] = None) -> Optional[ProjectFile]:
        """The wheel of exactly `name==version` pip would take for the target (best tag first; a
        yanked file only when nothing else fits, as PEP 592 allows for an exact pin)."""
        wheels = [f for f in self.installable(self.files(name, torch_variant)) if f.is_wheel and f.version == version]
        return next((f for f in wheels if not f.yanked), wheels[0] if wheels else None)

    def submit(self, function: Callable[..., R], *args: Any) -> "Future[R]":
        """Run `function(*args)` in the pool (it may call `files`, `metadata`, never `map`)."""
        return self._pool.submit(function, *args)

    def map(self, function: Callable[[T], R], items: list[T]) -> list[R]:
        """`function` over `items` in the pool, results in order; the first error in that order is raised.

        Call it from the caller's thread, not from a function it runs (that could wait on itself)."""
        return list(self._pool.map(function, items))


@lru_cache(maxsize=None)
def _python_fits(requires_python: str, version: Version) -> bool:
    """Memoized: a project page repeats a handful of requires-python values over thousands of files."""
    try:
        return SpecifierSet(requires_python).contains(version, prereleases=True)
    except InvalidSpecifier:
        return True  # pip ignores a requires-python it cannot parse


@lru_cache(maxsize=65536)
def wheel_tags(filename: str) -> frozenset[Tag]:
    return parse_wheel_filename(filename)[3]


def open_index(
    config: IndexConfig,
    target: Target,
    environ: Mapping[str, str],
    *,
    offline: bool = False,
    refresh: bool = False,
    tag_overrides: TagOverrides = TagOverrides(),
    progress: Optional[Progress] = None,
    download_budget: Optional[int] = None,
    give_up: bool = False,
) -> PackageIndex:
    """The PackageIndex for `config` (an IndexConfig) and the target, caching under the cache dir,
    within the limits of index/limits.py (`DEFAULT` as it is when called; `download_budget` over its own);
    `give_up`: a host that failed once is not asked again (Http)."""
    limits = index_limits.DEFAULT
    if download_budget is not None:
        limits = dataclasses.replace(limits, download_budget=download_budget)
    cache = IndexCache(os.path.join(default_cache_dir(environ), "index"), offline=offline, refresh=refresh, limits=limits)
    http = Http(
        timeout=config.timeout,
        retries=config.retries,
        trusted_hosts=config.trusted_hosts,
        cert=config.cert,
        client_cert=config.client_cert,
        proxy=config.proxy,
        limits=limits,
        give_up=give_up,
    )
    python_version = tag_overrides.python_version or target.version
    return PackageIndex(config, cache, http, target_tags(target, tag_overrides), python_version, progress)


def _setting(config: IndexConfig, words: str) -> str:
    """The setting that moves the index or location an error's words name."""
    if config.index_url and config.index_url.rstrip("/") in words:
        return "--index-url moves it"
    if any(url.rstrip("/") in words for url in config.extra_index_urls):
        return "--extra-index-url moves it"
    if any(link.rstrip("/") in words for link in config.find_links):
        return "--find-links moves it"
    return "pip's index settings move it"
