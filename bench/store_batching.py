"""Store write throughput: a commit per row, per message, and the batching StoreWriter.

Workload: two participants alternate sending --messages messages (as in
bench/engine_throughput.py) with ``journal=True``, 5% of the frames towards
participant-1 lost and both ticking every 10 messages (so repair requests,
buffered messages, resends and bloom rolls appear), 50 ms of synthetic time
per message. For each message, participant-1's drained journal plus the rows
a node adds (one ``messages`` row or status update, one ``events`` row) form
one batch (plus a status update and an event per acknowledgement). "rows"
counts journal ops plus application rows.

The engine runs first; only the store writes are timed, each mode on a fresh
database file:

* ``per-row``: one ``Store.apply`` (one transaction) per journal op or app row;
* ``per-message``: one ``Store.apply`` per message's batch, awaited;
* ``writer burst=N``: ``StoreWriter.submit`` N batches in one loop turn, then
  ``await flush()`` (N = 1 is the node awaiting a flush before each publish);
* ``writer stream``: one submit per loop turn (``await asyncio.sleep(0)``
  between them), one flush at the end: batches coalesce only while a commit is
  in flight (group commit), as when frames arrive one by one.

With ``synchronous=FULL`` every commit is an fsync; ``per-row`` FULL runs on
the first --full-row-messages messages only (it is slow by design).

Usage:
  .venv/bin/python bench/store_batching.py [--messages 5000] [--dir DIR] [--skip-full]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path

from sdschat.sds import (
    Acknowledged,
    ChannelConfig,
    Delivered,
    MessageChannel,
    Missing,
    Outgoing,
    PossiblyAcknowledged,
)
from sdschat.store import EventRow, MessageRow, MessageUpdate, Store, StoreWriter

CHANNEL = "bench"
ME = "participant-1"


def workload(n: int) -> list[tuple]:
    """Batches ``(ops, messages, message_updates, events)`` of participant-1, one per message."""
    cfg = ChannelConfig(causal_history_size=2)
    t0 = 1_700_000_000_000
    a = MessageChannel(CHANNEL, "participant-0", cfg, t0, journal=True)
    b = MessageChannel(CHANNEL, ME, cfg, t0, journal=True)
    b.drain_journal()
    batches = []
    for i in range(n):
        now = t0 + 50 * i
        messages, updates, events = [], [], []
        if i % 2 == 0:  # participant-0 sends, participant-1 receives (5% lost)
            out = a.send(f"benchmark message {i}".encode(), now)
            evs = [] if i % 20 == 10 else b.receive(out.data, now)
        else:
            out = b.send(f"benchmark message {i}".encode(), now)
            a.receive(out.data, now)
            messages.append(
                MessageRow(
                    out.message_id, ME, out.lamport_timestamp, f"benchmark message {i}".encode(), "unacknowledged"
                )
            )
            events.append(EventRow("sent", now, out.message_id, ME, None, out.lamport_timestamp))
            evs = []
        if i % 10 == 9:
            for frame in a.tick(now):
                if isinstance(frame, Outgoing):
                    evs += b.receive(frame.data, now)
            evs += b.tick(now)
            a.drain_journal()
        for ev in evs:
            if isinstance(ev, Delivered):
                messages.append(
                    MessageRow(
                        ev.message_id, ev.sender_id, ev.lamport_timestamp, ev.content, "delivered", received_at_ms=now
                    )
                )
                events.append(EventRow("delivered", now, ev.message_id, ev.sender_id, None, ev.lamport_timestamp))
            elif isinstance(ev, Missing):
                messages.append(
                    MessageRow(
                        ev.message_id,
                        ev.sender_id,
                        ev.lamport_timestamp,
                        ev.content,
                        "missing_deps",
                        received_at_ms=now,
                    )
                )
                events.append(EventRow("missing", now, ev.message_id, ev.sender_id, None, ev.lamport_timestamp))
            elif isinstance(ev, Acknowledged):
                updates.append(MessageUpdate(ev.message_id, state="acknowledged"))
                events.append(EventRow("acked", now, ev.message_id, ME))
            elif isinstance(ev, PossiblyAcknowledged):
                updates.append(MessageUpdate(ev.message_id, state="possibly_acknowledged", possible_ack_count=ev.count))
                events.append(EventRow("possibly_acked", now, ev.message_id, ME, None, None, {"count": ev.count}))
        a.drain_journal()
        batches.append((b.drain_journal(), messages, updates, events))
    return batches, b


def rows_in(batches) -> int:
    return sum(len(ops) + len(m) + len(u) + len(e) for ops, m, u, e in batches)


async def fresh_store(folder: Path, name: str, sync: str, initial) -> Store:
    path = folder / f"{name}.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    store = await Store.open(path, synchronous=sync)
    await store.save_state(initial, "{}")
    return store


async def per_row(store: Store, batches) -> None:
    for ops, messages, updates, events in batches:
        for op in ops:
            await store.apply(CHANNEL, [op])
        for m in messages:
            await store.apply(CHANNEL, messages=[m])
        for u in updates:
            await store.apply(CHANNEL, message_updates=[u])
        for e in events:
            await store.apply(CHANNEL, events=[e])


async def per_message(store: Store, batches) -> None:
    for ops, messages, updates, events in batches:
        await store.apply(CHANNEL, ops, messages=messages, message_updates=updates, events=events)


def writer_burst(n: int):
    async def go(store: Store, batches) -> None:
        writer = StoreWriter(store)
        for start in range(0, len(batches), n):
            for ops, messages, updates, events in batches[start : start + n]:
                writer.submit(CHANNEL, ops, messages=messages, message_updates=updates, events=events)
            await writer.flush()
        await writer.close()

    return go


async def writer_stream(store: Store, batches) -> None:
    writer = StoreWriter(store)
    for ops, messages, updates, events in batches:
        writer.submit(CHANNEL, ops, messages=messages, message_updates=updates, events=events)
        await asyncio.sleep(0)
    await writer.flush()
    await writer.close()


async def measure(folder, name, sync, initial, batches, fn, final) -> dict:
    store = await fresh_store(folder, name, sync, initial)
    try:
        c0 = store.commits
        t = time.perf_counter()
        await fn(store, batches)
        dt = time.perf_counter() - t
        commits = store.commits - c0
        if final is not None:  # the store holds the engine's state
            loaded = await store.load_state(CHANNEL)
            for f in ("log", "outgoing", "incoming", "missing", "repair_requests", "bloom_ids", "lamport_timestamp"):
                assert getattr(loaded, f) == getattr(final, f), (name, f)
        assert await store.integrity_check() == "ok"
    finally:
        await store.close()
    rows = rows_in(batches)
    return {
        "mode": name,
        "sync": sync,
        "messages": len(batches),
        "rows": rows,
        "commits": commits,
        "seconds": dt,
        "rows_per_s": rows / dt,
        "commits_per_s": commits / dt,
        "msgs_per_s": len(batches) / dt,
    }


async def main_async(args) -> list[dict]:
    t = time.perf_counter()
    batches, b = workload(args.messages)
    engine_s = time.perf_counter() - t
    final = b.snapshot()
    initial = MessageChannel(CHANNEL, ME, ChannelConfig(causal_history_size=2), 1_700_000_000_000).snapshot()
    ops = sum(len(x[0]) for x in batches)
    print(
        f"workload: {len(batches)} messages, {ops} journal ops + {rows_in(batches) - ops} app rows "
        f"= {rows_in(batches)} rows (engine {engine_s:.2f} s, untimed)"
    )
    folder = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="sdschat-store-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    print(f"files in {folder}; Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}")
    plan = [
        ("per-row", "NORMAL", per_row, batches),
        ("per-message", "NORMAL", per_message, batches),
        ("writer burst=1", "NORMAL", writer_burst(1), batches),
        ("writer burst=10", "NORMAL", writer_burst(10), batches),
        ("writer burst=100", "NORMAL", writer_burst(100), batches),
        ("writer stream", "NORMAL", writer_stream, batches),
    ]
    if not args.skip_full:
        few = batches[: args.full_row_messages]
        plan += [
            ("per-row", "FULL", per_row, few),
            ("per-message", "FULL", per_message, batches),
            ("writer burst=10", "FULL", writer_burst(10), batches),
            ("writer stream", "FULL", writer_stream, batches),
        ]
    results = []
    print(
        f"{'mode':<18} {'sync':<6} {'msgs':>6} {'rows':>7} {'commits':>8} {'seconds':>8} "
        f"{'rows/s':>9} {'commits/s':>10} {'msgs/s':>8}"
    )
    for name, sync, fn, data in plan:
        r = await measure(
            folder, name.replace(" ", "_").replace("=", ""), sync, initial, data, fn, final if data is batches else None
        )
        r["mode"] = name
        results.append(r)
        print(
            f"{name:<18} {sync:<6} {r['messages']:>6} {r['rows']:>7} {r['commits']:>8} {r['seconds']:>8.2f} "
            f"{r['rows_per_s']:>9,.0f} {r['commits_per_s']:>10,.0f} {r['msgs_per_s']:>8,.0f}"
        )
    if not args.dir:
        shutil.rmtree(folder, ignore_errors=True)
    base = next(r for r in results if r["mode"] == "per-row" and r["sync"] == "NORMAL")
    best = max((r for r in results if r["sync"] == "NORMAL"), key=lambda r: r["rows_per_s"])
    print(
        f"NORMAL: best ({best['mode']}) writes {best['rows_per_s'] / base['rows_per_s']:.1f}x the rows/s "
        f"of a commit per row"
    )
    return results


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=5000)
    p.add_argument("--full-row-messages", type=int, default=500)
    p.add_argument("--dir", help="folder for the database files (default: a temporary folder, removed after)")
    p.add_argument("--skip-full", action="store_true", help="skip the synchronous=FULL runs")
    p.add_argument("--json", action="store_true", help="also print the results as JSON")
    p.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes, a few seconds: the bench still runs end to end (the test suite runs this)",
    )
    args = p.parse_args()
    if args.smoke:
        args.messages, args.full_row_messages = 200, 40
    results = asyncio.run(main_async(args))
    if args.json:
        print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
