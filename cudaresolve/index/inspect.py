"""`cudaresolve inspect` of what is not on disk: a wheel URL, or `NAME==VERSION` from the configured
indexes (the wheel pip would take for the target), through the same facts path as the resolver."""

from __future__ import annotations

import urllib.parse

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from cudaresolve.binary.wheel import WheelError
from cudaresolve.env.inspect import Inspected, wheel_items
from cudaresolve.errors import CudaresolveError
from cudaresolve.index.access import PackageIndex
from cudaresolve.index.pages import ProjectFile, file_from_url
from cudaresolve.knowledge import torch

_URL_SCHEMES = ("http://", "https://", "file://")


def inspect_index_name(index: PackageIndex, name: str, *, deep: bool = False) -> list[Inspected]:
    """The libraries of the wheel `name` denotes; an item with the error when it cannot be had."""
    try:
        file = _wheel_file(index, name)
        return wheel_items(index.binary_facts(file, deep=deep))
    except WheelError as exc:
        return [Inspected(name, None, exc.reason)]
    except CudaresolveError as exc:
        return [Inspected(name, None, str(exc))]


def _wheel_file(index: PackageIndex, name: str) -> ProjectFile:
    if name.startswith(_URL_SCHEMES):
        try:
            path = urllib.parse.urlsplit(name).path
        except ValueError as exc:
            raise CudaresolveError(f"not a valid URL ({exc})") from None
        if not path.endswith(".whl"):
            raise CudaresolveError("a URL to inspect must name a .whl file")
        return file_from_url(name)
    try:
        requirement = Requirement(name)
    except InvalidRequirement as exc:
        raise CudaresolveError(f"not NAME==VERSION: {exc}") from None
    pins = list(requirement.specifier)
    if len(pins) != 1 or pins[0].operator != "==" or pins[0].version.endswith(".*"):
        raise CudaresolveError("give one exact version, e.g. nvidia-cusparse-cu12==12.3.1.170")
    version = Version(pins[0].version)
    variant = version.local if canonicalize_name(requirement.name) in torch.family() else None
    file = index.best_wheel(requirement.name, version, variant)
    if file is None:
        where = ", ".join(index.config.indexes_for(requirement.name, variant) + index.config.find_links) or "no index"
        raise CudaresolveError(f"no wheel of {requirement.name} {version} fits this interpreter on {where}")
    return file
