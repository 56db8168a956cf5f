"""``MessageChannel``: one participant's SDS state for one channel (sans-I/O).

Bytes and ``now_ms`` go in; events (including ``Outgoing`` frames to
broadcast) come out. No sockets, files, clock or global randomness: every
pseudo-random choice is a hash of the participant id and a counter.

Decisions where the RFC is silent or where running engines against each other
under loss showed a better rule (see DESIGN.md, "Protocol pitfalls"):

* **Causal history** names the K messages most recently added to the log (in
  log order): the last K for in-order arrivals, but a late message with an old
  Lamport timestamp is named too, so members who missed it learn it exists
  (otherwise a late arrival can stay unnamed forever, and whoever missed it
  never notices the gap).
* **Own messages** enter the local log (and the bloom filter) at send time, as
  @waku/sds does, so later messages name them in their causal history. Sync
  frames never enter the log, the bloom filter or the outgoing buffer.
* **Dedup.** A content message already in the log or the incoming buffer is
  dropped without any event (@waku/sds re-emits it). A sync frame seen in the
  last 4,096 sync ids is dropped too. Frames from ourselves (broker echoes,
  rebroadcasts of our own messages) are ignored.
* **Cancel before you dedup.** Any arriving copy of message X, duplicate or
  not, first cancels our pending repair request and pending repair answer for
  X; only then is it dropped as a duplicate.
* **Repair requests are only acted on in frames not seen before** (a resent or
  rebroadcast frame carries old requests).
* **Waiting is not missing.** A dependency that sits in the incoming buffer is
  not requested, but its dependants are not delivered before it.
* **Gaps are noticed from every frame.** An id named in the causal history of
  a content *or sync* frame that is neither logged, buffered nor declared lost
  is *missing*: it gets an SDS-R request (``GapDetected`` when a sync revealed
  it, ``Missing`` when a content message waits on it).
* **Gap hints** (``gap_hints > 0``; the node uses 10). A message acknowledged
  to its sender by bloom filters alone may be named by no causal history a
  member ever receives: that member would never learn it exists. A filter has
  no false negatives, so an id we logged at least ``gap_hint_margin_ms`` ago
  (and at most ``gap_hint_max_age_ms``) that a peer's received filter lacks is
  named in our next sync (brought forward like a delayed ack); the peer then
  notices the gap and repairs it through SDS-R.
* **Lost means delivered with a marker.** A missing id that has not arrived
  ``lost_after_ms`` after it was first noticed is declared lost (``Lost``
  event); messages waiting on it are delivered without it
  (``Delivered.after_lost``). If the lost message turns up later it is
  delivered into its Lamport place (``Delivered.repaired``). A message still
  waiting after ``2 * lost_after_ms`` (its dependencies wait themselves, e.g. a
  forged cycle) is delivered anyway.
* **Keep asking until it arrives.** After we put a repair request on the wire,
  or see a peer ask for the same id, our request is re-scheduled with a fresh
  pseudo-random backoff in ``[T_min, T_max)`` instead of being dropped; it ends
  when the message arrives or is declared lost. Due requests go out at once in
  a sync frame when no content message is being sent.
* **Delayed ack** (``ack_delay_ms``, off by default): a received content
  message is owed an acknowledgement; if no frame of ours names it within
  ``ack_delay_ms`` (+ jitter) and nobody else's frame names it either, a sync
  goes out. So the last message of a conversation is acknowledged promptly.
  A duplicate of a content message (a resend: its sender has not seen an
  acknowledgement) makes the ack owed again.
  Resends and repair answers carry no fresh state (old history, no bloom), so
  they do not count as channel activity for sync suppression.
* **Possible acks** count distinct participants whose bloom filter holds the
  id (two filters of the same participant are not independent evidence: a
  filter only gains bits). The threshold is ``possible_acks_threshold``; with
  ``possible_acks_group_cap`` it is lowered to the number of other
  participants seen so far (so in a two-person channel the one peer's filter
  acknowledges; otherwise a message beyond the peer's causal history could
  never be acknowledged there). With ``bloom_certain_ack_fp`` a single
  filter whose false-positive probability (fill ratio ** k, from the received
  bytes) is at most that value acknowledges outright: the RFC's "mark it as
  acknowledged based on probabilistic grounds, taking into account the bloom
  filter size and hash number".
  A received filter of another byte length is ignored, not misread.
* **Resends and repair answers** rebroadcast the original message *without*
  its bloom filter and repair requests: the id, Lamport timestamp, causal
  history and content are what matter to a receiver, and the stale ~19 KB
  filter would only mislead ack review and waste bandwidth. The SDS-R cache
  therefore holds message fields, not frames (a few hundred bytes each).
* **Response group of a request** is computed from the sender we recorded for
  the message (falling back to the request's ``sender_id``).
* **Bounded state.** Outgoing buffer: ``outgoing_buffer_size``, the oldest own
  message is dropped (``Evicted``) and no longer resent. Incoming buffer:
  ``incoming_buffer_size``, the oldest waiting message is delivered at once
  with its missing dependencies declared lost. Repair request/answer buffers:
  ``repair.buffer_size``, the entry due furthest in the future is evicted.
  Repair cache: ``repair.cache_size`` messages, oldest out. The log keeps ids
  only (for dedup and ordering).
* **Bad frames** (malformed, wrong channel, empty ids, over the limits in
  :class:`ChannelConfig`, lamport far in the future) produce ``Rejected`` and
  leave state untouched; ``receive`` raises nothing.

Persistence: :meth:`MessageChannel.snapshot` returns the full state as plain
rows and :meth:`MessageChannel.restore` rebuilds a channel from it. With
``journal=True`` every mutation is also appended to ``channel.journal`` as a
small ``(op, key, row)`` tuple (see :mod:`sdschat.sds.state`), so a store can
persist each change as one row write instead of rewriting the state.
"""

from __future__ import annotations

import heapq
from bisect import insort
from collections import OrderedDict, deque
from hashlib import sha256

from bitarray import bitarray

from . import repair as _repair
from .bloom import RollingBloomFilter, contains_in
from .config import ChannelConfig
from .events import (
    Acknowledged,
    Delivered,
    EphemeralReceived,
    Event,
    Evicted,
    GapDetected,
    Lost,
    Missing,
    Outgoing,
    PossiblyAcknowledged,
    Rejected,
    RepairRequested,
    RepairScheduled,
    RepairServed,
    SyncReceived,
)
from .state import CacheRow, ChannelState, InRow, LogRow, MissingRow, OutRow, RequestRow
from .wire import MAX_FRAME_BYTES, HistoryEntry, WireError, entry_from_pb, parse_pb
from . import sds_pb2

__all__ = ["MessageChannel", "Frame", "message_id"]

_PbMessage = sds_pb2.Message
_SYNC_DEDUP = 4096
_LOST_MEMORY = 10_000


def message_id(payload: bytes) -> str:
    """Lowercase hex SHA-256 of ``payload`` (as @waku/sds)."""
    return sha256(payload).hexdigest()


