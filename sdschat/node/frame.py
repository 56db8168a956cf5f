"""What is sealed into each envelope: the SDS frame, who published it and why, signed by the publisher.

Version 3 (sent by this version)::

    0x03 | reason (1 byte) | public key (32) | signature (64)
         | len(tail) (varint) | tail | DEFLATE (zlib) of head

where ``head || tail`` is the SDS frame: ``tail`` is the value of its ``content`` field when that is the
frame's last field (as every encoder we know writes it: protobuf writes fields in number order and content is
field 20), else empty. The signature is the publisher's Ed25519 signature under the frame domain
(``FRAME_DOMAIN``, :func:`sdschat.crypto.signed_content`) over the channel binding and ``reason byte || SDS
frame`` -- exactly what version 2 signs, so a frame verifies the same way whichever version carried it.

Version 2 (sent by earlier versions, still read)::

    0x02 | reason (1 byte) | signed(reason byte || SDS frame)

**What is compressed, and why that hides nothing the padding hides.** Only the head is compressed: the
protocol's metadata (channel and sender ids, message id, Lamport time, causal history with its retrieval
hints, bloom filter, repair requests). The content -- the author's signed payload, with the text -- is
carried as it is. So the sealed length depends on the text's length exactly as before (the envelope's Padmé
buckets hide it the same way) and never on what the text says: no compression ratio of a text, nor of a text
next to attacker-chosen bytes (the CRIME and BREACH attacks), shows in a size. What the head's compressed length
depends on -- how many ids the bloom filter holds, how many entries the history names and how many distinct
senders they have -- follows from the channel's traffic, which the broker sees anyway: it counts the frames on
the topic and sees which connection publishes each one. A bloom filter of the node's size (248 bytes,
:func:`~sdschat.node.config.node_channel_config`) holding few ids is mostly zero bits and compresses to a
fraction of itself; the ids in the history are hex and their senders repeat.

Decompression is bounded: a head that inflates past ``MAX_HEAD`` is refused before it is read further.

The publisher is the participant that put these bytes on the wire -- the original sender, or a third party
answering an SDS-R repair request -- and its participant id is the fingerprint of that key, so nobody can
publish as someone else. The reason is the engine's ``Outgoing.reason`` (new message, resend, repair answer,
sync, ephemeral), signed along with the frame.

What the receive pipeline makes of it (sdschat/node/receive.py): a frame that is not signed (version 1, from
earlier versions), or whose signature does not verify when it is checked (below), is refused and counted; a
frame whose SDS ``sender_id`` is not its publisher is refused unless it is a repair answer (a rebroadcast of
someone's message, whose content carries the author's own signature). So a sync frame -- the acknowledgements
of its sender, in its causal history and bloom filter -- only counts from the member it is attributed to.

A frame that says it carries its publisher's own new message (reason ``message``, and the key it names is the
key of the signed content it carries: :meth:`OpenedFrame.by_its_author`) is read before its signature is
checked: when the content verifies, the frame signature is checked only if the frame has repair requests or
a bloom filter that would acknowledge something its history does not (``Receiver._by_its_author``).
:func:`open_frame` takes a frame apart without checking it; :func:`unpack` does both.
"""

from __future__ import annotations

import zlib
from typing import Literal

from sdschat.crypto import FRAME_DOMAIN, Identity, SignatureError, open_signed_content, signed_content
from sdschat.crypto.identity import PUBLIC_KEY_SIZE
from sdschat.crypto.signed import SIGNED_CONTENT_OVERHEAD, SIGNED_CONTENT_VERSION, SIGNED_CONTEXT_VERSION

__all__ = ["pack", "unpack", "open_frame", "OpenedFrame", "FrameError", "REASONS", "VERSION", "MAX_HEAD"]

VERSION = 3
_V2 = 2
REASONS = ("message", "resend", "repair", "sync", "ephemeral")
_CODE = {r: i for i, r in enumerate(REASONS)}
#: the most a compressed head may inflate to (an SDS frame's metadata: a bloom filter of @waku/sds's 18.7 KB
#: and hundreds of history entries fit many times over)
MAX_HEAD = 1 << 20
_CONTENT_TAG = b"\xa2\x01"  # field 20, length-delimited
_SIG = SIGNED_CONTENT_OVERHEAD - 1  # public key and signature
_CONTEXT_SIGNED = bytes((SIGNED_CONTEXT_VERSION,))


class FrameError(ValueError):
    """Sealed plaintext that is not a node frame (``reason``: ``malformed``, ``unsigned`` or ``bad_signature``)."""

    def __init__(self, message: str, reason: Literal["malformed", "unsigned", "bad_signature"] = "malformed") -> None:
        super().__init__(message)
        self.reason: Literal["malformed", "unsigned", "bad_signature"] = reason


def _varint(data: bytes, i: int) -> tuple[int, int]:
    """The varint at ``data[i:]`` and the offset after it (ValueError when it runs out or is over 64 bits)."""
    value = shift = 0
    while True:
        b = data[i]  # (IndexError past the end: the caller's "malformed")
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _encode_varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def content_split(sds_frame: bytes) -> int:
    """Where the tail carried uncompressed starts: the offset of the ``content`` value when it is the frame's
    last top-level field, else the frame's length (nothing is left out of the compression)."""
    i, n = 0, len(sds_frame)
    try:
        while i < n:
            tag_at = i
            key, i = _varint(sds_frame, i)
            wire_type = key & 7
            if wire_type == 0:
                _, i = _varint(sds_frame, i)
            elif wire_type == 2:
                size, i = _varint(sds_frame, i)
                if sds_frame[tag_at : tag_at + 2] == _CONTENT_TAG and i + size == n:
                    return i
                i += size
            elif wire_type == 1:
                i += 8
            elif wire_type == 5:
                i += 4
            else:
                break
    except (IndexError, ValueError):
        pass
    return n


