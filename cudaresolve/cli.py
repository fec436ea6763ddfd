"""The `cudaresolve` console script: parse the command line, run the command's module of commands/,
and report what stops it as one line on stderr with the exit code of errors.Exit (docs/cli.md).

May import: errors, commands/, output/errors (only to word an error).
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from typing import ContextManager, Optional, Sequence, cast

from cudaresolve.commands.parser import build_parser
from cudaresolve.errors import CudaresolveError, Exit


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run one command and return its exit status; the console script and tests both use the return."""
    try:
        words = list(sys.argv[1:] if argv is None else argv)
        if words[:1] == ["pip"]:
            from cudaresolve.commands import pip

            return pip.main(words[1:])
        parser = build_parser()
        with _json_errors(words):
            args = parser.parse_args(words)
        if args.command is None:  # bare `cudaresolve`: the help, as pip gives it
            parser.print_help()
            return Exit.OK
        code: int = importlib.import_module(f"cudaresolve.commands.{args.command}").run(args)
        return code
    except CudaresolveError as exc:
        from cudaresolve.output.errors import error_line

        print(error_line(exc), file=sys.stderr)
        return exc.exit_code
    except SystemExit as exc:
        # Only --help and --version get here (usage errors are UsageError): argparse exits 0 for them.
        return cast(int, exc.code)  # argparse's exit() passes an int status
    except KeyboardInterrupt:
        print("cudaresolve: interrupted", file=sys.stderr)
        return Exit.INTERRUPTED
    except BrokenPipeError:
        # `cudaresolve ... | head`: the reader left; nothing to report.
        sys.stderr.close()
        return Exit.OK


def _json_errors(words: list[str]) -> ContextManager[None]:
    """A command line that does not parse still gives the one JSON document --json promises, for
    the commands that promise it (lock, lock --check, install --dry-run, why)."""
    asked = "--json" in words and (words[:1] in (["lock"], ["why"]) or words[:1] == ["install"] and "--dry-run" in words)
    if not asked:
        return contextlib.nullcontext()
    from cudaresolve.commands.lock import json_errors

    return json_errors(True)
