"""`--hosts-from-nodes`: a `kubectl get nodes -o json` read into host classes from GPU Feature
Discovery's labels, and a lock for them that equals the lock for the same hosts given as --host files;
fleets folded into classes by what the judge reads before anything is resolved (host/fleet.py).

tests/data/nodes-mixed-cluster.json is a recorded-style node list of a mixed cluster: a control-plane
node and a CPU worker, three A100 nodes with driver 550 (identical but for their timestamps), two L4
nodes with driver 535, one H100 and two GH200 (aarch64) nodes with driver 570 whose GFD also writes
the newer `cuda.driver-version.*` labels.
"""

from __future__ import annotations

import copy
import io
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from cudaresolve.arch import ComputeCapability
from cudaresolve.cli import main
from cudaresolve.commands.host_options import host_options
from cudaresolve.commands.hosts import hosts
from cudaresolve.commands.parser import build_parser
from cudaresolve.errors import UsageError
from cudaresolve.host.facts import Driver, Gpu, HostFacts, Note
from cudaresolve.host.fleet import MAX_KINDS, HostClass, fold, judged
from cudaresolve.host.fleet import class_label as fleet_label
from cudaresolve.host.nodes import SOURCE, NodeClass, class_label, cluster_from_json, load_cluster, shortened
from cudaresolve.lockfile.pylock import read_pylock
from cudaresolve.versions import CudaVersion, DriverRelease

CLUSTER = Path(__file__).parents[1] / "data" / "nodes-mixed-cluster.json"
ORIGIN = "--hosts-from-nodes nodes.json"


def node_list() -> dict[str, Any]:
    return json.loads(CLUSTER.read_text())


