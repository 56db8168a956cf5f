"""Reading back what the store holds for the application: messages, events, participants."""

from __future__ import annotations

import statistics
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from . import rows as R
from .errors import CorruptRowError
from .rows import ActionRow, EventRow, MessageRow, ParticipantRow
from .sql import ACTION_COLS, EVENT_COLS, MESSAGE_COLS

__all__ = ["History", "Row"]

#: a row as sqlite3 gives it: what each value is (int, float, str, bytes or None) is the column's, and is
#: checked where the row is read (:mod:`.rows`)
Row = tuple[Any, ...]
Fetch = Callable[[str, Sequence[Any]], Awaitable[list[Row]]]

_T = TypeVar("_T")


class History:
    """The history queries of one :class:`~.store.Store`; ``fetchall(sql, params)`` runs on its connection."""

    def __init__(self, fetchall: Fetch, path: Path | None) -> None:
        self._fetchall = fetchall
        self._path = path

    def parsed(self, table: str, parse: Callable[[Row], _T], rows: list[Row]) -> list[_T]:
        """``parse`` applied to each row; a damaged row raises :class:`CorruptRowError` naming the database."""
        try:
            return [parse(t) for t in rows]
        except CorruptRowError as exc:
            raise CorruptRowError(f"database {self._path}: damaged row in {table}: {exc}") from None

    async def iter_messages(self, channel_id: str | None = None, *, chunk: int = 500) -> AsyncIterator[MessageRow]:
        """Application messages ordered by (lamport_timestamp, message_id), fetched in chunks."""
        where = "" if channel_id is None else "channel_id = ? AND "
        base = [] if channel_id is None else [channel_id]
        after: tuple[int, str] | None = None
        while True:
            if after is None:
                sql = (
                    f"SELECT {MESSAGE_COLS} FROM messages WHERE {where}1 ORDER BY lamport_timestamp, message_id LIMIT ?"
                )
                params = [*base, chunk]
            else:
                sql = (
                    f"SELECT {MESSAGE_COLS} FROM messages WHERE {where}(lamport_timestamp, message_id) > (?, ?) "
                    "ORDER BY lamport_timestamp, message_id LIMIT ?"
                )
                params = [*base, after[0], after[1], chunk]
            rows = await self._fetchall(sql, params)
            for m in self.parsed("messages", R.message_row, rows):
                yield m
            if len(rows) < chunk:
                return
            after = (rows[-1][2], rows[-1][0])

    async def page_messages(
        self, channel_id: str, before: tuple[int, str] | None, limit: int, *, after: tuple[int, str] | None = None
    ) -> list[MessageRow]:
        """One page of history in log order, read from the index: the newest ``limit`` messages before
        ``before`` (a ``(lamport_timestamp, message_id)`` key, exclusive; ``None``: the end of the log), or with
        ``after``, the oldest ``limit`` messages after that key (what comes below a search result)."""
        if after is not None:
            rows = await self._fetchall(
                f"SELECT {MESSAGE_COLS} FROM messages WHERE channel_id = ? AND (lamport_timestamp, message_id) > "
                "(?, ?) ORDER BY lamport_timestamp, message_id LIMIT ?",
                [channel_id, after[0], after[1], limit],
            )
            return self.parsed("messages", R.message_row, rows)
        if before is None:
            sql = (
                f"SELECT {MESSAGE_COLS} FROM messages WHERE channel_id = ? "
                "ORDER BY lamport_timestamp DESC, message_id DESC LIMIT ?"
            )
            params: list[object] = [channel_id, limit]
        else:
            sql = (
                f"SELECT {MESSAGE_COLS} FROM messages WHERE channel_id = ? AND (lamport_timestamp, message_id) < "
                "(?, ?) ORDER BY lamport_timestamp DESC, message_id DESC LIMIT ?"
            )
            params = [channel_id, before[0], before[1], limit]
        rows = await self._fetchall(sql, params)
        rows.reverse()
        return self.parsed("messages", R.message_row, rows)

    async def search(
        self,
        channel_id: str,
        match: str,
        limit: int,
        before: int | None = None,
    ) -> list[tuple[int, MessageRow]]:
        """Messages whose text matches the FTS5 query ``match`` (:func:`~.search.fts_query`), newest stored
        first, as ``(rowid, row)``; ``before``: only rows stored before that rowid (the next page)."""
        sql = (
            f"SELECT m.rowid, {', '.join('m.' + c.strip() for c in MESSAGE_COLS.split(','))} "
            "FROM message_search s JOIN messages m ON m.rowid = s.rowid "
            "WHERE message_search MATCH ? AND m.channel_id = ? AND s.rowid < ? ORDER BY s.rowid DESC LIMIT ?"
        )
        rows = await self._fetchall(sql, (match, channel_id, 2**63 - 1 if before is None else before, limit))
        return list(zip((r[0] for r in rows), self.parsed("messages", R.message_row, [r[1:] for r in rows])))

    async def messages_not_in(self, channel_id: str, states: Sequence[str]) -> list[MessageRow]:
        """The messages whose state is none of ``states`` (those whose state can still change), in log order."""
        marks = ", ".join("?" * len(states))
        rows = await self._fetchall(
            f"SELECT {MESSAGE_COLS} FROM messages WHERE channel_id = ? AND state NOT IN ({marks}) "
            "ORDER BY lamport_timestamp, message_id",
            (channel_id, *states),
        )
        return self.parsed("messages", R.message_row, rows)

    async def get_message(self, channel_id: str, message_id: str) -> MessageRow | None:
        rows = await self._fetchall(
            f"SELECT {MESSAGE_COLS} FROM messages WHERE channel_id = ? AND message_id = ?", (channel_id, message_id)
        )
        return self.parsed("messages", R.message_row, rows)[0] if rows else None

    async def actions_on(self, channel_id: str, target_ids: Sequence[str]) -> list[ActionRow]:
        """The edits, deletions and reactions naming any of ``target_ids``, or that are any of them (migrations/0005),
        in log order."""
        out: list[ActionRow] = []
        ids = list(dict.fromkeys(target_ids))
        for i in range(0, len(ids), 500):  # (SQLite's bound on parameters)
            part = ids[i : i + 500]
            marks = ", ".join(f"?{i + 2}" for i in range(len(part)))  # (the same values for both lists)
            rows = await self._fetchall(
                f"SELECT {ACTION_COLS} FROM message_actions WHERE channel_id = ?1 AND target_id IN ({marks}) "
                f"UNION SELECT {ACTION_COLS} FROM message_actions WHERE channel_id = ?1 AND action_id IN ({marks})",
                (channel_id, *part),
            )
            out += self.parsed("message_actions", R.action_row, rows)
        out.sort(key=lambda a: (a.lamport_timestamp, a.action_id))
        return out

    async def pending_actions(self, channel_id: str) -> list[ActionRow]:
        """The actions still waiting for their target (pending, or lost with it: applied if it comes after all), in
        log order."""
        rows = await self._fetchall(
            f"SELECT {ACTION_COLS} FROM message_actions WHERE channel_id = ? AND state IN ('pending', 'lost') "
            "ORDER BY lamport_timestamp, action_id",
            (channel_id,),
        )
        return self.parsed("message_actions", R.action_row, rows)

    async def message_count(self, channel_id: str | None = None) -> int:
        if channel_id is None:
            rows = await self._fetchall("SELECT COUNT(*) FROM messages", ())
        else:
            rows = await self._fetchall("SELECT COUNT(*) FROM messages WHERE channel_id = ?", (channel_id,))
        return int(rows[0][0])

    async def unread_count(
        self, channel_id: str, since_ms: int, me: str, skip_prefixes: Sequence[bytes] = (), but: Sequence[str] = ()
    ) -> int:
        """Messages of others received after ``since_ms`` (wall-clock ms): what a person has not seen yet; those
        whose content starts with one of ``skip_prefixes`` (bytes: kinds of message that are not news), and the
        message ids ``but`` (counted elsewhere), aside."""
        skip = "".join(" AND substr(content, 1, ?) != ?" for _ in skip_prefixes)
        params = [p for prefix in skip_prefixes for p in (len(prefix), bytes(prefix))]
        if but:
            skip += f" AND message_id NOT IN ({','.join('?' * len(but))})"
        rows = await self._fetchall(
            "SELECT COUNT(*) FROM messages WHERE channel_id = ? AND sender_id != ? AND received_at_ms > ?" + skip,
            (channel_id, me, since_ms, *params, *but),
        )
        return int(rows[0][0])

    async def iter_events(
        self, *, after_seq: int = 0, kind: str | None = None, chunk: int = 1000
    ) -> AsyncIterator[EventRow]:
        """Events in ``seq`` order, from ``after_seq`` on (optionally of one ``kind``)."""
        seq = after_seq
        while True:
            if kind is None:
                rows = await self._fetchall(
                    f"SELECT {EVENT_COLS} FROM events WHERE seq > ? ORDER BY seq LIMIT ?", (seq, chunk)
                )
            else:
                rows = await self._fetchall(
                    f"SELECT {EVENT_COLS} FROM events WHERE seq > ? AND kind = ? ORDER BY seq LIMIT ?",
                    (seq, kind, chunk),
                )
            for e in self.parsed("events", R.event_row, rows):
                yield e
            if len(rows) < chunk:
                return
            seq = rows[-1][0]

    async def events_about(self, channel_id: str, message_ids: Sequence[str], *, named: bool = True) -> list[EventRow]:
        """The events (full rows and compacted first times) of ``message_ids`` and, with ``named``, the
        ``missing``/``lost`` rows whose detail names one of them, oldest first (``ts_ms``, then ``seq``)."""
        out: list[EventRow] = []
        for i in range(0, len(message_ids), 400):
            ids = list(message_ids[i : i + 400])
            marks = ",".join("?" * len(ids))
            # channel and ids, no OR: the view's compacted branches look each message up by its key
            rows = await self._fetchall(
                f"SELECT {EVENT_COLS} FROM event_history WHERE channel_id = ? AND message_id IN ({marks})",
                (channel_id, *ids),
            )
            if named:
                naming = " OR ".join(["instr(detail, ?) > 0"] * len(ids))
                rows += await self._fetchall(
                    f"SELECT {EVENT_COLS} FROM events WHERE kind IN ('missing', 'lost') AND channel_id = ? "
                    f"AND ({naming})",
                    (channel_id, *ids),
                )
            out += self.parsed("event_history", R.event_row, rows)
        seen: set[int | None] = set()
        unique: list[EventRow] = []
        for e in out:
            if e.seq not in seen:
                seen.add(e.seq)
                unique.append(e)
        return sorted(unique, key=lambda e: (e.ts_ms, e.seq or 0))

    async def missing_events(self, channel_id: str) -> list[EventRow]:
        """Every ``missing`` row of the channel (the gaps noticed), oldest first."""
        rows = await self._fetchall(
            f"SELECT {EVENT_COLS} FROM events WHERE kind = 'missing' AND channel_id = ? ORDER BY ts_ms, seq",
            (channel_id,),
        )
        return self.parsed("events", R.event_row, rows)

    async def engine_rows(self, channel_id: str, message_id: str) -> dict[str, Row]:
        """What the engine's tables hold now about one message, by table (``outgoing``: sent_at, resends,
        next_resend, ack_senders; ``incoming``: received_at, unmet; ``missing``: sender, detected_at;
        ``request``: t_req, attempts; ``response``: t_resp; ``cache``, ``lost``: present)."""
        queries = {
            "outgoing": "SELECT sent_at, resends, next_resend, ack_senders FROM sds_outgoing",
            "incoming": "SELECT received_at, unmet FROM sds_incoming",
            "missing": "SELECT sender_id, detected_at FROM sds_missing",
            "request": "SELECT t_req, attempts FROM sds_repair_requests",
            "response": "SELECT t_resp FROM sds_repair_responses",
            "cache": "SELECT 1 FROM sds_cache",
            "lost": "SELECT 1 FROM sds_lost",
        }
        out: dict[str, Row] = {}
        for name, sql in queries.items():
            rows = await self._fetchall(f"{sql} WHERE channel_id = ? AND message_id = ?", (channel_id, message_id))
            if rows:
                out[name] = tuple(rows[0])
        return out

    async def member_figures(self, channel_id: str) -> dict[str, dict[str, float]]:
        """Per participant (by id), what the database tells of the link between them and us.

        ``messages``: stored from them. The rest reads the events window (the newest rows in full):

        - ``copies_in``: first copies of theirs received here; ``indirect_in``: those that did not come
          straight from them (resent, repaired or filled from the store);
        - ``acks``: our messages they have acknowledged (their causal history named it: an ``ack_seen`` row
          per member and message); ``ack_lag_ms``: the median time from our first send to their first
          acknowledgement; ``tries_out``: our publishes of those messages up to that acknowledgement (the
          first send, plus each ``resent`` row before it);
        - ``repairs``: messages of others they rebroadcast to us (SDS-R answers);
        - the loss estimate between us, both ways, as trials and failures (each publish a trial, the first
          that arrived the success)::

              lost  = (tries_out - acks) + indirect_in
              tries = tries_out + copies_in                    loss ≈ lost / tries

          A resend raced by a slow acknowledgement counts as a loss: an upper bound when they are quiet.
        """
        out: dict[str, dict[str, float]] = {}

        def put(pid: str | None, **figures: float | None) -> None:
            if pid is not None:
                out.setdefault(pid, {}).update({k: v for k, v in figures.items() if v is not None})

        for pid, n in await self._fetchall(
            "SELECT sender_id, count(*) FROM messages WHERE channel_id = ? GROUP BY sender_id", (channel_id,)
        ):
            put(pid, messages=n)
        via = "CASE WHEN json_valid(detail) THEN json_extract(detail, '$.via') END"
        for pid, n, indirect in await self._fetchall(
            f"SELECT sender_id, count(*), sum({via} IN ('resend', 'repair', 'store')) FROM events "
            "WHERE kind = 'received' AND channel_id = ? GROUP BY sender_id",
            (channel_id,),
        ):
            put(pid, copies_in=n, indirect_in=indirect or 0)
        # resent rows outlive the window: only those of messages somebody's acknowledgement is still held for
        acked = "SELECT message_id FROM events WHERE kind = 'ack_seen' AND channel_id = ?"
        for pid, figures in _ack_figures(
            await self._fetchall(
                "SELECT kind, message_id, by_id, ts_ms FROM events WHERE kind IN ('sent', 'resent', 'ack_seen') "
                f"AND channel_id = ? AND (kind = 'ack_seen' OR message_id IN ({acked})) ORDER BY ts_ms, seq",
                (channel_id, channel_id),
            )
        ).items():
            put(pid, **figures)
        for pid, n in await self._fetchall(
            f"SELECT json_extract(detail, '$.publisher'), count(*) FROM events WHERE kind = 'received' "
            f"AND channel_id = ? AND {via} = 'repair' GROUP BY 1",
            (channel_id,),
        ):
            put(pid, repairs=n)
        for f in out.values():
            tries, acks = f.get("tries_out", 0), f.get("acks", 0)
            f["tries"] = tries + f.get("copies_in", 0)
            f["lost"] = (tries - acks) + f.get("indirect_in", 0)
        return out

    async def ids_with_prefix(self, channel_id: str, prefix: str, limit: int = 5) -> list[str]:
        """Message ids of the channel (stored, logged or named in an event) that start with ``prefix``."""
        hi = prefix + "\U0010ffff"
        rows = await self._fetchall(
            "SELECT message_id FROM messages WHERE channel_id = ? AND message_id >= ? AND message_id < ? "
            "UNION SELECT message_id FROM events WHERE channel_id = ? AND message_id >= ? AND message_id < ? "
            "AND kind NOT IN ('sync_sent', 'sync_received') LIMIT ?",
            (channel_id, prefix, hi, channel_id, prefix, hi, limit),
        )
        return sorted(r[0] for r in rows)

    async def participants(self) -> list[ParticipantRow]:
        rows = await self._fetchall(
            "SELECT participant_id, nick, first_seen_ms, last_seen_ms FROM participants ORDER BY participant_id", ()
        )
        return self.parsed("participants", R.participant_row, rows)


