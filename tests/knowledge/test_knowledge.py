"""The knowledge tables: they load, agree with each other, match real wheels, and keep exact values."""

from __future__ import annotations

import re
import sys
from importlib import resources
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from cudaresolve.arch import ComputeCapability, parse_arch_list
from cudaresolve.env.example import example_environment
from cudaresolve.errors import DataError, UsageError
from cudaresolve.knowledge import (
    advisories,
    compiler_users,
    compilers,
    components,
    cupy,
    files,
    gpus,
    own_runtime,
    package_floors,
    toolkit_pins,
    toolkits,
    torch,
    wheel_facts,
)
from cudaresolve.versions import CudaVersion, DriverRelease

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib


TABLES = (toolkits, gpus, torch, cupy, components, advisories, wheel_facts, toolkit_pins, compilers, compiler_users, own_runtime,
          package_floors)
NAMES = sorted(p.name for p in resources.files("cudaresolve.data").iterdir() if p.name.endswith(".toml"))


def raw(name: str) -> dict:
    return tomllib.loads(resources.files("cudaresolve.data").joinpath(name).read_text())


def test_everything_loads():
    for table in TABLES:
        table.load()


# -- provenance -------------------------------------------------------------------------------------


def test_every_file_and_top_level_table_names_source_and_confidence():
    for name in NAMES:
        data = raw(name)
        for table in [data] + [value for value in data.values() if isinstance(value, dict)]:
            assert table["source"].strip() and table["confidence"] in ("H", "M", "L"), name
    # No URL in the data: index bases come from configuration, sources are named, not linked.
    for name in NAMES:
        assert "://" not in resources.files("cudaresolve.data").joinpath(name).read_text(), name


def test_every_shipped_data_file_is_read(monkeypatch, tmp_path):
    """Each table module and the built-in example read their files through `files.read`: together,
    every file shipped in cudaresolve.data and nothing else (an empty cache of compiled tables: each is parsed)."""
    monkeypatch.setenv("CUDARESOLVE_CACHE_DIR", str(tmp_path / "cache"))
    read = []
    real = files.read
    monkeypatch.setattr(files, "read", lambda name, cls: read.append(name) or real(name, cls))
    for table in TABLES:
        table.load.cache_clear()
    try:
        for table in TABLES:
            table.load()
        example_environment()
    finally:
        for table in TABLES:
            table.load.cache_clear()
    assert sorted(set(read)) == NAMES


# -- toolkits and drivers ---------------------------------------------------------------------------


def cuda(text: str) -> CudaVersion:
    return CudaVersion.parse(text)


def driver(text: str) -> DriverRelease:
    return DriverRelease.parse(text)


def test_toolkit_list_is_complete_and_ordered():
    versions = [t.version for t in toolkits.known()]
    assert versions[0] == cuda("11.0") and versions[-1] == cuda("13.4")
    assert cuda("12.7") not in versions
    assert len(versions) == 23  # 11.0-11.8, 12.0-12.6, 12.8, 12.9, 13.0-13.4
    assert versions == sorted(versions)


def test_ga_drivers_rise_with_the_toolkit_and_report_their_own_cuda():
    drivers = [t.ga_driver for t in toolkits.known()]
    assert drivers == sorted(drivers)
    # Table 3 (GA drivers) and the branch table were transcribed separately: they must agree.
    for t in toolkits.known():
        assert toolkits.max_cuda_for_driver(t.ga_driver) == t.version, t  # 13.3/13.4: only the branch is known
        for update in t.updates:
            assert toolkits.max_cuda_for_driver(update.driver) == t.version, update
            assert toolkits.get(cuda(update.release)) == t


def test_branch_table_is_monotonic():
    branches = toolkits.load().branches
    assert [b for b, _ in branches] == sorted({b for b, _ in branches})
    cudas = [c for _, c in branches]
    assert cudas == sorted(set(cudas))
    assert branches[-1] == (615, cuda("13.4")) and branches[0] == (450, cuda("11.0"))


def test_family_floors_and_their_toolkits():
    assert toolkits.family_floor(11) == driver("450.80.02")
    assert toolkits.family_floor(12) == driver("525.60.13")
    assert toolkits.family_floor(13) == driver("580.65.06")
    assert toolkits.family_floor(10) is None
    for t in toolkits.known():
        assert t.family_floor == toolkits.family_floor(t.major)
        first = toolkits.get(CudaVersion(t.major, 0))
        assert t.family_floor >= first.ga_driver


def test_ptx_isa_rises_with_the_toolkit():
    known = [t for t in toolkits.known() if t.ptx_isa is not None]
    assert [t.version for t in toolkits.known() if t.ptx_isa is None] == []
    isas = [Version(t.ptx_isa) for t in known]
    assert isas == sorted(isas)


@pytest.mark.parametrize(
    "isa, toolkit",
    [("8.5", "12.5"), ("7.0", "11.0"), ("8.7", "12.8"), ("8.6", "12.8"), ("9.2", "13.2"), ("9.4", "13.4"), ("9.5", None)],
)
def test_toolkit_for_ptx_isa(isa, toolkit):
    found = toolkits.for_ptx_isa(isa)
    assert (str(found.version) if found else None) == toolkit


