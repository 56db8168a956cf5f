"""A parsed frame, read once, for many receivers.

:func:`sdschat.sds.wire.parse_pb` gives a protobuf message whose fields are
decoded lazily: every read of ``pb.message_id`` builds a new ``str``, every
read of ``pb.bloom_filter`` copies 18,752 bytes, every ``pb.causal_history``
entry is a wrapper whose fields are decoded again. The engine reads each
frame's fields a dozen times per receiver, so with 10,000 receivers the
same frame would be decoded ~100,000 times, and every receiver would keep its
own copies of the ids in its state.

:class:`FrameView` reads the fields the engine's receive path uses once,
into plain attributes shared by every receiver (``HasField`` answers from the
presence of the optional fields recorded at parse time; protobuf refuses
``HasField`` on other fields, the view answers False). It is a read-only proxy: any other
attribute falls through to the parsed message itself, so the engine sees the
same values whatever it reads (the engine never modifies a received frame;
see :meth:`~sdschat.sds.MessageChannel.receive_parsed`). Tests check that a
simulation gives identical events with and without it.
"""

from __future__ import annotations

from sdschat.sds.wire import parse_pb

__all__ = ["FrameView", "EntryView", "parse_view"]


class EntryView:
    """A ``HistoryEntry`` protobuf, read once."""

    __slots__ = ("_pb", "message_id", "sender_id", "retrieval_hint", "HasField")

    def __init__(self, e) -> None:
        self._pb = e
        self.message_id = e.message_id
        self.sender_id = e.sender_id
        self.retrieval_hint = e.retrieval_hint
        # presence of the optional fields (the only ones HasField accepts), as a C-level lookup
        self.HasField = frozenset(n for n in ("retrieval_hint", "sender_id") if e.HasField(n)).__contains__

    def __getattr__(self, name: str):
        return getattr(self._pb, name)


class FrameView:
    """A ``Message`` protobuf, read once (see the module docstring)."""

    __slots__ = ("_pb", "message_id", "sender_id", "channel_id", "content", "lamport_timestamp", "causal_history",
                 "repair_request", "bloom_filter", "HasField")

    #: the optional fields of ``Message`` (the only ones ``HasField`` accepts)
    _FIELDS = ("content", "lamport_timestamp", "bloom_filter")

    def __init__(self, pb) -> None:
        self._pb = pb
        self.message_id = pb.message_id
        self.sender_id = pb.sender_id
        self.channel_id = pb.channel_id
        self.content = pb.content
        self.lamport_timestamp = pb.lamport_timestamp
        self.bloom_filter = pb.bloom_filter
        self.causal_history = tuple(EntryView(e) for e in pb.causal_history)
        self.repair_request = tuple(EntryView(e) for e in pb.repair_request)
        self.HasField = frozenset(n for n in self._FIELDS if pb.HasField(n)).__contains__

    def __getattr__(self, name: str):
        return getattr(self._pb, name)

    @property
    def pb(self):
        """The underlying parsed message."""
        return self._pb


def parse_view(data: bytes) -> FrameView:
    """Parse ``data`` (raises :class:`~sdschat.sds.WireError` like ``parse_pb``) and wrap it."""
    return FrameView(parse_pb(data))
