"""The index configuration against real pip: the same files, variables and precedence give the same
indexes, links, hosts and numbers pip uses; then our own layers, the torch routing and the cached
default index.

Every environment here is built from scratch (no PIP_* of the machine, XDG dirs and HOME in tmp_path),
so the tests mean the same on a clean CI machine and on one with its own pip configuration. Only
/etc/pip.conf cannot be moved; pip and cudaresolve both read it, so the comparisons with pip hold
whatever it says.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pip
import pytest
from conftest import plant

from cudaresolve.cli import main
from cudaresolve.commands.locking import config_for
from cudaresolve.commands.options import indexes
from cudaresolve.commands.parser import build_parser
from cudaresolve.env.interpreter import target_for_python
from cudaresolve.errors import UsageError
from cudaresolve.index.config import (
    DEFAULT_TORCH_INDEX_BASE,
    IndexConfig,
    IndexSettings,
    PipFile,
    ProjectSettings,
    default_index,
    index_config,
    merge,
    parse_default_index,
    pip_config_paths,
    pip_install_help,
    read_pip_files,
    read_project,
)
from cudaresolve.index.http import Http
from cudaresolve.knowledge import torch

KEYS = ("index_url", "extra_index_urls", "find_links", "no_index", "trusted_hosts", "cert", "client_cert", "timeout", "retries", "proxy")

# Runs inside the target to read pip's options after pip applied its configuration: pip's own option
# parser is the oracle for what `pip download -v` does not print (hosts, timeout, retries, certs).
PIP_OPTIONS = (
    "import json, sys\n"
    "from pip._internal.commands import create_command\n"
    "options, _ = create_command(sys.argv[1]).parse_args([])\n"
    f"print(json.dumps({{k: getattr(options, k) for k in {KEYS!r}}}))\n"
)


PIP_HOME = os.path.dirname(os.path.dirname(pip.__file__))  # the site-packages directory holding this pip


def never() -> str:
    raise AssertionError("pip's default index was asked for")


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A target whose sys.prefix is ours to write a site pip.conf into; pip comes from the base."""
    root = tmp_path_factory.mktemp("target") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(root)], check=True)
    return root


@pytest.fixture
def env(tmp_path) -> dict[str, str]:
    """This process's environment without any pip configuration, HOME and XDG dirs in tmp_path."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "XDG_CONFIG_", "CUDARESOLVE_"))}
    environ.update(
        HOME=str(tmp_path / "home"),
        XDG_CONFIG_DIRS=f"{tmp_path / 'xdg1'}{os.pathsep}{tmp_path / 'xdg2'}",
        CUDARESOLVE_CACHE_DIR=str(tmp_path / "cache"),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    (tmp_path / "home").mkdir()
    return environ


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def directory(path: Path) -> str:
    path.mkdir(parents=True, exist_ok=True)
    return path.as_uri()


def pip_download_locations(venv: Path, environ: dict[str, str], tmp_path: Path) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The indexes and links `pip download -v` says it looks in, for a name no location has."""
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "download", "--no-deps", "-v", "-d", str(tmp_path / "dl"), "cudaresolve-absent-dist"],
        env=environ, capture_output=True, text=True, timeout=120,
    )
    assert "No matching distribution found for cudaresolve-absent-dist" in done.stderr, done.stderr
    found = {"indexes": (), "links": ()}
    for line in done.stdout.splitlines():
        for kind in found:
            if line.startswith(f"Looking in {kind}: "):
                found[kind] = tuple(line.split(": ", 1)[1].split(", "))
    return found["indexes"], found["links"]


def pip_options(venv: Path, environ: dict[str, str], command: str) -> dict:
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", PIP_OPTIONS, command], env=environ, capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(done.stdout)


def ours(venv: Path, environ: dict[str, str], command: str) -> IndexConfig:
    return index_config(str(venv / "bin" / "python"), str(venv), environ, None, IndexSettings(), command)


