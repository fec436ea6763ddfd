"""Shared fixtures: real wheels from the configured package index (cached: tests/wheel_cache.py), small ELF
files built with gcc, local indexes, and a hermetic environment for the commands and the pip they run."""

from __future__ import annotations

import dis
import fcntl
import inspect
import os
import shutil
import subprocess
import sys
import types
import venv
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import pytest
from wheel_cache import (
    allow_fetching,
    build_venv,
    build_venv_on,
    cached_venv,
    end_session,
    fetch_wheel,
    fetch_wheels,
    link_installed,
    run_or_fail,
    unpack,
)

# Each pytest process (every xdist worker imports this file) keeps the bytecode of what it imports, even
# where PYTHONDONTWRITEBYTECODE is set: otherwise every worker rewrites every test module's asserts and
# compiles cudaresolve again, most of a collection's CPU. The processes the tests start are left as set.
sys.dont_write_bytecode = False

TESTS = Path(__file__).parent
FIXTURES = TESTS / "fixtures"


def pytest_sessionfinish(session):
    end_session()


# -- the network tier -----------------------------------------------------------------------------
# A test is marked `network` when it reaches the package registry or needs wheels fetched from it:
# it carries one of NETWORK_MARKS, uses one of NETWORK_FIXTURES (pytest's fixture closure counts the
# fixtures its fixtures use), or its code, its fixtures' code or a test-suite function they call calls
# one of the fetching helpers below; unless it is marked `offline` (it fetches from 127.0.0.1 only).
# `-m 'not network'` is the tier that runs with the network off.
NETWORK_MARKS = frozenset({"registry", "torch_venv", "conda"})
NETWORK_FIXTURES = frozenset({"wheel", "unpacked", "cuda_venv", "conda_venv"})


def _network_helpers() -> frozenset:
    return frozenset({fetch_wheel, fetch_wheels, unpack, build_venv, build_venv_on, cached_venv, registry_python, build_conda_venv})


def _codes(code: types.CodeType):
    """A code object and every one nested in it (inner functions, lambdas, comprehensions)."""
    yield code
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            yield from _codes(constant)


def _suite_function(value: Any) -> Optional[Callable]:
    """`value` as a function of this test suite (tests/), else None."""
    function = inspect.unwrap(value) if callable(value) else None
    code = getattr(function, "__code__", None)
    return function if code is not None and TESTS in Path(code.co_filename).parents else None


def _reaches_network(function: Callable, helpers: frozenset, seen: dict) -> bool:
    """Whether `function` calls a fetching helper: a global name bound to one, one taken from the
    module wheel_cache or conftest (`from wheel_cache import ...` inside it, `wheel_cache.unpack`),
    or a suite function (or a suite class's method) that does."""
    key = function.__code__
    if key in seen:
        return seen[key]
    seen[key] = False  # a cycle adds nothing
    names = {helper.__name__ for helper in helpers}
    scope = getattr(function, "__globals__", {})
    found = False
    for code in _codes(function.__code__):
        instructions = list(dis.get_instructions(code))
        modules = {i.argval for i in instructions if i.opname == "IMPORT_NAME"}
        modules |= {i.argval for i in instructions
                    if i.opname in ("LOAD_GLOBAL", "LOAD_NAME") and getattr(scope.get(i.argval), "__name__", None) in ("wheel_cache", "conftest")}
        if modules & {"wheel_cache", "conftest"} and any(i.opname in ("IMPORT_FROM", "LOAD_ATTR", "LOAD_METHOD") and i.argval in names for i in instructions):
            found = True
            break
        for name in {i.argval for i in instructions if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}:
            value = scope.get(name)
            if value is None:
                continue
            if any(value is helper for helper in helpers):
                found = True
            elif isinstance(value, type):
                methods = [_suite_function(getattr(member, "__func__", member)) for member in vars(value).values()]
                found = any(_reaches_network(method, helpers, seen) for method in methods if method is not None)
            elif (inner := _suite_function(value)) is not None:
                found = _reaches_network(inner, helpers, seen)
            if found:
                break
        if found:
            break
    seen[key] = found
    return found


