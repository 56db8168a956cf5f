"""``GapHints``: ids a peer's bloom filter shows it lacks, to be named in our next sync."""

from __future__ import annotations

from collections import OrderedDict, deque
from typing import TYPE_CHECKING

from . import repair as _repair
from .bloom import RollingBloomFilter, contains_in
from .config import ChannelConfig
from .state import LogRow

if TYPE_CHECKING:
    from .frame import Frame

__all__ = ["GapHints"]


class GapHints:
    """Gap hints (``gap_hints > 0``): see "Gap hints" in :mod:`sdschat.sds.channel`.

    Keeps the recent log additions ``(seq, logged_at, row, bloom positions)``, a per-peer cursor
    into them (each received filter is checked against the additions it has not been checked against),
    and the ids found lacking, until a sync names them or someone else's frame does.
    """

    __slots__ = (
        "additions",
        "seq",
        "cursor",
        "pending",
        "due_at",
        "config",
        "participant_id",
        "log",
        "bloom",
        "bloom_len",
    )

    def __init__(
        self, config: ChannelConfig, participant_id: str, log: dict[str, LogRow], bloom: RollingBloomFilter
    ) -> None:
        # (the rows themselves: a windowed log may have moved an addition out of memory before it is hinted)
        # (a rolling filter of our size holds at least its newest capacity // 2 ids: only those are checked)
        window = config.gap_hint_window
        if config.bloom_rolling:
            window = min(window, config.bloom_capacity // 2)
        self.additions: deque[tuple[int, int, LogRow, tuple[tuple[int, int], ...]]] = deque(maxlen=max(1, window))
        self.seq = 0
        self.cursor: OrderedDict[str, int] = OrderedDict()
        self.pending: OrderedDict[str, LogRow] = OrderedDict()
        self.due_at: int | None = None
        self.config = config
        self.participant_id = participant_id
        self.log = log
        self.bloom = bloom
        self.bloom_len = bloom.n_bytes

    def note(self, row: LogRow, now_ms: int, positions: tuple[tuple[int, int], ...] | None = None) -> None:
        """``row`` entered the log at ``now_ms``."""
        if self.config.gap_hints > 0:
            self.seq += 1
            self.additions.append((self.seq, now_ms, row, positions or self.bloom.positions(row.message_id)))

    def on_frame(self, f: Frame, sender: str, now_ms: int) -> None:
        """A received frame: the ids it names need no hint; its filter may show what ``sender`` lacks."""
        pending = self.pending
        if pending:
            for d in f.history_ids:
                pending.pop(d, None)  # someone else named it
        bloom = f.bloom
        if bloom is None or len(bloom) != self.bloom_len or not self.additions:
            return
        cursor = self.cursor.get(sender, 0)
        if cursor < self.seq:
            self._check(bloom, sender, cursor, now_ms)

    def _check(self, bloom: bytes, sender: str, cursor: int, now_ms: int) -> None:
        """Ids we logged at least the margin ago that ``sender``'s filter lacks become gap hints."""
        cfg = self.config
        limit = now_ms - cfg.gap_hint_margin_ms
        oldest = now_ms - cfg.gap_hint_max_age_ms  # a late joiner is not handed the whole window
        last = cursor
        hints = self.pending
        for seq, at, row, positions in self.additions:
            if seq <= cursor:
                continue
            if at > limit:
                break
            last = seq
            mid = row.message_id
            if at < oldest or row.sender_id == sender or mid in hints:
                continue
            if not contains_in(bloom, positions):  # no false negatives: the peer lacks it
                hints[mid] = row
                if len(hints) > cfg.gap_hint_window:
                    hints.popitem(last=False)
        if last != cursor:
            self.cursor[sender] = last
            self.cursor.move_to_end(sender)
            if len(self.cursor) > 4096:
                self.cursor.popitem(last=False)
        if hints and self.due_at is None:
            delay = cfg.ack_delay_ms or 0
            span = cfg.ack_jitter_ms
            jitter = _repair.hash64(f"{self.participant_id}/hint/{now_ms}") % (span + 1) if span > 0 else 0
            self.due_at = now_ms + delay + jitter

    def due(self, now_ms: int) -> bool:
        if self.due_at is not None and not self.pending:
            self.due_at = None  # others named them first
        return self.due_at is not None and self.due_at <= now_ms

    def take(self, history: list[LogRow], now_ms: int) -> list[LogRow]:
        """``history`` with up to ``gap_hints`` pending hints added (in log order), for a sync frame."""
        pending = self.pending
        if not pending:
            return history
        named = {r.message_id for r in history}
        extra: list[LogRow] = []
        while pending and len(extra) < self.config.gap_hints:
            mid, noted = pending.popitem(last=False)
            row = self.log.get(mid, noted)  # (the log's row carries a retrieval hint set since)
            if mid not in named:
                extra.append(row)
        if extra:
            history = sorted(history + extra, key=lambda r: r.log_key)
        self.due_at = None if not pending else now_ms + (self.config.ack_delay_ms or 0)
        return history
