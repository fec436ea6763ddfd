"""Why the lock takes an older release of a name asked for than pip would: the newer one needs a
release nothing here fits. On the real survey, `lock sglang --gpu 6.1` took sglang 0.5.2 while pip takes
0.5.23, whose `torch==2.14.1` has no build with code for the GPU, and said only "the newest release
that fits". On the fake CUDA index, llmish 2.0 pins torch==2.14.1 and llmish 1.0 needs no torch; a
driver 470 (CUDA 11.4) runs no build of torch 2.14.1. A constraint caps llmish below 3.0, as pip's
configuration caps torchvision here: the release pip takes is 2.0, and that is the one explained."""

from __future__ import annotations

import pytest
from index_server import make_wheel

from cudaresolve.cli import main
from cudaresolve.lockfile.pylock import read_pylock
from cudaresolve.resolve.reasons import NeedsSetAside

pytestmark = pytest.mark.usefixtures("hermetic")


@pytest.fixture
def llmish(server) -> str:
    for version, requires in (("3.0", ()), ("2.0", ("torch==2.14.1",)), ("1.0", ())):
        filename, data = make_wheel("llmish", version, requires=requires)
        server.add(filename, data)
    return server.url + "/simple"


def test_the_lock_says_why_it_passed_over_the_release_pip_takes(cuda_index, llmish, empty_python, tmp_path, capsys):
    out = tmp_path / "pylock.toml"
    (tmp_path / "c.txt").write_text("llmish<3\n")
    code = main(["lock", "-q", "llmish", "-c", str(tmp_path / "c.txt"), "--driver", "470.256.02", "--gpu", "8.6", "--python", empty_python,
                 "--index-url", cuda_index.index_url, "--extra-index-url", llmish,
                 "--torch-index-base", cuda_index.torch_index_base, "-o", str(out)])
    said = capsys.readouterr()
    assert code == 0, said.err
    lock = read_pylock(str(out))  # read back: the nested rejection survives the file
    assert {p.name: str(p.version) for p in lock.packages}["llmish"] == "1.0"
    decision = next(d for d in lock.decisions if d.name == "llmish")
    passed = [r for r in decision.rejected if isinstance(r.evidence, NeedsSetAside)]
    assert [(str(r.candidate.version), r.evidence.requirement) for r in passed] == [("2.0", "torch==2.14.1")]
    assert passed[0].evidence.set_aside.candidate.name == "torch"
    line = next(line for line in said.out.splitlines() if "llmish==1.0" in line)
    assert "not 2.0: needs torch==2.14.1, and nothing here fits it: torch 2.14.1" in line, line
    assert "driver 470.256.02" in line, line
