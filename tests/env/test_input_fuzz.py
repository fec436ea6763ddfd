"""Every reader of outside input gives its value or the project's error (exit 3), nothing else.

One test per reader, each over 2,000 inputs, all of them together in well under a minute. Hypothesis
runs each test with a fixed budget and a fixed seed (`derandomize`), so CI meets the same cases
every time; it draws one number per case, and the case is made from that number with `random`
(drawing every byte edit through hypothesis costs more than the reader it feeds; a failure names
its number, which remakes the case). The cases: real inputs mutated (a byte changed, bytes
inserted, a range deleted or repeated, the tail cut; hostile tokens spliced in: nesting thousands
deep, integers of 5,000 digits, NUL, undecodable bytes, non-ASCII digits, a coding cookie of a codec
that fails), and inputs built from the format's own grammar with such values in its fields. What a
reader returns is then used the way the command uses it (rendered, merged, compared), since a value
that parses but breaks its user later is the same crash. The ELF reader's fuzz lives in
test_elf_fuzz.py; the wheel read in place (a zip of a gcc-built library) is here.
"""

from __future__ import annotations

import copy
import io
import json
import os
import random
import tempfile
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest
from budget import budgeted
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cudaresolve.commands.host_options import overrides_from
from cudaresolve.errors import CudaresolveError
from cudaresolve.host.facts import HostFacts
from cudaresolve.host.probe import host_for
from cudaresolve.host.readers import SourceUnavailable, locate_nvidia_smi
from cudaresolve.output.host import render_host
from cudaresolve.versions import DriverRelease

CASES = 2000
FUZZ = settings(
    max_examples=CASES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
NUMBERS = st.integers(0, 2**32 - 1)

# Values that broke readers, or sit on a bound: spliced into real inputs and put in fields.
HOSTILE = [
    b"[" * 3000, b"{" * 1500, b"(" * 300, b"9" * 5000, b"1." + b"9" * 4400, b"0x" + b"f" * 2000, b"\x00", b"\xff\xfe",
    b"\xed\xa0\x80", b"\x80", "\u00b2".encode(), "\u0661\u0662.\u0664".encode(), "\u202e".encode(), b"\r", b"\n",
    b"\\", b"\\\n", b'"', b"'", b"#", b" #", b"${HOME}", b"${X}", b"-r ", b"-c ", b"--hash=sha256:", b"=", b";",
    b"[", b"]", b"~", b"%", b"%(x)s", b"\t", b" " * 500, b"NaN", b"1e999", b"-0", b"9" * 19, b"\x1b[2J",
    b"http://[::1", b"# -*- coding: undefined -*-\n", b"# coding: utf-16\n", b"# coding: no-such-codec\n",
]


def mutate(seed: bytes, rng: random.Random) -> bytes:
    """`seed` with 1 to 6 edits."""
    data = bytearray(seed)
    for _ in range(rng.randint(1, 6)):
        at = rng.randint(0, len(data))
        edit = rng.choice(["byte", "insert", "token", "token", "delete", "repeat", "cut"])
        if edit == "byte" and at < len(data):
            data[at] = rng.randrange(256)
        elif edit == "insert":
            data[at:at] = rng.randbytes(rng.randint(1, 8))
        elif edit == "token":
            data[at:at] = rng.choice(HOSTILE)
        elif edit == "delete":
            del data[at:at + rng.randint(1, 16)]
        elif edit == "repeat":
            data[at:at] = data[at:at + rng.randint(1, 64)] * rng.randint(2, 50)
        elif edit == "cut":
            del data[at:]
    return bytes(data)


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


# Words a field or a variable may hold: valid-looking, hostile, or of the wrong kind.
WORDS = [_text(t) for t in HOSTILE] + [
    "550.144.03", "12.4", "8.6", "99.9", "7.0", "", " ", "0", "-1", "GPU-7518f6b0", "MIG-1", "Linux", "x86_64", "nvml",
    "host-file", "override:--gpu", "torch>=2", "numpy==1.*", "a[b]; python_version >= '3'", "https://x.invalid/simple",
    "file:///nonexistent", "./wheels", "~/w", "/usr/bin/true", "true", "yes", "no", "2", "\udcff",
]
HUGE = "\x00huge\x00"  # stands for an integer of 5,000 digits, which json.dumps cannot write


def json_value(rng: random.Random, depth: int = 0):
    """A JSON value: a scalar of any type (64-bit bounds, beyond, a huge integer, NaN), or a small list or object."""
    kind = rng.randrange(10 if depth < 3 else 8)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return rng.choice([0, -1, 1, 2**63 - 1, 2**63, -(2**63) - 1, 2**70, rng.getrandbits(40), HUGE])
    if kind == 3:
        return rng.choice([0.5, float("nan"), float("inf"), -0.0, 1e308])
    if kind in (4, 5, 6, 7):
        return rng.choice(WORDS)
    if kind == 8:
        return [json_value(rng, depth + 1) for _ in range(rng.randint(0, 3))]
    return {rng.choice(WORDS): json_value(rng, depth + 1) for _ in range(rng.randint(0, 3))}


def dumps(value) -> str:
    return json.dumps(value).replace(json.dumps(HUGE), "9" * 5000)


@pytest.fixture
def scratch(tmp_path):
    """Where the cases' files go: in memory (/dev/shm) where there is such a place, since writing
    thousands of small files to a disk costs more than the readers reading them."""
    if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK):
        with tempfile.TemporaryDirectory(dir="/dev/shm", prefix="cudaresolve-fuzz-") as directory:
            yield Path(directory)
    else:
        yield tmp_path


