"""Errors that reach the user as one clear line instead of a traceback."""


class CudaresolveError(Exception):
    """Base class: the CLI prints `cudaresolve: error: <message>` and exits `exit_code`.

    3 is "could not run" in the exit-code contract (docs/cli.md): whatever stops a command before it
    has an answer, so a caller never mistakes it for 2, "problems found".
    """

    exit_code = 3


class UsageError(CudaresolveError):
    """Bad input from the user: a flag value, a host file, a path, a command line argparse refuses."""


class DataError(CudaresolveError):
    """A knowledge table in data/ is missing or malformed (a packaging bug, not a user error)."""
