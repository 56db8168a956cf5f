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

__all__ = ["MessageChannel", "message_id"]

_PbMessage = sds_pb2.Message
_SYNC_DEDUP = 4096
_LOST_MEMORY = 10_000


def message_id(payload: bytes) -> str:
    """Lowercase hex SHA-256 of ``payload`` (as @waku/sds)."""
    return sha256(payload).hexdigest()


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
        self._peers: set[str] = set()  # other participants seen (bounds the possible-ack threshold)
        self._recent_syncs: OrderedDict[str, None] = OrderedDict()
        self._last_activity = int(now_ms)
        self._sync_counter = 0
        self._jitter_for = -1
        self._jitter = 0
        self._next_sync_at = self._sync_due_after(int(now_ms))
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

    @property
    def repair_request_ids(self) -> list[str]:
        return list(self._requests)

    @property
    def repair_response_ids(self) -> list[str]:
        return list(self._responses)

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
        """Earliest ``now_ms`` at which :meth:`tick` may have work (may be early, never late)."""
        due = self._next_sync_at
        if self._ack_owed:
            due = min(due, min(t for t, _ in self._ack_owed.values()))
        for heap in (self._resend_heap, self._req_heap, self._resp_heap, self._lost_heap, self._missing_heap):
            if heap and heap[0][0] < due:
                due = heap[0][0]
        return due

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

    def _log_insert(self, row: LogRow) -> None:
        key = (row.lamport_timestamp, row.message_id)
        keys = self._log_keys
        if not keys or keys[-1] < key:
            keys.append(key)
        else:
            from bisect import insort

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

    def receive_parsed(self, pb: sds_pb2.Message, now_ms: int, retrieval_hint: bytes | None = None,
                       positions: tuple[tuple[int, int], ...] | None = None) -> list[Event]:
        """:meth:`receive` for a frame already parsed with :func:`sdschat.sds.wire.parse_pb`.

        For simulators that broadcast one frame to many receivers: parse once,
        and optionally pass the bloom ``positions`` of its message id
        (``channel.bloom.positions(id)``, identical for equal bloom parameters).
        The parsed message is only read, never modified.
        """
        problem = self._validate(pb, now_ms)
        if problem is not None:
            self.stats["rejected"] += 1
            return [Rejected(problem[0], problem[1], pb.message_id or None, pb.sender_id or None)]
        mid = pb.message_id
        sender = pb.sender_id
        has_content = pb.HasField("content") and len(pb.content) > 0
        if not pb.HasField("lamport_timestamp"):
            if not has_content:
                self.stats["rejected"] += 1
                return [Rejected("empty", "frame has neither lamport timestamp nor content", mid, sender)]
            self.stats["ephemeral_received"] += 1
            return [EphemeralReceived(sender, pb.content, mid)] if sender != self.participant_id else []
        # cancel before dedup
        if mid in self._requests:
            self._drop_request(mid)
        if mid in self._responses:
            self._drop_response(mid)
        if sender == self.participant_id:
            self.stats["own_echoes"] += 1
            return []
        if has_content:
            if mid in self._log or mid in self._incoming:
                self.stats["duplicates"] += 1
                if self.config.ack_delay_ms is not None and mid not in self._ack_owed:
                    self._owe_ack(mid, sender, now_ms)  # a resend: the sender lacks our acknowledgement
                return []
        else:
            syncs = self._recent_syncs
            if mid in syncs:
                self.stats["duplicates"] += 1
                return []
            syncs[mid] = None
            if len(syncs) > _SYNC_DEDUP:
                syncs.popitem(last=False)
        self.stats["received"] += 1
        self._peers.add(sender)
        events: list[Event] = []
        if self._ack_owed:
            owed = self._ack_owed
            for e in pb.causal_history:
                got = owed.get(e.message_id)
                if got is not None and got[1] != sender:
                    del owed[e.message_id]  # someone else acknowledged it to its sender
        if self._outgoing:
            self._review_acks(pb, sender, events)
        if pb.repair_request:
            self._on_repair_requests(pb, sender, now_ms, events)
        self._activity(now_ms)
        lamport = pb.lamport_timestamp
        if not has_content:
            self.stats["syncs_received"] += 1
            events.append(SyncReceived(sender, mid, lamport))
            gaps = [e for e in (entry_from_pb(h) for h in pb.causal_history) if self._note_missing(e, now_ms, events)]
            if gaps:
                events.append(GapDetected(gaps, sender, mid))
            return events
        self._on_content(pb, mid, sender, lamport, now_ms, retrieval_hint, events, positions)
        return events

    def _validate(self, pb, now_ms: int) -> tuple[str, str] | None:
        cfg = self.config
        if pb.channel_id != self.channel_id:
            return ("wrong_channel", f"frame for channel {pb.channel_id[:64]!r}")
        mid = pb.message_id
        if not mid or not pb.sender_id:
            return ("invalid", "empty message_id or sender_id")
        max_id = cfg.max_id_length
        if len(mid) > max_id or len(pb.sender_id) > max_id:
            return ("invalid", "message_id or sender_id too long")
        if len(pb.causal_history) > cfg.max_history_entries:
            return ("too_large", f"causal history of {len(pb.causal_history)} entries")
        if len(pb.repair_request) > cfg.max_repair_entries:
            return ("too_large", f"{len(pb.repair_request)} repair requests")
        for e in pb.causal_history:
            if not e.message_id or len(e.message_id) > max_id or len(e.sender_id) > max_id:
                return ("invalid", "bad causal history entry")
        for e in pb.repair_request:
            if not e.message_id or len(e.message_id) > max_id or len(e.sender_id) > max_id:
                return ("invalid", "bad repair request entry")
        if pb.HasField("lamport_timestamp") and pb.lamport_timestamp > max(now_ms, self.lamport_timestamp) + cfg.max_clock_skew_ms:
            return ("lamport_future", f"lamport timestamp {pb.lamport_timestamp} too far ahead")
        return None

    def _review_acks(self, pb, sender: str, events: list[Event]) -> None:
        outgoing = self._outgoing
        journal = self.journal
        for e in pb.causal_history:
            mid = e.message_id
            if mid in outgoing:
                del outgoing[mid]
                if journal is not None:
                    self._j("out-", mid, None)
                self.stats["acked"] += 1
                events.append(Acknowledged(mid))
        if not outgoing or not pb.HasField("bloom_filter"):
            return
        bloom = pb.bloom_filter
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

    def _on_repair_requests(self, pb, sender: str, now_ms: int, events: list[Event]) -> None:
        cfg = self.config.repair
        if not cfg.enabled:
            return
        for e in pb.repair_request:
            rid = e.message_id
            self.stats["repair_requests_received"] += 1
            rec = self._requests.get(rid)
            if rec is not None:
                # someone else asked: back off afresh, but keep asking until it arrives
                rec[2] += 1
                self._schedule_request(rid, rec, now_ms)
            cached = self._cache.get(rid)
            if cached is None or rid in self._responses:
                continue
            origin = cached.sender_id or e.sender_id
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

    def _on_content(self, pb, mid, sender, lamport, now_ms, hint, events, positions=None) -> None:
        content = pb.content
        causal = [entry_from_pb(e) for e in pb.causal_history]
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
        if self.config.repair.enabled and _repair.in_response_group(self.participant_id, sender, mid, self._groups):
            self._cache_put(CacheRow(mid, sender, lamport, tuple(causal), content))
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
        if self.config.ack_delay_ms is not None:
            self._owe_ack(mid, sender, now_ms)
        if not unmet:
            self._deliver(mid, sender, lamport, content, hint, repaired, (), events)
            return
        if len(incoming) >= self.config.incoming_buffer_size:
            self._evict_incoming(now_ms, events)
        entry = _In(sender, lamport, tuple(causal), content, now_ms, unmet, repaired)
        incoming[mid] = entry
        for d in unmet:
            self._waiters.setdefault(d, []).append(mid)
        heapq.heappush(self._lost_heap, (now_ms + 2 * self.config.lost_after_ms, mid))
        if hint is not None:
            self._hint_map[mid] = hint
        if self.journal is not None:
            self._j("in", mid, self._in_row(mid, entry, hint))
        for e in missing:
            self._note_missing(e, now_ms, events)
        events.append(Missing(mid, missing, sender, content, lamport, tuple(waiting)))

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

    def _deliver(self, mid, sender, lamport, content, hint, repaired, after_lost, events) -> None:
        stack = [(mid, sender, lamport, content, hint, repaired, tuple(after_lost))]
        incoming = self._incoming
        waiters = self._waiters
        journal = self.journal
        while stack:
            mid, sender, lamport, content, hint, repaired, after_lost = stack.pop()
            if lamport > self.lamport_timestamp:
                self.lamport_timestamp = lamport
                if journal is not None:
                    self._j("lamport", None, lamport)
            self._log_insert(LogRow(mid, lamport, sender, hint))
            self.stats["delivered"] += 1
            events.append(Delivered(mid, sender, content, lamport, repaired, after_lost))
            for w in waiters.pop(mid, ()):
                entry = incoming.get(w)
                if entry is None:
                    continue
                entry.unmet.discard(mid)
                if not entry.unmet:
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
        # irretrievably lost dependencies
        heap = self._missing_heap
        while heap and heap[0][0] <= now_ms:
            t, mid = heapq.heappop(heap)
            row = self._missing.get(mid)
            if row is None or row.detected_at + cfg.lost_after_ms != t:
                continue
            self._declare_lost(mid, events)
        heap = self._lost_heap
        while heap and heap[0][0] <= now_ms:
            t, mid = heapq.heappop(heap)
            entry = self._incoming.get(mid)
            if entry is None or entry.received_at + 2 * cfg.lost_after_ms != t:
                continue
            self._force_deliver(mid, events)
        # resends of own unacknowledged messages
        heap = self._resend_heap
        while heap and heap[0][0] <= now_ms:
            t, mid = heapq.heappop(heap)
            out = self._outgoing.get(mid)
            if out is None or out.next_resend != t:
                continue
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
            if self._responses.get(mid) != t:
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
        while heap and self._requests.get(heap[0][1], (None,))[0] != heap[0][0]:
            heapq.heappop(heap)  # stale: answered, cancelled or re-scheduled
        req_due = cfg.repair.enabled and heap and heap[0][0] <= now_ms
        ack_due = bool(self._ack_owed) and min(t for t, _ in self._ack_owed.values()) <= now_ms
        if req_due or ack_due or now_ms >= self._next_sync_at:
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
            if row.sender_id != ch.participant_id:
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
            ch._recent_syncs[sid] = None
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
