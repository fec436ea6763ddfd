"""The one line a command that stops prints on stderr: `cudaresolve: error: <why>`.

May import: errors, resolve/causes.py (NoSolution's records), output/lock_words.py.
"""

from __future__ import annotations

from cudaresolve.errors import CudaresolveError
from cudaresolve.output.lock_words import no_solution
from cudaresolve.resolve.causes import NoSolution


def error_line(exc: CudaresolveError) -> str:
    """What `main` prints for an error: NoSolution's causes in words, any other error's own message."""
    return f"cudaresolve: error: {no_solution(exc) if isinstance(exc, NoSolution) else exc}"
