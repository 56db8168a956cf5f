"""Fuzzing, short: generated and mutated frames and database rows through every parser.

tests/fuzz/test_fuzz_frames.py runs >= 100,000 inputs; these run a few thousand with the same code, plus
the inputs that found bugs (so a regression names itself). The rule everywhere: each bad input
is rejected and counted by reason; nothing raises an exception the layer does not document.
"""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import time

import fuzz_frames
import pytest
from brokers import Mosquitto, mosquitto_binary
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sdschat.crypto import ChannelKey, EnvelopeError, Identity
from sdschat.node.frame import REASONS, FrameError, pack, unpack
from sdschat.sds import WireError, wire

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def F():
    return fuzz_frames


@pytest.fixture(scope="module")
def corpus(F):
    return F.Corpus(ChannelKey(bytes(range(32)), "fuzz"), seed=3)


@pytest.fixture(scope="module")
def rel_mosquitto(tmp_path_factory):
    broker = Mosquitto(mosquitto_binary(), tmp_path_factory.mktemp("rel-fuzz-mosquitto"))
    broker.start()
    yield broker
    broker.close()


def test_mutated_frames_through_open_decode_and_receive_raise_nothing(F, tmp_path):
    tally = F.run(frames=4_000, rows=0, hyp=150, seed=11, workdir=tmp_path, url=None)
    by = tally.by_target()
    assert tally.bug_count == 0, tally.bugs
    assert sum(by["open"].values()) >= 1_000 and by["open"].get("auth", 0) > 0
    assert sum(by["receive"].values()) >= 1_500
    # the mutations reach past the parser: some frames are accepted, others rejected for many reasons
    reasons = {k for k in by["receive"] if k.startswith("rejected:")}
    assert {"rejected:malformed", "rejected:wrong_channel", "rejected:invalid"} <= reasons, by["receive"]
    assert any(k.startswith("accepted:") for k in by["receive"]), by["receive"]


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(data=st.data())
def test_every_single_byte_change_of_a_real_envelope_is_rejected(F, corpus, data):
    env = data.draw(st.sampled_from(corpus.envelopes))
    i = data.draw(st.integers(0, len(env) - 1))
    x = data.draw(st.integers(1, 255))
    bad = env[:i] + bytes([env[i] ^ x]) + env[i + 1 :]
    with pytest.raises(EnvelopeError):
        corpus.key.open(bad)


#: a fixed publisher for the signed frames below (a fresh key per run would make a failing example irreproducible)
_PUBLISHER = Identity.from_private_bytes(bytes(range(32)))


_ids = st.text(max_size=70)
_entries = st.lists(
    st.builds(wire.HistoryEntry, _ids, st.none() | st.binary(max_size=16), st.none() | _ids), max_size=3
)
#: well-formed SDS frames of any field values, as the engine encodes them
_valid_sds = st.builds(
    wire.encode_frame,
    _ids,
    _ids,
    _ids,
    st.none() | st.integers(0, 2**64 - 1),
    _entries,
    st.none() | st.binary(max_size=64),
    st.none() | st.binary(max_size=64),
    _entries,
)


