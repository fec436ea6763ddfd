"""Which package indexes to use: pip's configuration as the target's pip sees it, then ours on top.

Layers, later wins: pip's files (global, user, site, `PIP_CONFIG_FILE`) < `PIP_*` variables <
`[tool.cudaresolve]` in the project's pyproject.toml < our flags. Within pip's layers pip's own rule
holds: a `section.name` set in a later file replaces an earlier one, then `[<command>]` beats
`[global]` whichever file each came from, and the variables beat both. A flag or a project key
replaces the lower layers' value of that key (lists included), as a pip flag replaces its
configuration. `PIP_ISOLATED_MODE` changes nothing here: pip decides isolation from `--isolated` on
its own command line only, so its configuration is read in full even with that variable set.

Why read pip's files ourselves rather than ask `python -m pip config list`: the files and the rule
are small and stable (pip 23.0 ... 24.2 read the same files in the same order), and a pip
subprocess costs a whole interpreter start and pip's imports (figures: docs/performance.md, "Index
configuration", measured by scripts/bench_index_config.py, medians of 9 runs: reading and merging
0.16 ms, the whole `index_config` 0.41 ms, `pip config list` 293 ms). The one thing only pip knows is its default index, which changes with
pip, not with the configuration: it is read from `python -m pip install --help`, run without site
(`-I -S`, pip's package the one thing imported from site-packages), once per interpreter and pip
version and cached.

The I/O stays at the edge (`pip_config_paths`, `read_pip_files`, `read_project`, `default_index`);
`merge` is a pure function of plain data. What a command line, pip's own arguments or a
requirements file set is an `IndexSettings`, with every option pip has for its indexes.

May import: packaging, records, errors, bounded (bounded reads and runs), env/store (the cache
directory), env/interpreter (running the target's pip without site), knowledge/torch (the variant indexes).
"""

from __future__ import annotations

import configparser
import contextlib
import dataclasses
import errno
import hashlib
import locale
import math
import os
import pathlib
import re
import subprocess
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Optional, Sequence

from packaging.utils import canonicalize_name

from cudaresolve import records
from cudaresolve.bounded import TooMuchOutput, loads_toml, read_bounded, run_bounded
from cudaresolve.env.interpreter import pip_command
from cudaresolve.env.store import default_cache_dir, store_entry
from cudaresolve.errors import UsageError
from cudaresolve.knowledge import torch

# PyTorch's own download site: the variant indexes live below it unless configured otherwise.
DEFAULT_TORCH_INDEX_BASE = "https://download.pytorch.org"
TORCH_BASE_VARIABLE = "CUDARESOLVE_TORCH_INDEX_BASE"
DEFAULT_TIMEOUT = 15.0  # pip's --timeout default
DEFAULT_RETRIES = 5  # pip's --retries default
PIP_DEFAULT = "pip's default"

# pip's long option names (aliases included) -> the key they set, for the options kept here.
_PIP_OPTIONS = {
    "index-url": "index-url",
    "pypi-url": "index-url",
    "extra-index-url": "extra-index-url",
    "find-links": "find-links",
    "no-index": "no-index",
    "trusted-host": "trusted-host",
    "cert": "cert",
    "client-cert": "client-cert",
    "timeout": "timeout",
    "default-timeout": "timeout",
    "retries": "retries",
    "proxy": "proxy",
}
_LISTS = ("extra-index-url", "find-links", "trusted-host")
_PATHS = ("cert", "client-cert")
_TRUE = ("y", "yes", "t", "true", "on", "1")  # pip's strtobool spellings
_FALSE = ("n", "no", "f", "false", "off", "0")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_PIP_IGNORED_VARIABLES = ("version", "help")  # PIP_VERSION and PIP_HELP are not options to pip


@dataclass(frozen=True)
class IndexSettings:
    """The index options a command line, pip's arguments or a requirements file give, each one pip
    has (and the PyTorch variant indexes' base); None is "not given": the layers below decide."""

    index_url: Optional[str] = None
    extra_index_urls: Optional[tuple[str, ...]] = None
    find_links: Optional[tuple[str, ...]] = None
    no_index: Optional[bool] = None
    trusted_hosts: Optional[tuple[str, ...]] = None
    cert: Optional[str] = None
    client_cert: Optional[str] = None
    timeout: Optional[float] = None
    retries: Optional[int] = None
    proxy: Optional[str] = None
    torch_index_base: Optional[str] = None

    def over(self, lower: "IndexSettings") -> "IndexSettings":
        """These settings where given, `lower`'s elsewhere: a flag replaces a requirements file's line."""
        return IndexSettings(**{
            f.name: getattr(lower, f.name) if getattr(self, f.name) is None else getattr(self, f.name)
            for f in dataclasses.fields(self)
        })


