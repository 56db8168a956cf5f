"""``Checkpointer``: the write-ahead log copied into the database file off the commit path.

SQLite's automatic checkpoint runs inside the commit that takes the log past
1,000 pages: that commit, and the user's message waiting on it to be durable
before it is published, takes milliseconds longer (the sender's flush at 50
msg/s over ten channels: p99 6.3-6.4 ms with it, 2.3-2.5 ms without,
``bench/window_channels.py``). A node's store turns it off
(``wal_autocheckpoint = 0``, :func:`sdschat.store.connection.setup`) and
checkpoints from a connection of its own on a worker thread instead: a
``PASSIVE`` checkpoint copies what the log holds while the writer goes on
committing (SQLite lets one checkpointer and one writer work at once in WAL
mode), and the writer starts the log over from its beginning at the next
commit after a checkpoint that copied everything.

When: after every :attr:`Checkpointer.every_commits` commits, or once the
``-wal`` file has grown :attr:`Checkpointer.every_bytes` past its size at the
last checkpoint (a few large commits, a history import; the size is read every
:data:`SIZE_EVERY` commits), one at a time.

Under commits without pause a checkpoint from the side may never catch the
log whole (a commit lands while it copies), and the log would never start
over. So when a checkpoint finds :attr:`Checkpointer.limit_frames` frames or
more in the log, the next one runs on the store's own connection between two
commits (``inline``): it copies everything, and the log starts over at the
next commit (a commit may wait for it, as it waited for SQLite's own).

A checkpoint that fails loses nothing: the commits stay in the log, the next
checkpoint (or SQLite's own, when the last connection closes) copies them;
the failure is counted and logged once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

__all__ = ["Checkpointer", "checkpoint_on"]

log = logging.getLogger("sdschat.store")


def checkpoint_on(conn: sqlite3.Connection) -> tuple[int, int, int]:
    """A ``PASSIVE`` checkpoint on ``conn`` (either connection): (busy, frames in the log, frames copied)."""
    busy, frames, copied = conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
    return int(busy), int(frames), int(copied)


def _checkpoint(path: Path) -> tuple[int, int, int]:
    """A checkpoint on a connection of its own (run on a worker thread). ``mode=rw``: a database removed
    meanwhile is not created again (with the process's umask, not 0600)."""
    uri = f"{Path(path).resolve().as_uri()}?mode=rw"
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    try:
        return checkpoint_on(conn)
    finally:
        conn.close()


#: the ``-wal`` file's size is read every this many commits (a stat a commit costs more than the rest of the
#: bookkeeping): a log that grew past :attr:`Checkpointer.every_bytes` is checkpointed at most this many commits
#: later
SIZE_EVERY = 4


class Checkpointer:
    """Checkpoints the database at ``path`` on a worker thread as commits come (see the module)."""

    def __init__(
        self,
        path: Path,
        inline: Callable[[], Awaitable[tuple[int, int, int]]],
        *,
        every_commits: int = 200,
        every_bytes: int = 4 << 20,
        limit_frames: int = 4096,
    ) -> None:
        self.path = Path(path)
        #: a checkpoint on the store's own connection (see the module)
        self.inline = inline
        self.every_commits = max(1, every_commits)
        self.every_bytes = max(1, every_bytes)
        self.limit_frames = max(1, limit_frames)
        self._since = 0  # commits since the last checkpoint started
        self._mark = 0  # the -wal file's size when the last checkpoint started
        self._task: asyncio.Task[None] | None = None
        self._paused = 0
        #: checkpoints run (of them on the store's own connection), and failed
        self.runs = 0
        self.inline_runs = 0
        self.failures = 0
        #: the last checkpoint's (busy, frames in the log, frames copied)
        self.last: tuple[int, int, int] | None = None

    def committed(self) -> None:
        """A commit was made (call on the event loop): start a checkpoint if one is due and none is running."""
        self._since += 1
        if self._task is not None or self._paused:
            return
        if self._since % SIZE_EVERY and self._since < self.every_commits:
            return  # (the log's size is read every few commits: a busy channel commits ~20 times a second)
        size = wal_size(self.path)
        if self._since < self.every_commits and size < self._mark + self.every_bytes:
            return
        self._since, self._mark = 0, size
        self._task = asyncio.get_running_loop().create_task(self._run(), name="sdschat-store-checkpoint")

    async def _run(self) -> None:
        try:
            if self.last is not None and self.last[1] >= self.limit_frames:
                self.last = await self.inline()
                self.inline_runs += 1
            else:
                self.last = await asyncio.to_thread(_checkpoint, self.path)
            self.runs += 1
        except Exception as exc:  # sqlite3.Error, OSError, the store's StoreError: nothing is lost
            self.failures += 1
            if self.failures == 1:
                log.warning("checkpoint of %s failed (the log keeps the commits): %s", self.path.name, exc)
        finally:
            self._task = None

    @contextlib.asynccontextmanager
    async def paused(self) -> AsyncIterator[None]:
        """No checkpoint from the side in this block (the store's own ``TRUNCATE`` needs the log to itself)."""
        self._paused += 1
        try:
            await self.close()
            yield
        finally:
            self._paused -= 1

    async def close(self) -> None:
        """Wait for a checkpoint under way (before the store's connection closes)."""
        task = self._task
        if task is not None:
            await asyncio.shield(task)


def wal_size(path: Path) -> int:
    """The ``-wal`` file's size in bytes (0 when there is none)."""
    try:
        return os.stat(f"{path}-wal").st_size
    except OSError:
        return 0
