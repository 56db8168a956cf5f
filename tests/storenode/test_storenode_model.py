"""The simulator's store model (``sdschat/sim/stores.py``) against the real store node and node, on the same small
scenarios: the same gaps are filled, from the store, and nothing by SDS-R.

Two members and a store. (1) A gap: bob loses three of alice's messages while connected, then the next one
arrives. (2) An absence: bob is offline while alice sends five, then comes back. The real run uses nodes over
mosquitto and ``sdschat store``'s service; the model runs the same sends, losses and absence in a simulation
(the copies to bob dropped frame by frame, the absence scheduled as churn).
"""

from __future__ import annotations

import asyncio

import pytest
from node_helpers import log_of, run, settle, start

from sdschat.crypto import ChannelKey
from sdschat.node import events as ev
from sdschat.sim import SimParams
from sdschat.sim.clock import Clock
from sdschat.sim.plan import Plan
from sdschat.sim.schedule import INF
from sdschat.sim.shard import Shard
from sdschat.sim.workers import run_alone
from sdschat.storenode import StoreNode

pytestmark = pytest.mark.timeout(120)

# SDS-R slow enough that only the store can fill a gap; no resends that could fill it first
NODE_TIMINGS = dict(
    repair_t_min_ms=10_000,
    repair_t_max_ms=20_000,
    resend_unacknowledged_ms=60_000,
    resend_possibly_acknowledged_ms=60_000,
)
SIM_TIMINGS = {
    "repair_t_min_ms": 10_000,
    "repair_t_max_ms": 20_000,
    "resend_unacknowledged_ms": 60_000,
    "resend_possibly_acknowledged_ms": 60_000,
}


class _Absence:
    """A churn timeline with one absence of member ``who``: offline at ``off``, back at ``on``."""

    def __init__(self, who: int, off: int, on: int) -> None:
        self.who, self.off, self.on = who, off, on

    def initially_offline(self, r: int) -> bool:
        return False

    def next_toggle(self, r: int, t: int, online: bool) -> int:
        if r != self.who:
            return INF
        return self.off if online and t < self.off else (self.on if not online and t < self.on else INF)


