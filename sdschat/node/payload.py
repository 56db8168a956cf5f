"""The application payload carried (signed, then encrypted) inside SDS ``content``.

A small versioned JSON object::

    {"v": 1, "k": "msg", "nick": "alice", "text": "hello", "ts": 1763769600000, "n": "9f2c01ab"}

``e`` (optional, absent for 0) is the key epoch its author sends under when it writes the message (signed with
the rest): after an epoch that removed someone, a member refuses what was written under an older key by anyone who
was not among that epoch's members (sdschat.node.membership ``Membership.refusal``), however it is relayed.

``re`` (optional) makes a chat line a reply: the message id (64 hex digits) of
the message it answers, inside the sealed payload like everything else;
peers that do not know ``re`` ignore it and show the text.

``edit``, ``delete`` and ``react`` act on another message, named in ``d`` (``{"t": its message id}``, with
``"text"``: an edit's new text, or ``"e"``: a reaction's emoji, :func:`emoji_problem`), signed by their author as
every payload; their ``text`` is the line a peer without them shows (``edited a message: "new text"``, ``deleted a
message``, ``reacted 👍``). Who may do what is sdschat.node.actions's rule.

``k`` is the kind: ``msg`` (a chat line), ``me`` (an action, ``/me``), ``topic`` (``/topic``: the
channel's topic is its ``text``, only an admin's counts: sdschat.node.book), ``typing``
(ephemeral "typing…" notice), ``hello`` (ephemeral: a member not yet announced is
here), ``presence`` (ephemeral: online, away or offline in ``d``, an away message as
its ``text``: sdschat.node.presence), or a membership change -- ``join``, ``admin``, ``epoch``, ``leave``
(``/part``), ``nick`` (a new nick, ``{"from": the old one}``) -- whose object
``d`` sdschat.node.membership reads (peers from before them refuse these kinds).
A well-formed kind this version does not know (lowercase ASCII letters, at most
:data:`MAX_KIND`: :func:`well_formed_kind`) comes from a newer sdschat: it is read
(:attr:`AppPayload.known` False, its ``re`` and ``d`` dropped) and shown as its
``text``, which every new kind fills with a line for peers without it; any other
kind is refused.
``ts`` is the sender's wall clock in ms at send time (display only; ordering is
SDS's Lamport order). ``n`` is a random nonce,
so two people — or one person twice — typing the same text still produce
distinct SDS message ids. Unknown keys are ignored (forward compatible);
a newer ``v`` is refused.
"""

from __future__ import annotations

import json
import os
import unicodedata
from dataclasses import dataclass

from .errors import UserError
from .events import KNOWN_KINDS, MEMBERSHIP_KINDS, MESSAGE_ACTION_KINDS, QUIET_KINDS

__all__ = [
    "AppPayload",
    "PayloadError",
    "KINDS",
    "CONTROL_KINDS",
    "CONTROL_PREFIXES",
    "QUIET_PREFIXES",
    "plain_emoji",
    "DATA_KINDS",
    "VERSION",
    "MAX_TEXT",
    "MAX_EPOCH",
    "MAX_KIND",
    "MAX_TOPIC",
    "well_formed_kind",
    "emoji_problem",
    "action_problem",
    "MAX_EMOJI_BYTES",
    "MAX_EMOJI_POINTS",
]

VERSION = 1
KINDS = KNOWN_KINDS
#: the longest kind a payload may name (known or not)
MAX_KIND = 16
#: the longest topic (``topic``: its ``text``, cleaned; "" clears the topic)
MAX_TOPIC = 200
#: kinds that change the channel's membership and keys (``d`` holds their data)
CONTROL_KINDS = MEMBERSHIP_KINDS
#: kinds whose payload may carry a data object ``d``: the membership kinds and the message actions (always) and
#: ``presence`` (a beat without one says nothing: ignored)
DATA_KINDS = CONTROL_KINDS | MESSAGE_ACTION_KINDS | {"presence"}
#: how the encoding of a membership message begins (:meth:`AppPayload.encode`): the store matches stored payloads
#: against these, without decoding them, to leave them out of unread counts
CONTROL_PREFIXES = tuple(f'{{"v":{VERSION},"k":"{k}"'.encode() for k in sorted(CONTROL_KINDS))
#: how the encoding of any message that is no news begins: a membership change, an edit, a deletion or a reaction
#: (what an unread count leaves out: :data:`CONTROL_PREFIXES` and the message actions)
QUIET_PREFIXES = tuple(f'{{"v":{VERSION},"k":"{k}"'.encode() for k in sorted(QUIET_KINDS))
#: a reaction's emoji: at most this many bytes (UTF-8) and code points (a skin tone or a joiner counts)
MAX_EMOJI_BYTES = 16
MAX_EMOJI_POINTS = 8
MAX_TEXT = 16_384
MAX_NICK = 64
#: key epochs are numbered below this (a token's, an epoch message's and a payload's ``e``)
MAX_EPOCH = 2**31


