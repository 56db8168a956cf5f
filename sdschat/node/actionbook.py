"""The edits, deletions and reactions a node holds, and what they make of the messages they act on.

The one owner of the ``message_actions`` rows (migrations/0005): it judges each action by the rules of
:mod:`.actions` once its target is here, keeps waiting the ones whose target is not (pending, in the database, so
they survive a restart; lost when their target is declared lost), folds the admitted ones into what the target
shows, and erases a deleted message's text everywhere the node keeps it. Its rows reach the database in the node's
batches: :meth:`ActionBook.drain` is read by ``Node.persist``, like the engine's journal.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Coroutine, Iterable
from typing import Any, Protocol

from ..sds import MessageChannel
from ..store import ActionRow, CorruptRowError, MessageRow, MessageUpdate
from . import events as ev
from .actions import DELETED_EDIT, Fold, Folded, action_row, decorate, erased_body, refusal
from .book import MessageBook
from .payload import AppPayload

__all__ = ["ActionBook", "ActionHost"]

#: how long after a deletion the search index drops the erased words and the database's write-ahead log is emptied
#: into the file (whose freed pages are zeroed already: ``secure_delete``), so the erased text stays in neither file
#: (one pass for a burst of deletions)
SCRUB_AFTER_S = 0.2


class ActionHost(Protocol):
    """What the action book needs of the node."""

    @property
    def channel(self) -> MessageChannel | None: ...

    @property
    def stopping(self) -> bool: ...

    def now(self) -> int: ...

    def emit(self, event: ev.NodeEvent) -> None: ...

    def persist(self, now: int) -> None: ...

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task: ...

    def reject(self, reason: ev.RejectReason, detail: str, now: int) -> None: ...

    def is_admin(self, pid: str) -> bool: ...

    async def stored_message(self, message_id: str) -> MessageRow | None: ...

    async def stored_actions(self, target_ids: list[str]) -> list[ActionRow]: ...

    async def erase_traces(self) -> None: ...


class ActionBook:
    def __init__(self, host: ActionHost, book: MessageBook) -> None:
        self.host = host
        self.book = book
        #: action id -> its row (every action known here)
        self.rows: dict[str, ActionRow] = {}
        #: target id -> ids of the actions naming it
        self.on: dict[str, dict[str, None]] = {}
        #: target id -> ids of its actions waiting for it (pending, or lost with it)
        self.waiting: dict[str, dict[str, None]] = {}
        #: messages every action of which is held here (read from the database, or first shown in this run)
        self.complete: set[str] = set()
        #: the messages acted on, as last shown: what an action is judged against when the message has left the
        #: book's memory (a long channel), without reading it again
        self.targets: dict[str, ev.ChatMessage] = {}
        #: messages whose text is erased here (a deleted message and its edits): never stored with it again
        self.erased: set[str] = set()
        #: target id -> its applied actions folded so far (dropped when one arrives out of log order, or changes)
        self._folds: dict[str, Fold] = {}
        self._ops: list[tuple[str, str, ActionRow]] = []
        self._updates: list[MessageUpdate] = []
        self._scrub: asyncio.TimerHandle | None = None

    # ------------------------------------------------------------ state in and out

    def load(self, rows: Iterable[ActionRow], complete: Iterable[str] = ()) -> None:
        """Actions read from the database (at start, or with a page of history): every one of the messages
        ``complete`` names among them."""
        self.complete.update(complete)
        for row in rows:
            if row.action_id in self.rows:
                continue
            self._index(row)

    def drain(self) -> tuple[list[tuple[str, str, ActionRow]], list[MessageUpdate]]:
        """The rows to write with the node's next batch: ``message_actions`` ops and content rewrites (which run
        after the batch's new messages, so a message stored in the same batch is rewritten too)."""
        ops, updates = self._ops, self._updates
        self._ops, self._updates = [], []
        return ops, updates

    def decorate(self, chat: ev.ChatMessage) -> ev.ChatMessage:
        """``chat`` as the actions known here make it (an action: with its state)."""
        if chat.kind in ev.MESSAGE_ACTION_KINDS:
            row = self.rows.get(chat.message_id)
            return dataclasses.replace(chat, action_state=row.state) if row is not None else chat
        if not self.on.get(chat.message_id):
            return chat
        folded = self._fold_of(chat.message_id)
        return decorate(chat, folded, self._deleted_line(chat, folded.deleted_by))

    def _fold_of(self, target_id: str) -> Folded:
        folding = self._folds.get(target_id)
        if folding is None:
            folding = self._folds[target_id] = Fold()
            rows = (self.rows[a] for a in self.on.get(target_id, ()))
            for row in sorted(rows, key=lambda r: (r.lamport_timestamp, r.action_id)):
                folding.add(row)
        return folding.state

    def content_for(self, mid: str, app: AppPayload, body: bytes) -> bytes:
        """What the database keeps of message ``mid``: ``body``, or without its text once erased."""
        return erased_body(app) if mid in self.erased else body

    def history(self, mid: str) -> list[ActionRow]:
        """The applied edits of ``mid``, in log order."""
        rows = [self.rows[a] for a in self.on.get(mid, ())]
        rows = [r for r in rows if r.kind == "edit" and r.state == ev.APPLIED and r.value is not None]
        return sorted(rows, key=lambda r: (r.lamport_timestamp, r.action_id))

    # ------------------------------------------------------------ what arrives

    def took(self, chat: ev.ChatMessage, app: AppPayload, body: bytes) -> tuple[ev.ChatMessage, bytes]:
        """An edit, deletion or reaction was shown for the first time (sent here, or received): judged now if its
        target is here, else kept waiting. Returns it with its state, and the content the database keeps of it."""
        mid = chat.message_id
        if mid not in self.rows:
            row = action_row(mid, chat.sender_id, app, chat.lamport_timestamp, ev.PENDING)
            target = self.held(row.target_id)
            channel = self.host.channel
            if target is None and channel is not None and channel.was_lost(row.target_id):
                self._keep(dataclasses.replace(row, state=ev.LOST))  # given up on before this came: lost with it
                self._look_up(row.target_id)  # (unless the database has it after all)
            elif target is None:
                self._wait(row)
                self._look_up(row.target_id)
            else:
                self._judge(row, target)
                self._refresh(target.message_id)
        return self.decorate(chat), self.content_for(mid, app, body)

    def arrived(self, chat: ev.ChatMessage) -> ev.ChatMessage:
        """A message was shown for the first time: the actions waiting for it are judged; returns it as they make
        it (to be shown, and stored with :meth:`content_for`)."""
        self.complete.add(chat.message_id)
        waiting = self.waiting.pop(chat.message_id, None)
        if waiting:
            for aid in self._in_log_order(waiting):
                self._judge(self.rows[aid], chat)
            self._erase_if_deleted(chat)
        return self.decorate(chat)

    def lost(self, mid: str) -> None:
        """Message ``mid`` was declared irretrievably lost: its waiting actions are lost with it (still applied
        if it arrives after all)."""
        for aid in self._in_log_order(self.waiting.get(mid, {})):
            self._keep(dataclasses.replace(self.rows[aid], state=ev.LOST))

    # ------------------------------------------------------------ internals

    def _index(self, row: ActionRow) -> None:
        old = self.rows.get(row.action_id)
        folding = self._folds.get(row.target_id)
        if folding is not None:
            if old is None and (row.lamport_timestamp, row.action_id) > folding.last:
                folding.add(row)  # the common case: the newest action of its message
            elif old != row:
                del self._folds[row.target_id]
        self.rows[row.action_id] = row
        self.on.setdefault(row.target_id, {})[row.action_id] = None
        if row.state in (ev.PENDING, ev.LOST):
            self.waiting.setdefault(row.target_id, {})[row.action_id] = None
        else:
            waiting = self.waiting.get(row.target_id)
            if waiting is not None:
                waiting.pop(row.action_id, None)
                if not waiting:
                    del self.waiting[row.target_id]

    def _keep(self, row: ActionRow) -> None:
        """Hold ``row`` (a new action, or a new state of one), write it, and show the action's new state."""
        self._index(row)
        self._ops.append(("action", row.action_id, row))
        chat = self.book.messages.get(row.action_id)
        if chat is not None and chat.action_state != row.state:
            chat = dataclasses.replace(chat, action_state=row.state)
            self.book.show(chat)
            self.host.emit(ev.MessageChanged(chat))

    def _wait(self, row: ActionRow) -> None:
        self._keep(row)

    def _in_log_order(self, ids: Iterable[str]) -> list[str]:
        return sorted(ids, key=lambda a: (self.rows[a].lamport_timestamp, a))

    def _judge(self, row: ActionRow, target: ev.ChatMessage) -> None:
        """Apply ``row`` to ``target``, or refuse it (counted and told as a rejection, never applied)."""
        reason = refusal(row, target, self.host.is_admin(row.sender_id))
        if reason is not None:
            detail = f"{row.kind} {row.action_id[:8]} by {row.sender_id[:8]}: {reason}"
            self.host.reject("bad_action", detail, self.host.now())
        self._keep(dataclasses.replace(row, state=ev.REFUSED if reason else ev.APPLIED))

    def remember(self, chat: ev.ChatMessage) -> None:
        """Hold ``chat`` (read from the database, its actions with it) as a message that is being acted on here."""
        if chat.message_id not in self.book.messages:
            self.targets.setdefault(chat.message_id, chat)

    def held(self, mid: str) -> ev.ChatMessage | None:
        """The message ``mid`` as last shown, if it is held here (in the book's memory, or acted on before)."""
        chat = self.book.messages.get(mid)
        return chat if chat is not None else self.targets.get(mid)

    def _refresh(self, target_id: str) -> None:
        """Show the target as its actions make it now (erasing its text once deleted)."""
        chat = self.held(target_id)
        if chat is None:
            return
        self._erase_if_deleted(chat)
        self._show(chat)

    def _show(self, chat: ev.ChatMessage) -> None:
        new = self.decorate(chat)
        self.targets[chat.message_id] = new
        if new != chat:
            if chat.message_id in self.book.messages:
                self.book.show(new)
            self.host.emit(ev.MessageChanged(new))

    def _erase_if_deleted(self, chat: ev.ChatMessage) -> None:
        """A deleted message: its text and every edit's leave the database, the repair cache and memory."""
        if self._fold_of(chat.message_id).deleted_by is None:
            return
        erase = [(chat.message_id, self._payload_of(chat))]
        for aid in self.on.get(chat.message_id, ()):
            row = self.rows[aid]
            if row.kind == "edit" and row.value is not None:
                self._keep(dataclasses.replace(row, value=None))
            if row.kind == "edit":
                erase.append((aid, self._edit_payload(row)))
        channel = self.host.channel
        for mid, app in erase:
            if mid in self.erased:
                continue
            self.erased.add(mid)
            self._updates.append(MessageUpdate(mid, content=erased_body(app)))
            self.book.apps.pop(mid, None)
            if channel is not None:
                channel.forget_cached(mid)
            held = self.book.messages.get(mid)
            if held is not None and held.kind == "edit":
                self.book.show(dataclasses.replace(held, text="edited a message"))
        self._scrub_soon()

    def _payload_of(self, chat: ev.ChatMessage) -> AppPayload:
        known = self.book.apps.get(chat.message_id)
        if known is not None:
            return known[0]
        return AppPayload(chat.kind, chat.nick, "", chat.sent_at_ms, "", chat.reply_to or "")

    def _edit_payload(self, row: ActionRow) -> AppPayload:
        known = self.book.apps.get(row.action_id)
        if known is not None:
            return known[0]
        seen = self.book.participants.get(row.sender_id)
        nick = (seen.nick if seen is not None else None) or ""
        return AppPayload("edit", nick, "", row.at_ms, "", "", {"t": row.target_id, "text": DELETED_EDIT})

    def _deleted_line(self, chat: ev.ChatMessage, by: str | None) -> str:
        if by is None or by == chat.sender_id:
            return "(message deleted)"
        return f"(message deleted by {self.book.name_of(by)}, an admin)"

    def _look_up(self, target_id: str) -> None:
        """The target may be in the database (delivered before, no longer held in memory): read it there."""
        host = self.host
        if host.channel is not None and not host.stopping:
            host.spawn(self._read_target(target_id), "sdschat-action-target")

    async def _read_target(self, target_id: str) -> None:
        host = self.host
        row = await host.stored_message(target_id)
        if row is None or target_id not in self.waiting or self.held(target_id) is not None:
            return  # not here yet (it stays pending), or arrived meanwhile (judged then)
        self.load(await host.stored_actions([target_id]), [target_id])
        try:
            chat = self.book.chat_of_row(row)
        except CorruptRowError:
            return
        before = self.decorate(chat)
        for aid in self._in_log_order(self.waiting.pop(target_id, {})):
            self._judge(self.rows[aid], chat)
        self._erase_if_deleted(chat)
        after = self.targets[target_id] = self.decorate(chat)
        if after != before:
            host.emit(ev.MessageChanged(after))
        host.persist(host.now())

    def _scrub_soon(self) -> None:
        """Empty the write-ahead log into the database file once the erasure is written (one scrub for a burst)."""
        if self._scrub is not None or self.host.stopping:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        self._scrub = loop.call_later(SCRUB_AFTER_S, self._start_scrub)

    def _start_scrub(self) -> None:
        self._scrub = None
        if not self.host.stopping and self.host.channel is not None:
            self.host.spawn(self.host.erase_traces(), "sdschat-erase")
