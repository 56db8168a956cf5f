"""``IncomingBuffer``: received content messages until their dependencies are met or declared lost."""

from __future__ import annotations

import heapq
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from .config import ChannelConfig
from .events import Delivered, Event, Evicted, Lost, Missing
from .hints import GapHints
from .log import LocalLog
from .repair import RepairScheduler
from .state import CacheRow, InRow, JournalOp, LogRow, MissingRow
from .wire import HistoryEntry

if TYPE_CHECKING:
    from .frame import Frame

__all__ = ["IncomingBuffer"]

_LOST_MEMORY = 10_000
#: stale timer entries tolerated beyond twice the live ones before the heaps are rebuilt
_HEAP_SLACK = 64


class _In:
    __slots__ = (
        "sender_id",
        "lamport",
        "causal",
        "content",
        "received_at",
        "unmet",
        "repaired",
        "after_lost",
        "shared",
    )

    def __init__(
        self,
        sender_id: str,
        lamport: int,
        causal: tuple[HistoryEntry, ...],
        content: bytes,
        received_at: int,
        unmet: list[str],
        repaired: bool,
        after_lost: tuple[str, ...] = (),
        shared: tuple[Any, ...] | None = None,
    ) -> None:
        self.sender_id = sender_id
        self.lamport = lamport
        self.causal = causal
        self.content = content
        self.received_at = received_at
        self.unmet = unmet  # a list of distinct ids: a message waits on a few, and a set costs 4-8x the memory
        self.repaired = repaired
        self.after_lost = tuple(after_lost)  # almost always empty: grown by copying
        #: the frame's ``(LogRow, Delivered, log key)`` made once for all its receivers (see ``deliver``), for
        #: a message that arrived without a hint and not as a repair; None otherwise
        self.shared = shared


