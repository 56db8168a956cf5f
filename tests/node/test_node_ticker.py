"""The node's ticker looks at the engine's deadlines when they are due, not once a frame: a frame wakes it only
when it brings a deadline sooner than its next look (Node.wake)."""

from __future__ import annotations

import asyncio

import pytest
from node_helpers import run, start

from sdschat.crypto import ChannelKey
from sdschat.node import events as ev

pytestmark = pytest.mark.timeout(60)


def test_a_burst_of_frames_costs_a_few_ticker_turns_and_is_still_acknowledged_on_time(node_mosquitto, tmp_path) -> None:
    key = ChannelKey.generate("ticker")
    url = node_mosquitto.url

    async def scenario():
        # the node's delayed acks (300 ms + 0-700 ms) and a long quiet interval: the deadlines a burst brings are
        # one owed acknowledgement, whatever the number of frames
        alice = await start("alice", key, tmp_path, url, sync_interval_ms=30_000, sync_jitter_ms=1_000)
        bob = await start("bob", key, tmp_path, url, sync_interval_ms=30_000, sync_jitter_ms=1_000)
        try:
            for _ in range(300):
                if len(alice.messages()) >= 2 and len(bob.messages()) >= 2:  # (both joins)
                    break
                await asyncio.sleep(0.02)
            await asyncio.sleep(1.5)  # the joins' acknowledgements are out
            frames0, turns0 = alice.counters["received_frames"], alice.ticker_turns
            mids = [await bob.send_text(f"line {i}") for i in range(40)]
            for _ in range(500):
                if {m.message_id for m in alice.messages()} >= set(mids):
                    break
                await asyncio.sleep(0.01)
            frames, turns = alice.counters["received_frames"] - frames0, alice.ticker_turns - turns0
            assert frames >= 40
            assert turns <= frames // 3, (turns, frames)  # (one a frame before: every frame woke the ticker)
            # and the owed acknowledgement still goes out when due: bob sees every line acknowledged
            for _ in range(300):
                if all(m.state == ev.ACKNOWLEDGED for m in bob.messages() if m.message_id in mids):
                    break
                await asyncio.sleep(0.02)
            assert all(m.state == ev.ACKNOWLEDGED for m in bob.messages() if m.message_id in mids)
        finally:
            await alice.stop()
            await bob.stop()

    run(scenario())
