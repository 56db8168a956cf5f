"""When the workers stop: the windowing rule, the quiescence checks and the quiet period.

Quiescence is checked at fixed times (every :data:`CHECK_INTERVAL_MS` after
the last send), where every worker stops and all compare notes, so one and
several workers stop at the same point; the run stops once the group has been
idle at every check for :func:`quiet_period_ms`.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Iterator
from contextlib import contextmanager

from .params import SimParams, channel_config
from .plan import Plan

__all__ = ["CHECK_INTERVAL_MS", "FLUSH_GRID_MS", "Clock", "collection_paused", "no_gc", "quiet_period_ms"]

#: how often (virtual ms, from the last send on) the settle phase checks for quiescence
CHECK_INTERVAL_MS = 5_000
#: with several workers, each writes its buffered events at the first step that crosses a multiple of this
#: (virtual ms) once the buffer is half a shard: balanced shards fill alike, so the workers write at about the
#: same wall time instead of each stalling the others in turn (a full buffer is still written at once)
FLUSH_GRID_MS = 10_000


@contextmanager
def collection_paused() -> Iterator[None]:
    """The simulator's garbage-collector policy: the cyclic collector off for a run (back on after, if it was on).

    The engine makes no reference cycles, and with ~10,000 engines the heap
    holds tens of millions of objects: every full collection would walk them
    all (seconds each), triggered by allocations anywhere in the loop; in a
    shard's event loop collections over millions of objects cost ~15%.
    (The app's policy is :mod:`sdschat.ui.collector`, which the simulator may not import.)
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def no_gc(fn):
    """Run ``fn`` with the cyclic garbage collector off (restored after): :func:`collection_paused`."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with collection_paused():
            return fn(*args, **kwargs)

    return wrapper


def quiet_period_ms(p: SimParams) -> int:
    """How long the group must stay idle before the settle phase stops early.

    Idle (:meth:`~sdschat.sim.shard.Shard.quiescent`) is not yet settled: a
    member may not know that a message exists until someone's periodic sync
    names it in its causal history. Waiting two sync rounds (interval + jitter
    + the longest latency, twice) gives the members who are up to date the
    chance to say so.
    """
    cfg = channel_config(p)
    return 2 * (cfg.sync_interval_ms + cfg.sync_jitter_ms + p.latency_ms[1])


class Clock:
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
