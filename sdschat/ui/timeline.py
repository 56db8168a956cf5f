"""What the message view shows, in order: messages, gap markers and local notices.

Pure bookkeeping (no Textual): the view lays out and paints what is here.

Order is the local log's: ``(lamport_timestamp, message_id)``. A gap marker
sits just above the message that revealed the gap (its *anchor*), so a
repaired message — whose Lamport timestamp is lower than its dependant's —
slides in above the marker's place, and the marker goes away once nothing it
counts is still missing. Each missing id is counted by one marker only (the
first that named it), so a burst of messages that all name the same gap in
their causal histories shows one marker, not ten.

Catch-up or live gap. :meth:`Timeline.came_online` marks the wall-clock ms
at which the view began to follow the channel live (shown connected, or
connected again after a break). A message of others that arrives after that
with a Lamport timestamp below it is *catch-up*: its author wrote it before
we came online (a Lamport timestamp is at least its author's clock in ms at
sending), so it is history that loads -- after being away (offline, window
closed), or before we joined. Catch-up lines carry no repair mark, no
highlight and no "waiting" glyph; one :class:`CatchUpItem` per catch-up
counts them and names where they came from ("caught up 28 messages · from
alice (SDS-R)"), and shows progress while messages they name are still
missing ("loading earlier history… 40 of ~88"). Those missing ids are the
line's, not a gap marker's: the gaps a catch-up message reveals, the gaps
sync frames name before the first live message of another member arrives
(the catch-up burst), and a marker's whole gap once one of its messages
arrives as catch-up. A live message that names ids the burst took before
anything was caught up shows they were a live gap after all: they go to a
marker above it. Everything else is live: a message missed while online
keeps its marker and, repaired, its "↺ repaired by ..." mark.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import re
from collections.abc import Iterable

from sdschat.node import events as ev

from .mentions import mentions

__all__ = [
    "Timeline",
    "MsgItem",
    "MarkerItem",
    "NoticeItem",
    "CatchUpItem",
    "Item",
    "QUOTE_TEXT",
    "QUOTE_MISSING",
    "QUOTE_LOST",
    "DELETED",
]

QUOTE_TEXT, QUOTE_MISSING, QUOTE_LOST = "text", "missing", "lost"
#: what a deleted message shows in place of its text (its line, and the quotes of its replies)
DELETED = "message deleted"

_uids = itertools.count(1)
_FLOATING = "\U0010fffe"  # sorts after every message id of the same Lamport time
_NOTICE = "\U0010ffff"
#: local lines a view keeps across a reload of its history (:meth:`Timeline.load`)
KEPT_NOTICES = 200


def _quote(parent: ev.ChatMessage) -> tuple:
    """A reply's quote of ``parent``: its text as shown now (edited: the latest; deleted: only that it was)."""
    return (QUOTE_TEXT, parent.nick, parent.sender_id, DELETED if parent.deleted else parent.text)


class _Base:
    __slots__ = ("key", "uid", "version", "height", "layout_width")

    def __init__(self, key: tuple) -> None:
        self.key = key
        self.uid = next(_uids)
        self.version = 0
        self.height = 1
        self.layout_width = -1  # width the height was computed for; -1: needs layout

    def touch(self) -> None:
        self.version += 1
        self.layout_width = -1


class MsgItem(_Base):
    """One chat message (own or received)."""

    __slots__ = (
        "msg",
        "repaired_via",
        "repaired_by",
        "highlight_until_ms",
        "day",
        "mention",
        "quote",
        "selected",
        "catch_up",
    )

    def __init__(self, msg: ev.ChatMessage, mention: bool = False, catch_up: bool = False) -> None:
        # (msg.log_key spelled out: made once per message of a history, 100,000 when a long one opens, where the
        # property and the unpacking cost three times the plain tuple)
        super().__init__((msg.lamport_timestamp, msg.message_id, 1))
        self.msg = msg
        #: someone else's message that names you (or a highlight word)
        self.mention = mention
        #: a reply's one-line quote of its parent: ``(QUOTE_TEXT, nick, sender_id, text)``, ``(QUOTE_MISSING,)``
        #: (not here: possibly missing) or ``(QUOTE_LOST,)``; None for a message that answers nothing
        self.quote: tuple | None = None
        #: under the message cursor
        self.selected = False
        #: arrived as catch-up (see the module docstring): history, shown without repair mark or waiting glyph
        self.catch_up = catch_up
        self.repaired_via: str | None = "history" if msg.repaired and not catch_up else None
        self.repaired_by: str | None = msg.repaired_by
        self.highlight_until_ms = 0
        self.day: int | None = None  # ordinal of the local day, filled by the layout