class Frame:
    """A parsed frame, read once: what :meth:`MessageChannel.receive_parsed` needs of it.

    Everything here is independent of the receiver, so a simulator that hands
    one broadcast frame to thousands of receivers builds it once
    (``Frame(parse_pb(data))``) and passes it to every ``receive_parsed``:
    the protobuf fields are decoded once, the receiver-independent validity
    checks run once per engine configuration, the causal history becomes
    :class:`HistoryEntry` values once (after the checks pass; immutable,
    shared by every receiver's state), and the sender's half of the SDS-R
    response-group test is hashed once. ``receive_parsed`` given a protobuf
    message builds a ``Frame`` itself, so both give the same events and the
    same state. Any other attribute (``HasField``, ``causal_history``...) reads through to the
    parsed message: a ``Frame`` reads like the message it wraps.
    """

    __slots__ = ("pb", "message_id", "sender_id", "channel_id", "has_lamport", "lamport", "content", "has_content",
                 "history", "history_ids", "repair", "bloom", "_vcfg", "_vchan", "_problem", "_sender_hash",
                 "_sync_event", "_delivery")

    def __init__(self, pb: sds_pb2.Message) -> None:
        self.pb = pb
        self.message_id = pb.message_id
        self.sender_id = pb.sender_id
        self.channel_id = pb.channel_id
        self.has_lamport = pb.HasField("lamport_timestamp")
        self.lamport = pb.lamport_timestamp
        self.content = pb.content
        self.has_content = pb.HasField("content") and len(self.content) > 0
        # the lists are read once the frame passed the checks (a frame over the limits costs no more than before)
        self.history: tuple[HistoryEntry, ...] | None = None
        self.history_ids: tuple[str, ...] | None = None
        self.repair: tuple[tuple[str, str], ...] | None = None  # (id, sender_id as on the wire: "" when absent)
        self.bloom = pb.bloom_filter if pb.HasField("bloom_filter") else None
        self._vcfg = None
        self._vchan = None
        self._problem = None
        self._sender_hash = None
        # immutable results every receiver shares: its SyncReceived, and (LogRow, Delivered, log key) of a plain
        # delivery
        self._sync_event = None
        self._delivery = None

    def static_problem(self, config: ChannelConfig, channel_id: str) -> tuple[str, str] | None:
        """The checks of a frame that do not depend on the receiver's state (all but the Lamport skew)."""
        if self._vcfg is config and self._vchan == channel_id:
            return self._problem
        pb = self.pb
        problem = None
        if pb.channel_id != channel_id:
            problem = ("wrong_channel", f"frame for channel {pb.channel_id[:64]!r}")
        else:
            mid = pb.message_id
            max_id = config.max_id_length
            if not mid or not pb.sender_id:
                problem = ("invalid", "empty message_id or sender_id")
            elif len(mid) > max_id or len(pb.sender_id) > max_id:
                problem = ("invalid", "message_id or sender_id too long")
            elif len(pb.causal_history) > config.max_history_entries:
                problem = ("too_large", f"causal history of {len(pb.causal_history)} entries")
            elif len(pb.repair_request) > config.max_repair_entries:
                problem = ("too_large", f"{len(pb.repair_request)} repair requests")
            elif any(not e.message_id or len(e.message_id) > max_id or len(e.sender_id) > max_id
                     for e in pb.causal_history):
                problem = ("invalid", "bad causal history entry")
            elif any(not e.message_id or len(e.message_id) > max_id or len(e.sender_id) > max_id
                     for e in pb.repair_request):
                problem = ("invalid", "bad repair request entry")
        if problem is None and self.history is None:
            self.history = tuple(entry_from_pb(e) for e in pb.causal_history)
            self.history_ids = tuple(e.message_id for e in self.history)
            self.repair = tuple((e.message_id, e.sender_id) for e in pb.repair_request)
        self._vcfg = config
        self._vchan = channel_id
        self._problem = problem
        return problem

    def __getattr__(self, name: str):
        # anything else reads through to the parsed message (a read-only view of it)
        if name == "pb":
            raise AttributeError(name)
        return getattr(self.pb, name)

    def HasField(self, name: str) -> bool:  # noqa: N802 - the protobuf method's name
        return self.pb.HasField(name)

    def sender_hash(self) -> int:
        """``repair.hash64(sender_id + message_id)``: the sender's side of the response-group test."""
        h = self._sender_hash
        if h is None:
            h = self._sender_hash = _repair.hash64(self.sender_id + self.message_id)
        return h


class _Out:
    __slots__ = ("lamport", "causal", "content", "sent_at", "resends", "next_resend", "ack_senders", "positions")

    def __init__(self, lamport, causal, content, sent_at, resends, next_resend, ack_senders, positions):
        self.lamport = lamport
        self.causal = causal
        self.content = content
        self.sent_at = sent_at
        self.resends = resends
        self.next_resend = next_resend
        self.ack_senders = ack_senders
        self.positions = positions


class _In:
    __slots__ = ("sender_id", "lamport", "causal", "content", "received_at", "unmet", "repaired", "after_lost")

    def __init__(self, sender_id, lamport, causal, content, received_at, unmet, repaired, after_lost=()):
        self.sender_id = sender_id
        self.lamport = lamport
        self.causal = causal
        self.content = content
        self.received_at = received_at
        self.unmet = unmet
        self.repaired = repaired
        self.after_lost = list(after_lost)


