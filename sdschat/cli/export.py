"""``sdschat export``: a database's ordered log (or events) as JSON lines or Parquet.

The database is ``--db FILE``, ``--channel NAME`` of the profile, or, with neither, the profile's only
channel (with several: one line naming them)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .args import add_home_arg
from .errors import CliError
from .extras import require_pipeline

__all__ = ["export_configure", "export_run"]


def export_configure(p: argparse.ArgumentParser) -> None:
    which = p.add_mutually_exclusive_group()
    which.add_argument("--db", type=Path, help="a participant's database file")
    which.add_argument("--channel", help="a channel of your profile (default: its only one, if it has one)")
    add_home_arg(p)
    p.add_argument(
        "--events",
        action="store_true",
        help="export the events instead of the ordered log (the recent rows in full; older ones as the "
        "first sent/received/delivered/acked times compaction keeps, with a negative seq)",
    )
    p.add_argument("--format", choices=("jsonl", "parquet"), default="jsonl")
    p.add_argument("--out", type=Path, help="output file (default: standard output; required for parquet)")


async def export_run(args: argparse.Namespace) -> int:
    from sdschat.export import export

    if args.db is None:
        args.db = _channel_db(args)
    if not args.db.exists():
        raise CliError(f"no database at {args.db}")
    if args.format == "parquet":
        if args.out is None:
            raise CliError("--format parquet needs --out FILE")
        require_pipeline("sdschat export --format parquet", ("pyarrow",))
    n = await export(args.db, events=args.events, fmt=args.format, out=args.out)
    if args.out is not None:
        print(f"wrote {n} {'events' if args.events else 'messages'} to {args.out}", file=sys.stderr)
    return 0


def _channel_db(args: argparse.Namespace) -> Path:
    """The database of ``--channel``, or of the profile's only channel when none is named."""
    from .profiles import load_profile

    profile = load_profile(args)
    if args.channel is not None:
        entry = profile.channel(args.channel)
    elif len(profile.channels) == 1:
        entry = next(iter(profile.channels.values()))
    elif not profile.channels:
        raise CliError(
            "no channel joined yet: nothing to export (create one with `sdschat new NAME`, or "
            "`sdschat join TOKEN`; or give --db FILE)"
        )
    else:
        names = ", ".join(profile.channels)
        raise CliError(f"which channel? --channel NAME (joined: {names}), or --db FILE")
    if not profile.db_path(entry).exists():
        raise CliError(f"#{entry.name} has nothing stored yet (no database at {profile.db_path(entry)})")
    return profile.db_path(entry)
