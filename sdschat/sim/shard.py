"""One shard of a simulation: some members' engines and one heap of what happens to them.

Virtual time is whole milliseconds. Each :class:`Shard` owns some members
(all of them when there is one worker) and pops its heap in a fixed order
(:mod:`sdschat.sim.schedule`): arrivals of broadcast frames
(:mod:`sdschat.sim.network`, :mod:`sdschat.sim.delivery`), application
messages (times and senders from :func:`~sdschat.sim.plan.make_plan`), the
end of sending (with ``settle="clean"`` the network turns lossless and
everyone comes online), churn (a member goes offline or comes back, then
rebroadcasts its outgoing buffer with ``resend_now``, as the node does on
reconnecting) and ticks. Each member has one scheduled tick at its engine's
:meth:`~sdschat.sds.MessageChannel.next_deadline`; stale ticks are skipped
when popped, so no member is ticked unless it has something due. Engine
events become rows in :mod:`sdschat.sim.rows`.

A member's engine therefore sees the same calls in the same order however the
members are split, and every random draw is keyed by what it is about
(:mod:`sdschat.sim.plan`): the same seed gives the same events for any number
of workers.
"""

from __future__ import annotations

import heapq
import resource
import time
from collections import Counter, deque
from pathlib import Path
from typing import Any, TypedDict, cast

import numpy as np

from sdschat.sds import BloomFilter, MessageChannel

from . import output
from .clock import collection_paused, no_gc
from .delivery import Delivery
from .network import Network
from .params import SimParams, channel_config
from .plan import ChurnTimeline, Plan
from .rows import EventRows
from .schedule import ARRIVALS, CHURN, INF, SEND, SETTLE, STORE, TICK
from .state import Cursor, StoreOp
from .stores import StoreClients

__all__ = ["Shard", "ShardOptions", "participant_ids"]


class ShardOptions(TypedDict, total=False):
    """The keyword options of :class:`Shard`, as :func:`~sdschat.sim.simulate` passes them to every worker."""

    shard_rows: int
    row_group_rows: int
    frame_view: bool
    skip_held: bool


def participant_ids(n: int) -> list[str]:
    width = max(5, len(str(n - 1)))
    return [f"p{i:0{width}d}" for i in range(n)]


