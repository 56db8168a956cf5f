"""``Store``: one participant's SQLite database (aiosqlite).

Settings at open
----------------
* ``journal_mode=WAL``: readers never block the writer; a commit appends to
  the ``-wal`` file.
* ``synchronous=NORMAL`` (default) or ``FULL``. With WAL + NORMAL a commit is
  written to the WAL (the OS has it) but not fsynced: a committed transaction
  survives the process being killed (``kill -9``, a crash of Python), and only
  an operating-system crash or power loss may lose the last few committed
  transactions -- the database itself stays consistent either way. ``FULL``
  fsyncs the WAL at every commit, so commits also survive power loss, at the
  cost of one fsync per commit (batching with :class:`StoreWriter` keeps that
  to one per event-loop turn).
* ``foreign_keys=ON``, ``busy_timeout`` (default 5 s).
* The file is created with mode ``0600`` (``os.open(O_CREAT|O_EXCL, 0o600)``
  before SQLite sees it). SQLite creates ``-wal`` and ``-shm`` with the
  database file's permission bits; once they exist the store also sets all
  three to 0600 if group or others had access (files made by another tool or
  an older run): the file holds the identity key.

Transactions
------------
Each write method runs as one function on aiosqlite's worker thread, inside
one ``BEGIN IMMEDIATE ... COMMIT``: a batch is applied whole or not at all,
and nothing else interleaves with it. ``commits`` counts the commits made.
(aiosqlite has no public call to run a function on its thread, so the store
uses ``Connection._execute``; aiosqlite is pinned to 0.22.x.)
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import aiosqlite

from sdschat.sds.state import ChannelState

from . import migrate as _migrate
from . import rows as R
from .errors import CorruptRowError, StoreError
from .rows import EventRow, MessageRow, MessageUpdate, ParticipantRow

__all__ = ["Store", "Batch"]

log = logging.getLogger("sdschat.store")

_SYNC_MODES = ("OFF", "NORMAL", "FULL", "EXTRA")

#: One unit of work for :meth:`Store.apply_batches`: ``(channel_id, ops, messages, message_updates,
#: events, participants, meta)`` where ``meta`` is ``None`` or ``(last_activity, sync_counter, next_sync_at)``.
Batch = tuple

# ------------------------------------------------------------------ SQL

_UPSERT_LOG = (
    "INSERT INTO sds_log (channel_id, message_id, lamport_timestamp, sender_id, retrieval_hint) VALUES (?,?,?,?,?) "
    "ON CONFLICT (channel_id, message_id) DO UPDATE SET lamport_timestamp = excluded.lamport_timestamp, "
    "sender_id = excluded.sender_id, retrieval_hint = excluded.retrieval_hint"
)
_UPSERT_OUT = (
    "INSERT INTO sds_outgoing (channel_id, message_id, lamport_timestamp, causal_history, content, sent_at, "
    "resends, next_resend, ack_senders) VALUES (?,?,?,?,?,?,?,?,?) "
    "ON CONFLICT (channel_id, message_id) DO UPDATE SET lamport_timestamp = excluded.lamport_timestamp, "
    "causal_history = excluded.causal_history, content = excluded.content, sent_at = excluded.sent_at, "
    "resends = excluded.resends, next_resend = excluded.next_resend, ack_senders = excluded.ack_senders"
)
_UPSERT_IN = (
    "INSERT INTO sds_incoming (channel_id, message_id, sender_id, lamport_timestamp, causal_history, content, "
    "received_at, unmet, repaired, after_lost, retrieval_hint) VALUES (?,?,?,?,?,?,?,?,?,?,?) "
    "ON CONFLICT (channel_id, message_id) DO UPDATE SET sender_id = excluded.sender_id, "
    "lamport_timestamp = excluded.lamport_timestamp, causal_history = excluded.causal_history, "
    "content = excluded.content, received_at = excluded.received_at, unmet = excluded.unmet, "
    "repaired = excluded.repaired, after_lost = excluded.after_lost, retrieval_hint = excluded.retrieval_hint"
)
_UPSERT_MISSING = (
    "INSERT INTO sds_missing (channel_id, message_id, sender_id, retrieval_hint, detected_at) VALUES (?,?,?,?,?) "
    "ON CONFLICT (channel_id, message_id) DO UPDATE SET sender_id = excluded.sender_id, "
    "retrieval_hint = excluded.retrieval_hint, detected_at = excluded.detected_at"
)
_UPSERT_LOST = (
    "INSERT INTO sds_lost (channel_id, message_id, sender_id) VALUES (?,?,?) "
    "ON CONFLICT (channel_id, message_id) DO UPDATE SET sender_id = excluded.sender_id"
)
_UPSERT_REQ = (
    "INSERT INTO sds_repair_requests (channel_id, message_id, sender_id, retrieval_hint, t_req, attempts) "
    "VALUES (?,?,?,?,?,?) ON CONFLICT (channel_id, message_id) DO UPDATE SET sender_id = excluded.sender_id, "
    "retrieval_hint = excluded.retrieval_hint, t_req = excluded.t_req, attempts = excluded.attempts"
)
_UPSERT_RESP = (
    "INSERT INTO sds_repair_responses (channel_id, message_id, t_resp) VALUES (?,?,?) "
    "ON CONFLICT (channel_id, message_id) DO UPDATE SET t_resp = excluded.t_resp"
)
_UPSERT_CACHE = (
    "INSERT INTO sds_cache (channel_id, message_id, sender_id, lamport_timestamp, causal_history, content) "
    "VALUES (?,?,?,?,?,?) ON CONFLICT (channel_id, message_id) DO UPDATE SET sender_id = excluded.sender_id, "
    "lamport_timestamp = excluded.lamport_timestamp, causal_history = excluded.causal_history, "
    "content = excluded.content"
)
_INSERT_BLOOM = "INSERT INTO sds_bloom_ids (channel_id, message_id) VALUES (?,?)"
_ROLL_BLOOM = (
    "DELETE FROM sds_bloom_ids WHERE channel_id = ?1 AND seq < (SELECT COALESCE(MIN(seq), 0) FROM "
    "(SELECT seq FROM sds_bloom_ids WHERE channel_id = ?1 ORDER BY seq DESC LIMIT ?2))"
)
_DELETE = {
    name: f"DELETE FROM {table} WHERE channel_id = ? AND message_id = ?"
    for name, table in (
        ("out-", "sds_outgoing"), ("in-", "sds_incoming"), ("missing-", "sds_missing"), ("lost-", "sds_lost"),
        ("req-", "sds_repair_requests"), ("resp-", "sds_repair_responses"), ("cache-", "sds_cache"),
    )
}
_SDS_TABLES = (
    "sds_log", "sds_outgoing", "sds_incoming", "sds_missing", "sds_lost", "sds_repair_requests",
    "sds_repair_responses", "sds_cache", "sds_bloom_ids", "sds_recent_syncs",
)
_UPSERT_CHANNEL = (
    "INSERT INTO channels (channel_id, participant_id, lamport_timestamp, last_activity, sync_counter, "
    "next_sync_at, config) VALUES (?,?,?,?,?,?,?) ON CONFLICT (channel_id) DO UPDATE SET "
    "participant_id = excluded.participant_id, lamport_timestamp = excluded.lamport_timestamp, "
    "last_activity = excluded.last_activity, sync_counter = excluded.sync_counter, "
    "next_sync_at = excluded.next_sync_at, config = excluded.config"
)
_UPSERT_MESSAGE = (
    "INSERT INTO messages (channel_id, message_id, sender_id, lamport_timestamp, content, state, "
    "possible_ack_count, resends, repaired, after_lost, received_at_ms) VALUES (?,?,?,?,?,?,?,?,?,?,?) "
    "ON CONFLICT (channel_id, message_id) DO UPDATE SET sender_id = excluded.sender_id, "
    "lamport_timestamp = excluded.lamport_timestamp, content = excluded.content, state = excluded.state, "
    "possible_ack_count = excluded.possible_ack_count, resends = excluded.resends, repaired = excluded.repaired, "
    "after_lost = excluded.after_lost, received_at_ms = excluded.received_at_ms"
)
_UPDATE_MESSAGE = (
    "UPDATE messages SET state = COALESCE(?, state), possible_ack_count = COALESCE(?, possible_ack_count), "
    "resends = COALESCE(?, resends), repaired = COALESCE(?, repaired), after_lost = COALESCE(?, after_lost), "
    "received_at_ms = COALESCE(?, received_at_ms) WHERE channel_id = ? AND message_id = ?"
)
_INSERT_EVENT = (
    "INSERT INTO events (ts_ms, kind, channel_id, message_id, sender_id, participant_id, lamport_timestamp, detail) "
    "VALUES (?,?,?,?,?,?,?,?)"
)
_UPSERT_PARTICIPANT = (
    "INSERT INTO participants (participant_id, nick, first_seen_ms, last_seen_ms) VALUES (?,?,?,?) "
    "ON CONFLICT (participant_id) DO UPDATE SET nick = COALESCE(excluded.nick, nick), "
    "first_seen_ms = MIN(first_seen_ms, excluded.first_seen_ms), "
    "last_seen_ms = MAX(last_seen_ms, excluded.last_seen_ms)"
)
_MESSAGE_COLS = (
    "message_id, sender_id, lamport_timestamp, content, state, possible_ack_count, resends, repaired, "
    "after_lost, received_at_ms"
)
_EVENT_COLS = "seq, ts_ms, kind, channel_id, message_id, sender_id, participant_id, lamport_timestamp, detail"


def _create_private_file(path: Path) -> None:
    """Create ``path`` with mode 0600 if it does not exist (never loosen or touch an existing file)."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return
    try:
        os.fchmod(fd, 0o600)  # exactly 0600 whatever the umask
    finally:
        os.close(fd)


