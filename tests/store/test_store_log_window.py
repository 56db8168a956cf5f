"""A windowed engine log on a real SQLite file: the database keeps every row; a store reads the window's rows
and the older ids as an archive; a full save of a windowed state deletes nothing."""

import asyncio
import json

from sdschat.sds import ChannelConfig, Delivered, MessageChannel
from sdschat.store import Store

CHANNEL = "chan"
WINDOW = 20
CONFIG = ChannelConfig(
    log_window=WINDOW, sync_interval_ms=10**9, resend_unacknowledged_ms=10**9, resend_possibly_acknowledged_ms=10**9
)


def _bob_frames(n: int) -> list[tuple[str, bytes]]:
    bob = MessageChannel(CHANNEL, "bob", ChannelConfig(), 0)
    return [(out.message_id, out.data) for out in (bob.send(f"m{i}".encode(), i + 1) for i in range(n))]


async def _journaled(path, frames) -> tuple[MessageChannel, Store]:
    """Alice receives ``frames``, every journal batch applied to her database as a node does."""
    store = await Store.open(path)
    alice = MessageChannel(CHANNEL, "alice", CONFIG, 0, journal=True)
    await store.save_state(alice.snapshot(), json.dumps({}))
    alice.drain_journal()
    for i, (_, data) in enumerate(frames):
        alice.receive(data, 100 + i)
        await store.apply(CHANNEL, alice.drain_journal())
    return alice, store


def test_the_database_keeps_every_row_and_a_windowed_load_reads_the_newest(tmp_path):
    async def go():
        frames = _bob_frames(300)
        ids = [mid for mid, _ in frames]
        alice, store = await _journaled(tmp_path / "alice.db", frames)
        try:
            assert alice.log_size() == 300 and len(alice.log) < 100  # the engine evicted rows...
            whole = await store.load_state(CHANNEL)
            assert [r.message_id for r in whole.log] == ids and whole.log_archive is None  # ...the database none

            state = await store.load_state(CHANNEL, log_window=WINDOW)
            assert [r.message_id for r in state.log] == ids[-WINDOW:]
            assert len(state.log_archive) == 300 - WINDOW
            again = MessageChannel.restore(state, CONFIG)
            assert again.log_size() == 300 and all(mid in again for mid in ids)
            assert again.check_invariants() == []
            assert not any(isinstance(e, Delivered) for e in again.receive(frames[0][1], 1_000))  # a duplicate
            assert again.stats["duplicates"] == 1

            # a full save of the windowed state (what a node does after a failed write) deletes no log row
            await store.save_state(alice.snapshot(), json.dumps({}))
            assert [r.message_id for r in (await store.load_state(CHANNEL)).log] == ids
            # a log shorter than the window reads as it is
            assert (await store.load_state(CHANNEL, log_window=1_000)).log_archive is None
        finally:
            await store.close()

    asyncio.run(go())