class Shard(Network, Delivery, EventRows, StoreClients):
    """The members ``r % workers == wid`` of one simulation, and everything that happens to them.

    Its bases are its parts, one module each: :class:`~sdschat.sim.network.Network`
    (publishing), :class:`~sdschat.sim.delivery.Delivery` (receiving),
    :class:`~sdschat.sim.rows.EventRows` (engine events -> rows) and
    :class:`~sdschat.sim.stores.StoreClients` (store nodes). They are
    methods of this one object, not collaborators, so the event loop's hot path
    reads its state as plain attributes and locals; the state is declared once in
    :class:`~sdschat.sim.state.ShardState`, which every part inherits, and set up here.
    """

    def __init__(
        self,
        params: SimParams,
        plan: Plan,
        wid: int = 0,
        workers: int = 1,
        out_dir: str | Path | None = None,
        *,
        shard_rows: int = 1_000_000,
        row_group_rows: int = 262_144,
        frame_view: bool = True,
        skip_held: bool = True,
    ):
        p = self.p = params
        self.frame_view = frame_view
        self.plan = plan
        self.wid = wid
        self.workers = workers
        self.out_dir = Path(out_dir) if out_dir is not None else None
        self.config = channel_config(p)
        prefix = "events-" if workers == 1 else f"events-w{wid}-"
        n = p.participants
        self.n = n
        self.pids = participant_ids(n)
        # rows carry the recording participant as its index (turned into ids column-wise when a shard is written)
        self.sink = output.EventSink(
            self.out_dir,
            p.channel_id,
            shard_rows,
            row_group_rows,
            prefix=prefix,
            seq_stride=workers,
            seq_offset=wid,
            participant_names=self.pids,
        )
        self.owned = list(range(wid, n, workers))
        self.mine = np.zeros(n, dtype=bool)
        self.mine[self.owned] = True
        # only the owned members' slots get an engine (in start()); the others stay None and are never read
        self.chans = cast("list[MessageChannel]", [None] * n)
        self.online = [True] * n
        self.dl = [INF] * n
        self.waiting = {}
        self.heap = []
        self.counter = [0] * n
        self.cursors = 0
        self.busy_cursors = 0
        self.outbox = []
        self.frames_published = []
        self.frame_recv = {}
        self.loss = p.loss
        self.duplicate = p.duplicate
        self.churning = p.churn is not None
        self.timeline = ChurnTimeline(p) if p.churn is not None else None
        self._stores_init()
        self.sent_at = {}
        self.skip_held = skip_held and frame_view
        self.held = {}
        self.answering = {}
        self.held_skipped = 0
        self.skipped_until = -1
        self._skips = deque()
        self._answer_group = {}
        self.until = p.start_ms
        self.latency = {"send_to_shown": Counter(), "send_to_deliver": Counter()}
        self.sink.observe = self._observe
        self.counts = Counter()
        self.frame_count = Counter()
        self.frame_bytes = Counter()
        self.bloom = BloomFilter(self.config.bloom_capacity, self.config.bloom_error_rate)
        self._always = self.config.ack_delay_ms is not None
        self._repair_bytes = {}
        self._busy_hint = 0
        self.last_t = p.start_ms
        self.busy_s = 0.0
        self.wait_s = 0.0
        self.on_progress = None

    # -------------------------------------------------------------- setup

    def _observe(self, batch: output.EventBatch) -> None:
        """Add a flush's received and delivered rows to the latency histograms (send time from ``sent_at``)."""
        for kind, hist in (("received", self.latency["send_to_shown"]), ("delivered", self.latency["send_to_deliver"])):
            rows = batch.of_kind(kind)
            if not rows.any():
                continue
            ids = batch.message_ids.filter(rows).dictionary_encode()
            sent_at = self.sent_at
            sent = np.array([sent_at[m] for m in ids.dictionary.to_pylist()], np.int64)
            ms, n = np.unique(batch.ts[rows] - sent[ids.indices.to_numpy()], return_counts=True)
            hist.update(dict(zip(ms.tolist(), n.tolist())))

    def start(self) -> None:
        p = self.p
        t0 = p.start_ms
        cfg = self.config
        heap = self.heap
        if self.out_dir is not None:
            self.out_dir.mkdir(parents=True, exist_ok=True)
        for r in self.owned:
            ch = self.chans[r] = MessageChannel(p.channel_id, self.pids[r], cfg, t0)
            d = ch.next_deadline()
            self.dl[r] = d
            heap.append((d, TICK, r, 0, None))
        mine = self.mine
        for k, (t, r) in enumerate(zip(self.plan.send_times, self.plan.senders)):
            if mine[r]:
                heap.append((t, SEND, k, 0, None))
        heap.append((self.plan.settle_ms, SETTLE, 0, 0, None))
        if self.timeline is not None:
            tl = self.timeline
            for r in self.owned:
                online = not tl.initially_offline(r)
                self.online[r] = online
                heap.append((tl.next_toggle(r, t0, online), CHURN, r, 0, None))
        heapq.heapify(heap)

    # ------------------------------------------------------------- events

    def _send(self, k: int, t: int) -> None:
        p = self.p
        r = self.plan.senders[k]
        pid = self.pids[r]
        content = f"sim message {k} from {pid} ".encode()
        if len(content) < p.content_bytes:
            content += b"." * (p.content_bytes - len(content))
        out = self.chans[r].send(content, t)
        size = self._publish(r, out, t)
        self.sink.rows.extend((t, "sent", out.message_id, pid, r, out.lamport_timestamp, size))
        self._tick_at(r, t)

    def _churn(self, r: int, gen: int, t: int) -> None:
        tl = self.timeline
        if not self.churning or tl is None:  # (churning implies a timeline)
            return
        online = not self.online[r]
        if online:
            self._come_online(r, t)
        else:
            self.online[r] = False
            self.counts["went_offline"] += 1
            if self.n_stores:
                self._store_went_offline(r, t)
        heapq.heappush(self.heap, (tl.next_toggle(r, t, online), CHURN, r, gen + 1, None))

    def _come_online(self, r: int, t: int) -> None:
        self.online[r] = True
        self.counts["came_online"] += 1
        evs = self.chans[r].resend_now(t)
        if evs:
            self._handle(r, evs, t, None)
        if self.n_stores:
            self._store_came_online(r, t)
        self._tick_at(r, t)

    def _settle(self, t: int) -> None:
        if self.p.settle == "clean":
            self.loss = 0.0
            self.duplicate = 0.0
            self.churning = False
            for r in self.owned:
                if not self.online[r]:
                    self._come_online(r, t)

    # ---------------------------------------------------------------- run

    def next_time(self) -> int:
        return self.heap[0][0] if self.heap else INF

    def run(self, t_end: int) -> None:
        """Process every event before ``t_end`` (exclusive)."""
        self.until = t_end
        heap = self.heap
        pop = heapq.heappop
        dl = self.dl
        chans = self.chans
        sink = self.sink
        rows = sink.rows
        limit = sink.limit
        steps = 0
        started = time.perf_counter()
        try:
            with collection_paused():  # (the engine makes no reference cycles: see there)
                while heap and heap[0][0] < t_end:
                    t, kind, a, b, obj = pop(heap)
                    if kind == ARRIVALS:
                        self._arrivals(cast(Cursor, obj), t_end)  # (the kind says what obj is: see schedule)
                    elif kind == TICK:
                        if dl[a] != t:
                            continue  # stale
                        ch = chans[a]
                        evs = ch.tick(t)
                        if evs:
                            self._handle(a, evs, t, None)
                        d = ch.next_deadline()
                        if d <= t:
                            d = t + 1
                        dl[a] = d
                        heapq.heappush(heap, (d, TICK, a, 0, None))
                        self.counts["ticks"] += 1
                    elif kind == SEND:
                        self._send(a, t)
                    elif kind == CHURN:
                        self._churn(a, b, t)
                    elif kind == STORE:
                        self._store_event(a, cast(StoreOp, obj), t)
                    elif kind == SETTLE:
                        self._settle(t)
                    if len(rows) >= limit:
                        sink.flush()
                    steps += 1
                    if not steps & 4095 and self.on_progress is not None:
                        self.last_t = t
                        self.on_progress(t)
        finally:
            self.busy_s += time.perf_counter() - started

    def quiescent(self) -> bool:
        """Idle: no frame but syncs in flight here, and no owned member has work beyond periodic syncs.

        (The simulation stops once this holds at every check for a quiet period: see
        :func:`~sdschat.sim.clock.quiet_period_ms`.)
        """
        if self.busy_cursors or self.st_outstanding or self.skipped_until >= self.until:
            return False
        owned = self.owned
        chans = self.chans
        n = len(owned)
        start = self._busy_hint
        for k in range(n):
            j = (start + k) % n
            if chans[owned[j]].pending():
                self._busy_hint = j
                return False
        return True

    @no_gc
    def finish(self) -> dict[str, Any]:
        """Flush events; return this shard's part of the results (plain data, picklable)."""
        self.sink.close()
        logs = []
        stats: Counter = Counter()
        for r in self.owned:
            ch = self.chans[r]
            log = ch.log
            logs.append(
                (
                    r,
                    len(log),
                    output.log_hash(log),
                    self.online[r],
                    len(ch.outgoing_ids),
                    len(ch.incoming_ids),
                    len(ch.missing_ids),
                    len(ch.repair_request_ids),
                )
            )
            stats.update(ch.stats)
        in_flight: dict[tuple[int, int], int] = {}
        for item in self.heap:
            if item[1] == ARRIVALS:
                cur = cast(Cursor, item[4])
                in_flight[cur.key] = len(cur.times) - cur.i
        for last, key, due in self._skips:  # skipped copies due after the end are still in flight
            if last >= self.until:
                k = int(np.count_nonzero(due >= self.until))
                in_flight[key] = in_flight.get(key, 0) + k
                self.frame_recv[key][1] -= k
                self.counts["receives"] -= k
                self.held_skipped -= k
        if self.held_skipped:
            stats["duplicates"] += self.held_skipped
            self.counts["receives_skipped_held"] += self.held_skipped
        return {
            "logs": logs,
            "frames_published": self.frames_published,
            "frame_recv": self.frame_recv,
            "counts": dict(self.counts),
            "frame_count": dict(self.frame_count),
            "frame_bytes": dict(self.frame_bytes),
            "kind_counts": dict(self.sink.kind_counts),
            "latency": {k: dict(v) for k, v in self.latency.items()},
            "rows": self.sink.written,
            "shards": list(self.sink.shards),
            "engine_stats": dict(stats),
            "copies_in_flight": sum(in_flight.values()),
            "peak_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            "busy_s": round(self.busy_s, 2),
            "wait_s": round(self.wait_s, 2),
            "cpu_s": round(sum(resource.getrusage(resource.RUSAGE_SELF)[:2]), 2),
        }
