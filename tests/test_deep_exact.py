"""`--deep` is exact: a missing symbol is reported only against a provider whose whole dynamic symbol
table is held (read from its file or wheel, or a table row marked complete). A knowledge-table row
lists only what crosses components (names with a CUDA ABI suffix and names some row binds), so a
name it lacks is blamed only when the name carries that suffix or the consumer is such a row too.
"""

from __future__ import annotations

import json

import pytest
from conftest import registry_python
from test_loader import ENV, so, world
from wheel_cache import cache_dir

from cudaresolve.binary.facts import Symbol
from cudaresolve.binary.loader import UNDEFINED_SYMBOL, resolve
from cudaresolve.cli import main
from cudaresolve.knowledge.wheel_facts import Bind, Member, Wheel, from_record

NVRTC = "libnvrtc.so.12"


def _nvrtc_row(complete: bool):
    """NVRTC 12 as a table row defining one name: partial as generated, or marked complete."""
    member = Member(path="nvidia/cuda_nvrtc/lib/libnvrtc.so.12", soname=NVRTC, version_definitions=(NVRTC,),
                    defines=(f"nvrtcCreateProgram@@{NVRTC}",), complete=complete)
    row = Wheel(name="nvidia-cuda-nvrtc-cu12", version="12.9.86", filename="nvidia_cuda_nvrtc_cu12-12.9.86-py3-none-any.whl",
                sha256="0" * 64, why=("test",), machine="x86_64", member=(member,))
    [facts] = from_record(row).members
    return facts


def _consumer(complete: bool, *names: str):
    """An extension binding `names` from NVRTC: read from its file (complete) or a table row."""
    undefined = [Symbol(name, NVRTC, NVRTC) for name in names]
    if complete:
        return so("/site/ext.so", needed=[NVRTC], runpath=["/site/nvrtc"], undefined=undefined)
    row = Wheel(name="cuda-cccl", version="1.2.1", filename="cuda_cccl-1.2.1-py3-none-any.whl", sha256="1" * 64,
                why=("test",), machine="x86_64",
                member=(Member(path="ext.so", needed=(NVRTC,), runpath=("/site/nvrtc",),
                               binds=(Bind(NVRTC, (NVRTC,), tuple(f"{n}@{NVRTC}" for n in names)),)),))
    [facts] = from_record(row).members
    return facts


def _missing(consumer, provider) -> list[str]:
    from dataclasses import replace

    files = world(replace(consumer, path="/site/ext.so"), replace(provider, path=f"/site/nvrtc/{NVRTC}"))
    result = resolve(["/site/ext.so"], facts_of=files, env=ENV)
    return [p.symbol or "" for p in result.problems if p.kind == UNDEFINED_SYMBOL]


def test_a_table_row_is_partial_unless_marked_complete():
    assert not _nvrtc_row(complete=False).symbols_complete
    assert _nvrtc_row(complete=True).symbols_complete
    assert so("/site/ext.so").symbols_complete  # read from a file


def test_a_name_a_partial_row_lacks_is_not_reported_against_a_file_read_in_full():
    """cuda-cccl's libcccl.c.parallel.so binds nvrtcGetLTOIR, which NVRTC 12.9 defines and its row does not list."""
    consumer = _consumer(True, "nvrtcCreateProgram", "nvrtcGetLTOIR")
    assert _missing(consumer, _nvrtc_row(complete=False)) == []
    assert _missing(consumer, _nvrtc_row(complete=True)) == ["nvrtcGetLTOIR"]


def test_a_partial_row_still_answers_for_what_it_lists():
    """A CUDA ABI suffix (`_12_4`) is listed in every row that defines it; a row's consumer binds only
    names the rows list: both are blamed against a partial row, as the cuSPARSE/nvJitLink skew needs."""
    assert _missing(_consumer(True, "nvrtcFoo_12_9"), _nvrtc_row(complete=False)) == ["nvrtcFoo_12_9"]
    assert _missing(_consumer(False, "nvrtcGetLTOIR"), _nvrtc_row(complete=False)) == ["nvrtcGetLTOIR"]


SETS = [
    ("cuda-cccl[cu12]==1.2.1",),  # cuda.compute: NVRTC and nvJitLink bound by cuda-cccl's own library
    ("nvidia-cusparse-cu12==12.5.8.93", "nvidia-nvjitlink-cu12"),
    ("nvidia-cufft-cu12", "nvidia-nvjitlink-cu12"),
]


@pytest.mark.registry
@pytest.mark.parametrize("requirements", SETS, ids=lambda s: s[0])
def test_registry_deep_lock_of_working_sets_has_no_symbol_finding(requirements, hermetic, tmp_path, capsys, monkeypatch):
    """Working sets locked with --deep against the registry pip uses by default: each is locked, and
    no finding is a symbol one. Wheels' facts are cached by sha256 under the test cache."""
    monkeypatch.setenv("CUDARESOLVE_CACHE_DIR", str(cache_dir() / "lock-registry-cache"))
    python = registry_python(tmp_path, "cuda-pathfinder")  # its pip names the default index
    capsys.readouterr()
    code = main(["lock", *requirements, "--deep", "--json", "-q", "--python", python,
                 "-o", str(tmp_path / "pylock.toml"), "--driver", "550.144.03", "--gpu", "8.9"])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert "symbol-skew" not in out + err and "undefined symbol" not in out + err
    assert json.loads(out)["packages"]
