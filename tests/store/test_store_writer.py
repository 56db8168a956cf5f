"""StoreWriter: one commit per event-loop turn, flush() means durable, errors surface."""

import asyncio
import sqlite3

import pytest
from run_until import run

from sdschat.sds import MessageChannel
from sdschat.store import EventRow, MessageRow, ParticipantRow, Store, StoreError, StoreWriter, WriterFailedError


async def _new_store(path, channel="room"):
    store = await Store.open(path)
    await store.save_state(MessageChannel(channel, "bob", None, 1).snapshot(), "{}")
    return store


def _msg(i: int) -> MessageRow:
    return MessageRow(f"m{i:05d}", "bob", 1000 + i, f"hello {i}".encode(), "sent")


def test_submits_of_one_turn_coalesce_into_one_commit_and_flush_is_durable(tmp_path):
    db = tmp_path / "n.db"

    async def go():
        store = await _new_store(db)
        writer = StoreWriter(store)
        try:
            before = store.commits
            for i in range(500):  # one event-loop turn: no await in between
                writer.submit(
                    "room",
                    [("bloom", f"m{i:05d}", None)],
                    messages=[_msg(i)],
                    events=[EventRow("sent", i, f"m{i:05d}")],
                )
            assert writer.pending == 500 and store.commits == before  # nothing written synchronously
            await writer.flush()
            assert store.commits - before == 1
            assert writer.flushes == 1 and writer.max_batches_per_flush == 500 and writer.pending == 0
            # durable: another connection sees every row right after flush() returned
            other = sqlite3.connect(db)
            try:
                assert other.execute("SELECT COUNT(*) FROM messages").fetchone() == (500,)
                assert other.execute("SELECT COUNT(*) FROM events").fetchone() == (500,)
                assert other.execute("SELECT COUNT(*) FROM sds_bloom_ids").fetchone() == (500,)
            finally:
                other.close()
            await writer.flush()  # nothing pending: returns at once
            assert store.commits - before == 1
        finally:
            await writer.close()
            await store.close()
        # and after reopening
        store = await Store.open(db)
        try:
            assert await store.message_count() == 500
            assert len((await store.load_state("room")).bloom_ids) == 500
        finally:
            await store.close()

    run(go())


def _flush_batches(i: int) -> dict:
    """The arguments of the ``i``-th batch of a busy flush: a message, its events, the sender's row (seen again,
    its nick given only sometimes) and the channel's lamport and snapshot values (some left out)."""
    sender = ("alice", "carol")[i % 2]
    return {
        "ops": [("bloom", f"m{i:05d}", None), ("lamport", None, 2000 + i)],
        "messages": [_msg(i)],
        "events": [EventRow("received", 10 + i, f"m{i:05d}", sender), EventRow("delivered", 10 + i, f"m{i:05d}")],
        "participants": [ParticipantRow(sender, f"{sender}{i}" if i % 3 == 0 else None, 500 - i, 600 + i)],
        "last_activity": 700 + i if i % 4 != 3 else None,
        "sync_counter": i if i % 5 == 0 else None,
    }


def _dump(path) -> dict:
    con = sqlite3.connect(path)
    try:
        return {
            table: con.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()
            for table in ("channels", "participants", "messages", "sds_bloom_ids")
        } | {"events": con.execute("SELECT ts_ms, kind, message_id, sender_id FROM events ORDER BY rowid").fetchall()}
    finally:
        con.close()


def test_one_flush_of_many_batches_writes_what_one_commit_each_writes_with_each_row_once(tmp_path):
    """A flush updates the channel's row and each participant's row once (their last values, merged as the
    upsert merges), and the database it leaves is the one a commit per batch leaves."""

    async def go(path, together: bool):
        store = await _new_store(path)
        writer = StoreWriter(store)
        statements: list[str] = []
        try:
            await store._run(lambda conn: conn.set_trace_callback(statements.append))
            for i in range(30):
                writer.submit("room", **_flush_batches(i))
                if not together:
                    await writer.flush()
            await writer.flush()
            await store._run(lambda conn: conn.set_trace_callback(None))
            return store.commits, statements
        finally:
            await writer.close()
            await store.close()

    commits_one, together = run(go(tmp_path / "one.db", True))
    commits_each, apart = run(go(tmp_path / "each.db", False))
    assert commits_each - commits_one == 29  # (save_state's commit in both)
    one, each = _dump(tmp_path / "one.db"), _dump(tmp_path / "each.db")
    assert one == each
    assert one["participants"] == [("alice", "alice24", 472, 628), ("carol", "carol27", 471, 629)]
    con = sqlite3.connect(tmp_path / "one.db")
    try:
        values = con.execute("SELECT lamport_timestamp, last_activity, sync_counter FROM channels").fetchall()
    finally:
        con.close()
    assert values == [(2029, 729, 25)]  # the last value given of each
    assert len(one["messages"]) == 30 and len(one["events"]) == 60

    def count(statements, start):
        return sum(s.startswith(start) for s in statements)

    assert count(together, "UPDATE channels SET lamport_timestamp") == 1
    assert count(together, "INSERT INTO participants") == 2  # (executemany traces each row)
    assert count(apart, "UPDATE channels SET lamport_timestamp") == 30
    assert count(apart, "INSERT INTO participants") == 30


