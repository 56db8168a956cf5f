"""Keeps the cyclic garbage collector's full passes out of the way of messages.

A full collection (generation 2) walks every tracked object. In a window of
ten channels under traffic one came every ~4 s and took 7-11 ms (33 ms after
start-up): a stall that a message arriving meanwhile waits out, the largest
part of the send-to-shown p99. Here the automatic full passes are off (the
young collections go on as before), and every ``FREEZE_EVERY_S`` what
survives a young collection moves to the permanent generation
(``gc.freeze()``). Cyclic garbage among frozen objects is not collected, so
every ``RECLAIM_EVERY_S`` everything is unfrozen and collected once, then
frozen again: a ten-channel window at 50 msg/s makes ~26,000 such objects a
minute (mostly Textual's styles, caches and segments). That full pass walks
the whole heap, and a heap grows with the channels' bounded caches: a 30-45 ms
stall in a fresh window, ~200-270 ms in one that had 3,000 lines at 10 lines/s
(bench/window_soak.py). Once every five minutes keeps it at ~1 ms a second.
:meth:`Collector.stop` (the app's exit) unfreezes and puts the thresholds back.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

__all__ = ["Collector", "FREEZE_EVERY_S", "RECLAIM_EVERY_S"]

FREEZE_EVERY_S = 5.0
RECLAIM_EVERY_S = 300.0
NO_FULL_PASSES = 1 << 30  # a generation-2 threshold never reached


class Collector:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._reclaimed_at = clock()
        self._thresholds: tuple[int, int, int] | None = None
        self.freezes = 0
        self.reclaims = 0

    def start(self) -> None:
        if self._thresholds is None:
            self._thresholds = gc.get_threshold()
            young, middle, _ = self._thresholds
            gc.set_threshold(young, middle, NO_FULL_PASSES)
        self._reclaimed_at = self.clock()

    def tick(self) -> None:
        """Call every ``FREEZE_EVERY_S``: freeze what survived, or (every ``RECLAIM_EVERY_S``) reclaim."""
        if self.clock() - self._reclaimed_at >= RECLAIM_EVERY_S:
            self.reclaim()
        else:
            self.freeze()

    def freeze(self) -> None:
        gc.collect(1)  # the young generations only: what is still alive after it is long-lived
        gc.freeze()
        self.freezes += 1

    def reclaim(self) -> None:
        """Unfreeze and collect everything once (cyclic garbage that was frozen goes), then freeze again."""
        gc.unfreeze()
        gc.collect()
        gc.freeze()
        self._reclaimed_at = self.clock()
        self.reclaims += 1

    def stop(self) -> None:
        if self._thresholds is not None:
            gc.set_threshold(*self._thresholds)
            self._thresholds = None
        gc.unfreeze()