@pytest.mark.parametrize("version, isa", [("12.4", "8.4"), ("12.8", "8.7"), ("12.9.1", "8.8"), ("13.0", "9.0"),
                                          ("12.7", "8.6"), ("13.4", "9.4"), ("13.5", None)])
def test_ptx_isa_of_a_cuda_version_is_the_ceiling_of_a_driver_reporting_it(version, isa):
    assert toolkits.ptx_isa(cuda(version)) == isa


def test_the_newest_ptx_a_driver_loads_follows_its_branch():
    newest = {release: toolkits.ptx_isa(toolkits.max_cuda_for_driver(driver(release)))
              for release in ("470.256.02", "535.183.01", "550.144.03", "565.57.01", "570.124.06", "580.65.06")}
    assert newest == {"470.256.02": "7.4", "535.183.01": "8.2", "550.144.03": "8.4", "565.57.01": "8.6",
                      "570.124.06": "8.7", "580.65.06": "9.0"}
    assert toolkits.get(cuda("12.7")) is None  # a CUDA version drivers report, no toolkit


def test_sass_targets_parse_and_follow_the_removals():
    for t in toolkits.known():
        assert all(re.match(r"^sm_\d{2,3}[af]?$", s) for s in t.sass_targets), t.version

    def sass(version: str) -> tuple[str, ...]:
        return toolkits.get(cuda(version)).sass_targets

    assert "sm_35" in sass("11.8") and "sm_35" not in sass("12.0")
    assert "sm_120" not in sass("12.6") and "sm_120" in sass("12.8")
    assert "sm_70" in sass("12.9") and "sm_70" not in sass("13.0")
    assert "sm_110" in sass("13.0") and "sm_101" in sass("12.9")
    assert sass("13.4") == ()


@pytest.mark.parametrize(
    "release, version",
    [
        ("565.57.01", "12.7"),
        ("550.144.03", "12.4"),
        ("550.54.14", "12.4"),
        ("535.104.05", "12.2"),
        ("470.82.01", "11.4"),
        ("590.48.01", "13.1"),
        ("600.10", "13.2"),  # between listed branches: the nearest lower one
        ("700.1", "13.4"),
        ("440.33.01", None),
    ],
)
def test_max_cuda_for_driver(release, version):
    assert toolkits.max_cuda_for_driver(driver(release)) == (cuda(version) if version else None)


@pytest.mark.parametrize(
    "release, version, support",
    [
        ("470.82.01", "12.1", None),
        ("535.104.05", "12.4", "minor-compat"),
        ("535.104.05", "12.2", "native"),
        ("570.26", "12.8.1", "native"),
        ("580.65.06", "13.2", "minor-compat"),
        ("575.57.08", "13.0", None),
        ("450.80.02", "11.8", "minor-compat"),
        ("450.51.05", "11.1", None),  # 11.0 GA driver is below the 11.x floor
        ("525.60.13", "11.8", "native"),  # backward compatibility
        ("440.33.01", "10.2", None),
    ],
)
def test_driver_support(release, version, support):
    assert toolkits.driver_support(driver(release), cuda(version)) == support


def test_toolkit_lookup_and_bad_input():
    assert str(toolkits.get(cuda("12.8.1")).ga_driver) == "570.26"
    assert str(toolkits.get(cuda("12.8")).ga_driver_windows) == "570.65"
    assert toolkits.get(cuda("13.1")).ga_driver_windows is None
    assert toolkits.get(cuda("12.7")) is None
    assert str(toolkits.get(cuda("13.3")).ga_driver) == "610" and toolkits.get(cuda("13.3")).confidence == "M"
    with pytest.raises(UsageError):
        toolkits.get(cuda("12"))  # a major alone names no toolkit
    with pytest.raises(UsageError):
        toolkits.for_ptx_isa("x")


# -- GPUs -------------------------------------------------------------------------------------------


def test_gpu_table():
    by_cc = {g.cc: g for g in gpus.load()}
    assert by_cc[ComputeCapability(6, 1)].arch == "Pascal" and "GTX 1080" in by_cc[ComputeCapability(6, 1)].examples
    assert by_cc[ComputeCapability(12, 0)].arch == "Blackwell (RTX)"
    assert by_cc[ComputeCapability(10, 7)].confidence == "L"
    assert ComputeCapability(3, 0) not in by_cc
    ccs = [g.cc for g in gpus.load()]
    assert ccs == sorted(set(ccs))


# -- PyTorch ----------------------------------------------------------------------------------------


def all_variants():
    return [v for r in torch.load().releases for v in r.variants]


def test_torch_releases_cover_2_0_to_2_15():
    assert [r.series for r in torch.load().releases] == [f"2.{i}" for i in range(16)]
    for r in torch.load().releases:
        SpecifierSet(r.python)
        Marker(r.pypi_marker)
        for v in r.versions:
            assert Version(v).release[:2] == Version(r.series).release
        assert [t for t, _ in r.triton] == list(r.versions)
        names = [v.name for v in r.variants]
        assert len(names) == len(set(names))
        assert [v.name for v in r.variants if v.pypi_default] == [r.default_variant]


