"""Review of acknowledgement status: causal history, bloom filters, possible acks."""

from __future__ import annotations

from sds_helpers import channel, decode, frame, mids, of, quiet_config

from sdschat.sds import Acknowledged, BloomFilter, PossiblyAcknowledged


def test_messages_in_causal_history_are_acknowledged_and_leave_the_buffer():
    a, b = channel("alice"), channel("bob")
    sent = [a.send(f"m{i}".encode(), i) for i in range(3)]
    for o in sent:
        b.receive(o.data, 10)
    assert a.outgoing_ids == mids(sent)
    reply = b.send(b"reply", 20)  # history: m1, m2 (K = 2)
    events = a.receive(reply.data, 21)
    acked = of(events, Acknowledged)
    assert sorted(mids(acked)) == sorted(mids(sent[1:]))
    assert not any(e.by_bloom for e in acked)
    # the oldest was not in the history, but is in bob's bloom filter
    assert of(events, PossiblyAcknowledged) == [PossiblyAcknowledged(sent[0].message_id, 1)]
    assert a.outgoing_ids == [sent[0].message_id]
    assert a.outgoing_state(sent[0].message_id) == ("possibly_acknowledged", 0)


def test_ack_by_causal_history_of_a_foreign_frame():
    a = channel("alice")
    sent = [a.send(f"m{i}".encode(), i) for i in range(6)]
    events = a.receive(
        frame("bob", "ack", lamport=100, history=[sent[0].message_id, sent[2].message_id, sent[4].message_id]), 50
    )
    assert sorted(mids(of(events, Acknowledged))) == sorted(mids([sent[0], sent[2], sent[4]]))
    assert a.outgoing_ids == mids([sent[1], sent[3], sent[5]])


def test_messages_never_seen_are_not_possibly_acknowledged():
    a, b = channel("alice"), channel("bob")
    seen = [a.send(f"seen{i}".encode(), i) for i in range(5)]
    for o in seen:
        b.receive(o.data, 10)
    unseen = [a.send(f"unseen{i}".encode(), 20 + i) for i in range(2)]
    events = a.receive(b.send(b"reply", 30).data, 31)
    possibly = mids(of(events, PossiblyAcknowledged))
    assert sorted(possibly) == sorted(mids(seen[:-2]))
    assert not set(possibly) & set(mids(unseen))
    for o in unseen:
        assert a.outgoing_state(o.message_id) == ("unacknowledged", 0)


def test_possible_acks_count_distinct_participants():
    cfg = quiet_config(possible_acks_threshold=2)
    a, b, c = channel("alice", cfg), channel("bob", cfg), channel("carol", cfg)
    m = a.send(b"only in blooms", 1)
    filler = [a.send(f"f{i}".encode(), 2 + i) for i in range(2)]  # pushes m out of causal histories
    for ch in (b, c):
        for o in [m, *filler]:
            ch.receive(o.data, 10)
    # two filters from the same participant are not independent evidence
    for i in range(3):
        out = b.send(f"bob{i}".encode(), 20 + i)
        events = a.receive(out.data, 30 + i)
        expected = [PossiblyAcknowledged(m.message_id, 1)] if i == 0 else []
        assert of(events, PossiblyAcknowledged) == expected
        assert not [e for e in of(events, Acknowledged) if e.message_id == m.message_id]
    assert a.possible_ack_count(m.message_id) == 1
    # a second participant's filter reaches the threshold
    events = a.receive(c.send(b"carol", 40).data, 41)
    assert Acknowledged(m.message_id, by_bloom=True) in events
    assert m.message_id not in a.outgoing_ids
    assert a.outgoing_state(m.message_id) is None


def test_threshold_three_emits_counts_one_and_two():
    cfg = quiet_config(possible_acks_threshold=3)
    a = channel("alice", cfg)
    m = a.send(b"m", 1)
    bloom = BloomFilter(cfg.bloom_capacity, cfg.bloom_error_rate)
    bloom.add(m.message_id)
    counts = []
    for i, sender in enumerate(["bob", "carol", "bob", "dave"]):
        events = a.receive(frame(sender, f"x{i}", lamport=10 + i, bloom=bloom.to_bytes(), content=None), 10 + i)
        counts.append(([e.count for e in of(events, PossiblyAcknowledged)], mids(of(events, Acknowledged))))
    assert counts == [([1], []), ([2], []), ([], []), ([], [m.message_id])]


def test_sync_message_acknowledges():
    a, b = channel("alice"), channel("bob")
    sent = [a.send(f"m{i}".encode(), i) for i in range(3)]
    for o in sent:
        b.receive(o.data, 5)
    sync = b.sync(10)
    events = a.receive(sync.data, 11)
    assert sorted(mids(of(events, Acknowledged))) == sorted(mids(sent[1:]))
    assert a.outgoing_ids == [sent[0].message_id]


def test_own_frames_do_not_acknowledge():
    a = channel("alice")
    first = a.send(b"one", 1)
    second = a.send(b"two", 2)
    assert a.receive(second.data, 3) == []  # echo names `first` in its history and bloom
    assert a.outgoing_ids == [first.message_id, second.message_id]
    assert a.possible_ack_count(first.message_id) == 0


