"""A parsed frame, read once, for many receivers.

:func:`sdschat.sds.wire.parse_pb` gives a protobuf message whose fields are
decoded lazily: every read of ``pb.message_id`` builds a new ``str``, every
read of ``pb.bloom_filter`` copies 18,752 bytes, every ``pb.causal_history``
entry is a wrapper whose fields are decoded again. The engine reads each
frame's fields a dozen times per receiver, so with 10,000 receivers the
same frame would be decoded ~100,000 times.

The engine itself now offers the remedy: :class:`sdschat.sds.channel.Frame`
reads a parsed message once (fields, causal history as shared immutable
:class:`~sdschat.sds.HistoryEntry` values, the receiver-independent validity
checks, the sender's half of the SDS-R response-group hash), and
:meth:`~sdschat.sds.MessageChannel.receive_parsed` accepts it in place of the
message. The simulator builds one per broadcast frame and hands it to every
receiver. :class:`FrameView` is that class (it reads like the message it
wraps: any other attribute falls through to the parsed message). Tests check
that a simulation gives identical events with it and with the protobuf
message.
"""

from __future__ import annotations

from sdschat.sds.channel import Frame
from sdschat.sds.wire import parse_pb

__all__ = ["FrameView", "parse_view"]

#: the engine's read-once frame (see the module docstring)
FrameView = Frame


def parse_view(data: bytes) -> Frame:
    """Parse ``data`` (raises :class:`~sdschat.sds.WireError` like ``parse_pb``) and wrap it."""
    return Frame(parse_pb(data))