class PayloadError(UserError, ValueError):
    """An application payload that cannot be read, or a text that cannot be sent (empty, too long, a reply to
    something that is no message id)."""


@dataclass(frozen=True, slots=True)
class AppPayload:
    kind: str
    nick: str
    text: str
    sent_at_ms: int
    nonce: str = ""
    #: the message id this one answers ("" for none)
    reply_to: str = ""
    #: a membership change's data (CONTROL_KINDS), else None
    data: dict | None = None
    #: the key epoch the author sent under when it wrote this
    epoch: int = 0

    @property
    def known(self) -> bool:
        """Whether this version understands the kind (else it comes from a newer sdschat: shown as its text)."""
        return self.kind in KINDS

    @classmethod
    def new(
        cls,
        kind: str,
        nick: str,
        text: str,
        sent_at_ms: int,
        reply_to: str = "",
        data: dict | None = None,
        epoch: int = 0,
    ) -> AppPayload:
        if kind not in KINDS:
            raise ValueError(f"unknown payload kind {kind!r}")
        if len(text) > MAX_TEXT:
            raise PayloadError(f"message longer than {MAX_TEXT} characters")
        if reply_to and not _is_message_id(reply_to):
            raise PayloadError("a reply names a message id (64 hex digits)")
        if kind in CONTROL_KINDS and not isinstance(data, dict):
            raise ValueError("membership kinds carry a data object")
        if data is not None and (kind not in DATA_KINDS or not isinstance(data, dict)):
            raise ValueError("only membership, presence and message action kinds carry a data object")
        if kind in MESSAGE_ACTION_KINDS:
            problem = action_problem(kind, data)
            if problem is not None:
                raise PayloadError(problem)
        if not 0 <= epoch < MAX_EPOCH:
            raise ValueError(f"a key epoch is a number from 0 to {MAX_EPOCH - 1}")
        return cls(kind, nick[:MAX_NICK], text, int(sent_at_ms), os.urandom(4).hex(), reply_to, data, int(epoch))

    def encode(self) -> bytes:
        obj = {
            "v": VERSION,
            "k": self.kind,
            "nick": self.nick,
            "text": self.text,
            "ts": self.sent_at_ms,
            "n": self.nonce,
        }
        if self.reply_to:
            obj["re"] = self.reply_to
        if self.data is not None:
            obj["d"] = self.data
        if self.epoch:
            obj["e"] = self.epoch
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")

    @classmethod
    def decode(cls, data: bytes) -> AppPayload:
        try:
            obj = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:  # incl. huge ints, deep nesting
            raise PayloadError(f"payload is not JSON: {exc.__class__.__name__}") from None
        if not isinstance(obj, dict):
            raise PayloadError("payload is not an object")
        v = obj.get("v")
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise PayloadError("payload has no version")
        if v > VERSION:
            raise PayloadError(f"payload version {v} is newer than this sdschat understands ({VERSION})")
        kind, nick, text, ts, nonce = obj.get("k"), obj.get("nick"), obj.get("text"), obj.get("ts"), obj.get("n", "")
        if not isinstance(kind, str) or not well_formed_kind(kind):
            raise PayloadError(f"malformed payload kind {kind!r}"[:80])
        if not isinstance(nick, str) or not isinstance(text, str) or not isinstance(nonce, str):
            raise PayloadError("payload fields have the wrong type")
        if not isinstance(ts, int) or isinstance(ts, bool) or not 0 <= ts < 2**63:
            raise PayloadError("payload timestamp is invalid")
        if len(text) > MAX_TEXT:
            raise PayloadError("payload text too long")
        try:  # lone surrogates decode from JSON escapes but cannot be stored or shown
            (nick + text + nonce).encode("utf-8")
        except UnicodeEncodeError:
            raise PayloadError("payload has invalid characters") from None
        reply_to = obj.get("re", "")
        if not isinstance(reply_to, str) or reply_to and not _is_message_id(reply_to) or kind not in KINDS:
            reply_to = ""  # not something we can follow (or a newer kind's): show the text, as a peer without replies
        d = obj.get("d")
        if kind in CONTROL_KINDS and not isinstance(d, dict):
            raise PayloadError(f"a {kind} payload carries no data")
        if kind in MESSAGE_ACTION_KINDS:
            problem = action_problem(kind, d)
            if problem is not None:
                raise PayloadError(f"{kind} payload: {problem}")
        epoch = obj.get("e", 0)
        if not isinstance(epoch, int) or isinstance(epoch, bool) or not 0 <= epoch < MAX_EPOCH:
            raise PayloadError("payload key epoch is invalid")
        carried = d if kind in DATA_KINDS and isinstance(d, dict) else None
        return cls(kind, nick[:MAX_NICK], text, ts, nonce, reply_to, carried, epoch)


