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

from ..store import EventRow
from ..storenode import protocol as store_proto
from ..transport import ConnectionState

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
    def __init__(self, node) -> None:
        self.node = node
        self.config = node.config
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
            ("requests", "answers", "late_answers", "timeouts", "envelopes", "delivered", "repaired", "catch_ups"), 0)

    @property
    def enabled(self) -> bool:
        return self.config.use_store and not self.node.stopping

    async def start(self) -> None:
        """After connecting: catch up if we were away (a new member has nothing to catch up on)."""
        if not self.config.use_store:
            return
        if await self.node.store.kv_get(SYNCED_KEY) is None:
            await self.mark_synced(self.node.now())
        else:
            self.start_catch_up()  # started after a gap (before the ticker can move "synced until")

    def stop(self) -> None:
        if self._hint_timer is not None:
            self._hint_timer.cancel()
        for t in list(self._tasks):
            t.cancel()

    # ---------------------------------------------------------------- requests

    def request(self, *, feed: bool = True, topic: str | None = None, **fields) -> asyncio.Future | None:
        """Publish one request (about ``topic``: by default the current key's); the future resolves to the Reply.
        With ``feed`` its envelopes go through the receive path before it resolves; without, the caller feeds
        them (``feed``)."""
        node = self.node
        if node.stopping or node.transport is None:
            return None
        self._seq += 1
        rid = f"{self._seq}" if feed else f"{self._seq}{CALLER_FEEDS}"
        fut: asyncio.Future = asyncio.get_running_loop().create_future()
        self._waiting[rid] = fut
        body = store_proto.encode_request(store_proto.Request(rid, self.reply_topic, topic or node.membership.send_key.topic, **fields))
        self.counters["requests"] += 1

        async def send() -> None:
            try:
                await node.transport.publish(self.config.store_request_topic, body)
            except Exception as exc:
                log.debug("store request not sent: %s", exc)

        self.spawn(send())
        return fut

    async def call(self, **fields) -> store_proto.Reply | None:
        return await self.wait(self.request(**fields))

    async def call_each_topic(self, **fields) -> store_proto.Reply | None:
        """:meth:`call` about every topic whose key we keep (one after a key change, usually); the replies'
        envelopes together (None if no store answered)."""
        replies = [r for r in await asyncio.gather(*(self.call(topic=t, **fields)
                                                      for t in self.node.membership.topics())) if r is not None]
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
            return await asyncio.wait_for(asyncio.shield(fut), self.config.store_timeout_s)
        except (asyncio.TimeoutError, TimeoutError):
            self.counters["timeouts"] += 1
            return None
        finally:
            self._waiting.pop(rid, None)
            if rid is not None and _fed_here(rid):
                self._finished[rid] = None
                if len(self._finished) > LATE_REPLIES:
                    del self._finished[next(iter(self._finished))]

    def spawn(self, coro) -> asyncio.Task:
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

    def feed(self, envelopes) -> None:
        node = self.node
        for env in envelopes:
            self.counters["envelopes"] += 1
            node.receiver.on_frame(env, source="store")
        node.wake()

    # ---------------------------------------------------------------- gaps

    def want(self, entries) -> None:
        """Queue missing entries that carry a retrieval hint (an envelope hash) for a store request."""
        if not self.enabled:
            return
        for h in entries:
            hint = h.retrieval_hint
            if hint and len(hint) == 32 and h.message_id not in self._asked:
                self._hints[h.message_id] = bytes(hint)
        if self._hints and self._hint_timer is None:
            self._hint_timer = asyncio.get_running_loop().call_later(
                self.config.store_hint_delay_ms / 1000, lambda: self.spawn(self._ask_hints()))

    async def _ask_hints(self) -> None:
        self._hint_timer = None
        if self._catch_up_task is not None and not self._catch_up_task.done():
            await asyncio.wait({self._catch_up_task})  # it may bring them; ask for what is still missing after
        missing = set(self.node.channel.missing_ids)
        wanted = [(mid, hint) for mid, hint in self._hints.items() if mid in missing]
        self._hints.clear()
        if len(self._asked) > 50_000:
            self._asked.clear()
        calls = []
        for i in range(0, len(wanted), store_proto.MAX_HASHES):
            chunk = wanted[i:i + store_proto.MAX_HASHES]
            self._asked.update(mid for mid, _ in chunk)
            calls.append(self._ask(chunk))
        if calls:
            await asyncio.gather(*calls)

    async def _ask(self, chunk: list[tuple[str, bytes]]) -> None:
        """One store request by retrieval hint, recorded for the gap inspector: ``store_query`` rows when it
        goes out, ``store_answer`` rows (found, not found, or no answer) when it comes back."""
        node = self.node
        now = node.now()
        node.persist(now, events=[EventRow("store_query", now, mid, detail={"hint": hint.hex()}) for mid, hint in chunk])
        reply = await self.call_each_topic(hashes=[hint for _, hint in chunk])
        if node.stopping or node.channel is None:
            return
        now = node.now()
        missing = set(node.channel.missing_ids)
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
            rows.append(EventRow("store_answer", now, mid, detail={"outcome": outcome,
                                                                   "envelopes": len(reply.envelopes) if reply else 0}))
        node.persist(now, events=rows)

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
        node = self.node
        raw = await node.store.kv_get(SYNCED_KEY)
        if raw is None:
            return
        since = max(0, int(raw))
        started = node.now()
        self.counters["catch_ups"] += 1
        done: set[str] = set()
        while not node.stopping:
            todo = [t for t in node.membership.topics() if t not in done]
            if not todo:
                break
            for topic in todo:
                done.add(topic)
                if not await self._catch_up_topic(topic, since):
                    return  # no store (or it refused): SDS and SDS-R carry on as usual
        await self.mark_synced(started)

    async def _catch_up_topic(self, topic: str, since: int) -> bool:
        node = self.node
        fut = self.request(feed=False, topic=topic, since_ms=since, cursor=0, limit=store_proto.MAX_PAGE)
        while True:
            reply = await self.wait(fut)
            if reply is None or reply.error:
                return False
            # ask for the next page now, feed this one meanwhile (in slices, so the loop stays responsive)
            fut = (self.request(feed=False, topic=topic, since_ms=since, cursor=reply.next_cursor,
                                limit=store_proto.MAX_PAGE) if reply.next_cursor else None)
            envs = reply.envelopes
            for i in range(0, len(envs), 50):
                if node.stopping:
                    return False
                self.feed(envs[i:i + 50])
                await asyncio.sleep(0)
            if fut is None:
                return True

    async def mark_synced(self, now: int) -> None:
        value = max(0, now - self.config.store_sync_margin_ms)
        try:
            await self.node.store.kv_set(SYNCED_KEY, str(value))
            self._synced_written_ms = now
        except Exception as exc:
            log.debug("could not record the sync time: %s", exc)

    async def maybe_mark_synced(self, now: int) -> None:
        """While connected and not catching up, advance "synced until" (every few seconds)."""
        transport = self.node.transport
        if (not self.config.use_store or now - self._synced_written_ms < 5_000
                or transport is None or transport.state != ConnectionState.CONNECTED
                or (self._catch_up_task is not None and not self._catch_up_task.done())):
            return
        await self.mark_synced(now)