def assert_same_as_pip(venv: Path, environ: dict[str, str], tmp_path: Path, command: str = "download") -> IndexConfig:
    config = ours(venv, environ, command)
    indexes, links = pip_download_locations(venv, environ, tmp_path)
    assert config.index_urls() == indexes
    assert config.find_links == links
    theirs = pip_options(venv, environ, command)
    assert config.no_index == theirs["no_index"]
    if not config.no_index:
        assert (config.index_url, list(config.extra_index_urls)) == (theirs["index_url"], theirs["extra_index_urls"])
    assert list(config.trusted_hosts) == theirs["trusted_hosts"]
    assert (config.cert, config.client_cert, config.proxy or "") == (theirs["cert"], theirs["client_cert"], theirs["proxy"])
    assert (config.timeout, config.retries) == (theirs["timeout"], theirs["retries"])
    return config


# -- against pip ------------------------------------------------------------------------------------


def test_every_file_kind_and_variable_as_pip_reads_them(venv, env, tmp_path):
    home = Path(env["HOME"])
    idx_a, idx_b, idx_cmd = (directory(tmp_path / n) for n in ("idx-a", "idx-b", "idx-cmd"))
    extra = [directory(tmp_path / f"extra{i}") for i in range(3)]
    write(tmp_path / "xdg1/pip/pip.conf", f"[global]\nindex-url = {idx_a}\ntimeout = 20\n[download]\nindex-url = {idx_cmd}\n")
    write(tmp_path / "xdg2/pip/pip.conf", f"[global]\nindex-url = {idx_b}\nretries = 7\n")
    write(home / ".pip/pip.conf", f"[global]\nextra-index-url = {extra[0]} {extra[1]}\ntrusted-host = a.invalid\n  b.invalid\n")
    write(home / ".config/pip/pip.conf", f"[global]\nextra-index-url = {extra[2]}\n[download]\nfind-links = {tmp_path / 'links'}\n")
    # default-timeout is an alias of timeout: set later in [global], it wins over xdg1's timeout.
    write(venv / "pip.conf", "[global]\nproxy = http://proxy.invalid:3128\ndefault-timeout = 33\n")
    env.update(PIP_TRUSTED_HOST="c.invalid d.invalid", PIP_CLIENT_CERT="~/client.pem", PIP_RETRIES="9")
    try:
        config = assert_same_as_pip(venv, env, tmp_path)
    finally:
        (venv / "pip.conf").unlink()
    # A [download] value from the first file beats a [global] one from a later file, as in pip.
    assert config.index_url == idx_cmd and config.origin("index-url") == f"{tmp_path / 'xdg1/pip/pip.conf'} [download]"
    assert config.extra_index_urls == (extra[2],)
    assert config.trusted_hosts == ("c.invalid", "d.invalid") and config.origin("trusted-host") == "PIP_TRUSTED_HOST"
    assert config.timeout == 33.0 and config.origin("timeout") == f"{venv / 'pip.conf'} [global]"
    assert config.client_cert == str(home / "client.pem") and config.retries == 9
    # The install command reads [install], not [download]: xdg2's [global] index there.
    assert ours(venv, env, "install").index_url == idx_b


def test_pip_config_file_that_exists_replaces_the_user_files(venv, env, tmp_path):
    home = Path(env["HOME"])
    write(home / ".config/pip/pip.conf", f"[global]\nindex-url = {directory(tmp_path / 'user')}\nfind-links = {tmp_path}\n")
    named = write(tmp_path / "named.conf", f"[global]\nextra-index-url = {directory(tmp_path / 'named')}\n")
    write(tmp_path / "xdg2/pip/pip.conf", f"[global]\nindex-url = {directory(tmp_path / 'global')}\n")
    env["PIP_CONFIG_FILE"] = str(named)
    config = assert_same_as_pip(venv, env, tmp_path)
    assert config.index_urls() == ((tmp_path / "global").as_uri(), (tmp_path / "named").as_uri())
    assert config.find_links == ()
    # Named but missing: the user files count again.
    env["PIP_CONFIG_FILE"] = str(tmp_path / "missing.conf")
    assert assert_same_as_pip(venv, env, tmp_path).index_url == (tmp_path / "user").as_uri()


