"""Nothing of the target interpreter runs unless the user asked for it: its .pth files and its
sitecustomize stay unrun through `lock`, `inspect`, `install --dry-run` and `doctor` on a cold cache,
pip's default index included (docs/security.md, "What runs").

The target is a venv whose .pth file and sitecustomize.py each write a marker file when they run.
For the commands its pip is a small stand-in naming the fake index as its default (so the default
index is asked for and the lock is hermetic); one case runs the real pip the same way.
"""

from __future__ import annotations

import os
import subprocess
import venv
from pathlib import Path

import pip
import pytest

from cudaresolve.cli import main
from cudaresolve.env.interpreter import target_for_python
from cudaresolve.index.config import parse_default_index, pip_install_help

RTX_4090 = ("--driver", "550.144.03", "--gpu", "8.9")
PIP_HELP = """Install Options:
  -i, --index-url <url>       Base URL of the Python Package Index (default
                              {url}). This should point to a repository.
  --extra-index-url <url>     Extra URLs of package indexes to use.
"""


def marked_venv(root: Path, markers: Path) -> tuple[str, Path]:
    """A venv without pip whose .pth file and sitecustomize.py write into `markers`; (python, site-packages)."""
    venv.create(root, with_pip=False)
    python = str(root / "bin" / "python")
    site = Path(target_for_python(python).site_packages[0])
    (site / "marker.pth").write_text(f"import os; open(os.path.join({str(markers)!r}, 'pth'), 'w').close()\n")
    (site / "sitecustomize.py").write_text(f"import os\nopen(os.path.join({str(markers)!r}, 'sitecustomize'), 'w').close()\n")
    return python, site


def ran(markers: Path) -> list[str]:
    return sorted(os.listdir(markers))


@pytest.fixture
def target(tmp_path, hermetic, cuda_index) -> tuple[str, Path]:
    """The marked venv with a stand-in pip whose help states the fake index as pip's default."""
    markers = tmp_path / "markers"
    markers.mkdir()
    python, site = marked_venv(tmp_path / "target", markers)
    (site / "pip").mkdir()
    (site / "pip" / "__init__.py").write_text("")
    (site / "pip" / "__main__.py").write_text(f"import sys\nsys.stdout.write({PIP_HELP.format(url=cuda_index.index_url)!r})\n")
    (site / "pip-99.0.dist-info").mkdir()
    subprocess.run([python, "-c", "pass"], check=True)  # the markers work: a plain start of the target runs both
    assert ran(markers) == ["pth", "sitecustomize"]
    for name in ran(markers):
        (markers / name).unlink()
    return python, markers


@pytest.mark.parametrize("command", [
    ("lock", "numba>=0.59,<0.60", "-o", "-", *RTX_4090),
    ("inspect", "numba==0.59.1"),
    ("install", "--dry-run", "numba>=0.59,<0.60", *RTX_4090),
    ("doctor", *RTX_4090),
], ids=["lock", "inspect", "install-dry-run", "doctor"])
def test_no_pth_file_or_sitecustomize_runs(target, cuda_index, hermetic, command, capfd):
    python, markers = target
    code = main([command[0], "--python", python, "--torch-index-base", cuda_index.torch_index_base, *command[1:]]
                if command[0] != "doctor" else [command[0], "--python", python, *command[1:]])
    captured = capfd.readouterr()
    assert code in (0, 2), captured.out + captured.err  # done (2: problems found), not refused
    assert ran(markers) == []
    if command[0] != "doctor":  # the default index was asked for, and it is the one pip states
        assert os.listdir(hermetic / "cudaresolve-cache" / "pip-default-index")
        assert "numba" in captured.out + captured.err


def test_the_real_pips_default_index_is_read_without_site(tmp_path, hermetic):
    markers = tmp_path / "markers"
    markers.mkdir()
    python, site = marked_venv(tmp_path / "target", markers)
    (site / "pip").symlink_to(os.path.dirname(pip.__file__))  # this pip, as the target's own
    url = parse_default_index(pip_install_help(python, [str(site)], dict(os.environ)), python)
    assert url.startswith("https://") and url.endswith("/simple")
    assert ran(markers) == []
