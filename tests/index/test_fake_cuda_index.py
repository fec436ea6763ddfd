"""The fake CUDA index against its oracles: real pip resolves full, consistent sets from it (as it would
from the real indexes), glibc loads or refuses its libraries as the real ones, and cudaresolve inspect
reads the device code and versioned needs the generator put in from data/."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from typing import Optional

import pytest
from conftest import hermetic_environ
from fake_cuda_index import EXTRA_COMPONENTS, plan
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from cudaresolve.env.inspect import inspect_names, provider_needs
from cudaresolve.env.interpreter import target_for_site_packages
from cudaresolve.knowledge import components, torch
from cudaresolve.versions import CudaVersion


def pip_resolve(cuda_index, requests: list[str], variant: Optional[str], *, variant_only: bool = False) -> dict:
    """pip's report of `install --dry-run` against the fake index, with this machine's pip config switched off."""
    indexes = ["--index-url", cuda_index.variant_index(variant)] if variant_only else ["--index-url", cuda_index.index_url]
    if variant and not variant_only:
        indexes += ["--extra-index-url", cuda_index.variant_index(variant)]
    command = [sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--report", "-", "--quiet",
               "--no-cache-dir", "--disable-pip-version-check", "--only-binary=:all:", *indexes, *requests]
    result = subprocess.run(command, capture_output=True, text=True, env=hermetic_environ())
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def resolved(report: dict) -> dict[str, str]:
    return {canonicalize_name(i["metadata"]["name"]): i["metadata"]["version"] for i in report["install"]}


def assert_closed(report: dict) -> None:
    """Every requirement of every chosen distribution (with its requested extras) is met inside the set."""
    chosen = resolved(report)
    environment = default_environment()
    for item in report["install"]:
        extras = [""] + [canonicalize_name(e) for e in item.get("requested_extras") or ()]
        for text in item["metadata"].get("requires_dist") or ():
            requirement = Requirement(text)
            if requirement.marker and not any(requirement.marker.evaluate({**environment, "extra": e}) for e in extras):
                continue
            name = canonicalize_name(requirement.name)
            assert name in chosen, f"{item['metadata']['name']} needs {text}: not in the set"
            assert requirement.specifier.contains(chosen[name], prereleases=True), f"{text} vs {name} {chosen[name]}"


def pins(requirements) -> dict[str, str]:
    """name -> exact version of the `==` pins among requirements."""
    found = {}
    for text in requirements:
        requirement = Requirement(text)
        exact = [s.version for s in requirement.specifier if s.operator == "=="]
        if exact and "*" not in exact[0]:
            found[canonicalize_name(requirement.name)] = exact[0]
    return found


TORCH_CASES = [  # (request, variant index, variant it must pick, only the variant index configured)
    ("torch==2.7.1", "cu126", "cu126", False),
    ("torch==2.7.1", "cu118", "cu118", False),
    ("torch==2.7.1", "cu128", "cu128", False),
    ("torch==2.8.0", "cu128", "cu128", True),
    ("torch==2.8.0", "cu129", "cu129", False),
    ("torch==2.14.1", "cu130", "cu130", False),
    ("torch==2.14.1", "cu126", "cu126", True),
    ("torch==2.15.0", "cu132", "cu132", False),
]


@pytest.mark.parametrize("request_, index, variant_name, variant_only", TORCH_CASES)
def test_pip_resolves_each_torch_variant_to_its_data_pins(cuda_index, request_, index, variant_name, variant_only):
    report = pip_resolve(cuda_index, [request_], index, variant_only=variant_only)
    assert_closed(report)
    chosen = resolved(report)
    version = request_.split("==")[1]
    assert chosen["torch"] == f"{version}+{variant_name}"
    variant = torch.variant(version, variant_name)
    for name, pinned in pins(variant.requires or ()).items():
        assert Version(chosen[name]) == Version(pinned)  # every exact CUDA pin data/torch.toml gives
    triton = Requirement("triton" + dict(torch.release(version).triton)[version])
    assert triton.specifier.contains(chosen["triton"])


def test_pip_takes_the_pypi_build_from_the_regular_index(cuda_index):
    report = pip_resolve(cuda_index, ["torch==2.8.0"], None)
    assert_closed(report)
    chosen = resolved(report)
    assert chosen["torch"] == "2.8.0"  # the default variant cu128, unsuffixed
    assert pins(torch.variant("2.8.0", "cu128").requires).items() <= chosen.items()


@pytest.mark.parametrize(
    "requests, expected",
    [
        (["cupy-cuda12x[ctk]"], {"cupy-cuda12x": "14.2.0", "cuda-toolkit": "12.9.1", "nvidia-cusparse-cu12": "12.5.10.65",
                                 "nvidia-nvjitlink-cu12": "12.9.86", "numpy": "2.2.6"}),
        (["cupy-cuda13x[ctk]"], {"cupy-cuda13x": "14.2.0", "cuda-toolkit": "13.2.2", "nvidia-nvjitlink": "13.2.86"}),
        (["cupy-cuda11x"], {"cupy-cuda11x": "13.6.0", "fastrlock": "0.8.3", "numpy": "2.2.6"}),
        (["cuda-cccl[cu12]"], {"cuda-cccl": "1.2.1", "cuda-bindings": "12.9.10", "cuda-toolkit": "12.9.1",
                               "nvidia-cuda-nvcc-cu12": "12.9.86", "numba-cuda-mlir": "0.5.2"}),
        (["cuda-cccl[cu13]"], {"cuda-bindings": "13.5.0", "cuda-toolkit": "13.2.2", "nvidia-nvvm": "13.2.86"}),
        (["numba==0.59.1"], {"numba": "0.59.1", "llvmlite": "0.42.0", "numpy": "1.26.4"}),
        (["numba"], {"numba": "0.60.0", "llvmlite": "0.43.0", "numpy": "1.26.4"}),
        # the real bug: metadata lets cuSPARSE 12.3 (CUDA 12.4) sit beside nvJitLink 12.1
        (["nvidia-cusparse-cu12==12.3.1.170", "nvidia-nvjitlink-cu12==12.1.105"], {"nvidia-nvjitlink-cu12": "12.1.105"}),
    ],
)
def test_pip_resolves_the_other_stacks(cuda_index, requests, expected):
    report = pip_resolve(cuda_index, requests, None)
    assert_closed(report)
    assert expected.items() <= resolved(report).items()


def test_every_requirement_in_the_universe_can_be_met(cuda_index):
    """Each wheel's requirements (under each extra it declares) name a version the universe holds."""
    universe = cuda_index.universe
    held: dict[str, list[str]] = {}
    metadata = {}
    for filename in universe.wheels:
        with zipfile.ZipFile(universe.root / filename) as archive:
            text = archive.read(next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))).decode()
        fields = [line.split(": ", 1) for line in text.splitlines() if ": " in line]
        name = canonicalize_name(next(v for k, v in fields if k == "Name"))
        held.setdefault(name, []).append(next(v for k, v in fields if k == "Version"))
        metadata[filename] = ([v for k, v in fields if k == "Requires-Dist"], [""] + [v for k, v in fields if k == "Provides-Extra"])
    environment = default_environment()
    for filename, (requires, extras) in metadata.items():
        for text in requires:
            requirement = Requirement(text)
            if requirement.marker and not any(requirement.marker.evaluate({**environment, "extra": e}) for e in extras):
                continue
            versions = held.get(canonicalize_name(requirement.name), [])
            assert any(requirement.specifier.contains(v, prereleases=True) for v in versions), f"{filename}: {text}"