# -- host JSON (--host FILE) ------------------------------------------------------------------------

HOST = {
    "schema": 1, "system": "Linux", "machine": "x86_64", "glibc": "2.35", "tegra": False,
    "driver": {"release": "570.86.15", "release_source": "nvml", "cuda": "12.8", "cuda_source": "nvml"},
    "cuda_visible_devices": "GPU-7518f6b0-991f-ce2b-3d37-c779130d3137",
    "gpus": [
        {"index": 0, "name": "NVIDIA TITAN V", "compute_capability": "7.0", "memory_mib": 12288,
         "uuid": "GPU-b5169cef-2205-c30e-f2b3-220cfa14bafd", "mig_mode": None, "mig_devices": [], "visible": False,
         "source": "nvml"},
        {"index": 1, "name": "A100", "compute_capability": "8.0", "memory_mib": 40960, "uuid": "GPU-7518f6b0",
         "mig_mode": True, "mig_devices": [{"uuid": "MIG-1", "name": "1g.5gb", "memory_mib": 4864}], "visible": True,
         "source": "host-file"},
    ],
    "notes": [{"source": "CUDA_VISIBLE_DEVICES", "message": "1 of 2 GPU(s) visible to CUDA", "line": None}],
}
HOST_TEXTS = [json.dumps(HOST).encode(), json.dumps(HOST, indent=2).encode()]


