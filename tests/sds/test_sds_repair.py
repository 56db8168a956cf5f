"""SDS-R: request/response timing, response groups, caps, cancellation, buffers,
and multi-participant repair with a single rebroadcast on the wire."""

from __future__ import annotations

import math

import pytest
from sds_helpers import Network, channel, decode, frame, mids, of, outgoing, quiet_config

from sdschat.sds import (
    Delivered,
    Evicted,
    GapDetected,
    HistoryEntry,
    Lost,
    Missing,
    RepairConfig,
    RepairRequested,
    RepairScheduled,
    RepairServed,
    message_id,
    repair,
)

T_MIN, T_MAX = 1_000, 5_000


def rcfg(**kw) -> RepairConfig:
    base = dict(t_min_ms=T_MIN, t_max_ms=T_MAX)
    base.update(kw)
    return RepairConfig(**base)


def cfg(repair_kw=None, **kw):
    return quiet_config(repair=rcfg(**(repair_kw or {})), **kw)


def request_frame(sender: str, mid: str, ids, *, lamport=1, orig="alice"):
    return frame(sender, mid, lamport=lamport, content=None, repair=[HistoryEntry(i, None, orig) for i in ids])


def t_reqs(ch) -> dict[str, int]:
    return {r.entry.message_id: r.t_req for r in ch.snapshot().repair_requests}


def t_resps(ch) -> dict[str, int]:
    return dict(ch.snapshot().repair_responses)


def gap(n_missing: int = 1, **kw):
    """alice sends ``n_missing`` messages bob does not get, then one he gets."""
    a = channel("alice", cfg(causal_history_size=max(2, n_missing), **kw))
    b = channel("bob", cfg(**kw))
    lost = [a.send(f"lost{i}".encode(), i) for i in range(n_missing)]
    last = a.send(b"last", n_missing)
    return a, b, lost, last


# ----------------------------------------------------------------- timing


def test_t_req_formula_and_range():
    for pid in ("alice", "bob", "participant-with-a-long-id"):
        for i in range(200):
            mid = f"m{i}"
            off = repair.t_req_offset(pid, mid, T_MIN, T_MAX)
            assert T_MIN <= off < T_MAX
            assert off == repair.hash64(pid + mid) % (T_MAX - T_MIN) + T_MIN
            assert repair.t_req(pid, mid, 777, T_MIN, T_MAX) == 777 + off


def test_missing_dependency_gets_request_in_t_min_t_max_window():
    a, b, lost, last = gap(6)
    now = 10_000
    b.receive(last.data, now)
    reqs = t_reqs(b)
    assert sorted(reqs) == sorted(mids(lost))
    for mid, t in reqs.items():
        assert now + T_MIN <= t < now + T_MAX
        assert t == repair.t_req("bob", mid, now, T_MIN, T_MAX)
    # history entries keep the original sender for the response group
    assert all(r.entry.sender_id == "alice" for r in b.snapshot().repair_requests)


def test_t_min_grows_with_the_gap_when_asked_to():
    """``t_min_growth`` 1: the n-th outstanding request waits at least T_min * (1 + log2 n), at most T_max less a
    quarter of the window; with 0 (the default, the RFC) every request is drawn from [T_min, T_max)."""
    now = 10_000
    _, b, lost, last = gap(1, repair_kw={"t_min_growth": 1.0})
    b.receive(last.data, now)
    assert now + T_MIN <= t_reqs(b)[lost[0].message_id] < now + T_MAX  # one missing: as ever
    _, b, lost, last = gap(40, repair_kw={"t_min_growth": 1.0})
    b.receive(last.data, now)
    reqs = t_reqs(b)
    assert len(reqs) == 40
    cap = T_MAX - (T_MAX - T_MIN) // 4
    for n, e in enumerate(sorted(lost, key=lambda o: o.lamport_timestamp), start=1):
        floor = min(int(T_MIN * (1 + math.log2(n))), cap) if n > 1 else T_MIN
        assert now + floor <= reqs[e.message_id] < now + T_MAX, n
    assert sorted(reqs.values())[7] >= now + cap  # from the eighth on, every one waits at least the cap
    _, b, lost, last = gap(40)
    b.receive(last.data, now)
    assert sum(t < now + 2 * T_MIN for t in t_reqs(b).values()) >= 5  # the RFC's: spread over the window


