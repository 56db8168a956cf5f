"""Property: N engines over a lossy, duplicating, reordering broadcast network in
virtual time converge to identical, complete logs once the network heals."""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sds_helpers import CHANNEL, Network

from sdschat.sds import ChannelConfig, MessageChannel, RepairConfig

SEND_PHASE_MS = 3_000
HEAL_AT_MS = 3_500
CONVERGE_WITHIN_MS = 30_000

CONFIG = ChannelConfig(
    causal_history_size=10,  # DESIGN.md, "Protocol pitfalls": K=2 can leave gaps nobody notices
    bloom_capacity=256,
    bloom_error_rate=0.01,
    possible_acks_threshold=2,
    resend_unacknowledged_ms=300,
    resend_possibly_acknowledged_ms=900,
    resend_backoff=1.5,
    resend_max_interval_ms=2_000,
    sync_interval_ms=500,
    sync_jitter_ms=250,
    lost_after_ms=10**9,  # nothing may be given up: every message must arrive
    repair=RepairConfig(t_min_ms=100, t_max_ms=600),
)


@st.composite
def scenarios(draw):
    n = draw(st.integers(2, 5))
    names = [f"p{i}" for i in range(n)]
    sends = []
    for name in names:
        for k in range(draw(st.integers(0, 8))):
            sends.append((draw(st.integers(0, SEND_PHASE_MS)), name, k))
    if not sends:
        sends.append((0, names[0], 0))
    return dict(
        names=names,
        sends=sends,
        seed=draw(st.integers(0, 2**32 - 1)),
        loss=draw(st.floats(0.0, 0.4)),
        dup=draw(st.floats(0.0, 0.3)),
        jitter=draw(st.integers(0, 300)),
        echo=draw(st.booleans()),
    )


def run(sc):
    nodes = {n: MessageChannel(CHANNEL, n, CONFIG, 0) for n in sc["names"]}
    net = Network(
        nodes,
        latency=10,
        rng=random.Random(sc["seed"]),
        loss=sc["loss"],
        dup=sc["dup"],
        jitter=sc["jitter"],
        echo=sc["echo"],
    )
    for t, name, k in sc["sends"]:
        net.schedule_send(t, name, f"{name}/{k}/{t}".encode())
    net.run_until(HEAL_AT_MS)
    net.loss = 0.0  # the network heals; duplicates and reordering go on

    expected = sorted(net.sent)
    assert len(expected) == len(sc["sends"])

    def converged():
        first = next(iter(nodes.values())).log
        return sorted(first) == expected and all(ch.log == first for ch in nodes.values())

    deadline = HEAL_AT_MS + CONVERGE_WITHIN_MS
    checkpoint = HEAL_AT_MS
    while checkpoint < deadline and not converged():
        checkpoint += 250
        net.run_until(checkpoint)
    return nodes, net, expected


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_logs_converge_identical_and_complete(sc):
    nodes, net, expected = run(sc)
    for name, ch in nodes.items():
        assert ch.check_invariants() == [], name
    missing = {name: sorted(set(expected) - set(ch.log)) for name, ch in nodes.items()}
    assert all(not m for m in missing.values()), f"incomplete logs after {CONVERGE_WITHIN_MS} ms healed: {missing}"
    logs = [ch.log for ch in nodes.values()]
    assert all(log == logs[0] for log in logs)
    assert sorted(logs[0]) == expected
    for ch in nodes.values():
        assert ch.incoming_ids == [] and ch.missing_ids == []