def _paths(value, prefix=()):
    """Every key path below a JSON value (a path is a tuple of keys and indexes)."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        yield prefix + (key,)
        yield from _paths(item, prefix + (key,))


def mutated_json(rng: random.Random, value, texts: list[bytes]) -> str:
    """A JSON document given as `value` (and its `texts`): one text mutated, or 1 to 4 of its fields,
    at any depth, replaced by other JSON values."""
    if rng.random() < 0.5:
        return _text(mutate(rng.choice(texts), rng))
    document = copy.deepcopy(value)
    for _ in range(rng.randint(1, 4)):
        path = rng.choice(list(_paths(document)))
        parent = document
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = json_value(rng)
    return dumps(document)


def host_document(rng: random.Random) -> str:
    """The documented host JSON, mutated."""
    return mutated_json(rng, HOST, HOST_TEXTS)


@FUZZ
@given(number=NUMBERS)
@budgeted
def test_host_files(number):
    rng = random.Random(number)
    text, gpus = host_document(rng), rng.choice([[], [], ["8.6"], ["9.0", "x"]])
    try:
        facts = host_for(host_file="-", overrides=overrides_from(None, None, gpus, {}), environ={}, stdin=io.StringIO(text))
    except CudaresolveError:
        return
    judged(facts)


# -- a Kubernetes node list (--hosts-from-nodes) ---------------------------------------------------

NODES = json.loads((Path(__file__).parents[1] / "data" / "nodes-mixed-cluster.json").read_text())
NODE_TEXTS = [json.dumps(NODES).encode(), json.dumps(NODES, indent=1).encode()]


def node_document(rng: random.Random) -> str:
    """The recorded mixed cluster, mutated (its labels and fields among what is replaced)."""
    return mutated_json(rng, NODES, NODE_TEXTS)


@FUZZ
@given(number=NUMBERS)
@budgeted
def test_node_lists(number):
    from cudaresolve.host.nodes import class_label, cluster_from_json
    from cudaresolve.output.host import render_nodes_without_gpu

    try:
        cluster = cluster_from_json(node_document(random.Random(number)), "--hosts-from-nodes -")
    except CudaresolveError:
        return
    render_nodes_without_gpu("-", cluster.without_gpu)
    for node_class in cluster.classes:  # each class is a host of the fleet: labelled, printed, written, judged
        class_label(node_class)
        judged(node_class.facts)


# -- host variables ---------------------------------------------------------------------------------

# Each variable with values that work; a case sets a few, some to a hostile value instead, so that
# one bad value does not always stop the command before the others are read.
HOST_VARIABLES = {
    "CUDARESOLVE_DRIVER": ["550.54.14", "570.86.15", "573.24", ""], "CUDARESOLVE_CUDA": ["12.4", "13.0", ""],
    "CUDARESOLVE_GPUS": ["8.6", "8.6,9.0", ""], "CONDA_OVERRIDE_CUDA": ["12.8", ""], "CONDA_OVERRIDE_CUDA_ARCH": ["8.6", ""],
    "UV_CUDA_DRIVER_VERSION": ["550.54.14"], "CUDA_VISIBLE_DEVICES": ["0", "1", "1,0", "GPU-b5", "MIG-1", "", "-1"],
    "CUDA_DEVICE_ORDER": ["PCI_BUS_ID", "FASTEST_FIRST"], "CUDARESOLVE_NVIDIA_SMI": ["/usr/bin/true"],
}
LIST_ITEMS = ["8.6", "9.0", " 7.5", "12.0", "", "99.9", "\u00b2", "\u00b2.1", "0", "1", "GPU-b5", "MIG-1", "-1", "9" * 5000,
              "01", "NoDevFiles", "550.54.14", "\u0665\u0665\u0660.\u0661", "12"]


def variable_value(rng: random.Random) -> str:
    """A hostile value os.environ can hold (no NUL; undecodable bytes arrive as lone surrogates)."""
    kind = rng.randrange(3)
    if kind == 0:
        value = rng.choice(WORDS)
    elif kind == 1:
        value = ",".join(rng.choices(LIST_ITEMS, k=rng.randint(1, 4)))
    else:
        value = "".join(rng.choices("0123456789.,- \t\u00b2\u0661xabGPU\udcff/", k=rng.randint(0, 30)))
    return value.replace("\x00", "")


def variables(rng: random.Random, valid: dict, hostile: bool = True) -> dict[str, str]:
    """A few of `valid`'s variables with values that work, one of them (when `hostile`) with a hostile value."""
    chosen = rng.sample(sorted(valid), rng.randint(1, min(4, len(valid))))
    environ = {name: rng.choice(valid[name]) for name in chosen}
    if hostile:
        environ[rng.choice(chosen)] = variable_value(rng)
    return environ


@pytest.fixture(scope="module")
def two_gpus():
    """A machine NVML answers for (two GPUs), so CUDA_VISIBLE_DEVICES is applied to what it found."""
    from test_host_probe import machine

    return machine(nvml="nvml/570.86.15-titanv-rtx5880.json")


def judged(facts: HostFacts) -> None:
    """What every command does with a host: print it, write it, judge an environment for it (the
    doctor's checks on its built-in example, which compare the driver release and CUDA version)."""
    from cudaresolve.commands.diagnosing import examine_example

    render_host(facts)
    HostFacts.from_json(facts.to_json())
    examine_example(facts)


@FUZZ
@given(number=NUMBERS)
@budgeted
def test_host_variables(two_gpus, number):
    rng = random.Random(number)
    flag = rng.choice([None, None, None, "driver", "cuda", "gpus"])  # the flag with the hostile value, if any
    environ = variables(rng, HOST_VARIABLES, hostile=flag is None)
    driver = variable_value(rng) if flag == "driver" else None
    cuda = variable_value(rng) if flag == "cuda" else None
    gpus = [variable_value(rng) for _ in range(rng.randint(1, 2))] if flag == "gpus" else []
    try:
        judged(host_for(overrides=overrides_from(driver, cuda, gpus, environ), environ=environ, readers=two_gpus))
    except CudaresolveError:
        pass
    try:
        locate_nvidia_smi(environ, ())
    except (CudaresolveError, SourceUnavailable):  # no nvidia-smi in no directory is a note, not an error
        pass


