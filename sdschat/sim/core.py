"""The discrete-event simulator: a group of real ``MessageChannel`` engines on a broadcast network.

Virtual time is whole milliseconds. Each :class:`Shard` owns some members (all
of them when there is one worker) and one heap of what happens to them, in a
fixed order: a key ``(t, kind, a, b)`` with kinds, at equal times,

1. ``ARRIVALS`` -- deliveries of a broadcast frame (``a, b`` = publisher,
   its frame counter). When a member publishes a frame, the network draws
   for every other member whether the copy is lost, its latency, and whether
   a duplicate follows; the copies for this shard's members are sorted by
   arrival time into one *cursor*. The frame is parsed once
   (:func:`sdschat.sds.wire.parse_pb`) and read once into the engine's
   :class:`~sdschat.sds.channel.Frame` (fields, causal history, validity
   checks, the sender's half of the response-group hash), and the bloom
   positions of its id are computed once; every receiver gets the same
   ``Frame`` through :meth:`~sdschat.sds.MessageChannel.receive_parsed`. A
   popped cursor delivers copies for as long as its next key is below the
   heap's top, then goes back: one heap operation per batch of receivers, not
   per receiver. Event rows go into one flat list (no object per row; see
   :class:`~sdschat.sim.output.EventSink`).
2. ``SEND`` -- an application message (times and senders from
   :func:`~sdschat.sim.plan.make_plan`).
3. ``SETTLE`` -- sending is over (with ``settle="clean"`` the network turns
   lossless and everyone comes online).
4. ``CHURN`` -- a member goes offline or comes back (then it rebroadcasts its
   outgoing buffer with ``resend_now``, as the node does on reconnecting).
5. ``TICK`` -- a member's periodic duties. Each member has one scheduled tick
   at its engine's :meth:`~sdschat.sds.MessageChannel.next_deadline`; after a
   receive the deadline is re-read only when the events returned can have
   brought it forward (a gap noticed, a repair answer scheduled, or delayed
   acks configured). Stale ticks are skipped when popped, so no member is
   ticked unless it has something due.

A member's engine therefore sees the same calls in the same order however the
members are split, and every random draw is keyed by what it is about
(:mod:`sdschat.sim.plan`): the same seed gives the same events for any number
of workers.

**Workers** (``workers > 1``): each worker process (forked) runs one shard
(members ``r`` with ``r % workers == w``). They synchronise conservatively
without a barrier (:func:`_run_peer`): each advances in steps of a quarter of
the minimum latency (the lookahead) and after each step sends the others,
directly over one socket per pair, the frames it published and the promise
that it has processed every event before the step's end; a frame published
at ``t`` cannot arrive before ``t + lookahead``, so a worker may process every
event before ``min(promises) + lookahead``. A faster worker thus runs up to
the lookahead ahead of a slower one instead of waiting for it at every
window, and nothing waits for a coordinator (the parent only collects
progress and results). Workers write their event shards at the same
virtual times (:data:`FLUSH_GRID_MS`), so one writing does not hold the
others back. Quiescence is checked at fixed times (every
:data:`CHECK_INTERVAL_MS` after the last send), where every worker stops and
all compare notes, so one and several workers stop at the same point; the
run stops once the group has been idle at every check for
:func:`quiet_period_ms`. The cyclic garbage collector is off while a shard
lives (:func:`_no_gc`): the engine makes no reference cycles, and full
collections over tens of millions of objects cost seconds each.

Engine events become event rows exactly as the node maps them
(:class:`sdschat.node.receive.Receiver`); see :mod:`sdschat.sim.output`.
"""

from __future__ import annotations

import bisect
import dataclasses
import functools
import gc
import heapq
import json
import os
import pickle
import resource
import select
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from sdschat.sds import (
    Acknowledged,
    BloomFilter,
    Delivered,
    Evicted,
    GapDetected,
    Lost,
    MessageChannel,
    Missing,
    Outgoing,
    PossiblyAcknowledged,
    Rejected,
    RepairRequested,
    RepairScheduled,
    RepairServed,
    SyncReceived,
)
from sdschat.sds.channel import Frame
from sdschat.sds.wire import parse_pb

from . import output
from .params import SimParams, channel_config
from .plan import RNG_NETWORK, ChurnTimeline, Plan, make_plan, rng

__all__ = ["Shard", "SimResult", "simulate", "CHECK_INTERVAL_MS", "participant_ids", "quiet_period_ms"]

INF = 1 << 62
ARRIVALS, SEND, SETTLE, CHURN, TICK = 1, 2, 3, 4, 5
#: how often (virtual ms, from the last send on) the settle phase checks for quiescence
CHECK_INTERVAL_MS = 5_000
#: with several workers, each writes its buffered events at the first step that crosses a multiple of this
#: (virtual ms) once the buffer is half a shard: balanced shards fill alike, so the workers write at about the
#: same wall time instead of each stalling the others in turn (a full buffer is still written at once)
FLUSH_GRID_MS = 10_000

_dumps = json.JSONEncoder(separators=(",", ":")).encode


