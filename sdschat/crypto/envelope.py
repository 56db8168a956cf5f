"""The AEAD envelope: the only bytes that go on the wire.

Format (version 2, sealed by this version; version 1 still opens)::

    offset  size  field
    0       1     version            0x02
    1       1     algorithm id       0x01 = AES-256-GCM
    2       12    nonce              os.urandom(12), fresh per envelope
    14      p+16  ciphertext || tag  AES-256-GCM of the p-byte padded plaintext

    padded plaintext = length (4 bytes, big-endian) || plaintext || zero bytes

The padding brings the whole envelope to a size bucket: Padmé
(:func:`padded_size`, from the PURBs paper: a size keeps only its top
log2(log2(size)) + 1 bits, so the overhead is at most ~12%), in steps of at
least ``MIN_STEP`` (256 bytes), and never below ``MIN_ENVELOPE_SIZE`` (1 KB:
every frame up to it -- a resend, a repair answer, a typing notice, with up to
~700 characters of text -- looks alike). The broker sees bucket sizes only: a
chat line's frame (~1.8 KB with its compressed bloom filter and history, see
sdschat.node.frame) shows its text's length to 256 bytes, a ~20 KB frame to
1 KB; what a text *says* never shows (frames compress only what is not the
text). The zero padding is checked on open.

Version 1 (sealed by earlier versions) is the same without the length and padding:
``ciphertext = AES-256-GCM(plaintext)``; envelopes of that version, stored by a
store node or sent by an older peer, still open.

Associated data (authenticated, not transmitted)::

    version (1) || algorithm id (1) || channel binding (32)

so an envelope only opens under the same key *and* the same channel binding
(a value derived from the channel key and name, never the name itself).
The nonce is authenticated implicitly by GCM.

Plaintexts are limited to ``MAX_PLAINTEXT_SIZE`` (4 MiB); envelopes longer
than ``MAX_ENVELOPE_SIZE`` are rejected before any work is done. Random 96-bit
nonces are safe for far more than 2**32 envelopes per key, well beyond a chat
channel's lifetime.
"""

from __future__ import annotations

import hashlib
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from .errors import EnvelopeError

__all__ = [
    "ENVELOPE_VERSION",
    "MIN_ENVELOPE_SIZE",
    "MIN_STEP",
    "padded_size",
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

ENVELOPE_VERSION = 0x02
_V1 = 0x01
ALG_AES_256_GCM = 0x01
NONCE_SIZE = 12
TAG_SIZE = 16
HEADER_SIZE = 2 + NONCE_SIZE
#: the fixed bytes of an envelope (header and tag), and of its padded plaintext (the length)
ENVELOPE_OVERHEAD = HEADER_SIZE + TAG_SIZE
LENGTH_SIZE = 4
MIN_ENVELOPE_SIZE = 1024
#: the smallest step between two buckets (Padmé's own steps are finer below 8 KB)
MIN_STEP = 256
MAX_PLAINTEXT_SIZE = 4 * 1024 * 1024
MAX_ENVELOPE_SIZE = MAX_PLAINTEXT_SIZE + MAX_PLAINTEXT_SIZE // 8 + ENVELOPE_OVERHEAD + LENGTH_SIZE

_PREFIX = bytes((ENVELOPE_VERSION, ALG_AES_256_GCM))
_PREFIX_V1 = bytes((_V1, ALG_AES_256_GCM))
_BYTES_LIKE = (bytes, bytearray, memoryview)


def padded_size(size: int) -> int:
    """The envelope size a ``size``-byte envelope is padded to: Padmé in steps of at least ``MIN_STEP``, at least
    ``MIN_ENVELOPE_SIZE``."""
    size = max(size, MIN_ENVELOPE_SIZE)
    e = size.bit_length() - 1  # floor(log2 size)
    mask = ((1 << (e - e.bit_length())) - 1) | (MIN_STEP - 1)  # keep the top floor(log2 e) + 1 bits
    return (size + mask) & ~mask


class EnvelopeCipher:
    """Seals and opens envelopes for one (AEAD key, channel binding) pair.

    Normally obtained through :class:`sdschat.crypto.ChannelKey`, which derives
    both values; constructing one directly is for tests and tools.
    """

    __slots__ = ("_aead", "_aad", "_aad_v1")

    def __init__(self, aead_key: bytes, channel_binding: bytes) -> None:
        if len(aead_key) != 32:
            raise ValueError("AEAD key must be 32 bytes")
        self._aead = AESGCM(bytes(aead_key))
        self._aad = _PREFIX + bytes(channel_binding)
        self._aad_v1 = _PREFIX_V1 + bytes(channel_binding)

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
        n = len(plaintext)
        target = padded_size(n + LENGTH_SIZE + ENVELOPE_OVERHEAD) - ENVELOPE_OVERHEAD
        padded = n.to_bytes(LENGTH_SIZE, "big") + bytes(plaintext) + bytes(target - n - LENGTH_SIZE)
        nonce = os.urandom(NONCE_SIZE)
        return _PREFIX + nonce + self._aead.encrypt(nonce, padded, self._aad)

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
        version = data[0]
        if version not in (ENVELOPE_VERSION, _V1):
            raise EnvelopeError("version")
        if size < ENVELOPE_OVERHEAD + (LENGTH_SIZE if version == ENVELOPE_VERSION else 0):
            raise EnvelopeError("short")
        if data[1] != ALG_AES_256_GCM:
            raise EnvelopeError("algorithm")
        aad = self._aad if version == ENVELOPE_VERSION else self._aad_v1
        try:
            plain = self._aead.decrypt(data[2:HEADER_SIZE], data[HEADER_SIZE:], aad)
        except InvalidTag:
            raise EnvelopeError("auth") from None
        if version == _V1:
            return plain
        n = int.from_bytes(plain[:LENGTH_SIZE], "big")
        end = LENGTH_SIZE + n
        if end > len(plain) or plain.count(0, end) != len(plain) - end:  # sealed by sdschat: never happens
            raise EnvelopeError("padding")
        return plain[LENGTH_SIZE:end]


def envelope_hash(envelope: bytes) -> bytes:
    """SHA-256 of the exact envelope bytes (32 bytes); a retrieval hint."""
    return hashlib.sha256(envelope).digest()