class MessageChannel:
    """SDS (+ SDS-R) state machine of ``participant_id`` in ``channel_id``."""

    # Slots, not an instance dict: a channel has more attributes than a dict shares keys for, so each
    # instance would carry its own 1.5 KB hash table and every attribute read would probe it. A simulator
    # touches thousands of channels in turn (cold in the CPU caches); slots keep the attributes in the
    # object, those of the receive path first (adjacent cache lines).
    __slots__ = (
        "config", "channel_id", "participant_id", "stats", "_requests", "_responses", "_log", "_incoming",
        "_recent_syncs", "_recent_sync_order", "_peers", "_ack_owed", "_outgoing", "_last_activity",
        "_jitter_for", "_sync_counter", "_jitter", "_next_sync_at", "lamport_timestamp", "_missing", "_lost",
        "_cache", "_groups", "journal", "_bloom", "_waiters", "_log_keys", "_recent", "_hint_map",
        "_lost_heap", "_missing_heap", "_req_heap", "_resp_heap", "_resend_heap", "_deferred", "_bloom_len",
        "max_content_bytes", "_additions", "_add_seq", "_hint_cursor", "_hints", "_hint_due", "_now_hint",
    )

    def __init__(
        self,
        channel_id: str,
        participant_id: str,
        config: ChannelConfig | None = None,
        now_ms: int = 0,
        *,
        journal: bool = False,
    ) -> None:
        if not isinstance(channel_id, str) or not isinstance(participant_id, str) or not participant_id:
            raise ValueError("channel_id and participant_id must be strings (participant_id non-empty)")
        limit = (config or ChannelConfig()).max_id_length
        if len(participant_id) > limit or len(channel_id) > 4 * limit:
            raise ValueError(f"participant_id longer than {limit} characters (peers would reject its frames)")
        self.channel_id = channel_id
        self.participant_id = participant_id
        self.config = config = config or ChannelConfig()
        self.lamport_timestamp: int = int(now_ms)
        self._log_keys: list[tuple[int, str]] = []
        self._log: dict[str, LogRow] = {}
        self._recent: deque[str] = deque(maxlen=max(0, config.causal_history_size))  # newest log additions
        self._bloom = RollingBloomFilter(config.bloom_capacity, config.bloom_error_rate, rolling=config.bloom_rolling)
        self._bloom_len = self._bloom.n_bytes
        self._outgoing: dict[str, _Out] = {}
        self._resend_heap: list[tuple[int, str]] = []
        self._incoming: dict[str, _In] = {}
        self._waiters: dict[str, list[str]] = {}
        self._lost_heap: list[tuple[int, str]] = []
        self._missing: dict[str, MissingRow] = {}
        self._missing_heap: list[tuple[int, str]] = []
        self._lost: OrderedDict[str, str | None] = OrderedDict()
        self._requests: dict[str, list] = {}  # id -> [t_req, entry, attempts]
        self._req_heap: list[tuple[int, str]] = []
        self._responses: dict[str, int] = {}
        self._resp_heap: list[tuple[int, str]] = []
        self._cache: OrderedDict[str, CacheRow] = OrderedDict()
        self._hint_map: dict[str, bytes] = {}  # retrieval hints of buffered messages, until delivery
        self._ack_owed: dict[str, tuple[int, str]] = {}  # delayed ack: id -> (due, its sender)
        # gap hints: recent log additions (seq, logged_at, id, sender, bloom positions), a per-peer cursor into
        # them, and the ids some peer's filter showed it lacks (to be named in our next sync)
        self._additions: deque[tuple[int, int, str, str, tuple]] = deque(maxlen=max(1, config.gap_hint_window))
        self._add_seq = 0
        self._hint_cursor: OrderedDict[str, int] = OrderedDict()
        self._hints: OrderedDict[str, None] = OrderedDict()
        self._hint_due: int | None = None
        # other participants seen (bounds the possible-ack threshold): only counted up to that threshold
        self._peers: set[str] = set()
        # ids of sync frames seen (dedup), oldest first: a plain dict and a queue of the same ids take half an
        # OrderedDict's memory (10,000 simulated members each hold thousands) and evict the oldest in O(1)
        self._recent_syncs: dict[str, None] = {}
        self._recent_sync_order: deque[str] = deque()
        self._last_activity = int(now_ms)
        self._sync_counter = 0
        self._jitter_for = -1
        self._jitter = 0
        self._next_sync_at = self._sync_due_after(int(now_ms))
        self._now_hint = int(now_ms)
        self._groups = config.repair.response_groups
        #: largest content :meth:`send` accepts: the frame must stay under the wire limit
        self.max_content_bytes = MAX_FRAME_BYTES - self._bloom_len - 64 * 1024
        self._deferred: list[Event] = []  # events raised inside send(), returned by the next tick()
        self.journal: list[tuple] | None = [] if journal else None
        self.stats: dict[str, int] = dict.fromkeys(
            (
                "sent", "received", "delivered", "duplicates", "own_echoes", "rejected", "resends",
                "syncs_sent", "syncs_received", "ephemeral_sent", "ephemeral_received", "acked",
                "acked_by_bloom", "possibly_acked", "repairs_requested", "repair_requests_received",
                "repairs_served", "lost", "evicted",
            ),
            0,
        )

    # ------------------------------------------------------------------ views

    @property
    def log(self) -> list[str]:
        """Message ids in local-log order: (lamport_timestamp, message_id) ascending."""
        return [mid for _, mid in self._log_keys]

    def log_entries(self) -> list[LogRow]:
        return [self._log[mid] for _, mid in self._log_keys]

    def __contains__(self, message_id: str) -> bool:
        return message_id in self._log

    @property
    def outgoing_ids(self) -> list[str]:
        return list(self._outgoing)

    @property
    def incoming_ids(self) -> list[str]:
        return list(self._incoming)

    @property
    def missing_ids(self) -> list[str]:
        """Dependencies known to be missing (named by a waiting message, not here, not lost)."""
        return list(self._missing)

    def open_gaps(self) -> list[tuple[str, tuple[str, ...], tuple[str, ...]]]:
        """What this member still waits for, as ``(message_id, ids, senders)``.

        First each waiting message, in log order, with the ids it waits on
        (missing ones, and waiting ones it depends on); then ``("", ids,
        senders)`` for missing ids that no waiting message names (learnt from
        the causal history of a sync). ``senders``: of the missing ids, where
        the causal history named them. For a view opened later (after a
        restart) to show the gaps the live events reported.
        """
        missing = self._missing
        gaps = []
        named = set()
        for mid, e in sorted(self._incoming.items(), key=lambda kv: (kv[1].lamport, kv[0])):
            ids = tuple(sorted(e.unmet))
            named.update(ids)
            senders = {missing[d].entry.sender_id for d in ids if d in missing}
            gaps.append((mid, ids, tuple(sorted(x for x in senders if x))))
        rest = [row.entry for d, row in missing.items() if d not in named]
        if rest:
            senders = {e.sender_id for e in rest if e.sender_id}
            gaps.append(("", tuple(e.message_id for e in rest), tuple(sorted(senders))))
        return gaps

    @property
    def repair_request_ids(self) -> list[str]:
        return list(self._requests)

    @property
    def repair_response_ids(self) -> list[str]:
        return list(self._responses)

    def pending(self) -> bool:
        """Whether anything is outstanding: own unacknowledged messages, waiting messages, known gaps,
        repair requests or answers (what the ``*_ids`` views list, without building the lists)."""
        return bool(self._outgoing or self._incoming or self._missing or self._requests or self._responses)

    @property
    def bloom(self) -> RollingBloomFilter:
        return self._bloom

    def outgoing_state(self, message_id: str) -> tuple[str, int] | None:
        """``("unacknowledged"|"possibly_acknowledged", resends)`` or None if not in the buffer."""
        out = self._outgoing.get(message_id)
        if out is None:
            return None
        return ("possibly_acknowledged" if out.ack_senders else "unacknowledged", out.resends)

    def possible_ack_count(self, message_id: str) -> int:
        out = self._outgoing.get(message_id)
        return len(out.ack_senders) if out else 0

    def summary(self) -> dict[str, int]:
        """Buffer sizes and the clock, for health displays."""
        return {
            "lamport_timestamp": self.lamport_timestamp,
            "log": len(self._log),
            "unacknowledged": sum(1 for o in self._outgoing.values() if not o.ack_senders),
            "possibly_acknowledged": sum(1 for o in self._outgoing.values() if o.ack_senders),
            "incoming": len(self._incoming),
            "missing": len(self._missing),
            "repair_requests": len(self._requests),
            "repair_responses": len(self._responses),
            "repair_cache": len(self._cache),
        }

    def next_deadline(self) -> int:
        """Earliest ``now_ms`` at which :meth:`tick` may have work (may be early, never late).

        Timer entries that :meth:`tick` would skip (the message arrived, was
        answered, delivered or rescheduled since) are dropped from the tops of
        their heaps when they would decide the deadline, so an idle member is
        not woken for nothing: every message that waited in the incoming
        buffer leaves such an entry due ``2 * lost_after_ms`` later. (While
        events deferred from :meth:`send` wait for the next tick, the heaps
        are left alone: that tick comes when it always did.)
        """
        due = self._next_sync_at
        if self._hint_due is not None and self._hint_due < due:
            due = self._hint_due
        if self._ack_owed:
            due = min(due, min(t for t, _ in self._ack_owed.values()))
        if self._deferred:
            for heap in (self._resend_heap, self._req_heap, self._resp_heap, self._lost_heap, self._missing_heap):
                if heap and heap[0][0] < due:
                    due = heap[0][0]
            return due
        return self._live_timers_before(due)

    def _live_timers_before(self, due: int) -> int:
        """``min(due, the earliest live timer)``, popping stale heap tops before ``due`` on the way."""
        for heap, live in ((self._resend_heap, self._resend_live), (self._req_heap, self._request_live),
                           (self._resp_heap, self._response_live), (self._lost_heap, self._wait_live),
                           (self._missing_heap, self._missing_live)):
            while heap and heap[0][0] < due:
                if live(*heap[0]):
                    due = heap[0][0]
                    break
                heapq.heappop(heap)
        return due

    # Timer heaps hold (due, id) entries that go stale when what they time changes (the message arrived, was
    # answered, delivered or rescheduled): these tell a live entry. tick() skips stale ones, next_deadline()
    # drops them.

    def _resend_live(self, t: int, mid: str) -> bool:
        out = self._outgoing.get(mid)
        return out is not None and out.next_resend == t

    def _request_live(self, t: int, mid: str) -> bool:
        return self._requests.get(mid, (None,))[0] == t

    def _response_live(self, t: int, mid: str) -> bool:
        return self._responses.get(mid) == t

    def _wait_live(self, t: int, mid: str) -> bool:
        """A waiting message's forced delivery (``2 * lost_after_ms`` after it arrived)."""
        entry = self._incoming.get(mid)
        return entry is not None and entry.received_at + 2 * self.config.lost_after_ms == t

    def _missing_live(self, t: int, mid: str) -> bool:
        """A missing id's loss (``lost_after_ms`` after it was noticed)."""
        row = self._missing.get(mid)
        return row is not None and row.detected_at + self.config.lost_after_ms == t

    # ----------------------------------------------------------------- helpers

    def _j(self, *op) -> None:
        self.journal.append(op)

    def _sync_due_after(self, t: int) -> int:
        if self._jitter_for != self._sync_counter:
            span = self.config.sync_jitter_ms
            self._jitter = _repair.hash64(f"{self.participant_id}/sync/{self._sync_counter}") % (span + 1) if span > 0 else 0
            self._jitter_for = self._sync_counter
        return t + self.config.sync_interval_ms + self._jitter

    def _activity(self, now_ms: int) -> None:
        if now_ms > self._last_activity:
            self._last_activity = now_ms
            self._next_sync_at = self._sync_due_after(now_ms)

    def _bump_lamport(self, now_ms: int) -> int:
        lt = self.lamport_timestamp + 1
        if now_ms > lt:
            lt = now_ms
        self.lamport_timestamp = lt
        if self.journal is not None:
            self._j("lamport", None, lt)
        return lt

    def _causal_history(self) -> list[LogRow]:
        """The K messages most recently added to the log, in log order.

        For messages arriving in order these are the last K of the log. A message that
        arrives late with an old Lamport timestamp lands deep in the log but is still
        named here, so members who missed it learn it exists.
        """
        if self.config.causal_history_size <= 0:
            return []
        log = self._log
        rows = [log[mid] for mid in self._recent if mid in log]
        rows.sort(key=lambda r: (r.lamport_timestamp, r.message_id))
        return rows

    def _due_repair_requests(self, now_ms: int) -> list[HistoryEntry]:
        """Pop up to ``max_requests`` due requests (lowest T_req first) and re-schedule them."""
        cfg = self.config.repair
        if not cfg.enabled or not self._req_heap or self._req_heap[0][0] > now_ms:
            return []
        chosen: list[str] = []
        heap = self._req_heap
        requests = self._requests
        while heap and heap[0][0] <= now_ms and len(chosen) < cfg.max_requests:
            t, mid = heapq.heappop(heap)
            rec = requests.get(mid)
            if rec is None or rec[0] != t or mid in chosen:
                continue
            chosen.append(mid)
        entries = []
        for mid in chosen:
            rec = requests[mid]
            rec[2] += 1
            self._schedule_request(mid, rec, now_ms)
            entries.append(rec[1])
        self.stats["repairs_requested"] += len(entries)
        return entries

    def _schedule_request(self, mid: str, rec: list, now_ms: int) -> None:
        cfg = self.config.repair
        key = mid if rec[2] == 0 else f"{mid}#{rec[2]}"
        rec[0] = _repair.t_req(self.participant_id, key, now_ms, cfg.t_min_ms, cfg.t_max_ms)
        heapq.heappush(self._req_heap, (rec[0], mid))
        if self.journal is not None:
            self._j("req", mid, RequestRow(rec[1], rec[0], rec[2]))

    def _add_request(self, entry: HistoryEntry, now_ms: int, events: list[Event]) -> None:
        cfg = self.config.repair
        mid = entry.message_id
        if not cfg.enabled or mid in self._requests:
            return
        if len(self._requests) >= cfg.buffer_size:
            # evict the entry due furthest in the future
            far = max(self._requests, key=lambda k: self._requests[k][0])
            if self._requests[far][0] <= _repair.t_req(self.participant_id, mid, now_ms, cfg.t_min_ms, cfg.t_max_ms):
                return
            self._drop_request(far)
            self.stats["evicted"] += 1
            events.append(Evicted("repair_requests", far))
        rec = [0, entry, 0]
        self._requests[mid] = rec
        self._schedule_request(mid, rec, now_ms)

    def _drop_request(self, mid: str) -> None:
        if self._requests.pop(mid, None) is not None and self.journal is not None:
            self._j("req-", mid, None)

    def _drop_response(self, mid: str) -> None:
        if self._responses.pop(mid, None) is not None and self.journal is not None:
            self._j("resp-", mid, None)

    def _cache_put(self, row: CacheRow) -> None:
        cache = self._cache
        cache[row.message_id] = row
        if self.journal is not None:
            self._j("cache", row.message_id, row)
        if len(cache) > self.config.repair.cache_size:
            old, _ = cache.popitem(last=False)
            if self.journal is not None:
                self._j("cache-", old, None)

    def _note_addition(self, mid: str, sender: str, now_ms: int, positions=None) -> None:
        if self.config.gap_hints > 0:
            self._add_seq += 1
            self._additions.append((self._add_seq, now_ms, mid, sender, positions or self._bloom.positions(mid)))

    def _check_peer_bloom(self, f: Frame, sender: str, now_ms: int) -> None:
        """Ids we logged at least the margin ago that ``sender``'s filter lacks become gap hints."""
        bloom = f.bloom
        if bloom is None or len(bloom) != self._bloom_len or not self._additions:
            return
        cursor = self._hint_cursor.get(sender, 0)
        if cursor >= self._add_seq:
            return
        limit = now_ms - self.config.gap_hint_margin_ms
        oldest = now_ms - self.config.gap_hint_max_age_ms  # a late joiner is not handed the whole window
        last = cursor
        log = self._log
        hints = self._hints
        for seq, at, mid, origin, positions in self._additions:
            if seq <= cursor:
                continue
            if at > limit:
                break
            last = seq
            if at < oldest or origin == sender or mid not in log or mid in hints:
                continue
            if not contains_in(bloom, positions):  # no false negatives: the peer lacks it
                hints[mid] = None
                if len(hints) > self.config.gap_hint_window:
                    hints.popitem(last=False)
        if last != cursor:
            self._hint_cursor[sender] = last
            self._hint_cursor.move_to_end(sender)
            if len(self._hint_cursor) > 4096:
                self._hint_cursor.popitem(last=False)
        if hints and self._hint_due is None:
            delay = self.config.ack_delay_ms or 0
            span = self.config.ack_jitter_ms
            jitter = _repair.hash64(f"{self.participant_id}/hint/{now_ms}") % (span + 1) if span > 0 else 0
            self._hint_due = now_ms + delay + jitter

    def _log_insert(self, row: LogRow, key: tuple[int, str] | None = None) -> None:
        if key is None:
            key = (row.lamport_timestamp, row.message_id)
        keys = self._log_keys
        if not keys or keys[-1] < key:
            keys.append(key)
        else:
            insort(keys, key)
        self._log[row.message_id] = row
        self._recent.append(row.message_id)
        if self.journal is not None:
            self._j("log", row.message_id, row)

    def _bloom_add(self, mid: str, positions=None) -> None:
        rolled = self._bloom.add(mid, positions)
        if self.journal is not None:
            if rolled:
                self._j("bloom-roll", None, self._bloom.keep)
            self._j("bloom", mid, None)

    def _encode(self, mid, lamport, causal, content, bloom=None, repair=()) -> bytes:
        pb = _PbMessage(message_id=mid, channel_id=self.channel_id)
        return self._fill(pb, mid, lamport, causal, content, bloom, repair)

    def _fill(self, pb, mid, lamport, causal, content, bloom, repair, sender=None) -> bytes:
        pb.sender_id = sender if sender is not None else self.participant_id
        if lamport is not None:
            pb.lamport_timestamp = lamport
        add = pb.causal_history.add
        for e in causal:
            h = add(message_id=e.message_id)
            if e.retrieval_hint is not None:
                h.retrieval_hint = e.retrieval_hint
            if e.sender_id is not None:
                h.sender_id = e.sender_id
        if bloom is not None:
            pb.bloom_filter = bloom
        add = pb.repair_request.add
        for e in repair:
            h = add(message_id=e.message_id)
            if e.retrieval_hint is not None:
                h.retrieval_hint = e.retrieval_hint
            if e.sender_id is not None:
                h.sender_id = e.sender_id
        if content is not None:
            pb.content = content
        return pb.SerializeToString()

    def _plain_frame(self, mid: str, sender: str, lamport: int, causal, content: bytes) -> bytes:
        pb = _PbMessage(message_id=mid, channel_id=self.channel_id)
        return self._fill(pb, mid, lamport, causal, content, None, (), sender=sender)

    # -------------------------------------------------------------------- send

    def send(self, content: bytes, now_ms: int, message_id: str | None = None) -> Outgoing:
        """Create a content message; it enters the log and the outgoing buffer now."""
        if not isinstance(content, (bytes, bytearray)) or not content:
            raise ValueError("content must be non-empty bytes (empty content is a sync message)")
        content = bytes(content)
        if len(content) > self.max_content_bytes:
            raise ValueError(f"content of {len(content)} bytes exceeds {self.max_content_bytes} (peers would reject the frame)")
        mid = message_id if message_id is not None else sha256(content).hexdigest()
        if not isinstance(mid, str) or not mid or len(mid) > self.config.max_id_length:
            raise ValueError(f"message_id must be a non-empty string of at most {self.config.max_id_length} characters")
        if mid in self._log or mid in self._incoming:
            raise ValueError(f"message id {mid!r} is already in this channel")
        lamport = self._bump_lamport(now_ms)
        causal = [HistoryEntry(r.message_id, r.retrieval_hint, r.sender_id) for r in self._causal_history()]
        if self._ack_owed:
            self._acks_sent(causal)
        repair = self._due_repair_requests(now_ms)
        data = self._encode(mid, lamport, causal, content, self._bloom.to_bytes(), repair)
        positions = self._bloom.positions(mid)
        self._bloom_add(mid, positions)
        self._log_insert(LogRow(mid, lamport, self.participant_id, None))
        self._note_addition(mid, self.participant_id, now_ms, positions)
        cfg = self.config
        out = _Out(lamport, causal, content, now_ms, 0, now_ms + cfg.resend_unacknowledged_ms, set(), positions)
        self._outgoing[mid] = out
        heapq.heappush(self._resend_heap, (out.next_resend, mid))
        if self.journal is not None:
            self._j("out", mid, self._out_row(mid, out))
        if cfg.repair.enabled:
            self._cache_put(CacheRow(mid, self.participant_id, lamport, tuple(causal), content))
        self._evict_outgoing()
        self._activity(now_ms)
        self.stats["sent"] += 1
        return Outgoing(data, mid, "message", lamport, tuple(e.message_id for e in repair))

    def _out_row(self, mid: str, out: _Out) -> OutRow:
        return OutRow(mid, out.lamport, tuple(out.causal), out.content, out.sent_at, out.resends,
                      out.next_resend, tuple(sorted(out.ack_senders)))

    def _evict_outgoing(self) -> None:
        while len(self._outgoing) > self.config.outgoing_buffer_size:
            old = next(iter(self._outgoing))
            del self._outgoing[old]
            if self.journal is not None:
                self._j("out-", old, None)
            self.stats["evicted"] += 1
            self._deferred.append(Evicted("outgoing", old, {"reason": "buffer_full"}))

    def send_ephemeral(self, content: bytes, now_ms: int) -> Outgoing:
        """A frame with no Lamport timestamp, history or bloom filter; never buffered or logged."""
        if not isinstance(content, (bytes, bytearray)) or not content:
            raise ValueError("ephemeral content must be non-empty bytes")
        content = bytes(content)
        mid = sha256(content).hexdigest()
        data = self._encode(mid, None, (), content)
        self.stats["ephemeral_sent"] += 1
        return Outgoing(data, mid, "ephemeral")

    def sync(self, now_ms: int) -> Outgoing | None:
        """A sync frame (no content) with causal history, bloom filter and due repair requests.

        Returns None when there is nothing to say (empty log and no due requests).
        """
        repair = self._due_repair_requests(now_ms)
        history = self._causal_history()
        if self._hints:  # gap hints: ids a peer's filter showed it lacks, beyond the K most recent
            named = {r.message_id for r in history}
            extra = []
            while self._hints and len(extra) < self.config.gap_hints:
                mid, _ = self._hints.popitem(last=False)
                row = self._log.get(mid)
                if row is not None and mid not in named:
                    extra.append(row)
            if extra:
                history = sorted(history + extra, key=lambda r: (r.lamport_timestamp, r.message_id))
            self._hint_due = None if not self._hints else now_ms + (self.config.ack_delay_ms or 0)
        self._sync_counter += 1
        if not history and not repair:
            self._next_sync_at = self._sync_due_after(now_ms)
            return None
        if self._ack_owed:
            self._acks_sent(history)
        lamport = self._bump_lamport(now_ms)
        mid = "sync-" + sha256(f"{self.participant_id}/{lamport}/{self._sync_counter}".encode()).hexdigest()[:16]
        data = self._encode(mid, lamport, history, None, self._bloom.to_bytes(), repair)
        self._last_activity = max(self._last_activity, now_ms)
        self._next_sync_at = self._sync_due_after(now_ms)
        self.stats["syncs_sent"] += 1
        return Outgoing(data, mid, "sync", lamport, tuple(e.message_id for e in repair))

    def _owe_ack(self, mid: str, sender: str, now_ms: int) -> None:
        span = self.config.ack_jitter_ms
        jitter = _repair.hash64(f"{self.participant_id}/ack/{mid}/{now_ms}") % (span + 1) if span > 0 else 0
        self._ack_owed[mid] = (now_ms + self.config.ack_delay_ms + jitter, sender)

    def _acks_sent(self, history) -> None:
        # Whatever we broadcast carries our bloom filter, which holds every id we owe an
        # ack for (those beyond the causal history are acknowledged by bloom): all paid.
        self._ack_owed.clear()

    def set_retrieval_hint(self, message_id: str, hint: bytes | None) -> None:
        """Record the retrieval hint (e.g. the envelope hash) of a logged message."""
        row = self._log.get(message_id)
        if row is not None and row.retrieval_hint != hint:
            row = LogRow(row.message_id, row.lamport_timestamp, row.sender_id, hint)
            self._log[message_id] = row
            if self.journal is not None:
                self._j("log", message_id, row)

    # ----------------------------------------------------------------- receive

    def receive(self, data: bytes, now_ms: int, retrieval_hint: bytes | None = None) -> list[Event]:
        """Process one received frame. Returns events; never raises for bad input."""
        try:
            pb = parse_pb(data)
        except WireError as exc:
            self.stats["rejected"] += 1
            return [Rejected("malformed", str(exc))]
        return self.receive_parsed(pb, now_ms, retrieval_hint)

    def receive_parsed(self, pb: sds_pb2.Message | Frame, now_ms: int, retrieval_hint: bytes | None = None,
                       positions: tuple[tuple[int, int], ...] | None = None) -> list[Event]:
        """:meth:`receive` for a frame already parsed with :func:`sdschat.sds.wire.parse_pb`.

        For simulators that broadcast one frame to many receivers: parse once,
        wrap it once in a :class:`Frame` (fields read once, shared by every
        receiver), and optionally pass the bloom ``positions`` of its message
        id (``channel.bloom.positions(id)``, identical for equal bloom
        parameters). The parsed message is only read, never modified.
        """
        f = pb if type(pb) is Frame else Frame(pb)
        cfg = self.config
        # the frame's own checks are made once per configuration (Frame.static_problem), the Lamport skew here
        if f._vcfg is cfg and f._vchan == self.channel_id:
            problem = f._problem
        else:
            problem = f.static_problem(cfg, self.channel_id)
        if problem is None and f.has_lamport:
            lamport = f.lamport
            skew = cfg.max_clock_skew_ms
            if lamport > now_ms + skew and lamport > self.lamport_timestamp + skew:
                problem = ("lamport_future", f"lamport timestamp {lamport} too far ahead")
        stats = self.stats
        if problem is not None:
            stats["rejected"] += 1
            return [Rejected(problem[0], problem[1], f.message_id or None, f.sender_id or None)]
        mid = f.message_id
        sender = f.sender_id
        has_content = f.has_content
        if not f.has_lamport:
            if not has_content:
                stats["rejected"] += 1
                return [Rejected("empty", "frame has neither lamport timestamp nor content", mid, sender)]
            stats["ephemeral_received"] += 1
            return [EphemeralReceived(sender, f.content, mid)] if sender != self.participant_id else []
        # cancel before dedup
        if mid in self._requests:
            self._drop_request(mid)
        if mid in self._responses:
            self._drop_response(mid)
        if sender == self.participant_id:
            stats["own_echoes"] += 1
            return []
        if has_content:
            if mid in self._log or mid in self._incoming:
                stats["duplicates"] += 1
                if cfg.ack_delay_ms is not None and mid not in self._ack_owed:
                    self._owe_ack(mid, sender, now_ms)  # a resend: the sender lacks our acknowledgement
                return []
        else:
            syncs = self._recent_syncs
            if mid in syncs:
                stats["duplicates"] += 1
                return []
            syncs[mid] = None
            order = self._recent_sync_order
            order.append(mid)
            if len(order) > _SYNC_DEDUP:
                del syncs[order.popleft()]
        stats["received"] += 1
        self._now_hint = now_ms
        peers = self._peers
        if len(peers) < cfg.possible_acks_threshold:  # only the count up to the threshold is ever used
            peers.add(sender)
        events: list[Event] = []
        if self._ack_owed:
            owed = self._ack_owed
            for d in f.history_ids:
                got = owed.get(d)
                if got is not None and got[1] != sender:
                    del owed[d]  # someone else acknowledged it to its sender
        if self._outgoing:
            self._review_acks(f, sender, events)
        if cfg.gap_hints > 0:
            if self._hints:
                for d in f.history_ids:
                    self._hints.pop(d, None)  # someone else named it
            self._check_peer_bloom(f, sender, now_ms)
        if f.repair:
            self._on_repair_requests(f, sender, now_ms, events)
        if now_ms > self._last_activity:  # self._activity(now_ms), inline
            self._last_activity = now_ms
            if self._jitter_for == self._sync_counter:  # self._sync_due_after(now_ms), jitter already drawn
                self._next_sync_at = now_ms + cfg.sync_interval_ms + self._jitter
            else:
                self._next_sync_at = self._sync_due_after(now_ms)
        lamport = f.lamport
        if not has_content:
            stats["syncs_received"] += 1
            ev = f._sync_event
            if ev is None:
                ev = f._sync_event = SyncReceived(sender, mid, lamport)
            events.append(ev)
            log = self._log
            missing = self._missing
            incoming = self._incoming
            lost = self._lost
            gaps = None
            for d in f.history_ids:
                if d in log or d in incoming or d in missing or d in lost:
                    continue  # known here (logged, or waiting behind a gap): nothing to note
                e = f.history[f.history_ids.index(d)]  # rare: the entry itself
                if self._note_missing(e, now_ms, events):
                    if gaps is None:
                        gaps = []
                    gaps.append(e)
            if gaps:
                events.append(GapDetected(gaps, sender, mid))
            return events
        self._on_content(f, mid, sender, lamport, now_ms, retrieval_hint, events, positions)
        return events

    def _review_acks(self, f: Frame, sender: str, events: list[Event]) -> None:
        outgoing = self._outgoing
        journal = self.journal
        for mid in f.history_ids:
            if mid in outgoing:
                del outgoing[mid]
                if journal is not None:
                    self._j("out-", mid, None)
                self.stats["acked"] += 1
                events.append(Acknowledged(mid))
        bloom = f.bloom
        if not outgoing or bloom is None:
            return
        if len(bloom) != self._bloom_len:
            return
        threshold = self.config.possible_acks_threshold
        certain = self.config.bloom_certain_ack_fp
        fp = None
        if self.config.possible_acks_group_cap:
            # distinct participants are needed; a group with fewer peers than the threshold can't supply them
            threshold = min(threshold, max(1, len(self._peers)))
        done = []
        for mid, out in outgoing.items():
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
                    out.next_resend = max(out.next_resend, out.sent_at + self.config.resend_possibly_acknowledged_ms)
                    heapq.heappush(self._resend_heap, (out.next_resend, mid))
                if journal is not None:
                    self._j("out", mid, self._out_row(mid, out))
        for mid in done:
            del outgoing[mid]
            if journal is not None:
                self._j("out-", mid, None)
            self.stats["acked"] += 1
            self.stats["acked_by_bloom"] += 1
            events.append(Acknowledged(mid, by_bloom=True))

    def _bloom_fp(self, data: bytes) -> float:
        """False-positive probability of a lookup in the serialized filter ``data``: fill ** k."""
        bits = bitarray()
        bits.frombytes(data)
        f = self._bloom.filter
        return (bits.count() / f.m) ** f.k

    def _on_repair_requests(self, f: Frame, sender: str, now_ms: int, events: list[Event]) -> None:
        cfg = self.config.repair
        if not cfg.enabled:
            return
        stats = self.stats
        stats["repair_requests_received"] += len(f.repair)  # one count per entry
        requests = self._requests
        cache = self._cache
        responses = self._responses
        for rid, rsender in f.repair:
            if requests:
                rec = requests.get(rid)
                if rec is not None:
                    # someone else asked: back off afresh, but keep asking until it arrives
                    rec[2] += 1
                    self._schedule_request(rid, rec, now_ms)
            cached = cache.get(rid)
            if cached is None or rid in responses:
                continue
            origin = cached.sender_id or rsender
            if not _repair.in_response_group(self.participant_id, origin, rid, self._groups):
                continue
            t = _repair.t_resp(self.participant_id, origin, rid, now_ms, cfg.t_max_ms)
            if len(self._responses) >= cfg.buffer_size:
                # full: keep the answers due soonest
                far = max(self._responses, key=self._responses.__getitem__)
                if self._responses[far] <= t:
                    continue
                self._drop_response(far)
                self.stats["evicted"] += 1
                events.append(Evicted("repair_responses", far))
            self._responses[rid] = t
            heapq.heappush(self._resp_heap, (t, rid))
            if self.journal is not None:
                self._j("resp", rid, t)
            events.append(RepairScheduled(rid, sender, t))

    def _on_content(self, f: Frame, mid, sender, lamport, now_ms, hint, events, positions=None) -> None:
        content = f.content
        causal = f.history  # a tuple of immutable entries, shared by every receiver of the frame
        self._bloom_add(mid, positions)
        repaired = False
        if mid in self._missing:
            del self._missing[mid]
            repaired = True
            if self.journal is not None:
                self._j("missing-", mid, None)
        elif mid in self._lost:
            del self._lost[mid]
            repaired = True
            if self.journal is not None:
                self._j("lost-", mid, None)
        cfg = self.config
        if cfg.repair.enabled and self._in_sender_group(f):
            self._cache_put(CacheRow(mid, sender, lamport, causal, content))
        log = self._log
        incoming = self._incoming
        lost = self._lost
        unmet = set()
        missing: list[HistoryEntry] = []
        waiting: list[str] = []
        for e in causal:
            d = e.message_id
            if d in log or d in lost or d in unmet:
                continue
            unmet.add(d)
            if d in incoming:
                waiting.append(d)
            else:
                missing.append(e)
        if cfg.ack_delay_ms is not None:
            self._owe_ack(mid, sender, now_ms)
        if not unmet:
            shared = None
            if hint is None and not repaired:
                shared = f._delivery
                if shared is None:
                    shared = f._delivery = (LogRow(mid, lamport, sender, None),
                                            Delivered(mid, sender, content, lamport, False, ()), (lamport, mid))
            self._deliver(mid, sender, lamport, content, hint, repaired, (), events, shared)
            return
        if len(incoming) >= cfg.incoming_buffer_size:
            self._evict_incoming(now_ms, events)
        entry = _In(sender, lamport, causal, content, now_ms, unmet, repaired)
        incoming[mid] = entry
        waiters = self._waiters
        for d in unmet:
            lst = waiters.get(d)
            if lst is None:
                waiters[d] = [mid]
            else:
                lst.append(mid)
        heapq.heappush(self._lost_heap, (now_ms + 2 * cfg.lost_after_ms, mid))
        if hint is not None:
            self._hint_map[mid] = hint
        if self.journal is not None:
            self._j("in", mid, self._in_row(mid, entry, hint))
        for e in missing:
            self._note_missing(e, now_ms, events)
        events.append(Missing(mid, missing, sender, content, lamport, tuple(waiting)))

    def _in_sender_group(self, f: Frame) -> bool:
        """``repair.in_response_group(self, f.sender_id, f.message_id, groups)``, the sender's hash read once per frame."""
        groups = self._groups
        if not f.sender_id:
            return False
        if groups <= 1:
            return True
        return _repair.hash64(self.participant_id + f.message_id) % groups == f.sender_hash() % groups

    def _note_missing(self, entry: HistoryEntry, now_ms: int, events: list[Event]) -> bool:
        """Record ``entry`` as missing if nothing here knows it; True if it is newly missing."""
        d = entry.message_id
        if d in self._missing or d in self._log or d in self._incoming or d in self._lost:
            return False
        row = MissingRow(entry, now_ms)
        self._missing[d] = row
        heapq.heappush(self._missing_heap, (now_ms + self.config.lost_after_ms, d))
        if self.journal is not None:
            self._j("missing", d, row)
        self._add_request(entry, now_ms, events)
        return True

    def _in_row(self, mid: str, entry: _In, hint: bytes | None) -> InRow:
        return InRow(mid, entry.sender_id, entry.lamport, entry.causal, entry.content, entry.received_at,
                     tuple(sorted(entry.unmet)), entry.repaired, tuple(entry.after_lost), hint)

    def _deliver(self, mid, sender, lamport, content, hint, repaired, after_lost, events, shared=None) -> None:
        """Log and deliver ``mid``, then whatever waited only for it (and so on).

        ``shared``: the ``(LogRow, Delivered, log key)`` of ``mid`` made once for every receiver of its
        frame (all immutable; equal to what would be made here).
        """
        stack = [(mid, sender, lamport, content, hint, repaired, tuple(after_lost))]
        incoming = self._incoming
        waiters = self._waiters
        journal = self.journal
        stats = self.stats
        emit = events.append
        while stack:
            mid, sender, lamport, content, hint, repaired, after_lost = stack.pop()
            if lamport > self.lamport_timestamp:
                self.lamport_timestamp = lamport
                if journal is not None:
                    self._j("lamport", None, lamport)
            if shared is not None:
                row, delivered, key = shared
                shared = None
            else:
                row = LogRow(mid, lamport, sender, hint)
                delivered = Delivered(mid, sender, content, lamport, repaired, after_lost)
                key = None
            self._log_insert(row, key)
            self._note_addition(mid, sender, self._now_hint)
            stats["delivered"] += 1
            emit(delivered)
            dependants = waiters.pop(mid, None)
            if not dependants:
                continue
            for w in dependants:
                entry = incoming.get(w)
                if entry is None:
                    continue
                unmet = entry.unmet
                unmet.discard(mid)
                if not unmet:
                    del incoming[w]
                    if journal is not None:
                        self._j("in-", w, None)
                    stack.append((w, entry.sender_id, entry.lamport, entry.content,
                                  self._hint_map.pop(w, None), entry.repaired, tuple(entry.after_lost)))
                elif journal is not None:
                    self._j("in", w, self._in_row(w, entry, self._hint_map.get(w)))

    def _declare_lost(self, dep: str, events: list[Event]) -> None:
        """``dep`` will not arrive in time: deliver its waiting dependants without it."""
        row = self._missing.pop(dep, None)
        if self.journal is not None and row is not None:
            self._j("missing-", dep, None)
        self._drop_request(dep)
        sender = row.entry.sender_id if row is not None else None
        self._lost[dep] = sender
        if self.journal is not None:
            self._j("lost", dep, sender)
        if len(self._lost) > _LOST_MEMORY:
            old, _ = self._lost.popitem(last=False)
            if self.journal is not None:
                self._j("lost-", old, None)
        self.stats["lost"] += 1
        dependants = tuple(self._waiters.get(dep, ()))
        events.append(Lost(dep, sender, dependants))
        self._release(dep, events)

    def _release(self, dep: str, events: list[Event]) -> None:
        incoming = self._incoming
        for w in self._waiters.pop(dep, ()):
            entry = incoming.get(w)
            if entry is None:
                continue
            entry.unmet.discard(dep)
            entry.after_lost.append(dep)
            if not entry.unmet:
                del incoming[w]
                if self.journal is not None:
                    self._j("in-", w, None)
                self._deliver(w, entry.sender_id, entry.lamport, entry.content, self._hint_map.pop(w, None),
                              entry.repaired, entry.after_lost, events)
            elif self.journal is not None:
                self._j("in", w, self._in_row(w, entry, self._hint_map.get(w)))

    def _evict_incoming(self, now_ms: int, events: list[Event]) -> None:
        old = next(iter(self._incoming))
        self.stats["evicted"] += 1
        events.append(Evicted("incoming", old))
        self._force_deliver(old, events)

    def _force_deliver(self, old: str, events: list[Event]) -> None:
        """Deliver buffered ``old`` now: its missing dependencies are declared lost."""
        entry = self._incoming[old]
        for dep in sorted(entry.unmet):
            if dep not in self._incoming:
                self._declare_lost(dep, events)
        entry = self._incoming.pop(old, None)
        if entry is None:
            return
        # still waiting on messages that are themselves waiting: deliver it now anyway
        if self.journal is not None:
            self._j("in-", old, None)
        for dep in entry.unmet:
            lst = self._waiters.get(dep)
            if lst and old in lst:
                lst.remove(old)
        self._deliver(old, entry.sender_id, entry.lamport, entry.content, self._hint_map.pop(old, None),
                      entry.repaired, tuple(entry.after_lost) + tuple(sorted(entry.unmet)), events)

    # -------------------------------------------------------------------- tick

    def _resend(self, mid: str, out: _Out, now_ms: int, events: list[Event]) -> None:
        cfg = self.config
        out.resends += 1
        base = cfg.resend_possibly_acknowledged_ms if out.ack_senders else cfg.resend_unacknowledged_ms
        # the exponent is capped: a message nobody acknowledges for hours must not overflow the float
        interval = min(cfg.resend_max_interval_ms, int(base * cfg.resend_backoff ** min(out.resends, 64)))
        out.next_resend = now_ms + max(1, interval)
        heapq.heappush(self._resend_heap, (out.next_resend, mid))
        if self.journal is not None:
            self._j("out", mid, self._out_row(mid, out))
        self.stats["resends"] += 1
        data = self._plain_frame(mid, self.participant_id, out.lamport, out.causal, out.content)
        events.append(Outgoing(data, mid, "resend", out.lamport))

    def resend_now(self, now_ms: int) -> list[Event]:
        """Rebroadcast every message of the outgoing buffer at once (e.g. after reconnecting)."""
        events: list[Event] = []
        for mid, out in list(self._outgoing.items()):
            self._resend(mid, out, now_ms, events)
        return events

    def tick(self, now_ms: int) -> list[Event]:
        """Do every periodic duty due at ``now_ms``; frames to send come back as ``Outgoing``."""
        events: list[Event] = self._deferred
        self._deferred = []
        cfg = self.config
        self._now_hint = now_ms
        # irretrievably lost dependencies
        heap = self._missing_heap
        while heap and heap[0][0] <= now_ms:
            t, mid = heapq.heappop(heap)
            if self._missing_live(t, mid):
                self._declare_lost(mid, events)
        heap = self._lost_heap
        while heap and heap[0][0] <= now_ms:
            t, mid = heapq.heappop(heap)
            if self._wait_live(t, mid):
                self._force_deliver(mid, events)
        # resends of own unacknowledged messages
        heap = self._resend_heap
        while heap and heap[0][0] <= now_ms:
            t, mid = heapq.heappop(heap)
            if not self._resend_live(t, mid):
                continue
            out = self._outgoing[mid]
            if cfg.max_resends is not None and out.resends >= cfg.max_resends:
                del self._outgoing[mid]
                if self.journal is not None:
                    self._j("out-", mid, None)
                self.stats["evicted"] += 1
                events.append(Evicted("outgoing", mid, {"reason": "max_resends"}))
                continue
            self._resend(mid, out, now_ms, events)
        # SDS-R answers that are due
        heap = self._resp_heap
        while heap and heap[0][0] <= now_ms:
            t, mid = heapq.heappop(heap)
            if not self._response_live(t, mid):
                continue
            self._drop_response(mid)
            row = self._cache.get(mid)
            if row is None:
                continue
            self.stats["repairs_served"] += 1
            data = self._plain_frame(mid, row.sender_id, row.lamport_timestamp, row.causal_history, row.content)
            events.append(Outgoing(data, mid, "repair", row.lamport_timestamp))
            events.append(RepairServed(mid, row.sender_id))
        # due repair requests go out at once in a sync frame; else the periodic sync
        heap = self._req_heap
        while heap and not self._request_live(*heap[0]):
            heapq.heappop(heap)  # stale: answered, cancelled or re-scheduled
        req_due = cfg.repair.enabled and heap and heap[0][0] <= now_ms
        ack_due = bool(self._ack_owed) and min(t for t, _ in self._ack_owed.values()) <= now_ms
        if self._hint_due is not None and not self._hints:
            self._hint_due = None  # others named them first
        hint_due = self._hint_due is not None and self._hint_due <= now_ms
        if req_due or ack_due or hint_due or now_ms >= self._next_sync_at:
            out = self.sync(now_ms)
            if out is not None:
                events.append(out)
                if out.repair_request:
                    events.append(RepairRequested(out.repair_request, out.message_id))
        return events

    # ------------------------------------------------------------ persistence

    def snapshot(self) -> ChannelState:
        """The full state as plain rows (see :mod:`sdschat.sds.state`)."""
        hints = self._hint_map
        return ChannelState(
            channel_id=self.channel_id,
            participant_id=self.participant_id,
            lamport_timestamp=self.lamport_timestamp,
            log=self.log_entries(),
            outgoing=[self._out_row(mid, out) for mid, out in self._outgoing.items()],
            incoming=[self._in_row(mid, e, hints.get(mid)) for mid, e in self._incoming.items()],
            missing=list(self._missing.values()),
            lost=list(self._lost.items()),
            repair_requests=[RequestRow(rec[1], rec[0], rec[2]) for rec in self._requests.values()],
            repair_responses=list(self._responses.items()),
            cache=list(self._cache.values()),
            bloom_ids=self._bloom.ids(),
            last_activity=self._last_activity,
            sync_counter=self._sync_counter,
            next_sync_at=self._next_sync_at,
            recent_syncs=list(self._recent_syncs),
            recent_log=list(self._recent),
        )

    @classmethod
    def restore(cls, state: ChannelState, config: ChannelConfig | None = None, *, journal: bool = False) -> MessageChannel:
        """Rebuild a channel from :meth:`snapshot` output (or rows loaded from a store)."""
        ch = cls(state.channel_id, state.participant_id, config, state.last_activity)
        ch.lamport_timestamp = state.lamport_timestamp
        ch._sync_counter = state.sync_counter
        ch._next_sync_at = (
            state.next_sync_at if state.next_sync_at is not None else ch._sync_due_after(state.last_activity)
        )
        for row in sorted(state.log, key=lambda r: (r.lamport_timestamp, r.message_id)):
            ch._log_keys.append((row.lamport_timestamp, row.message_id))
            ch._log[row.message_id] = row
            if row.sender_id != ch.participant_id and len(ch._peers) < ch.config.possible_acks_threshold:
                ch._peers.add(row.sender_id)
        recent = state.recent_log or [mid for _, mid in ch._log_keys[-ch.config.causal_history_size:]]
        ch._recent.extend(recent if ch.config.causal_history_size > 0 else ())
        ch._bloom.load(state.bloom_ids)
        for r in state.outgoing:
            out = _Out(r.lamport_timestamp, list(r.causal_history), r.content, r.sent_at, r.resends,
                       r.next_resend, set(r.ack_senders), ch._bloom.positions(r.message_id))
            ch._outgoing[r.message_id] = out
            heapq.heappush(ch._resend_heap, (out.next_resend, r.message_id))
        for r in sorted(state.incoming, key=lambda r: r.received_at):
            entry = _In(r.sender_id, r.lamport_timestamp, tuple(r.causal_history), r.content, r.received_at,
                        set(r.unmet), r.repaired, r.after_lost)
            ch._incoming[r.message_id] = entry
            for d in entry.unmet:
                ch._waiters.setdefault(d, []).append(r.message_id)
            heapq.heappush(ch._lost_heap, (r.received_at + 2 * ch.config.lost_after_ms, r.message_id))
            if r.retrieval_hint is not None:
                ch._hint_map[r.message_id] = r.retrieval_hint
        for row in state.missing:
            ch._missing[row.entry.message_id] = row
            heapq.heappush(ch._missing_heap, (row.detected_at + ch.config.lost_after_ms, row.entry.message_id))
        for mid, sender in state.lost:
            ch._lost[mid] = sender
        for r in state.repair_requests:
            ch._requests[r.entry.message_id] = [r.t_req, r.entry, r.attempts]
            heapq.heappush(ch._req_heap, (r.t_req, r.entry.message_id))
        for mid, t in state.repair_responses:
            ch._responses[mid] = t
            heapq.heappush(ch._resp_heap, (t, mid))
        for row in state.cache:
            ch._cache[row.message_id] = row
        for sid in state.recent_syncs:
            if sid not in ch._recent_syncs:
                ch._recent_syncs[sid] = None
                ch._recent_sync_order.append(sid)
        if journal:
            ch.journal = []
        return ch

    def drain_journal(self) -> list[tuple]:
        """Return and clear the mutations recorded since the last call (``journal=True``)."""
        if self.journal is None:
            return []
        out, self.journal = self.journal, []
        return out

    def check_invariants(self) -> list[str]:
        """Internal consistency checks; returns a list of violations (empty when sound)."""
        problems = []
        if sorted(self._log_keys) != self._log_keys:
            problems.append("log keys out of order")
        if len(self._log_keys) != len(self._log):
            problems.append("log index and order disagree")
        for mid, row in self._log.items():
            if row.lamport_timestamp > self.lamport_timestamp:
                problems.append(f"logged {mid} is ahead of the clock")
        for mid in self._incoming:
            if mid in self._log:
                problems.append(f"{mid} both logged and buffered")
        for mid, e in self._incoming.items():
            if not e.unmet:
                problems.append(f"buffered {mid} has no unmet dependency")
            for d in e.unmet:
                if d in self._log:
                    problems.append(f"buffered {mid} waits on logged {d}")
                if mid not in self._waiters.get(d, ()):
                    problems.append(f"buffered {mid} not registered as waiting on {d}")
        for mid in self._missing:
            if mid in self._log or mid in self._incoming:
                problems.append(f"missing {mid} is present")
        for mid in self._outgoing:
            if mid not in self._log:
                problems.append(f"outgoing {mid} not in log")
        return problems
