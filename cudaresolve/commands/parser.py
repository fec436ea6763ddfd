"""argparse's parser for every command: the options, their help, and the exit-code epilog.

A parsed namespace carries `command` (the module of commands/ that runs it). No parser takes a prefix
of a flag for the flag (allow_abbrev=False): `--constraint` must not become another flag, least of all
one that writes a file. May import: errors, output/docs.
"""

from __future__ import annotations

import argparse
from typing import Any, NoReturn

from cudaresolve import __version__
from cudaresolve.errors import UsageError
from cudaresolve.output.docs import docs_url

EXIT_CODES = (
    "exit status: 0 ok; 1 warnings only (doctor --strict); 2 problems found; 3 could not run "
    f"(bad input, missing interpreter; see {docs_url('cli.md')})"
)


class _Parser(argparse.ArgumentParser):
    """argparse's own exit status 2 would read as "problems found": a bad command line is bad input.
    Every parser and subparser is one of these, none taking a flag's prefix for the flag."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


class _FormatOption(argparse.Action):
    """--only-binary and --no-binary, kept in one list in the order given: pip applies each value after
    the ones before it, so the order decides (`--only-binary :all: --no-binary x` builds x's sdist, the
    other order refuses it)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: Any = None) -> None:
        setattr(namespace, self.dest, [*(getattr(namespace, self.dest, None) or ()), (self.const, values)])


def _add_lock_inputs(parser: argparse.ArgumentParser) -> None:
    """What lock and install resolve: requirements, their files, the project, the target, the choices."""
    parser.add_argument("requirements", nargs="*", metavar="REQ", help="a PEP 508 requirement (cupy means the right cupy-cudaXXx)")
    parser.add_argument(
        "-r", "--requirement", "--requirements", dest="requirement", metavar="FILE", action="append", default=[],
        help="read a pip requirements file (an input, as in pip and uv)",
    )
    parser.add_argument(
        "-c", "--constraint", "--constraints", dest="constraint", metavar="FILE", action="append", default=[],
        help="read a pip constraints file (an input, as in pip and uv)",
    )
    parser.add_argument("--project", metavar="DIR", help="lock pyproject.toml's [project].dependencies")
    parser.add_argument("--extra", metavar="NAME", action="append", default=[], help="with this optional-dependencies extra")
    parser.add_argument("--group", metavar="NAME", action="append", default=[], help="with this PEP 735 dependency group")
    parser.add_argument("--python", metavar="PATH", help="the target interpreter: its tags, markers and installed set")
    parser.add_argument("--upgrade", action="store_true", help="do not keep installed versions")
    parser.add_argument("--pre", action="store_true", help="pre-releases may be chosen (as pip's --pre)")
    parser.add_argument(
        "--only-binary", metavar="FORMAT", dest="formats", action=_FormatOption, const="only_binary", default=[],
        help="as pip's: names (or :all:) whose sdists are never taken; --only-binary :all: locks wheels only and builds nothing",
    )
    parser.add_argument(
        "--no-binary", metavar="FORMAT", dest="formats", action=_FormatOption, const="no_binary", default=[],
        help="as pip's: names (or :all:) whose wheels are never taken (their sdists are, as pip builds them)",
    )
    parser.add_argument("--allow-advisory", metavar="ID", action="append", default=[], help="accept a known-bad release (repeatable)")
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="CPU-only builds of the CUDA-capable families (torch +cpu), even for a host with a GPU",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    parser.add_argument(
        "--deep",
        action="store_true",
        help="judge the ELF files of every chosen wheel, downloading (once, cached) those the knowledge table lacks and the providers whose rows list only some symbols",
    )


def _add_host_options(parser: argparse.ArgumentParser, *, fleet: bool = False) -> None:
    """The host every command judges against: probed, read from a file, and/or overridden."""
    group = parser.add_argument_group("host (default: probe this machine)")
    group.add_argument(
        "--host",
        metavar="FILE",
        action="append" if fleet else "store",
        help="read host facts from FILE (the JSON `cudaresolve probe --json` writes; - for stdin)"
        + ("; repeat for a fleet: one lock valid on every host" if fleet else ""),
    )
    if fleet:
        group.add_argument(
            "--hosts-from-nodes",
            metavar="FILE",
            help="every class of identical GPU nodes in FILE (the JSON `kubectl get nodes -o json` writes; - for stdin), "
            "read from GPU Feature Discovery's labels; with any --host files",
        )
    group.add_argument("--driver", metavar="RELEASE", help="driver release, e.g. 535.104.05")
    group.add_argument("--cuda", metavar="X.Y", help="CUDA version the driver supports, e.g. 12.2")
    group.add_argument(
        "--gpu",
        metavar="CC",
        action="append",
        default=[],
        help="a GPU's compute capability, e.g. 8.6 (repeat for several GPUs; replaces detected GPUs)",
    )


