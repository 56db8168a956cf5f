"""Events that :class:`~sdschat.sds.channel.MessageChannel` returns.

All are frozen dataclasses. A typical content message produces, on the
receiving side, either ``Delivered`` at once, or ``Missing`` (shown at once by
the UI under a "messages possibly missing" marker) followed later by
``Delivered`` once its dependencies arrive or are declared ``Lost``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .frozen import COMPILED, init
from .wire import HistoryEntry

__all__ = [
    "Event",
    "Outgoing",
    "Delivered",
    "Missing",
    "GapDetected",
    "Acknowledged",
    "PossiblyAcknowledged",
    "Lost",
    "EphemeralReceived",
    "SyncReceived",
    "RepairRequested",
    "RepairScheduled",
    "RepairServed",
    "Rejected",
    "Evicted",
]


@dataclass(frozen=True, slots=True)
class Event:
    """Base class of every engine event."""


@dataclass(frozen=True, slots=True)
class Outgoing(Event):
    """A frame to broadcast.

    ``reason`` is one of ``"message"`` (new content), ``"ephemeral"``, ``"sync"``,
    ``"resend"`` (own unacknowledged message again) and ``"repair"`` (an SDS-R
    answer: someone's message rebroadcast). ``repair_request`` lists the ids this
    frame asks peers to repair.
    """

    data: bytes
    message_id: str
    reason: str
    lamport_timestamp: int | None = None
    repair_request: tuple[str, ...] = ()

    def __init__(
        self,
        data: bytes,
        message_id: str,
        reason: str,
        lamport_timestamp: int | None = None,
        repair_request: tuple[str, ...] = (),
    ) -> None:
        if COMPILED:  # (see sdschat.sds.frozen)
            self.data = data  # type: ignore[misc]
            self.message_id = message_id  # type: ignore[misc]
            self.reason = reason  # type: ignore[misc]
            self.lamport_timestamp = lamport_timestamp  # type: ignore[misc]
            self.repair_request = repair_request  # type: ignore[misc]
        else:
            init(self, data, message_id, reason, lamport_timestamp, repair_request)


@dataclass(frozen=True, slots=True)
class Delivered(Event):
    """A content message entered the local log (its dependencies are met or lost).

    ``repaired`` is true when the message had been known to be missing here
    (named in someone's causal history, or declared lost) before it arrived.
    ``after_lost`` names dependencies that were declared lost and that this
    message was delivered without.
    """

    message_id: str
    sender_id: str
    content: bytes
    lamport_timestamp: int
    repaired: bool = False
    after_lost: tuple[str, ...] = ()

    def __init__(
        self,
        message_id: str,
        sender_id: str,
        content: bytes,
        lamport_timestamp: int,
        repaired: bool = False,
        after_lost: tuple[str, ...] = (),
    ) -> None:
        if COMPILED:  # (see sdschat.sds.frozen)
            self.message_id = message_id  # type: ignore[misc]
            self.sender_id = sender_id  # type: ignore[misc]
            self.content = content  # type: ignore[misc]
            self.lamport_timestamp = lamport_timestamp  # type: ignore[misc]
            self.repaired = repaired  # type: ignore[misc]
            self.after_lost = after_lost  # type: ignore[misc]
        else:
            init(self, message_id, sender_id, content, lamport_timestamp, repaired, after_lost)


@dataclass(frozen=True, slots=True)
class Missing(Event):
    """A content message has arrived but waits on dependencies.

    ``missing`` are entries nobody here has (gaps: SDS-R will ask for them);
    ``waiting_on`` are ids that have arrived but wait themselves. The message's
    own fields are included so it can be shown at once.
    """

    message_id: str
    missing: list[HistoryEntry]
    sender_id: str = ""
    content: bytes = b""
    lamport_timestamp: int = 0
    waiting_on: tuple[str, ...] = ()

    def __init__(
        self,
        message_id: str,
        missing: list[HistoryEntry],
        sender_id: str = "",
        content: bytes = b"",
        lamport_timestamp: int = 0,
        waiting_on: tuple[str, ...] = (),
    ) -> None:
        if COMPILED:  # (see sdschat.sds.frozen)
            self.message_id = message_id  # type: ignore[misc]
            self.missing = missing  # type: ignore[misc]
            self.sender_id = sender_id  # type: ignore[misc]
            self.content = content  # type: ignore[misc]
            self.lamport_timestamp = lamport_timestamp  # type: ignore[misc]
            self.waiting_on = waiting_on  # type: ignore[misc]
        else:
            init(self, message_id, missing, sender_id, content, lamport_timestamp, waiting_on)


@dataclass(frozen=True, slots=True)
class GapDetected(Event):
    """A sync frame from ``sender_id`` named messages nobody here has (no message waits on them yet)."""

    missing: list[HistoryEntry]
    sender_id: str
    carrier_id: str = ""

    def __init__(self, missing: list[HistoryEntry], sender_id: str, carrier_id: str = "") -> None:
        if COMPILED:  # (see sdschat.sds.frozen)
            self.missing = missing  # type: ignore[misc]
            self.sender_id = sender_id  # type: ignore[misc]
            self.carrier_id = carrier_id  # type: ignore[misc]
        else:
            init(self, missing, sender_id, carrier_id)


@dataclass(frozen=True, slots=True)
class Acknowledged(Event):
    message_id: str
    by_bloom: bool = False

    def __init__(self, message_id: str, by_bloom: bool = False) -> None:
        if COMPILED:  # (see sdschat.sds.frozen)
            self.message_id = message_id  # type: ignore[misc]
            self.by_bloom = by_bloom  # type: ignore[misc]
        else:
            init(self, message_id, by_bloom)


@dataclass(frozen=True, slots=True)
class PossiblyAcknowledged(Event):
    message_id: str
    count: int

    def __init__(self, message_id: str, count: int) -> None:
        if COMPILED:  # (see sdschat.sds.frozen)
            self.message_id = message_id  # type: ignore[misc]
            self.count = count  # type: ignore[misc]
        else:
            init(self, message_id, count)


@dataclass(frozen=True, slots=True)
class Lost(Event):
    """A dependency was declared irretrievably lost after ``lost_after_ms``.

    ``dependants`` are the waiting messages that are now delivered without it.
    If the lost message arrives later it is still delivered into its place.
    """

    message_id: str
    sender_id: str | None = None
    dependants: tuple[str, ...] = ()

    def __init__(self, message_id: str, sender_id: str | None = None, dependants: tuple[str, ...] = ()) -> None:
        if COMPILED:  # (see sdschat.sds.frozen)
            self.message_id = message_id  # type: ignore[misc]
            self.sender_id = sender_id  # type: ignore[misc]
            self.dependants = dependants  # type: ignore[misc]
        else:
            init(self, message_id, sender_id, dependants)


@dataclass(frozen=True, slots=True)
class EphemeralReceived(Event):
    sender_id: str
    content: bytes
    message_id: str = ""

    def __init__(self, sender_id: str, content: bytes, message_id: str = "") -> None:
        if COMPILED:  # (see sdschat.sds.frozen)
            self.sender_id = sender_id  # type: ignore[misc]
            self.content = content  # type: ignore[misc]
            self.message_id = message_id  # type: ignore[misc]
        else:
            init(self, sender_id, content, message_id)


@dataclass(frozen=True, slots=True)
class SyncReceived(Event):
    sender_id: str
    message_id: str
    lamport_timestamp: int

    def __init__(self, sender_id: str, message_id: str, lamport_timestamp: int) -> None:
        if COMPILED:  # (see sdschat.sds.frozen)
            self.sender_id = sender_id  # type: ignore[misc]
            self.message_id = message_id  # type: ignore[misc]
            self.lamport_timestamp = lamport_timestamp  # type: ignore[misc]
        else:
            init(self, sender_id, message_id, lamport_timestamp)


@dataclass(frozen=True, slots=True)
class RepairRequested(Event):
    """This participant asked for ``message_ids`` in the frame ``carrier_id``."""

    message_ids: tuple[str, ...]
    carrier_id: str

    def __init__(self, message_ids: tuple[str, ...], carrier_id: str) -> None:
        if COMPILED:  # (see sdschat.sds.frozen)
            self.message_ids = message_ids  # type: ignore[misc]
            self.carrier_id = carrier_id  # type: ignore[misc]
        else:
            init(self, message_ids, carrier_id)


@dataclass(frozen=True, slots=True)
class RepairScheduled(Event):
    """A peer asked for ``message_id``; this participant will answer at ``t_resp``."""

    message_id: str
    requester_id: str
    t_resp: int

    def __init__(self, message_id: str, requester_id: str, t_resp: int) -> None:
        if COMPILED:  # (see sdschat.sds.frozen)
            self.message_id = message_id  # type: ignore[misc]
            self.requester_id = requester_id  # type: ignore[misc]
            self.t_resp = t_resp  # type: ignore[misc]
        else:
            init(self, message_id, requester_id, t_resp)


@dataclass(frozen=True, slots=True)
class RepairServed(Event):
    """This participant rebroadcast ``message_id`` (originally by ``sender_id``)."""

    message_id: str
    sender_id: str

    def __init__(self, message_id: str, sender_id: str) -> None:
        if COMPILED:  # (see sdschat.sds.frozen)
            self.message_id = message_id  # type: ignore[misc]
            self.sender_id = sender_id  # type: ignore[misc]
        else:
            init(self, message_id, sender_id)


@dataclass(frozen=True, slots=True)
class Rejected(Event):
    """A received frame was dropped. ``reason`` is a short code, ``detail`` prose."""

    reason: str
    detail: str = ""
    message_id: str | None = None
    sender_id: str | None = None

    def __init__(
        self, reason: str, detail: str = "", message_id: str | None = None, sender_id: str | None = None
    ) -> None:
        if COMPILED:  # (see sdschat.sds.frozen)
            self.reason = reason  # type: ignore[misc]
            self.detail = detail  # type: ignore[misc]
            self.message_id = message_id  # type: ignore[misc]
            self.sender_id = sender_id  # type: ignore[misc]
        else:
            init(self, reason, detail, message_id, sender_id)


@dataclass(frozen=True, slots=True)
class Evicted(Event):
    """A bounded buffer dropped an entry (``buffer`` names which)."""

    buffer: str
    message_id: str
    extra: dict[str, str] = field(default_factory=dict, compare=False)
