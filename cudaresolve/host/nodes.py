"""Host classes from a Kubernetes node list (`kubectl get nodes -o json`), read from the labels
NVIDIA's GPU Feature Discovery (GFD) puts on every GPU node, so one lock fits a whole cluster.

Nodes the judge cannot tell apart (the facts host/fleet.py's `judged` keeps: GPU memory and product
names do not count) collapse into one class with their names. A node with no sign of an NVIDIA
GPU (a CPU-only worker, the control plane) is skipped and named; a GPU node whose labels do not say
its driver, its CUDA version, its GPUs or its machine is an error naming the node and the labels it
lacks: nothing is guessed. The list is hostile input: its size is bounded, its shape checked, and
every label key and value checked before use: no control, format (bidi such as U+202E) or
line-separator character (U+2028) in any, and a compute capability of a known major
(docs/host-json.md, "Hosts from Kubernetes nodes").

May import: the base values (errors, versions, arch, bounded), host/facts and host/fleet.
"""

from __future__ import annotations

import errno
import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, TextIO

from cudaresolve.arch import ComputeCapability
from cudaresolve.bounded import MAX_INPUT_FILE, loads_json, read_bounded
from cudaresolve.errors import UsageError
from cudaresolve.host.facts import Driver, Gpu, HostFacts, check_known
from cudaresolve.host.fleet import judged
from cudaresolve.versions import CudaVersion, DriverRelease

SOURCE = "node-labels"  # the source of every fact read from a node's labels

# GFD's labels (docs/host-json.md cites them): each fact by its documented name, then the name newer
# GFD releases also write. Where both are present they must agree.
DRIVER_MAJOR = ("nvidia.com/cuda.driver.major", "nvidia.com/cuda.driver-version.major")
DRIVER_MINOR = ("nvidia.com/cuda.driver.minor", "nvidia.com/cuda.driver-version.minor")
DRIVER_REV = ("nvidia.com/cuda.driver.rev", "nvidia.com/cuda.driver-version.revision")
DRIVER_FULL = "nvidia.com/cuda.driver-version.full"
CUDA_MAJOR = ("nvidia.com/cuda.runtime.major", "nvidia.com/cuda.runtime-version.major")
CUDA_MINOR = ("nvidia.com/cuda.runtime.minor", "nvidia.com/cuda.runtime-version.minor")
COMPUTE_MAJOR = ("nvidia.com/gpu.compute.major",)
COMPUTE_MINOR = ("nvidia.com/gpu.compute.minor",)
GPU_COUNT = ("nvidia.com/gpu.count",)
ARCH = ("kubernetes.io/arch", "beta.kubernetes.io/arch")
OS = ("kubernetes.io/os", "beta.kubernetes.io/os")
REQUIRED = (DRIVER_MAJOR, DRIVER_MINOR, DRIVER_REV, CUDA_MAJOR, CUDA_MINOR, COMPUTE_MAJOR, COMPUTE_MINOR, GPU_COUNT)
# the labels a class is read from: GPU memory and product name are words the judge does not read
_STATING = tuple(key for keys in (*REQUIRED, ARCH, OS) for key in keys) + (DRIVER_FULL,)
# Signs of an NVIDIA GPU without GFD's labels: the GPU operator's label, NFD's PCI vendor label, the
# device plugin's resource. A node with one of them and partial labels is named, not skipped.
GPU_SIGNS = {"nvidia.com/gpu.present": "true", "feature.node.kubernetes.io/pci-10de.present": "true"}
GPU_RESOURCE = "nvidia.com/gpu"

ARCHITECTURES = {"amd64": "x86_64", "arm64": "aarch64", "ppc64le": "ppc64le"}  # Go's GOARCH -> machine
SYSTEMS = {"linux": "Linux", "windows": "Windows"}

