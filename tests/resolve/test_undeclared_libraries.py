"""The CUDA libraries a chosen package loads without requiring them (data/components.toml
[undeclared_libraries]), judged on planned environments of plain values: which the target lacks, and
when this machine's own libraries count."""

from __future__ import annotations

import pytest
from packaging.utils import canonicalize_name
from packaging.version import Version

from cudaresolve.arch import ComputeCapability
from cudaresolve.binary.ldcache import MACHINE_FLAGS, CacheEntry, LdCache
from cudaresolve.binary.loader import LoaderEnv
from cudaresolve.commands.hosts import THIS_HOST, probed_here
from cudaresolve.commands.pip import concrete
from cudaresolve.env.distributions import Distribution
from cudaresolve.env.environment import ElfFile, Environment
from cudaresolve.env.interpreter import Target
from cudaresolve.host.facts import Driver, Gpu, HostFacts
from cudaresolve.knowledge import components
from cudaresolve.resolve.candidates import Candidate
from cudaresolve.resolve.lock import ExtraFor, Lock, LockedPackage, Reason, ReasonKind
from cudaresolve.resolve.undeclared import MissingLibraries, missing_libraries
from cudaresolve.versions import DriverRelease

SEVEN = ("cublas", "cudart", "cufft", "curand", "cusolver", "cusparse", "nvrtc")


def dist(name: str, version: str) -> Distribution:
    return Distribution(canonicalize_name(name), Version(version), (), "pip", f"/planned/{name}-{version}.dist-info", ())


def candidate(name: str, version: str, extras: frozenset[str] = frozenset()) -> Candidate:
    return Candidate(canonicalize_name(name), Version(version), None, extras=extras)


NO_CACHE = LdCache()


def plan(*distributions: Distribution, cache: LdCache = NO_CACHE, elf_files: tuple[ElfFile, ...] = ()) -> Environment:
    loader = LoaderEnv(machine="x86_64", cache=cache, default_dirs=(), real_path=lambda p: p, read_header=lambda path: None)
    return Environment(target=Target(site_packages=("/planned",)), distributions=distributions, elf_files=elf_files, loader=loader)


def system_cache(major: int) -> LdCache:
    """ld.so.cache of a machine with a CUDA `major` toolkit in /usr/local/cuda/lib64."""
    sonames = [row.sonames[0] for name in SEVEN for row in components.for_component(name, major)]
    return LdCache(tuple(CacheEntry(s, f"/usr/local/cuda/lib64/{s}", MACHINE_FLAGS["x86_64"]) for s in sonames), "new")


def test_the_table_names_cupy_14s_ctk_extra_and_components_of_both_majors():
    row = components.undeclared_libraries("cupy_cuda12x", "14.2.0")
    assert row is not None and row.extras == ("ctk",) and row.components == SEVEN
    assert components.undeclared_libraries("cupy-cuda13x", "14.0.0") == row
    assert components.undeclared_libraries("cupy-cuda12x", "13.6.0") is None  # no ctk extra before 14
    assert components.undeclared_libraries("torch", "2.8.0") is None
    assert all(components.for_component(name, major) for name in SEVEN for major in (12, 13))


def test_cupy_alone_lacks_all_seven_libraries_of_its_major():
    cupy12 = candidate("cupy-cuda12x", "14.2.0")
    assert missing_libraries(plan(dist("cupy-cuda12x", "14.2.0")), [cupy12], system=True) == (
        MissingLibraries(canonicalize_name("cupy-cuda12x"), ("ctk",), 12, SEVEN),
    )
    (found,) = missing_libraries(plan(dist("cupy-cuda13x", "14.2.0")), [candidate("cupy-cuda13x", "14.2.0")], system=True)
    assert found.cuda_major == 13


def test_wheels_in_the_plan_provide_them_by_component_and_major():
    wheels = [dist(row.dist, "12.9.0") for name in SEVEN for row in components.for_component(name, 12)]
    cupy12 = candidate("cupy-cuda12x", "14.2.0")
    assert missing_libraries(plan(dist("cupy-cuda12x", "14.2.0"), *wheels), [cupy12], system=False) == ()
    (partial,) = missing_libraries(plan(dist("cupy-cuda12x", "14.2.0"), *wheels[1:]), [cupy12], system=False)
    assert partial.components == ("cublas",)
    # CUDA 13's wheels are not CUDA 12's libraries
    wheels13 = [dist(row.dist, "13.0.0") for name in SEVEN for row in components.for_component(name, 13)]
    (other,) = missing_libraries(plan(dist("cupy-cuda12x", "14.2.0"), *wheels13), [cupy12], system=True)
    assert other.components == SEVEN


