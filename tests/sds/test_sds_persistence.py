"""Persistence: snapshot()/restore() round trips and the mutation journal."""

from __future__ import annotations

import random

from sds_helpers import CHANNEL, Network, channel, frame, mids, of, quiet_config

from sdschat.sds import (
    ChannelState,
    Delivered,
    HistoryEntry,
    MessageChannel,
    RepairConfig,
    RepairScheduled,
)


def live_config(**kw):
    base = dict(
        bloom_capacity=16,  # rolls over during the scenarios
        bloom_error_rate=0.01,
        causal_history_size=3,
        resend_unacknowledged_ms=400,
        resend_possibly_acknowledged_ms=1_200,
        resend_backoff=1.5,
        resend_max_interval_ms=3_000,
        max_resends=6,
        sync_interval_ms=700,
        sync_jitter_ms=300,
        lost_after_ms=6_000,
        outgoing_buffer_size=8,
        incoming_buffer_size=6,
        repair=RepairConfig(t_min_ms=200, t_max_ms=1_500, cache_size=12, buffer_size=5),
    )
    base.update(kw)
    return quiet_config(**base)


def lossy_network(names, seed, cfg, *, journal=False, loss=0.3):
    nodes = {n: MessageChannel(CHANNEL, n, cfg, 0, journal=journal) for n in names}
    net = Network(nodes, latency=20, rng=random.Random(seed), loss=loss, dup=0.0, jitter=80)
    rng = random.Random(seed + 1)
    for n in names:
        for i in range(rng.randint(4, 9)):
            net.schedule_send(rng.randint(0, 6_000), n, f"{n}:{i}:{seed}".encode())
    return net


# ------------------------------------------------------------ snapshot/restore


def test_snapshot_restore_round_trip_is_identity():
    net = lossy_network(["alice", "bob", "carol"], 3, live_config())
    net.run_until(3_000)
    for ch in net.nodes.values():
        state = ch.snapshot()
        assert isinstance(state, ChannelState)
        again = MessageChannel.restore(state, ch.config)
        assert again.snapshot() == state
        assert again.log == ch.log and again.lamport_timestamp == ch.lamport_timestamp
        assert again.outgoing_ids == ch.outgoing_ids and again.incoming_ids == ch.incoming_ids
        assert again.bloom.to_bytes() == ch.bloom.to_bytes()
        assert again.open_gaps() == ch.open_gaps()
        assert again.check_invariants() == []


def test_open_gaps_name_what_each_waiting_message_waits_for_then_what_only_syncs_named():
    ch = channel("dave")
    ch.receive(frame("bob", "b3", lamport=3, history=[HistoryEntry("b2", None, "bob"), "b1"]), 10)
    ch.receive(frame("bob", "b4", lamport=4, history=["b3", HistoryEntry("b2", None, "bob")]), 11)
    ch.receive(frame("carol", "s1", lamport=5, history=[HistoryEntry("c9", None, "carol")], content=None), 12)
    assert ch.incoming_ids == ["b3", "b4"]
    assert ch.open_gaps() == [("b3", ("b1", "b2"), ("bob",)), ("b4", ("b2", "b3"), ("bob",)), ("", ("c9",), ("carol",))]
    ch.receive(frame("bob", "b1", lamport=1), 13)
    ch.receive(frame("bob", "b2", lamport=2, history=["b1"]), 14)
    assert ch.incoming_ids == [] and ch.open_gaps() == [("", ("c9",), ("carol",))]
    assert MessageChannel.restore(ch.snapshot(), ch.config).open_gaps() == ch.open_gaps()


def test_snapshot_is_detached_from_the_channel():
    a = channel("alice")
    a.send(b"one", 1)
    state = a.snapshot()
    a.send(b"two", 2)
    assert len(state.log) == 1 and len(a.snapshot().log) == 2