def node(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(item for item in data["items"] if item["metadata"]["name"] == name)


def refused(data: Any) -> str:
    text = data if isinstance(data, str) else json.dumps(data)
    with pytest.raises(UsageError) as caught:
        cluster_from_json(text, ORIGIN)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(ORIGIN), message
    return message


# -- the mixed cluster -----------------------------------------------------------------------------


def test_identical_gpu_nodes_collapse_into_classes_with_counts_and_names():
    cluster = cluster_from_json(CLUSTER.read_text(), ORIGIN)
    table = {
        (node_class.nodes, node_class.count): (
            node_class.facts.machine, str(node_class.facts.driver.release), str(node_class.facts.driver.cuda),
            [str(gpu.compute_capability) for gpu in node_class.facts.gpus],
        )
        for node_class in cluster.classes
    }
    assert table == {  # a node's eight identical GPUs are one kind: what the judge reads (host/fleet.py)
        (("gh200-1", "gh200-2"), 2): ("aarch64", "570.124.06", "12.8", ["9.0"]),
        (("gpu-a100-1", "gpu-a100-2", "gpu-a100-3"), 3): ("x86_64", "550.90.07", "12.4", ["8.0"]),
        (("gpu-h100-1",), 1): ("x86_64", "570.124.06", "12.8", ["9.0"]),
        (("gpu-l4-1", "gpu-l4-2"), 2): ("x86_64", "535.183.01", "12.2", ["8.9"]),
    }
    assert cluster.without_gpu == ("control-plane-1", "cpu-1")
    assert [class_label(c) for c in cluster.classes] == [
        "nodes gh200-1, gh200-2 (2)", "nodes gpu-a100-1..3 (3)", "node gpu-h100-1", "nodes gpu-l4-1, gpu-l4-2 (2)",
    ]


def test_a_class_holds_the_facts_a_host_file_would_state():
    a100 = cluster_from_json(CLUSTER.read_text(), ORIGIN).classes[1].facts
    assert a100.system == "Linux" and a100.glibc is None and a100.tegra is False
    assert a100.driver.release == DriverRelease.parse("550.90.07") and a100.driver.cuda == CudaVersion.parse("12.4")
    assert a100.driver.release_source == a100.driver.cuda_source == SOURCE
    assert a100.min_compute_capability == ComputeCapability.parse("8.0")
    assert [(gpu.index, gpu.name, gpu.memory_mib) for gpu in a100.gpus] == [(0, None, None)]  # words only: not judged
    assert not any(gpu.stated for gpu in a100.gpus)  # the driver's word, as a probe's
    # and the facts go through the host JSON unchanged
    assert type(a100).from_json(a100.to_json()) == a100


def test_a_driver_of_two_fields_has_an_empty_revision_label():
    data = node_list()
    labels = node(data, "gpu-l4-1")["metadata"]["labels"]
    labels.update({"nvidia.com/cuda.driver.major": "455", "nvidia.com/cuda.driver.minor": "06", "nvidia.com/cuda.driver.rev": ""})
    classes = cluster_from_json(json.dumps(data), ORIGIN).classes
    assert "455.06" in {str(c.facts.driver.release) for c in classes}


def test_arch_falls_back_to_node_info_and_a_single_node_object_is_read():
    item = node(node_list(), "gh200-1")
    for key in ("kubernetes.io/arch", "beta.kubernetes.io/arch"):
        del item["metadata"]["labels"][key]
    (only,) = cluster_from_json(json.dumps(item), ORIGIN).classes  # kubectl get node gh200-1 -o json
    assert only.facts.machine == "aarch64" and only.nodes == ("gh200-1",)


def test_cli_reads_the_list_from_stdin_and_names_the_skipped_nodes(monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO(CLUSTER.read_text()))
    args = build_parser().parse_args(["lock", "--hosts-from-nodes", "-"])
    fleet = hosts(args, host_options(args))
    assert [label for label, _ in fleet][1] == "nodes gpu-a100-1..3 (3)"
    err = capsys.readouterr().err
    assert err.splitlines() == [
        "--hosts-from-nodes -: skipped 2 nodes with no NVIDIA GPU (no GPU Feature Discovery label): control-plane-1, cpu-1",
        "8 hosts fold into 4 classes by what the judge reads (system, machine, glibc, driver, CUDA version, distinct "
        "compute capabilities): each class is resolved and recorded once",
    ]


def test_host_files_and_node_classes_join_one_fleet_and_overrides_apply_to_both(tmp_path, capsys):
    assert main(["probe", "--json", "--driver", "550.144.03", "--gpu", "8.6"]) == 0
    host = tmp_path / "ampere.json"
    host.write_text(capsys.readouterr().out)
    args = build_parser().parse_args(["lock", "--host", str(host), "--hosts-from-nodes", str(CLUSTER), "--gpu", "7.5", "-q"])
    fleet = hosts(args, host_options(args))
    assert [label for label, _ in fleet] == [str(host), "nodes gh200-1, gh200-2 (2)", "nodes gpu-a100-1..3 (3)",
                                             "node gpu-h100-1", "nodes gpu-l4-1, gpu-l4-2 (2)"]
    assert {str(facts.min_compute_capability) for _, facts in fleet} == {"7.5"}
    assert capsys.readouterr().err == ""  # -q


def test_both_reading_stdin_is_refused():
    args = build_parser().parse_args(["lock", "--host", "-", "--hosts-from-nodes", "-"])
    with pytest.raises(UsageError, match="cannot both read stdin"):
        hosts(args, host_options(args))


def test_labels_of_many_identical_nodes_stay_short():
    names = tuple(f"gpu-{i}" for i in range(1, 301)) + tuple(f"edge-{c}" for c in "abcdefghijklmnopqrstuvwxyz")
    facts = cluster_from_json(CLUSTER.read_text(), ORIGIN).classes[0].facts
    label = class_label(NodeClass(facts, tuple(sorted(names))))
    assert label.endswith("(326)") and len(label) < 200, label
    assert "+" in label and "more" in label
    assert shortened(("gpu-1", "gpu-2", "gpu-3", "gpu-5", "gpu-07", "gpu-08", "gpu-09")) == "gpu-1..3, gpu-5, gpu-07, gpu-08, gpu-09"


# -- partial labels: named, never guessed ----------------------------------------------------------


def test_a_gpu_node_with_partial_labels_is_named_with_the_labels_it_lacks():
    data = node_list()
    labels = node(data, "gpu-l4-2")["metadata"]["labels"]
    for key in ("nvidia.com/cuda.runtime.major", "nvidia.com/cuda.runtime.minor", "nvidia.com/gpu.count"):
        del labels[key]
    message = refused(data)
    assert "gpu-l4-2 lacks nvidia.com/cuda.runtime.major, nvidia.com/cuda.runtime.minor, nvidia.com/gpu.count" in message
    assert "gpu-l4-1" not in message


def test_a_gpu_node_gfd_never_labelled_is_named_not_skipped():
    data = node_list()
    labels = node(data, "gpu-h100-1")["metadata"]["labels"]
    for key in [key for key in labels if key.startswith("nvidia.com/")]:
        del labels[key]  # NFD's PCI label and the device plugin's resource remain
    message = refused(data)
    assert "gpu-h100-1 lacks nvidia.com/cuda.driver.major" in message and "nvidia.com/gpu.compute.major" in message


def test_labels_that_disagree_are_refused():
    data = node_list()
    node(data, "gh200-1")["metadata"]["labels"]["nvidia.com/cuda.driver-version.full"] = "570.133.20"
    assert "570.133.20" in refused(data) and "gh200-1" in refused(data)
    data = node_list()
    node(data, "gh200-2")["status"]["nodeInfo"]["architecture"] = "amd64"
    assert "gh200-2: kubernetes.io/arch 'arm64' disagrees with status.nodeInfo.architecture 'amd64'" in refused(data)


def test_a_cluster_without_gpu_nodes_is_refused():
    data = node_list()
    data["items"] = data["items"][:2]
    assert "no node has an NVIDIA GPU (2 node(s) listed" in refused(data)


# -- hostile input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "mutate, expected",
    [
        (lambda d: d["items"][3]["metadata"]["labels"].update({"nvidia.com/gpu.product": "A100\nexit 0"}), "label nvidia.com/gpu.product must be a label value"),
        (lambda d: d["items"][3]["metadata"]["labels"].update({"nvidia.com/gpu.product": "x" * 64}), "at most 63 characters"),
        (lambda d: d["items"][3]["metadata"]["labels"].update({"nvidia.com/gpu.count": 8}), "got 8"),
        (lambda d: d["items"][3]["metadata"]["labels"].update({"note\x1b[2J": "x"}), "is not a label key"),
        (lambda d: d["items"][3]["metadata"]["labels"].update({"nvidia.com/gpu.product": "A100\u2028exit 0"}), "gpu.product must be a label value"),
        (lambda d: d["items"][3]["metadata"]["labels"].update({"nvidia.com/gpu.family": "ampere\u202egnp.exe"}), "gpu.family must be a label value"),
        (lambda d: d["items"][3]["metadata"]["labels"].update({"example.com/z\u200f": "x"}), "is not a label key"),
        (lambda d: d["items"][3]["metadata"]["labels"].update({"nvidia.com/gpu.product": "A100\u2029"}), "gpu.product must be a label value"),
        (lambda d: d["items"][3]["metadata"]["labels"].update({"nvidia.com/gpu.product": "A100\ud800"}), "gpu.product must be a label value"),
        (lambda d: d["items"][3]["status"]["nodeInfo"].update({"architecture": "amd64\u202e"}), "short line of text"),
        (lambda d: d["items"][3]["metadata"]["labels"].update({"nvidia.com/gpu.compute.major": "99"}),
         "node gpu-a100-2: nvidia.com/gpu.compute.major: unknown compute capability 99.0"),
        (lambda d: d["items"][3]["metadata"]["labels"].update({"nvidia.com/gpu.compute.major": "0"}), "unknown compute capability 0.0"),
        (lambda d: d["items"][3]["metadata"]["labels"].update({"nvidia.com/cuda.driver.major": "55 0"}), "must be a number"),
        (lambda d: d["items"][3]["metadata"]["labels"].update({"nvidia.com/gpu.count": "0"}), "must be 1 to 1024"),
        (lambda d: [d["items"][3]["metadata"]["labels"].update({"kubernetes.io/arch": "s390x", "beta.kubernetes.io/arch": "s390x"}),
                    d["items"][3]["status"]["nodeInfo"].update({"architecture": "s390x"})], "must be one of amd64, arm64, ppc64le"),
        (lambda d: d["items"][3]["metadata"].update({"name": "gpu\nnode"}), "must be a node name"),
        (lambda d: d["items"][4]["metadata"].update({"name": "gpu-a100-1"}), "node gpu-a100-1: listed twice"),
        (lambda d: d["items"][3].update({"metadata": []}), "metadata must be an object"),
        (lambda d: d["items"][3]["status"].update({"capacity": {"nvidia.com/gpu": "lots"}}), "must be a count"),
        (lambda d: d["items"][3]["status"]["nodeInfo"].update({"architecture": "amd64\r"}), "short line of text"),
        (lambda d: d.update({"items": {"a": 1}}), "'items' must be a list of nodes"),
        (lambda d: d.update({"kind": "PodList"}), "kind must be List, NodeList or Node"),
        (lambda d: d["items"].append("node"), "items[10] must be an object"),
    ],
)
def test_bad_values_are_one_line_errors(mutate, expected):
    data = node_list()
    mutate(data)
    assert expected in refused(data)