@dataclass(frozen=True)
class PipFile:
    """One pip configuration file as read: section -> option name -> value, in file order."""

    path: str
    sections: Mapping[str, Mapping[str, str]]


@dataclass(frozen=True)
class FleetHost:
    """One entry of `[tool.cudaresolve] fleet`: a host file (relative to the pyproject.toml) and the
    Pythons it runs, as written (commands/options.py parses them); None: the target interpreter's."""

    host: str
    python: Optional[tuple[str, ...]] = None


@dataclass(frozen=True)
class ProjectSettings:
    """`[tool.cudaresolve]` of a project's pyproject.toml; None is "not set". Relative paths in it
    are relative to the file's directory."""

    path: str = ""  # the pyproject.toml read (set by read_project, not by the file)
    index_url: Optional[str] = field(default=None, metadata=records.check(key="index-url"))
    extra_index_urls: Optional[tuple[str, ...]] = field(default=None, metadata=records.check(key="extra-index-url"))
    find_links: Optional[tuple[str, ...]] = field(default=None, metadata=records.check(key="find-links"))
    no_index: Optional[bool] = field(default=None, metadata=records.check(key="no-index"))
    torch_index_base: Optional[str] = field(default=None, metadata=records.check(key="torch-index-base"))
    fleet: Optional[tuple[FleetHost, ...]] = None  # the hosts a lock is for when the command names none


@dataclass(frozen=True)
class IndexConfig:
    """Where packages are looked for, and how they are fetched, with where each value came from."""

    index_url: Optional[str]  # None only under no-index when nothing names one
    extra_index_urls: tuple[str, ...]
    find_links: tuple[str, ...]  # apply to every name, as in pip
    no_index: bool
    trusted_hosts: tuple[str, ...]
    cert: Optional[str]
    client_cert: Optional[str]
    timeout: float
    retries: int
    proxy: Optional[str]  # pip's --proxy; the usual proxy variables are left to requests
    torch_index_base: str
    origins: tuple[tuple[str, str], ...]  # (key, where its value came from), e.g. ("index-url", "PIP_INDEX_URL")

    def origin(self, key: str) -> Optional[str]:
        """Where the value of `key` ("index-url", "timeout", ...) came from; None when nothing set it."""
        return dict(self.origins).get(key)

    def index_urls(self) -> tuple[str, ...]:
        """The regular indexes, in pip's order; none under no-index."""
        if self.no_index or self.index_url is None:
            return ()
        return (self.index_url,) + self.extra_index_urls

    def torch_variant_index(self, variant: str) -> str:
        """The index of one PyTorch CUDA variant ("cu128") below the configured base."""
        return f"{self.torch_index_base.rstrip('/')}/{torch.index_path(variant)}"

    def indexes_for(self, name: str, torch_variant: Optional[str]) -> tuple[str, ...]:
        """The indexes to search for distribution `name`: the variant index alone for the torch
        family once a variant is chosen (its builds exist only there), else the regular indexes."""
        if torch_variant is not None and canonicalize_name(name) in torch.family():
            return (self.torch_variant_index(torch_variant),)
        return self.index_urls()


# -- the edge: files, the project, pip's default ------------------------------------------------------


def index_config(
    python: str,
    prefix: str,
    environ: Mapping[str, str],
    project_dir: Optional[str],
    settings: IndexSettings,
    command: str = "install",
    *,
    site_packages: Sequence[str] = (),
    pip_help: Optional[Callable[[str, Sequence[str], Mapping[str, str]], str]] = None,
) -> IndexConfig:
    """The index configuration for the target interpreter `python` (whose sys.prefix is `prefix`).

    `site_packages` is where the target's pip is looked for, to key the cached default index by pip's
    version; `pip_help` runs `python -m pip install --help` (a seam for tests).
    """
    files = read_pip_files(pip_config_paths(prefix, environ))
    project = read_project(project_dir) if project_dir is not None else None

    def pip_default() -> str:
        return default_index(python, site_packages, environ, pip_help or pip_install_help)

    return merge(files, environ, project, settings, pip_default, command)


