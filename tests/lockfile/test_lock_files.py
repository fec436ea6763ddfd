"""The lock's files: pylock.toml (read back by us, by tomllib, by packaging.pylock and by uv as
other PEP 751 readers), the reader's refusals of hostile values, and pip's constraints and hashed
requirements formats with pip itself as the oracle."""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import subprocess
import sys
import venv
from dataclasses import replace
from pathlib import Path

import pytest
from hostile_locks import ATTACKS, FIELDS, hostile, toml_text
from hypothesis import given, settings
from hypothesis import strategies as st
from index_server import IndexServer, make_wheel
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from cudaresolve.arch import ComputeCapability, Target
from cudaresolve.errors import UsageError
from cudaresolve.host.facts import Driver, Gpu, HostFacts, MigDevice, Note
from cudaresolve.lockfile.fields import LockFileError
from cudaresolve.lockfile.files import write_together
from cudaresolve.lockfile.pip import constraints_txt, requirements_txt
from cudaresolve.lockfile.pylock import lock_file_name_ok, read_pylock
from cudaresolve.lockfile.writer import pylock_toml as write_pylock
from cudaresolve.output import lock_words
from cudaresolve.resolve.lock import Build, Decision, Lock, LockedPackage, LockedWheel, MajorDecision, Reason, ReasonKind
from cudaresolve.resolve.reasons import (
    Asked,
    BinaryNeed,
    CandidateRef,
    DriverTooOld,
    GpuRef,
    Judged,
    MajorRejection,
    MinorCompat,
    NoDeviceCode,
    OlderCuda,
    Rejection,
    RequiredBy,
)
from cudaresolve.versions import CudaVersion, DriverRelease

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib


def _host() -> dict:
    facts = HostFacts(
        system="Linux",
        machine="x86_64",
        driver=Driver(DriverRelease.parse("580.65.06"), "override:--driver", CudaVersion.parse("13.0"), "derived:drivers"),
        gpus=(
            Gpu(ComputeCapability.parse("8.6"), "override:--gpu"),
            Gpu(ComputeCapability.parse("9.0"), "nvml", 1, "H100", 81559, "GPU-1", True, (MigDevice("MIG-1", "1g.10gb", 9728),)),
        ),
        glibc="2.36",
        notes=(Note("nvml", "absent", "libnvidia-ml.so.1: cannot open"),),
    )
    return json.loads(facts.to_json())


def pylock_toml(lock: Lock) -> str:
    """The writer with the words output/ makes for people."""
    return write_pylock(lock, lock_words)


def _package(name, version, index, wheel, marker, why: str = "", **changes) -> LockedPackage:
    """A LockedPackage as these tests spell it: the version as text (kept as text when it is not one,
    for the writers to refuse), the reason as its build's words."""
    try:
        parsed = version if isinstance(version, Version) else Version(version)
    except InvalidVersion:
        parsed = version
    reason = Reason(ReasonKind.INDEX if wheel is not None else ReasonKind.KEPT, build=Build(CudaVersion(12, 8), why) if why else None)
    wheels = () if wheel is None else (wheel,) if isinstance(wheel, LockedWheel) else tuple(wheel)
    return LockedPackage(name, parsed, index, wheels, marker, reason, **changes)


def _ref(name: str, version: str) -> CandidateRef:
    return CandidateRef(name, Version(version))


def _wheel(name: str, version: str, base: str = "https://files.example.invalid") -> LockedWheel:
    filename = f"{name.replace('-', '_')}-{version}-py3-none-any.whl"
    return LockedWheel(filename, f"{base}/{filename}", hashlib.sha256(filename.encode()).hexdigest(), 1234)


def _lock(**changes) -> Lock:
    cupy = _package("cupy-cuda12x", "13.6.0", "https://index.example.invalid/simple", _wheel("cupy-cuda12x", "13.6.0"),
                    None, "the CuPy build for CUDA 12, which driver 580 runs")
    cupy = replace(cupy, reason=replace(cupy.reason, origins=(Asked("requirements.txt:3"),), asked_as="cupy", cuda_major=12))
    numpy = _package("numpy", "2.2.6", "https://index.example.invalid/simple", _wheel("numpy", "2.2.6"),
                     'python_version >= "3.10"', "newest that fits")
    needs = (RequiredBy(_ref("cupy-cuda12x", "13.6.0")), RequiredBy(_ref("torch", "2.11.0+cu130"), "opt-einsum"),
             BinaryNeed(None, True, "libnvJitLink.so.13", CudaVersion(13, 1), "/venv/lib/x.so", "__nvJitLinkCreate_13_1"))
    numpy = replace(numpy, reason=replace(numpy.reason, origins=needs))
    packages = (
        cupy,
        numpy,
        _package("torch", "2.11.0+cu130", "https://torch.example.invalid/whl/cu130", _wheel("torch", "2.11.0+cu130"),
                 None, 'cu130: driver 580 supports CUDA 13.0; "quotes" and \\ backslashes'),
        _package("my-local-build", "0.1", None, None, None, "installed from a local build; kept"),
    )
    fields = dict(
        packages=packages,
        requires_python=">=3.10",
        hosts=(_host(),),
        host_labels=("gpu-box.json",),
        index_urls=("https://index.example.invalid/simple",),
        decisions=(
            Decision("torch", _ref("torch", "2.11.0+cu130"), (
                Rejection(_ref("torch", "2.11.0+cu128"), Judged("arch-coverage", "torch\nsecond line", "NoDeviceCode")),
                Rejection(_ref("torch", "2.11.0+cu126"), OlderCuda("cu130")),
                Rejection(_ref("torch", "2.10.0"), NoDeviceCode(ComputeCapability.parse("9.0"), (GpuRef(1, "NVIDIA H100"),),
                                                                   (Target.parse("sm_80"),), (Target.parse("compute_80"),), "gpu-box.json"),
                          installed=True),
                Rejection(_ref("torch", "2.12.0+cu132"), MinorCompat(CudaVersion(13, 2), DriverRelease.parse("580.65.06"), CudaVersion(13, 0))),
            )),
            Decision("cupy-cuda13x", None, ()),
        ),
        major=MajorDecision(12, (MajorRejection(13, DriverTooOld(CudaVersion(13), DriverRelease.parse("570.86.15"), None,
                                                                 DriverRelease.parse("580.65.06"))),)),
        created_by="cudaresolve",
    )
    fields.update(changes)
    return Lock(**fields)