def needs_network(item: pytest.Item, helpers: frozenset, seen: dict) -> bool:
    """Whether a collected test reaches the registry (the rules above NETWORK_MARKS)."""
    marks = {mark.name for mark in item.iter_markers()}
    if "offline" in marks:
        return False
    if marks & NETWORK_MARKS:
        return True
    names = set(getattr(item, "fixturenames", ()))
    if names & NETWORK_FIXTURES:
        return True
    functions = [getattr(item, "function", None)]
    info = getattr(item, "_fixtureinfo", None)
    for name in names:
        functions += [definition.func for definition in (info.name2fixturedefs.get(name, ()) if info else ())]
    return any(_reaches_network(inner, helpers, seen) for f in functions if f is not None and (inner := _suite_function(f)))


@pytest.hookimpl(tryfirst=True)  # before -m reads the marks
def pytest_collection_modifyitems(config, items):
    helpers, seen = _network_helpers(), {}
    for item in items:
        if needs_network(item, helpers, seen):
            item.add_marker(pytest.mark.network)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """A test outside the network tier that fetches a wheel fails, saying so (its mark is wrong)."""
    allow_fetching(item.get_closest_marker("network") is not None)


@pytest.fixture(scope="session")
def wheel():
    """`wheel("nvidia-cusparse-cu12==12.3.1.170")` -> path of the .whl, kept in the test cache."""
    return fetch_wheel


@pytest.fixture(scope="session")
def unpacked():
    """`unpacked("nvidia-nvjitlink-cu12==12.1.105")` -> directory holding the wheel's files as
    site-packages would (`unpacked(requirement, members)`: only those)."""
    return unpack


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


@pytest.fixture(autouse=True)
def no_fix_already_satisfied(monkeypatch):
    """Every environment the doctor judges in a test (through `examine`, so the CLI's too): no fix it
    gives is a `pip install` the environment meets already, which would change nothing (issue 26)."""
    from fix_steps import satisfied_fixes

    import cudaresolve.commands.diagnosing as diagnosing

    judge = diagnosing.judge

    def judged(env, host):
        judgement = judge(env, host)
        satisfied = satisfied_fixes(judgement.findings, env)
        assert not satisfied, f"a fix the environment meets already: {satisfied}"
        return judgement

    monkeypatch.setattr(diagnosing, "judge", judged)


