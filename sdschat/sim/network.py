"""The broadcast network: which members get a published frame, when, and how many copies.

When a member publishes a frame, the network draws for every other member
whether the copy is lost, its latency, and whether a duplicate follows (one
generator per frame, keyed by publisher and frame counter: see
:mod:`sdschat.sim.plan`); the copies for this shard's members are sorted by
arrival time into one :class:`Cursor`. The frame is parsed once
(:func:`sdschat.sds.wire.parse_pb`) and read once into the engine's
:class:`~sdschat.sds.channel.Frame` (fields, causal history, validity checks,
the sender's half of the response-group hash, and which of the shard's members
are in the message's response group), and the bloom positions of its id are
computed once; every receiver gets the same ``Frame`` (see
:mod:`sdschat.sim.delivery`). An offline publisher's frames go nowhere.
"""

from __future__ import annotations

import heapq
from array import array

import numpy as np

from sdschat.sds import Outgoing
from sdschat.sds.channel import Frame
from sdschat.sds.wire import parse_pb

from .plan import RNG_NETWORK, rng
from .schedule import ARRIVALS
from .state import Cursor, FrameCtx, FrameMsg, Parsed, Positions, ShardState

__all__ = ["Cursor", "FrameMsg", "Network"]


class Network(ShardState):
    """The publishing side of :class:`~sdschat.sim.shard.Shard` (its state: :class:`~sdschat.sim.state.ShardState`)."""

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

    def _parsed(self, data: bytes, reason: str, mid: str) -> tuple[Parsed, Positions | None]:
        """The frame read once for every receiver, and its id's bloom positions (not for a sync)."""
        pb = parse_pb(data)
        if reason == "sync":
            return (Frame(pb) if self.frame_view else pb), None
        if self.frame_view:
            f = Frame(pb)
            f.responders = self._response_group(mid, f.sender_id)[1]  # (each receiver's hash, made once)
            return f, self.bloom.positions(mid)
        return pb, self.bloom.positions(mid)

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
        pb: Parsed | None = None
        positions: Positions | None = None
        if reason != "sync" and mid not in self.sent_at:  # (its content names it: "sim message K from ...")
            pb, positions = self._parsed(data, reason, mid)
            self.sent_at[mid] = self.plan.send_times[int(bytes(pb.content).split(b" ", 3)[2])]
            self.held[mid] = bytearray(len(self.owned))
        if self.n_stores:
            if pb is None:
                pb, positions = self._parsed(data, reason, mid)
            self._store_ingest(r, c, t, reason, mid, pb, positions, len(data))
        if copies == 0:
            return
        if pb is None:
            pb, positions = self._parsed(data, reason, mid)
        # (skip_held holds only with frame_view: the frame is a Frame)
        if reason != "sync" and self.skip_held and not self.churning and not self._always and isinstance(pb, Frame):
            recv, times = self._skip_held_copies((r, c), pb, mid, recv, times, t)
            if len(recv) == 0:
                return
        order = np.argsort(times, kind="stable")
        # C arrays, not lists: 12 bytes a copy rather than ~80 (a list slot and an int object each), and a
        # frame in flight holds one per receiver of the shard
        times_l = array("q", (times[order] + t).astype(np.int64, copy=False).tobytes())
        # what rows need to know about the frame: (node-level reason, publisher, frame sender, creation time,
        # message id)
        ctx: FrameCtx = (reason, self.pids[r], pb.sender_id, t, mid)
        cur = Cursor(
            (r, c), pb, positions, times_l, array("q", recv[order].astype(np.int64, copy=False).tobytes()), ctx
        )
        self.cursors += 1
        if reason != "sync":
            self.busy_cursors += 1
        heapq.heappush(self.heap, (times_l[0], ARRIVALS, r, c, cur))