def _ack_figures(rows: list[Row]) -> dict[str, dict[str, float]]:
    """Per member, from ``(kind, message_id, by, ts_ms)`` rows (``sent``, ``resent``, ``ack_seen``) in time
    order: ``acks``, ``ack_lag_ms`` (median first send to first acknowledgement) and ``tries_out`` (our
    publishes of the acknowledged messages up to their acknowledgement), as :meth:`History.member_figures`."""
    sent: dict[str, int] = {}
    publishes: dict[str, int] = {}
    acked: dict[tuple[str, str], None] = {}
    lags: dict[str, list[int]] = {}
    figures: dict[str, dict[str, float]] = {}
    for kind, mid, by, ts in rows:
        if kind == "sent":
            sent.setdefault(mid, ts)
            publishes[mid] = publishes.get(mid, 0) + 1
        elif kind == "resent":
            publishes[mid] = publishes.get(mid, 0) + 1
        elif by is not None and (by, mid) not in acked:  # ack_seen: the first time this member named it
            acked[(by, mid)] = None
            f = figures.setdefault(by, {"acks": 0, "tries_out": 0})
            f["acks"] += 1
            f["tries_out"] += max(1, publishes.get(mid, 0))  # its send row compacted away: at least one
            if mid in sent:
                lags.setdefault(by, []).append(ts - sent[mid])
    for by, values in lags.items():
        figures[by]["ack_lag_ms"] = statistics.median(values)
    return figures