@pytest.mark.parametrize("label", ["nvidia.com/gpu.compute.minor", "nvidia.com/cuda.runtime.major"])
def test_a_bad_number_names_its_node_once(label):
    """Before: "... node gpu-a100-2: ... node gpu-a100-2: nvidia.com/gpu.compute.minor must be a number"."""
    data = node_list()
    data["items"][3]["metadata"]["labels"][label] = "-1"
    message = refused(data)
    assert message.count("node gpu-a100-2") == 1 and message.endswith(f"node gpu-a100-2: {label} must be a number, got '-1'"), message

def test_not_json_and_the_wrong_shape_are_one_line_errors():
    assert "not valid JSON" in refused("NAME STATUS ROLES\ngpu-1 Ready <none>\n")
    assert "top level must be an object" in refused([])
    assert "nested too deeply" in refused("[" * 100_000)


def test_a_huge_file_is_refused_before_it_is_parsed(tmp_path, capsys):
    huge = tmp_path / "nodes.json"
    huge.write_bytes(b" " * (16 * 1024 * 1024 + 1))
    assert main(["lock", "--check", "pylock.toml", "--hosts-from-nodes", str(huge)]) == 3
    assert capsys.readouterr().err == f"cudaresolve: error: --hosts-from-nodes {huge}: cannot read it (larger than 16 MiB)\n"
    with pytest.raises(UsageError, match="larger than 16 MiB"):
        load_cluster("-", io.StringIO(" " * (16 * 1024 * 1024 + 1)))


