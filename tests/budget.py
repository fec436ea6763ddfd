"""The per-case work budget of the fuzz and hostile-input suites: a case that takes more than
CASE_CPU_SECONDS of process CPU time fails like a traceback would. CPU time, not wall time, so a
busy machine does not fail a case; the one timing assert the tests allow (docs/security.md, "Work budgets")."""

from __future__ import annotations

import functools
import time
from typing import Any, Callable, TypeVar

CASE_CPU_SECONDS = 2.0

_F = TypeVar("_F", bound=Callable[..., Any])


def budgeted(test: _F) -> _F:
    """`test`, failing when one call of it (one case: put it under @given) runs past CASE_CPU_SECONDS."""

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> Any:
        start = time.process_time()
        result = test(*args, **kwargs)
        spent = time.process_time() - start
        assert spent <= CASE_CPU_SECONDS, f"the case took {spent:.2f} s of CPU, over its budget of {CASE_CPU_SECONDS} s"
        return result

    return run  # type: ignore[return-value]
