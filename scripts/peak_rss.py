"""Run a command and write its exit code, peak resident memory and CPU seconds as JSON to a report file.

Why a launcher: on Linux a child's ru_maxrss (from wait4) starts at its parent's resident size at fork,
because exec keeps the old memory's high-water mark. A child forked straight from a 400 MB pytest process
reports at least 400 MB, whatever it does itself. Forked from this small process instead, the figure is
the command's own peak (this launcher's floor is ~10 MB).

    python scripts/peak_rss.py --report FILE [--kill-after SECONDS] [--address-space-limit BYTES] -- command...

The command inherits this process's stdin, stdout, stderr and environment.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import threading


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", required=True, help="where to write {code, peak_kib, user_s, system_s}")
    parser.add_argument("--kill-after", type=float, default=0, help="kill the command after this many seconds")
    parser.add_argument("--address-space-limit", type=int, default=0, help="RLIMIT_AS for the command, in bytes")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command given")

    def cap() -> None:  # a regression must fail its test, not take the machine's memory
        if args.address_space_limit:
            resource.setrlimit(resource.RLIMIT_AS, (args.address_space_limit, args.address_space_limit))

    child = subprocess.Popen(command, preexec_fn=cap)
    timer = threading.Timer(args.kill_after, child.kill) if args.kill_after else None
    if timer:
        timer.start()
    _, status, usage = os.wait4(child.pid, 0)
    if timer:
        timer.cancel()
    with open(args.report, "w", encoding="utf-8") as report:  # a killed command's code is -9
        json.dump({"code": os.waitstatus_to_exitcode(status), "peak_kib": usage.ru_maxrss,  # with the workers it waited for
                   "user_s": usage.ru_utime, "system_s": usage.ru_stime}, report)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
