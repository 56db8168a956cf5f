"""A store node on a real broker: stores what crosses it, answers bounded, survives restarts."""

from __future__ import annotations

import hashlib
import os

import pytest
from run_until import run, until

from sdschat.storenode import StoreNode
from sdschat.storenode import protocol as P
from sdschat.transport import MqttTransport

pytestmark = pytest.mark.timeout(60)

TOPIC = "sdschat/" + "ab" * 16


def test_stores_by_hash_and_time_and_answers_bad_requests_bounded(store_mosquitto, raw_client, tmp_path):
    async def main():
        store = await StoreNode.start(store_mosquitto.url, tmp_path / "store.db")
        pub = MqttTransport(store_mosquitto.url)
        await pub.start()
        try:
            envs = [os.urandom(200) for _ in range(30)]
            for e in envs:
                await pub.publish(TOPIC, e)
            await pub.publish("sdschat/not-a-channel", b"x")  # not a channel topic: ignored
            await until(lambda: store.db.count == 30, 5, "the store holding 30")
            async with raw_client(store_mosquitto.url) as c:
                base = {"v": 1, "id": "r1", "reply_to": c.reply_to, "topic": TOPIC}
                r = await c.send({**base, "hashes": [hashlib.sha256(envs[3]).hexdigest(), "0" * 64]})
                assert (r.id, r.error, r.envelopes, r.next_cursor) == ("r1", "", [envs[3]], 0)
                r = await c.send({**base, "since_ms": 0, "limit": 10})
                assert r.envelopes == envs[:10] and r.next_cursor
                r = await c.send({**base, "since_ms": 0, "cursor": r.next_cursor, "limit": 10**12})
                assert r.envelopes == envs[10:] and r.next_cursor == 0
                # unknown hashes: an empty answer, no error
                r = await c.send({**base, "hashes": ["1" * 64] * 3})
                assert r.envelopes == [] and r.error == ""
                # bounded errors
                r = await c.send({**base, "hashes": ["1" * 64] * 101})
                assert r.error.startswith("too many hashes") and r.envelopes == []
                for bad, err in (
                    ({"hashes": ["xyz"]}, "bad hash"),
                    ({"since_ms": -1}, "bad since_ms"),
                    ({}, "need hashes or since_ms"),
                    ({"topic": "sdschat/#", "since_ms": 0}, "bad topic"),
                    ({"since_ms": 0, "hashes": []}, "hashes and since_ms are exclusive"),
                    ({"since_ms": 0, "cursor": "x"}, "bad cursor"),
                    ({"since_ms": 0, "limit": 0}, "bad limit"),
                ):
                    r = await c.send({**base, **bad})
                    assert r is not None and r.error.startswith(err), (bad, r)
                    assert r.envelopes == []
                # no usable reply_to / not JSON / too big: dropped unanswered, the store keeps serving
                assert await c.send(b"\x00garbage", timeout=0.3) is None
                assert await c.send({**base, "reply_to": TOPIC, "since_ms": 0}, timeout=0.3) is None
                assert await c.send(b"{" + b" " * (P.MAX_REQUEST_BYTES + 10) + b"}", timeout=0.3) is None
                r = await c.send({**base, "id": "r2", "hashes": [hashlib.sha256(envs[0]).hexdigest()]})
                assert r.id == "r2" and r.envelopes == [envs[0]]
            assert store.counters["bad_requests"] >= 10
        finally:
            await pub.stop()
            await store.stop()

    run(main(), 50)


def test_restart_loses_nothing_committed_and_size_cap_applies(store_mosquitto, raw_client, tmp_path):
    async def main():
        db = tmp_path / "store.db"
        store = await StoreNode.start(store_mosquitto.url, db, max_bytes=20 * 1000)
        pub = MqttTransport(store_mosquitto.url)
        await pub.start()
        try:
            envs = [os.urandom(1000) for _ in range(30)]
            for e in envs:
                await pub.publish(TOPIC, e)
            await until(lambda: store.counters["stored"] == 30 and store.db.count == 20, 5, "30 stored, 20 kept")
            assert store.db.count == 20 and store.db.total_bytes <= 20_000  # oldest deleted
            await store.stop()
            store = await StoreNode.start(store_mosquitto.url, db, max_bytes=20 * 1000)
            assert store.db.count == 20
            async with raw_client(store_mosquitto.url) as c:
                r = await c.send({"id": "1", "reply_to": c.reply_to, "topic": TOPIC, "since_ms": 0})
                assert r.envelopes == envs[10:]
        finally:
            await pub.stop()
            await store.stop()

    run(main(), 50)


def test_retention_deletes_old_envelopes(store_mosquitto, tmp_path):
    async def main():
        now = [1_000_000_000.0]
        store = await StoreNode.start(
            store_mosquitto.url, tmp_path / "store.db", retention_days=1, clock=lambda: now[0], prune_interval_s=0.05
        )
        pub = MqttTransport(store_mosquitto.url)
        await pub.start()
        try:
            await pub.publish(TOPIC, b"old")
            await until(lambda: store.db.count == 1, 5, "the store holding 1")
            now[0] += 86_400 + 1  # a day and a second later
            await pub.publish(TOPIC, b"new")
            await until(lambda: store.counters["pruned"] == 1 and store.db.count == 1, 5, "1 pruned, 1 kept")
            page, _ = await store.db.since(TOPIC, 0, 0, 10, 10**6)
            assert page == [b"new"]
        finally:
            await pub.stop()
            await store.stop()

    run(main(), 30)
