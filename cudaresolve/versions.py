"""Value types for the two version kinds cudaresolve compares: CUDA versions and driver releases.

Why not packaging's Version: a CUDA version may be the major alone ("12", what a wheel name tells),
and a driver release has its own shape (550.144.03, never 1.0rc1); each is parsed and rejected in one
place instead of by scattered regular expressions.

May import: errors and packaging only: every room reads versions through these.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Optional

from packaging.version import Version

from cudaresolve.errors import UsageError

_CUDA_RE = re.compile(r"^(\d{1,3})(?:\.(\d{1,3})(?:\.\d+)*)?$", re.ASCII)  # ASCII: packaging reads only 0-9
_DRIVER_RE = re.compile(r"^\d{2,4}\.\d{1,3}(?:\.\d{1,3})?$", re.ASCII)
_BRANCH_RE = re.compile(r"^\d{2,4}$", re.ASCII)


@functools.total_ordering
@dataclass(frozen=True)
class CudaVersion:
    """A CUDA version: "13.0", or the major alone ("12") when only that is known.

    An update release ("12.8.1") stands for its minor: cudaresolve judges CUDA at minor granularity.
    A major alone sorts before every minor of that major.
    """

    major: int
    minor: Optional[int] = None

    @classmethod
    def parse(cls, text: str) -> "CudaVersion":
        match = _CUDA_RE.match(str(text).strip())
        if not match:
            raise UsageError(f"not a CUDA version: {text!r} (expected e.g. 12.8, 12.8.1 or 12)")
        minor = match.group(2)
        return cls(int(match.group(1)), None if minor is None else int(minor))

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, CudaVersion):
            return NotImplemented
        return self._key() < other._key()

    def _key(self) -> tuple[int, int]:
        return (self.major, -1 if self.minor is None else self.minor)

    def __str__(self) -> str:
        return str(self.major) if self.minor is None else f"{self.major}.{self.minor}"

    def as_release(self) -> Version:
        """As a PEP 440 version, to compare with a wheel numbered after CUDA (nvJitLink 12.4.127 >= 12.4)."""
        return Version(str(self))


@dataclass(frozen=True, order=True)
class DriverRelease:
    """An NVIDIA driver release: "550.144.03", WSL/Windows "573.24", Jetson "540.4.0".

    Ordered numerically (570.26 < 570.124.06); `str()` gives the text back as written.
    """

    numbers: tuple[int, ...]
    text: str = field(compare=False)

    @classmethod
    def parse(cls, text: str, branch_alone: bool = False) -> "DriverRelease":
        """Read a release; `branch_alone` also takes a branch with no release ("610"), which a
        table may know for a toolkit whose exact GA driver is not published. It sorts before
        every release of that branch."""
        stripped = str(text).strip()
        if not (_DRIVER_RE.match(stripped) or branch_alone and _BRANCH_RE.match(stripped)):
            raise UsageError(f"not a driver release: {text!r} (expected e.g. 550.144.03)")
        numbers = tuple(int(part) for part in stripped.split("."))
        while len(numbers) > 1 and numbers[-1] == 0:
            numbers = numbers[:-1]  # 570.26.00 is 570.26
        return cls(numbers, stripped)

    @property
    def branch(self) -> int:
        return self.numbers[0]

    def as_version(self) -> Version:
        """As a PEP 440 version, for a specifier in a table ("driver = '>=580'")."""
        return Version(".".join(map(str, self.numbers)))

    def __str__(self) -> str:
        return self.text