def test_bad_input_on_the_command_line_is_exit_3_with_one_line(tmp_path, capsys):
    bad = tmp_path / "nodes.json"
    data = node_list()
    data["items"][3]["metadata"]["labels"]["nvidia.com/gpu.product"] = "A100\n"
    bad.write_text(json.dumps(data))
    assert main(["lock", "torch", "--hosts-from-nodes", str(bad)]) == 3
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and "gpu-a100-2" in captured.err


# -- the lock: nodes and the equivalent host files -------------------------------------------------


def x86_subset(tmp_path: Path) -> tuple[Path, list[tuple[str, str, list[str]]]]:
    """The cluster's amd64 nodes as a node list, and (name, driver, GPUs) of the first node of each
    kind of GPU node, by name: one host file each is what a user who probes them would write."""
    data = node_list()
    data["items"] = [item for item in data["items"] if item["metadata"]["labels"]["kubernetes.io/arch"] == "amd64"]
    for number, item in enumerate(data["items"]):  # words the judge does not read: they split no class
        item["metadata"]["labels"].update({"nvidia.com/gpu.memory": str(40000 + number), "nvidia.com/gpu.product": f"GPU-{number}"})
    path = tmp_path / "x86-nodes.json"
    path.write_text(json.dumps(data))
    kinds: dict[tuple[str, tuple[str, ...]], str] = {}
    for item in sorted(data["items"], key=lambda item: item["metadata"]["name"]):
        labels = item["metadata"]["labels"]
        if "nvidia.com/gpu.count" in labels:
            driver = ".".join(labels[f"nvidia.com/cuda.driver.{part}"] for part in ("major", "minor", "rev"))
            cc = f"{labels['nvidia.com/gpu.compute.major']}.{labels['nvidia.com/gpu.compute.minor']}"
            kinds.setdefault((driver, (cc,) * int(labels["nvidia.com/gpu.count"])), item["metadata"]["name"])
    return path, [(name, driver, list(gpus)) for (driver, gpus), name in kinds.items()]