def pip_config_paths(prefix: Optional[str], environ: Mapping[str, str]) -> tuple[str, ...]:
    """pip's configuration files on Linux and other XDG systems, lowest priority first.

    Global (each `$XDG_CONFIG_DIRS` dir, then /etc), user (legacy ~/.pip, then `$XDG_CONFIG_HOME`),
    site (the target's sys.prefix, when known), then `PIP_CONFIG_FILE`. An existing `PIP_CONFIG_FILE` replaces the
    user files; os.devnull turns every file off. Files that do not exist are listed all the same.
    """
    named = environ.get("PIP_CONFIG_FILE")
    if named == os.devnull:
        return ()
    home = _home(environ)
    config_dirs = environ.get("XDG_CONFIG_DIRS", "")
    if not config_dirs.strip():
        config_dirs = "/etc/xdg"
    paths = [os.path.join(_expand_user(d, home), "pip", "pip.conf") for d in config_dirs.split(os.pathsep)]
    paths.append(os.path.join("/etc", "pip.conf"))
    if not (named and os.path.exists(named)):
        config_home = environ.get("XDG_CONFIG_HOME", "")
        if not config_home.strip():
            config_home = os.path.join(home, ".config")
        paths += [os.path.join(home, ".pip", "pip.conf"), os.path.join(config_home, "pip", "pip.conf")]
    if prefix is not None:
        paths.append(os.path.join(prefix, "pip.conf"))
    if named is not None:
        paths.append(named)
    return tuple(paths)


def read_pip_files(paths: Sequence[str]) -> tuple[PipFile, ...]:
    """The files of `paths` that exist, parsed as pip parses them (configparser, locale encoding).

    Like pip, a file that cannot be opened is skipped, and one that does not parse stops the run;
    one that is not a regular file (a FIFO in the target's prefix would block the read) or is larger
    than any real one stops it too.
    """
    found = []
    encoding = locale.getpreferredencoding(False)
    for path in paths:
        if not os.path.exists(path):
            continue
        parser = configparser.RawConfigParser()
        try:
            data = read_bounded(path, regular=True)
        except OSError as exc:
            if exc.errno in (errno.EINVAL, errno.EFBIG):
                raise UsageError(f"pip configuration file {path}: {exc.strerror}") from None
            continue
        try:
            # as configparser.read opens it: the locale's encoding, universal newlines
            parser.read_string(data.decode(encoding).replace("\r\n", "\n").replace("\r", "\n"), source=path)
        except UnicodeDecodeError:
            raise UsageError(f"pip configuration file {path}: contains invalid {encoding} characters") from None
        except configparser.Error as exc:
            detail = " ".join(str(exc).split())
            raise UsageError(f"pip configuration file {path} does not parse: {detail}") from None
        sections = {section: dict(parser.items(section)) for section in parser.sections()}
        for section, items in sections.items():
            for name, value in items.items():
                if "\0" in name + value:  # a value becomes a path or a URL, which cannot hold one
                    raise UsageError(f"pip configuration file {path}: [{section}] {name}: a NUL character")
        found.append(PipFile(path, sections))
    return tuple(found)


def read_project(project_dir: str) -> Optional[ProjectSettings]:
    """`[tool.cudaresolve]` of `project_dir`/pyproject.toml; None when there is no such file or table."""
    path = os.path.join(project_dir, "pyproject.toml")
    try:
        data = loads_toml(read_bounded(path, regular=True).decode("utf-8"))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    except ValueError as exc:  # UnicodeDecodeError, TOMLDecodeError, or what tomllib does not wrap
        raise UsageError(f"{path}: not valid TOML: {exc}") from None
    table = data.get("tool", {}).get("cudaresolve") if isinstance(data.get("tool"), dict) else None
    if table is None:
        return None
    try:
        settings = records.load(ProjectSettings, table, path="tool.cudaresolve")
    except records.RecordError as exc:
        raise UsageError(f"{path}: {exc}") from None
    return dataclasses.replace(settings, path=path)


