"""Applying the engine's journal and the application rows: one :data:`Batch` after another.

A batch is what one engine step changed (``channel.drain_journal()`` ops) plus
the application rows the node derived from it. :func:`apply_batches` runs on
the connection's thread inside the caller's transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Sequence
from typing import Any, cast

from sdschat.sds.state import CacheRow, InRow, JournalOp, LogRow, MissingRow, OutRow, RequestRow

from . import rows as R
from .errors import StoreError
from .sql import (
    DELETE,
    INSERT_BLOOM,
    INSERT_EVENT,
    ROLL_BLOOM,
    UPDATE_MESSAGE,
    UPSERT_ACTION,
    UPSERT_CACHE,
    UPSERT_IN,
    UPSERT_LOG,
    UPSERT_LOST,
    UPSERT_MESSAGE,
    UPSERT_MISSING,
    UPSERT_OUT,
    UPSERT_PARTICIPANT,
    UPSERT_REQ,
    UPSERT_RESP,
)

__all__ = ["Batch", "apply_batches", "batch_meta"]

#: the snapshot-only values of a :data:`Batch`: ``(last_activity, sync_counter, next_sync_at)``
Meta = tuple[int | None, int | None, int | None]
#: One unit of work for :meth:`Store.apply_batches`: ``(channel_id, ops, messages, message_updates,
#: events, participants, meta)`` where ``meta`` is ``None`` or ``(last_activity, sync_counter, next_sync_at)``.
Batch = tuple[
    str,
    list[JournalOp],
    list[R.MessageRow],
    list[R.MessageUpdate],
    list[R.EventRow],
    list[R.ParticipantRow],
    Meta | None,
]


def batch_meta(last_activity: int | None, sync_counter: int | None, next_sync_at: int | None) -> Meta | None:
    """The ``meta`` of a :data:`Batch`: None when no snapshot-only value is given."""
    if last_activity is None and sync_counter is None and next_sync_at is None:
        return None
    return (last_activity, sync_counter, next_sync_at)


def apply_batches(conn: sqlite3.Connection, batches: Sequence[Batch]) -> None:
    """Apply ``batches`` in order; the channels must exist (StoreError otherwise).

    What only the last value of counts is written once per call, after the batches: a channel's lamport
    timestamp and snapshot values (the last given of each; ``None`` keeps the one before) and the
    participants' rows (merged as their upsert merges them: the earliest first-seen, the latest last-seen, the
    newest nick given). A flush of several messages then updates each of these rows once, not once a message;
    the transaction's outcome is the same, since nothing in it reads them."""
    cur = conn.cursor()
    ex = cur.execute
    participants_of: dict[str, str] = {}
    lamports: dict[str, int] = {}
    metas: dict[str, Meta] = {}
    people: dict[str, R.ParticipantRow] = {}
    for cid, ops, messages, updates, events, participants, meta in batches:
        pid = participants_of.get(cid)
        if pid is None:
            pid = participants_of[cid] = _participant_of(ex, cid)
        lamport = _apply_ops(ex, cid, ops)
        if lamport is not None:
            lamports[cid] = lamport
        if meta is not None:
            metas[cid] = _merge_meta(metas.get(cid), meta)
        _apply_app_rows(cur, cid, pid, messages, updates, events)
        for p in participants:
            _merge_participant(people, p)
    for cid, meta in metas.items():
        ex(
            "UPDATE channels SET last_activity = COALESCE(?, last_activity), "
            "sync_counter = COALESCE(?, sync_counter), next_sync_at = COALESCE(?, next_sync_at) "
            "WHERE channel_id = ?",
            (*meta, cid),
        )
    for cid, lamport in lamports.items():
        ex("UPDATE channels SET lamport_timestamp = ? WHERE channel_id = ?", (lamport, cid))
    if people:
        cur.executemany(UPSERT_PARTICIPANT, [R.participant_params(p) for p in people.values()])


