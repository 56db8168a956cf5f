"""The store node's database: paging, retention and size caps, restart durability, file mode."""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat

from sdschat.storenode import StoreDB
from sdschat.storenode import protocol as P

T1 = "sdschat/" + "1" * 32
T2 = "sdschat/" + "2" * 32


def env(i: int, size: int = 100) -> bytes:
    return (f"env-{i}-".encode() + os.urandom(8)).ljust(size, b"x")


def test_pages_by_time_and_cursor_with_count_and_byte_caps(tmp_path):
    async def main():
        db = await StoreDB.open(tmp_path / "s.db")
        try:
            envs = [env(i) for i in range(1200)]
            await db.add([(T1, e, 1000 + i) for i, e in enumerate(envs)])
            await db.add([(T2, env(-1), 1500)])
            assert await db.add([(T1, envs[0], 5000)]) == 0  # same bytes: stored once
            got, cursor = [], 0
            pages = 0
            while True:
                page, cursor = await db.since(T1, 1100, cursor, P.MAX_PAGE, P.MAX_REPLY_BYTES)
                got += page
                pages += 1
                if not cursor:
                    break
            assert got == envs[100:] and pages == 3
            page, cursor = await db.since(T1, 0, 0, 500, 1000)  # byte cap: 10 envelopes of 100 bytes
            assert len(page) == 10 and cursor
            assert await db.since(T1, 10**12, 0, 500, 10**9) == ([], 0)
            h = [hashlib.sha256(envs[5]).digest(), hashlib.sha256(envs[7]).digest(), b"\0" * 32]
            assert await db.by_hashes(T1, h) == [envs[5], envs[7]]
            assert await db.by_hashes(T2, h) == []  # another topic's hash is not served
        finally:
            await db.close()

    asyncio.run(main())


def test_retention_and_size_cap_delete_oldest(tmp_path):
    async def main():
        db = await StoreDB.open(tmp_path / "s.db")
        try:
            await db.add([(T1, env(i, 1000), 1000 + i) for i in range(100)])
            assert (db.count, db.total_bytes) == (100, 100_000)
            assert await db.prune(older_than_ms=1010) == 10
            page, _ = await db.since(T1, 0, 0, 500, 10**9)
            assert len(page) == 90 and page[0].startswith(b"env-10-")
            assert await db.prune(max_bytes=50_000) == 40
            assert db.total_bytes == 50_000
            page, _ = await db.since(T1, 0, 0, 500, 10**9)
            assert len(page) == 50 and page[0].startswith(b"env-50-")
        finally:
            await db.close()

    asyncio.run(main())


def test_restart_keeps_everything_committed_and_file_is_private(tmp_path):
    async def main():
        path = tmp_path / "s.db"
        db = await StoreDB.open(path)
        envs = [env(i) for i in range(50)]
        await db.add([(T1, e, 1000 + i) for i, e in enumerate(envs)])
        await db.close()
        db = await StoreDB.open(path)
        try:
            assert db.count == 50
            page, _ = await db.since(T1, 0, 0, 500, 10**9)
            assert page == envs
        finally:
            await db.close()
        for suffix in ("", "-wal", "-shm"):
            f = tmp_path / f"s.db{suffix}"
            if f.exists():
                assert stat.S_IMODE(f.stat().st_mode) == 0o600

    asyncio.run(main())


def test_protocol_round_trips_and_rejects():
    r = P.Reply("abc", [b"one", b"", b"three" * 100], 42, "")
    assert P.decode_reply(P.encode_reply(r)) == r
    req = P.Request("1", P.REPLY_PREFIX + "x1", T1, hashes=[b"\1" * 32])
    assert P.parse_request(P.encode_request(req)).hashes == [b"\1" * 32]
    paged = P.parse_request(P.encode_request(P.Request("2", P.REPLY_PREFIX + "x1", T1, since_ms=5, limit=10**9)))
    assert paged.limit == P.MAX_PAGE and paged.since_ms == 5
    for bad in (b"\xff", b"[]", b"{}", b'{"reply_to": "sdschat/' + b"1" * 32 + b'", "id": "1"}'):
        try:
            P.parse_request(bad)
        except P.RequestError as exc:
            assert exc.reply_to is None
        else:
            raise AssertionError(bad)