def _ids(ids) -> str:
    """A JSON array of message ids. Ids here are engine-made (hex digests, ``sync-<hex>``): no escaping needed."""
    return '["' + '","'.join(ids) + '"]' if ids else "[]"


def _no_gc(fn):
    """Run ``fn`` with the cyclic garbage collector off (restored after).

    The engine makes no reference cycles, and with ~10,000 engines the heap
    holds tens of millions of objects: every full collection would walk them
    all (seconds each), triggered by allocations anywhere in the loop.
    """
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        was = gc.isenabled()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if was:
                gc.enable()
    return wrapper


ProgressFn = Callable[[dict[str, Any]], None]

#: a frame as it travels between workers:
#: (publisher, counter, t, data, reason, message_id, loss, duplicate)
FrameMsg = tuple


def participant_ids(n: int) -> list[str]:
    width = max(5, len(str(n - 1)))
    return [f"p{i:0{width}d}" for i in range(n)]


@dataclass
class SimResult:
    """What :func:`simulate` returns (``meta`` is also ``meta.json``)."""

    params: SimParams
    meta: dict[str, Any]
    log_hashes: list[str] = field(default_factory=list)
    out_dir: Path | None = None

    @property
    def converged(self) -> bool:
        return len(set(self.log_hashes)) <= 1


class _Cursor:
    """One frame's pending arrivals at this shard's members."""

    __slots__ = ("key", "pb", "positions", "times", "receivers", "i", "ctx")

    def __init__(self, key, pb, positions, times, receivers, ctx):
        self.key = key
        self.pb = pb
        self.positions = positions
        self.times = times
        self.receivers = receivers
        self.i = 0
        self.ctx = ctx


