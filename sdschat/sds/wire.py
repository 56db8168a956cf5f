"""The SDS wire format: the RFC's ``Message`` and ``HistoryEntry``.

Frames are encoded with the protobuf code generated from ``proto/sds.proto``
(``sds_pb2``), running on the upb backend. Encoding writes exactly the fields
that are present, in field-number order, which is byte-identical to
@waku/sds 0.0.8. An absent optional field reads as ``None``: an ephemeral
frame's ``lamport_timestamp`` is ``None``, not 0, and a sync frame's
``content`` is ``None`` (an empty ``content`` field, if a peer sends one,
reads as ``b""``).

Malformed input raises :class:`WireError` and nothing else.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Protocol

from google.protobuf.message import DecodeError  # type: ignore[import-untyped,unused-ignore]  # protobuf ships no types; the engine build (--ignore-missing-imports) needs none

from . import sds_pb2
from .frozen import COMPILED, init

__all__ = [
    "HistoryEntry",
    "Message",
    "WireError",
    "encode",
    "encode_frame",
    "decode",
    "parse_pb",
    "from_pb",
    "MAX_FRAME_BYTES",
]

#: Frames larger than this are refused by :func:`decode` (a default bloom
#: frame is ~19 KB; content is chat-sized).
MAX_FRAME_BYTES = 4 * 1024 * 1024

_PbMessage = sds_pb2.Message


class WireError(ValueError):
    """Raised for bytes that are not a well-formed SDS frame."""


class EntryLike(Protocol):
    """What :func:`encode_frame` reads of a causal history or repair entry: a :class:`HistoryEntry`, or a log row,
    which the engine names in its causal history without copying it into an entry first."""

    @property
    def message_id(self) -> str: ...

    @property
    def retrieval_hint(self) -> bytes | None: ...

    @property
    def sender_id(self) -> str | None: ...


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    message_id: str
    retrieval_hint: bytes | None = None
    sender_id: str | None = None

    def __init__(self, message_id: str, retrieval_hint: bytes | None = None, sender_id: str | None = None) -> None:
        if COMPILED:  # (see sdschat.sds.frozen)
            self.message_id = message_id  # type: ignore[misc]
            self.retrieval_hint = retrieval_hint  # type: ignore[misc]
            self.sender_id = sender_id  # type: ignore[misc]
        else:
            init(self, message_id, retrieval_hint, sender_id)


@dataclass(slots=True)
class Message:
    sender_id: str
    message_id: str
    channel_id: str
    lamport_timestamp: int | None = None
    causal_history: list[HistoryEntry] = field(default_factory=list)
    bloom_filter: bytes | None = None
    repair_request: list[HistoryEntry] = field(default_factory=list)
    content: bytes | None = None


def _fill_entry(pb_entry: sds_pb2.HistoryEntry, entry: HistoryEntry) -> None:
    pb_entry.message_id = entry.message_id
    if entry.retrieval_hint is not None:
        pb_entry.retrieval_hint = entry.retrieval_hint
    if entry.sender_id is not None:
        pb_entry.sender_id = entry.sender_id


def to_pb(msg: Message) -> sds_pb2.Message:
    pb = sds_pb2.Message(sender_id=msg.sender_id, message_id=msg.message_id, channel_id=msg.channel_id)
    if msg.lamport_timestamp is not None:
        pb.lamport_timestamp = msg.lamport_timestamp
    for entry in msg.causal_history:
        _fill_entry(pb.causal_history.add(), entry)
    if msg.bloom_filter is not None:
        pb.bloom_filter = msg.bloom_filter
    for entry in msg.repair_request:
        _fill_entry(pb.repair_request.add(), entry)
    if msg.content is not None:
        pb.content = msg.content
    return pb


def encode(msg: Message) -> bytes:
    """Serialize ``msg``; raises :class:`WireError` for out-of-range values."""
    try:
        return to_pb(msg).SerializeToString()
    except (ValueError, TypeError) as exc:  # e.g. negative lamport, non-str ids
        raise WireError(f"cannot encode message: {exc}") from None


def encode_frame(
    channel_id: str,
    sender_id: str,
    message_id: str,
    lamport: int | None,
    causal: Iterable[EntryLike],
    content: bytes | None,
    bloom: bytes | None = None,
    repair: Iterable[EntryLike] = (),
) -> bytes:
    """The engine's encoder: fields straight from its state (``causal``/``repair``: :class:`HistoryEntry`-like)."""
    pb = _PbMessage(message_id=message_id, channel_id=channel_id)
    pb.sender_id = sender_id
    if lamport is not None:
        pb.lamport_timestamp = lamport
    add = pb.causal_history.add
    for e in causal:
        h = add(message_id=e.message_id)
        if e.retrieval_hint is not None:
            h.retrieval_hint = e.retrieval_hint
        if e.sender_id is not None:
            h.sender_id = e.sender_id
    if bloom is not None:
        pb.bloom_filter = bloom
    add = pb.repair_request.add
    for e in repair:
        h = add(message_id=e.message_id)
        if e.retrieval_hint is not None:
            h.retrieval_hint = e.retrieval_hint
        if e.sender_id is not None:
            h.sender_id = e.sender_id
    if content is not None:
        pb.content = content
    return pb.SerializeToString()


def entry_from_pb(pb_entry: sds_pb2.HistoryEntry) -> HistoryEntry:
    return HistoryEntry(
        pb_entry.message_id,
        pb_entry.retrieval_hint if pb_entry.HasField("retrieval_hint") else None,
        pb_entry.sender_id if pb_entry.HasField("sender_id") else None,
    )


def parse_pb(data: object) -> sds_pb2.Message:
    """Parse ``data`` into the generated protobuf message (engine fast path)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise WireError(f"frame must be bytes, not {type(data).__name__}")
    if len(data) > MAX_FRAME_BYTES:
        raise WireError(f"frame of {len(data)} bytes exceeds {MAX_FRAME_BYTES}")
    pb = sds_pb2.Message()
    try:
        pb.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError, TypeError) as exc:
        raise WireError(f"malformed frame: {exc}") from None
    return pb


def from_pb(pb: sds_pb2.Message) -> Message:
    return Message(
        sender_id=pb.sender_id,
        message_id=pb.message_id,
        channel_id=pb.channel_id,
        lamport_timestamp=pb.lamport_timestamp if pb.HasField("lamport_timestamp") else None,
        causal_history=[entry_from_pb(e) for e in pb.causal_history],
        bloom_filter=pb.bloom_filter if pb.HasField("bloom_filter") else None,
        repair_request=[entry_from_pb(e) for e in pb.repair_request],
        content=pb.content if pb.HasField("content") else None,
    )


def decode(data: object) -> Message:
    """Parse an SDS frame. Raises :class:`WireError` on malformed bytes."""
    return from_pb(parse_pb(data))
