"""``Store``: one participant's SQLite database (aiosqlite), the package's facade.

Its parts: :mod:`.connection` (the file, settings at open, transactions),
:mod:`.snapshot` (a channel's whole engine state), :mod:`.journal` (journal
batches and application rows), :mod:`.queries` (history and events),
:mod:`.sql` (the statements).

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
* ``wal_autocheckpoint=0``: no commit copies the log into the file (which
  made the commit that crossed 1,000 pages, and a message waiting on it,
  slower: the sender's flush p99 6.3 ms with it, 2.5 ms without);
  :class:`~sdschat.store.checkpoint.Checkpointer` does it
  from a connection and a thread of its own every 200 commits or 4 MiB of log.
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

import asyncio
import contextlib
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar, TypeVarTuple

import aiosqlite

from sdschat.sds.state import ChannelState, JournalOp

from . import compaction, connection, integrity, migrate, snapshot
from . import rows as R
from .checkpoint import Checkpointer, checkpoint_on
from .errors import CorruptRowError, StoreError
from .journal import Batch, apply_batches, batch_meta
from .queries import History, Row
from .rows import ActionRow, EventRow, MessageRow, MessageUpdate, ParticipantRow
from .search import INDEX_BATCH, fts_query, index_pending, run_error
from .sql import EVENT_COLS

__all__ = ["Store", "Batch"]

_T = TypeVar("_T")
_Ts = TypeVarTuple("_Ts")


def _apply_and_index(conn: sqlite3.Connection, batches: Sequence[Batch]) -> None:
    """The writer's flush: the batches, then the search index's batch once enough messages have gathered."""
    apply_batches(conn, batches)
    index_pending(conn, INDEX_BATCH)


async def _create(path: Path, busy_ms: int, sync: str, migrations: list[migrate.Migration]) -> None:
    """:func:`.connection.create_database` off the event loop; its failures (a full disk...) as one line."""
    try:
        await asyncio.to_thread(connection.create_database, path, busy_ms, sync, migrations)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot create {path}: {exc}") from exc
    except OSError as exc:
        raise StoreError(f"cannot create {path}: {exc.strerror or exc}") from None


class Store:
    """The durable store of one sdschat participant. Create with ``await Store.open(path)``."""

    def __init__(self, db: aiosqlite.Connection, path: Path | None, synchronous: str) -> None:
        self._db = db
        self.path = path
        self.synchronous = synchronous
        #: number of transactions committed by this Store object
        self.commits = 0
        #: checkpoints the write-ahead log off the commit path (None in memory)
        self.checkpointer: Checkpointer | None = None
        self._closed = False
        self._history = History(self._fetchall, path)

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

        A new database is made only where no file exists, whole or not at all
        (:func:`.connection.create_database`); a file that is there must be a sound sdschat database
        (:mod:`.integrity`: its header against its size, its schema against ``migrations/``, its small tables
        page by page), or the open raises :class:`DamagedDatabaseError` before anything in it changes: an
        empty or damaged file is never taken as a new channel. ``create=False`` refuses a path where no file
        exists (for readers such as export). ``path=":memory:"`` gives a private in-memory database (no WAL,
        for tests). Raises :class:`SchemaTooNewError` for a database written by a newer sdschat and
        :class:`StoreError` for a file that cannot be opened.
        """
        sync = connection.sync_mode(synchronous)
        migrations = migrate.load_migrations(migrations_folder)
        memory = str(path) == ":memory:"
        p = None if memory else Path(path)
        if p is not None:
            if not p.exists():
                if not create:
                    raise StoreError(f"no database at {p}")
                await _create(p, int(busy_timeout_ms), sync, migrations)
            integrity.check_file(p)
        db = await aiosqlite.connect(":memory:" if memory else str(p), isolation_level=None)
        store = cls(db, p, sync)
        try:
            await store._run(connection.setup, int(busy_timeout_ms), sync, migrations, memory, p)
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
            connection.tighten(p)
            store.checkpointer = Checkpointer(p, store._checkpoint_here)
        return store

    async def close(self) -> None:
        """Close the connection. Its worker thread ends even if this is cancelled on the way (a window quit while
        a channel was still starting): a connection left open keeps a thread that holds the process at exit."""
        if self._closed:
            return
        try:
            if self.checkpointer is not None:
                await self.checkpointer.close()
            try:
                await self._run(lambda conn: conn.execute("PRAGMA optimize"))
            except Exception:  # best effort
                pass
        finally:
            self._closed = True
            await self._db.close()

    async def __aenter__(self) -> Store:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -------------------------------------------------------------- helpers

    async def _run(self, fn: Callable[[sqlite3.Connection, *_Ts], _T], *args: *_Ts) -> _T:
        """Run ``fn(sqlite3_connection, *args)`` on aiosqlite's worker thread."""
        if self._closed:
            raise StoreError("store is closed")
        db = self._db
        try:
            result: _T = await db._execute(  # type: ignore[no-untyped-call]  # aiosqlite's: not annotated
                lambda: fn(db._conn, *args)
            )
            return result
        except sqlite3.Error as exc:  # disk full, read-only file system, a damaged page ...: one clear error
            if integrity.is_damage(exc):
                raise integrity.damaged_on_read(self.path or ":memory:", exc) from exc
            raise StoreError(f"database {self.path or ':memory:'}: {exc}") from exc
        except UnicodeDecodeError as exc:  # a damaged text value, or SQLite's message quoting one
            raise integrity.damaged_on_read(self.path or ":memory:", exc) from None

    async def _write(self, fn: Callable[[sqlite3.Connection, *_Ts], _T], *args: *_Ts) -> _T:
        """Run ``fn(conn, *args)`` inside one ``BEGIN IMMEDIATE ... COMMIT`` transaction."""
        result = await self._run(connection.in_transaction, fn, *args)
        self.commits += 1
        if self.checkpointer is not None:
            self.checkpointer.committed()
        return result

    async def _checkpoint_here(self) -> tuple[int, int, int]:
        """A checkpoint on this store's connection, between two commits (the checkpointer's fallback)."""
        return await self._run(checkpoint_on)

    async def _fetchall(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
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
        return self._history.parsed("kv", lambda t: R.kv_value(t[0]), rows)[0] if rows else default

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

    async def purge_search(self) -> None:
        """Rewrite the search index without what was removed from it (FTS5 ``optimize``): a removal only adds a
        tombstone, and the removed words stay in the index's older segments until they are merged. After a deletion
        whose words must leave the file; its cost grows with the index (a full merge)."""
        await self._write(lambda conn: conn.execute("INSERT INTO message_search (message_search) VALUES ('optimize')"))

    async def scrub(self) -> None:
        """Write the log back into the database file and empty it (``wal_checkpoint(TRUNCATE)``): with
        ``secure_delete`` on, a deleted or overwritten value (a deleted key) then stays in neither file."""
        # no connection of the checkpointer's holds the log meanwhile
        async with self.checkpointer.paused() if self.checkpointer is not None else contextlib.nullcontext():
            await self._run(lambda conn: conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall())

    # -------------------------------------------------------- channel state

    async def channel_ids(self) -> list[str]:
        rows = await self._fetchall("SELECT channel_id FROM channels ORDER BY channel_id")
        return self._history.parsed("channels", R.id_row, rows)

    async def participant_of(self, channel_id: str) -> str:
        """The channel's participant id as the engine state holds it ("" for an unknown channel)."""
        rows = await self._fetchall("SELECT participant_id FROM channels WHERE channel_id = ?", (channel_id,))
        return self._history.parsed("channels", R.id_row, rows)[0] if rows else ""

    async def get_channel_config(self, channel_id: str) -> str | None:
        """The config JSON given to :meth:`save_state`, or None for an unknown channel."""
        rows = await self._fetchall("SELECT config FROM channels WHERE channel_id = ?", (channel_id,))
        return self._history.parsed("channels", lambda t: R.kv_value(t[0]), rows)[0] if rows else None

    async def save_state(self, state: ChannelState, config_json: str) -> None:
        """Write ``state`` in full, replacing whatever the store had for that channel (one transaction)."""
        await self._write(snapshot.save_state, state, config_json)

    async def load_state(self, channel_id: str, *, log_window: int = 0) -> ChannelState | None:
        """Rebuild the channel's :class:`ChannelState` (for ``MessageChannel.restore``), or None.

        ``log_window`` > 0 reads only that many of the newest log rows, and the older ids as a
        :class:`~sdschat.sds.LogArchive` (``ChannelConfig.log_window``). A row that does not hold what sdschat
        writes raises :class:`CorruptRowError`.
        """
        try:
            return await self._run(snapshot.load_state, channel_id, log_window)
        except CorruptRowError as exc:
            raise CorruptRowError(f"database {self.path}: {exc}") from None

    # ---------------------------------------------------------------- apply

    async def apply(
        self,
        channel_id: str,
        ops: Iterable[JournalOp] = (),
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
        meta = batch_meta(last_activity, sync_counter, next_sync_at)
        batch = (channel_id, list(ops), list(messages), list(message_updates), list(events), list(participants), meta)
        await self.apply_batches([batch])

    async def apply_batches(self, batches: Sequence[Batch]) -> None:
        """Apply several :data:`Batch` tuples, in order, in one transaction (the writer's flush)."""
        if not batches:
            return
        await self._write(_apply_and_index, batches)

    async def compact_events(self, keep: int) -> int:
        """Fold the events older than the newest ``keep`` rows into ``message_events`` (migrations/0003) and
        delete them; returns the number of event rows removed. ``keep <= 0`` keeps every row (no-op)."""
        if keep <= 0:
            return 0
        return await self._write(compaction.compact, int(keep))

    # --------------------------------------------------------------- reads

    def iter_messages(self, channel_id: str | None = None, *, chunk: int = 500) -> AsyncIterator[MessageRow]:
        """Application messages ordered by (lamport_timestamp, message_id), fetched in chunks."""
        return self._history.iter_messages(channel_id, chunk=chunk)

    async def get_message(self, channel_id: str, message_id: str) -> MessageRow | None:
        return await self._history.get_message(channel_id, message_id)

    async def actions_on(self, channel_id: str, target_ids: Sequence[str]) -> list[ActionRow]:
        """The edits, deletions and reactions naming any of ``target_ids``, in log order (migrations/0005)."""
        return await self._history.actions_on(channel_id, target_ids)

    async def pending_actions(self, channel_id: str) -> list[ActionRow]:
        """The edits, deletions and reactions still waiting for their target, in log order."""
        return await self._history.pending_actions(channel_id)

    async def page_messages(
        self, channel_id: str, before: tuple[int, str] | None, limit: int, *, after: tuple[int, str] | None = None
    ) -> list[MessageRow]:
        """The newest ``limit`` messages before the ``(lamport_timestamp, message_id)`` key ``before`` (or the
        oldest ``limit`` after ``after``), in log order."""
        return await self._history.page_messages(channel_id, before, limit, after=after)

    async def search(
        self, channel_id: str, query: str, *, limit: int = 50, before: int | None = None
    ) -> list[tuple[int, MessageRow]]:
        """Messages whose text matches ``query`` (words as a person types them: :mod:`.search`), newest stored
        first, as ``(rowid, row)``; ``before`` a rowid: the next page. :class:`~.search.SearchQueryError`
        (one line, with a hint) for a query that cannot be run."""
        match = fts_query(query)
        await self._write(index_pending)  # the lines stored since the last batch are found too
        try:
            return await self._history.search(channel_id, match, limit, before)
        except StoreError as exc:
            bad = run_error(exc.__cause__) if isinstance(exc.__cause__, sqlite3.Error) else None
            if bad is not None:
                raise bad from None
            raise

    async def messages_not_in(self, channel_id: str, states: Sequence[str]) -> list[MessageRow]:
        """The messages whose state is none of ``states``, in log order."""
        return await self._history.messages_not_in(channel_id, states)

    async def message_count(self, channel_id: str | None = None) -> int:
        return await self._history.message_count(channel_id)

    async def unread_count(
        self, channel_id: str, since_ms: int, me: str, skip_prefixes: Sequence[bytes] = (), but: Sequence[str] = ()
    ) -> int:
        """Messages of others received after ``since_ms`` (wall-clock ms), the ids ``but`` aside."""
        return await self._history.unread_count(channel_id, since_ms, me, skip_prefixes, but)

    def iter_events(self, *, after_seq: int = 0, kind: str | None = None, chunk: int = 1000) -> AsyncIterator[EventRow]:
        """The event rows held in full (the recent window once compacted), in ``seq`` order, from ``after_seq``
        on (optionally of one ``kind``)."""
        return self._history.iter_events(after_seq=after_seq, kind=kind, chunk=chunk)

    def iter_event_history(self, *, chunk: int = 1000) -> AsyncIterator[EventRow]:
        """Every event the file still tells of: the compacted first times (``seq`` < 0) then the full rows, in
        ``seq`` order (the view ``event_history``, what ``report`` and ``export --events`` read)."""
        return self._stream(f"SELECT {EVENT_COLS} FROM event_history ORDER BY seq", "event_history", R.event_row, chunk)

    async def _stream(self, sql: str, table: str, parse: Callable[[Row], _T], chunk: int) -> AsyncIterator[_T]:
        """Rows of one query, parsed, fetched ``chunk`` at a time from one cursor (one pass, one sort)."""
        cur = await self._run(lambda conn: conn.execute(sql))
        try:
            while True:
                rows = await self._run(lambda conn: cur.fetchmany(chunk))
                for row in self._history.parsed(table, parse, rows):
                    yield row
                if len(rows) < chunk:
                    return
        finally:
            await self._run(lambda conn: cur.close())

    async def participants(self) -> list[ParticipantRow]:
        return await self._history.participants()

    async def events_about(self, channel_id: str, message_ids: Sequence[str], *, named: bool = True) -> list[EventRow]:
        """Every event of ``message_ids`` still told of (and, with ``named``, the missing/lost rows naming them),
        oldest first."""
        return await self._history.events_about(channel_id, message_ids, named=named)

    async def missing_events(self, channel_id: str) -> list[EventRow]:
        """The channel's ``missing`` rows (every gap noticed), oldest first."""
        return await self._history.missing_events(channel_id)

    async def engine_rows(self, channel_id: str, message_id: str) -> dict[str, Row]:
        """What the engine's tables hold now about one message (see :meth:`.queries.History.engine_rows`)."""
        return await self._history.engine_rows(channel_id, message_id)

    async def member_figures(self, channel_id: str) -> dict[str, dict[str, float]]:
        """Per participant: messages, first copies received and how many came indirectly, acks, repairs served."""
        return await self._history.member_figures(channel_id)

    async def ids_with_prefix(self, channel_id: str, prefix: str, limit: int = 5) -> list[str]:
        """Message ids of the channel that start with ``prefix`` (at most ``limit``)."""
        return await self._history.ids_with_prefix(channel_id, prefix, limit)

    async def schema_version(self) -> int:
        return await self._run(migrate.current_version)

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