def _merge_meta(old: Meta | None, new: Meta) -> Meta:
    """``new`` over ``old``, value by value (``None`` keeps the one before), as the UPDATE's COALESCE does."""
    if old is None:
        return new
    return (
        new[0] if new[0] is not None else old[0],
        new[1] if new[1] is not None else old[1],
        new[2] if new[2] is not None else old[2],
    )


def _merge_participant(people: dict[str, R.ParticipantRow], p: R.ParticipantRow) -> None:
    """Fold ``p`` into ``people`` as :data:`UPSERT_PARTICIPANT` folds a row into the stored one."""
    old = people.get(p.participant_id)
    if old is None:
        people[p.participant_id] = p
        return
    people[p.participant_id] = R.ParticipantRow(
        p.participant_id,
        p.nick if p.nick is not None else old.nick,
        min(old.first_seen_ms, p.first_seen_ms),
        max(old.last_seen_ms, p.last_seen_ms),
    )


def _participant_of(ex: Callable[..., Any], cid: str) -> str:
    row = ex("SELECT participant_id FROM channels WHERE channel_id = ?", (cid,)).fetchone()
    if row is None:
        raise StoreError(f"unknown channel {cid!r}: save_state() it before applying changes")
    participant_id: str = row[0]
    return participant_id


def _apply_ops(ex: Callable[..., Any], cid: str, ops: Iterable[JournalOp]) -> int | None:
    """Write the journal ops of one channel; returns the last ``lamport`` op's value (None if none).

    What an op's key and value are depends on its name (the table in :mod:`sdschat.sds.state`): each branch
    names the types its op carries."""
    lamport: int | None = None
    for op in ops:
        name, key, value = op
        if name == "bloom":
            ex(INSERT_BLOOM, (cid, key))
        elif name == "log":
            ex(UPSERT_LOG, R.log_params(cid, cast(LogRow, value)))
        elif name == "lamport":
            lamport = cast(int, value)  # only the last value matters
        elif name == "cache":
            ex(UPSERT_CACHE, R.cache_params(cid, cast(CacheRow, value)))
        elif name == "out":
            ex(UPSERT_OUT, R.out_params(cid, cast(OutRow, value)))
        elif name == "in":
            ex(UPSERT_IN, R.in_params(cid, cast(InRow, value)))
        elif name == "req":
            ex(UPSERT_REQ, R.request_params(cid, cast(RequestRow, value)))
        elif name == "missing":
            ex(UPSERT_MISSING, R.missing_params(cid, cast(MissingRow, value)))
        elif name == "resp":
            ex(UPSERT_RESP, R.response_params(cid, cast(str, key), cast(int, value)))
        elif name == "lost":
            ex(UPSERT_LOST, R.lost_params(cid, cast(str, key), cast("str | None", value)))
        elif name == "kv":  # a node's own key-value row, written with the changes it goes with
            if value is None:
                ex("DELETE FROM kv WHERE key = ?", (key,))
            else:
                ex(
                    "INSERT INTO kv (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (key, value),
                )
        elif name == "action":  # a node's decision about an edit, delete or react (migrations/0005)
            ex(UPSERT_ACTION, R.action_params(cid, cast(R.ActionRow, value)))
        elif name == "bloom-roll":
            keep = int(cast(int, value))
            if keep <= 0:
                ex("DELETE FROM sds_bloom_ids WHERE channel_id = ?", (cid,))
            else:
                ex(ROLL_BLOOM, (cid, keep))
        else:
            statement = DELETE.get(name)
            if statement is None:
                raise StoreError(f"unknown journal op {name!r}")
            ex(statement, (cid, key))
    return lamport


def _apply_app_rows(
    cur: sqlite3.Cursor,
    cid: str,
    pid: str,
    messages: list[R.MessageRow],
    updates: list[R.MessageUpdate],
    events: list[R.EventRow],
) -> None:
    """Write one batch's messages, message updates and events."""
    if messages:
        cur.executemany(UPSERT_MESSAGE, [R.message_params(cid, m) for m in messages])
    for u in updates:
        cur.execute(UPDATE_MESSAGE, R.message_update_params(cid, u))
    if events:
        cur.executemany(INSERT_EVENT, [R.event_params(cid, pid, e) for e in events])
