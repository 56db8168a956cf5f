"""A channel's whole engine state: write a :class:`ChannelState` in full, and read it back.

Both run on the connection's thread: :func:`save_state` inside the caller's
transaction, :func:`load_state` in one read snapshot of its own.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from sdschat.sds.state import ChannelState

from . import rows as R
from . import sql
from .errors import CorruptRowError
from .queries import Row

_T = TypeVar("_T")
_B = TypeVar("_B")

__all__ = ["load_state", "save_state"]


def save_state(conn: sqlite3.Connection, s: ChannelState, config_json: str) -> None:
    """Replace whatever the store holds for ``s.channel_id`` with ``s`` (and its config JSON)."""
    cid = s.channel_id
    conn.execute(
        sql.UPSERT_CHANNEL,
        (cid, s.participant_id, s.lamport_timestamp, s.last_activity, s.sync_counter, s.next_sync_at, config_json),
    )
    for table in sql.SDS_TABLES:
        if table == "sds_log" and s.log_archive is not None:
            continue  # a windowed log's older rows are only here: the log only grows, so upserting is enough
        conn.execute(f"DELETE FROM {table} WHERE channel_id = ?", (cid,))
    conn.executemany(sql.UPSERT_LOG, [R.log_params(cid, r) for r in s.log])
    conn.executemany(sql.UPSERT_OUT, [R.out_params(cid, r) for r in s.outgoing])
    conn.executemany(sql.UPSERT_IN, [R.in_params(cid, r) for r in s.incoming])
    conn.executemany(sql.UPSERT_MISSING, [R.missing_params(cid, e) for e in s.missing])
    conn.executemany(sql.UPSERT_LOST, [R.lost_params(cid, mid, snd) for mid, snd in s.lost])
    conn.executemany(sql.UPSERT_REQ, [R.request_params(cid, r) for r in s.repair_requests])
    conn.executemany(sql.UPSERT_RESP, [R.response_params(cid, mid, t) for mid, t in s.repair_responses])
    conn.executemany(sql.UPSERT_CACHE, [R.cache_params(cid, r) for r in s.cache])
    conn.executemany(sql.INSERT_BLOOM, [(cid, mid) for mid in s.bloom_ids])
    conn.executemany(
        "INSERT INTO sds_recent_syncs (channel_id, message_id) VALUES (?,?)", [(cid, m) for m in s.recent_syncs]
    )


def load_state(conn: sqlite3.Connection, cid: str, log_window: int = 0) -> ChannelState | None:
    """The channel's :class:`ChannelState`, or None; a damaged row raises :class:`CorruptRowError`.

    ``log_window`` > 0: only the newest ``log_window`` log rows are read as rows, the older ids into
    ``log_archive`` (see ``ChannelConfig.log_window``).
    """
    conn.execute("BEGIN")  # one consistent read snapshot
    try:
        head = conn.execute(
            "SELECT participant_id, lamport_timestamp, last_activity, sync_counter, next_sync_at FROM channels "
            "WHERE channel_id = ?",
            (cid,),
        ).fetchone()
        if head is None:
            _no_orphans(conn, cid)
            return None
        try:
            head = R.channel_head(head)
        except CorruptRowError as exc:
            raise CorruptRowError(f"damaged row in channels: {exc}") from None
        lists = _load_lists(conn, cid, log_window)
    finally:
        conn.execute("COMMIT")
    return ChannelState(
        channel_id=cid,
        participant_id=head[0],
        lamport_timestamp=head[1],
        last_activity=head[2],
        sync_counter=head[3],
        next_sync_at=head[4],
        **lists,
    )


def _no_orphans(conn: sqlite3.Connection, cid: str) -> None:
    """A channel without its ``channels`` row has nothing stored either (a new one); messages or log rows
    without it mean the row was lost: :class:`CorruptRowError`, never a fresh start over its history."""
    for table in ("messages", "sds_log"):
        if conn.execute(f"SELECT 1 FROM {table} WHERE channel_id = ? LIMIT 1", (cid,)).fetchone() is not None:
            raise CorruptRowError(f"damaged table channels: the channel's row is missing, yet {table} holds rows of it")


def _load_lists(conn: sqlite3.Connection, cid: str, log_window: int = 0) -> dict[str, Any]:
    """The channel's rows of every ``sds_*`` table, by :class:`ChannelState` field."""

    def q(
        table: str,
        cols: str,
        parse: Callable[[Row], _T],
        order: str = "seq",
        *,
        bulk: Callable[[Iterable[Row]], _B] | None = None,
        limit: str = "",
    ) -> list[_T] | _B:
        rows = conn.execute(f"SELECT {cols} FROM {table} WHERE channel_id = ? ORDER BY {order}{limit}", (cid,))
        try:
            return bulk(rows) if bulk is not None else [parse(t) for t in rows]
        except CorruptRowError as exc:
            raise CorruptRowError(f"damaged row in {table}: {exc}") from None

    log_order = "lamport_timestamp, message_id"
    older, archive = 0, None
    if log_window > 0:
        total = conn.execute("SELECT count(*) FROM sds_log WHERE channel_id = ?", (cid,)).fetchone()[0]
        older = max(0, total - log_window)
    if older:  # read in full, but kept as 8-byte hashes: a long history costs its ids, not its rows
        archive = q("sds_log", "message_id", R.id_row, log_order, bulk=R.log_archive, limit=f" LIMIT {older}")
    return {
        "log": q(
            "sds_log",
            "message_id, lamport_timestamp, sender_id, retrieval_hint",
            R.log_row,
            log_order,
            bulk=R.log_rows,
            limit=f" LIMIT -1 OFFSET {older}" if older else "",
        ),
        "log_archive": archive,
        "outgoing": q(
            "sds_outgoing",
            "message_id, lamport_timestamp, causal_history, content, sent_at, resends, next_resend, ack_senders",
            R.out_row,
        ),
        "incoming": q(
            "sds_incoming",
            "message_id, sender_id, lamport_timestamp, causal_history, content, "
            "received_at, unmet, repaired, after_lost, retrieval_hint",
            R.in_row,
        ),
        "missing": q("sds_missing", "message_id, sender_id, retrieval_hint, detected_at", R.missing_row),
        "lost": q("sds_lost", "message_id, sender_id", R.lost_row),
        "repair_requests": q(
            "sds_repair_requests", "message_id, sender_id, retrieval_hint, t_req, attempts", R.request_row
        ),
        "repair_responses": q("sds_repair_responses", "message_id, t_resp", R.response_row),
        "cache": q("sds_cache", "message_id, sender_id, lamport_timestamp, causal_history, content", R.cache_row),
        "bloom_ids": q("sds_bloom_ids", "message_id", R.id_row),
        "recent_syncs": q("sds_recent_syncs", "message_id", R.id_row),
    }
