"""The node frame (sdschat.node.frame): version 3 compresses the SDS frame's metadata and carries its content
as it is; version 2 still reads; damage, bombs and junk are refused with FrameError."""

from __future__ import annotations

import random
import string
import zlib

import pytest

from sdschat.crypto import FRAME_DOMAIN, ChannelKey, Identity, signed_content
from sdschat.node import node_channel_config
from sdschat.node.authored import signer
from sdschat.node.frame import MAX_HEAD, FrameError, open_frame, pack, unpack
from sdschat.sds import MessageChannel

KEY = ChannelKey(bytes(range(32)), "frames")
ALICE = Identity.from_private_bytes(bytes(range(1, 33)))
BINDING = KEY.channel_binding


def chat_frames(texts: list[bytes]) -> list[bytes]:
    """SDS frames as a node sends them (its settings, signed content), after 30 lines of traffic."""
    ch = MessageChannel(KEY.channel_id, ALICE.participant_id, node_channel_config(), 1_000)
    sign = signer(ALICE, BINDING)
    for i in range(30):
        ch.send(f"warm-up line {i}".encode(), 1_000 + i, sign=sign)
    return [ch.send(t, 2_000 + i, sign=sign).data for i, t in enumerate(texts)]


def test_a_frame_round_trips_for_every_reason():
    sds = chat_frames([b"hello"])[0]
    for reason in ("message", "resend", "repair", "sync", "ephemeral"):
        packed = pack(ALICE, BINDING, sds, reason)
        assert packed[0] == 3
        assert unpack(packed, BINDING) == (ALICE.participant_id, reason, sds)


def test_the_metadata_is_compressed_and_the_content_is_carried_as_it_is():
    text = b"the text of the line, never compressed " * 3
    sds = chat_frames([text])[0]
    packed = pack(ALICE, BINDING, sds)
    assert len(packed) < len(sds) * 0.8  # the bloom filter and the history's hex ids shrink
    assert text in packed  # the content (with the text) is there verbatim, outside the DEFLATE stream


def test_what_a_text_says_does_not_change_the_frame_size():
    """Compression could show how compressible a text is (the CRIME/BREACH side channel). The text is never
    compressed: a text of one repeated letter and a random one of the same length give frames within a few
    bytes (the message id differs, and so its compressed hex) -- where compressing the whole frame would set
    them hundreds of bytes apart."""
    rng = random.Random(7)
    n = 400
    dull = b"a" * n
    lively = "".join(rng.choice(string.ascii_letters) for _ in range(n)).encode()
    (f_dull,), (f_lively,) = chat_frames([dull]), chat_frames([lively])  # (after the same traffic)
    assert abs(len(pack(ALICE, BINDING, f_dull)) - len(pack(ALICE, BINDING, f_lively))) <= 8
    # (the side channel this avoids: the whole frame compressed)
    assert len(zlib.compress(f_lively)) - len(zlib.compress(f_dull)) > 200
    sealed = {len(KEY.seal(pack(ALICE, BINDING, f))) for f in (f_dull, f_lively)}
    assert len(sealed) == 1  # one bucket


def test_a_version_2_frame_of_an_earlier_sdschat_still_reads():
    sds = chat_frames([b"from an earlier version"])[0]
    code = b"\x03"  # sync
    v2 = b"\x02" + code + signed_content(ALICE, BINDING, code + sds, domain=FRAME_DOMAIN)
    assert unpack(v2, BINDING) == (ALICE.participant_id, "sync", sds)


def test_any_change_to_a_frame_is_refused():
    sds = chat_frames([b"do not touch"])[0]
    packed = pack(ALICE, BINDING, sds)
    refused = 0
    for at in range(1, len(packed)):
        damaged = bytearray(packed)
        damaged[at] ^= 0x01
        with pytest.raises(FrameError):
            unpack(bytes(damaged), BINDING)
        refused += 1
    assert refused == len(packed) - 1
    with pytest.raises(FrameError) as exc:
        unpack(packed, b"another channel")
    assert exc.value.reason == "bad_signature"


def test_a_frame_whose_reason_is_changed_is_refused_as_forged():
    packed = bytearray(pack(ALICE, BINDING, chat_frames([b"x"])[0], "sync"))
    packed[1] = 0  # "message"
    with pytest.raises(FrameError) as exc:
        unpack(bytes(packed), BINDING)
    assert exc.value.reason == "bad_signature"


@pytest.mark.parametrize("case", ["bomb", "truncated", "junk", "tail", "short", "garbage"])
def test_malformed_frames_are_refused_cleanly(case):
    good = pack(ALICE, BINDING, chat_frames([b"y"])[0])
    head_at = 2 + 96
    if case == "bomb":  # 64 MB of zeros in a few KB: refused at MAX_HEAD, not inflated
        data = good[:head_at] + b"\x00" + zlib.compress(bytes(64 * MAX_HEAD), 9)
    elif case == "truncated":
        data = good[:-5]
    elif case == "junk":
        data = good + b"junk"
    elif case == "tail":  # a tail length past the end
        data = good[:head_at] + b"\xff\xff\x03" + good[head_at + 2 :]
    elif case == "short":
        data = good[:head_at]
    else:
        data = b"\x03\x00" + bytes(200)
    with pytest.raises(FrameError) as exc:
        unpack(data, BINDING)
    assert exc.value.reason in ("malformed", "bad_signature")


def test_open_frame_tells_a_message_published_by_its_author_and_verify_still_checks_it():
    """``open_frame`` reads a frame without its signature check; ``by_its_author`` is true only for reason
    ``message`` with the frame's key the key of the content it carries (what the receiver may take on the
    content's signature, sdschat.node.receive); ``verify`` is the check ``unpack`` makes."""
    sds = chat_frames([b"mine"])[0]
    own = open_frame(pack(ALICE, BINDING, sds))
    assert own.by_its_author() and own.public_key == ALICE.public_bytes() and own.sds_frame == sds
    assert own.verify(BINDING) == ALICE.participant_id
    bob = Identity.from_private_bytes(bytes(range(2, 34)))
    relayed = open_frame(pack(bob, BINDING, sds, "repair"))  # bob's answer with alice's message
    assert not relayed.by_its_author() and relayed.verify(BINDING) == bob.participant_id
    assert not open_frame(pack(bob, BINDING, sds)).by_its_author()  # alice's content in a frame bob signs
    assert not open_frame(pack(ALICE, BINDING, sds, "resend")).by_its_author()
    code = b"\x00"
    v2 = open_frame(b"\x02" + code + signed_content(ALICE, BINDING, code + sds, domain=FRAME_DOMAIN))
    assert not v2.by_its_author() and v2.verify(BINDING) == ALICE.participant_id  # (version 2: no tail read)
    broken = bytearray(pack(ALICE, BINDING, sds))
    broken[2 + 32] ^= 1  # the frame signature
    opened = open_frame(bytes(broken))
    assert opened.by_its_author()  # (what the frame says: the receiver checks the content, then decides)
    with pytest.raises(FrameError) as err:
        opened.verify(BINDING)
    assert err.value.reason == "bad_signature"
