"""Signed content: application bytes plus the sender's signature.

The signature travels *inside* the content, so it stays valid when any
participant rebroadcasts the frame unchanged (SDS-R repair).

Format::

    offset  size  field
    0       1     version      0x01, or 0x02 when a context is signed too
    1       32    public key   sender's raw Ed25519 public key
    33      64    signature    Ed25519 over the signed message below
    97      n     message      the application bytes

Signed message::

    b"sdschat/v1/signed-content\\x00" || version (1)
        || len(channel binding) (2, big-endian) || channel binding
        [|| len(context) (2, big-endian) || context]    version 2 only
        || message

The channel binding (``ChannelKey.channel_binding``) scopes a signature to
one channel, so signed content cannot be replayed into another channel.
A version-2 signature also covers a *context* that travels next to the
content rather than inside it -- the SDS ordering metadata of the frame
(its Lamport time and causal history, sdschat.node.authored): the reader
rebuilds the context from what it received, and the signature verifies only
if nothing of it was changed on the way. The caller must check that the
returned participant id equals the SDS frame's ``sender_id``.
"""

from __future__ import annotations

from typing import NamedTuple

from .errors import SignatureError
from .identity import PUBLIC_KEY_SIZE, SIGNATURE_SIZE, Identity, fingerprint, verify

__all__ = [
    "FRAME_DOMAIN",
    "SIGNED_CONTENT_VERSION",
    "SIGNED_CONTEXT_VERSION",
    "SIGNED_CONTENT_OVERHEAD",
    "SignedContent",
    "signed_content",
    "open_signed_content",
    "read_signed_content",
]

SIGNED_CONTENT_VERSION = 0x01
#: the version of content whose signature also covers a context (see the module's docstring)
SIGNED_CONTEXT_VERSION = 0x02
SIGNED_CONTENT_OVERHEAD = 1 + PUBLIC_KEY_SIZE + SIGNATURE_SIZE
_DOMAIN = b"sdschat/v1/signed-content\x00"
#: the domain of a publisher's signature over a whole node frame (sdschat.node.frame): what a frame signature
#: covers can never be taken for signed content, nor the other way round
FRAME_DOMAIN = b"sdschat/v1/signed-frame\x00"
_BYTES_LIKE = (bytes, bytearray, memoryview)


class SignedContent(NamedTuple):
    """Result of :func:`open_signed_content`."""

    participant_id: str
    public_key: bytes
    message: bytes


def _version(context: bytes | None) -> int:
    return SIGNED_CONTENT_VERSION if context is None else SIGNED_CONTEXT_VERSION


def _to_be_signed(
    channel_binding: bytes, message: bytes, domain: bytes = _DOMAIN, context: bytes | None = None
) -> bytes:
    if not isinstance(channel_binding, _BYTES_LIKE):
        raise TypeError("channel binding must be bytes")
    if len(channel_binding) > 0xFFFF:
        raise ValueError("channel binding too long")
    parts = [domain, bytes((_version(context),)), len(channel_binding).to_bytes(2, "big"), bytes(channel_binding)]
    if context is not None:
        if len(context) > 0xFFFF:
            raise ValueError("signed context too long")
        parts += (len(context).to_bytes(2, "big"), bytes(context))
    parts.append(message)
    return b"".join(parts)


def signed_content(
    identity: Identity,
    channel_binding: bytes,
    message_bytes: bytes,
    *,
    domain: bytes = _DOMAIN,
    context: bytes | None = None,
) -> bytes:
    """Wrap ``message_bytes`` with ``identity``'s public key and signature (``domain``: what kind of thing is
    signed; :data:`FRAME_DOMAIN` for a whole node frame; ``context``: bytes signed along but not carried,
    which makes it version 2)."""
    if not isinstance(message_bytes, _BYTES_LIKE):
        raise TypeError("message must be bytes")
    message = bytes(message_bytes)
    signature = identity.sign(_to_be_signed(channel_binding, message, domain, context))
    return bytes((_version(context),)) + identity.public_bytes() + signature + message


def open_signed_content(
    data: bytes, channel_binding: bytes, *, domain: bytes = _DOMAIN, context: bytes | None = None
) -> SignedContent:
    """Verify signed content; return ``(participant_id, public_key, message)``.

    With ``context`` the content must be version 2 and its signature cover that context; without, version 1.
    Raises :class:`SignatureError` (``reason`` "type", "short", "version" or "invalid") if ``data`` is
    malformed, of the other version, or the signature does not verify for this channel binding (and context).
    """
    data = _checked(data)
    if data[0] != _version(context):
        raise SignatureError("version")
    if context is not None and len(context) > 0xFFFF:  # (a received frame's history): nothing signed it
        raise SignatureError("invalid", "signed context too long")
    public_key = data[1 : 1 + PUBLIC_KEY_SIZE]
    signature = data[1 + PUBLIC_KEY_SIZE : SIGNED_CONTENT_OVERHEAD]
    message = data[SIGNED_CONTENT_OVERHEAD:]
    if not verify(public_key, _to_be_signed(channel_binding, message, domain, context), signature):
        raise SignatureError("invalid")
    return SignedContent(fingerprint(public_key), public_key, message)


def read_signed_content(data: bytes) -> SignedContent:
    """Signed content's parts *without* checking the signature: only for content verified when it arrived
    (read back from this participant's own state). Raises :class:`SignatureError` if it is malformed."""
    data = _checked(data)
    public_key = data[1 : 1 + PUBLIC_KEY_SIZE]
    return SignedContent(fingerprint(public_key), public_key, data[SIGNED_CONTENT_OVERHEAD:])


def _checked(data: object) -> bytes:
    """``data`` as bytes, of a known version and long enough for the header (else :class:`SignatureError`)."""
    if not isinstance(data, _BYTES_LIKE):
        raise SignatureError("type")
    data = bytes(data)
    if not data:
        raise SignatureError("short")
    if data[0] not in (SIGNED_CONTENT_VERSION, SIGNED_CONTEXT_VERSION):
        raise SignatureError("version")
    if len(data) < SIGNED_CONTENT_OVERHEAD:
        raise SignatureError("short")
    return data
