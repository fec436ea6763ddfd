"""Errors that reach the user as one clear line instead of a traceback."""


class CudaresolveError(Exception):
    """Base class: the CLI prints `cudaresolve: error: <message>` and exits with `exit_code`."""

    exit_code = 2


class UsageError(CudaresolveError):
    """Bad input from the user: a flag value, a host file, a path."""


class DataError(CudaresolveError):
    """A knowledge table in data/ is missing or malformed (a packaging bug, not a user error)."""
