"""The environment to look into: the running interpreter, another one (`--python`), or a bare
site-packages directory (`--site-packages`).

Another interpreter is asked for its paths once, in a subprocess, because its sysconfig scheme
(venv, conda, Debian's dist-packages) is only known to itself. It runs isolated and without site
(`-I -S`), so neither its .pth files nor a sitecustomize run: the question sets a venv's prefixes
as site.py would (PEP 405's pyvenv.cfg) and nothing else, which is all sysconfig needs for the
paths. Its answer is bounded in size and time, and frozen in a `Target` so the rest of the scan
never runs foreign code again. Its pip, when only pip can answer (its default index, its PEP 668
refusal), runs the same way with pip's own package as the one thing imported from site-packages
(`pip_command`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from cudaresolve.bounded import TooMuchOutput, loads_json, run_bounded
from cudaresolve.env.errors import EnvError
from cudaresolve.errors import UsageError

# Runs inside the target interpreter, so it avoids anything newer than Python 3.6. The markers are
# computed the way packaging.markers.default_environment() does, which the target may not have.
_DESCRIBE = """
def describe():
    import os, sys, sysconfig
    paths = sysconfig.get_paths()
    return {
        "purelib": paths["purelib"],
        "platlib": paths["platlib"],
        "prefix": sys.prefix,
        "executable": sys.executable,
        "version": python_version(),
        "implementation": sys.implementation.name,
        "machine": uname()[3],
        "conda": os.path.isdir(os.path.join(sys.prefix, "conda-meta")),
        "free_threaded": bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
        "stdlib": paths["stdlib"],
        "venv": sys.prefix != getattr(sys, "base_prefix", sys.prefix),
        "conda_base": conda_base(),
        "markers": markers(),
    }

def conda_base():
    # a venv made from a conda Python: its base prefix holds conda-meta/ and the libraries in lib/
    import os, sys
    base = getattr(sys, "base_prefix", sys.prefix)
    return base if base != sys.prefix and os.path.isdir(os.path.join(base, "conda-meta")) else None

def uname():
    # platform's answers where os.uname has them: importing platform (and re) is a third of the
    # question's cost on a doctor run that is otherwise served from its cache.
    import os
    if hasattr(os, "uname"):
        u = os.uname()
        return u.sysname, u.release, u.version, u.machine
    import platform
    return platform.system(), platform.release(), platform.version(), platform.machine()

def python_version():
    import sys
    version = sys.version.split()[0]  # what platform.python_version() parses out of sys.version
    return version + ".0" if version.count(".") == 1 else version

def implementation():
    import sys
    known = {"cpython": "CPython", "pypy": "PyPy"}.get(sys.implementation.name)
    if known:
        return known
    import platform
    return platform.python_implementation()

def markers():
    import os, sys
    info = sys.implementation.version
    implementation_version = "%d.%d.%d" % (info.major, info.minor, info.micro)
    if info.releaselevel != "final":
        implementation_version += info.releaselevel[0] + str(info.serial)
    system, release, version, machine = uname()
    return {
        "implementation_name": sys.implementation.name,
        "implementation_version": implementation_version,
        "os_name": os.name,
        "platform_machine": machine,
        "platform_python_implementation": implementation(),
        "platform_release": release,
        "platform_system": system,
        "platform_version": version,
        "python_full_version": python_version(),
        "python_version": ".".join(python_version().split(".")[:2]),
        "sys_platform": sys.platform,
    }
"""

# Run first in the target, before anything imports sysconfig (which reads sys.prefix when imported).
_ENTER_VENV = """
def enter_venv():
    # With -S, site.py does not run, so a venv's sys.prefix is still its base interpreter's. Set
    # the prefixes as site.venv() does (PEP 405): pyvenv.cfg beside the executable or one level up.
    import os, sys
    if "__PYVENV_LAUNCHER__" in os.environ and sys.platform == "darwin":
        executable = os.environ["__PYVENV_LAUNCHER__"]
    else:
        executable = sys.executable
    exe_dir = os.path.dirname(os.path.abspath(executable))
    site_prefix = os.path.dirname(exe_dir)
    for directory in (exe_dir, site_prefix):
        if os.path.isfile(os.path.join(directory, "pyvenv.cfg")):
            sys.prefix = sys.exec_prefix = site_prefix
            return

