"""The lock's files: pylock.toml (read back by us, by tomllib and by uv as a second PEP 751 reader),
and pip's constraints and hashed requirements formats with pip itself as the oracle."""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cudaresolve.arch import ComputeCapability
from cudaresolve.errors import UsageError
from cudaresolve.host.facts import Driver, Gpu, HostFacts, MigDevice, Note
from cudaresolve.output.lock import (
    constraints_txt,
    lock_file_name_ok,
    pylock_toml,
    read_pylock,
    requirements_txt,
    write_atomically,
)
from cudaresolve.resolve.lock import Decision, Lock, LockedPackage, LockedWheel

from index_server import IndexServer, make_wheel

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib


def _host() -> dict:
    facts = HostFacts(
        system="Linux",
        machine="x86_64",
        driver=Driver("580.65.06", "override:--driver", "13.0", "derived:drivers"),
        gpus=(
            Gpu(ComputeCapability.parse("8.6"), "override:--gpu"),
            Gpu(ComputeCapability.parse("9.0"), "nvml", 1, "H100", 81559, "GPU-1", True, (MigDevice("MIG-1", "1g.10gb", 9728),)),
        ),
        glibc="2.36",
        notes=(Note("nvml", "absent", "libnvidia-ml.so.1: cannot open"),),
    )
    return json.loads(facts.to_json())


def _wheel(name: str, version: str, base: str = "https://files.example.invalid") -> LockedWheel:
    filename = f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    return LockedWheel(filename, f"{base}/{filename}", hashlib.sha256(filename.encode()).hexdigest(), 1234)


def _lock(**changes) -> Lock:
    packages = (
        LockedPackage("cupy-cuda12x", "13.6.0", "https://index.example.invalid/simple", _wheel("cupy-cuda12x", "13.6.0"),
                      None, "the CuPy build for CUDA 12, which driver 580 runs"),
        LockedPackage("numpy", "2.2.6", "https://index.example.invalid/simple", _wheel("numpy", "2.2.6"),
                      'python_version >= "3.10"', "newest that fits"),
        LockedPackage("torch", "2.11.0+cu130", "https://torch.example.invalid/whl/cu130", _wheel("torch", "2.11.0+cu130"),
                      None, 'cu130: driver 580 supports CUDA 13.0; "quotes" and \\ backslashes'),
        LockedPackage("my-local-build", "0.1", None, None, None, "installed from a local build; kept"),
    )
    fields = dict(
        packages=packages,
        requires_python=">=3.10",
        hosts=(_host(),),
        host_labels=("gpu-box.json",),
        index_urls=("https://index.example.invalid/simple",),
        decisions=(
            Decision("torch", "torch 2.11.0+cu130", (("torch 2.11.0+cu128", "cu128 misses sm_100 PTX\nsecond line"),)),
            Decision("cupy-cuda13x", None, ()),
        ),
        created_by="cudaresolve",
    )
    fields.update(changes)
    return Lock(**fields)


def _same_packages(a: Lock, b: Lock) -> bool:
    key = lambda p: (p.name, p.version, p.index or "", p.marker or "")
    return sorted(a.packages, key=key) == sorted(b.packages, key=key)


# -- pylock.toml ---------------------------------------------------------------------------------


def test_pylock_has_pep751_shape():
    data = tomllib.loads(pylock_toml(_lock()))
    assert data["lock-version"] == "1.0"
    assert data["created-by"] == "cudaresolve"
    assert data["requires-python"] == ">=3.10"
    names = [p["name"] for p in data["packages"]]
    assert names == ["cupy-cuda12x", "numpy", "torch"]  # sorted; the kept build has no source to list
    torch = data["packages"][2]
    assert torch["version"] == "2.11.0+cu130"
    assert torch["index"] == "https://torch.example.invalid/whl/cu130"
    assert "marker" not in torch and data["packages"][1]["marker"] == 'python_version >= "3.10"'
    (wheel,) = torch["wheels"]
    assert set(wheel) == {"name", "url", "size", "hashes"}
    assert wheel["hashes"] == {"sha256": _wheel("torch", "2.11.0+cu130").sha256}
    assert torch["tool"]["cudaresolve"]["reason"].startswith("cu130")
    tool = data["tool"]["cudaresolve"]
    assert tool["kept"] == [{"name": "my-local-build", "version": "0.1", "reason": "installed from a local build; kept"}]
    assert tool["hosts"][0]["label"] == "gpu-box.json"
    assert tool["hosts"][0]["facts"]["gpus"][1]["mig_devices"][0]["uuid"] == "MIG-1"
    assert tool["decisions"][0]["rejected"][0]["reason"] == "cu128 misses sm_100 PTX\nsecond line"
    # A single-use lock: the keys that would declare extras or groups are not written.
    assert not {"extras", "dependency-groups", "default-groups", "environments"} & set(data)