# -- requirements files -----------------------------------------------------------------------------

REQUIREMENT_LINES = [
    b"torch==2.7.1", b"numpy>=1.26,<2 ; python_version >= '3.10'", b"cupy[all]~=13.0", b"pkg==1.0 \\", b"  --hash=sha256:" + b"ab" * 32,
    b"-r included.txt", b"-c constraints.txt", b"--requirement=included.txt", b"-rincluded.txt", b"-i https://x.invalid/simple",
    b"--extra-index-url ${INDEX}/extra", b"-f ./wheels", b"--no-index", b"--trusted-host x.invalid", b"# a comment",
    b"pkg # trailing", b"-e ./here", b"--pre", b"pkg @ https://x.invalid/p.whl", b"./local.whl", b"\\", b"",
]
INCLUDED = [b"helper>=1\n-c constraints.txt\n", b"-r requirements.txt\n", b"-r included.txt\n", b"pkg<2\n"]


def requirements_file(rng: random.Random, extra: list[bytes]) -> bytes:
    text = b"\n".join(rng.choices(REQUIREMENT_LINES + extra, k=rng.randint(0, 8))) + b"\n"
    return mutate(text, rng) if rng.random() < 0.5 else text


@FUZZ
@given(number=NUMBERS)
@budgeted
def test_requirements_files(scratch, number):
    from packaging.requirements import Requirement

    from cudaresolve.resolve.requirements import merge, read_requirements_file

    rng = random.Random(number)
    files = {"requirements.txt": [], "included.txt": INCLUDED, "constraints.txt": [b"pkg<2", b"-c included.txt"]}
    for name, extra in files.items():
        (scratch / name).write_bytes(requirements_file(rng, extra))
    try:
        environ = variables(rng, {"INDEX": ["https://x.invalid"], "HOME": ["/root"], "X": ["x"]})
        found = merge([read_requirements_file(str(scratch / "requirements.txt"), environ)])
    except CudaresolveError:
        return
    for need in found.requirements + found.constraints:
        requirement = Requirement(str(need.requirement))  # it is written back to text (a lock, pip's files) and parses again
        requirement.specifier.contains("1.0", prereleases=True)  # what the resolver does with it
        if requirement.marker is not None:
            requirement.marker.evaluate({"extra": ""})


# -- pyproject.toml (--project, and [tool.cudaresolve] for every command's indexes) -----------------

PYPROJECT = b'''[project]
name = "me"
version = "1.0"
dependencies = ["torch>=2", "numpy ; python_version >= '3.10'"]
dynamic = []

[project.optional-dependencies]
gpu = ["cupy-cuda12x", "me[test]"]
test = ["pytest>=7"]

[dependency-groups]
dev = ["ruff", {include-group = "docs"}]
docs = ["sphinx"]

[tool.cudaresolve]
index-url = "https://x.invalid/simple"
extra-index-url = ["https://y.invalid/simple"]
find-links = ["./wheels"]
no-index = false
torch-index-base = "https://z.invalid"
'''
TOML_LINES = [b"x = " + b"[" * 2000 + b"]" * 2000, b"x = " + b"9" * 5000, b"x = 0x" + b"f" * 3000, b"a.b.c.d = 1",
              b"x = {a = {b = {c = 1}}}", b"[[project.x]]", b"x = 1979-05-27T07:32:00Z", b"x = inf", b"x = '''\n'''",
              b"dependencies = 'numpy'", b'gpu = ["me[' + b",".join(b"e%d" % i for i in range(60)) + b']"]',
              b'dynamic = ["dependencies"]', b'index-url = "http://[::1"', b"no-index = 1"]


def pyproject(rng: random.Random) -> bytes:
    if rng.random() < 0.5:
        return mutate(PYPROJECT, rng)
    lines = PYPROJECT.split(b"\n")
    at = rng.randint(0, len(lines))
    return b"\n".join(lines[:at] + [rng.choice(TOML_LINES)] + lines[at:])


@FUZZ
@given(number=NUMBERS)
@budgeted
def test_pyproject(scratch, number):
    from cudaresolve.index.config import read_project as read_settings
    from cudaresolve.resolve.requirements import read_project

    rng = random.Random(number)
    (scratch / "pyproject.toml").write_bytes(pyproject(rng))
    extras = rng.sample(["gpu", "test", "nope", "GPU"], rng.randint(0, 2))
    groups = rng.sample(["dev", "docs", "nope"], rng.randint(0, 2))
    try:
        read_project(str(scratch), extras, groups)
    except CudaresolveError:
        pass
    try:
        read_settings(str(scratch))
    except CudaresolveError:
        pass