def _same_packages(a: Lock, b: Lock) -> bool:
    def key(p):
        return (p.name, p.version, p.index or "", p.marker or "")
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
    assert torch["tool"]["cudaresolve"]["build"] == {"cuda": "12.8", "evidence": torch["tool"]["cudaresolve"]["reason"]}
    cupy = data["packages"][0]["tool"]["cudaresolve"]
    assert cupy["reason"] == "asked for as cupy: CuPy's wheel for the environment's CUDA 12; the CuPy build for CUDA 12, which driver 580 runs"
    assert (cupy["kind"], cupy["asked-as"], cupy["cuda-major"], cupy["origins"]) == ("index", "cupy", 12, [{"kind": "asked", "where": "requirements.txt:3"}])
    numpy = data["packages"][1]["tool"]["cudaresolve"]
    assert numpy["origins"][1] == {"kind": "requires-dist", "parent": {"name": "torch", "version": "2.11.0+cu130"}, "extra": "opt-einsum"}
    assert numpy["reason"] == "installed files bind libnvJitLink.so.13 symbols of release >=13.1; newest that fits"
    tool = data["tool"]["cudaresolve"]
    assert tool["kept"] == [{"name": "my-local-build", "version": "0.1", "reason": "installed, kept", "kind": "kept",
                             "origins": [], "build": {"cuda": "12.8", "evidence": "installed from a local build; kept"}}]
    assert tool["hosts"][0]["label"] == "gpu-box.json"
    assert tool["hosts"][0]["facts"]["gpus"][1]["mig_devices"][0]["uuid"] == "MIG-1"
    (torch, cupy13) = tool["decisions"]
    assert (torch["name"], torch["chosen"], cupy13) == ("torch", "2.11.0+cu130", {"name": "cupy-cuda13x", "rejected": []})
    assert torch["rejected"][0] == {"reason": "arch-coverage: no-device-code (torch\nsecond line)", "version": "2.11.0+cu128",
                                    "rule": "judge",
                                    "evidence": {"check": "arch-coverage", "subject": "torch\nsecond line", "problem": "NoDeviceCode"}}
    assert torch["rejected"][2] == {
        "reason": "no kernel image for compute capability 9.0 (GPU 1 NVIDIA H100) on gpu-box.json; has sm_80 + PTX compute_80",
        "version": "2.10.0", "rule": "device-code", "installed": True,
        "evidence": {"capability": "9.0", "gpus": [{"index": 1, "name": "NVIDIA H100"}], "sass": ["sm_80"], "ptx": ["compute_80"],
                     "host": "gpu-box.json"}}
    assert tool["cuda-major"] == {"chosen": 12, "rejected": [{
        "reason": "driver 570.86.15 < 580.65.06 (CUDA 13.x floor)", "major": 13, "rule": "driver",
        "evidence": {"cuda": "13", "driver": "570.86.15", "floor": "580.65.06"}}]}
    # A single-use lock: the keys that would declare extras or groups are not written.
    assert not {"extras", "dependency-groups", "default-groups", "environments"} & set(data)


def test_pylock_names_are_normalized():
    lock = _lock(packages=(_package("Cupy_CUDA12x", "13.6.0", None, _wheel("cupy-cuda12x", "13.6.0"), None, ""),))
    assert tomllib.loads(pylock_toml(lock))["packages"][0]["name"] == "cupy-cuda12x"


def test_pylock_round_trip(tmp_path):
    lock = _lock()
    path = tmp_path / "pylock.toml"
    path.write_text(pylock_toml(lock))
    back = read_pylock(str(path))
    assert _same_packages(back, lock)
    assert back.hosts == lock.hosts  # the nulls TOML cannot hold are back
    assert HostFacts.from_dict(back.hosts[0]) == HostFacts.from_dict(lock.hosts[0])
    assert (back.host_labels, back.index_urls, back.decisions, back.major) == (lock.host_labels, lock.index_urls, lock.decisions, lock.major)
    assert (back.requires_python, back.created_by) == (lock.requires_python, lock.created_by)
    assert pylock_toml(back) == pylock_toml(lock)


# Words for people may hold lines and tabs; one-line labels no control character at all.
WORDS = st.text(st.characters(blacklist_categories=("Cc", "Cs")) | st.sampled_from("\t\n"))
LABELS = st.text(st.characters(blacklist_categories=("Cc", "Cs")))


@settings(max_examples=200, deadline=None)
@given(WORDS, LABELS)
def test_any_reason_survives_toml(tmp_path_factory, text, label):
    numpy = _package("numpy", "2.2.6", None, _wheel("numpy", "2.2.6"), None, text)
    numpy = replace(numpy, reason=replace(numpy.reason, origins=(Asked(text),)))
    lock = _lock(
        packages=(numpy,),
        decisions=(Decision("numpy", _ref("numpy", "2.2.6"), (Rejection(_ref("numpy", "2.3"), Judged("advisory", text, "KnownBadRelease")),)),),
        host_labels=(label,),
    )
    written = pylock_toml(lock)
    data = tomllib.loads(written)
    if text:
        assert data["packages"][0]["tool"]["cudaresolve"]["reason"] == text
    assert data["packages"][0]["tool"]["cudaresolve"]["origins"] == [{"kind": "asked", "where": text}]
    rejected = data["tool"]["cudaresolve"]["decisions"][0]["rejected"][0]
    assert (rejected["reason"], rejected["evidence"]["subject"]) == (f"advisory: known-bad-release ({text})", text)
    assert data["tool"]["cudaresolve"]["hosts"][0]["label"] == label
    path = tmp_path_factory.mktemp("words") / "pylock.toml"
    path.write_text(written, encoding="utf-8")
    back = read_pylock(str(path))  # what we write, we read
    assert (back.packages[0].reason, back.decisions, back.host_labels) == (numpy.reason, lock.decisions, (label,))


