"""Participant identities: Ed25519 key pairs.

- private key: raw 32-byte Ed25519 seed (RFC 8032);
- public key: raw 32 bytes;
- signature: 64 bytes;
- ``participant_id`` / :func:`fingerprint`: the first 16 bytes of
  SHA-256(raw public key), as 32 lowercase hex characters.

:func:`verify` rejects small-order ("weak") public keys: OpenSSL accepts,
for example, the all-zero public key with the all-zero signature for any
message, which would let anyone post under that key's participant id.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from .errors import CryptoError

__all__ = [
    "PRIVATE_KEY_SIZE",
    "PUBLIC_KEY_SIZE",
    "SIGNATURE_SIZE",
    "FINGERPRINT_SIZE",
    "Identity",
    "fingerprint",
    "verify",
]

PRIVATE_KEY_SIZE = 32
PUBLIC_KEY_SIZE = 32
SIGNATURE_SIZE = 64
FINGERPRINT_SIZE = 16  # bytes of SHA-256 kept; the hex string is twice as long

_BYTES_LIKE = (bytes, bytearray, memoryview)
_RAW = serialization.Encoding.Raw

# The eight points of order dividing 8 have exactly these y coordinates
# (identity 1, order 2: p-1, order 4: 0, order 8: +-Y8), whatever the sign bit.
_P = 2**255 - 19
_Y8 = int.from_bytes(bytes.fromhex("26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05"), "little")
_SMALL_ORDER_Y = frozenset({0, 1, _P - 1, _Y8, _P - _Y8})


def _is_small_order(public_key: bytes) -> bool:
    """True if the encoded point (canonical or not) has order 1, 2, 4 or 8."""
    y = int.from_bytes(public_key, "little") & ((1 << 255) - 1)
    return y % _P in _SMALL_ORDER_Y


def fingerprint(public_key_bytes: bytes) -> str:
    """Participant id of a raw 32-byte public key (32 hex chars).

    Raises ``ValueError`` if the input is not 32 bytes.
    """
    if not isinstance(public_key_bytes, _BYTES_LIKE) or len(public_key_bytes) != PUBLIC_KEY_SIZE:
        raise ValueError(f"public key must be {PUBLIC_KEY_SIZE} bytes")
    return _fingerprint(bytes(public_key_bytes))


#: how many public keys :func:`fingerprint` and :func:`verify` remember: a channel's members, and then some;
#: a flood of made-up keys only pushes out the oldest (each costs what it cost before the caches)
KEYS_REMEMBERED = 1024


@lru_cache(maxsize=KEYS_REMEMBERED)
def _fingerprint(public_key: bytes) -> str:
    return hashlib.sha256(public_key).digest()[:FINGERPRINT_SIZE].hex()


@lru_cache(maxsize=KEYS_REMEMBERED)
def _public_key(public_key: bytes) -> Ed25519PublicKey | None:
    """The key object of an encoded public key, made once per key (every frame of a member is checked against
    the same few keys); None for a small-order or undecodable key, which nothing verifies under."""
    if _is_small_order(public_key):
        return None
    try:
        return Ed25519PublicKey.from_public_bytes(public_key)
    except ValueError:
        return None


def verify(public_key_bytes: bytes, data: bytes, signature: bytes) -> bool:
    """True iff ``signature`` is a valid Ed25519 signature of ``data``.

    Returns False (never raises) on any bad input: wrong types or lengths,
    an invalid or small-order public key, a bad signature.
    """
    if not (
        isinstance(public_key_bytes, _BYTES_LIKE)
        and isinstance(data, _BYTES_LIKE)
        and isinstance(signature, _BYTES_LIKE)
        and len(public_key_bytes) == PUBLIC_KEY_SIZE
        and len(signature) == SIGNATURE_SIZE
    ):
        return False
    key = _public_key(bytes(public_key_bytes))
    if key is None:
        return False
    try:
        key.verify(bytes(signature), bytes(data))
    except (InvalidSignature, ValueError):
        return False
    return True


class Identity:
    """One participant's Ed25519 key pair.

    The repr shows only the participant id, never key bytes.
    """

    __slots__ = ("_private", "_public", "_participant_id")

    def __init__(self, private_key: Ed25519PrivateKey) -> None:
        """Wrap a ``cryptography`` private key; prefer the classmethods."""
        self._private = private_key
        self._public = private_key.public_key().public_bytes(_RAW, serialization.PublicFormat.Raw)
        self._participant_id = fingerprint(self._public)

    @classmethod
    def generate(cls) -> Identity:
        """A new random identity."""
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def from_private_bytes(cls, private_bytes: bytes) -> Identity:
        """Load an identity from its raw 32-byte private key.

        Raises :class:`CryptoError` if the input is not 32 bytes.
        """
        if not isinstance(private_bytes, _BYTES_LIKE) or len(private_bytes) != PRIVATE_KEY_SIZE:
            raise CryptoError(f"identity private key must be {PRIVATE_KEY_SIZE} bytes")
        return cls(Ed25519PrivateKey.from_private_bytes(bytes(private_bytes)))

    def private_bytes(self) -> bytes:
        """The raw 32-byte private key (a secret: store it 0600, never log it)."""
        return self._private.private_bytes(_RAW, serialization.PrivateFormat.Raw, serialization.NoEncryption())

    def public_bytes(self) -> bytes:
        """The raw 32-byte public key."""
        return self._public

    @property
    def participant_id(self) -> str:
        """:func:`fingerprint` of the public key (32 hex chars)."""
        return self._participant_id

    def sign(self, data: bytes) -> bytes:
        """Ed25519 signature (64 bytes) of ``data``."""
        return self._private.sign(bytes(data))

    def __repr__(self) -> str:
        return f"Identity(participant_id={self._participant_id!r})"
