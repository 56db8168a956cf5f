"""Ed25519 identities, fingerprints, verify()."""

import hashlib

import pytest

from sdschat.crypto import CryptoError, Identity, fingerprint, verify

# RFC 8032, section 7.1, TEST 1
RFC_SK = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
RFC_PK = bytes.fromhex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
RFC_SIG = bytes.fromhex(
    "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
    "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"
)


def test_rfc8032_vector():
    ident = Identity.from_private_bytes(RFC_SK)
    assert ident.public_bytes() == RFC_PK
    assert ident.sign(b"") == RFC_SIG
    assert verify(RFC_PK, b"", RFC_SIG)


def test_generate_sizes_and_participant_id():
    ident = Identity.generate()
    pub = ident.public_bytes()
    assert len(ident.private_bytes()) == 32 and len(pub) == 32
    assert ident.participant_id == hashlib.sha256(pub).digest()[:16].hex() == fingerprint(pub)
    assert len(ident.participant_id) == 32
    assert Identity.generate().participant_id != ident.participant_id


def test_private_bytes_round_trip():
    ident = Identity.generate()
    again = Identity.from_private_bytes(ident.private_bytes())
    assert again.public_bytes() == ident.public_bytes()
    assert again.participant_id == ident.participant_id
    assert again.sign(b"msg") == ident.sign(b"msg")  # Ed25519 is deterministic


def test_sign_and_verify():
    ident = Identity.generate()
    sig = ident.sign(b"hello")
    assert len(sig) == 64
    assert verify(ident.public_bytes(), b"hello", sig)
    assert verify(bytearray(ident.public_bytes()), memoryview(b"hello"), bytearray(sig))
    assert not verify(ident.public_bytes(), b"hellO", sig)
    assert not verify(Identity.generate().public_bytes(), b"hello", sig)
    bad = bytearray(sig)
    bad[10] ^= 1
    assert not verify(ident.public_bytes(), b"hello", bytes(bad))


@pytest.mark.parametrize(
    "pub, data, sig",
    [
        (b"", b"x", bytes(64)),
        (bytes(31), b"x", bytes(64)),
        (bytes(32), b"x", bytes(63)),
        (b"\xff" * 32, b"x", bytes(64)),
        (bytes(32), b"x", bytes(64)),
        (None, b"x", bytes(64)),
        ("a" * 32, b"x", bytes(64)),
        (bytes(32), None, bytes(64)),
        (bytes(32), "text", bytes(64)),
        (bytes(32), b"x", None),
        (bytes(32), b"x", 12345),
    ],
)
def test_verify_never_raises(pub, data, sig):
    assert verify(pub, data, sig) is False


P = 2**255 - 19
Y8 = int.from_bytes(bytes.fromhex("26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05"), "little")
SMALL_ORDER_KEYS = [
    (y + extra).to_bytes(32, "little")[:31] + bytes(((y + extra).to_bytes(32, "little")[31] | sign,))
    for y in (0, 1, P - 1, Y8, P - Y8)
    for extra in (0, P)  # canonical and non-canonical encodings
    if y + extra < 2**255
    for sign in (0, 0x80)
]


def test_small_order_public_keys_rejected():
    # OpenSSL accepts the all-zero key with the all-zero signature for any
    # message; verify() must not.
    assert len(SMALL_ORDER_KEYS) == 14  # 5 y values x 2 signs + non-canonical p, p+1
    for key in SMALL_ORDER_KEYS:
        for sig in (bytes(64), key + bytes(32), RFC_SIG):
            for data in (b"", b"x", b"anything"):
                assert verify(key, data, sig) is False


@pytest.mark.parametrize("bad", [b"", bytes(31), bytes(33), None, "x" * 32])
def test_from_private_bytes_rejects_bad_input(bad):
    with pytest.raises(CryptoError):
        Identity.from_private_bytes(bad)


@pytest.mark.parametrize("bad", [b"", bytes(31), bytes(33)])
def test_fingerprint_rejects_wrong_length(bad):
    with pytest.raises(ValueError):
        fingerprint(bad)


def test_repr_hides_keys():
    ident = Identity.from_private_bytes(RFC_SK)
    for text in (repr(ident), str(ident)):
        assert RFC_SK.hex() not in text
        assert RFC_SK.hex()[:16] not in text
        assert RFC_PK.hex() not in text
        assert ident.participant_id in text
    assert not hasattr(ident, "__dict__")


def test_verify_remembers_a_bounded_number_of_keys_and_checks_every_signature_under_one():
    """Key objects are made once per public key (a member's every frame is checked against the same key), at
    most ``KEYS_REMEMBERED`` of them: a flood of made-up keys only pushes out the oldest."""
    from sdschat.crypto.identity import KEYS_REMEMBERED, _public_key

    who = Identity.generate()
    sig = who.sign(b"m")
    assert verify(who.public_bytes(), b"m", sig) and verify(who.public_bytes(), b"m", sig)
    assert not verify(who.public_bytes(), b"n", sig)  # a remembered key still checks each signature
    assert not verify(who.public_bytes(), b"m", sig[:-1] + bytes([sig[-1] ^ 1]))
    for _ in range(KEYS_REMEMBERED + 50):
        assert not verify(Identity.generate().public_bytes(), b"m", sig)
    assert _public_key.cache_info().currsize == KEYS_REMEMBERED
    assert verify(who.public_bytes(), b"m", sig)  # pushed out, and made again
    assert fingerprint(who.public_bytes()) == hashlib.sha256(who.public_bytes()).digest()[:16].hex()
