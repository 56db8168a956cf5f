"""Chaos, short: 5 bots, 30% loss each way, duplication, reordering, kill -9 x3, broker restart.

The same code as tests/harness/test_chaos_bots.py (longer runs, more messages); here fewer messages per bot.
"""

from __future__ import annotations

import chaos_bots as chaos
import pytest

pytestmark = pytest.mark.timeout(240)


def test_five_bots_converge_through_loss_kills_and_a_broker_restart(tmp_path):
    r = chaos.run(
        tmp_path,
        bots=5,
        count=16,
        interval=0.1,
        loss=0.3,
        duplicate=0.2,
        delay_ms=20,
        jitter_ms=20,
        kills=3,
        broker_restarts=1,
        seed=7,
        log=lambda *_: None,
    )
    detail = {k: r[k] for k in ("state", "exit_codes", "integrity", "sent", "delivered", "lost", "workdir")}
    assert r["kills"] == 3 and r["broker_restarts"] >= 1
    assert all(code == 0 for code in r["exit_codes"].values()), detail
    assert set(r["integrity"].values()) == {"ok"}, detail
    # every accepted message in every log, in the same order, nothing left waiting
    assert r["converged"], detail
    assert r["lost"] == 0 and r["same_order"], detail
    assert r["sent"] >= 4 * 16 + 1, detail  # the four others' all, and some of the victim's
    assert r["delivered"] == r["expected_deliveries"] == 4 * r["sent"], detail
    # the faults were real: frames had to be resent or repaired
    assert r["resent"] + r["repairs_served"] > 0, detail


def test_a_message_pushed_out_of_every_causal_history_window_is_still_recovered():
    """Engine level, deterministic (virtual time, no loss after the first frame).

    Found by tests/support/broker_faults.py (two bots bursting while a third is frozen): alice's message m reaches
    bob only after bob has sent 12 messages with later Lamport timestamps, so with a causal history of "the
    last 10 of the log by Lamport order" m never entered anyone's history; bob's bloom filter then
    acknowledged m to alice (a single sparse filter counted as certain), so alice never resent it. carol,
    who missed m's only broadcast, never learned it existed: no gap, no repair, no 'lost'. (Fixed in
    e6e5aac: the history names the most recent log additions, and one filter no longer acknowledges.)
    Every accepted message should end up in every log."""
    from sdschat.node import node_channel_config
    from sdschat.sds import MessageChannel, Outgoing

    fast = dict(
        repair_t_min_ms=300,
        repair_t_max_ms=1500,
        resend_unacknowledged_ms=400,
        resend_possibly_acknowledged_ms=1200,
        resend_max_interval_ms=3000,
        sync_interval_ms=2000,
        sync_jitter_ms=500,
    )
    cfg = node_channel_config(**fast)
    nodes = {n: MessageChannel("chan", n, cfg, 0) for n in ("alice", "bob", "carol")}

    def broadcast(sender, data, t, to=None):
        for name, ch in nodes.items():
            if name != sender and (to is None or name in to):
                ch.receive(data, t)

    m = nodes["alice"].send(b"alice: m", 1_000)  # lost on its way to carol, late on its way to bob
    for i in range(12):
        out = nodes["bob"].send(f"bob {i}".encode(), 1_001 + i)
        broadcast("bob", out.data, 1_001 + i)
    broadcast("alice", m.data, 1_020, to={"bob"})
    for t in range(1_030, 61_000, 10):  # a minute of a perfect network
        for name, ch in nodes.items():
            for e in ch.tick(t):
                if isinstance(e, Outgoing):
                    broadcast(name, e.data, t)
    carol = nodes["carol"]
    assert nodes["alice"].outgoing_ids == []  # alice considers m delivered
    recovered = m.message_id in carol.log
    assert recovered, (
        f"carol never got alice's message: missing {carol.missing_ids}, "
        f"lost {carol.stats['lost']}, log {len(carol.log)} of 13"
    )