def test_pylock_names_are_normalized():
    lock = _lock(packages=(LockedPackage("Cupy_CUDA12x", "13.6.0", None, _wheel("cupy-cuda12x", "13.6.0"), None, ""),))
    assert tomllib.loads(pylock_toml(lock))["packages"][0]["name"] == "cupy-cuda12x"


def test_pylock_round_trip(tmp_path):
    lock = _lock()
    path = tmp_path / "pylock.toml"
    path.write_text(pylock_toml(lock))
    back = read_pylock(str(path))
    assert _same_packages(back, lock)
    assert back.hosts == lock.hosts  # the nulls TOML cannot hold are back
    assert HostFacts.from_dict(back.hosts[0]) == HostFacts.from_dict(lock.hosts[0])
    assert (back.host_labels, back.index_urls, back.decisions) == (lock.host_labels, lock.index_urls, lock.decisions)
    assert (back.requires_python, back.created_by) == (lock.requires_python, lock.created_by)
    assert pylock_toml(back) == pylock_toml(lock)


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_any_reason_survives_toml(tmp_path_factory, text):
    lock = _lock(
        packages=(LockedPackage("numpy", "2.2.6", None, _wheel("numpy", "2.2.6"), None, text),),
        decisions=(Decision(text or "x", text, ((text, text),)),),
        host_labels=(text,),
    )
    data = tomllib.loads(pylock_toml(lock))
    if text:
        assert data["packages"][0]["tool"]["cudaresolve"]["reason"] == text
    assert data["tool"]["cudaresolve"]["decisions"][0]["rejected"][0] == {"candidate": text, "reason": text}
    assert data["tool"]["cudaresolve"]["hosts"][0]["label"] == text


def test_wheel_without_hash_is_refused():
    lock = _lock(packages=(LockedPackage("numpy", "2.2.6", None, LockedWheel("numpy-2.2.6-py3-none-any.whl", "file:///w/numpy-2.2.6-py3-none-any.whl", None, None), None, ""),))
    with pytest.raises(ValueError, match="no sha256"):
        pylock_toml(lock)
    with pytest.raises(ValueError, match="no sha256"):
        requirements_txt(lock)
    assert "numpy==2.2.6" in constraints_txt(lock)  # a constraint pins the version only


FOREIGN = """\
lock-version = '1.0'
environments = ["sys_platform == 'linux'", "sys_platform == 'win32'"]
requires-python = '>=3.9'
created-by = 'some-other-locker'

[[packages]]
name = 'Attrs'
version = '25.1.0'
index = 'https://index.example.invalid/simple'
wheels = [
  {name = 'attrs-25.1.0-py3-none-any.whl', upload-time = 2025-01-25T11:30:10.164985+00:00, url = 'https://files.example.invalid/attrs-25.1.0-py3-none-any.whl', size = 63152, hashes = {sha256 = 'c75a69e28a550a7e93789579c22aa26b0f5b83b75dc4e08fe092980051e1090a'}},
]
[[packages.attestation-identities]]
kind = 'GitHub'

[[packages]]
name = 'numpy'
index = 'https://mirror.example.invalid/simple'
wheels = [
  {url = 'https://files.example.invalid/numpy-2.2.3-cp312-cp312-win_amd64.whl', hashes = {sha256 = '83807d445817326b4bcdaaaf8e8e9f1753da04341eceec705c001ff342002e5d'}},
  {path = 'wheels/numpy-2.2.3-cp312-cp312-manylinux_2_17_x86_64.whl', hashes = {sha512 = 'abc'}},
]

[[packages]]
name = 'spam'
version = '1.0'
sdist = {name = 'spam-1.0.tar.gz', url = 'https://files.example.invalid/spam-1.0.tar.gz', hashes = {sha256 = '00'}}

[tool.some-other-locker]
command = ['lock']
"""


