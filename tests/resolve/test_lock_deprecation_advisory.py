"""An advisory of a deprecation (data/advisories.toml `sets_aside = false`) does not set the release
aside: the lock takes it and says the advisory as a warning with its fix, as the doctor does. On the
real survey, numba-builtin-deprecated (numba >= 0.61 without numba-cuda: its built-in CUDA target is
deprecated) set aside the numba 0.65.1 that sglang 0.5.23 pins, so the lock took sglang 0.5.2, and
sent openai-whisper back through numba releases to an sdist that does not build. An advisory of a
breakage still sets the release aside."""

from __future__ import annotations

import pytest
from index_server import make_wheel

from cudaresolve.cli import main
from cudaresolve.knowledge import advisories
from cudaresolve.knowledge.advisories import Advisory
from cudaresolve.lockfile.pylock import read_pylock

pytestmark = pytest.mark.usefixtures("hermetic")


@pytest.fixture
def numbaish(server) -> str:
    for version in ("2.0", "1.0"):
        server.add(*make_wheel("numbaish", version))
    return server.url + "/simple"


@pytest.mark.parametrize("sets_aside, locked", [(False, "2.0"), (True, "1.0")])
def test_an_advisory_of_a_deprecation_is_a_warning_not_a_refusal(numbaish, empty_python, tmp_path, capsys, monkeypatch,
                                                                 sets_aside, locked):
    row = Advisory(id="numbaish-builtin-deprecated", affects=("numbaish>=2",), symptom="its built-in target is deprecated",
                   fix="install numbaish-cuda", refs=("numbaish/numbaish#1",), unless=("numbaish-cuda",), sets_aside=sets_aside)
    monkeypatch.setattr(advisories, "load", lambda: (row,))
    out = tmp_path / "pylock.toml"
    code = main(["lock", "numbaish", "--driver", "580.65.06", "--gpu", "8.6", "--python", empty_python,
                 "--index-url", numbaish, "-o", str(out)])
    said = capsys.readouterr()
    assert code == 0, said.err
    assert {p.name: str(p.version) for p in read_pylock(str(out)).packages} == {"numbaish": locked}
    warned = "warning: numbaish 2.0: known problem numbaish-builtin-deprecated" in said.err
    assert warned == (not sets_aside), said.err
    assert ("fix: install numbaish-cuda" in said.err) == (not sets_aside), said.err


def test_the_table_marks_numbas_deprecation_and_no_breakage():
    marked = sorted(a.id for a in advisories.load() if not a.sets_aside)
    assert marked == ["numba-builtin-deprecated"]
