"""Participants with a store node: offline catch-up, gap filling by hint, and life without a store."""

from __future__ import annotations

import asyncio
import time

import pytest
from node_helpers import log_of, run, settle, start, until

from sdschat.crypto import ChannelKey
from sdschat.node import events as ev
from sdschat.storenode import StoreNode

pytestmark = pytest.mark.timeout(90)

# the node's real SDS-R timings (T_min 2 s) and no resends that could fill gaps before the store does
SLOW = dict(
    repair_t_min_ms=2_000,
    repair_t_max_ms=10_000,
    resend_unacknowledged_ms=60_000,
    resend_possibly_acknowledged_ms=60_000,
)


def test_offline_participant_catches_up_200_messages_from_the_store(store_mosquitto, tmp_path):
    async def main():
        name = "catchup-secret-channel"
        key = ChannelKey.generate(name)
        store = await StoreNode.start(store_mosquitto.url, tmp_path / "store.db")
        a = await start("alice-nick", key, tmp_path, store_mosquitto.url, **SLOW)
        b = await start("bob-nick", key, tmp_path, store_mosquitto.url, **SLOW)
        repaired = []
        b.add_listener(lambda e: repaired.append(e) if isinstance(e, ev.MessageRepaired) else None)
        try:
            await a.send_text("plaintext-marker-hello")
            await settle([a, b], 1)
            b.set_impairment(offline=True)
            for i in range(200):
                await a.send_text(f"plaintext-marker-{i:04d}")
            await until(lambda: store.counters["stored"] >= 201, 10, "the store holding all 201")
            assert len(log_of(b)) == 1
            t0 = time.monotonic()
            b.set_impairment(offline=False)
            await until(lambda: len(log_of(b)) == 201, 10, "bob caught up to 201")
            caught_up = time.monotonic() - t0
            await settle([a, b], 201, timeout=20)
            assert log_of(b) == log_of(a)  # in order
            assert [m.text for m in b.messages()][1:] == [f"plaintext-marker-{i:04d}" for i in range(200)]
            assert b.store_counters["delivered"] == 200, b.store_counters
            assert b.channel.stats["repairs_requested"] == 0
            assert a.channel.stats["repairs_served"] == 0 and b.channel.stats["repairs_served"] == 0
            assert a.channel.stats["repair_requests_received"] == 0
            assert caught_up < 5, caught_up
        finally:
            await a.stop()
            await b.stop()
            await store.stop()
        # the store's database holds ciphertext only
        raw = b"".join(p.read_bytes() for p in tmp_path.glob("store.db*"))
        assert len(raw) > 200 * 1000
        for secret in (
            name.encode(),
            b"plaintext-marker",
            b"alice-nick",
            b"bob-nick",
            a.participant_id.encode(),
            a.participant_id[:16].encode(),
            key.channel_id.encode(),
            key.channel_binding,
        ):
            assert secret not in raw, secret
        assert key.topic.encode() in raw  # indexed by topic (which names no channel)

    run(main(), 80)


async def a_lost_message(url, tmp_path, channel: str):
    """A store node, alice and bob; bob (connected: no catch-up, a plain gap) misses alice's second message,
    which the store keeps. Returns (store, a, b, lost id, bob's gap and repair events with their times)."""
    key = ChannelKey.generate(channel)
    store = await StoreNode.start(url, tmp_path / "store.db")
    a = await start("a", key, tmp_path, url, **SLOW)
    b = await start("b", key, tmp_path, url, **SLOW)
    seen = []
    b.add_listener(
        lambda e: seen.append((time.monotonic(), e)) if isinstance(e, (ev.GapOpened, ev.MessageRepaired)) else None
    )
    await a.send_text("one")
    await settle([a, b], 1)
    b.set_impairment(loss_in=1.0)
    lost = await a.send_text("lost on the way")
    await until(lambda: store.counters["stored"] >= 2, 10, "the store holding 2")
    return store, a, b, lost, seen


def filled_from_the_store(seen, lost) -> float:
    """The one repair bob saw is ``lost``, from the store: seconds from the gap showing to its filling."""
    gaps = [t for t, e in seen if isinstance(e, ev.GapOpened) and lost in e.missing]
    fills = [(t, e) for t, e in seen if isinstance(e, ev.MessageRepaired)]
    assert gaps and [e.message_id for _, e in fills] == [lost] and fills[0][1].via == "store"
    return fills[0][0] - gaps[0]


def test_gap_with_a_hint_is_filled_from_the_store_before_t_req(store_mosquitto, tmp_path):
    async def main():
        store, a, b, lost, seen = await a_lost_message(store_mosquitto.url, tmp_path, "hinted")
        try:
            await asyncio.sleep(0.1)
            b.set_impairment(loss_in=0.0)
            await a.send_text("after the gap")
            await settle([a, b], 3, timeout=20)
            assert log_of(a) == log_of(b)
            assert filled_from_the_store(seen, lost) < 1.5  # T_req is at least T_min = 2 s after the gap showed
            assert b.channel.stats["repairs_requested"] == 0 and a.channel.stats["repairs_served"] == 0
            assert b.store_counters["repaired"] == 1
        finally:
            await a.stop()
            await b.stop()
            await store.stop()

    run(main(), 60)