def test_every_torch_variant_has_a_toolkit_and_a_driver_floor():
    for v in all_variants():
        t = toolkits.get(v.cuda)
        assert t is not None and t.ptx_isa is not None, v
        assert toolkits.family_floor(t.major) is not None


def test_every_arch_list_parses():
    for v in all_variants():
        assert parse_arch_list(v.arch_list)
        assert v.sass()
        if v.arch_list_aarch64 is not None:
            assert parse_arch_list(v.arch_list_aarch64)
            assert Version(v.versions[0]) >= Version("2.8")
        else:
            with pytest.raises(UsageError):
                v.sass("aarch64")


def test_torch_requirements_match_their_variant():
    """The CUDA a variant's pins name (runtime or cuda-toolkit version, dist suffix) is the variant's CUDA."""
    dists = {canonicalize_name(c.dist) for c in components.load().component}
    for v in all_variants():
        if v.pypi_default:
            assert v.requires is not None and v.requires_confidence == "H", v
        if v.requires is None:
            continue
        assert v.requires_confidence in ("H", "M", "L")
        major = v.cuda.major
        for text in v.requires:
            req = Requirement(text)
            name = canonicalize_name(req.name)
            if name.startswith("nvidia-"):
                assert name in dists, text
                suffix = re.search(r"-cu(\d+)$", name)
                assert (int(suffix.group(1)) if suffix else 13) == major, text
            pinned = [Version(s.version) for s in req.specifier if s.operator == "=="]
            if name in ("nvidia-cuda-runtime-cu11", "nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime", "cuda-toolkit"):
                assert CudaVersion(pinned[0].major, pinned[0].minor) == v.cuda, (v.release, v.name, text)


@pytest.mark.parametrize(
    "version, variant, name, cuda",
    [
        ("2.8.0", None, "cu128", "12.8"),
        ("2.8.0+cu126", None, "cu126", "12.6"),
        ("2.14.1", None, "cu130", "13.0"),
        ("2.0.1", "cu118", "cu118", "11.8"),
        ("2.12.1+cu129", None, "cu129", "12.9"),
        ("2.15", None, "cu132", "13.2"),
    ],
)
def test_torch_variant_lookup(version, variant, name, cuda):
    found = torch.variant(version, variant)
    assert (found.name, str(found.cuda)) == (name, cuda)


@pytest.mark.parametrize("version", ["2.12.0+cu129", "2.14.2", "2.8.0+cu121", "1.13.1", "2.14.1+cpu", "3"])
def test_torch_variant_unknown(version):
    assert torch.variant(version) is None


def test_torch_exact_values():
    assert torch.variant("2.14.1+cu126").sass() == ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90")
    cu130 = torch.variant("2.14.1+cu130")
    assert cu130.sass() == ("sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")
    assert [(p.target, p.isa) for p in cu130.ptx()] == [("compute_120", "9.0")]
    assert cu130.arch_list_aarch64 == "8.0;9.0;10.0;11.0;12.0+PTX"
    assert "sm_70" not in torch.variant("2.11.0+cu128").sass()
    assert "sm_70" in torch.variant("2.10.0+cu128").sass()
    assert torch.variant("2.8.0").requires[-1] == "nvidia-cufile-cu12==1.13.1.3"
    assert torch.release("2.14.1").triton == (("2.14.0", "~=3.8.0"), ("2.14.1", "~=3.8.0"))
    assert torch.index_path("cu128") == "whl/cu128"


# -- CuPy -------------------------------------------------------------------------------------------


def test_cupy_tables():
    assert [m.major for m in cupy.load()] == [12, 13, 14]
    for major in cupy.load():
        SpecifierSet(major.versions)
        for dist in major.dists:
            for version in dist.cuda:
                assert str(version) == "10.2" or toolkits.get(version) is not None, (dist, version)
    assert cupy.dist("cupy-cuda13x", "13.6.0").cuda == (CudaVersion(13, 0),)
    assert cupy.dist("cupy-cuda13x", "13.5.0") is None
    assert cupy.dist("cupy_cuda11x", "14.0.0") is None
    assert cupy.dist("cupy-cuda12x", "14.2.0").latest == "14.2.0"


# -- components -------------------------------------------------------------------------------------


def test_component_rows_follow_the_naming_rules():
    for c in components.load().component:
        suffix = re.search(r"-cu(\d+)$", c.dist)
        if c.cuda_major == 13 and c.name in ("cudart", "nvrtc", "nvjitlink", "cublas", "cufft", "curand",
                                             "cusolver", "cusparse", "cupti", "nvtx", "cufile", "nvvm"):
            assert suffix is None and c.lib_dir == "nvidia/cu13/lib", c
        else:
            assert suffix is not None and int(suffix.group(1)) == c.cuda_major, c
        assert c.sonames and all(re.match(r"^lib[\w.+-]+\.so(\.\d+)*$", s) for s in c.sonames), c


