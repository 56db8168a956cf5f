"""UI-level events a :class:`~sdschat.node.node.Node` publishes to its subscribers.

They are what a screen needs, derived from engine events plus the decrypted,
verified application payloads: a message to show (at once, even with missing
dependencies), its acknowledgement state as it changes, gap markers opening
and closing, repairs, losses, participants, the connection and counters.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "ChatMessage",
    "NodeEvent",
    "MessageShown",
    "AckStateChanged",
    "GapOpened",
    "GapClosed",
    "MessageRepaired",
    "MessageLost",
    "ParticipantSeen",
    "TypingSeen",
    "ConnectionChanged",
    "CountersChanged",
    "FrameRejected",
    "NodeProblem",
    "ProblemKind",
    "RejectReason",
    "Refusal",
    "MembershipChanged",
    "NickClash",
    "ACTION_KINDS",
    "MEMBERSHIP_KINDS",
    "KNOWN_KINDS",
    "NEWER_MARK",
    "Topic",
    "TopicChanged",
    "PresenceChanged",
    "EPHEMERAL_KINDS",
    "MESSAGE_ACTION_KINDS",
    "QUIET_KINDS",
    "MessageChanged",
    "PENDING",
    "APPLIED",
    "REFUSED",
    "LOST",
]

#: why the node itself refuses a frame or a message (``FrameRejected.reason``; the engine adds codes of its own,
#: ``malformed``, ``empty``, ``lamport_future``, ...): it does not open with a key we hold, it is not a node frame
#: (``malformed``, ``unsigned``: from an earlier sdschat), its signature or id does not hold, it is published or
#: signed under someone else's id, its payload does not read, or the membership refuses it
RejectReason = Literal[
    "undecryptable",
    "malformed",
    "unsigned",
    "bad_signature",
    "impersonation",
    "bad_message_id",
    "unsigned_ordering",
    "bad_payload",
    "bad_control",
    "removed",
    "stale_key",
    "bad_epoch",
    "bad_action",
]
#: why the membership refuses a member's frame or message (:meth:`~sdschat.node.membership.Membership.refusal`)
Refusal = Literal["removed", "stale_key", "bad_epoch"]
#: what kind of trouble the node itself is in (:class:`NodeProblem`)
ProblemKind = Literal["storage", "internal"]

#: message kinds that change the channel's members or keys: shown, but not news (no unread count, no mention)
MEMBERSHIP_KINDS = frozenset({"join", "admin", "epoch", "leave", "nick"})
#: messages that act on another message, named in their data (``d["t"]``): an edit (its author only), a deletion
#: (its author or an admin) and a reaction (toggled): sdschat.node.actions
MESSAGE_ACTION_KINDS = frozenset({"edit", "delete", "react"})
#: kinds that are no news, left out of unread counts: membership changes and the message actions
QUIET_KINDS = MEMBERSHIP_KINDS | MESSAGE_ACTION_KINDS
#: message kinds shown as an action line ("* alice ..."): /me, membership changes, and an edit, deletion or reaction
#: when it is shown as a line of its own (waiting for its message, lost with it, or refused)
ACTION_KINDS = frozenset({"me", "topic"}) | MEMBERSHIP_KINDS | MESSAGE_ACTION_KINDS
#: the payload kinds this version understands (sdschat.node.payload ``KINDS``); a message of another well-formed kind
#: comes from a newer sdschat: it is shown as its fallback ``text``, marked with :data:`NEWER_MARK`
KNOWN_KINDS = (
    "msg",
    "me",
    "typing",
    "hello",
    "join",
    "admin",
    "epoch",
    "leave",
    "nick",
    "topic",
    "presence",
    "edit",
    "delete",
    "react",
)
#: kinds that only ever travel in ephemeral frames (never stored, never repaired): notices, not messages
EPHEMERAL_KINDS = frozenset({"typing", "hello", "presence"})
#: what follows the author's name in the line of a message of a kind this version does not know
NEWER_MARK = "(newer sdschat):"

# states of a message, as the UI shows them
SENDING = "sending"  # own, durable, not yet published
UNACKNOWLEDGED = "unacknowledged"
POSSIBLY_ACKNOWLEDGED = "possibly_acknowledged"
ACKNOWLEDGED = "acknowledged"
RESENDING = "resending"
RECEIVED = "received"  # someone else's, delivered
WAITING = "waiting"  # someone else's, shown, dependencies missing

# what became of an edit, deletion or reaction (``ChatMessage.action_state``; sdschat.node.actions)
PENDING = "pending"  # its message has not arrived (missing, or not received yet): shown as a line of its own
APPLIED = "applied"  # shown on its message (the line of its own goes)
REFUSED = "refused"  # against the channel's rules (an edit by someone else, say): never applied
LOST = "lost"  # its message was declared irretrievably lost


@dataclass(frozen=True, slots=True)
class ChatMessage:
    message_id: str
    sender_id: str
    nick: str
    text: str
    kind: str
    sent_at_ms: int
    lamport_timestamp: int
    own: bool
    state: str
    possible_acks: int = 0
    resends: int = 0
    repaired: bool = False
    repaired_by: str | None = None
    received_at_ms: int = 0
    #: the message this one answers (a reply), or None
    reply_to: str | None = None
    #: whether an edit changed ``text`` (the latest edit's in log order: ``Node.edit_history`` has each version)
    edited: bool = False
    #: when the latest edit was written (its author's clock; 0: never edited)
    edited_at_ms: int = 0
    #: who deleted the message (its author, or an admin: then ``text`` names them); None while not deleted
    deleted_by: str | None = None
    #: emoji -> participant ids who reacted with it, in first-reaction order
    reactions: tuple[tuple[str, tuple[str, ...]], ...] = ()
    #: an edit, deletion or reaction (MESSAGE_ACTION_KINDS): the message it acts on, and what became of it
    #: (PENDING, APPLIED, REFUSED, LOST); None for any other message
    target: str | None = None
    action_state: str | None = None

    @property
    def newer(self) -> bool:
        """Whether the message is of a kind from a newer sdschat (its ``text`` is the author's fallback line)."""
        return self.kind not in KNOWN_KINDS

    @property
    def deleted(self) -> bool:
        return self.deleted_by is not None

    @property
    def hidden(self) -> bool:
        """Whether a view leaves the message out: an edit, deletion or reaction shown on its message (a pending,
        refused or lost one is a line of its own)."""
        return self.kind in MESSAGE_ACTION_KINDS and self.action_state == APPLIED

    @property
    def line(self) -> str:
        """The message as one line of plain text: ``* alice waves``, ``<bob> hi``, or for a kind from a newer
        sdschat ``* alice (newer sdschat): set the topic to "release Friday"``; an edit waiting for its message
        ``* bob edited a message: "hi" (its message possibly missing: waiting for it)``."""
        if self.newer:
            return f"* {self.nick} {NEWER_MARK} {self.text}"
        if self.kind in MESSAGE_ACTION_KINDS:
            return f"* {self.nick} {self.text}{_ACTION_NOTES.get(self.action_state or '', '')}"
        return f"* {self.nick} {self.text}" if self.kind in ACTION_KINDS else f"<{self.nick}> {self.text}"

    @property
    def log_key(self) -> tuple[int, str]:
        """Where the message sits in the local log: ``(lamport_timestamp, message_id)`` order."""
        return (self.lamport_timestamp, self.message_id)


#: what follows the line of an edit, deletion or reaction shown as a line of its own, by its state
_ACTION_NOTES = {
    PENDING: " (its message possibly missing: waiting for it)",
    LOST: " (its message was lost)",
    REFUSED: " (refused: against the channel's rules)",
}


@dataclass(frozen=True, slots=True)
class Topic:
    """The channel's topic: the text of the admitted ``topic`` message latest in log order ("" once cleared)."""

    text: str
    message_id: str
    sender_id: str
    nick: str
    set_at_ms: int
    lamport_timestamp: int

    @property
    def log_key(self) -> tuple[int, str]:
        return (self.lamport_timestamp, self.message_id)


@dataclass(frozen=True, slots=True)
class NodeEvent:
    pass


@dataclass(frozen=True, slots=True)
class TopicChanged(NodeEvent):
    """The channel's topic changed (``topic.text`` "": cleared)."""

    topic: Topic


@dataclass(frozen=True, slots=True)
class MessageShown(NodeEvent):
    message: ChatMessage


@dataclass(frozen=True, slots=True)
class MessageChanged(NodeEvent):
    """A message shown before changed otherwise than its acknowledgement state: edited, deleted, its reactions, or
    (an edit, deletion or reaction) its ``action_state``. ``message`` is its new state: repaint its line (or hide
    it: :attr:`ChatMessage.hidden`)."""

    message: ChatMessage


@dataclass(frozen=True, slots=True)
class AckStateChanged(NodeEvent):
    message_id: str
    state: str
    possible_acks: int = 0
    resends: int = 0


@dataclass(frozen=True, slots=True)
class GapOpened(NodeEvent):
    """``message_id`` arrived but ``missing`` (ids, with senders when known) did not: show a marker above it."""

    message_id: str
    missing: tuple[str, ...]
    senders: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class GapClosed(NodeEvent):
    """The marker above ``message_id`` goes away; ``lost`` ids were given up on (show a "lost" line)."""

    message_id: str
    lost: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class MessageRepaired(NodeEvent):
    """A message that was missing arrived. ``via``: "sds-r" (rebroadcast by ``by``), "resend", "store"
    (fetched from a store node) or "late"."""

    message_id: str
    via: str
    by: str | None = None


@dataclass(frozen=True, slots=True)
class MessageLost(NodeEvent):
    message_id: str
    sender_id: str | None
    dependants: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ParticipantSeen(NodeEvent):
    participant_id: str
    nick: str | None
    last_seen_ms: int


@dataclass(frozen=True, slots=True)
class NickClash(NodeEvent):
    """``participant_id`` uses a nick another member (``mine``: we) already has: from now on both are shown with a
    short fingerprint suffix (``bob#3f2a``: :meth:`~sdschat.node.book.MessageBook.display_name`)."""

    participant_id: str
    nick: str
    mine: bool = False


@dataclass(frozen=True, slots=True)
class TypingSeen(NodeEvent):
    participant_id: str
    nick: str


@dataclass(frozen=True, slots=True)
class PresenceChanged(NodeEvent):
    """What is shown of ``participant_id``'s presence changed (ours too): ``state`` ``online``, ``away`` (with its
    ``message``, maybe "") or ``offline`` (:mod:`sdschat.node.presence`)."""

    participant_id: str
    state: str
    message: str = ""


@dataclass(frozen=True, slots=True)
class ConnectionChanged(NodeEvent):
    state: str
    detail: str = ""


@dataclass(frozen=True, slots=True)
class CountersChanged(NodeEvent):
    counters: dict = field(default_factory=dict, compare=False)


@dataclass(frozen=True, slots=True)
class FrameRejected(NodeEvent):
    """A frame or a message was refused: ``reason`` a short code (:data:`RejectReason`, or the engine's own),
    ``detail`` one line of prose."""

    reason: str
    detail: str = ""


@dataclass(frozen=True, slots=True)
class NodeProblem(NodeEvent):
    """The node itself is in trouble, not a frame: ``storage`` (its database can no longer be written, or the
    channel could not be restored: nothing more is taken in, ``Node.failure`` says why) or ``internal`` (a task
    or a tick failed: a bug, logged with its traceback). ``detail``: one line."""

    what: ProblemKind
    detail: str = ""


@dataclass(frozen=True, slots=True)
class MembershipChanged(NodeEvent):
    """The channel's members or keys changed. ``what``: ``join`` (``by`` joined), ``admin`` (``by`` named
    ``who`` admins), ``epoch`` (``by`` started key epoch ``epoch``, removing ``who``; ``mine``: we hold its key),
    ``removed`` (``by`` removed us, in ``epoch``), ``expired`` (the keys up to ``epoch`` were deleted here),
    ``refused`` (``by``, holding only the key of ``epoch``, from before a removal, and not admitted since, tried to
    take part: an invite made before a kick, or re-made by a removed member; told once per participant))."""

    what: str
    by: str
    who: tuple[str, ...] = ()
    epoch: int = 0
    mine: bool = True
