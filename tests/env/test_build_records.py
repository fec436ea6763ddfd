"""Floors from the build's own record: tensorflow ships tensorflow/python/platform/build_info.py
naming the CUDA and cuDNN it was compiled against, and XLA refuses an older cuDNN at load time. The
file is read as hostile input (bounded, parsed, a literal taken; never imported), and an installed
cuDNN wheel of that CUDA major below the record is an error naming both, fixed by the consumer's own
range raised to the floor."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from test_env_distributions import make_dist_info

from cudaresolve.cli import main
from cudaresolve.env.build_records import RECORD_LIMIT, read_build_record

REAL = Path(__file__).parents[1] / "data" / "tensorflow-2.21.0-build_info.py"  # the tensorflow 2.21.0 wheel's own file
RECORD = "tensorflow/python/platform/build_info.py"
GPU = ("--driver", "570.86.15", "--gpu", "8.9")


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDARESOLVE_CACHE_DIR", str(tmp_path / "facts-cache"))
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)


def test_the_real_tensorflow_build_info_is_read_as_literals():
    assert read_build_record(str(REAL), "build_info") == {
        "cpu_compiler": "clang", "cuda_version": "12.5.1", "cudnn_version": "9"}


@pytest.mark.parametrize("text", [
    "build_info = __import__('os').system('touch {marker}')\n",  # code is not run, nor taken
    "build_info = collections.OrderedDict(open('{marker}', 'w'))\n",
    "import os\nos.system('touch {marker}')\n",  # no such variable assigned
    "build_info = [\n",  # not Python
    "build_info = {{'cuda_version': 12.5}}\n",  # no string values: an empty record
])
def test_a_hostile_record_is_never_run(tmp_path, text):
    marker = tmp_path / "ran"
    path = tmp_path / "build_info.py"
    path.write_text(text.format(marker=marker))
    assert read_build_record(str(path), "build_info") in (None, {})
    assert not marker.exists()


def test_a_record_too_large_or_absent_is_none(tmp_path):
    path = tmp_path / "build_info.py"
    path.write_text("build_info = {'cuda_version': '12.5.1'}\n" + "#" * RECORD_LIMIT)
    assert read_build_record(str(path), "build_info") is None
    assert read_build_record(str(tmp_path / "absent.py"), "build_info") is None
    path.write_text("build_info = {'cuda_version': '12.5.1', 'cudnn_version': '9.8.0'}\n")
    assert read_build_record(str(path), "build_info") == {"cuda_version": "12.5.1", "cudnn_version": "9.8.0"}
    fifo = tmp_path / "fifo.py"
    os.mkfifo(fifo)  # never opened for a blocking read: a FIFO at the record's path would hang the doctor
    assert read_build_record(str(fifo), "build_info") is None


def site(tmp_path: Path, cudnn: str, record: str, requires: tuple[str, ...] = ()) -> Path:
    """site-packages with tensorflow 2.21.0 (its build record `record`, no extra asked for) and cuDNN `cudnn`."""
    root = tmp_path / "site"
    make_dist_info(root, "tensorflow", "2.21.0", files=(RECORD,), requires=requires)
    (root / RECORD).parent.mkdir(parents=True)
    (root / RECORD).write_text(record)
    make_dist_info(root, "nvidia-cudnn-cu12", cudnn)
    return root


def floors(capsys, root: Path) -> tuple[int, list[dict]]:
    capsys.readouterr()
    code = main(["doctor", "--site-packages", str(root), "--json", *GPU])
    return code, [f for f in json.loads(capsys.readouterr().out)["findings"] if f["check"] == "build-floor"]


BUILT_WITH_9_8 = REAL.read_text().replace("('cudnn_version', '9')", "('cudnn_version', '9.8')")


def test_cudnn_below_the_recorded_build_is_an_error_naming_both(tmp_path, capsys):
    assert BUILT_WITH_9_8 != REAL.read_text()
    code, [floor] = floors(capsys, site(tmp_path, "9.5.1.17", BUILT_WITH_9_8))
    assert code == 2
    assert (floor["severity"], floor["subject"]) == ("error", "tensorflow 2.21.0")
    assert floor["message"] == (
        f"was built against cuDNN 9.8 ({RECORD}: cudnn_version '9.8'), but nvidia-cudnn-cu12 9.5.1.17 is installed; "
        "it refuses an older cuDNN than it was built against when it loads")
    assert floor["fix"] == (f'pip install "nvidia-cudnn-cu12>=9.8" (the release tensorflow 2.21.0 was built against, '
                            f"as its {RECORD} records)")


def test_the_fix_keeps_the_consumers_own_range(tmp_path, capsys):
    """A range of the consumer's on cuDNN that applies (here without an extra) is the range the fix
    raises; a range the installed cuDNN misses too is one finding, the metadata's."""
    requires = ("nvidia-cudnn-cu12<10.0,>=9.3.0.75",)
    code, [floor] = floors(capsys, site(tmp_path, "9.5.1.17", BUILT_WITH_9_8, requires))
    assert floor["fix"].startswith('pip install "nvidia-cudnn-cu12<10.0,>=9.3.0.75,>=9.8" (the release tensorflow')
    code, [floor] = floors(capsys, site(tmp_path / "2", "9.1.0.70", BUILT_WITH_9_8, requires))
    assert floor["message"].startswith("requires cuDNN >= 9.3.0.75: ")


def test_the_real_record_sets_cudnn_9_only(tmp_path, capsys):
    """tensorflow 2.21.0 records cuDNN '9': any cuDNN 9 meets it, the CUDA 12 wheel's 8.9 does not."""
    assert floors(capsys, site(tmp_path, "9.1.0.70", REAL.read_text())) == (0, [])
    code, [floor] = floors(capsys, site(tmp_path / "2", "8.9.7.29", REAL.read_text()))
    assert code == 2 and floor["message"].startswith(f"was built against cuDNN 9 ({RECORD}: cudnn_version '9')")


def test_a_record_of_no_cuda_or_a_non_release_sets_no_floor(tmp_path, capsys):
    cpu = "build_info = {'cuda_version': '', 'cudnn_version': '9.8', 'is_cuda_build': 'False'}\n"
    assert floors(capsys, site(tmp_path, "9.5.1.17", cpu)) == (0, [])
    odd = BUILT_WITH_9_8.replace("'9.8'", "'9.8; rm -rf'")
    assert floors(capsys, site(tmp_path / "2", "9.5.1.17", odd)) == (0, [])


def test_the_printed_fix_clears_the_recorded_floor_in_a_real_venv(tmp_path):
    """tensorflow 2.21.0 (its build record saying cuDNN 9.8) installed with pip beside cuDNN 9.5:
    the doctor names the floor, and the printed command, pasted, clears it with nothing left at error."""
    import venv

    from index_server import make_wheel
    from test_build_floors import assert_the_pasted_floor_fix_clears, pip

    found = tmp_path / "wheels"
    found.mkdir()
    for name, version, files in (("tensorflow", "2.21.0", {RECORD: BUILT_WITH_9_8.encode()}),
                                 ("nvidia-cudnn-cu12", "9.5.1.17", None), ("nvidia-cudnn-cu12", "9.8.0.87", None)):
        filename, data = make_wheel(name, version, files=files)
        (found / filename).write_bytes(data)
    root = tmp_path / "env"
    venv.create(root)
    python = root / "bin" / "python"
    pip(python, found, ["install", "tensorflow==2.21.0", "nvidia-cudnn-cu12==9.5.1.17"])
    assert_the_pasted_floor_fix_clears(python, found, tmp_path / "c", 'pip install "nvidia-cudnn-cu12>=9.8"')
