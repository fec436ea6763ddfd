"""The error for an environment cudaresolve cannot look into."""

from __future__ import annotations

from cudaresolve.errors import CudaresolveError


class EnvError(CudaresolveError):
    """The target interpreter or site-packages cannot be read: the command could not run."""
