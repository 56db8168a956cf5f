"""Store nodes in the model: they keep the frames that reach them, and members ask them as the node does.

A store (``SimParams.stores``) is a member of the broker like any other: each
frame published reaches it with probability ``1 - store_loss``, after the
network's latency, unless it is down (``store_outages``). It keeps every
frame (what ``sdschat store`` keeps is every envelope on the channel's
topic). Members ask, with the node's timings (:class:`sdschat.node.storeclient.StoreClient`):

* **Gaps**: the ids of a ``Missing`` or ``GapDetected`` are queued; 200 ms
  after the first, the ids still missing are asked for (each id once, 100 a
  request). The node asks by retrieval hint (the envelope's hash, which it
  puts in every causal-history entry); the model's store finds the message's
  first content frame by id, which is the same thing.
* **Catch-up**: a member coming back online asks for everything since it
  went away, less a 10 s margin (the node's "synced until" lags by up to 5 s
  and is written with that margin), in pages of 500 frames in the store's
  arrival order, the next page asked as soon as one comes back. A member's
  queued gaps wait for its catch-up to end, as the node's do.

Every store that is up when the request reaches it answers (each request and
each answer lost with ``store_loss``, each taking a latency drawn from
``store_latency_ms``); the first answer settles the request, and no answer
within 3 s is a timeout (a catch-up then ends, as the node's does). As the
node does, the frames of later answers to a request by id are fed too (a
store that lost a frame may answer first); a catch-up's pages follow the
first answer only. The frames of an answer go
through the member's receive path at the answer's time, marked as from the
store (``delivered`` rows with ``via = "store"``; what they call off of
SDS-R is ``repair_cancelled`` with ``via = "store"``), and the requests are
recorded as the node records them (``store_query`` for each id asked,
``store_answer`` with its outcome). The run's counts say how many requests,
answers, timeouts, catch-ups, envelopes and envelope bytes (the frames'
sizes; the store's own framing is not counted) there were.

Every shard keeps the same copy of every store (each shard sees every frame,
and the draws are keyed by frame and by store), and a member's request is
drawn from the member's own stream: the same seed gives the same events for
any number of workers. An answer is assembled when it arrives, from the
frames that had reached the store when the request did; with the network's
minimum latency as the workers' lookahead, those frames are known to every
shard by then.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterable

from sdschat.sds import Delivered, HistoryEntry

from .plan import RNG_STORE, RNG_STORE_QUERY, StoreOutages, rng
from .schedule import STORE
from .state import (
    ANSWER,
    ASK,
    LATE,
    TIMEOUT,
    FrameCtx,
    IdsQuery,
    Parsed,
    Positions,
    ShardState,
    StoreItem,
    StoreKey,
    StoreOp,
    StoreQuery,
)

__all__ = ["StoreClients", "HINT_DELAY_MS", "TIMEOUT_MS", "SYNC_MARGIN_MS", "MAX_IDS", "MAX_PAGE"]

#: the node's timings and limits (sdschat.node.config, sdschat.storenode.protocol)
HINT_DELAY_MS = 200
TIMEOUT_MS = 3_000
SYNC_MARGIN_MS = 10_000
MAX_IDS = 100
MAX_PAGE = 500


def _key(item: StoreItem) -> StoreKey:
    """A kept frame's place in a store: arrival time, publisher, publisher's frame counter."""
    return item[:3]


class StoreClients(ShardState):
    """The store side of :class:`~sdschat.sim.shard.Shard` (its state: :class:`~sdschat.sim.state.ShardState`,
    set up in :meth:`_stores_init`)."""

    def _stores_init(self) -> None:
        p = self.p
        self.n_stores = p.stores
        self.outages = StoreOutages(p)
        self.store_ids = [{} for _ in range(p.stores)]
        self.store_frames = [[] for _ in range(p.stores)]
        self._store_sorted = [True] * p.stores
        self.st_want = {}
        self.st_asked = {}
        self.st_timer = set()
        self.st_catching = set()
        self.st_seq = [0] * self.n
        self.st_queries = [0] * self.n
        self.st_offline_since = {}
        self.st_outstanding = 0

    # ------------------------------------------------------------ the stores

    def _store_ingest(
        self, r: int, c: int, t: int, reason: str, mid: str, pb: Parsed, positions: Positions | None, size: int
    ) -> None:
        """A frame published by ``r`` (its ``c``-th) at ``t``: the stores it reaches keep it."""
        p = self.p
        g = rng(p.seed, RNG_STORE, r, c)
        lo, hi = p.latency_ms
        lost = g.random(self.n_stores) < p.store_loss
        lat = g.integers(lo, hi + 1, self.n_stores)
        entry = (t, pb, positions, reason, mid, size)
        for s in range(self.n_stores):
            arrival = t + int(lat[s])
            if lost[s] or not self.outages.up(s, arrival):
                continue
            item: StoreItem = (arrival, r, c, entry)
            self.store_frames[s].append(item)
            self._store_sorted[s] = False
            if reason != "sync":
                old = self.store_ids[s].get(mid)
                if old is None or item[:3] < old[:3]:
                    self.store_ids[s][mid] = item

    # ------------------------------------------------------------- members

    def _store_push(self, r: int, t: int, obj: StoreOp) -> None:
        self.st_seq[r] += 1
        heapq.heappush(self.heap, (t, STORE, r, self.st_seq[r], obj))

    def _store_want(self, r: int, entries: Iterable[HistoryEntry], t: int) -> None:
        """Member ``r`` noticed these missing entries: queue them for a store request 200 ms later."""
        asked: set[str] | tuple[()] = self.st_asked.get(r, ())
        want = self.st_want.get(r)
        for h in entries:
            mid = h.message_id
            if mid not in asked:
                if want is None:
                    want = self.st_want[r] = {}
                want[mid] = None
        if want and r not in self.st_timer and r not in self.st_catching:
            self.st_timer.add(r)
            self._store_push(r, t + HINT_DELAY_MS, (ASK,))

    def _store_went_offline(self, r: int, t: int) -> None:
        self.st_offline_since[r] = t

    def _store_came_online(self, r: int, t: int) -> None:
        """Catch up on what was missed while away (less the node's margin), page by page."""
        away = self.st_offline_since.pop(r, None)  # None: offline since the start
        since = self.p.start_ms if away is None else max(self.p.start_ms, away - SYNC_MARGIN_MS)
        self.st_catching.add(r)
        self.st_timer.discard(r)  # queued ids wait for the catch-up (asked when it ends)
        self.counts["store_catch_ups"] += 1
        self._store_request(r, t, ("since", since, None))

    def _store_event(self, r: int, obj: StoreOp, t: int) -> None:
        if obj[0] == ASK:
            if r in self.st_timer:
                self._store_ask(r, t)
        elif obj[0] == ANSWER:
            self._store_answered(r, obj, t)
        elif obj[0] == LATE:
            self._store_late_answer(r, obj, t)
        else:
            self._store_timed_out(r, obj, t)

    def _store_ask(self, r: int, t: int) -> None:
        self.st_timer.discard(r)
        want = self.st_want.pop(r, None)
        if not want:
            return
        missing = set(self.chans[r].missing_ids)
        wanted = [mid for mid in want if mid in missing]
        if not wanted:
            return
        asked = self.st_asked.setdefault(r, set())
        asked.update(wanted)
        add = self.sink.rows.extend
        for i in range(0, len(wanted), MAX_IDS):
            chunk = tuple(wanted[i : i + MAX_IDS])
            for mid in chunk:
                add((t, "store_query", mid, None, r, None, None))
            self._store_request(r, t, ("ids", chunk))

    def _store_request(self, r: int, t: int, what: StoreQuery) -> None:
        """Member ``r`` publishes a store request at ``t``: the first answer, or a timeout, is scheduled (and, for
        a request by id, the other stores' answers after it)."""
        p = self.p
        self.counts["store_requests"] += 1
        k = self.st_queries[r]
        self.st_queries[r] = k + 1
        g = rng(p.seed, RNG_STORE_QUERY, r, k)
        lo, hi = p.store_latency
        ns = self.n_stores
        lost = g.random((2, ns)) < p.store_loss
        lat = g.integers(lo, hi + 1, (2, ns))
        answers = []
        if self.online[r]:
            for s in range(ns):
                at_store = t + int(lat[0, s])
                back = at_store + int(lat[1, s])
                if lost[0, s] or lost[1, s] or not self.outages.up(s, at_store) or back - t > TIMEOUT_MS:
                    continue
                answers.append((back, s, at_store))
        if not answers:
            self._store_push(r, t + TIMEOUT_MS, (TIMEOUT, what))
            return
        answers.sort()
        back, s, at_store = answers[0]
        self.st_outstanding += 1
        self._store_push(r, back, (ANSWER, what, s, at_store, t))
        if what[0] == "ids":
            for back, s, at_store in answers[1:]:
                self.st_outstanding += 1
                self._store_push(r, back, (LATE, what, s, at_store))

    def _store_answered(self, r: int, obj: tuple[int, StoreQuery, int, int, int], t: int) -> None:
        _, what, s, at_store, asked_at = obj
        self.st_outstanding -= 1
        if not self.online[r]:  # the answer went nowhere: the member times out
            self._store_push(r, asked_at + TIMEOUT_MS, (TIMEOUT, what))
            return
        self.counts["store_answers"] += 1
        if what[0] == "ids":
            found = self._store_found(s, what[1], at_store)
            self._store_feed(r, found, t)
            missing = set(self.chans[r].missing_ids)
            add = self.sink.rows.extend
            detail_found = f'{{"outcome":"found","envelopes":{len(found):d}}}'
            for mid in what[1]:
                if mid in missing:
                    detail = f'{{"outcome":"not found","envelopes":{len(found):d}}}'
                elif found:
                    detail = detail_found
                else:
                    detail = '{"outcome":"arrived meanwhile","envelopes":0}'
                add((t, "store_answer", mid, None, r, None, detail))
            return
        _, since, cursor = what
        frames = self.store_frames[s]
        if not self._store_sorted[s]:
            frames.sort(key=_key)
            self._store_sorted[s] = True
        page = []
        if cursor is None:
            start = bisect.bisect_left(frames, (since, -1, -1), key=_key)
        else:
            start = bisect.bisect_right(frames, cursor, key=_key)
        for i in range(start, len(frames)):
            item = frames[i]
            if item[0] > at_store:
                break
            if item[1] != r:  # (its own frames: the node would find them known)
                page.append(item)
                if len(page) == MAX_PAGE:
                    break
        self.counts["store_pages"] += 1
        if len(page) == MAX_PAGE:  # the next page is asked for at once, this one fed meanwhile
            self._store_request(r, t, ("since", since, page[-1][:3]))
        self._store_feed(r, page, t)
        if len(page) < MAX_PAGE:
            self._store_catch_up_done(r, t)

    def _store_late_answer(self, r: int, obj: tuple[int, IdsQuery, int, int], t: int) -> None:
        """Another store's answer to a request by id, after the first: its frames are fed (the node's
        ``late_answers``, counted when it has any)."""
        _, what, s, at_store = obj
        self.st_outstanding -= 1
        if not self.online[r]:
            return
        found = self._store_found(s, what[1], at_store)
        if found:
            self.counts["store_late_answers"] += 1
            self._store_feed(r, found, t)

    def _store_found(self, s: int, mids: Iterable[str], at_store: int) -> list[StoreItem]:
        """What store ``s`` holds of ``mids`` when the request reaches it at ``at_store``, in feeding order."""
        ids = self.store_ids[s]
        found = [item for item in (ids.get(mid) for mid in mids) if item is not None and item[0] <= at_store]
        found.sort(key=_key)
        return found

    def _store_timed_out(self, r: int, obj: tuple[int, StoreQuery], t: int) -> None:
        what = obj[1]
        self.counts["store_timeouts"] += 1
        if what[0] == "ids":
            add = self.sink.rows.extend
            for mid in what[1]:
                add((t, "store_answer", mid, None, r, None, '{"outcome":"no answer","envelopes":0}'))
        else:
            self._store_catch_up_done(r, t)

    def _store_catch_up_done(self, r: int, t: int) -> None:
        self.st_catching.discard(r)
        if self.st_want.get(r) and r not in self.st_timer:
            self.st_timer.add(r)
            self._store_push(r, t, (ASK,))

    def _store_feed(self, r: int, items: list[StoreItem], t: int) -> None:
        """Frames from a store through member ``r``'s receive path, at ``t``."""
        if not items:
            return
        ch = self.chans[r]
        pids = self.pids
        self.counts["store_envelopes"] += len(items)
        self.counts["store_envelope_bytes"] += sum(item[3][5] for item in items)
        for _, pr, _, (t_pub, pb, pos, reason, mid, _) in items:
            content = reason != "sync"
            ctx: FrameCtx = ("store", pids[pr], pb.sender_id, t_pub, mid)
            pending = ch.repair_pending(mid) if content else (False, False)
            evs = ch.receive_parsed(pb, t, None, pos)
            if pending[0] or pending[1]:
                self._called_off(r, t, pending, ch.repair_pending(mid), ctx)
            if evs:
                self.counts["store_delivered"] += sum(1 for e in evs if type(e) is Delivered)
                self._handle(r, evs, t, ctx)
        self._tick_at(r, t)
