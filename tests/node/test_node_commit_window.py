"""A node holds what it receives back for a commit with more (NodeConfig.commit_within_ms), and commits it before
it publishes anything: no frame acknowledges a message the node's database does not hold yet."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest
from node_helpers import FAST, run, start
from run_until import until

from sdschat.crypto import ChannelKey
from sdschat.node import Node, NodeConfig, node_channel_config
from sdschat.node import events as ev
from sdschat.node.config import COMMIT_WITHIN_MS

pytestmark = pytest.mark.timeout(60)


def _stored(db, mid: str) -> bool:
    conn = sqlite3.connect(db)
    try:
        return conn.execute("SELECT 1 FROM messages WHERE message_id = ?", (mid,)).fetchone() is not None
    finally:
        conn.close()


def test_a_received_message_waits_for_the_commit_window_but_is_durable_before_it_is_acknowledged(
    node_mosquitto, tmp_path
) -> None:
    key = ChannelKey.generate("commit-window")
    url = node_mosquitto.url
    db = tmp_path / "alice.db"

    async def scenario():
        bob = await start("bob", key, tmp_path, url)
        # a window far longer than the test: only a publish can make alice commit what she received
        config = NodeConfig("alice", key, db, url, channel_config=node_channel_config(**FAST), commit_within_ms=60_000)
        alice = await Node.start(config)
        try:
            await asyncio.sleep(0.5)
            await alice.drain_outbox()
            await alice.writer.flush()
            mid = await bob.send_text("hello alice")
            for _ in range(200):
                if any(m.message_id == mid for m in alice.messages()):
                    break
                await asyncio.sleep(0.01)
            assert any(m.message_id == mid for m in alice.messages())
            held = alice.writer.pending > 0 and not _stored(db, mid)
            # alice acknowledges it (a delayed-ack sync): bob sees the acknowledgement
            for _ in range(500):
                if any(m.message_id == mid and m.state == ev.ACKNOWLEDGED for m in bob.messages()):
                    break
                await asyncio.sleep(0.02)
            assert any(m.message_id == mid and m.state == ev.ACKNOWLEDGED for m in bob.messages())
            assert _stored(db, mid)  # committed before the frame that acknowledged it went out
            assert held  # and it was held back until then
        finally:
            await alice.stop()
            await bob.stop()

    run(scenario())


def test_by_default_a_burst_of_received_lines_is_written_in_a_few_commits(node_mosquitto, tmp_path) -> None:
    """The default window (COMMIT_WITHIN_MS): 30 lines arriving in a burst while the node sends nothing are
    written in a few transactions, not one each, and every one of them is durable once the writer flushed."""
    key = ChannelKey.generate("commit-burst")
    url = node_mosquitto.url

    async def scenario():
        bob = await start("bob", key, tmp_path, url)
        alice = await start("alice", key, tmp_path, url)
        assert alice.config.commit_within_ms == COMMIT_WITHIN_MS > 0
        try:
            await asyncio.sleep(0.5)
            await alice.drain_outbox()
            await alice.writer.flush()
            before = alice.store.commits
            mids = [await bob.send_text(f"line {i}") for i in range(30)]
            await until(lambda: {m.message_id for m in alice.messages()} >= set(mids), 5, "the 30 lines at alice")
            await alice.writer.flush()
            commits = alice.store.commits - before
            assert all(_stored(tmp_path / "alice.db", mid) for mid in mids)
            # one a line without the window (every loop turn commits); here a handful (the bursts the window
            # gathers, and a sync alice publishes, which commits first)
            assert commits <= 10, commits
        finally:
            await alice.stop()
            await bob.stop()

    run(scenario())