def test_pip_config_file_devnull_turns_every_file_off_but_not_the_variables(venv, env, tmp_path):
    write(Path(env["HOME"]) / ".config/pip/pip.conf", f"[global]\nindex-url = {directory(tmp_path / 'user')}\n")
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_EXTRA_INDEX_URL=directory(tmp_path / "env"), PIP_INDEX_URL=directory(tmp_path / "main"))
    config = assert_same_as_pip(venv, env, tmp_path)
    assert config.index_urls() == ((tmp_path / "main").as_uri(), (tmp_path / "env").as_uri())
    assert pip_config_paths(str(venv), env) == ()


def test_isolated_mode_variable_still_reads_user_files_like_pip(venv, env, tmp_path):
    write(Path(env["HOME"]) / ".pip/pip.conf", f"[global]\nindex-url = {directory(tmp_path / 'user')}\n")
    env.update(PIP_ISOLATED_MODE="1", PIP_DEFAULT_TIMEOUT="42")
    config = assert_same_as_pip(venv, env, tmp_path)
    assert config.index_url == (tmp_path / "user").as_uri() and config.timeout == 42.0


def test_an_empty_later_value_drops_an_earlier_one_and_no_index_spellings(venv, env, tmp_path):
    write(tmp_path / "xdg1/pip/pip.conf", f"[global]\ntimeout = 20\nfind-links = {tmp_path / 'x'}\n")
    write(Path(env["HOME"]) / ".config/pip/pip.conf", "[global]\nfind-links =\ntimeout =\n")
    env.update(PIP_INDEX_URL=directory(tmp_path / "b"), PIP_NO_INDEX="Yes", PIP_FIND_LINKS=f"{tmp_path / 'l1'}  {tmp_path / 'l2'}")
    config = assert_same_as_pip(venv, env, tmp_path)
    assert config.no_index and config.index_urls() == () and config.find_links == (str(tmp_path / "l1"), str(tmp_path / "l2"))
    assert (config.timeout, config.origin("timeout")) == (15.0, "pip's default")
    env.update(PIP_NO_INDEX="off", PIP_FIND_LINKS="")
    config = assert_same_as_pip(venv, env, tmp_path)
    assert not config.no_index and config.find_links == () and config.index_url == (tmp_path / "b").as_uri()


def test_a_tilde_find_link_becomes_its_real_path_like_pip(venv, env, tmp_path):
    (Path(env["HOME"]) / "wheels").mkdir()
    env.update(PIP_INDEX_URL=directory(tmp_path / "i"), PIP_FIND_LINKS="~/wheels ~/absent")
    config = assert_same_as_pip(venv, env, tmp_path)
    assert config.find_links == (str(Path(env["HOME"]) / "wheels"), "~/absent")


def test_file_order_is_pips(env, tmp_path):
    home = env["HOME"]
    env["XDG_CONFIG_HOME"] = str(tmp_path / "cfg")
    assert pip_config_paths("/prefix", env) == (
        str(tmp_path / "xdg1/pip/pip.conf"),
        str(tmp_path / "xdg2/pip/pip.conf"),
        "/etc/pip.conf",
        f"{home}/.pip/pip.conf",
        str(tmp_path / "cfg/pip/pip.conf"),
        "/prefix/pip.conf",
    )
    del env["XDG_CONFIG_DIRS"], env["XDG_CONFIG_HOME"]
    assert pip_config_paths("/prefix", env)[:5] == (
        "/etc/xdg/pip/pip.conf", "/etc/pip.conf", f"{home}/.pip/pip.conf", f"{home}/.config/pip/pip.conf", "/prefix/pip.conf"
    )


# -- the merge, as plain data ----------------------------------------------------------------------


def conf(path: str, **sections: dict[str, str]) -> PipFile:
    return PipFile(path, sections)


def test_later_files_win_then_the_command_section_then_variables():
    files = [
        conf("/a", **{"global": {"index-url": "https://a.invalid/simple", "timeout": "3"}, "install": {"retries": "2"}}),
        conf("/b", **{"global": {"index-url": "https://b.invalid/simple", "retries": "8"}}),
    ]
    config = merge(files, {}, None, IndexSettings(), never)
    assert (config.index_url, config.origin("index-url")) == ("https://b.invalid/simple", "/b [global]")
    assert (config.retries, config.origin("retries")) == (2, "/a [install]")
    assert merge(files, {}, None, IndexSettings(), never, command="download").retries == 8
    config = merge(files, {"PIP_PYPI_URL": "https://env.invalid/simple", "PIP_DEFAULT_TIMEOUT": "7.5"}, None, IndexSettings(), never)
    assert (config.index_url, config.origin("index-url")) == ("https://env.invalid/simple", "PIP_PYPI_URL")
    assert (config.timeout, config.origin("timeout")) == (7.5, "PIP_DEFAULT_TIMEOUT")


