"""Host facts stated instead of probed, as one value: made once by the command line's edge
(commands/host_options.py, from --driver, --cuda, --gpu and the host variables) and applied by
host/probe.py over probed, loaded or node facts.

May import: host/facts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from cudaresolve.host.facts import Driver, Gpu


@dataclass(frozen=True)
class Overrides:
    """`driver` is set when any driver fact is stated; `gpus` when the GPUs are."""

    driver: Optional[Driver] = None
    gpus: Optional[tuple[Gpu, ...]] = None


NOTHING_STATED = Overrides()
