"""Simulator scale bench: wall time, peak memory and events/s of a large simulation.

Default scenario (the issue's target): 10,000 participants, 1,000 messages
from random senders at 1 message/s, 10% loss, latency 20-200 ms, causal
history 10, SDS-R on with the RFC's response groups (79), engine RFC timings,
settle with loss continuing, until quiescent or 600 s after the last send.
Events are written (Parquet shards) to a temporary directory, deleted after.

Peak memory is the maximum resident set size of each process (ru_maxrss of
the coordinator and of each worker process), the honest figure for a run that
holds ~10,000 engines; tracemalloc would slow the run several-fold.

Usage:
  .venv/bin/python bench/sim_scale.py [--participants 10000] [--messages 1000] [--loss 0.1]
      [--workers 2] [--out DIR] [--keep]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

from sdschat.sds import native
from sdschat.sim import SimParams, simulate


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--participants", type=int, default=10_000)
    ap.add_argument("--messages", type=int, default=1_000)
    ap.add_argument("--loss", type=float, default=0.1)
    ap.add_argument("--rate", type=float, default=1.0)
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=None, help="output directory (default: a temporary one)")
    ap.add_argument("--keep", action="store_true", help="keep the output directory")
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes, a few seconds: the bench still runs end to end (the test suite runs this)",
    )
    args = ap.parse_args()
    if args.smoke:
        args.participants, args.messages, args.workers = 60, 20, 2
    out = args.out or Path(tempfile.mkdtemp(prefix="sdschat-sim-scale-"))
    params = SimParams(
        participants=args.participants, messages=args.messages, loss=args.loss, rate=args.rate, seed=args.seed
    )
    load = os.getloadavg()
    print(
        f"sim_scale: {args.participants} participants, {args.messages} messages, loss {args.loss}, "
        f"{args.workers} worker(s), {os.cpu_count()} cores, load average before {load[0]:.2f}",
        flush=True,
    )
    last = [0.0]

    def progress(st: dict) -> None:
        now = time.perf_counter()
        if now - last[0] >= 30 or st.get("done"):
            last[0] = now
            print(
                f"  {'settling' if st['settling'] else 'sending'}: sent {st['sent']}/{st['messages']}, "
                f"virtual {(st['now_ms'] - st['start_ms']) / 1000:.0f} s",
                flush=True,
            )

    t0 = time.perf_counter()
    try:
        r = simulate(params, out, workers=args.workers, progress=progress, progress_interval_s=5.0)
        wall = time.perf_counter() - t0
        m = r.meta
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        cpu = sum(
            resource.getrusage(who).ru_utime + resource.getrusage(who).ru_stime
            for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
        )
        load_after = os.getloadavg()
        size = sum(f.stat().st_size for f in out.iterdir() if f.is_file())
        print(
            f"wall time          {wall:.1f} s  (target < 600 s); load average now {load_after[0]:.2f} "
            f"(1 min), {load_after[2]:.2f} (15 min)"
        )
        print(f"CPU time           {cpu:.1f} s in all processes ({cpu / wall:.2f} cores busy on average)")
        print(f"engine             {native.BUILD}")
        print(f"virtual time       {(m['virtual_end_ms'] - m['virtual_start_ms']) / 1000:.0f} s ({m['stop_reason']})")
        if m["workers"] > 1:
            print(
                f"workers            busy {', '.join(f'{b:.0f}' for b in m['worker_busy_s'])} s, waiting for "
                f"each other {', '.join(f'{w:.0f}' for w in m['worker_wait_s'])} s, CPU "
                f"{', '.join(f'{c:.0f}' for c in m['worker_cpu_s'])} s"
            )
        print(
            f"peak RSS           {m['peak_rss_mb']:.0f} MB per simulation process, "
            f"{m['peak_rss_mb_total']:.0f} MB all workers; coordinator {own:.0f} MB"
        )
        print(f"events             {m['events']:,} in {len(m['event_shards'])} shards, {size / 1e6:.0f} MB on disk")
        print(f"events/s           {m['events'] / wall:,.0f}")
        print(f"receives           {m['counts'].get('receives', 0):,} ({m['counts'].get('receives', 0) / wall:,.0f}/s)")
        print(f"frames             {m['frames']}")
        print(f"delivery ratio     {m['delivery_ratio']}")
        print(
            f"converged          {m['converged']} ({m['distinct_logs']} distinct logs, "
            f"largest agreeing {m['largest_agreeing']})"
        )
        print(f"event kinds        {m['event_kinds']}")
    finally:
        if args.out is None and not args.keep:
            shutil.rmtree(out, ignore_errors=True)
        elif args.keep or args.out:
            print(f"output kept in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
