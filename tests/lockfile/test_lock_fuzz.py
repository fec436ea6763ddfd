"""The lock reader over mutated and generated pylock.toml files: a Lock or the project's input error,
nothing else; and every lock it reads goes through the writers, where pip's own line reader finds
nothing in the requirements and constraints text but the lock's pins, their hashes and index options.

Inputs: real locks we write (and another tool's), changed in their structure (a value replaced by a
control character, a pip option, another type, an integer past Python's digit limit, arrays nested
past the parser's depth; a key removed) or in their bytes (inserted, deleted, duplicated, replaced),
and bytes from nothing. About 2,400 cases in a few seconds.
"""

from __future__ import annotations

import re
import sys

import pytest
from budget import budgeted
from hostile_locks import toml_text
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from packaging.markers import Marker
from packaging.version import Version
from test_lock_files import FOREIGN, _lock, _package, pylock_toml

from cudaresolve.errors import CudaresolveError
from cudaresolve.lockfile.fields import LockFileError
from cudaresolve.lockfile.pip import constraints_txt, requirements_txt
from cudaresolve.lockfile.pylock import parse_pylock
from cudaresolve.resolve.lock import Lock, LockedPackage, LockedWheel, Reason, ReasonKind
from cudaresolve.resolve.universal import Part, merged

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

pip_req_file = pytest.importorskip("pip._internal.req.req_file", reason="pip's own requirements-file reader is the oracle")

# Stand-ins put into the text after writing: arrays nested up to past the parser's depth, and an
# integer past Python's 4,300-digit limit for int(str) (which cannot be made into text in Python).
DEEP = "\0deep\0"
HUGE = "\0huge\0"
FAST = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                                       HealthCheck.function_scoped_fixture])


def _seeds() -> list[str]:
    local = LockedWheel("local_build-1.0-py3-none-any.whl", "file:///wheels/my%20dir/local_build-1.0-py3-none-any.whl", "c" * 64, 7)
    conda = LockedPackage("nvidia-nvjitlink-cu12", Version("12.8.93"), None, (), None, Reason(ReasonKind.CONDA),
                          provided_by="libnvjitlink 12.8.93 (conda)")
    mixed = _lock(packages=_lock().packages + (_package("local-build", "1.0", None, local, None, ""), conda))
    # a universal lock: numpy forked by Python, torch's wheels for two machines in one entry
    def target(machine: str, python: str, numpy: str) -> Part:
        torch = _package("torch", "2.11.0+cu130", None, LockedWheel(f"torch-2.11.0+cu130-cp312-cp312-manylinux_2_28_{machine}.whl",
                         f"https://files.example.invalid/torch-2.11.0%2Bcu130-cp312-cp312-manylinux_2_28_{machine}.whl", {"x86_64": "e", "aarch64": "a"}[machine] * 64, 9), None, "")
        return Part(f'platform_machine == "{machine}" and python_version == "{python}"',
                    _lock(packages=(torch, _package("numpy", numpy, None, LockedWheel(f"numpy-{numpy}-py3-none-any.whl",
                          f"https://files.example.invalid/numpy-{numpy}-py3-none-any.whl", "d" * 64, 3), None, "")), decisions=(), major=None))
    universal = merged([target("x86_64", "3.11", "2.2.6"), target("aarch64", "3.12", "2.3.1")])
    return [pylock_toml(_lock()), pylock_toml(mixed), FOREIGN, pylock_toml(universal)]


SEEDS = _seeds()
PARSED = [tomllib.loads(seed) for seed in SEEDS]
PATH = "/fuzz/pylock.toml"  # where the lock is said to be: relative wheel paths resolve below it
HOSTILE = st.sampled_from(["\n", "\r", "\0", "\x1b[2J", "\u2028", "\x85", " --index-url http://127.0.0.1:9/simple", " -r /etc/passwd",
                           "${HOME}", " #", "\\", "'", '"', "%", "%zz", "{", "é", "0" * 5000])
VALUES = st.one_of(
    st.text(max_size=40),
    HOSTILE,
    st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([-1, 0, 2**40 + 1, 2**63]),
    st.floats(),
    st.booleans(),
    st.sampled_from([DEEP, HUGE]),
    st.lists(st.one_of(st.text(max_size=5), st.integers()), max_size=3),
    st.dictionaries(st.text(max_size=8), st.one_of(st.text(max_size=5), st.integers()), max_size=3),
)


def _mutate(data: object, draw) -> object:
    """`data` (parsed TOML) with one value somewhere in it replaced, changed or removed."""
    if isinstance(data, dict) and data:
        key = draw(st.sampled_from(sorted(data)))
        choice = draw(st.integers(0, 5))
        if choice == 0:
            return {k: v for k, v in data.items() if k != key}
        if choice == 1 or not isinstance(data[key], (dict, list, str)):
            return {**data, key: draw(VALUES)}
        return {**data, key: _mutate(data[key], draw)}
    if isinstance(data, list) and data:
        i = draw(st.integers(0, len(data) - 1))
        return data[:i] + [_mutate(data[i], draw) if draw(st.booleans()) else draw(VALUES)] + data[i + 1:]
    if isinstance(data, str):
        at = draw(st.integers(0, len(data)))
        return data[:at] + draw(HOSTILE) + data[at:]
    return draw(VALUES)


