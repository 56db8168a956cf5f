"""Application rows: events (append-only, iteration), messages, participants, identity, kv."""

import logging
import sqlite3

import pytest
from run_until import run

from sdschat.sds import MessageChannel
from sdschat.store import EventRow, MessageRow, MessageUpdate, ParticipantRow, Store, StoreError


def mid(i: int) -> str:
    """A message id as the node stores them: 64 hex digits (rows.MESSAGE_ID_HEX)."""
    return f"{i:064x}"


async def _new_store(path, channel="room", participant="bob"):
    store = await Store.open(path)
    await store.save_state(MessageChannel(channel, participant, None, 1).snapshot(), "{}")
    return store


def test_events_append_and_iterate(tmp_path):
    async def go():
        store = await _new_store(tmp_path / "n.db")
        try:
            big = 2**62 + 3
            await store.apply(
                "room",
                events=[
                    EventRow("sent", 100, "m1", "bob", None, big, {"bytes": 12}),
                    EventRow("received", 101, "m2", "alice"),
                ],
            )
            await store.apply("room", events=[EventRow("delivered", 102, "m2", "alice", "someone-else", 7)])
            await store.apply("room", events=[EventRow("sync_sent", 100 + i) for i in range(2500)])
            every = [e async for e in store.iter_events()]
            first = every[:3]
            delivered = [e async for e in store.iter_events(kind="delivered")]
            later = [e async for e in store.iter_events(after_seq=first[1].seq)]
            with pytest.raises(ValueError, match="unknown event kind"):
                await store.apply("room", events=[EventRow("exploded", 1)])
            return every, first, delivered, later
        finally:
            await store.close()

    every, first, delivered, later = run(go())
    assert len(every) == 2503
    seqs = [e.seq for e in every]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert first[0] == EventRow("sent", 100, "m1", "bob", "bob", 2**62 + 3, {"bytes": 12}, first[0].seq, "room")
    assert first[1].participant_id == "bob"  # who recorded it: the channel's participant by default
    assert first[2].participant_id == "someone-else"
    assert [e.message_id for e in delivered] == ["m2"]
    assert later[0] == first[2] and len(later) == 2501
    conn = sqlite3.connect(tmp_path / "n.db")
    plan = " ".join(
        str(r) for r in conn.execute("EXPLAIN QUERY PLAN SELECT * FROM events WHERE kind = 'sent' AND ts_ms >= 0")
    )
    assert "events_kind_ts" in plan
    with pytest.raises(sqlite3.IntegrityError, match="append-only"):
        conn.execute("UPDATE events SET kind = 'lost'")
    conn.close()  # rows leave only through compaction (migrations/0003; tests/store/test_store_compaction.py)


