"""The author's signature over content, Lamport time and causal history (sdschat.node.authored), through the
engine: what the ``sign`` hook is given is what goes on the wire, and resends, SDS-R answers by third parties
and state restored from the database carry it unchanged."""

from __future__ import annotations

import hashlib

import pytest

from sdschat.crypto import ChannelKey, Identity, SignatureError
from sdschat.node import node_channel_config, open_authored, ordering_context, signer
from sdschat.sds import HistoryEntry, MessageChannel, wire
from sdschat.store.rows import history_from_db, history_to_db

KEY = ChannelKey.generate("authored")
FAST = dict(repair_t_min_ms=200, repair_t_max_ms=400, resend_unacknowledged_ms=1_000)
ALICE, BOB, CAROL = (Identity.generate() for _ in range(3))


def member(identity: Identity, now: int = 0) -> tuple[MessageChannel, object]:
    return (
        MessageChannel(KEY.channel_id, identity.participant_id, node_channel_config(**FAST), now),
        signer(identity, KEY.channel_binding),
    )


def test_the_hook_signs_what_the_frame_carries():
    alice, sign = member(ALICE)
    seen = []

    def spy(payload, lamport, history):
        seen.append((lamport, [h.message_id for h in history]))
        return sign(payload, lamport, history)

    first = alice.send(b"one", 1_000, sign=spy)
    second = alice.send(b"two", 1_000, sign=spy)
    for out, (lamport, history) in zip((first, second), seen):
        msg = wire.decode(out.data)
        assert (msg.lamport_timestamp, [h.message_id for h in msg.causal_history]) == (lamport, history)
        assert msg.message_id == out.message_id == hashlib.sha256(msg.content).hexdigest()
        assert open_authored(msg, KEY.channel_binding).participant_id == ALICE.participant_id
    assert seen == [(1_000, []), (1_001, [first.message_id])]


def test_a_refused_send_changes_nothing():
    alice, sign = member(ALICE)
    before = alice.summary()
    with pytest.raises(ValueError):
        alice.send(b"x", 5_000, sign=lambda p, lt, h: b"y" * (alice.max_content_bytes + 1))
    assert alice.summary() == before and alice.send(b"ok", 5_000, sign=sign).lamport_timestamp == 5_000


def test_ephemeral_frames_sign_the_absence_of_ordering():
    alice, sign = member(ALICE)
    alice.send(b"logged", 1_000, sign=sign)
    msg = wire.decode(alice.send_ephemeral(b"typing", 1_000, sign=sign).data)
    assert msg.lamport_timestamp is None and not msg.causal_history
    assert open_authored(msg, KEY.channel_binding).message == b"typing"
    as_logged = wire.Message(
        sender_id=msg.sender_id,
        message_id=msg.message_id,
        channel_id=msg.channel_id,
        lamport_timestamp=0,
        content=msg.content,
    )
    with pytest.raises(SignatureError):  # a typing notice cannot be passed off as a logged message
        open_authored(as_logged, KEY.channel_binding)


def test_resends_and_a_third_partys_repair_answer_still_verify_as_the_authors():
    alice, a_sign = member(ALICE)
    bob, b_sign = member(BOB)
    carol, _ = member(CAROL)
    m1 = alice.send(b"m1", 1_000, sign=a_sign)
    for ch in (bob, carol):
        ch.receive(m1.data, 1_001)
    m2 = alice.send(b"m2 (carol misses it)", 1_100, sign=a_sign)
    bob.receive(m2.data, 1_101)
    m3 = bob.send(b"m3 names m2", 1_200, sign=b_sign)
    carol.receive(m3.data, 1_201)
    resent = [e for e in alice.resend_now(1_300) if getattr(e, "reason", None) == "resend"]
    answers = []
    for t in range(1_300, 20_000, 50):
        for e in carol.tick(t):
            if getattr(e, "repair_request", None):
                bob.receive(e.data, t)
        answers += [e for e in bob.tick(t) if getattr(e, "reason", None) == "repair"]
        if answers:
            break
    assert resent and answers
    original = wire.decode(m2.data)
    for out in (*resent, *answers):
        msg = wire.decode(out.data)
        if msg.message_id != m2.message_id:
            continue
        assert (msg.lamport_timestamp, msg.causal_history, msg.content) == (
            original.lamport_timestamp,
            original.causal_history,
            original.content,
        )
        assert open_authored(msg, KEY.channel_binding).participant_id == ALICE.participant_id
    assert any(wire.decode(a.data).message_id == m2.message_id for a in answers)


@pytest.mark.parametrize(
    "history",
    [
        [],
        [HistoryEntry("a" * 64, None, "b" * 32)],
        [
            HistoryEntry("a" * 64, b"\x01" * 32, "b" * 32),
            HistoryEntry("not-hex id", None, None),
            HistoryEntry("c" * 64, b"", "a participant's name ✓"),
        ],
    ],
)
def test_histories_read_back_from_the_database_sign_the_same(history):
    """The SDS-R cache and the outgoing buffer are restored from rows in their compact form; what the author
    signed must come back byte for byte (ids and senders; hints are not signed)."""
    restored = history_from_db(history_to_db(history))
    assert ordering_context(7, restored) == ordering_context(7, history)
    hinted = [HistoryEntry(h.message_id, b"other hint", h.sender_id) for h in history]
    assert ordering_context(7, hinted) == ordering_context(7, history)
