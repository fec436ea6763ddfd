"""Errors that reach the user as one clear line instead of a traceback, and the exit codes every
command returns (their meaning per command: docs/cli.md).

May import: nothing of cudaresolve.
"""

import enum


class Exit(enum.IntEnum):
    """The exit-code contract of every command (docs/cli.md)."""

    OK = 0
    WARNINGS = 1  # doctor --strict: warnings but no errors
    PROBLEMS = 2  # problems found, reported on stdout (or the refusal on stderr)
    COULD_NOT_RUN = 3  # bad input, an index that cannot be reached, an output that cannot be written
    INTERRUPTED = 130


class CudaresolveError(Exception):
    """Base class: the CLI prints `cudaresolve: error: <message>` and exits `exit_code`.

    3 is "could not run" in the exit-code contract (docs/cli.md): whatever stops a command before it
    has an answer, so a caller never mistakes it for 2, "problems found".
    """

    exit_code: int = Exit.COULD_NOT_RUN


class UsageError(CudaresolveError):
    """Bad input from the user: a flag value, a host file, a path, a command line argparse refuses."""


class DataError(CudaresolveError):
    """A knowledge table in data/ is missing or malformed (a packaging bug, not a user error)."""
