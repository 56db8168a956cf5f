"""Plain rows describing a channel's full state, for snapshots and stores.

``MessageChannel.snapshot()`` returns a :class:`ChannelState`;
``MessageChannel.restore(state)`` rebuilds the channel. With ``journal=True``
the channel also records each mutation as ``(op, key, value)``:

=============== ============== ==========================================
op              key            value
=============== ============== ==========================================
``lamport``     None           new clock value (int)
``log``         message_id     :class:`LogRow` (insert or replace)
``out``         message_id     :class:`OutRow` (insert or replace)
``out-``        message_id     None (left the outgoing buffer: acked/evicted)
``in``          message_id     :class:`InRow` (insert or replace)
``in-``         message_id     None (delivered)
``missing``     message_id     :class:`~sdschat.sds.wire.HistoryEntry`
``missing-``    message_id     None
``lost``        message_id     sender_id or None
``lost-``       message_id     None (the lost message arrived after all)
``req``         message_id     :class:`RequestRow` (insert or replace)
``req-``        message_id     None
``resp``        message_id     T_resp (int)
``resp-``       message_id     None
``cache``       message_id     :class:`CacheRow`
``cache-``      message_id     None
``bloom``       message_id     None (id added to the bloom filter)
``bloom-roll``  None           number of newest bloom ids kept (drop the rest)
=============== ============== ==========================================

Applying the ops in order to tables keyed by ``message_id`` reproduces what
``snapshot()`` would return (``last_activity``/``sync_counter`` are only in
snapshots: losing them merely shifts the next sync).
``next_sync_at`` is likewise snapshot-only; ``None`` means "derive it from
``last_activity``". ``recent_syncs`` (ids of sync frames already processed,
for dedup) is snapshot-only too: a store that does not keep it may act once
more on a duplicated sync frame arriving right after a restart. ``recent_log``
(the ids most recently added to the log, which the causal history names) is
snapshot-only too; empty means "the last K of the log".
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .archive import LogArchive
from .frozen import COMPILED, init
from .wire import HistoryEntry

#: one recorded mutation ``(op, key, value)`` (the table above); what the value is depends on the op
JournalOp = tuple[str, str | None, object]

__all__ = [
    "JournalOp",
    "LogArchive",
    "LogRow",
    "OutRow",
    "InRow",
    "MissingRow",
    "RequestRow",
    "CacheRow",
    "ChannelState",
]


@dataclass(frozen=True, slots=True)
class LogRow:
    message_id: str
    lamport_timestamp: int
    sender_id: str
    retrieval_hint: bytes | None = None

    def __init__(
        self, message_id: str, lamport_timestamp: int, sender_id: str, retrieval_hint: bytes | None = None
    ) -> None:
        if COMPILED:  # (see sdschat.sds.frozen)
            self.message_id = message_id  # type: ignore[misc]
            self.lamport_timestamp = lamport_timestamp  # type: ignore[misc]
            self.sender_id = sender_id  # type: ignore[misc]
            self.retrieval_hint = retrieval_hint  # type: ignore[misc]
        else:
            init(self, message_id, lamport_timestamp, sender_id, retrieval_hint)

    @property
    def log_key(self) -> tuple[int, str]:
        """Where the row sits in the local log: ``(lamport_timestamp, message_id)`` order."""
        return (self.lamport_timestamp, self.message_id)


@dataclass(frozen=True, slots=True)
class OutRow:
    message_id: str
    lamport_timestamp: int
    causal_history: tuple[HistoryEntry, ...]
    content: bytes
    sent_at: int
    resends: int
    next_resend: int
    ack_senders: tuple[str, ...] = ()

    def __init__(
        self,
        message_id: str,
        lamport_timestamp: int,
        causal_history: tuple[HistoryEntry, ...],
        content: bytes,
        sent_at: int,
        resends: int,
        next_resend: int,
        ack_senders: tuple[str, ...] = (),
    ) -> None:
        if COMPILED:  # (see sdschat.sds.frozen)
            self.message_id = message_id  # type: ignore[misc]
            self.lamport_timestamp = lamport_timestamp  # type: ignore[misc]
            self.causal_history = causal_history  # type: ignore[misc]
            self.content = content  # type: ignore[misc]
            self.sent_at = sent_at  # type: ignore[misc]
            self.resends = resends  # type: ignore[misc]
            self.next_resend = next_resend  # type: ignore[misc]
            self.ack_senders = ack_senders  # type: ignore[misc]
        else:
            init(
                self, message_id, lamport_timestamp, causal_history, content, sent_at, resends, next_resend, ack_senders
            )


@dataclass(frozen=True, slots=True)
class InRow:
    message_id: str
    sender_id: str
    lamport_timestamp: int
    causal_history: tuple[HistoryEntry, ...]
    content: bytes
    received_at: int
    unmet: tuple[str, ...]
    repaired: bool = False
    after_lost: tuple[str, ...] = ()
    retrieval_hint: bytes | None = None

    def __init__(
        self,
        message_id: str,
        sender_id: str,
        lamport_timestamp: int,
        causal_history: tuple[HistoryEntry, ...],
        content: bytes,
        received_at: int,
        unmet: tuple[str, ...],
        repaired: bool = False,
        after_lost: tuple[str, ...] = (),
        retrieval_hint: bytes | None = None,
    ) -> None:
        if COMPILED:  # (see sdschat.sds.frozen)
            self.message_id = message_id  # type: ignore[misc]
            self.sender_id = sender_id  # type: ignore[misc]
            self.lamport_timestamp = lamport_timestamp  # type: ignore[misc]
            self.causal_history = causal_history  # type: ignore[misc]
            self.content = content  # type: ignore[misc]
            self.received_at = received_at  # type: ignore[misc]
            self.unmet = unmet  # type: ignore[misc]
            self.repaired = repaired  # type: ignore[misc]
            self.after_lost = after_lost  # type: ignore[misc]
            self.retrieval_hint = retrieval_hint  # type: ignore[misc]
        else:
            init(
                self,
                message_id,
                sender_id,
                lamport_timestamp,
                causal_history,
                content,
                received_at,
                unmet,
                repaired,
                after_lost,
                retrieval_hint,
            )


@dataclass(frozen=True, slots=True)
class MissingRow:
    """A dependency nobody here has, and when it was first noticed missing."""

    entry: HistoryEntry
    detected_at: int

    def __init__(self, entry: HistoryEntry, detected_at: int) -> None:
        if COMPILED:  # (see sdschat.sds.frozen)
            self.entry = entry  # type: ignore[misc]
            self.detected_at = detected_at  # type: ignore[misc]
        else:
            init(self, entry, detected_at)


@dataclass(frozen=True, slots=True)
class RequestRow:
    entry: HistoryEntry
    t_req: int
    attempts: int = 0

    def __init__(self, entry: HistoryEntry, t_req: int, attempts: int = 0) -> None:
        if COMPILED:  # (see sdschat.sds.frozen)
            self.entry = entry  # type: ignore[misc]
            self.t_req = t_req  # type: ignore[misc]
            self.attempts = attempts  # type: ignore[misc]
        else:
            init(self, entry, t_req, attempts)


@dataclass(frozen=True, slots=True)
class CacheRow:
    message_id: str
    sender_id: str
    lamport_timestamp: int
    causal_history: tuple[HistoryEntry, ...]
    content: bytes

    def __init__(
        self,
        message_id: str,
        sender_id: str,
        lamport_timestamp: int,
        causal_history: tuple[HistoryEntry, ...],
        content: bytes,
    ) -> None:
        if COMPILED:  # (see sdschat.sds.frozen)
            self.message_id = message_id  # type: ignore[misc]
            self.sender_id = sender_id  # type: ignore[misc]
            self.lamport_timestamp = lamport_timestamp  # type: ignore[misc]
            self.causal_history = causal_history  # type: ignore[misc]
            self.content = content  # type: ignore[misc]
        else:
            init(self, message_id, sender_id, lamport_timestamp, causal_history, content)


@dataclass(slots=True)
class ChannelState:
    channel_id: str
    participant_id: str
    lamport_timestamp: int
    log: list[LogRow] = field(default_factory=list)
    outgoing: list[OutRow] = field(default_factory=list)
    incoming: list[InRow] = field(default_factory=list)
    missing: list[MissingRow] = field(default_factory=list)
    lost: list[tuple[str, str | None]] = field(default_factory=list)
    repair_requests: list[RequestRow] = field(default_factory=list)
    repair_responses: list[tuple[str, int]] = field(default_factory=list)
    cache: list[CacheRow] = field(default_factory=list)
    bloom_ids: list[str] = field(default_factory=list)
    last_activity: int = 0
    sync_counter: int = 0
    next_sync_at: int | None = None
    recent_syncs: list[str] = field(default_factory=list)
    recent_log: list[str] = field(default_factory=list)
    #: with ``log_window``: the ids older than the rows in ``log`` (membership only; this process only)
    log_archive: LogArchive | None = None
