"""Outgoing and incoming buffer sweeps: resends, backoff, dependencies, lost messages, bounds."""

from __future__ import annotations

from engine_build import on_python_engine
from sds_helpers import channel, decode, frame, lossy_three, mids, of, outgoing, quiet_config

from sdschat.sds import (
    Acknowledged,
    BloomFilter,
    Delivered,
    Evicted,
    HistoryEntry,
    Lost,
    MessageChannel,
    Missing,
    PossiblyAcknowledged,
)
from sdschat.sds.frame import Frame
from sdschat.sds.wire import parse_pb


def resend_config(**kw):
    base = dict(
        resend_unacknowledged_ms=1_000,
        resend_possibly_acknowledged_ms=5_000,
        resend_backoff=2.0,
        resend_max_interval_ms=100_000,
    )
    base.update(kw)
    return quiet_config(**base)


def resend_times(ch, until: int, step: int = 100) -> list[int]:
    times = []
    for t in range(step, until + 1, step):
        if outgoing(ch.tick(t), "resend"):
            times.append(t)
    return times


# ------------------------------------------------------------------ outgoing


def test_unacknowledged_message_resent_after_period_with_backoff():
    a = channel("alice", resend_config())
    m = a.send(b"hello", 0)
    assert a.tick(999) == []
    (resend,) = outgoing(a.tick(1_000), "resend")
    assert resend.message_id == m.message_id and resend.lamport_timestamp == m.lamport_timestamp
    original, again = decode(m.data), decode(resend.data)
    # same message: id, sender, lamport, history, content
    assert (again.message_id, again.sender_id, again.lamport_timestamp, again.causal_history, again.content) == (
        original.message_id,
        original.sender_id,
        original.lamport_timestamp,
        original.causal_history,
        original.content,
    )
    assert again.repair_request == []
    assert a.outgoing_state(m.message_id) == ("unacknowledged", 1)
    # 1,000 * 2 after the first resend, then 1,000 * 4
    assert resend_times(a, 10_000) == [3_000, 7_000]


def test_resend_interval_is_capped():
    a = channel("alice", resend_config(resend_max_interval_ms=1_500))
    a.send(b"hello", 0)
    assert resend_times(a, 6_000) == [1_000, 2_500, 4_000, 5_500]


def test_possibly_acknowledged_message_waits_the_longer_period():
    cfg = resend_config()
    a = channel("alice", cfg)
    m = a.send(b"hello", 0)
    bloom = BloomFilter(cfg.bloom_capacity, cfg.bloom_error_rate)
    bloom.add(m.message_id)
    events = a.receive(frame("bob", "sync-x", lamport=5, bloom=bloom.to_bytes(), content=None), 100)
    assert of(events, PossiblyAcknowledged) == [PossiblyAcknowledged(m.message_id, 1)]
    assert a.outgoing_state(m.message_id) == ("possibly_acknowledged", 0)
    # 5,000 after sending, then 5,000 * 2
    assert resend_times(a, 16_000) == [5_000, 15_000]


def test_unacknowledged_resent_before_possibly_acknowledged():
    cfg = resend_config()
    a = channel("alice", cfg)
    maybe = a.send(b"maybe", 0)
    plain = a.send(b"plain", 0)
    bloom = BloomFilter(cfg.bloom_capacity, cfg.bloom_error_rate)
    bloom.add(maybe.message_id)
    a.receive(frame("bob", "s", lamport=5, bloom=bloom.to_bytes(), content=None), 10)
    assert mids(outgoing(a.tick(1_000), "resend")) == [plain.message_id]
    assert mids(outgoing(a.tick(4_999), "resend")) == [plain.message_id]  # its second resend (at 3,000)
    assert mids(outgoing(a.tick(5_000), "resend")) == [maybe.message_id]