class Shard:
    """The members ``r % workers == wid`` of one simulation, and everything that happens to them."""

    def __init__(self, params: SimParams, plan: Plan, wid: int = 0, workers: int = 1,
                 out_dir: str | Path | None = None, *, shard_rows: int = 1_000_000, row_group_rows: int = 262_144,
                 frame_view: bool = True):
        p = self.p = params
        #: hand receivers the engine's :class:`~sdschat.sds.channel.Frame` (read once) instead of the protobuf message
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
        self.sink = output.EventSink(self.out_dir, p.channel_id, shard_rows, row_group_rows, prefix=prefix,
                                     seq_stride=workers, seq_offset=wid, participant_names=self.pids)
        self.owned = list(range(wid, n, workers))
        self.mine = np.zeros(n, dtype=bool)
        self.mine[self.owned] = True
        self.chans: list[MessageChannel | None] = [None] * n
        self.online = [True] * n
        self.dl = [INF] * n
        self.waiting: dict[int, set[str]] = {}
        self.heap: list[tuple] = []
        self.counter = [0] * n
        self.cursors = 0
        self.busy_cursors = 0  # cursors of frames other than syncs
        self.outbox: list[FrameMsg] = []
        self.frames_published: list[tuple] = []  # (publisher, counter, t, reason, message_id, size)
        self.frame_recv: dict[tuple[int, int], list[int]] = {}  # (publisher, counter) -> [copies, delivered]
        self.loss = p.loss
        self.duplicate = p.duplicate
        self.churning = p.churn is not None
        self.timeline = ChurnTimeline(p) if p.churn is not None else None
        self.counts: Counter = Counter()
        self.frame_count: Counter = Counter()
        self.frame_bytes: Counter = Counter()
        self.bloom = BloomFilter(self.config.bloom_capacity, self.config.bloom_error_rate)
        self._always = self.config.ack_delay_ms is not None
        self._repair_bytes: dict[int, int] = {}
        self._busy_hint = 0
        self.last_t = p.start_ms
        self.busy_s = 0.0  # wall time spent processing events (the rest, with workers, is waiting for the others)
        self.wait_s = 0.0  # with workers: wall time blocked waiting for another worker's promise or flag
        #: called as ``on_progress(t)`` about every 4,096 events (single-worker progress display)
        self.on_progress: Callable[[int], None] | None = None

    # -------------------------------------------------------------- setup

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

    # ------------------------------------------------------------ network

    def _publish(self, r: int, out: Outgoing, t: int) -> int:
        """Member ``r`` broadcasts ``out`` at ``t``; returns the frame's size."""
        data = out.data
        size = len(data)
        reason = out.reason
        self.frame_count[reason] += 1
        self.frame_bytes[reason] += size
        c = self.counter[r]
        self.counter[r] = c + 1
        self.frames_published.append((r, c, t, reason, out.message_id, size))
        if not self.online[r]:
            self.counts["frames_unpublished_offline"] += 1
            return size
        fm = (r, c, t, data, reason, out.message_id, self.loss, self.duplicate)
        if self.workers > 1:
            self.outbox.append(fm)
        self.ingest_one(fm)
        return size

    def ingest(self, frames: list[FrameMsg]) -> None:
        for fm in frames:
            self.ingest_one(fm)

    def ingest_one(self, fm: FrameMsg) -> None:
        """Schedule this shard's copies of a broadcast frame."""
        r, c, t, data, reason, mid, loss, dup = fm
        n = self.n
        g = rng(self.p.seed, RNG_NETWORK, r, c)
        lo, hi = self.p.latency_ms
        keep = g.random(n) >= loss if loss > 0 else np.ones(n, dtype=bool)
        keep[r] = False
        lat = g.integers(lo, hi + 1, n) if hi > lo else None
        mine = self.mine
        lost = int(np.count_nonzero(mine & ~keep)) - (1 if mine[r] else 0)
        keep &= mine
        recv = np.flatnonzero(keep)
        times = lat[recv] if lat is not None else np.full(len(recv), lo, dtype=np.int64)
        if dup > 0:
            d = g.random(n) < dup
            lat2 = g.integers(lo, hi + 1, n) if hi > lo else None
            d &= keep
            drecv = np.flatnonzero(d)
            if len(drecv):
                recv = np.concatenate((recv, drecv))
                times = np.concatenate((times, lat2[drecv] if lat2 is not None else np.full(len(drecv), lo)))
                self.counts["copies_duplicated"] += len(drecv)
        self.counts["copies_lost"] += lost
        copies = len(recv)
        self.frame_recv[(r, c)] = [copies, 0]
        if copies == 0:
            return
        order = np.argsort(times, kind="stable")
        times_l = (times[order] + t).tolist()
        pb = parse_pb(data)
        if self.frame_view:
            pb = Frame(pb)
        positions = self.bloom.positions(mid) if reason != "sync" else None
        # what rows need to know about the frame: (node-level reason, publisher, frame sender, creation time)
        ctx = (reason, self.pids[r], pb.sender_id, t)
        cur = _Cursor((r, c), pb, positions, times_l, recv[order].tolist(), ctx)
        self.cursors += 1
        if reason != "sync":
            self.busy_cursors += 1
        heapq.heappush(self.heap, (times_l[0], ARRIVALS, r, c, cur))

    def _arrivals(self, cur: _Cursor, t_end: int) -> None:
        times = cur.times
        recv = cur.receivers
        n = len(times)
        i = cur.i
        heap = self.heap
        chans = self.chans
        online = self.online
        dl = self.dl
        waiting = self.waiting
        add = self.sink.rows.extend  # flat rows: see output.EventSink
        pb = cur.pb
        pos = cur.positions
        always = self._always
        pr, pc = cur.key
        # process arrivals while (t, ARRIVALS, pr, pc) sorts before the heap's top, and before t_end
        lim = t_end - 1
        if heap:
            top = heap[0]
            if top[0] <= lim:
                lim = top[0] if (ARRIVALS, pr, pc) < (top[1], top[2], top[3]) else top[0] - 1
        first = i
        offline = 0
        while i < n:
            t = times[i]
            if t > lim:
                break
            r = recv[i]
            i += 1
            if not online[r]:
                offline += 1
                continue
            ch = chans[r]
            evs = ch.receive_parsed(pb, t, None, pos)
            if not evs:
                continue
            if len(evs) == 1 and not always:  # the common single-event outcomes, inline
                e = evs[0]
                tp = type(e)
                if tp is Delivered:
                    mid = e.message_id
                    if not e.repaired and not e.after_lost:
                        w = waiting.get(r)
                        if w is None or mid not in w:
                            s = e.sender_id
                            lam = e.lamport_timestamp
                            add((t, "received", mid, s, r, lam, None, t, "delivered", mid, s, r, lam, None))
                            continue
                elif tp is SyncReceived:
                    add((t, "sync_received", e.message_id, e.sender_id, r, e.lamport_timestamp, None))
                    continue
            if self._handle(r, evs, t, cur.ctx) or always:
                d = ch.next_deadline()
                if d < t:
                    d = t
                if d < dl[r]:
                    dl[r] = d
                    heapq.heappush(heap, (d, TICK, r, 0, None))
                    if d < lim:
                        lim = d  # a tick at d sorts after arrivals at d
        delivered = i - first - offline
        self.frame_recv[cur.key][1] += delivered
        if offline:
            self.counts["copies_to_offline"] += offline
        self.counts["receives"] += delivered
        if i < n:
            cur.i = i
            heapq.heappush(heap, (times[i], ARRIVALS, pr, pc, cur))
        else:
            self.cursors -= 1
            if cur.ctx[0] != "sync":
                self.busy_cursors -= 1

    # ------------------------------------------------------------- events

    def _handle(self, r: int, evs: list, t: int, ctx: tuple | None) -> bool:
        """Engine events of member ``r`` -> rows (and frames). True if its deadline may have moved earlier."""
        pid = self.pids[r]
        add = self.sink.rows.extend  # flat rows: see output.EventSink
        earlier = False
        for e in evs:
            tp = type(e)
            if tp is Delivered:
                mid = e.message_id
                w = self.waiting.get(r)
                if w is not None and mid in w:
                    w.discard(mid)
                    if not w:
                        del self.waiting[r]
                else:
                    add((t, "received", mid, e.sender_id, r, e.lamport_timestamp, None))
                detail = None
                if e.repaired or e.after_lost:
                    reason = ctx[0] if ctx else None
                    detail = _dumps({"repaired": e.repaired, "via": reason, "publisher": ctx[1] if ctx else None,
                                     "after_lost": list(e.after_lost)})
                add((t, "delivered", mid, e.sender_id, r, e.lamport_timestamp, detail))
            elif tp is Outgoing:
                size = self._publish(r, e, t)
                reason = e.reason
                if reason == "resend":
                    st = self.chans[r].outgoing_state(e.message_id)
                    add((t, "resent", e.message_id, pid, r, e.lamport_timestamp,
                            _dumps({"resends": st[1] if st else None, "bytes": size})))
                elif reason == "sync":
                    add((t, "sync_sent", e.message_id, pid, r, e.lamport_timestamp, _dumps({"bytes": size})))
                elif reason == "repair":
                    self._repair_bytes[r] = size  # reported with the RepairServed that follows
                else:
                    add((t, "sent", e.message_id, pid, r, e.lamport_timestamp, _dumps({"bytes": size})))
            elif tp is Acknowledged:
                if ctx is not None:
                    d = _dumps({"by_bloom": e.by_bloom, "by": ctx[2], "frame_ts": ctx[3]})
                else:
                    d = _dumps({"by_bloom": e.by_bloom})
                add((t, "acked", e.message_id, pid, r, None, d))
            elif tp is PossiblyAcknowledged:
                if ctx is not None:
                    d = _dumps({"count": e.count, "by": ctx[2], "frame_ts": ctx[3]})
                else:
                    d = _dumps({"count": e.count})
                add((t, "possibly_acked", e.message_id, pid, r, None, d))
            elif tp is Missing:
                mid = e.message_id
                w = self.waiting.get(r)
                if w is None:
                    self.waiting[r] = {mid}
                else:
                    w.add(mid)
                s = e.sender_id
                lam = e.lamport_timestamp
                add((t, "received", mid, s, r, lam, None,
                     t, "missing", mid, s, r, lam,
                     '{"missing":' + _ids([h.message_id for h in e.missing]) + ',"waiting_on":'
                     + _ids(e.waiting_on) + "}"))
                earlier = True
            elif tp is SyncReceived:
                add((t, "sync_received", e.message_id, e.sender_id, r, e.lamport_timestamp, None))
            elif tp is GapDetected:
                add((t, "missing", None, e.sender_id, r, None,
                        '{"missing":' + _ids([h.message_id for h in e.missing]) + ',"source":"sync"}'))
                earlier = True
            elif tp is RepairScheduled:
                self.counts["repair_scheduled"] += 1
                earlier = True
            elif tp is RepairRequested:
                for mid in e.message_ids:
                    add((t, "repair_requested", mid, None, r, None, _dumps({"carrier": e.carrier_id})))
            elif tp is RepairServed:
                size = self._repair_bytes.pop(r, None)
                add((t, "repair_served", e.message_id, e.sender_id, r, None,
                        _dumps({"bytes": size}) if size is not None else None))
            elif tp is Lost:
                add((t, "lost", e.message_id, e.sender_id, r, None, _dumps({"dependants": list(e.dependants)})))
                earlier = True
            elif tp is Rejected:
                self.counts["rejected"] += 1
                add((t, "rejected", e.message_id, e.sender_id, r, None, _dumps({"reason": e.reason})))
            elif tp is Evicted:
                self.counts[f"evicted_{e.buffer}"] += 1
                earlier = True
            else:  # EphemeralReceived: the simulator sends none
                self.counts[f"event_{tp.__name__}"] += 1
        return earlier

    def _tick_at(self, r: int, t: int) -> None:
        d = self.chans[r].next_deadline()
        if d < t:
            d = t
        if d < self.dl[r]:
            self.dl[r] = d
            heapq.heappush(self.heap, (d, TICK, r, 0, None))

    def _send(self, k: int, t: int) -> None:
        p = self.p
        r = self.plan.senders[k]
        pid = self.pids[r]
        content = f"sim message {k} from {pid} ".encode()
        if len(content) < p.content_bytes:
            content += b"." * (p.content_bytes - len(content))
        out = self.chans[r].send(content, t)
        size = self._publish(r, out, t)
        self.sink.rows.extend((t, "sent", out.message_id, pid, r, out.lamport_timestamp, _dumps({"bytes": size})))
        self._tick_at(r, t)

    def _churn(self, r: int, gen: int, t: int) -> None:
        if not self.churning:
            return
        online = not self.online[r]
        if online:
            self._come_online(r, t)
        else:
            self.online[r] = False
            self.counts["went_offline"] += 1
        heapq.heappush(self.heap, (self.timeline.next_toggle(r, t, online), CHURN, r, gen + 1, None))

    def _come_online(self, r: int, t: int) -> None:
        self.online[r] = True
        self.counts["came_online"] += 1
        evs = self.chans[r].resend_now(t)
        if evs:
            self._handle(r, evs, t, None)
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
        heap = self.heap
        pop = heapq.heappop
        dl = self.dl
        chans = self.chans
        sink = self.sink
        rows = sink.rows
        limit = sink.limit
        steps = 0
        started = time.perf_counter()
        gc_was = gc.isenabled()
        gc.disable()  # the engine makes no reference cycles; collections over millions of objects cost ~15%
        try:
            while heap and heap[0][0] < t_end:
                t, kind, a, b, obj = pop(heap)
                if kind == ARRIVALS:
                    self._arrivals(obj, t_end)
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
                elif kind == SETTLE:
                    self._settle(t)
                if len(rows) >= limit:
                    sink.flush()
                steps += 1
                if not steps & 4095 and self.on_progress is not None:
                    self.last_t = t
                    self.on_progress(t)
        finally:
            if gc_was:
                gc.enable()
            self.busy_s += time.perf_counter() - started

    def quiescent(self) -> bool:
        """Idle: no frame but syncs in flight here, and no owned member has work beyond periodic syncs.

        (The simulation stops once this holds at every check for a quiet period: see :func:`quiet_period_ms`.)
        """
        if self.busy_cursors:
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

    @_no_gc
    def finish(self) -> dict[str, Any]:
        """Flush events; return this shard's part of the results (plain data, picklable)."""
        self.sink.close()
        logs = []
        stats: Counter = Counter()
        for r in self.owned:
            ch = self.chans[r]
            log = ch.log
            logs.append((r, len(log), output.log_hash(log), self.online[r], len(ch.outgoing_ids),
                         len(ch.incoming_ids), len(ch.missing_ids), len(ch.repair_request_ids)))
            stats.update(ch.stats)
        in_flight = {}
        for item in self.heap:
            if item[1] == ARRIVALS:
                in_flight[item[4].key] = len(item[4].times) - item[4].i
        return {
            "logs": logs,
            "frames_published": self.frames_published,
            "frame_recv": self.frame_recv,
            "counts": dict(self.counts),
            "frame_count": dict(self.frame_count),
            "frame_bytes": dict(self.frame_bytes),
            "kind_counts": dict(self.sink.kind_counts),
            "rows": self.sink.written,
            "shards": list(self.sink.shards),
            "engine_stats": dict(stats),
            "copies_in_flight": sum(in_flight.values()),
            "peak_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
            "busy_s": round(self.busy_s, 2),
            "wait_s": round(self.wait_s, 2),
            "cpu_s": round(sum(resource.getrusage(resource.RUSAGE_SELF)[:2]), 2),
        }


