"""The store node: a key-less cache of every envelope on ``sdschat/+``, served by hash or by time.

It subscribes to every channel topic and to :data:`~.protocol.REQUEST_TOPIC`, commits what arrives
in batches (one transaction per batch), and answers requests in order after the envelopes that
arrived before them are committed. It never opens an envelope: it has no key.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypedDict, Unpack

from ..crypto import MAX_ENVELOPE_SIZE
from ..transport import MqttTransport, TransportError
from . import protocol as P
from .db import StoreDB

__all__ = ["StoreNode"]

log = logging.getLogger("sdschat.storenode")

DAY_MS = 86_400_000


class StoreNodeOptions(TypedDict, total=False):
    """The keyword arguments of :class:`StoreNode`, as :meth:`StoreNode.start` passes them on."""

    retention_days: float | None
    max_bytes: int | None
    request_topic: str
    clock: Callable[[], float]
    prune_interval_s: float
    synchronous: str


class StoreNode:
    """``node = await StoreNode.start(broker_url, db_path)``; ``await node.stop()``."""

    def __init__(
        self,
        broker_url: str,
        db_path: Path,
        *,
        retention_days: float | None = 30.0,
        max_bytes: int | None = None,
        request_topic: str = P.REQUEST_TOPIC,
        clock: Callable[[], float] = time.time,
        prune_interval_s: float = 60.0,
        synchronous: str = "NORMAL",
    ) -> None:
        self.broker_url = broker_url
        self.db_path = Path(db_path)
        self.retention_ms = None if not retention_days else int(retention_days * DAY_MS)
        self.max_bytes = max_bytes or None
        self.request_topic = request_topic
        self.clock = clock
        self.prune_interval_s = prune_interval_s
        self.synchronous = synchronous
        self.db: StoreDB | None = None
        self.transport: MqttTransport | None = None
        self._pending: list[tuple[str, bytes, int]] = []
        self._requests: list[bytes] = []
        self._wake = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self.counters = dict.fromkeys(
            ("stored", "duplicates", "dropped", "requests", "bad_requests", "answered", "served_envelopes", "pruned"), 0
        )

    @classmethod
    async def start(cls, broker_url: str, db_path: Path, **kw: Unpack[StoreNodeOptions]) -> StoreNode:
        node = cls(broker_url, db_path, **kw)
        try:
            await node._start()
        except BaseException:
            await node.stop()
            raise
        return node

    def _now(self) -> int:
        return int(self.clock() * 1000)

    def _db(self) -> StoreDB:
        """The database, opened by :meth:`start`; work that reaches it before or after fails with a reason."""
        if self.db is None:
            raise RuntimeError("the store node is not running")
        return self.db

    async def _start(self) -> None:
        self.db = await StoreDB.open(self.db_path, synchronous=self.synchronous)
        await self._prune()
        self.transport = MqttTransport(self.broker_url, client_id=f"sdschat-store-{os.urandom(4).hex()}")
        self.transport.set_message_handler(self._on_message)
        await self.transport.start()
        ok = await asyncio.gather(
            self.transport.subscribe(P.CHANNEL_TOPICS), self.transport.subscribe(self.request_topic)
        )
        if not all(ok):
            raise TransportError("the broker refused the store node's subscriptions")
        self._tasks.append(asyncio.create_task(self._worker(), name="sdschat-store-worker"))
        self._tasks.append(asyncio.create_task(self._pruner(), name="sdschat-store-prune"))

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        if self.transport is not None:
            try:
                await asyncio.wait_for(self.transport.stop(), 5)
            except Exception as exc:
                log.warning("transport stop: %s", exc)
            self.transport = None
        if self.db is not None:
            try:
                await self.db.add(self._pending)  # what arrived is committed before exit
            except Exception as exc:
                log.warning("final commit failed: %s", exc)
            self._pending = []
            await self.db.close()
            self.db = None

    # ------------------------------------------------------------- ingress

    def _on_message(self, topic: str, payload: bytes) -> None:
        if topic == self.request_topic:
            if len(self._requests) < 10_000:
                self._requests.append(bytes(payload))
            else:
                self.counters["dropped"] += 1
        elif P.channel_topic_ok(topic) and 0 < len(payload) <= MAX_ENVELOPE_SIZE:
            self._pending.append((topic, bytes(payload), self._now()))
        else:
            self.counters["dropped"] += 1
            return
        self._wake.set()

    async def _worker(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                while self._pending:
                    batch, self._pending = self._pending[:2000], self._pending[2000:]
                    db = self._db()
                    new = await db.add(batch)
                    self.counters["stored"] += new
                    self.counters["duplicates"] += len(batch) - new
                    if self.max_bytes is not None and db.total_bytes > self.max_bytes:
                        self.counters["pruned"] += await db.prune(max_bytes=self.max_bytes)
                reqs, self._requests = self._requests, []
                for data in reqs:
                    if self._pending:  # keep answers behind what arrived before them
                        new = await self._db().add(self._pending)
                        self.counters["stored"] += new
                        self._pending = []
                    await self._serve(data)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("store worker step failed")
                await asyncio.sleep(0.1)

    async def _serve(self, data: bytes) -> None:
        self.counters["requests"] += 1
        try:
            req = P.parse_request(data)
        except P.RequestError as exc:
            self.counters["bad_requests"] += 1
            if exc.reply_to:
                await self._answer(exc.reply_to, P.Reply(exc.request_id, error=exc.reason))
            return
        if req.hashes is not None:
            envs = await self._db().by_hashes(req.topic, req.hashes)
            reply = P.Reply(req.id, envs)
        else:
            # (a parsed request without hashes always has since_ms)
            envs, cursor = await self._db().since(
                req.topic, req.since_ms or 0, req.cursor, req.limit, P.MAX_REPLY_BYTES
            )
            reply = P.Reply(req.id, envs, cursor)
        self.counters["served_envelopes"] += len(reply.envelopes)
        await self._answer(req.reply_to, reply)

    async def _answer(self, topic: str, reply: P.Reply) -> None:
        try:
            if self.transport is None:
                raise RuntimeError("the store node is not running")
            ok = await self.transport.publish(topic, P.encode_reply(reply))
        except Exception as exc:
            log.warning("answer on %s failed: %s", topic, exc)
            ok = False
        if ok:
            self.counters["answered"] += 1

    # ------------------------------------------------------------ retention

    async def _prune(self) -> int:
        cutoff = self._now() - self.retention_ms if self.retention_ms else None
        n = await self._db().prune(older_than_ms=cutoff, max_bytes=self.max_bytes)
        self.counters["pruned"] += n
        if n:
            log.info("pruned %d envelopes", n)
        return n

    async def _pruner(self) -> None:
        while True:
            await asyncio.sleep(self.prune_interval_s)
            try:
                await self._prune()
            except Exception:
                log.exception("prune failed")
