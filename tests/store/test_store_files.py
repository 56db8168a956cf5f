"""The database file and its settings: mode 0600 (also -wal/-shm), WAL, synchronous, foreign keys."""

import asyncio
import os
import sqlite3
import stat

import pytest
from run_until import run

from sdschat.sds import ChannelConfig, MessageChannel
from sdschat.store import Store


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize("umask", [0o022, 0o000])
def test_db_wal_and_shm_are_0600(tmp_path, umask):
    db = tmp_path / "node.db"
    old = os.umask(umask)  # even a permissive umask must not widen the files
    try:

        async def go():
            store = await Store.open(db)
            try:
                ch = MessageChannel("c", "p", ChannelConfig(), 1)
                await store.save_state(ch.snapshot(), "{}")
                await store.kv_set("k", "v")
                seen = {}
                for suffix in ("", "-wal", "-shm"):
                    path = f"{db}{suffix}"
                    assert os.path.exists(path), f"{suffix or 'db'} should exist while open in WAL mode"
                    seen[suffix] = mode(path)
                return seen
            finally:
                await store.close()

        seen = run(go())
    finally:
        os.umask(old)
    assert seen == {"": 0o600, "-wal": 0o600, "-shm": 0o600}
    assert mode(db) == 0o600


def test_existing_loose_files_are_tightened(tmp_path):
    db = tmp_path / "node.db"
    run(_open_close(db))
    os.chmod(db, 0o644)
    # leftovers of a crashed run created under a loose umask
    for suffix in ("-wal", "-shm"):
        p = f"{db}{suffix}"
        if not os.path.exists(p):
            open(p, "wb").close()
        os.chmod(p, 0o644)

    async def go():
        store = await Store.open(db)
        try:
            return {s: mode(f"{db}{s}") for s in ("", "-wal", "-shm") if os.path.exists(f"{db}{s}")}
        finally:
            await store.close()

    assert run(go()) == {"": 0o600, "-wal": 0o600, "-shm": 0o600}


async def _open_close(path, **kw):
    store = await Store.open(path, **kw)
    await store.close()


def test_wal_and_pragmas(tmp_path):
    db = tmp_path / "node.db"

    async def go(sync):
        store = await Store.open(db, synchronous=sync)
        try:
            return (
                await store.pragma("journal_mode"),
                await store.pragma("synchronous"),
                await store.pragma("foreign_keys"),
                await store.pragma("busy_timeout"),
            )
        finally:
            await store.close()

    assert run(go("NORMAL")) == ("wal", 1, 1, 5000)
    assert run(go("full")) == ("wal", 2, 1, 5000)
    # WAL is persistent in the file
    assert sqlite3.connect(db).execute("PRAGMA journal_mode").fetchone() == ("wal",)
    with pytest.raises(ValueError):
        run(go("SOMETIMES"))


def test_memory_store_works():
    async def go():
        store = await Store.open(":memory:")
        try:
            await store.kv_set("a", "b")
            return await store.kv_get("a"), await store.integrity_check()
        finally:
            await store.close()

    assert run(go()) == ("b", "ok")


def test_closed_store_refuses(tmp_path):
    from sdschat.store import StoreError

    async def go():
        store = await Store.open(tmp_path / "n.db")
        await store.close()
        await store.close()  # idempotent
        with pytest.raises(StoreError, match="closed"):
            await store.kv_get("x")

    run(go())


def test_create_false_refuses_a_missing_file(tmp_path):
    from sdschat.store import StoreError

    with pytest.raises(StoreError, match="no database at"):
        run(_open_close(tmp_path / "missing.db", create=False))
    assert not (tmp_path / "missing.db").exists()
    run(_open_close(tmp_path / "there.db"))
    run(_open_close(tmp_path / "there.db", create=False))


async def _write_kv(store, n: int, size: int = 8000, first: int = 0):
    for i in range(first, first + n):
        await store.kv_set(f"k{i}", "x" * size)


def _kv_rows(path) -> int:
    """The rows _write_kv wrote that the database at ``path`` holds (opened without the store)."""
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT count(*) FROM kv WHERE key LIKE 'k%'").fetchone()[0]
    finally:
        conn.close()