def test_messages_upsert_update_iterate(tmp_path):
    async def go():
        store = await _new_store(tmp_path / "n.db")
        try:
            rows = [
                MessageRow(mid(i), "alice" if i % 2 else "bob", 1000 - i // 2, f"text {i}".encode(), "sent")
                for i in range(1200)
            ]
            await store.apply("room", messages=rows[:600])
            await store.apply(
                "room",
                messages=rows[600:],
                message_updates=[
                    MessageUpdate(mid(1), state="possibly_acknowledged", possible_ack_count=1),
                    MessageUpdate(mid(2), state="delivered", repaired=True, after_lost=("x", "y"), received_at_ms=5),
                    MessageUpdate(mid(3), resends=4),
                    MessageUpdate("nope", state="lost"),  # unknown ids are ignored
                ],
            )
            listed = [m async for m in store.iter_messages()]
            in_room = [m async for m in store.iter_messages("room", chunk=7)]
            return (
                listed,
                in_room,
                await store.message_count(),
                await store.message_count("other"),
                await store.get_message("room", mid(2)),
                await store.get_message("room", mid(3)),
            )
        finally:
            await store.close()

    listed, in_room, count, other, m2, m3 = run(go())
    assert count == 1200 and other == 0
    assert [(m.lamport_timestamp, m.message_id) for m in listed] == sorted(
        (m.lamport_timestamp, m.message_id) for m in listed
    )
    assert in_room == listed
    assert m2 == MessageRow(mid(2), "bob", 999, b"text 2", "delivered", 0, 0, True, ("x", "y"), 5)
    assert (m3.state, m3.resends, m3.repaired, m3.after_lost) == ("sent", 4, False, ())
    assert next(m for m in listed if m.message_id == mid(1)).possible_ack_count == 1


def test_participants_upsert(tmp_path):
    async def go():
        store = await _new_store(tmp_path / "n.db")
        try:
            await store.apply("room", participants=[ParticipantRow("alice", "Al", 50, 60)])
            await store.apply(
                "room", participants=[ParticipantRow("alice", None, 40, 55), ParticipantRow("carol", None, 70, 70)]
            )
            await store.apply("room", participants=[ParticipantRow("alice", "Alice", 90, 95)])
            return await store.participants()
        finally:
            await store.close()

    assert run(go()) == [ParticipantRow("alice", "Alice", 40, 95), ParticipantRow("carol", None, 70, 70)]


def test_identity_is_kept_and_never_logged(tmp_path, caplog):
    key = bytes(range(32))
    caplog.set_level(logging.DEBUG)

    async def go():
        store = await Store.open(tmp_path / "n.db")
        try:
            assert await store.get_identity() is None
            await store.set_identity(key)
            await store.set_identity(key)  # same key again: fine
            with pytest.raises(StoreError, match="already stored") as info:
                await store.set_identity(b"\x01" * 32)
            assert key.hex() not in str(info.value)
            assert await store.get_identity() == key
        finally:
            await store.close()
        store = await Store.open(tmp_path / "n.db")
        try:
            got = await store.get_identity()
            await store.set_identity(b"\x02" * 32, replace=True)
            return got, await store.get_identity()
        finally:
            await store.close()

    got, replaced = run(go())
    assert got == key and replaced == b"\x02" * 32
    for needle in (key.hex(), repr(key), key.hex()[:16]):
        assert needle not in caplog.text


def test_kv(tmp_path):
    async def go():
        store = await Store.open(tmp_path / "n.db")
        try:
            assert await store.kv_get("theme") is None
            assert await store.kv_get("theme", "dark") == "dark"
            await store.kv_set("theme", "light")
            await store.kv_set("theme", "solarized")
            await store.kv_set("nick", "bob")
            await store.kv_set("nick", None)
            return await store.kv_get("theme"), await store.kv_get("nick")
        finally:
            await store.close()

    assert run(go()) == ("solarized", None)


def test_app_rows_and_ops_commit_together(tmp_path):
    """A batch that fails half-way leaves neither its ops nor its app rows behind."""

    async def go():
        store = await _new_store(tmp_path / "n.db")
        try:
            with pytest.raises(ValueError):
                await store.apply(
                    "room",
                    [("bloom", "x", None)],
                    messages=[MessageRow("x", "a", 1, b"c", "sent")],
                    events=[EventRow("sent", 1), EventRow("bogus", 2)],
                )
            return (
                await store.message_count(),
                [e async for e in store.iter_events()],
                (await store.load_state("room")).bloom_ids,
            )
        finally:
            await store.close()

    assert run(go()) == (0, [], [])


def test_the_search_index_takes_messages_in_batches_and_a_search_finds_the_newest(tmp_path):
    """migrations/0006: a flush leaves its messages out of the index until INDEX_BATCH have gathered, then
    indexes them in one go; a search first indexes whatever is left, so it finds a line stored just before."""
    import json

    from sdschat.store.search import INDEX_BATCH

    def row(i: int) -> MessageRow:
        return MessageRow(mid(i), "alice", i, json.dumps({"text": f"word{i} common"}).encode(), "delivered")

    def indexed(path) -> int:
        conn = sqlite3.connect(path)
        try:
            return conn.execute("SELECT count(*) FROM message_search WHERE message_search MATCH 'common'").fetchone()[0]
        finally:
            conn.close()

    async def go():
        db = tmp_path / "n.db"
        store = await _new_store(db)
        try:
            await store.apply("room", messages=[row(i) for i in range(INDEX_BATCH - 1)])
            assert indexed(db) == 0  # not yet: one row short of a batch
            await store.apply("room", messages=[row(INDEX_BATCH - 1)])
            assert indexed(db) == INDEX_BATCH  # the batch, in one statement
            await store.apply("room", messages=[row(INDEX_BATCH)])
            assert indexed(db) == INDEX_BATCH
            hits = await store.search("room", f"word{INDEX_BATCH}")  # the line stored a moment ago
            assert [r.message_id for _, r in hits] == [mid(INDEX_BATCH)] and indexed(db) == INDEX_BATCH + 1
            assert len(await store.search("room", "common", limit=1000)) == INDEX_BATCH + 1
        finally:
            await store.close()

    run(go())
