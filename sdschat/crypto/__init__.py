"""sdschat.crypto: channel keys, the AEAD envelope, identities and signatures.

Imports nothing else from ``sdschat`` (see DESIGN.md, layering).

- :class:`ChannelKey` — a channel's 32-byte secret bound to its name; derives
  the MQTT ``topic``, the SDS ``channel_id``, the ``channel_binding`` and the
  envelope key; ``seal``/``open`` envelopes (:mod:`.keys`, :mod:`.envelope`).
- Key files: :func:`keygen`, :func:`key_file_is_private` (:mod:`.keyfile`).
- :class:`Identity`, :func:`verify`, :func:`fingerprint` — Ed25519
  (:mod:`.identity`).
- :func:`signed_content`, :func:`open_signed_content`, :func:`read_signed_content` (:mod:`.signed`).
- Inbox requests: :func:`inbox_topic`, :class:`InboxRequest`, :func:`seal_request`, :func:`open_request`
  (:mod:`.inbox`).
- Errors: :class:`CryptoError` and its subclasses :class:`KeyFileError`,
  :class:`EnvelopeError`, :class:`SignatureError` (:mod:`.errors`), :class:`InboxError` (:mod:`.inbox`).
"""

from .envelope import (
    ENVELOPE_OVERHEAD,
    MAX_ENVELOPE_SIZE,
    MAX_PLAINTEXT_SIZE,
    MIN_ENVELOPE_SIZE,
    envelope_hash,
    padded_size,
)
from .errors import CryptoError, EnvelopeError, KeyFileError, SignatureError
from .identity import Identity, fingerprint, verify
from .inbox import InboxError, InboxRequest, OpenedRequest, inbox_topic, open_request, seal_request
from .keyfile import KEY_FILE_HEADER, KEY_SIZE, key_file_is_private, keygen
from .keys import DEFAULT_SCRYPT_PARAMS, TOPIC_PREFIX, ChannelKey, ScryptParams
from .signed import FRAME_DOMAIN, SignedContent, open_signed_content, read_signed_content, signed_content

__all__ = [
    "ChannelKey",
    "CryptoError",
    "DEFAULT_SCRYPT_PARAMS",
    "ENVELOPE_OVERHEAD",
    "EnvelopeError",
    "FRAME_DOMAIN",
    "Identity",
    "InboxError",
    "InboxRequest",
    "KEY_FILE_HEADER",
    "KEY_SIZE",
    "KeyFileError",
    "MAX_ENVELOPE_SIZE",
    "MAX_PLAINTEXT_SIZE",
    "MIN_ENVELOPE_SIZE",
    "OpenedRequest",
    "ScryptParams",
    "SignatureError",
    "SignedContent",
    "TOPIC_PREFIX",
    "envelope_hash",
    "fingerprint",
    "inbox_topic",
    "padded_size",
    "key_file_is_private",
    "keygen",
    "open_request",
    "open_signed_content",
    "read_signed_content",
    "seal_request",
    "signed_content",
    "verify",
]
