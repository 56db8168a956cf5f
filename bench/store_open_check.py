"""What checking a database at open costs: one channel of 1,000,000 messages.

    .venv/bin/python bench/store_open_check.py [--messages 1000000] [--keep DIR] [--smoke]

The database is written through the store's public API (the channel's engine row, then the messages of five
people, ~80 characters each, with their log rows; the FTS5 index built by the same triggers as live traffic),
so it has the shape of a long-lived channel (events aside: a node keeps a bounded window of them).

Figures, median of 7 warm runs (the file in the page cache, as on a second start):

* ``Store.open`` + ``close`` as every command does it, with the checks it makes at open
  (:mod:`sdschat.store.integrity`: the file's header against its size, then its schema against the one
  ``migrations/`` creates, then ``PRAGMA quick_check`` of the tables whose loss would make the channel look
  new);
* each of those parts on its own;
* for comparison, ``PRAGMA quick_check`` of the whole file (what a check of every page would cost; damage
  elsewhere is found by the checks on every row read back, when it is read).

``--keep DIR`` keeps the database there and reuses it (filling 1,000,000 messages takes a few minutes).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

from sdschat.crypto import ChannelKey
from sdschat.node import AppPayload, node_channel_config
from sdschat.sds import MessageChannel
from sdschat.sds.state import LogRow
from sdschat.store import MessageRow, Store, integrity, migrate

RUNS = 7
WORDS = (
    "ack",
    "bloom",
    "lamport",
    "causal",
    "history",
    "repair",
    "resend",
    "gap",
    "sync",
    "buffer",
    "hello",
    "there",
    "reliable",
    "message",
    "delivered",
    "missing",
    "filter",
    "peer",
    "channel",
    "epoch",
)
PEOPLE = [(f"{i:02x}" * 16, nick) for i, nick in enumerate(("alice", "bob", "carol", "dave", "erin"))]


async def make_db(db: Path, n: int) -> None:
    """A channel database of ``n`` messages (kept if it is there from an earlier ``--keep`` run)."""
    if db.exists():
        return
    key = ChannelKey(b"\x42" * 32, "bench")
    rng = random.Random(7)
    async with await Store.open(db) as store:
        channel = MessageChannel(key.channel_id, PEOPLE[0][0], node_channel_config(), 1_763_000_000_000, journal=True)
        await store.save_state(channel.snapshot(), "{}")
        for start in range(0, n, 5_000):
            rows, ops = [], []
            for i in range(start, min(n, start + 5_000)):
                pid, nick = PEOPLE[i % 5]
                text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 14)))
                mid = f"{i:064x}"
                rows.append(
                    MessageRow(
                        mid,
                        pid,
                        i + 1,
                        AppPayload("msg", nick, text, 1_763_000_000_000 + i).encode(),
                        "received",
                        received_at_ms=1_763_000_000_000 + i,
                    )
                )
                ops.append(("log", mid, LogRow(mid, i + 1, pid)))
            ops.append(("lamport", None, min(n, start + 5_000)))
            await store.apply(key.channel_id, ops, messages=rows)


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


async def open_close(db: Path) -> float:
    t = time.perf_counter()
    store = await Store.open(db, create=False)
    await store.close()
    return time.perf_counter() - t


def timed(db: Path, fn) -> float:
    con = sqlite3.connect(db)
    try:
        con.execute("SELECT 1 FROM sqlite_master").fetchall()  # the schema parsed, as at open
        t = time.perf_counter()
        fn(con)
        return time.perf_counter() - t
    finally:
        con.close()


def measure(db: Path) -> dict:
    out: dict = {"bytes": db.stat().st_size}
    asyncio.run(open_close(db))  # warm: the file in the page cache, the expected schema built once
    out["open"] = median_ms([asyncio.run(open_close(db)) for _ in range(RUNS)])
    out["header"] = median_ms([_time(lambda: integrity.check_file(db)) for _ in range(RUNS)])
    migrations = migrate.load_migrations()  # (an open reads them anyway)
    out["schema"] = median_ms([timed(db, lambda con: integrity.check_schema(con, migrations, db)) for _ in range(RUNS)])
    out["tables"] = median_ms([timed(db, integrity.check_tables) for _ in range(RUNS)])
    out["quick_check"] = median_ms(
        [timed(db, lambda con: con.execute("PRAGMA quick_check").fetchall()) for _ in range(3)]
    )
    return out


def _time(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def report(db: Path, n: int) -> None:
    reused = db.exists()
    t = time.perf_counter()
    asyncio.run(make_db(db, n))
    filled = "reused" if reused else f"filled in {time.perf_counter() - t:,.0f} s"
    m = measure(db)
    check = m["header"] + m["schema"] + m["tables"]
    print(
        f"one channel of {n:,} messages: {m['bytes'] / 2**20:,.1f} MiB ({m['bytes'] / n:,.0f} bytes per message; "
        f"{filled})"
    )
    print(f"Store.open + close with the open checks: {m['open']:,.2f} ms median of {RUNS}")
    print(
        f"  the checks at open: {check:,.2f} ms ({check / m['open'] * 100:,.0f}% of the open): header "
        f"{m['header']:,.3f} ms, schema {m['schema']:,.2f} ms, quick_check of the small tables {m['tables']:,.2f} ms"
    )
    print(f"  without them (open + close minus the checks): {m['open'] - check:,.2f} ms")
    print(
        f"for comparison, PRAGMA quick_check of the whole file: {m['quick_check']:,.0f} ms "
        f"({m['quick_check'] / m['open']:,.0f}x the open)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--keep", type=Path, help="keep (and reuse) the database in this folder")
    ap.add_argument("--smoke", action="store_true", help="5,000 messages, a few seconds (the test suite runs this)")
    a = ap.parse_args()
    if a.smoke:
        a.messages = 5_000
    if a.keep:
        a.keep.mkdir(parents=True, exist_ok=True)
        report(a.keep / f"open-check-{a.messages}.db", a.messages)
        return
    with tempfile.TemporaryDirectory(prefix="sdschat-open-check-") as tmp:
        report(Path(tmp) / "channel.db", a.messages)


if __name__ == "__main__":
    main()