class Twin:
    """Drives an original channel and its restored copy with the same inputs and
    checks that they answer identically."""

    def __init__(self, original: MessageChannel, restored: MessageChannel):
        self.a, self.b = original, restored
        self.checked = 0

    def _same(self, ea, eb, what):
        assert ea == eb, f"{what}: original {ea!r} != restored {eb!r}"
        self.checked += 1
        return ea

    def next_deadline(self):
        return min(self.a.next_deadline(), self.b.next_deadline())

    def receive(self, data, now, retrieval_hint=None):
        return self._same(
            self.a.receive(data, now, retrieval_hint), self.b.receive(data, now, retrieval_hint), f"receive at {now}"
        )

    def tick(self, now):
        return self._same(self.a.tick(now), self.b.tick(now), f"tick at {now}")

    def send(self, content, now):
        return self._same(self.a.send(content, now), self.b.send(content, now), f"send at {now}")

    def __contains__(self, mid):
        return mid in self.a


def test_restored_channel_behaves_identically_afterwards():
    for seed in range(4):
        cfg = live_config()
        net = lossy_network(["alice", "bob", "carol"], 10 + seed, cfg)
        net.run_until(2_500)
        twins = {}
        for name, ch in list(net.nodes.items()):
            twins[name] = Twin(ch, MessageChannel.restore(ch.snapshot(), cfg))
            net.nodes[name] = twins[name]
        net.run_until(20_000)
        for name, tw in twins.items():
            assert tw.checked > 0
            assert tw.a.snapshot() == tw.b.snapshot(), name


def test_restore_keeps_the_sync_schedule():
    cfg = live_config(sync_jitter_ms=0)
    a = MessageChannel(CHANNEL, "alice", cfg, 0)
    assert a.tick(700) == []  # a sync was due, but there was nothing to say: the next one moves on
    again = MessageChannel.restore(a.snapshot(), cfg)
    assert again.next_deadline() == a.next_deadline()
    a.receive(frame("bob", "b1", lamport=1), 1_000)
    again.receive(frame("bob", "b1", lamport=1), 1_000)
    for t in range(1_000, 4_000, 50):
        assert a.tick(t) == again.tick(t)


def test_restored_channel_still_ignores_a_sync_seen_before_the_snapshot():
    """Sync frames are deduplicated by id ("a sync frame seen in the last 4,096
    sync ids is dropped"); a restart from a snapshot must not make an old sync
    frame, e.g. redelivered by the broker, new again: its repair requests would
    be acted on a second time."""
    a, b = channel("alice"), channel("bob")
    m = a.send(b"hello", 1)
    b.receive(m.data, 2)
    carrier = frame(
        "carol", "sync-carol-1", lamport=10, content=None, repair=[HistoryEntry(m.message_id, None, "alice")]
    )
    assert of(a.receive(carrier, 100), RepairScheduled)
    a.tick(100)  # alice answers at once
    assert a.receive(carrier, 101) == []  # a duplicate: ignored
    again = MessageChannel.restore(a.snapshot(), a.config)
    assert again.receive(carrier, 102) == []


def test_restore_with_buffered_message_that_has_a_retrieval_hint():
    b = channel("bob")
    b.receive(frame("alice", "m2", lamport=2, history=["m1"]), 1, retrieval_hint=b"envelope-hash")
    state = b.snapshot()
    assert state.incoming[0].retrieval_hint == b"envelope-hash"
    again = MessageChannel.restore(state, b.config)
    assert again.snapshot() == state
    events = again.receive(frame("alice", "m1", lamport=1), 2)
    assert mids(of(events, Delivered)) == ["m1", "m2"]
    assert again.log_entries()[1].retrieval_hint == b"envelope-hash"


# --------------------------------------------------------------------- journal


def replay(ops, base: ChannelState | None = None) -> dict:
    """Apply journal ops to plain tables keyed by message_id (what a store would do)."""
    t = {
        "lamport": base.lamport_timestamp if base else None,
        "log": {r.message_id: r for r in base.log} if base else {},
        "out": {r.message_id: r for r in base.outgoing} if base else {},
        "in": {r.message_id: r for r in base.incoming} if base else {},
        "missing": {r.entry.message_id: r for r in base.missing} if base else {},
        "lost": dict(base.lost) if base else {},
        "req": {r.entry.message_id: r for r in base.repair_requests} if base else {},
        "resp": dict(base.repair_responses) if base else {},
        "cache": {r.message_id: r for r in base.cache} if base else {},
        "bloom": list(base.bloom_ids) if base else [],
    }
    for op, key, value in ops:
        if op == "lamport":
            t["lamport"] = value
        elif op == "bloom":
            t["bloom"].append(key)
        elif op == "bloom-roll":
            t["bloom"] = t["bloom"][-value:] if value else []
        elif op.endswith("-"):
            del t[op[:-1]][key]
        else:
            t[op][key] = value
    return t