def test_first_message_missed_then_resent_is_acknowledged():
    cfg = quiet_config(resend_unacknowledged_ms=100, causal_history_size=3)
    a, b = channel("alice", cfg), channel("bob", cfg)
    first = a.send(b"first", 0)
    second = a.send(b"second", 1)
    b.receive(second.data, 2)  # bob misses `first`
    third = b.send(b"third", 3)
    events = a.receive(third.data, 4)
    assert first.message_id not in mids(of(events, Acknowledged))
    resend = [e for e in a.tick(100) if getattr(e, "reason", None) == "resend"]
    assert mids(resend) == [first.message_id]
    b.receive(resend[0].data, 101)
    events = a.receive(b.sync(102).data, 103)
    assert first.message_id in mids(of(events, Acknowledged))
    assert a.outgoing_ids == []


def test_bloom_of_another_length_is_ignored():
    a = channel("alice")
    m = a.send(b"m", 1)
    n_bytes = a.bloom.n_bytes
    for size in (n_bytes - 8, n_bytes + 8, 3):
        events = a.receive(frame("bob", f"x{size}", lamport=5, bloom=b"\xff" * size), 5)
        assert of(events, PossiblyAcknowledged) == [] and of(events, Acknowledged) == []
    assert a.outgoing_state(m.message_id) == ("unacknowledged", 0)
    # the same saturated filter at the right length counts
    events = a.receive(frame("bob", "full", lamport=6, bloom=b"\xff" * n_bytes), 6)
    assert of(events, PossiblyAcknowledged) == [PossiblyAcknowledged(m.message_id, 1)]


def test_frame_without_bloom_only_acks_by_history():
    a = channel("alice")
    m1, m2 = a.send(b"1", 1), a.send(b"2", 2)
    events = a.receive(frame("bob", "x", lamport=3, history=[m2.message_id]), 3)
    assert of(events, Acknowledged) == [Acknowledged(m2.message_id)]
    assert of(events, PossiblyAcknowledged) == []
    assert a.outgoing_ids == [m1.message_id]


def test_a_dropped_peer_no_longer_counts_and_what_the_rest_hold_is_acknowledged():
    """An application removed a participant (sdschat's kick): with the threshold capped by the group, the one
    remaining peer's filter is enough, its earlier evidence is forgotten, and its relayed frames add no peer."""
    cfg = quiet_config(possible_acks_threshold=2, possible_acks_group_cap=True)
    a, b, m = channel("alice", cfg), channel("bob", cfg), channel("mallory", cfg)
    hello = a.send(b"hello", 1)
    for ch in (b, m):
        ch.receive(hello.data, 2)
    a.receive(m.send(b"mallory was here", 3).data, 4)
    a.receive(b.send(b"bob was here", 5).data, 6)
    sent = a.send(b"after the kick", 10)
    filler = [a.send(f"f{i}".encode(), 11 + i) for i in range(10)]  # out of causal histories
    for o in [sent, *filler]:
        b.receive(o.data, 30)
        m.receive(o.data, 30)
    events = a.receive(m.send(b"mallory acks", 40).data, 41)
    assert PossiblyAcknowledged(sent.message_id, 1) in of(events, PossiblyAcknowledged)
    events = a.drop_peer("mallory")
    assert events == [] and sent.message_id in a.outgoing_ids  # her evidence is gone: nothing acknowledged
    assert a.possible_ack_count(sent.message_id) == 0
    # bob alone is the group now: his filter acknowledges
    events = a.receive(b.send(b"bob acks", 50).data, 51)
    assert Acknowledged(sent.message_id, by_bloom=True) in events
    # mallory's frames, even relayed as someone's repair answer, count for nothing
    later = a.send(b"later", 60)
    m.receive(later.data, 61)
    before = a.outgoing_ids
    a.receive(m.send(b"still acking", 70).data, 71)
    assert a.outgoing_ids == before and "mallory" not in a._peers


def test_dropping_a_peer_acknowledges_what_the_remaining_evidence_already_covers():
    cfg = quiet_config(possible_acks_threshold=2, possible_acks_group_cap=True)
    a, b, m = channel("alice", cfg), channel("bob", cfg), channel("mallory", cfg)
    a.receive(m.send(b"m", 1).data, 2)
    a.receive(b.send(b"b", 3).data, 4)
    sent = a.send(b"x", 10)
    filler = [a.send(f"f{i}".encode(), 11 + i) for i in range(10)]
    for o in [sent, *filler]:
        b.receive(o.data, 30)
    a.receive(b.send(b"bob acks", 40).data, 41)
    assert a.possible_ack_count(sent.message_id) == 1 and sent.message_id in a.outgoing_ids
    assert Acknowledged(sent.message_id, by_bloom=True) in a.drop_peer("mallory")
    assert sent.message_id not in a.outgoing_ids


