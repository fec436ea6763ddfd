"""Index access against the real package registry pip is configured with (skipped when unreachable):
metadata by range requests costs a sliver of each wheel, and a wheel's binary facts are read once,
agree with the generated table, and then come from the cache with nothing transferred."""

from __future__ import annotations

import os

import pytest

from cudaresolve.env.interpreter import running_target
from cudaresolve.index.access import open_index
from cudaresolve.index.config import IndexSettings, index_config
from cudaresolve.index.http import IndexAccessError
from cudaresolve.index.pages import ProjectFile
from cudaresolve.versions import CudaVersion

pytestmark = pytest.mark.registry


@pytest.fixture
def registry(tmp_path):
    """A PackageIndex over pip's configured default index only, with an empty cache."""
    target = running_target()
    environ = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    environ["CUDARESOLVE_CACHE_DIR"] = str(tmp_path / "cache")
    environ["PIP_CONFIG_FILE"] = os.devnull  # pip's own default index, whatever this machine adds
    config = index_config(target.python, target.prefix, environ, None, IndexSettings(), site_packages=target.site_packages)
    opened = []

    def open_(**options):
        index = open_index(config, target, environ, **options)
        opened.append(index)
        return index

    yield open_
    for index in opened:
        index.close()


def _exact(index, name: str, version: str) -> ProjectFile:
    try:
        files = index.installable(index.files(name))
    except IndexAccessError as exc:
        pytest.skip(f"the registry is not reachable: {exc}")
    return next(f for f in files if str(f.version) == version and f.is_wheel)


@pytest.mark.parametrize("name, version", [("cupy-cuda12x", "14.2.0"), ("nvidia-cusparse-cu12", "12.3.1.170")])
def test_metadata_by_range_requests_reads_under_one_percent(registry, name, version):
    index = registry()
    file = _exact(index, name, version)
    assert file.size and file.size > 50_000_000
    before = index.http.bytes_received
    metadata = index.metadata(file)
    assert metadata.how in ("range", "pep658")
    assert index.http.bytes_received - before < 0.01 * file.size
    if name == "nvidia-cusparse-cu12":
        assert metadata.requires_dist == ("nvidia-nvjitlink-cu12",)  # unpinned: the binaries say >= 12.4
    else:
        assert any(r.startswith("cuda-toolkit[") for r in metadata.requires_dist)


def test_binary_facts_of_a_wheel_read_once_agree_with_the_table_then_come_from_the_cache(registry):
    from cudaresolve.env.inspect import provider_needs
    from cudaresolve.index.wheel_facts import from_record
    from cudaresolve.knowledge import wheel_facts

    index = registry()
    file = _exact(index, "nvidia-cusparse-cu12", "12.3.1.170")
    before = index.http.bytes_received
    read = index.binary_facts(file, deep=True)
    # the whole wheel, once, after the tail whose zip directory showed that its shared objects are
    # most of it (index/wheel_facts.py: RANGED_SHARE), which a range read would not save
    assert read.complete and file.size <= index.http.bytes_received - before <= file.size + (1 << 20)

    def nvjitlink_need(facts):
        (lib,) = [m for m in facts.members if m.soname == "libcusparse.so.12"]
        (need,) = [n for n in provider_needs(lib) if n.file == "libnvJitLink.so.12"]
        return need.min_version, need.symbols

    table = from_record(wheel_facts.find(file.name, str(file.version), file.filename))
    assert nvjitlink_need(read)[0] == CudaVersion(12, 4) and "__nvJitLinkComplete_12_4" in nvjitlink_need(read)[1]
    assert nvjitlink_need(read) == nvjitlink_need(table)
    again = registry(offline=True)  # a new session: nothing but the cache
    cached = again.binary_facts(file, deep=True)
    assert again.http.requests_made == 0 and nvjitlink_need(cached) == nvjitlink_need(read)