def default_index(
    python: str,
    site_packages: Sequence[str],
    environ: Mapping[str, str],
    pip_help: Callable[[str, Sequence[str], Mapping[str, str]], str],
) -> str:
    """pip's own default index, as the target's pip states it in `pip install --help`.

    Cached in the cache directory by interpreter and pip version (the target's pip-*.dist-info
    name), so it costs one subprocess per pip version; uncached when pip's version cannot be found.
    """
    entry = _default_index_entry(python, site_packages, environ)
    if entry is not None:
        with contextlib.suppress(OSError, UnicodeDecodeError):
            cached = read_bounded(entry, 64 * 1024, regular=True).decode("utf-8").strip()
            if _scheme(cached) in ("http", "https"):
                return cached
    url = parse_default_index(pip_help(python, site_packages, environ), python)
    if entry is not None:
        _write_quietly(entry, url)
    return url


def pip_install_help(python: str, site_packages: Sequence[str], environ: Mapping[str, str]) -> str:
    """`python -m pip install --help`, run without site (env/interpreter.py's `pip_command`: none of the
    target's .pth files or sitecustomize runs) and so that no configuration shows through its defaults.

    pip prints its option defaults after applying its configuration, so every `PIP_*` variable is
    dropped and PIP_CONFIG_FILE is os.devnull (no file is read).
    """
    env = {name: value for name, value in environ.items() if not name.startswith("PIP_")}
    env["PIP_CONFIG_FILE"] = os.devnull
    command = pip_command(python, site_packages, ["install", "--help"])
    try:
        status, out, err = run_bounded(command, b"", 120, 1024 * 1024, env=env)  # the help is 10 kB
    except OSError as exc:
        raise UsageError(f"cannot run {python} to ask pip for its default index: {exc.strerror or exc}; pass --index-url") from None
    except subprocess.TimeoutExpired:
        raise UsageError(f"{python} -m pip install --help did not answer within 120 s; pass --index-url") from None
    except TooMuchOutput as exc:
        raise UsageError(f"{python} -m pip install --help {exc}; pass --index-url") from None
    if status != 0:
        last = err.decode("utf-8", "replace").strip().splitlines()[-1:]
        detail = f" ({last[0].strip()[:200]})" if last else ""
        raise UsageError(f"{python} cannot run pip{detail}, so pip's default index is unknown; pass --index-url")
    return out.decode("utf-8", "replace")


def parse_default_index(help_text: str, python: str) -> str:
    """The URL after "(default" in the help of pip's --index-url option."""
    lines = help_text.splitlines()
    for i, line in enumerate(lines):
        if re.match(r"\s*(-i, )?--index-url\b", line):
            text = line
            for following in lines[i + 1:]:
                if following.lstrip().startswith("-"):
                    break
                text += " " + following.strip()
            found = re.search(r"\(default\s+([^\s)]+)\)", text)
            if found and _scheme(found.group(1)) in ("http", "https"):
                return found.group(1)
            break
    raise UsageError(f"{python} -m pip install --help does not state a default index; pass --index-url")


