"""Lamport clock, message ids, send-side fields and ordering of the local log."""

from __future__ import annotations

import hashlib

import pytest
from sds_helpers import CHANNEL, channel, decode, frame, of, quiet_config

from sdschat.sds import Delivered, HistoryEntry, Missing, message_id


def test_message_id_is_hex_sha256_of_payload():
    assert message_id(b"hello") == hashlib.sha256(b"hello").hexdigest()
    a = channel("alice")
    out = a.send(b"hello", 10)
    assert out.message_id == hashlib.sha256(b"hello").hexdigest()
    assert decode(out.data).message_id == out.message_id


def test_clock_starts_at_given_time():
    assert channel("alice", now=1_234).lamport_timestamp == 1_234


def test_send_sets_clock_to_now_when_now_is_ahead():
    a = channel("alice", now=100)
    out = a.send(b"m1", 5_000)
    assert out.lamport_timestamp == 5_000 == a.lamport_timestamp
    assert decode(out.data).lamport_timestamp == 5_000


def test_send_increments_when_clock_is_ahead_of_now():
    a = channel("alice", now=10_000)
    first = a.send(b"m1", 50)
    second = a.send(b"m2", 60)
    third = a.send(b"m3", 10_001)  # now == lt: still lt + 1
    assert (first.lamport_timestamp, second.lamport_timestamp, third.lamport_timestamp) == (10_001, 10_002, 10_003)


def test_each_send_increments_by_one_at_a_frozen_time():
    a = channel("alice", now=0)
    stamps = [a.send(f"m{i}".encode(), 0).lamport_timestamp for i in range(5)]
    assert stamps == [1, 2, 3, 4, 5]


def test_receive_of_higher_timestamp_raises_clock_on_delivery():
    b = channel("bob", now=100)
    events = b.receive(frame("alice", "x", lamport=9_000), 200)
    assert of(events, Delivered)
    assert b.lamport_timestamp == 9_000
    # a lower one does not move it back
    b.receive(frame("alice", "y", lamport=50), 300)
    assert b.lamport_timestamp == 9_000
    # and the next own message follows it
    assert b.send(b"reply", 400).lamport_timestamp == 9_001


def test_clock_not_raised_while_message_waits():
    b = channel("bob", now=100)
    events = b.receive(frame("alice", "late", lamport=9_000, history=["dep"]), 200)
    assert of(events, Missing)
    assert b.lamport_timestamp == 100
    b.receive(frame("alice", "dep", lamport=8_000), 300)
    assert b.lamport_timestamp == 9_000


def test_sender_and_receiver_clocks_stay_in_step():
    a, b = channel("alice", now=0), channel("bob", now=0)
    expected = 0
    for i in range(3):
        out = a.send(f"a{i}".encode(), 0)
        expected += 1
        b.receive(out.data, 0)
        assert b.lamport_timestamp == expected
    for i in range(4):
        out = b.send(f"b{i}".encode(), 0)
        expected += 1
        a.receive(out.data, 0)
        assert a.lamport_timestamp == expected
    assert a.lamport_timestamp == b.lamport_timestamp == 7


def test_causal_history_is_last_k_of_log_in_order():
    a = channel("alice", quiet_config(causal_history_size=3))
    sent = [a.send(f"m{i}".encode(), i) for i in range(6)]
    msg = decode(sent[-1].data)
    assert [h.message_id for h in msg.causal_history] == [o.message_id for o in sent[-4:-1]]
    assert all(h.sender_id == "alice" for h in msg.causal_history)  # SDS-R: sender in history entries
    assert decode(sent[0].data).causal_history == []
    assert decode(sent[1].data).causal_history[0].message_id == sent[0].message_id


def test_bloom_attached_is_the_state_before_the_message():
    a = channel("alice")
    first = a.send(b"one", 1)
    second = a.send(b"two", 2)
    assert decode(first.data).bloom_filter == bytes(a.bloom.n_bytes)
    bf = decode(second.data).bloom_filter
    assert len(bf) == a.bloom.n_bytes and bf != bytes(a.bloom.n_bytes)
    assert first.message_id in a.bloom and second.message_id in a.bloom


def test_own_message_enters_log_bloom_and_outgoing_buffer():
    a = channel("alice")
    out = a.send(b"hello", 42)
    assert a.log == [out.message_id]
    assert out.message_id in a
    assert a.outgoing_ids == [out.message_id]
    assert a.outgoing_state(out.message_id) == ("unacknowledged", 0)
    row = a.log_entries()[0]
    assert (row.lamport_timestamp, row.sender_id) == (42, "alice")
    msg = decode(out.data)
    assert (msg.channel_id, msg.sender_id, msg.content, msg.repair_request) == (CHANNEL, "alice", b"hello", [])


def test_send_refuses_empty_content_and_reused_ids():
    a = channel("alice")
    with pytest.raises(ValueError):
        a.send(b"", 1)
    a.send(b"same", 1)
    with pytest.raises(ValueError):
        a.send(b"same", 2)
    with pytest.raises(ValueError):
        a.send(b"other", 3, message_id="")


def test_log_ordered_by_lamport_then_id():
    a = channel("alice", now=0)
    own = a.send(b"own", 1)  # lamport 1
    a.receive(frame("bob", "m3", lamport=3), 10)
    a.receive(frame("carol", "m2", lamport=2), 11)
    assert a.log == [own.message_id, "m2", "m3"]
    assert [r.lamport_timestamp for r in a.log_entries()] == [1, 2, 3]


def test_equal_timestamps_ordered_by_message_id_ascending():
    a = channel("alice", now=0)
    ids = [hashlib.sha256(p).hexdigest() for p in (b"message a", b"message b", b"message c")]
    for mid in sorted(ids, reverse=True):
        a.receive(frame("bob", mid, lamport=5), 1)
    assert a.log == sorted(ids)
    # an earlier one still goes in front regardless of id
    a.receive(frame("bob", "zzzz", lamport=4), 2)
    assert a.log[0] == "zzzz"


def test_same_messages_in_any_order_give_the_same_log():
    frames = [frame(f"p{i % 3}", f"id{i:02d}", lamport=(i * 7) % 5) for i in range(12)]
    logs = []
    for perm in (frames, frames[::-1], frames[::2] + frames[1::2]):
        c = channel("me", now=0)
        for f in perm:
            c.receive(f, 0)
        logs.append(c.log)
        assert c.check_invariants() == []
    assert logs[0] == logs[1] == logs[2]
    assert len(logs[0]) == 12


def test_retrieval_hint_kept_in_log_and_passed_on_in_history():
    b = channel("bob")
    b.receive(frame("alice", "m1", lamport=1), 1, retrieval_hint=b"hash-1")
    assert b.log_entries()[0].retrieval_hint == b"hash-1"
    out = b.send(b"reply", 2)
    (h,) = decode(out.data).causal_history
    assert h == HistoryEntry("m1", b"hash-1", "alice")
    b.set_retrieval_hint(out.message_id, b"own-hash")
    assert b.log_entries()[-1].retrieval_hint == b"own-hash"