def _add_index_options(parser: argparse.ArgumentParser) -> None:
    """Which package indexes to use; each flag replaces pip's configured value (docs/index.md)."""
    group = parser.add_argument_group("package indexes (default: pip's configuration)")
    group.add_argument("--index-url", metavar="URL", help="the main index (http(s)://, file:// or a directory)")
    group.add_argument(
        "--extra-index-url",
        metavar="URL",
        action="append",
        help="another index to search too (repeatable; replaces pip's configured extra indexes)",
    )
    group.add_argument(
        "--find-links",
        metavar="URL",
        action="append",
        help="a page or directory of distribution files (repeatable; replaces pip's configured ones)",
    )
    group.add_argument("--no-index", action="store_true", default=None, help="use no index, only --find-links")
    group.add_argument(
        "--trusted-host", metavar="HOST", action="append", help="reach this host by plain http too (repeatable; as pip's)"
    )
    group.add_argument("--cert", metavar="PATH", help="the CA bundle to verify indexes with (as pip's)")
    group.add_argument("--client-cert", metavar="PATH", help="the client certificate for indexes (as pip's)")
    group.add_argument("--timeout", metavar="SECONDS", help="the socket timeout (as pip's; default 15)")
    group.add_argument("--retries", metavar="N", help="how often to retry a connection (as pip's; default 5)")
    group.add_argument("--proxy", metavar="URL", help="a proxy for the indexes (as pip's)")
    wheels = parser.add_argument_group("which wheels fit (default: the target interpreter's tags, as pip download's options)")
    wheels.add_argument(
        "--python-version", metavar="X.Y", action="append",
        help="the Python version wheels must fit, e.g. 3.12 (lock: repeat for several, each a target of its own)",
    )
    wheels.add_argument(
        "--platform", metavar="TAG", action="append", help="a platform tag, e.g. manylinux_2_28_x86_64 (repeatable)"
    )
    wheels.add_argument("--implementation", metavar="IMPL", help="cp, pp or py")
    wheels.add_argument("--abi", metavar="TAG", action="append", help="an ABI tag, e.g. cp312 (repeatable)")
    group.add_argument("--offline", action="store_true", help="use only what the cache holds (a miss is an error)")
    group.add_argument(
        "--download-budget", metavar="SIZE",
        help="the most whole files one run downloads together, e.g. 20GiB (default 8GiB); past it the run stops, saying so",
    )
    group.add_argument("--refresh", action="store_true", help="ignore the cache and fetch again")
    group.add_argument(
        "--torch-index-base",
        metavar="URL",
        help="where the PyTorch variant indexes (whl/<variant>) live (default: PyTorch's download site)",
    )