def pack(identity: Identity, channel_binding: bytes, sds_frame: bytes, reason: str = "message") -> bytes:
    code = bytes((_CODE[reason],))
    sds_frame = bytes(sds_frame)
    signed = signed_content(identity, channel_binding, code + sds_frame, domain=FRAME_DOMAIN)
    split = content_split(sds_frame)
    tail = sds_frame[split:]
    return b"".join(
        (
            bytes((VERSION,)),
            code,
            signed[1:SIGNED_CONTENT_OVERHEAD],
            _encode_varint(len(tail)),
            tail,
            zlib.compress(sds_frame[:split], 6),
        )
    )


def _inflate(data: bytes) -> bytes:
    d = zlib.decompressobj()
    try:
        out = d.decompress(data, MAX_HEAD)
    except zlib.error:
        raise FrameError("frame head does not inflate") from None
    if d.unconsumed_tail:
        raise FrameError("frame head inflates past its limit")
    if not d.eof or d.unused_data:
        raise FrameError("frame head is truncated or followed by junk")
    return out


class OpenedFrame:
    """A node frame taken apart but not yet checked (:func:`open_frame`): :meth:`verify` checks its publisher's
    signature. ``public_key`` is the key the frame names, which only :meth:`verify` shows to be the publisher's."""

    __slots__ = ("version", "reason", "public_key", "sds_frame", "content_key", "_body", "_reason_byte")

    def __init__(
        self, version: int, reason_byte: bytes, public_key: bytes, sds_frame: bytes, body: bytes, tail: bytes = b""
    ) -> None:
        self.version = version
        self._reason_byte = reason_byte
        self.reason: str = REASONS[reason_byte[0]]
        self.public_key = public_key
        self.sds_frame = sds_frame
        self._body = body  # version 3: the signature and key; version 2: the whole signed content
        #: the public key of the signed content (version 2, with its context) the frame carries last, as a node
        #: writes it; b"" when there is none
        self.content_key = tail[1 : 1 + PUBLIC_KEY_SIZE] if tail[:1] == _CONTEXT_SIGNED else b""

    def by_its_author(self) -> bool:
        """A new message published by its author, as far as the frame says: reason ``message``, and the key the
        frame names signed the content it carries (to be checked: :mod:`sdschat.node.receive`)."""
        return self.reason == "message" and self.content_key == self.public_key

    def verify(self, channel_binding: bytes) -> str:
        """The publisher's participant id once its signature over the frame verifies; :class:`FrameError`
        otherwise."""
        body = self._body
        if self.version == VERSION:
            body = b"".join((bytes((SIGNED_CONTENT_VERSION,)), body, self._reason_byte, self.sds_frame))
        try:
            signed = open_signed_content(body, channel_binding, domain=FRAME_DOMAIN)
        except SignatureError as exc:
            raise FrameError(
                f"frame signature: {exc}", "bad_signature" if exc.reason == "invalid" else "malformed"
            ) from None
        if signed.message[:1] != self._reason_byte:  # the reason byte outside must be the one signed
            raise FrameError("frame reason does not match its signature", "bad_signature")
        return signed.participant_id


def open_frame(data: bytes) -> OpenedFrame:
    """Take a frame apart (its head inflated) without checking its signature; :class:`FrameError` if it is not a
    signed node frame of a version this build reads."""
    if len(data) < 2:
        raise FrameError("frame too short")
    if data[0] == 1:
        raise FrameError("unsigned frame (version 1, from an earlier sdschat)", "unsigned")
    if data[0] not in (VERSION, _V2):
        raise FrameError(f"unknown frame version {data[0]}")
    if data[1] >= len(REASONS):
        raise FrameError(f"unknown frame reason {data[1]}")
    if data[0] == VERSION:
        sig_end = 2 + _SIG
        if len(data) < sig_end + 1:
            raise FrameError("frame too short")
        try:
            size, at = _varint(data, sig_end)
        except (IndexError, ValueError):
            raise FrameError("frame tail length is damaged") from None
        if at + size > len(data):
            raise FrameError("frame tail runs past the end")
        tail = data[at : at + size]
        sds_frame = _inflate(data[at + size :]) + tail
        return OpenedFrame(VERSION, data[1:2], data[2 : 2 + PUBLIC_KEY_SIZE], sds_frame, data[2:sig_end], tail)
    body = data[2:]
    if len(body) < SIGNED_CONTENT_OVERHEAD + 1:
        raise FrameError("frame signature: short", "malformed")
    return OpenedFrame(_V2, data[1:2], body[1 : 1 + PUBLIC_KEY_SIZE], body[SIGNED_CONTENT_OVERHEAD + 1 :], body)


def unpack(data: bytes, channel_binding: bytes) -> tuple[str, str, bytes]:
    """Return ``(publisher, reason, sds_frame)`` of a frame whose publisher's signature verifies; raises
    :class:`FrameError` otherwise."""
    opened = open_frame(data)
    return opened.verify(channel_binding), opened.reason, opened.sds_frame