# -- pip configuration files and PIP_* variables ----------------------------------------------------

PIP_CONF = b"""[global]
index-url = https://x.invalid/simple
extra-index-url =
    https://y.invalid/simple
    https://z.invalid/simple
timeout = 30
retries = 3
trusted-host = x.invalid
[install]
no-index = no
find-links = ~/wheels
break-system-packages = false
cert = ~/ca.pem
"""
PIP_VARIABLES = {
    "PIP_INDEX_URL": ["https://i.invalid/simple", "./here"], "PIP_EXTRA_INDEX_URL": ["https://e.invalid/simple a.invalid"],
    "PIP_FIND_LINKS": ["~/links /srv/wheels"], "PIP_NO_INDEX": ["yes", "0"], "PIP_TIMEOUT": ["5"], "PIP_DEFAULT_TIMEOUT": ["60"],
    "PIP_RETRIES": ["2"], "PIP_PROXY": ["http://proxy.invalid:3128"], "PIP_CERT": ["~/ca.pem"], "PIP_TRUSTED_HOST": ["x.invalid"],
    "PIP_BREAK_SYSTEM_PACKAGES": ["1", "no"], "PIP_TARGET": ["/tmp/t"], "PIP_USER": ["true", "false"],
    "PIP_PYPI_URL": ["https://p.invalid/simple"], "PIP_": ["x"],
}


@FUZZ
@given(number=NUMBERS)
@budgeted
def test_pip_configuration(scratch, number):
    from cudaresolve.env.interpreter import Target
    from cudaresolve.index.config import IndexSettings, merge, pip_settings, read_pip_files
    from cudaresolve.integrations.pip import _INSTALL_SETTINGS, externally_managed, installs_elsewhere

    rng = random.Random(number)
    (scratch / "pip.conf").write_bytes(mutate(PIP_CONF, rng))
    environ = {**variables(rng, PIP_VARIABLES), "HOME": str(scratch)}
    try:
        files = read_pip_files([str(scratch / "pip.conf")])
        merge(files, environ, None, IndexSettings(), lambda: "https://default.invalid/simple")
        settings = pip_settings(files, environ, "install", _INSTALL_SETTINGS)
        installs_elsewhere(settings)
        externally_managed(Target(site_packages=(str(scratch),), stdlib=str(scratch)), settings)
    except CudaresolveError:
        pass


# -- a package's own preload list (CuPy 13's cupy/.data/_wheel.json) --------------------------------

WHEEL_LIST = (  # cupy-cuda12x 13.6.0's, as its wheel ships it (517 bytes)
    b'{"cuda": "12.x", "packaging": "pip", "cutensor": {"version": "2.1.0", "min_pypi_version": "2.0.0", "filenames": '
    b'["libcutensor.so.2.1.0"]}, "nccl": {"version": "2.25.1", "min_pypi_version": "2.16.5", "filenames": '
    b'["libnccl.so.2.25.1"]}, "cudnn": {"version": "8.8.1", "min_pypi_version": "8.8.1", "filenames": ["libcudnn.so.8.8.1", '
    b'"libcudnn_ops_infer.so.8.8.1", "libcudnn_ops_train.so.8.8.1", "libcudnn_cnn_infer.so.8.8.1", "libcudnn_cnn_train.so.8.8.1", '
    b'"libcudnn_adv_infer.so.8.8.1", "libcudnn_adv_train.so.8.8.1"]}}'
)


def wheel_list_document(rng: random.Random) -> bytes:
    """CuPy's list with its text mutated, or its fields (the CUDA line, a library's entry, its
    min_pypi_version) replaced by other JSON values."""
    if rng.random() < 0.5:
        return mutate(WHEEL_LIST, rng)
    document = json.loads(WHEEL_LIST)
    for _ in range(rng.randint(1, 4)):
        path = rng.choice([("cuda",), ("nccl",), ("nccl", "min_pypi_version"), ("cutensor", "min_pypi_version"),
                           (rng.choice(WORDS),), (rng.choice(WORDS), "min_pypi_version")])
        parent = document
        for key in path[:-1]:
            parent = parent.setdefault(key, {}) if isinstance(parent, dict) else {}
        if isinstance(parent, dict):
            parent[path[-1]] = json_value(rng)
    return dumps(document).encode("utf-8", "surrogateescape")