INDEX_FLAGS = frozenset({
    "index_url", "extra_index_url", "find_links", "no_index", "trusted_host", "cert", "client_cert", "timeout", "retries",
    "proxy", "torch_index_base",
})
# Every option _add_index_options adds (dests), the wheel tags and the cache's use included.
INDEX_OPTIONS = INDEX_FLAGS | {"python_version", "platform", "implementation", "abi", "offline", "download_budget", "refresh"}


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: one function per command adds its parser, in the order --help lists them."""
    parser = _Parser(
        prog="cudaresolve",
        description="Make CUDA wheels install right: read the host, the binaries and the environment.",
        epilog=EXIT_CODES,
    )
    parser.add_argument("--version", action="version", version=f"cudaresolve {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_probe(commands)
    _add_inspect(commands)
    _add_doctor(commands)
    _add_lock(commands)
    _add_install(commands)
    _add_pip(commands)
    _add_why(commands)
    return parser


def _add_probe(commands: argparse._SubParsersAction[_Parser]) -> None:
    """probe: the host facts."""
    probe = commands.add_parser(
        "probe",
        help="host facts: driver, driver CUDA version, GPUs and their compute capabilities",
        description="Report the driver release, the CUDA version it supports and every GPU, "
        "with the source that answered each fact.",
        epilog=EXIT_CODES,
    )
    _add_host_options(probe)
    probe.add_argument("--json", action="store_true", help=f"print the host JSON ({docs_url('host-json.md')})")


def _add_inspect(commands: argparse._SubParsersAction[_Parser]) -> None:
    """inspect: what files, wheels and distributions need and carry."""
    inspect = commands.add_parser(
        "inspect",
        help="what libraries need and carry: needed libs, versioned symbols, SASS/PTX archs",
        description="Read the ELF facts of .so files, directories, .whl files (read in place), installed "
        "distributions, wheel URLs and NAME==VERSION from the configured indexes (the knowledge table's "
        "cross-component facts when it knows the wheel, else the wheel, downloaded once). Exit 2 when a file "
        "or name could not be read or found (each says why).",
        epilog=EXIT_CODES,
    )
    inspect.add_argument(
        "paths",
        nargs="+",
        metavar="NAME",
        help="a .so, a directory, a .whl, an installed distribution, a wheel URL, or NAME==VERSION from the indexes",
    )
    inspect.add_argument(
        "--deep",
        action="store_true",
        help="read a remote wheel itself (downloaded once, cached) even when the knowledge table knows it",
    )
    inspect.add_argument("--python", metavar="PATH", help="where to look up distribution names (default: this one)")
    inspect.add_argument("--json", action="store_true", help=f"print JSON ({docs_url('inspect.md')})")
    _add_index_options(inspect)


def _add_doctor(commands: argparse._SubParsersAction[_Parser]) -> None:
    """doctor: an installed environment judged for the host."""
    doctor = commands.add_parser(
        "doctor",
        help="diagnose an installed environment: symbols, libraries, archs, driver, advisories",
        description="Read every CUDA library of an environment, load it as ld.so would and judge it for "
        "the host. Exit 2 when there are error findings.",
        epilog=EXIT_CODES,
    )
    where = doctor.add_mutually_exclusive_group()
    where.add_argument("--python", metavar="PATH", help="the interpreter of the environment (default: this one)")
    where.add_argument("--site-packages", metavar="DIR", help="a site-packages directory to diagnose")
    where.add_argument(
        "--example",
        action="store_true",
        help="diagnose the built-in example (cuSPARSE 12.3 beside nvJitLink 12.1, as planned, nothing installed)",
    )
    doctor.add_argument("--strict", action="store_true", help="exit 1 when there are warnings but no errors")
    doctor.add_argument("--json", action="store_true", help=f"print the findings as JSON ({docs_url('doctor.md')})")
    judging = doctor.add_mutually_exclusive_group()
    judging.add_argument(
        "--judge-fixes", dest="judge_fixes", action="store_true", default=None,
        help="judge each fix on the environment it would leave, with the releases the indexes offer, before it is "
        "printed (the default where an interpreter names the indexes; with --offline: the cached index pages only)",
    )
    judging.add_argument(
        "--no-judge-fixes", dest="judge_fixes", action="store_false",
        help="print the fixes the tables give without judging them (no index is read; faster)",
    )
    doctor.add_argument(
        "--import", dest="observe", action="store_true",
        help="also run the import of each package that ships libraries, in the environment's interpreter, and "
        "judge what it did: this runs the environment's code",
    )
    _add_host_options(doctor)
    _add_index_options(doctor)


def _add_lock(commands: argparse._SubParsersAction[_Parser]) -> None:
    """lock: one set that fits every host, written as pylock.toml; lock --check."""
    lock = commands.add_parser(
        "lock",
        help="choose one consistent set of versions and CUDA variants for this host (or a fleet)",
        description="Resolve requirements into versions and CUDA variants that install and load on every "
        "host, judged by the doctor's own checks on the planned environment; write pylock.toml (PEP 751) "
        "and, on request, a pip constraints file and a hashed requirements file. Exit 2 when no set fits.",
        epilog=EXIT_CODES,
    )
    _add_lock_inputs(lock)
    lock.add_argument("-o", "--output", metavar="FILE", help="the lock file: pylock.toml or pylock.NAME.toml (default: pylock.toml beside --project's pyproject.toml, "
                      "else here; - for stdout)")
    lock.add_argument(
        "--write-constraints", metavar="FILE",
        help="also write a pip constraints file (pip install -c FILE with the requirements its header names)",
    )
    lock.add_argument("--write-requirements", metavar="FILE", help="also write pinned requirements with --hash lines")
    lock.add_argument("--json", action="store_true", help=f"print the decisions, or the refusal (with --check: the answer), as one JSON document ({docs_url('lock.md')})")
    lock.add_argument("--explain", action="store_true", help="print every candidate set aside and why")
    lock.add_argument(
        "--check", metavar="FILE", help="only say whether the lock FILE still fits the host(s): exit 0 or 2, nothing resolved or written"
    )
    lock.add_argument(
        "--require-host", action="store_true",
        help="with --check: exit 2 when a check is skipped because a host states no driver or no GPU",
    )
    _add_host_options(lock, fleet=True)
    _add_index_options(lock)


def _add_install(commands: argparse._SubParsersAction[_Parser]) -> None:
    """install: lock (or read --lock), then the target's own pip, then the doctor."""
    install = commands.add_parser(
        "install",
        help="lock, then install exactly the lock with the target's own pip, then run the doctor",
        description="Resolve as `lock` does, print the plan, then run `PY -m pip install --require-hashes "
        "--no-deps -r <the lock>` with the target interpreter's pip (nothing is touched before the lock "
        "succeeded), then diagnose the environment. pip's exit status is returned when it fails; after it "
        "succeeds, 2 when the doctor finds errors.",
        epilog=EXIT_CODES,
    )
    _add_lock_inputs(install)
    install.add_argument("--lock", metavar="FILE", help="install this pylock.toml as it is (after checking it fits the host)")
    install.add_argument("--dry-run", action="store_true", help="print the plan and the pip command, change nothing")
    install.add_argument(
        "--json", action="store_true",
        help=f"with --dry-run: print the plan, or the refusal, as one JSON document ({docs_url('install.md')})",
    )
    install.add_argument("--no-verify", action="store_true", help="do not run the doctor after pip")
    install.add_argument("--target", dest="target_dir", metavar="DIR", help="install into DIR (pip --target)")
    install.add_argument("--prefix", metavar="DIR", help="install under DIR (pip --prefix)")
    _add_host_options(install, fleet=True)
    _add_index_options(install)


