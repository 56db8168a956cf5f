"""``LocalLog``: the ids a participant has logged, in order, with its Lamport clock and bloom filter.

With ``ChannelConfig.log_window`` set, only the newest ``log_window`` rows (in log order) stay in memory; the
older ids move to a :class:`LogArchive`, which answers "is this id logged?" at 8 bytes an id. A chat with a
long history keeps a few megabytes of engine log per channel instead of hundreds of bytes per message.
"""

from __future__ import annotations

from bisect import insort
from collections import deque
from collections.abc import Iterator
from typing import Any

from .archive import LogArchive
from .bloom import RollingBloomFilter
from .config import ChannelConfig
from .state import JournalOp, LogRow

__all__ = ["LocalLog"]


class LocalLog:
    """The local log: ``(lamport_timestamp, message_id)`` order, the K newest additions, the clock, the filter.

    ``rows`` (id -> :class:`LogRow`) is shared by reference with the buffers that test membership; the
    incoming buffer moves ``lamport`` up to each message it delivers (journaled as ``lamport``).

    Windowed (``log_window`` > 0): ``rows`` and ``keys`` hold the newest ``log_window`` rows in log order (up to
    an eighth more between evictions, and the K newest additions always: a late message with an old Lamport
    time is still named in the next causal history); ``archive`` knows the rest. Whoever tests membership
    tests ``rows`` first, then ``archive`` (empty, and never consulted, when the window is off). Eviction is
    not journaled: the database keeps every row.
    """

    __slots__ = (
        "rows",
        "keys",
        "recent",
        "bloom",
        "lamport",
        "journal",
        "archive",
        "_history_size",
        "_window",
        "_slack",
    )

    def __init__(self, config: ChannelConfig, lamport: int) -> None:
        self.rows: dict[str, LogRow] = {}
        # (lamport, id) keys, typed as plain tuples: the compiled build (mypyc) would copy a ``tuple[int, str]``
        # into a C struct and box a new tuple (and int) for every member, where the frame's one key is shared
        self.keys: list[tuple[Any, ...]] = []
        self.archive = LogArchive()
        self._window = window = max(0, config.log_window)
        self._slack = max(64, window >> 3)
        self._history_size = config.causal_history_size
        self.recent: deque[str] = deque(maxlen=max(0, config.causal_history_size))  # newest log additions
        self.bloom = RollingBloomFilter(config.bloom_capacity, config.bloom_error_rate, rolling=config.bloom_rolling)
        self.lamport = lamport
        self.journal: list[JournalOp] | None = None

    def ids(self) -> list[str]:
        return [mid for _, mid in self.keys]

    def entries(self) -> list[LogRow]:
        rows = self.rows
        return [rows[mid] for _, mid in self.keys]

    def iter_entries(self) -> Iterator[LogRow]:
        """:meth:`entries` one at a time (for a caller that may stop early)."""
        rows = self.rows
        return (rows[mid] for _, mid in self.keys)

    def insert(self, row: LogRow, key: tuple[Any, ...] | None = None) -> None:
        if key is None:
            key = row.log_key
        keys = self.keys
        if not keys or keys[-1] < key:
            keys.append(key)
        else:
            insort(keys, key)
        self.rows[row.message_id] = row
        self.recent.append(row.message_id)
        if self.journal is not None:
            self.journal.append(("log", row.message_id, row))
        if self._window and len(keys) > self._window + self._slack:
            self._evict()

    def _evict(self) -> None:
        """Move the oldest rows (log order) past the window to the archive, keeping the K newest additions."""
        keys, rows, archive = self.keys, self.rows, self.archive
        n = len(keys) - self._window
        if n <= 0:
            return
        recent = set(self.recent)
        kept = []
        for key in keys[:n]:
            mid = key[1]
            if mid in recent:
                kept.append(key)
            else:
                del rows[mid]
                archive.add(mid)
        keys[:n] = kept

    def knows(self, message_id: str) -> bool:
        """``message_id`` is logged (in the window or archived)."""
        return message_id in self.rows or message_id in self.archive

    def size(self) -> int:
        """Every logged message, archived ones included."""
        return len(self.rows) + self.archive.count

    def bump(self, now_ms: int) -> int:
        """The clock for a frame of ours: one past the last value, and at least ``now_ms``."""
        lt = self.lamport + 1
        if now_ms > lt:
            lt = now_ms
        self.lamport = lt
        if self.journal is not None:
            self.journal.append(("lamport", None, lt))
        return lt

    def bloom_add(self, mid: str, positions: tuple[tuple[int, int], ...] | None = None) -> None:
        rolled = self.bloom.add(mid, positions)
        if self.journal is not None:
            if rolled:
                self.journal.append(("bloom-roll", None, self.bloom.keep))
            self.journal.append(("bloom", mid, None))

    def causal_history(self) -> list[LogRow]:
        """The K messages most recently added to the log, in log order.

        For messages arriving in order these are the last K of the log. A message that
        arrives late with an old Lamport timestamp lands deep in the log but is still
        named here, so members who missed it learn it exists.
        """
        if self._history_size <= 0:
            return []
        rows = self.rows
        found = [rows[mid] for mid in self.recent if mid in rows]
        found.sort(key=lambda r: r.log_key)
        return found

    def set_retrieval_hint(self, message_id: str, hint: bytes | None) -> None:
        row = self.rows.get(message_id)
        if row is not None and row.retrieval_hint != hint:
            row = LogRow(row.message_id, row.lamport_timestamp, row.sender_id, hint)
            self.rows[message_id] = row
            if self.journal is not None:
                self.journal.append(("log", message_id, row))

    def load(
        self, rows: list[LogRow], recent: list[str], bloom_ids: list[str], archive: LogArchive | None = None
    ) -> None:
        """Restore from snapshot rows (``recent`` empty: the last K of the log) and the archive of the older ids
        (a store reads only the window's rows for a windowed log)."""
        for row in sorted(rows, key=lambda r: r.log_key):
            self.keys.append(row.log_key)
            self.rows[row.message_id] = row
        if archive is not None:
            self.archive.absorb(archive)  # (the same object: the receive path holds a reference to it)
        recent = recent or [mid for _, mid in self.keys[-self._history_size :]]
        self.recent.extend(recent if self._history_size > 0 else ())
        self.bloom.load(bloom_ids)
        if self._window and len(self.keys) > self._window + self._slack:
            self._evict()

    def problems(self) -> list[str]:
        problems = []
        if sorted(self.keys) != self.keys:
            problems.append("log keys out of order")
        if len(self.keys) != len(self.rows):
            problems.append("log index and order disagree")
        for mid, row in self.rows.items():
            if row.lamport_timestamp > self.lamport:
                problems.append(f"logged {mid} is ahead of the clock")
        return problems