def test_a_file_where_cuda_pathfinder_looks_in_site_packages_provides_it():
    row = components.for_component("cudart", 12)[0]
    env = plan(dist("cupy-cuda12x", "14.2.0"), elf_files=(ElfFile(f"/planned/{row.lib_dir}/{row.sonames[0]}", (), None, None),))
    (found,) = missing_libraries(env, [candidate("cupy-cuda12x", "14.2.0")], system=False)
    assert found.components == tuple(name for name in SEVEN if name != "cudart")
    elsewhere = plan(dist("cupy-cuda12x", "14.2.0"), elf_files=(ElfFile(f"/opt/lib/{row.sonames[0]}", (), None, None),))
    assert missing_libraries(elsewhere, [candidate("cupy-cuda12x", "14.2.0")], system=False)[0].components == SEVEN


def test_this_machines_toolkit_counts_only_when_the_target_is_this_machine():
    cupy12 = candidate("cupy-cuda12x", "14.2.0")
    env = plan(dist("cupy-cuda12x", "14.2.0"), cache=system_cache(12))
    assert missing_libraries(env, [cupy12], system=True) == ()
    assert missing_libraries(env, [cupy12], system=False)[0].components == SEVEN
    # a toolkit of another major has none of the sonames CuPy's CUDA 12 wheel loads but those both
    # majors share (libcufft.so.11 ... differ; libcurand.so.10 is in both)
    other = plan(dist("cupy-cuda12x", "14.2.0"), cache=system_cache(13))
    shared = {name for name in SEVEN
              if components.for_component(name, 12)[0].sonames[0] == components.for_component(name, 13)[0].sonames[0]}
    assert missing_libraries(other, [cupy12], system=True)[0].components == tuple(n for n in SEVEN if n not in shared)
    assert "curand" in shared and "cublas" not in shared


def test_a_cupy_chosen_with_its_extra_or_a_release_without_one_is_left_alone():
    env = plan(dist("cupy-cuda12x", "14.2.0"))
    assert missing_libraries(env, [candidate("cupy-cuda12x", "14.2.0", frozenset({"ctk"}))], system=False) == ()
    assert missing_libraries(plan(dist("cupy-cuda12x", "13.6.0")), [candidate("cupy-cuda12x", "13.6.0")], system=False) == ()


def facts(driver_source: str, gpu_source: str) -> HostFacts:
    return HostFacts("Linux", "x86_64", Driver(DriverRelease.parse("550.144.03"), driver_source),
                     (Gpu(ComputeCapability.parse("8.6"), gpu_source),))


@pytest.mark.parametrize(
    "fleet, here",
    [
        (((THIS_HOST, facts("nvml", "nvml")),), True),
        (((THIS_HOST, facts("override:--driver", "override:--gpu")),), False),
        (((THIS_HOST, facts("nvml", "override:--gpu")),), False),
        ((("hosts/a.json", facts("nvml", "nvml")),), False),
        (((THIS_HOST, facts("nvml", "nvml")), ("hosts/a.json", facts("nvml", "nvml"))), False),
    ],
    ids=["probed", "flags", "gpu-flag", "host-file", "fleet"],
)
def test_only_a_probe_of_this_machine_makes_its_libraries_the_targets(fleet, here):
    assert probed_here(fleet) is here


def test_pip_wrapper_asks_for_the_added_extra_with_the_concrete_name():
    reason = Reason(ReasonKind.INDEX, asked_as=canonicalize_name("cupy"), added_extras=("ctk",), cuda_major=12,
                    extra_for=ExtraFor.LIBRARIES)
    package = LockedPackage(canonicalize_name("cupy-cuda12x"), Version("14.2.0"), None, (), None, reason)
    lock = Lock((package,), None, (), (), (), (), "cudaresolve")
    assert concrete("cupy>=14", lock) == "cupy-cuda12x[ctk]>=14"


def test_a_lock_written_with_one_added_extra_reads_as_added_extras():
    """Locks written before a package could get two extras ([cuda,cudnn]) say `added-extra = "cu12"`:
    read as one added extra, and written back in the new key."""
    from cudaresolve.lockfile.reasons import read_reason, reason_table

    old = {"kind": "index", "added-extra": "cu12", "cuda-major": 12, "extra-for": "cuda-major"}
    reason = read_reason(old)
    assert (reason.added_extras, reason.extra_for) == (("cu12",), ExtraFor.CUDA_MAJOR)
    assert reason_table(reason)["added-extras"] == ["cu12"] and "added-extra" not in reason_table(reason)
    assert "added-extras" not in reason_table(Reason(ReasonKind.INDEX))  # the default is not written