def test_max_resends_evicts_from_outgoing_buffer():
    a = channel("alice", resend_config(max_resends=2))
    m = a.send(b"hello", 0)
    assert resend_times(a, 6_900) == [1_000, 3_000]
    events = a.tick(7_000)
    assert outgoing(events) == []
    assert of(events, Evicted) == [Evicted("outgoing", m.message_id)]
    assert a.outgoing_ids == []
    assert a.log == [m.message_id]  # still ours, still in the log
    assert resend_times(a, 60_000) == []


def test_acknowledged_message_is_not_resent():
    a = channel("alice", resend_config())
    m = a.send(b"hello", 0)
    events = a.receive(frame("bob", "ack", lamport=2, history=[m.message_id]), 500)
    assert of(events, Acknowledged) == [Acknowledged(m.message_id)]
    assert resend_times(a, 20_000) == []


def test_outgoing_buffer_is_bounded_oldest_out():
    a = channel("alice", resend_config(outgoing_buffer_size=2))
    sent = [a.send(f"m{i}".encode(), i) for i in range(4)]
    assert a.outgoing_ids == mids(sent[-2:])
    assert a.log == mids(sent)
    resent = mids(outgoing(a.tick(1_005), "resend"))
    assert sorted(resent) == sorted(mids(sent[-2:]))


# ------------------------------------------------------------------ incoming


def test_message_with_unmet_dependencies_is_buffered():
    b = channel("bob", now=10)
    events = b.receive(frame("alice", "m3", lamport=30, history=["m1", "m2"], content=b"three"), 20)
    (missing,) = of(events, Missing)
    assert missing.message_id == "m3" and missing.content == b"three" and missing.sender_id == "alice"
    assert mids(missing.missing) == ["m1", "m2"]
    assert missing.waiting_on == ()
    assert b.incoming_ids == ["m3"] and b.log == []
    assert sorted(b.missing_ids) == ["m1", "m2"]
    assert "m3" in b.bloom  # received content goes in the bloom filter at once
    assert b.lamport_timestamp == 10
    assert b.check_invariants() == []


def test_chain_delivered_in_order_when_gap_fills():
    b = channel("bob")
    b.receive(frame("alice", "m3", lamport=3, history=["m1", "m2"]), 1)
    events = b.receive(frame("alice", "m2", lamport=2, history=["m1"]), 2)
    (missing,) = of(events, Missing)
    assert mids(missing.missing) == ["m1"]
    assert b.incoming_ids == ["m3", "m2"]
    events = b.receive(frame("alice", "m1", lamport=1), 3)
    delivered = of(events, Delivered)
    assert mids(delivered) == ["m1", "m2", "m3"]
    assert [d.repaired for d in delivered] == [True, True, False]  # m1, m2 were known missing
    assert b.log == ["m1", "m2", "m3"]
    assert b.incoming_ids == [] and b.missing_ids == []
    assert b.lamport_timestamp == 3
    assert b.check_invariants() == []


def test_a_message_that_waited_is_logged_with_the_row_its_frame_shares_between_receivers():
    # one parsed frame, read by many members (the simulator): a message delivered after waiting behind a gap
    # logs the frame's one LogRow and emits its one Delivered, as a message delivered at once does
    m2 = Frame(parse_pb(frame("alice", "m2", lamport=2, history=["m1"])))
    m1 = Frame(parse_pb(frame("alice", "m1", lamport=1)))
    members = [channel(name) for name in ("bob", "carol", "dave")]
    delivered = []
    for ch in members:
        assert of(ch.receive_parsed(m2, 10), Missing)
        delivered.append(of(ch.receive_parsed(m1, 20), Delivered))
    assert [mids(d) for d in delivered] == [["m1", "m2"]] * 3
    assert all(d[1] is delivered[0][1] for d in delivered)
    assert delivered[0][1] == Delivered("m2", "alice", b"payload", 2, False, ())
    rows = [ch.snapshot().log for ch in members]
    assert all(r[1] is rows[0][1] for r in rows) and rows[0][1].message_id == "m2"
    # m1 was known missing when it came: repaired, so a row and an event of each member's own
    assert delivered[0][0].repaired and delivered[0][0] is not delivered[1][0]
    # with a retrieval hint, or delivered without a dependency declared lost, a message gets its own
    hinted = channel("erin")
    hinted.receive_parsed(m2, 10, b"hint")
    (_, d2) = of(hinted.receive_parsed(m1, 20), Delivered)
    assert d2 == delivered[0][1] and d2 is not delivered[0][1]
    assert hinted.snapshot().log[1].retrieval_hint == b"hint"
    late = channel("frank", lost_config())
    late.receive_parsed(m2, 10)
    (lost_m2,) = of(late.tick(10 + 2 * late.config.lost_after_ms), Delivered)
    assert lost_m2.after_lost == ("m1",) and lost_m2 is not delivered[0][1]
    assert all(ch.check_invariants() == [] for ch in (*members, hinted, late))


