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
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from sdschat.sds.state import CacheRow, InRow, LogArchive, LogRow, MissingRow, OutRow, RequestRow
from sdschat.sds.wire import HistoryEntry

from .errors import CorruptRowError

__all__ = [
    "ActionRow",
    "EVENT_KINDS",
    "EventRow",
    "MessageRow",
    "MessageUpdate",
    "ParticipantRow",
]

#: The ``kind`` values of the events table (the pipeline's vocabulary).
EVENT_KINDS = frozenset(
    {
        "sent",
        "received",
        "delivered",
        "missing",
        "acked",
        "possibly_acked",
        "resent",
        "repair_requested",
        "repair_served",
        "lost",
        "rejected",
        "sync_sent",
        "sync_received",
        "ack_seen",
        "duplicate",
        "repair_cancelled",
        "store_query",
        "store_answer",
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

    @property
    def log_key(self) -> tuple[int, str]:
        """Where the message sits in the local log: ``(lamport_timestamp, message_id)`` order."""
        return (self.lamport_timestamp, self.message_id)


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
    #: the content rewritten (a deletion removes the text: the search triggers of migrations/0002 unindex it)
    content: bytes | None = None


@dataclass(frozen=True, slots=True)
class ActionRow:
    """One row of ``message_actions`` (migrations/0005): an edit, delete or react message and what the node decided
    about it (``state``: pending, applied, refused or lost). ``value``: an edit's text (None once its target is
    deleted), a reaction's emoji, None for a delete."""

    action_id: str
    target_id: str
    kind: str
    sender_id: str
    lamport_timestamp: int
    at_ms: int
    value: str | None
    state: str


@dataclass(frozen=True, slots=True)
class EventRow:
    """One row of the events table (never updated; old rows are compacted: :mod:`.compaction`). ``seq`` is
    assigned by the store.

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


def ids_to_json(ids: Iterable[str]) -> str:
    return _dumps(list(ids))


def ids_from_json(text: str) -> tuple[str, ...]:
    ids = _json(text)
    if not isinstance(ids, list):
        raise CorruptRowError("an id list is not a JSON array")
    return tuple(_id(i) for i in ids)


#: the first byte of a causal history stored in the compact binary form (``history_to_db``)
_HISTORY_V1 = 1
_HEX = frozenset("0123456789abcdef")


def _put_str(out: bytearray, text: str, hex_len: int) -> int:
    """Append ``text``: raw bytes if it is lowercase hex of ``hex_len`` characters (returns 1), else its UTF-8
    with a one- or two-byte length (returns 2)."""
    if len(text) == hex_len and _HEX.issuperset(text):
        out += bytes.fromhex(text)
        return 1
    raw = text.encode("utf-8")
    out += _length(len(raw))
    out += raw
    return 2


def _length(n: int) -> bytes:
    if n < 0x80:
        return bytes((n,))
    if n >= 0x8000:
        raise ValueError("a causal-history field over 32 KB")
    return bytes((0x80 | n >> 8, n & 0xFF))


def history_to_db(history: Iterable[HistoryEntry]) -> bytes:
    """A causal history in its stored form: one version byte, then per entry a flags byte and the fields.

    Ids that are 64 lowercase hex characters (sdschat's and @waku/sds's message ids) are stored as their 32
    bytes, sender ids of 32 such characters (sdschat's participant ids) as 16: a cache row's history takes
    ~40% of its JSON text (the SDS-R cache holds 10,000 of them). Flags: bits 0-1 the id (1 raw, 2 text),
    bits 2-3 the sender (0 none, 1 raw, 2 text), bit 4 a retrieval hint (length + bytes) follows.
    """
    out = bytearray((_HISTORY_V1,))
    for e in history:
        at = len(out)
        out.append(0)
        flags = _put_str(out, e.message_id, 64)
        if e.sender_id is not None:
            flags |= _put_str(out, e.sender_id, 32) << 2
        if e.retrieval_hint is not None:
            flags |= 16
            out += _length(len(e.retrieval_hint))
            out += e.retrieval_hint
        out[at] = flags
    return bytes(out)


def history_from_db(value: object) -> tuple[HistoryEntry, ...]:
    """:func:`history_to_db`'s bytes, or the JSON text of rows written before it (``[[id, sender, hint hex]]``)."""
    if isinstance(value, str):
        return history_from_json(value)
    if not isinstance(value, bytes) or not value or value[0] != _HISTORY_V1:
        raise CorruptRowError("a causal history is neither JSON text nor sdschat's binary form")
    out = []
    pos, end = 1, len(value)
    try:
        while pos < end:
            flags = value[pos]
            if flags & ~0x1F or flags & 3 not in (1, 2) or flags >> 2 & 3 == 3:
                raise CorruptRowError("a causal-history entry has unknown flags")
            mid, pos = _get_str(value, pos + 1, flags & 3, 32)
            sender, pos = _get_str(value, pos, flags >> 2 & 3, 16)
            hint = None
            if flags & 16:
                n, pos = _get_length(value, pos)
                hint = value[pos : pos + n]
                if len(hint) != n:
                    raise CorruptRowError("a causal history is cut short")
                pos += n
            out.append(HistoryEntry(_id(mid), hint, _opt_sender(sender)))
    except IndexError:
        raise CorruptRowError("a causal history is cut short") from None
    return tuple(out)


def _get_length(value: bytes, pos: int) -> tuple[int, int]:
    n = value[pos]
    if n < 0x80:
        return n, pos + 1
    return (n & 0x7F) << 8 | value[pos + 1], pos + 2


def _get_str(value: bytes, pos: int, kind: int, raw_len: int) -> tuple[str | None, int]:
    if kind == 0:
        return None, pos
    if kind == 1:
        raw = value[pos : pos + raw_len]
        if len(raw) != raw_len:
            raise CorruptRowError("a causal history is cut short")
        return raw.hex(), pos + raw_len
    n, pos = _get_length(value, pos)
    raw = value[pos : pos + n]
    if len(raw) != n:
        raise CorruptRowError("a causal history is cut short")
    try:
        return raw.decode("utf-8"), pos + n
    except UnicodeDecodeError:
        raise CorruptRowError("a causal-history id is not UTF-8") from None


def history_from_json(text: str) -> tuple[HistoryEntry, ...]:
    entries = _json(text)
    if not isinstance(entries, list):
        raise CorruptRowError("a causal history is not a JSON array")
    out = []
    for e in entries:
        if not isinstance(e, list) or len(e) != 3:
            raise CorruptRowError("a causal-history entry is not [id, sender, hint]")
        mid, sender, hint = e
        if hint is not None:
            if not isinstance(hint, str):
                raise CorruptRowError("a retrieval hint is not hex text")
            try:
                hint = bytes.fromhex(hint)
            except ValueError:
                raise CorruptRowError("a retrieval hint is not hex text") from None
        out.append(HistoryEntry(_id(mid), hint, _opt_sender(sender)))
    return tuple(out)


# ---- checked readers: a damaged row raises CorruptRowError (a StoreError), never anything else

#: Bounds of stored integers: timestamps and counters of a sound database are far inside them.
_INT_MAX = 2**63 - 1  # SQLite's INTEGER
_COUNT_MAX = 2**31
_ID_MAX = 1024


def _json(text: object) -> Any:
    if not isinstance(text, str):
        raise CorruptRowError("a JSON column holds no text")
    try:
        return _loads(text)
    except ValueError:  # JSONDecodeError and RecursionError-free invalid input
        raise CorruptRowError("a JSON column is not valid JSON") from None
    except RecursionError:
        raise CorruptRowError("a JSON column nests too deeply") from None


def _id(v: object) -> str:
    if not isinstance(v, str) or not v or len(v) > _ID_MAX:
        raise CorruptRowError("an id is not a non-empty string")
    return v


#: the length of a message id in hex: SHA-256 of its content (sdschat's, and @waku/sds's)
MESSAGE_ID_HEX = 64


def _message_id(v: object) -> str:
    """The id of an application message: :data:`MESSAGE_ID_HEX` lowercase hex digits (the node stores only
    messages whose id it checked is the hash of their content)."""
    if type(v) is not str or len(v) != MESSAGE_ID_HEX or not _HEX.issuperset(v):
        raise CorruptRowError(f"a message id is not {MESSAGE_ID_HEX} hex digits")
    return v


_WORD = frozenset("abcdefghijklmnopqrstuvwxyz_")


def _word(v: object, what: str) -> str:
    """A state or kind: a short lowercase word (``possibly_acknowledged``)."""
    if type(v) is not str or not v or len(v) > 32 or not _WORD.issuperset(v):
        raise CorruptRowError(f"a {what} is not a lowercase word")
    return v


def _sender(v: object) -> str:
    """A sender id: text, possibly empty (the wire allows an empty sender)."""
    if not isinstance(v, str) or len(v) > _ID_MAX:
        raise CorruptRowError("a sender id is not a string")
    return sys.intern(v)  # a channel has few senders and a log has 100,000s of rows naming them: one copy each


def _opt_sender(v: object) -> str | None:
    return None if v is None else _sender(v)


def _int(v: object, lo: int = 0, hi: int = _INT_MAX) -> int:
    if type(v) is not int or not lo <= v <= hi:
        raise CorruptRowError("a number is out of range or not an integer")
    return v


def _opt_int(v: object) -> int | None:
    return None if v is None else _int(v)


def _opt_text(v: object) -> str | None:
    if v is not None and (type(v) is not str or len(v) > _ID_MAX):
        raise CorruptRowError("a text column holds no text")
    return v


def _blob(v: object) -> bytes:
    if not isinstance(v, bytes):
        raise CorruptRowError("a binary column holds no bytes")
    return v


def _content(v: object) -> bytes:
    if type(v) is not bytes or not v:
        raise CorruptRowError("a message has no content")
    return v


def _opt_blob(v: object) -> bytes | None:
    return None if v is None else _blob(v)


def _flag(v: object) -> bool:
    return bool(_int(v, 0, 1))


def channel_head(t: tuple[Any, ...]) -> tuple[str, int, int, int, int | None]:
    """``channels`` row: participant_id, lamport_timestamp, last_activity, sync_counter, next_sync_at."""
    return (_id(t[0]), _int(t[1]), _int(t[2]), _int(t[3]), _opt_int(t[4]))


def lost_row(t: tuple[Any, ...]) -> tuple[str, str | None]:
    return (_id(t[0]), _opt_sender(t[1]))


def response_row(t: tuple[Any, ...]) -> tuple[str, int]:
    return (_id(t[0]), _int(t[1]))


def id_row(t: tuple[Any, ...]) -> str:
    return _id(t[0])


def detail_to_json(detail: dict[str, Any] | None) -> str | None:
    return None if detail is None else _dumps(detail)


def detail_from_json(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    detail = _json(text)
    if not isinstance(detail, dict):
        raise CorruptRowError("an event detail is not a JSON object")
    return detail


# ---- engine rows -> parameter tuples (column order = the INSERT statements in store.py)


def log_params(channel_id: str, r: LogRow) -> tuple[str, str, int, str, bytes | None]:
    return (channel_id, r.message_id, r.lamport_timestamp, r.sender_id, r.retrieval_hint)


def out_params(channel_id: str, r: OutRow) -> tuple[str, str, int, bytes, bytes, int, int, int, str]:
    return (
        channel_id,
        r.message_id,
        r.lamport_timestamp,
        history_to_db(r.causal_history),
        r.content,
        r.sent_at,
        r.resends,
        r.next_resend,
        ids_to_json(r.ack_senders),
    )


def in_params(channel_id: str, r: InRow) -> tuple[str, str, str, int, bytes, bytes, int, str, int, str, bytes | None]:
    return (
        channel_id,
        r.message_id,
        r.sender_id,
        r.lamport_timestamp,
        history_to_db(r.causal_history),
        r.content,
        r.received_at,
        ids_to_json(r.unmet),
        int(r.repaired),
        ids_to_json(r.after_lost),
        r.retrieval_hint,
    )


def missing_params(channel_id: str, r: MissingRow) -> tuple[str, str, str | None, bytes | None, int]:
    e = r.entry
    return (channel_id, e.message_id, e.sender_id, e.retrieval_hint, r.detected_at)


def lost_params(channel_id: str, message_id: str, sender_id: str | None) -> tuple[str, str, str | None]:
    return (channel_id, message_id, sender_id)


def request_params(channel_id: str, r: RequestRow) -> tuple[str, str, str | None, bytes | None, int, int]:
    e = r.entry
    return (channel_id, e.message_id, e.sender_id, e.retrieval_hint, r.t_req, r.attempts)


def response_params(channel_id: str, message_id: str, t_resp: int) -> tuple[str, str, int]:
    return (channel_id, message_id, t_resp)


def cache_params(channel_id: str, r: CacheRow) -> tuple[str, str, str, int, bytes, bytes]:
    return (channel_id, r.message_id, r.sender_id, r.lamport_timestamp, history_to_db(r.causal_history), r.content)


# ---- SELECT rows -> engine rows (column order = the SELECT statements in store.py)


def log_row(t: tuple[Any, ...]) -> LogRow:
    return LogRow(_id(t[0]), _int(t[1]), _sender(t[2]), _opt_blob(t[3]))


def log_rows(rows: Iterable[tuple[Any, ...]]) -> list[LogRow]:
    """:func:`log_row` for a whole log at once, the same checks inlined (a restored log can hold a million
    rows: a third of a channel's start-up was spent in per-value calls)."""
    out: list[LogRow] = []
    append = out.append
    senders: dict[str, str] = {}
    for mid, lt, sender, hint in rows:
        if type(mid) is not str or not mid or len(mid) > _ID_MAX:
            raise CorruptRowError("an id is not a non-empty string")
        if type(lt) is not int or not 0 <= lt <= _INT_MAX:
            raise CorruptRowError("a number is out of range or not an integer")
        known = senders.get(sender)
        if known is None:
            known = senders[sender] = _sender(sender)
        if hint is not None and type(hint) is not bytes:
            raise CorruptRowError("a binary column holds no bytes")
        append(LogRow(mid, lt, known, hint))
    return out


def log_archive(rows: Iterable[tuple[Any, ...]]) -> LogArchive:
    """The ids of ``(message_id,)`` rows as a :class:`LogArchive` (the older part of a windowed log)."""
    key = LogArchive.key

    def keys() -> Iterator[int]:
        for (mid,) in rows:
            if type(mid) is not str or not mid or len(mid) > _ID_MAX:
                raise CorruptRowError("an id is not a non-empty string")
            yield key(mid)

    return LogArchive(keys())


def out_row(t: tuple[Any, ...]) -> OutRow:
    return OutRow(
        _id(t[0]),
        _int(t[1]),
        history_from_db(t[2]),
        _blob(t[3]),
        _int(t[4]),
        _int(t[5], 0, _COUNT_MAX),
        _int(t[6]),
        ids_from_json(t[7]),
    )


def in_row(t: tuple[Any, ...]) -> InRow:
    return InRow(
        _id(t[0]),
        _sender(t[1]),
        _int(t[2]),
        history_from_db(t[3]),
        _blob(t[4]),
        _int(t[5]),
        ids_from_json(t[6]),
        _flag(t[7]),
        ids_from_json(t[8]),
        _opt_blob(t[9]),
    )


def missing_row(t: tuple[Any, ...]) -> MissingRow:
    return MissingRow(HistoryEntry(_id(t[0]), _opt_blob(t[2]), _opt_sender(t[1])), _int(t[3]))


def request_row(t: tuple[Any, ...]) -> RequestRow:
    return RequestRow(
        HistoryEntry(_id(t[0]), _opt_blob(t[2]), _opt_sender(t[1])), _int(t[3]), _int(t[4], 0, _COUNT_MAX)
    )


def cache_row(t: tuple[Any, ...]) -> CacheRow:
    return CacheRow(_id(t[0]), _sender(t[1]), _int(t[2]), history_from_db(t[3]), _blob(t[4]))


# ---- application rows


def message_params(
    channel_id: str, m: MessageRow
) -> tuple[str, str, str, int, bytes, str, int, int, int, str, int | None]:
    return (
        channel_id,
        m.message_id,
        m.sender_id,
        m.lamport_timestamp,
        bytes(m.content),
        m.state,
        m.possible_ack_count,
        m.resends,
        int(m.repaired),
        ids_to_json(m.after_lost),
        m.received_at_ms,
    )


def message_row(t: tuple[Any, ...]) -> MessageRow:
    """A ``messages`` row (``MESSAGE_COLS``): every column typed and in range, the id hex of its length, the
    content present, the state a word; else :class:`CorruptRowError`."""
    return MessageRow(
        _message_id(t[0]),
        _sender(t[1]),
        _int(t[2]),
        _content(t[3]),
        _word(t[4], "message state"),
        _int(t[5], 0, _COUNT_MAX),
        _int(t[6], 0, _COUNT_MAX),
        _flag(t[7]),
        ids_from_json(t[8]),
        _opt_int(t[9]),
    )


def message_update_params(
    channel_id: str, u: MessageUpdate
) -> tuple[str | None, int | None, int | None, int | None, str | None, int | None, bytes | None, str, str]:
    return (
        u.state,
        u.possible_ack_count,
        u.resends,
        None if u.repaired is None else int(u.repaired),
        None if u.after_lost is None else ids_to_json(u.after_lost),
        u.received_at_ms,
        None if u.content is None else bytes(u.content),
        channel_id,
        u.message_id,
    )


def event_params(
    channel_id: str, participant_id: str, e: EventRow
) -> tuple[int, str, str, str | None, str | None, str, int | None, str | None]:
    if e.kind not in EVENT_KINDS:
        raise ValueError(f"unknown event kind {e.kind!r}")
    return (
        e.ts_ms,
        e.kind,
        channel_id,
        e.message_id,
        e.sender_id,
        e.participant_id or participant_id,
        e.lamport_timestamp,
        detail_to_json(e.detail),
    )


def event_row(t: tuple[Any, ...]) -> EventRow:
    """An ``events`` (or ``event_history``) row: a known kind, typed columns (ids are whatever the frame said:
    text, possibly empty, of bounded length; a compacted row's ``seq`` is negative)."""
    if t[2] not in EVENT_KINDS:
        raise CorruptRowError("an event's kind is not one sdschat records")
    return EventRow(
        kind=t[2],
        ts_ms=_int(t[1]),
        message_id=_opt_text(t[4]),
        sender_id=_opt_text(t[5]),
        participant_id=_opt_text(t[6]),
        lamport_timestamp=_opt_int(t[7]),
        detail=detail_from_json(t[8]),
        seq=_int(t[0], -_INT_MAX, _INT_MAX),
        channel_id=_opt_text(t[3]),
    )


def participant_params(p: ParticipantRow) -> tuple[str, str | None, int, int]:
    return (p.participant_id, p.nick, p.first_seen_ms, p.last_seen_ms)


def participant_row(t: tuple[Any, ...]) -> ParticipantRow:
    return ParticipantRow(_sender(t[0]), _opt_text(t[1]), _int(t[2]), _int(t[3]))


def kv_value(v: object) -> str:
    if type(v) is not str:
        raise CorruptRowError("a setting holds no text")
    return v


def action_params(channel_id: str, a: ActionRow) -> tuple[Any, ...]:
    return (
        channel_id,
        a.action_id,
        a.target_id,
        a.kind,
        a.sender_id,
        a.lamport_timestamp,
        a.at_ms,
        a.value,
        a.state,
    )


def action_row(t: tuple[Any, ...]) -> ActionRow:
    """A ``message_actions`` row (``ACTION_COLS``); :class:`CorruptRowError` for one sdschat does not write."""
    value = t[6]
    if value is not None and not isinstance(value, str):
        raise CorruptRowError("an action's value is not text")
    return ActionRow(
        _message_id(t[0]),
        _message_id(t[1]),
        _word(t[2], "action kind"),
        _sender(t[3]),
        _int(t[4]),
        _int(t[5]),
        value,
        _word(t[7], "action state"),
    )