MAX_NODES = 100_000
MAX_GPUS = 1024  # per node: MIG's "single" strategy counts instances (8 GPUs x 7)
MAX_LABEL_KEY = 317  # Kubernetes: a 253-character prefix, "/", a 63-character name
MAX_LABEL_VALUE = 63
_NODE_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")  # a DNS subdomain, as the API server requires
_NUMBER = re.compile(r"[0-9]{1,6}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")  # ASCII's controls; beyond ASCII, _REFUSED's categories
# Unicode's control, format (U+202E and the other bidi controls), surrogate, line and paragraph
# separator characters: none belongs in a label, and each can forge or hide text where it is shown
_REFUSED = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


@dataclass(frozen=True)
class NodeClass:
    """Nodes with identical facts: one host of the fleet."""

    facts: HostFacts
    nodes: tuple[str, ...]  # their names, sorted

    @property
    def count(self) -> int:
        return len(self.nodes)


@dataclass(frozen=True)
class Cluster:
    """What a node list says: the GPU nodes' classes, and the nodes skipped for having no GPU."""

    classes: tuple[NodeClass, ...]
    without_gpu: tuple[str, ...]


def read_node_list(path: str, stdin: TextIO) -> str:
    """The text of `path` ("-" is stdin), at most 16 MiB; an OSError or UnicodeDecodeError otherwise."""
    if path == "-":
        text = stdin.read(MAX_INPUT_FILE + 1)
        if len(text) > MAX_INPUT_FILE:
            raise OSError(errno.EFBIG, f"larger than {MAX_INPUT_FILE >> 20} MiB")
        return text
    return read_bounded(path).decode("utf-8")


