"""The messages a node shows: in memory (the newest, and every one whose state can change), and who was seen."""

from __future__ import annotations

import dataclasses
import json
from collections import OrderedDict
from collections.abc import Callable, Iterable

from ..crypto import SignatureError, read_signed_content
from ..store import CorruptRowError, MessageRow, MessageUpdate, ParticipantRow
from . import events as ev
from .actions import target_of
from .membership import describe
from .payload import CONTROL_KINDS, MAX_TOPIC, AppPayload, PayloadError

__all__ = ["MessageBook", "TOPIC_KEY", "clean_topic", "nick_clashes", "nick_owners", "shown_name", "topic_line"]

#: the kv row holding the channel's topic (:class:`~.events.Topic` as JSON): the latest admitted ``topic`` message
TOPIC_KEY = "topic"

#: message states that no later event changes (such messages may leave memory; see ``memory_messages``)
FINAL_STATES = frozenset({ev.RECEIVED, ev.ACKNOWLEDGED})


#: hex digits of a participant id shown after a nick two members share (``bob#3f2a``)
FINGERPRINT_DIGITS = 4


def nick_owners(participants: Iterable[ParticipantRow], me: str) -> dict[str, set[str]]:
    """Nick -> the members seen going by it (ours aside): what :func:`shown_name` tells clashes by."""
    owners: dict[str, set[str]] = {}
    for row in participants:
        if row.participant_id != me and row.nick:
            owners.setdefault(row.nick, set()).add(row.participant_id)
    return owners


def shown_name(pid: str, nick: str | None, owners: dict[str, set[str]], me: str, my_nick: str) -> str:
    """``nick``, or ``nick#3f2a`` (the start of ``pid``) while another member (or we, ``me`` as ``my_nick``)
    goes by the same nick: two members never look alike in a line, the participant list, completion, a mention
    or ``sdschat search``; the start of ``pid`` for a member who gave no nick."""
    if not nick:
        return pid[:8]
    return f"{nick}#{pid[:FINGERPRINT_DIGITS]}" if nick_clashes(pid, nick, owners, me, my_nick) else nick


def nick_clashes(pid: str, nick: str | None, owners: dict[str, set[str]], me: str, my_nick: str) -> bool:
    """Whether another member (``owners``: :func:`nick_owners`), or we, go by ``pid``'s ``nick`` too."""
    if not nick:
        return False
    return (pid != me and nick == my_nick) or bool(owners.get(nick, set()) - {pid})