@pytest.mark.parametrize(
    "soname, dists",
    [
        ("libnvJitLink.so.12", ["nvidia-nvjitlink-cu12"]),
        ("libcusparse.so.12", ["nvidia-cusparse-cu12", "nvidia-cusparse"]),
        ("libcudart.so.13", ["nvidia-cuda-runtime"]),
        ("libnccl.so.2", ["nvidia-nccl-cu11", "nvidia-nccl-cu12", "nvidia-nccl-cu13"]),
        ("libcublas.so.13", ["nvidia-cublas"]),
        ("libcufft.so.11", ["nvidia-cufft-cu12"]),
        ("libcupti.so.13", ["nvidia-cuda-cupti"]),
        ("libcuda.so.1", []),
    ],
)
def test_components_for_soname(soname, dists):
    assert [c.dist for c in components.for_soname(soname)] == dists


def test_cudnn_rows_depend_on_the_dist_version():
    assert [c.sonames[0] for c in components.for_dist("nvidia-cudnn-cu12", "8.9.2.26")] == ["libcudnn.so.8"]
    assert [c.sonames[0] for c in components.for_dist("nvidia_cudnn_cu12", "9.10.2.21")] == ["libcudnn.so.9"]
    assert len(components.for_dist("nvidia-cudnn-cu12")) == 2


def test_nvjitlink_and_nvrtc_release_tables():
    releases = components.cuda_releases()
    assert [Version(r.cuda) for r in releases] == sorted(Version(r.cuda) for r in releases)
    for r in releases:
        assert Version(r.nvrtc).release[:2] == Version(r.cuda).release[:2]
        assert Version(r.nvjitlink).release[:2] == Version(r.cuda).release[:2]
    # The versions on the index (pip index versions, cuda-facts §4.3) are exactly the ones mapped.
    nvjitlink = sorted({r.nvjitlink for r in releases}, key=Version)
    assert nvjitlink == [
        "12.0.76", "12.0.140", "12.1.55", "12.1.105", "12.2.91", "12.2.128", "12.2.140", "12.3.52", "12.3.101",
        "12.4.99", "12.4.127", "12.5.40", "12.5.82", "12.6.20", "12.6.68", "12.6.77", "12.6.85", "12.8.61",
        "12.8.93", "12.9.41", "12.9.86", "13.0.39", "13.0.88", "13.1.80", "13.1.115", "13.2.51", "13.2.78",
        "13.2.86", "13.3.33", "13.4.52", "13.4.92", "13.5.37",
    ]  # fmt: skip
    assert len({r.nvrtc for r in releases if r.nvrtc.startswith("12.")}) == 22


def test_preloaders_and_driver_libraries():
    cupy, torch, onnxruntime, cupy_13, cccl, tensorflow = components.preloaders()
    assert onnxruntime.on_call == components.PythonCall("onnxruntime", "preload_dlls")
    assert str(onnxruntime.on_call) == "onnxruntime.preload_dlls()"
    assert cccl.libraries == ("nvrtc", "nvjitlink", "cudart")
    assert cupy.search == ("site-packages", "conda-prefix", "system")
    for soname in ("libnccl.so.2", "libcutensor.so.2", "libcutensorMg.so.2"):
        layer = components.optional_layer("cupy-cuda12x", Version("14.2.0"), soname)
        assert layer is not None and layer.provided_by is None and components.for_soname(soname)
    assert components.optional_layer("numba", Version("0.62.1"), "libtbb.so.12").provided_by == "tbb"
    assert components.optional_layer("numba", Version("0.62.1"), "libnccl.so.2") is None
    assert torch.top_levels == ("torch",)
    assert components.preloader_for("cupy-cuda12x", Version("14.2.0")) == cupy
    # CuPy 13 preloads only what its own cupy/.data/_wheel.json lists, of NCCL and cuTENSOR
    assert components.preloader_for("cupy-cuda12x", Version("13.6.0")) == cupy_13
    assert (cupy_13.libraries, cupy_13.wheel_list) == (("cutensor", "nccl"), "cupy/.data/_wheel.json")
    assert components.preloader_for("torch", Version("2.14.1+cu126")) == torch
    # tensorflow's import loads its framework libraries for custom-op packages; it preloads nothing by path
    assert (tensorflow.on_import, tensorflow.search) == (("tensorflow/python/_pywrap_tensorflow_internal.so",), ())
    drivers = components.driver_libraries()
    assert "libcuda.so.1" in drivers and "libnvidia-ml.so.1" in drivers
    assert not any(components.for_soname(s) for s in drivers)