def test_t_resp_is_zero_for_the_original_sender():
    a = channel("alice", cfg())
    m = a.send(b"hello", 1)
    events = a.receive(request_frame("bob", "req1", [m.message_id]), 500)
    assert of(events, RepairScheduled) == [RepairScheduled(m.message_id, "bob", 500)]
    assert repair.t_resp_offset("alice", "alice", m.message_id, T_MAX) == 0
    events = a.tick(500)
    (out,) = outgoing(events, "repair")
    assert of(events, RepairServed) == [RepairServed(m.message_id, "alice")]
    msg, orig = decode(out.data), decode(m.data)
    assert (msg.message_id, msg.sender_id, msg.lamport_timestamp, msg.causal_history, msg.content) == (
        orig.message_id,
        orig.sender_id,
        orig.lamport_timestamp,
        orig.causal_history,
        orig.content,
    )
    assert msg.repair_request == []
    assert a.repair_response_ids == []


def test_t_resp_of_another_participant():
    a, c = channel("alice", cfg()), channel("carol", cfg())
    m = a.send(b"hello", 1)
    c.receive(m.data, 2)
    events = c.receive(request_frame("bob", "req1", [m.message_id]), 1_000)
    expected = 1_000 + repair.t_resp_offset("carol", "alice", m.message_id, T_MAX)
    assert of(events, RepairScheduled) == [RepairScheduled(m.message_id, "bob", expected)]
    assert 1_000 <= expected < 1_000 + T_MAX
    assert (
        repair.t_resp_offset("carol", "alice", m.message_id, T_MAX)
        == ((repair.hash64("carol") ^ repair.hash64("alice")) * repair.hash64(m.message_id)) % T_MAX
    )
    assert outgoing(c.tick(expected - 1)) == []
    events = c.tick(expected)
    (out,) = outgoing(events, "repair")
    assert out.message_id == m.message_id and decode(out.data).sender_id == "alice"
    assert of(events, RepairServed) == [RepairServed(m.message_id, "alice")]


def test_request_for_unknown_message_is_ignored():
    c = channel("carol", cfg())
    events = c.receive(request_frame("bob", "req1", ["nope"]), 10)
    assert of(events, RepairScheduled) == []
    assert c.repair_response_ids == []


# ---------------------------------------------------------- response groups


@pytest.mark.parametrize("n,groups", [(0, 1), (1, 1), (127, 1), (128, 2), (255, 2), (256, 3), (1_000, 8)])
def test_response_groups_from_expected_participants(n, groups):
    assert RepairConfig(expected_participants=n).response_groups == groups
    assert repair.response_groups_for(n) == groups
    # expected_participants wins over num_response_groups
    assert RepairConfig(expected_participants=n, num_response_groups=50).response_groups == groups


def test_response_groups_default_and_explicit():
    assert RepairConfig().response_groups == 1
    assert RepairConfig(num_response_groups=4).response_groups == 4
    assert RepairConfig(num_response_groups=0).response_groups == 1


def test_group_membership_formula():
    for i in range(100):
        mid = f"m{i}"
        assert repair.in_response_group("alice", "alice", mid, 7)  # always for own messages
        assert repair.in_response_group("x", "alice", mid, 1)
        assert repair.in_response_group("carol", "alice", mid, 5) == (
            repair.hash64("carol" + mid) % 5 == repair.hash64("alice" + mid) % 5
        )
    assert not repair.in_response_group("carol", None, "m", 1)


def test_only_response_group_members_answer():
    groups = 4
    c = channel("carol", cfg({"num_response_groups": groups}))
    a = channel("alice", cfg({"num_response_groups": groups}))
    sent = [a.send(f"m{i}".encode(), i) for i in range(60)]
    for o in sent:
        c.receive(o.data, 100)
    scheduled_c, scheduled_a = [], []
    for i, o in enumerate(sent):
        req = request_frame("bob", f"req{i}", [o.message_id], lamport=200 + i)
        scheduled_c += mids(of(c.receive(req, 200 + i), RepairScheduled))
        scheduled_a += mids(of(a.receive(req, 200 + i), RepairScheduled))
    eligible = [o.message_id for o in sent if repair.in_response_group("carol", "alice", o.message_id, groups)]
    assert scheduled_c == eligible
    assert 5 <= len(eligible) <= 30  # about a quarter
    assert scheduled_a == mids(sent)  # the original sender is in every group of its messages
    # carol only caches what she may be asked to repair
    assert sorted(r.message_id for r in c.snapshot().cache) == sorted(eligible)


