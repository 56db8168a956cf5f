"""Bad input: every bad frame gives ``Rejected``, leaves state untouched, and
``receive`` never raises."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sds_helpers import CHANNEL, channel, frame, of, quiet_config

from sdschat.sds import Rejected, wire


def busy_channel():
    """A channel with something in every buffer, so that damage would show."""
    c = channel("bob", quiet_config(), now=1_000)
    c.send(b"own message", 1_000)  # outgoing buffer, log, cache
    c.receive(frame("alice", "a1", lamport=1_001), 1_001)  # log
    c.receive(frame("alice", "a3", lamport=1_003, history=["a2"]), 1_002)  # incoming, missing, request
    c.receive(frame("carol", "req", lamport=1_004, content=None, repair=["a1"]), 1_003)  # response
    return c


def assert_rejected_untouched(c, data, reason=None):
    before = c.snapshot()
    events = c.receive(data, 1_010)
    assert len(events) == 1 and isinstance(events[0], Rejected), events
    if reason is not None:
        assert events[0].reason == reason, events[0]
    assert c.snapshot() == before
    assert c.check_invariants() == []
    return events[0]


def good_frame(mid: str = "d1", **kw):
    base = dict(lamport=1_005, history=["a1"])
    base.update(kw)
    return frame("dave", mid, **base)


# --------------------------------------------------------------- malformed


@pytest.mark.parametrize(
    "data",
    [b"\xff", b"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", b"\x0c", b"\x07", b"\x0a\x05ab", bytes(range(256))],
)
def test_garbage_is_rejected(data):
    assert_rejected_untouched(busy_channel(), data, "malformed")


def test_random_garbage_is_rejected_or_harmless():
    rng = random.Random(7)
    c = busy_channel()
    for _ in range(500):
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
        before = c.snapshot()
        events = c.receive(data, 1_010)
        assert c.check_invariants() == []
        if any(isinstance(e, Rejected) for e in events):
            assert len(events) == 1 and c.snapshot() == before


def test_truncated_frames():
    c = busy_channel()
    data = good_frame(bloom=bytes(c.bloom.n_bytes))
    rejected = 0
    for cut in range(1, len(data), 37):
        before = c.snapshot()
        events = c.receive(data[:cut], 1_010)
        assert c.check_invariants() == []
        if events and isinstance(events[0], Rejected):
            rejected += 1
            assert c.snapshot() == before
    assert rejected > 0
    # cut inside the bloom filter's length-delimited field: malformed
    assert_rejected_untouched(c, data[: len(data) // 2], "malformed")


def test_bad_utf8_in_ids_is_rejected():
    raw = bytearray(good_frame(mid="d9"))
    at = raw.index(b"d9")
    raw[at : at + 2] = b"\xff\xfe"
    assert_rejected_untouched(busy_channel(), bytes(raw), "malformed")


def test_oversized_frame_is_rejected():
    data = frame("dave", "big", lamport=1_005, content=b"x" * (wire.MAX_FRAME_BYTES + 1))
    assert_rejected_untouched(busy_channel(), data, "malformed")


@pytest.mark.parametrize("data", ["a string", None, 12, 3.5, ["list"], {"d": 1}, object()])
def test_wrong_python_types_are_rejected(data):
    assert_rejected_untouched(busy_channel(), data, "malformed")


def test_bytearray_and_memoryview_are_accepted():
    c = busy_channel()
    assert of(c.receive(bytearray(good_frame(mid="ba")), 1_010), Rejected) == []
    assert of(c.receive(memoryview(good_frame(mid="mv")), 1_010), Rejected) == []
    assert "ba" in c and "mv" in c


def test_sender_id_with_wrong_wire_type_is_rejected():
    # field 1 (sender_id) encoded as a varint: parsed as unknown, so the sender is empty
    data = b"\x08\x05" + wire.encode(
        wire.Message(sender_id="", message_id="d1", channel_id=CHANNEL, lamport_timestamp=1_005, content=b"x")
    )
    assert_rejected_untouched(busy_channel(), data, "invalid")


# ------------------------------------------------------------ well formed


def test_other_channel_is_rejected():
    assert_rejected_untouched(busy_channel(), frame("dave", "d1", lamport=1_005, channel_id="other"), "wrong_channel")


def test_empty_ids_are_rejected():
    c = busy_channel()
    assert_rejected_untouched(c, frame("dave", "", lamport=1_005), "invalid")
    assert_rejected_untouched(c, frame("", "d1", lamport=1_005), "invalid")
    assert_rejected_untouched(c, frame("dave", "d1", lamport=1_005, history=[""]), "invalid")
    assert_rejected_untouched(c, frame("dave", "d1", lamport=1_005, repair=[""]), "invalid")


def test_overlong_ids_are_rejected():
    c = busy_channel()
    long = "x" * (c.config.max_id_length + 1)
    assert_rejected_untouched(c, frame("dave", long, lamport=1_005), "invalid")
    assert_rejected_untouched(c, frame(long, "d1", lamport=1_005), "invalid")
    assert_rejected_untouched(c, frame("dave", "d1", lamport=1_005, history=[long]), "invalid")
    assert_rejected_untouched(c, frame("dave", "d1", lamport=1_005, repair=[long]), "invalid")
    ok = "y" * c.config.max_id_length
    assert of(c.receive(frame("dave", ok, lamport=1_005), 1_010), Rejected) == []


@pytest.mark.parametrize("lamport", [2**64 - 1, 2**63, 1_010 + 24 * 3600 * 1000 + 1])
def test_absurd_lamport_is_rejected(lamport):
    c = busy_channel()
    r = assert_rejected_untouched(c, frame("dave", "d1", lamport=lamport), "lamport_future")
    assert r.message_id == "d1" and r.sender_id == "dave"
    # also for sync frames: the clock must not be dragged forward
    assert_rejected_untouched(c, frame("dave", "s1", lamport=lamport, content=None), "lamport_future")


def test_lamport_within_allowed_skew_is_accepted():
    c = busy_channel()
    lamport = 1_010 + c.config.max_clock_skew_ms
    assert of(c.receive(frame("dave", "d1", lamport=lamport), 1_010), Rejected) == []
    assert c.lamport_timestamp == lamport


def test_huge_causal_history_is_rejected():
    c = busy_channel()
    n = c.config.max_history_entries
    assert_rejected_untouched(
        c, frame("dave", "d1", lamport=1_005, history=[f"h{i}" for i in range(n + 1)]), "too_large"
    )
    assert_rejected_untouched(
        c, frame("dave", "d2", lamport=1_005, history=[f"h{i}" for i in range(10_000)]), "too_large"
    )
    assert of(c.receive(frame("dave", "d3", lamport=1_005, history=[f"h{i}" for i in range(n)]), 1_010), Rejected) == []


def test_huge_repair_request_list_is_rejected():
    c = busy_channel()
    n = c.config.max_repair_entries
    assert_rejected_untouched(
        c, frame("dave", "s1", lamport=1_005, content=None, repair=[f"r{i}" for i in range(n + 1)]), "too_large"
    )


def test_frame_with_neither_lamport_nor_content_is_rejected():
    assert_rejected_untouched(busy_channel(), frame("dave", "e1", lamport=None, content=None), "empty")
    assert_rejected_untouched(busy_channel(), frame("dave", "e1", lamport=None, content=b""), "empty")


def test_rejected_frame_does_not_cancel_repairs():
    c = busy_channel()
    assert c.repair_request_ids == ["a2"] and c.repair_response_ids == ["a1"]
    assert_rejected_untouched(c, frame("alice", "a2", lamport=1_002, channel_id="other"))
    assert_rejected_untouched(c, frame("alice", "a1", lamport=2**64 - 1))
    assert c.repair_request_ids == ["a2"] and c.repair_response_ids == ["a1"]


# ----------------------------------------------------------------- fuzzing


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=300))
def test_receive_never_raises_on_arbitrary_bytes(data):
    c = busy_channel()
    before = c.snapshot()
    events = c.receive(data, 1_010)
    assert isinstance(events, list)
    assert c.check_invariants() == []
    if any(isinstance(e, Rejected) for e in events):
        assert c.snapshot() == before


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_receive_never_raises_on_mutated_valid_frames(data):
    c = busy_channel()
    base = bytearray(good_frame(bloom=bytes(64), repair=["a1"], history=["a1", "zz"]))
    for _ in range(data.draw(st.integers(1, 6))):
        i = data.draw(st.integers(0, len(base) - 1))
        base[i] = data.draw(st.integers(0, 255))
    before = c.snapshot()
    events = c.receive(bytes(base), 1_010)
    assert c.check_invariants() == []
    if any(isinstance(e, Rejected) for e in events):
        assert c.snapshot() == before


# ------------------------------------------- what we send, peers must accept


def _sent_frame_or_refusal(make):
    try:
        return make()
    except ValueError:
        return None  # refusing at the sender is fine


@pytest.mark.parametrize("case", ["oversized content", "overlong message id", "overlong participant id"])
def test_engine_never_emits_a_frame_its_peers_reject(case):
    """A frame our own engine produces must be accepted by a peer with the same
    config; otherwise the message is resent forever and never delivered. (nim-sds
    refuses an oversized message at wrap time.)"""
    cfg = quiet_config()
    makers = {
        "oversized content": lambda: channel("alice", cfg).send(b"x" * (wire.MAX_FRAME_BYTES + 1), 1),
        "overlong message id": lambda: channel("alice", cfg).send(b"y", 1, message_id="m" * (cfg.max_id_length + 1)),
        "overlong participant id": lambda: channel("p" * (cfg.max_id_length + 1), cfg).send(b"z", 1),
    }
    out = _sent_frame_or_refusal(makers[case])
    if out is not None:
        events = channel("bob", cfg).receive(out.data, 2)
        assert of(events, Rejected) == [], f"{case}: sent, then rejected by the peer: {events[0].reason}"
