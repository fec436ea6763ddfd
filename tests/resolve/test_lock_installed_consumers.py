"""Issue 24: installed consumers bind the plan. A distribution that stays keeps its needs, those of
its extras that count as chosen included (pip records no extra: one whose requirements are all
installed counts), so `install torch-like` beside an installed JAX-like CUDA plugin never moves their
shared cuDNN below what the plugin's extra needs: the lock takes an older torch-like that keeps it,
or refuses naming the plugin. Real pip builds the target from a local index; `cudaresolve` runs
in-process against it."""

from __future__ import annotations

import subprocess
import sys
import venv
from pathlib import Path

import pytest
from conftest import hermetic_environ
from index_server import make_wheel

from cudaresolve.cli import main
from cudaresolve.lockfile.pylock import read_pylock
from cudaresolve.resolve.reasons import BreaksInstalled, RequiredBy

pytestmark = pytest.mark.usefixtures("hermetic")

RTX_4090 = ("--driver", "550.144.03", "--gpu", "8.9")

# torchish 2.0 pins cuDNN 9.5; 1.0 allows 9.8 and later. jaxish[cuda12] brings its plugin with
# [with-cuda], whose only requirement is cuDNN >= 9.8.
WHEELS = (
    ("torchish", "2.0", ("nvidia-cudnn-cu12==9.5.*",), ()),
    ("torchish", "1.0", ("nvidia-cudnn-cu12>=9.8",), ()),
    ("jaxish", "0.1", ('jaxish-cuda12-plugin[with-cuda]==0.1; extra == "cuda12"',), ("cuda12",)),
    ("jaxish-cuda12-plugin", "0.1", ('nvidia-cudnn-cu12>=9.8; extra == "with-cuda"',), ("with-cuda",)),
    ("nvidia-cudnn-cu12", "9.5.1.17", (), ()),
    ("nvidia-cudnn-cu12", "9.8.0.87", (), ()),
)


@pytest.fixture
def index(server) -> str:
    for name, version, requires, extras in WHEELS:
        filename, data = make_wheel(name, version, requires=requires, extras=extras)
        server.add(filename, data)
    return server.url + "/simple"


def target(root: Path, index: str, *requirements: str) -> str:
    """A venv at `root` (made here, without pip, unless it is there) holding what real pip installs of
    `requirements` from `index`; its python."""
    if not root.exists():
        venv.create(root)
    python = str(root / "bin" / "python")
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-cache-dir", "--index-url", index,
         *requirements],
        check=True, capture_output=True, text=True, env=hermetic_environ(),
    )
    return python


def installed(python: str) -> dict[str, str]:
    import json

    listed = subprocess.run([sys.executable, "-m", "pip", "--python", python, "list", "--format", "json"],
                            check=True, capture_output=True, text=True, env=hermetic_environ()).stdout
    return {item["name"]: item["version"] for item in json.loads(listed)}


def run(capsys, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


CONSUMER = "jaxish-cuda12-plugin 0.1 [with-cuda] (installed, stays)"


def test_install_takes_the_torch_like_release_that_keeps_the_installed_plugins_cudnn(index, tmp_path, capsys, venv_with_pip):
    """The acceptance case, installed for real: torchish 2.0 would downgrade cuDNN to 9.5, below the
    installed plugin's [with-cuda] need; the plan keeps cuDNN 9.8 naming the plugin, adds torchish
    1.0 and says why not 2.0; pip installs exactly that."""
    python = target(venv_with_pip(tmp_path / "env"), index, "jaxish[cuda12]")
    assert installed(python)["nvidia-cudnn-cu12"] == "9.8.0.87"
    code, out, err = run(capsys, "install", "torchish", *RTX_4090, "--python", python, "--index-url", index)
    assert code == 0, out + err
    assert f"keep      nvidia-cudnn-cu12 9.8.0.87: installed, kept; needed by {CONSUMER}" in out
    assert "add       torchish          1.0: " in out
    assert (f"not 2.0: needs nvidia-cudnn-cu12==9.5.*, and {CONSUMER} needs nvidia-cudnn-cu12>=9.8: no release fits both"
            in out)
    assert "downgrade" not in out
    after = installed(python)
    assert after["torchish"] == "1.0" and after["nvidia-cudnn-cu12"] == "9.8.0.87", after


def test_the_lock_records_the_installed_consumer_and_why_not_the_newer_release(index, tmp_path, capsys):
    python = target(tmp_path / "env", index, "jaxish[cuda12]")
    code, out, err = run(capsys, "lock", "-q", "torchish", *RTX_4090, "--python", python, "--index-url", index,
                         "-o", str(tmp_path / "pylock.toml"), "--explain")
    assert code == 0, err
    lock = read_pylock(str(tmp_path / "pylock.toml"))
    packages = {p.name: p for p in lock.packages}
    assert str(packages["torchish"].version) == "1.0" and str(packages["nvidia-cudnn-cu12"].version) == "9.8.0.87"
    held = [o for o in packages["nvidia-cudnn-cu12"].reason.origins if isinstance(o, RequiredBy) and o.installed]
    assert [(o.parent.name, str(o.parent.version), o.extra) for o in held] == [("jaxish-cuda12-plugin", "0.1", "with-cuda")]
    decision = next(d for d in lock.decisions if d.name == "torchish")
    assert [(str(r.candidate.version), r.evidence) for r in decision.rejected] == [
        ("2.0", BreaksInstalled("nvidia-cudnn-cu12==9.5.*", held[0].parent, "nvidia-cudnn-cu12>=9.8", "with-cuda"))
    ]
    assert "torchish 2.0: needs nvidia-cudnn-cu12==9.5.*" in out


def test_a_pin_that_would_break_the_installed_plugin_is_refused_naming_it(index, tmp_path, capsys):
    python = target(tmp_path / "env", index, "jaxish[cuda12]")
    code, out, err = run(capsys, "install", "torchish==2.0", *RTX_4090, "--python", python, "--index-url", index, "--dry-run")
    assert code == 2, out + err
    assert (f"no release of nvidia-cudnn-cu12 fits both: {CONSUMER} needs nvidia-cudnn-cu12>=9.8, "
            "torchish 2.0 needs nvidia-cudnn-cu12==9.5.*") in err.replace("\n  ", " ")
    assert installed(python)["nvidia-cudnn-cu12"] == "9.8.0.87"


def test_an_extra_whose_requirements_are_not_installed_does_not_bind(index, tmp_path, capsys):
    """The plugin installed without [with-cuda] beside cuDNN 9.5: the extra's need is not the
    environment's (pip keeps no record, and its requirement is not met), so the newest torchish fits."""
    python = target(tmp_path / "env", index, "jaxish-cuda12-plugin==0.1", "nvidia-cudnn-cu12==9.5.1.17")
    code, out, err = run(capsys, "install", "torchish", *RTX_4090, "--python", python, "--index-url", index, "--dry-run")
    assert code == 0, out + err
    assert "add       torchish          2.0: " in out
    assert "installed, stays" not in out