# ------------------------------------------------------------------ drivers


class _Clock:
    """The windowing rule every worker applies identically (so all agree without a coordinator)."""

    def __init__(self, p: SimParams, plan: Plan, lookahead: int) -> None:
        self.lookahead = lookahead  # 0: no windows (one worker)
        self.end = plan.settle_ms + p.horizon_ms
        self.next_check = plan.settle_ms + CHECK_INTERVAL_MS
        self.quiet = quiet_period_ms(p)
        self.idle_since: int | None = None
        self.stop_reason = "horizon"
        self.stop_t = self.end
        self.windows = 0

    def window_end(self, lower: int) -> int:
        """End (exclusive) of the next window, given a lower bound on every worker's next event."""
        cap = min(self.next_check, self.end + 1)
        if self.lookahead == 0 or lower >= cap:
            return cap
        return min(lower + self.lookahead, cap)

    def checked(self, t_end: int, idle: bool) -> bool:
        """Record a quiescence check at ``t_end``; True if the run stops there."""
        if idle:
            self.idle_since = t_end if self.idle_since is None else self.idle_since
            if t_end - self.idle_since >= self.quiet:
                self.stop_reason, self.stop_t = "quiescent", t_end
                return True
        else:
            self.idle_since = None
        self.next_check += CHECK_INTERVAL_MS
        return False


