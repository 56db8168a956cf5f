"""Signed content: format, forgery, rebroadcast."""

import pytest

from sdschat.crypto import (
    ChannelKey,
    CryptoError,
    Identity,
    SignatureError,
    open_signed_content,
    read_signed_content,
    signed_content,
)

CHANNEL = ChannelKey(bytes(range(32)), "general")
BINDING = CHANNEL.channel_binding
ALICE = Identity.generate()
MALLORY = Identity.generate()


def reason_of(data, binding=BINDING):
    with pytest.raises(SignatureError) as info:
        open_signed_content(data, binding)
    return info.value.reason


def test_round_trip_and_format():
    blob = signed_content(ALICE, BINDING, b"hello")
    assert blob[0] == 1
    assert blob[1:33] == ALICE.public_bytes()
    assert len(blob) == 1 + 32 + 64 + 5
    assert blob.endswith(b"hello")
    sender_id, public_key, message = open_signed_content(blob, BINDING)
    assert sender_id == ALICE.participant_id
    assert public_key == ALICE.public_bytes()
    assert message == b"hello"
    assert open_signed_content(bytearray(blob), BINDING).message == b"hello"


def test_empty_message():
    assert open_signed_content(signed_content(ALICE, BINDING, b""), BINDING).message == b""


def test_signature_forged_by_another_identity_rejected():
    # Mallory claims Alice's public key but can only sign with her own key.
    genuine = signed_content(MALLORY, BINDING, b"send money")
    forged = bytes([1]) + ALICE.public_bytes() + genuine[33:]
    assert reason_of(forged) == "invalid"
    # Mallory signing as herself is valid, but under her own participant id,
    # which the caller compares with the SDS frame's sender_id.
    assert open_signed_content(genuine, BINDING).participant_id == MALLORY.participant_id
    assert MALLORY.participant_id != ALICE.participant_id


def test_signature_from_another_message_rejected():
    a = signed_content(ALICE, BINDING, b"one")
    b = signed_content(ALICE, BINDING, b"two")
    assert reason_of(a[:33] + b[33:97] + a[97:]) == "invalid"


def test_wrong_channel_binding_rejected():
    blob = signed_content(ALICE, BINDING, b"hello")
    other = ChannelKey(bytes(range(32)), "random").channel_binding
    assert reason_of(blob, other) == "invalid"
    assert reason_of(blob, b"") == "invalid"


def test_every_single_bit_flip_rejected():
    blob = signed_content(ALICE, BINDING, b"hey")
    for bit in range(len(blob) * 8):
        tampered = bytearray(blob)
        tampered[bit // 8] ^= 1 << (bit % 8)
        assert reason_of(bytes(tampered)) == ("version" if bit < 8 else "invalid"), bit


def test_truncation_and_extension_rejected():
    blob = signed_content(ALICE, BINDING, b"hello")
    for length in range(len(blob)):
        assert reason_of(blob[:length]) == ("short" if length < 97 else "invalid"), length
    assert reason_of(blob + b"\x00") == "invalid"


@pytest.mark.parametrize("value", [None, "text", 7])
def test_non_bytes(value):
    assert reason_of(value) == "type"


def test_signature_survives_rebroadcast():
    """Alice signs and seals; Bob opens and re-seals the same content for
    repair; Carol still verifies it as Alice's."""
    bob_key = ChannelKey(bytes(range(32)), "general")
    carol_key = ChannelKey(bytes(range(32)), "general")
    original = CHANNEL.seal(signed_content(ALICE, BINDING, b"hello all"))
    carried = bob_key.open(original)
    rebroadcast = bob_key.seal(carried)
    assert rebroadcast != original
    sender_id, public_key, message = open_signed_content(carol_key.open(rebroadcast), carol_key.channel_binding)
    assert (sender_id, public_key, message) == (ALICE.participant_id, ALICE.public_bytes(), b"hello all")


def test_signature_error_is_crypto_error():
    with pytest.raises(CryptoError):
        open_signed_content(b"", BINDING)


# ------------------------------------------------------------ version 2: a context signed along


def test_context_is_signed_but_not_carried():
    blob = signed_content(ALICE, BINDING, b"hello", context=b"lamport+history")
    assert blob[0] == 2 and blob.endswith(b"hello") and len(blob) == 1 + 32 + 64 + 5
    assert b"lamport" not in blob
    opened = open_signed_content(blob, BINDING, context=b"lamport+history")
    assert (opened.participant_id, opened.message) == (ALICE.participant_id, b"hello")


def test_a_different_context_does_not_verify():
    blob = signed_content(ALICE, BINDING, b"hello", context=b"\x01" + (1000).to_bytes(8, "big"))
    for other in (b"", b"\x01" + (1001).to_bytes(8, "big"), b"\x00"):
        with pytest.raises(SignatureError) as info:
            open_signed_content(blob, BINDING, context=other)
        assert info.value.reason == "invalid"


def test_versions_do_not_stand_in_for_each_other():
    """Content signed without a context is refused where one is expected, and the other way round; an empty
    context is still a context."""
    plain = signed_content(ALICE, BINDING, b"hello")
    with_context = signed_content(ALICE, BINDING, b"hello", context=b"")
    assert reason_of(with_context) == "version"
    with pytest.raises(SignatureError) as info:
        open_signed_content(plain, BINDING, context=b"")
    assert info.value.reason == "version"
    relabelled = bytes([2]) + plain[1:]  # v1 bytes claiming v2: the signature covers another message
    with pytest.raises(SignatureError) as info:
        open_signed_content(relabelled, BINDING, context=b"")
    assert info.value.reason == "invalid"


def test_read_signed_content_parses_without_verifying():
    """For content this participant verified on arrival and reads back from its own state: the parts, no check
    (a tampered signature is not noticed), malformed bytes still refused."""
    blob = bytearray(signed_content(ALICE, BINDING, b"hello", context=b"ctx"))
    blob[40] ^= 1
    parts = read_signed_content(bytes(blob))
    assert (parts.participant_id, parts.message) == (ALICE.participant_id, b"hello")
    for bad, reason in (
        (b"", "short"),
        (b"\x03" + bytes(100), "version"),
        (bytes(blob[:96]), "short"),
        ("text", "type"),
    ):
        with pytest.raises(SignatureError) as info:
            read_signed_content(bad)
        assert info.value.reason == reason


def test_a_received_context_too_long_to_have_been_signed_is_refused_not_raised():
    """A frame whose causal history makes a context beyond 64 KiB (found by tests/support/fuzz_frames.py: a ValueError
    escaped the receive path) is refused as not verifying."""
    blob = signed_content(ALICE, BINDING, b"hello", context=b"short")
    with pytest.raises(SignatureError) as e:
        open_signed_content(blob, BINDING, context=b"x" * 70_000)
    assert e.value.reason == "invalid"