def test_a_frame_that_names_its_responders_caches_as_each_receiver_would_hash():
    """``Frame.responders`` (the receivers in the message's response group, given by whoever shares the frame)
    decides what each receiver caches exactly as its own hash would; without it, each receiver hashes."""
    from sdschat.sds.channel import Frame
    from sdschat.sds.wire import parse_pb

    groups = 4
    names = [f"r{i}" for i in range(12)]
    a = channel("alice", cfg({"num_response_groups": groups}))
    sent = [a.send(f"m{i}".encode(), i) for i in range(30)]
    hashed = {n: channel(n, cfg({"num_response_groups": groups})) for n in names}
    told = {n: channel(n, cfg({"num_response_groups": groups})) for n in names}
    for o in sent:
        for c in hashed.values():
            c.receive(o.data, 100)
        f = Frame(parse_pb(o.data))
        f.responders = frozenset(n for n in names if repair.in_response_group(n, "alice", o.message_id, groups))
        for c in told.values():
            c.receive_parsed(f, 100)
    cached = {n: sorted(r.message_id for r in hashed[n].snapshot().cache) for n in names}
    assert {n: sorted(r.message_id for r in told[n].snapshot().cache) for n in names} == cached
    assert 0 < sum(map(len, cached.values())) < len(names) * len(sent)  # some of each
    # a frame naming nobody: nobody caches (the named set is trusted, not re-hashed)
    f = Frame(parse_pb(a.send(b"late", 50).data))
    f.responders = frozenset()
    c = channel("r0", cfg({"num_response_groups": groups}))
    c.receive_parsed(f, 100)
    assert not c.snapshot().cache


# ------------------------------------------------------------------ requests


def test_due_requests_capped_per_frame_lowest_t_req_first():
    a, b, lost, last = gap(6)
    b.receive(last.data, 0)
    reqs = t_reqs(b)
    order = sorted(reqs, key=lambda m: (reqs[m], m))
    now = max(reqs.values())
    events = b.tick(now)
    (sync,) = outgoing(events, "sync")
    assert list(sync.repair_request) == order[:3]
    assert [e.message_id for e in decode(sync.data).repair_request] == order[:3]
    assert of(events, RepairRequested) == [RepairRequested(tuple(order[:3]), sync.message_id)]
    # the rest go in the next frame
    (sync2,) = outgoing(b.tick(now), "sync")
    assert list(sync2.repair_request) == order[3:]
    assert outgoing(b.tick(now)) == []


def test_max_requests_configurable():
    a, b, lost, last = gap(4, repair_kw={"max_requests": 1})
    b.receive(last.data, 0)
    reqs = t_reqs(b)
    first = min(reqs, key=lambda m: (reqs[m], m))
    (sync,) = outgoing(b.tick(max(reqs.values())), "sync")
    assert sync.repair_request == (first,)


def test_no_request_before_t_req():
    a, b, lost, last = gap(1)
    b.receive(last.data, 0)
    t = t_reqs(b)[lost[0].message_id]
    for now in range(0, t, 97):
        assert outgoing(b.tick(now)) == []
    assert b.send(b"early", t - 1).repair_request == ()
    out = b.send(b"on time", t)
    assert out.repair_request == (lost[0].message_id,)
    (entry,) = decode(out.data).repair_request
    assert entry == HistoryEntry(lost[0].message_id, None, "alice")


def test_arrival_cancels_pending_request():
    a, b, lost, last = gap(1)
    b.receive(last.data, 0)
    t = t_reqs(b)[lost[0].message_id]
    b.receive(lost[0].data, 10)
    assert b.repair_request_ids == [] and b.missing_ids == []
    assert b.send(b"later", t + 1).repair_request == ()