def test_waiting_is_not_missing():
    b = channel("bob")
    b.receive(frame("alice", "m2", lamport=2, history=["m1"]), 1)
    events = b.receive(frame("alice", "m3", lamport=3, history=["m1", "m2"]), 2)
    (missing,) = of(events, Missing)
    assert mids(missing.missing) == ["m1"]
    assert missing.waiting_on == ("m2",)
    assert "m2" not in b.missing_ids and "m2" not in b.repair_request_ids
    assert b.repair_request_ids == ["m1"]
    # m3 does not overtake the waiting m2
    assert b.log == []


def test_message_depending_on_a_waiting_one_is_not_delivered_early():
    b = channel("bob")
    b.receive(frame("alice", "m2", lamport=2, history=["m1"]), 1)
    events = b.receive(frame("carol", "c1", lamport=5, history=["m2"]), 2)
    assert of(events, Delivered) == []
    assert of(events, Missing)[0].waiting_on == ("m2",)
    events = b.receive(frame("alice", "m1", lamport=1), 3)
    assert mids(of(events, Delivered)) == ["m1", "m2", "c1"]


def test_dependency_on_own_message_is_met():
    a = channel("alice")
    m = a.send(b"mine", 1)
    events = a.receive(frame("bob", "reply", lamport=5, history=[m.message_id]), 2)
    assert mids(of(events, Delivered)) == ["reply"]


def lost_config(**kw):
    return quiet_config(lost_after_ms=1_000, **kw)


def test_lost_after_timeout_delivers_dependants_with_marker():
    b = channel("bob", lost_config())
    b.receive(frame("alice", "m3", lamport=3, history=["m1", "m2"], content=b"three"), 100)
    assert b.tick(1_099) == []
    events = b.tick(1_100)
    lost = of(events, Lost)
    assert sorted(mids(lost)) == ["m1", "m2"]
    assert all(e.sender_id is None for e in lost)  # hand-made history entries carry no sender
    assert set().union(*(e.dependants for e in lost)) == {"m3"}
    (delivered,) = of(events, Delivered)
    assert delivered.message_id == "m3" and sorted(delivered.after_lost) == ["m1", "m2"]
    assert delivered.content == b"three"
    assert b.log == ["m3"] and b.incoming_ids == [] and b.missing_ids == []
    assert b.repair_request_ids == []  # nobody asks for a lost message any more
    assert b.check_invariants() == []


def test_lost_message_arriving_later_slots_into_its_place():
    b = channel("bob", lost_config())
    b.receive(frame("alice", "m3", lamport=3, history=["m1", "m2"]), 100)
    b.tick(1_100)
    events = b.receive(frame("alice", "m2", lamport=2, history=["m1"]), 2_000)
    (d2,) = of(events, Delivered)
    assert d2.message_id == "m2" and d2.repaired and d2.after_lost == ()
    events = b.receive(frame("alice", "m1", lamport=1), 2_100)
    (d1,) = of(events, Delivered)
    assert d1.message_id == "m1" and d1.repaired
    assert b.log == ["m1", "m2", "m3"]
    assert b.check_invariants() == []