def as_tables(state: ChannelState) -> dict:
    return replay([], state)


def assert_replay_matches(ch: MessageChannel, ops, base=None):
    got, want = replay(ops, base), as_tables(ch.snapshot())
    for table in want:
        assert got[table] == want[table], f"journal table {table!r} disagrees with snapshot()"
    # the log's order is (lamport, id)
    assert sorted(got["log"], key=lambda m: (got["log"][m].lamport_timestamp, m)) == ch.log


def test_journal_is_off_by_default():
    a = channel("alice")
    a.send(b"x", 1)
    assert a.journal is None and a.drain_journal() == []


def test_journal_ops_use_documented_names():
    net = lossy_network(["alice", "bob", "carol"], 5, live_config(), journal=True)
    net.run_until(20_000)
    known = {
        "lamport",
        "log",
        "out",
        "out-",
        "in",
        "in-",
        "missing",
        "missing-",
        "lost",
        "lost-",
        "req",
        "req-",
        "resp",
        "resp-",
        "cache",
        "cache-",
        "bloom",
        "bloom-roll",
    }
    seen = set()
    for ch in net.nodes.values():
        for op in ch.journal:
            assert len(op) == 3 and op[0] in known, op
            seen.add(op[0])
    assert {
        "lamport",
        "log",
        "out",
        "out-",
        "in",
        "in-",
        "missing",
        "req",
        "resp",
        "cache",
        "bloom",
        "bloom-roll",
    } <= seen


def test_journal_replay_reproduces_snapshot_in_lossy_run():
    for seed in range(6):
        net = lossy_network(["alice", "bob", "carol", "dave"], 100 + seed, live_config(), journal=True)
        ops = {n: [] for n in net.nodes}
        for checkpoint in (1_000, 2_500, 4_000, 7_000, 12_000, 25_000):
            net.run_until(checkpoint)
            for name, ch in net.nodes.items():
                ops[name] += ch.drain_journal()
                assert ch.journal == []
                assert_replay_matches(ch, ops[name])


def test_journal_records_a_partially_met_dependency():
    b = channel("bob", journal=True)
    b.receive(frame("alice", "w", lamport=5, history=["d1", "d2"]), 1)
    b.receive(frame("alice", "d1", lamport=1), 2)  # w now waits on d2 only
    ops = b.drain_journal()
    assert b.snapshot().incoming[0].unmet == ("d2",)
    assert_replay_matches(b, ops)


def test_journal_after_restore_continues_from_the_snapshot():
    cfg = live_config()
    net = lossy_network(["alice", "bob", "carol"], 42, cfg)
    net.run_until(3_000)
    bases = {}
    for name, ch in list(net.nodes.items()):
        bases[name] = ch.snapshot()
        net.nodes[name] = MessageChannel.restore(bases[name], cfg, journal=True)
    net.run_until(15_000)
    for name, ch in net.nodes.items():
        assert_replay_matches(ch, ch.drain_journal(), bases[name])


def test_journal_replay_after_many_lost_messages():
    """The set of ids declared lost is bounded in memory; the journal must say
    when one is forgotten, or a store rebuilt from it keeps them all."""
    n = 10_050
    cfg = quiet_config(
        lost_after_ms=10, incoming_buffer_size=n + 10, bloom_capacity=64, repair=RepairConfig(enabled=False)
    )
    b = channel("bob", cfg, journal=True)
    for i in range(n):
        b.receive(frame("alice", f"w{i}", lamport=i + 1, history=[f"gone{i}"]), 0)
    b.tick(10)
    assert len(b.log) == n
    assert_replay_matches(b, b.drain_journal())