@FUZZ
@given(number=NUMBERS)
@budgeted
def test_wheel_lists(scratch, number):
    """The list is read as the doctor reads it (None: nothing preloaded from it), then used as the
    scan uses it: whether each NCCL, cuTENSOR and cuDNN wheel row is taken at an installed release."""
    from packaging.version import Version

    from cudaresolve.env.preloads import WheelList, read_wheel_list, takes
    from cudaresolve.knowledge import components

    rng = random.Random(number)
    path = scratch / "_wheel.json"
    path.write_bytes(wheel_list_document(rng))
    listed = read_wheel_list(str(path))
    if listed is None:
        return
    assert isinstance(listed, WheelList) and 0 <= listed.cuda_major < 1000
    assert all(isinstance(name, str) and isinstance(version, Version) for name, version in listed.oldest.items())
    for soname in ("libnccl.so.2", "libcutensor.so.2", "libcudnn.so.8", "libcudnn.so.9"):
        for row in components.for_soname(soname):
            installed = {row.dist: rng.choice([Version("2.16.5"), Version("8.9.2.26"), Version("0"), Version("99!1.0")])}
            assert takes(listed, row, installed) in (True, False)


# -- a wheel read in place (inspect PATH.whl) -------------------------------------------------------


@pytest.fixture
def wheel_bytes(elf_builder) -> bytes:
    """A small wheel: a gcc-built library deflated, the same stored, a Python file and RECORD."""
    library = elf_builder.build("libw.so", "int w(void) { return 1; }\n", soname="libw.so").read_bytes()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("w/libw.so", library)
        archive.writestr(zipfile.ZipInfo("w/libstored.so.1"), library)
        archive.writestr("w/__init__.py", "")
        archive.writestr("w-1.0.dist-info/RECORD", "w/libw.so,,\n")
    return out.getvalue()


def damage(data: bytes, rng: random.Random) -> bytes:
    """The wheel with its structures hit where they are read (the local headers, the central
    directory and its end record) or anywhere, then perhaps cut."""
    archive = zipfile.ZipFile(io.BytesIO(data))
    regions = [(i.header_offset, 30 + len(i.filename)) for i in archive.infolist()]
    start = data.find(b"PK\x01\x02")
    regions += [(start, len(data) - start), (0, len(data))]
    damaged = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        offset, size = rng.choice(regions)
        at = offset + rng.randrange(size)
        width = rng.choice([1, 2, 4])
        value = rng.choice([0, 1, 0xFF, 0xFFFF, 0x7FFF_FFFF, 0xFFFF_FFFF, rng.getrandbits(32)])
        damaged[at:at + width] = (value % (1 << (8 * width))).to_bytes(width, "little")
    return bytes(damaged[:rng.choice([None, None, rng.randint(0, len(damaged))])])


@FUZZ
@given(number=NUMBERS)
@budgeted
def test_wheels_read_in_place(scratch, wheel_bytes, number):
    from cudaresolve.env.inspect import inspect_names
    from cudaresolve.env.interpreter import Target
    from cudaresolve.output.inspect import render_json, render_text

    path = scratch / "w-1.0-py3-none-any.whl"
    path.write_bytes(damage(wheel_bytes, random.Random(number)))
    items = inspect_names([str(path)], Target(site_packages=(str(scratch),)))  # never raises: each item says why
    render_text(items)
    json.loads(render_json(items))
    assert all((item.facts is None) == (item.error is not None) for item in items)