def model(sends: int, lost_to_bob: set[int] = frozenset(), absence: tuple[int, int] | None = None) -> dict:
    """Alice (member 0) sends ``sends`` messages 1 s apart; bob (member 1) loses the copies of the messages
    numbered in ``lost_to_bob`` (their first frames) or is away for ``absence`` (ms). What bob got and how."""
    p = SimParams(
        participants=2, messages=sends, latency_ms=(20, 40), stores=1, seed=1, overrides=SIM_TIMINGS, horizon_ms=60_000
    )
    times = [1_000 * (k + 1) for k in range(sends)]
    plan = Plan(times, [0] * sends, times[-1])
    shard = Shard(p, plan)
    lost_mids: set[str] = set()
    ingest = shard.ingest_one

    def ingest_one(fm):
        r, c, t, data, reason, mid, loss, dup = fm
        if r == 0 and reason == "message" and (t // 1_000 - 1) in lost_to_bob:
            lost_mids.add(mid)
            fm = (r, c, t, data, reason, mid, 1.0, dup)  # (two members: bob is the only receiver)
        ingest(fm)

    shard.ingest_one = ingest_one
    if absence is not None:  # (Shard.start schedules the toggles it gives)
        shard.churning = True
        shard.timeline = _Absence(1, *absence)
    run_alone(shard, Clock(p, plan, 0))
    bob = shard.chans[1]
    sent = [m for m in shard.chans[0].log]
    return {
        "order": [sent.index(m) for m in bob.log],
        "from_store": shard.counts.get("store_delivered", 0),
        "sdsr": bob.stats.get("repairs_requested", 0),
        "requests": shard.counts.get("store_requests", 0),
        "lost_numbers": sorted(sent.index(m) for m in lost_mids),
        "catch_ups": shard.counts.get("store_catch_ups", 0),
    }


def test_a_gap_is_filled_from_the_store_alike_in_the_model_and_by_real_nodes(store_mosquitto, tmp_path):
    lost = {1, 2, 3}
    m = model(5, lost_to_bob=lost)
    assert m["lost_numbers"] == [1, 2, 3]
    assert m["order"] == [0, 1, 2, 3, 4]  # everything, in order
    # delivered from the store's answer: the three, and the message that waited behind them
    assert m["from_store"] == 4 and m["sdsr"] == 0 and m["requests"] == 1  # one request for the three ids

    async def main():
        key = ChannelKey.generate("model-gap")
        store = await StoreNode.start(store_mosquitto.url, tmp_path / "store.db")
        a = await start("alice", key, tmp_path, store_mosquitto.url, **NODE_TIMINGS)
        b = await start("bob", key, tmp_path, store_mosquitto.url, **NODE_TIMINGS)
        repaired = []
        b.add_listener(lambda e: repaired.append(e) if isinstance(e, ev.MessageRepaired) else None)
        try:
            ids = [await a.send_text("m0")]
            await settle([a, b], 1)
            b.set_impairment(loss_in=1.0)  # connected: a plain gap, no catch-up
            for i in (1, 2, 3):
                ids.append(await a.send_text(f"m{i}"))
            while store.counters["stored"] < 4:
                await asyncio.sleep(0.02)
            await asyncio.sleep(0.1)
            b.set_impairment(loss_in=0.0)
            ids.append(await a.send_text("m4"))
            await settle([a, b], 5, timeout=20)
            order = [ids.index(x) for x in log_of(b)]
            via = sorted(ids.index(e.message_id) for e in repaired if e.via == "store")
            return order, via, b.store_counters["delivered"], b.channel.stats["repairs_requested"]
        finally:
            await a.stop()
            await b.stop()
            await store.stop()

    order, via_store, from_store, sdsr = run(main(), 60)
    assert order == m["order"]
    assert via_store == sorted(lost) == m["lost_numbers"]  # the same gaps, filled from the store
    assert from_store == m["from_store"]
    assert sdsr == m["sdsr"] == 0


def test_an_absence_is_caught_up_from_the_store_alike_in_the_model_and_by_real_nodes(store_mosquitto, tmp_path):
    m = model(7, absence=(1_500, 6_500))  # away while messages 1..5 are sent
    assert m["order"] == list(range(7)) and m["catch_ups"] == 1
    assert m["from_store"] == 5 and m["sdsr"] == 0

    async def main():
        key = ChannelKey.generate("model-absence")
        store = await StoreNode.start(store_mosquitto.url, tmp_path / "store.db")
        a = await start("alice", key, tmp_path, store_mosquitto.url, **NODE_TIMINGS)
        b = await start("bob", key, tmp_path, store_mosquitto.url, **NODE_TIMINGS)
        try:
            ids = [await a.send_text("m0")]
            await settle([a, b], 1)
            b.set_impairment(offline=True)
            for i in range(1, 6):
                ids.append(await a.send_text(f"m{i}"))
            while store.counters["stored"] < 6:
                await asyncio.sleep(0.02)
            b.set_impairment(offline=False)
            while len(log_of(b)) < 6:
                await asyncio.sleep(0.02)
            ids.append(await a.send_text("m6"))
            await settle([a, b], 7, timeout=20)
            return (
                [ids.index(x) for x in log_of(b)],
                b.store_counters["delivered"],
                b.channel.stats["repairs_requested"],
                b.store_counters["catch_ups"],
            )
        finally:
            await a.stop()
            await b.stop()
            await store.stop()

    order, from_store, sdsr, catch_ups = run(main(), 60)
    assert order == m["order"]
    assert from_store == m["from_store"] == 5  # the same five messages, from the store
    assert sdsr == m["sdsr"] == 0
    assert catch_ups >= m["catch_ups"]
    assert m["lost_numbers"] == []  # (nothing dropped: the absence alone)
