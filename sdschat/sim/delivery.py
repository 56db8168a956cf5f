"""Delivering a frame's copies into the members' engines, one batch per heap pop.

A popped :class:`~sdschat.sim.network.Cursor` delivers copies for as long as
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

from sdschat.sds import Delivered, SyncReceived

from .network import Cursor
from .schedule import ARRIVALS, INF, TICK

__all__ = ["Delivery"]

_EMPTY = (INF,)  # the top of an empty heap
#: (asking, answering) for a frame that cannot call off repair work (a sync frame)
_NOTHING_PENDING = (False, False)


class Delivery:
    """The receiving side of :class:`~sdschat.sim.shard.Shard` (its state is set up there)."""

    def _tick_at(self, r: int, t: int) -> None:
        """Schedule member ``r``'s tick at its engine's deadline if that moved earlier."""
        d = self.chans[r].next_deadline()
        if d < t:
            d = t
        if d < self.dl[r]:
            self.dl[r] = d
            heapq.heappush(self.heap, (d, TICK, r, 0, None))

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
        first, offline = i, 0
        content = cur.ctx[0] != "sync"  # only a message's own copies call off repair work for it
        mid = cur.ctx[4]
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
                    dm = e.message_id  # the frame's own message (``mid`` stays the frame's id, for repair_pending)
                    if not e.repaired and not e.after_lost:
                        w = waiting.get(r)
                        if w is None or dm not in w:
                            s, lam = e.sender_id, e.lamport_timestamp
                            add((t, "received", dm, s, r, lam, None, t, "delivered", dm, s, r, lam, None))
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