def test_reads_another_tools_lock(tmp_path):
    path = tmp_path / "pylock.toml"
    path.write_text(FOREIGN)
    lock = read_pylock(str(path))
    assert lock.created_by == "some-other-locker" and lock.requires_python == ">=3.9"
    assert (lock.hosts, lock.host_labels, lock.decisions) == ((), (), ())
    assert lock.index_urls == ("https://index.example.invalid/simple", "https://mirror.example.invalid/simple")
    by_file = {p.wheel.filename: p for p in lock.packages if p.wheel}
    assert by_file["attrs-25.1.0-py3-none-any.whl"].name == "attrs"
    windows = by_file["numpy-2.2.3-cp312-cp312-win_amd64.whl"]
    assert windows.version == "2.2.3"  # from the file name: this entry has no version key
    linux = by_file["numpy-2.2.3-cp312-cp312-manylinux_2_17_x86_64.whl"]
    assert linux.wheel.url == (tmp_path / "wheels" / linux.wheel.filename).as_uri()  # relative to the lock
    assert linux.wheel.sha256 is None and linux.wheel.size is None  # only a sha512 recorded
    (spam,) = [p for p in lock.packages if p.name == "spam"]
    assert spam.wheel is None and "sdist" in spam.reason
    # Written again, the two numpy wheels are one entry again, as PEP 751 needs.
    with pytest.raises(ValueError, match="no sha256"):
        pylock_toml(lock)
    fixed = Lock(**{**lock.__dict__, "packages": tuple(p for p in lock.packages if p.wheel is None or p.wheel.sha256)})
    data = tomllib.loads(pylock_toml(fixed))
    assert [p["name"] for p in data["packages"]] == ["attrs", "numpy"]