def test_give_up_declares_one_missing_message_lost_now():
    b = channel("bob", lost_config())
    b.receive(frame("alice", "m3", lamport=3, history=["m1", "m2"], content=b"three"), 100)
    assert b.give_up("m9", 200) == [] and b.give_up("m3", 200) == []  # neither missing: nothing happens
    events = b.give_up("m1", 200)
    assert [e.message_id for e in of(events, Lost)] == ["m1"] and of(events, Delivered) == []
    assert b.missing_ids == ["m2"] and b.incoming_ids == ["m3"]  # m3 still waits for m2
    events = b.give_up("m2", 300)
    (delivered,) = of(events, Delivered)
    assert delivered.message_id == "m3" and delivered.after_lost == ("m1", "m2")
    assert b.missing_ids == [] and b.repair_request_ids == []
    assert of(b.tick(1_100), Lost) == []  # the timer of an id given up on does not fire again
    assert b.check_invariants() == []


def test_lost_sender_is_named_when_history_has_it():
    a = channel("alice")
    x = a.send(b"x", 1)
    y = a.send(b"y", 2)
    b = channel("bob", lost_config())
    b.receive(y.data, 3)
    (lost,) = of(b.tick(1_003), Lost)
    assert lost == Lost(x.message_id, "alice", (y.message_id,))


def test_only_dependencies_nobody_has_are_declared_lost():
    b = channel("bob", lost_config())
    b.receive(frame("alice", "m2", lamport=2, history=["m1"]), 500)  # waits on missing m1
    b.receive(frame("carol", "c1", lamport=5, history=["m2"]), 100)  # waits on waiting m2
    events = b.tick(1_100)  # c1 has waited lost_after_ms, but m2 is here (waiting): nothing is lost
    assert of(events, Lost) == [] and of(events, Delivered) == []
    events = b.tick(1_500)  # m2's time is up: m1 is lost, m2 then c1 delivered
    assert mids(of(events, Lost)) == ["m1"]
    assert mids(of(events, Delivered)) == ["m2", "c1"]
    assert of(events, Delivered)[1].after_lost == ()


def test_incoming_buffer_is_bounded():
    b = channel("bob", quiet_config(incoming_buffer_size=2))
    b.receive(frame("alice", "w1", lamport=10, history=["d1"]), 1)
    b.receive(frame("alice", "w2", lamport=11, history=["d2"]), 2)
    events = b.receive(frame("alice", "w3", lamport=12, history=["d3"]), 3)
    assert Evicted("incoming", "w1") in events
    assert mids(of(events, Lost)) == ["d1"]
    (d,) = of(events, Delivered)
    assert d.message_id == "w1" and d.after_lost == ("d1",)
    assert b.incoming_ids == ["w2", "w3"]
    assert b.log == ["w1"]
    assert b.check_invariants() == []


def test_missing_id_declared_lost_counting_from_when_it_was_first_noticed():
    b = channel("bob", lost_config())
    b.receive(frame("alice", "w1", lamport=5, history=["x"]), 100)
    b.receive(frame("carol", "w2", lamport=6, history=["x"]), 900)
    assert of(b.tick(1_099), Lost) == []
    events = b.tick(1_100)
    assert of(events, Lost) == [Lost("x", None, ("w1", "w2"))]
    delivered = of(events, Delivered)
    assert mids(delivered) == ["w1", "w2"] and all(d.after_lost == ("x",) for d in delivered)


def test_forged_dependency_cycle_does_not_wedge_the_channel():
    b = channel("bob", lost_config())
    b.receive(frame("mallory", "a", lamport=5, history=["b"]), 0)
    b.receive(frame("mallory", "b", lamport=6, history=["a"]), 0)
    assert sorted(b.incoming_ids) == ["a", "b"] and b.missing_ids == []  # waiting, not missing
    assert b.repair_request_ids == []
    assert of(b.tick(1_999), Delivered) == []
    events = b.tick(2_000)  # 2 * lost_after_ms
    assert sorted(mids(of(events, Delivered))) == ["a", "b"]
    assert b.log == ["a", "b"] and b.incoming_ids == []
    assert b.check_invariants() == []


