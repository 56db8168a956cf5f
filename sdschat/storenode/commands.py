"""``sdschat store``: run a store node (register ``storenode_configure`` / ``storenode_run``)."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
from pathlib import Path

from ..cli import CliError

__all__ = ["storenode_configure", "storenode_run"]


def _positive(kind):
    def parse(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if v < 0:
            raise argparse.ArgumentTypeError(f"must be >= 0, got {text}")
        return v

    return parse


def default_store_db() -> Path:
    from platformdirs import user_data_dir

    return Path(os.environ.get("SDSCHAT_HOME") or user_data_dir("sdschat")) / "store-node.db"


def storenode_configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--broker", default="mqtt://127.0.0.1:1883", help="mqtt://host:port of the broker to serve")
    p.add_argument("--db", type=Path, help="database file (default: store-node.db under the user data directory)")
    p.add_argument("--retention", type=_positive(float), default=30.0, metavar="DAYS",
                   help="delete envelopes older than this many days (default 30; 0 keeps them forever)")
    p.add_argument("--max-size", type=_positive(float), default=0.0, metavar="MB",
                   help="keep at most this many MB of envelopes, deleting the oldest (default 0: no cap)")
    p.add_argument("--quiet", action="store_true")


async def storenode_run(args: argparse.Namespace) -> int:
    from ..transport import TransportError
    from .service import StoreNode

    db = args.db or default_store_db()
    max_bytes = int(args.max_size * 1024 * 1024) or None
    try:
        node = await StoreNode.start(args.broker, db, retention_days=args.retention or None, max_bytes=max_bytes)
    except TransportError as exc:
        raise CliError(str(exc)) from None
    except (OSError, Exception) as exc:  # sqlite3 errors, permissions
        raise CliError(f"cannot start the store node on {db}: {exc}") from None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (NotImplementedError, RuntimeError):  # pragma: no cover
            pass
    if not args.quiet:
        print(f"sdschat store node on {args.broker}, database {db} ({node.db.count} envelopes); Ctrl-C to stop",
              flush=True)
    try:
        await stop.wait()
    finally:
        await node.stop()
    if not args.quiet:
        print(f"store node stopped: {node.counters}", flush=True)
    return 0
