"""Rows of the store and their (de)serialization: the one place that knows column layouts.

Engine rows (:mod:`sdschat.sds.state`) map to the ``sds_*`` tables; the
application rows defined here (:class:`MessageRow`, :class:`MessageUpdate`,
:class:`EventRow`, :class:`ParticipantRow`) map to ``messages``, ``events`` and
``participants``.

Encodings: a causal history is JSON ``[[message_id, sender_id|null,
retrieval_hint_hex|null], ...]`` (``None`` and ``b""`` hints stay distinct);
id lists (``unmet``, ``after_lost``, ``ack_senders``) are JSON arrays of strings;
booleans are INTEGER 0/1.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from sdschat.sds.state import CacheRow, InRow, LogRow, MissingRow, OutRow, RequestRow
from sdschat.sds.wire import HistoryEntry

__all__ = [
    "EVENT_KINDS",
    "EventRow",
    "MessageRow",
    "MessageUpdate",
    "ParticipantRow",
]

#: The ``kind`` values of the events table (the pipeline's vocabulary).
EVENT_KINDS = frozenset(
    {
        "sent", "received", "delivered", "missing", "acked", "possibly_acked", "resent",
        "repair_requested", "repair_served", "lost", "rejected", "sync_sent", "sync_received",
    }
)


# --------------------------------------------------------------- app rows


@dataclass(frozen=True, slots=True)
class MessageRow:
    """An application message (own or received) as the node records it."""

    message_id: str
    sender_id: str
    lamport_timestamp: int
    content: bytes
    state: str
    possible_ack_count: int = 0
    resends: int = 0
    repaired: bool = False
    after_lost: tuple[str, ...] = ()
    received_at_ms: int | None = None


@dataclass(frozen=True, slots=True)
class MessageUpdate:
    """Change some status columns of a stored message; ``None`` leaves a column as it is."""

    message_id: str
    state: str | None = None
    possible_ack_count: int | None = None
    resends: int | None = None
    repaired: bool | None = None
    after_lost: tuple[str, ...] | None = None
    received_at_ms: int | None = None


@dataclass(frozen=True, slots=True)
class EventRow:
    """One row of the append-only events table. ``seq`` is assigned by the store.

    ``participant_id`` (who recorded it) defaults to the channel's participant.
    ``detail`` is any JSON-serializable mapping.
    """

    kind: str
    ts_ms: int
    message_id: str | None = None
    sender_id: str | None = None
    participant_id: str | None = None
    lamport_timestamp: int | None = None
    detail: dict[str, Any] | None = None
    seq: int | None = None
    channel_id: str | None = None


@dataclass(frozen=True, slots=True)
class ParticipantRow:
    """A participant seen in a channel. Upserts keep the earliest first_seen, latest last_seen,
    and the newest non-null nick."""

    participant_id: str
    nick: str | None
    first_seen_ms: int
    last_seen_ms: int


# ------------------------------------------------------------- encoders

_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_loads = json.loads


def ids_to_json(ids) -> str:
    return _dumps(list(ids))


def ids_from_json(text: str) -> tuple[str, ...]:
    return tuple(_loads(text))


def history_to_json(history) -> str:
    return _dumps(
        [[e.message_id, e.sender_id, None if e.retrieval_hint is None else e.retrieval_hint.hex()] for e in history]
    )


def history_from_json(text: str) -> tuple[HistoryEntry, ...]:
    return tuple(
        HistoryEntry(mid, None if hint is None else bytes.fromhex(hint), sender) for mid, sender, hint in _loads(text)
    )


def detail_to_json(detail: dict[str, Any] | None) -> str | None:
    return None if detail is None else _dumps(detail)


def detail_from_json(text: str | None) -> dict[str, Any] | None:
    return None if text is None else _loads(text)


# ---- engine rows -> parameter tuples (column order = the INSERT statements in store.py)


def log_params(channel_id: str, r: LogRow) -> tuple:
    return (channel_id, r.message_id, r.lamport_timestamp, r.sender_id, r.retrieval_hint)


def out_params(channel_id: str, r: OutRow) -> tuple:
    return (channel_id, r.message_id, r.lamport_timestamp, history_to_json(r.causal_history), r.content,
            r.sent_at, r.resends, r.next_resend, ids_to_json(r.ack_senders))


def in_params(channel_id: str, r: InRow) -> tuple:
    return (channel_id, r.message_id, r.sender_id, r.lamport_timestamp, history_to_json(r.causal_history),
            r.content, r.received_at, ids_to_json(r.unmet), int(r.repaired), ids_to_json(r.after_lost),
            r.retrieval_hint)


def missing_params(channel_id: str, r: MissingRow) -> tuple:
    e = r.entry
    return (channel_id, e.message_id, e.sender_id, e.retrieval_hint, r.detected_at)


def lost_params(channel_id: str, message_id: str, sender_id: str | None) -> tuple:
    return (channel_id, message_id, sender_id)


def request_params(channel_id: str, r: RequestRow) -> tuple:
    e = r.entry
    return (channel_id, e.message_id, e.sender_id, e.retrieval_hint, r.t_req, r.attempts)


def response_params(channel_id: str, message_id: str, t_resp: int) -> tuple:
    return (channel_id, message_id, t_resp)


def cache_params(channel_id: str, r: CacheRow) -> tuple:
    return (channel_id, r.message_id, r.sender_id, r.lamport_timestamp, history_to_json(r.causal_history), r.content)


# ---- SELECT rows -> engine rows (column order = the SELECT statements in store.py)


def log_row(t) -> LogRow:
    return LogRow(t[0], t[1], t[2], t[3])


def out_row(t) -> OutRow:
    return OutRow(t[0], t[1], history_from_json(t[2]), t[3], t[4], t[5], t[6], ids_from_json(t[7]))


def in_row(t) -> InRow:
    return InRow(t[0], t[1], t[2], history_from_json(t[3]), t[4], t[5], ids_from_json(t[6]), bool(t[7]),
                 ids_from_json(t[8]), t[9])


def missing_row(t) -> MissingRow:
    return MissingRow(HistoryEntry(t[0], t[2], t[1]), t[3])


def request_row(t) -> RequestRow:
    return RequestRow(HistoryEntry(t[0], t[2], t[1]), t[3], t[4])


def cache_row(t) -> CacheRow:
    return CacheRow(t[0], t[1], t[2], history_from_json(t[3]), t[4])


# ---- application rows


def message_params(channel_id: str, m: MessageRow) -> tuple:
    return (channel_id, m.message_id, m.sender_id, m.lamport_timestamp, bytes(m.content), m.state,
            m.possible_ack_count, m.resends, int(m.repaired), ids_to_json(m.after_lost), m.received_at_ms)


def message_row(t) -> MessageRow:
    return MessageRow(t[0], t[1], t[2], t[3], t[4], t[5], t[6], bool(t[7]), ids_from_json(t[8]), t[9])


def message_update_params(channel_id: str, u: MessageUpdate) -> tuple:
    return (
        u.state, u.possible_ack_count, u.resends,
        None if u.repaired is None else int(u.repaired),
        None if u.after_lost is None else ids_to_json(u.after_lost),
        u.received_at_ms, channel_id, u.message_id,
    )


def event_params(channel_id: str, participant_id: str, e: EventRow) -> tuple:
    if e.kind not in EVENT_KINDS:
        raise ValueError(f"unknown event kind {e.kind!r}")
    return (e.ts_ms, e.kind, channel_id, e.message_id, e.sender_id, e.participant_id or participant_id,
            e.lamport_timestamp, detail_to_json(e.detail))


def event_row(t) -> EventRow:
    return EventRow(kind=t[2], ts_ms=t[1], message_id=t[4], sender_id=t[5], participant_id=t[6],
                    lamport_timestamp=t[7], detail=detail_from_json(t[8]), seq=t[0], channel_id=t[3])


def participant_params(p: ParticipantRow) -> tuple:
    return (p.participant_id, p.nick, p.first_seen_ms, p.last_seen_ms)


def participant_row(t) -> ParticipantRow:
    return ParticipantRow(t[0], t[1], t[2], t[3])
