"""The AEAD envelope: the only bytes that go on the wire.

Format (version 1)::

    offset  size  field
    0       1     version            0x01
    1       1     algorithm id       0x01 = AES-256-GCM
    2       12    nonce              os.urandom(12), fresh per envelope
    14      n+16  ciphertext || tag  AES-256-GCM of the n-byte plaintext

Associated data (authenticated, not transmitted)::

    version (1) || algorithm id (1) || channel binding (32)

so an envelope only opens under the same key *and* the same channel binding
(a value derived from the channel key and name, never the name itself).
The nonce is authenticated implicitly by GCM.

Overhead is 30 bytes.  Plaintexts are limited to ``MAX_PLAINTEXT_SIZE``
(4 MiB); envelopes longer than ``MAX_ENVELOPE_SIZE`` are rejected before any
work is done.  Random 96-bit nonces are safe for far more than 2**32
envelopes per key, well beyond a chat channel's lifetime.
"""

from __future__ import annotations

import hashlib
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from .errors import EnvelopeError

__all__ = [
    "ENVELOPE_VERSION",
    "ALG_AES_256_GCM",
    "NONCE_SIZE",
    "TAG_SIZE",
    "HEADER_SIZE",
    "ENVELOPE_OVERHEAD",
    "MAX_PLAINTEXT_SIZE",
    "MAX_ENVELOPE_SIZE",
    "EnvelopeCipher",
    "envelope_hash",
]

ENVELOPE_VERSION = 0x01
ALG_AES_256_GCM = 0x01
NONCE_SIZE = 12
TAG_SIZE = 16
HEADER_SIZE = 2 + NONCE_SIZE
ENVELOPE_OVERHEAD = HEADER_SIZE + TAG_SIZE
MAX_PLAINTEXT_SIZE = 4 * 1024 * 1024
MAX_ENVELOPE_SIZE = MAX_PLAINTEXT_SIZE + ENVELOPE_OVERHEAD

_PREFIX = bytes((ENVELOPE_VERSION, ALG_AES_256_GCM))
_BYTES_LIKE = (bytes, bytearray, memoryview)


class EnvelopeCipher:
    """Seals and opens envelopes for one (AEAD key, channel binding) pair.

    Normally obtained through :class:`sdschat.crypto.ChannelKey`, which derives
    both values; constructing one directly is for tests and tools.
    """

    __slots__ = ("_aead", "_aad")

    def __init__(self, aead_key: bytes, channel_binding: bytes) -> None:
        if len(aead_key) != 32:
            raise ValueError("AEAD key must be 32 bytes")
        self._aead = AESGCM(bytes(aead_key))
        self._aad = _PREFIX + bytes(channel_binding)

    def __repr__(self) -> str:
        return "EnvelopeCipher(AES-256-GCM)"

    def seal(self, plaintext: bytes) -> bytes:
        """Encrypt ``plaintext`` into a fresh envelope (new random nonce).

        Raises ``TypeError`` if ``plaintext`` is not bytes-like and
        ``EnvelopeError(reason="too_large")`` above ``MAX_PLAINTEXT_SIZE``.
        """
        if not isinstance(plaintext, _BYTES_LIKE):
            raise TypeError("plaintext must be bytes-like")
        if len(plaintext) > MAX_PLAINTEXT_SIZE:
            raise EnvelopeError("too_large", "plaintext too large to seal")
        nonce = os.urandom(NONCE_SIZE)
        return _PREFIX + nonce + self._aead.encrypt(nonce, bytes(plaintext), self._aad)

    def open(self, envelope: bytes) -> bytes:
        """Authenticate and decrypt ``envelope``; return the plaintext.

        Any failure raises :class:`EnvelopeError` (see its ``reason`` codes);
        no other exception type escapes.
        """
        if not isinstance(envelope, _BYTES_LIKE):
            raise EnvelopeError("type")
        data = bytes(envelope)
        size = len(data)
        if size > MAX_ENVELOPE_SIZE:
            raise EnvelopeError("too_large")
        if size == 0:
            raise EnvelopeError("short")
        if data[0] != ENVELOPE_VERSION:
            raise EnvelopeError("version")
        if size < ENVELOPE_OVERHEAD:
            raise EnvelopeError("short")
        if data[1] != ALG_AES_256_GCM:
            raise EnvelopeError("algorithm")
        try:
            return self._aead.decrypt(data[2:HEADER_SIZE], data[HEADER_SIZE:], self._aad)
        except InvalidTag:
            raise EnvelopeError("auth") from None


def envelope_hash(envelope: bytes) -> bytes:
    """SHA-256 of the exact envelope bytes (32 bytes); a retrieval hint."""
    return hashlib.sha256(envelope).digest()