class IncomingBuffer:
    """Delivery in causal order: waiting messages, the ids they wait on (missing ones get an SDS-R
    request), lost declarations, forced deliveries and eviction.

    ``entries`` (id -> waiting message) is shared by reference with the channel's receive path (dedup).
    Timer heaps hold ``(due, id)``: a missing id is lost ``lost_after_ms`` after it was noticed, a waiting
    message is delivered anyway ``2 * lost_after_ms`` after it arrived.
    """

    __slots__ = (
        "entries",
        "waiters",
        "wait_heap",
        "missing",
        "missing_heap",
        "lost",
        "hint_map",
        "log",
        "logged",
        "archive",
        "repair",
        "hints",
        "config",
        "stats",
        "journal",
        "delivered",
    )

    def __init__(
        self, config: ChannelConfig, stats: dict[str, int], log: LocalLog, repair: RepairScheduler, hints: GapHints
    ) -> None:
        self.entries: dict[str, _In] = {}
        self.waiters: dict[str, list[str]] = {}  # dependency -> ids of the messages waiting on it
        self.wait_heap: list[tuple[int, str]] = []
        self.missing: dict[str, MissingRow] = {}
        self.missing_heap: list[tuple[int, str]] = []
        self.lost: OrderedDict[str, str | None] = OrderedDict()
        self.hint_map: dict[str, bytes] = {}  # retrieval hints of buffered messages, until delivery
        self.log = log
        self.logged = log.rows
        self.archive = log.archive
        self.repair = repair
        self.hints = hints
        self.config = config
        self.stats = stats
        self.journal: list[JournalOp] | None = None
        self.delivered = 0  # (a native int, not a ``stats`` entry: see MessageChannel.stats)

    # ----------------------------------------------------------------- arrival

    def accept(
        self,
        f: Frame,
        mid: str,
        sender: str,
        lamport: int,
        now_ms: int,
        hint: bytes | None,
        events: list[Event],
        positions: tuple[tuple[int, int], ...] | None = None,
    ) -> None:
        """A new content message: deliver it (and what waited for it) or buffer it behind its gaps."""
        content = f.content
        causal = f.history  # a tuple of immutable entries, shared by every receiver of the frame
        self.log.bloom_add(mid, positions)
        repaired = mid in self.missing or mid in self.lost
        if repaired:
            self._arrived(mid)
        cfg = self.config
        repair = self.repair
        if cfg.repair.enabled and repair.in_sender_group(f):
            repair.cache_put(CacheRow(mid, sender, lamport, causal, content))
        log = self.logged
        incoming = self.entries
        lost = self.lost
        unmet: list[str] = []
        missing: list[HistoryEntry] = []
        waiting: list[str] = []
        archive = self.archive
        for e in causal:
            d = e.message_id
            if d in log or d in lost or d in unmet or d in archive:
                continue
            unmet.append(d)
            if d in incoming:
                waiting.append(d)
            else:
                missing.append(e)
        shared: tuple[Any, ...] | None = None  # a plain tuple: one object for every receiver (see LocalLog.keys)
        if hint is None and not repaired:
            shared = f._delivery
            if shared is None:
                made: tuple[Any, ...] = (
                    LogRow(mid, lamport, sender, None),
                    Delivered(mid, sender, content, lamport, False, ()),
                    (lamport, mid),
                )
                shared = f._delivery = made  # (boxed once: a tuple literal assigned twice is boxed twice)
        if not unmet:
            self.deliver(mid, sender, lamport, content, hint, repaired, (), events, now_ms, shared)
            return
        if len(incoming) >= cfg.incoming_buffer_size:
            self.evict_oldest(now_ms, events)
        # (the shared rows serve its delivery later too: with loss, most members deliver most messages after
        # they waited behind a gap, and a log row of their own would cost ~120 bytes a member a message)
        entry = _In(sender, lamport, causal, content, now_ms, unmet, repaired, (), shared)
        incoming[mid] = entry
        waiters = self.waiters
        for d in unmet:
            lst = waiters.get(d)
            if lst is None:
                waiters[d] = [mid]
            else:
                lst.append(mid)
        wait_heap = self.wait_heap
        heapq.heappush(wait_heap, (now_ms + 2 * cfg.lost_after_ms, mid))
        if len(wait_heap) > 2 * len(incoming) + _HEAP_SLACK:
            self._compact_heaps()
        if hint is not None:
            self.hint_map[mid] = hint
        if self.journal is not None:
            self.journal.append(("in", mid, self.row(mid, entry, hint)))
        for e in missing:
            self.note_missing(e, now_ms, events)
        events.append(Missing(mid, missing, sender, content, lamport, tuple(waiting)))

    def _arrived(self, mid: str) -> None:
        """``mid``, known missing or declared lost, has arrived."""
        if mid in self.missing:
            del self.missing[mid]
            if self.journal is not None:
                self.journal.append(("missing-", mid, None))
        else:
            del self.lost[mid]
            if self.journal is not None:
                self.journal.append(("lost-", mid, None))

    def note_missing(self, entry: HistoryEntry, now_ms: int, events: list[Event]) -> bool:
        """Record ``entry`` as missing if nothing here knows it; True if it is newly missing."""
        d = entry.message_id
        if d in self.missing or d in self.logged or d in self.entries or d in self.lost or d in self.archive:
            return False
        row = MissingRow(entry, now_ms)
        self.missing[d] = row
        heap = self.missing_heap
        heapq.heappush(heap, (now_ms + self.config.lost_after_ms, d))
        if len(heap) > 2 * len(self.missing) + _HEAP_SLACK:
            self._compact_heaps()
        if self.journal is not None:
            self.journal.append(("missing", d, row))
        self.repair.add_request(entry, now_ms, events)
        return True

    # ---------------------------------------------------------------- delivery

    def deliver(
        self,
        mid: str,
        sender: str,
        lamport: int,
        content: bytes,
        hint: bytes | None,
        repaired: bool,
        after_lost: tuple[str, ...],
        events: list[Event],
        now_ms: int,
        shared: tuple[Any, ...] | None = None,
    ) -> None:
        """Log and deliver ``mid``, then whatever waited only for it (and so on).

        ``shared``: the ``(LogRow, Delivered, log key)`` of ``mid`` made once for every receiver of its
        frame (all immutable; equal to what would be made here); a waiting message released here uses its
        frame's (``_In.shared``) when it is delivered as it would have been without the wait (no hint, not
        repaired, nothing declared lost before it).
        """
        stack = [(mid, sender, lamport, content, hint, repaired, tuple(after_lost), shared)]
        incoming = self.entries
        waiters = self.waiters
        journal = self.journal
        log = self.log
        note = self.hints.note if self.config.gap_hints > 0 else None  # (GapHints.note does nothing else)
        emit = events.append
        while stack:
            mid, sender, lamport, content, hint, repaired, after_lost, shared = stack.pop()
            if lamport > log.lamport:  # the clock moves up to what is delivered
                log.lamport = lamport
                if journal is not None:
                    journal.append(("lamport", None, lamport))
            if shared is not None:
                row, delivered, key = shared
            else:
                row = LogRow(mid, lamport, sender, hint)
                delivered = Delivered(mid, sender, content, lamport, repaired, after_lost)
                key = None
            log.insert(row, key)
            if note is not None:
                note(row, now_ms)
            self.delivered += 1
            emit(delivered)
            dependants = waiters.pop(mid, None)
            if not dependants:
                continue
            for w in dependants:
                entry = incoming.get(w)
                if entry is None:
                    continue
                unmet = entry.unmet
                if mid in unmet:
                    unmet.remove(mid)
                if not unmet:
                    del incoming[w]
                    if journal is not None:
                        journal.append(("in-", w, None))
                    hint = self.hint_map.pop(w, None)
                    stack.append(
                        (
                            w,
                            entry.sender_id,
                            entry.lamport,
                            entry.content,
                            hint,
                            entry.repaired,
                            entry.after_lost,
                            entry.shared if hint is None and not entry.after_lost else None,
                        )
                    )
                elif journal is not None:
                    journal.append(("in", w, self.row(w, entry, self.hint_map.get(w))))

    def declare_lost(self, dep: str, events: list[Event], now_ms: int) -> None:
        """``dep`` will not arrive in time: deliver its waiting dependants without it."""
        journal = self.journal
        row = self.missing.pop(dep, None)
        if journal is not None and row is not None:
            journal.append(("missing-", dep, None))
        self.repair.drop_request(dep)
        sender = row.entry.sender_id if row is not None else None
        self.lost[dep] = sender
        if journal is not None:
            journal.append(("lost", dep, sender))
        if len(self.lost) > _LOST_MEMORY:
            old, _ = self.lost.popitem(last=False)
            if journal is not None:
                journal.append(("lost-", old, None))
        self.stats["lost"] += 1
        dependants = tuple(self.waiters.get(dep, ()))
        events.append(Lost(dep, sender, dependants))
        self._release(dep, events, now_ms)

    def _release(self, dep: str, events: list[Event], now_ms: int) -> None:
        incoming = self.entries
        for w in self.waiters.pop(dep, ()):
            entry = incoming.get(w)
            if entry is None:
                continue
            if dep in entry.unmet:
                entry.unmet.remove(dep)
            entry.after_lost += (dep,)
            if not entry.unmet:
                del incoming[w]
                if self.journal is not None:
                    self.journal.append(("in-", w, None))
                self.deliver(
                    w,
                    entry.sender_id,
                    entry.lamport,
                    entry.content,
                    self.hint_map.pop(w, None),
                    entry.repaired,
                    entry.after_lost,
                    events,
                    now_ms,
                )
            elif self.journal is not None:
                self.journal.append(("in", w, self.row(w, entry, self.hint_map.get(w))))

    def evict_oldest(self, now_ms: int, events: list[Event]) -> None:
        old = next(iter(self.entries))
        self.stats["evicted"] += 1
        events.append(Evicted("incoming", old))
        self.force_deliver(old, events, now_ms)

    def force_deliver(self, old: str, events: list[Event], now_ms: int) -> None:
        """Deliver buffered ``old`` now: its missing dependencies are declared lost."""
        entry = self.entries[old]
        for dep in sorted(entry.unmet):
            if dep not in self.entries:
                self.declare_lost(dep, events, now_ms)
        popped = self.entries.pop(old, None)
        if popped is None:
            return
        entry = popped
        # still waiting on messages that are themselves waiting: deliver it now anyway
        if self.journal is not None:
            self.journal.append(("in-", old, None))
        for dep in entry.unmet:
            lst = self.waiters.get(dep)
            if lst and old in lst:
                lst.remove(old)
        self.deliver(
            old,
            entry.sender_id,
            entry.lamport,
            entry.content,
            self.hint_map.pop(old, None),
            entry.repaired,
            entry.after_lost + tuple(sorted(entry.unmet)),
            events,
            now_ms,
        )

    # ------------------------------------------------------------------ timers

    def _compact_heaps(self) -> None:
        """Rebuild both timer heaps from what is still waiting or missing.

        A delivered or arrived id leaves its heap entry behind (checked when it comes due, by
        :meth:`wait_live` and :meth:`missing_live`); that is 2 or 1 ``lost_after_ms`` of every id that ever
        waited. Called when stale entries outnumber live ones: the heaps pop the same live entries in the same
        order afterwards.
        """
        lost_after = self.config.lost_after_ms
        self.wait_heap[:] = [(e.received_at + 2 * lost_after, m) for m, e in self.entries.items()]
        heapq.heapify(self.wait_heap)
        self.missing_heap[:] = [(row.detected_at + lost_after, d) for d, row in self.missing.items()]
        heapq.heapify(self.missing_heap)

    def wait_live(self, t: int, mid: str) -> bool:
        """A waiting message's forced delivery (``2 * lost_after_ms`` after it arrived)."""
        entry = self.entries.get(mid)
        return entry is not None and entry.received_at + 2 * self.config.lost_after_ms == t

    def missing_live(self, t: int, mid: str) -> bool:
        """A missing id's loss (``lost_after_ms`` after it was noticed)."""
        row = self.missing.get(mid)
        return row is not None and row.detected_at + self.config.lost_after_ms == t

    def expire(self, now_ms: int, events: list[Event]) -> None:
        """Declare lost what is missing too long; deliver what waited too long."""
        heap = self.missing_heap
        while heap and heap[0][0] <= now_ms:
            t, mid = heapq.heappop(heap)
            if self.missing_live(t, mid):
                self.declare_lost(mid, events, now_ms)
        heap = self.wait_heap
        while heap and heap[0][0] <= now_ms:
            t, mid = heapq.heappop(heap)
            if self.wait_live(t, mid):
                self.force_deliver(mid, events, now_ms)

    # ------------------------------------------------------------- persistence

    def row(self, mid: str, entry: _In, hint: bytes | None) -> InRow:
        return InRow(
            mid,
            entry.sender_id,
            entry.lamport,
            entry.causal,
            entry.content,
            entry.received_at,
            tuple(sorted(entry.unmet)),
            entry.repaired,
            entry.after_lost,
            hint,
        )

    def rows(self) -> list[InRow]:
        hints = self.hint_map
        return [self.row(mid, e, hints.get(mid)) for mid, e in self.entries.items()]

    def load(self, incoming: list[InRow], missing: list[MissingRow], lost: list[tuple[str, str | None]]) -> None:
        lost_after = self.config.lost_after_ms
        for r in sorted(incoming, key=lambda r: r.received_at):
            entry = _In(
                r.sender_id,
                r.lamport_timestamp,
                tuple(r.causal_history),
                r.content,
                r.received_at,
                list(dict.fromkeys(r.unmet)),
                r.repaired,
                r.after_lost,
            )
            self.entries[r.message_id] = entry
            for d in entry.unmet:
                self.waiters.setdefault(d, []).append(r.message_id)
            heapq.heappush(self.wait_heap, (r.received_at + 2 * lost_after, r.message_id))
            if r.retrieval_hint is not None:
                self.hint_map[r.message_id] = r.retrieval_hint
        for row in missing:
            self.missing[row.entry.message_id] = row
            heapq.heappush(self.missing_heap, (row.detected_at + lost_after, row.entry.message_id))
        for mid, sender in lost:
            self.lost[mid] = sender

    # ------------------------------------------------------------------- views

    def open_gaps(self) -> list[tuple[str, tuple[str, ...], tuple[str, ...]]]:
        """See :meth:`sdschat.sds.channel.MessageChannel.open_gaps`."""
        missing = self.missing
        gaps = []
        named: set[str] = set()
        for mid, e in sorted(self.entries.items(), key=lambda kv: (kv[1].lamport, kv[0])):
            ids = tuple(sorted(e.unmet))
            named.update(ids)
            senders = {missing[d].entry.sender_id for d in ids if d in missing}
            gaps.append((mid, ids, tuple(sorted(x for x in senders if x))))
        rest = [row.entry for d, row in missing.items() if d not in named]
        if rest:
            named_senders = {e.sender_id for e in rest if e.sender_id}
            gaps.append(("", tuple(e.message_id for e in rest), tuple(sorted(x for x in named_senders if x))))
        return gaps

    def problems(self) -> list[str]:
        problems = []
        log = self.logged
        for mid in self.entries:
            if mid in log:
                problems.append(f"{mid} both logged and buffered")
        for mid, e in self.entries.items():
            if not e.unmet:
                problems.append(f"buffered {mid} has no unmet dependency")
            for d in e.unmet:
                if d in log:
                    problems.append(f"buffered {mid} waits on logged {d}")
                if mid not in self.waiters.get(d, ()):
                    problems.append(f"buffered {mid} not registered as waiting on {d}")
        for mid in self.missing:
            if mid in log or mid in self.entries:
                problems.append(f"missing {mid} is present")
        return problems