@pytest.fixture
def elf_builder(tmp_path):
    """An ElfBuilder writing into the test's tmp_path; skips where gcc is missing (CI has it)."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    return ElfBuilder(tmp_path)


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


def registry_python(target: Path, project: str) -> str:
    """The interpreter of `target`, a venv with pip and nothing else (a `venv_with_pip` copy), whose pip
    names the default index: the target of a lock against the registry. The test is skipped when the
    registry does not list `project`."""
    listed = subprocess.run([sys.executable, "-m", "pip", "index", "versions", project, "--only-binary=:all:"],
                            capture_output=True, text=True)
    if listed.returncode != 0:
        pytest.skip(f"the registry is not reachable: {listed.stderr.strip().splitlines()[-1:]}")
    return str(target / "bin" / "python")


# -- built once per test run --------------------------------------------------------------------
# Under pytest-xdist every worker is its own session; what a session fixture builds from local files
# is built once for the run, by the first worker to ask, in the folder the workers share (pytest's
# base temp, whose parent holds each worker's own), the others waiting on its file lock.


def run_folder(tmp_path_factory) -> Path:
    """The temporary folder of this test run, shared by its xdist workers (pytest's base temp alone)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def built_once(tmp_path_factory, name: str, build: Callable[[Path], None]) -> Path:
    """`run_folder/name`, made by `build(path)` once per test run: the first worker builds it under
    `name.lock`, the others wait for it; a build that failed is tried again by the next."""
    root = run_folder(tmp_path_factory)
    made, done = root / name, root / f"{name}.complete"
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            shutil.rmtree(made, ignore_errors=True)
            build(made)
            done.touch()
    return made


def linked_venv(template: Path, root: Path) -> Path:
    """`root`, a copy of the venv `template` made of hard links (`cp -al`), but for bin/'s scripts and
    pyvenv.cfg, which name the template's folder and are rewritten to name `root`. pip replaces a file
    it installs or removes (unlink, then a new file), so installing into the copy leaves the template
    as it was; a test that writes into an installed file in place works on a plain copy instead."""
    shutil.copytree(template, root, symlinks=True, copy_function=os.link)
    for path in [root / "pyvenv.cfg", *(root / "bin").iterdir()]:
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        mode = path.stat().st_mode
        path.unlink()  # the template keeps its own inode
        path.write_bytes(data.replace(str(template).encode(), str(root).encode()))
        path.chmod(mode)
    return root


@pytest.fixture(scope="session")
def venv_with_pip(tmp_path_factory) -> Callable[[Path], Path]:
    """`venv_with_pip(root)` -> `root`, a venv with ensurepip's pip (and setuptools): a hard-link copy
    of one venv made once per test run, as `python -m venv` makes it (ensurepip costs seconds of CPU
    a venv; the copy a few milliseconds)."""
    template = built_once(tmp_path_factory, "venv-with-pip", lambda root: venv.create(root, with_pip=True, symlinks=True))
    return lambda root: linked_venv(template, root)


@pytest.fixture(scope="session")
def empty_python(tmp_path_factory) -> str:
    """The interpreter of a venv with nothing installed (not even pip), one per session: the target of
    locks that must not see an installed set. Nothing installs into it."""
    root = tmp_path_factory.mktemp("empty-target") / "venv"
    venv.create(root, with_pip=False)
    return str(root / "bin" / "python")


@pytest.fixture
def server():
    """A local index (tests/index_server.py) for one test: pages, wheels, ranges and failures it is told."""
    from index_server import IndexServer

    made = IndexServer()
    made.start()
    yield made
    made.stop()


@pytest.fixture(scope="session")
def uv() -> Path:
    """The uv the [test] extra installs (an exact release: the lock tests' second PEP 751 reader)."""
    from uv import find_uv_bin

    return Path(find_uv_bin())


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
    loads its plugin. Built once per Python, wheel and checkout into the cache; the dependencies'
    wheels come through `fetch_wheels`, whose skip says why when the registry cannot provide them."""
    import hashlib

    if sys.version_info < (3, 10):
        pytest.skip("conda 26.7 needs Python 3.10 or newer")
    if not CONDA_WHEEL.is_file():
        pytest.fail(f"the vendored conda wheel is missing: {CONDA_WHEEL}")
    repo = TESTS.parent.resolve()
    recipe = [sys.version, str(repo), hashlib.sha256(CONDA_WHEEL.read_bytes()).hexdigest(), *CONDA_DEPENDENCIES, *PLUGIN_DEPENDENCIES]

    def build(venv: Path) -> None:
        wheels = fetch_wheels([*CONDA_DEPENDENCIES, *PLUGIN_DEPENDENCIES], deps=True)
        pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check", "--no-cache-dir",
               "--no-index", "--no-deps"]
        run_or_fail([sys.executable, "-m", "venv", str(venv)])
        run_or_fail(pip + [str(CONDA_WHEEL), *map(str, wheels)])
        # the build backend is the setuptools just installed: nothing more comes from the registry
        run_or_fail(pip + ["--no-build-isolation", "-e", str(repo)])
        link_installed(venv)

    return cached_venv("conda", recipe, ["-m", "conda", "--version"], build)


@pytest.fixture(scope="session")
def conda_venv():
    """The root of the cached venv running the real conda with cudaresolve's plugin installed."""
    return build_conda_venv()


def plant(entry: Path, kind: str) -> None:
    """Put a FIFO (no writer: a blocking open waits forever) or a directory (with a file in it) where
    the cache file `entry` is; a cache must read neither, and write its entry again in its place."""
    os.unlink(entry)
    if kind == "fifo":
        os.mkfifo(entry)
    else:
        os.mkdir(entry)
        (entry / "inside").write_bytes(b"x")


REFUSAL_LINES, REFUSAL_WIDTH = 5, 200  # a refusal a person reads: lines, and characters a line


@pytest.fixture
def short_refusals(monkeypatch):
    """Every refusal (no set fits) a test prints is checked as it is shown: at most REFUSAL_LINES
    lines of at most REFUSAL_WIDTH characters, its cause first (a CUDA major the hosts refuse, or
    hosts sharing none, before the conflicts that follow). Returns the refusals seen."""
    from cudaresolve.output import errors

    seen: list[str] = []
    words = errors.no_solution

    def checked(failed, **options):
        text = words(failed, **options)
        if options.get("whole"):
            return text
        lines = f"cudaresolve: error: {text}".splitlines()
        assert len(lines) <= REFUSAL_LINES and all(len(line) <= REFUSAL_WIDTH for line in lines), text
        if failed.conflict is not None:
            assert lines[0].startswith("cudaresolve: error: no CUDA major runs on every host"), text
        elif failed.untried:
            assert lines[0].startswith(f"cudaresolve: error: CUDA {failed.untried[0].major} is not tried"), text
        seen.append(text)
        return text

    monkeypatch.setattr(errors, "no_solution", checked)
    return seen
