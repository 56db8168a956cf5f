"""``OutgoingBuffer``: own messages not yet acknowledged, their resends and their (possible) acks."""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from typing import TYPE_CHECKING

from bitarray import bitarray

from .bloom import RollingBloomFilter, contains_in
from .config import ChannelConfig
from .events import Acknowledged, Event, Evicted, Outgoing, PossiblyAcknowledged
from .state import JournalOp, LogRow, OutRow
from .wire import HistoryEntry, encode_frame

if TYPE_CHECKING:
    from .frame import Frame

__all__ = ["OutgoingBuffer"]


class _Out:
    __slots__ = ("lamport", "causal", "content", "sent_at", "resends", "next_resend", "ack_senders", "positions")

    def __init__(
        self,
        lamport: int,
        causal: list[HistoryEntry],
        content: bytes,
        sent_at: int,
        resends: int,
        next_resend: int,
        ack_senders: set[str],
        positions: tuple[tuple[int, int], ...],
    ) -> None:
        self.lamport = lamport
        self.causal = causal
        self.content = content
        self.sent_at = sent_at
        self.resends = resends
        self.next_resend = next_resend
        self.ack_senders = ack_senders
        self.positions = positions


class OutgoingBuffer:
    """Own messages until acknowledged: resend timers, ack review, possible-ack counts.

    ``entries`` (id -> state) and ``peers`` (other participants seen, counted up to the possible-ack
    threshold) are shared by reference with the channel's receive path.
    """

    __slots__ = (
        "entries",
        "heap",
        "peers",
        "config",
        "stats",
        "journal",
        "channel_id",
        "participant_id",
        "bloom",
        "bloom_len",
        "dropped",
    )

    def __init__(
        self,
        config: ChannelConfig,
        channel_id: str,
        participant_id: str,
        stats: dict[str, int],
        bloom: RollingBloomFilter,
    ) -> None:
        self.entries: dict[str, _Out] = {}
        self.heap: list[tuple[int, str]] = []  # (next resend, id); stale entries are skipped
        self.peers: set[str] = set()
        #: participants that no longer count as peers nor acknowledge (:meth:`drop`)
        self.dropped: set[str] = set()
        self.config = config
        self.stats = stats
        self.journal: list[JournalOp] | None = None
        self.channel_id = channel_id
        self.participant_id = participant_id
        self.bloom = bloom
        self.bloom_len = bloom.n_bytes

    def add(
        self,
        mid: str,
        lamport: int,
        causal: list[HistoryEntry],
        content: bytes,
        now_ms: int,
        positions: tuple[tuple[int, int], ...],
    ) -> None:
        out = _Out(lamport, causal, content, now_ms, 0, now_ms + self.config.resend_unacknowledged_ms, set(), positions)
        self.entries[mid] = out
        heapq.heappush(self.heap, (out.next_resend, mid))
        if self.journal is not None:
            self.journal.append(("out", mid, self.row(mid, out)))

    def evict(self, deferred: list[Event]) -> None:
        """Drop the oldest while over ``outgoing_buffer_size``; the ``Evicted`` events go to ``deferred``."""
        entries = self.entries
        while len(entries) > self.config.outgoing_buffer_size:
            old = next(iter(entries))
            del entries[old]
            if self.journal is not None:
                self.journal.append(("out-", old, None))
            self.stats["evicted"] += 1
            deferred.append(Evicted("outgoing", old, {"reason": "buffer_full"}))

    def note_peers(self, rows: Iterable[LogRow]) -> None:
        """Count the other senders of restored log rows (up to the threshold), in log order."""
        peers = self.peers
        limit = self.config.possible_acks_threshold
        me = self.participant_id
        dropped = self.dropped
        for row in rows:
            if len(peers) >= limit:
                break  # a restored log of a million rows stops here, not at its end
            if row.sender_id != me and row.sender_id not in dropped:
                peers.add(row.sender_id)

    def drop(self, participant_id: str, events: list[Event]) -> None:
        """``participant_id`` left the group (an application removed it): it no longer counts as a peer, its
        earlier possible acknowledgements are forgotten, and what the remaining peers' filters already hold
        enough of is acknowledged now (``Acknowledged`` into ``events``)."""
        self.dropped.add(participant_id)
        self.peers.discard(participant_id)
        cfg = self.config
        threshold = cfg.possible_acks_threshold
        if cfg.possible_acks_group_cap:
            threshold = min(threshold, max(1, len(self.peers)))
        done = []
        for mid, out in self.entries.items():
            if participant_id in out.ack_senders:
                out.ack_senders.discard(participant_id)
                if self.journal is not None:
                    self.journal.append(("out", mid, self.row(mid, out)))
            if out.ack_senders and len(out.ack_senders) >= threshold:
                done.append(mid)
        for mid in done:
            del self.entries[mid]
            if self.journal is not None:
                self.journal.append(("out-", mid, None))
            self.stats["acked"] += 1
            self.stats["acked_by_bloom"] += 1
            events.append(Acknowledged(mid, by_bloom=True))

    # ------------------------------------------------------------------ acks

    def review_acks(self, f: Frame, sender: str, events: list[Event]) -> None:
        """Acks in a received frame: its causal history acknowledges, its bloom filter possibly does."""
        outgoing = self.entries
        journal = self.journal
        stats = self.stats
        for mid in f.history_ids:
            if mid in outgoing:
                del outgoing[mid]
                if journal is not None:
                    journal.append(("out-", mid, None))
                stats["acked"] += 1
                events.append(Acknowledged(mid))
        bloom = f.bloom
        if not outgoing or bloom is None or len(bloom) != self.bloom_len:
            return
        if sender in self.dropped:
            return
        done = self._bloom_acks(bloom, sender, events)
        for mid in done:
            del outgoing[mid]
            if journal is not None:
                journal.append(("out-", mid, None))
            stats["acked"] += 1
            stats["acked_by_bloom"] += 1
            events.append(Acknowledged(mid, by_bloom=True))

    def bloom_would_count(self, bloom: bytes | None, sender: str, history: frozenset[str]) -> bool:
        """Whether :meth:`review_acks` would count ``sender``'s filter for one of our messages that the frame's
        causal history (``history``: its ids) does not acknowledge already: the filter then decides something."""
        if bloom is None or len(bloom) != self.bloom_len or sender in self.dropped:
            return False
        for mid, out in self.entries.items():
            if mid in history or sender in out.ack_senders:
                continue
            if contains_in(bloom, out.positions):
                return True
        return False

    def _bloom_acks(self, bloom: bytes, sender: str, events: list[Event]) -> list[str]:
        """Count ``sender``'s filter for every message it holds; return those now acknowledged."""
        cfg = self.config
        threshold = cfg.possible_acks_threshold
        certain = cfg.bloom_certain_ack_fp
        journal = self.journal
        fp = None
        if cfg.possible_acks_group_cap:
            # distinct participants are needed; a group with fewer peers than the threshold can't supply them
            threshold = min(threshold, max(1, len(self.peers)))
        done = []
        for mid, out in self.entries.items():
            if sender in out.ack_senders or not contains_in(bloom, out.positions):
                continue
            out.ack_senders.add(sender)
            count = len(out.ack_senders)
            if certain is not None and count < threshold:
                if fp is None:
                    fp = self._bloom_fp(bloom)
                if fp <= certain:
                    count = threshold  # this filter is too sparse to be wrong: acknowledged
            if count >= threshold:
                done.append(mid)
            else:
                self.stats["possibly_acked"] += 1
                events.append(PossiblyAcknowledged(mid, count))
                if count == 1:
                    out.next_resend = max(out.next_resend, out.sent_at + cfg.resend_possibly_acknowledged_ms)
                    heapq.heappush(self.heap, (out.next_resend, mid))
                if journal is not None:
                    journal.append(("out", mid, self.row(mid, out)))
        return done

    def _bloom_fp(self, data: bytes) -> float:
        """False-positive probability of a lookup in the serialized filter ``data``: fill ** k."""
        bits = bitarray()
        bits.frombytes(data)
        f = self.bloom.filter
        return (bits.count() / f.m) ** f.k

    # --------------------------------------------------------------- resends

    def live(self, t: int, mid: str) -> bool:
        """Whether the timer entry ``(t, mid)`` is still the message's next resend."""
        out = self.entries.get(mid)
        return out is not None and out.next_resend == t

    def resend_due(self, now_ms: int, events: list[Event]) -> None:
        """Resend (or, past ``max_resends``, evict) every message whose resend is due."""
        heap = self.heap
        cfg = self.config
        while heap and heap[0][0] <= now_ms:
            t, mid = heapq.heappop(heap)
            if not self.live(t, mid):
                continue
            out = self.entries[mid]
            if cfg.max_resends is not None and out.resends >= cfg.max_resends:
                del self.entries[mid]
                if self.journal is not None:
                    self.journal.append(("out-", mid, None))
                self.stats["evicted"] += 1
                events.append(Evicted("outgoing", mid, {"reason": "max_resends"}))
                continue
            self.resend(mid, out, now_ms, events)

    def resend_all(self, now_ms: int, events: list[Event]) -> None:
        for mid, out in list(self.entries.items()):
            self.resend(mid, out, now_ms, events)

    def resend(self, mid: str, out: _Out, now_ms: int, events: list[Event]) -> None:
        cfg = self.config
        out.resends += 1
        base = cfg.resend_possibly_acknowledged_ms if out.ack_senders else cfg.resend_unacknowledged_ms
        # the exponent is capped: a message nobody acknowledges for hours must not overflow the float
        interval = min(cfg.resend_max_interval_ms, int(base * cfg.resend_backoff ** min(out.resends, 64)))
        out.next_resend = now_ms + max(1, interval)
        heapq.heappush(self.heap, (out.next_resend, mid))
        if self.journal is not None:
            self.journal.append(("out", mid, self.row(mid, out)))
        self.stats["resends"] += 1
        data = encode_frame(self.channel_id, self.participant_id, mid, out.lamport, out.causal, out.content)
        events.append(Outgoing(data, mid, "resend", out.lamport))

    # ---------------------------------------------------------- persistence

    def row(self, mid: str, out: _Out) -> OutRow:
        return OutRow(
            mid,
            out.lamport,
            tuple(out.causal),
            out.content,
            out.sent_at,
            out.resends,
            out.next_resend,
            tuple(sorted(out.ack_senders)),
        )

    def rows(self) -> list[OutRow]:
        return [self.row(mid, out) for mid, out in self.entries.items()]

    def load(self, rows: list[OutRow]) -> None:
        positions = self.bloom.positions
        for r in rows:
            out = _Out(
                r.lamport_timestamp,
                list(r.causal_history),
                r.content,
                r.sent_at,
                r.resends,
                r.next_resend,
                set(r.ack_senders),
                positions(r.message_id),
            )
            self.entries[r.message_id] = out
            heapq.heappush(self.heap, (out.next_resend, r.message_id))

    # ------------------------------------------------------------------ views

    def state(self, mid: str) -> tuple[str, int] | None:
        out = self.entries.get(mid)
        if out is None:
            return None
        return ("possibly_acknowledged" if out.ack_senders else "unacknowledged", out.resends)

    def ack_count(self, mid: str) -> int:
        out = self.entries.get(mid)
        return len(out.ack_senders) if out else 0

    def counts(self) -> tuple[int, int]:
        """``(unacknowledged, possibly acknowledged)``."""
        possibly = sum(1 for o in self.entries.values() if o.ack_senders)
        return len(self.entries) - possibly, possibly