def test_a_gap_is_filled_by_the_store_that_has_it_even_when_another_answers_first(store_mosquitto, tmp_path):
    # two store nodes; the one that answers first never saw the lost message (it started after it): the
    # second's reply, later, still fills the gap (the node used to keep only the first reply and wait for SDS-R)
    async def main():
        full, a, b, lost, seen = await a_lost_message(store_mosquitto.url, tmp_path, "two-stores")
        late = None
        try:
            late = await StoreNode.start(store_mosquitto.url, tmp_path / "late.db")
            answer = full.transport.publish

            async def slow_answer(topic, payload, *args, **kw):  # the store that has it answers second
                await asyncio.sleep(0.4)
                return await answer(topic, payload, *args, **kw)

            full.transport.publish = slow_answer
            b.set_impairment(loss_in=0.0)
            await a.send_text("after the gap")
            await settle([a, b], 3, timeout=20)
            assert log_of(a) == log_of(b)
            assert late.counters["answered"] >= 1 and late.counters["served_envelopes"] == 0
            assert filled_from_the_store(seen, lost) < 1.5  # before SDS-R could (T_min 2 s)
            assert b.store_counters["late_answers"] == 1 and b.store_counters["repaired"] == 1
            assert b.channel.stats["repairs_requested"] == 0 and a.channel.stats["repairs_served"] == 0
        finally:
            await a.stop()
            await b.stop()
            await full.stop()
            if late is not None:
                await late.stop()

    run(main(), 60)


def test_node_started_after_a_gap_catches_up_from_the_store(store_mosquitto, tmp_path):
    async def main():
        key = ChannelKey.generate("restarted")
        store = await StoreNode.start(store_mosquitto.url, tmp_path / "store.db")
        a = await start("a", key, tmp_path, store_mosquitto.url, **SLOW)
        b = await start("b", key, tmp_path, store_mosquitto.url, **SLOW)
        try:
            await a.send_text("before")
            await settle([a, b], 1)
            await b.stop()
            for i in range(20):
                await a.send_text(f"while b was away {i}")
            await until(lambda: store.counters["stored"] >= 21, 10, "the store holding 21")
            b = await start("b", key, tmp_path, store_mosquitto.url, **SLOW)
            await settle([a, b], 21, timeout=20)
            assert log_of(a) == log_of(b)
            assert b.store_counters["delivered"] == 20 and b.channel.stats["repairs_requested"] == 0
        finally:
            await a.stop()
            await b.stop()
            await store.stop()

    run(main(), 60)


def test_without_a_store_sds_r_still_repairs_and_store_requests_time_out_quietly(store_mosquitto, tmp_path):
    async def main():
        key = ChannelKey.generate("no-store")
        fast_repair = dict(SLOW, repair_t_min_ms=300, repair_t_max_ms=1_500)
        a = await start("a", key, tmp_path, store_mosquitto.url, **fast_repair)
        b = await start("b", key, tmp_path, store_mosquitto.url, **fast_repair)
        b.config.store_timeout_s = 0.5
        repaired = []
        b.add_listener(lambda e: repaired.append(e) if isinstance(e, ev.MessageRepaired) else None)
        try:
            await a.send_text("one")
            await settle([a, b], 1)
            b.set_impairment(loss_in=1.0)
            lost = await a.send_text("lost on the way")
            await asyncio.sleep(0.2)
            b.set_impairment(loss_in=0.0)
            await a.send_text("after the gap")
            await settle([a, b], 3, timeout=20)
            assert log_of(a) == log_of(b)
            assert [(e.message_id, e.via) for e in repaired] == [(lost, "sds-r")]
            assert b.channel.stats["repairs_requested"] >= 1 and a.channel.stats["repairs_served"] >= 1
            await until(lambda: b.store_counters["timeouts"] >= 1, 3, "a store query timing out")
            assert b.store_counters["answers"] == 0 and b.failure is None
        finally:
            await a.stop()
            await b.stop()

    run(main(), 60)


def test_the_inspector_tells_a_gap_filled_from_the_store(store_mosquitto, tmp_path):
    """node.inspect and node.gaps on the message the store filled: first copy from the store, gap closed by it."""

    async def main():
        key = ChannelKey.generate("inspected")
        store = await StoreNode.start(store_mosquitto.url, tmp_path / "store.db")
        a = await start("a", key, tmp_path, store_mosquitto.url, **SLOW)
        b = await start("b", key, tmp_path, store_mosquitto.url, **SLOW)
        try:
            await a.send_text("one")
            await settle([a, b], 1)
            b.set_impairment(loss_in=1.0)
            lost = await a.send_text("lost on the way")
            await until(lambda: store.counters["stored"] >= 2, 10, "the store holding 2")
            await asyncio.sleep(0.1)
            b.set_impairment(loss_in=0.0)
            await a.send_text("after the gap")
            await settle([a, b], 3, timeout=20)
            return lost, await b.inspect(lost), await b.gaps()
        finally:
            await a.stop()
            await b.stop()
            await store.stop()

    lost, insp, gaps = run(main(), 60)
    assert [s.kind for s in insp.steps] == [
        "missing",
        "store_query",
        "repair_cancelled",
        "received",
        "delivered",
        "store_answer",
    ]
    assert [s.text for s in insp.steps[2:]] == [
        "your repair request was called off: it came (from the store node)",
        "first copy from the store node",
        "delivered in causal order, repaired through the store node",
        "the store node had it",
    ]
    assert [(g.message_id, g.how) for g in gaps] == [(lost, "store")]
    assert [s.kind for s in gaps[0].steps] == ["store_query", "repair_cancelled", "store_answer"]
    assert gaps[0].hint and insp.steps[1].detail["hint"] == gaps[0].hint  # asked by the hint the history carried