def test_an_empty_value_in_a_later_file_leaves_pips_default():
    files = [conf("/a", **{"global": {"index-url": "https://a.invalid/simple"}}), conf("/b", **{"global": {"index-url": ""}})]
    assert merge(files, {}, None, IndexSettings(), lambda: "https://default.invalid/simple").origin("index-url") == "pip's default"
    with pytest.raises(UsageError, match="index-url: '' \\(from --index-url\\)"):
        merge([], {}, None, IndexSettings(index_url=""), never)


def test_defaults_are_pips_and_the_default_index_is_asked_only_when_needed():
    asked = []
    config = merge([], {}, None, IndexSettings(), lambda: asked.append(1) or "https://default.invalid/simple")
    assert (config.timeout, config.retries, config.proxy, config.cert) == (15.0, 5, None, None)
    assert config.index_urls() == ("https://default.invalid/simple",) and config.origin("index-url") == "pip's default"
    assert config.torch_index_base == DEFAULT_TORCH_INDEX_BASE and asked == [1]
    assert merge([], {}, None, IndexSettings(no_index=True), never).index_urls() == ()
    assert merge([], {"PIP_INDEX_URL": "https://x.invalid/simple"}, None, IndexSettings(), never).index_url == "https://x.invalid/simple"


def test_project_beats_pip_and_flags_beat_the_project(tmp_path):
    pip = [conf("/etc/pip.conf", **{"global": {"index-url": "https://pip.invalid/simple", "extra-index-url": "https://e1.invalid/simple https://e2.invalid/simple", "find-links": "/pip-links"}})]
    (tmp_path / "links").mkdir()
    project = ProjectSettings(
        str(tmp_path / "pyproject.toml"), index_url="https://project.invalid/simple", extra_index_urls=("https://p.invalid/simple",),
        find_links=("links", "https://l.invalid/"), torch_index_base="mirror",
    )
    (tmp_path / "mirror").mkdir()
    env = {"PIP_INDEX_URL": "https://env.invalid/simple", "CUDARESOLVE_TORCH_INDEX_BASE": "https://torch-env.invalid"}
    config = merge(pip, env, project, IndexSettings(), never)
    where = f"{tmp_path / 'pyproject.toml'} [tool.cudaresolve]"
    assert (config.index_url, config.origin("index-url")) == ("https://project.invalid/simple", where)
    assert config.extra_index_urls == ("https://p.invalid/simple",)
    assert config.find_links == (str(tmp_path / "links"), "https://l.invalid/")
    assert (config.torch_index_base, config.origin("torch-index-base")) == ((tmp_path / "mirror").as_uri(), where)
    flags = IndexSettings(index_url="https://flag.invalid/simple", extra_index_urls=(), find_links=("https://f.invalid/",), torch_index_base="file:///srv/torch/")
    config = merge(pip, env, project, flags, never)
    assert (config.index_url, config.origin("index-url")) == ("https://flag.invalid/simple", "--index-url")
    assert config.index_urls() == ("https://flag.invalid/simple",)  # the flag's empty list replaces them all
    assert config.find_links == ("https://f.invalid/",) and config.origin("find-links") == "--find-links"
    assert config.torch_variant_index("cu126") == "file:///srv/torch/whl/cu126"
    config = merge(pip, env, None, IndexSettings(), never)
    assert config.origin("extra-index-url") == "/etc/pip.conf [global]" and len(config.extra_index_urls) == 2
    assert (config.torch_index_base, config.origin("torch-index-base")) == ("https://torch-env.invalid", "CUDARESOLVE_TORCH_INDEX_BASE")


