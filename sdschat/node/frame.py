"""What is sealed into each envelope: the SDS frame plus who published it, and why.

    0x01 | reason (1 byte) | len(publisher) (1 byte) | publisher participant id (ASCII) | SDS frame

The publisher is the participant that put these bytes on the wire — the
original sender, or a third party answering an SDS-R repair request — and the
reason is the engine's ``Outgoing.reason`` (new message, resend, repair
answer, sync, ephemeral), so the UI can say how and by whom a gap was filled.
Both are inside the encryption (the broker never sees them) but, unlike the
SDS content, not signed: they are informational only.
"""

from __future__ import annotations

__all__ = ["pack", "unpack", "FrameError", "REASONS"]

VERSION = 1
REASONS = ("message", "resend", "repair", "sync", "ephemeral")
_CODE = {r: i for i, r in enumerate(REASONS)}


class FrameError(ValueError):
    """Sealed plaintext that is not a node frame."""


def pack(publisher: str, sds_frame: bytes, reason: str = "message") -> bytes:
    pub = publisher.encode("ascii")
    if len(pub) > 255:
        raise ValueError("publisher id too long")
    return bytes((VERSION, _CODE[reason], len(pub))) + pub + sds_frame


def unpack(data: bytes) -> tuple[str, str, bytes]:
    """Return ``(publisher, reason, sds_frame)``; raises :class:`FrameError`."""
    if len(data) < 3:
        raise FrameError("frame too short")
    if data[0] != VERSION:
        raise FrameError(f"unknown frame version {data[0]}")
    if data[1] >= len(REASONS):
        raise FrameError(f"unknown frame reason {data[1]}")
    n = data[2]
    if len(data) < 3 + n:
        raise FrameError("frame truncated")
    try:
        publisher = data[3 : 3 + n].decode("ascii")
    except UnicodeDecodeError:
        raise FrameError("publisher id is not ASCII") from None
    return publisher, REASONS[data[1]], bytes(data[3 + n :])
