"""``Syncer``: sync frames out (when, and what they say) and in (dedup, the gaps they reveal); delayed acks."""

from __future__ import annotations

from collections import deque
from hashlib import sha256
from typing import TYPE_CHECKING

from . import repair as _repair
from .config import ChannelConfig
from .events import Event, GapDetected, Outgoing, SyncReceived
from .hints import GapHints
from .incoming import IncomingBuffer
from .log import LocalLog
from .repair import RepairScheduler
from .state import LogRow
from .wire import encode_frame

if TYPE_CHECKING:
    from .frame import Frame

__all__ = ["Syncer"]


class Syncer:
    """Sync frames: the periodic one (postponed by activity), and the early ones that repair requests,
    owed acks (``ack_delay_ms``) or gap hints call for. ``ack_owed`` (id -> (due, its sender)) is shared
    by reference with the channel's receive path.
    """

    __slots__ = (
        "recent",
        "order",
        "ack_owed",
        "last_activity",
        "counter",
        "jitter_for",
        "eager",
        "soon_by",
        "jitter",
        "next_at",
        "config",
        "participant_id",
        "channel_id",
        "stats",
        "log",
        "repair",
        "hints",
        "incoming",
        "logged",
        "archive",
        "waiting",
        "missing",
        "lost",
    )

    def __init__(
        self,
        config: ChannelConfig,
        channel_id: str,
        participant_id: str,
        stats: dict[str, int],
        now_ms: int,
        log: LocalLog,
        repair: RepairScheduler,
        hints: GapHints,
        incoming: IncomingBuffer,
    ) -> None:
        # ids of sync frames seen (dedup), oldest first: a plain dict and a queue of the same ids take half an
        # OrderedDict's memory (10,000 simulated members each hold thousands) and evict the oldest in O(1)
        self.recent: dict[str, None] = {}
        self.order: deque[str] = deque()
        self.ack_owed: dict[str, tuple[int, str]] = {}  # delayed ack: id -> (due, its sender)
        self.config = config
        self.participant_id = participant_id
        self.channel_id = channel_id
        self.stats = stats
        self.log = log
        self.repair = repair
        self.hints = hints
        self.incoming = incoming
        # what a sync's causal history is checked against: logged, waiting, known missing, declared lost
        self.logged = log.rows
        self.archive = log.archive
        self.waiting = incoming.entries
        self.missing = incoming.missing
        self.lost = incoming.lost
        self.last_activity = now_ms
        #: our syncs (and with ``sync_fresh_jitter`` the peers' too): the key of our jitter's draw, and of our
        #: sync ids
        self.counter = 0
        #: sync_soon asked for our next sync (until one of ours goes out): each periodic sync of ours is due just
        #: before the quiet interval ends, and no later than ``soon_by``; an owed acknowledgement with a quarter of its
        #: own jitter
        self.eager = False
        self.soon_by = 0
        self.jitter_for = -1
        self.jitter = 0
        self.next_at = self.due_after(now_ms)

    # ----------------------------------------------------------------- timing

    def _draw(self) -> None:
        """Our jitter for this ``counter``, drawn once."""
        if self.jitter_for != self.counter:
            span = self.config.sync_jitter_ms
            self.jitter = _repair.hash64(f"{self.participant_id}/sync/{self.counter}") % (span + 1) if span > 0 else 0
            self.jitter_for = self.counter

    def due_after(self, t: int) -> int:
        self._draw()
        return t + self.config.sync_interval_ms + self.jitter

    def activity(self, now_ms: int) -> None:
        """Channel activity at ``now_ms`` postpones the periodic sync."""
        if now_ms > self.last_activity:
            self.last_activity = now_ms
            self.next_at = self.due_after(now_ms)
            if self.eager:
                self.soon()

    def ask_soon(self, by: int) -> None:
        """(``MessageChannel.sync_soon``) Our periodic syncs are ours the :meth:`soon` way until one of our frames
        goes out, none later than ``by`` (the earliest bound asked for while it holds)."""
        if not self.eager or by < self.soon_by:
            self.soon_by = by
        self.eager = True  # and if a message comes first, our acknowledging sync goes first (it would be sent anyway)
        self._draw()
        self.soon()

    def soon(self) -> None:
        """(``eager``) The periodic sync is ours: due before the quiet interval ends, by up to a sixteenth of our
        jitter (of another eager one apart by its own draw), and no later than ``soon_by``. Every peer's periodic
        sync is due at that end or later, so ours takes the round instead of meeting a peer's in it: a lead drawn
        inside the peers' jitter (a quarter of it, measured) let a peer's sync cross ours on the wire and cost the
        channel a sync in one round of eight."""
        due = self.last_activity + self.config.sync_interval_ms - (self.jitter >> 4)
        if due > self.soon_by:
            due = self.soon_by
        if due < self.next_at:
            self.next_at = due

    def due(self, now_ms: int) -> bool:
        """Whether :meth:`build` should run at ``now_ms`` (due requests, owed acks, gap hints or the period)."""
        req_due = self.repair.request_due(now_ms)
        ack_due = bool(self.ack_owed) and min(t for t, _ in self.ack_owed.values()) <= now_ms
        hint_due = self.hints.due(now_ms)
        return req_due or ack_due or hint_due or now_ms >= self.next_at

    def deadline(self) -> int:
        """The earliest of the periodic sync, the gap hints' sync and the owed acks."""
        due = self.next_at
        hint_due = self.hints.due_at
        if hint_due is not None and hint_due < due:
            due = hint_due
        if self.ack_owed:
            due = min(due, min(t for t, _ in self.ack_owed.values()))
        return due

    # ------------------------------------------------------------------- acks

    def owe_ack(self, mid: str, sender: str, now_ms: int) -> None:
        span = self.config.ack_jitter_ms
        if self.eager:  # (sync_soon) this member's acknowledging sync goes first, in the place of another's
            span >>= 2  # (a quarter: ahead of most, and another eager member's by its own draw)
        jitter = _repair.hash64(f"{self.participant_id}/ack/{mid}/{now_ms}") % (span + 1) if span > 0 else 0
        self.ack_owed[mid] = (now_ms + (self.config.ack_delay_ms or 0) + jitter, sender)

    def forget_acked(self, history_ids: tuple[str, ...], sender: str) -> None:
        owed = self.ack_owed
        for d in history_ids:
            got = owed.get(d)
            if got is not None and got[1] != sender:
                del owed[d]  # someone else acknowledged it to its sender

    def _unpaid(self, named: set[str]) -> list[tuple[str, tuple[int, str], LogRow]]:
        """The owed acks (oldest first) that neither our bloom filter holds nor ``named`` (the causal history of
        a frame going out) names, of messages still in the log: see "Acks a filter does not hold are named" in
        :mod:`.channel`."""
        bloom = self.log.bloom
        logged = self.logged
        out = []
        for mid, due in self.ack_owed.items():
            row = logged.get(mid)
            if row is not None and mid not in named and mid not in bloom:
                out.append((mid, due, row))
        return out

    def _keep_owed(self, unpaid: list[tuple[str, tuple[int, str], LogRow]]) -> None:
        owed = self.ack_owed  # (shared with the channel: changed in place)
        owed.clear()
        for mid, due, _ in unpaid:
            owed[mid] = due

    def acks_sent(self, named: set[str]) -> None:
        """A frame of ours went out: its bloom filter acknowledges every owed id it holds, its causal history
        (``named``) those it names. What neither does stays owed (still due: a sync names it next)."""
        self._keep_owed(self._unpaid(named))

    # ------------------------------------------------------------------ frames

    def on_sync(self, f: Frame, mid: str, sender: str, now_ms: int, events: list[Event]) -> None:
        """A sync frame not seen before (``mid`` not in ``recent``): remember it, count it as activity, and
        note as missing (``GapDetected``) the ids it names that nobody here has (the channel counts it)."""
        recent = self.recent
        recent[mid] = None
        order = self.order
        order.append(mid)
        if len(order) > self.config.sync_dedup:
            del recent[order.popleft()]
        if now_ms > self.last_activity:
            if self.config.sync_fresh_jitter:
                self.counter += 1  # a peer's sync ended the quiet interval: the next one is contested afresh
            self.activity(now_ms)
        ev = f._sync_event
        if ev is None:
            ev = f._sync_event = SyncReceived(sender, mid, f.lamport)
        events.append(ev)
        log = self.logged
        waiting = self.waiting
        missing = self.missing
        lost = self.lost
        gaps = None
        archive = self.archive
        for d in f.history_ids:
            if d in log or d in waiting or d in missing or d in lost or d in archive:
                continue  # known here (logged, or waiting behind a gap): nothing to note
            e = f.history[f.history_ids.index(d)]  # rare: the entry itself
            if self.incoming.note_missing(e, now_ms, events):
                if gaps is None:
                    gaps = []
                gaps.append(e)
        if gaps:
            events.append(GapDetected(gaps, sender, mid))

    def remember(self, ids: list[str]) -> None:
        for sid in ids:
            if sid not in self.recent:
                self.recent[sid] = None
                self.order.append(sid)
        while len(self.order) > max(1, self.config.sync_dedup):
            del self.recent[self.order.popleft()]

    def build(self, now_ms: int) -> Outgoing | None:
        """A sync frame (no content) with causal history, bloom filter and due repair requests."""
        log = self.log
        repair = self.repair.due_requests(now_ms)
        history = self.hints.take(log.causal_history(), now_ms)
        if self.ack_owed:  # owed acks our filter does not hold: up to ack_names named here, the rest next time
            unpaid = self._unpaid({r.message_id for r in history})
            cap = self.config.ack_names
            if unpaid[:cap]:
                history = sorted(history + [row for _, _, row in unpaid[:cap]], key=lambda r: r.log_key)
            self._keep_owed(unpaid[cap:])
        self.counter += 1
        self.eager = False
        if not history and not repair:  # an empty log (or no causal history at all): nothing to send
            self.ack_owed.clear()  # (else an owed ack would keep the sync due, and nothing could pay it)
            self.next_at = self.due_after(now_ms)
            return None
        lamport = log.bump(now_ms)
        mid = "sync-" + sha256(f"{self.participant_id}/{lamport}/{self.counter}".encode()).hexdigest()[:16]
        data = encode_frame(
            self.channel_id, self.participant_id, mid, lamport, history, None, log.bloom.to_bytes(), repair
        )
        self.last_activity = max(self.last_activity, now_ms)
        self.next_at = self.due_after(now_ms)
        self.stats["syncs_sent"] += 1
        return Outgoing(data, mid, "sync", lamport, tuple(e.message_id for e in repair))