def _add_pip(commands: argparse._SubParsersAction[_Parser]) -> None:
    """pip: listed for --help; cli.main hands `cudaresolve pip ...` to commands/pip.py before argparse reads it."""
    pip = commands.add_parser(
        "pip",
        help="run the target's pip; `pip install` first resolves, then adds the lock as constraints",
        description="`cudaresolve pip install ARGS...` takes pip's own arguments: it resolves them as `lock` "
        "does (host from this machine or the CUDARESOLVE_* variables), then runs `PY -m pip install ARGS... -c "
        "<the lock>` with the index lines the lock chose and abstract names made concrete. Any other pip "
        "command runs unchanged. Editables, --no-deps, --no-index and direct references go to pip as they are.",
        epilog=EXIT_CODES,
    )
    pip.add_argument("--python", metavar="PATH", help="the interpreter whose pip runs (default: this one)")
    pip.add_argument("--torch-index-base", metavar="URL", help="where the PyTorch variant indexes live")
    pip.add_argument("-q", "--quiet", action="store_true", help="no cudaresolve progress on stderr")
    pip.add_argument("arguments", nargs=argparse.REMAINDER, help="pip's command and arguments")


def _add_why(commands: argparse._SubParsersAction[_Parser]) -> None:
    """why: what a lock records about one distribution."""
    why = commands.add_parser(
        "why",
        help="why a lock holds a distribution at its version and build",
        description="Print what a lock file records about one distribution: its pin, the reason, the path from "
        "what was asked for to it (each parent and the requirement it holds), and every candidate set aside "
        "with why (what `lock --explain` printed for it). NAME may be the name asked for (cupy for cupy-cuda12x).",
        epilog=EXIT_CODES,
    )
    why.add_argument("name", metavar="NAME", help="a distribution name, e.g. torch, or the name asked for, e.g. cupy")
    why.add_argument("--lock", metavar="FILE", default="pylock.toml", help="the lock file (default: pylock.toml)")
    why.add_argument("--json", action="store_true", help=f"print the answer as one JSON document ({docs_url('lock.md')})")
