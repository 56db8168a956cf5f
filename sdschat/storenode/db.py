"""The store node's own SQLite database: envelopes as they crossed the broker, nothing else.

One table, ``envelopes(seq, hash, topic, arrived_ms, size, data)``: ``seq`` is the arrival order (and
the page cursor), ``hash`` the SHA-256 of the envelope bytes (unique), ``topic`` the broker topic
(``sdschat/<32 hex>``, which names no channel), ``arrived_ms`` the store's wall clock at arrival. The
store never has a key, so nothing in here is readable without one.

File mode 0600, WAL, ``synchronous=NORMAL`` (a committed batch survives a crash of the process;
``FULL`` also survives power loss). All SQLite work runs on one dedicated thread.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar, TypeVarTuple

_T = TypeVar("_T")
_Ts = TypeVarTuple("_Ts")

__all__ = ["StoreDB"]

SCHEMA_VERSION = 1
_DDL = """
CREATE TABLE IF NOT EXISTS envelopes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    hash BLOB NOT NULL UNIQUE,
    topic TEXT NOT NULL,
    arrived_ms INTEGER NOT NULL,
    size INTEGER NOT NULL,
    data BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS envelopes_topic_arrived ON envelopes (topic, arrived_ms, seq);
CREATE INDEX IF NOT EXISTS envelopes_arrived ON envelopes (arrived_ms);
CREATE INDEX IF NOT EXISTS envelopes_topic_seq ON envelopes (topic, seq);
"""


def _private_file(path: Path) -> None:
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return
    try:
        os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


class StoreDB:
    """Open with ``await StoreDB.open(path)``; every method is a coroutine run on the DB thread."""

    def __init__(self, path: Path, synchronous: str = "NORMAL") -> None:
        self.path = path
        self._sync = synchronous
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sdschat-storedb")
        self._conn: sqlite3.Connection | None = None
        #: total envelope bytes held (what --max-size caps)
        self.total_bytes = 0
        self.count = 0

    @classmethod
    async def open(cls, path: str | os.PathLike[str], *, synchronous: str = "NORMAL") -> StoreDB:
        db = cls(Path(path), synchronous.upper())
        try:
            await db._call(db._open)
        except BaseException:
            db._pool.shutdown(wait=False)
            raise
        return db

    async def _call(self, fn: Callable[[*_Ts], _T], *args: *_Ts) -> _T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    def _db(self) -> sqlite3.Connection:
        """The open connection; a method called after :meth:`close` fails here rather than on ``None``."""
        conn = self._conn
        if conn is None:
            raise sqlite3.ProgrammingError("the store database is closed")
        return conn

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        _private_file(self.path)
        conn = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
        try:
            conn.execute("PRAGMA busy_timeout = 5000")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise sqlite3.DatabaseError(f"store database schema {version} is newer than this sdschat")
            if version == 0:
                conn.execute("PRAGMA auto_vacuum = INCREMENTAL")  # only effective before the first table
            if conn.execute("PRAGMA journal_mode = WAL").fetchone()[0].lower() != "wal":
                raise sqlite3.DatabaseError("cannot switch the store database to WAL")
            conn.execute(f"PRAGMA synchronous = {self._sync}")
            conn.executescript("BEGIN;" + _DDL + f"PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;")
            self.count, self.total_bytes = conn.execute(
                "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM envelopes"
            ).fetchone()
        except BaseException:
            conn.close()
            raise
        for suffix in ("", "-wal", "-shm"):
            try:
                os.chmod(f"{self.path}{suffix}", 0o600)
            except FileNotFoundError:
                pass
        self._conn = conn

    async def close(self) -> None:
        if self._conn is not None:
            await self._call(self._close)
        self._pool.shutdown(wait=True)

    def _close(self) -> None:
        self._db().close()
        self._conn = None

    # ---------------------------------------------------------------- writes

    async def add(self, batch: list[tuple[str, bytes, int]]) -> int:
        """Commit ``(topic, envelope, arrived_ms)`` rows in one transaction; returns how many were new."""
        return await self._call(self._add, batch) if batch else 0

    def _add(self, batch: list[tuple[str, bytes, int]]) -> int:
        c = self._db()
        new = added = 0
        c.execute("BEGIN IMMEDIATE")
        try:
            for topic, data, at in batch:
                cur = c.execute(
                    "INSERT OR IGNORE INTO envelopes (hash, topic, arrived_ms, size, data) VALUES (?, ?, ?, ?, ?)",
                    (hashlib.sha256(data).digest(), topic, at, len(data), data),
                )
                if cur.rowcount > 0:
                    new += 1
                    added += len(data)
            c.execute("COMMIT")
        except BaseException:
            c.execute("ROLLBACK")
            raise
        self.count += new
        self.total_bytes += added
        return new

    async def prune(self, *, older_than_ms: int | None = None, max_bytes: int | None = None) -> int:
        """Delete envelopes that arrived before ``older_than_ms``, then the oldest until at most
        ``max_bytes`` remain. Returns how many were deleted."""
        return await self._call(self._prune, older_than_ms, max_bytes)

    def _prune(self, older_than_ms: int | None, max_bytes: int | None) -> int:
        c = self._db()
        deleted = freed = 0
        c.execute("BEGIN IMMEDIATE")
        try:
            if older_than_ms is not None:
                n, b = c.execute(
                    "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM envelopes WHERE arrived_ms < ?", (older_than_ms,)
                ).fetchone()
                if n:
                    c.execute("DELETE FROM envelopes WHERE arrived_ms < ?", (older_than_ms,))
                    deleted += n
                    freed += b
            if max_bytes is not None and self.total_bytes - freed > max_bytes:
                excess = self.total_bytes - freed - max_bytes
                upto, gone, n = None, 0, 0
                for seq, size in c.execute("SELECT seq, size FROM envelopes ORDER BY seq"):
                    upto, gone, n = seq, gone + size, n + 1
                    if gone >= excess:
                        break
                if upto is not None:
                    c.execute("DELETE FROM envelopes WHERE seq <= ?", (upto,))
                    deleted += n
                    freed += gone
            c.execute("COMMIT")
        except BaseException:
            c.execute("ROLLBACK")
            raise
        self.count -= deleted
        self.total_bytes -= freed
        if deleted:
            c.execute("PRAGMA incremental_vacuum")
        return deleted

    # ----------------------------------------------------------------- reads

    async def by_hashes(self, topic: str, hashes: list[bytes]) -> list[bytes]:
        return await self._call(self._by_hashes, topic, hashes)

    def _by_hashes(self, topic: str, hashes: list[bytes]) -> list[bytes]:
        if not hashes:
            return []
        marks = ",".join("?" * len(hashes))
        rows = (
            self._db()
            .execute(
                f"SELECT data FROM envelopes WHERE +topic = ? AND hash IN ({marks}) ORDER BY seq", (topic, *hashes)
            )
            .fetchall()
        )
        return [r[0] for r in rows]

    async def since(
        self, topic: str, since_ms: int, cursor: int, limit: int, max_bytes: int
    ) -> tuple[list[bytes], int]:
        """A page of ``topic``'s envelopes that arrived at or after ``since_ms``, after ``cursor``, in
        arrival order; returns (envelopes, next_cursor or 0 when there is nothing more)."""
        return await self._call(self._since, topic, since_ms, cursor, limit, max_bytes)

    def _since(self, topic: str, since_ms: int, cursor: int, limit: int, max_bytes: int) -> tuple[list[bytes], int]:
        c = self._db()
        if cursor == 0:
            first = c.execute(
                "SELECT MIN(seq) FROM envelopes WHERE topic = ? AND arrived_ms >= ?", (topic, since_ms)
            ).fetchone()[0]
            if first is None:
                return [], 0
            cursor = first - 1
        out: list[bytes] = []
        size = 0
        last = cursor
        more = False
        # walk the topic's rows in arrival order (never sort a range of blobs)
        for seq, data in c.execute(
            "SELECT seq, data FROM envelopes INDEXED BY envelopes_topic_seq "
            "WHERE topic = ? AND seq > ? AND arrived_ms >= ? ORDER BY seq LIMIT ?",
            (topic, cursor, since_ms, limit + 1),
        ):
            if len(out) >= limit or (out and size + len(data) > max_bytes):
                more = True
                break
            out.append(data)
            size += len(data)
            last = seq
        return out, (last if more else 0)

    async def stats(self) -> dict[str, int]:
        return {"envelopes": self.count, "bytes": self.total_bytes}
