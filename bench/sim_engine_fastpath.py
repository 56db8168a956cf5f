"""What a per-frame fast path in the engine would buy the simulator (a measurement, not a feature).

The simulator parses each broadcast frame once and hands the same parsed
message to thousands of receivers (``MessageChannel.receive_parsed``), but the
engine still repeats two receiver-independent steps per receiver:

* ``_validate`` -- every structural check of the frame (ids, lengths, history
  and repair-request entries) although only the Lamport-skew check depends on
  the receiver;
* ``entry_from_pb`` -- converting each causal-history entry into a
  ``HistoryEntry`` (on the content path, and on the sync path for every entry
  just to look for gaps).

This bench runs the same scenario four times in this process and checks they
produce identical events:

1. the protobuf message handed to every receiver (``frame_view=False``);
2. the simulator's default, a :class:`~sdschat.sim.frame.FrameView` (fields
   read once per frame);
3. plus those two engine steps memoized per frame (a stand-in for the
   proposed API: ``receive_parsed`` accepting a frame prepared once, e.g.
   ``wire.prepare(pb, config)`` holding the static validation result and the
   history entries);
4. plus duplicates dropped before validation (a stand-in for "dedup first":
   at 10,000 members over half of all receives are duplicates).

It prints CPU time per variant. The shims live in this file only; the
simulator always drives the unmodified engine.

Usage:
  .venv/bin/python bench/sim_engine_fastpath.py [--participants 2000] [--messages 100] [--loss 0.1]
  (the figures in the report: --participants 10000 --messages 30)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sdschat.sds import channel as channel_mod  # noqa: E402
from sdschat.sim import SimParams, simulate  # noqa: E402

_BIG = 1 << 62


def install_memoization():
    """Memoize the receiver-independent steps per parsed frame; returns an uninstall function."""
    cls = channel_mod.MessageChannel
    orig_validate = cls._validate
    orig_entry = channel_mod.entry_from_pb
    vcache: dict[int, tuple] = {}
    ecache: dict[int, tuple] = {}

    def validate(self, pb, now_ms):
        hit = vcache.get(id(pb))
        if hit is None or hit[0] is not pb:
            if len(vcache) > 50_000:
                vcache.clear()
            hit = (pb, orig_validate(self, pb, _BIG))  # every check but the receiver's clock skew
            vcache[id(pb)] = hit
        if hit[1] is not None:
            return hit[1]
        if pb.HasField("lamport_timestamp") and (
                pb.lamport_timestamp > max(now_ms, self.lamport_timestamp) + self.config.max_clock_skew_ms):
            return orig_validate(self, pb, now_ms)
        return None

    def entry(e):
        hit = ecache.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        if len(ecache) > 200_000:
            ecache.clear()
        v = orig_entry(e)  # HistoryEntry is frozen: receivers may share it
        ecache[id(e)] = (e, v)
        return v

    cls._validate = validate
    channel_mod.entry_from_pb = entry

    def uninstall():
        cls._validate = orig_validate
        channel_mod.entry_from_pb = orig_entry

    return uninstall


def install_dedup_first():
    """Drop a content frame already held *before* validating it (same events; only stats bookkeeping differs).

    Stands in for the proposed engine change "dedup before full validation":
    at 10,000 members over half of all receives are duplicates (repair answers
    and resends reaching members who have the message).
    """
    cls = channel_mod.MessageChannel
    orig = cls.receive_parsed

    def receive_parsed(self, pb, now_ms, retrieval_hint=None, positions=None):
        mid = pb.message_id
        if ((mid in self._log or mid in self._incoming) and mid not in self._requests
                and mid not in self._responses and pb.sender_id != self.participant_id
                and self.config.ack_delay_ms is None and pb.HasField("lamport_timestamp")
                and pb.HasField("content") and pb.content):
            self.stats["duplicates"] += 1
            return []
        return orig(self, pb, now_ms, retrieval_hint, positions)

    cls.receive_parsed = receive_parsed

    def uninstall():
        cls.receive_parsed = orig

    return uninstall


def _run(params, label, base=None, **kw):
    t0, c0 = time.perf_counter(), time.process_time()
    r = simulate(params, None, **kw)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    receives = r.meta["counts"]["receives"]
    same = "" if base is None else (
        "  identical events: " + str(r.meta["event_kinds"] == base.meta["event_kinds"]
                                      and r.log_hashes == base.log_hashes and r.meta["frames"] == base.meta["frames"]))
    print(f"{label:34s} CPU {cpu:7.1f} s ({cpu / receives * 1e6:5.1f} us/receive), wall {wall:7.1f} s{same}",
          flush=True)
    return r, cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--participants", type=int, default=2_000)
    ap.add_argument("--messages", type=int, default=100)
    ap.add_argument("--loss", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    params = SimParams(participants=args.participants, messages=args.messages, loss=args.loss, seed=args.seed)
    print(f"scenario: {args.participants} participants, {args.messages} messages, loss {args.loss} (one process; "
          f"CPU time is the figure to compare on a shared machine)", flush=True)
    raw, cpu_raw = _run(params, "protobuf message per receiver", frame_view=False)
    receives = raw.meta["counts"]["receives"]
    stats = raw.meta["engine_stats"]
    print(f"  {receives:,} receive_parsed calls: {stats.get('duplicates', 0) / receives:.0%} duplicates, "
          f"{stats.get('syncs_received', 0) / receives:.0%} syncs, "
          f"{(stats.get('received', 0) - stats.get('syncs_received', 0)) / receives:.0%} new content", flush=True)
    view, cpu_view = _run(params, "FrameView (the simulator's default)", raw)
    undo = install_memoization()
    try:
        memo, cpu_memo = _run(params, "+ validate/history once per frame", raw)
        undo2 = install_dedup_first()
        try:
            dedup, cpu_dedup = _run(params, "+ dedup before validation", raw)
        finally:
            undo2()
    finally:
        undo()
    print(f"speed-ups in CPU time: FrameView {cpu_raw / cpu_view:.2f}x; then per-frame validate/history "
          f"{cpu_view / cpu_memo:.2f}x; then dedup-first {cpu_memo / cpu_dedup:.2f}x; "
          f"all together {cpu_raw / cpu_dedup:.2f}x")
    ok = all(r.meta["event_kinds"] == raw.meta["event_kinds"] and r.log_hashes == raw.log_hashes
             for r in (view, memo, dedup))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
