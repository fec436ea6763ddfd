"""owned-twice: files several distributions install with different contents (env/ownership.py).

The last wheel installed wins the file, and uninstalling either owner deletes it, so reinstalling
the one that has the file already changes nothing: what converges is removing the wrong owner
first, then reinstalling the right one over whatever that left (`--force-reinstall --no-deps`,
so nothing else moves). One finding per set of owners: NCCL's pair shares one library, a
toolkit's pair may share hundreds of files, and either is one decision.

Which owner is right, first rule that names exactly one:
1. "required": the one the other installed distributions require (torch requires nvidia-nccl-cu12);
2. "cuda-major": the one of the CUDA major of the environment's CUDA runtime wheel;
3. "on-disk": the one whose bytes are there now, so what runs today keeps running.
Where none names one, each choice is offered, the first by name. Where different installed
distributions require different owners (jax[cuda12]'s nvidia-nccl-cu12 beside torch cu130's
nvidia-nccl-cu13), removing any owner breaks one of them: no fix is offered, as none of this kind
converges (the 2026-11-26 survey applied one and left JAX on CUDA 13 libraries with its own wheels
gone); the consumers must agree on one CUDA major first.

An error when a shared file is one a process loads (a shared library or a Python module, by its
name, but not a namespace package's `__init__.py`: any owner's version makes the same namespace,
nor a stray top-level module no import names, beside the owners' own packages); a warning for other files (openmm's SWIG header `OpenMMSwigHeaders.i`): nothing loads them,
and uninstalling an owner to settle one would remove the package itself.

May import: checks/ (findings), env/, knowledge/components; the findings are values, output/ words them.
"""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Optional

from packaging.requirements import Requirement
from packaging.utils import NormalizedName

from cudaresolve.checks import evidence as e
from cudaresolve.checks import fixes as f
from cudaresolve.checks.findings import Check, Finding, Severity
from cudaresolve.checks.problems import Installed, OwnedTwice
from cudaresolve.checks.subjects import Subject
from cudaresolve.env.environment import Environment
from cudaresolve.env.imports import module_index
from cudaresolve.env.ownership import SharedFile
from cudaresolve.knowledge import components

SHOWN_FILES = 3  # files a finding shows the hashes of; the others are counted


def check_owned_twice(env: Environment) -> list[Finding]:
    groups: dict[tuple[str, ...], list[SharedFile]] = defaultdict(list)
    for shared in env.shared_files:
        groups[shared.owners].append(shared)
    return [_finding(env, owners, files) for owners, files in sorted(groups.items())]


def shared_file(env: Environment, path: str) -> Optional[SharedFile]:
    """The shared file at `path`, for findings whose cause it is (a symbol skew in its library)."""
    return next((shared for shared in env.shared_files if shared.path == path), None)


def _finding(env: Environment, owners: tuple[str, ...], files: list[SharedFile]) -> Finding:
    on_disk = {shared.on_disk for shared in files}
    winner = on_disk.pop() if len(on_disk) == 1 else None
    claims = {claim.distribution: claim for claim in files[0].claims}
    evidence: list[e.Evidence] = [
        e.FileBytes(shared.path, tuple((claim.distribution, claim.digest) for claim in shared.claims),
                    shared.on_disk, shared.unjudged)
        for shared in files[:SHOWN_FILES]
    ]
    if len(files) > SHOWN_FILES:
        evidence.append(e.More(len(files) - SHOWN_FILES))
    subject = Subject(file=files[0].path) if len(files) == 1 else Subject(owners=owners)
    loaded = any(_loaded(env, shared) for shared in files)
    return Finding(
        Check.OWNED_TWICE, Severity.ERROR if loaded else Severity.WARNING, subject,
        OwnedTwice(tuple(Installed(name, claims[name].version) for name in owners),
                   tuple(shared.path for shared in files), winner),
        tuple(evidence),
        owner_fix(env, owners, winner) if loaded else None,
    )


def _loaded(env: Environment, shared: SharedFile) -> bool:
    """Whether a process may load the file: a shared library, or a Python module that is neither a
    namespace's `__init__.py` nor a stray module no import names."""
    name = os.path.basename(shared.path)
    if name.endswith(".so") or ".so." in name:
        return True
    return name.endswith(".py") and not shared.namespace and not _stray(env, shared)


def _stray(env: Environment, shared: SharedFile) -> bool:
    """A module at the top of site-packages (`build_backend.py`, a build helper two wheels install)
    that no distribution's import names and that each owner ships beside a package of its own: only a
    program that imports it by that name loads it, and none here does."""
    directory, name = os.path.split(shared.path)
    sites = [site.rstrip("/") for site in env.target.site_packages]
    if directory.rstrip("/") not in sites:
        return False
    module = name[: -len(".py")]
    if any(module in model.imports for model in env.imports.values()):
        return False
    for owner in shared.owners:
        dist = env.distribution(owner)
        tops = {found.split(".", 1)[0] for found in module_index(dist.files, sites)} if dist is not None else set()
        if not tops - {module}:
            return False  # the module is what the owner is
    return True


def owner_fix(env: Environment, owners: tuple[str, ...], on_disk: Optional[str]) -> Optional[f.Fix]:
    """Uninstall the other owners, then reinstall the right one's release over what they leave;
    None when other installed distributions require different owners."""
    if len(_required(env, owners)) > 1:
        return None
    why = _right_owner(env, owners, on_disk)
    if why is not None:
        return f.Explained(_keep(env, owners, why.distribution), why)
    return f.Alternatives(tuple(_keep(env, owners, name) for name in owners))


def _keep(env: Environment, owners: tuple[str, ...], right: str) -> f.Fix:
    dist = env.distribution(right)
    assert dist is not None  # an owner is an installed (or planned) distribution
    return f.Steps((
        f.PipUninstall(tuple(NormalizedName(name) for name in owners if name != right)),
        f.PipInstall((Requirement(f"{dist.name}=={dist.version}"),), options=("--force-reinstall", "--no-deps")),
    ))


def _required(env: Environment, owners: tuple[str, ...]) -> dict[str, set[str]]:
    """Each owner another installed distribution requires, with the distributions that require it."""
    required: dict[str, set[str]] = defaultdict(set)
    for dist in env.distributions:
        if dist.name not in owners:
            for name in env.requires_names(dist) & set(owners):
                required[name].add(dist.name)
    return required


def _right_owner(env: Environment, owners: tuple[str, ...], on_disk: Optional[str]) -> Optional[f.RightOwner]:
    required = _required(env, owners)
    if len(required) == 1:
        name, by = required.popitem()
        return f.RightOwner(name, "required", tuple(sorted(by)))
    if not required:  # the environment's runtime major decides only where nothing requires an owner
        runtime = {major for dist in env.distributions if dist.name not in owners
                   for major in _majors(env, dist.name, "cudart")}
        if len(runtime) == 1:
            major = runtime.pop()
            fitting = [name for name in owners if _majors(env, name) == {major}]
            if len(fitting) == 1:
                return f.RightOwner(fitting[0], "cuda-major", major=major)
    if on_disk is not None:
        return f.RightOwner(on_disk, "on-disk")
    return None


def _majors(env: Environment, name: str, component: Optional[str] = None) -> set[int]:
    """The CUDA majors the knowledge table gives the installed `name` (of `component`, when given)."""
    dist = env.distribution(name)
    if dist is None:
        return set()
    return {row.cuda_major for row in components.for_dist(name, str(dist.version))
            if component is None or row.name == component}
