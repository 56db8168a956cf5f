"""What is sealed into each envelope: the SDS frame, who published it and why, signed by the publisher.

    0x02 | reason (1 byte) | signed(reason byte || SDS frame)

where ``signed(m)`` is :func:`sdschat.crypto.signed_content` under the frame
domain (``FRAME_DOMAIN``): the publisher's Ed25519 public key, its signature
over the domain, the channel binding and ``m``, then ``m``. The publisher is the
participant that put these bytes on the wire -- the original sender, or a third
party answering an SDS-R repair request -- and its participant id is the
fingerprint of that key, so nobody can publish as someone else. The reason is
the engine's ``Outgoing.reason`` (new message, resend, repair answer, sync,
ephemeral), signed along with the frame.

What the receive pipeline makes of it (sdschat/node/receive.py): a frame that
is not signed (version 1, from earlier versions), or whose signature does not
verify, is refused and counted; a frame whose SDS ``sender_id`` is not its
publisher is refused unless it is a repair answer (a rebroadcast of someone's
message, whose content carries the author's own signature). So a sync frame --
the acknowledgements of its sender, in its causal history and bloom filter --
only counts from the member it is attributed to.
"""

from __future__ import annotations

from sdschat.crypto import FRAME_DOMAIN, Identity, SignatureError, open_signed_content, signed_content

__all__ = ["pack", "unpack", "FrameError", "REASONS", "VERSION"]

VERSION = 2
REASONS = ("message", "resend", "repair", "sync", "ephemeral")
_CODE = {r: i for i, r in enumerate(REASONS)}


class FrameError(ValueError):
    """Sealed plaintext that is not a node frame (``reason``: ``malformed``, ``unsigned`` or ``bad_signature``)."""

    def __init__(self, message: str, reason: str = "malformed") -> None:
        super().__init__(message)
        self.reason = reason


def pack(identity: Identity, channel_binding: bytes, sds_frame: bytes, reason: str = "message") -> bytes:
    code = bytes((_CODE[reason],))
    return bytes((VERSION,)) + code + signed_content(identity, channel_binding, code + sds_frame, domain=FRAME_DOMAIN)


def unpack(data: bytes, channel_binding: bytes) -> tuple[str, str, bytes]:
    """Return ``(publisher, reason, sds_frame)`` of a frame whose publisher's signature verifies; raises
    :class:`FrameError` otherwise."""
    if len(data) < 2:
        raise FrameError("frame too short")
    if data[0] == 1:
        raise FrameError("unsigned frame (version 1, from an earlier sdschat)", "unsigned")
    if data[0] != VERSION:
        raise FrameError(f"unknown frame version {data[0]}")
    if data[1] >= len(REASONS):
        raise FrameError(f"unknown frame reason {data[1]}")
    try:
        signed = open_signed_content(data[2:], channel_binding, domain=FRAME_DOMAIN)
    except SignatureError as exc:
        raise FrameError(f"frame signature: {exc}", "bad_signature" if exc.reason == "invalid" else "malformed") \
            from None
    if signed.message[:1] != data[1:2]:  # the reason byte outside must be the one signed
        raise FrameError("frame reason does not match its signature", "bad_signature")
    return signed.participant_id, REASONS[data[1]], bytes(signed.message[1:])
