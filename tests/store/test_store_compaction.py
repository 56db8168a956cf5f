"""Events compaction (migrations/0003): a bounded window of full event rows, older ones folded per message.

Real SQLite files throughout. What the report reads (the view ``event_history``) must give the same
delivery, latency, participants and log hashes before and after folding.
"""

from __future__ import annotations

import json
import random
import sqlite3

import pytest
from run_until import run

from sdschat.pipeline.metrics import reduce_events
from sdschat.sds import ChannelConfig, MessageChannel
from sdschat.store import EventRow, MessageRow, Store, StoreError
from sdschat.store import migrate as M

CID = "c" * 32
PID = "a" * 32
PEER = "b" * 32


def mid(i: int) -> str:
    return f"{i:064x}"


def reduced(db, table: str):
    conn = sqlite3.connect(db)
    conn.row_factory = sqlite3.Row
    try:
        rows = [dict(r, source="s") for r in conn.execute(f"SELECT * FROM {table} ORDER BY seq")]
    finally:
        conn.close()
    for r in rows:
        if "missing_ids" not in r:  # before migration 0004: the typed facts from detail, as the report reads them
            d = json.loads(r["detail"]) if r["detail"] else {}
            r.update(
                repaired=d.get("repaired"),
                by_bloom=d.get("by_bloom"),
                bytes=d.get("bytes"),
                by_id=d.get("by"),
                frame_ts=d.get("frame_ts"),
                missing_ids=d.get("missing"),
                carrier=d.get("carrier"),
            )
    red = reduce_events(rows)
    return {
        "messages": sorted(red.messages),
        "latency": sorted(red.latency_hist),
        "participants": sorted(red.participants),
        "hashes": sorted(red.event_log_hashes),
        "repairs": sorted(red.repair_rounds),
        "repair_totals": sorted(red.repair_totals),
    }, len(rows)


def _v2_database(path, n: int) -> list[str]:
    """A schema-2 database (before compaction) with n messages, their events and a shuffled log."""
    conn = sqlite3.connect(path, isolation_level=None)
    M.migrate(conn, M.load_migrations()[:2])
    conn.execute("BEGIN")
    conn.execute(
        "INSERT INTO channels (channel_id, participant_id, lamport_timestamp) VALUES (?, ?, ?)", (CID, PID, n + 10)
    )
    log, events = [], []
    t = 1_700_000_000_000
    for i in range(n):
        own = i % 3 == 0
        sender = PID if own else PEER
        conn.execute(
            "INSERT INTO messages (channel_id, message_id, sender_id, lamport_timestamp, content, state) "
            "VALUES (?, ?, ?, ?, ?, 'delivered')",
            (CID, mid(i), sender, i + 1, b'{"text":"hi"}'),
        )
        log.append((CID, i + 1, mid(i), sender))
        if own:
            events.append((t + 10 * i, "sent", mid(i), sender, i + 1, None))
            events.append(
                (t + 10 * i + 7, "acked", mid(i), PID, None, '{"by_bloom":%s}' % ("true" if i % 2 else "false"))
            )
        else:
            events.append((t + 10 * i + 3, "received", mid(i), sender, i + 1, None))
            detail = '{"repaired":true,"via":"repair"}' if i % 50 == 1 else None
            events.append((t + 10 * i + 4, "delivered", mid(i), sender, i + 1, detail))
        if i % 50 == 1:
            events.append((t + 10 * i + 1, "missing", mid(i + 1), sender, None, f'{{"missing":["{mid(i)}"]}}'))
            events.append((t + 10 * i + 2, "repair_served", mid(i), sender, None, None))
        if i % 20 == 0:
            events.append((t + 10 * i + 5, "sync_sent", f"sync-{i}", PID, i + 1, None))
    conn.executemany(
        "INSERT INTO events (ts_ms, kind, channel_id, message_id, sender_id, participant_id, "
        f"lamport_timestamp, detail) VALUES (?, ?, '{CID}', ?, ?, '{PID}', ?, ?)",
        [(ts, k, m, s, lt, d) for ts, k, m, s, lt, d in events],
    )
    random.Random(1).shuffle(log)
    conn.executemany("INSERT INTO sds_log (channel_id, lamport_timestamp, message_id, sender_id) VALUES (?,?,?,?)", log)
    conn.execute("COMMIT")
    conn.close()
    return [mid(i) for i in range(n)]


