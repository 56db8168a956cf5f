"""The typed edges of the store node: parsed requests carry whole values, a closed database says so."""

from __future__ import annotations

import asyncio
import json
import sqlite3

import pytest

from sdschat.storenode import StoreDB
from sdschat.storenode import protocol as P
from sdschat.storenode.service import StoreNode

TOPIC = "sdschat/" + "a" * 32
REPLY = P.REPLY_PREFIX + "tok"


def test_a_request_by_time_gets_an_int_cursor_and_limit_when_it_leaves_them_out():
    req = P.parse_request(json.dumps({"id": "r1", "reply_to": REPLY, "topic": TOPIC, "since_ms": 5}).encode())
    assert (req.reply_to, req.topic, req.since_ms, req.cursor, req.limit) == (REPLY, TOPIC, 5, 0, P.MAX_PAGE)
    req = P.parse_request(
        json.dumps(
            {"id": "r2", "reply_to": REPLY, "topic": TOPIC, "since_ms": 0, "cursor": 7, "limit": 10_000}
        ).encode()
    )
    assert (req.cursor, req.limit) == (7, P.MAX_PAGE)


def test_a_closed_database_refuses_work_with_a_reason(tmp_path):
    async def main():
        db = await StoreDB.open(tmp_path / "s.db")
        db._close()  # (the connection only: the thread stays, so the call below reaches the database)
        with pytest.raises(sqlite3.ProgrammingError, match="closed"):
            await db.since(TOPIC, 0, 0, 10, 1000)
        await db.close()

    asyncio.run(main())


def test_a_store_node_that_is_not_running_serves_nothing(tmp_path):
    async def main():
        node = StoreNode("mqtt://127.0.0.1:1", tmp_path / "s.db")
        with pytest.raises(RuntimeError, match="not running"):
            await node._prune()

    asyncio.run(main())
