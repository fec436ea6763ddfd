"""Why no set fits: `NoSolution` and the causes it carries, as records output/ puts into words.

May import: packaging, errors, the judge's Finding (checks/findings.py), resolve/reasons.py.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Optional, Union

from packaging.requirements import Requirement

from cudaresolve.checks.findings import Finding
from cudaresolve.checks.fixes import Fix
from cudaresolve.errors import CudaresolveError, Exit
from cudaresolve.resolve.reasons import CandidateRef, MajorRejection, Need, Origin, Rejection


@dataclass(frozen=True)
class CondaMismatch:
    """A conda package stands for the wheel a requirement names, at a release it does not admit."""

    package: str  # its label: "libnvjitlink 12.4.127 (conda)"
    specifier: str  # what the requirement admits: ">=12.8"
    fix: Optional[Fix]  # the conda command that would give a release it admits


@dataclass(frozen=True)
class Unsatisfiable:
    """No candidate fits one requirement: resolvelib's cause, with what was set aside for it."""

    requirement: Requirement
    origin: Origin
    rejections: tuple[Rejection, ...]  # candidates of the name its specifier admits, set aside, in the order met
    conda: Optional[CondaMismatch] = None
    constraints: tuple[Need, ...] = ()  # pip constraints on the name: they limit what fits too
    unlisted: bool = False  # no index lists a file of the name: no such project there
    nearest: Optional[str] = None  # when unlisted, the closest name the knowledge tables hold (cupyy -> cupy)


@dataclass(frozen=True)
class Conflict:
    """Requirements on one name that each admit a candidate but no candidate admits together:
    resolvelib's causes, each with its origin ("a 1.0 needs c==1.0, b 1.0 needs c==2.0")."""

    name: str
    needs: tuple[Need, ...]
    constraints: tuple[Need, ...] = ()  # pip constraints on the name: they limit what fits too


@dataclass(frozen=True)
class Refused:
    """The judge refused the planned environment for a finding no chosen wheel can be blamed for."""

    finding: Finding
    host: Optional[str]  # the host's label, when a fleet is judged


@dataclass(frozen=True)
class GaveUp:
    """The judge refused `sets` sets in a row; the last finding."""

    sets: int
    last: Finding


@dataclass(frozen=True)
class NoProvider:
    """A chosen wheel's file links a CUDA library that nothing of the planned set provides and no
    wheel of the set's CUDA major installs (resolve/undeclared.py)."""

    consumer: CandidateRef
    file: str  # the linking file, as a path inside the wheel
    soname: str
    cuda_major: Optional[int]  # the set's major
    other_majors: tuple[tuple[int, str], ...]  # (major, wheel) of the other majors that install it


class Bound(enum.Enum):
    """What ended a resolution that found no set: its rounds, or its time."""

    ROUNDS = "rounds"
    SECONDS = "seconds"


@dataclass(frozen=True)
class TooDeep:
    """resolvelib found no set within `limit` rounds or seconds; the conflict it backtracked on
    most (the causes of that backtrack), when it met one."""

    limit: int
    bound: Bound = Bound.ROUNDS
    conflict: tuple[Union[Unsatisfiable, Conflict], ...] = ()


Cause = Union[Unsatisfiable, Conflict, Refused, GaveUp, TooDeep, NoProvider]


@dataclass(frozen=True)
class HostMajors:
    """One host of a fleet: the CUDA majors it runs, and why not the others."""

    host: str
    runs: tuple[int, ...]
    refused: tuple[MajorRejection, ...]


@dataclass(frozen=True)
class FleetConflict:
    """Several hosts that share no CUDA major."""

    hosts: tuple[HostMajors, ...]


@dataclass(frozen=True)
class Attempt:
    """One resolution tried, for one CUDA major (None: no major chosen), and why it failed."""

    major: Optional[int]
    causes: tuple[Cause, ...]


class NoSolution(CudaresolveError):
    """No set of wheels fits the requirements and the hosts: exit 2, "problems found".

    `attempts` are the resolutions worth reporting: one when every major failed alike, else one per
    major; `conflict` says when the hosts share no major at all; `untried` the majors the hosts
    refused whose builds were all a requirement could take (`cuda-cccl[cu13]` on a GTX 1080)."""

    exit_code = Exit.PROBLEMS

    def __init__(self, attempts: tuple[Attempt, ...], conflict: Optional[FleetConflict] = None,
                 untried: tuple[MajorRejection, ...] = ()) -> None:
        super().__init__("no set of wheels fits the requirements and the hosts")
        self.attempts = attempts
        self.conflict = conflict
        self.untried = untried