class MessageBook:
    def __init__(
        self,
        participant_id: Callable[[], str],
        emit,
        cap: int,
        nick: Callable[[], str] = lambda: "",
        may_set_topic: Callable[[str], bool] = lambda pid: False,
    ) -> None:
        self._pid = participant_id
        #: whether a participant may set the channel's topic (an admin of the channel, not removed)
        self.may_set_topic = may_set_topic
        #: the channel's topic (None: never set), :meth:`topic_seen`
        self.topic: ev.Topic | None = None
        self._nick = nick
        #: nick -> participants (other than us) going by it; rebuilt when :attr:`participants` changed
        self._by_nick: dict[str, set[str]] = {}
        self._by_nick_of: tuple[int, int] = (-1, -1)
        self._changes = 0
        self._emit = emit
        self.cap = cap
        self.messages: dict[str, ev.ChatMessage] = {}
        #: message id -> (payload, signed body) of content whose signature and id were checked on arrival
        self.apps: OrderedDict[str, tuple[AppPayload, bytes]] = OrderedDict()
        self.participants: dict[str, ParticipantRow] = {}

    def chat(
        self, mid, sender, app: AppPayload, lamport, state, received_at=0, acks=0, resends=0, repaired=False
    ) -> ev.ChatMessage:
        text = describe(app.kind, app.data, self.name_of) if app.kind in CONTROL_KINDS else app.text
        nick = self.display_name(sender, app.nick)
        if app.kind == "topic":
            text = topic_line(app.text, self.may_set_topic(sender))
        if app.kind == "nick" and isinstance(app.data, dict) and isinstance(app.data.get("from"), str):
            nick, text = app.data["from"][:64], f"is now {nick}"  # * bob is now alicia
        return ev.ChatMessage(
            mid,
            sender,
            nick,
            text,
            app.kind,
            app.sent_at_ms,
            lamport,
            sender == self._pid(),
            state,
            acks,
            resends,
            bool(repaired),
            None,
            received_at,
            app.reply_to or None,
            target=target_of(app),
        )

    def chat_of_row(self, row: MessageRow) -> ev.ChatMessage:
        """The message a database row holds; :class:`~sdschat.store.CorruptRowError` if its payload does not read
        (the node stores only payloads it read or wrote: the file was changed since)."""
        try:
            app = AppPayload.decode(row.content)
        except PayloadError as exc:
            raise CorruptRowError(f"the messages table is damaged (message {row.message_id[:16]}: {exc})") from None
        return self.chat(
            row.message_id,
            row.sender_id,
            app,
            row.lamport_timestamp,
            row.state,
            row.received_at_ms or 0,
            row.possible_ack_count,
            row.resends,
            row.repaired,
        )

    def topic_seen(self, mid: str, sender: str, app: AppPayload, lamport: int) -> dict[str, str | None]:
        """A ``topic`` message entered the log: it becomes the channel's topic if its author may set it and it is
        the latest such message in log order (a late repair of an older one changes nothing). Returns the kv row
        to persist with it ({} if the topic did not change)."""
        if app.kind != "topic" or not self.may_set_topic(sender):
            return {}
        topic = ev.Topic(clean_topic(app.text), mid, sender, app.nick, app.sent_at_ms, lamport)
        if self.topic is not None and self.topic.log_key >= topic.log_key:
            return {}
        self.topic = topic
        self._emit(ev.TopicChanged(topic))
        return {TOPIC_KEY: json.dumps(dataclasses.asdict(topic), ensure_ascii=False)}

    def load_topic(self, raw: str | None) -> None:
        """The topic kept in the database (:data:`TOPIC_KEY`), at start."""
        try:
            obj = json.loads(raw) if raw else None
            self.topic = ev.Topic(**obj) if isinstance(obj, dict) else None
        except (ValueError, TypeError):
            self.topic = None  # unreadable: as if never set (the next topic message sets it)

    def name_of(self, pid: str) -> str:
        """A participant's name (``you`` for us; the start of its id if never seen): :meth:`display_name`."""
        if pid == self._pid():
            return "you"
        row = self.participants.get(pid)
        return self.display_name(pid, row.nick) if row is not None and row.nick else pid[:8]

    def clashes(self, pid: str, nick: str | None) -> bool:
        """Whether another member seen here (or we) goes by ``nick`` too."""
        return nick_clashes(pid, nick, self._owners(), self._pid(), self._nick())

    def display_name(self, pid: str, nick: str | None) -> str:
        """:func:`shown_name` over the members seen here."""
        return shown_name(pid, nick, self._owners(), self._pid(), self._nick())

    def _owners(self) -> dict[str, set[str]]:
        """:func:`nick_owners` of the members seen here (made again only when they or their nicks changed)."""
        if self._by_nick_of != (len(self.participants), self._changes):
            self._by_nick = nick_owners(self.participants.values(), self._pid())
            self._by_nick_of = (len(self.participants), self._changes)
        return self._by_nick

    def app_of(self, mid: str, content: bytes) -> tuple[AppPayload | None, bytes]:
        """The verified application payload inside signed SDS content and its signed body.

        Checked once: content verified on arrival (its id is its hash) is remembered by id, so delivering it
        later costs no second signature check.
        """
        known = self.apps.get(mid)
        if known is not None:
            return known
        try:
            signed = read_signed_content(content)  # verified before it reached the engine (receive.py)
        except SignatureError:
            return None, b""
        app = decode_app(signed.message)
        if app is not None and mid:
            self.remember_app(mid, app, signed.message)
        return app, signed.message

    def remember_app(self, mid: str, app: AppPayload, body: bytes) -> None:
        self.apps[mid] = (app, body)
        if len(self.apps) > 4096:
            self.apps.popitem(last=False)

    def load_participants(self, rows: Iterable[ParticipantRow]) -> None:
        """Everyone the database has seen in the channel (at start, before the messages that name them)."""
        for row in rows:
            self.participants[row.participant_id] = row
        self._changes += 1

    def show(self, chat: ev.ChatMessage) -> None:
        """Hold ``chat`` as the message shown under its id (a new one, or a new state of one held): the book is
        the one owner of the messages in memory, which :meth:`trim` bounds."""
        self.messages[chat.message_id] = chat

    def set_state(
        self, mid: str, state: str, now: int, acks: int | None = None, resends: int | None = None
    ) -> MessageUpdate | None:
        chat = self.messages.get(mid)
        if chat is None:
            return None
        if chat.state == ev.ACKNOWLEDGED and state != ev.ACKNOWLEDGED:
            return None  # acknowledged is final
        chat = dataclasses.replace(
            chat,
            state=state,
            possible_acks=chat.possible_acks if acks is None else acks,
            resends=chat.resends if resends is None else resends,
        )
        self.messages[mid] = chat
        self._emit(ev.AckStateChanged(mid, state, chat.possible_acks, chat.resends))
        return MessageUpdate(mid, state=state, possible_ack_count=acks, resends=resends)

    def seen(self, pid: str, nick: str | None, now: int, rows: list) -> None:
        if pid == self._pid():
            return
        old = self.participants.get(pid)
        row = ParticipantRow(pid, nick or (old.nick if old else None), old.first_seen_ms if old else now, now)
        renamed = bool(row.nick) and (old is None or old.nick != row.nick)
        if row.nick and renamed and self.clashes(pid, row.nick):
            self._emit(ev.NickClash(pid, row.nick, row.nick == self._nick()))
        self.participants[pid] = row
        if renamed:
            self._changes += 1
        rows.append(row)
        self._emit(ev.ParticipantSeen(pid, row.nick, now))

    def trim(self) -> None:
        """Forget the oldest messages whose state is final (they stay in the database) beyond the cap."""
        excess = len(self.messages) - self.cap
        if excess <= max(64, self.cap // 10):  # trim in batches: one pass per many messages
            return
        drop = []
        for mid, chat in self.messages.items():
            if chat.state in FINAL_STATES:
                drop.append(mid)
                if len(drop) >= excess:
                    break
        for mid in drop:
            del self.messages[mid]


def clean_topic(text: str) -> str:
    """A topic as kept and shown: one line, no control characters, at most :data:`~.payload.MAX_TOPIC`."""
    return " ".join("".join(c if c.isprintable() else " " for c in text).split())[:MAX_TOPIC]


def topic_line(text: str, admitted: bool) -> str:
    """What a ``topic`` message says in the history (after its author's name)."""
    topic = clean_topic(text)
    if not admitted:
        return "tried to set the topic (ignored: only an admin can)"
    return f"set the topic: {topic}" if topic else "cleared the topic"


def decode_app(body: bytes) -> AppPayload | None:
    try:
        return AppPayload.decode(body)
    except PayloadError:
        return None
