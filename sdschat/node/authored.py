"""Content signed by its author over the SDS ordering metadata too: what no relay can change.

A chat message's SDS content is :func:`sdschat.crypto.signed_content` version 2: the author's public key and
Ed25519 signature over the application payload *and* a context that is not carried in the content but
rebuilt by every reader from the SDS frame around it::

    0x00 for an ephemeral frame (no Lamport time), or 0x01 || lamport timestamp (8 bytes, big-endian)
    number of causal-history entries (2 bytes)
    per entry: len(message id) (2) || message id || len(sender id) (2) || sender id   (UTF-8)

So the signature binds the message's Lamport time, its whole causal history (ids and their senders, in
order) and its payload; its message id is the hash of the content (checked on arrival), its sender id the
fingerprint of the key in it (checked too), its channel the binding. An SDS-R repair answer rebroadcasts the
frame's content, Lamport time and history as the author sent them (the engine keeps them unchanged), so the
author's signature survives any number of relays; a relayed copy with any of them altered does not verify and
is refused before the engine sees it. What a relay may still vary is what nobody orders by: the frame's bloom
filter and repair requests (neither counts as the author's acknowledgement when relayed: see receive.py) and
the retrieval hints of the history entries (lookup aids; whatever they find is checked by id).
"""

from __future__ import annotations

import struct

from ..crypto import Identity, open_signed_content, signed_content
from ..crypto.signed import SIGNED_CONTENT_VERSION, SignedContent

__all__ = ["ordering_context", "signer", "open_authored", "is_unordered"]

_U16 = struct.Struct(">H")


def ordering_context(lamport_timestamp: int | None, causal_history) -> bytes:
    """The bytes an author signs besides the payload: the frame's Lamport time and causal history."""
    if lamport_timestamp is None:
        parts = [b"\x00"]
    else:
        parts = [b"\x01", lamport_timestamp.to_bytes(8, "big")]  # a uint64 on the wire
    parts.append(_U16.pack(len(causal_history)))
    pack = _U16.pack
    for entry in causal_history:
        mid = entry.message_id.encode("utf-8")
        sender = (entry.sender_id or "").encode("utf-8")
        parts += (pack(len(mid)), mid, pack(len(sender)), sender)
    return b"".join(parts)


def signer(identity: Identity, channel_binding: bytes):
    """The ``sign`` hook of :meth:`sdschat.sds.MessageChannel.send`: wraps a payload in ``identity``'s signature
    over it and the Lamport time and causal history the engine chose."""

    def sign(payload: bytes, lamport_timestamp: int | None, causal_history) -> bytes:
        return signed_content(
            identity, channel_binding, payload, context=ordering_context(lamport_timestamp, causal_history)
        )

    return sign


def open_authored(msg, channel_binding: bytes) -> SignedContent:
    """Verify a received frame's content against its own Lamport time and causal history (``msg``: a decoded
    :class:`sdschat.sds.wire.Message`); raises :class:`sdschat.crypto.SignatureError`."""
    return open_signed_content(
        msg.content, channel_binding, context=ordering_context(msg.lamport_timestamp, msg.causal_history)
    )


def is_unordered(content: bytes) -> bool:
    """Content signed over its payload alone (signed content version 1), as sdschat did before it signed the
    ordering metadata: refused now, since a relay could change its Lamport time and history."""
    return bool(content) and content[0] == SIGNED_CONTENT_VERSION