def test_migration_keeps_the_log_order_and_folds_what_is_older_than_the_default_window(tmp_path):
    db = tmp_path / "v2.db"
    ids = _v2_database(db, 6_000)
    before, n_before = reduced(db, "events")
    assert n_before > 12_000

    async def open_and_load():
        store = await Store.open(db)
        try:
            assert await store.schema_version() == M.latest_version() >= 3
            state = await store.load_state(CID)
            history = [e async for e in store.iter_event_history(chunk=997)]
        finally:
            await store.close()
        return state, history

    state, history = run(open_and_load())
    assert [r.message_id for r in state.log] == ids  # log order, whatever order the rows were written in

    conn = sqlite3.connect(db)
    indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert "sds_log_order" not in indexes  # the log is stored in log order: no second copy of its ids
    kept = dict(conn.execute("SELECT kind, count(*) FROM events GROUP BY kind").fetchall())
    full = conn.execute("SELECT count(*) FROM events").fetchone()[0]
    folded = conn.execute("SELECT count(*) FROM message_events").fetchone()[0]
    (bound,) = conn.execute("SELECT CAST(value AS INTEGER) FROM kv WHERE key = 'events_compacted_through'").fetchone()
    old_rare = conn.execute("SELECT count(*) FROM events WHERE seq <= ?", (bound,)).fetchone()[0]
    conn.close()
    assert bound == n_before - 10_000
    assert full == 10_000 + old_rare
    # the rows that explain a repair stay in full, old or not; sync frames beyond the window are gone
    assert kept["missing"] == kept["repair_served"] == 120
    assert kept["sync_sent"] < 300
    assert folded > 1_000
    after, n_after = reduced(db, "event_history")
    assert after == before
    assert len(history) == n_after < n_before  # the sync frames beyond the window are not told of any more
    assert history[0].seq < 0 < history[-1].seq


def _channel(path):
    async def make():
        store = await Store.open(path)
        await store.save_state(MessageChannel(CID, PID, ChannelConfig(), 0).snapshot(), "{}")
        return store

    return make()


def test_compaction_keeps_the_newest_rows_folds_the_rest_once_and_merges_late_events(tmp_path):
    db = tmp_path / "p.db"

    async def main():
        store = await _channel(db)
        try:
            t = 1_000_000
            msgs = [MessageRow(mid(i), PID, i + 1, b'{"text":"x"}', "sent") for i in range(40)]
            await store.apply(
                CID,
                messages=msgs,
                events=[EventRow("sent", t + i, mid(i), PID, lamport_timestamp=i + 1) for i in range(40)],
            )
            assert await store.compact_events(0) == 0  # 0 keeps every row
            assert await store.compact_events(10) == 30
            assert await store.compact_events(10) == 0  # nothing new beyond the window
            # a late ack of an old message, then enough new rows to push it out of the window
            late = [
                EventRow("acked", t + 500, mid(0), PID, detail={"by_bloom": True}),
                EventRow("acked", t + 400, mid(0), PID, detail={"by_bloom": False}),
            ]
            await store.apply(CID, events=late + [EventRow("resent", t + 600, mid(1), PID)] * 10)
            assert await store.compact_events(10) == 12
            rows = [e async for e in store.iter_event_history()]
            full = [e async for e in store.iter_events()]
        finally:
            await store.close()
        return rows, full

    rows, full = run(main())
    assert len(full) == 10 and all(e.kind == "resent" for e in full)
    acks = [e for e in rows if e.kind == "acked"]
    assert [(a.message_id, a.ts_ms, a.detail) for a in acks] == [(mid(0), 1_000_400, {"by_bloom": True})]
    sent = sorted((e.message_id, e.ts_ms, e.lamport_timestamp) for e in rows if e.kind == "sent")
    assert sent == [(mid(i), 1_000_000 + i, i + 1) for i in range(40)]

    conn = sqlite3.connect(db)
    conn.execute("PRAGMA foreign_keys = ON")
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute("UPDATE events SET kind = 'lost'")
    conn.execute("DELETE FROM channels")  # a channel forgotten: its folded events go with its messages
    conn.commit()
    assert conn.execute("SELECT count(*) FROM message_events").fetchone()[0] == 0
    conn.close()


def test_events_of_messages_not_stored_and_of_other_recorders_stay_in_full(tmp_path):
    db = tmp_path / "p.db"

    async def main():
        store = await _channel(db)
        try:
            await store.apply(
                CID,
                messages=[MessageRow(mid(2), PEER, 2, b"{}", "received")],
                events=[EventRow("received", 5, mid(1), PEER)] * 5  # no messages row
                + [EventRow("delivered", 6, mid(2), PEER, participant_id=PEER)] * 5
                + [EventRow("sent", 7, mid(3), PID)] * 20,
            )
            assert await store.compact_events(5) == 0  # nothing of the 25 beyond the window may be folded
            return [e.kind async for e in store.iter_event_history()]
        finally:
            await store.close()

    kinds = run(main())
    assert kinds.count("received") == 5 and kinds.count("delivered") == 5


def test_a_closed_store_refuses_compaction(tmp_path):
    async def main():
        store = await _channel(tmp_path / "p.db")
        await store.close()
        with pytest.raises(StoreError, match="closed"):
            await store.compact_events(10)

    run(main())