enter_venv()
"""

# Runs pip's command line, arguments after argv[1], from the first site-packages directory holding
# it: those argv[1] lists (os.pathsep between), then the ones site.py would add (Debian's
# dist-packages; a venv's base when pyvenv.cfg includes the system's). pip is loaded by its
# location, so nothing else there (a module shadowing the standard library) is importable.
_RUN_PIP = """
import importlib.util, os, runpy, site, sys

def places():
    found = [place for place in sys.argv[1].split(os.pathsep) if place] + site.getsitepackages()
    try:
        with open(os.path.join(sys.prefix, "pyvenv.cfg")) as f:
            config = f.read().replace(" ", "").lower()
    except OSError:
        config = ""
    if "include-system-site-packages=true" in config.splitlines():
        found += site.getsitepackages([sys.base_prefix])
    return list(dict.fromkeys(found))

home = next((os.path.join(place, "pip") for place in places() if os.path.isfile(os.path.join(place, "pip", "__init__.py"))), None)
if home is None:
    sys.exit("pip is not installed in " + os.pathsep.join(places()))
spec = importlib.util.spec_from_file_location("pip", os.path.join(home, "__init__.py"), submodule_search_locations=[home])
module = importlib.util.module_from_spec(spec)
sys.modules["pip"] = module
spec.loader.exec_module(module)
sys.argv = ["pip"] + sys.argv[2:]
runpy.run_module("pip", run_name="__main__", alter_sys=True)
"""

_ASK = _ENTER_VENV + _DESCRIBE + "import json, sys\nsys.stdout.write(json.dumps(describe()))\n"
# The answer is a few kB; an interpreter that prints more, or takes longer, is not answering.
ANSWER_LIMIT = 1024 * 1024

_FIELDS = ("purelib", "platlib", "prefix", "version", "implementation", "machine", "conda", "markers")


@dataclass(frozen=True)
class Target:
    """Where the installed distributions live, and what is known about the interpreter that uses them.

    For `--site-packages` only `site_packages` is known; the interpreter fields are None.
    """

    site_packages: tuple[str, ...]  # purelib first, then platlib when it differs
    python: Optional[str] = None  # the interpreter as given (absolute)
    executable: Optional[str] = None  # its sys.executable: the program that runs (a venv's symlink, a shim's target)
    prefix: Optional[str] = None  # its sys.prefix
    version: Optional[str] = None  # "3.11.7"
    implementation: Optional[str] = None  # "cpython", "pypy"
    machine: Optional[str] = None  # platform.machine(): "x86_64", "aarch64"
    conda: bool = False  # sys.prefix holds conda-meta/
    conda_base: Optional[str] = None  # a venv's base prefix when that holds conda-meta/ (a venv made from a conda Python)
    free_threaded: bool = False  # a free-threaded CPython build (its wheels carry the cp313t ABI)
    stdlib: Optional[str] = None  # where PEP 668's EXTERNALLY-MANAGED marker would be
    venv: bool = False  # a virtual environment (PEP 668 markers do not apply inside one)
    markers: tuple[tuple[str, str], ...] = ()  # its PEP 508 marker environment, sorted by name

    @property
    def conda_prefix(self) -> Optional[str]:
        """The conda prefix whose packages this interpreter sees: its own, or its venv's base."""
        return self.prefix if self.conda and self.prefix else self.conda_base

    def marker_environment(self) -> Optional[dict[str, str]]:
        """The environment to evaluate Requires-Dist markers in; None when no interpreter was asked."""
        return dict(self.markers) if self.markers else None


def target_for(python: Optional[str] = None, site_packages: Optional[str] = None) -> Target:
    """The target the command-line options name; the running interpreter when neither is given."""
    if python is not None and site_packages is not None:
        raise UsageError("give --python or --site-packages, not both")
    if python is not None:
        return target_for_python(python)
    if site_packages is not None:
        return target_for_site_packages(site_packages)
    return running_target()


def running_target() -> Target:
    """The interpreter cudaresolve itself runs in."""
    import sys

    namespace: dict[str, Any] = {}
    exec(_DESCRIBE, namespace)
    return _target_from_answer(sys.executable, namespace["describe"]())