@pytest.mark.usefixtures("hermetic")
def test_lock_from_nodes_equals_the_lock_from_the_equivalent_host_files(cuda_index, empty_python, tmp_path, capsys):
    nodes, kinds = x86_subset(tmp_path)
    host_files = []
    for name, driver, gpus in kinds:  # what `probe --json` on the node would write
        assert main(["probe", "--json", "--driver", driver, *[flag for cc in gpus for flag in ("--gpu", cc)]]) == 0
        path = tmp_path / f"{name}.json"
        path.write_text(capsys.readouterr().out)
        host_files.append(str(path))
    common = ["lock", "torch", "--python", empty_python, "--index-url", cuda_index.index_url,
              "--torch-index-base", cuda_index.torch_index_base, "-q"]
    from_nodes, from_files = tmp_path / "nodes" / "pylock.toml", tmp_path / "files" / "pylock.toml"
    for out in (from_nodes, from_files):
        out.parent.mkdir()
    assert main([*common, "--hosts-from-nodes", str(nodes), "-o", str(from_nodes)]) == 0, capsys.readouterr().err
    assert main([*common, *[f for path in host_files for f in ("--host", path)], "-o", str(from_files)]) == 0, capsys.readouterr().err
    by_nodes, by_files = read_pylock(str(from_nodes)), read_pylock(str(from_files))
    labels = ("nodes gpu-a100-1..3 (3)", "node gpu-h100-1", "nodes gpu-l4-1, gpu-l4-2 (2)")
    assert by_nodes.host_labels == labels and by_files.host_labels == tuple(host_files)
    assert by_nodes.packages == by_files.packages and "torch" in {p.name for p in by_nodes.packages}
    for facts_by_nodes, facts_by_files in zip(by_nodes.hosts, by_files.hosts):
        assert facts_by_nodes["driver"]["release"] == facts_by_files["driver"]["release"]
        assert facts_by_nodes["driver"]["cuda"] == facts_by_files["driver"]["cuda"]
        assert ([gpu["compute_capability"] for gpu in facts_by_nodes["gpus"]]
                == [gpu["compute_capability"] for gpu in facts_by_files["gpus"]])

    def same_words(text: str, own_labels: tuple[str, ...]) -> list[str]:
        """The lock's lines but its hosts' facts, each host named by its place in the fleet."""
        for i, label in enumerate(own_labels):
            text = text.replace(label, f"host {i}")
        kept, in_hosts = [], False
        for line in text.splitlines():
            if line.startswith("["):
                in_hosts = line.lstrip("[").startswith("tool.cudaresolve.hosts")
            if not in_hosts:
                kept.append(line)
        return kept

    assert same_words(from_nodes.read_text(), labels) == same_words(from_files.read_text(), tuple(host_files))
    # --check reads the same node list: the lock fits every class
    capsys.readouterr()
    assert main(["lock", "--check", str(from_nodes), "--hosts-from-nodes", str(nodes), "-q"]) == 0
    assert "nodes gpu-a100-1..3 (3)" in capsys.readouterr().out
    # a node whose driver is 470 (CUDA 11.4) joins: --check names its class and the driver
    data = json.loads(nodes.read_text())
    old = copy.deepcopy(node(data, "gpu-a100-1"))
    old["metadata"]["name"] = "old-1"
    old["metadata"]["labels"].update({"nvidia.com/cuda.driver.major": "470", "nvidia.com/cuda.driver.minor": "82",
                                      "nvidia.com/cuda.driver.rev": "01", "nvidia.com/cuda.runtime.major": "11",
                                      "nvidia.com/cuda.runtime.minor": "4"})
    data["items"].append(old)
    nodes.write_text(json.dumps(data))
    assert main(["lock", "--check", str(from_nodes), "--hosts-from-nodes", str(nodes), "-q"]) == 2
    out = capsys.readouterr().out
    assert "node old-1" in out and "470.82.01" in out, out


