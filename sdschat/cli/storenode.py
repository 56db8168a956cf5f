"""``sdschat store``: a key-less store node serving a broker until stopped."""

from __future__ import annotations

import argparse
from pathlib import Path

from .args import non_negative
from .errors import CliError
from .wiring import data_dir, stop_event

__all__ = ["storenode_configure", "storenode_run"]


def storenode_configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--broker", default="mqtt://127.0.0.1:1883", help="mqtt://host:port of the broker to serve")
    p.add_argument("--db", type=Path, help="database file (default: store-node.db under the user data directory)")
    p.add_argument(
        "--retention",
        type=non_negative,
        default=30.0,
        metavar="DAYS",
        help="delete envelopes older than this many days (default 30; 0 keeps them forever)",
    )
    p.add_argument(
        "--max-size",
        type=non_negative,
        default=0.0,
        metavar="MB",
        help="keep at most this many MB of envelopes, deleting the oldest (default 0: no cap)",
    )
    p.add_argument("--quiet", action="store_true")


async def storenode_run(args: argparse.Namespace) -> int:
    from sdschat.storenode import StoreNode
    from sdschat.transport import TransportError

    db = args.db or data_dir() / "store-node.db"
    max_bytes = int(args.max_size * 1024 * 1024) or None
    try:
        node = await StoreNode.start(args.broker, db, retention_days=args.retention or None, max_bytes=max_bytes)
    except TransportError:
        raise  # the broker's failure says it all
    except (OSError, Exception) as exc:  # sqlite3 errors, permissions
        raise CliError(f"cannot start the store node on {db}: {exc}") from None
    stop = stop_event()
    if not args.quiet:
        stored = node.db.count if node.db is not None else 0
        print(f"sdschat store node on {args.broker}, database {db} ({stored} envelopes); Ctrl-C to stop", flush=True)
    try:
        await stop.wait()
    finally:
        await node.stop()
    if not args.quiet:
        print(f"store node stopped: {node.counters}", flush=True)
    return 0
