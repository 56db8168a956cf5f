"""Engine events of a member -> event rows, exactly as the node maps them (:class:`sdschat.node.receive.Receiver`).

Rows go into one flat list (no object per row; see
:class:`~sdschat.sim.output.EventSink`); the recording participant is its
index, and a row's last value is its facts (:data:`~sdschat.sim.output.FACTS`:
the typed columns and detail are made from them when a shard is written). A
``received`` row is written when a message first reaches a member (delivered at
once, or held as missing dependencies); ``delivered`` when it is delivered.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from typing import cast

from sdschat.sds import (
    Acknowledged,
    Delivered,
    Event,
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

from .state import FrameCtx, ShardState

__all__ = ["EventRows", "dumps"]

dumps = json.JSONEncoder(separators=(",", ":")).encode


def _ids(ids: Iterable[str]) -> str:
    """A JSON array of message ids. Ids here are engine-made (hex digests, ``sync-<hex>``): no escaping needed."""
    return '["' + '","'.join(ids) + '"]' if ids else "[]"


@functools.lru_cache(maxsize=1 << 16)
def _cancelled(what: str, via: str | None, publisher: str | None) -> str:
    """A ``repair_cancelled`` row's detail (few distinct ones in a run: each made once)."""
    return dumps({"what": what, "via": via, "publisher": publisher})


class EventRows(ShardState):
    """The row-writing side of :class:`~sdschat.sim.shard.Shard` (its state: :class:`~sdschat.sim.state.ShardState`).

    Events are told apart by ``type(e) is ...`` (one call per event, then identity tests) and the branch's
    type is given to the checker with ``cast``.
    """

    def _called_off(self, r: int, t: int, before: tuple[bool, bool], after: tuple[bool, bool], ctx: FrameCtx) -> None:
        """``repair_cancelled`` rows, as the node writes them: member ``r``'s repair request or answer for the
        frame's message that its arrival called off."""
        for what, was, now in (("request", before[0], after[0]), ("answer", before[1], after[1])):
            if was and not now:
                if what == "answer":
                    self.answering.get(ctx[4], set()).discard(r)
                self.sink.rows.extend(
                    (t, "repair_cancelled", ctx[4], ctx[2], r, None, _cancelled(what, ctx[0], ctx[1]))
                )

    def _handle(self, r: int, evs: list[Event], t: int, ctx: FrameCtx | None) -> bool:
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
                de = cast(Delivered, e)
                mid = de.message_id
                w = self.waiting.get(r)
                if w is not None and mid in w:
                    w.discard(mid)
                    if not w:
                        del self.waiting[r]
                else:
                    add((t, "received", mid, de.sender_id, r, de.lamport_timestamp, first))
                    self._hold(mid, r)
                facts = None  # see output.FACTS
                if de.repaired or de.after_lost:
                    facts = (de.repaired, ctx[0] if ctx else None, ctx[1] if ctx else None, de.after_lost)
                add((t, "delivered", mid, de.sender_id, r, de.lamport_timestamp, facts))
            elif tp is Outgoing:
                self._outgoing(r, pid, cast(Outgoing, e), t)
            elif tp is Acknowledged:
                ae = cast(Acknowledged, e)
                add(
                    (
                        t,
                        "acked",
                        ae.message_id,
                        pid,
                        r,
                        None,
                        (ae.by_bloom, ctx[2], ctx[3]) if ctx is not None else (ae.by_bloom, None, None),
                    )
                )
            elif tp is PossiblyAcknowledged:
                pe = cast(PossiblyAcknowledged, e)
                add(
                    (
                        t,
                        "possibly_acked",
                        pe.message_id,
                        pid,
                        r,
                        None,
                        (pe.count, ctx[2], ctx[3]) if ctx is not None else (pe.count, None, None),
                    )
                )
            elif tp is Missing:
                me = cast(Missing, e)
                mid = me.message_id
                w = self.waiting.get(r)
                if w is None:
                    self.waiting[r] = {mid}
                else:
                    w.add(mid)
                s = me.sender_id
                lam = me.lamport_timestamp
                add(
                    (
                        t,
                        "received",
                        mid,
                        s,
                        r,
                        lam,
                        first,
                        t,
                        "missing",
                        mid,
                        s,
                        r,
                        lam,
                        ([h.message_id for h in me.missing], '{"waiting_on":' + _ids(me.waiting_on) + "}"),
                    )
                )
                self._hold(mid, r)
                if self.n_stores and me.missing:
                    self._store_want(r, me.missing, t)
                earlier = True
            elif tp is SyncReceived:
                se = cast(SyncReceived, e)
                add((t, "sync_received", se.message_id, se.sender_id, r, se.lamport_timestamp, None))
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

    def _other(self, r: int, e: Event, tp: type[Event], t: int) -> bool:
        """The rarer events (gaps noticed by sync, repair, loss, rejection, eviction).

        True if the deadline may have moved earlier.
        """
        add = self.sink.rows.extend
        if tp is GapDetected:
            ge = cast(GapDetected, e)
            add((t, "missing", None, ge.sender_id, r, None, ([h.message_id for h in ge.missing], '{"source":"sync"}')))
            if self.n_stores:
                self._store_want(r, ge.missing, t)
            return True
        if tp is RepairScheduled:
            self.counts["repair_scheduled"] += 1
            mid = cast(RepairScheduled, e).message_id
            answering = self.answering.get(mid)
            if answering is None:
                self.answering[mid] = {r}
            else:
                answering.add(r)
            return True
        if tp is RepairRequested:
            qe = cast(RepairRequested, e)
            for mid in qe.message_ids:
                add((t, "repair_requested", mid, None, r, None, qe.carrier_id))
        elif tp is RepairServed:
            ve = cast(RepairServed, e)
            self.answering.get(ve.message_id, set()).discard(r)
            size = self._repair_bytes.pop(r, None)
            add((t, "repair_served", ve.message_id, ve.sender_id, r, None, size))
        elif tp is Lost:
            le = cast(Lost, e)
            add((t, "lost", le.message_id, le.sender_id, r, None, dumps({"dependants": list(le.dependants)})))
            return True
        elif tp is Rejected:
            self.counts["rejected"] += 1
            je = cast(Rejected, e)
            add((t, "rejected", je.message_id, je.sender_id, r, None, dumps({"reason": je.reason})))
        elif tp is Evicted:
            self.counts[f"evicted_{cast(Evicted, e).buffer}"] += 1
            return True
        else:  # EphemeralReceived: the simulator sends none
            self.counts[f"event_{tp.__name__}"] += 1
        return False
