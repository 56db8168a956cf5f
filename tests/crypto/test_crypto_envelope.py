"""Envelope format and every failure mode of open()."""

import hashlib

import pytest

from sdschat.crypto import (
    ENVELOPE_OVERHEAD,
    MAX_ENVELOPE_SIZE,
    MAX_PLAINTEXT_SIZE,
    ChannelKey,
    CryptoError,
    EnvelopeError,
    envelope_hash,
    padded_size,
)
from sdschat.crypto.envelope import EnvelopeCipher

KEY = ChannelKey(bytes(range(32)), "general")


def reason_of(key, envelope):
    with pytest.raises(EnvelopeError) as info:
        key.open(envelope)
    return info.value.reason


@pytest.mark.parametrize("size", [0, 1, 2, 100, 65_536])
def test_round_trip(size):
    plaintext = bytes(i % 251 for i in range(size))
    envelope = KEY.seal(plaintext)
    assert len(envelope) == padded_size(size + 4 + ENVELOPE_OVERHEAD) and ENVELOPE_OVERHEAD == 30
    assert envelope[0] == 2 and envelope[1] == 1
    assert KEY.open(envelope) == plaintext


def test_sizes_are_padme_buckets_of_at_least_256_bytes_with_bounded_overhead():
    sizes = {}
    for n in range(0, 30_000, 7):
        size = len(KEY.seal(bytes(n)))
        sizes.setdefault(size, []).append(n)
        assert size >= max(1024, n + 34) and size == padded_size(size)  # a bucket is its own padded size
        assert size % 256 == 0  # buckets at least 256 bytes apart
        if n >= 1024:
            assert size <= (n + 34) * 1.12 or size - (n + 34) < 256
    assert len(sizes) < 100  # 4,286 plaintext sizes, a few dozen envelope sizes
    # a chat line's frame (1-2 KB): 256-byte buckets
    assert [padded_size(n) for n in (1025, 1280, 1281, 1792, 1793)] == [1280, 1280, 1536, 1792, 2048]
    assert sizes[1024][0] == 0 and sizes[1024][-1] >= 980  # every short frame looks alike
    # the ~20 KB of a frame with a bloom filter: 1 KB buckets (~5% overhead)
    assert len(KEY.seal(bytes(18_500))) == len(KEY.seal(bytes(19_400))) == 19_456