def test_a_frame_without_content_calls_off_no_repair_work():
    """Only the message itself (a copy with content) calls off a request or an answer for it: a sync frame
    that carries the same id (a foreign or buggy peer's) delivers nothing, so both stay pending."""
    a, b, lost, last = gap(1)
    mid = lost[0].message_id
    b.receive(last.data, 0)
    assert b.repair_request_ids == [mid]
    b.receive(frame("carol", mid, lamport=2, content=None), 10)
    assert b.repair_request_ids == [mid] and b.missing_ids == [mid]
    c = channel("carol", cfg())
    m = a.send(b"hello", 1)
    c.receive(m.data, 2)
    (sched,) = of(c.receive(request_frame("bob", "req", [m.message_id]), 100), RepairScheduled)
    c.receive(frame("dave", m.message_id, lamport=3, content=None), 101)
    assert c.repair_response_ids == [m.message_id]
    assert [o.message_id for o in outgoing(c.tick(sched.t_resp))] == [m.message_id]


def test_request_repeated_until_the_message_arrives():
    a, b, lost, last = gap(1)
    mid = lost[0].message_id
    b.receive(last.data, 0)
    asked = []
    t, horizon = 0, 4 * T_MAX
    while t < horizon:
        t = max(t + 1, b.next_deadline())
        for e in outgoing(b.tick(t)):
            if mid in e.repair_request:
                asked.append(t)
    assert len(asked) >= 3
    gaps = [y - x for x, y in zip(asked, asked[1:])]
    assert all(T_MIN <= g < T_MAX for g in gaps)
    assert b.snapshot().repair_requests[0].attempts == len(asked)
    b.receive(lost[0].data, t)
    assert b.repair_request_ids == []
    assert all(mid not in e.repair_request for e in outgoing(b.tick(t + 2 * T_MAX)))


def test_peer_request_reschedules_ours_instead_of_dropping_it():
    a, b, lost, last = gap(1)
    mid = lost[0].message_id
    b.receive(last.data, 0)
    old = t_reqs(b)[mid]
    seen_at = old - 500
    events = b.receive(request_frame("dave", "dave-sync", [mid], lamport=seen_at), seen_at)
    assert of(events, RepairScheduled) == []  # bob does not have it
    assert b.repair_request_ids == [mid]
    new = t_reqs(b)[mid]
    assert seen_at + T_MIN <= new < seen_at + T_MAX
    assert new == repair.t_req("bob", f"{mid}#1", seen_at, T_MIN, T_MAX)
    # nobody answers: bob asks himself, later
    assert mid not in b.send(b"before", new - 1).repair_request
    out = b.send(b"after", new)
    assert mid in out.repair_request


def test_nothing_sent_at_the_old_t_req_after_a_peer_asked():
    a, b, lost, last = gap(1)
    mid = lost[0].message_id
    b.receive(frame("carol", "c0", lamport=1), 0)  # bob has something in his log
    b.receive(last.data, 0)
    old = t_reqs(b)[mid]
    seen_at = old - 500
    b.receive(request_frame("dave", "dave-sync", [mid], lamport=seen_at), seen_at)
    new = t_reqs(b)[mid]
    assert new > old
    # the channel is not idle (sync interval is huge): nothing may go out before the new T_req
    assert outgoing(b.tick(old)) == []
    assert outgoing(b.tick(new - 1)) == []
    (sync,) = outgoing(b.tick(new), "sync")
    assert sync.repair_request == (mid,)


def test_requests_in_an_already_seen_frame_are_ignored():
    a, c = channel("alice", cfg()), channel("carol", cfg())
    m = a.send(b"hello", 1)
    c.receive(m.data, 2)
    carrier = frame("dave", "dave-msg", lamport=10, repair=[HistoryEntry(m.message_id, None, "alice")])
    (sched,) = of(c.receive(carrier, 100), RepairScheduled)
    events = c.tick(sched.t_resp)
    assert mids(outgoing(events, "repair")) == [m.message_id]
    assert c.repair_response_ids == []
    # the same frame again (a duplicate, or a resend): its old requests are not acted on
    assert c.receive(carrier, sched.t_resp + 10) == []
    assert c.repair_response_ids == []
    # same for a sync frame
    sync_carrier = frame(
        "dave", "sync-dave-1", lamport=11, content=None, repair=[HistoryEntry(m.message_id, None, "alice")]
    )
    (sched2,) = of(c.receive(sync_carrier, 20_000), RepairScheduled)
    c.tick(sched2.t_resp)
    assert c.receive(sync_carrier, sched2.t_resp + 1) == []
    assert c.repair_response_ids == []


