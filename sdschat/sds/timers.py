"""``Timers``: the channel's timer heaps, each with the test that tells a live entry from a stale one."""

from __future__ import annotations

from collections.abc import Callable
from heapq import heappop

__all__ = ["Timers"]


class Timers:
    """Heaps of ``(due, id)`` entries that go stale when what they time changes (the message arrived, was
    answered, delivered or rescheduled); each comes with its liveness test. The collaborators that own the
    heaps skip stale entries when they fire; :meth:`earliest` drops them when they would decide a deadline.
    """

    __slots__ = ("pairs",)

    def __init__(self, *pairs: tuple[list[tuple[int, str]], Callable[[int, str], bool]]) -> None:
        self.pairs = pairs

    def earliest(self, due: int, prune: bool = True) -> int:
        """``min(due, the earliest live timer)``, popping stale heap tops before ``due`` on the way.

        Without ``prune`` the heaps are left alone and their tops count, live or not.
        """
        if not prune:
            for heap, _ in self.pairs:
                if heap and heap[0][0] < due:
                    due = heap[0][0]
            return due
        for heap, live in self.pairs:
            while heap and heap[0][0] < due:
                if live(*heap[0]):
                    due = heap[0][0]
                    break
                heappop(heap)
        return due