def test_no_commit_checkpoints_and_the_checkpointer_keeps_the_log_bounded(tmp_path):
    # SQLite's own checkpoint ran inside the commit that took the log past 1,000 pages (4-25 ms more for a
    # message waiting to be durable); the store turns it off and checkpoints from a thread of its own
    from sdschat.store.checkpoint import Checkpointer, wal_size

    async def go(checkpointer: bool):
        db = tmp_path / f"{checkpointer}.db"
        async with await Store.open(db) as store:
            assert await store.pragma("wal_autocheckpoint") == 0
            if checkpointer:
                store.checkpointer = Checkpointer(
                    db, store._checkpoint_here, every_commits=50, every_bytes=256 << 10, limit_frames=256
                )
            else:
                store.checkpointer = None
            await _write_kv(store, 600)  # ~7 MB in commits without a pause
            if checkpointer:
                await store.checkpointer.close()
            cp = store.checkpointer
            return wal_size(db), cp and (cp.runs, cp.inline_runs, cp.failures)

    unbounded, none = run(go(False))
    bounded, (runs, inline, failures) = run(go(True))
    assert none is None and unbounded > 10 << 20  # the log holds every commit: nothing copied it
    assert bounded < 5 << 20, (bounded, runs, inline)
    assert runs >= 5 and failures == 0
    # commits without a pause: a checkpoint from the side rarely catches the log whole; the inline one does
    assert inline >= 1
    # every commit is in the file after the close (SQLite's last checkpoint) and reopening
    for name in ("True.db", "False.db"):
        assert _kv_rows(tmp_path / name) == 600


def test_a_checkpoint_from_the_side_copies_the_log_while_the_store_stays_open(tmp_path):
    from sdschat.store.checkpoint import wal_size

    async def go():
        db = tmp_path / "n.db"
        async with await Store.open(db) as store:
            cp = store.checkpointer
            assert cp is not None and cp.every_commits == 200
            await _write_kv(store, 199, 100)
            assert cp.runs == 0
            await _write_kv(store, 1, 100, 199)  # the 200th commit starts one, on a worker thread
            await cp.close()
            busy, frames, copied = cp.last
            assert (cp.runs, cp.inline_runs, cp.failures) == (1, 0, 0)
            assert busy == 0 and frames > 0 and copied == frames  # nothing was committing meanwhile: all copied
            # the database file alone (read as a copy, without the log) already holds the rows
            copy = tmp_path / "copy.db"
            copy.write_bytes(db.read_bytes())
            assert _kv_rows(copy) == 200
            return wal_size(db)

    assert run(go()) > 0  # the log file is still there: the checkpoint did not need the store closed


def test_scrub_truncates_the_log_with_no_checkpoint_from_the_side_meanwhile(tmp_path):
    from sdschat.store.checkpoint import wal_size

    async def go():
        db = tmp_path / "n.db"
        async with await Store.open(db) as store:
            cp = store.checkpointer
            await _write_kv(store, 200, 100)  # the 200th commit starts a checkpoint from the side
            await store.scrub()  # waits for it, then truncates the log on the store's connection
            assert (cp.runs, cp.failures) == (1, 0) and wal_size(db) == 0
            async with cp.paused():
                await _write_kv(store, 250, 100, 200)  # due, but paused: none starts
                assert cp.runs == 1 and cp._task is None
            await _write_kv(store, 1, 100, 450)  # the first commit after the pause starts the one that was due
            await cp.close()
            assert cp.runs == 2

    run(go())


def test_a_checkpoint_from_the_side_never_creates_a_database_and_takes_any_file_name(tmp_path):
    from sdschat.store.checkpoint import _checkpoint

    gone = tmp_path / "gone.db"
    with pytest.raises(sqlite3.OperationalError):
        _checkpoint(gone)  # a removed database is not made again (it would get the umask's mode, not 0600)
    assert not gone.exists()

    async def go():
        db = tmp_path / "a b#c?d%20.db"  # characters a file: URI must escape
        async with await Store.open(db) as store:
            await store.kv_set("k", "v")
            return _checkpoint(db)

    busy, frames, copied = run(go())
    assert busy == 0 and frames > 0 and copied == frames


def test_a_close_cancelled_on_the_way_still_ends_the_connection_thread(tmp_path):
    """A window quit while a channel was still starting cancels its store's close: the connection's worker thread
    (not a daemon) must end anyway, or it holds the process at exit for good."""
    import contextlib

    async def go():
        store = await Store.open(tmp_path / "node.db")
        thread = store._db._thread
        closing = asyncio.ensure_future(store.close())
        await asyncio.sleep(0)  # close() is under way: waiting for its last statement on the worker thread
        closing.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await closing
        for _ in range(200):
            if not thread.is_alive():
                break
            await asyncio.sleep(0.01)
        alive = thread.is_alive()
        if alive:  # (the failure this test is for: end the thread here, so the test fails instead of hanging)
            store._db.stop()
        return alive

    assert run(go()) is False
