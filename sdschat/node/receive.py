"""The receive pipeline: a frame from the broker (or the store) through open, verify and the engine, and the
engine's events into persisted rows, published frames and UI events."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Literal

from ..crypto import EnvelopeError, SignatureError, SignedContent, envelope_hash
from ..sds import (
    Acknowledged,
    Delivered,
    EphemeralReceived,
    Event,
    Evicted,
    GapDetected,
    Lost,
    MessageChannel,
    Missing,
    Outgoing,
    PossiblyAcknowledged,
    Rejected,
    RepairRequested,
    RepairScheduled,
    RepairServed,
    SyncReceived,
    WireError,
    wire,
)
from ..store import EventRow, MessageRow, MessageUpdate, ParticipantRow
from . import events as ev
from .actionbook import ActionBook
from .authored import is_unordered, open_authored
from .book import MessageBook, decode_app
from .frame import FrameError, OpenedFrame, open_frame
from .membership import Epoch, redacted_body
from .outbox import Outbound
from .payload import CONTROL_KINDS, AppPayload
from .ports import ReceiverHost
from .presence import KIND as PRESENCE
from .presence import PresenceKeeper
from .roster import Roster
from .storeclient import StoreClient
from .wirelog import frame_of

__all__ = ["Receiver", "Turn", "Outcome", "OutcomeKind"]

#: own messages whose per-member acknowledgements are tracked in memory (older ones: from the database)
SEEN_CAP = 2_000
#: messages whose repair requests by other members are remembered until they arrive (or are lost, or answered),
#: and how many requests each
ASKED_CAP = 1_000
ASKED_EACH = 8
#: frames that do not open with the channel key (anyone who can publish on the topic can send them) are told
#: and recorded at most this often, as one event and one row with their count: a flood of them must not become
#: as many database rows and screen updates (each is still counted, and listed in the wire view, at once)
UNOPENED_EVERY_S = 1.0

log = logging.getLogger("sdschat.node")

#: refusals after which no acceptable copy of a message can come (its dependants stop waiting for it)
_FINAL = frozenset({"removed", "stale_key", "bad_epoch"})
#: the detail of a message the membership refuses (:meth:`~sdschat.node.membership.Membership.refusal`)
_REFUSALS = {
    "removed": "{kind} of {sender}, written after its removal",
    "stale_key": "{kind} of {sender} written under key epoch {claim}, from before a removal, by someone not admitted "
    "since",
    "bad_epoch": "{kind} of {sender} names key epoch {claim} but came under epoch {envelope}",
}


@dataclasses.dataclass
class Turn:
    """What one batch of engine events changes: rows for one write, and where they came from."""

    now: int
    publisher: str | None = None
    reason: str | None = None
    source: str | None = None
    #: the SDS frame that caused these events: its sender (whose causal history and bloom they read) and id
    frame_sender: str | None = None
    frame_id: str | None = None
    messages: list[MessageRow] = dataclasses.field(default_factory=list)
    updates: list[MessageUpdate] = dataclasses.field(default_factory=list)
    rows: list[EventRow] = dataclasses.field(default_factory=list)
    parts: list[ParticipantRow] = dataclasses.field(default_factory=list)
    kv: dict[str, str | None] = dataclasses.field(default_factory=dict)
    #: the key epoch of the envelope the frame came in
    epoch: int | None = None

    def update(self, u: MessageUpdate | None) -> None:
        if u is not None:
            self.updates.append(u)


#: what the engine did with one incoming frame (:class:`Outcome`)
OutcomeKind = Literal["rejected", "buffered", "delivered", "duplicate", "shown", "sync"]


@dataclasses.dataclass(frozen=True, slots=True)
class Outcome:
    """What the engine did with one incoming frame: ``kind``, and the numbers its line in the wire view tells
    (the engine's refusal code, how many dependencies a buffered message waits for, how many waiting messages
    its delivery released, how many of ours it acknowledged)."""

    kind: OutcomeKind
    reason: str = ""
    waits_for: int = 0
    released: int = 0
    acked: int = 0

    def text(self) -> str:
        """A few words: the wire view's last column."""
        if self.kind == "rejected":
            return f"rejected: {self.reason}"
        if self.kind == "buffered":
            return f"buffered: waits for {self.waits_for}"
        out = (
            "delivered" + (f" (+{self.released} released)" if self.released else "")
            if self.kind == "delivered"
            else self.kind
        )
        return out + (f", acked {self.acked} of ours" if self.acked else "")