def _forgetful_pair(ack_delay_ms: int | None):
    """alice sends one message and hears nothing for a while; bob receives it, then 40 messages of his own roll
    it out of his 16-id filter. Then alice hears again, and resends. (No causal history: bob's resends would
    name it, and only the filter and the naming are looked at here.)"""
    from sds_helpers import Network

    cfg = quiet_config(
        bloom_capacity=16,
        ack_delay_ms=ack_delay_ms,
        ack_jitter_ms=0,
        resend_unacknowledged_ms=5_000,
        resend_possibly_acknowledged_ms=5_000,
        resend_backoff=1.0,
        resend_max_interval_ms=5_000,
        causal_history_size=0,
    )
    a, b = channel("alice", cfg), channel("bob", cfg)
    deaf = {"on": True}
    net = Network({"alice": a, "bob": b}, drop=lambda src, dst, out, now: dst == "alice" and deaf["on"])
    first = net.send("alice", b"before the trip", 0)
    net.run_until(50)
    for i in range(40):
        net.send("bob", f"while alice was away {i}".encode(), 100 + 10 * i)
    net.run_until(1_000)
    assert first.message_id not in b.bloom  # forgotten by bob's filter
    deaf["on"] = False
    net.run_until(30_000)
    return net, first


def test_a_resend_that_a_rolled_filter_forgot_is_acknowledged_by_name():
    net, first = _forgetful_pair(ack_delay_ms=100)
    acked = [e for e in net.node_events("alice", Acknowledged) if e.message_id == first.message_id]
    assert acked and not acked[0].by_bloom  # named in bob's causal history, not guessed from a filter
    assert net.nodes["alice"].outgoing_ids == []
    resends = [o for _, src, o in net.frames_for(first.message_id, ("resend",)) if src == "alice"]
    assert len(resends) == 1  # one resend, then it is acknowledged


def test_without_naming_a_forgotten_ack_is_never_given():
    # (the case the naming exists for: without delayed acks, alice resends for as long as the run lasts)
    net, first = _forgetful_pair(ack_delay_ms=None)
    assert first.message_id in net.nodes["alice"].outgoing_ids
    assert len(net.frames_for(first.message_id, ("resend",))) >= 5


def test_a_catch_up_larger_than_the_filter_is_acknowledged_without_a_resend():
    """bob receives 60 of alice's messages at once (back from a time away, say): his 16-id filter holds the
    newest few. His syncs name the rest (up to ``ack_names`` a sync), and alice resends none of them."""
    from sds_helpers import Network

    cfg = quiet_config(
        bloom_capacity=16,
        ack_delay_ms=100,
        ack_jitter_ms=0,
        ack_names=25,
        possible_acks_group_cap=True,
        resend_unacknowledged_ms=5_000,
        resend_possibly_acknowledged_ms=5_000,
    )
    a, b = channel("alice", cfg), channel("bob", cfg)
    frames = [a.send(f"while bob was away {i}".encode(), i).data for i in range(60)]
    net = Network({"alice": a, "bob": b})
    net.now = 100
    for data in frames:
        net._handle("bob", b.receive(data, 100))
    net.run_until(4_000)
    assert a.outgoing_ids == []
    assert not [o for _, src, o in net.wire if src == "alice" and o.reason == "resend"]
    syncs = [decode(o.data) for _, src, o in net.wire if src == "bob" and o.reason == "sync"]
    assert 2 <= len(syncs) <= 4 and all(len(m.causal_history) <= 25 + 2 for m in syncs)  # 25 named a sync


def test_bloom_decides_says_when_a_frames_filter_counts_beyond_its_history():
    """``bloom_decides`` is true exactly when receiving the frame counts its filter (a possible acknowledgement,
    or one for good) for a message of ours its history does not name, and it changes nothing."""
    from sdschat.sds import wire

    a, b = channel("alice"), channel("bob")
    assert not a.bloom_decides(wire.parse_pb(b.send(b"nothing of alice's yet", 1).data))  # no outgoing
    sent = [a.send(f"m{i}".encode(), 10 + i) for i in range(3)]
    assert not a.bloom_decides(wire.parse_pb(sent[2].data))  # our own frame back: never counted
    for o in sent:
        b.receive(o.data, 20)
    reply = wire.parse_pb(b.send(b"reply", 30).data)  # history m1, m2 (K = 2); m0 only in the filter
    assert a.bloom_decides(reply) and a.bloom_decides(reply)  # (asking changes nothing)
    events = a.receive_parsed(reply, 31)
    assert of(events, PossiblyAcknowledged) == [PossiblyAcknowledged(sent[0].message_id, 1)]
    assert not a.bloom_decides(reply)  # bob's filter was counted for m0 already
    # a frame that names everything its filter would acknowledge: the history decides, the filter adds nothing
    later = a.send(b"m3", 40)
    b.receive(later.data, 41)
    answer = wire.parse_pb(b.send(b"answer", 42).data)  # history: reply, m3; filter: m0..m3
    assert not a.bloom_decides(answer)
    assert of(a.receive_parsed(answer, 43), PossiblyAcknowledged) == []