def test_resends_do_not_carry_repair_requests():
    b = channel("bob", cfg(resend_unacknowledged_ms=100_000))
    b.receive(frame("alice", "m2", lamport=2, history=["m1"]), 0)
    t = t_reqs(b)["m1"]
    out = b.send(b"asks", t)
    assert out.repair_request == ("m1",)
    (resend,) = outgoing(b.tick(t + 100_000), "resend")
    assert decode(resend.data).repair_request == []


# ------------------------------------------------------- cancel before dedup


def test_duplicate_arrival_cancels_pending_response():
    a, c = channel("alice", cfg()), channel("carol", cfg())
    m = a.send(b"hello", 1)
    c.receive(m.data, 2)
    (sched,) = of(c.receive(request_frame("bob", "req", [m.message_id]), 100), RepairScheduled)
    assert sched.t_resp > 100
    # someone else's answer arrives first: a duplicate for carol, but it cancels her answer
    assert c.receive(m.data, 101) == []
    assert c.repair_response_ids == []
    assert outgoing(c.tick(sched.t_resp)) == []


def test_own_message_rebroadcast_by_peer_cancels_own_pending_answer():
    a = channel("alice", cfg())
    m = a.send(b"hello", 1)
    a.receive(request_frame("bob", "req", [m.message_id]), 100)
    assert a.repair_response_ids == [m.message_id]
    assert a.receive(m.data, 100) == []  # carol's rebroadcast of alice's frame arrives first
    assert a.repair_response_ids == []
    assert outgoing(a.tick(100)) == []


def test_arrival_of_requested_message_via_repair_marks_it_repaired():
    a, b, lost, last = gap(1)
    b.receive(last.data, 0)
    events = b.receive(lost[0].data, 50)
    delivered = of(events, Delivered)
    assert mids(delivered) == [lost[0].message_id, last.message_id]
    assert delivered[0].repaired and not delivered[1].repaired


# ------------------------------------------------------------------- buffers


def test_request_buffer_bounded_keeps_earliest():
    a, b, lost, last = gap(3, repair_kw={"buffer_size": 2})
    events = b.receive(last.data, 0)
    every = {o.message_id: repair.t_req("bob", o.message_id, 0, T_MIN, T_MAX) for o in lost}
    keep = sorted(every, key=every.get)[:2]
    assert sorted(b.repair_request_ids) == sorted(keep)
    assert sorted(b.missing_ids) == sorted(every)  # still known missing
    dropped = set(every) - set(keep)
    assert set(mids(of(events, Evicted))) <= dropped
    assert of(events, Missing)


def test_response_buffer_bounded_keeps_earliest():
    a = channel("alice", cfg())
    c = channel("carol", cfg({"buffer_size": 2}))
    sent = [a.send(f"m{i}".encode(), i) for i in range(3)]
    for o in sent:
        c.receive(o.data, 10)
    every = {o.message_id: 100 + repair.t_resp_offset("carol", "alice", o.message_id, T_MAX) for o in sent}
    by_t_resp = sorted(every, key=every.get)
    keep = by_t_resp[:2]
    # asked for in T_resp order: the newcomer is the one due furthest in the future
    c.receive(request_frame("bob", "req", by_t_resp), 100)
    assert len(c.repair_response_ids) == 2
    # RepairConfig: "when full, the entry due furthest in the future is evicted"
    assert sorted(c.repair_response_ids) == sorted(keep)


def test_repair_cache_bounded_oldest_out():
    a = channel("alice", cfg())
    c = channel("carol", cfg({"cache_size": 2}))
    sent = [a.send(f"m{i}".encode(), i) for i in range(3)]
    for o in sent:
        c.receive(o.data, 10)
    assert [r.message_id for r in c.snapshot().cache] == mids(sent[1:])
    events = c.receive(request_frame("bob", "req", [sent[0].message_id]), 100)
    assert of(events, RepairScheduled) == []


def test_repair_disabled():
    off = quiet_config(repair=RepairConfig(enabled=False, t_min_ms=T_MIN, t_max_ms=T_MAX))
    a, b = channel("alice", off), channel("bob", off)
    x = a.send(b"x", 1)
    y = a.send(b"y", 2)
    b.receive(y.data, 3)
    assert b.missing_ids == [x.message_id] and b.repair_request_ids == []
    assert outgoing(b.tick(10 * T_MAX)) == []
    assert of(a.receive(request_frame("bob", "req", [x.message_id]), 5), RepairScheduled) == []
    assert a.repair_response_ids == []
    assert b.snapshot().cache == []  # nobody else's messages are kept for repair


