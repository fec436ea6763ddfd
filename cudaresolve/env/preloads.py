"""Which CUDA libraries a package loads by absolute path before its extension modules, and from where.

CuPy (through cuda-pathfinder) and torch load their CUDA libraries themselves (`preloaders` in
data/components.toml); their extension modules carry no RPATH to find them. Where each library is
found depends on which files exist, so the builder of an `Environment` answers it once, through
`exists`: the disk for an installed environment, the planned file list for a lock.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass
from typing import Callable, Iterable, Mapping, Optional

from packaging.version import Version

from cudaresolve.bounded import loads_json, read_bounded
from cudaresolve.knowledge import components

WHEEL_LIST_LIMIT = 64 * 1024  # CuPy 13.6.0's _wheel.json is 517 bytes


@dataclass(frozen=True)
class WheelList:
    """A package's own list of the libraries it preloads from wheels (CuPy 13's cupy/.data/_wheel.json)."""

    cuda_major: int  # the wheels it looks for are those of this CUDA major ("12.x": nvidia-nccl-cu12)
    oldest: Mapping[str, Version]  # component -> the oldest wheel release it takes (min_pypi_version)


def read_wheel_list(path: str) -> Optional[WheelList]:
    """The list at `path`; None when there is none, or it is not one (then nothing is preloaded from it).

    CuPy's format: {"cuda": "12.x", "<library>": {"min_pypi_version": "2.16.5", ...}, ...}.
    """
    try:
        data = loads_json(read_bounded(path, WHEEL_LIST_LIMIT, regular=True).decode("utf-8"))
    except (OSError, ValueError):  # absent, not a regular file, too large, not UTF-8, not JSON, nested too deep
        return None
    if not isinstance(data, dict) or not isinstance(data.get("cuda"), str):
        return None
    major = data["cuda"].split(".", 1)[0]
    if not (major.isascii() and major.isdigit() and len(major) <= 3):
        return None
    oldest = {}
    for library, entry in data.items():
        if isinstance(entry, dict) and isinstance(entry.get("min_pypi_version"), str):
            try:
                oldest[library] = Version(entry["min_pypi_version"])
            except ValueError:  # InvalidVersion, or a number past int()'s 4,300 digits (a bare ValueError)
                continue
    return WheelList(int(major), oldest)


def takes(listed: WheelList, row: components.Component, installed: Mapping[str, Version]) -> bool:
    """Whether the package loads `row`'s wheel copy: its component is listed, the wheel is of the
    list's CUDA major and installed at the listed major, no older than listed (CuPy 13's
    _find_compatible_wheel)."""
    oldest = listed.oldest.get(row.name)
    version = installed.get(row.dist)
    if oldest is None or version is None or row.cuda_major != listed.cuda_major:
        return False
    return version.release[:1] == oldest.release[:1] and version.release[:3] >= oldest.release[:3]


def preloaded_libraries(
    wanted: Iterable[str],
    preloader: components.Preloader,
    site_packages: Iterable[str],
    conda_prefix: Optional[str],
    exists: Callable[[str], bool],
    listed: Optional[tuple[WheelList, Mapping[str, Version]]] = None,
) -> dict[str, str]:
    """soname -> path for the CUDA libraries `preloader` would load by absolute path, in its search order.

    The "system" step is the OS loader's own search, so it is left to the loader emulation. A
    preloader with a `wheel_list` takes only the wheels `listed` (the list read, the installed
    versions) says it takes; without the list, none.
    """
    found: dict[str, str] = {}
    for soname in sorted(set(wanted)):
        rows = components.for_soname(soname)
        if preloader.wheel_list is not None:
            rows = tuple(row for row in rows if listed is not None and row.name in preloader.libraries
                         and takes(listed[0], row, listed[1]))
        if not rows:
            continue
        for step in preloader.search:
            path = None
            if step == "site-packages":
                path = next(
                    (
                        os.path.join(sp, row.lib_dir, soname)
                        for sp in site_packages
                        for row in rows
                        if exists(os.path.join(sp, row.lib_dir, soname))
                    ),
                    None,
                )
            elif step == "conda-prefix" and conda_prefix:
                path = next(
                    (
                        os.path.join(conda_prefix, directory, soname)
                        for row in rows
                        for directory in components.conda_prefix_dirs(row.name)
                        if exists(os.path.join(conda_prefix, directory, soname))
                    ),
                    None,
                )
            if path:
                found[soname] = path
                break
    return found


def runtime_major(needed: Iterable[str]) -> Optional[int]:
    """The CUDA major of the runtime these files link (libcudart.so.13: 13); None when they link none
    or several."""
    majors = {row.cuda_major for soname in needed for row in components.for_soname(soname) if row.name == "cudart"}
    return next(iter(majors)) if len(majors) == 1 else None


def sys_path_libraries(
    preload: components.SysPathPreload,
    cuda_major: int,
    entries: Iterable[str],
    files_in: Callable[[str], Iterable[str]],
) -> dict[str, str]:
    """file name -> path of each library `preload` loads, in its load order: for each library, the
    first of `entries` (sys.path, in order) with a match in one of the preload's directories, and there
    the first directory in the preload's order (torch 2.14's _get_cuda_dep_paths): so another CUDA
    major's wheel in nvidia/<folder>/lib is taken before the build's own nvidia/cu<major>/lib.
    `files_in` lists a directory's file names. glob's order within one directory is the file
    system's; the names are taken sorted."""
    found: dict[str, str] = {}
    entries = tuple(entries)
    for library in preload.libraries:
        for entry in entries:
            path = next(
                (
                    os.path.join(entry, directory, name)
                    for template in preload.dirs
                    for directory in (template.format(folder=library.folder, major=cuda_major),)
                    for name in sorted(files_in(os.path.join(entry, directory)))
                    if fnmatch.fnmatchcase(name, library.file)
                ),
                None,
            )
            if path is not None:
                found.setdefault(os.path.basename(path), path)
                break
    return found