@_no_gc
def _run_alone(shard: Shard, clock: _Clock) -> None:
    """One worker: windows only at the quiescence checks."""
    shard.start()
    while True:
        t_end = clock.window_end(shard.next_time())
        shard.run(t_end)
        clock.windows += 1
        if t_end == clock.next_check and clock.checked(t_end, shard.quiescent()):
            return
        if t_end > clock.end:
            return


class _Links:
    """Messages to and from the other workers: one socket per pair, non-blocking, length-prefixed pickles.

    Writes never block (what the socket does not take waits in a buffer and
    goes out at the next :meth:`flush`, or while :meth:`receive` waits), so
    two workers sending to each other at once cannot deadlock on full socket
    buffers however large their frames.
    """

    _HEAD = 8

    def __init__(self, conns: dict[int, Any]) -> None:
        self.conns = dict(sorted(conns.items()))  # the Connection objects own the file descriptors
        self.fds = {peer: conn.fileno() for peer, conn in self.conns.items()}
        for fd in self.fds.values():
            os.set_blocking(fd, False)
        self.out = {peer: bytearray() for peer in self.fds}
        self.inb = {peer: bytearray() for peer in self.fds}

    def send_all(self, msg: Any) -> None:
        data = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
        head = len(data).to_bytes(self._HEAD, "little")
        for buf in self.out.values():
            buf += head
            buf += data
        self.flush()

    def flush(self) -> None:
        for peer, buf in self.out.items():
            while buf:
                try:
                    n = os.write(self.fds[peer], buf)
                except BlockingIOError:
                    break
                del buf[:n]

    def drain(self) -> None:
        """Block until everything queued has been written."""
        self.flush()
        while any(self.out.values()):
            select.select([], [self.fds[p] for p, b in self.out.items() if b], [], 5.0)
            self.flush()

    def receive(self, block: bool) -> list[tuple[int, Any]]:
        """The messages that have arrived, as ``(peer, message)`` in order per peer.

        With ``block``, wait until there is at least one (flushing queued output meanwhile).
        """
        head = self._HEAD
        got: list[tuple[int, Any]] = []
        while True:
            for peer, fd in self.fds.items():
                buf = self.inb[peer]
                while True:
                    try:
                        chunk = os.read(fd, 1 << 20)
                    except BlockingIOError:
                        break
                    if not chunk:
                        raise RuntimeError(f"simulation worker {peer} went away")
                    buf += chunk
                    if len(chunk) < 1 << 20:
                        break
                pos = 0
                end = len(buf)
                while end - pos >= head:
                    size = int.from_bytes(buf[pos:pos + head], "little")
                    if end - pos - head < size:
                        break
                    got.append((peer, pickle.loads(buf[pos + head:pos + head + size])))
                    pos += head + size
                if pos:
                    del buf[:pos]
            if got or not block:
                return got
            pending = [self.fds[p] for p, b in self.out.items() if b]
            _, writable, _ = select.select(list(self.fds.values()), pending, [], 5.0)
            if writable:
                self.flush()


