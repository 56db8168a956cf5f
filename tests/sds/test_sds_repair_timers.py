"""Changing SDS-R's timers on a running channel (``MessageChannel.set_repair_config``): what is scheduled from then
on uses the new ones, what was scheduled keeps its time, the response groups decide what is cached and answered
from then on, and nothing on the wire changes."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sds_helpers import channel, decode, frame, mids, of, outgoing, quiet_config

from sdschat.sds import HistoryEntry, MessageChannel, RepairConfig, RepairScheduled, repair

OLD = RepairConfig(t_min_ms=1_000, t_max_ms=5_000)
NEW = RepairConfig(t_min_ms=20_000, t_max_ms=90_000)


def t_reqs(ch: MessageChannel) -> dict[str, int]:
    return {r.entry.message_id: r.t_req for r in ch.snapshot().repair_requests}


def t_resps(ch: MessageChannel) -> dict[str, int]:
    return dict(ch.snapshot().repair_responses)


def request_frame(sender: str, mid: str, ids, *, lamport: int) -> bytes:
    return frame(sender, mid, lamport=lamport, content=None, repair=[HistoryEntry(i, None, "alice") for i in ids])


def test_requests_scheduled_after_the_change_use_the_new_timers_and_earlier_ones_keep_their_time():
    a = channel("alice", quiet_config(repair=OLD))
    b = channel("bob", quiet_config(repair=OLD))
    first = a.send(b"lost 1", 1)
    b.receive(a.send(b"seen 1", 2).data, 1_000)
    old_t = t_reqs(b)[first.message_id]
    assert old_t == repair.t_req("bob", first.message_id, 1_000, OLD.t_min_ms, OLD.t_max_ms)

    b.set_repair_config(NEW)
    assert b.config.repair == NEW
    second = a.send(b"lost 2", 3)
    b.receive(a.send(b"seen 2", 4).data, 2_000)
    reqs = t_reqs(b)
    assert reqs[first.message_id] == old_t  # kept
    assert reqs[second.message_id] == repair.t_req("bob", second.message_id, 2_000, NEW.t_min_ms, NEW.t_max_ms)
    assert reqs[second.message_id] >= 2_000 + NEW.t_min_ms

    # the first goes out when it was due, and is asked again under the new timers
    (sync,) = outgoing(b.tick(old_t), "sync")
    assert sync.repair_request == (first.message_id,)
    again = t_reqs(b)[first.message_id]
    assert again == repair.t_req("bob", f"{first.message_id}#1", old_t, NEW.t_min_ms, NEW.t_max_ms)
    assert again >= old_t + NEW.t_min_ms


def test_answers_scheduled_after_the_change_use_the_new_t_max_and_earlier_ones_keep_their_time():
    a, c = channel("alice", quiet_config(repair=OLD)), channel("carol", quiet_config(repair=OLD))
    one, two = a.send(b"one", 1), a.send(b"two", 2)
    c.receive(one.data, 10)
    c.receive(two.data, 11)
    c.receive(request_frame("bob", "req1", [one.message_id], lamport=100), 1_000)
    t_one = t_resps(c)[one.message_id]
    assert t_one == repair.t_resp("carol", "alice", one.message_id, 1_000, OLD.t_max_ms)

    c.set_repair_config(NEW)
    events = c.receive(request_frame("bob", "req2", [two.message_id], lamport=101), 1_001)
    want = repair.t_resp("carol", "alice", two.message_id, 1_001, NEW.t_max_ms)
    assert want != repair.t_resp("carol", "alice", two.message_id, 1_001, OLD.t_max_ms)  # (the test can tell)
    assert of(events, RepairScheduled) == [RepairScheduled(two.message_id, "bob", want)]
    assert t_resps(c) == {one.message_id: t_one, two.message_id: want}
    (served,) = outgoing(c.tick(t_one), "repair")  # the earlier answer goes out when it was due
    assert served.message_id == one.message_id


def test_response_groups_decide_what_is_cached_and_answered_from_then_on():
    groups = 4
    a, c = channel("alice", quiet_config(repair=OLD)), channel("carol", quiet_config(repair=OLD))
    before = [a.send(f"before {i}".encode(), i) for i in range(40)]
    for o in before:
        c.receive(o.data, 100)
    assert {r.message_id for r in c.snapshot().cache} == set(mids(before))  # one group: every message

    c.set_repair_config(replace(OLD, num_response_groups=groups))
    after = [a.send(f"after {i}".encode(), 100 + i) for i in range(40)]
    for o in after:
        c.receive(o.data, 200)

    def mine(o) -> bool:
        return repair.in_response_group("carol", "alice", o.message_id, groups)

    assert 0 < sum(map(mine, after)) < len(after)
    cached = {r.message_id for r in c.snapshot().cache}
    assert cached == set(mids(before)) | {o.message_id for o in after if mine(o)}  # earlier ones stay cached
    answered = []
    for i, o in enumerate(before + after):
        answered += mids(
            of(c.receive(request_frame("bob", f"req{i}", [o.message_id], lamport=500 + i), 500 + i), RepairScheduled)
        )
    assert answered == [o.message_id for o in before + after if mine(o)]


def test_the_frames_sent_are_the_same_bytes_whatever_the_timers():
    a = channel("alice", quiet_config(repair=OLD))
    kept, changed = channel("bob", quiet_config(repair=OLD)), channel("bob", quiet_config(repair=OLD))
    changed.set_repair_config(NEW)
    lost = a.send(b"lost", 1)
    seen = a.send(b"seen", 2)
    for b in (kept, changed):
        b.receive(seen.data, 1_000)
    assert kept.send(b"hello", 1_100).data == changed.send(b"hello", 1_100).data
    due_kept, due_changed = t_reqs(kept)[lost.message_id], t_reqs(changed)[lost.message_id]
    assert due_kept < due_changed
    (s1,) = outgoing(kept.tick(due_kept), "sync")
    (s2,) = outgoing(changed.tick(due_changed), "sync")
    m1, m2 = decode(s1.data), decode(s2.data)
    assert m1.repair_request == m2.repair_request and [e.message_id for e in m1.repair_request] == [lost.message_id]
    assert m1.causal_history == m2.causal_history and m1.bloom_filter == m2.bloom_filter


def test_enabled_and_the_sizes_stay_those_the_channel_was_made_with():
    b = channel("bob", quiet_config(repair=OLD))
    for field, value in (("enabled", False), ("buffer_size", 10), ("cache_size", 10)):
        with pytest.raises(ValueError, match=field):
            b.set_repair_config(replace(NEW, **{field: value}))
    with pytest.raises(ValueError, match="RepairConfig"):
        b.set_repair_config({"t_min_ms": 5_000})  # type: ignore[arg-type]
    assert b.config.repair == OLD


def test_the_change_is_not_persisted_and_a_restore_keeps_the_scheduled_times():
    a, b = channel("alice", quiet_config(repair=OLD)), channel("bob", quiet_config(repair=OLD))
    lost = a.send(b"lost", 1)
    b.set_repair_config(NEW)
    b.receive(a.send(b"seen", 2).data, 1_000)
    due = t_reqs(b)[lost.message_id]
    back = MessageChannel.restore(b.snapshot(), quiet_config(repair=OLD))
    assert back.config.repair == OLD  # the application says it again
    assert t_reqs(back) == {lost.message_id: due}
