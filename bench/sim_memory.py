"""Where a simulated member's memory goes: tracemalloc over a one-worker simulation, at its fullest.

    .venv/bin/python bench/sim_memory.py [--participants 1000] [--messages 200] [--loss 0.1] [--smoke]

Runs the simulator in this process (one worker) under tracemalloc and takes
a snapshot when the last message has been sent (buffers, caches and logs at
their largest; the settling that follows only drains them). Prints the memory
traced then and at the peak, per member, and the allocation sites that hold
it: by module of sdschat (the engine's log, buffers, repair cache, bloom
filter; the simulator's rows) and the top lines. Event rows are discarded in
batches of ``--shard-rows`` (a real run buffers up to a million per worker
before it writes a shard: ~100 MiB whatever the group size), so what is left
is the members' state. tracemalloc counts Python allocations only (not the
interpreter, nor free lists) and slows the run several-fold;
`bench/sim_scale.py` gives the resident set of a full-speed run. The engine
runs from its Python sources here (``SDSCHAT_PURE_ENGINE=1``, set below): the
compiled build's allocations would all be attributed to the simulator's lines
that call into it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import tracemalloc
from collections import Counter
from pathlib import Path

os.environ["SDSCHAT_PURE_ENGINE"] = "1"  # allocations by engine module need the engine's Python sources

from sdschat.sim import SimParams, simulate


def _where(filename: str) -> str:
    """A frame's file as a short name: sdschat/sds/log.py, or the library's top folder."""
    path = Path(filename)
    parts = path.parts
    if "sdschat" in parts:
        return "/".join(parts[parts.index("sdschat") :])
    if "site-packages" in parts:
        return parts[parts.index("site-packages") + 1]
    return path.name


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--participants", type=int, default=1_000)
    ap.add_argument("--messages", type=int, default=200)
    ap.add_argument("--loss", type=float, default=0.1)
    ap.add_argument("--top", type=int, default=12, help="allocation lines to list")
    ap.add_argument(
        "--shard-rows",
        type=int,
        default=10_000,
        help="event rows buffered before a (here: discarded) shard is made; a real run buffers up to "
        "1,000,000 per worker (~100 MiB, whatever the group size), kept small here so the "
        "figures are the members' state",
    )
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes, a few seconds: the bench still runs end to end (the test suite runs this)",
    )
    args = ap.parse_args()
    if args.smoke:
        args.participants, args.messages = 40, 20
    n = args.participants
    params = SimParams(participants=n, messages=args.messages, loss=args.loss, rate=max(1.0, n / 200), seed=1)
    snap: list = []

    def progress(st: dict) -> None:
        if not snap and st["sent"] >= st["messages"]:
            snap.append((tracemalloc.take_snapshot(), tracemalloc.get_traced_memory()[0], st["now_ms"]))

    tracemalloc.start(1)
    t0 = time.perf_counter()
    result = simulate(params, None, workers=1, progress=progress, progress_interval_s=0.0, shard_rows=args.shard_rows)
    wall = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    if not snap:
        print("sim_memory: the run ended before its last send", file=sys.stderr)
        return 1
    snapshot, current, at_ms = snap[0]
    meta = result.meta
    print(
        f"sim_memory: {n} members, {args.messages} messages, loss {args.loss}: {meta['events']:,} events, "
        f"{wall:.1f} s under tracemalloc"
    )
    print(
        f"traced at the last send ({at_ms / 1000:.0f} s virtual): {current / 2**20:,.1f} MiB, "
        f"{current / n / 1024:,.1f} KiB per member; peak {peak / 2**20:,.1f} MiB, {peak / n / 1024:,.1f} KiB "
        "per member"
    )
    by_file: Counter = Counter()
    for stat in snapshot.statistics("filename"):
        by_file[_where(stat.traceback[0].filename)] += stat.size
    total = sum(by_file.values()) or 1
    print(f"\n{'by module':44} {'KiB/member':>10} {'share':>6}")
    for where, size in by_file.most_common(10):
        print(f"{where:44} {size / n / 1024:>10,.2f} {size / total:>6.1%}")
    print(f"\n{'top lines':60} {'KiB/member':>10} {'objects/member':>14}")
    for stat in snapshot.statistics("lineno")[: args.top]:
        frame = stat.traceback[0]
        print(
            f"{_where(frame.filename) + ':' + str(frame.lineno):60} {stat.size / n / 1024:>10,.2f} "
            f"{stat.count / n:>14,.1f}"
        )
    print(f"\nconverged {meta['converged']}, delivery {meta['delivery_ratio']:.6f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