@pytest.mark.parametrize(
    "text, where",
    [
        ("lock-version = '1.0'\n[[packages]]\nname = 'a'\nversion = '1'\n", "created-by: missing"),
        ("lock-version = '2.0'\ncreated-by = 'x'\npackages = []\n", "lock-version: '2.0' is not supported"),
        ("lock-version = 1\ncreated-by = 'x'\npackages = []\n", "lock-version: expected a string"),
        ("lock-version = '1.0'\ncreated-by = 'x'\n", "packages: missing"),
        ("lock-version = '1.0'\ncreated-by = 'x'\npackages = [1]\n", "packages[0]: expected a table"),
        ("lock-version = '1.0'\ncreated-by = 'x'\n[[packages]]\nversion = '1'\n", "packages[0].name: missing"),
        ("lock-version = '1.0'\ncreated-by = 'x'\n[[packages]]\nname = 'a'\nversion = 'not a version'\nwheels = []\n", "packages[0].version: not a valid version"),
        ("lock-version = '1.0'\ncreated-by = 'x'\n[[packages]]\nname = 'a'\nmarker = 'os_name ==='\n", "packages[0].marker: not a valid marker"),
        ("lock-version = '1.0'\ncreated-by = 'x'\n[[packages]]\nname = 'a'\n", "packages[0]: a has no source"),
        ("lock-version = '1.0'\ncreated-by = 'x'\n[[packages]]\nname = 'a'\nwheels = [{name = 'a-1-py3-none-any.whl', hashes = {sha256 = 'x'}}]\n", "packages[0].wheels[0]: needs url or path"),
        ("lock-version = '1.0'\ncreated-by = 'x'\n[[packages]]\nname = 'a'\nwheels = [{url = 'https://x.invalid/a-1-py3-none-any.whl'}]\n", "packages[0].wheels[0].hashes: missing"),
        ("lock-version = '1.0'\ncreated-by = 'x'\n[[packages]]\nname = 'a'\nwheels = [{url = 'https://x.invalid/a-1-py3-none-any.whl', hashes = {}}]\n", "at least one hash"),
        ("lock-version = '1.0'\ncreated-by = 'x'\n[[packages]]\nname = 'a'\nwheels = [{url = 'https://x.invalid/a.tar.gz', hashes = {sha256 = 'x'}}]\n", "packages[0].wheels[0].name: 'a.tar.gz' is not a wheel"),
        ("lock-version = '1.0'\ncreated-by = 'x'\n[[packages]]\nname = 'a'\nwheels = [{url = 'https://x.invalid/a-1-py3-none-any.whl', size = '3', hashes = {sha256 = 'x'}}]\n", "packages[0].wheels[0].size: expected an integer"),
        ("lock-version = '1.0'\ncreated-by = 'x'\npackages = []\n[[tool.cudaresolve.hosts]]\nlabel = 'h'\n", "tool.cudaresolve.hosts[0].facts: missing"),
        ("lock-version = '1.0'\ncreated-by = 'x'\npackages = []\n[[tool.cudaresolve.hosts]]\nlabel = 'h'\nfacts = {schema = 1, system = 'Linux'}\n", "tool.cudaresolve.hosts[0].facts"),
        ("lock-version = '1.0'\ncreated-by = 'x'\npackages = []\n[[tool.cudaresolve.decisions]]\nname = 'a'\nrejected = [{candidate = 'a 1'}]\n", "tool.cudaresolve.decisions[0].rejected[0].reason: missing"),
        ("lock-version = '1.0'\ncreated-by = 'x'\npackages = []\n[tool.cudaresolve]\nindex-urls = [1]\n", "tool.cudaresolve.index-urls[0]: expected a string"),
        ("lock-version = '1.0\n", "not valid TOML"),
    ],
)
def test_malformed_pylock_names_file_and_key(tmp_path, text, where):
    path = tmp_path / "pylock.toml"
    path.write_text(text)
    with pytest.raises(UsageError) as error:
        read_pylock(str(path))
    message = str(error.value)
    assert message.startswith(f"{path}: ") and where in message and "\n" not in message


def test_missing_pylock(tmp_path):
    with pytest.raises(UsageError, match="cannot read .*pylock.toml"):
        read_pylock(str(tmp_path / "pylock.toml"))


@pytest.mark.parametrize("name", ["-", "pylock.toml", "pylock.gpu.toml", "out/pylock.cu130-x86_64.toml", "pylock.dev_box.toml"])
def test_lock_file_names_allowed(name):
    lock_file_name_ok(name)


@pytest.mark.parametrize("name", ["lock.toml", "pylock.a.b.toml", "pylock..toml", "PYLOCK.toml", "pylock.gpu.TOML", "pylock.toml/", "pylock.gpu.toml.bak", "requirements.txt"])
def test_lock_file_names_refused(name):
    with pytest.raises(UsageError, match="pylock.toml or pylock.<name>.toml"):
        lock_file_name_ok(name)


def test_write_atomically(tmp_path):
    path = tmp_path / "pylock.toml"
    write_atomically(str(path), "first\n")
    assert path.read_text() == "first\n"
    path.chmod(0o640)
    write_atomically(str(path), "second ü\n")
    assert path.read_text(encoding="utf-8") == "second ü\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640  # the replaced file's mode is kept
    assert os.listdir(tmp_path) == ["pylock.toml"]  # no temporary file left behind
    with pytest.raises(UsageError, match="cannot write .*missing"):
        write_atomically(str(tmp_path / "missing" / "pylock.toml"), "x")


