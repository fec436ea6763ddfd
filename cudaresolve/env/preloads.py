"""Which CUDA libraries a package loads by absolute path before its extension modules, and from where.

CuPy (through cuda-pathfinder) and torch load their CUDA libraries themselves (`preloaders` in
data/components.toml); their extension modules carry no RPATH to find them. Where each library is
found depends on which files exist, so the builder of an `Environment` answers it once, through
`exists`: the disk for an installed environment, the planned file list for a lock.
"""

from __future__ import annotations

import os
from typing import Callable, Iterable, Optional

from cudaresolve.knowledge import components


def preloaded_libraries(
    wanted: Iterable[str],
    preloader: components.Preloader,
    site_packages: Iterable[str],
    conda_prefix: Optional[str],
    exists: Callable[[str], bool],
) -> dict[str, str]:
    """soname -> path for the CUDA libraries `preloader` would load by absolute path, in its search order.

    The "system" step is the OS loader's own search, so it is left to the loader emulation.
    """
    found: dict[str, str] = {}
    for soname in sorted(set(wanted)):
        rows = components.for_soname(soname)
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