# The directories and sonames against real wheels (small ones; downloaded once into the test cache).
@pytest.mark.parametrize(
    "requirement",
    [
        "nvidia-cuda-runtime-cu11==11.8.89",
        "nvidia-cuda-runtime-cu12==12.8.90",
        "nvidia-cuda-runtime==13.0.96",
        "nvidia-nvtx-cu11==11.8.86",
        "nvidia-nvtx==13.0.85",
        "nvidia-nvjitlink-cu12==12.8.93",
    ],
)
def test_component_matches_the_real_wheel(requirement, unpacked):
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile

    name, _, version = requirement.partition("==")
    (row,) = components.for_dist(name, version)
    root = unpacked(requirement)
    found = {}
    for path in sorted((root / row.lib_dir).iterdir()):
        with path.open("rb") as f:
            if f.read(4) != b"\x7fELF":
                continue
            f.seek(0)
            for section in ELFFile(f).iter_sections():
                if isinstance(section, DynamicSection):
                    for tag in section.iter_tags():
                        if tag.entry.d_tag == "DT_SONAME":
                            found[tag.soname] = path.name
    # Every soname in the table is there under its own name; runtime-cu11 also ships libOpenCL.so.1.
    for soname in row.sonames:
        assert found.get(soname) == soname, (soname, found)
    assert set(found) - set(row.sonames) <= {"libOpenCL.so.1"}


# -- advisories -------------------------------------------------------------------------------------


def test_advisories_parse_and_are_complete():
    ids = [a.id for a in advisories.load()]
    assert len(ids) == 15 and len(set(ids)) == 15
    for a in advisories.load():
        for text in a.affects + a.together_with + a.unless:
            Requirement(text)
        for spec in (a.cuda, a.driver, a.gpu):
            if spec is not None:
                SpecifierSet(spec)
        assert a.refs or a.note, a.id
        for ref in a.refs:
            assert re.match(r"^[\w.-]+/[\w.-]+#\d+$", ref), ref
        variants = {v.name for r in torch.load().releases for v in r.variants}
        assert set(a.variants) <= variants, a.id
        assert a.symptom and a.fix


def test_advisory_exact_conditions():
    by_id = {a.id: a for a in advisories.load()}
    a = by_id["numba-driver-580"]
    assert a.affects == ("numba<0.63.0",) and a.unless == ("numba-cuda",)
    assert Version("580.65.06") in SpecifierSet(a.driver) and Version("575.57.08") not in SpecifierSet(a.driver)
    pascal = by_id["pascal-cu128"]
    assert Version("6.1") in SpecifierSet(pascal.gpu) and Version("7.0") not in SpecifierSet(pascal.gpu)
    assert by_id["cupy-nccl-preload"].confidence == "L"


# -- malformed data ---------------------------------------------------------------------------------


CACHED = tuple(module.load for module in TABLES)


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    """A copy of the data directory that the loader reads instead of the package's, caches cleared."""
    for name in NAMES:
        (tmp_path / name).write_bytes(resources.files("cudaresolve.data").joinpath(name).read_bytes())
    monkeypatch.setattr(files.resources, "files", lambda package: Path(tmp_path))
    for cached in CACHED:
        cached.cache_clear()
    yield tmp_path
    for cached in CACHED:
        cached.cache_clear()


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


@pytest.mark.parametrize(
    "file, old, new, message",
    [
        ("toolkits.toml", 'ga_driver = "450.51.05"', 'ga_driver = "4x0"', "toolkits.toml: toolkit[0].ga_driver"),
        ("toolkits.toml", 'confidence = "M"\nversions', 'confidence = "X"\nversions', "ptx_isa.confidence"),
        ("toolkits.toml", '"11" = "450.80.02", ', "", "no family floor for CUDA 11"),
        ("toolkits.toml", '"12.7" = "8.6"', '"12.75" = "8.6"', "ptx_isa.12.75: names neither a toolkit"),
        ("torch.toml", 'arch_list = "3.7;5.0;6.0;7.0;7.5;8.0;8.6"', 'arch_list = "3.7;5.0;sm_60"',
         "torch.toml: release[0].variant[0].arch_list"),
        ("torch.toml", 'default_variant = "cu117"', 'default_variant = "cu999"', "release[0].default_variant"),
        ("gpus.toml", 'source = "NVIDIA', 'sauce = "NVIDIA', "gpus.toml: source: missing"),
        ("advisories.toml", 'affects = ["nvidia-nvjitlink-cu12<12.3"]', 'affects = ["nvidia-nvjitlink-cu12<<12.3"]', "advisory[1].affects"),
        ("advisories.toml", 'references = ["nvJitLink*@libnvJitLink.so.12"]', 'references = ["nvJitLink*@"]',
         "advisory[1].references: expected NAME or NAME@VERSION, got 'nvJitLink*@'"),
        ("advisories.toml", 'references = ["nvJitLink*@libnvJitLink.so.12"]', 'references = ["@libnvJitLink.so.12"]',
         "advisory[1].references"),
        ("components.toml", "[[component]]\nname", "[[component]\nname", "components.toml: not valid TOML"),
        ("cupy.toml", 'cuda = ["13.0", "13.1"', 'cuda = ["13.x", "13.1"', "major[2].dists[1].cuda: not a CUDA version"),
        ("compilers.toml", 'archs = ["3.5", "3.7",', 'archs = ["3.7", "3.5",', "compilers.toml: nvrtc.release[0].archs"),
        ("compilers.toml", 'ptx_isa = "7.7"', 'ptx_isa = "7.7.1"', "compilers.toml: nvrtc.release[0].ptx_isa"),
        ("compilers.toml", 'since = "12.3.52"', 'since = "12.3.99"', "names 12.3.99, a release not in the table"),
        ("compiler_users.toml", 'versions = "<9.4"', 'versions = "<10"', "users.package: cupy 9.4 falls in two rows"),
        ("compiler_users.toml", 'sass_by = "compiler"', 'sass_by = "ptxas"', "users.package[1].sass_by: expected one of"),
        ("compiler_users.toml", '"nvJitLinkVersion"]', '"nvJitLinkVersions"]', "nvJitLinkVersions is exported by no nvjitlink release"),
    ],
)
def test_malformed_data_is_a_data_error(data_dir, file, old, new, message):
    edit(data_dir / file, old, new)
    with pytest.raises(DataError) as info:
        for table in TABLES:
            table.load()
    assert message in str(info.value)