# --------------------------------------------------------- multi-participant


def group(names, **kw):
    c = cfg(**kw)
    return {n: channel(n, c) for n in names}


def run_gap_scenario(names, missers, *, drop_extra=None, horizon=6 * T_MAX):
    """alice's X reaches everybody but ``missers``; bob's Y names X; run until repaired."""
    nodes = group(names, sync_interval_ms=10 * T_MAX)

    def drop(src, dst, out, now):
        if out.message_id == x_id[0] and out.reason == "message" and dst in missers:
            return True
        return bool(drop_extra and drop_extra(src, dst, out, now))

    x_id = [message_id(b"X from alice")]
    net = Network(nodes, latency=5, drop=drop)
    x = net.send("alice", b"X from alice", 100)
    assert x.message_id == x_id[0]
    net.run_until(200)
    y = net.send("bob", b"Y from bob", 300)
    net.run_until(400)
    for m in missers:
        assert nodes[m].missing_ids == [x.message_id]
        assert nodes[m].incoming_ids == [y.message_id]
    net.run_until(
        horizon,
        until=lambda: (
            all(x.message_id in n for n in nodes.values())
            and not net._queue
            and all(not n.repair_response_ids for n in nodes.values())
        ),
    )
    net.run_until(net.now + 2 * T_MAX)  # let every pending timer fire
    return nodes, net, x, y


def assert_converged(nodes, sent):
    logs = [n.log for n in nodes.values()]
    assert all(log == logs[0] for log in logs)
    assert sorted(logs[0]) == sorted(sent)
    for n in nodes.values():
        assert n.incoming_ids == [] and n.missing_ids == [] and n.repair_request_ids == []
        assert n.repair_response_ids == []
        assert n.check_invariants() == []


def test_four_participants_one_missed_message_one_rebroadcast():
    names = ["alice", "bob", "carol", "dave"]
    nodes, net, x, y = run_gap_scenario(names, {"dave"})
    rebroadcasts = [f for f in net.frames_for(x.message_id) if f[2].reason != "message"]
    assert [(src, o.reason) for _, src, o in rebroadcasts] == [("alice", "repair")]
    requests = [o for _, src, o in net.wire if x.message_id in o.repair_request]
    assert [src for _, src, o in net.wire if x.message_id in o.repair_request] == ["dave"]
    assert len(requests) == 1
    # dave got it as a repair
    delivered = [e for e in net.node_events("dave", Delivered) if e.message_id == x.message_id]
    assert len(delivered) == 1 and delivered[0].repaired
    # bob and carol had scheduled answers, and cancelled them when alice's arrived
    for n in ("bob", "carol"):
        assert [e.message_id for e in net.node_events(n, RepairScheduled)] == [x.message_id]
        assert net.node_events(n, RepairServed) == []
    assert_converged(nodes, [x.message_id, y.message_id])


def test_original_sender_silent_one_peer_answers():
    names = ["alice", "bob", "carol", "dave"]

    def alice_deaf_to_requests(src, dst, out, now):
        return dst == "alice" and bool(out.repair_request)

    nodes, net, x, y = run_gap_scenario(names, {"dave"}, drop_extra=alice_deaf_to_requests)
    rebroadcasts = [(src, o.reason) for _, src, o in net.frames_for(x.message_id) if o.reason != "message"]
    first = min(("bob", "carol"), key=lambda p: repair.t_resp_offset(p, "alice", x.message_id, T_MAX))
    assert rebroadcasts == [(first, "repair")]
    assert_converged(nodes, [x.message_id, y.message_id])


def test_five_participants_two_missed_one_request_one_rebroadcast():
    names = ["alice", "bob", "carol", "dave", "erin"]
    nodes, net, x, y = run_gap_scenario(names, {"dave", "erin"})
    rebroadcasts = [(src, o.reason) for _, src, o in net.frames_for(x.message_id) if o.reason != "message"]
    assert rebroadcasts == [("alice", "repair")]
    askers = [src for _, src, o in net.wire if x.message_id in o.repair_request]
    first = min(("dave", "erin"), key=lambda p: repair.t_req_offset(p, x.message_id, T_MIN, T_MAX))
    assert askers == [first]
    assert_converged(nodes, [x.message_id, y.message_id])