@_no_gc
def _run_peer(shard: Shard, clock: _Clock, links: _Links, report: Callable[[int], None] | None) -> None:
    """One of several workers: conservative parallel simulation without a barrier.

    Every worker processes events in steps of a few virtual milliseconds and,
    after each step, sends the others ``("p", t, frames)``: the frames it
    published, and the promise that it has processed every event before
    ``t`` (so whatever it publishes later is published at ``t`` or after, and
    arrives at ``t + lookahead`` or after). A worker may therefore process
    every event before ``min(promises) + lookahead``: a fast worker runs
    ahead of a slow one by up to the lookahead instead of waiting for it at
    every window boundary, and nobody waits for a round trip. At a
    quiescence check time every worker stops there, waits until every other
    has promised that time (so all frames published before it are
    scheduled everywhere), then all exchange ``("q", t, idle)`` and take the
    same decision. Which events happen, and in which order for each member,
    does not depend on the steps (see :class:`Shard`).
    """
    shard.start()
    lookahead = clock.lookahead
    step = max(1, lookahead // 4)
    start = shard.p.start_ms
    promised = dict.fromkeys(links.fds, start)
    sink = shard.sink
    half_shard = sink.limit // 2
    flags: dict[int, bool] = {}
    done = start  # every event before `done` has been processed
    last = 0.0

    def take(block: bool) -> None:
        if block:
            t0 = time.perf_counter()
            got = links.receive(True)
            shard.wait_s += time.perf_counter() - t0
        else:
            got = links.receive(False)
        for peer, msg in got:
            if msg[0] == "p":
                shard.ingest(msg[2])
                promised[peer] = msg[1]
            else:  # ("q", t, idle)
                flags[peer] = msg[2]

    while True:
        cap = min(clock.next_check, clock.end + 1)
        bound = min(min(promised.values()) + lookahead, cap)
        if done < bound:
            t_end = min(bound, done + step)
            shard.run(t_end)
            crossed = t_end // FLUSH_GRID_MS != done // FLUSH_GRID_MS
            done = t_end
            clock.windows += 1
            out, shard.outbox = shard.outbox, []
            links.send_all(("p", done, out))
            if crossed and len(sink.rows) >= half_shard:
                sink.flush()  # after the promise: the others go on meanwhile
            take(False)
            if report is not None and time.perf_counter() - last >= 0.25:
                last = time.perf_counter()
                report(done)
            continue
        if done < cap:
            take(True)  # a slower worker holds us back: wait for its next promise
            continue
        if cap > clock.end:
            links.drain()  # the others may still need our last promise
            return
        # quiescence check at `cap`: every frame published before it must be scheduled everywhere
        while min(promised.values()) < cap:
            take(True)
        idle = shard.quiescent()
        links.send_all(("q", cap, idle))
        while len(flags) < len(promised):
            take(True)
        everyone = idle and all(flags.values())
        flags.clear()
        if clock.checked(cap, everyone):
            links.drain()  # the others may still need our flag
            return


def _worker_main(ctl, peer_conns: dict, args: tuple, kwargs: dict) -> None:  # pragma: no cover - child process
    """Entry point of a worker process (covered through :func:`simulate`)."""
    try:
        p, plan, wid, workers, out = args
        shard = Shard(p, plan, wid, workers, out, **kwargs)
        clock = _Clock(p, plan, p.latency_ms[0])
        report = (lambda t: ctl.send(("progress", t))) if wid == 0 else None
        _run_peer(shard, clock, _Links(peer_conns), report)
        result = shard.finish()
        result.update(stop_reason=clock.stop_reason, stop_t=clock.stop_t, windows=clock.windows)
        ctl.send(("done", result))
    except BaseException as exc:  # report, then exit
        try:
            ctl.send(("error", f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"))
        except Exception:
            pass


def quiet_period_ms(p: SimParams) -> int:
    """How long the group must stay idle before the settle phase stops early.

    Idle (:meth:`Shard.quiescent`) is not yet settled: a member may not know
    that a message exists until someone's periodic sync names it in its causal
    history. Waiting two sync rounds (interval + jitter + the longest latency,
    twice) gives the members who are up to date the chance to say so.
    """
    cfg = channel_config(p)
    return 2 * (cfg.sync_interval_ms + cfg.sync_jitter_ms + p.latency_ms[1])


@_no_gc
def simulate(params: SimParams, out_dir: str | Path | None = None, *, workers: int = 1,
             progress: ProgressFn | None = None, progress_interval_s: float = 0.25,
             shard_rows: int = 1_000_000, row_group_rows: int = 262_144, frame_view: bool = True) -> SimResult:
    """Run one scenario; write its output to ``out_dir`` (None: write nothing, just return the results).

    ``workers > 1`` runs the members in that many processes (same events as
    one worker); it needs a minimum latency of at least 1 ms (the lookahead)
    and falls back to one worker otherwise.
    """
    wall0 = time.perf_counter()
    p = params
    plan = make_plan(p)
    lo = p.latency_ms[0]
    workers = max(1, min(int(workers), p.participants))
    if lo < 1:
        workers = 1
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        for old in list(out.glob(output.SHARD_GLOB)) + [out / output.META_FILE]:
            if old.exists():
                old.unlink()
    kw = {"shard_rows": shard_rows, "row_group_rows": row_group_rows, "frame_view": frame_view}
    settle = plan.settle_ms
    end = settle + p.horizon_ms
    last = 0.0

    def report(now: int, done: bool = False) -> None:
        nonlocal last
        if progress is None or not (done or time.perf_counter() - last >= progress_interval_s):
            return
        last = time.perf_counter()
        progress({"sent": bisect.bisect_left(plan.send_times, now), "messages": p.messages, "now_ms": now,
                  "start_ms": p.start_ms, "settle_ms": settle, "end_ms": end, "done": done,
                  "settling": now > settle})

    if workers == 1:
        shard = Shard(p, plan, 0, 1, out, **kw)
        if progress is not None:
            shard.on_progress = report
        clock = _Clock(p, plan, 0)
        _run_alone(shard, clock)
        parts = [shard.finish()]
        stop_reason, stop_t, windows = clock.stop_reason, clock.stop_t, clock.windows
    else:
        parts, stop_reason, stop_t, windows = _run_processes(p, plan, workers, out, kw, report)
    report(stop_t, done=True)
    return _merge(p, plan, parts, out, workers, stop_reason, stop_t, windows, time.perf_counter() - wall0)


def _run_processes(p: SimParams, plan: Plan, workers: int, out: Path | None, kw: dict, report) -> tuple:
    import multiprocessing as mp
    from multiprocessing.connection import wait

    # fork: no re-import of the caller's __main__ (spawn would need an ``if __name__ == "__main__"`` guard
    # in every script that calls simulate); the parent has no threads of ours at this point
    ctx = mp.get_context("fork")
    pairs: dict[tuple[int, int], tuple] = {}
    for i in range(workers):
        for j in range(i + 1, workers):
            pairs[(i, j)] = ctx.Pipe(duplex=True)
    procs, ctls = [], []
    try:
        for w in range(workers):
            mine = {}
            for (i, j), (ci, cj) in pairs.items():
                if i == w:
                    mine[j] = ci
                elif j == w:
                    mine[i] = cj
            parent, child = ctx.Pipe(duplex=True)
            proc = ctx.Process(target=_worker_main, args=(child, mine, (p, plan, w, workers, out), kw), daemon=True)
            proc.start()
            child.close()
            procs.append(proc)
            ctls.append(parent)
        for ci, cj in pairs.values():  # the children hold their ends
            ci.close()
            cj.close()
        results: dict[int, dict] = {}
        pending = dict(enumerate(ctls))
        while pending:
            for conn in wait(list(pending.values())):
                w = next(k for k, c in pending.items() if c is conn)
                try:
                    kind, value = conn.recv()
                except EOFError:
                    raise RuntimeError(f"simulation worker {w} died (exit code {procs[w].exitcode})") from None
                if kind == "progress":
                    report(value)
                elif kind == "error":
                    raise RuntimeError(f"simulation worker {w} failed: {value}")
                else:
                    results[w] = value
                    del pending[w]
    finally:
        for conn in ctls:
            conn.close()
        for proc in procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)
    parts = [results[w] for w in range(workers)]
    first = parts[0]
    if any((r["stop_reason"], r["stop_t"]) != (first["stop_reason"], first["stop_t"]) for r in parts):
        raise RuntimeError("simulation workers disagree on when the run ended (a bug)")
    return parts, first["stop_reason"], first["stop_t"], first["windows"]


def _merge(p: SimParams, plan: Plan, parts: list[dict], out: Path | None, workers: int, stop_reason: str,
           stop_t: int, windows: int, wall: float) -> SimResult:
    pids = participant_ids(p.participants)
    logs = sorted(x for part in parts for x in part["logs"])
    hashes = [x[2] for x in logs]
    recv: dict[tuple[int, int], list[int]] = {}
    for part in parts:
        for k, (copies, delivered) in part["frame_recv"].items():
            acc = recv.setdefault(k, [0, 0])
            acc[0] += copies
            acc[1] += delivered
    published = sorted((f[2], f[0], f[1], f[3], f[4], f[5]) for part in parts for f in part["frames_published"])
    frames = []
    for no, (t, r, c, reason, mid, size) in enumerate(published):
        copies, delivered = recv.get((r, c), (0, 0))
        frames.append((no, t, pids[r], reason, mid, size, copies, delivered))

    def total(key: str) -> Counter:
        acc: Counter = Counter()
        for part in parts:
            acc.update(part[key])
        return acc

    kinds = dict(sorted(total("kind_counts").items()))
    frame_count = total("frame_count")
    frame_bytes = total("frame_bytes")
    counts = total("counts")
    counts["copies_in_flight_at_end"] = sum(part["copies_in_flight"] for part in parts)
    hash_counts = Counter(hashes)
    delivered = kinds.get("delivered", 0)
    sent = kinds.get("sent", 0)
    expected = sent * (p.participants - 1)
    bytes_published = sum(frame_bytes.values())
    bytes_received = sum(f[5] * f[7] for f in frames)
    rows = sum(part["rows"] for part in parts)
    config = channel_config(p)
    meta = {
        "format": "sdschat-sim/1",
        "params": p.to_json(),
        "seed": p.seed,
        "workers": workers,
        "engine_config": json.loads(json.dumps(dataclasses.asdict(config), default=str)),
        "participants": p.participants,
        "messages_sent": sent,
        "virtual_start_ms": p.start_ms,
        "settle_start_ms": plan.settle_ms,
        "virtual_end_ms": stop_t,
        "stop_reason": stop_reason,
        "windows": windows,
        "worker_busy_s": [part["busy_s"] for part in parts],
        "worker_cpu_s": [part["cpu_s"] for part in parts],
        "worker_wait_s": [part["wait_s"] for part in parts],
        "wall_time_s": round(wall, 3),
        "peak_rss_mb": round(max(part["peak_rss_kb"] for part in parts) / 1024, 1),
        "peak_rss_mb_total": round(sum(part["peak_rss_kb"] for part in parts) / 1024, 1),
        "events": rows,
        "event_kinds": kinds,
        "event_shards": sorted(s for part in parts for s in part["shards"]),
        "frames": dict(sorted(frame_count.items())),
        "frame_bytes": dict(sorted(frame_bytes.items())),
        "bytes_published": bytes_published,
        "bytes_received": bytes_received,
        "counts": dict(sorted(counts.items())),
        "engine_stats": dict(sorted(total("engine_stats").items())),
        "delivery_ratio": (delivered / expected) if expected else None,
        "bytes_received_per_delivery": (bytes_received / delivered) if delivered else None,
        "bytes_published_per_message": (bytes_published / sent) if sent else None,
        "converged": len(hash_counts) <= 1,
        "distinct_logs": len(hash_counts),
        "largest_agreeing": hash_counts.most_common(1)[0][1] if hash_counts else 0,
        "events_per_s": round(rows / wall, 1) if wall > 0 else None,
    }
    if out is not None:
        import pyarrow as pa

        cols = list(zip(*frames)) if frames else [[] for _ in output.FRAME_SCHEMA.names]
        output.write_table(out / output.FRAMES_FILE, pa.Table.from_arrays(
            [pa.array(col, f.type) for col, f in zip(cols, output.FRAME_SCHEMA)], schema=output.FRAME_SCHEMA))
        lcols = list(zip(*logs)) if logs else [[] for _ in range(8)]
        output.write_table(out / output.LOGS_FILE, pa.Table.from_arrays(
            [pa.array([pids[r] for r in lcols[0]], pa.string())]
            + [pa.array(col, f.type) for col, f in zip(lcols[1:], list(output.LOG_SCHEMA)[1:])],
            schema=output.LOG_SCHEMA))
        output.write_meta(out / output.META_FILE, meta)
    return SimResult(p, meta, hashes, out)