@pytest.mark.parametrize(
    "files, environ, flags, message",
    [
        ([], {"PIP_INDEX_URL": "ftp://x.invalid/"}, IndexSettings(), "index-url: 'ftp://x.invalid/' (from PIP_INDEX_URL) is not an http(s):// or file:// URL"),
        ([], {}, IndexSettings(extra_index_urls=("no/such/dir",)), "extra-index-url: 'no/such/dir' (from --extra-index-url) is not"),
        ([], {}, IndexSettings(torch_index_base="ftp://t"), "torch-index-base: 'ftp://t' (from --torch-index-base) is not"),
        ([conf("/p.conf", **{"global": {"no-index": "maybe"}})], {}, IndexSettings(), "no-index: 'maybe' (from /p.conf [global]) is not a boolean"),
        ([], {"PIP_TIMEOUT": "soon"}, IndexSettings(), "timeout: 'soon' (from PIP_TIMEOUT) is not a number of seconds"),
        ([], {"PIP_RETRIES": "1.5"}, IndexSettings(), "retries: '1.5' (from PIP_RETRIES) is not a whole number"),
        ([], {"PIP_RETRIES": "-1"}, IndexSettings(), "retries: '-1' (from PIP_RETRIES) is not a whole number, 0 or more"),
        # values pip's float() takes and then crashes on (a traceback from urllib3 or the socket)
        ([], {"PIP_DEFAULT_TIMEOUT": "nan"}, IndexSettings(), "timeout: 'nan' (from PIP_DEFAULT_TIMEOUT) is not a number of seconds, 0 or more"),
        ([], {"PIP_DEFAULT_TIMEOUT": "inf"}, IndexSettings(), "timeout: 'inf' (from PIP_DEFAULT_TIMEOUT) is not a number"),
        ([], {"PIP_DEFAULT_TIMEOUT": "1e400"}, IndexSettings(), "timeout: '1e400' (from PIP_DEFAULT_TIMEOUT) is not a number"),
        ([conf("/p.conf", **{"global": {"timeout": "-5"}})], {}, IndexSettings(), "timeout: '-5' (from /p.conf [global]) is not a number"),
        ([], {}, IndexSettings(index_url="http://[::1"), "index-url: 'http://[::1' (from --index-url) is not a valid URL (Invalid IPv6 URL)"),
        ([], {"PIP_EXTRA_INDEX_URL": "https://x:port/"}, IndexSettings(), "extra-index-url: 'https://x:port/' (from PIP_EXTRA_INDEX_URL) is not a valid URL"),
    ],
)
def test_a_bad_value_names_its_key_and_origin(files, environ, flags, message):
    with pytest.raises(UsageError) as raised:
        merge(files, {"PIP_INDEX_URL": "https://i.invalid/simple", **environ}, None, flags, never)
    assert str(raised.value).startswith(message) and "\n" not in str(raised.value)


def test_a_timeout_of_0_is_pips_no_socket_timeout():
    config = merge([], {"PIP_INDEX_URL": "https://i.invalid/simple", "PIP_DEFAULT_TIMEOUT": "0"}, None, IndexSettings(), never)
    assert config.timeout == 0.0 and Http(timeout=config.timeout).timeout is None


def test_a_directory_index_becomes_a_file_url(tmp_path, monkeypatch):
    (tmp_path / "simple").mkdir()
    monkeypatch.chdir(tmp_path)
    config = merge([], {}, None, IndexSettings(index_url="simple", extra_index_urls=(str(tmp_path),)), never)
    assert config.index_urls() == ((tmp_path / "simple").as_uri(), tmp_path.as_uri())


def test_a_malformed_pip_conf_is_one_line_naming_the_file(tmp_path):
    bad = write(tmp_path / "pip.conf", "index-url = https://x.invalid/simple\n")
    with pytest.raises(UsageError) as raised:
        read_pip_files([str(bad)])
    assert str(raised.value).startswith(f"pip configuration file {bad} does not parse: File contains no section headers")
    assert "\n" not in str(raised.value)
    # pip refuses it too.
    done = subprocess.run([sys.executable, "-m", "pip", "config", "list"], env={**os.environ, "PIP_CONFIG_FILE": str(bad)}, capture_output=True, text=True)
    assert done.returncode != 0 and "could not be loaded" in done.stderr