class Receiver:
    """The receive pipeline of a node. It sees the node through :class:`~.ports.ReceiverHost`, shows messages
    through the message book, hands membership messages and frames from other key epochs to the roster, and
    asks the store-node client for what is missing."""

    def __init__(
        self,
        host: ReceiverHost,
        book: MessageBook,
        roster: Roster,
        store: StoreClient,
        presence: PresenceKeeper | None = None,
        actions: ActionBook | None = None,
    ) -> None:
        self.host = host
        #: edits, deletions and reactions: judged and applied as their messages and targets arrive
        self.actions = actions
        self.book = book
        self.roster = roster
        self.store = store
        #: who is online, away or offline: told of every live frame of another member, and of beats
        self.presence = presence
        #: frames refused as undecryptable, not yet told (see :meth:`flush_unopened`)
        self._unopened = 0
        self._unopened_timer: asyncio.TimerHandle | None = None
        #: own message id -> members seen naming it (the newest SEEN_CAP messages)
        self._seen_by: OrderedDict[str, set[str]] = OrderedDict()
        #: message id -> other members' repair requests seen for it while missing here or ours to answer
        self._asked: OrderedDict[str, list[dict]] = OrderedDict()
        #: participants refused as outsiders (a key from before a removal), told once each
        self._outsiders: set[str] = set()
        self._steps: dict[type, Callable] = {
            Outgoing: self._outgoing,
            Delivered: self._delivered,
            Missing: self._missing,
            GapDetected: self._gap,
            Acknowledged: self._acknowledged,
            PossiblyAcknowledged: self._possibly,
            Lost: self._lost,
            EphemeralReceived: self._ephemeral,
            SyncReceived: self._sync,
            RepairRequested: self._repair_requested,
            RepairServed: self._repair_served,
            Rejected: self._rejected,
            Evicted: self._evicted,
        }

    @property
    def channel(self) -> MessageChannel:
        """The engine (frames reach the receiver only once it is restored)."""
        channel = self.host.channel
        if channel is None:
            raise RuntimeError("a frame reached the receive pipeline before the engine was restored")
        return channel

    # ----------------------------------------------------------------- frames

    def _open(self, payload: bytes, topic: str | None) -> tuple[Epoch, bytes]:
        """``(epoch, plaintext)``: opened with the key of the topic it came on, or (from a store, or a topic whose
        key is gone) with each kept key, the current one first; EnvelopeError if none opens it."""
        members = self.roster.membership
        found = members.key_for_topic(topic) if topic is not None else None
        candidates = [found] if found is not None else members.keys()
        error: EnvelopeError | None = None
        for epoch, key in candidates:
            try:
                return epoch, key.open(payload)
            except EnvelopeError as exc:
                error = exc
        raise error or EnvelopeError("auth")

    def on_frame(self, payload: bytes, source: str | None = None, topic: str | None = None) -> None:
        host, roster = self.host, self.roster
        now = host.now()
        host.count("received_frames")
        try:
            epoch, plain = self._open(payload, topic if source is None else None)
        except EnvelopeError as exc:
            self.reject("undecryptable", exc.reason, now, size=len(payload), source=source)
            return
        checked: SignedContent | None = None
        try:
            opened = open_frame(plain)
            reason = opened.reason
            # the publisher's signature first, as ever, unless the frame may be its author's own message, whose
            # content signature can stand for it (_by_its_author)
            publisher = None if opened.by_its_author() else opened.verify(host.key.channel_binding)
            pb = wire.parse_pb(opened.sds_frame)  # parsed once: read here, handed to the engine as it is
            msg = wire.from_pb(pb)
            if publisher is None:
                publisher, checked = self._by_its_author(opened, pb, msg)
        except FrameError as exc:
            self.reject(exc.reason, str(exc)[:120], now, size=len(payload), source=source)
            return
        except WireError as exc:
            self.reject("malformed", str(exc)[:120], now, size=len(payload), source=source)
            return
        members = roster.membership
        if epoch.number < members.current.number and source is None and publisher != host.participant_id:
            if members.entitled(publisher, epoch.number):
                # a member still on an older key: hand it the later epoch messages and the admin messages since
                roster.help_straggler(epoch.number, now, publisher)
            else:
                # a removed member, or a newcomer with a key from before a removal: the epoch messages after its
                # key (sealed under that key already; their boxes open for members only) tell it it is out
                roster.tell_outsider(publisher, epoch.number, now)
        refused = members.refusal(publisher, epoch.number, epoch.number)
        if refused is not None:
            # the publisher is held to the rule its content is (Membership.refusal): a removed member still holds
            # the keys it had, and someone with a key from before a removal was not admitted since, so nothing it
            # publishes counts (its syncs' filters acknowledge nothing, their repair requests are not answered)
            self.reject(
                refused,
                f"frame published by {publisher[:8]} under key epoch {epoch.number}: "
                + (
                    "removed from the channel"
                    if refused == "removed"
                    else "a key from before a removal, and not admitted since"
                ),
                now,
                size=len(payload),
                source=source,
                msg=msg,
                publisher=publisher,
                frame_reason=reason,
            )
            if refused == "stale_key":
                self._outsider_seen(publisher, epoch.number)
            return
        relayed = msg.sender_id != publisher
        if relayed and (reason != "repair" or msg.content is None or msg.lamport_timestamp is None):
            # only a repair answer rebroadcasts someone else's frame, and only a message: anything else published
            # under another member's id (a sync acknowledging for them, say) is a forgery
            self.reject(
                "impersonation",
                f"frame of {msg.sender_id[:8]} published by {publisher[:8]}",
                now,
                size=len(payload),
                source=source,
                msg=msg,
                publisher=publisher,
                frame_reason=reason,
            )
            return
        content = msg.content
        bad = None
        if content:
            bad = self._refusal(msg, now, len(payload), publisher, reason, source, epoch.number, checked)
        if bad is not None:
            unordered = content is not None and is_unordered(content)
            if msg.message_id in self.channel.missing_ids and (bad in _FINAL or unordered):
                # history from an earlier sdschat (an imported 0.1 channel: its ordering is not signed, so it is
                # never shown), or a message the membership refuses: no acceptable copy will come, so stop
                # waiting for it (the messages that name it are delivered after it, marked lost) instead of
                # holding them back until lost_after_ms
                turn = Turn(now, publisher, reason, source, msg.sender_id, msg.message_id, epoch=epoch.number)
                self.handle(self.channel.give_up(msg.message_id, now), turn)
                host.wake()
            return
        if (reason in ("resend", "repair") or msg.repair_request) and source is None:
            host.peer_worked(now)
        if publisher != host.participant_id and not members.joined:
            roster.want_join()  # someone else is here: time to announce ourselves
        channel = self.channel
        asking, answering = channel.repair_pending(msg.message_id)
        # a rebroadcast's causal history and bloom filter are not signed by their sender: they acknowledge nothing
        events = channel.receive_parsed(pb, now, retrieval_hint=envelope_hash(payload), acks=not relayed)
        seen = self._acks_seen(msg, now) if msg.causal_history and not relayed else None
        outcome = _outcome(msg, events)
        host.wire.add(
            frame_of(
                now,
                "in",
                reason,
                source,
                msg,
                publisher,
                len(payload),
                outcome.text(),
                outcome.reason if outcome.kind == "rejected" else None,
            )
        )
        turn = Turn(now, publisher, reason, source, msg.sender_id, msg.message_id, epoch=epoch.number)
        if self.presence is not None and source is None and publisher != host.participant_id:
            self.presence.heard(publisher, now, epoch.number)  # any live frame says its publisher is here
        if seen:
            turn.rows.extend(seen)
        if asking or answering:
            turn.rows.extend(self._cancelled(msg, asking, answering, turn))
        if (
            msg.repair_request
            and source is None
            and not relayed
            and publisher != host.participant_id
            and msg.lamport_timestamp is not None
            and outcome.kind not in ("duplicate", "rejected")
        ):
            self._requests_seen(msg, events, now)
        if outcome.kind == "duplicate" and source is None and publisher != host.participant_id:
            turn.rows.append(
                EventRow(
                    "duplicate",
                    now,
                    msg.message_id,
                    msg.sender_id,
                    lamport_timestamp=msg.lamport_timestamp,
                    detail={"via": reason, "publisher": publisher},
                )
            )
        self.handle(events, turn)
        if epoch is members.current and publisher != host.participant_id and source is None:
            roster.heard_current(publisher, now)  # (an admin's grants wait for this: Roster.grant_when_current)
        host.wake()

    def _cancelled(self, msg, asking: bool, answering: bool, t: Turn) -> list[EventRow]:
        """Rows ``repair_cancelled`` for our repair request or answer for this frame's message that its arrival
        called off (someone answered first, or the author resent it)."""
        still_asking, still_answering = self.channel.repair_pending(msg.message_id)
        rows = []
        for what, before, after in (("request", asking, still_asking), ("answer", answering, still_answering)):
            if before and not after:
                detail: dict | None = {"what": what, "via": _via(t), "publisher": t.publisher}
                if what == "answer":  # who asked for the answer called off
                    detail = self._asked_detail(msg.message_id, detail)
                rows.append(EventRow("repair_cancelled", t.now, msg.message_id, msg.sender_id, detail=detail))
        return rows

    def _requests_seen(self, msg, events, now: int) -> None:
        """Remember the SDS-R requests of another member's frame the engine acted on, for the messages missing
        here or that we are to answer: who asked, in which frame, when, whether our own request backed off and
        when we answer (T_resp). They go into the ``asked`` detail of the row that ends the story here (the first
        copy's ``received``, ``lost``, our ``repair_served``): see :meth:`_asked_detail`."""
        channel, shown, asked = self.channel, self.book.messages, self._asked
        answers = {e.message_id: e.t_resp for e in events if type(e) is RepairScheduled}
        for h in msg.repair_request:
            mid = h.message_id
            if mid not in answers and (mid in channel or mid in shown):
                continue  # here already, and not ours to answer: nothing will tell of it
            seen = {"ts": now, "by": msg.sender_id, "frame": msg.message_id}
            if channel.repair_pending(mid)[0]:
                seen["asking"] = True  # our own request for it: backed off afresh (and kept)
            if mid in answers:
                seen["answer_ms"] = answers[mid]
            entries = asked.get(mid)
            if entries is None:
                entries = asked[mid] = []
                if len(asked) > ASKED_CAP:
                    asked.popitem(last=False)
            if len(entries) < ASKED_EACH:
                entries.append(seen)

    def _asked_detail(self, mid: str, detail: dict | None) -> dict | None:
        """``detail`` with the repair requests of other members remembered for ``mid`` (``asked``), if any."""
        asked = self._asked.pop(mid, None)
        return {**(detail or {}), "asked": asked} if asked else detail

    def _acks_seen(self, msg, now: int) -> list[EventRow]:
        """Rows ``ack_seen`` for our messages this member's frame names in its causal history, the first time
        each member names each one: who has acknowledged what, per member, for the inspector."""
        me = self.host.participant_id
        sender = msg.sender_id
        if sender == me or not sender:
            return []
        book, seen, out = self.book.messages, self._seen_by, []
        for h in msg.causal_history:
            chat = book.get(h.message_id)
            if chat is None or not chat.own:
                continue
            members = seen.get(h.message_id)
            if members is None:
                members = seen[h.message_id] = set()
                if len(seen) > SEEN_CAP:
                    seen.popitem(last=False)
            if sender not in members:
                members.add(sender)
                out.append(EventRow("ack_seen", now, h.message_id, me, detail={"by": sender, "frame": msg.message_id}))
        return out

    def _by_its_author(self, opened: OpenedFrame, pb, msg) -> tuple[str, SignedContent | None]:
        """The publisher of a frame that says it carries its publisher's own new message
        (:meth:`~.frame.OpenedFrame.by_its_author`), and its content once checked (None: not checked here).

        The author's content signature covers all of such a frame but its publish reason, bloom filter and repair
        requests (sdschat.node.authored): the frame signature, by the same key, adds only those. So when the
        content verifies as its ``sender_id``'s, under the key the frame names, the frame's publisher is known,
        and the frame signature is checked only if one of those three would count for something: repair
        requests (the node records who asked), or a bloom filter that acknowledges one of our messages its
        causal history does not (:meth:`~sdschat.sds.MessageChannel.bloom_decides`). Otherwise the frame is
        taken as what its author's signature makes it: a message with a filter that decides nothing, and the
        reason ``message``, whose only use is how the inspector names the frame. That saves one Ed25519 check
        of the two a received message costs. Anything else (a content that does not verify, a frame with
        repair requests, a filter that counts) has its frame signature checked as every other frame has."""
        binding = self.host.key.channel_binding
        checked = None
        if msg.content is not None and msg.lamport_timestamp is not None and not msg.repair_request:
            try:
                checked = open_authored(msg, binding)
            except SignatureError:
                checked = None  # (refused below with its reason, once the frame's own signature is checked)
            if checked is not None and checked.participant_id == msg.sender_id and not self.channel.bloom_decides(pb):
                self.host.count("frames_on_content_signature")
                return checked.participant_id, checked
        return opened.verify(binding), checked

    def _refusal(
        self,
        msg,
        now: int,
        size: int,
        publisher: str,
        reason: str,
        source: str | None,
        envelope_epoch: int,
        checked: SignedContent | None = None,
    ) -> ev.RejectReason | None:
        """Why a frame's content is refused (None: accepted). Content must be its id's preimage, signed by its
        ``sender_id`` over it and the frame's Lamport time and causal history (sdschat.node.authored), a readable
        payload, and written by a member under a key the membership admits
        (:meth:`~sdschat.node.membership.Membership.refusal`). ``checked``: the content, already verified."""
        seen = dict(size=size, source=source, msg=msg, publisher=publisher, frame_reason=reason)
        if msg.message_id != hashlib.sha256(msg.content).hexdigest():
            # ids are content hashes: another id for the same signed content would be a replay
            self.reject("bad_message_id", "message id is not the hash of its content", now, **seen)
            return "bad_message_id"
        try:
            signed = checked if checked is not None else open_authored(msg, self.host.key.channel_binding)
        except SignatureError as exc:
            if is_unordered(msg.content):
                self.reject(
                    "unsigned_ordering",
                    "content signed without its Lamport time and history (an earlier sdschat)",
                    now,
                    **seen,
                )
                return "unsigned_ordering"
            self.reject(
                "bad_signature",
                "the author's signature does not cover this content, Lamport time and causal history"
                if exc.reason == "invalid"
                else exc.reason,
                now,
                **seen,
            )
            return "bad_signature"
        if signed.participant_id != msg.sender_id:
            self.reject(
                "impersonation",
                f"content signed by {signed.participant_id[:8]}, sent as {msg.sender_id[:8]}",
                now,
                **seen,
            )
            return "impersonation"
        app = decode_app(signed.message)
        if app is None:
            self.reject("bad_payload", "unreadable application payload", now, **seen)
            return "bad_payload"
        refused = self.roster.membership.refusal(
            msg.sender_id, app.epoch, envelope_epoch, direct=publisher == msg.sender_id, kind=app.kind
        )
        if refused is not None:
            self.reject(
                refused,
                _REFUSALS[refused].format(
                    sender=msg.sender_id[:8], claim=app.epoch, envelope=envelope_epoch, kind=app.kind
                ),
                now,
                **seen,
            )
            if refused == "stale_key":
                self._outsider_seen(msg.sender_id, app.epoch)
            return refused
        if msg.message_id:
            self.book.remember_app(msg.message_id, app, signed.message)
            if app.kind in ("epoch", "admin") and msg.lamport_timestamp is not None:
                self.roster.keep_frame(msg.message_id, wire.encode(msg))  # for members still on an older key
        return None

    def _outsider_seen(self, pid: str, epoch: int) -> None:
        """Tell (once per participant and run) that someone holding only a key from before a removal, and not
        admitted since, tried to take part: an invite made before a kick, or re-made by a removed member."""
        if pid not in self._outsiders:
            self._outsiders.add(pid)
            self.host.emit(ev.MembershipChanged("refused", pid, (), epoch, False))

    def reject(
        self,
        reason: ev.RejectReason,
        detail: str,
        now: int,
        *,
        size: int = 0,
        source: str | None = None,
        msg=None,
        publisher: str | None = None,
        frame_reason: str | None = None,
    ) -> None:
        host = self.host
        if size:  # a frame from the broker or the store, refused before the engine saw it
            host.wire.add(
                frame_of(now, "in", frame_reason, source, msg, publisher, size, f"rejected: {reason}", reason)
            )
        host.count("rejected" if reason != "undecryptable" else "undecryptable")
        if reason == "impersonation":
            host.count("impersonation")
        if reason == "undecryptable":  # anyone on the broker can send these: told once a second, with a count
            self._unopened += 1
            if self._unopened_timer is None:
                try:
                    loop = asyncio.get_running_loop()
                except RuntimeError:  # no loop (a synchronous caller): tell it now
                    self.flush_unopened()
                    return
                self._unopened_timer = loop.call_later(UNOPENED_EVERY_S, self.flush_unopened)
            return
        host.emit(ev.FrameRejected(reason, detail))
        host.persist(now, events=[EventRow("rejected", now, detail={"reason": reason})])

    def flush_unopened(self) -> None:
        """Tell and record the frames refused as undecryptable since the last time: one event, one row."""
        if self._unopened_timer is not None:
            self._unopened_timer.cancel()
            self._unopened_timer = None
        n, self._unopened = self._unopened, 0
        if n:
            host = self.host
            now = host.now()
            host.emit(ev.FrameRejected("undecryptable", f"{n} frame(s) that do not open with the channel key"))
            host.persist(now, events=[EventRow("rejected", now, detail={"reason": "undecryptable", "count": n})])

    # ----------------------------------------------------------------- events

    def handle(self, events: Iterable[Event], turn: Turn) -> None:
        steps = self._steps
        for e in events:
            step = steps.get(type(e))
            if step is not None:
                step(e, turn)
        self.host.persist(
            turn.now,
            messages=turn.messages,
            updates=turn.updates,
            events=turn.rows,
            participants=turn.parts,
            kv=turn.kv,
        )
        if turn.messages:
            self.book.trim()

    def _outgoing(self, e: Outgoing, t: Turn) -> None:
        host, book = self.host, self.book
        if e.reason == "resend" and not self._anyone_here(t.now):
            host.count("resends_held")  # (the engine keeps its timers: the next one goes once someone is here)
            return
        host.enqueue(Outbound(e.data, e.reason, e.message_id if e.reason in ("message", "resend", "repair") else None))
        pid = host.participant_id
        if e.reason == "resend":
            chat = book.messages.get(e.message_id)
            n = (chat.resends + 1) if chat else 1
            t.update(book.set_state(e.message_id, ev.RESENDING, t.now, resends=n))
            # the reason: possibly acknowledged by how many members' bloom filters (0: not acknowledged at all)
            t.rows.append(
                EventRow(
                    "resent",
                    t.now,
                    e.message_id,
                    pid,
                    lamport_timestamp=e.lamport_timestamp,
                    detail={"resends": n, "possibly": self.channel.possible_ack_count(e.message_id)},
                )
            )
        elif e.reason == "sync":
            t.rows.append(EventRow("sync_sent", t.now, e.message_id, pid, lamport_timestamp=e.lamport_timestamp))

    def _anyone_here(self, now: int) -> bool:
        """Whether a resend can reach a member: another member is heard and not shown offline (always true
        without presence).

        A decision beyond the RFC, which resends an unacknowledged message for as long as it stays so. While
        every other member is away, a resend (every ``resend_max_interval_ms``, 10 s, for each unacknowledged
        message) reaches nobody but the broker's kept sessions, whose queues have a cap (mosquitto's
        ``max_queued_messages``) that the messages written after it would then fall past. So a resend waits
        while nobody is here; the engine's timers run on, and the next one goes out within
        ``resend_max_interval_ms`` of any member being heard again (a member that starts asks the others for
        their presence at once). The member that comes back has the message meanwhile from its kept session, a
        store node, or the repair our next sync's causal history leads it to."""
        presence = self.presence
        if presence is None:
            return True
        gone = self.roster.membership.gone
        return any(pid not in gone for pid in presence.others_here(now))

    def _control(self, e: Delivered | Missing, app: AppPayload, body: bytes, t: Turn, waiting: bool = False) -> bytes:
        """A membership message is applied the first time the engine hands it over (shown waiting, or delivered:
        a new key must not wait for an old gap); returns the body the database keeps (without key boxes). One
        refused while waiting (its author made an admin by a message it waits for, say) is applied again when it
        is delivered."""
        if app.kind not in CONTROL_KINDS:
            return body
        kv = self.roster.apply(e.message_id, e.sender_id, app, t.now, via_epoch=t.epoch, waiting=waiting)
        if kv:
            t.kv.update(kv)
        return redacted_body(body)

    def _acted(self, chat: ev.ChatMessage, app: AppPayload, body: bytes) -> tuple[ev.ChatMessage, bytes]:
        """A message shown for the first time, as the message actions make it (an edit, deletion or reaction
        judged; a message with actions waiting for it, those applied), and the content the database keeps of it
        (without its text once deleted): sdschat.node.actionbook."""
        actions = self.actions
        if actions is None:
            return chat, body
        if app.kind in ev.MESSAGE_ACTION_KINDS:
            return actions.took(chat, app, body)
        chat = actions.arrived(chat)
        return chat, actions.content_for(chat.message_id, app, body)

    def _repaired_via(self, t: Turn) -> tuple[str, str | None]:
        if t.source == "store":
            self.store.count("repaired")
            return "store", None
        via = {"repair": "sds-r", "resend": "resend"}.get(t.reason or "", "late")
        return via, (t.publisher if via == "sds-r" else None)

    def _delivered(self, e: Delivered, t: Turn) -> None:
        book, host = self.book, self.host
        app, body = book.app_of(e.message_id, e.content)
        if app is None:
            return
        prior = book.messages.get(e.message_id)
        chat = book.chat(e.message_id, e.sender_id, app, e.lamport_timestamp, ev.RECEIVED, t.now, repaired=e.repaired)
        if t.source == "store":
            self.store.count("delivered")
        via: str | None = None
        by: str | None = None
        if e.repaired:
            via, by = self._repaired_via(t)
            chat = dataclasses.replace(chat, repaired_by=by)
        if prior is None:
            chat, stored = self._acted(chat, app, body)
            book.show(chat)
            host.emit(ev.MessageShown(chat))
            t.messages.append(
                MessageRow(
                    e.message_id,
                    e.sender_id,
                    e.lamport_timestamp,
                    self._control(e, app, stored, t),
                    ev.RECEIVED,
                    repaired=e.repaired,
                    after_lost=e.after_lost,
                    received_at_ms=t.now,
                )
            )
            t.rows.append(
                EventRow(
                    "received",
                    t.now,
                    e.message_id,
                    e.sender_id,
                    lamport_timestamp=e.lamport_timestamp,
                    detail=self._asked_detail(e.message_id, _arrival(t, e.sender_id)),
                )
            )
        else:
            book.show(dataclasses.replace(prior, state=ev.RECEIVED))
            if self.roster.take_deferred(e.message_id):
                self._control(e, app, body, t)
            host.emit(ev.GapClosed(e.message_id, tuple(e.after_lost)))
            t.updates.append(MessageUpdate(e.message_id, state=ev.RECEIVED, after_lost=tuple(e.after_lost)))
        if app.kind == "topic":  # the channel's topic, if it is the latest admitted one in log order
            t.kv.update(book.topic_seen(e.message_id, e.sender_id, app, e.lamport_timestamp))
        if via is not None:  # (set for a repaired message)
            host.emit(ev.MessageRepaired(e.message_id, via, by))
        detail = (
            {
                "repaired": e.repaired,
                "via": t.source or t.reason,
                "publisher": t.publisher,
                "after_lost": list(e.after_lost),
            }
            if (e.repaired or e.after_lost)
            else None
        )
        t.rows.append(
            EventRow(
                "delivered", t.now, e.message_id, e.sender_id, lamport_timestamp=e.lamport_timestamp, detail=detail
            )
        )
        book.seen(e.sender_id, app.nick, t.now, t.parts)

    def _missing(self, e: Missing, t: Turn) -> None:
        host, book = self.host, self.book
        app, body = book.app_of(e.message_id, e.content)
        if app is None:
            return
        chat = book.chat(e.message_id, e.sender_id, app, e.lamport_timestamp, ev.WAITING, t.now, repaired=False)
        chat, stored = self._acted(chat, app, body)
        book.show(chat)
        host.emit(ev.MessageShown(chat))
        missing_ids = tuple(h.message_id for h in e.missing)
        senders = tuple(sorted({h.sender_id for h in e.missing if h.sender_id}))
        if missing_ids or e.waiting_on:
            host.emit(ev.GapOpened(e.message_id, missing_ids + tuple(e.waiting_on), senders))
        t.messages.append(
            MessageRow(
                e.message_id,
                e.sender_id,
                e.lamport_timestamp,
                self._control(e, app, stored, t, waiting=True),
                ev.WAITING,
                received_at_ms=t.now,
            )
        )
        t.rows.append(
            EventRow(
                "received",
                t.now,
                e.message_id,
                e.sender_id,
                lamport_timestamp=e.lamport_timestamp,
                detail=self._asked_detail(e.message_id, _arrival(t, e.sender_id)),
            )
        )
        t.rows.append(
            EventRow(
                "missing",
                t.now,
                e.message_id,
                e.sender_id,
                lamport_timestamp=e.lamport_timestamp,
                detail={"missing": list(missing_ids), "waiting_on": list(e.waiting_on), **_hints(e.missing)},
            )
        )
        self.store.want(e.missing)
        book.seen(e.sender_id, app.nick, t.now, t.parts)

    def _gap(self, e: GapDetected, t: Turn) -> None:
        ids = tuple(h.message_id for h in e.missing)
        self.host.emit(ev.GapOpened("", ids, tuple(sorted({h.sender_id for h in e.missing if h.sender_id}))))
        t.rows.append(
            EventRow(
                "missing",
                t.now,
                None,
                e.sender_id,
                detail={"missing": list(ids), "source": "sync", **_hints(e.missing)},
            )
        )
        self.store.want(e.missing)

    def _acknowledged(self, e: Acknowledged, t: Turn) -> None:
        t.update(self.book.set_state(e.message_id, ev.ACKNOWLEDGED, t.now))
        t.rows.append(
            EventRow(
                "acked",
                t.now,
                e.message_id,
                self.host.participant_id,
                detail={"by_bloom": e.by_bloom, "by": t.frame_sender, "frame": t.frame_id, "via": _via(t)},
            )
        )

    def _possibly(self, e: PossiblyAcknowledged, t: Turn) -> None:
        t.update(self.book.set_state(e.message_id, ev.POSSIBLY_ACKNOWLEDGED, t.now, acks=e.count))
        t.rows.append(
            EventRow(
                "possibly_acked",
                t.now,
                e.message_id,
                self.host.participant_id,
                detail={"count": e.count, "by": t.frame_sender},
            )
        )

    def _lost(self, e: Lost, t: Turn) -> None:
        self.host.emit(ev.MessageLost(e.message_id, e.sender_id, tuple(e.dependants)))
        if self.actions is not None:
            self.actions.lost(e.message_id)
        t.rows.append(
            EventRow(
                "lost",
                t.now,
                e.message_id,
                e.sender_id,
                detail=self._asked_detail(e.message_id, {"dependants": list(e.dependants)}),
            )
        )

    def _ephemeral(self, e: EphemeralReceived, t: Turn) -> None:
        app, _ = self.book.app_of("", e.content)
        if app is not None and app.kind == "hello":
            self.roster.greet(e.sender_id, t.now)
        if app is not None and app.kind == "typing":
            self.host.emit(ev.TypingSeen(e.sender_id, app.nick))
            self.book.seen(e.sender_id, app.nick, t.now, t.parts)
        if app is not None and app.kind == PRESENCE and self.presence is not None and t.source is None:
            self.presence.beat(e.sender_id, app, t.now, t.epoch)  # memory only: no row, no participant write

    def _sync(self, e: SyncReceived, t: Turn) -> None:
        self.book.seen(e.sender_id, None, t.now, t.parts)
        t.rows.append(
            EventRow("sync_received", t.now, e.message_id, e.sender_id, lamport_timestamp=e.lamport_timestamp)
        )

    def _repair_requested(self, e: RepairRequested, t: Turn) -> None:
        for mid in e.message_ids:
            t.rows.append(EventRow("repair_requested", t.now, mid, None, detail={"carrier": e.carrier_id}))

    def _repair_served(self, e: RepairServed, t: Turn) -> None:
        t.rows.append(
            EventRow("repair_served", t.now, e.message_id, e.sender_id, detail=self._asked_detail(e.message_id, None))
        )

    def _rejected(self, e: Rejected, t: Turn) -> None:
        self.host.count("rejected")
        self.host.emit(ev.FrameRejected(e.reason, e.detail))
        t.rows.append(EventRow("rejected", t.now, e.message_id, e.sender_id, detail={"reason": e.reason}))

    def _evicted(self, e: Evicted, t: Turn) -> None:
        log.info("evicted %s from %s", e.message_id, e.buffer)