def well_formed_kind(kind: str) -> bool:
    """Whether ``kind`` may name a payload kind: 1 to :data:`MAX_KIND` lowercase ASCII letters."""
    return 0 < len(kind) <= MAX_KIND and kind.isascii() and kind.isalpha() and kind.islower()


def action_problem(kind: str, data: object) -> str | None:
    """What is wrong with the data of an ``edit``, ``delete`` or ``react`` payload (None: nothing): it names its
    target's message id (``t``), an edit carries its new text (``text``: not blank, at most :data:`MAX_TEXT`), a
    reaction its emoji (``e``: :func:`emoji_problem`)."""
    if not isinstance(data, dict) or not isinstance(data.get("t"), str) or not _is_message_id(data["t"]):
        return "it names no message id"
    if kind == "edit":
        text = data.get("text")
        if not isinstance(text, str) or not text.strip():
            return "an edit carries its new text"
        if len(text) > MAX_TEXT:
            return f"an edit's text is longer than {MAX_TEXT} characters"
    if kind == "react":
        emoji = data.get("e")
        return emoji_problem(emoji) if isinstance(emoji, str) else "a reaction carries its emoji"
    return None


#: format characters an emoji may hold: the zero-width joiner of a sequence (👩‍💻)
_EMOJI_FORMAT = frozenset({"\u200d"})


def plain_emoji(emoji: str) -> str:
    """``emoji`` without its presentation selectors (U+FE0E, U+FE0F): "❤️" and "❤" look alike on most terminals,
    so they are one reaction (a second one takes the first back)."""
    plain = emoji.strip().replace("\ufe0f", "").replace("\ufe0e", "")
    return plain or emoji.strip()  # (a selector alone stays what it is)


def emoji_problem(emoji: str) -> str | None:
    """Why ``emoji`` cannot be a reaction (None: it can): empty, longer than :data:`MAX_EMOJI_BYTES` bytes or
    :data:`MAX_EMOJI_POINTS` code points, or holding a space, a control or format character (other than a joiner)
    or an unpaired surrogate: a reaction is a short symbol, never a line of text."""
    if not emoji:
        return "an empty reaction"
    try:
        size = len(emoji.encode("utf-8"))
    except UnicodeEncodeError:
        return "a reaction with invalid characters"
    if size > MAX_EMOJI_BYTES or len(emoji) > MAX_EMOJI_POINTS:
        return f"a reaction is at most {MAX_EMOJI_POINTS} characters ({MAX_EMOJI_BYTES} bytes)"
    for c in emoji:
        category = unicodedata.category(c)
        if category[0] in "CZ" and c not in _EMOJI_FORMAT:
            return f"a reaction cannot hold U+{ord(c):04X}"
    return None


def _is_message_id(text: str) -> bool:
    return len(text) == 64 and all(c in "0123456789abcdef" for c in text)
