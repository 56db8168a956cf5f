"""``LogArchive``: which ids a windowed local log has moved out of memory (membership only, 8 bytes an id)."""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections.abc import Iterable

__all__ = ["LogArchive"]


class LogArchive:
    """Membership of the ids that left the log's in-memory window, at 8 bytes an id.

    Holds each id's 64-bit ``hash()`` (SipHash, salted per process: an archive lives in one process and is
    rebuilt from the database at start) in a sorted array, and the newest in a set until they are merged in.
    Two distinct ids share a hash with probability 2**-64: among a million archived ids, one lookup of a new
    id is mistaken for a logged one with odds of about 5e-14.
    """

    __slots__ = ("_sorted", "_new", "count")

    def __init__(self, hashes: Iterable[int] = ()) -> None:
        self._sorted = array("q", sorted(hashes))
        self._new: set[int] = set()
        self.count = len(self._sorted)

    @staticmethod
    def key(message_id: str) -> int:
        return hash(message_id)

    def add(self, message_id: str) -> None:
        self._new.add(hash(message_id))
        self.count += 1
        if len(self._new) >= max(4096, len(self._sorted) >> 4):  # amortised: each merge costs 1/16 of a re-sort
            self._merge()

    def __contains__(self, message_id: str) -> bool:
        if not self.count:
            return False
        h = hash(message_id)
        if h in self._new:
            return True
        a = self._sorted
        i = bisect_left(a, h)
        return i < len(a) and a[i] == h

    def __len__(self) -> int:
        return self.count

    def _merge(self) -> None:
        merged = array("q", sorted((*self._sorted, *self._new)))
        self._sorted = merged
        self._new.clear()

    def absorb(self, other: LogArchive) -> None:
        """Add every id of ``other`` (which stays as it is)."""
        self._merge()
        self._sorted = array("q", sorted((*self._sorted, *other._sorted, *other._new)))
        self.count += other.count

    def copy(self) -> LogArchive:
        out = LogArchive()
        out._sorted = array("q", self._sorted)
        out._new = set(self._new)
        out.count = self.count
        return out