def test_lost_answer_is_asked_for_again():
    """The first answer is lost on its way to dave: he keeps asking and the gap still closes."""
    names = ["alice", "bob", "carol", "dave"]
    dropped = []

    def drop_first_repair(src, dst, out, now):
        if dst == "dave" and out.reason == "repair" and not dropped:
            dropped.append(now)
            return True
        return False

    nodes, net, x, y = run_gap_scenario(names, {"dave"}, drop_extra=drop_first_repair, horizon=12 * T_MAX)
    assert dropped
    asks = [t for t, src, o in net.wire if x.message_id in o.repair_request]
    assert len(asks) >= 2
    assert_converged(nodes, [x.message_id, y.message_id])


# ------------------------------------------------- gaps named only by syncs


def test_gap_named_only_in_a_sync_is_requested():
    """RFC: sync messages' causal history is processed "following the same steps
    as regular messages"; SDS-R: unmet dependencies get a repair request."""
    a, b, d = channel("alice", cfg()), channel("bob", cfg()), channel("dave", cfg())
    x = a.send(b"X", 1)
    b.receive(x.data, 2)
    sync = b.sync(10)
    d.receive(frame("carol", "c0", lamport=1), 5)
    events = d.receive(sync.data, 20)
    assert d.log == ["c0"]  # the sync itself is never logged or buffered
    assert d.incoming_ids == []
    assert x.message_id in d.repair_request_ids, events
    t = t_reqs(d)[x.message_id]
    assert 20 + T_MIN <= t < 20 + T_MAX
    assert of(events, GapDetected) == [GapDetected([HistoryEntry(x.message_id, None, "alice")], "bob", sync.message_id)]
    assert d.missing_ids == [x.message_id]
    # a second sync naming it is no news
    assert of(d.receive(b.sync(30).data, 40), GapDetected) == []
    # and the gap is asked for when due
    (out,) = outgoing(d.tick(t), "sync")
    assert out.repair_request == (x.message_id,)


def test_gap_from_a_sync_is_declared_lost_then_slots_in_if_it_arrives():
    lost_after = 3 * T_MAX
    a, b = channel("alice", cfg()), channel("bob", cfg())
    d = channel("dave", cfg(lost_after_ms=lost_after))
    x = a.send(b"X", 1)
    b.receive(x.data, 2)
    d.receive(b.sync(10).data, 20)
    assert of(d.tick(20 + lost_after - 1), Lost) == []
    events = d.tick(20 + lost_after)
    assert of(events, Lost) == [Lost(x.message_id, "alice", ())]
    assert d.missing_ids == [] and d.repair_request_ids == []
    assert of(d.receive(b.sync(30).data, 40_000), GapDetected) == []  # lost is not missing again
    (late,) = of(d.receive(x.data, 50_000), Delivered)
    assert late.message_id == x.message_id and late.repaired


def test_four_participants_gap_only_named_in_syncs_closes():
    """alice's X misses dave; then the channel goes quiet. bob's and carol's
    periodic syncs acknowledge X to alice (so she stops resending) and name X
    to dave, who must ask for it."""
    names = ["alice", "bob", "carol", "dave"]
    c = cfg(
        sync_interval_ms=1_000, sync_jitter_ms=0, resend_unacknowledged_ms=5_000, resend_possibly_acknowledged_ms=15_000
    )
    nodes = {n: channel(n, c) for n in names}
    x_id = message_id(b"X from alice")
    net = Network(
        nodes,
        latency=5,
        drop=lambda src, dst, out, now: out.message_id == x_id and out.reason == "message" and dst == "dave",
    )
    x = net.send("alice", b"X from alice", 100)
    net.run_until(200)
    net.broadcast("bob", nodes["bob"].sync(200))  # bob's sync names X: alice's X is acknowledged
    net.run_until(300)
    assert nodes["alice"].outgoing_ids == []
    net.run_until(20 * T_MAX, until=lambda: x.message_id in nodes["dave"])
    assert x.message_id in nodes["dave"], (
        f"dave never got X; alice's outgoing buffer: {nodes['alice'].outgoing_ids}, "
        f"dave's repair requests: {nodes['dave'].repair_request_ids}"
    )
