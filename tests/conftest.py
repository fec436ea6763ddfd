"""Shared fixtures: real wheels from the configured package index (cached), small ELF files built with
gcc, local indexes, and a hermetic environment for the commands and the pip they run."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Callable, Optional, Sequence

import pytest

TESTS = Path(__file__).parent
FIXTURES = TESTS / "fixtures"


def cache_dir() -> Path:
    """Where downloaded wheels and files extracted from them live between runs."""
    root = os.environ.get("CUDARESOLVE_TEST_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "cudaresolve-tests"
    )
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def fetch_wheel(requirement: str) -> Path:
    """Download one exact wheel (`name==version`) with pip, honouring pip's own index configuration.

    Cached by requirement; the download goes through pip so no index address lives in this code.
    Skips the test with the reason when the index cannot be reached.
    """
    name, _, version = requirement.partition("==")
    target = cache_dir() / "wheels"
    target.mkdir(exist_ok=True)
    stem = name.replace("-", "_").lower() + "-" + version + "-"
    for existing in target.glob("*.whl"):
        if existing.name.lower().startswith(stem):
            return existing
    result = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", str(target), requirement],
        capture_output=True,
        text=True,
    )
    for existing in target.glob("*.whl"):
        if existing.name.lower().startswith(stem):
            return existing
    pytest.skip(f"cannot download {requirement}: {result.stderr.strip().splitlines()[-1:]}")


def unpack_wheel(wheel: Path, members: Optional[Sequence[str]] = None) -> Path:
    """Extract a wheel (or only `members`) into the cache, once, as pip would lay it out in site-packages."""
    dest = cache_dir() / "unpacked" / wheel.stem
    marker = dest / ".complete"
    if not marker.exists():
        if dest.exists():
            shutil.rmtree(dest)
        with zipfile.ZipFile(wheel) as zf:
            for info in zf.infolist():
                if members is None or info.filename in members:
                    zf.extract(info, dest)
                    mode = info.external_attr >> 16
                    if mode:
                        os.chmod(dest / info.filename, mode & 0o777)
        marker.touch()
    return dest


@pytest.fixture(scope="session")
def wheel():
    """`wheel("nvidia-nvjitlink-cu12==12.1.105")` -> path of the cached .whl."""
    return fetch_wheel


@pytest.fixture(scope="session")
def unpacked():
    """`unpacked(wheel_path)` -> directory holding the wheel's files as site-packages would."""
    return unpack_wheel


class ElfBuilder:
    """Builds small shared objects and executables with gcc for the binary tests."""

    def __init__(self, root: Path):
        self.root = root

    def build(
        self,
        name: str,
        source: str,
        *,
        shared: bool = True,
        soname: Optional[str] = None,
        version_script: Optional[str] = None,
        link: Sequence[str] = (),
        rpath: Optional[str] = None,
        runpath: Optional[str] = None,
        directory: str = ".",
        extra: Sequence[str] = (),
    ) -> Path:
        """Compile `source` (C) into `directory/name`.

        `link` are paths of libraries to link against (their DT_SONAME becomes DT_NEEDED);
        `rpath` sets DT_RPATH (--disable-new-dtags), `runpath` DT_RUNPATH (--enable-new-dtags).
        """
        out_dir = self.root / directory
        out_dir.mkdir(parents=True, exist_ok=True)
        src = self.root / f"{name}.c"
        src.write_text(source)
        out = out_dir / name
        cmd = ["gcc", "-o", str(out), str(src)]
        if shared:
            cmd += ["-shared", "-fPIC"]
        if soname:
            cmd.append(f"-Wl,-soname,{soname}")
        if version_script is not None:
            script = self.root / f"{name}.map"
            script.write_text(version_script)
            cmd.append(f"-Wl,--version-script={script}")
        for lib in link:
            cmd.append(str(lib))
        if rpath is not None:
            cmd += ["-Wl,--disable-new-dtags", f"-Wl,-rpath,{rpath}"]
        if runpath is not None:
            cmd += ["-Wl,--enable-new-dtags", f"-Wl,-rpath,{runpath}"]
        cmd += list(extra)
        subprocess.run(cmd, check=True, capture_output=True, text=True)
        return out