def test_with_coalesce_ms_submits_of_several_turns_wait_for_one_commit_and_flush_cuts_the_wait(tmp_path):
    """coalesce_ms: batches submitted over several loop turns (messages arriving one by one) wait together and
    commit once; a flush() (the node's, before it publishes) commits at once instead of waiting out the window."""
    db = tmp_path / "n.db"

    async def go():
        store = await _new_store(db)
        writer = StoreWriter(store, coalesce_ms=200)
        try:
            before = store.commits
            for i in range(5):  # five turns apart, well inside the window
                writer.submit("room", messages=[_msg(i)])
                await asyncio.sleep(0.01)
            assert store.commits == before and writer.pending == 5  # still waiting for more
            for _ in range(100):
                if writer.pending == 0:
                    break
                await asyncio.sleep(0.02)
            assert writer.pending == 0 and store.commits - before == 1 and writer.max_batches_per_flush == 5
            writer.submit("room", messages=[_msg(5)])
            t0 = asyncio.get_running_loop().time()
            await writer.flush()  # cuts the wait short
            assert asyncio.get_running_loop().time() - t0 < 0.15
            assert store.commits - before == 2 and await store.message_count() == 6
        finally:
            await writer.close()
            await store.close()
        with pytest.raises(ValueError, match="coalesce_ms"):
            StoreWriter(store, coalesce_ms=-1)

    run(go())


def test_submits_during_a_flush_form_the_next_commit(tmp_path):
    async def go():
        store = await _new_store(tmp_path / "n.db")
        writer = StoreWriter(store)
        try:
            before = store.commits
            writer.submit("room", messages=[_msg(0)])
            await asyncio.sleep(0)  # the flush task starts and hands its batch to the database thread
            for i in range(1, 300):
                writer.submit("room", messages=[_msg(i)])
            await writer.flush()
            assert store.commits - before == 2
            assert writer.flushes == 2 and writer.max_batches_per_flush == 299
            # turns with awaits between submits each commit on their own
            for i in range(300, 303):
                writer.submit("room", messages=[_msg(i)])
                await writer.flush()
            assert store.commits - before == 5
            assert await store.message_count() == 303
        finally:
            await writer.close()
            await store.close()

    run(go())


def test_a_failing_flush_surfaces_its_error(tmp_path):
    seen = []

    async def go():
        store = await _new_store(tmp_path / "n.db")
        writer = StoreWriter(store, on_error=seen.append)
        try:
            writer.submit("room", messages=[_msg(1)])
            writer.submit("no-such-channel", messages=[_msg(2)])  # fails inside the transaction
            with pytest.raises(WriterFailedError) as info:
                await writer.flush()
            assert isinstance(info.value.__cause__, StoreError) and "unknown channel" in str(info.value)
            assert isinstance(writer.error, StoreError)
            # callback got it too
            assert len(seen) == 1 and isinstance(seen[0], WriterFailedError)
            # the whole batch was rolled back (the good row was in the same transaction)
            assert await store.message_count() == 0
            # it stays failed: submit and flush raise until reset()
            with pytest.raises(WriterFailedError):
                writer.submit("room", messages=[_msg(3)])
            with pytest.raises(WriterFailedError):
                await writer.flush()
            writer.reset()
            writer.submit("room", messages=[_msg(4)])
            await writer.flush()
            assert await store.message_count() == 1
        finally:
            await writer.close()
            await store.close()

    run(go())


def test_background_failure_without_a_waiter_is_raised_by_the_next_submit(tmp_path):
    async def go():
        store = await _new_store(tmp_path / "n.db")
        errors = []
        writer = StoreWriter(store, on_error=errors.append)
        try:
            writer.submit("room", [("no-such-op", "x", None)])
            for _ in range(50):  # let the background flush run and fail, nobody awaiting it
                await asyncio.sleep(0.01)
                if errors:
                    break
            assert errors and "unknown journal op" in str(errors[0])
            with pytest.raises(WriterFailedError, match="unknown journal op"):
                writer.submit("room", messages=[_msg(1)])
        finally:
            await store.close()

    run(go())


def test_submit_checks_rows_up_front_and_needs_the_loop(tmp_path):
    async def go():
        store = await _new_store(tmp_path / "n.db")
        writer = StoreWriter(store)
        try:
            with pytest.raises(ValueError, match="unknown event kind"):
                writer.submit("room", events=[EventRow("bogus", 1)])
            assert writer.error is None and writer.pending == 0
            await writer.close()
            with pytest.raises(StoreError, match="closed"):
                writer.submit("room", messages=[_msg(1)])
        finally:
            await store.close()

    run(go())
    with pytest.raises(RuntimeError):  # submit() belongs to the event loop's thread
        StoreWriter(object()).submit("room")
