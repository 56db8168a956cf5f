"""``sdschat``: one entry point with subcommands.

Bad input gets one line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

__all__ = ["main", "CliError"]


class CliError(Exception):
    """A user-facing failure: printed as one line, exit status 2 (or ``code``)."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, no usage dump
        raise CliError(f"{self.prog}: {message} (see --help)")


def build_parser() -> argparse.ArgumentParser:
    from . import commands

    parser = _Parser(prog="sdschat", description="Terminal group chat with end-to-end reliability you can see.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, (configure, run, help_) in commands.registry().items():
        p = sub.add_parser(name, help=help_, description=help_)
        configure(p)
        p.set_defaults(_run=run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        if not getattr(args, "_run", None):
            parser.print_help()
            return 2
        result = args._run(args)
        if asyncio.iscoroutine(result):
            result = asyncio.run(result)
        return int(result or 0)
    except CliError as exc:
        print(f"sdschat: {exc}" if not str(exc).startswith("sdschat") else str(exc), file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130

