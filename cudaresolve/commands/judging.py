"""How a doctor run judges its fixes, as one value the cached path can hold without importing the
judge: commands/doctor.py makes it, result_cache.py and diagnosing.py use it.

May import: index/access (for its type only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, ContextManager

if TYPE_CHECKING:
    from cudaresolve.index.access import PackageIndex


@dataclass(frozen=True)
class Judging:
    """`indexes` opens the configured indexes, called only when a fix needs them (a healthy
    environment opens none); `offline`: the cached pages only."""

    indexes: Callable[[], ContextManager["PackageIndex"]]
    offline: bool = False
