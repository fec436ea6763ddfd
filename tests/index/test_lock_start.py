"""A warm lock starts on what it uses: cached metadata is read as the fields parsed once (no email
parser), and the modules only a cold lock or another command needs are not imported; a lock answered
by its result cache (commands/lock_cache.py) imports neither the resolver nor the checks."""

from __future__ import annotations

import shutil
import subprocess
import sys

from conftest import hermetic_environ
from test_index_access import demo_wheel, http

from cudaresolve.index.cache import IndexCache
from cudaresolve.index.metadata import core_metadata, fields_key
from cudaresolve.index.pages import index_files

# What a warm lock on the generated universe imported before these were left to the code that
# needs them: the email package (METADATA's parser, an HTTP date) and urllib.request (a file: URL).
NOT_WARM = ("email.parser", "email.feedparser", "email.utils", "packaging.metadata", "urllib.request", "http.client")
# cudaresolve's modules a warm `lock torch cupy-cuda12x numba` that resolves imports (150 with the import
# models' cache, which the scan of the target uses, the result cache's key and entry: lock_cache,
# result_cache, output/doctor, data, and the import model of a wheel the plan reads from itself:
# index/wheel_imports): the checks (the lock judges the planned environment), the resolver, the index,
# the lock files
WARM_LOCK_BUDGET = 150
# What a lock answered by its result cache must not import, and how many of cudaresolve's modules it
# may (40: the parser, the host's facts and probe, the key's identities, the lock files' writing).
NOT_ON_A_HIT = ("cudaresolve.checks", "cudaresolve.resolve", "cudaresolve.index", "cudaresolve.commands.locking",
                "cudaresolve.output.lock_report", "resolvelib", "requests", "packaging.requirements")
HIT_BUDGET = 45


def test_cached_metadata_is_read_from_its_fields_and_a_damaged_entry_from_the_metadata(server, tmp_path):
    filename, data = demo_wheel()
    server.add(filename, data, metadata=False)
    cache = IndexCache(str(tmp_path / "index"))
    (file,) = index_files(http(), cache, server.url + "/simple", "demo")
    first = core_metadata(http(), cache, file)
    key = fields_key(file.sha256)
    assert cache.blob("metadata", key, 1 << 20) is not None
    for planted in (b"not json", b'{"name": "demo"}', b'{"name": 1, "version": "1.0", "metadata_version": "2.1", '
                    b'"requires_python": null, "requires_dist": [], "provides_extra": []}'):
        cache.store_blob("metadata", key, planted)
        again = core_metadata(http(), cache, file)
        assert again == first.__class__(**{**first.__dict__, "how": "cache"})
        assert cache.blob("metadata", key, 1 << 20) != planted  # parsed from the metadata again, and stored
    cache.store_blob("metadata", key, cache.blob("metadata", key, 1 << 20).replace(b'"1.0"', b'"2.0"'))
    assert core_metadata(http(), cache, file).version == "1.0"  # fields of another version: not used


def test_a_warm_lock_imports_what_it_uses(cuda_index, tmp_path):
    target = tmp_path / "target"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(target)], check=True)
    argv = [sys.executable, "-X", "importtime", "-m", "cudaresolve", "lock", "-q", "--json", "-o", str(tmp_path / "pylock.toml"),
            "--python", str(target / "bin" / "python"), "--index-url", cuda_index.index_url,
            "--torch-index-base", cuda_index.torch_index_base, "--driver", "550.144.03", "--gpu", "8.9",
            "torch", "cupy-cuda12x", "numba"]
    environ = hermetic_environ({"CUDARESOLVE_CACHE_DIR": str(tmp_path / "cache")})
    imported = []
    for run in range(3):  # the first fills the caches; the second resolves warm and keeps its result; the third is a hit
        if run == 1:
            shutil.rmtree(tmp_path / "cache" / "lock-results", ignore_errors=True)
        done = subprocess.run(argv, capture_output=True, text=True, env=environ, cwd=tmp_path, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        imported.append([line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")])
    warm, hit = imported[1:]
    assert not [name for name in NOT_WARM if name in warm]
    ours = [name for name in warm if name == "cudaresolve" or name.startswith("cudaresolve.")]
    assert len(ours) <= WARM_LOCK_BUDGET, ours
    assert "cudaresolve.resolve.resolver" in warm and "cudaresolve.checks" in warm  # the warm run resolved
    assert not [name for name in hit if name.startswith(NOT_ON_A_HIT)]
    ours = [name for name in hit if name == "cudaresolve" or name.startswith("cudaresolve.")]
    assert len(ours) <= HIT_BUDGET, ours
