"""Entry point for ``spark-submit``: ``report`` and ``sweep`` on the session spark-submit provides.

Usage (see :mod:`sdschat.pipeline.report` for the details)::

    spark-submit --master spark://HOST:7077 \\
        "$(python -c 'import sdschat.cli.submit as m; print(m.__file__)')" \\
        report RUN_DIR [DB ...] --out REPORT_DIR

    spark-submit --master spark://HOST:7077 --conf spark.pyspark.python=/path/to/venv/bin/python \\
        "$(python -c 'import sdschat.cli.submit as m; print(m.__file__)')" \\
        sweep --grid GRID.toml --out SWEEP_DIR

The arguments are those of ``sdschat report`` / ``sdschat sweep``; the Spark
options (``--master``, ``--driver-memory``, ``--spark-conf``) are ignored here:
give them to spark-submit.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

if __name__ == "__main__" and sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    # run as a file, Python puts this folder first on the path, where our modules would shadow the standard
    # library's for everything imported after (pyspark imports cProfile, which imports profile)
    del sys.path[0]

from sdschat.cli.args import Parser  # absolute: spark-submit runs this file as a script
from sdschat.cli.errors import CliError, one_line, user_errors
from sdschat.cli.pipeline import report_configure, sweep_configure

__all__ = ["main"]


def _run(args: argparse.Namespace, spark: object) -> Path:
    """Run the command on ``spark``; the report it wrote."""
    if args.command == "report":
        from sdschat.pipeline.report import run_report

        return run_report(args.inputs, args.out, spark=spark, compare=args.compare).markdown
    from sdschat.pipeline.sweep import load_grid, run_sweep

    written: Path = run_sweep(load_grid(args.grid), args.out, keep_events=not args.no_events, spark=spark)["report"]
    return written


def main(argv: Sequence[str] | None = None) -> int:
    parser = Parser(prog="sdschat-submit", description="sdschat report/sweep under spark-submit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    report_configure(sub.add_parser("report"))
    sweep_configure(sub.add_parser("sweep"))
    try:
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return 2
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.appName(f"sdschat-{args.command}").getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
        try:
            written = _run(args, spark)
        finally:
            spark.stop()
        print(f"wrote {written}", file=sys.stderr)
        return 0
    except CliError as exc:
        print(f"sdschat: {exc}", file=sys.stderr)
        return exc.code
    except Exception as exc:  # a report's or a grid's own error (sdschat.cli.errors): one line, as `sdschat` says it
        if not isinstance(exc, user_errors()):
            raise  # a bug: spark-submit shows its traceback
        print(f"sdschat: {one_line(exc)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