@pytest.mark.usefixtures("hermetic")
def test_a_mixed_cluster_locks_as_its_host_files_one_target_per_machine(server, empty_python, tmp_path, capsys):
    """The whole recorded cluster (x86_64 A100/L4/H100 and aarch64 GH200 nodes) gives the same
    universal lock as one host file per kind of node, written with its machine: two targets, each
    with its own wheels (tests/resolve/test_lock_targets.py's index: `native` is built for both machines,
    `x86only` is required on x86_64 only)."""
    from index_server import make_wheel

    wheels = [make_wheel("app", "1.0", requires=('x86only; platform_machine == "x86_64"', "native")), make_wheel("x86only", "1.0")]
    wheels += [make_wheel("native", "1.0", tag=f"py3-none-manylinux_2_17_{machine}") for machine in ("x86_64", "aarch64")]
    for filename, data in wheels:
        server.add(filename, data)
    host_files = []
    for name in ("gpu-a100-1", "gpu-h100-1", "gpu-l4-1", "gh200-1"):
        labels = node(node_list(), name)["metadata"]["labels"]
        driver = ".".join(labels[f"nvidia.com/cuda.driver.{part}"] for part in ("major", "minor", "rev"))
        gpus = [f"{labels['nvidia.com/gpu.compute.major']}.{labels['nvidia.com/gpu.compute.minor']}"] * int(labels["nvidia.com/gpu.count"])
        assert main(["probe", "--json", "--driver", driver, *[flag for cc in gpus for flag in ("--gpu", cc)]]) == 0
        facts = json.loads(capsys.readouterr().out)
        facts["machine"] = {"amd64": "x86_64", "arm64": "aarch64"}[labels["kubernetes.io/arch"]]
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(facts))
        host_files.append(str(path))
    common = ["lock", "app", "--python", empty_python, "--index-url", server.url + "/simple", "-q"]
    from_nodes, from_files = tmp_path / "nodes" / "pylock.toml", tmp_path / "files" / "pylock.toml"
    for out in (from_nodes, from_files):
        out.parent.mkdir()
    assert main([*common, "--hosts-from-nodes", str(CLUSTER), "-o", str(from_nodes)]) == 0, capsys.readouterr().err
    assert main([*common, *[f for path in host_files for f in ("--host", path)], "-o", str(from_files)]) == 0, capsys.readouterr().err
    by_nodes, by_files = read_pylock(str(from_nodes)), read_pylock(str(from_files))
    assert by_nodes.packages == by_files.packages and by_nodes.environments == by_files.environments
    assert [machine for machine in ("aarch64", "x86_64") if any(machine in e for e in by_nodes.environments)] == ["aarch64", "x86_64"]
    native = next(p for p in by_nodes.packages if p.name == "native")
    assert sorted(w.filename for w in native.wheels) == [f"native-1.0-py3-none-manylinux_2_17_{m}.whl" for m in ("aarch64", "x86_64")]
    assert next(p.marker for p in by_nodes.packages if p.name == "x86only") == 'platform_machine == "x86_64"'
    capsys.readouterr()
    assert main(["lock", "--check", str(from_nodes), "--hosts-from-nodes", str(CLUSTER), "-q"]) == 0, capsys.readouterr().out


# -- fleets fold first -----------------------------------------------------------------------------