@pytest.mark.parametrize("version, variant_name", [("2.7.1", "cu118"), ("2.8.0", "cu129"), ("2.14.1", "cu130")])
def test_torch_payload_carries_the_variant_arch_list_and_binds_its_cuda_major(cuda_index, version, variant_name):
    variant = torch.variant(version, variant_name)
    [lib] = inspect_names([str(cuda_index.universe.path("torch", f"{version}+{variant_name}"))], target_for_site_packages("."))
    assert lib.path.endswith("!torch/lib/libtorch_cuda.so") and lib.error is None
    assert lib.facts.fatbin.sass == variant.sass()
    assert lib.facts.fatbin.ptx == variant.ptx()
    major = str(variant.cuda.major)
    cudart = components.for_component("cudart", int(major))[0].sonames[0]
    assert cudart in lib.facts.needed
    needs = {n.file: n for n in provider_needs(lib.facts)}
    assert needs[cudart].symbols == ("cudaLaunchKernel",) and needs[cudart].versions == (cudart,)


def test_cusparse_binds_the_nvjitlink_of_its_cuda_release(cuda_index):
    [lib] = inspect_names([str(cuda_index.universe.path("nvidia-cusparse-cu12", "12.3.1.170"))], target_for_site_packages("."))
    [need] = provider_needs(lib.facts)
    assert (need.file, need.symbols, need.min_version) == ("libnvJitLink.so.12", ("__nvJitLinkComplete_12_4",), CudaVersion(12, 4))
    assert lib.facts.runpath == ("$ORIGIN/../../nvjitlink/lib",)


@pytest.mark.parametrize("nvjitlink, error", [
    ("12.1.105", "undefined symbol: __nvJitLinkComplete_12_4, version libnvJitLink.so.12"),
    ("12.4.127", ""),
    ("12.9.86", ""),
])
def test_glibc_loads_cusparse_only_beside_a_new_enough_nvjitlink(cuda_index, tmp_path, nvjitlink, error):
    """The payloads behave as the real ones: glibc's dlopen refuses cuSPARSE 12.3 beside nvJitLink 12.1."""
    universe = cuda_index.universe
    for wheel in (universe.path("nvidia-cusparse-cu12", "12.3.1.170"), universe.path("nvidia-nvjitlink-cu12", nvjitlink)):
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(tmp_path)
    library = tmp_path / "nvidia/cusparse/lib/libcusparse.so.12"
    code = "import ctypes, sys\ntry:\n    ctypes.CDLL(sys.argv[1])\nexcept OSError as e:\n    print(e)\n"
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
    out = subprocess.run([sys.executable, "-c", code, str(library)], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == (f"{library}: {error}" if error else "")


def test_nvjitlink_defines_the_family_up_to_its_minor(cuda_index):
    for requirement in EXTRA_COMPONENTS:
        name, _, version = requirement.partition("==")
        if "nvjitlink" not in name:
            continue
        [lib] = inspect_names([str(cuda_index.universe.path(name, version))], target_for_site_packages("."))
        minor = int(version.split(".")[1])
        complete = sorted(s.name for s in lib.facts.defined if s.name.startswith("__nvJitLinkComplete_12_"))
        assert complete == sorted(f"__nvJitLinkComplete_12_{m}" for m in range(minor + 1))
        assert lib.facts.version_definitions == ("libnvJitLink.so.12",)


def test_plan_follows_data():
    """Every torch variant data lists for the chosen patches is in the plan, on its variant index."""
    specs = {(s.name, s.version): s for s in plan()}
    newest = [r.versions[-1] for r in torch.load().releases[-2:]]
    for version in ("2.7.1", "2.8.0", *newest):
        release = torch.release(version)
        for variant in release.variants:
            if version in variant.versions:
                assert specs[("torch", f"{version}+{variant.name}")].indexes[0] == torch.index_path(variant.name)
        assert specs[("torch", version)].indexes[0] == "simple"