@st.composite
def structured(draw) -> bytes:
    data = draw(st.sampled_from(PARSED))  # _mutate makes new containers along its path, never changes these
    for _ in range(draw(st.integers(1, 3))):
        data = _mutate(data, draw)
    depth = draw(st.sampled_from([2, 50, 900, 5000]))
    text = toml_text(data).replace('"\\u0000deep\\u0000"', "[" * depth + "]" * depth)
    return text.replace('"\\u0000huge\\u0000"', "9" * 4400).encode()


@st.composite
def damaged(draw) -> bytes:
    data = bytearray(draw(st.sampled_from(SEEDS)).encode())
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        op = draw(st.integers(0, 3))
        if op == 0:
            data[at:at] = draw(st.binary(min_size=1, max_size=8) | HOSTILE.map(str.encode))
        elif op == 1:
            del data[at:at + draw(st.integers(1, 64))]
        elif op == 2:
            data[at:at] = data[at:at + draw(st.integers(1, 200))]
        elif at < len(data):
            data[at] = draw(st.integers(0, 255))
    return bytes(data)


# -- the oracle --------------------------------------------------------------------------------------

_OPTION = re.compile(r"--(?:index-url|extra-index-url|find-links) [A-Za-z0-9\-._~:/?#\[\]@!$&()*+,;=%]+|--no-index")
_HASH = re.compile(r"--hash=sha256:[0-9a-f]{64}")
_PIN = re.compile(r"([a-z0-9]+(?:-[a-z0-9]+)*)==([a-z0-9.+!]+)(?: ; (.+))?")


def _pip_sees(text: str, lock: Lock, hashed: bool) -> None:
    """What pip's requirements-file reader makes of `text`: every line an index option, or a pin of a
    package of `lock` (with the hashes of its wheels when `hashed`) and nothing else."""
    for line in text.split("\n"):
        assert not line.startswith(" ") or _HASH.fullmatch(line.strip(" \\")), line
    packages = {(p.name, str(p.version)): p for p in lock.packages}
    pins = []
    for _, line in pip_req_file.preprocess(text):
        requirement, options = pip_req_file.break_args_options(line)
        if not requirement.strip():
            assert _OPTION.fullmatch(options.strip()), line
            continue
        pin = _PIN.fullmatch(requirement.strip())
        assert pin, line
        name, version, marker = pin.groups()
        package = packages[(name, version)]
        assert marker == package.marker, line
        if marker:
            Marker(marker)
        words = options.split()
        assert all(_HASH.fullmatch(word) for word in words), line
        if hashed:
            wheels = {w.sha256 for p in lock.packages if (p.name, str(p.version), p.marker) == (name, version, marker) for w in p.wheels}
            assert {word.split(":", 1)[1] for word in words} == wheels, line
        else:
            assert not words, line
        pins.append((name, version, marker))
    assert len(pins) == len(set(pins)), text


def _through_the_writers(lock: Lock) -> None:
    """Every read lock is written again: pip's files hold only its pins and index options, and its
    pylock.toml reads back as the same lock. A writer may refuse only what it cannot write: a wheel
    without a sha256, an entry with only another source, and (pip's files) a universal lock's
    several entries of one name."""
    documented = re.compile(r"has no sha256|cudaresolve writes wheels only|which cudaresolve does not install|holds one version per name")
    for writer, hashed in ((requirements_txt, True), (constraints_txt, False)):
        try:
            text = writer(lock, origin=PATH)
        except LockFileError as exc:
            assert documented.search(str(exc)), exc
            continue
        _pip_sees(text, lock, hashed)
    try:
        written = pylock_toml(lock)
    except LockFileError as exc:
        assert documented.search(str(exc)), exc
        return
    again = parse_pylock(written.encode(), PATH)
    def key(p):
        return (p.name, str(p.version), p.index or "", p.marker or "", ",".join(sorted(w.filename for w in p.wheels)))
    assert sorted(again.packages, key=key) == sorted(lock.packages, key=key)
    assert (again.index_urls, again.decisions, again.hosts, again.major) == (lock.index_urls, lock.decisions, lock.hosts, lock.major)
    assert (again.environments, again.forks, again.majors) == (lock.environments, lock.forks, lock.majors)


def _check(data: bytes) -> None:
    try:
        lock = parse_pylock(data, PATH)
    except CudaresolveError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 2000, str(exc)
        return
    _through_the_writers(lock)


def test_the_seeds_read_and_go_through_the_writers():
    for seed in SEEDS:
        _through_the_writers(parse_pylock(seed.encode(), PATH))


@settings(FAST, max_examples=1200)
@given(structured())
@budgeted
def test_structured_mutations(data):
    _check(data)


@settings(FAST, max_examples=800)
@given(damaged())
@budgeted
def test_damaged_bytes(data):
    _check(data)


@settings(FAST, max_examples=400)
@given(st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
@budgeted
def test_bytes_from_nothing(data):
    _check(data)