def gpu(cc: str, index: int, **words: Any) -> Gpu:
    return Gpu(ComputeCapability.parse(cc), source="nvml", index=index, **words)


def test_a_hosts_gpus_fold_to_the_kinds_the_judge_reads_and_words_do_not_split_classes():
    driver = Driver(DriverRelease.parse("550.90.07"), "nvml", CudaVersion.parse("12.4"), "nvml")
    first = HostFacts("Linux", "x86_64", driver, gpus=(
        gpu("8.0", 0, name="A100-40GB", memory_mib=40960, uuid="GPU-1"), gpu("8.0", 1, name="A100-80GB", memory_mib=81920),
        gpu("8.6", 2), replace(gpu("8.0", 3), visible=False),
    ), cuda_visible_devices="0,1,2", notes=(Note("nvml", "slow"),))
    folded = judged(first, "--host a.json")
    assert [(str(g.compute_capability), g.index, g.visible, g.name, g.memory_mib) for g in folded.gpus] == [
        ("8.0", 0, True, None, None), ("8.6", 2, True, None, None), ("8.0", 3, False, None, None)]
    assert folded.min_compute_capability == first.min_compute_capability and folded.notes == () and folded.cuda_visible_devices is None
    other = replace(first, gpus=tuple(replace(g, memory_mib=1, uuid=None) for g in first.gpus))
    (both,) = fold([("a.json", folded, 1), ("b.json", judged(other, "--host b.json"), 1), ("nodes x-1..3 (3)", folded, 3)])
    assert (both.labels, both.hosts, fleet_label(both)) == (("a.json", "b.json", "nodes x-1..3 (3)"), 5, "a.json, b.json, nodes x-1..3 (3)")
    newer = replace(first, driver=replace(driver, release=DriverRelease.parse("550.144.03")))
    assert len(fold([("a", folded, 1), ("b", judged(newer, "b"), 1)])) == 2  # the release is judged: no fold
    # a host the judge knows nothing of keeps what its sources said, as the judge quotes it
    unknown = HostFacts("Linux", "x86_64", notes=tuple(Note("nvml", f"absent {i}") for i in range(50)))
    assert len(judged(unknown, "this host").notes) == 5
    many = HostFacts("Linux", "x86_64", gpus=tuple(gpu(f"{major}.{minor}", i) for i, (major, minor)
                                                   in enumerate((m, n) for m in range(1, 11) for n in range(10))))
    with pytest.raises(UsageError, match=rf"^--host many.json: 100 GPUs of 100 kinds .*more than the {MAX_KINDS}"):
        judged(many, "--host many.json")
    long = HostClass(folded, tuple(f"hosts/h{i:04}.json" for i in range(300)), 300)
    assert fleet_label(long).endswith("hosts/h0021.json, +278 more") and len(fleet_label(long)) < 450


@pytest.mark.usefixtures("hermetic")
def test_ten_thousand_nodes_differing_in_memory_lock_as_one_class_and_check(server, empty_python, tmp_path, capsys):
    """10,000 nodes that differ only in their GPU memory: one class, resolved once; the lock records
    it once, and `lock --check` takes what `lock` wrote (RSS and time: scripts/bench_fleet.py)."""
    from index_server import make_wheel

    server.add(*make_wheel("app", "1.0"))
    labels = node(node_list(), "gpu-a100-1")["metadata"]["labels"]  # a whole recorded node is 3 kB: 16 MiB holds 5,000
    items = [{"kind": "Node", "metadata": {"name": f"gpu-{number}", "labels": {**labels, "nvidia.com/gpu.memory": str(40000 + number)}}}
             for number in range(1, 10_001)]
    nodes = tmp_path / "nodes.json"
    nodes.write_text(json.dumps({"kind": "List", "items": items}))
    out = tmp_path / "pylock.toml"
    assert main(["lock", "app", "--python", empty_python, "--index-url", server.url + "/simple", "--hosts-from-nodes", str(nodes),
                 "-o", str(out), "--explain"]) == 0
    captured = capsys.readouterr()
    assert "10000 hosts fold into 1 class by what the judge reads" in captured.err
    assert "nodes gpu-1..10000 (10000)" in captured.out and "(10000 hosts folded into 1 class, each resolved once)" in captured.out
    assert "judging 1 distribution on 1 class of 10,000 hosts" in captured.err
    locked = read_pylock(str(out))
    assert locked.host_labels == ("nodes gpu-1..10000 (10000)",) and len(locked.hosts) == 1
    assert [gpu["compute_capability"] for gpu in locked.hosts[0]["gpus"]] == ["8.0"]
    assert out.stat().st_size < 4096, out.stat().st_size
    assert main(["lock", "--check", str(out), "--hosts-from-nodes", str(nodes), "-q"]) == 0
    assert "nodes gpu-1..10000 (10000)" in capsys.readouterr().out


