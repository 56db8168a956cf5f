"""Engine events of a member -> event rows, exactly as the node maps them (:class:`sdschat.node.receive.Receiver`).

Rows go into one flat list (no object per row; see
:class:`~sdschat.sim.output.EventSink`); the recording participant is its
index, and a row's last value is its facts (:data:`~sdschat.sim.output.FACTS`:
the typed columns and detail are made from them when a shard is written). A ``received`` row is written when a message first reaches a member
(delivered at once, or held as missing dependencies); ``delivered`` when it
is delivered.
"""

from __future__ import annotations

import functools
import json

from sdschat.sds import (
    Acknowledged,
    Delivered,
    Evicted,
    GapDetected,
    Lost,
    Missing,
    Outgoing,
    PossiblyAcknowledged,
    Rejected,
    RepairRequested,
    RepairScheduled,
    RepairServed,
    SyncReceived,
)

__all__ = ["EventRows", "dumps"]

dumps = json.JSONEncoder(separators=(",", ":")).encode


def _ids(ids) -> str:
    """A JSON array of message ids. Ids here are engine-made (hex digests, ``sync-<hex>``): no escaping needed."""
    return '["' + '","'.join(ids) + '"]' if ids else "[]"


@functools.lru_cache(maxsize=1 << 16)
def _cancelled(what: str, via: str | None, publisher: str | None) -> str:
    """A ``repair_cancelled`` row's detail (few distinct ones in a run: each made once)."""
    return dumps({"what": what, "via": via, "publisher": publisher})


class EventRows:
    """The row-writing side of :class:`~sdschat.sim.shard.Shard` (its state is set up there)."""

    def _called_off(self, r: int, t: int, before: tuple[bool, bool], after: tuple[bool, bool], ctx: tuple) -> None:
        """``repair_cancelled`` rows, as the node writes them: member ``r``'s repair request or answer for the
        frame's message that its arrival called off."""
        for what, was, now in (("request", before[0], after[0]), ("answer", before[1], after[1])):
            if was and not now:
                if what == "answer":
                    self.answering.get(ctx[4], set()).discard(r)
                self.sink.rows.extend((t, "repair_cancelled", ctx[4], ctx[2], r, None,
                                       _cancelled(what, ctx[0], ctx[1])))

    def _handle(self, r: int, evs: list, t: int, ctx: tuple | None) -> bool:
        """Engine events of member ``r`` -> rows (and frames). True if its deadline may have moved earlier.

        ``ctx``: what the frame that caused them says (see :meth:`~sdschat.sim.network.Network.ingest_one`),
        None for a tick or a reconnect.
        """
        pid = self.pids[r]
        add = self.sink.rows.extend  # flat rows: see output.EventSink
        earlier = False
        # a first copy from a store says so, as the node's received rows do (one straight from its author: None)
        first = None if ctx is None or ctx[0] != "store" else dumps({"via": "store", "publisher": ctx[1]})
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
                    add((t, "received", mid, e.sender_id, r, e.lamport_timestamp, first))
                    self._hold(mid, r)
                facts = None  # see output.FACTS
                if e.repaired or e.after_lost:
                    facts = (e.repaired, ctx[0] if ctx else None, ctx[1] if ctx else None, e.after_lost)
                add((t, "delivered", mid, e.sender_id, r, e.lamport_timestamp, facts))
            elif tp is Outgoing:
                self._outgoing(r, pid, e, t)
            elif tp is Acknowledged:
                add((t, "acked", e.message_id, pid, r, None,
                     (e.by_bloom, ctx[2], ctx[3]) if ctx is not None else (e.by_bloom, None, None)))
            elif tp is PossiblyAcknowledged:
                add((t, "possibly_acked", e.message_id, pid, r, None,
                     (e.count, ctx[2], ctx[3]) if ctx is not None else (e.count, None, None)))
            elif tp is Missing:
                mid = e.message_id
                w = self.waiting.get(r)
                if w is None:
                    self.waiting[r] = {mid}
                else:
                    w.add(mid)
                s = e.sender_id
                lam = e.lamport_timestamp
                add((t, "received", mid, s, r, lam, first,
                     t, "missing", mid, s, r, lam,
                     ([h.message_id for h in e.missing], '{"waiting_on":' + _ids(e.waiting_on) + "}")))
                self._hold(mid, r)
                if self.n_stores and e.missing:
                    self._store_want(r, e.missing, t)
                earlier = True
            elif tp is SyncReceived:
                add((t, "sync_received", e.message_id, e.sender_id, r, e.lamport_timestamp, None))
            elif self._other(r, e, tp, t):
                earlier = True
        return earlier

    def _outgoing(self, r: int, pid: str, e: Outgoing, t: int) -> None:
        """Member ``r`` publishes ``e``: the frame goes out, and its row (a repair answer's comes with RepairServed)."""
        size = self._publish(r, e, t)
        reason = e.reason
        add = self.sink.rows.extend
        if reason == "resend":
            st = self.chans[r].outgoing_state(e.message_id)
            add((t, "resent", e.message_id, pid, r, e.lamport_timestamp, (size, st[1] if st else None)))
        elif reason == "sync":
            add((t, "sync_sent", e.message_id, pid, r, e.lamport_timestamp, size))
        elif reason == "repair":
            self._repair_bytes[r] = size  # reported with the RepairServed that follows
        else:
            add((t, "sent", e.message_id, pid, r, e.lamport_timestamp, size))

    def _other(self, r: int, e, tp: type, t: int) -> bool:
        """The rarer events (gaps noticed by sync, repair, loss, rejection, eviction).

        True if the deadline may have moved earlier.
        """
        add = self.sink.rows.extend
        if tp is GapDetected:
            add((t, "missing", None, e.sender_id, r, None, ([h.message_id for h in e.missing], '{"source":"sync"}')))
            if self.n_stores:
                self._store_want(r, e.missing, t)
            return True
        if tp is RepairScheduled:
            self.counts["repair_scheduled"] += 1
            answering = self.answering.get(e.message_id)
            if answering is None:
                self.answering[e.message_id] = {r}
            else:
                answering.add(r)
            return True
        if tp is RepairRequested:
            for mid in e.message_ids:
                add((t, "repair_requested", mid, None, r, None, e.carrier_id))
        elif tp is RepairServed:
            self.answering.get(e.message_id, set()).discard(r)
            size = self._repair_bytes.pop(r, None)
            add((t, "repair_served", e.message_id, e.sender_id, r, None, size))
        elif tp is Lost:
            add((t, "lost", e.message_id, e.sender_id, r, None, dumps({"dependants": list(e.dependants)})))
            return True
        elif tp is Rejected:
            self.counts["rejected"] += 1
            add((t, "rejected", e.message_id, e.sender_id, r, None, dumps({"reason": e.reason})))
        elif tp is Evicted:
            self.counts[f"evicted_{e.buffer}"] += 1
            return True
        else:  # EphemeralReceived: the simulator sends none
            self.counts[f"event_{tp.__name__}"] += 1
        return False
