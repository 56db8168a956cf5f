"""Time for a participant to catch up N missed messages from a store node (default 10,000).

Real pieces on loopback: mosquitto (max_queued_messages 100000, tcp_nodelay), a store node in its
own process (``sdschat store``), two nodes in this one. ``b`` goes offline, ``a`` sends N messages
(each ~19 KB on the wire: the bloom filter), the store keeps them; ``b`` comes back and we time
until its log holds every one of them.

    .venv/bin/python bench/store_catchup.py [--messages 10000]
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kit import Broker

from sdschat.crypto import ChannelKey
from sdschat.node import Node, NodeConfig, node_channel_config


def stored(db: Path) -> int:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
            return c.execute("SELECT COUNT(*) FROM envelopes").fetchone()[0]
    except sqlite3.Error:
        return 0


async def main(n: int, work: Path, url: str) -> None:
    cfg = node_channel_config(resend_unacknowledged_ms=600_000, resend_possibly_acknowledged_ms=600_000)
    key = ChannelKey.generate("bench")
    store = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sdschat",
            "store",
            "--broker",
            url,
            "--db",
            str(work / "store.db"),
            "--retention",
            "0",
            "--quiet",
        ]
    )
    while not (work / "store.db").exists():
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)
    a = await Node.start(NodeConfig("a", key, work / "a.db", url, channel_config=cfg))
    b = await Node.start(NodeConfig("b", key, work / "b.db", url, channel_config=cfg))
    try:
        await a.send_text("hello")
        while b.channel.log_size() < 1:
            await asyncio.sleep(0.01)
        b.set_impairment(offline=True)
        t0 = time.monotonic()
        for i in range(n):
            await a.send_text(f"message {i}")
        while stored(work / "store.db") < n + 1:
            await asyncio.sleep(0.1)
        print(
            f"sent {n} messages and stored them in {time.monotonic() - t0:.1f} s "
            f"(store database {(work / 'store.db').stat().st_size / 1e6:.0f} MB)",
            flush=True,
        )
        t0 = time.monotonic()
        b.set_impairment(offline=False)
        while b.channel.log_size() < n + 1:
            if time.monotonic() - t0 > 600:
                raise SystemExit(f"gave up: b has {b.channel.log_size()} of {n + 1}")
            await asyncio.sleep(0.01)
        took = time.monotonic() - t0
        assert b.channel.log == a.channel.log and b.channel.log_size() == a.channel.log_size()
        print(
            f"caught up {n} missed messages from the store in {took:.2f} s ({n / took:,.0f} msg/s); "
            f"store requests {b.store_counters['requests']}, envelopes fed {b.store_counters['envelopes']}, "
            f"SDS-R repairs requested {b.channel.stats['repairs_requested']}"
        )
    finally:
        await a.stop()
        await b.stop()
        store.terminate()
        store.wait(10)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=10_000)
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes, a few seconds: the bench still runs end to end (the test suite runs this)",
    )
    args = ap.parse_args()
    if args.smoke:
        args.messages = 50
    with tempfile.TemporaryDirectory(prefix="sdschat-store-bench-") as tmp:
        work = Path(tmp)
        broker = Broker(work)  # (one line and exit when mosquitto is missing: `bash .ci/setup` installs it)
        broker.start()
        try:
            asyncio.run(main(args.messages, work, broker.url))
        finally:
            broker.close()