def host_of_gpus(tmp_path: Path, capsys: Any, ccs: list[str]) -> Path:
    """A --host file as a probe writes it, of one GPU per entry of `ccs` (each with its own UUID and memory)."""
    assert main(["probe", "--json", "--driver", "550.90.07", "--gpu", "8.0"]) == 0
    facts = json.loads(capsys.readouterr().out)
    facts["driver"]["release_source"] = facts["driver"]["cuda_source"] = "nvml"
    (one,) = facts["gpus"]
    facts["gpus"] = [{**one, "index": i, "compute_capability": cc, "source": "nvml", "uuid": f"GPU-{i:04}", "memory_mib": 81920 + i,
                      "mig_devices": [{"uuid": f"MIG-{i}-{m}", "name": "1g.10gb", "memory_mib": 9856} for m in range(7)]}
                     for i, cc in enumerate(ccs)]
    path = tmp_path / "big.json"
    path.write_text(json.dumps(facts))
    return path


@pytest.mark.usefixtures("hermetic")
def test_a_host_of_700_gpus_locks_as_one_kind_and_700_kinds_are_refused_on_read(server, empty_python, tmp_path, capsys):
    from index_server import make_wheel

    server.add(*make_wheel("app", "1.0"))
    host = host_of_gpus(tmp_path, capsys, ["8.0"] * 700)
    out = tmp_path / "pylock.toml"
    common = ["lock", "app", "--python", empty_python, "--index-url", server.url + "/simple", "-q"]
    assert main([*common, "--host", str(host), "-o", str(out)]) == 0, capsys.readouterr().err
    (facts,) = read_pylock(str(out)).hosts
    assert [(gpu["compute_capability"], gpu["index"]) for gpu in facts["gpus"]] == [("8.0", 0)]
    assert main(["lock", "--check", str(out), "--host", str(host), "-q"]) == 0
    capsys.readouterr()
    kinds = host_of_gpus(tmp_path, capsys, [f"{major}.{minor}" for major in range(1, 71) for minor in range(10)][:700])
    assert main([*common, "--host", str(kinds), "-o", str(out)]) == 3
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1, captured.err
    assert captured.err.startswith(f"cudaresolve: error: --host {kinds}: 700 GPUs of 700 kinds"), captured.err
    assert read_pylock(str(out)).hosts == (facts,)  # the lock written before is as it was


def test_unicode_separators_and_an_unknown_major_on_the_command_line_are_exit_3_naming_the_node(tmp_path, capsys):
    for label, value in (("nvidia.com/gpu.product", "A100\u2028exit 0"), ("nvidia.com/gpu.machine", "\u202eDGX"),
                         ("nvidia.com/gpu.compute.major", "99")):
        data = node_list()
        node(data, "gpu-l4-2")["metadata"]["labels"][label] = value
        bad = tmp_path / "nodes.json"
        bad.write_text(json.dumps(data))
        assert main(["lock", "app", "--hosts-from-nodes", str(bad)]) == 3
        captured = capsys.readouterr()
        assert captured.out == "" and captured.err.count("\n") == 1, captured.err
        assert "(gpu-l4-2)" in captured.err or "node gpu-l4-2" in captured.err, captured.err
        assert label in captured.err, captured.err