def test_project_table_is_read_and_checked(tmp_path):
    assert read_project(str(tmp_path)) is None
    write(tmp_path / "pyproject.toml", "[tool.cudaresolve]\nindex-url = 'https://p.invalid/simple'\nno-index = true\nextra-index-url = ['https://e.invalid/simple']\n")
    settings = read_project(str(tmp_path))
    assert settings == ProjectSettings(str(tmp_path / "pyproject.toml"), index_url="https://p.invalid/simple", extra_index_urls=("https://e.invalid/simple",), no_index=True)
    write(tmp_path / "pyproject.toml", "[tool.cudaresolve]\nextra-index-url = 'https://e.invalid/simple'\n")
    with pytest.raises(UsageError, match=r"pyproject.toml: tool.cudaresolve.extra-index-url: expected a list of strings"):
        read_project(str(tmp_path))
    write(tmp_path / "pyproject.toml", "[tool.cudaresolve\n")
    with pytest.raises(UsageError, match="pyproject.toml: not valid TOML"):
        read_project(str(tmp_path))


# -- torch routing ----------------------------------------------------------------------------------


def test_the_torch_family_is_routed_to_the_chosen_variant_index_only():
    assert torch.family() == ("torch", "torchvision", "torchaudio", "triton")
    config = merge([], {"PIP_INDEX_URL": "https://i.invalid/simple", "PIP_EXTRA_INDEX_URL": "https://e.invalid/simple"}, None, IndexSettings(torch_index_base="https://t.invalid/"), never)
    regular = ("https://i.invalid/simple", "https://e.invalid/simple")
    for name in ("torch", "TorchVision", "torchaudio", "triton"):
        assert config.indexes_for(name, "cu128") == ("https://t.invalid/whl/cu128",)
        assert config.indexes_for(name, None) == regular
    assert config.indexes_for("numpy", "cu128") == regular
    assert config.indexes_for("nvidia-cublas-cu12", "cu128") == regular
    offline = merge([], {}, None, IndexSettings(no_index=True, find_links=("/w",)), never)
    assert offline.indexes_for("numpy", "cu128") == () and offline.find_links == ("/w",)


@pytest.mark.parametrize("base", ["https://mirror.invalid/pt", "https://mirror.invalid/pt/", "file:///srv/pt", "file:///srv/pt/"])
def test_torch_variant_index_with_and_without_trailing_slash(base):
    config = merge([], {}, None, IndexSettings(no_index=True, torch_index_base=base), never)
    assert config.torch_variant_index("cu130") == base.rstrip("/") + "/whl/cu130"


def test_torch_base_from_env_project_flag_and_default(tmp_path):
    (tmp_path / "pt").mkdir()
    default = merge([], {}, None, IndexSettings(no_index=True), never)
    assert default.torch_variant_index("cu128") == f"{DEFAULT_TORCH_INDEX_BASE}/{torch.index_path('cu128')}"
    from_env = merge([], {"CUDARESOLVE_TORCH_INDEX_BASE": str(tmp_path / "pt") + "/"}, None, IndexSettings(no_index=True), never)
    assert from_env.torch_variant_index("cu128") == (tmp_path / "pt").as_uri() + "/whl/cu128"


# -- pip's default index ----------------------------------------------------------------------------


def test_the_default_index_comes_from_pip_and_not_from_its_configuration(env, venv):
    env["PIP_INDEX_URL"] = "file:///configured/simple"
    write(Path(env["HOME"]) / ".config/pip/pip.conf", "[install]\nindex-url = file:///configured-in-a-file/simple\n")
    text = pip_install_help(str(venv / "bin" / "python"), [PIP_HOME], env)
    url = parse_default_index(text, "python")
    assert url.startswith("https://") and url.endswith("/simple") and "configured" not in url
    assert url in " ".join(text.split())