def test_forged_self_dependency_does_not_wedge_the_channel():
    b = channel("bob", lost_config())
    b.receive(frame("mallory", "w", lamport=5, history=["w"]), 0)
    assert b.check_invariants() == []
    b.tick(2_000)
    assert b.log == ["w"] and b.incoming_ids == [] and b.missing_ids == [] and b.repair_request_ids == []
    assert b.check_invariants() == []


def test_retrieval_hints_travel_with_missing_entries():
    a = channel("alice")
    x = a.send(b"x", 1)
    a.set_retrieval_hint(x.message_id, b"waku-hash-of-x")
    y = a.send(b"y", 2)
    b = channel("bob")
    (missing,) = of(b.receive(y.data, 3), Missing)
    assert missing.missing == [HistoryEntry(x.message_id, b"waku-hash-of-x", "alice")]
    (req,) = b.snapshot().repair_requests
    assert req.entry == HistoryEntry(x.message_id, b"waku-hash-of-x", "alice")


@on_python_engine  # patches IncomingBuffer._compact_heaps and a module constant
def test_timer_heaps_are_rebuilt_when_stale_entries_outnumber_live_ones(monkeypatch):
    """A delivered message leaves its forced-delivery timer behind (2 x lost_after) and an arrived one its
    loss timer; the heaps are rebuilt from what still waits once stale entries outnumber live ones, and the
    engine behaves exactly as when they are never rebuilt."""
    from sdschat.sds import incoming as incoming_mod

    rebuilt = []
    compact = incoming_mod.IncomingBuffer._compact_heaps

    def counting(self):
        before = len(self.wait_heap) + len(self.missing_heap)
        compact(self)
        rebuilt.append((before, len(self.wait_heap) + len(self.missing_heap)))

    monkeypatch.setattr(incoming_mod.IncomingBuffer, "_compact_heaps", counting)
    monkeypatch.setattr(incoming_mod, "_HEAP_SLACK", 10**9)
    never_net, never = lossy_three(3)
    assert rebuilt == []
    monkeypatch.setattr(incoming_mod, "_HEAP_SLACK", 0)
    net, seen = lossy_three(3)
    assert seen == never  # every event of every member, at the same times
    assert len(rebuilt) > 10 and all(after < before for before, after in rebuilt)
    for name, ch in net.nodes.items():
        stale, kept = never_net.nodes[name]._in, ch._in
        assert len(kept.wait_heap) + len(kept.missing_heap) <= len(stale.wait_heap) + len(stale.missing_heap)
        assert ch.check_invariants() == []
    assert sum(len(net.node_events(name, Missing)) for name in net.nodes) > 20  # messages did wait
    assert all(ch.stats["delivered"] + ch.stats["lost"] == 120 for ch in net.nodes.values())


def test_a_message_waiting_on_several_ids_keeps_them_once_each_and_survives_a_restore():
    """The ids a buffered message waits on are a list of distinct ids (a history naming one twice waits once)."""
    b = channel("bob")
    b.receive(frame("alice", "m4", lamport=4, history=["m1", "m2", "m1", "m3"]), 1)
    (row,) = b.snapshot().incoming
    assert row.unmet == ("m1", "m2", "m3")
    b.receive(frame("alice", "m2", lamport=2), 2)
    restored = MessageChannel.restore(b.snapshot(), quiet_config())
    assert restored.snapshot().incoming[0].unmet == ("m1", "m3")
    assert mids(of(restored.receive(frame("alice", "m1", lamport=1), 3), Delivered)) == ["m1"]
    assert mids(of(restored.receive(frame("alice", "m3", lamport=3), 4), Delivered)) == ["m3", "m4"]
    assert restored.check_invariants() == []