def test_new_file_gets_the_umask_mode(tmp_path):
    old = os.umask(0o027)
    try:
        write_atomically(str(tmp_path / "pylock.toml"), "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "pylock.toml").stat().st_mode) == 0o640


# -- pip's formats, text --------------------------------------------------------------------------


def test_constraints_text():
    text = constraints_txt(_lock())
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert lines == [
        "--index-url https://index.example.invalid/simple",
        "--extra-index-url https://torch.example.invalid/whl/cu130",
        "cupy-cuda12x==13.6.0",
        "my-local-build==0.1",
        'numpy==2.2.6 ; python_version >= "3.10"',
        "torch==2.11.0+cu130",
    ]


def test_requirements_text():
    lock = _lock()
    text = requirements_txt(lock)
    torch = _wheel("torch", "2.11.0+cu130").sha256
    assert f"torch==2.11.0+cu130 \\\n    --hash=sha256:{torch}\n" in text
    assert "# kept installed, no file to hash: my-local-build==0.1" in text
    assert not [line for line in text.splitlines() if line.startswith("my-local-build")]


def test_no_index_and_find_links_for_a_lock_from_local_files(tmp_path):
    wheel = LockedWheel("a-1.0-py3-none-any.whl", (tmp_path / "a-1.0-py3-none-any.whl").as_uri(), "0" * 64, 1)
    lock = _lock(packages=(LockedPackage("a", "1.0", None, wheel, None, ""),), index_urls=())
    assert constraints_txt(lock).splitlines()[1:] == ["--no-index", f"--find-links {tmp_path}", "a==1.0"]


# -- pip as the oracle -----------------------------------------------------------------------------


def _pip_env() -> dict:
    """This machine's pip configuration left out: only what the files say may steer pip."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def pip_resolves(tmp_path: Path, *args: str) -> dict[str, str]:
    """name -> version pip would install, from `pip install --dry-run --report`; fails on pip's error."""
    report = tmp_path / "report.json"
    result = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--no-cache-dir", "--report", str(report), *args],
        capture_output=True,
        text=True,
        env=_pip_env(),
    )
    assert result.returncode == 0, result.stderr
    return {item["metadata"]["name"]: item["metadata"]["version"] for item in json.loads(report.read_text())["install"]}


@pytest.fixture
def indexes():
    """A main index and two torch-style variant indexes on 127.0.0.1, each with its own wheels.

    The main index also offers torch 2.1.0+cu121 and newer releases of everything, so pip left to
    itself would pick other files than the lock: only the pins and index lines keep it exact.
    """
    servers = {"main": IndexServer(), "cu118": IndexServer(), "cu121": IndexServer()}
    files = {}
    for where, name, version, requires in [
        ("main", "app", "1.0", ["helper>=1", "torch>=2"]),
        ("main", "helper", "1.0", []),
        ("main", "helper", "1.5", []),
        ("main", "torch", "2.1.0+cu121", []),
        ("main", "torch", "2.2.0", []),
        ("cu118", "torch", "2.1.0+cu118", []),
        ("cu121", "torch", "2.1.0+cu121", []),
    ]:
        filename, data = make_wheel(name, version, requires=requires)
        servers[where].add(filename, data)
        files[(where, name, version)] = (filename, data)
    urls = {where: server.start() + "/simple" for where, server in servers.items()}
    yield urls, files
    for server in servers.values():
        server.stop()


def _wheel_of(urls, files, key) -> LockedWheel:
    """The LockedWheel of a file the `indexes` fixture serves."""
    filename, data = files[key]
    return LockedWheel(filename, urls[key[0]].replace("/simple", "/files/") + filename, hashlib.sha256(data).hexdigest(), len(data))


def _locked(urls, files, picks, tamper: str = "") -> Lock:
    packages = []
    for where, name, version in picks:
        wheel = _wheel_of(urls, files, (where, name, version))
        if name == tamper:
            wheel = LockedWheel(wheel.filename, wheel.url, "0" * 64, wheel.size)
        packages.append(LockedPackage(name, version, urls[where], wheel, None, "test"))
    return _lock(packages=tuple(packages), index_urls=(urls["main"],), hosts=(), host_labels=(), decisions=())


PICKS = [("main", "app", "1.0"), ("main", "helper", "1.0"), ("cu118", "torch", "2.1.0+cu118")]


