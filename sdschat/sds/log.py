"""``LocalLog``: the ids a participant has logged, in order, with its Lamport clock and bloom filter."""

from __future__ import annotations

from bisect import insort
from collections import deque
from collections.abc import Iterator

from .bloom import RollingBloomFilter
from .config import ChannelConfig
from .state import LogRow

__all__ = ["LocalLog"]


class LocalLog:
    """The local log: ``(lamport_timestamp, message_id)`` order, the K newest additions, the clock, the filter.

    ``rows`` (id -> :class:`LogRow`) is shared by reference with the buffers that test membership; the
    incoming buffer moves ``lamport`` up to each message it delivers (journaled as ``lamport``).
    """

    __slots__ = ("rows", "keys", "recent", "bloom", "lamport", "journal", "_history_size")

    def __init__(self, config: ChannelConfig, lamport: int) -> None:
        self.rows: dict[str, LogRow] = {}
        self.keys: list[tuple[int, str]] = []
        self._history_size = config.causal_history_size
        self.recent: deque[str] = deque(maxlen=max(0, config.causal_history_size))  # newest log additions
        self.bloom = RollingBloomFilter(config.bloom_capacity, config.bloom_error_rate, rolling=config.bloom_rolling)
        self.lamport = lamport
        self.journal: list[tuple] | None = None

    def ids(self) -> list[str]:
        return [mid for _, mid in self.keys]

    def entries(self) -> list[LogRow]:
        rows = self.rows
        return [rows[mid] for _, mid in self.keys]

    def iter_entries(self) -> Iterator[LogRow]:
        """:meth:`entries` one at a time (for a caller that may stop early)."""
        rows = self.rows
        return (rows[mid] for _, mid in self.keys)

    def insert(self, row: LogRow, key: tuple[int, str] | None = None) -> None:
        if key is None:
            key = (row.lamport_timestamp, row.message_id)
        keys = self.keys
        if not keys or keys[-1] < key:
            keys.append(key)
        else:
            insort(keys, key)
        self.rows[row.message_id] = row
        self.recent.append(row.message_id)
        if self.journal is not None:
            self.journal.append(("log", row.message_id, row))

    def bump(self, now_ms: int) -> int:
        """The clock for a frame of ours: one past the last value, and at least ``now_ms``."""
        lt = self.lamport + 1
        if now_ms > lt:
            lt = now_ms
        self.lamport = lt
        if self.journal is not None:
            self.journal.append(("lamport", None, lt))
        return lt

    def bloom_add(self, mid: str, positions=None) -> None:
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
        found.sort(key=lambda r: (r.lamport_timestamp, r.message_id))
        return found

    def set_retrieval_hint(self, message_id: str, hint: bytes | None) -> None:
        row = self.rows.get(message_id)
        if row is not None and row.retrieval_hint != hint:
            row = LogRow(row.message_id, row.lamport_timestamp, row.sender_id, hint)
            self.rows[message_id] = row
            if self.journal is not None:
                self.journal.append(("log", message_id, row))

    def load(self, rows: list[LogRow], recent: list[str], bloom_ids: list[str]) -> None:
        """Restore from snapshot rows (``recent`` empty: the last K of the log)."""
        for row in sorted(rows, key=lambda r: (r.lamport_timestamp, r.message_id)):
            self.keys.append((row.lamport_timestamp, row.message_id))
            self.rows[row.message_id] = row
        recent = recent or [mid for _, mid in self.keys[-self._history_size:]]
        self.recent.extend(recent if self._history_size > 0 else ())
        self.bloom.load(bloom_ids)

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