@st.composite
def _damaged(draw, frames):
    """A frame with one byte changed and cut short at some point: mostly still protobuf, often no longer SDS."""
    frame = draw(frames)
    if not frame:
        return frame
    at = draw(st.integers(0, len(frame) - 1))
    frame = frame[:at] + bytes((draw(st.integers(0, 255)),)) + frame[at + 1 :]
    return frame[: draw(st.integers(0, len(frame)))]


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(st.one_of(st.binary(max_size=600), _valid_sds, _damaged(_valid_sds)), st.sampled_from(REASONS))
def test_sds_bytes_in_a_signed_node_frame_reach_the_decoder_and_decode_or_fail_cleanly(data, reason):
    """Random bytes outside a frame never get past the signature (they used to be all this test fed the decoder, so
    it never reached it, and random bytes alone seldom parse): here valid, damaged and random SDS frames are signed,
    so the frame layer hands them over unchanged, and the SDS decoder must either decode them into a message that
    re-encodes to itself or raise WireError."""
    publisher, got_reason, sds = unpack(pack(_PUBLISHER, b"binding", data, reason), b"binding")
    assert (publisher, got_reason, sds) == (_PUBLISHER.participant_id, reason, data)
    try:
        message = wire.decode(sds)
    except WireError:
        return
    assert wire.decode(wire.encode(message)) == message


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), database=None)
@given(st.binary(min_size=1, max_size=300), st.data())
def test_a_changed_byte_of_a_signed_frame_is_refused_or_changes_nothing(data, draw):
    """Any one byte of a signed frame changed (anywhere: version, reason, signature, the compressed head, the tail)
    gives FrameError, or, where the change is one zlib ignores, exactly the frame that was signed: never other
    content under the publisher's name. Random bytes of their own must fail the same clean way."""
    frame = pack(_PUBLISHER, b"binding", data, "message")
    at = draw.draw(st.integers(0, len(frame) - 1))
    byte = draw.draw(st.integers(0, 255).filter(lambda b: b != frame[at]))
    for candidate in (frame[:at] + bytes((byte,)) + frame[at + 1 :], frame[:at], bytes((byte,)) + frame[1:at]):
        try:
            got = unpack(candidate, b"binding")
        except FrameError:
            continue
        assert got == (_PUBLISHER.participant_id, "message", data), (at, byte)


def test_receiver_state_stays_sound_under_a_stream_of_hostile_frames(F, corpus):
    """Mutated frames into one long-lived engine: invariants hold, persistence round-trips."""
    tally = F.Tally()
    target = F.ReceiveTarget(corpus, tally)
    rng = random.Random(5)
    ids = [wire.decode(d).message_id for _, _, d in corpus.sds]
    for _, _, data in corpus.sds:  # some real traffic first, so the engine has state to damage
        target(data)
    for _ in range(3_000):
        _, _, data = rng.choice(corpus.sds)
        target(
            F.mutate_pb(data, rng, ids, corpus.key.channel_id)
            if rng.random() < 0.6
            else F.mutate_bytes(data, rng, [d for _, _, d in corpus.sds])
        )
    target.round_trip()
    assert tally.bug_count == 0, tally.bugs
    assert target.channel.check_invariants() == []
    assert len(target.channel.log) > 0


# ------------------------------------------------------------------ the whole node


def _member_frame(corpus, body: bytes) -> bytes:
    from sdschat.node import signer
    from sdschat.sds import MessageChannel

    member = corpus.members[1]
    ch = MessageChannel(
        corpus.key.channel_id,
        member.participant_id,
        corpus.channels[member.participant_id].config,
        int(time.time() * 1000),
    )
    return pack(
        member,
        corpus.key.channel_binding,
        ch.send(body, int(time.time() * 1000), sign=signer(member, corpus.key.channel_binding)).data,
        "message",
    )


# Application payloads a member can sign (it holds the channel key and its own identity). Each one
# must be rejected and counted ("bad_payload"), never raise out of Node._on_frame or break the store.
HOSTILE_PAYLOADS = {
    "deeply_nested_json": b"[" * 100_000,
    "integer_over_4300_digits": b'{"v":1,"k":"msg","nick":"a","text":"x","ts":1' + b"0" * 5000 + b"}",
    "lone_surrogate_in_nick": b'{"v":1,"k":"msg","nick":"\\ud800","text":"hi","ts":1763769600000,"n":"ab"}',
    "lone_surrogate_in_text": b'{"v":1,"k":"msg","nick":"eve","text":"\\udfff","ts":1763769600000,"n":"ab"}',
}


@pytest.mark.parametrize("name", sorted(HOSTILE_PAYLOADS))
def test_member_signed_hostile_payload_is_rejected_by_the_node(F, corpus, rel_mosquitto, tmp_path, name):
    """Found by tests/support/fuzz_frames.py (node target)."""

    async def main():
        tally = F.Tally()
        target = F.NodeTarget(corpus, tally, rel_mosquitto.url, tmp_path)
        await target.start()
        try:
            await target.feed(_member_frame(corpus, HOSTILE_PAYLOADS[name]), name)
            node = target.node
            # the node goes on: a normal message from the same member is still delivered and stored
            ok = _member_frame(corpus, b'{"v":1,"k":"msg","nick":"eve","text":"after","ts":1763769600000,"n":"cd"}')
            await target.feed(ok, "normal")
            # (its own join aside)
            return tally, node is target.node, [m.text for m in target.node.messages() if m.kind == "msg"]
        finally:
            await target.stop()

    tally, same_node, texts = asyncio.run(main())
    assert tally.bug_count == 0, {k: v for k, v in tally.bugs.items()}
    assert same_node and texts[-1:] == ["after"], texts