class MarkerItem(_Base):
    """ "N messages possibly missing" (pending ids) that turns into "N messages lost"."""

    __slots__ = ("anchor", "pending", "lost", "senders")

    def __init__(self, key: tuple, anchor: str) -> None:
        super().__init__(key)
        self.anchor = anchor
        self.pending: set[str] = set()
        self.lost: set[str] = set()
        self.senders: set[str] = set()

    @property
    def kind(self) -> str | None:
        if self.pending:
            return "missing"
        if self.lost:
            return "lost"
        return None


class NoticeItem(_Base):
    """A local line (command feedback): never sent, not in the log."""

    __slots__ = ("text", "at_ms", "error")

    def __init__(self, key: tuple, text: str, at_ms: int, error: bool = False) -> None:
        super().__init__(key)
        self.text = text
        self.at_ms = at_ms
        self.error = error


class UnreadItem(_Base):
    """ "new since you left": above the first message of others that arrived after the channel was last seen."""

    __slots__ = ("count",)

    def __init__(self, key: tuple, count: int) -> None:
        super().__init__(key)
        self.count = count


class CatchUpItem(_Base):
    """One catch-up's line, just below the newest message it brought: how many, from where, and (while ``pending``
    is not empty) how far it has got. ``pending`` and ``lost`` are missing ids it counts in place of a gap marker."""

    __slots__ = ("count", "pending", "lost", "via")

    def __init__(self, key: tuple) -> None:
        super().__init__(key)
        self.count = 0
        self.pending: set[str] = set()
        self.lost: set[str] = set()
        #: message id -> (how it came: "sds-r", "store", "resend", "late"; who sent that copy), as repairs tell it
        self.via: dict[str, tuple[str, str | None]] = {}

    @property
    def loading(self) -> bool:
        return bool(self.pending)


Item = MsgItem | MarkerItem | NoticeItem | UnreadItem | CatchUpItem