@pytest.mark.parametrize(
    "changes, field",
    [
        (dict(packages=(_package("numpy", "2.2.6", None, _wheel("numpy", "2.2.6"), None, "a \x1b[2J"),)),
         "reason.build.evidence (package numpy)"),
        (dict(host_labels=("gpu\nbox",)), "hosts.label"),
        (dict(created_by="x\r--index-url http://evil.invalid"), "created-by"),
        (dict(decisions=(Decision("torch", None, (Rejection(_ref("torch", "1"), Judged("advisory", "a\x00", "KnownBadRelease")),)),)),
         "decisions.rejected.evidence.subject (package torch)"),
        (dict(major=MajorDecision(12, (MajorRejection(13, DriverTooOld(CudaVersion(13), None, None, None, "\x1b]0;x")),))),
         "cuda-major.rejected.evidence.host"),
    ],
)
def test_control_characters_in_words_are_refused_by_the_writer(changes, field):
    """Nothing a terminal acts on (escape sequences, carriage returns) is written for `why` to print."""
    for writer in (pylock_toml, constraints_txt, requirements_txt):
        if writer is not pylock_toml and "created_by" not in changes:
            continue  # pip's files carry no reason, label or decision
        with pytest.raises(LockFileError, match=re.escape(f"the lock to write: {field}: control character")):
            writer(_lock(**changes))


def test_wheel_without_hash_is_refused():
    lock = _lock(packages=(_package("numpy", "2.2.6", None, LockedWheel("numpy-2.2.6-py3-none-any.whl", "file:///w/numpy-2.2.6-py3-none-any.whl", None, None), None, ""),))
    for writer in (pylock_toml, requirements_txt):
        with pytest.raises(LockFileError, match=r"wheels.hashes.sha256 \(package numpy\): .* has no sha256"):
            writer(lock)
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
    assert lock.environments == ('sys_platform == "linux"', 'sys_platform == "win32"')  # as packaging prints them
    attrs, numpy, spam = lock.packages
    assert attrs.name == "attrs" and [w.filename for w in attrs.wheels] == ["attrs-25.1.0-py3-none-any.whl"]
    assert numpy.version == Version("2.2.3")  # from the file name: this entry has no version key
    windows, linux = numpy.wheels  # one entry, both wheels, in file order
    assert (windows.filename, linux.filename) == ("numpy-2.2.3-cp312-cp312-win_amd64.whl", "numpy-2.2.3-cp312-cp312-manylinux_2_17_x86_64.whl")
    assert linux.url == (tmp_path / "wheels" / linux.filename).as_uri()  # relative to the lock
    assert linux.sha256 is None and linux.size is None  # only a sha512 recorded
    assert spam.name == "spam" and spam.wheels == () and spam.reason == Reason(ReasonKind.OTHER_SOURCE, written_by="some-other-locker")
    assert lock_words.reason(spam) == "a sdist source in some-other-locker's lock (cudaresolve reads wheels only)"
    assert spam.other_source == "sdist" and spam.version == Version("1.0")
    assert {p.reason for p in lock.packages if p.wheels} == {Reason(ReasonKind.UNRECORDED)}
    # What cudaresolve cannot write back is refused, naming the package: a wheel without a sha256,
    # a source it does not keep.
    wheels = Lock(**{**lock.__dict__, "packages": tuple(p for p in lock.packages if p.wheels)})
    for writer in (pylock_toml, requirements_txt):
        with pytest.raises(LockFileError, match=r"\(package numpy\): .* has no sha256"):
            writer(wheels)
    with_sha256 = Lock(**{**lock.__dict__, "packages": tuple(p for p in lock.packages if all(w.sha256 for w in p.wheels))})
    for writer in (pylock_toml, constraints_txt, requirements_txt):
        with pytest.raises(LockFileError, match=r"sdist \(package spam\): "):
            writer(with_sha256)
    # Written again with the hashed wheel only, numpy stays one entry, as PEP 751 needs.
    fixed = Lock(**{**lock.__dict__, "packages": (attrs, replace(numpy, wheels=(windows, replace(linux, sha256="ab" * 32))))})
    data = tomllib.loads(pylock_toml(fixed))
    assert [p["name"] for p in data["packages"]] == ["attrs", "numpy"] and len(data["packages"][1]["wheels"]) == 2
    assert data["environments"] == list(lock.environments)


_DECISION = "lock-version = '1.0'\ncreated-by = 'x'\npackages = []\n[[tool.cudaresolve.decisions]]\nname = 'a'\nrejected = [%s]\n"
_PACKAGE_REASON = ("lock-version = '1.0'\ncreated-by = 'x'\n[[packages]]\nname = 'a'\nversion = '1.0'\nwheels = [{url = "
                   "'https://x.invalid/a-1.0-py3-none-any.whl', hashes = {sha256 = '%s'}}]\n[packages.tool.cudaresolve]\n" % ("0" * 64)
                   ).replace("%", "%%") + "%s\n"