def load_cluster(path: str, stdin: TextIO) -> Cluster:
    """`--hosts-from-nodes PATH`: any problem is a UsageError naming the option and the path."""
    origin = f"--hosts-from-nodes {path}"
    try:
        text = read_node_list(path, stdin)
    except OSError as exc:
        raise UsageError(f"{origin}: cannot read it ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise UsageError(f"{origin}: not UTF-8 text") from None
    return cluster_from_json(text, origin)


def cluster_from_json(text: str, origin: str) -> Cluster:
    """The classes of the GPU nodes in a `kubectl get nodes -o json` (or `get node NAME -o json`)."""
    try:
        data = loads_json(text)
    except ValueError as exc:
        raise UsageError(f"{origin}: not valid JSON ({exc})") from None
    items = _items(data, origin)
    names: set[str] = set()
    by_facts: dict[HostFacts, list[str]] = {}
    known: dict[tuple[Optional[str], ...], HostFacts] = {}
    without_gpu: list[str] = []
    lacking: list[str] = []
    for i, item in enumerate(items):
        name, labels, gpu_resource, info = _node(item, f"{origin}: items[{i}]")
        where = f"{origin}: node {name}"
        if name in names:
            raise UsageError(f"{where}: listed twice")
        names.add(name)
        if not _has_gpu(labels, gpu_resource):
            without_gpu.append(name)
            continue
        missing = [keys[0] for keys in REQUIRED if not any(key in labels for key in keys)]
        if _value(labels, ARCH, where) is None and info.get("architecture") is None:
            missing.append(ARCH[0])
        if _value(labels, OS, where) is None and info.get("operatingSystem") is None:
            missing.append(OS[0])
        if missing:
            lacking.append(f"{name} lacks {', '.join(missing)}")
            continue
        stated = tuple(labels.get(key) for key in _STATING) + (info.get("architecture"), info.get("operatingSystem"))
        if stated not in known:  # nodes of one kind state the same labels: read them once
            known[stated] = judged(_facts(labels, info, where), where)
        by_facts.setdefault(known[stated], []).append(name)
    if lacking:
        shown = "; ".join(lacking[:5]) + (f"; and {len(lacking) - 5} more node(s)" if len(lacking) > 5 else "")
        raise UsageError(f"{origin}: GPU nodes without GPU Feature Discovery's labels (nothing is guessed): {shown}")
    if not by_facts:
        raise UsageError(f"{origin}: no node has an NVIDIA GPU ({len(items)} node(s) listed, none labelled by GPU Feature Discovery)")
    classes = regrouped(NodeClass(facts, tuple(nodes)) for facts, nodes in by_facts.items())
    return Cluster(classes, tuple(sorted(without_gpu, key=_natural)))


def regrouped(classes: Iterable[NodeClass]) -> tuple[NodeClass, ...]:
    """Classes of the same facts as one (overrides can make them alike), each's nodes sorted,
    ordered by their first node."""
    by_facts: dict[HostFacts, list[str]] = {}
    for node_class in classes:
        by_facts.setdefault(node_class.facts, []).extend(node_class.nodes)
    return tuple(sorted((NodeClass(facts, tuple(sorted(nodes, key=_natural))) for facts, nodes in by_facts.items()),
                        key=lambda c: _natural(c.nodes[0])))


def class_label(node_class: NodeClass) -> str:
    """`nodes gpu-a-1..3 (3)`, `node gpu-b-1`: the host's label in the lock and its report."""
    if node_class.count == 1:
        return f"node {node_class.nodes[0]}"
    return f"nodes {shortened(node_class.nodes)} ({node_class.count})"


def shortened(names: tuple[str, ...], width: int = 160) -> str:
    """Sorted node names with runs of three or more consecutive numbers shortened (a-1..3), at most
    about `width` characters of them, then `+N more`."""
    runs = _runs(names)
    shown: list[str] = []
    used = 0
    for text, _ in runs:
        if shown and used + len(text) > width:
            break
        shown.append(text)
        used += len(text) + 2
    if len(shown) < len(runs):
        shown.append(f"+{sum(size for _, size in runs[len(shown):])} more")
    return ", ".join(shown)


# -- the node list's shape -------------------------------------------------------------------------


def _items(data: Any, origin: str) -> list[Any]:
    if not isinstance(data, dict):
        raise UsageError(f"{origin}: top level must be an object (kubectl get nodes -o json), got {type(data).__name__}")
    kind = data.get("kind")
    if kind == "Node":  # kubectl get node NAME -o json
        return [data]
    if kind not in (None, "List", "NodeList"):
        raise UsageError(f"{origin}: kind must be List, NodeList or Node, got {_shown(kind)}")
    items = data.get("items")
    if not isinstance(items, list):
        raise UsageError(f"{origin}: 'items' must be a list of nodes, got {_shown(items)}")
    if len(items) > MAX_NODES:
        raise UsageError(f"{origin}: more than {MAX_NODES} nodes")
    return items


def _node(item: Any, where: str) -> tuple[str, dict[str, str], Optional[str], Mapping[str, Any]]:
    """(name, labels, its nvidia.com/gpu capacity, status.nodeInfo) of one item, each checked."""
    if not isinstance(item, dict):
        raise UsageError(f"{where} must be an object, got {_shown(item)}")
    if item.get("kind", "Node") != "Node":
        raise UsageError(f"{where}: kind must be Node, got {_shown(item.get('kind'))}")
    metadata = _object(item.get("metadata"), f"{where}.metadata", required=True)
    name = metadata.get("name")
    if not isinstance(name, str) or not _NODE_NAME.fullmatch(name):
        raise UsageError(f"{where}.metadata.name must be a node name (a DNS subdomain), got {_shown(name)}")
    where = f"{where} ({name})"
    labels = _object(metadata.get("labels"), f"{where}.metadata.labels")
    if not _all_label_text(labels):
        _name_bad_label(labels, where)
    status = _object(item.get("status"), f"{where}.status")
    info = _object(status.get("nodeInfo"), f"{where}.status.nodeInfo")
    for key in ("architecture", "operatingSystem"):
        value = info.get(key)
        if value is not None and (not isinstance(value, str) or len(value) > MAX_LABEL_VALUE or _unsafe(value)):
            raise UsageError(f"{where}.status.nodeInfo.{key} must be a short line of text, got {_shown(value)}")
    capacity = _object(status.get("capacity"), f"{where}.status.capacity")
    gpus = capacity.get(GPU_RESOURCE)
    if gpus is not None and not (isinstance(gpus, str) and _NUMBER.fullmatch(gpus)):
        raise UsageError(f"{where}.status.capacity.{GPU_RESOURCE} must be a count, got {_shown(gpus)}")
    return name, labels, gpus, info


def _all_label_text(labels: Mapping[str, Any]) -> bool:
    """Whether every key and value is label text: one pass over all of them (a node has dozens)."""
    values = labels.values()
    if not all(isinstance(value, str) for value in values):
        return False
    if max(map(len, labels), default=0) > MAX_LABEL_KEY or max(map(len, values), default=0) > MAX_LABEL_VALUE:
        return False
    return not _unsafe("".join(labels)) and not _unsafe("".join(values))


def _unsafe(text: str) -> bool:
    """Whether `text` holds a character of the _REFUSED categories (ASCII text: one regex scan)."""
    if text.isascii():
        return _CONTROL.search(text) is not None
    return any(unicodedata.category(char) in _REFUSED for char in text)


def _name_bad_label(labels: Mapping[str, Any], where: str) -> None:
    """The error naming the first label that is not label text."""
    for key, value in labels.items():
        if len(key) > MAX_LABEL_KEY or _unsafe(key):
            raise UsageError(f"{where}: label key {_shown(key)} is not a label key")
        if not isinstance(value, str) or len(value) > MAX_LABEL_VALUE or _unsafe(value):
            raise UsageError(f"{where}: label {key} must be a label value (text of at most 63 characters, "
                             f"no control, format or line-separator character), got {_shown(value)}")


def _object(value: Any, where: str, required: bool = False) -> dict[str, Any]:
    if value is None and not required:
        return {}
    if not isinstance(value, dict):
        raise UsageError(f"{where} must be an object, got {_shown(value)}")
    return value


def _has_gpu(labels: Mapping[str, str], gpu_resource: Optional[str]) -> bool:
    gfd = any(key in labels for keys in REQUIRED for key in keys) or DRIVER_FULL in labels
    signs = any(labels.get(key) == value for key, value in GPU_SIGNS.items())
    return gfd or signs or (gpu_resource is not None and int(gpu_resource) > 0)


# -- the facts a GPU node's labels state -----------------------------------------------------------


def _facts(labels: Mapping[str, str], info: Mapping[str, Any], where: str) -> HostFacts:
    release_text = ".".join(
        part for part in (_number(labels, DRIVER_MAJOR, where), _number(labels, DRIVER_MINOR, where), _revision(labels, where))
        if part is not None
    )
    full = labels.get(DRIVER_FULL)
    if full is not None and full != release_text:
        raise UsageError(f"{where}: {DRIVER_FULL} {full!r} disagrees with {DRIVER_MAJOR[0]}/minor/rev ({release_text})")
    cuda_text = f"{_number(labels, CUDA_MAJOR, where)}.{_number(labels, CUDA_MINOR, where)}"  # each names `where` itself
    cc_text = f"{_number(labels, COMPUTE_MAJOR, where)}.{_number(labels, COMPUTE_MINOR, where)}"
    try:
        release = DriverRelease.parse(release_text)
        cuda = CudaVersion.parse(cuda_text)
        cc = ComputeCapability.parse(cc_text)
    except UsageError as exc:
        raise UsageError(f"{where}: {exc}") from None
    try:
        check_known(cc)  # a label is no driver's answer: major 99 is a forged or broken label
    except UsageError as exc:
        raise UsageError(f"{where}: {COMPUTE_MAJOR[0]}: {exc}") from None
    count = int(_number(labels, GPU_COUNT, where) or 0)
    if not 1 <= count <= MAX_GPUS:
        raise UsageError(f"{where}: {GPU_COUNT[0]} must be 1 to {MAX_GPUS}, got {count}")
    return HostFacts(
        system=_system(labels, info, where),
        machine=_machine(labels, info, where),
        driver=Driver(release=release, release_source=SOURCE, cuda=cuda, cuda_source=SOURCE),
        gpus=(Gpu(compute_capability=cc, source=SOURCE, index=0),),  # `count` GPUs of one kind, judged as one
        glibc=None,  # the node's own glibc is not the container's, and no label says either
        tegra=False,  # GFD labels a Jetson with the same names and nothing that tells it is one
    )


def _value(labels: Mapping[str, str], keys: tuple[str, ...], where: str) -> Optional[str]:
    """The value of the first of `keys` present; every one present must agree."""
    present = [(key, labels[key]) for key in keys if key in labels]
    for key, value in present[1:]:
        if value != present[0][1]:
            raise UsageError(f"{where}: {present[0][0]} {present[0][1]!r} disagrees with {key} {value!r}")
    return present[0][1] if present else None


def _number(labels: Mapping[str, str], keys: tuple[str, ...], where: str) -> Optional[str]:
    value = _value(labels, keys, where)
    if value is not None and not _NUMBER.fullmatch(value):
        raise UsageError(f"{where}: {keys[0]} must be a number, got {_shown(value)}")
    return value


def _revision(labels: Mapping[str, str], where: str) -> Optional[str]:
    """The driver's third field; GFD writes an empty one for a release of two fields (455.06)."""
    value = _value(labels, DRIVER_REV, where)
    return _number(labels, DRIVER_REV, where) if value else None


def _machine(labels: Mapping[str, str], info: Mapping[str, Any], where: str) -> str:
    return _one_of(labels, info, ARCH, "architecture", ARCHITECTURES, where)


def _system(labels: Mapping[str, str], info: Mapping[str, Any], where: str) -> str:
    return _one_of(labels, info, OS, "operatingSystem", SYSTEMS, where)


def _one_of(labels: Mapping[str, str], info: Mapping[str, Any], keys: tuple[str, ...], field: str,
            names: Mapping[str, str], where: str) -> str:
    label, reported = _value(labels, keys, where), info.get(field)
    if label is not None and reported is not None and label != reported:
        raise UsageError(f"{where}: {keys[0]} {label!r} disagrees with status.nodeInfo.{field} {reported!r}")
    value = label if label is not None else reported
    if not isinstance(value, str) or value not in names:
        raise UsageError(f"{where}: {keys[0]} must be one of {', '.join(names)}, got {_shown(value)}")
    return names[value]


# -- names -----------------------------------------------------------------------------------------


def _natural(name: str) -> tuple[Any, ...]:
    """gpu-2 before gpu-10."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"([0-9]+)", name))


def _runs(names: tuple[str, ...]) -> list[tuple[str, int]]:
    """(text, how many names) for sorted names, three or more consecutive numbers shortened:
    a-1, a-2, a-3 -> a-1..3. A number with a leading zero is never shortened."""
    runs: list[tuple[str, int]] = []
    run: list[tuple[str, int, str]] = []  # (stem, number, name)

    def flush() -> None:
        if len(run) >= 3:
            runs.append((f"{run[0][2]}..{run[-1][1]}", len(run)))
        else:
            runs.extend((name, 1) for _, _, name in run)
        run.clear()

    for name in names:
        stem = name.rstrip("0123456789")
        digits = name[len(stem):]
        numbered = bool(digits) and (digits == "0" or not digits.startswith("0"))
        if run and not (numbered and stem == run[-1][0] and int(digits) == run[-1][1] + 1):
            flush()
        if numbered:
            run.append((stem, int(digits), name))
        else:
            runs.append((name, 1))
    flush()
    return runs


def _shown(value: Any) -> str:
    """A value from the list as an error may show it: its type for a container, a short repr else."""
    if isinstance(value, (dict, list)):
        return f"a JSON {'object' if isinstance(value, dict) else 'array'}"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