def test_the_default_index_is_cached_per_interpreter_and_pip_version(env, tmp_path):
    calls = []

    def pip_help(python, site_packages, environ):
        calls.append(python)
        return "  -i, --index-url <url>   Base URL (default\n                  https://index.invalid/simple). More.\n  --extra-index-url <url>\n"

    site = tmp_path / "site"
    (site / "pip-23.2.1.dist-info").mkdir(parents=True)
    for _ in range(2):
        assert default_index("/py", [str(site)], env, pip_help) == "https://index.invalid/simple"
    assert calls == ["/py"]
    default_index("/other-py", [str(site)], env, pip_help)
    (site / "pip-23.2.1.dist-info").rename(site / "pip-24.2.dist-info")
    default_index("/py", [str(site)], env, pip_help)
    assert calls == ["/py", "/other-py", "/py"]
    default_index("/py", [str(tmp_path / "no-pip-here")], env, pip_help)
    default_index("/py", [str(tmp_path / "no-pip-here")], env, pip_help)
    assert len(calls) == 5  # pip's version unknown: nothing to key the cache by
    entries = list((tmp_path / "cache" / "pip-default-index").iterdir())
    assert len(entries) == 3
    for entry in entries:
        entry.write_text("garbage")
    default_index("/py", [str(site)], env, pip_help)
    assert len(calls) == 6



@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_fifo_or_directory_for_the_default_index_is_asked_again_and_healed(env, tmp_path, kind):
    def pip_help(python, site_packages, environ):
        return "  -i, --index-url <url>   Base URL (default https://index.invalid/simple).\n"

    site = tmp_path / "site"
    (site / "pip-23.2.1.dist-info").mkdir(parents=True)
    default_index("/py", [str(site)], env, pip_help)
    (entry,) = (tmp_path / "cache" / "pip-default-index").iterdir()
    plant(entry, kind)
    assert default_index("/py", [str(site)], env, pip_help) == "https://index.invalid/simple"  # not a wait
    assert entry.read_text() == "https://index.invalid/simple\n"


def test_index_config_asks_pip_once(env, venv, tmp_path):
    calls = []

    def pip_help(python, site_packages, environ):
        calls.append(python)
        return pip_install_help(python, [PIP_HOME], environ)

    python = str(venv / "bin" / "python")
    site = tmp_path / "site"
    (site / "pip-23.2.1.dist-info").mkdir(parents=True)
    first = index_config(python, str(venv), env, None, IndexSettings(), site_packages=[str(site)], pip_help=pip_help)
    second = index_config(python, str(venv), env, None, IndexSettings(), site_packages=[str(site)], pip_help=pip_help)
    assert first == second and first.origin("index-url") == "pip's default" and calls == [python]


def test_a_target_without_pip_says_to_pass_index_url(env, tmp_path):
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    python = str(bare / "bin" / "python")
    site_packages = next(bare.glob("lib/python*/site-packages"))
    with pytest.raises(UsageError) as raised:  # the site-packages given, as `lock --python` gives them
        index_config(python, str(bare), env, None, IndexSettings(), site_packages=[str(site_packages)])
    message = str(raised.value)
    assert message == (f"{python} cannot run pip (pip is not installed in {site_packages}), so pip's default index is "
                       "unknown; pass --index-url")  # each place once (before: the venv's site-packages twice)
    assert index_config(python, str(bare), env, None, IndexSettings(no_index=True)).index_urls() == ()


# -- the command line -------------------------------------------------------------------------------


def test_index_flags_on_inspect(env, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "pyproject.toml", "[tool.cudaresolve]\nextra-index-url = ['https://p.invalid/simple']\ntorch-index-base = 'https://t.invalid'\n")
    monkeypatch.setattr(os, "environ", env)
    args = build_parser().parse_args(
        ["inspect", "x", "--index-url", "https://i.invalid/simple", "--find-links", "/a", "--find-links", "/b"]
    )
    config = config_for(target_for_python(sys.executable), indexes(args), os.environ)
    assert config.index_urls() == ("https://i.invalid/simple", "https://p.invalid/simple")
    assert config.find_links == ("/a", "/b") and config.torch_variant_index("cu126") == "https://t.invalid/whl/cu126"
    assert config.origin("extra-index-url") == f"{tmp_path / 'pyproject.toml'} [tool.cudaresolve]"


