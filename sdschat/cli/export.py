"""``sdschat export``: a database's ordered log (or events) as JSON lines or Parquet."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .args import add_home_arg
from .errors import CliError
from .extras import require_pipeline

__all__ = ["export_configure", "export_run"]


def export_configure(p: argparse.ArgumentParser) -> None:
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--db", type=Path, help="a participant's database file")
    which.add_argument("--channel", help="a channel of your profile")
    add_home_arg(p)
    p.add_argument("--events", action="store_true",
                   help="export the events instead of the ordered log (the recent rows in full; older ones as the "
                        "first sent/received/delivered/acked times compaction keeps, with a negative seq)")
    p.add_argument("--format", choices=("jsonl", "parquet"), default="jsonl")
    p.add_argument("--out", type=Path, help="output file (default: standard output; required for parquet)")


async def export_run(args: argparse.Namespace) -> int:
    from sdschat.export import ExportError, export

    if args.channel is not None:
        from .profiles import load_profile

        profile = load_profile(args)
        entry = profile.channels.get(args.channel)
        if entry is None:
            raise CliError(f"not in channel {args.channel!r} (joined: {', '.join(profile.channels) or 'none'})")
        args.db = profile.db_path(entry)
    if not args.db.exists():
        raise CliError(f"no database at {args.db}")
    if args.format == "parquet":
        if args.out is None:
            raise CliError("--format parquet needs --out FILE")
        require_pipeline("sdschat export --format parquet", ("pyarrow",))
    try:
        n = await export(args.db, events=args.events, fmt=args.format, out=args.out)
    except ExportError as exc:
        raise CliError(str(exc)) from None
    if args.out is not None:
        print(f"wrote {n} {'events' if args.events else 'messages'} to {args.out}", file=sys.stderr)
    return 0