@pytest.mark.parametrize(
    "text, where",
    [
        ("lock-version = '1.0'\n[[packages]]\nname = 'a'\nversion = '1'\n", "created-by: missing"),
        ("lock-version = '2.0'\ncreated-by = 'x'\npackages = []\n", "lock-version: '2.0' is not supported"),
        ("lock-version = 1\ncreated-by = 'x'\npackages = []\n", "lock-version: expected a string"),
        ("lock-version = '1.0'\ncreated-by = 'x'\n", "packages: missing"),
        ("lock-version = '1.0'\ncreated-by = 'x'\npackages = [1]\n", "packages[0]: expected a table"),
        ("lock-version = '1.0'\ncreated-by = 'x'\n[[packages]]\nversion = '1'\n", "packages[0].name: missing"),
        ("lock-version = '1.0'\ncreated-by = 'x'\n[[packages]]\nname = 'a'\nversion = 'not a version'\nwheels = []\n", "packages[0].version (package a): not a PEP 440 version"),
        ("lock-version = '1.0'\ncreated-by = 'x'\n[[packages]]\nname = 'a'\nmarker = 'os_name ==='\n", "packages[0].marker (package a): not a valid marker"),
        ("lock-version = '1.0'\ncreated-by = 'x'\n[[packages]]\nname = 'a'\n", "packages[0] (package a): no source"),
        ("lock-version = '1.0'\ncreated-by = 'x'\n[[packages]]\nname = 'a'\nwheels = [{name = 'a-1-py3-none-any.whl', hashes = {sha256 = 'x'}}]\n", "packages[0].wheels[0] (package a): needs url or path"),
        ("lock-version = '1.0'\ncreated-by = 'x'\n[[packages]]\nname = 'a'\nwheels = [{url = 'https://x.invalid/a-1-py3-none-any.whl'}]\n", "packages[0].wheels[0].hashes (package a): missing"),
        ("lock-version = '1.0'\ncreated-by = 'x'\n[[packages]]\nname = 'a'\nwheels = [{url = 'https://x.invalid/a-1-py3-none-any.whl', hashes = {}}]\n", "at least one hash"),
        ("lock-version = '1.0'\ncreated-by = 'x'\n[[packages]]\nname = 'a'\nwheels = [{url = 'https://x.invalid/a.tar.gz', hashes = {sha256 = 'x'}}]\n", "packages[0].wheels[0].name (package a): 'a.tar.gz' is not a wheel"),
        ("lock-version = '1.0'\ncreated-by = 'x'\n[[packages]]\nname = 'a'\nwheels = [{url = 'https://x.invalid/a-1-py3-none-any.whl', size = '3', hashes = {sha256 = '%s'}}]\n" % ("0" * 64), "packages[0].wheels[0].size (package a): expected an integer"),
        ("lock-version = '1.0'\ncreated-by = 'x'\npackages = []\n[[tool.cudaresolve.hosts]]\nlabel = 'h'\n", "tool.cudaresolve.hosts[0].facts: missing"),
        ("lock-version = '1.0'\ncreated-by = 'x'\npackages = []\n[[tool.cudaresolve.hosts]]\nlabel = 'h'\nfacts = {schema = 1, system = 'Linux'}\n", "tool.cudaresolve.hosts[0].facts"),
        ("lock-version = '1.0'\ncreated-by = 'x'\npackages = []\n[[tool.cudaresolve.decisions]]\nname = 'a'\nrejected = [{candidate = 'a 1'}]\n", "tool.cudaresolve.decisions[0].rejected[0].version (package a): missing"),
        ("lock-version = '1.0'\ncreated-by = 'x'\npackages = []\n[[tool.cudaresolve.decisions]]\nname = 'CUDA major'\n", "tool.cudaresolve.decisions[0].name: not a PEP 508 name"),
        (_DECISION % "{version = '1', rule = 'gut-feeling', evidence = {}}", "rejected[0].rule (package a): 'gut-feeling' is not one of sdist-only, "),
        (_DECISION % "{version = '1', rule = 'driver', evidence = {floor = '580.65.06'}}", "rejected[0].evidence.cuda (package a): missing"),
        (_DECISION % "{version = '1', rule = 'driver', evidence = {cuda = '13', driver = '5', driver-cuda = '13.0', floor = '580.65.06'}}",
         "rejected[0].evidence.driver (package a): not a driver release: '5'"),
        (_DECISION % "{version = '1', rule = 'device-code', evidence = {gpu = -1, capability = '8.6', sass = [], ptx = []}}",
         "rejected[0].evidence.gpu (package a): not a number from 0"),
        (_DECISION % "{version = '1', rule = 'device-code', evidence = {gpus = [{index = 'x'}], capability = '8.6', sass = [], ptx = []}}",
         "rejected[0].evidence.gpus[0].index (package a): expected an integer"),
        (_DECISION % "{version = '1', rule = 'device-code', evidence = {gpu = 0, capability = '8.6', sass = ['m_80'], ptx = []}}",
         "rejected[0].evidence.sass[0] (package a): not a CUDA target: 'm_80'"),
        (_DECISION % "{version = '1', rule = 'device-code', evidence = {gpu = 0, capability = '8.6', sass = ['compute_80'], ptx = []}}",
         "rejected[0].evidence.sass[0] (package a): 'compute_80' is not a SASS target"),
        (_DECISION % "{version = '1', rule = 'yanked', reason = \"x\\u001b[2J\", evidence = {}}", "rejected[0].reason (package a): control character U+001B"),
        (_PACKAGE_REASON % "kind = 'index'\norigins = [{kind = 'asked'}]", "tool.cudaresolve.origins[0].where (package a): missing"),
        (_PACKAGE_REASON % "kind = 'index'\norigins = [{kind = 'hearsay', where = 'x'}]", "origins[0].kind (package a): 'hearsay' is not one of asked, "),
        (_PACKAGE_REASON % "kind = 'stolen'", "tool.cudaresolve.kind (package a): 'stolen' is not one of index, "),
        (_PACKAGE_REASON % "kind = 'index'\nasked-as = 'cupy --index-url=http://x'", "tool.cudaresolve.asked-as (package a): not a PEP 508 name"),
        (_PACKAGE_REASON % "kind = 'index'\nadded-extra = \"cu12\\n-r evil.txt\"", "tool.cudaresolve.added-extra (package a): control character"),
        ("lock-version = '1.0'\ncreated-by = 'x'\npackages = []\n[tool.cudaresolve.cuda-major]\nchosen = 12\nrejected = [{major = 13, rule = 'yanked', evidence = {}}]\n",
         "tool.cudaresolve.cuda-major.rejected[0].rule: 'yanked' does not set a CUDA major aside"),
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


def test_a_lock_that_names_one_gpu_of_a_device_code_rejection_still_reads(tmp_path):
    """Locks written before a device-code rejection named every GPU of the capability say `gpu = N`."""
    path = tmp_path / "pylock.toml"
    path.write_text(_DECISION % "{version = '1', rule = 'device-code', evidence = {gpu = 2, capability = '6.1', "
                                "sass = ['sm_80'], ptx = [], host = 'box.json'}}")
    (decision,) = read_pylock(str(path)).decisions
    (rejection,) = decision.rejected
    assert rejection.evidence == NoDeviceCode(ComputeCapability(6, 1), (GpuRef(2),), (Target.parse("sm_80"),), (), "box.json")
    assert lock_words.rejection(rejection) == "no kernel image for compute capability 6.1 (GPU 2) on box.json; has sm_80"


def test_packaging_reads_what_we_write():
    """packaging.pylock (packaging >= 26.0) validates our pylock.toml against PEP 751 independently."""
    pylock = pytest.importorskip("packaging.pylock")
    lock = pylock.Pylock.from_dict(tomllib.loads(pylock_toml(_lock())))
    assert [str(p.name) for p in lock.packages] == ["cupy-cuda12x", "numpy", "torch"]
    assert str(lock.packages[2].version) == "2.11.0+cu130"


# -- the reader refuses hostile values ----------------------------------------------------------------


def _written(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "pylock.toml"
    path.write_text(toml_text(data), encoding="utf-8")
    return path


@pytest.mark.parametrize("attack", list(ATTACKS))
@pytest.mark.parametrize("field", list(FIELDS))
def test_a_hostile_field_is_refused_naming_file_field_and_package(tmp_path, field, attack):
    data = tomllib.loads(pylock_toml(_lock()))
    assert _same_packages(read_pylock(str(_written(tmp_path, data))), _lock())  # the good lock reads
    bad, where = hostile(data, field, attack, "evil==1.0 --hash=sha256:" + "1" * 64)
    path = _written(tmp_path, bad)
    with pytest.raises(LockFileError) as error:
        read_pylock(str(path))
    message = str(error.value)
    assert message.startswith(f"{path}: {where}"), message
    if field not in ("name", "index-urls"):
        assert "(package cupy-cuda12x)" in message, message
    assert "\n" not in message and "\r" not in message and "\0" not in message and len(message) < 400, message


def _package_entry(**changes) -> dict:
    """The parsed lock of one package `a` 1.0 with one wheel, changed by `changes` (None removes a key)."""
    wheel = {"name": "a-1.0-py3-none-any.whl", "url": "https://files.example.invalid/a-1.0-py3-none-any.whl", "size": 10,
             "hashes": {"sha256": "ab" * 32}}
    entry = {"name": "a", "version": "1.0", "index": "https://index.example.invalid/simple", "wheels": [wheel]}
    for key, value in changes.items():
        target, _, key = (wheel, None, key[6:]) if key.startswith("wheel_") else (entry, None, key)
        if value is None:
            target.pop(key, None)
        else:
            target[key] = value
    return {"lock-version": "1.0", "created-by": "x", "packages": [entry]}


@pytest.mark.parametrize(
    "changes, where",
    [
        (dict(name="a b"), "packages[0].name: not a PEP 508 name"),
        (dict(name="-a"), "packages[0].name: not a PEP 508 name"),
        (dict(version=" 1.0"), "packages[0].version (package a): whitespace around the version"),
        (dict(version="1.0\u2003"), "packages[0].version (package a): whitespace around the version"),
        (dict(version="1.0+\u017f"), "packages[0].version (package a): not a PEP 440 version"),
        (dict(index="ftp://index.example.invalid/simple"), "packages[0].index (package a): not an https, http, file URL"),
        (dict(index="https://index.example.invalid/${HOME}/simple"), "packages[0].index (package a): '{' is not a URL character"),
        (dict(index="https://index.example.invalid/it's"), "packages[0].index (package a): \"'\" is not a URL character"),
        (dict(index="https://index.example.invalid/%zz"), "packages[0].index (package a): '%' not followed by two hexadecimal digits"),
        (dict(index="https://[::1/simple"), "packages[0].index (package a): not a URL"),
        (dict(index="https://h:99999/simple"), "packages[0].index (package a): not a URL"),
        (dict(index="https:///simple"), "packages[0].index (package a): no host"),
        (dict(index="https://index.example.invalid/ünï"), "packages[0].index (package a): 'ü' is not a URL character"),
        (dict(marker='os_name == "a" #'), "packages[0].marker (package a): '#' in the marker"),
        (dict(marker='os_name == "${HOME}"'), "packages[0].marker (package a): '$' in the marker"),
        (dict(marker='os_name == "a -x"'), "packages[0].marker (package a): a word starting with '-'"),
        (dict(marker='os_name == "\\"'), "packages[0].marker (package a): '\\\\' in the marker"),
        (dict(wheel_sha256=None, wheel_hashes={"sha256": "AB" * 32, "sha512": "xyz"}), "packages[0].wheels[0].hashes['sha512'] (package a): not hexadecimal"),
        (dict(wheel_size=-1), "packages[0].wheels[0].size (package a): not a size from 0"),
        (dict(wheel_size=1 << 50), "packages[0].wheels[0].size (package a): not a size from 0"),
        (dict(wheel_size=True), "packages[0].wheels[0].size (package a): expected an integer"),
        (dict(wheel_name="b-1.0-py3-none-any.whl"), "packages[0].wheels[0].name (package a): 'b-1.0-py3-none-any.whl' is a wheel of b, not of a"),
        (dict(wheel_name="a-2.0-py3-none-any.whl"), "packages[0].wheels[0].name (package a): 'a-2.0-py3-none-any.whl' is version 2.0, not 1.0"),
        (dict(wheel_url=None, wheel_path="../-x --index-url=http://evil.invalid/a-1.0-py3-none-any.whl"), "packages[0].wheels[0].path (package a): a word starting with '-'"),
        (dict(version=None, wheels=[{"name": n, "url": f"https://x.invalid/{n}", "hashes": {"sha256": "ab" * 32}}
                                    for n in ("a-1.0-py3-none-any.whl", "a-2-1.0-py3-none-any.whl")]),
         "packages[0].wheels[1].name (package a): 'a-2-1.0-py3-none-any.whl' is version 2, not 1.0 (of the entry's first wheel)"),
        (dict(vcs={"type": "git", "url": "https://x.invalid/a.git", "commit-id": "0"}), "packages[0] (package a): wheels together with vcs"),
        (dict(wheels=None, sdist="a-1.0.tar.gz"), "packages[0].sdist (package a): expected a table"),
    ],
)
def test_value_rules(tmp_path, changes, where):
    with pytest.raises(LockFileError) as error:
        read_pylock(str(_written(tmp_path, _package_entry(**changes))))
    assert str(error.value).startswith(f"{tmp_path / 'pylock.toml'}: {where}"), str(error.value)


def test_values_are_read_in_their_normal_form(tmp_path):
    data = _package_entry(name="A_b", version="1.0-RC1", marker="os_name=='posix'", wheel_name="A_b-1.0rc1-py3-none-any.whl",
                          wheel_url=None, wheel_path="my wheels/A_b-1.0rc1-py3-none-any.whl", wheel_hashes={"sha256": "AB" * 32})
    (package,) = read_pylock(str(_written(tmp_path, data))).packages
    assert (package.name, str(package.version), package.marker) == ("a-b", "1.0rc1", 'os_name == "posix"')
    (wheel,) = package.wheels
    assert wheel.sha256 == "ab" * 32  # pip compares lowercase digests
    assert wheel.url == (tmp_path / "my wheels" / "A_b-1.0rc1-py3-none-any.whl").as_uri()
    assert "%20" in wheel.url


@pytest.mark.parametrize(
    "value, problem",
    [
        ("\x1b[2J", "control character U+001B"),
        ("x" * 100_000, "longer than 20000 characters"),
        (["x"] * 20_000, "more than 10000 values"),
        (["x" * 1000] * 9000, "'system' must be a string, got ['xxxx"),  # host/facts.py's words, cut short
    ],
)
def test_host_facts_in_a_lock_are_bounded(tmp_path, value, problem):
    data = tomllib.loads(pylock_toml(_lock()))
    data["tool"]["cudaresolve"]["hosts"][0]["facts"]["system"] = value
    with pytest.raises(LockFileError) as error:
        read_pylock(str(_written(tmp_path, data)))
    message = str(error.value)
    assert message.startswith(f"{tmp_path / 'pylock.toml'}: tool.cudaresolve.hosts[0].facts: ") and problem in message, message
    assert len(message) < 400


@pytest.mark.parametrize(
    "text, problem",
    [
        ("a = " + "[" * 5000 + "]" * 5000 + "\n", "not valid TOML (nested too deeply)"),
        ("lock-version = '1.0'\nsize = " + "9" * 5000 + "\n", "not valid TOML (Exceeds the limit"),
        (b"lock-version = '1.0'\ncreated-by = '\xff'\n", "not UTF-8"),
    ],
)
def test_toml_the_parser_cannot_take_is_one_line(tmp_path, text, problem):
    path = tmp_path / "pylock.toml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(LockFileError) as error:
        read_pylock(str(path))
    assert str(error.value).startswith(f"{path}: {problem}") and "\n" not in str(error.value)


def test_a_file_past_the_size_limit_is_not_read(tmp_path):
    from cudaresolve.lockfile.fields import MAX_FILE_BYTES

    path = tmp_path / "pylock.toml"
    with open(path, "wb") as f:
        f.write(b"# " + b"x" * MAX_FILE_BYTES + b"\n")
    with pytest.raises(LockFileError, match=r"larger than 16 MiB"):
        read_pylock(str(path))


def test_the_writers_refuse_what_the_reader_refuses():
    """A Lock built in code goes through the same rules: no value becomes a line or an option for pip."""
    torch = _lock().packages[2]
    evil = "\nevil==1.0 --hash=sha256:" + "1" * 64
    cases = [
        (_package(torch.name + evil, torch.version, torch.index, torch.wheels, None, ""), "name"),
        (_package(torch.name, str(torch.version) + evil, torch.index, torch.wheels, None, ""), "version (package torch)"),
        (_package(torch.name, torch.version, torch.index + evil, torch.wheels, None, ""), "index (package torch)"),
        (_package(torch.name, torch.version, torch.index, torch.wheels, 'os_name == "a --index-url=http://x"', ""), "marker (package torch)"),
        (_package(torch.name, torch.version, torch.index, LockedWheel(torch.wheels[0].filename, torch.wheels[0].url, torch.wheels[0].sha256 + evil, 1), None, ""),
         "wheels.hashes.sha256 (package torch)"),
        (_package(torch.name, torch.version, None, LockedWheel(torch.wheels[0].filename, torch.wheels[0].url + evil, torch.wheels[0].sha256, 1), None, ""),
         "wheels.url (package torch)"),
    ]
    for package, field in cases:
        for writer in (pylock_toml, constraints_txt, requirements_txt):
            with pytest.raises(LockFileError, match=re.escape(f"the lock to write: {field}: ")):
                writer(_lock(packages=(package,)))
    with pytest.raises(LockFileError, match=re.escape("the lock to write: index-urls: ")):
        requirements_txt(_lock(index_urls=("https://index.example.invalid/simple" + evil,)))


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


def test_write_together(tmp_path):
    path = tmp_path / "pylock.toml"
    write_together([(str(path), 'created-by = "cudaresolve 1"\n')])
    assert path.read_text() == 'created-by = "cudaresolve 1"\n'
    path.chmod(0o640)
    write_together([(str(path), "second ü\n"), (str(tmp_path / "c.txt"), "c\n")])
    assert path.read_text(encoding="utf-8") == "second ü\n" and (tmp_path / "c.txt").read_text() == "c\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o640  # the replaced file's mode is kept
    assert sorted(os.listdir(tmp_path)) == ["c.txt", "pylock.toml"]  # no temporary file left behind
    with pytest.raises(UsageError, match="cannot write .*missing"):
        write_together([(str(tmp_path / "missing" / "pylock.toml"), "x")])


def test_write_together_replaces_nothing_when_one_cannot_be_written(tmp_path):
    """The third output's directory is missing: the first two stay as they were, no temporary file stays."""
    (tmp_path / "pylock.toml").write_text('lock-version = "1.0"\ncreated-by = "cudaresolve 1"\n')
    outputs = [(str(tmp_path / "pylock.toml"), "new lock\n"), (str(tmp_path / "c.txt"), "c\n"),
               (str(tmp_path / "missing" / "r.txt"), "r\n")]
    with pytest.raises(UsageError, match="cannot write .*missing/r.txt"):
        write_together(outputs)
    old = 'lock-version = "1.0"\ncreated-by = "cudaresolve 1"\n'
    assert os.listdir(tmp_path) == ["pylock.toml"] and (tmp_path / "pylock.toml").read_text() == old
    with pytest.raises(UsageError, match="named for two of the outputs"):
        write_together([(str(tmp_path / "pylock.toml"), "a"), (str(tmp_path / "." / "pylock.toml"), "b")])
    assert (tmp_path / "pylock.toml").read_text() == old


@pytest.mark.parametrize("text", [
    "numpy<2.3\n",  # a user's constraints file
    'lock-version = "1.0"\ncreated-by = "uv"\n',  # another tool's pylock.toml
    "# a comment\n# cudaresolve 0.1: pip install -c THIS-FILE\n",  # the header not at the top
    'x = 1\n' + "#" * 5000 + '\ncreated-by = "cudaresolve 1"\n',  # past the head read
])
def test_write_together_replaces_no_file_it_did_not_write(tmp_path, text):
    """A file without cudaresolve's marker at its top is refused, naming it, and nothing is written."""
    mine, other = tmp_path / "c.txt", tmp_path / "r.txt"
    mine.write_text(text)
    with pytest.raises(UsageError, match=rf"{mine}: not replaced: it exists and cudaresolve did not write it"):
        write_together([(str(other), "# cudaresolve 1\n"), (str(mine), "# cudaresolve 1\n")])
    assert mine.read_text() == text and sorted(os.listdir(tmp_path)) == ["c.txt"]


def test_write_together_replaces_its_own_and_empty_files(tmp_path):
    own = {"c.txt": "# cudaresolve 0.1: pip install -c THIS-FILE cupy-cuda12x\nnumpy==2.2.6\n",
           "pylock.toml": 'lock-version = "1.0"\nrequires-python = ">=3.9"\ncreated-by = "cudaresolve 0.1"\n', "empty.txt": ""}
    for name, text in own.items():
        (tmp_path / name).write_text(text)
    write_together([(str(tmp_path / name), "new\n") for name in own])
    assert all((tmp_path / name).read_text() == "new\n" for name in own)


def test_new_file_gets_the_umask_mode(tmp_path):
    old = os.umask(0o027)
    try:
        write_together([(str(tmp_path / "pylock.toml"), "x")])
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
    lock = _lock(packages=(_package("a", "1.0", None, wheel, None, ""),), index_urls=())
    # the directory as a file URL: percent-encoded, so no space of a path can split pip's option line
    assert constraints_txt(lock).splitlines()[1:] == ["--no-index", f"--find-links {tmp_path.as_uri()}/", "a==1.0"]


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
        packages.append(_package(name, version, urls[where], wheel, None, "test"))
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
    skipped = _package(helper.name, "1.5", helper.index, _wheel_of(urls, files, ("main", "helper", "1.5")), 'sys_platform == "win32"', "")
    chosen = _package(helper.name, helper.version, helper.index, helper.wheels, 'sys_platform != "win32"', "")
    lock = Lock(**{**_lock().__dict__, "packages": (lock.packages[0], skipped, chosen, lock.packages[2]), "index_urls": (urls["main"],)})
    path = tmp_path / "pylock.toml"
    path.write_text(pylock_toml(lock))
    assert "[[tool.cudaresolve.hosts]]" in path.read_text()
    assert uv_installs(uv, tmp_path, path) == {"app": "1.0", "helper": "1.0", "torch": "2.1.0+cu118"}



# -- the words made from the records ---------------------------------------------------------------


def test_a_refusal_is_worded_from_its_causes():
    """NoSolution carries records; output/ words them: the requirement, who asked (a parent candidate,
    or none for a root), the candidates set aside (all in the whole record; as many as fit a line in
    the short one), and the majors when they failed apart."""
    from packaging.requirements import Requirement

    from cudaresolve.resolve.causes import Attempt, CondaMismatch, FleetConflict, HostMajors, NoSolution, TooDeep, Unsatisfiable
    from cudaresolve.resolve.reasons import ExtrasOf, OtherMajor, SdistOnly, ToolkitTargets

    nvjitlink = Requirement("nvidia-nvjitlink-cu12>=12.9")
    installed = BinaryNeed(_ref("nvext", "1.0"), True, "libnvJitLink.so.12", CudaVersion(12, 9), "/v/nvext/_link.so", "__nvJitLinkCreate_12_9")
    wheel = BinaryNeed(_ref("nvidia-cusparse-cu12", "12.3.1.170"), False, "libnvJitLink.so.12", CudaVersion(12, 4))
    set_aside = tuple(Rejection(_ref("nvidia-nvjitlink-cu12", f"12.9.{n}"), SdistOnly()) for n in range(5))
    from cudaresolve.checks.fixes import CondaInstall, CondaSpec

    conda = CondaMismatch("libnvjitlink 12.4.127 (conda)", ">=12.9", CondaInstall((CondaSpec("libnvjitlink", ">=", Version("12.9")),)))
    causes = (
        Unsatisfiable(nvjitlink, installed, set_aside[:1], conda),
        Unsatisfiable(nvjitlink, wheel, set_aside),
        Unsatisfiable(Requirement("cuda-bindings==12.9.9"), ExtrasOf(_ref("cuda-bindings", "12.9.9")), ()),
    )
    assert lock_words.no_solution(NoSolution((Attempt(12, causes),)), whole=True) == (
        "nothing fits nvidia-nvjitlink-cu12>=12.9 (required by /v/nvext/_link.so (nvext 1.0), which binds __nvJitLinkCreate_12_9); "
        "libnvjitlink 12.4.127 (conda) does not satisfy >=12.9: "
        'conda install "libnvjitlink>=12.9"; nvidia-nvjitlink-cu12 12.9.0: no wheel for this interpreter, only an sdist, and a build from source of a CUDA package is not judged\n'
        "nothing fits nvidia-nvjitlink-cu12>=12.9 (required by nvidia-cusparse-cu12 12.3.1.170); "
        + "; ".join(f"nvidia-nvjitlink-cu12 12.9.{n}: no wheel for this interpreter, only an sdist, and a build from source of a CUDA package is not judged" for n in range(5))
        + "\n"
        "nothing fits cuda-bindings==12.9.9"
    )
    short = lock_words.no_solution(NoSolution((Attempt(12, causes),)))  # wrapped at spaces: a person's few lines
    assert len(short.splitlines()) <= lock_words.MAX_LINES and all(len(line) <= lock_words.WIDTH for line in short.splitlines())
    assert ("nothing fits nvidia-nvjitlink-cu12>=12.9 (required by nvidia-cusparse-cu12 12.3.1.170); nvidia-nvjitlink-cu12 "
            "12.9.4, 12.9.3 and 3 more: no wheel") in " ".join(short.split())
    other = Unsatisfiable(Requirement("torch"), Asked("command line"), (Rejection(_ref("torch", "2.9.0+cu130"), OtherMajor(13, 12)),))
    assert lock_words.no_solution(NoSolution((Attempt(13, (TooDeep(2000),)), Attempt(12, (other,)))), whole=True) == (
        "with CUDA 13: no set found within 2000 resolution rounds\n"
        "with CUDA 12: nothing fits torch; torch 2.9.0+cu130: a CUDA 13 build; the environment is CUDA 12"
    )
    pascal = HostMajors("old.json", (12,), (MajorRejection(13, ToolkitTargets(CudaVersion(13, 0), 0, ComputeCapability.parse("6.1"))),))
    fleet = FleetConflict((pascal, HostMajors("new.json", (), ())))
    assert lock_words.no_solution(NoSolution((Attempt(None, (TooDeep(5),)),), fleet), whole=True) == (
        "no CUDA major runs on every host: old.json runs CUDA 12 (not 13: CUDA 13.0 builds no code for GPU 0 (6.1)); "
        "new.json runs CUDA no major ()\nno set found within 5 resolution rounds"
    )


def test_a_refusal_names_the_binding_file_and_symbol_and_both_sides_of_a_conflict():
    """A requirement a binary brought names the file and the symbol behind it; requirements on one
    name that fit alone but not together name each side with its origin, and a resolution stopped
    by its bound ends with the conflict it met most, not a count alone."""
    from packaging.requirements import Requirement

    from cudaresolve.resolve.causes import Bound, Conflict, TooDeep, Unsatisfiable
    from cudaresolve.resolve.reasons import Need

    installed = BinaryNeed(_ref("nvext", "1.0"), True, "libnvJitLink.so.12", CudaVersion(12, 9), "/v/nvext/_link.so", "__nvJitLinkCreate_12_9")
    unowned = replace(installed, consumer=None, file="/v/lib/loose.so")
    wheel = BinaryNeed(_ref("nvidia-cusparse-cu12", "12.3.1.170"), False, "libnvJitLink.so.12", CudaVersion(12, 4),
                       "nvidia/cusparse/lib/libcusparse.so.12", "__nvJitLinkComplete_12_4")
    nvjitlink = Requirement("nvidia-nvjitlink-cu12>=12.9")
    assert lock_words.cause(Unsatisfiable(nvjitlink, installed, ())) == (
        "nothing fits nvidia-nvjitlink-cu12>=12.9 (required by /v/nvext/_link.so (nvext 1.0), which binds __nvJitLinkCreate_12_9)")
    assert lock_words.cause(Unsatisfiable(nvjitlink, unowned, ())) == (
        "nothing fits nvidia-nvjitlink-cu12>=12.9 (required by /v/lib/loose.so (a file no distribution lists), "
        "which binds __nvJitLinkCreate_12_9)")
    assert lock_words.cause(Unsatisfiable(Requirement("nvidia-nvjitlink-cu12>=12.4"), wheel, ())) == (
        "nothing fits nvidia-nvjitlink-cu12>=12.4 (required by nvidia/cusparse/lib/libcusparse.so.12 (nvidia-cusparse-cu12 "
        "12.3.1.170), which binds __nvJitLinkComplete_12_4)")
    conflict = Conflict("c", (
        Need(Requirement("c==1.0"), RequiredBy(_ref("a", "1.0"), "gpu")),
        Need(Requirement("c==2.0"), Asked("requirements.txt:2")),
        Need(Requirement("c>=2.1"), installed),
    ))
    words = ("no release of c fits them all: a 1.0 with [gpu] needs c==1.0, the request (requirements.txt:2) needs c==2.0, "
             "/v/nvext/_link.so (nvext 1.0, binding __nvJitLinkCreate_12_9) needs c>=2.1")
    assert lock_words.cause(conflict) == words
    assert lock_words.cause(TooDeep(10, Bound.SECONDS, (conflict,))) == f"no set found within 10 s of resolution; the conflict met most: {words}"
    assert lock_words.cause(TooDeep(2000)) == "no set found within 2000 resolution rounds"
    passed_over = MinorCompat(CudaVersion(13, 2), DriverRelease.parse("580.65.06"), CudaVersion(13, 0))
    assert lock_words.grounds(passed_over, None) == (
        "CUDA 13.2 runs on driver 580.65.06 only by minor-version compatibility, which the doctor warns about")
    assert lock_words.grounds(replace(passed_over, driver=None, host="b.json"), None) == (
        "CUDA 13.2 runs on the driver's CUDA 13.0 only by minor-version compatibility on b.json, which the doctor warns about")


def test_an_empty_label_is_refused_as_it_would_not_read_back_the_same(tmp_path):
    """The writer leaves an empty provided-by out; the reader must not take it (found by test_lock_fuzz:
    a kept conda entry with provided-by = "" read back as None after a round trip)."""
    kept = LockedPackage(canonicalize_name("nvidia-nvjitlink-cu12"), Version("12.8.93"), None, (), None,
                         Reason(ReasonKind.CONDA, ()), provided_by="libnvjitlink 12.8.93 (conda)")
    text = pylock_toml(_lock(packages=(*_lock().packages, kept)))
    assert 'provided-by = "libnvjitlink 12.8.93 (conda)"' in text
    path = tmp_path / "pylock.toml"
    path.write_text(text.replace('provided-by = "libnvjitlink 12.8.93 (conda)"', 'provided-by = ""'))
    with pytest.raises(LockFileError, match=r"provided-by \(package nvidia-nvjitlink-cu12\): empty"):
        read_pylock(str(path))


def test_the_release_a_request_with_extras_stands_on_is_not_required_by_itself():
    """`cuda-bindings[all]==12.9.9` refused read "nothing fits cuda-bindings==12.9.9 (required by
    cuda-bindings 12.9.9)": the base of an extras candidate is the request, not another package's need."""
    from packaging.requirements import Requirement

    from cudaresolve.resolve.causes import Unsatisfiable
    from cudaresolve.resolve.reasons import ExtrasOf

    base = Unsatisfiable(Requirement("cuda-bindings==12.9.9"), ExtrasOf(_ref("cuda-bindings", "12.9.9")), ())
    assert lock_words.cause(base) == "nothing fits cuda-bindings==12.9.9"
    needed = Unsatisfiable(Requirement("cuda-pathfinder>=1.1"), RequiredBy(_ref("cuda-bindings", "12.9.9")), ())
    assert lock_words.cause(needed) == "nothing fits cuda-pathfinder>=1.1 (required by cuda-bindings 12.9.9)"


def test_pips_files_name_each_index_once_in_order_and_count_a_forks_entries():
    """The index lines and the one-target check read a lock in one pass each (a lock may hold 50,000
    entries): each package's index once, in the order of the lock's own then by package name, and a
    universal lock's forks with their number of entries."""
    many = tuple(_package(f"p{i:03d}", "1.0", f"https://i{i % 7}.example.invalid/simple", _wheel(f"p{i:03d}", "1.0"), None)
                 for i in range(40))
    lock = _lock(packages=many, index_urls=("https://i3.example.invalid/simple", "https://i5.example.invalid/simple"))
    lines = [line for line in requirements_txt(lock).splitlines() if line.startswith("--")]
    assert lines == ["--index-url https://i3.example.invalid/simple", "--extra-index-url https://i5.example.invalid/simple"] + [
        f"--extra-index-url https://i{i}.example.invalid/simple" for i in (0, 1, 2, 4, 6)]
    forks = tuple(replace(many[1], marker=f'python_version == "3.{minor}"') for minor in (10, 11, 12))
    forked = _lock(packages=many[:1] + forks + many[2:])
    with pytest.raises(LockFileError, match=r"package p001\): a universal lock with 3 entries of p001;"):
        requirements_txt(forked)