@pytest.fixture
def elf_builder(tmp_path):
    """An ElfBuilder writing into the test's tmp_path; skips where gcc is missing (CI has it)."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    return ElfBuilder(tmp_path)


def cached_venv(folder: str, recipe: Sequence[str], check: Sequence[str], build: Callable[[Path], None]) -> Path:
    """A venv under the test cache's `folder`, keyed by `recipe`, made once by `build(venv)`.

    Rebuilt when its marker is missing or `python CHECK...` no longer succeeds. A file lock keeps
    concurrent test sessions from building the same venv twice.
    """
    import fcntl
    import hashlib

    key = hashlib.sha256("\n".join(recipe).encode()).hexdigest()[:16]
    root = cache_dir() / folder
    root.mkdir(exist_ok=True)
    venv = root / key
    marker = venv / ".complete"
    with open(root / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists() and subprocess.run([str(venv / "bin" / "python"), *check], capture_output=True).returncode == 0:
            return venv
        if venv.exists():
            shutil.rmtree(venv)
        build(venv)
        marker.write_text("\n".join(recipe) + "\n")
    return venv


def build_venv(requirements: Sequence[str]) -> Path:
    """A venv with exactly these wheels installed by pip (`--no-deps`), built once and kept in the
    cache, keyed by the wheel file names."""
    wheels = sorted(fetch_wheel(requirement) for requirement in requirements)

    def build(venv: Path) -> None:
        for command in (
            [sys.executable, "-m", "venv", str(venv)],
            [str(venv / "bin" / "python"), "-m", "pip", "install", "--no-deps", "--no-index", "--disable-pip-version-check"]
            + [str(w) for w in wheels],
        ):
            result = subprocess.run(command, capture_output=True, text=True)
            if result.returncode != 0:
                pytest.fail(f"{' '.join(command)} failed:\n{result.stderr}")

    return cached_venv("venvs", [w.name for w in wheels], ["-c", "pass"], build)


# What steers pip, uv, cudaresolve's host facts and cache, or the loader from this machine's environment.
STEERING_PREFIXES = ("PIP_", "UV_", "CUDARESOLVE_", "CONDA_OVERRIDE_", "CUDA_")
STEERING = ("LD_LIBRARY_PATH", "LD_PRELOAD")


def _steers(name: str) -> bool:
    return name.startswith(STEERING_PREFIXES) or name in STEERING


def hermetic_environ(extra: Optional[dict] = None) -> dict[str, str]:
    """os.environ for a child process (pip, uv, cudaresolve) that nothing of this machine steers: no
    PIP_*, UV_*, CUDARESOLVE_*, CONDA_OVERRIDE_* or CUDA_* variable, no LD_LIBRARY_PATH or LD_PRELOAD,
    pip reading no configuration file and not asking for its newer version; then `extra`."""
    env = {name: value for name, value in os.environ.items() if not _steers(name)}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1")
    env.update(extra or {})
    return env


@pytest.fixture
def hermetic(monkeypatch, tmp_path) -> Path:
    """This process as hermetic_environ() describes it (cudaresolve in-process, and the pip it runs,
    inherit it), with a fresh cudaresolve cache in tmp_path/cudaresolve-cache and tmp_path as the
    working directory (so no pyproject.toml around the checkout adds indexes). Returns tmp_path."""
    for name in [name for name in os.environ if _steers(name)]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    monkeypatch.setenv("CUDARESOLVE_CACHE_DIR", str(tmp_path / "cudaresolve-cache"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def server():
    """A local index (tests/index_server.py) for one test: pages, wheels, ranges and failures it is told."""
    from index_server import IndexServer

    made = IndexServer()
    made.start()
    yield made
    made.stop()


@pytest.fixture(scope="session")
def cuda_venv():
    """`cuda_venv(["nvidia-nvjitlink-cu12==12.1.105", ...])` -> root of a cached venv holding those wheels."""
    return build_venv


@pytest.fixture(scope="session")
def cuda_index():
    """The fake CUDA package universe (tests/fake_cuda_index.py) served on 127.0.0.1 for the session:
    `.index_url` is the regular index, `.torch_index_base + "/whl/cu128"` a PyTorch-style variant index."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    from fake_cuda_index import build_universe, serve

    served = serve(build_universe())
    yield served
    served.stop()


