"""Real nodes over real brokers converge to identical logs under loss, duplication and reordering."""

from __future__ import annotations

import asyncio

import pytest
from node_helpers import log_of, run, settle, shown_ids, start

from sdschat.crypto import ChannelKey
from sdschat.node import events as ev

pytestmark = pytest.mark.timeout(120)


def test_three_nodes_with_30_percent_loss_converge(broker, tmp_path):
    async def main():
        key = ChannelKey.generate("lossy")
        lossy = dict(loss_in=0.3, loss_out=0.3)
        nodes = [await start(n, key, tmp_path, broker.url, seed=i, impairment=lossy) for i, n in enumerate("abc")]
        try:
            for i in range(8):
                for n in nodes:
                    await n.send_text(f"{n.nick} says {i}")
                await asyncio.sleep(0.05)
            await settle(nodes, 24, timeout=60)
            logs = [log_of(n) for n in nodes]
            assert logs[0] == logs[1] == logs[2]
            texts = [m.text for m in nodes[0].messages()]
            assert sorted(texts) == sorted(f"{c} says {i}" for c in "abc" for i in range(8))
            # every own message ended acknowledged, every other one received
            for n in nodes:
                states = {m.state for m in n.messages() if m.own}
                assert states == {ev.ACKNOWLEDGED}, states
                assert {m.state for m in n.messages() if not m.own} == {ev.RECEIVED}
            assert sum(n.channel.stats["resends"] + n.channel.stats["repairs_served"] for n in nodes) > 0
            assert sum(n.transport.counters.dropped_in + n.transport.counters.dropped_out for n in nodes) > 0
        finally:
            for n in nodes:
                await n.stop()

    run(main())


def test_duplication_and_reordering_deliver_each_message_once(broker, tmp_path):
    async def main():
        key = ChannelKey.generate("jittery")
        bad = dict(duplicate=0.5, delay_ms=20, jitter_ms=20)
        a = await start("a", key, tmp_path, broker.url, seed=1, impairment=bad)
        b = await start("b", key, tmp_path, broker.url, seed=2, impairment=bad)
        shown = shown_ids(b)
        try:
            for i in range(15):
                await a.send_text(f"m{i}")
            await settle([a, b], 15)
            assert log_of(a) == log_of(b)
            assert len(shown) == len(set(shown)) == 15
            assert b.channel.stats["duplicates"] > 0
        finally:
            await a.stop()
            await b.stop()

    run(main())


def test_offline_sends_queue_and_go_out_when_back_online(broker, tmp_path):
    async def main():
        key = ChannelKey.generate("offline")
        a = await start("a", key, tmp_path, broker.url)
        b = await start("b", key, tmp_path, broker.url)
        try:
            a.set_impairment(offline=True)
            for i in range(3):
                await a.send_text(f"while offline {i}")
            await asyncio.sleep(0.7)
            assert log_of(b) == []
            assert all(m.state != ev.ACKNOWLEDGED for m in a.messages())
            a.set_impairment(offline=False)
            await settle([a, b], 3)
            assert log_of(a) == log_of(b)
        finally:
            await a.stop()
            await b.stop()

    run(main())


def test_gap_is_shown_at_once_then_repaired(tmp_path, node_mosquitto):
    """A receiver that missed a message shows the next one at once with a gap marker, then the repair."""

    async def main():
        key = ChannelKey.generate("gap")
        a = await start("a", key, tmp_path, node_mosquitto.url)
        b = await start("b", key, tmp_path, node_mosquitto.url)
        seen: list = []
        b.add_listener(seen.append)
        try:
            b.set_impairment(loss_in=1.0)
            first = await a.send_text("you will miss me")
            await asyncio.sleep(0.2)
            b.set_impairment(loss_in=0.0)
            second = await a.send_text("but not me")
            await settle([a, b], 2)
            kinds = [type(e).__name__ for e in seen]
            gap = next(e for e in seen if isinstance(e, ev.GapOpened))
            assert gap.message_id == second and first in gap.missing
            shown = [e.message.message_id for e in seen if isinstance(e, ev.MessageShown)]
            assert shown.index(second) < shown.index(first)  # shown before its dependency arrived
            assert any(isinstance(e, ev.GapClosed) and e.message_id == second and e.lost == () for e in seen)
            repaired = next(e for e in seen if isinstance(e, ev.MessageRepaired))
            assert repaired.message_id == first and repaired.via in ("resend", "sds-r")
            assert kinds.index("GapOpened") < kinds.index("GapClosed")
            assert [m.message_id for m in b.messages()] == [first, second]
        finally:
            await a.stop()
            await b.stop()

    run(main())
