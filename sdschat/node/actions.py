"""Edits, deletions and reactions: the rules, pure.

Each is a message of its own in the SDS log (kinds ``edit``, ``delete``, ``react``: sdschat.node.payload), naming
the message it acts on in its signed data. One kind each, not one kind with an action field: a peer without them
shows each as its own fallback line, and the kind alone says which rule applies before ``d`` is read.

Who may do what, checked by the sender (a :class:`~.errors.UserError` before anything is sent) and again by every
receiver (refused, counted as a rejection with its reason, never applied):

- an edit: only the author of the message, and only of a chat line (``msg``, ``me``);
- a deletion: its author, or an admin of the channel (any member's chat line);
- a reaction: any member; a second reaction with the same emoji by the same member takes it back.

What a message shows is a fold of its admitted actions in log order ``(lamport_timestamp, message_id)``, so every
member who holds the same actions shows the same thing whatever order they arrived in: the latest edit's text, the
first deletion (after which nothing of the text is kept: no edit's either), and each reaction toggled in turn.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from ..store import ActionRow
from . import events as ev
from .payload import MAX_TEXT, AppPayload, plain_emoji

__all__ = [
    "TARGET_KINDS",
    "Fold",
    "Folded",
    "action_row",
    "decorate",
    "fallback_text",
    "fold",
    "erased_body",
    "refusal",
    "target_of",
]

#: the kinds of message an edit, deletion or reaction may act on: chat lines
TARGET_KINDS = frozenset({"msg", "me"})
#: what a deleted message's edits keep in place of their text
DELETED_EDIT = "(deleted)"
#: how much of an edit's new text its fallback line quotes (the whole text is in its data)
FALLBACK_QUOTE = 200


def target_of(app: AppPayload) -> str | None:
    """The message id an edit, deletion or reaction names (None for any other payload)."""
    if app.kind not in ev.MESSAGE_ACTION_KINDS or not isinstance(app.data, dict):
        return None
    target = app.data.get("t")
    return target if isinstance(target, str) else None


def fallback_text(kind: str, value: str = "") -> str:
    """The line a peer without message actions shows (the payload's ``text``): ``edited a message: "new text"``,
    ``deleted a message``, ``reacted 👍``."""
    if kind == "edit":
        quote = value if len(value) <= FALLBACK_QUOTE else value[: FALLBACK_QUOTE - 1] + "…"
        return f'edited a message: "{quote}"'[:MAX_TEXT]
    if kind == "delete":
        return "deleted a message"
    return f"reacted {value}"


def action_row(mid: str, sender: str, app: AppPayload, lamport: int, state: str) -> ActionRow:
    """The ``message_actions`` row of an edit, deletion or reaction (its payload read: sdschat.node.payload)."""
    data = app.data if isinstance(app.data, dict) else {}
    value = data.get("text") if app.kind == "edit" else data.get("e") if app.kind == "react" else None
    if app.kind == "react" and isinstance(value, str):
        value = plain_emoji(value)  # (from a peer that kept the selector: the same reaction)
    return ActionRow(mid, data.get("t", ""), app.kind, sender, lamport, app.sent_at_ms, value, state)


def refusal(action: ActionRow, target: ev.ChatMessage, admin: bool) -> str | None:
    """Why ``action`` may not act on ``target`` (None: it may); ``admin``: whether its author is an admin of the
    channel (not removed)."""
    what = {"edit": "an edit", "delete": "a deletion", "react": "a reaction"}.get(action.kind, action.kind)
    if target.kind not in TARGET_KINDS or target.target is not None:
        return f"{what} of a message that is no chat line"
    if action.kind == "edit" and action.sender_id != target.sender_id:
        return "an edit by someone other than the message's author"
    if action.kind == "delete" and action.sender_id != target.sender_id and not admin:
        return "a deletion by someone neither the message's author nor an admin"
    return None


@dataclasses.dataclass(frozen=True, slots=True)
class Folded:
    """What a message's admitted actions make of it."""

    #: the latest edit's text (None: never edited, or deleted)
    text: str | None = None
    edited_at_ms: int = 0
    #: who deleted it first in log order (None: not deleted)
    deleted_by: str | None = None
    reactions: tuple[tuple[str, tuple[str, ...]], ...] = ()


class Fold:
    """A message's applied actions folded in log order, one at a time: :meth:`add` takes the next one (an action
    later in log order than every one added before), :attr:`state` is what they make of the message so far."""

    __slots__ = ("last", "_text", "_at", "_deleted", "_reacted", "_state")

    def __init__(self) -> None:
        #: the log key ``(lamport_timestamp, action_id)`` of the last action added
        self.last: tuple[int, str] = (-1, "")
        self._text: str | None = None
        self._at = 0
        self._deleted: str | None = None
        self._reacted: dict[str, dict[str, None]] = {}
        self._state: Folded | None = Folded()

    def add(self, a: ActionRow) -> None:
        self.last = (a.lamport_timestamp, a.action_id)
        if a.state != ev.APPLIED or self._deleted is not None:
            return
        self._state = None
        if a.kind == "delete":
            self._deleted, self._text, self._at, self._reacted = a.sender_id, None, 0, {}
        elif a.kind == "edit" and a.value is not None:
            self._text, self._at = a.value, a.at_ms
        elif a.kind == "react" and a.value is not None:
            who = self._reacted.setdefault(a.value, {})
            if a.sender_id in who:
                del who[a.sender_id]
                if not who:
                    del self._reacted[a.value]
            else:
                who[a.sender_id] = None

    @property
    def state(self) -> Folded:
        if self._state is None:
            reactions = tuple((emoji, tuple(who)) for emoji, who in self._reacted.items())
            self._state = Folded(self._text, self._at, self._deleted, reactions)
        return self._state


def fold(actions: Iterable[ActionRow]) -> Folded:
    """The state the applied ``actions`` of one message give it (any order in: log order is what counts)."""
    folding = Fold()
    for a in sorted(actions, key=lambda a: (a.lamport_timestamp, a.action_id)):
        folding.add(a)
    return folding.state


def decorate(chat: ev.ChatMessage, folded: Folded, deleted_line: str) -> ev.ChatMessage:
    """``chat`` as its actions make it (``deleted_line``: its text once deleted)."""
    if folded.deleted_by is not None:
        return dataclasses.replace(
            chat, text=deleted_line, edited=False, edited_at_ms=0, deleted_by=folded.deleted_by, reactions=()
        )
    return dataclasses.replace(
        chat,
        text=folded.text if folded.text is not None else chat.text,
        edited=folded.text is not None,
        edited_at_ms=folded.edited_at_ms,
        deleted_by=None,
        reactions=folded.reactions,
    )


def erased_body(app: AppPayload) -> bytes:
    """What the database keeps of a deleted message, or of an edit of one: its payload without its text (an edit's
    new text, and its fallback line quoting it, go too; what is left still reads as a payload of its kind)."""
    if app.kind == "edit" and isinstance(app.data, dict):
        data = {**app.data, "text": DELETED_EDIT}
        return dataclasses.replace(app, text="edited a message", data=data).encode()
    return dataclasses.replace(app, text="").encode()
