"""``python -m sdschat.pipeline COMMAND ...``: the pipeline commands without the main CLI.

Same behaviour as ``sdschat simulate|report|sweep`` once registered there:
bad input is one line on stderr and exit status 2.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    from sdschat.cli import CliError, _Parser

    from .commands import COMMANDS

    parser = _Parser(prog="sdschat", description="sdschat data pipeline: simulate, report, sweep")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, (configure, run, help_) in COMMANDS.items():
        p = sub.add_parser(name, help=help_, description=help_)
        configure(p)
        p.set_defaults(_run=run)
    try:
        args = parser.parse_args(argv)
        if not getattr(args, "_run", None):
            parser.print_help()
            return 2
        return int(args._run(args) or 0)
    except CliError as exc:
        print(f"sdschat: {exc}" if not str(exc).startswith("sdschat") else str(exc), file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
