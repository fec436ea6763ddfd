"""What a finding is about, as fields: the distribution (canonical name and version), the file or
sonames, or the whole environment, host or cache. The resolver takes its culprit from
`Subject.distribution`; output/findings.py words a subject ("torch 2.14.1", "nccl 2.21.5.1 (conda)").

May import: env/ (to look a distribution up), packaging; nothing that judges.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Optional

from packaging.utils import NormalizedName
from packaging.version import Version

from cudaresolve.env.environment import Environment


class Scope(str, Enum):
    """A subject that is no one distribution or file."""

    ENVIRONMENT = "environment"
    HOST = "host"
    CACHE = "cache"


@dataclass(frozen=True)
class Subject:
    """Exactly one of: a distribution (with its version when installed), a file (a path, or a soname),
    several sonames duplicated between the same owners, a scope; all empty: files no distribution owns."""

    distribution: Optional[NormalizedName] = None  # a Python distribution's canonical name, or a conda package's own name
    version: Optional[Version] = None  # as installed, local label kept
    conda_version: Optional[str] = None  # a conda package's version as conda writes it (not always PEP 440)
    conda: bool = False  # a conda package that is no Python distribution
    file: Optional[str] = None
    libraries: tuple[str, ...] = ()  # several sonames, with `owners`
    owners: tuple[Optional[str], ...] = ()  # None: files no distribution owns
    scope: Optional[Scope] = None

    def key(self) -> tuple[str, ...]:
        """For sorting findings: a distribution's name then version, else the file, else the rest."""
        version = (self.conda_version or "") if self.conda else (str(self.version) if self.version is not None else "")
        return (self.distribution or self.file or "", version, str(len(self.libraries)),
                *(owner or "" for owner in self.owners), self.scope.value if self.scope else "")


def subject(env: Environment, owner: Optional[str]) -> Subject:
    """A distribution of `env` by name (a conda package with conda's version), or the files no
    distribution owns (None); a name `env` does not hold stays a bare name."""
    dist = env.distribution(owner) if owner else None
    if dist is None:
        return Subject(distribution=NormalizedName(owner)) if owner else Subject()
    if dist.conda is not None and dist.kind == "conda":
        return Subject(distribution=NormalizedName(dist.conda.name), conda_version=dist.conda.version, conda=True)
    return Subject(distribution=NormalizedName(dist.name), version=dist.version)