def test_missing_file_is_a_data_error(data_dir):
    (data_dir / "cupy.toml").unlink()
    with pytest.raises(DataError, match="cupy.toml"):
        cupy.load()


def test_point_6_tables():
    assert [c for c in ("cudart", "nvrtc", "nvjitlink", "cupti", "nvtx", "cublas", "cudnn") if components.versioned_by_cuda(c)] == [
        "cudart", "nvrtc", "nvjitlink", "cupti", "nvtx"
    ]
    assert components.needs_build_runtime("torch") and components.needs_build_runtime("cupy_cuda12x")
    assert not components.needs_build_runtime("torchvision") and not components.needs_build_runtime("cupy")


def test_every_advisory_is_bounded_by_the_releases_on_the_index():
    """data/advisories.toml [releases] (scripts/record_releases.py): each affected range holds a release
    that exists, each fixed release exists, and no release from a fixed one on is affected, so no
    advisory fires on a release it does not affect or points to a fix the index does not have."""
    releases = {name: [Version(v) for v in versions] for name, versions in advisories.releases().items()}
    for advisory in advisories.load():
        for text in advisory.affects:
            requirement = Requirement(text)
            name = canonicalize_name(requirement.name)
            assert name in releases, (advisory.id, name)
            assert any(requirement.specifier.contains(v, prereleases=True) for v in releases[name]), (advisory.id, text)
        for text in advisory.fixed_in:
            fixed = Requirement(text)
            name = canonicalize_name(fixed.name)
            [version] = [Version(s.version) for s in fixed.specifier]
            assert version in releases[name], (advisory.id, text)
            later = [v for v in releases[name] if v >= version]
            for affected in map(Requirement, advisory.affects):
                if canonicalize_name(affected.name) == name:
                    assert not any(affected.specifier.contains(v, prereleases=True) for v in later), (advisory.id, text)


def test_toolkit_pins_give_a_library_versioned_wheels_cuda_minor():
    """data/toolkit_pins.toml, read from every cuda-toolkit release's METADATA: the minor of the first
    toolkit pinning a release; for a patch release no toolkit pins, the minor of the newest pinned
    release below it (a lower bound); none below the first pinned release."""
    from cudaresolve.knowledge import toolkit_pins

    assert toolkit_pins.cuda_of("nvidia-cufft", "12.5.0.14") == cuda("13.5")
    assert toolkit_pins.cuda_of("nvidia_cuFFT", "12.0.0.61") == cuda("13.0")  # pinned by 13.0.1 … 13.0.3.0: the first
    assert toolkit_pins.cuda_of("nvidia-cublas-cu12", "12.9.3.13") == cuda("12.9")  # a patch after 12.9.1.4
    assert toolkit_pins.cuda_of("nvidia-cublas-cu12", "12.0.0.1") is None
    assert toolkit_pins.cuda_of("nvidia-cudnn-cu12", "9.10.2.21") is None  # no toolkit pins cuDNN
    assert toolkit_pins.for_cuda("nvidia-cufft-cu12", cuda("12.4")) == ("11.2.1.3", "11.2.0.44")
    releases = toolkit_pins.load()
    assert [r.version for r in releases][:1] == ["11.8.0"] and str(releases[-1].cuda) == "13.5"


# -- run-time compilers (data/compilers.toml, generated from the wheels) -----------------------------


def minor_of(version: str) -> str:
    return ".".join(version.split(".")[:2])


def test_nvrtc_13_has_no_target_below_turing_and_12_has_pascal():
    """The Pascal case of issue 25: cuda.compute's [cu13] build on a GTX 1080 (6.1) cannot compile."""
    nvrtc = compilers.releases("nvrtc")
    thirteen = [r for r in nvrtc if r.cuda.major == 13]
    assert len(thirteen) == 11 and all(not r.targets("6.1") and not r.targets("7.0") and r.targets("7.5") for r in thirteen)
    twelve = [r for r in nvrtc if r.cuda.major == 12]
    assert twelve and all(r.targets("6.1") and r.targets("5.0") and not r.targets("3.7") for r in twelve)
    assert compilers.release("nvrtc", "nvidia-cuda-nvrtc-cu11", "11.8.89").targets(ComputeCapability(3, 5))
    # Added archs: Blackwell in 12.8, 10.3 and 12.1 in 12.9, 10.1 renamed 11.0 in 13.0, 10.7 in 13.4.
    assert [a for a in map(str, compilers.release("nvrtc", "nvidia-cuda-nvrtc-cu12", "12.8.93").archs) if a not in
            map(str, compilers.release("nvrtc", "nvidia-cuda-nvrtc-cu12", "12.6.85").archs)] == ["10.0", "10.1", "12.0"]
    assert "10.1" not in map(str, compilers.release("nvrtc", "nvidia-cuda-nvrtc", "13.0.88").archs)
    assert not compilers.release("nvrtc", "nvidia-cuda-nvrtc", "13.3.33").targets("10.7")
    assert compilers.release("nvrtc", "nvidia-cuda-nvrtc", "13.4.92").targets("10.7")


