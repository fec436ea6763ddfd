"""The `cudaresolve` command line: argument parsing, the commands' edges and error reporting.

Each command is a `_cmd_<name>(args) -> int` that turns the command line into the pipeline's inputs,
calls it and an output renderer; the logic lives in the pipeline's pure functions. The exit-code
contract (docs/cli.md) lives here and in errors.py only: a command returns 0 or 2, doctor --strict
also 1, install and pip also pip's own status, and anything that stops a command, a bad command
line included, is a CudaresolveError that `main` prints as one line and turns into 3.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import TYPE_CHECKING, NoReturn, Optional, Sequence

from cudaresolve import __version__
from cudaresolve.errors import CudaresolveError, UsageError

if TYPE_CHECKING:
    from cudaresolve.env.interpreter import Target
    from cudaresolve.index.config import IndexConfig

EXIT_CODES = (
    "exit status: 0 ok; 1 warnings only (doctor --strict); 2 problems found; 3 could not run "
    "(bad input, missing interpreter; see docs/cli.md)"
)


class _Parser(argparse.ArgumentParser):
    """argparse's own exit status 2 would read as "problems found": a bad command line is bad input."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


def _add_lock_inputs(parser: argparse.ArgumentParser) -> None:
    """What lock and install resolve: requirements, their files, the project, the target, the choices."""
    parser.add_argument("requirements", nargs="*", metavar="REQ", help="a PEP 508 requirement (cupy means the right cupy-cudaXXx)")
    parser.add_argument("-r", "--requirement", metavar="FILE", action="append", default=[], help="a pip requirements file")
    parser.add_argument("-c", "--constraint", metavar="FILE", action="append", default=[], help="a pip constraints file")
    parser.add_argument("--project", metavar="DIR", help="lock pyproject.toml's [project].dependencies")
    parser.add_argument("--extra", metavar="NAME", action="append", default=[], help="with this optional-dependencies extra")
    parser.add_argument("--group", metavar="NAME", action="append", default=[], help="with this PEP 735 dependency group")
    parser.add_argument("--python", metavar="PATH", help="the target interpreter: its tags, markers and installed set")
    parser.add_argument("--upgrade", action="store_true", help="do not keep installed versions")
    parser.add_argument("--allow-advisory", metavar="ID", action="append", default=[], help="accept a known-bad release (repeatable)")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    parser.add_argument(
        "--deep",
        action="store_true",
        help="judge the ELF files of every chosen wheel, downloading (once, cached) those the knowledge table lacks",
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
    group.add_argument("--driver", metavar="RELEASE", help="driver release, e.g. 535.104.05")
    group.add_argument("--cuda", metavar="X.Y", help="CUDA version the driver supports, e.g. 12.2")
    group.add_argument(
        "--gpu",
        metavar="CC",
        action="append",
        default=[],
        help="a GPU's compute capability, e.g. 8.6 (repeat for several GPUs; replaces detected GPUs)",
    )


def _host(args: argparse.Namespace):
    from cudaresolve.host.probe import host_for

    return host_for(
        host_file=args.host,
        driver=args.driver,
        cuda=args.cuda,
        gpus=args.gpu,
        environ=os.environ,
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
    wheels = parser.add_argument_group("which wheels fit (default: the target interpreter's tags, as pip download's options)")
    wheels.add_argument("--python-version", metavar="X.Y", help="the Python version wheels must fit, e.g. 3.12")
    wheels.add_argument(
        "--platform", metavar="TAG", action="append", help="a platform tag, e.g. manylinux_2_28_x86_64 (repeatable)"
    )
    wheels.add_argument("--implementation", metavar="IMPL", help="cp, pp or py")
    wheels.add_argument("--abi", metavar="TAG", action="append", help="an ABI tag, e.g. cp312 (repeatable)")
    group.add_argument("--offline", action="store_true", help="use only what the cache holds (a miss is an error)")
    group.add_argument("--refresh", action="store_true", help="ignore the cache and fetch again")
    group.add_argument(
        "--torch-index-base",
        metavar="URL",
        help="where the PyTorch variant indexes (whl/<variant>) live (default: PyTorch's download site)",
    )


_INDEX_FLAGS = {"index_url", "extra_index_url", "find_links", "no_index", "torch_index_base"}


def index_config_for(args: argparse.Namespace, target: Target, options=None) -> IndexConfig:
    """The index configuration of the command line `args` for the interpreter of `target`; the
    project is `--project` where the command has it, else the current directory. `options` are the
    index lines of requirements files: they stand where a flag is not given, as in pip."""
    from cudaresolve.index.config import IndexFlags, index_config

    extra = args.extra_index_url if args.extra_index_url is not None else (list(options.extra_index_urls) if options and options.extra_index_urls else None)
    links = args.find_links if args.find_links is not None else (list(options.find_links) if options and options.find_links else None)
    flags = IndexFlags(
        index_url=args.index_url or (options.index_url if options else None),
        extra_index_urls=tuple(extra) if extra is not None else None,
        find_links=tuple(links) if links is not None else None,
        no_index=args.no_index or (True if options and options.no_index else None),
        torch_index_base=args.torch_index_base,
    )
    project_dir = getattr(args, "project", None) or os.getcwd()
    return index_config(
        target.python, target.prefix, os.environ, project_dir, flags, site_packages=target.site_packages
    )


def _hosts(args: argparse.Namespace) -> list:
    """(label, facts) of every host a lock must fit: each --host file, or this machine."""
    from cudaresolve.host.probe import host_for

    files = args.host or [None]
    return [
        (path or "this host", host_for(host_file=path, driver=args.driver, cuda=args.cuda, gpus=args.gpu, environ=os.environ))
        for path in files
    ]


def _cmd_lock(args: argparse.Namespace) -> int:
    from cudaresolve.env.interpreter import target_for
    from cudaresolve.lockfile.files import write_together
    from cudaresolve.lockfile.pip import constraints_txt, requirements_txt
    from cudaresolve.lockfile.pylock import lock_file_name_ok, pylock_toml
    from cudaresolve.output import lock_words
    from cudaresolve.output.lock_report import render_json, render_text

    if args.check is not None:
        return _check_lock(args)
    if args.output not in (None, "-"):
        lock_file_name_ok(args.output)
    started = time.perf_counter()
    result, _ = _locked(args, target_for(python=args.python))
    # Everything is rendered before anything is written, and the files are written together:
    # a refused value or a failed write leaves every output as it was, stdout included.
    outputs = [(args.output or "pylock.toml", pylock_toml(result, lock_words))]
    if args.constraints:
        outputs.append((args.constraints, constraints_txt(result)))
    if args.requirements_out:
        outputs.append((args.requirements_out, requirements_txt(result)))
    report = render_json(result, time.perf_counter() - started) if args.json else render_text(result, explain=args.explain)
    files = [(path, text) for path, text in outputs if path != "-"]
    write_together(files)
    for path, _ in files:
        _say(args, f"wrote {path}")
    if args.output == "-":
        sys.stdout.write(outputs[0][1])
    (sys.stderr if args.output == "-" and not args.json else sys.stdout).write(report)
    return 0


def _say(args: argparse.Namespace, text: str) -> None:
    """Progress on stderr, unless -q."""
    if not args.quiet:
        print(text, file=sys.stderr, flush=True)


def _locked(args: argparse.Namespace, target: Target, site_packages: Optional[str] = None):
    """The lock the command line asks for, for `target` (its installed set read from `site_packages`
    when given: pip's --target directory), and the installed Environment it started from."""
    from dataclasses import replace

    from cudaresolve.doctor import scan
    from cudaresolve.output.progress import judging_progress
    from cudaresolve.resolve.requirements import from_command_line, merge, read_project, read_requirements_file
    from cudaresolve.resolve.resolver import LockRequest, lock

    inputs = [from_command_line(args.requirements)]
    inputs += [read_requirements_file(path, dict(os.environ)) for path in args.requirement]
    if getattr(args, "project", None) is not None or getattr(args, "extra", None) or getattr(args, "group", None):
        inputs.append(read_project(args.project or os.getcwd(), args.extra, args.group))
    inputs += [read_requirements_file(path, dict(os.environ), constraint=True) for path in args.constraint]
    asked = merge(inputs)
    constraints = asked.constraints
    if not asked.requirements:
        raise UsageError("nothing to lock: give requirements, -r FILE or --project DIR")
    hosts = _hosts(args)
    if not any(h.driver.release or h.driver.cuda or h.visible_gpus for _, h in hosts):
        _say(args, "no driver and no GPU known (no --driver/--gpu/--host): locking the CUDA builds the regular index serves by default")
    where = target if site_packages is None else replace(target, site_packages=(site_packages,))
    installed, _ = scan(where, os.environ)
    with _open_index(args, target, options=asked.index_options) as index:
        result = lock(
            LockRequest(
                asked.requirements, constraints, upgrade=args.upgrade, allow_advisories=tuple(args.allow_advisory), deep=args.deep
            ),
            installed,
            hosts,
            index,
            progress=lambda judging: _say(args, judging_progress(judging)),
        )
    return result, installed


def _cmd_install(args: argparse.Namespace) -> int:
    """Lock, show the plan, then run the target's own pip on exactly the lock; doctor after."""
    import tempfile

    from cudaresolve.env.interpreter import target_for
    from cudaresolve.integrations.pip import (
        externally_managed,
        installs_elsewhere,
        pip_install_command,
        pip_install_settings,
        pips_refusal,
        run,
    )
    from cudaresolve.lockfile.pip import requirements_txt
    from cudaresolve.lockfile.pylock import read_pylock
    from cudaresolve.output.lock_words import rejection_line
    from cudaresolve.output.plan import render_plan, render_state
    from cudaresolve.resolve.plan import install_plan

    if args.target_dir and args.prefix:
        raise UsageError("give --target or --prefix, not both")
    target = target_for(python=args.python)
    settings = pip_install_settings(target, os.environ)
    elsewhere = installs_elsewhere(settings)
    if elsewhere:
        raise UsageError(f"{elsewhere}: unset it, and give cudaresolve install --target or --prefix instead")
    if externally_managed(target, settings) and not args.target_dir and not args.prefix:
        code, words = pips_refusal(target.python)
        sys.stderr.write(words + "\n")
        return code
    site = args.target_dir or (_prefix_site_packages(target, args.prefix) if args.prefix else None)
    if args.lock is not None:
        if args.requirements or args.requirement:
            raise UsageError("--lock installs a lock as it is: give no requirements with it")
        locked = read_pylock(args.lock)
        # pip's input first: an entry cudaresolve cannot install (only an sdist, VCS, directory or
        # archive source; a wheel without a sha256) is refused, naming it, before anything else.
        pinned = requirements_txt(locked, origin=args.lock)
        labels, lines = _misfits(args, locked)
        if lines:
            sys.stdout.write(f"{args.lock} does not fit {labels}:\n" + "".join(f"  {rejection_line(line)}\n" for line in lines))
            return 2
        installed = _installed(target, site)
    else:
        locked, env = _locked(args, target, site)
        pinned = requirements_txt(locked)
        installed = env.distributions
    changes = install_plan(locked, installed)  # the lock `pinned` was written from: the plan shows what pip gets
    with tempfile.TemporaryDirectory(prefix="cudaresolve-install-") as scratch:
        requirements = os.path.join(scratch, "requirements.txt")
        with open(requirements, "w", encoding="utf-8") as f:
            f.write(pinned)
        command = pip_install_command(target.python, requirements, target_dir=args.target_dir, prefix=args.prefix)
        sys.stdout.write(render_plan(changes, command if args.dry_run else None, pinned))
        sys.stdout.flush()
        if args.dry_run:
            return 0
        if not any(change.touches for change in changes):
            return 0
        code = run(command)
    after = {d.name: d.version for d in _installed(target, site)}
    if code != 0:
        sys.stdout.write(render_state(changes, after, code))
        return code
    if not args.no_verify:
        return _verify(args, target, site)
    return 0


def _cmd_pip(args: argparse.Namespace) -> int:
    """`cudaresolve pip install ...`: pip's own arguments, plus what the lock decided (a constraints
    file, the index lines of the indexes it chose, and abstract names made concrete); any other pip
    command runs unchanged."""
    import tempfile

    from cudaresolve.env.interpreter import target_for
    from cudaresolve.integrations.pip import run, split_install_arguments
    from cudaresolve.lockfile.pip import constraints_txt

    target = target_for(python=args.python)
    pip = [target.python, "-m", "pip"]
    if not args.arguments or args.arguments[0] != "install":
        return run(pip + args.arguments)
    arguments = args.arguments[1:]
    positions, options = split_install_arguments(arguments)
    unlockable = [o for o in ("-e", "--editable", "--no-deps", "--no-index") if o in options]
    if unlockable or any(_is_direct(text) for _, text in positions) or "--help" in options or "-h" in options:
        _say(args, f"cudaresolve: passing to pip unchanged ({', '.join(unlockable) or 'nothing to lock'})")
        return run(pip + args.arguments)
    lock_args = build_parser().parse_args(["lock"])  # every lock option at its default, then pip's words
    lock_args.requirements = [text for _, text in positions]
    lock_args.requirement = options.get("-r", []) + options.get("--requirement", [])
    lock_args.constraint = options.get("-c", []) + options.get("--constraint", [])
    lock_args.upgrade = "-U" in options or "--upgrade" in options
    lock_args.quiet = args.quiet
    lock_args.index_url = (options.get("-i") or options.get("--index-url") or [None])[-1]
    lock_args.extra_index_url = options.get("--extra-index-url")
    lock_args.find_links = (options.get("-f", []) + options.get("--find-links", [])) or None
    lock_args.torch_index_base = args.torch_index_base
    site = (options.get("-t") or options.get("--target") or [None])[-1]
    locked, _ = _locked(lock_args, target, site)
    rewritten = list(arguments)
    for position, text in positions:
        replacement = _concrete(text, locked)
        if replacement != text:
            rewritten[position] = replacement
            _say(args, f"cudaresolve: {text} -> {replacement}")
    given = set(options.get("-i", []) + options.get("--index-url", []) + options.get("--extra-index-url", []))
    extra = [url for url in locked.index_urls if url not in given]
    with tempfile.TemporaryDirectory(prefix="cudaresolve-pip-") as scratch:
        constraints = os.path.join(scratch, "constraints.txt")
        with open(constraints, "w", encoding="utf-8") as f:
            f.write(constraints_txt(locked, indexes=False))
        command = pip + ["install", *rewritten, "-c", constraints] + [w for url in extra for w in ("--extra-index-url", url)]
        conda = [p for p in locked.packages if p.provided_by]
        if conda:
            # pip would install these dependencies' wheels over conda's libraries: name every pin instead
            pins = sorted(f"{p.name}=={p.version}" for p in locked.packages if p.wheel is not None)
            command += ["--no-deps", *pins]
            provided = ", ".join(f"{p.name} ({p.provided_by})" for p in conda)
            _say(args, f"cudaresolve: conda provides {provided}: pip runs with --no-deps and every pin of the lock")
        _say(args, "cudaresolve: " + " ".join(command))
        return run(command)


def _pip_arguments(words: list[str]) -> argparse.Namespace:
    """`cudaresolve pip [our options] PIP-ARGS...`: our options come first; from the first word that is
    not one of them, everything is pip's (argparse would take pip's own --version or --python)."""
    ours = {"--python": "python", "--torch-index-base": "torch_index_base"}
    values: dict = {"python": None, "torch_index_base": None, "quiet": False}
    position = 0
    while position < len(words):
        word = words[position]
        name, equals, value = word.partition("=")
        if name in ours and equals:
            values[ours[name]] = value
        elif word in ours and position + 1 < len(words):
            values[ours[word]] = words[position + 1]
            position += 1
        elif word in ("-q", "--quiet"):
            values["quiet"] = True
        elif word in ("-h", "--help") and position == 0:
            build_parser().parse_args(["pip", "--help"])
        else:
            break
        position += 1
    return argparse.Namespace(func=_cmd_pip, arguments=words[position:], **values)


def _is_direct(text: str) -> bool:
    """A direct reference, a path or a URL: pip installs it as it is, there is nothing to lock."""
    return "@" in text or "/" in text or text.endswith((".whl", ".tar.gz", ".zip"))


def _concrete(text: str, locked) -> str:
    """A requested name the lock made concrete: `cupy` -> `cupy-cuda12x`, `cuda-cccl` -> `cuda-cccl[cu12]`
    (the locked packages' `asked_as` and `added_extra`)."""
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    try:
        requirement = Requirement(text)
    except InvalidRequirement:
        return text
    name = canonicalize_name(requirement.name)
    for package in locked.packages:
        if package.reason.asked_as == name:
            return text.replace(requirement.name, package.name, 1)
        if package.name == name and package.reason.added_extra:
            changed = Requirement(text)
            changed.extras = set(requirement.extras) | {package.reason.added_extra}
            return str(changed)
    return text


def _installed(target: Target, site: Optional[str]):
    from cudaresolve.env.distributions import read_distributions

    found = []
    for directory in (site,) if site else target.site_packages:
        if os.path.isdir(directory):
            found += read_distributions(directory)[0]
    return tuple(found)


def _prefix_site_packages(target: Target, prefix: str) -> str:
    """Where pip --prefix puts packages for this interpreter (lib/pythonX.Y/site-packages)."""
    version = ".".join((target.version or "").split(".")[:2])
    return os.path.join(os.path.abspath(prefix), "lib", f"python{version}", "site-packages")


def _misfits(args: argparse.Namespace, locked) -> tuple[str, list[str]]:
    """(the hosts' labels, one line per locked build that does not run on them: [] when it fits)."""
    import platform

    from cudaresolve.resolve.check import misfits

    hosts = _hosts(args)
    return ", ".join(label for label, _ in hosts), misfits(locked, hosts, platform.machine())


def _verify(args: argparse.Namespace, target: Target, site: Optional[str]) -> int:
    """The doctor on what pip left, the way `cudaresolve doctor` runs it (its result cached for the
    next look); its findings are shown, and its exit status is the command's: 2 when it finds an
    error on any host (pip succeeded, yet the environment it leaves will not work)."""
    from cudaresolve.env.interpreter import target_for_site_packages
    from cudaresolve.output.doctor import use_colour
    from cudaresolve.results import doctor_report

    where = target_for_site_packages(site) if site else target
    hosts = _hosts(args)
    code = 0
    for label, host in hosts:
        report = doctor_report(where, host, os.environ)
        if len(hosts) > 1:
            sys.stdout.write(f"doctor for {label}:\n")
        sys.stdout.write(report.text_colour if use_colour(sys.stdout, os.environ) else report.text)
        code = max(code, report.exit_code)
    return code


def _check_lock(args: argparse.Namespace) -> int:
    """lock --check FILE: exit 0 when the lock fits every host, 2 with the misfits."""
    from cudaresolve.lockfile.pylock import read_pylock
    from cudaresolve.output.lock_words import rejection_line

    labels, lines = _misfits(args, read_pylock(args.check))
    if lines:
        sys.stdout.write(f"{args.check} does not fit {labels}:\n" + "".join(f"  {rejection_line(line)}\n" for line in lines))
        return 2
    sys.stdout.write(f"{args.check} fits {labels}: every locked CUDA build runs on its driver and GPUs\n")
    return 0


def _cmd_why(args: argparse.Namespace) -> int:
    """why NAME: what a lock file says about one distribution: its pin, why, and what was set aside."""
    from cudaresolve.lockfile.pylock import read_pylock
    from cudaresolve.output.lock_report import render_why

    text = render_why(read_pylock(args.lock), args.name)
    if text is None:
        raise UsageError(f"{args.name} is not in {args.lock}")
    sys.stdout.write(text)
    return 0


def _cmd_probe(args: argparse.Namespace) -> int:
    from cudaresolve.output.host import render_host

    facts = _host(args)
    sys.stdout.write(facts.to_json() if args.json else render_host(facts))
    return 0


def _cmd_inspect(args: argparse.Namespace) -> int:
    from cudaresolve.env.inspect import inspect_names
    from cudaresolve.env.interpreter import target_for
    from cudaresolve.output.inspect import render_json, render_text

    target = target_for(python=args.python)
    if _INDEX_FLAGS & {name for name, value in vars(args).items() if value is not None}:
        index_config_for(args, target)  # a bad index value is bad input even when no name needs an index
    items = []
    index = None
    try:
        for name in args.paths:
            if os.path.exists(name) or not _is_index_name(name):
                items += inspect_names([name], target)
                continue
            from cudaresolve.index.inspect import inspect_index_name

            index = index or _open_index(args, target)
            items += inspect_index_name(index, name, deep=args.deep)
    finally:
        if index is not None:
            index.close()
    sys.stdout.write(render_json(items) if args.json else render_text(items))
    return 0 if all(item.facts is not None for item in items) else 2


def _is_index_name(name: str) -> bool:
    """A wheel URL or a requirement with a version (NAME==VERSION): read through the indexes (a local
    path wins). Any specifier counts, so `foo>=1` is told to name one version, not sought on disk."""
    return name.startswith(("http://", "https://", "file://")) or any(c in name for c in "<>=!~")


def _open_index(args: argparse.Namespace, target: Target, options=None):
    """The configured indexes for `target`, caching as the flags say, downloads shown on stderr (not under -q).
    `options`: index options read from requirements files, between pip's configuration and flags."""
    from cudaresolve.index.access import open_index
    from cudaresolve.output.progress import download_progress

    from cudaresolve.index.tags import TagOverrides

    return open_index(
        index_config_for(args, target, options),
        target,
        os.environ,
        offline=args.offline,
        refresh=args.refresh,
        tag_overrides=TagOverrides(
            python_version=args.python_version,
            platforms=tuple(args.platform or ()),
            implementation=args.implementation,
            abis=tuple(args.abi or ()),
        ),
        progress=None if getattr(args, "quiet", False) else download_progress(sys.stderr),
    )


def _reading_progress(path: str) -> None:
    """The doctor's progress on a terminal: the file being read, on one line."""
    sys.stderr.write(f"\r\033[Kreading {os.path.basename(path)}")
    sys.stderr.flush()


def _cmd_doctor(args: argparse.Namespace) -> int:
    from cudaresolve.output.doctor import use_colour

    progress = _reading_progress if sys.stderr.isatty() else None
    if args.example:
        from cudaresolve.doctor import examine_example
        from cudaresolve.output.doctor import report_of

        report = report_of(examine_example(_host(args)))
    else:
        from cudaresolve.env.interpreter import target_for
        from cudaresolve.results import doctor_report

        target = target_for(python=args.python, site_packages=args.site_packages)
        report = doctor_report(target, _host(args), os.environ, progress=progress)
    if progress:
        sys.stderr.write("\r\033[K")
    if args.json:
        sys.stdout.write(report.json)
    else:
        sys.stdout.write(report.text_colour if use_colour(sys.stdout, os.environ) else report.text)
    return report.strict_exit_code if args.strict else report.exit_code


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="cudaresolve",
        description="Make CUDA wheels install right: read the host, the binaries and the environment.",
        epilog=EXIT_CODES,
    )
    parser.add_argument("--version", action="version", version=f"cudaresolve {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    probe = commands.add_parser(
        "probe",
        help="host facts: driver, driver CUDA version, GPUs and their compute capabilities",
        description="Report the driver release, the CUDA version it supports and every GPU, "
        "with the source that answered each fact.",
        epilog=EXIT_CODES,
    )
    _add_host_options(probe)
    probe.add_argument("--json", action="store_true", help="print the host JSON (docs/host-json.md)")
    probe.set_defaults(func=_cmd_probe)

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
    inspect.add_argument("--json", action="store_true", help="print JSON (docs/inspect.md)")
    _add_index_options(inspect)
    inspect.set_defaults(func=_cmd_inspect)

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
    doctor.add_argument("--json", action="store_true", help="print the findings as JSON (docs/doctor.md)")
    _add_host_options(doctor)
    doctor.set_defaults(func=_cmd_doctor)

    lock = commands.add_parser(
        "lock",
        help="choose one consistent set of versions and CUDA variants for this host (or a fleet)",
        description="Resolve requirements into versions and CUDA variants that install and load on every "
        "host, judged by the doctor's own checks on the planned environment; write pylock.toml (PEP 751) "
        "and, on request, a pip constraints file and a hashed requirements file. Exit 2 when no set fits.",
        epilog=EXIT_CODES,
    )
    _add_lock_inputs(lock)
    lock.add_argument("-o", "--output", metavar="FILE", help="the lock file: pylock.toml or pylock.NAME.toml (default pylock.toml; - for stdout)")
    lock.add_argument("--constraints", metavar="FILE", help="also write a pip constraints file (pip install -c FILE REQ)")
    lock.add_argument("--requirements", dest="requirements_out", metavar="FILE", help="also write pinned requirements with --hash lines")
    lock.add_argument("--json", action="store_true", help="print the decisions as JSON (docs/lock.md)")
    lock.add_argument("--explain", action="store_true", help="print every candidate set aside and why")

    lock.add_argument(
        "--check", metavar="FILE", help="only say whether the lock FILE still fits the host(s): exit 0 or 2, nothing resolved or written"
    )
    _add_host_options(lock, fleet=True)
    _add_index_options(lock)
    lock.set_defaults(func=_cmd_lock)

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
    install.add_argument("--no-verify", action="store_true", help="do not run the doctor after pip")
    install.add_argument("--target", dest="target_dir", metavar="DIR", help="install into DIR (pip --target)")
    install.add_argument("--prefix", metavar="DIR", help="install under DIR (pip --prefix)")
    _add_host_options(install, fleet=True)
    _add_index_options(install)
    install.set_defaults(func=_cmd_install)

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
    pip.set_defaults(func=_cmd_pip)

    why = commands.add_parser(
        "why",
        help="why a lock holds a distribution at its version and build",
        description="Print what a lock file records about one distribution: its pin, the reason, and every "
        "candidate set aside with why (what `lock --explain` printed for it).",
        epilog=EXIT_CODES,
    )
    why.add_argument("name", metavar="NAME", help="a distribution name, e.g. torch")
    why.add_argument("--lock", metavar="FILE", default="pylock.toml", help="the lock file (default: pylock.toml)")
    why.set_defaults(func=_cmd_why)

    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run one command and return its exit status; the console script and tests both use the return."""
    try:
        words = list(sys.argv[1:] if argv is None else argv)
        args = _pip_arguments(words[1:]) if words[:1] == ["pip"] else build_parser().parse_args(words)
        return args.func(args)
    except CudaresolveError as exc:
        from cudaresolve.output.errors import error_line

        print(error_line(exc), file=sys.stderr)
        return exc.exit_code
    except SystemExit as exc:
        # Only --help and --version get here (usage errors are UsageError): argparse exits 0 for them.
        return exc.code
    except KeyboardInterrupt:
        print("cudaresolve: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `cudaresolve ... | head`: the reader left; nothing to report.
        sys.stderr.close()
        return 0