class Timeline:
    """Ordered items plus the gap bookkeeping. Mutations record what the view must redo.

    After a batch of calls, ``first_moved`` is the lowest index where items
    were inserted or removed (``None``: structure unchanged) and ``updated``
    the items whose content changed in place.
    """

    def __init__(self) -> None:
        self.items: list[Item] = []
        self.keys: list[tuple] = []
        self.by_mid: dict[str, MsgItem] = {}
        self.nicks: dict[str, str] = {}
        self._owner: dict[str, MarkerItem | CatchUpItem] = {}  # missing id -> the marker (or catch-up) counting it
        self._anchored: dict[str, MarkerItem] = {}  # anchor message id -> its marker
        self._seq = itertools.count()
        self.last_lamport = 0
        self.unread_line: UnreadItem | None = None
        #: loaded up to this key only (a window around a search result): newer messages are not inserted
        #: until the view pages down to them (None: loaded to the end of the log)
        self.upper: tuple | None = None
        #: parent id -> replies whose quote waits for it (not here yet, or not loaded)
        self._replies: dict[str, list[MsgItem]] = {}
        #: parents to look for in the database (the view's owner reads them: :meth:`parent_found`)
        self.unresolved: set[str] = set()
        self.cursor: MsgItem | None = None
        #: what counts as naming you (:func:`sdschat.ui.mentions.names_pattern`), set by the pane
        self.highlight: re.Pattern | None = None
        self.first_moved: int | None = None
        self.updated: set[Item] = set()
        #: wall-clock ms since when this view follows the channel live (0: not yet: nothing is catch-up)
        self.online_from = 0
        #: no live message of another member arrived since coming online: gaps named by sync frames are catch-up
        self._burst = False
        self.catch_up: CatchUpItem | None = None  # the current catch-up (earlier ones keep their summary lines)
        self._catch_ups: list[CatchUpItem] = []  # every catch-up line, for a reload
        self._caught: set[str] = set()  # ids of the messages that arrived as catch-up
        #: the newest local lines (command feedback, connection changes), for a reload: a history load replaces
        #: the items, and a line said before the first one (a command typed while the window opened) would go
        self._notices: list[NoticeItem] = []
        self._loaded_once = False

    # ------------------------------------------------------------ plumbing

    def __len__(self) -> int:
        return len(self.items)

    def take_changes(self) -> tuple[int | None, set[Item]]:
        changes = (self.first_moved, self.updated)
        self.first_moved, self.updated = None, set()
        return changes

    def index_of(self, item: Item) -> int:
        i = bisect.bisect_left(self.keys, item.key)
        if i < len(self.items) and self.items[i] is item:
            return i
        raise KeyError(item.key)

    def _moved(self, index: int) -> None:
        """Items were inserted or removed at ``index``: its neighbours' day separators may change."""
        lo = max(0, index - 1)
        if self.first_moved is None or lo < self.first_moved:
            self.first_moved = lo
        for j in (index - 1, index, index + 1):
            if 0 <= j < len(self.items):
                self.items[j].touch()

    def _insert(self, item: Item) -> int:
        i = bisect.bisect_left(self.keys, item.key)
        self.keys.insert(i, item.key)
        self.items.insert(i, item)
        self._moved(i)
        return i

    def _remove(self, item: Item) -> None:
        i = self.index_of(item)
        del self.keys[i]
        del self.items[i]
        self.updated.discard(item)
        self._moved(i)

    def _update(self, item: Item) -> None:
        item.touch()
        self.updated.add(item)

    def nick(self, pid: str | None) -> str:
        if not pid:
            return "?"
        return self.nicks.get(pid) or pid[:8]

    # ------------------------------------------------------------ messages

    def load(
        self, messages: Iterable[ev.ChatMessage], gaps: Iterable[ev.GapOpened] = (), upper: tuple | None = None
    ) -> None:
        """Replace everything with a history (in log order, as ``node.history()`` gives it) and the gaps still
        open in it (``node.open_gaps()``: the markers the live events would have left); ``upper``: see
        :attr:`upper`. The local lines said in what is loaded stay (:meth:`notice`)."""
        self.upper = upper
        items = [self._item(m) for m in messages if not m.hidden]
        items.sort(key=lambda it: it.key)
        self.items = list(items)
        self.keys = [it.key for it in items]
        self.by_mid = {it.msg.message_id: it for it in items}
        self._owner.clear()
        self._anchored.clear()
        self._replies.clear()
        self.unresolved.clear()
        self.cursor = None
        for it in items:
            self.nicks[it.msg.sender_id] = it.msg.nick
        self.last_lamport = items[-1].key[0] if items else 0
        for line in self._catch_ups:  # (before the gaps: the ids a catch-up counts stay its own)
            i = bisect.bisect_left(self.keys, line.key)
            self.keys.insert(i, line.key)
            self.items.insert(i, line)
            line.touch()
            for mid in line.pending | line.lost:
                self._owner[mid] = line
        for gap in gaps:
            self.gap_opened(gap.message_id, gap.missing, gap.senders)
        if not self._loaded_once:  # said before any history was shown: it follows what was there then
            self._loaded_once = True
            for said in self._notices:
                said.key = (max(said.key[0], self.last_lamport), _NOTICE, said.key[2])
        self._show_notices()
        self._quote_all(items)
        self.first_moved = 0
        self.updated = set()

    def _item(self, msg: ev.ChatMessage) -> MsgItem:
        return MsgItem(msg, not msg.own and mentions(msg.text, self.highlight), msg.message_id in self._caught)

    def prepend(self, messages: Iterable[ev.ChatMessage]) -> int:
        """Older messages (a page of history from the database) merged in by key; returns how many were new."""
        items = [self._item(m) for m in messages if m.message_id not in self.by_mid and not m.hidden]
        if not items:
            return 0
        for it in items:
            self.by_mid[it.msg.message_id] = it
            self.nicks.setdefault(it.msg.sender_id, it.msg.nick)
        merged = items + self.items
        merged.sort(key=lambda it: it.key)  # two sorted runs: one linear merge
        self.items = merged
        self.keys = [it.key for it in merged]
        for near in merged[len(items) - 1 : len(items) + 2]:  # where old meets new: day separators may change
            near.touch()
        self.first_moved = 0
        self._show_notices()
        self._quote_all(items)
        return len(items)

    def append(self, messages: Iterable[ev.ChatMessage], upper: tuple | None) -> int:
        """Newer messages (the next page below a window around a search result) merged in by key; ``upper``:
        the new last loaded key (None: the end of the log is reached). Returns how many were new."""
        self.upper = upper
        items = [self._item(m) for m in messages if m.message_id not in self.by_mid and not m.hidden]
        if not items:
            return 0
        for it in items:
            self.by_mid[it.msg.message_id] = it
            self.nicks.setdefault(it.msg.sender_id, it.msg.nick)
            self.last_lamport = max(self.last_lamport, it.key[0])
        merged = self.items + items
        merged.sort(key=lambda it: it.key)
        self.items = merged
        self.keys = [it.key for it in merged]
        self._moved(min(self.index_of(it) for it in items))
        self._show_notices()
        self._quote_all(items)
        return len(items)

    def add_message(self, msg: ev.ChatMessage, now_ms: int = 0) -> MsgItem | None:
        """MessageShown: a message to show at once (own, delivered, or waiting on dependencies). None when it
        is beyond what is loaded (:attr:`upper`): it is shown when the view pages down to it; None too for an
        edit, deletion or reaction shown on its message (:attr:`~sdschat.node.events.ChatMessage.hidden`)."""
        self.nicks[msg.sender_id] = msg.nick
        if msg.hidden:
            self._drop(msg.message_id)
            return None
        old = self.by_mid.get(msg.message_id)
        if old is not None:
            old.msg = msg
            self._update(old)
            return old
        if self.upper is not None and msg.log_key > self.upper:
            return None
        self.last_lamport = max(self.last_lamport, msg.lamport_timestamp)
        if not msg.own:
            if msg.lamport_timestamp < self.online_from:
                self._caught.add(msg.message_id)
            else:
                self._burst = False
        item = self._item(msg)
        self.by_mid[msg.message_id] = item
        self._insert(item)
        self._quote_all((item,))
        marker = self._owner.get(msg.message_id)
        if item.catch_up:
            self._caught_up(item, marker)
        elif marker is not None:  # it was counted as missing (or lost): it is here now
            marker.pending.discard(msg.message_id)
            marker.lost.discard(msg.message_id)
            del self._owner[msg.message_id]
            self._settle(marker)
        return item

    def came_online(self, now_ms: int) -> None:
        """The view follows the channel live from ``now_ms`` (wall-clock ms) on: shown connected, or connected
        again. A catch-up still loading goes on; a finished one keeps its summary line and the next starts anew."""
        self.online_from = now_ms
        self._burst = True
        if self.catch_up is not None and not self.catch_up.loading:
            self.catch_up = None

    def _batch(self) -> CatchUpItem:
        batch = self.catch_up
        if batch is None:  # until it brings a message: below the newest of others, where what it brings goes
            last = next((it for it in reversed(self.items) if type(it) is MsgItem and not it.msg.own), None)
            at = (last.key[0], last.key[1]) if last else (0, "")
            batch = self.catch_up = CatchUpItem((*at, 2, next(self._seq)))
        if batch not in self._catch_ups:
            self._catch_ups.append(batch)
            self._insert(batch)
        return batch

    def _caught_up(self, item: MsgItem, marker) -> None:
        """``item`` arrived as catch-up: its catch-up counts it (and, if a gap marker counted it as missing, that
        marker's whole gap: history being fetched, not a gap)."""
        batch = self._batch()
        batch.count += 1
        mid = item.msg.message_id
        if isinstance(marker, MarkerItem):
            for other in marker.pending | marker.lost:
                self._owner[other] = batch
            batch.pending |= marker.pending
            batch.lost |= marker.lost
            marker.pending.clear()
            marker.lost.clear()
            self._settle(marker)
        elif marker is not None:  # this catch-up (or an earlier one) counted it
            marker.pending.discard(mid)
            marker.lost.discard(mid)
            self._update(marker)
        batch.pending.discard(mid)
        batch.lost.discard(mid)
        self._owner.pop(mid, None)
        if batch.count == 1 or item.key > (batch.key[0], batch.key[1], 1):  # just below the newest it brought
            self._remove(batch)
            batch.key = (item.key[0], item.key[1], 2, next(self._seq))
            self._insert(batch)
        else:
            self._update(batch)

    def set_state(self, mid: str, state: str, possible_acks: int = 0, resends: int = 0) -> MsgItem | None:
        """AckStateChanged."""
        item = self.by_mid.get(mid)
        if item is None:
            return None
        m = item.msg
        if (m.state, m.possible_acks, m.resends) == (state, possible_acks, resends):
            return item
        item.msg = dataclasses.replace(m, state=state, possible_acks=possible_acks, resends=resends)
        self._update(item)
        return item

    def changed(self, msg: ev.ChatMessage) -> MsgItem | None:
        """MessageChanged: a message shown before is edited, deleted or reacted to (its line repaints, and the
        quotes of its replies), or an edit, deletion or reaction changed state: applied, it leaves the view (its
        message shows it); waiting, lost or refused, it is a line of its own. None when it is not shown here."""
        if msg.hidden:
            self._drop(msg.message_id)
            return None
        item = self.by_mid.get(msg.message_id)
        if item is None:
            if msg.target is None:  # not loaded (older than the page, or beyond the window): read when paged in
                return None
            return self.add_message(msg)
        ack = item.msg  # (the acknowledgement state as last told: the node's copy may be a step behind or ahead)
        item.msg = dataclasses.replace(msg, state=ack.state, possible_acks=ack.possible_acks, resends=ack.resends)
        self._update(item)
        if not msg.own:
            item.mention = not msg.deleted and mentions(msg.text, self.highlight)
        quote = self._quote_of(item)
        for other in self.items:
            if type(other) is MsgItem and other.msg.reply_to == msg.message_id:
                self._set_quote(other, quote)
        return item

    def _drop(self, mid: str) -> None:
        """Take message ``mid``'s line out (an applied edit, deletion or reaction), if it is shown."""
        item = self.by_mid.pop(mid, None)
        if item is None:
            return
        if self.cursor is item:
            self.cursor = None
        self._remove(item)

    def repaired(self, mid: str, via: str, by: str | None, highlight_until_ms: int) -> MsgItem | None:
        """MessageRepaired: tag the message and highlight it for a while (a catch-up message: its catch-up notes
        where it came from instead; None then)."""
        item = self.by_mid.get(mid)
        if item is None:
            return None
        if item.catch_up:
            batch = self.catch_up
            if batch is not None:
                batch.via[mid] = (via, item.msg.sender_id if via == "resend" else by)
                self._update(batch)
            return None
        item.repaired_via = via
        item.repaired_by = by
        item.highlight_until_ms = highlight_until_ms
        self._update(item)
        return item

    def unhighlight(self, mid: str) -> None:
        item = self.by_mid.get(mid)
        if item is not None and item.highlight_until_ms:
            item.highlight_until_ms = 0
            self._update(item)

    # ---------------------------------------------------------------- gaps

    def gap_opened(self, anchor: str, ids: Iterable[str], senders: Iterable[str] = ()) -> MarkerItem | None:
        """GapOpened: ``anchor`` arrived but ``ids`` did not (ids already shown or counted are skipped)."""
        ids = tuple(ids)
        new = [i for i in ids if i not in self.by_mid and i not in self._owner]
        item = self.by_mid.get(anchor) if anchor else None
        fetching = item.catch_up if item is not None else not anchor and self._burst  # history being fetched
        if fetching:
            if new:
                fetched = self._batch()
                fetched.pending.update(new)
                self._owner.update(dict.fromkeys(new, fetched))
                self._update(fetched)
            return None
        batch = self.catch_up
        if item is not None and batch is not None and not batch.count:  # what the burst took is a live gap after all
            taken = [i for i in ids if self._owner.get(i) is batch]
            for i in taken:
                del self._owner[i]
            batch.pending.difference_update(taken)
            new += taken
            self._drop_if_empty(batch)
        marker = self._anchored.get(anchor) if anchor else None
        if not new:
            return marker
        created = marker is None
        if marker is None:
            key: tuple
            if item is not None:
                key = (item.key[0], item.key[1], 0, next(self._seq))
            else:  # a gap named by a sync frame: no message waits on it yet; mark it at the bottom
                key = (self.last_lamport, _FLOATING, next(self._seq))
            marker = MarkerItem(key, anchor)
            if anchor:
                self._anchored[anchor] = marker
        for mid in new:
            marker.pending.add(mid)
            self._owner[mid] = marker
        marker.senders.update(s for s in senders if s)
        if created:
            self._insert(marker)
        else:
            self._update(marker)
        return marker

    def gap_closed(self, anchor: str, lost: Iterable[str] = ()) -> None:
        """GapClosed: ``anchor`` is delivered now (``lost``: dependencies it went without)."""
        item = self.by_mid.get(anchor)
        if item is not None and item.msg.state == ev.WAITING:
            self.set_state(anchor, ev.RECEIVED)
        lost = [m for m in lost if m not in self.by_mid]
        for mid in lost:
            self._parent_lost(mid)
            owner = self._owner.get(mid)
            if owner is not None:
                if mid in owner.pending:
                    owner.pending.discard(mid)
                    owner.lost.add(mid)
                    self._settle(owner)
            elif item is not None and item.catch_up and self.catch_up is not None:
                self.catch_up.lost.add(mid)
                self._owner[mid] = self.catch_up
                self._update(self.catch_up)
            elif item is not None:  # a loss nobody counted (e.g. from before this view opened)
                marker = self._anchored.get(anchor)
                if marker is None:
                    marker = MarkerItem((item.key[0], item.key[1], 0, next(self._seq)), anchor)
                    self._anchored[anchor] = marker
                    marker.lost.add(mid)
                    self._owner[mid] = marker
                    self._insert(marker)
                else:
                    marker.lost.add(mid)
                    self._owner[mid] = marker
                    self._settle(marker)

    def message_lost(self, mid: str, sender: str | None) -> None:
        """MessageLost: ``mid`` was declared irretrievably lost."""
        self._parent_lost(mid)
        marker = self._owner.get(mid)
        if marker is None or mid not in marker.pending:
            return
        marker.pending.discard(mid)
        marker.lost.add(mid)
        if sender and isinstance(marker, MarkerItem):
            marker.senders.add(sender)
        self._settle(marker)

    def _drop_if_empty(self, batch: CatchUpItem) -> None:
        if not (batch.count or batch.pending or batch.lost):
            self._remove(batch)
            self._catch_ups.remove(batch)
            self.catch_up = None

    def _settle(self, marker: MarkerItem | CatchUpItem) -> None:
        if isinstance(marker, CatchUpItem):  # its line stays: it becomes the summary
            self._update(marker)
        elif marker.kind is None:
            if marker.anchor and self._anchored.get(marker.anchor) is marker:
                del self._anchored[marker.anchor]
            for mid in [m for m, owner in self._owner.items() if owner is marker]:
                del self._owner[mid]
            self._remove(marker)
        else:
            self._update(marker)

    # ------------------------------------------------------------- replies

    def _quote_all(self, items: Iterable[MsgItem]) -> None:
        """Quotes for the replies among ``items`` and for the replies that waited for one of them."""
        for it in items:
            waiting = self._replies.pop(it.msg.message_id, None)
            if waiting:
                for reply in waiting:
                    self._set_quote(reply, self._quote_of(it))
            parent = it.msg.reply_to
            if parent:
                known = self.by_mid.get(parent)
                if known is not None:
                    it.quote = self._quote_of(known)
                else:
                    owner = self._owner.get(parent)
                    it.quote = (QUOTE_LOST,) if owner is not None and parent in owner.lost else (QUOTE_MISSING,)
                    self._replies.setdefault(parent, []).append(it)
                    if owner is None:
                        self.unresolved.add(parent)

    @staticmethod
    def _quote_of(parent: MsgItem) -> tuple:
        return _quote(parent.msg)

    def _set_quote(self, reply: MsgItem, quote: tuple) -> None:
        if reply.quote != quote:
            reply.quote = quote
            self._update(reply)

    def parent_found(self, msg: ev.ChatMessage) -> None:
        """A parent read from the database (older than what is loaded): quote it in the replies that wait."""
        self.unresolved.discard(msg.message_id)
        for reply in self._replies.pop(msg.message_id, ()):
            self._set_quote(reply, _quote(msg))

    def _parent_lost(self, mid: str) -> None:
        for reply in self._replies.get(mid, ()):
            self._set_quote(reply, (QUOTE_LOST,))

    # -------------------------------------------------------------- cursor

    def select(self, item: MsgItem | None) -> None:
        """Put the message cursor on ``item`` (None: take it away)."""
        if self.cursor is item:
            return
        if self.cursor is not None:
            self.cursor.selected = False
            self._repaint(self.cursor)
        self.cursor = item
        if item is not None:
            item.selected = True
            self._repaint(item)

    def _repaint(self, item: Item) -> None:
        """Same height, new look: repaint only."""
        item.version += 1
        self.updated.add(item)

    def markers(self) -> list[MarkerItem]:
        return [it for it in self.items if isinstance(it, MarkerItem)]

    # -------------------------------------------------------------- notices

    def mark_unread(self, since_ms: int) -> UnreadItem | None:
        """Put the "new since you left" line above the first message of others received after ``since_ms``
        (replacing an earlier one); ``None`` when nothing new is loaded. Membership changes, edits, deletions and
        reactions are not news: not counted (as in the channel's unread count)."""
        self.clear_unread()
        new = [
            it
            for it in self.items
            if type(it) is MsgItem
            and not it.msg.own
            and it.msg.received_at_ms > since_ms
            and it.msg.kind not in ev.MEMBERSHIP_KINDS
            and it.msg.kind not in ev.MESSAGE_ACTION_KINDS
        ]
        if not new:
            return None
        first = new[0]
        # just above the message (and above a gap marker anchored to it: those keys end in 0 and a counter)
        self.unread_line = UnreadItem((first.key[0], first.key[1], -1), len(new))
        self._insert(self.unread_line)
        return self.unread_line

    def clear_unread(self) -> None:
        if self.unread_line is not None:
            self._remove(self.unread_line)
            self.unread_line = None

    def notice(self, text: str, at_ms: int, error: bool = False) -> NoticeItem:
        item = NoticeItem((self.last_lamport, _NOTICE, next(self._seq)), text, at_ms, error)
        self._insert(item)
        self._notices.append(item)
        del self._notices[:-KEPT_NOTICES]
        return item

    def _show_notices(self) -> None:
        """Put back the kept local lines that fall in what is loaded (from its first item to the Lamport time
        of ``upper``) and are not shown; a line older than the page comes back with the page it belongs to,
        once it is scrolled up to."""
        first = self.keys[0] if self.keys else None
        for line in self._notices:
            if (first is not None and line.key < first) or (self.upper is not None and line.key[0] > self.upper[0]):
                continue
            i = bisect.bisect_left(self.keys, line.key)
            if i < len(self.keys) and self.keys[i] == line.key:
                continue
            line.touch()
            self._insert(line)