def _default_index_entry(python: str, site_packages: Sequence[str], environ: Mapping[str, str]) -> Optional[str]:
    pip_version = None
    for directory in site_packages:
        with contextlib.suppress(OSError):
            pip_version = next((n for n in sorted(os.listdir(directory)) if re.fullmatch(r"pip-[^-]+\.dist-info", n)), None)
        if pip_version:
            break
    if pip_version is None:
        return None
    key = hashlib.sha256(f"{python}\0{pip_version}".encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return os.path.join(default_cache_dir(environ), "pip-default-index", key)


def _write_quietly(entry: str, text: str) -> None:
    """Write a cache entry whole or not at all; a cache that cannot be written only costs time."""
    with contextlib.suppress(OSError):
        store_entry(entry, (text + "\n").encode("utf-8"))


# -- the merge: plain data in, IndexConfig out ------------------------------------------------------


def pip_items(files: Sequence[PipFile], environ: Mapping[str, str], command: str = "install") -> list[tuple[str, str, str]]:
    """(pip's option name, configured text, origin) of every non-empty setting, in the order pip's
    option parser applies them: [global], [<command>], then the `PIP_*` variables.

    Every `section.name` is merged over the files first (a later file replaces an earlier one's value).
    """
    merged: dict[tuple[str, str], tuple[str, str]] = {}
    for pip_file in files:
        for section, items in pip_file.sections.items():
            for name, value in items.items():
                merged[(section, _pip_name(name))] = (value, f"{pip_file.path} [{section}]")
    for variable, value in environ.items():
        if variable.startswith("PIP_") and variable[4:].lower() not in _PIP_IGNORED_VARIABLES:
            merged[(":env:", _pip_name(variable[4:]))] = (value, variable)
    return [
        (name, value, origin)
        for wanted in ("global", command, ":env:")
        for (section, name), (value, origin) in merged.items()
        if section == wanted and value
    ]


def pip_settings(
    files: Sequence[PipFile], environ: Mapping[str, str], command: str = "install", options: Mapping[str, str] = _PIP_OPTIONS
) -> dict[str, tuple[str, str]]:
    """pip's configured text for each key of `options` (pip's option names -> the key), with its
    origin, as pip's option parser picks it: the last of `pip_items` wins."""
    chosen: dict[str, tuple[str, str]] = {}
    for name, value, origin in pip_items(files, environ, command):
        key = options.get(name)
        if key is not None:
            chosen[key] = (value, origin)
    return chosen


def merge(
    files: Sequence[PipFile],
    environ: Mapping[str, str],
    project: Optional[ProjectSettings],
    settings: IndexSettings,
    pip_default: Callable[[], str],
    command: str = "install",
) -> IndexConfig:
    """All layers into one IndexConfig, `settings` (the command's) on top. `pip_default` is asked
    only when an index is needed and nothing names one. Raises UsageError naming the key and its
    origin for a bad value."""
    home = _home(environ)
    values: dict[str, Any] = {}  # by key: str, tuple[str, ...], bool, float or int (see _pip_value)
    origins: dict[str, str] = {}

    def put(key: str, value: object, origin: str) -> None:
        values[key], origins[key] = value, origin

    for key, (text, origin) in pip_settings(files, environ, command).items():
        put(key, _pip_value(key, text, origin, home), origin)
    if environ.get(TORCH_BASE_VARIABLE):
        put("torch-index-base", environ[TORCH_BASE_VARIABLE], TORCH_BASE_VARIABLE)
    base_of = {key: os.getcwd() for key in ("index-url", "extra-index-url", "find-links", "torch-index-base")}
    if project is not None:
        where = f"{project.path} [tool.cudaresolve]"
        project_dir = os.path.dirname(os.path.abspath(project.path))
        for key, name in _OUR_KEYS:
            value = getattr(project, name)
            if value is not None:
                put(key, value, where)
                base_of[key] = project_dir
        if project.find_links is not None:
            put("find-links", tuple(_relative_to(link, project_dir) for link in project.find_links), where)
    for key, name in _OUR_KEYS:
        value = getattr(settings, name)
        if value is not None:
            put(key, value, f"--{key}")
            base_of[key] = os.getcwd()
    if settings.find_links is not None:
        put("find-links", settings.find_links, "--find-links")
    for key, name in _PIP_ONLY_KEYS:
        value = getattr(settings, name)
        if value is not None:
            put(key, _expand_user(value, home) if key in _PATHS else value, f"--{key}")

    no_index = bool(values.get("no-index", False))
    index_url = values.get("index-url")
    if index_url is None and not no_index:
        put("index-url", pip_default(), PIP_DEFAULT)
    if "timeout" not in values:
        put("timeout", DEFAULT_TIMEOUT, PIP_DEFAULT)
    if "retries" not in values:
        put("retries", DEFAULT_RETRIES, PIP_DEFAULT)
    if "torch-index-base" not in values:
        put("torch-index-base", DEFAULT_TORCH_INDEX_BASE, "cudaresolve's default")

    def url(key: str, value: str) -> str:
        return _index_location(key, value, origins[key], base_of[key], home)

    index_url = values.get("index-url")
    return IndexConfig(
        index_url=url("index-url", index_url) if index_url is not None else None,
        extra_index_urls=tuple(url("extra-index-url", u) for u in values.get("extra-index-url", ())),
        find_links=tuple(_find_link(link, home) for link in values.get("find-links", ())),
        no_index=no_index,
        trusted_hosts=tuple(values.get("trusted-host", ())),
        cert=values.get("cert"),
        client_cert=values.get("client-cert"),
        timeout=values["timeout"],
        retries=values["retries"],
        proxy=values.get("proxy"),
        torch_index_base=url("torch-index-base", values["torch-index-base"]),
        origins=tuple(sorted(origins.items())),
    )


# (key, field) only pip's layers and the command's settings set.
_PIP_ONLY_KEYS = (
    ("trusted-host", "trusted_hosts"),
    ("cert", "cert"),
    ("client-cert", "client_cert"),
    ("timeout", "timeout"),
    ("retries", "retries"),
    ("proxy", "proxy"),
)
# (key, field) our layers set one value for; find-links is handled apart (its paths are relative).
_OUR_KEYS = (
    ("index-url", "index_url"),
    ("extra-index-url", "extra_index_urls"),
    ("no-index", "no_index"),
    ("torch-index-base", "torch_index_base"),
)


def pip_number(key: str, text: str, origin: str) -> object:
    """A `timeout` (seconds) or `retries` given as text, checked as pip's configuration is."""
    return _pip_value(key, text, origin, "")


def _pip_value(key: str, text: str, origin: str, home: str) -> object:
    """pip's conversion of a configured text: split lists, its booleans, numbers, ~ in paths."""
    if key in _LISTS:
        return tuple(text.split())
    if key == "no-index":
        return pip_bool(key, text, origin)
    if key in ("timeout", "retries"):
        # pip takes any float or int here and then crashes on nan, inf or a negative value; 0 seconds
        # is pip's "no socket timeout" (the request deadline of index/limits.py still holds).
        try:
            value = float(text) if key == "timeout" else int(text)
        except ValueError:
            value = None
        if value is None or isinstance(value, float) and not math.isfinite(value) or value < 0:
            kind = "a number of seconds, 0 or more" if key == "timeout" else "a whole number, 0 or more"
            raise UsageError(f"{key}: {text!r} (from {origin}) is not {kind}")
        return value
    if key in _PATHS:
        return _expand_user(text, home)
    return text


def pip_bool(key: str, text: str, origin: str) -> bool:
    """A configured flag as pip reads it (strtobool); pip refuses anything else, and so does this."""
    if text.lower() in _TRUE:
        return True
    if text.lower() in _FALSE:
        return False
    raise UsageError(f"{key}: {text!r} (from {origin}) is not a boolean; pip accepts yes/no, true/false, on/off, 1/0")


def _index_location(key: str, value: str, origin: str, base: str, home: str) -> str:
    """An index URL as given, or an existing directory as a file:// URL; anything else is refused."""
    if _scheme(value) in ("http", "https", "file"):
        try:
            urllib.parse.urlsplit(value).port  # noqa: B018 - a broken IPv6 literal or port raises here
        except ValueError as exc:
            raise UsageError(f"{key}: {value!r} (from {origin}) is not a valid URL ({exc})") from None
        return value
    path = os.path.join(base, _expand_user(value, home))
    if value.strip() and "://" not in value and os.path.isdir(path):
        return pathlib.Path(os.path.abspath(path)).as_uri()
    raise UsageError(f"{key}: {value!r} (from {origin}) is not an http(s):// or file:// URL or an existing directory")


def _find_link(link: str, home: str) -> str:
    """pip's reading of a find-links entry: a ~ path that exists becomes its real path, the rest stays."""
    if link.startswith("~"):
        expanded = os.path.realpath(_expand_user(link, home))
        if os.path.exists(expanded):
            return expanded
    return link


def _relative_to(link: str, directory: str) -> str:
    if _scheme(link) or os.path.isabs(link) or link.startswith("~"):
        return link
    return os.path.join(directory, link)


def _scheme(value: str) -> str:
    found = _SCHEME.match(value)  # not urlsplit, which raises on a broken IPv6 literal
    return found.group(1).lower() if found else ""


def _pip_name(name: str) -> str:
    """pip's normal form of an option name from a file or a variable: lower case, dashes."""
    name = name.lower().replace("_", "-")
    return name[2:] if name.startswith("--") else name


def _home(environ: Mapping[str, str]) -> str:
    return environ.get("HOME") or os.path.expanduser("~")


def _expand_user(path: str, home: str) -> str:
    """~ and ~/... against the given HOME (the target's pip sees that environment); ~user as usual."""
    if path == "~" or path.startswith("~/"):
        return home + path[1:]
    return os.path.expanduser(path)
