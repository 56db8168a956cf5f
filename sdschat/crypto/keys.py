"""Channel keys and the values derived from them.

A channel is a (channel name, 32-byte secret) pair.  The secret comes from a
key file (see :mod:`.keyfile`), from ``os.urandom``, or from a passphrase:

    secret = scrypt(NFC(passphrase) utf-8,
                    salt = b"sdschat/v1/scrypt/" + NFC(channel name) utf-8,
                    n = 2**15, r = 8, p = 1, dklen = 32)

n=2**15, r=8 is 32 MiB of memory and about 0.08 s on the reference machine
(n=2**16 would be 0.16 s).  The parameters are part of the key: changing them
yields a different channel, so only tests should pass other ``ScryptParams``.

Every value used elsewhere is a separate HKDF-SHA256 subkey of the secret,
bound to the channel name (``salt`` = none, 32 zero bytes)::

    info = b"sdschat/v1/" + purpose + b"\\x00" + NFC(channel name) utf-8

    purpose        length  use
    b"aead"        32      AES-256-GCM key of the envelope
    b"binding"     32      channel binding: envelope associated data and
                           signed-content scope
    b"topic"       16      MQTT topic = "sdschat/" + 32 lowercase hex chars
    b"channel-id"  16      SDS channel_id = 32 lowercase hex chars

The broker only ever sees the topic, which reveals neither the channel name
nor the secret; the same key file used under two names gives two unrelated
channels.
"""

from __future__ import annotations

import os
import unicodedata
from dataclasses import dataclass

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from .envelope import EnvelopeCipher
from .keyfile import KEY_SIZE, read_key_file, write_key_file

__all__ = [
    "ScryptParams",
    "DEFAULT_SCRYPT_PARAMS",
    "SCRYPT_SALT_PREFIX",
    "TOPIC_PREFIX",
    "ChannelKey",
]

SCRYPT_SALT_PREFIX = b"sdschat/v1/scrypt/"
HKDF_INFO_PREFIX = b"sdschat/v1/"
TOPIC_PREFIX = "sdschat/"


@dataclass(frozen=True)
class ScryptParams:
    """scrypt cost parameters (``n`` a power of two > 1)."""

    n: int
    r: int
    p: int


DEFAULT_SCRYPT_PARAMS = ScryptParams(n=2**15, r=8, p=1)


def _normalize_name(channel_name: str) -> str:
    if not isinstance(channel_name, str):
        raise TypeError("channel name must be a str")
    name = unicodedata.normalize("NFC", channel_name)
    if not name:
        raise ValueError("channel name must not be empty")
    return name


def _hkdf(secret: bytes, purpose: bytes, name: bytes, length: int) -> bytes:
    info = HKDF_INFO_PREFIX + purpose + b"\x00" + name
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=None, info=info).derive(secret)


class ChannelKey:
    """The secret of one channel, bound to its name, plus derived values.

    Attributes (all read-only):

    - ``channel_name``: the name as typed (NFC-normalized); local only.
    - ``topic``: MQTT topic, ``"sdschat/" + 32 hex chars``.
    - ``channel_id``: opaque SDS channel id (32 hex chars), carried only
      inside encrypted payloads.
    - ``channel_binding``: 32 bytes binding envelopes and signatures to
      this channel.

    ``seal``/``open`` encrypt and decrypt envelopes (see :mod:`.envelope`).
    The repr never shows the secret or the name.
    """

    __slots__ = ("_secret", "_name", "_topic", "_channel_id", "_binding", "_cipher")

    def __init__(self, secret: bytes, channel_name: str) -> None:
        """Bind a 32-byte ``secret`` to ``channel_name``."""
        if not isinstance(secret, (bytes, bytearray, memoryview)):
            raise TypeError("channel secret must be bytes")
        if len(secret) != KEY_SIZE:
            raise ValueError(f"channel secret must be {KEY_SIZE} bytes")
        name = _normalize_name(channel_name)
        secret = bytes(secret)
        encoded = name.encode("utf-8")
        self._secret = secret
        self._name = name
        self._topic = TOPIC_PREFIX + _hkdf(secret, b"topic", encoded, 16).hex()
        self._channel_id = _hkdf(secret, b"channel-id", encoded, 16).hex()
        self._binding = _hkdf(secret, b"binding", encoded, 32)
        self._cipher = EnvelopeCipher(_hkdf(secret, b"aead", encoded, 32), self._binding)

    # -- constructors -------------------------------------------------------

    @classmethod
    def generate(cls, channel_name: str) -> ChannelKey:
        """A new random secret (``os.urandom``) for ``channel_name``."""
        return cls(os.urandom(KEY_SIZE), channel_name)

    @classmethod
    def from_passphrase(
        cls,
        channel_name: str,
        passphrase: str | bytes,
        *,
        scrypt_params: ScryptParams = DEFAULT_SCRYPT_PARAMS,
    ) -> ChannelKey:
        """Derive the secret from a passphrase with scrypt (see module docs).

        Deterministic for (channel name, passphrase); a str passphrase is
        NFC-normalized and UTF-8 encoded.  Raises ``ValueError`` if empty.
        """
        name = _normalize_name(channel_name)
        if isinstance(passphrase, str):
            passphrase = unicodedata.normalize("NFC", passphrase).encode("utf-8")
        elif not isinstance(passphrase, (bytes, bytearray)):
            raise TypeError("passphrase must be str or bytes")
        if not passphrase:
            raise ValueError("passphrase must not be empty")
        kdf = Scrypt(
            salt=SCRYPT_SALT_PREFIX + name.encode("utf-8"),
            length=KEY_SIZE,
            n=scrypt_params.n,
            r=scrypt_params.r,
            p=scrypt_params.p,
        )
        return cls(kdf.derive(bytes(passphrase)), name)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], channel_name: str) -> ChannelKey:
        """Load the secret from a key file; raises :class:`KeyFileError`.

        Check :func:`key_file_is_private` separately to warn about loose
        permissions.
        """
        return cls(read_key_file(path), channel_name)

    def for_channel(self, channel_name: str) -> ChannelKey:
        """The same secret bound to another channel name."""
        return type(self)(self._secret, channel_name)

    def write_key_file(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> None:
        """Save this secret as a 0600 key file; raises :class:`KeyFileError`."""
        write_key_file(path, self._secret, overwrite=overwrite)

    # -- derived values -----------------------------------------------------

    @property
    def channel_name(self) -> str:
        return self._name

    @property
    def topic(self) -> str:
        return self._topic

    @property
    def channel_id(self) -> str:
        return self._channel_id

    @property
    def channel_binding(self) -> bytes:
        return self._binding

    # -- envelopes ----------------------------------------------------------

    def seal(self, plaintext: bytes) -> bytes:
        """Encrypt ``plaintext`` into an envelope for this channel."""
        return self._cipher.seal(plaintext)

    def open(self, envelope: bytes) -> bytes:
        """Decrypt an envelope of this channel; raises only :class:`EnvelopeError`."""
        return self._cipher.open(envelope)

    def __repr__(self) -> str:
        return f"ChannelKey(topic={self._topic!r})"