def _tighten(path: Path) -> None:
    """Make the database and its -wal/-shm/-journal files 0600 if group/other may access them."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        f = Path(f"{path}{suffix}")
        try:
            if f.stat().st_mode & 0o077:
                os.chmod(f, 0o600)
                log.warning("tightened permissions of %s to 0600", f)
        except FileNotFoundError:
            pass


class Store:
    """The durable store of one sdschat participant. Create with ``await Store.open(path)``."""

    def __init__(self, db: aiosqlite.Connection, path: Path | None, synchronous: str) -> None:
        self._db = db
        self.path = path
        self.synchronous = synchronous
        #: number of transactions committed by this Store object
        self.commits = 0
        self._closed = False

    # ------------------------------------------------------------ lifecycle

    @classmethod
    async def open(
        cls,
        path: str | os.PathLike[str],
        *,
        synchronous: str = "NORMAL",
        busy_timeout_ms: int = 5000,
        create: bool = True,
        migrations_folder: Path | None = None,
    ) -> Store:
        """Open (creating if needed, mode 0600) and migrate the database at ``path``.

        ``create=False`` refuses a path where no file exists (for readers such as
        export) instead of creating an empty database. ``path=":memory:"`` gives a
        private in-memory database (no WAL, for tests). Raises
        :class:`SchemaTooNewError` for a database written by a newer sdschat and
        :class:`StoreError` for a file that is not an sdschat database.
        """
        sync = synchronous.upper()
        if sync not in _SYNC_MODES:
            raise ValueError(f"synchronous must be one of {', '.join(_SYNC_MODES)}, not {synchronous!r}")
        migrations = _migrate.load_migrations(migrations_folder)
        memory = str(path) == ":memory:"
        p = None if memory else Path(path)
        if p is not None:
            if not create and not p.exists():
                raise StoreError(f"no database at {p}")
            _create_private_file(p)
        db = await aiosqlite.connect(":memory:" if memory else str(p), isolation_level=None)
        store = cls(db, p, sync)
        try:
            await store._run(store._setup, int(busy_timeout_ms), sync, migrations, memory)
        except StoreError as exc:
            await db.close()
            cause = exc.__cause__
            if type(exc) is StoreError and isinstance(cause, sqlite3.Error):  # translated by _run
                raise StoreError(f"cannot open {path}: {cause}") from cause
            raise
        except BaseException:
            await db.close()
            raise
        if p is not None:
            _tighten(p)
        return store

    @staticmethod
    def _setup(conn: sqlite3.Connection, busy_ms: int, sync: str, migrations, memory: bool) -> None:
        conn.execute(f"PRAGMA busy_timeout = {busy_ms}")
        # refuse a newer schema before changing anything in the file
        _migrate.check_not_too_new(conn, migrations)
        if not memory:
            (mode,) = conn.execute("PRAGMA journal_mode = WAL").fetchone()
            if mode.lower() != "wal":
                raise StoreError(f"could not switch the database to WAL mode (got {mode})")
        conn.execute(f"PRAGMA synchronous = {sync}")
        conn.execute("PRAGMA foreign_keys = ON")
        applied = _migrate.migrate(conn, migrations)
        if applied:
            log.info("applied schema migrations %s", applied)

    async def close(self) -> None:
        if self._closed:
            return
        try:
            await self._run(lambda conn: conn.execute("PRAGMA optimize"))
        except Exception:  # best effort
            pass
        self._closed = True
        await self._db.close()

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    # -------------------------------------------------------------- helpers

    async def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(sqlite3_connection, *args)`` on aiosqlite's worker thread."""
        if self._closed:
            raise StoreError("store is closed")
        db = self._db
        try:
            return await db._execute(lambda: fn(db._conn, *args))
        except sqlite3.Error as exc:  # disk full, read-only file system, a damaged page ...: one clear error
            raise StoreError(f"database {self.path or ':memory:'}: {exc}") from exc

    async def _write(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(conn, *args)`` inside one ``BEGIN IMMEDIATE ... COMMIT`` transaction."""
        result = await self._run(_in_transaction, fn, *args)
        self.commits += 1
        return result

    async def _fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        return await self._run(lambda conn: conn.execute(sql, params).fetchall())

    # ------------------------------------------------------------- identity

    async def get_identity(self) -> bytes | None:
        """The participant's Ed25519 private key bytes, or None if none is stored."""
        rows = await self._fetchall("SELECT private_key FROM identity WHERE id = 1")
        if not rows:
            return None
        if not isinstance(rows[0][0], bytes):
            raise CorruptRowError(f"database {self.path}: damaged row in identity: the private key is not bytes")
        return rows[0][0]

    async def set_identity(self, private_key: bytes, *, replace: bool = False) -> None:
        """Store the private key. Refuses to overwrite a different key unless ``replace=True``."""
        key = bytes(private_key)

        def fn(conn: sqlite3.Connection) -> None:
            row = conn.execute("SELECT private_key FROM identity WHERE id = 1").fetchone()
            if row is not None and bytes(row[0]) == key:
                return
            if row is not None and not replace:
                raise StoreError("an identity is already stored; pass replace=True to overwrite it")
            conn.execute(
                "INSERT INTO identity (id, private_key, created_at_ms) VALUES (1, ?, ?) "
                "ON CONFLICT (id) DO UPDATE SET private_key = excluded.private_key, "
                "created_at_ms = excluded.created_at_ms",
                (key, int(time.time() * 1000)),
            )

        await self._write(fn)

    # ------------------------------------------------------------------- kv

    async def kv_get(self, key: str, default: str | None = None) -> str | None:
        rows = await self._fetchall("SELECT value FROM kv WHERE key = ?", (key,))
        return rows[0][0] if rows else default

    async def kv_set(self, key: str, value: str | None) -> None:
        """Set a small text setting (``None`` deletes it)."""
        if value is None:
            await self._write(lambda conn: conn.execute("DELETE FROM kv WHERE key = ?", (key,)))
        else:
            await self._write(
                lambda conn: conn.execute(
                    "INSERT INTO kv (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (key, str(value)),
                )
            )

    # -------------------------------------------------------- channel state

    async def channel_ids(self) -> list[str]:
        return [r[0] for r in await self._fetchall("SELECT channel_id FROM channels ORDER BY channel_id")]

    async def get_channel_config(self, channel_id: str) -> str | None:
        """The config JSON given to :meth:`save_state`, or None for an unknown channel."""
        rows = await self._fetchall("SELECT config FROM channels WHERE channel_id = ?", (channel_id,))
        return rows[0][0] if rows else None

    async def save_state(self, state: ChannelState, config_json: str) -> None:
        """Write ``state`` in full, replacing whatever the store had for that channel (one transaction)."""
        await self._write(self._save_state_sync, state, config_json)

    @staticmethod
    def _save_state_sync(conn: sqlite3.Connection, s: ChannelState, config_json: str) -> None:
        cid = s.channel_id
        conn.execute(
            _UPSERT_CHANNEL,
            (cid, s.participant_id, s.lamport_timestamp, s.last_activity, s.sync_counter, s.next_sync_at,
             config_json),
        )
        for table in _SDS_TABLES:
            conn.execute(f"DELETE FROM {table} WHERE channel_id = ?", (cid,))
        conn.executemany(_UPSERT_LOG, [R.log_params(cid, r) for r in s.log])
        conn.executemany(_UPSERT_OUT, [R.out_params(cid, r) for r in s.outgoing])
        conn.executemany(_UPSERT_IN, [R.in_params(cid, r) for r in s.incoming])
        conn.executemany(_UPSERT_MISSING, [R.missing_params(cid, e) for e in s.missing])
        conn.executemany(_UPSERT_LOST, [R.lost_params(cid, mid, snd) for mid, snd in s.lost])
        conn.executemany(_UPSERT_REQ, [R.request_params(cid, r) for r in s.repair_requests])
        conn.executemany(_UPSERT_RESP, [R.response_params(cid, mid, t) for mid, t in s.repair_responses])
        conn.executemany(_UPSERT_CACHE, [R.cache_params(cid, r) for r in s.cache])
        conn.executemany(_INSERT_BLOOM, [(cid, mid) for mid in s.bloom_ids])
        conn.executemany(
            "INSERT INTO sds_recent_syncs (channel_id, message_id) VALUES (?,?)", [(cid, m) for m in s.recent_syncs]
        )

    async def load_state(self, channel_id: str) -> ChannelState | None:
        """Rebuild the channel's :class:`ChannelState` (for ``MessageChannel.restore``), or None.

        A row that does not hold what sdschat writes raises :class:`CorruptRowError`.
        """
        try:
            return await self._run(self._load_state_sync, channel_id)
        except CorruptRowError as exc:
            raise CorruptRowError(f"database {self.path}: {exc}") from None

    def _parsed(self, table: str, parse: Callable[[tuple], Any], rows: list[tuple]) -> list:
        try:
            return [parse(t) for t in rows]
        except CorruptRowError as exc:
            raise CorruptRowError(f"database {self.path}: damaged row in {table}: {exc}") from None

    @staticmethod
    def _load_state_sync(conn: sqlite3.Connection, cid: str) -> ChannelState | None:
        conn.execute("BEGIN")  # one consistent read snapshot
        try:
            head = conn.execute(
                "SELECT participant_id, lamport_timestamp, last_activity, sync_counter, next_sync_at FROM channels "
                "WHERE channel_id = ?",
                (cid,),
            ).fetchone()
            if head is None:
                return None

            def q(table: str, cols: str, parse: Callable[[tuple], Any], order: str = "seq") -> list:
                rows = conn.execute(f"SELECT {cols} FROM {table} WHERE channel_id = ? ORDER BY {order}", (cid,))
                try:
                    return [parse(t) for t in rows]
                except CorruptRowError as exc:
                    raise CorruptRowError(f"damaged row in {table}: {exc}") from None

            try:
                head = R.channel_head(head)
            except CorruptRowError as exc:
                raise CorruptRowError(f"damaged row in channels: {exc}") from None
            log_rows = q("sds_log", "message_id, lamport_timestamp, sender_id, retrieval_hint", R.log_row,
                         "lamport_timestamp, message_id")
            outgoing = q("sds_outgoing", "message_id, lamport_timestamp, causal_history, content, sent_at, resends, "
                         "next_resend, ack_senders", R.out_row)
            incoming = q("sds_incoming", "message_id, sender_id, lamport_timestamp, causal_history, content, "
                         "received_at, unmet, repaired, after_lost, retrieval_hint", R.in_row)
            missing = q("sds_missing", "message_id, sender_id, retrieval_hint, detected_at", R.missing_row)
            lost = q("sds_lost", "message_id, sender_id", R.lost_row)
            requests = q("sds_repair_requests", "message_id, sender_id, retrieval_hint, t_req, attempts",
                         R.request_row)
            responses = q("sds_repair_responses", "message_id, t_resp", R.response_row)
            cache = q("sds_cache", "message_id, sender_id, lamport_timestamp, causal_history, content", R.cache_row)
            bloom = q("sds_bloom_ids", "message_id", R.id_row)
            syncs = q("sds_recent_syncs", "message_id", R.id_row)
        finally:
            conn.execute("COMMIT")
        return ChannelState(
            channel_id=cid,
            participant_id=head[0],
            lamport_timestamp=head[1],
            log=log_rows,
            outgoing=outgoing,
            incoming=incoming,
            missing=missing,
            lost=lost,
            repair_requests=requests,
            repair_responses=responses,
            cache=cache,
            bloom_ids=bloom,
            last_activity=head[2],
            sync_counter=head[3],
            next_sync_at=head[4],
            recent_syncs=syncs,
        )

    # ---------------------------------------------------------------- apply

    async def apply(
        self,
        channel_id: str,
        ops: Iterable[tuple] = (),
        *,
        messages: Iterable[MessageRow] = (),
        message_updates: Iterable[MessageUpdate] = (),
        events: Iterable[EventRow] = (),
        participants: Iterable[ParticipantRow] = (),
        last_activity: int | None = None,
        sync_counter: int | None = None,
        next_sync_at: int | None = None,
    ) -> None:
        """Apply journal ops (``channel.drain_journal()``) and app rows in ONE transaction.

        The channel must exist (:meth:`save_state` first). On any error nothing of the
        batch is written. ``last_activity``/``sync_counter``/``next_sync_at`` are
        snapshot-only (the engine does not journal them): given, they update the channel
        row; otherwise it keeps the values of the last :meth:`save_state`.
        """
        meta = _meta(last_activity, sync_counter, next_sync_at)
        batch = (channel_id, list(ops), list(messages), list(message_updates), list(events), list(participants), meta)
        await self.apply_batches([batch])

    async def apply_batches(self, batches: Sequence[Batch]) -> None:
        """Apply several :data:`Batch` tuples, in order, in one transaction (the writer's flush)."""
        if not batches:
            return
        await self._write(self._apply_sync, batches)

    @staticmethod
    def _apply_sync(conn: sqlite3.Connection, batches: Sequence[Batch]) -> None:
        cur = conn.cursor()
        ex = cur.execute
        participants_of: dict[str, str] = {}
        for cid, ops, messages, updates, events, participants, meta in batches:
            pid = participants_of.get(cid)
            if pid is None:
                row = ex("SELECT participant_id FROM channels WHERE channel_id = ?", (cid,)).fetchone()
                if row is None:
                    raise StoreError(f"unknown channel {cid!r}: save_state() it before applying changes")
                pid = participants_of[cid] = row[0]
            lamport = None
            for op in ops:
                name, key, value = op
                if name == "bloom":
                    ex(_INSERT_BLOOM, (cid, key))
                elif name == "log":
                    ex(_UPSERT_LOG, R.log_params(cid, value))
                elif name == "lamport":
                    lamport = value  # only the last value matters
                elif name == "cache":
                    ex(_UPSERT_CACHE, R.cache_params(cid, value))
                elif name == "out":
                    ex(_UPSERT_OUT, R.out_params(cid, value))
                elif name == "in":
                    ex(_UPSERT_IN, R.in_params(cid, value))
                elif name == "req":
                    ex(_UPSERT_REQ, R.request_params(cid, value))
                elif name == "missing":
                    ex(_UPSERT_MISSING, R.missing_params(cid, value))
                elif name == "resp":
                    ex(_UPSERT_RESP, R.response_params(cid, key, value))
                elif name == "lost":
                    ex(_UPSERT_LOST, R.lost_params(cid, key, value))
                elif name == "bloom-roll":
                    keep = int(value)
                    if keep <= 0:
                        ex("DELETE FROM sds_bloom_ids WHERE channel_id = ?", (cid,))
                    else:
                        ex(_ROLL_BLOOM, (cid, keep))
                else:
                    sql = _DELETE.get(name)
                    if sql is None:
                        raise StoreError(f"unknown journal op {name!r}")
                    ex(sql, (cid, key))
            if meta is not None:
                ex(
                    "UPDATE channels SET last_activity = COALESCE(?, last_activity), "
                    "sync_counter = COALESCE(?, sync_counter), next_sync_at = COALESCE(?, next_sync_at) "
                    "WHERE channel_id = ?",
                    (*meta, cid),
                )
            if lamport is not None:
                ex("UPDATE channels SET lamport_timestamp = ? WHERE channel_id = ?", (lamport, cid))
            if messages:
                cur.executemany(_UPSERT_MESSAGE, [R.message_params(cid, m) for m in messages])
            for u in updates:
                ex(_UPDATE_MESSAGE, R.message_update_params(cid, u))
            if events:
                cur.executemany(_INSERT_EVENT, [R.event_params(cid, pid, e) for e in events])
            if participants:
                cur.executemany(_UPSERT_PARTICIPANT, [R.participant_params(p) for p in participants])

    # --------------------------------------------------------------- reads

    async def iter_messages(self, channel_id: str | None = None, *, chunk: int = 500) -> AsyncIterator[MessageRow]:
        """Application messages ordered by (lamport_timestamp, message_id), fetched in chunks."""
        where = "" if channel_id is None else "channel_id = ? AND "
        base = [] if channel_id is None else [channel_id]
        after: tuple[int, str] | None = None
        while True:
            if after is None:
                sql = f"SELECT {_MESSAGE_COLS} FROM messages WHERE {where}1 ORDER BY lamport_timestamp, message_id LIMIT ?"
                params = [*base, chunk]
            else:
                sql = (
                    f"SELECT {_MESSAGE_COLS} FROM messages WHERE {where}(lamport_timestamp, message_id) > (?, ?) "
                    "ORDER BY lamport_timestamp, message_id LIMIT ?"
                )
                params = [*base, after[0], after[1], chunk]
            rows = await self._fetchall(sql, params)
            for m in self._parsed("messages", R.message_row, rows):
                yield m
            if len(rows) < chunk:
                return
            after = (rows[-1][2], rows[-1][0])

    async def get_message(self, channel_id: str, message_id: str) -> MessageRow | None:
        rows = await self._fetchall(
            f"SELECT {_MESSAGE_COLS} FROM messages WHERE channel_id = ? AND message_id = ?", (channel_id, message_id)
        )
        return self._parsed("messages", R.message_row, rows)[0] if rows else None

    async def message_count(self, channel_id: str | None = None) -> int:
        if channel_id is None:
            rows = await self._fetchall("SELECT COUNT(*) FROM messages")
        else:
            rows = await self._fetchall("SELECT COUNT(*) FROM messages WHERE channel_id = ?", (channel_id,))
        return int(rows[0][0])

    async def iter_events(
        self, *, after_seq: int = 0, kind: str | None = None, chunk: int = 1000
    ) -> AsyncIterator[EventRow]:
        """Events in ``seq`` order, from ``after_seq`` on (optionally of one ``kind``)."""
        seq = after_seq
        while True:
            if kind is None:
                rows = await self._fetchall(
                    f"SELECT {_EVENT_COLS} FROM events WHERE seq > ? ORDER BY seq LIMIT ?", (seq, chunk)
                )
            else:
                rows = await self._fetchall(
                    f"SELECT {_EVENT_COLS} FROM events WHERE seq > ? AND kind = ? ORDER BY seq LIMIT ?",
                    (seq, kind, chunk),
                )
            for e in self._parsed("events", R.event_row, rows):
                yield e
            if len(rows) < chunk:
                return
            seq = rows[-1][0]

    async def participants(self) -> list[ParticipantRow]:
        return [
            R.participant_row(t)
            for t in await self._fetchall(
                "SELECT participant_id, nick, first_seen_ms, last_seen_ms FROM participants ORDER BY participant_id"
            )
        ]

    async def schema_version(self) -> int:
        return await self._run(_migrate.current_version)

    async def pragma(self, name: str) -> Any:
        """Read one PRAGMA value (e.g. ``journal_mode``), for checks and diagnostics."""
        if not name.replace("_", "").isalnum():
            raise ValueError(f"bad pragma name {name!r}")
        rows = await self._fetchall(f"PRAGMA {name}")
        return rows[0][0] if rows else None

    async def integrity_check(self) -> str:
        """``PRAGMA integrity_check`` ("ok" when sound; otherwise the problems, one per line)."""
        rows = await self._fetchall("PRAGMA integrity_check")
        return "\n".join(str(r[0]) for r in rows)


def _meta(last_activity: int | None, sync_counter: int | None, next_sync_at: int | None) -> tuple | None:
    if last_activity is None and sync_counter is None and next_sync_at is None:
        return None
    return (last_activity, sync_counter, next_sync_at)


def _in_transaction(conn: sqlite3.Connection, fn: Callable[..., Any], *args: Any) -> Any:
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = fn(conn, *args)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return result
