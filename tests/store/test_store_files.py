"""The database file and its settings: mode 0600 (also -wal/-shm), WAL, synchronous, foreign keys."""

import asyncio
import os
import sqlite3
import stat

import pytest

from sdschat.sds import ChannelConfig, MessageChannel
from sdschat.store import Store


def run(coro):
    return asyncio.run(coro)


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