def test_mutated_frames_through_a_running_node(F, corpus, rel_mosquitto, tmp_path):
    """Sealed with the channel key (so they pass AEAD): mutated SDS frames and node frames."""

    async def main():
        tally = F.Tally()
        target = F.NodeTarget(corpus, tally, rel_mosquitto.url, tmp_path)
        await target.start()
        rng = random.Random(17)
        ids = [wire.decode(d).message_id for _, _, d in corpus.sds]
        try:
            for i in range(400):
                reason, pub, data = rng.choice(corpus.sds)
                if i % 2:
                    plain = corpus.frame(pub, F.mutate_pb(data, rng, ids, corpus.key.channel_id), reason)
                else:
                    plain = F.mutate_bytes(corpus.frame(pub, data, reason), rng, corpus.node_frames)
                await target.feed(plain)
            await target.check()
        finally:
            await target.stop()
        return tally

    tally = asyncio.run(main())
    assert tally.bug_count == 0, tally.bugs
    assert tally.total("node") == 400


# ------------------------------------------------------------------ database rows


@pytest.fixture(scope="module")
def template(F, rel_mosquitto, tmp_path_factory):
    folder = tmp_path_factory.mktemp("rel-fuzz-template")
    db, key = asyncio.run(F.make_template(folder, rel_mosquitto.url))
    return db, key


def test_mutated_database_rows_give_store_error_or_a_sound_engine(F, template, tmp_path):
    """Store.load_state + MessageChannel.restore on copies of a real database with rows mutated via sqlite3:
    a damaged row must surface as StoreError (the CLI's one line), not as any other exception."""
    db, _ = template
    tally = F.Tally()
    asyncio.run(F.fuzz_rows(db, 150, random.Random(23), tally, tmp_path))
    by = tally.by_target()["rows"]
    assert sum(by.values()) == 150
    assert tally.bug_count == 0, "\n".join(
        f"{b['type']} at {b['where']}: {b['message']} <- {b['sample']}" for b in tally.bugs.values()
    )


@pytest.mark.parametrize(
    "damage",
    [
        "UPDATE messages SET after_lost = 'not json' WHERE rowid = (SELECT MIN(rowid) FROM messages)",
        "UPDATE channels SET lamport_timestamp = 1",  # well-typed, but behind the logged messages: inconsistent
        "UPDATE sds_log SET sender_id = x'00ff'",
    ],
    ids=["bad_json", "clock_behind_log", "blob_for_text"],
)
def test_damaged_database_row_gives_one_line_not_a_traceback(template, rel_mosquitto, tmp_path, damage):
    """A user-visible case of the above: one damaged column, then `sdschat bot`."""
    db, key = template
    copy = tmp_path / "damaged.db"
    shutil.copyfile(db, copy)
    os.chmod(copy, 0o600)
    con = sqlite3.connect(copy)
    con.execute(damage)
    con.commit()
    con.close()
    key_file = tmp_path / "k.key"
    key.write_key_file(key_file)
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "sdschat",
            "bot",
            "--name",
            "bob",
            "--channel",
            "fuzz-rows",
            "--key-file",
            str(key_file),
            "--db",
            str(copy),
            "--broker",
            rel_mosquitto.url,
            "--count",
            "0",
            "--linger",
            "0",
            "--quiet",
            "--max-runtime",
            "10",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert p.returncode != 0
    assert "Traceback" not in p.stderr and len(lines) == 1, p.stderr[-1500:]
    assert "damaged.db" in lines[0] and "damaged" in lines[0].replace("damaged.db", ""), lines