def test_bad_index_input_through_main_is_one_line(capsys, env, tmp_path, monkeypatch):
    lib = write(tmp_path / "lib.so", "not elf")
    monkeypatch.setattr(os, "environ", env)
    assert main(["inspect", str(lib), "--index-url", "ftp://x.invalid/"]) == 3
    out, err = capsys.readouterr()
    assert out == "" and err == "cudaresolve: error: index-url: 'ftp://x.invalid/' (from --index-url) is not an http(s):// or file:// URL or an existing directory\n"
    bad = write(tmp_path / "bad.conf", "[global\n")
    env["PIP_CONFIG_FILE"] = str(bad)
    assert main(["inspect", str(lib), "--no-index"]) == 3
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"cudaresolve: error: pip configuration file {bad} does not parse") and err.count("\n") == 1


@pytest.mark.parametrize("variable, value, code, says", [
    ("PIP_DEFAULT_TIMEOUT", "nan", 3, "timeout: 'nan' (from PIP_DEFAULT_TIMEOUT) is not a number of seconds, 0 or more"),
    # pip's "no socket timeout": accepted, then each name fails on its own (inspect's exit 2)
    ("PIP_DEFAULT_TIMEOUT", "0", 2, "(demo): cannot connect"),
    ("PIP_INDEX_URL", "http://[::1", 3, "index-url: 'http://[::1' (from PIP_INDEX_URL) is not a valid URL (Invalid IPv6 URL)"),
])
def test_crashes_of_before_are_one_line_through_main(variable, value, code, says, capsys, env, monkeypatch):
    env.update({"PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_RETRIES": "0", variable: value})
    monkeypatch.setattr(os, "environ", env)
    assert main(["inspect", "demo==1.0", "http://[::1/demo-1.0-py3-none-any.whl"]) == code
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and err.count("\n") <= 1 and says in out + err
    if code == 2:
        assert "not a valid URL (Invalid IPv6 URL)" in out


def test_other_commands_do_not_take_index_flags(capsys):
    assert main(["probe", "--index-url", "https://i.invalid/simple"]) == 3
    assert "unrecognized arguments: --index-url" in capsys.readouterr().err


def test_a_retries_count_past_floats_range_is_a_number_not_a_crash():
    """pip takes any whole number for retries; one past a float's range (the fuzzer found it) was an
    OverflowError in the finiteness check, which only a timeout needs."""
    environ = {"HOME": "/nonexistent", "PIP_RETRIES": "9" * 400}
    config = merge((), environ, None, IndexSettings(), lambda: "https://default.invalid/simple")
    assert config.retries == int("9" * 400)
    with pytest.raises(UsageError, match=r"retries: '-1' \(from PIP_RETRIES\) is not a whole number, 0 or more"):
        merge((), {**environ, "PIP_RETRIES": "-1"}, None, IndexSettings(), lambda: "https://default.invalid/simple")


def test_a_requirements_files_trusted_host_reaches_the_index_unless_a_flag_replaces_it(env, tmp_path, monkeypatch):
    """Every index option of a -r file stands where no flag is given, trusted hosts included."""
    from cudaresolve.resolve.requirements import read_requirements_file

    monkeypatch.setattr(os, "environ", env)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "r.txt").write_text("--index-url http://files.invalid/simple\n--trusted-host files.invalid\nx\n")
    files = read_requirements_file(str(tmp_path / "r.txt"), {}).index_options
    target = target_for_python(sys.executable)
    config = config_for(target, indexes(build_parser().parse_args(["lock", "x"]), files), os.environ)
    assert (config.index_url, config.trusted_hosts, config.origin("trusted-host")) == (
        "http://files.invalid/simple", ("files.invalid",), "--trusted-host")
    flags = build_parser().parse_args(["lock", "x", "--trusted-host", "other.invalid", "--timeout", "3", "--retries", "1"])
    config = config_for(target, indexes(flags, files), os.environ)
    assert (config.trusted_hosts, config.timeout, config.retries) == (("other.invalid",), 3.0, 1)
    with pytest.raises(UsageError, match=r"timeout: 'soon' \(from --timeout\) is not a number of seconds"):
        indexes(build_parser().parse_args(["lock", "x", "--timeout", "soon"]))