def _hints(entries) -> dict:
    """``{"hints": {id: hint hex}}`` for the missing entries that carry a retrieval hint (none: ``{}``)."""
    hints = {h.message_id: h.retrieval_hint.hex() for h in entries if h.retrieval_hint}
    return {"hints": hints} if hints else {}


def _via(t: Turn) -> str | None:
    """How the frame behind a turn came: ``store`` (a store node's answer) or its publish reason (``message``,
    ``resend``, ``repair``, ``sync``)."""
    return "store" if t.source == "store" else t.reason


def _arrival(t: Turn, sender: str) -> dict | None:
    """A received row's detail when the first copy did not come straight from its author: how, and who
    published it (None for the common case, to keep the row small)."""
    via = _via(t)
    if via == "message" and t.publisher in (None, sender):
        return None
    return {"via": via, "publisher": t.publisher}


def _outcome(msg, events: list[Event]) -> Outcome:
    """What the engine did with one incoming frame."""
    delivered = acked = 0
    for e in events:
        if isinstance(e, Rejected):
            return Outcome("rejected", reason=e.reason)
        if isinstance(e, Missing) and e.message_id == msg.message_id:
            return Outcome("buffered", waits_for=len(e.missing) + len(e.waiting_on))
        if isinstance(e, Delivered):
            delivered += 1
        elif isinstance(e, Acknowledged):
            acked += 1
    kind: OutcomeKind
    if msg.content is not None and msg.lamport_timestamp is not None:
        kind = "delivered" if delivered else "duplicate"
    elif msg.content is not None:
        kind = "shown"  # ephemeral: typing notices
    else:
        kind = "sync"
    return Outcome(kind, released=max(0, delivered - 1), acked=acked)