def test_the_seeds_are_read_whole(tmp_path, wheel_bytes):
    """Unmutated, every reader gives its value: the fuzz starts from inputs that work."""
    from cudaresolve.env.inspect import inspect_names
    from cudaresolve.env.interpreter import Target
    from cudaresolve.env.preloads import read_wheel_list
    from cudaresolve.index.config import read_pip_files
    from cudaresolve.index.config import read_project as read_settings
    from cudaresolve.resolve.requirements import read_project, read_requirements_file

    assert host_for(host_file="-", environ={}, stdin=io.StringIO(json.dumps(HOST))).driver.release == DriverRelease.parse("570.86.15")
    (tmp_path / "pyproject.toml").write_bytes(PYPROJECT)
    assert tuple(str(need.requirement) for need in read_project(str(tmp_path), ["gpu"], ["dev"]).requirements) == (
        "torch>=2", 'numpy; python_version >= "3.10"', "cupy-cuda12x", "pytest>=7", "ruff", "sphinx")
    assert read_settings(str(tmp_path)).index_url == "https://x.invalid/simple"
    (tmp_path / "pip.conf").write_bytes(PIP_CONF)
    assert read_pip_files([str(tmp_path / "pip.conf")])[0].sections["install"]["break-system-packages"] == "false"
    (tmp_path / "r.txt").write_bytes(b"\n".join(REQUIREMENT_LINES[:3]))
    assert tuple(str(need.requirement) for need in read_requirements_file(str(tmp_path / "r.txt"), {}).requirements) == (
        "torch==2.7.1", 'numpy<2,>=1.26; python_version >= "3.10"', "cupy[all]~=13.0")
    (tmp_path / "_wheel.json").write_bytes(WHEEL_LIST)
    assert str(read_wheel_list(str(tmp_path / "_wheel.json"))) == (
        "WheelList(cuda_major=12, oldest={'cutensor': <Version('2.0.0')>, 'nccl': <Version('2.16.5')>, "
        "'cudnn': <Version('8.8.1')>})")
    (tmp_path / "w.whl").write_bytes(wheel_bytes)
    assert [i.path.rsplit("/", 1)[-1] for i in inspect_names([str(tmp_path / "w.whl")], Target(site_packages=()))
            if i.facts is not None] == ["libw.so", "libstored.so.1"]


# -- a build's own record (tensorflow/python/platform/build_info.py) -----------------------------------

BUILD_INFO = (Path(__file__).parents[1] / "data" / "tensorflow-2.21.0-build_info.py").read_bytes()


def build_info_document(rng: random.Random) -> bytes:
    """tensorflow 2.21.0's real build_info.py with its text mutated, or its CUDA and cuDNN fields
    given other values (words, numbers, code), so the floor derived from them is exercised too."""
    if rng.random() < 0.5:
        return mutate(BUILD_INFO, rng)
    text = BUILD_INFO
    for field_name, value in ((b"cuda_version", b"'12.5.1'"), (b"cudnn_version", b"'9'")):
        if rng.random() < 0.7:
            other = repr(rng.choice([*WORDS, "9.8", "12.9", "99999999999999999999.1", "1e9", ""])).encode("utf-8", "surrogateescape")
            text = text.replace(b"('" + field_name + b"', " + value + b")", b"('" + field_name + b"', " + other + b")")
    return text


@FUZZ
@given(number=NUMBERS)
@budgeted
def test_build_records(scratch, number):
    """The record is read as the doctor reads it (never run), then judged as the doctor judges it:
    tensorflow 2.21.0 beside cuDNN 9.5.1.17, each finding worded."""
    from test_doctor_checks import dist, environment

    from cudaresolve.checks.floors import recorded_floors
    from cudaresolve.env.build_records import read_build_record
    from cudaresolve.output.findings import shown

    path = scratch / "build_info.py"
    path.write_bytes(build_info_document(random.Random(number)))
    fields = read_build_record(str(path), "build_info")
    if fields is None:
        return
    assert all(isinstance(key, str) and isinstance(value, str) for key, value in fields.items())
    env = replace(environment(dist("tensorflow", "2.21.0"), dist("nvidia-cudnn-cu12", "9.5.1.17")),
                  build_records={"tensorflow": fields})
    for finding in recorded_floors(env):
        shown(finding)


@FUZZ
@given(tail=st.binary(max_size=2000), text=st.text(max_size=200))
def test_an_observed_import_report_is_read_or_refused_never_raised(tail, text):
    """`doctor --import`'s child report (env/observe.py) is the target's output: any bytes after the
    marker give a validated report or none, and the words kept are one printable line."""
    from cudaresolve.env.observe import _report

    marker = b"cudaresolve-observed-x:"
    for after in (tail, json.dumps({"failed": {"m": ["E", text]}, "loaded": [text]}).encode()):
        report = _report(b"\n" + marker + after, marker)
        if report is not None:
            failed, loaded = report
            assert all(isinstance(path, str) for path in loaded)
            assert all(not any(ord(c) < 32 or 127 <= ord(c) <= 159 for c in kind + words)
                       for kind, words in failed.values())
