"""Database size per chat message: where the bytes go, with and without events compaction.

Workload: --nodes `sdschat bot` processes over mosquitto, each sending --messages
messages of about 80 characters, the node's default protocol settings, no
impairment. Each bot's database is measured when the bots are done (per table
and index with SQLite's dbstat: pages in use; and the file itself, database +
-wal after a checkpoint), in three runs:

* ``off``: compaction off (``--events-keep 0``): every event row kept, as
  before compaction existed;
* ``default``: the node's defaults (events window 10,000 rows, SDS-R cache
  10,000 messages, bloom filter 10,000 ids). A few thousand messages do not
  fill these bounded parts, so the figure that a long-running profile tends to
  is "per message beyond the bounded parts": everything but the events
  window, the SDS-R cache and the bloom ids (with their indexes), per message
  (without compaction the events table is not bounded: it counts);
* ``small bounds``: the same with the bounded parts scaled down (--events-keep
  300, repair cache and bloom filter 300): a long-running profile in
  miniature, where the whole file per message is the figure.

    python bench/db_size.py [--nodes 3] [--messages 1000] [--smoke]
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import kit as H

#: about 80 characters once {name} and {i} are filled in
TEXT = "{name} #{i}: the quick brown fox jumps over the lazy dog, then naps in the sun ok"
#: tables and indexes of a bounded size once full (the events window, the SDS-R cache, the bloom ids)
BOUNDED = {
    "events",
    "events_kind_ts",
    "sds_cache",
    "sqlite_autoindex_sds_cache_1",
    "sds_bloom_ids",
    "sds_bloom_ids_channel",
}


def table_bytes(db: Path) -> dict[str, int]:
    con = sqlite3.connect(db)
    try:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        rows = con.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall()
    finally:
        con.close()
    out: dict[str, int] = {}
    for name, size in rows:  # the FTS5 shadow tables as one entry
        key = "message_search (FTS5, all parts)" if name.startswith("message_search") else name
        out[key] = out.get(key, 0) + int(size)
    return out


def run_group(workdir: Path, nodes: int, messages: int, extra: list[str]) -> list[Path]:
    workdir.mkdir(parents=True, exist_ok=True)
    broker = H.Broker(workdir)
    broker.start()
    H.keygen(workdir)
    args = [
        "--quiet",
        "--text",
        TEXT,
        "--count",
        str(messages),
        "--interval",
        "0.01",
        "--start-after",
        "2",
        "--linger",
        "3",
        *H.FAST,
        *extra,
    ]
    bots = [H.Bot(workdir, f"n{i}", broker.url, args) for i in range(nodes)]
    try:
        for b in bots:
            b.start(max_runtime=600)
        codes = H.wait_all(bots, 620)
    finally:
        for b in bots:
            b.kill9()
        broker.close()
    bad = {k: v for k, v in codes.items() if v != 0}
    if bad:
        raise SystemExit(f"bots failed: {bad}\n" + bots[0].output()[-2000:])
    return [b.db for b in bots]


def measure(dbs: list[Path], *, compacting: bool = True) -> dict:
    """Sizes summed over ``dbs``; without compaction the events table grows with the messages (not bounded)."""
    bounded = BOUNDED if compacting else BOUNDED - {"events", "events_kind_ts"}
    tables: dict[str, int] = {}
    msgs = events = compacted = cached = file = 0
    for db in dbs:
        for name, size in table_bytes(db).items():
            tables[name] = tables.get(name, 0) + size
        con = H.connect_ro(db)
        try:
            msgs += con.execute("SELECT count(*) FROM messages").fetchone()[0]
            events += con.execute("SELECT count(*) FROM events").fetchone()[0]
            compacted += con.execute("SELECT count(*) FROM message_events").fetchone()[0]
            cached += con.execute("SELECT count(*) FROM sds_cache").fetchone()[0]
        finally:
            con.close()
        file += H.db_bytes(db)
    used = sum(tables.values())
    beyond = used - sum(tables.get(t, 0) for t in bounded)
    return {
        "bounded": bounded,
        "messages": msgs,
        "events": events,
        "compacted": compacted,
        "cached": cached,
        "tables": tables,
        "file": file,
        "used": used,
        "beyond": beyond,
    }


def show(title: str, r: dict) -> None:
    m = max(r["messages"], 1)
    print(
        f"\n{title}: {r['messages']:,} messages held, {r['events']:,} event rows in full, "
        f"{r['compacted']:,} messages with compacted events, {r['cached']:,} in the SDS-R caches"
    )
    print(f"  {'table / index':40} {'bytes':>12} {'B/message':>10}")
    for name, size in sorted(r["tables"].items(), key=lambda kv: -kv[1]):
        if size > 4096 * 3:
            mark = " (bounded)" if name in r["bounded"] else ""
            print(f"  {name + mark:40} {size:>12,} {size / m:>10,.0f}")
    print(f"  {'pages in use':40} {r['used']:>12,} {r['used'] / m:>10,.0f}")
    print(f"  {'file size (after checkpoint)':40} {r['file']:>12,} {r['file'] / m:>10,.0f}")
    print(f"  per message beyond the bounded parts: {r['beyond'] / m:,.0f} B/message")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--messages", type=int, default=1000, help="messages each node sends")
    ap.add_argument("--small", type=int, default=300, help="the scaled-down bounds of the third run")
    ap.add_argument("--smoke", action="store_true", help="2 nodes, 60 messages each, bounds of 40")
    args = ap.parse_args()
    if args.smoke:
        args.nodes, args.messages, args.small = 2, 60, 40
    small = [
        "--events-keep",
        str(args.small),
        "--tune",
        f"repair_cache_size={args.small}",
        "--tune",
        f"bloom_capacity={args.small}",
    ]
    runs = [
        ("events compaction off (every event row kept)", ["--events-keep", "0"]),
        ("events compaction on, the node's defaults", []),
        (f"events compaction on, bounded parts scaled down to {args.small}", small),
    ]
    if args.smoke:
        runs = runs[::2]
    t0 = time.monotonic()
    results = []
    with tempfile.TemporaryDirectory(prefix="sdschat-dbsize-") as tmp:
        for i, (title, extra) in enumerate(runs):
            dbs = run_group(Path(tmp) / f"run{i}", args.nodes, args.messages, extra)
            results.append((title, measure(dbs, compacting=extra[:2] != ["--events-keep", "0"])))
    print(f"{args.nodes} nodes over mosquitto, {args.messages:,} messages of ~{len(TEXT) - 2} characters each")
    for title, r in results:
        show(title, r)
    print()
    for title, r in results:
        m = max(r["messages"], 1)
        print(
            f"{title}: file {r['file'] / m:,.0f} B/message, beyond the bounded parts {r['beyond'] / m:,.0f} B/message"
        )
    print(f"wall {time.monotonic() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