def target_for_python(python: str, *, timeout: float = 30.0) -> Target:
    """Ask the interpreter at `python` (a path, or a name found on PATH) where its packages live."""
    executable = _locate(python)
    try:
        # -I: no PYTHON* variables, no user site; -S: no site, so no .pth file or sitecustomize runs.
        # The question goes on stdin: a non-Python program's complaint stays short.
        status, out, err = run_bounded([executable, "-I", "-S", "-"], _ASK.encode("utf-8"), timeout, ANSWER_LIMIT)
    except OSError as exc:
        raise EnvError(f"cannot run {executable}: {exc.strerror or exc}") from None
    except subprocess.TimeoutExpired:
        raise EnvError(f"{executable} did not answer within {timeout:g} s") from None
    except TooMuchOutput as exc:
        raise EnvError(f"{executable} {exc} when asked for its paths: it is not answering like a Python interpreter") from None
    if status != 0:
        last = err.decode("utf-8", "replace").strip().splitlines()[-1:]
        detail = f": {last[0][:200]}" if last else ""
        raise EnvError(f"{executable} is not a usable Python interpreter (exit status {status}{detail})")
    try:
        answer = loads_json(out.decode("utf-8"))
        if not _well_formed(answer):
            raise ValueError
    except ValueError:
        raise EnvError(f"{executable} did not answer like a Python interpreter") from None
    return _target_from_answer(executable, answer)


def pip_command(python: str, site_packages: Sequence[str], arguments: Sequence[str]) -> list[str]:
    """The command running `python -m pip ARGUMENTS` without site (`-I -S`: no .pth file or
    sitecustomize runs), pip's package the one thing imported from `site_packages` or the
    directories site.py would add; it exits 1 saying so when none holds pip."""
    return [python, "-I", "-S", "-c", _ENTER_VENV + _RUN_PIP, os.pathsep.join(site_packages), *arguments]


def target_for_site_packages(directory: str) -> Target:
    """A site-packages directory given directly, without an interpreter."""
    path = os.path.abspath(directory)
    if not os.path.isdir(path):
        raise EnvError(f"site-packages directory {directory} does not exist or is not a directory")
    return Target(site_packages=(path,))


def _locate(python: str) -> str:
    if os.sep not in python:
        found = shutil.which(python)
        if found is None:
            raise EnvError(f"no interpreter named {python} on PATH")
        return found
    path = os.path.abspath(python)
    if os.path.isdir(path):
        raise EnvError(
            f"{python} is a directory; give the interpreter, e.g. {os.path.join(python, 'bin', 'python')}"
        )
    if not os.path.exists(path):
        raise EnvError(f"interpreter {python} does not exist")
    return path


def _well_formed(answer: object) -> bool:
    if not isinstance(answer, dict) or any(field not in answer for field in _FIELDS):
        return False
    texts = [answer[field] for field in _FIELDS if field not in ("conda", "markers")]
    markers = answer["markers"]
    return (
        all(isinstance(text, str) for text in texts)
        and isinstance(answer["conda"], bool)
        and isinstance(markers, dict)
        and all(isinstance(value, str) for value in markers.values())
    )


def _target_from_answer(executable: str, answer: dict[str, Any]) -> Target:
    purelib = os.path.normpath(answer["purelib"])
    platlib = os.path.normpath(answer["platlib"])
    site_packages = [purelib] if platlib == purelib else [purelib, platlib]
    return Target(
        site_packages=tuple(site_packages),
        python=executable,
        executable=answer.get("executable") if isinstance(answer.get("executable"), str) else None,
        prefix=answer["prefix"],
        version=answer["version"],
        implementation=answer["implementation"],
        machine=answer["machine"],
        conda=bool(answer["conda"]),
        conda_base=answer.get("conda_base") if isinstance(answer.get("conda_base"), str) else None,
        free_threaded=answer.get("free_threaded") is True,
        stdlib=answer.get("stdlib") if isinstance(answer.get("stdlib"), str) else None,
        venv=answer.get("venv") is True,
        markers=tuple(sorted(answer["markers"].items())),
    )
