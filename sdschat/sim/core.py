"""The simulator's entry point: :func:`simulate` runs one scenario on real ``MessageChannel`` engines.

How the parts fit: a :class:`~sdschat.sim.shard.Shard` owns some members and
their event heap (:mod:`sdschat.sim.schedule`); the broadcast network
(:mod:`sdschat.sim.network`) schedules each published frame's copies, which
:mod:`sdschat.sim.delivery` hands to the engines and :mod:`sdschat.sim.rows`
turns into event rows. :mod:`sdschat.sim.workers` runs one shard alone or one
per worker process (windowing and stopping: :mod:`sdschat.sim.clock`), and
:mod:`sdschat.sim.results` merges their parts into the output files and the
:class:`~sdschat.sim.results.SimResult`.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import output
from .clock import CHECK_INTERVAL_MS, FLUSH_GRID_MS, Clock, no_gc, quiet_period_ms
from .params import SimParams
from .plan import make_plan
from .results import SimResult, merge
from .shard import Shard, ShardOptions, participant_ids
from .workers import run_alone, run_processes

__all__ = [
    "Runner",
    "Shard",
    "SimResult",
    "simulate",
    "CHECK_INTERVAL_MS",
    "FLUSH_GRID_MS",
    "participant_ids",
    "quiet_period_ms",
]

ProgressFn = Callable[[dict[str, Any]], None]
#: runs ``workers`` shards as peers: ``(params, plan, workers, out, shard kwargs, report) -> (parts, stop_reason,
#: stop_t, windows)``; :func:`~sdschat.sim.workers.run_processes` (forked processes) unless one is given (e.g.
#: Spark barrier tasks: :mod:`sdschat.pipeline.simcluster`)
Runner = Callable[..., tuple]


@no_gc
def simulate(
    params: SimParams,
    out_dir: str | Path | None = None,
    *,
    workers: int = 1,
    progress: ProgressFn | None = None,
    progress_interval_s: float = 0.25,
    shard_rows: int = 1_000_000,
    row_group_rows: int = 262_144,
    frame_view: bool = True,
    skip_held: bool = True,
    runner: Runner | None = None,
) -> SimResult:
    """Run one scenario; write its output to ``out_dir`` (None: write nothing, just return the results).

    ``workers > 1`` runs the members in that many processes (same events as
    one worker); it needs a minimum latency of at least 1 ms (the lookahead)
    and falls back to one worker otherwise. ``runner`` runs them elsewhere
    than in forked processes (:data:`Runner`). ``skip_held=False`` hands every copy of a frame to its
    receiver's engine, even one that would only count a duplicate there (the events are the same: see
    :meth:`~sdschat.sim.delivery.Delivery._skip_held_copies`).
    """
    wall0 = time.perf_counter()
    p = params
    plan = make_plan(p)
    workers = max(1, min(int(workers), p.participants))
    if p.latency_ms[0] < 1:
        workers = 1
    out = Path(out_dir) if out_dir is not None else None
    if out is not None:
        _clear(out)
    kw: ShardOptions = {
        "shard_rows": shard_rows,
        "row_group_rows": row_group_rows,
        "frame_view": frame_view,
        "skip_held": skip_held,
    }
    settle = plan.settle_ms
    end = settle + p.horizon_ms
    last = 0.0

    def report(now: int, done: bool = False) -> None:
        nonlocal last
        if progress is None or not (done or time.perf_counter() - last >= progress_interval_s):
            return
        last = time.perf_counter()
        progress(
            {
                "sent": bisect.bisect_left(plan.send_times, now),
                "messages": p.messages,
                "now_ms": now,
                "start_ms": p.start_ms,
                "settle_ms": settle,
                "end_ms": end,
                "done": done,
                "settling": now > settle,
            }
        )

    if workers == 1:
        shard = Shard(p, plan, 0, 1, out, **kw)
        if progress is not None:
            shard.on_progress = report
        clock = Clock(p, plan, 0)
        run_alone(shard, clock)
        parts = [shard.finish()]
        stop_reason, stop_t, windows = clock.stop_reason, clock.stop_t, clock.windows
    else:
        parts, stop_reason, stop_t, windows = (runner or run_processes)(p, plan, workers, out, kw, report)
    report(stop_t, done=True)
    return merge(p, plan, parts, out, workers, stop_reason, stop_t, windows, time.perf_counter() - wall0)


def _clear(out: Path) -> None:
    """Create ``out``; remove a previous run's event shards and meta from it."""
    out.mkdir(parents=True, exist_ok=True)
    for old in list(out.glob(output.SHARD_GLOB)) + [out / output.META_FILE]:
        if old.exists():
            old.unlink()