@pytest.mark.parametrize("version, isa", [("12.4.127", "8.4"), ("12.6.85", "8.5"), ("12.8.93", "8.7"), ("12.9.86", "8.8")])
def test_nvrtc_writes_its_cuda_versions_ptx_isa(version, isa):
    assert compilers.release("nvrtc", "nvidia-cuda-nvrtc-cu12", version).ptx_isa == isa
    assert compilers.release("nvrtc", "nvidia_cuda_nvrtc_cu12", version) is not None  # names are canonicalized


def test_every_compiler_release_writes_the_ptx_isa_of_its_cuda_minor():
    """The cross-check of toolkits.toml's [ptx_isa] (the PTX ISA release notes) with the wheels: the
    compilers of CUDA X.Y write X.Y's ISA, and nvJitLink of X.Y links PTX up to it and no further."""
    for kind in compilers.KINDS:
        for r in compilers.releases(kind):
            expected = toolkits.ptx_isa(cuda(minor_of(r.version)))
            assert expected is not None or minor_of(r.version) == "13.5", r
            assert r.ptx_isa == (expected or "9.5"), r
            if kind != "nvvm":
                assert str(r.cuda) == minor_of(r.version), r
            if kind == "nvjitlink":
                assert r.max_ptx_isa == r.ptx_isa, r
    assert {toolkits.ptx_isa(t.version) for t in toolkits.known() if t.version >= cuda("11.7")} == {
        r.ptx_isa for r in compilers.releases("nvrtc") if r.cuda != cuda("13.5")
    }


def test_compiler_facts_only_grow_with_the_release():
    """Monotonic: PTX ISA and CUDA version never fall; within a major the arch list only gains; the
    lowest arch rises only at a new major (3.5 in 11, 5.0 in 12, 7.5 in 13); every patch release of a
    minor answers as its minor's others do."""
    for kind in compilers.KINDS:
        rows = compilers.releases(kind)
        assert [Version(r.ptx_isa) for r in rows] == sorted(Version(r.ptx_isa) for r in rows)
        lowest = {}
        for before, after in zip(rows, rows[1:]):
            if Version(before.version).major == Version(after.version).major:
                assert set(before.archs) - set(after.archs) <= {ComputeCapability(10, 1)}, (before, after)  # 10.1 -> 11.0 in 13.0
            if minor_of(before.version) == minor_of(after.version):
                assert (before.archs, before.ptx_isa) == (after.archs, after.ptx_isa), (before, after)
            lowest[Version(after.version).major] = after.archs[0]
        assert {major: str(cc) for major, cc in lowest.items()} == ({11: "3.5", 12: "5.0", 13: "7.5"} if kind != "nvjitlink" else {12: "5.0", 13: "7.5"})


def test_nvvm_and_nvjitlink_target_what_the_nvrtc_of_their_minor_targets():
    nvrtc = {minor_of(r.version): r.archs for r in compilers.releases("nvrtc")}
    for kind in ("nvvm", "nvjitlink"):
        for r in compilers.releases(kind):
            extra = set(r.archs) - set(nvrtc[minor_of(r.version)])
            assert set(r.archs) >= set(nvrtc[minor_of(r.version)]), r
            assert extra == ({ComputeCapability(6, 9)} if kind == "nvvm" and r.version.startswith("11.") else set()), r
    assert [r.nvvm_version for r in compilers.releases("nvvm")][::10] == ["1.9", "2.0", "2.0", "2.0"]


def test_dlsym_finds_nvjitlink_by_its_plain_names_from_12_3_only():
    """nvJitLink 12.0-12.2 export only `__nvJitLinkCreate_12_0` and the like: cuda-bindings, which
    looks up `nvJitLinkCreate`, finds nothing there. nvrtcGetNVVM went away in 13.0."""
    assert compilers.function_since("nvjitlink", "nvJitLinkCreate") == "12.3.52"
    assert compilers.function_since("nvjitlink", "nvJitLinkVersion") == "12.3.52"
    assert compilers.function_since("nvjitlink", "nvJitLinkGetLinkedLTOIR") == "13.2.51"
    assert compilers.function_since("nvrtc", "nvrtcGetLTOIR") == "12.0.76"
    assert compilers.function_since("nvrtc", "nvrtcNoSuchFunction") is None
    assert compilers.exports("nvrtc", "nvrtcGetNVVM", "12.9.86") and not compilers.exports("nvrtc", "nvrtcGetNVVM", "13.0.88")
    assert not compilers.exports("nvjitlink", "nvJitLinkCreate", "12.2.140")
    notes = [r.version for r in compilers.releases("nvjitlink") if r.note]
    assert notes == ["12.0.76", "12.0.140", "12.1.55", "12.1.105", "12.2.91", "12.2.128", "12.2.140"]
    with pytest.raises(UsageError):
        compilers.releases("ptxas")


