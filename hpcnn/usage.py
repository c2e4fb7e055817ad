"""Usage errors of every hpcnn command: one line naming the bad value, exit status 2, no traceback."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn

USAGE_ERROR = 2


def report_usage_error(prog: str, message: str) -> int:
    """Prints ``<prog>: error: <message>`` to stderr and returns status 2, for a ``main()`` that returns its status."""
    print(f"{prog}: error: {message}", file=sys.stderr)
    return USAGE_ERROR


def usage_error(prog: str, message: str) -> NoReturn:
    """Prints ``<prog>: error: <message>`` to stderr and exits with status 2."""
    sys.exit(report_usage_error(prog, message))


class Parser(argparse.ArgumentParser):
    """argparse whose errors are one line (no usage block), prefixed with the command's name."""

    def error(self, message) -> NoReturn:
        usage_error(self.prog.split()[0], message)