VENDOR = Path(__file__).resolve().parents[2] / "shared" / "vendor"  # ../shared beside the clone
CONDA_WHEEL = VENDOR / "conda-26.7.1-py3-none-any.whl"
# conda's own dependencies as ../shared/vendor/README.md pins them (tested there), plus conda-index
# for making channels; Python 3.10 gets the wheel's ranges (platformdirs 4.14.7 needs 3.11).
CONDA_DEPENDENCIES = (
    "archspec==0.2.7", "backports.zstd==1.8.0; python_version < '3.14'", "boltons==26.2.0",
    "charset-normalizer==3.5.2", "conda-package-handling==2.6.0", "distro==1.9.0", "frozendict==2.5.1",
    "msgpack==1.2.4", "packaging==26.3", "platformdirs==4.14.7", "pluggy==1.7.0", "pycosat==0.6.6",
    "requests==2.34.2", "ruamel.yaml==0.18.17", "setuptools>=60", "tqdm==4.70.1", "truststore==0.10.5",
    "conda-index==0.13.0",
) if sys.version_info >= (3, 11) else (
    "archspec>=0.2.3", "backports.zstd>=1.3.0", "boltons>=23.0.0", "charset-normalizer",
    "conda-package-handling>=2.2.0", "distro>=1.5.0", "frozendict>=2.4.2", "msgpack>=1.1.1", "packaging>=23.0",
    "platformdirs>=3.10.0", "pluggy>=1.6.0", "pycosat>=0.6.3", "requests>=2.28.0,<3", "ruamel.yaml>=0.11.14,<0.19",
    "setuptools>=60.0.0", "tqdm>=4", "truststore>=0.8.0", "conda-index==0.13.0",
)
# cudaresolve's own runtime dependencies, for the plugin; cudaresolve itself goes in editable.
PLUGIN_DEPENDENCIES = ("nvidia-ml-py>=12", "resolvelib>=1.0.1", "tomli>=1.1; python_version < '3.11'")


def build_conda_venv() -> Path:
    """A venv holding the real conda (the vendored wheel, `--no-deps`, as the vendor README's recipe
    says) with its dependencies from the registry, and this checkout installed editable, so conda
    loads its plugin. Built once per Python, wheel and checkout into the cache. Skips only when the
    registry cannot provide the dependencies (pip's last words are the reason)."""
    import hashlib

    if sys.version_info < (3, 10):
        pytest.skip("conda 26.7 needs Python 3.10 or newer")
    if not CONDA_WHEEL.is_file():
        pytest.fail(f"the vendored conda wheel is missing: {CONDA_WHEEL}")
    repo = TESTS.parent.resolve()
    recipe = [sys.version, str(repo), hashlib.sha256(CONDA_WHEEL.read_bytes()).hexdigest(), *CONDA_DEPENDENCIES, *PLUGIN_DEPENDENCIES]

    def build(venv: Path) -> None:
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        steps = (
            ([sys.executable, "-m", "venv", str(venv)], False),
            (pip + ["--no-deps", str(CONDA_WHEEL)], False),
            (pip + list(CONDA_DEPENDENCIES) + list(PLUGIN_DEPENDENCIES), True),
            # its build backend comes from the registry too, which has just answered: a failure is ours
            (pip + ["--no-deps", "-e", str(repo)], False),
        )
        for command, from_registry in steps:
            result = subprocess.run(command, capture_output=True, text=True)
            if result.returncode != 0:
                last = [line for line in result.stderr.splitlines() if line.startswith("ERROR")][-1:] or result.stderr.splitlines()[-1:]
                if from_registry:
                    pytest.skip(f"conda's dependencies cannot be installed from the registry: {last}")
                pytest.fail(f"{' '.join(command)} failed:\n{result.stderr}")

    return cached_venv("conda", recipe, ["-m", "conda", "--version"], build)


@pytest.fixture(scope="session")
def conda_venv():
    """The root of the cached venv running the real conda with cudaresolve's plugin installed."""
    return build_conda_venv()