def test_pip_installs_exactly_the_constraints(tmp_path, indexes):
    urls, files = indexes
    constraints = tmp_path / "constraints.txt"
    constraints.write_text(constraints_txt(_locked(urls, files, PICKS)))
    # Only the constraints file names the indexes: pip honours index options written inside it.
    assert pip_resolves(tmp_path, "-c", str(constraints), "app") == {"app": "1.0", "helper": "1.0", "torch": "2.1.0+cu118"}
    # The oracle can disagree: without the lock pip takes the newest helper and torch.
    assert pip_resolves(tmp_path, "--index-url", urls["main"], "app") == {"app": "1.0", "helper": "1.5", "torch": "2.2.0"}


def test_pip_installs_the_hashed_requirements(tmp_path, indexes):
    urls, files = indexes
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(requirements_txt(_locked(urls, files, PICKS)))
    assert pip_resolves(tmp_path, "--require-hashes", "-r", str(requirements)) == {"app": "1.0", "helper": "1.0", "torch": "2.1.0+cu118"}


def test_pip_refuses_a_wrong_hash(tmp_path, indexes):
    urls, files = indexes
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(requirements_txt(_locked(urls, files, PICKS, tamper="helper")))
    with pytest.raises(AssertionError, match="THESE PACKAGES DO NOT MATCH THE HASHES"):
        pip_resolves(tmp_path, "--require-hashes", "-r", str(requirements))


# -- uv as a second PEP 751 reader -----------------------------------------------------------------


def uv_installs(uv: Path, tmp_path: Path, lock_path: Path) -> dict[str, str]:
    """name -> version uv installs from the pylock.toml into a new, empty venv (files downloaded, hashes checked)."""
    target = tmp_path / "target"
    venv.create(target, with_pip=False)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "PIP_"))}
    env["UV_CACHE_DIR"] = str(tmp_path / "uv-cache")
    common = ["--no-config", "--preview-features", "pylock", "--python", str(target / "bin" / "python")]
    result = subprocess.run([str(uv), "pip", "install", *common, "-r", str(lock_path)], capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    listed = subprocess.run([str(uv), "pip", "list", *common, "--format", "json"], capture_output=True, text=True, env=env, check=True)
    return {item["name"]: item["version"] for item in json.loads(listed.stdout)}


def test_uv_installs_exactly_the_pylock(tmp_path, indexes, uv):
    urls, files = indexes
    path = tmp_path / "pylock.toml"
    path.write_text(pylock_toml(_locked(urls, files, PICKS)))
    assert uv_installs(uv, tmp_path, path) == {"app": "1.0", "helper": "1.0", "torch": "2.1.0+cu118"}


def test_uv_refuses_a_wrong_hash_in_the_pylock(tmp_path, indexes, uv):
    urls, files = indexes
    path = tmp_path / "pylock.toml"
    path.write_text(pylock_toml(_locked(urls, files, PICKS, tamper="torch")))
    with pytest.raises(AssertionError, match="Hash mismatch"):
        uv_installs(uv, tmp_path, path)


def test_uv_reads_the_marker_and_our_tool_table(tmp_path, indexes, uv):
    """A package whose marker does not hold is skipped, and the [tool.cudaresolve] table with the
    host facts and decisions does not disturb another reader."""
    urls, files = indexes
    lock = _locked(urls, files, PICKS)
    helper = lock.packages[1]
    skipped = LockedPackage(helper.name, "1.5", helper.index, _wheel_of(urls, files, ("main", "helper", "1.5")), 'sys_platform == "win32"', "")
    chosen = LockedPackage(helper.name, helper.version, helper.index, helper.wheel, 'sys_platform != "win32"', "")
    lock = Lock(**{**_lock().__dict__, "packages": (lock.packages[0], skipped, chosen, lock.packages[2]), "index_urls": (urls["main"],)})
    path = tmp_path / "pylock.toml"
    path.write_text(pylock_toml(lock))
    assert "[[tool.cudaresolve.hosts]]" in path.read_text()
    assert uv_installs(uv, tmp_path, path) == {"app": "1.0", "helper": "1.0", "torch": "2.1.0+cu118"}

