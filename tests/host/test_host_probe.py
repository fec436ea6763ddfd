"""Whole probes over recorded machines (fixtures/host), overrides, --host files, and the CLI end to end.

A recorded machine is a `Readers` whose callables answer from the fixtures; nothing global is
patched. `asked` records which sources were read, to check that probing stops when it knows enough.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Optional

import pynvml
import pytest

from cudaresolve.cli import main
from cudaresolve.commands.host_options import overrides_from, stated_by
from cudaresolve.errors import UsageError
from cudaresolve.host.facts import Driver, Note
from cudaresolve.host.probe import (
    DEVICE_TREE_COMPATIBLE,
    PROCFS_VERSION,
    SMI_CSV,
    SMI_XML,
    SYSFS_VERSION,
    TEGRA_RELEASE,
    host_for,
    probe,
)
from cudaresolve.host.readers import CommandResult, Readers, SourceUnavailable, read_nvml
from cudaresolve.versions import CudaVersion, DriverRelease

HOST = Path(__file__).parents[1] / "fixtures" / "host"
OVERRIDE_VARIABLES = (
    "CUDARESOLVE_DRIVER",
    "CUDARESOLVE_CUDA",
    "CUDARESOLVE_GPUS",
    "CONDA_OVERRIDE_CUDA",
    "CONDA_OVERRIDE_CUDA_ARCH",
    "UV_CUDA_DRIVER_VERSION",
    "CUDA_VISIBLE_DEVICES",
)


def fixture(name: str) -> str:
    return (HOST / name).read_bytes().decode()


class RecordedNvml:
    """The part of pynvml that read_nvml uses, answering from nvml/*.json (see SOURCES.md)."""

    NVMLError = pynvml.NVMLError

    def __init__(self, name: str):
        self.data = json.loads(fixture(name))

    @staticmethod
    def _answer(values: dict, key: str):
        if values.get(key) is None:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return values[key]

    def nvmlInit(self):
        if "nvmlInit" in self.data:
            raise pynvml.NVMLError(self.data["nvmlInit"])

    def nvmlShutdown(self):
        pass

    def nvmlSystemGetDriverVersion(self):
        return self._answer(self.data, "nvmlSystemGetDriverVersion")

    def nvmlSystemGetCudaDriverVersion_v2(self):
        return self._answer(self.data, "nvmlSystemGetCudaDriverVersion_v2")

    def nvmlDeviceGetCount(self):
        return len(self.data["devices"])

    def nvmlDeviceGetHandleByIndex(self, index):
        return self.data["devices"][index]

    def nvmlDeviceGetName(self, handle):
        return self._answer(handle, "nvmlDeviceGetName")

    def nvmlDeviceGetCudaComputeCapability(self, handle):
        return tuple(self._answer(handle, "nvmlDeviceGetCudaComputeCapability"))

    def nvmlDeviceGetMemoryInfo(self, handle):
        return SimpleNamespace(total=self._answer(handle, "nvmlDeviceGetMemoryInfo"))

    def nvmlDeviceGetUUID(self, handle):
        return self._answer(handle, "nvmlDeviceGetUUID")

    def nvmlDeviceGetMigMode(self, handle):
        return self._answer(handle, "nvmlDeviceGetMigMode")

    def nvmlDeviceGetMaxMigDeviceCount(self, handle):
        return self._answer(handle, "nvmlDeviceGetMaxMigDeviceCount")

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle, slot):
        devices = handle.get("mig_devices", [])
        if slot >= len(devices):
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return devices[slot]


def machine(
    files: Optional[dict] = None,
    nvml: Optional[str] = None,
    commands: Optional[dict] = None,
    libcuda: Optional[str] = None,
    asked: Optional[list] = None,
) -> Readers:
    """A recorded machine: files {path: fixture}, nvml fixture, commands {argv: (status, fixture)}.

    What is not given is absent, with the message the real reader gives.
    """
    files = files or {}
    asked = [] if asked is None else asked

    def read_file(path):
        if path not in (TEGRA_RELEASE, DEVICE_TREE_COMPATIBLE):
            asked.append(path)
        if path not in files:
            raise SourceUnavailable(f"{path} does not exist")
        return fixture(files[path])

    def read_nvml_fixture():
        asked.append("nvml")
        if nvml is None:
            raise SourceUnavailable("nvmlInit failed: NVML Shared Library Not Found")
        return read_nvml(RecordedNvml(nvml))

    def run(argv):
        asked.append(" ".join(argv[1:]))
        if commands is None:
            raise SourceUnavailable("nvidia-smi is not on PATH")
        status, name = commands[tuple(argv)]
        return CommandResult(status, fixture(name), "")

    def run_libcuda():
        asked.append("libcuda")
        if libcuda is None:
            raise SourceUnavailable(NOTHING[3].message)
        return fixture(libcuda)

    return Readers(
        nvml=read_nvml_fixture,
        read_file=read_file,
        run=run,
        libcuda=run_libcuda,
        platform=lambda: ("Linux", "x86_64", "2.35"),
    )


NOTHING = [
    Note("nvml", "nvmlInit failed: NVML Shared Library Not Found"),
    Note("sysfs", "/sys/module/nvidia/version does not exist"),
    Note("procfs", "/proc/driver/nvidia/version does not exist"),
    Note("libcuda", "cannot load libcuda.so.1: cannot open shared object file: No such file or directory"),
    Note("nvidia-smi", "nvidia-smi is not on PATH"),
]


def test_no_driver_no_gpu_is_a_normal_result():
    facts = probe(machine(), {})
    assert facts.driver == Driver()
    assert facts.gpus == ()
    assert list(facts.notes) == NOTHING


def test_a100_mig_one_nvml_session_answers_everything():
    asked = []
    facts = host_for(readers=machine(nvml="nvml/535.216.01-a100-mig.json", asked=asked), environ={})
    assert asked == ["nvml"]
    assert facts.driver == Driver(DriverRelease.parse("535.216.01"), "nvml", CudaVersion.parse("12.2"), "nvml")
    (a100,) = facts.gpus
    assert (a100.index, a100.name, str(a100.compute_capability), a100.memory_mib, a100.uuid, a100.mig_mode) == (
        0,
        "NVIDIA A100-SXM4-80GB",
        "8.0",
        81920,
        "GPU-7fdaf0a5-179b-f636-d15d-daf243e3ff16",
        True,
    )
    assert [m.uuid for m in a100.mig_devices][:2] == [
        "MIG-feb88891-0321-5fef-9c87-d4af3b54259e",
        "MIG-a25704ba-3a06-5299-a795-fd7cf4d13973",
    ]
    assert len(a100.mig_devices) == 7
    # The public output shows no MIG memory; the recorded NVML fails those calls, and each is noted.
    assert facts.notes[0] == Note("nvml", "nvmlDeviceGetMemoryInfo(0/MIG 0) failed: Not Supported")
    assert len(facts.notes) == 7


def test_mixed_gpus_with_cuda_visible_devices():
    environ = {"CUDA_VISIBLE_DEVICES": "GPU-7518f6b0-991f-ce2b-3d37-c779130d3137"}
    facts = host_for(readers=machine(nvml="nvml/570.86.15-titanv-rtx5880.json"), environ=environ)
    assert facts.driver == Driver(DriverRelease.parse("570.86.15"), "nvml", CudaVersion.parse("12.8"), "nvml")
    assert [(g.name, str(g.compute_capability), g.mig_mode, g.visible) for g in facts.gpus] == [
        ("NVIDIA TITAN V", "7.0", None, False),
        ("NVIDIA RTX 5880 Ada Generation", "8.9", None, True),
    ]
    assert facts.cuda_visible_devices == "GPU-7518f6b0-991f-ce2b-3d37-c779130d3137"
    assert str(facts.min_compute_capability) == "8.9"  # the hidden TITAN V does not count
    assert facts.notes == (
        Note("nvml", "nvmlDeviceGetMemoryInfo(0) failed: Not Supported"),
        Note("nvml", "nvmlDeviceGetMemoryInfo(1) failed: Not Supported"),
        Note("CUDA_VISIBLE_DEVICES", "1 of 2 GPU(s) visible to CUDA"),
    )


def test_driver_library_mismatch_after_an_update_without_reboot():
    asked = []
    readers = machine(
        files={SYSFS_VERSION: "sysfs/470.103.01.txt", PROCFS_VERSION: "procfs/470.103.01.txt"},
        nvml="nvml/version-mismatch.json",
        libcuda="libcuda/470-mismatch.json",
        commands={SMI_CSV: (18, "smi/nvml-mismatch.txt"), SMI_XML: (18, "smi/nvml-mismatch.txt")},
        asked=asked,
    )
    facts = host_for(readers=readers, environ={})
    # The loaded kernel module is what runs; libcuda still tells the user-space CUDA version.
    assert facts.driver == Driver(DriverRelease.parse("470.103.01"), "sysfs", CudaVersion.parse("11.4"), "libcuda")
    assert facts.gpus == ()
    assert asked == ["nvml", SYSFS_VERSION, PROCFS_VERSION, "libcuda", " ".join(SMI_CSV[1:]), " ".join(SMI_XML[1:])]
    assert facts.notes == (
        Note("nvml", "nvmlInit failed: RM has detected an NVML/RM version mismatch."),
        Note("libcuda", "cuInit failed: CUDA_ERROR_SYSTEM_DRIVER_MISMATCH (803)"),
        Note("nvidia-smi", "exited with status 18", "Failed to initialize NVML: Driver/library version mismatch"),
    )


def test_wsl_nvidia_smi_only():
    readers = machine(commands={SMI_CSV: (0, "smi/510.06-wsl.csv"), SMI_XML: (0, "smi/510.06-wsl.xml")})
    facts = host_for(readers=readers, environ={})
    assert facts.driver == Driver(DriverRelease.parse("510.06"), "nvidia-smi", CudaVersion.parse("11.6"), "nvidia-smi")
    (gpu,) = facts.gpus
    assert (gpu.name, str(gpu.compute_capability), gpu.uuid, gpu.source) == (
        "NVIDIA GeForce GTX 1650 Ti with Max-Q Design",
        "7.5",
        "GPU-b5e386b4-3e71-5837-aca5-80c5914cf07f",
        "nvidia-smi",
    )
    assert list(facts.notes) == NOTHING[:4]


def test_nvidia_smi_without_a_driver():
    readers = machine(commands={SMI_CSV: (9, "smi/no-driver.txt"), SMI_XML: (9, "smi/no-driver.txt")})
    facts = host_for(readers=readers, environ={})
    assert (facts.driver, facts.gpus) == (Driver(), ())
    assert facts.notes[-1] == Note(
        "nvidia-smi",
        "exited with status 9",
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running.",
    )
    assert len(facts.notes) == 5  # the XML run failed with the same words: said once


def test_jetson_jetpack5_libcuda_answers_without_nvml():
    asked = []
    readers = machine(
        files={TEGRA_RELEASE: "tegra/nv_tegra_release-r35.4.1.txt"}, libcuda="libcuda/12090-orin.json", asked=asked
    )
    facts = host_for(readers=readers, environ={})
    assert "nvml" not in asked
    assert facts.tegra is True
    assert facts.driver == Driver(None, None, CudaVersion.parse("12.9"), "libcuda")
    assert [(g.name, str(g.compute_capability), g.memory_mib) for g in facts.gpus] == [("Orin", "8.7", 54792)]
    assert facts.notes[0].message == "Jetson/Tegra (L4T 35.4.1): no NVML here, libcuda reports the driver and GPU"
    assert facts.notes[-1] == Note(
        "driver", "release unknown: a CUDA version (12.9) does not determine a driver release"
    )


def test_jetson_jetpack6_release_from_procfs():
    asked = []
    readers = machine(
        files={DEVICE_TREE_COMPATIBLE: "tegra/compatible-agx-orin.bin", PROCFS_VERSION: "procfs/540.4.0-jetson.txt"},
        libcuda="libcuda/12090-orin.json",
        asked=asked,
    )
    facts = host_for(readers=readers, environ={})
    assert facts.driver == Driver(DriverRelease.parse("540.4.0"), "procfs", CudaVersion.parse("12.9"), "libcuda")
    assert asked == [SYSFS_VERSION, PROCFS_VERSION, "libcuda"]


def test_jetson_is_not_derived_from_the_desktop_branch_table():
    readers = machine(
        files={DEVICE_TREE_COMPATIBLE: "tegra/compatible-agx-orin.bin", PROCFS_VERSION: "procfs/540.4.0-jetson.txt"}
    )
    facts = host_for(readers=readers, environ={})
    assert facts.driver == Driver(DriverRelease.parse("540.4.0"), "procfs")
    assert facts.notes[-1] == Note(
        "derived:branch-table", "not used on Jetson/Tegra; the CUDA version is unknown"
    )


def test_release_alone_derives_the_cuda_version():
    facts = host_for(readers=machine(files={SYSFS_VERSION: "sysfs/590.48.01.txt"}), environ={})
    assert facts.driver == Driver(DriverRelease.parse("590.48.01"), "sysfs", CudaVersion.parse("13.1"), "derived:branch-table")


def test_release_older_than_the_table_is_a_note():
    facts = host_for(overrides=overrides_from("390.157", None, ["6.1"], {}), readers=machine(), environ={})
    assert facts.driver == Driver(DriverRelease.parse("390.157"), "override:--driver")
    assert facts.notes[-1] == Note(
        "derived:branch-table", "driver branch 390 is not in the table; its CUDA version is unknown"
    )


def test_stated_driver_still_probes_the_gpus_only():
    asked = []
    readers = machine(nvml="nvml/570.86.15-titanv-rtx5880.json", asked=asked)
    facts = host_for(overrides=overrides_from("535.104.05", None, [], {}), readers=readers, environ={})
    assert asked == ["nvml"]
    assert facts.driver == Driver(DriverRelease.parse("535.104.05"), "override:--driver", CudaVersion.parse("12.2"), "derived:branch-table")
    assert [str(g.compute_capability) for g in facts.gpus] == ["7.0", "8.9"]


def test_stated_everything_probes_nothing():
    asked = []
    environ = {"CUDA_VISIBLE_DEVICES": ""}
    facts = host_for(overrides=overrides_from("535.104.05", None, ["8.6"], environ), readers=machine(asked=asked), environ=environ)
    assert asked == []
    assert facts.driver == Driver(DriverRelease.parse("535.104.05"), "override:--driver", CudaVersion.parse("12.2"), "derived:branch-table")
    assert [(str(g.compute_capability), g.source, g.visible) for g in facts.gpus] == [("8.6", "override:--gpu", True)]
    assert facts.cuda_visible_devices is None
    assert facts.notes == (Note("probe", "not run: the overrides state the driver and the GPUs"),)


def test_the_host_code_reads_no_stated_fact_from_the_environment():
    """The variables that state facts are read once, at the command line's edge (commands/host_options.py):
    handed to host_for only as `environ`, they change nothing; as an Overrides value, they apply."""
    stating = {"CUDARESOLVE_DRIVER": "550.144.03", "CUDARESOLVE_GPUS": "9.0", "CONDA_OVERRIDE_CUDA": ""}
    probed = host_for(readers=machine(nvml="nvml/570.86.15-titanv-rtx5880.json"), environ={})
    assert host_for(readers=machine(nvml="nvml/570.86.15-titanv-rtx5880.json"), environ=stating) == probed
    stated = host_for(overrides=stated_by(stating), readers=machine(nvml="nvml/570.86.15-titanv-rtx5880.json"), environ=stating)
    assert (str(stated.driver.release), stated.driver.release_source) == ("550.144.03", "override:CUDARESOLVE_DRIVER")
    assert [(str(g.compute_capability), g.source) for g in stated.gpus] == [("9.0", "override:CUDARESOLVE_GPUS")]


def test_empty_conda_override_cuda_means_no_cuda_driver():
    conda_none = {"CONDA_OVERRIDE_CUDA": "", "CONDA_OVERRIDE_CUDA_ARCH": ""}
    facts = host_for(overrides=stated_by(conda_none), readers=machine(), environ=conda_none)
    assert facts.driver == Driver(None, None, None, "override:CONDA_OVERRIDE_CUDA")
    assert facts.gpus == ()


def test_host_file_round_trip_and_overrides_on_top(tmp_path):
    probed = host_for(readers=machine(nvml="nvml/535.216.01-a100-mig.json"), environ={})
    path = tmp_path / "host.json"
    path.write_text(probed.to_json())
    assert host_for(host_file=str(path), environ={}) == probed
    assert host_for(host_file="-", environ={}, stdin=io.StringIO(probed.to_json())) == probed
    # Overrides apply on top; the file's driver CUDA version goes with its driver.
    moved = host_for(host_file=str(path), overrides=overrides_from("550.144.03", None, ["9.0"], {}), environ={})
    assert moved.driver == Driver(DriverRelease.parse("550.144.03"), "override:--driver", CudaVersion.parse("12.4"), "derived:branch-table")
    assert [(str(g.compute_capability), g.source) for g in moved.gpus] == [("9.0", "override:--gpu")]


def test_host_file_round_trip_keeps_notes_single(tmp_path):
    jetson = machine(files={TEGRA_RELEASE: "tegra/nv_tegra_release-r35.4.1.txt"}, libcuda="libcuda/12090-orin.json")
    probed = host_for(readers=jetson, environ={})
    path = tmp_path / "host.json"
    path.write_text(probed.to_json())
    assert host_for(host_file=str(path), environ={}).to_json() == probed.to_json()


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "--host {path}: cannot read it (No such file or directory)"),
        (
            "{",
            "--host {path}: not valid JSON (Expecting property name enclosed in double quotes: line 1 column 2 (char 1))",
        ),
        ('{"schema": 1, "system": "Linux"}', "--host {path}: 'machine' must be a string, got None"),
        ('{"schema": 9}', "--host {path}: schema is 9, this cudaresolve reads schema 1"),
        # Each of these gave a traceback: json's RecursionError and its bare ValueError past the
        # 4,300-digit limit; an integer TOML or JSON holds but no count needs.
        ("[" * 100_000 + "]" * 100_000, "--host {path}: not valid JSON (nested too deeply)"),
        (
            '{"schema": 1, "gpus": [{"memory_mib": ' + "9" * 5000 + "}]}",
            "--host {path}: not valid JSON (Exceeds the limit (4300 digits) for integer string conversion: value has 5000 digits)",
        ),
        (
            '{"schema": 1, "system": "Linux", "machine": "x86_64", "gpus": [{"compute_capability": "8.6", "memory_mib": '
            + "9" * 4000 + "}]}",
            "--host {path}: gpus[0].memory_mib: larger than a 64-bit integer (13288 bits)",
        ),
        ('{"schema": 1, "system": "Linux", "machine": "x86_64", "driver": {"release": "٥٥٠.١"}}',
         "--host {path}: driver.release: not a driver release: '٥٥٠.١' (expected e.g. 550.144.03)"),
        ("x" * (16 * 1024 * 1024 + 1), "--host {path}: cannot read it (larger than 16 MiB)"),
    ],
)
def test_bad_host_file_names_the_path(tmp_path, content, message):
    path = tmp_path / "host.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(UsageError) as caught:
        host_for(host_file=str(path), environ={})
    assert str(caught.value) == message.format(path=path)


# -- the CLI, end to end, on this GPU-less machine -------------------------------------------------


@pytest.fixture
def clean_environ(monkeypatch):
    for name in OVERRIDE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def run_cli(capsys, *argv):
    code = main(["probe", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_probe_json_here_is_clean(clean_environ, capsys):
    code, out, err = run_cli(capsys, "--json")
    assert (code, err) == (0, "")
    data = json.loads(out)
    assert data["driver"] == {"release": None, "release_source": None, "cuda": None, "cuda_source": None}
    assert data["gpus"] == []
    assert [n["source"] for n in data["notes"]] == ["nvml", "sysfs", "procfs", "libcuda", "nvidia-smi"]
    assert data["notes"][0]["message"] == "nvmlInit failed: NVML Shared Library Not Found"


def test_cli_probe_text_here(clean_environ, capsys):
    code, out, err = run_cli(capsys)
    assert (code, err) == (0, "")
    assert out.splitlines()[1:3] == ["driver   release unknown, CUDA unknown", "GPUs     none found"]


def test_cli_overrides_are_reported_with_their_sources(clean_environ, capsys):
    code, out, _ = run_cli(capsys, "--json", "--driver", "535.104.05", "--gpu", "8.6")
    data = json.loads(out)
    assert code == 0
    assert data["driver"] == {
        "release": "535.104.05",
        "release_source": "override:--driver",
        "cuda": "12.2",
        "cuda_source": "derived:branch-table",
    }
    assert [(g["compute_capability"], g["source"], g["index"], g["visible"]) for g in data["gpus"]] == [
        ("8.6", "override:--gpu", 0, True)
    ]


def test_cli_host_file_round_trips_exactly(clean_environ, capsys, tmp_path):
    facts = host_for(readers=machine(nvml="nvml/570.86.15-titanv-rtx5880.json"), environ={"CUDA_VISIBLE_DEVICES": "1"})
    path = tmp_path / "host.json"
    path.write_text(facts.to_json())
    code, out, _ = run_cli(capsys, "--json", "--host", str(path))
    assert (code, out) == (0, facts.to_json())


def test_cli_host_from_stdin(clean_environ, capsys):
    facts = host_for(readers=machine(nvml="nvml/535.216.01-a100-mig.json"), environ={})
    clean_environ.setattr(sys, "stdin", io.StringIO(facts.to_json()))
    code, out, _ = run_cli(capsys, "--json", "--host", "-")
    assert (code, out) == (0, facts.to_json())


def test_cli_environment_precedence(clean_environ, capsys):
    clean_environ.setenv("UV_CUDA_DRIVER_VERSION", "535.104.05")
    clean_environ.setenv("CUDARESOLVE_DRIVER", "570.86.15")
    clean_environ.setenv("CONDA_OVERRIDE_CUDA", "12.4")
    clean_environ.setenv("CONDA_OVERRIDE_CUDA_ARCH", "7.5")
    clean_environ.setenv("CUDARESOLVE_GPUS", "8.0,8.9")
    data = json.loads(run_cli(capsys, "--json")[1])
    assert data["driver"] == {
        "release": "570.86.15",
        "release_source": "override:CUDARESOLVE_DRIVER",
        "cuda": "12.4",
        "cuda_source": "override:CONDA_OVERRIDE_CUDA",
    }
    assert [(g["compute_capability"], g["source"]) for g in data["gpus"]] == [
        ("8.0", "override:CUDARESOLVE_GPUS"),
        ("8.9", "override:CUDARESOLVE_GPUS"),
    ]
    data = json.loads(run_cli(capsys, "--json", "--cuda", "12.8", "--gpu", "9.0")[1])
    assert (data["driver"]["cuda"], data["driver"]["cuda_source"]) == ("12.8", "override:--cuda")
    assert [g["source"] for g in data["gpus"]] == ["override:--gpu"]


def test_cli_empty_conda_override_cuda_arch_means_no_gpus(clean_environ, capsys):
    clean_environ.setenv("CONDA_OVERRIDE_CUDA_ARCH", "")
    clean_environ.setenv("CONDA_OVERRIDE_CUDA", "12.4")
    code, out, _ = run_cli(capsys, "--json")
    data = json.loads(out)
    assert (code, data["gpus"]) == (0, [])
    assert [(n["source"], n["message"]) for n in data["notes"]] == [
        ("probe", "not run: the overrides state the driver and the GPUs"),
        ("driver", "release unknown: a CUDA version (12.4) does not determine a driver release"),
    ]


@pytest.mark.parametrize(
    "argv, variables, message",
    [
        (["--driver", "abc"], {}, "--driver: 'abc' is not a driver release (expected e.g. 535.104.05)"),
        (["--gpu", "8"], {}, "--gpu: '8' is not a compute capability (expected e.g. 8.6)"),
        ([], {"CONDA_OVERRIDE_CUDA_ARCH": "8"}, "CONDA_OVERRIDE_CUDA_ARCH: '8' is not a compute capability "
         "(expected e.g. 8.6)"),
        ([], {"CUDARESOLVE_CUDA": "12.x"}, "CUDARESOLVE_CUDA: '12.x' is not a CUDA version (expected e.g. 12.4)"),
        (["--host", "/nonexistent/h.json"], {}, "--host /nonexistent/h.json: cannot read it (No such file or directory)"),
        (["--gpu", "99.9"], {}, "--gpu: unknown compute capability 99.9 (known majors: 3, 5, 6, 7, 8, 9, 10, 11, 12)"),
    ],
)
def test_cli_bad_values_exit_3_with_one_line(clean_environ, capsys, argv, variables, message):
    for name, value in variables.items():
        clean_environ.setenv(name, value)
    code, out, err = run_cli(capsys, "--json", *argv)
    assert (code, out, err) == (3, "", f"cudaresolve: error: {message}\n")


def test_host_file_gpus_are_checked_only_when_stated(clean_environ, capsys, tmp_path):
    """A GPU a probe found is the driver's truth, even of a major newer than data/gpus.toml."""
    code, out, _ = run_cli(capsys, "--json", "--driver", "550.144.03", "--gpu", "8.6")
    assert code == 0
    host = tmp_path / "host.json"
    host.write_text(out.replace('"8.6"', '"99.9"'))
    assert run_cli(capsys, "--host", str(host)) == (
        3,
        "",
        f"cudaresolve: error: --host {host}: gpus[0].compute_capability: unknown compute capability 99.9 "
        "(known majors: 3, 5, 6, 7, 8, 9, 10, 11, 12)\n",
    )
    host.write_text(out.replace('"8.6"', '"99.9"').replace('"override:--gpu"', '"nvml"'))
    code, out, err = run_cli(capsys, "--json", "--host", str(host))
    assert (code, err) == (0, "")
    assert json.loads(out)["gpus"][0]["compute_capability"] == "99.9"
