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
  notices the gap and repairs it through SDS-R. Only the newest
  ``bloom_capacity // 2`` additions are checked when the filter rolls: a
  peer's filter of the same size is sure to hold no more than those.
* **Acks a filter does not hold are named** (with ``ack_delay_ms``). A
  rolling filter holds only the newest ``bloom_capacity`` ids. A message we
  owe an acknowledgement (just received, or resent to us: its sender lacks
  our ack) that our filter does not hold -- one of 200 caught up at once
  after a time away, or one whose sender was away while the channel moved
  on -- would be acknowledged by nothing we send: our next sync names it in
  its causal history (up to ``ack_names`` such entries a sync, the rest in the
  next), which acknowledges it for good. So a small filter loses no
  acknowledgement, and neither does a long-lived channel whose filter rolled.
* **Lost means delivered with a marker.** A missing id that has not arrived
  ``lost_after_ms`` after it was first noticed is declared lost (``Lost``
  event); messages waiting on it are delivered without it
  (``Delivered.after_lost``). If the lost message turns up later it is
  delivered into its Lamport place (``Delivered.repaired``). A message still
  waiting after ``2 * lost_after_ms`` (its dependencies wait themselves, e.g. a
  forged cycle) is delivered anyway.
* **T_min grows with the gap** (``RepairConfig.t_min_growth``, 0 by default:
  the RFC's one T_min; the node uses 1). A request is scheduled in
  ``[T_min(n), T_max)`` where n is the number of requests outstanding:
  ``T_min * (1 + growth * log2 n)``. A message lost in live traffic is asked
  for soon; the dozens of a member coming back wait longer for the store
  node or the broker's kept session before every member hears a request.
  Only when this member asks changes: interop is unaffected.
* **Keep asking until it arrives.** After we put a repair request on the wire,
  or see a peer ask for the same id, our request is re-scheduled with a fresh
  pseudo-random backoff in ``[T_min, T_max)`` instead of being dropped; it ends
  when the message arrives or is declared lost. Due requests go out at once in
  a sync frame when no content message is being sent.
* **Repair timings follow the group** (:meth:`MessageChannel.set_repair_config`):
  an application may change T_min, T_max and the response groups of a
  running channel; what is scheduled keeps its time, what is scheduled from
  then on uses the new ones. A local decision, like ``t_min_growth``.
* **Delayed ack** (``ack_delay_ms``, off by default): a received content
  message is owed an acknowledgement; if no frame of ours names it within
  ``ack_delay_ms`` (+ jitter) and nobody else's frame names it either, a sync
  goes out. So the last message of a conversation is acknowledged promptly.
  A duplicate of a content message (a resend: its sender has not seen an
  acknowledgement) makes the ack owed again.
  Resends and repair answers carry no fresh state (old history, no bloom), so
  they do not count as channel activity for sync suppression.
* **Each quiet interval contested afresh** (``sync_fresh_jitter``, off by
  default). A periodic sync is due when nothing was broadcast for
  ``sync_interval_ms`` plus a pseudo-random jitter. A draw kept until the
  member's own next sync leaves one that drew late behind the others, whose
  draws are fresh after each of their syncs, round after round (one of five
  members sent 2% of the syncs in a test): it is never heard while it takes no
  part. With the option, each sync heard draws every member's jitter anew, so
  each member sends about its share. A quiet interval then ends at the
  earliest of the members' draws, sooner than the half-jitter a kept draw
  averages: the node lengthens its sync interval to match. Timing only:
  interop is unaffected.
* **Asking to be heard** (:meth:`MessageChannel.sync_soon`): an application
  whose member must be heard makes the channel's next periodic sync its own,
  due just before the quiet interval ends (ahead of every peer's), until a
  frame of its own goes out, and within a bound. It takes the place of a sync
  the channel would have had.
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

The channel is a facade over collaborators with one job each, which it wires
together: :class:`~sdschat.sds.log.LocalLog` (log order, Lamport clock, bloom
filter), :class:`~sdschat.sds.outgoing.OutgoingBuffer` (resends and acks),
:class:`~sdschat.sds.incoming.IncomingBuffer` (dependencies, delivery, lost
declarations), :class:`~sdschat.sds.repair.RepairScheduler` (SDS-R requests,
answers and cache), :class:`~sdschat.sds.sync.Syncer` (sync frames, delayed
acks) and :class:`~sdschat.sds.hints.GapHints`; :class:`~sdschat.sds.frame.Frame`
is a received frame read once.

Persistence: :meth:`MessageChannel.snapshot` returns the full state as plain
rows and :meth:`MessageChannel.restore` rebuilds a channel from it. With
``journal=True`` every mutation is also appended to ``channel.journal`` as a
small ``(op, key, row)`` tuple (see :mod:`sdschat.sds.state`), so a store can
persist each change as one row write instead of rewriting the state.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from hashlib import sha256

from . import sds_pb2
from .bloom import RollingBloomFilter
from .config import ChannelConfig, RepairConfig
from .events import EphemeralReceived, Event, Outgoing, Rejected, RepairRequested
from .frame import Frame
from .hints import GapHints
from .incoming import IncomingBuffer
from .log import LocalLog
from .outgoing import OutgoingBuffer
from .repair import RepairScheduler
from .state import CacheRow, ChannelState, JournalOp, LogRow
from .sync import Syncer
from .timers import Timers
from .wire import MAX_FRAME_BYTES, HistoryEntry, WireError, encode_frame, parse_pb

__all__ = ["MessageChannel", "Frame", "message_id"]


_STATS = (
    "sent",
    "received",
    "delivered",
    "duplicates",
    "own_echoes",
    "rejected",
    "resends",
    "syncs_sent",
    "syncs_received",
    "ephemeral_sent",
    "ephemeral_received",
    "acked",
    "acked_by_bloom",
    "possibly_acked",
    "repairs_requested",
    "repair_requests_received",
    "repairs_served",
    "lost",
    "evicted",
)


def message_id(payload: bytes) -> str:
    """Lowercase hex SHA-256 of ``payload`` (as @waku/sds)."""
    return sha256(payload).hexdigest()


class MessageChannel:
    """SDS (+ SDS-R) state machine of ``participant_id`` in ``channel_id``."""

    # Slots (a simulator touches thousands of channels in turn, cold in the CPU caches), those of the receive
    # path first; it reads the collaborators' shared dicts through direct references (``_requests`` is the
    # repair scheduler's ``requests``, ``_logged`` the log's ``rows``...), not through a second lookup.
    # The counters a frame's every copy moves (received, syncs received, duplicates, own echoes; delivered and
    # repair requests received in their collaborators) are native ints, not entries of the shared ``_stats``
    # dict: incrementing a dict entry past 256 allocates an int and frees the old one, in memory as cold as the
    # member (bench/engine_fanout.py); :attr:`stats` merges them back in.
    __slots__ = (
        "config",
        "channel_id",
        "participant_id",
        "_stats",
        "_received",
        "_syncs_received",
        "_duplicates",
        "_own_echoes",
        "_peers_full",
        "_requests",
        "_responses",
        "_logged",
        "_incoming",
        "_archive",
        "_peers",
        "_ack_owed",
        "_recent_syncs",
        "_outgoing",
        "_clog",
        "_repair",
        "_sync",
        "_hints",
        "_out",
        "_in",
        "_deferred",
        "_timers",
        "_journal",
        "max_content_bytes",
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
        self._stats: dict[str, int] = dict.fromkeys(_STATS, 0)
        self._received = self._syncs_received = self._duplicates = self._own_echoes = 0
        self._wire(int(now_ms))
        #: largest content :meth:`send` accepts: the frame must stay under the wire limit
        self.max_content_bytes = MAX_FRAME_BYTES - self._clog.bloom.n_bytes - 64 * 1024
        self._deferred: list[Event] = []  # events raised inside send(), returned by the next tick()
        self.journal = [] if journal else None

    def _wire(self, now_ms: int) -> None:
        """Build the collaborators and keep direct references to what the receive path reads."""
        cfg, cid, pid, stats = self.config, self.channel_id, self.participant_id, self._stats
        self._clog = log = LocalLog(cfg, now_ms)
        self._repair = repair = RepairScheduler(cfg, cid, pid, stats)
        self._hints = hints = GapHints(cfg, pid, log.rows, log.bloom)
        self._in = incoming = IncomingBuffer(cfg, stats, log, repair, hints)
        self._sync = sync = Syncer(cfg, cid, pid, stats, now_ms, log, repair, hints, incoming)
        self._out = out = OutgoingBuffer(cfg, cid, pid, stats, log.bloom)
        self._logged = log.rows
        self._archive = log.archive
        self._incoming = incoming.entries
        self._outgoing = out.entries
        self._peers = out.peers
        self._peers_full = False  # once ``_peers`` holds ``possible_acks_threshold`` senders (all that is used)
        self._requests = repair.requests
        self._responses = repair.responses
        self._ack_owed = sync.ack_owed
        self._recent_syncs = sync.recent
        self._timers = Timers(
            (out.heap, out.live),
            (repair.req_heap, repair.request_live),
            (repair.resp_heap, repair.response_live),
            (incoming.wait_heap, incoming.wait_live),
            (incoming.missing_heap, incoming.missing_live),
        )

    @property
    def stats(self) -> dict[str, int]:
        """Counters since this channel was made (``sent``, ``received``, ``delivered``...): a new dict each call."""
        s = self._stats.copy()
        s["received"] = self._received
        s["delivered"] = self._in.delivered
        s["duplicates"] = self._duplicates
        s["own_echoes"] = self._own_echoes
        s["syncs_received"] = self._syncs_received
        s["repair_requests_received"] = self._repair.requests_received
        return s

    @property
    def journal(self) -> list[JournalOp] | None:
        """Mutations recorded since the last :meth:`drain_journal` (None: not journaling)."""
        return self._journal

    @journal.setter
    def journal(self, value: list[JournalOp] | None) -> None:
        self._journal = value
        for part in (self._clog, self._out, self._in, self._repair):
            part.journal = value

    @property
    def lamport_timestamp(self) -> int:
        return self._clog.lamport

    @lamport_timestamp.setter
    def lamport_timestamp(self, value: int) -> None:
        self._clog.lamport = value

    # ------------------------------------------------------------------ views

    @property
    def log(self) -> list[str]:
        """Message ids in local-log order: (lamport_timestamp, message_id) ascending (with ``log_window`` set:
        the rows in memory, the newest of the log; ``in`` and :meth:`log_size` count the archived ones too)."""
        return self._clog.ids()

    def log_entries(self) -> list[LogRow]:
        return self._clog.entries()

    def log_size(self) -> int:
        """Every message in the log, archived ones included."""
        return self._clog.size()

    def __contains__(self, message_id: str) -> bool:
        return message_id in self._logged or message_id in self._archive

    @property
    def outgoing_ids(self) -> list[str]:
        return list(self._outgoing)

    @property
    def incoming_ids(self) -> list[str]:
        return list(self._incoming)

    @property
    def missing_ids(self) -> list[str]:
        """Dependencies known to be missing (named by a waiting message, not here, not lost)."""
        return list(self._in.missing)

    def was_lost(self, message_id: str) -> bool:
        """Whether ``message_id`` was declared irretrievably lost here (and has not turned up since): for an
        application with something that refers to a message and arrives after it was given up on."""
        return message_id in self._in.lost

    def open_gaps(self) -> list[tuple[str, tuple[str, ...], tuple[str, ...]]]:
        """What this member still waits for, as ``(message_id, ids, senders)``.

        First each waiting message, in log order, with the ids it waits on
        (missing ones, and waiting ones it depends on); then ``("", ids,
        senders)`` for missing ids that no waiting message names (learnt from
        the causal history of a sync). ``senders``: of the missing ids, where
        the causal history named them. For a view opened later (after a
        restart) to show the gaps the live events reported.
        """
        return self._in.open_gaps()

    @property
    def repair_request_ids(self) -> list[str]:
        return list(self._requests)

    @property
    def repair_response_ids(self) -> list[str]:
        return list(self._responses)

    def repair_pending(self, message_id: str) -> tuple[bool, bool]:
        """Whether this member has a repair request for ``message_id`` scheduled, and an answer to one."""
        return message_id in self._requests, message_id in self._responses

    def pending(self) -> bool:
        """Whether anything is outstanding: own unacknowledged messages, waiting messages, known gaps,
        repair requests or answers (what the ``*_ids`` views list, without building the lists)."""
        return bool(self._outgoing or self._incoming or self._in.missing or self._requests or self._responses)

    @property
    def bloom(self) -> RollingBloomFilter:
        return self._clog.bloom

    def outgoing_state(self, message_id: str) -> tuple[str, int] | None:
        """``("unacknowledged"|"possibly_acknowledged", resends)`` or None if not in the buffer."""
        return self._out.state(message_id)

    def possible_ack_count(self, message_id: str) -> int:
        return self._out.ack_count(message_id)

    def summary(self) -> dict[str, int]:
        """Buffer sizes and the clock, for health displays."""
        unacknowledged, possibly = self._out.counts()
        return {
            "lamport_timestamp": self._clog.lamport,
            "log": self._clog.size(),
            "unacknowledged": unacknowledged,
            "possibly_acknowledged": possibly,
            "incoming": len(self._incoming),
            "missing": len(self._in.missing),
            "repair_requests": len(self._requests),
            "repair_responses": len(self._responses),
            "repair_cache": len(self._repair.cache),
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
        return self._timers.earliest(self._sync.deadline(), prune=not self._deferred)

    # -------------------------------------------------------------------- send

    def send(
        self,
        content: bytes,
        now_ms: int,
        message_id: str | None = None,
        *,
        sign: Callable[[bytes, int | None, list[HistoryEntry]], bytes] | None = None,
    ) -> Outgoing:
        """Create a content message; it enters the log and the outgoing buffer now.

        ``sign(content, lamport_timestamp, causal_history)``, when given, returns the content to send in place
        of ``content``, made once the frame's Lamport time and causal history are known (an application's
        signature over them, say; the message id is then the hash of what it returns). Both stay what it was
        given: resends and SDS-R answers carry them unchanged.
        """
        if not isinstance(content, (bytes, bytearray)) or not content:
            raise ValueError("content must be non-empty bytes (empty content is a sync message)")
        log = self._clog
        lamport = log.lamport + 1
        if now_ms > lamport:
            lamport = now_ms  # what log.bump(now_ms) will give, once the message is accepted
        causal = [HistoryEntry(r.message_id, r.retrieval_hint, r.sender_id) for r in log.causal_history()]
        content = bytes(content) if sign is None else bytes(sign(bytes(content), lamport, causal))
        if len(content) > self.max_content_bytes:
            raise ValueError(
                f"content of {len(content)} bytes exceeds {self.max_content_bytes} (peers would reject the frame)"
            )
        mid = message_id if message_id is not None else sha256(content).hexdigest()
        if not isinstance(mid, str) or not mid or len(mid) > self.config.max_id_length:
            raise ValueError(f"message_id must be a non-empty string of at most {self.config.max_id_length} characters")
        if mid in self._logged or mid in self._incoming or mid in self._archive:
            raise ValueError(f"message id {mid!r} is already in this channel")
        pid = self.participant_id
        log.bump(now_ms)
        if self._ack_owed:
            self._sync.acks_sent({e.message_id for e in causal})
        repair = self._repair.due_requests(now_ms)
        data = encode_frame(self.channel_id, pid, mid, lamport, causal, content, log.bloom.to_bytes(), repair)
        positions = log.bloom.positions(mid)
        log.bloom_add(mid, positions)
        row = LogRow(mid, lamport, pid, None)
        log.insert(row)
        self._hints.note(row, now_ms, positions)
        self._out.add(mid, lamport, causal, content, now_ms, positions)
        if self.config.repair.enabled:
            self._repair.cache_put(CacheRow(mid, pid, lamport, tuple(causal), content))
        self._out.evict(self._deferred)
        self._sync.eager = False  # (a sync_soon is answered: this message is heard)
        self._sync.activity(now_ms)
        self._stats["sent"] += 1
        return Outgoing(data, mid, "message", lamport, tuple(e.message_id for e in repair))

    def send_ephemeral(
        self,
        content: bytes,
        now_ms: int,
        *,
        sign: Callable[[bytes, int | None, list[HistoryEntry]], bytes] | None = None,
    ) -> Outgoing:
        """A frame with no Lamport timestamp, history or bloom filter; never buffered or logged (``sign`` as in
        :meth:`send`, called with ``None`` and ``[]``)."""
        if not isinstance(content, (bytes, bytearray)) or not content:
            raise ValueError("ephemeral content must be non-empty bytes")
        content = bytes(content) if sign is None else bytes(sign(bytes(content), None, []))
        mid = sha256(content).hexdigest()
        data = encode_frame(self.channel_id, self.participant_id, mid, None, (), content)
        self._stats["ephemeral_sent"] += 1
        return Outgoing(data, mid, "ephemeral")

    def sync(self, now_ms: int) -> Outgoing | None:
        """A sync frame (no content) with causal history, bloom filter and due repair requests.

        Returns None when there is nothing to say (empty log and no due requests).
        """
        return self._sync.build(now_ms)

    def sync_soon(self, now_ms: int, within_ms: int = 0) -> None:
        """Make the channel's next periodic sync ours: due just before the current quiet interval ends, by up to a
        sixteenth of our jitter (ahead of every peer, whose syncs are due at that end or later; two members asking
        at once are apart by their own draws), and no later than ``now_ms + within_ms`` (a busy channel, whose
        activity keeps putting periodic syncs off, gets it then). The next :meth:`tick` at or after that time sends
        it, as it sends any periodic sync, and every peer that hears it puts its own off, as after any sync: the
        sync takes the place of one the channel would have had. A peer's sync heard first takes that place
        instead, and puts ours off to the next quiet interval's end, still ours the same way and still within the
        bound: the request holds until a frame of ours goes out (that sync, an acknowledging one, or a message of
        ours). With delayed acks on, a content message that comes first is acknowledged by our sync with a quarter
        of the ack jitter, ahead of most members' (one of which would have acknowledged it): that sync is the one.
        For an application that must be heard (a sync says its sender is here) without adding a frame. Never puts
        a sync off."""
        self._sync.ask_soon(now_ms + max(0, within_ms))

    def forget_cached(self, message_id: str) -> bool:
        """Drop a message from the SDS-R repair cache (this participant no longer rebroadcasts it); whether it
        was there. For content that must not outlive a retention window (an application's choice)."""
        return self._repair.cache_drop(message_id)

    def set_repair_config(self, repair: RepairConfig) -> None:
        """Change SDS-R's timings on a running channel (an application whose group grew or shrank, say): T_min,
        T_max, ``t_min_growth``, the response groups and ``max_requests`` apply to what is scheduled from now on.

        What is already scheduled keeps its time: a pending request goes out when it was due and is re-scheduled
        under the new timers after that (or when a peer asks for the same id); a pending answer goes out when it
        was due. The response groups decide, from now on, which received messages are cached and which requests
        are answered; messages cached before stay cached. Nothing on the wire changes, only when this member asks
        and answers. ``enabled``, ``buffer_size`` and ``cache_size`` are fixed when the channel is made (the
        buffers and the cache were filled under them, and other parts read ``enabled``): a ``repair`` that
        changes them raises ValueError. Not persisted: the application says it again after a restore.
        """
        if not isinstance(repair, RepairConfig):
            raise ValueError(f"repair settings must be a RepairConfig, not {type(repair).__name__}")
        now = self.config.repair
        fixed = [n for n in ("enabled", "buffer_size", "cache_size") if getattr(repair, n) != getattr(now, n)]
        if fixed:
            raise ValueError(f"repair settings fixed when the channel was made cannot change: {', '.join(fixed)}")
        self.config = replace(self.config, repair=repair)
        self._repair.reconfigure(repair)

    def drop_peer(self, participant_id: str) -> list[Event]:
        """An application removed ``participant_id`` from the group: it no longer counts toward the possible-ack
        threshold or the peers it is capped by, and its possible acknowledgements are forgotten; own messages the
        remaining peers' filters already acknowledge enough are acknowledged now (the returned ``Acknowledged``
        events, as :meth:`tick`'s). Not persisted: the application says it again after a restore."""
        events: list[Event] = []
        self._out.drop(participant_id, events)
        self._peers_full = len(self._peers) >= self.config.possible_acks_threshold
        return events

    def readmit_peer(self, participant_id: str) -> None:
        """Undo :meth:`drop_peer`: ``participant_id`` (back in the group) counts as a peer again once heard."""
        self._out.dropped.discard(participant_id)

    def give_up(self, message_id: str, now_ms: int) -> list[Event]:
        """Declare a missing message lost now rather than ``lost_after_ms`` after it was noticed: for an
        application that refused a copy of it and knows no acceptable copy will come (content signed by an
        earlier version, say). What waited on it is delivered (``after_lost``); the events are returned as
        :meth:`tick`'s. Nothing happens (``[]``) if the message is not missing here."""
        if message_id not in self._in.missing:
            return []
        events: list[Event] = []
        self._in.declare_lost(message_id, events, now_ms)
        return events

    def set_retrieval_hint(self, message_id: str, hint: bytes | None) -> None:
        """Record the retrieval hint (e.g. the envelope hash) of a logged message."""
        self._clog.set_retrieval_hint(message_id, hint)

    # ----------------------------------------------------------------- receive

    def receive(
        self, data: object, now_ms: int, retrieval_hint: bytes | None = None, *, acks: bool = True
    ) -> list[Event]:
        """Process one received frame. Returns events; never raises for bad input.

        ``acks=False``: the frame's causal history and bloom filter acknowledge nothing (a node passes it for a
        frame rebroadcast by someone other than its sender, whose metadata the sender did not sign)."""
        try:
            pb = parse_pb(data)
        except WireError as exc:
            self._stats["rejected"] += 1
            return [Rejected("malformed", str(exc))]
        return self.receive_parsed(pb, now_ms, retrieval_hint, acks=acks)

    def receive_parsed(
        self,
        pb: sds_pb2.Message | Frame,
        now_ms: int,
        retrieval_hint: bytes | None = None,
        positions: tuple[tuple[int, int], ...] | None = None,
        *,
        acks: bool = True,
    ) -> list[Event]:
        """:meth:`receive` for a frame parsed with :func:`~sdschat.sds.wire.parse_pb` (only read, never modified).

        Simulators broadcasting one frame to many receivers wrap it once in a :class:`Frame` (read once, shared)
        and may pass the bloom ``positions`` of its id (``channel.bloom.positions(id)``, equal for equal bloom
        parameters)."""
        f = pb if isinstance(pb, Frame) else Frame(pb)
        cfg = self.config
        # the frame's own checks are made once per configuration (Frame.static_problem), the Lamport skew here
        if f._vcfg is cfg and f._vchan == self.channel_id:
            problem = f._problem
        else:
            problem = f.static_problem(cfg, self.channel_id)
        if problem is None and f.has_lamport and f.lamport > now_ms + cfg.max_clock_skew_ms:
            problem = self._ahead(f)
        if problem is not None or not f.has_lamport:
            return self._unsequenced(f, problem)
        mid, sender = f.message_id, f.sender_id
        has_content = f.has_content
        if has_content:  # (a frame without content delivers nothing: it calls off no repair work)
            if mid in self._requests:  # cancel before dedup
                self._repair.drop_request(mid)
            if mid in self._responses:
                self._repair.drop_response(mid)
        if sender == self.participant_id:
            self._own_echoes += 1
            return []
        if has_content:
            if mid in self._logged or mid in self._incoming or mid in self._archive:
                self._duplicates += 1
                if cfg.ack_delay_ms is not None and mid not in self._ack_owed:
                    self._sync.owe_ack(mid, sender, now_ms)  # a resend: the sender lacks our acknowledgement
                return []
            self._sync.activity(now_ms)
        elif mid in self._recent_syncs:  # (Syncer.on_sync remembers it)
            self._duplicates += 1
            return []
        self._received += 1
        if not self._peers_full and sender not in self._out.dropped:  # only the count up to the threshold is used
            peers = self._peers
            peers.add(sender)
            self._peers_full = len(peers) >= cfg.possible_acks_threshold
        events: list[Event] = []
        if acks:
            if cfg.ack_delay_ms is not None and self._ack_owed:  # (acks are owed only with a delay)
                self._sync.forget_acked(f.history_ids, sender)
            if self._outgoing:
                self._out.review_acks(f, sender, events)
        if cfg.gap_hints > 0:
            self._hints.on_frame(f, sender, now_ms)
        if f.repair:
            self._repair.on_requests(f, sender, now_ms, events)
        if has_content:
            if cfg.ack_delay_ms is not None:
                self._sync.owe_ack(mid, sender, now_ms)
            self._in.accept(f, mid, sender, f.lamport, now_ms, retrieval_hint, events, positions)
        else:
            self._syncs_received += 1
            self._sync.on_sync(f, mid, sender, now_ms, events)
        return events

    def bloom_decides(self, pb: sds_pb2.Message) -> bool:
        """Whether receiving this frame (parsed, not yet received) would count its bloom filter: as a possible
        acknowledgement, or one for good, of a message of ours that its causal history does not acknowledge
        already. Nothing else in the engine trusts a filter (gap hints only look things up), so a receiver that
        authenticates a frame's filter apart from the rest (sdschat's node: its publisher's frame signature) needs
        to check it only when this is true. Reads the engine's state, changes nothing."""
        if not self._outgoing or not pb.HasField("bloom_filter") or pb.sender_id == self.participant_id:
            return False  # (our own frame back from the broker acknowledges nothing: receive ignores it)
        history = frozenset(e.message_id for e in pb.causal_history)
        return self._out.bloom_would_count(pb.bloom_filter, pb.sender_id, history)

    def _ahead(self, f: Frame) -> tuple[str, str] | None:
        """A frame ahead of ``now_ms`` by more than the skew: rejected if ahead of our clock by as much."""
        if f.lamport > self._clog.lamport + self.config.max_clock_skew_ms:
            return ("lamport_future", f"lamport timestamp {f.lamport} too far ahead")
        return None

    def _unsequenced(self, f: Frame, problem: tuple[str, str] | None) -> list[Event]:
        """A frame that failed a check, or has no Lamport timestamp (ephemeral, or else empty)."""
        stats = self._stats
        if problem is not None:
            stats["rejected"] += 1
            return [Rejected(problem[0], problem[1], f.message_id or None, f.sender_id or None)]
        mid = f.message_id
        sender = f.sender_id
        if not f.has_content:
            stats["rejected"] += 1
            return [Rejected("empty", "frame has neither lamport timestamp nor content", mid, sender)]
        stats["ephemeral_received"] += 1
        return [EphemeralReceived(sender, f.content, mid)] if sender != self.participant_id else []

    # -------------------------------------------------------------------- tick

    def resend_now(self, now_ms: int) -> list[Event]:
        """Rebroadcast every message of the outgoing buffer at once (e.g. after reconnecting)."""
        events: list[Event] = []
        self._out.resend_all(now_ms, events)
        return events

    def tick(self, now_ms: int) -> list[Event]:
        """Do every periodic duty due at ``now_ms``; frames to send come back as ``Outgoing``."""
        events: list[Event] = self._deferred
        self._deferred = []
        self._in.expire(now_ms, events)  # irretrievably lost dependencies, messages that waited too long
        self._out.resend_due(now_ms, events)
        self._repair.serve_due(now_ms, events)
        # due repair requests go out at once in a sync frame; else the periodic sync
        if self._sync.due(now_ms):
            out = self.sync(now_ms)
            if out is not None:
                events.append(out)
                if out.repair_request:
                    events.append(RepairRequested(out.repair_request, out.message_id))
        return events

    # ------------------------------------------------------------ persistence

    def snapshot(self) -> ChannelState:
        """The full state as plain rows (see :mod:`sdschat.sds.state`)."""
        requests, responses, cache = self._repair.rows()
        sync = self._sync
        return ChannelState(
            channel_id=self.channel_id,
            participant_id=self.participant_id,
            lamport_timestamp=self._clog.lamport,
            log=self._clog.entries(),
            log_archive=self._clog.archive.copy() if self._clog.archive.count else None,
            outgoing=self._out.rows(),
            incoming=self._in.rows(),
            missing=list(self._in.missing.values()),
            lost=list(self._in.lost.items()),
            repair_requests=requests,
            repair_responses=responses,
            cache=cache,
            bloom_ids=self._clog.bloom.ids(),
            last_activity=sync.last_activity,
            sync_counter=sync.counter,
            next_sync_at=sync.next_at,
            recent_syncs=list(sync.recent),
            recent_log=list(self._clog.recent),
        )

    @classmethod
    def restore(
        cls, state: ChannelState, config: ChannelConfig | None = None, *, journal: bool = False
    ) -> MessageChannel:
        """Rebuild a channel from :meth:`snapshot` output (or rows loaded from a store)."""
        ch = cls(state.channel_id, state.participant_id, config, state.last_activity)
        ch._clog.lamport = state.lamport_timestamp
        sync = ch._sync
        sync.counter = state.sync_counter
        sync.next_at = state.next_sync_at if state.next_sync_at is not None else sync.due_after(state.last_activity)
        ch._clog.load(state.log, state.recent_log, state.bloom_ids, state.log_archive)
        ch._out.note_peers(ch._clog.iter_entries())
        ch._peers_full = len(ch._peers) >= ch.config.possible_acks_threshold
        ch._out.load(state.outgoing)
        ch._in.load(state.incoming, state.missing, state.lost)
        ch._repair.load(state)
        sync.remember(state.recent_syncs)
        if journal:
            ch.journal = []
        return ch

    def drain_journal(self) -> list[JournalOp]:
        """Return and clear the mutations recorded since the last call (``journal=True``)."""
        if self._journal is None:
            return []
        out = self._journal
        self.journal = []
        return out

    def check_invariants(self) -> list[str]:
        """Internal consistency checks; returns a list of violations (empty when sound)."""
        problems = self._clog.problems() + self._in.problems()
        for mid in self._outgoing:
            if mid not in self._logged and mid not in self._archive:
                problems.append(f"outgoing {mid} not in log")
        return problems
