"""Delivering a frame's copies into the members' engines, one batch per heap pop.

A popped :class:`~sdschat.sim.state.Cursor` delivers copies for as long as
its next key is below the heap's top, then goes back: one heap operation per
batch of receivers, not per receiver. Every receiver gets the same parsed
frame through :meth:`~sdschat.sds.MessageChannel.receive_parsed`; the common
single-event outcomes become rows inline, the rest go through
:meth:`~sdschat.sim.rows.EventRows._handle`. After a receive the member's
deadline is re-read only when the events returned can have brought it
forward (a gap noticed, a repair answer scheduled, or delayed acks
configured).
"""

from __future__ import annotations

import heapq
from typing import cast

import numpy as np

from sdschat.sds import Delivered, SyncReceived
from sdschat.sds.channel import Frame
from sdschat.sds.repair import hash64

from .schedule import ARRIVALS, INF, TICK
from .state import Cursor, FrameKey, Indices, ShardState

__all__ = ["Delivery"]

_EMPTY = (INF, 0, 0, 0)  # the top of an empty heap (only its time is read)
#: (asking, answering) for a frame that cannot call off repair work (a sync frame)
_NOTHING_PENDING = (False, False)


class Delivery(ShardState):
    """The receiving side of :class:`~sdschat.sim.shard.Shard` (its state: :class:`~sdschat.sim.state.ShardState`)."""

    def _tick_at(self, r: int, t: int) -> None:
        """Schedule member ``r``'s tick at its engine's deadline if that moved earlier."""
        d = self.chans[r].next_deadline()
        if d < t:
            d = t
        if d < self.dl[r]:
            self.dl[r] = d
            heapq.heappush(self.heap, (d, TICK, r, 0, None))

    def _hold(self, mid: str, r: int) -> None:
        """Member ``r`` received ``mid`` (its ``received`` row): it holds it from now on (see ``_arrivals``)."""
        held = self.held.get(mid)
        if held is None:
            held = self.held[mid] = bytearray(len(self.owned))
        held[r // self.workers] = 1

    def _skip_held_copies(
        self, key: FrameKey, pb: Frame, mid: str, recv: Indices, times: Indices, t: int
    ) -> tuple[Indices, Indices]:
        """A content frame's copies, less those that reach a member already holding ``mid`` that can never answer
        a repair request for it (not in its response group): those would only count a duplicate in the engine.
        They count as received now (``held_skipped``; in flight still, at the end, if due after it).

        Only called with no churn left (every member online to the end) and without delayed acks; the engine's
        own frame checks, and its clock-skew check for the earliest copy, must pass (the frame is refused alike
        by every receiver otherwise). ``recv``/``times``: this shard's receivers and their latencies (numpy).
        """
        held = self.held.get(mid)
        if held is None or not self._passes_checks(pb, t + int(times.min())):
            return recv, times
        loc = recv // self.workers
        skip = np.frombuffer(held, dtype=np.uint8)[loc].astype(bool)
        answers = self._response_group(mid, pb.sender_id)[0]
        if len(answers):
            skip &= ~np.isin(loc, answers)
        k = int(np.count_nonzero(skip))
        if k == 0:
            return recv, times
        due = times[skip] + t
        last = int(due.max())
        self.held_skipped += k
        self.counts["receives"] += k
        self.frame_recv[key][1] += k
        if last > self.skipped_until:
            self.skipped_until = last
        skips = self._skips
        while skips and skips[0][0] < t:
            skips.popleft()  # (in the past: not in flight at any later end)
        skips.append((last, key, due))
        keep = ~skip
        return recv[keep], times[keep]

    def _passes_checks(self, pb: Frame, earliest: int) -> bool:
        """Whether every receiver's engine gets past its checks of the frame ``pb`` for copies due from
        ``earliest`` on: the static ones, and the Lamport clock's skew (only then does a held copy do nothing but
        count a duplicate)."""
        cfg = self.config
        return (
            pb.static_problem(cfg, self.p.channel_id) is None
            and pb.has_lamport
            and pb.lamport <= earliest + cfg.max_clock_skew_ms
        )

    def _response_group(self, mid: str, sender: str) -> tuple[Indices, frozenset[str] | None]:
        """This shard's members in ``mid``'s response group (who may answer a repair request for it:
        :func:`~sdschat.sds.repair.in_response_group`), once per message: their local indices, and their ids
        for the engines (``Frame.responders``; None where an engine decides without hashing: SDS-R off, or one
        group)."""
        got = self._answer_group.get(mid)
        if got is None:
            rc = self.config.repair
            g = rc.response_groups
            owned = self.owned
            if not rc.enabled:
                got = (np.zeros(0, dtype=np.int64), None)
            elif g <= 1:
                got = (np.arange(len(owned)), None)
            else:
                pids = self.pids
                want = hash64(sender + mid) % g if sender else -1
                local = [j for j, r in enumerate(owned) if hash64(pids[r] + mid) % g == want]
                got = (np.array(local, dtype=np.int64), frozenset(pids[owned[j]] for j in local))
            self._answer_group[mid] = got
        return got

    def _arrivals(self, cur: Cursor, t_end: int) -> None:
        times, recv, i, pb, pos = cur.times, cur.receivers, cur.i, cur.pb, cur.positions
        n = len(times)
        heap, chans, online, dl, waiting = self.heap, self.chans, self.online, self.dl, self.waiting
        add, always = self.sink.rows.extend, self._always  # flat rows: see output.EventSink
        pr, pc = cur.key
        # process arrivals while (t, ARRIVALS, pr, pc) sorts before the heap's top, and before t_end
        lim = t_end - 1
        top = heap[0] if heap else _EMPTY
        if top[0] <= lim:
            lim = top[0] if (ARRIVALS, pr, pc) < (top[1], top[2], top[3]) else top[0] - 1
        first, offline, skipped = i, 0, 0
        content = cur.ctx[0] != "sync"  # only a message's own copies call off repair work for it
        mid = cur.ctx[4]
        held = marks = self.held.get(mid) if content else None  # (held None: every copy goes to the engine)
        w = self.workers
        if held is not None:
            # a copy of a message its member holds only counts a duplicate in the engine, unless the member has a
            # repair answer for it pending (the copy calls it off), delayed acks are on (it owes an ack), or the
            # engine would refuse the frame first: a bad frame, or one too far ahead of every copy's time here
            # (skip_held holds only with frame_view: the frame is a Frame)
            if always or not self.skip_held or not isinstance(pb, Frame) or not self._passes_checks(pb, times[i]):
                held = None
        answering = self.answering.get(mid, ())
        while i < n:
            t = times[i]
            if t > lim:
                break
            r = recv[i]
            i += 1
            if not online[r]:
                offline += 1
                continue
            if held is not None and held[r // w] and r not in answering:
                skipped += 1
                continue
            ch = chans[r]
            pending = ch.repair_pending(mid) if content else _NOTHING_PENDING
            evs = ch.receive_parsed(pb, t, None, pos)
            if pending[0] or pending[1]:
                self._called_off(r, t, pending, ch.repair_pending(mid), cur.ctx)
            if not evs:
                continue
            if len(evs) == 1 and not always:  # the common single-event outcomes, inline
                e = evs[0]
                tp = type(e)
                if tp is Delivered:
                    de = cast(Delivered, e)
                    dm = de.message_id  # the frame's own message (``mid`` stays the frame's id, for repair_pending)
                    if not de.repaired and not de.after_lost:
                        wt = waiting.get(r)
                        if wt is None or dm not in wt:
                            s, lam = de.sender_id, de.lamport_timestamp
                            add((t, "received", dm, s, r, lam, None, t, "delivered", dm, s, r, lam, None))
                            if marks is not None and dm == mid:
                                marks[r // w] = 1  # (self._hold, inline)
                            else:
                                self._hold(dm, r)
                            continue
                elif tp is SyncReceived:
                    se = cast(SyncReceived, e)
                    add((t, "sync_received", se.message_id, se.sender_id, r, se.lamport_timestamp, None))
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
        self.held_skipped += skipped
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