def test_version_1_envelopes_still_open():
    """Envelopes sealed by sdschat 0.1/0.2 (no length, no padding), e.g. kept by a store node, open as before."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    aead_key, binding = bytes(range(32)), b"B" * 32
    nonce = bytes(12)
    v1 = b"\x01\x01" + nonce + AESGCM(aead_key).encrypt(nonce, b"from an older peer", b"\x01\x01" + binding)
    cipher = EnvelopeCipher(aead_key, binding)
    assert cipher.open(v1) == b"from an older peer"
    assert reason_of(cipher, b"\x02" + v1[1:]) == "auth"  # its version byte is authenticated


def test_malformed_padding_inside_an_authentic_envelope_is_refused():
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    aead_key, binding = bytes(range(32)), b"B" * 32
    cipher = EnvelopeCipher(aead_key, binding)
    nonce = bytes(12)
    for padded in (
        (300).to_bytes(4, "big") + bytes(200),  # a length beyond the plaintext
        (2).to_bytes(4, "big") + b"hi" + b"\x00\x01" + bytes(100),
    ):  # padding that is not zeros
        env = b"\x02\x01" + nonce + AESGCM(aead_key).encrypt(nonce, padded, b"\x02\x01" + binding)
        assert reason_of(cipher, env) == "padding"


def test_round_trip_max_size_and_bytes_like_inputs():
    plaintext = b"\xab" * MAX_PLAINTEXT_SIZE
    envelope = KEY.seal(plaintext)
    assert len(envelope) == padded_size(MAX_PLAINTEXT_SIZE + 34) <= MAX_ENVELOPE_SIZE
    assert KEY.open(envelope) == plaintext
    small = KEY.seal(bytearray(b"hello"))
    assert KEY.open(bytearray(small)) == b"hello"
    assert KEY.open(memoryview(small)) == b"hello"


def test_same_key_material_opens_across_instances():
    other = ChannelKey(bytes(range(32)), "general")
    assert other.open(KEY.seal(b"x")) == b"x"


def test_fresh_random_nonce_each_seal():
    a, b = KEY.seal(b"same"), KEY.seal(b"same")
    assert a != b
    assert a[2:14] != b[2:14]


def test_plaintext_not_visible_in_envelope():
    plaintext = b"a rather recognisable secret message"
    assert plaintext not in KEY.seal(plaintext)


def test_wrong_key():
    assert reason_of(ChannelKey.generate("general"), KEY.seal(b"hi")) == "auth"


def test_same_secret_other_channel_name_rejected():
    assert reason_of(KEY.for_channel("random"), KEY.seal(b"hi")) == "auth"


def test_channel_binding_is_associated_data():
    aead_key = bytes(32)
    a = EnvelopeCipher(aead_key, b"A" * 32)
    b = EnvelopeCipher(aead_key, b"B" * 32)
    envelope = a.seal(b"hi")
    assert a.open(envelope) == b"hi"
    with pytest.raises(EnvelopeError) as info:
        b.open(envelope)
    assert info.value.reason == "auth"


def test_bit_flips_of_a_short_envelope_are_rejected():
    envelope = KEY.seal(b"hi")
    assert len(envelope) == 1024
    for bit in range(0, len(envelope) * 8, 3):
        tampered = bytearray(envelope)
        tampered[bit // 8] ^= 1 << (bit % 8)
        expected = {0: "version", 1: "algorithm"}.get(bit // 8, "auth")
        assert reason_of(KEY, bytes(tampered)) == expected, bit


def test_sampled_bit_flips_of_a_longer_envelope_are_rejected():
    envelope = KEY.seal(bytes(300))
    for bit in range(0, len(envelope) * 8, 7):
        tampered = bytearray(envelope)
        tampered[bit // 8] ^= 1 << (bit % 8)
        with pytest.raises(EnvelopeError):
            KEY.open(bytes(tampered))


def test_truncation_at_every_length():
    envelope = KEY.seal(b"hello, world")
    for length in range(len(envelope)):
        reason = reason_of(KEY, envelope[:length])
        assert reason == ("short" if length < ENVELOPE_OVERHEAD + 4 else "auth"), length


@pytest.mark.parametrize("extra", [b"\x00", b"\xff" * 16, bytes(1000)])
def test_appended_bytes(extra):
    assert reason_of(KEY, KEY.seal(b"hi") + extra) == "auth"


@pytest.mark.parametrize("version", [0, 3, 0xFF])
def test_unknown_version(version):
    envelope = bytearray(KEY.seal(b"hi"))
    envelope[0] = version
    assert reason_of(KEY, bytes(envelope)) == "version"


def test_unknown_algorithm():
    envelope = bytearray(KEY.seal(b"hi"))
    envelope[1] = 2
    assert reason_of(KEY, bytes(envelope)) == "algorithm"


def test_empty_and_garbage():
    assert reason_of(KEY, b"") == "short"
    assert reason_of(KEY, b"\x01") == "short"
    assert reason_of(KEY, b"garbage") == "version"
    assert reason_of(KEY, b"\x01\x01" + bytes(40)) == "auth"


def test_oversized():
    assert reason_of(KEY, b"\x01\x01" + bytes(MAX_ENVELOPE_SIZE)) == "too_large"
    with pytest.raises(EnvelopeError) as info:
        KEY.seal(bytes(MAX_PLAINTEXT_SIZE + 1))
    assert info.value.reason == "too_large"


@pytest.mark.parametrize("value", [None, "text", 42, [1, 2]])
def test_non_bytes_input(value):
    assert reason_of(KEY, value) == "type"


def test_seal_rejects_non_bytes():
    with pytest.raises(TypeError):
        KEY.seal("text")


def test_envelope_error_is_crypto_error_with_short_message():
    with pytest.raises(CryptoError) as info:
        KEY.open(b"")
    assert isinstance(info.value, EnvelopeError)
    assert "\n" not in str(info.value)
    with pytest.raises(ValueError):
        EnvelopeError("not-a-reason")


def test_envelope_hash():
    envelope = KEY.seal(b"hi")
    digest = envelope_hash(envelope)
    assert digest == hashlib.sha256(envelope).digest()
    assert len(digest) == 32
    assert envelope_hash(KEY.seal(b"hi")) != digest


def test_cipher_repr_hides_key():
    key = bytes(range(32))
    assert key.hex() not in repr(EnvelopeCipher(key, b"b" * 32))
