"""The process's garbage-collector policy: every setting of Python's cyclic collector is made here.

Three uses, each a name below:

- :class:`Collector`, the running app's policy (``ChatApp`` starts, ticks and stops it): keeps the cyclic
  garbage collector's full passes out of the way of messages;
- :func:`bulk_build`, around building a large structure that lives on (a pane's history): no collections
  while it is built, then it is frozen;
- :func:`long_lived_from_here`, once what a command set up is up (a channel's log, a window's channels):
  what exists now lives as long as the process, so the collector stops walking it.

(The simulator, a batch job with a policy of its own, pauses the collector for a run in :mod:`sdschat.sim.clock`;
the layering keeps it from importing the app.)

The app's policy. A full collection (generation 2) walks every tracked object. In a window of
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
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["Collector", "FREEZE_EVERY_S", "RECLAIM_EVERY_S", "bulk_build", "long_lived_from_here"]

FREEZE_EVERY_S = 5.0
RECLAIM_EVERY_S = 300.0
NO_FULL_PASSES = 1 << 30  # a generation-2 threshold never reached


class Collector:
    """The running app's policy: no automatic full passes; survivors frozen, frozen garbage reclaimed rarely."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._reclaimed_at = clock()
        self._thresholds: tuple[int, int, int] | None = None
        self.freezes = 0
        self.reclaims = 0

    def start(self) -> None:
        """The app is up: turn the automatic full passes off (a 7-11 ms stall every ~4 s under traffic)."""
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
        """What survived a young collection is long-lived: out of the young collections' way for good."""
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
        """The app's exit: the thresholds as they were, nothing frozen (the process may go on: tests, a demo)."""
        if self._thresholds is not None:
            gc.set_threshold(*self._thresholds)
            self._thresholds = None
        gc.unfreeze()


@contextmanager
def bulk_build() -> Iterator[None]:
    """Build a large structure that lives on (a pane's history) with the collector paused, then freeze it.

    Why: 100,000 new objects would trigger full collections of the whole heap several times while they are
    made; and once built, the structure lives as long as its view, so the collector is kept from walking it
    again and again (a full collection over 100,000 items is a 100+ ms stall mid-conversation). Collection
    comes back on afterwards only if it was on before (then what exists is frozen first); a caller that had
    it off finds it off, nothing frozen.
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.freeze()
            gc.enable()


def long_lived_from_here() -> None:
    """Everything that exists now lives as long as the process: move it out of the collector's way.

    Why: a command that holds a channel's log (``sdschat chat``) or ten of them (the window) keeps it until
    it exits; a full collection over a million-message log stalls the screen for ~0.5 s (over ten
    100,000-message logs, ~150 ms) and finds nothing to free. Called once, when the command is up.
    """
    gc.freeze()