@pytest.mark.parametrize("requirement", ["nvidia-nvjitlink-cu12==12.1.105", "nvidia-nvjitlink-cu12==12.8.93"])
def test_function_table_matches_a_real_nvjitlink(wheel, requirement):
    """The generated table against the library itself, read by cudaresolve's ELF reader: a plain-named
    function is defined exactly where the table says the release exports it."""
    from cudaresolve.binary.wheel import read_wheel

    name, version = requirement.split("==")
    (member,) = [m for m in read_wheel(open(wheel(requirement), "rb"), name).members if m.soname == "libnvJitLink.so.12"]
    defined = {s.name for s in member.defined}
    for function in compilers.load().functions["nvjitlink"]:
        assert (function in defined) == compilers.exports("nvjitlink", function, version), function


@pytest.mark.parametrize("requirement, builtins", [
    ("nvidia-cuda-nvrtc-cu12==12.9.86", "libnvrtc-builtins.so.12.9"),
    ("nvidia-cuda-nvrtc==13.0.88", "libnvrtc-builtins.so.13.0"),
])
def test_nvrtc_arch_list_matches_its_builtins_library(wheel, requirement, builtins):
    """An oracle besides nvrtcGetSupportedArchs: NVRTC's builtins library of the same wheel defines
    `__nvrtc_builtins__12_9_getArchBuiltins<NN>` for each arch it can compile for."""
    from cudaresolve.binary.wheel import read_wheel

    name, version = requirement.split("==")
    (member,) = [m for m in read_wheel(open(wheel(requirement), "rb"), name).members if m.soname == builtins]
    numbers = sorted({int(m.group(1)) for s in member.defined if (m := re.search(r"getArchBuiltins(\d+)$", s.name))})
    assert [ComputeCapability.from_arch_number(n) for n in numbers] == list(compilers.release("nvrtc", name, version).archs)


# -- packages that compile at run time (data/compiler_users.toml) ------------------------------------


@pytest.mark.parametrize("dist, version, compiler, sass_by, gets_ptx", [
    ("cupy-cuda13x", "14.2.0", "nvrtc", "compiler", False),  # -arch=sm_XY since 9.4
    ("cupy_cuda12x", "9.4.0", "nvrtc", "compiler", False),
    ("cupy-cuda11x", "9.3.0", "nvrtc", "driver", True),
    ("cuda-cccl", "1.2.1", "nvrtc", "nvjitlink", False),
    ("numba-cuda", "0.15.2", "nvvm", "driver", True),
    ("numba-cuda", "0.16.0", "nvvm", "nvjitlink-else-driver", True),
    ("openmm", "8.0.0", "nvrtc", "driver", True),
    ("openmm-cuda-12", "8.5.2", "nvrtc", "driver", True),
    ("warp-lang", "1.19.0", "nvrtc", "driver-if-loadable", False),
    ("warp-lang", "0.6.2", "nvrtc", "driver", True),
])
def test_which_compiler_a_package_uses_and_who_makes_its_sass(dist, version, compiler, sass_by, gets_ptx):
    usage = compiler_users.usage(dist, version)
    assert (usage.compiler, usage.sass_by, usage.driver_gets_ptx) == (compiler, sass_by, gets_ptx)
    assert usage.linked == ("static" if dist == "warp-lang" else "dynamic")


def test_packages_that_compile_nothing_at_run_time_have_no_row():
    assert compiler_users.usage("torch", "2.14.1") is None and compiler_users.usage("cupyx", "1.0") is None
    assert compiler_users.dlsym_needs("torch", "2.14.1") == ()


def test_dlsym_needs_imply_the_provider_release_the_functions_appear_in():
    """cuda-bindings finds nvJitLink by plain names (nvJitLink >= 12.3.52, the oldest exporting them);
    cuda-core falls back to the driver's linker without nvJitLinkVersion; LTO-IR output needs
    NVRTC's nvrtcGetLTOIR (12.0)."""
    (bindings,) = compiler_users.dlsym_needs("cuda-bindings", "12.9.4")
    assert (bindings.provider, bindings.min_release, bindings.missing) == ("nvjitlink", "12.3.52", "error")
    assert not any(compilers.exports("nvjitlink", f, "12.2.140") for f in bindings.functions)
    assert compiler_users.dlsym_needs("cuda-bindings", "11.8.7") == ()  # no nvJitLink for CUDA 11
    linker, program = compiler_users.dlsym_needs("cuda_core", "1.2.2")
    assert (linker.min_release, linker.missing, program.provider, program.min_release) == ("12.3.52", "fallback", "nvrtc", "12.0.76")
