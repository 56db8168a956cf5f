"""``Frame``: a received frame parsed and read once, shared by every receiver of it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import repair as _repair
from . import sds_pb2
from .config import ChannelConfig
from .wire import HistoryEntry, entry_from_pb

if TYPE_CHECKING:
    from .events import SyncReceived

__all__ = ["Frame"]


class Frame:
    """A parsed frame, read once: what :meth:`MessageChannel.receive_parsed` needs of it.

    Everything here is independent of the receiver, so a simulator that hands
    one broadcast frame to thousands of receivers builds it once
    (``Frame(parse_pb(data))``) and passes it to every ``receive_parsed``:
    the protobuf fields are decoded once, the receiver-independent validity
    checks run once per engine configuration, the causal history becomes
    :class:`HistoryEntry` values once (after the checks pass; immutable,
    shared by every receiver's state), and the sender's half of the SDS-R
    response-group test is hashed once (or the whole group is named:
    ``responders``). ``receive_parsed`` given a protobuf message builds a
    ``Frame`` itself, so both give the same events and the same state. Any
    other attribute (``HasField``, ``causal_history``...) reads through to the
    parsed message: a ``Frame`` reads like the message it wraps.
    """

    __slots__ = (
        "pb",
        "message_id",
        "sender_id",
        "channel_id",
        "has_lamport",
        "lamport",
        "content",
        "has_content",
        "history",
        "history_ids",
        "repair",
        "bloom",
        "_lists_read",
        "_vcfg",
        "_vchan",
        "_problem",
        "_sender_hash",
        "_sync_event",
        "_delivery",
        "responders",
    )

    def __init__(self, pb: sds_pb2.Message) -> None:
        self.pb = pb
        self.message_id = pb.message_id
        self.sender_id = pb.sender_id
        self.channel_id = pb.channel_id
        self.has_lamport = pb.HasField("lamport_timestamp")
        self.lamport = pb.lamport_timestamp
        self.content = pb.content
        self.has_content = pb.HasField("content") and len(self.content) > 0
        # the lists are read once the frame passed the checks (a frame over the limits costs no more than before):
        # empty until then (``_lists_read``)
        self.history: tuple[HistoryEntry, ...] = ()
        self.history_ids: tuple[str, ...] = ()
        self.repair: tuple[tuple[str, str], ...] = ()  # (id, sender_id as on the wire: "" when absent)
        self._lists_read = False
        self.bloom = pb.bloom_filter if pb.HasField("bloom_filter") else None
        self._vcfg: ChannelConfig | None = None
        self._vchan: str | None = None
        self._problem: tuple[str, str] | None = None
        self._sender_hash: int | None = None
        # immutable results every receiver shares: its SyncReceived, and (LogRow, Delivered, log key) of a plain
        # delivery
        self._sync_event: SyncReceived | None = None
        self._delivery: tuple[Any, ...] | None = None  # (LogRow, Delivered, (lamport, id)); see LocalLog.keys
        #: the ids of the receivers in the message's SDS-R response group, for the response-group count of the
        #: receivers' configuration, when whoever shares the frame knows them for every receiver it hands the
        #: frame to (a simulator does: it hashes each member's side once per message, not once per frame);
        #: None: each receiver hashes its own side (:meth:`RepairScheduler.in_sender_group`)
        self.responders: frozenset[str] | None = None

    def static_problem(self, config: ChannelConfig, channel_id: str) -> tuple[str, str] | None:
        """The checks of a frame that do not depend on the receiver's state (all but the Lamport skew)."""
        if self._vcfg is config and self._vchan == channel_id:
            return self._problem
        pb = self.pb
        problem = None
        if pb.channel_id != channel_id:
            problem = ("wrong_channel", f"frame for channel {pb.channel_id[:64]!r}")
        else:
            mid = pb.message_id
            max_id = config.max_id_length
            if not mid or not pb.sender_id:
                problem = ("invalid", "empty message_id or sender_id")
            elif len(mid) > max_id or len(pb.sender_id) > max_id:
                problem = ("invalid", "message_id or sender_id too long")
            elif len(pb.causal_history) > config.max_history_entries:
                problem = ("too_large", f"causal history of {len(pb.causal_history)} entries")
            elif len(pb.repair_request) > config.max_repair_entries:
                problem = ("too_large", f"{len(pb.repair_request)} repair requests")
            elif any(
                not e.message_id or len(e.message_id) > max_id or len(e.sender_id) > max_id for e in pb.causal_history
            ):
                problem = ("invalid", "bad causal history entry")
            elif any(
                not e.message_id or len(e.message_id) > max_id or len(e.sender_id) > max_id for e in pb.repair_request
            ):
                problem = ("invalid", "bad repair request entry")
        if problem is None and not self._lists_read:
            self._lists_read = True
            self.history = tuple(entry_from_pb(e) for e in pb.causal_history)
            self.history_ids = tuple(e.message_id for e in self.history)
            self.repair = tuple((e.message_id, e.sender_id) for e in pb.repair_request)
        self._vcfg = config
        self._vchan = channel_id
        self._problem = problem
        return problem

    def __getattr__(self, name: str) -> Any:
        # anything else reads through to the parsed message (a read-only view of it): whatever that attribute is,
        # a field or a method of the protobuf runtime's
        if name == "pb":
            raise AttributeError(name)
        return getattr(self.pb, name)

    def HasField(self, name: str) -> bool:  # noqa: N802 - the protobuf method's name
        return self.pb.HasField(name)

    def sender_hash(self) -> int:
        """``repair.hash64(sender_id + message_id)``: the sender's side of the response-group test."""
        h = self._sender_hash
        if h is None:
            h = self._sender_hash = _repair.hash64(self.sender_id + self.message_id)
        return h
