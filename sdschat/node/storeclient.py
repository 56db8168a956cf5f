"""The store-node client of a node: ask by retrieval hint for what is missing, and catch up after being away.

Optional and quiet: with no store node answering, every request times out and nothing else changes (SDS-R
repairs as before). Envelopes a store returns go through the node's receive path like any other (decrypt,
verify, engine), marked ``source="store"``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from collections.abc import Coroutine, Iterable
from typing import Any

from ..sds import HistoryEntry
from ..store import EventRow, Store
from ..storenode import protocol as store_proto
from ..transport import ConnectionState
from .ports import StoreClientHost

__all__ = ["StoreClient", "SYNCED_KEY"]

log = logging.getLogger("sdschat.node")

#: how many finished requests a late reply is still taken for (another store's answer after the first)
LATE_REPLIES = 1_024

#: ends the id of a request whose envelopes its caller feeds (a catch-up page, fed in order by the caller)
CALLER_FEEDS = "p"


def _fed_here(rid: str) -> bool:
    """Whether the envelopes of replies to request ``rid`` go through the receive path from :meth:`on_reply`."""
    return not rid.endswith(CALLER_FEEDS)


#: kv key: wall-clock ms up to which this node is known to have seen its channel (store catch-ups start there)
SYNCED_KEY = "store_synced_until"


class StoreClient:
    """The node's client of store nodes. It sees the node through :class:`~.ports.StoreClientHost`, reads and
    writes its own ``kv`` row (:data:`SYNCED_KEY`) in the database it is started with, and owns its requests and
    counters."""

    def __init__(self, host: StoreClientHost) -> None:
        self.host = host
        self.config = host.config
        self._store: Store | None = None
        self.reply_topic = store_proto.REPLY_PREFIX + os.urandom(8).hex()
        self._waiting: dict[str, asyncio.Future] = {}
        #: ids of requests already answered (or timed out) whose later replies are still fed, oldest first
        self._finished: dict[str, None] = {}
        self._hints: dict[str, bytes] = {}  # message id -> retrieval hint, to ask for
        self._asked: set[str] = set()
        self._hint_timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task] = set()
        self._catch_up_task: asyncio.Task | None = None
        self._seq = 0
        self._synced_written_ms = 0
        #: requests sent, answers (``late_answers``: replies after the first to the same request), timeouts,
        #: envelopes fed, messages delivered from them
        self.counters: dict[str, int] = dict.fromkeys(
            ("requests", "answers", "late_answers", "timeouts", "envelopes", "delivered", "repaired", "catch_ups"), 0
        )

    def count(self, name: str) -> None:
        """One more of ``name`` in :attr:`counters` (the receive pipeline counts what it delivered from a store's
        answers, and what that repaired)."""
        self.counters[name] += 1

    @property
    def enabled(self) -> bool:
        return self.config.use_store and not self.host.stopping

    @property
    def store(self) -> Store:
        """The node's database (given at :meth:`start`)."""
        if self._store is None:
            raise RuntimeError("the store client is used before it was started")
        return self._store

    async def start(self, store: Store) -> None:
        """After connecting: catch up if we were away (a new member has nothing to catch up on)."""
        self._store = store
        if not self.config.use_store:
            return
        if await store.kv_get(SYNCED_KEY) is None:
            await self.mark_synced(self.host.now())
        else:
            self.start_catch_up()  # started after a gap (before the ticker can move "synced until")

    def stop(self) -> None:
        if self._hint_timer is not None:
            self._hint_timer.cancel()
        for t in list(self._tasks):
            t.cancel()

    # ---------------------------------------------------------------- requests

    def request(self, *, feed: bool = True, topic: str | None = None, **fields: Any) -> asyncio.Future | None:
        """Publish one request (about ``topic``: by default the current key's); the future resolves to the Reply.
        With ``feed`` its envelopes go through the receive path before it resolves; without, the caller feeds
        them (``feed``)."""
        host = self.host
        transport = host.transport
        if host.stopping or transport is None:
            return None
        self._seq += 1
        rid = f"{self._seq}" if feed else f"{self._seq}{CALLER_FEEDS}"
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self._waiting[rid] = fut
        request = store_proto.Request(rid, self.reply_topic, topic or host.topics()[0], **fields)
        body = store_proto.encode_request(request)
        self.counters["requests"] += 1

        async def send() -> None:
            try:
                await transport.publish(self.config.store_request_topic, body)
            except Exception as exc:
                log.debug("store request not sent: %s", exc)

        self.spawn(send())
        return fut

    async def call(self, **fields: Any) -> store_proto.Reply | None:
        return await self.wait(self.request(**fields))

    async def call_each_topic(self, **fields: Any) -> store_proto.Reply | None:
        """:meth:`call` about every topic whose key we keep (one after a key change, usually); the replies'
        envelopes together (None if no store answered)."""
        replies = [
            r
            for r in await asyncio.gather(*(self.call(topic=t, **fields) for t in self.host.topics()))
            if r is not None
        ]
        if not replies:
            return None
        ok = [r for r in replies if not r.error]
        if not ok:
            return replies[0]
        return dataclasses.replace(ok[0], envelopes=[e for r in ok for e in r.envelopes]) if len(ok) > 1 else ok[0]

    async def wait(self, fut: asyncio.Future | None) -> store_proto.Reply | None:
        if fut is None:
            return None
        rid = next((k for k, v in self._waiting.items() if v is fut), None)
        try:
            reply: store_proto.Reply = await asyncio.wait_for(asyncio.shield(fut), self.config.store_timeout_s)
            return reply
        except TimeoutError:
            self.counters["timeouts"] += 1
            return None
        finally:
            if rid is not None:
                self._waiting.pop(rid, None)
            if rid is not None and _fed_here(rid):
                self._finished[rid] = None
                if len(self._finished) > LATE_REPLIES:
                    del self._finished[next(iter(self._finished))]

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def on_reply(self, payload: bytes) -> None:
        try:
            reply = store_proto.decode_reply(payload)
        except (ValueError, UnicodeDecodeError, IndexError) as exc:
            log.debug("unreadable store reply: %s", exc)
            return
        fut = self._waiting.get(reply.id)
        if fut is None or fut.done():
            # Another store's reply after the first (or after the timeout): the first may have lacked what this
            # one has (a store that lost the frame answers "not found" as fast as one that kept it). Its
            # envelopes go through the receive path like any (already known ones are dropped there). Replies
            # to catch-up pages are not: the pages follow the first store's cursor.
            ours = reply.id in self._finished or (fut is not None and _fed_here(reply.id))
            if ours and not reply.error and reply.envelopes:
                self.counters["late_answers"] += 1
                self.feed(reply.envelopes)
            return  # late, or not ours
        self.counters["answers"] += 1
        if reply.error:
            log.debug("store refused a request: %s", reply.error)
        if _fed_here(reply.id):
            self.feed(reply.envelopes)
        fut.set_result(reply)

    def feed(self, envelopes: Iterable[bytes]) -> None:
        host = self.host
        for env in envelopes:
            self.counters["envelopes"] += 1
            host.take_frame(env, "store")
        host.wake()

    # ---------------------------------------------------------------- gaps

    def want(self, entries: Iterable[HistoryEntry]) -> None:
        """Queue missing entries that carry a retrieval hint (an envelope hash) for a store request."""
        if not self.enabled:
            return
        for h in entries:
            hint = h.retrieval_hint
            if hint and len(hint) == 32 and h.message_id not in self._asked:
                self._hints[h.message_id] = bytes(hint)
        if self._hints and self._hint_timer is None:
            self._hint_timer = asyncio.get_running_loop().call_later(
                self.config.store_hint_delay_ms / 1000, lambda: self.spawn(self._ask_hints())
            )

    async def _ask_hints(self) -> None:
        self._hint_timer = None
        if self._catch_up_task is not None and not self._catch_up_task.done():
            await asyncio.wait({self._catch_up_task})  # it may bring them; ask for what is still missing after
        channel = self.host.channel
        missing = set(channel.missing_ids) if channel is not None else set()
        wanted = [(mid, hint) for mid, hint in self._hints.items() if mid in missing]
        self._hints.clear()
        if len(self._asked) > 50_000:
            self._asked.clear()
        calls = []
        for i in range(0, len(wanted), store_proto.MAX_HASHES):
            chunk = wanted[i : i + store_proto.MAX_HASHES]
            self._asked.update(mid for mid, _ in chunk)
            calls.append(self._ask(chunk))
        if calls:
            await asyncio.gather(*calls)

    async def _ask(self, chunk: list[tuple[str, bytes]]) -> None:
        """One store request by retrieval hint, recorded for the gap inspector: ``store_query`` rows when it
        goes out, ``store_answer`` rows (found, not found, or no answer) when it comes back."""
        host = self.host
        now = host.now()
        host.persist(
            now, events=[EventRow("store_query", now, mid, detail={"hint": hint.hex()}) for mid, hint in chunk]
        )
        reply = await self.call_each_topic(hashes=[hint for _, hint in chunk])
        if host.stopping or host.channel is None:
            return
        now = host.now()
        missing = set(host.channel.missing_ids)
        rows = []
        for mid, _ in chunk:
            if reply is None:
                outcome = "no answer"
            elif reply.error:
                outcome = "refused"
            elif mid in missing:
                outcome = "not found"
            else:
                outcome = "found" if reply.envelopes else "arrived meanwhile"
            rows.append(
                EventRow(
                    "store_answer",
                    now,
                    mid,
                    detail={"outcome": outcome, "envelopes": len(reply.envelopes) if reply else 0},
                )
            )
        host.persist(now, events=rows)

    # ---------------------------------------------------------------- catch-up

    def start_catch_up(self) -> None:
        if not self.enabled:
            return
        if self._catch_up_task is not None and not self._catch_up_task.done():
            return
        self._catch_up_task = self.spawn(self._catch_up())

    async def _catch_up(self) -> None:
        """Fetch everything on our topics since we were last in sync, page by page, through the receive path; a
        key change found on the way adds its topic."""
        host = self.host
        raw = await self.store.kv_get(SYNCED_KEY)
        if raw is None:
            return
        since = max(0, int(raw))
        started = host.now()
        self.counters["catch_ups"] += 1
        done: set[str] = set()
        while not host.stopping:
            todo = [t for t in host.topics() if t not in done]
            if not todo:
                break
            for topic in todo:
                done.add(topic)
                if not await self._catch_up_topic(topic, since):
                    return  # no store (or it refused): SDS and SDS-R carry on as usual
        await self.mark_synced(started)

    async def _catch_up_topic(self, topic: str, since: int) -> bool:
        fut = self.request(feed=False, topic=topic, since_ms=since, cursor=0, limit=store_proto.MAX_PAGE)
        while True:
            reply = await self.wait(fut)
            if reply is None or reply.error:
                return False
            # ask for the next page now, feed this one meanwhile (in slices, so the loop stays responsive)
            fut = (
                self.request(
                    feed=False, topic=topic, since_ms=since, cursor=reply.next_cursor, limit=store_proto.MAX_PAGE
                )
                if reply.next_cursor
                else None
            )
            envs = reply.envelopes
            for i in range(0, len(envs), 50):
                if self.host.stopping:
                    return False
                self.feed(envs[i : i + 50])
                await asyncio.sleep(0)
            if fut is None:
                return True

    async def mark_synced(self, now: int) -> None:
        value = max(0, now - self.config.store_sync_margin_ms)
        try:
            await self.store.kv_set(SYNCED_KEY, str(value))
            self._synced_written_ms = now
        except Exception as exc:
            log.debug("could not record the sync time: %s", exc)

    async def maybe_mark_synced(self, now: int) -> None:
        """While connected and not catching up, advance "synced until" (every few seconds)."""
        transport = self.host.transport
        if (
            not self.config.use_store
            or now - self._synced_written_ms < 5_000
            or transport is None
            or transport.state != ConnectionState.CONNECTED
            or (self._catch_up_task is not None and not self._catch_up_task.done())
        ):
            return
        await self.mark_synced(now)
