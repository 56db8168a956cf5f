"""One participant's chat: message view, status line, input, side panel, link controls.

The pane owns its node's UI state. Node events reach it only as
:class:`~sdschat.ui.messages.NodeEventsReady` (posted by the bridge); the
handler drains the batch and applies it to the timeline, then commits the
view once. User actions (send, commands, link controls) call the node's
public API; failures become :class:`~sdschat.ui.messages.UiError`.

On the message cursor, ``e`` edits your own line (the input takes its text, a
bar says so; Enter sends the edit, Escape cancels), ``d`` deletes (after a
yes-or-no question: your own line, or any as an admin of the channel) and ``+``
reacts (a picker; the node toggles). What the node refuses is one line, as for
a command.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Iterator
from datetime import tzinfo

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.timer import Timer
from textual.widgets import Static
from textual.worker import Worker, WorkerState

from sdschat.node import PayloadError, UserError
from sdschat.node import events as ev

from .. import slash
from ..bridge import NodeBridge
from ..layout import channel_label, clean_text
from ..links import OPENER_VARIABLE, find_links, opener_command, start_opener
from ..mentions import mentions, names_pattern
from ..messages import NodeEventsReady, UiError
from ..notify import tell_mentions
from ..theme import nick_style
from ..timeline import MsgItem
from .impairment_panel import ImpairmentPanel
from .input_bar import ChatInput, CommandHint
from .message_view import MessageView
from .side_panel import PanelState, SidePanel, connection_text, link_summary

__all__ = ["ChatPane", "StatusLine"]

log = logging.getLogger("sdschat.ui")

HIGHLIGHT_S = 6.0  # how long a repaired message stays highlighted
TYPING_SHOW_S = 4.0  # how long someone's "typing…" stays up
TYPING_SEND_EVERY_S = 3.0  # rate limit of our own typing notices
PANEL_EVERY_S = 1.0  # the side panel's counters are redrawn at most this often
#: a busy channel: more than BUSY_LINES lines of others shown in a second. Its new lines are then shown together
#: every PACE_S (a frame redraws the whole scrolled view, ~9 ms at 140x40: at 10 lines a second that was 20% of a
#: core, bench/window_soak.py); below that rate, and for your own lines, each is shown at once (send-to-shown
#: p99 < 20 ms, bench/window_channels.py). Nobody reads nine lines a second one by one.
BUSY_LINES = 8
PACE_S = 1.0
HISTORY_PAGE = 400  # messages read from the database at a time: the first screen, then each page scrolled back


class StatusLine(Static):
    """Under the history: who is typing, and "↓ N new" when scrolled up."""

    DEFAULT_CSS = """
    StatusLine { height: 1; padding: 0 1; color: $text-muted; }
    """

    _shown: Text | None = None

    def show(self, typing: list[str], new_below: int) -> None:
        t = Text(no_wrap=True, overflow="ellipsis")
        if typing:
            if len(typing) == 1:
                t.append(f"{typing[0]} is typing…", "italic")
            elif len(typing) == 2:
                t.append(f"{typing[0]} and {typing[1]} are typing…", "italic")
            else:
                t.append(f"{len(typing)} people are typing…", "italic")
        if new_below:
            if t:
                t.append("   ")
            t.append(f"↓ {new_below} new (Ctrl+End)", "bold reverse")
        if t != self._shown:  # called every second and on every batch: repaint only a change
            self._shown = t
            self.update(t, layout=False)  # one line, always


class ChatPane(Vertical):
    BINDINGS = [Binding("alt+up", "message_cursor", "message cursor", show=False)]

    class TopicChanged(Message):
        """The channel's topic changed (``pane.node.topic``): for the header."""

        def __init__(self, pane: ChatPane) -> None:
            super().__init__()
            self.pane = pane

    class NickChanged(Message):
        def __init__(self, pane: ChatPane, nick: str) -> None:
            super().__init__()
            self.pane = pane
            self.nick = nick

    class Activity(Message):
        """New messages from others (``new``), or the connection changed: for the channel list."""

        def __init__(self, pane: ChatPane, new: int, mentions: int = 0) -> None:
            super().__init__()
            self.pane = pane
            self.new = new
            #: of the new ones, how many name you
            self.mentions = mentions

    class WindowCommand(Message):
        """``/join``, ``/part``, ``/invite``: about the window's channels, so the app's to run."""

        def __init__(self, pane: ChatPane, name: str, arg: str) -> None:
            super().__init__()
            self.pane = pane
            self.name = name
            self.arg = arg

    DEFAULT_CSS = """
    ChatPane { height: 1fr; }
    ChatPane #pane-main { height: 1fr; }
    ChatPane #pane-chat { width: 1fr; min-width: 12; height: 1fr; }
    ChatPane #pane-title { height: 1; padding: 0 1; background: $boost; }
    ChatPane #reply-bar { height: 1; padding: 0 1; display: none; color: $text-muted; }
    ChatPane #reply-bar.-shown { display: block; }
    ChatPane ChatInput { border-top: hkey $surface-lighten-2; }
    ChatPane:focus-within ChatInput { border-top: hkey $accent; }
    """

    def __init__(
        self,
        node,
        *,
        compact: bool = False,
        clock: Callable[[], float] = time.time,
        tz: tzinfo | None = None,
        blink: bool = True,
        lazy: bool = False,
        notify=None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self.node = node
        #: read the history when first shown (:meth:`ensure_loaded`), not when mounted: a window of many
        #: channels opens on the one on screen
        self.lazy = lazy
        self._loaded = False
        #: history reads in flight whose page replaces or extends the view (:meth:`_reading`): the node's events
        #: wait in the bridge meanwhile, and a drain put off for them (``_put_off``) is posted once the page is in
        self._reads = 0
        self._put_off = False
        #: called the moment the pane begins listening to its node (the channel window hands the unread count
        #: over to the pane then: ``ProfileClient.listening``)
        self.on_listening: Callable[[], None] | None = None
        #: how to tell the person they were mentioned: ``bell`` / ``desktop`` flags (the profile's
        #: notifications); None: highlight only (the demo, ``sdschat chat``). (Not ``notify``: that is the
        #: widget's toast.)
        self.notifications = notify
        #: ``/mute``: mentions are highlighted and counted, but neither ring nor notify
        self.muted = False
        #: wall-clock ms when the window last switched away from this channel (None: not yet shown)
        self.left_at_ms: int | None = None
        self.compact = compact
        self.clock = clock
        self.tz = tz
        self.blink = blink
        self.bridge = NodeBridge(node, self)
        self.connection = "connecting"
        self.connection_detail = ""
        self._typing: dict[str, tuple[str, float]] = {}
        self._last_typing_sent = 0.0
        #: our presence as last told here (a change is one line: "you are marked away", "you are back")
        self._presence_shown: tuple[str, str] = ("online", "")
        self._health: dict = {}
        self._was_connected = False
        self._panel_at = 0.0
        self._panel_timer: Timer | None = None
        self._busy = False
        self._pace_timer: Timer | None = None
        self._shown_at: deque[float] = deque(maxlen=BUSY_LINES + 1)  # when the latest lines of others were shown
        #: the message the next line answers (``r`` on the message cursor), until sent or Escape
        self.replying: ev.ChatMessage | None = None
        #: our line whose new text the input holds (``e`` on the message cursor), until sent or Escape
        self.editing: ev.ChatMessage | None = None

    # ---------------------------------------------------------- compose

    def compose(self) -> ComposeResult:
        if self.compact:
            yield Static("", id="pane-title")
        with Horizontal(id="pane-main"):
            with Vertical(id="pane-chat"):
                yield MessageView(tz=self.tz, clock=self.clock)
                yield StatusLine("")
                yield CommandHint("")
                yield Static("", id="reply-bar")
                yield ChatInput(
                    placeholder=f"Message {self.label} as {self.node.nick}  (/help)",
                    blink=self.blink,
                )
            if not self.compact:
                yield SidePanel()
        if self.compact:
            yield SidePanel(compact=True)
        yield ImpairmentPanel()

    @property
    def label(self) -> str:
        """The channel as the window names it: ``#team``, or ``@bob`` for a two-member channel with bob."""
        return channel_label(self.channel_name, self.node.nick)

    @property
    def channel_name(self) -> str:
        key = getattr(self.node, "key", None)
        return getattr(key, "channel_name", "") or "chat"

    @property
    def view(self) -> MessageView:
        return self.query_one(MessageView)

    @property
    def input(self) -> ChatInput:
        return self.query_one(ChatInput)

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    def _highlight(self) -> None:
        """What names you: your nick, and the profile's highlight words."""
        words = getattr(self.notifications, "highlight", ())
        self.view.timeline.highlight = names_pattern([self.node.nick, *words])

    def member_names(self) -> list[str]:
        """Who ``@`` + Tab completes: the nicks seen in this channel, not yours."""
        return sorted(
            {p.nick for p in self.node.participants() if p.nick and p.nick != self.node.nick}, key=str.casefold
        )

    async def on_mount(self) -> None:
        self._highlight()
        self.input.names = self.member_names
        self.input.pressed = self.touched
        view = self.view
        for p in self.node.participants():
            if p.nick:
                view.timeline.nicks[p.participant_id] = p.nick
        # listening before the history is read: what the node shows while the page loads is applied after it, in
        # order (a message already on the page is updated in place), never lost between the two
        self.bridge.attach()
        if self.on_listening is not None:
            self.on_listening()
        if not self.lazy:
            await self.ensure_loaded()
        self._health = dict(self.node.health())
        self.connection = str(self._health.get("connection", "connecting"))
        self._was_connected = self.connection == "connected"
        if self._was_connected:  # live from here: what arrives written before now is catch-up (sdschat.ui.timeline)
            view.timeline.came_online(self._online_since())
        self.refresh_panel()
        self.query_one(ImpairmentPanel).show_settings(self.node.impairment)
        self.set_interval(1.0, self._tick)
        self.post_message(self.Activity(self, 0))

    async def ensure_loaded(self, at_least: int = 0) -> None:
        """The channel's last page (older pages load as the person scrolls up; ``at_least`` messages, so that
        many unread ones are all there), and the gaps still open in it (after a restart: what the live events
        reported before). Events applied before replace nothing: the page holds them (the node flushes first);
        those that come during the read wait for the page (:meth:`_reading`)."""
        if self._loaded:
            return
        self._loaded = True
        limit = max(HISTORY_PAGE, at_least)
        with self._reading():
            page = await self.node.history(limit=limit)
            self.view.load(page, self.node.open_gaps(), more_above=len(page) >= limit)

    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        """Around a history read and the view change its page makes: what the node shows during the read is
        applied after the page is in, in order, never to the view the page replaces. A line that arrives then
        is not in the page (read before it was written), and would otherwise be lost with the old view, or
        dropped as beyond a page that ends before it."""
        self._reads += 1
        try:
            yield
        finally:
            self._reads -= 1
            if not self._reads and self._put_off:
                self._put_off = False
                self.post_message(NodeEventsReady(self.bridge))

    async def open_at_unread(self, since_ms: int | None, unread: int) -> None:
        """Shown again: load if not yet, then (with ``since_ms``) mark "N new since you left" above the first
        message that arrived after it and scroll there; the view says ``ReachedBottom`` once all is seen."""
        await self.ensure_loaded(at_least=unread + 10)
        self.call_after_refresh(self._mark_unread, since_ms)

    def _mark_unread(self, since_ms: int | None) -> None:
        view = self.view
        if since_ms is not None:
            view.show_unread(since_ms)
        if view.at_bottom:
            view.post_message(view.ReachedBottom(view))

    def on_message_view_need_older(self, message: MessageView.NeedOlder) -> None:
        message.stop()
        self.run_worker(self._load_older(), group="history", exclusive=True, exit_on_error=False)

    async def _load_older(self) -> None:
        view = self.view
        oldest = next((it for it in view.timeline.items if isinstance(it, MsgItem)), None)
        if oldest is None:
            return
        page = await self.node.history(limit=HISTORY_PAGE, before=oldest.msg.log_key)
        view.prepend(page, more_above=len(page) >= HISTORY_PAGE)

    def on_message_view_need_newer(self, message: MessageView.NeedNewer) -> None:
        message.stop()
        self.run_worker(self._load_newer(), group="history", exclusive=True, exit_on_error=False)

    async def _load_newer(self) -> None:
        view = self.view
        newest = next((it for it in reversed(view.timeline.items) if isinstance(it, MsgItem)), None)
        if newest is None or not view.more_below:
            return
        with self._reading():
            page = await self.node.history(limit=HISTORY_PAGE, after=newest.msg.log_key)
            view.append(page, more_below=len(page) >= HISTORY_PAGE)
        self.find_parents()

    async def show_latest(self) -> None:
        """Ctrl+End: the end of the channel (from a window around a search result: its last page again)."""
        view = self.view
        if view.more_below:
            self._loaded = False
            await self.ensure_loaded()
        view.scroll_to_latest()

    async def jump_to(self, message_id: str, key: tuple[int, str]) -> bool:
        """Show the message ``message_id`` (log key ``key``) under the message cursor, mid-screen, with its
        neighbours loaded around it (a search result); False if it is not in this channel."""
        await self.ensure_loaded()
        view = self.view
        item = view.timeline.by_mid.get(message_id)
        if item is None:
            with self._reading():
                around, older, newer = await self.node.around(key, limit=HISTORY_PAGE // 2)
                upper = around[-1].log_key if newer and around else None
                view.load(around, self.node.open_gaps(), more_above=older, upper=upper)
            item = view.timeline.by_mid.get(message_id)
            self.find_parents()
        if item is None:
            return False
        view.focus()
        self.call_after_refresh(self._center, item)
        return True

    def _center(self, item: MsgItem) -> None:
        view = self.view
        if view.timeline.by_mid.get(item.msg.message_id) is item:
            view.select(item, center=True)
            view.want_pages()

    def find_parents(self) -> None:
        """Replies whose parent is not loaded: read the parents from the database (older history)."""
        if self.view.timeline.unresolved:
            self.run_worker(self._find_parents(), group="parents", exit_on_error=False)

    async def _find_parents(self) -> None:
        tl = self.view.timeline
        for mid in list(tl.unresolved):
            tl.unresolved.discard(mid)
            parent = await self.node.message(mid)
            if parent is not None:
                tl.parent_found(parent)
        self.view.commit()

    # ---------------------------------------------------------- message cursor

    def action_message_cursor(self) -> None:
        self.screen.set_focus(self.view)  # now, not at the next idle: the keys typed with Up follow it
        self.view.action_cursor(-1)

    def on_chat_input_cursor_up(self, message: ChatInput.CursorUp) -> None:
        message.stop()
        self.action_message_cursor()
        self.input.pass_on()  # the keys that came with the Up, to the message cursor

    def on_message_view_leave(self, message: MessageView.Leave) -> None:
        message.stop()
        box = self.input
        box.focus()
        if message.text:
            box.insert(message.text)

    def on_message_view_gap_picked(self, message: MessageView.GapPicked) -> None:
        """``i`` on a gap marker: the gap list, only that gap's ids (the gap inspector)."""
        message.stop()
        from ..screens.gaps import GapsScreen

        self.app.push_screen(GapsScreen(self.node, tz=self.tz, ids=message.ids))

    def on_message_view_picked(self, message: MessageView.Picked) -> None:
        message.stop()
        m = message.message
        if message.action == "copy":
            self.app.copy_to_clipboard(m.text)  # OSC 52: the terminal's clipboard, over SSH too
            self.app.notify(f"copied {len(m.text)} characters", timeout=2)
            return
        if message.action == "inspect":
            from ..screens.inspector import InspectorScreen

            self.app.push_screen(InspectorScreen(self.node, m.message_id, tz=self.tz))
            return
        if message.action == "open":
            self.open_link_in(m)
            return
        if message.action in ("edit", "delete", "react"):
            self.act_on(message.action, m)
            return
        self.cancel_edit()
        self.replying = m
        self._bar("↳ replying to ", m)
        self.input.focus()

    def open_link_in(self, m: ev.ChatMessage) -> None:
        """``o``: open the link of a message (the links as painted: of its text as shown); several: ask which."""
        urls = list(dict.fromkeys(url for _, _, url in find_links(clean_text(m.text))))
        if not urls:
            self.app.notify("no link in this message", timeout=3)
        elif len(urls) == 1:
            self.open_link(urls[0])
        else:
            from ..screens.links import LinksScreen

            def chosen(url: str | None) -> None:
                if url is not None:
                    self.open_link(url)

            self.app.push_screen(LinksScreen(urls), chosen)

    def open_link(self, url: str) -> None:
        """Hand ``url`` to the program that opens links here (:func:`~sdschat.ui.links.opener_command`); with
        none, copy it (OSC 52) and say how to set one. Whatever happens is one line, never a traceback."""
        try:
            argv = opener_command()
        except ValueError as exc:
            self.app.notify(f"{OPENER_VARIABLE}: {exc}", severity="error", timeout=6, markup=False)
            return
        if argv is None:
            self.app.copy_to_clipboard(url)
            self.app.notify(
                f"no program to open links here (set {OPENER_VARIABLE}); the link is copied", timeout=6, markup=False
            )
            return
        try:
            start_opener(argv, url)
        except OSError as exc:
            why = exc.strerror or str(exc)
            self.app.notify(f"could not start {argv[0]}: {why}", severity="error", timeout=6, markup=False)
            return
        self.app.notify(f"opening {url}", timeout=4, markup=False)

    def cancel_reply(self) -> bool:
        """Escape: no reply (nor edit) is being written any more; whether one was."""
        if self.cancel_edit():
            return True
        if self.replying is None:
            return False
        self.replying = None
        self.query_one("#reply-bar", Static).remove_class("-shown")
        return True

    # ---------------------------------------------------------- edit, delete, react

    def act_on(self, action: str, m: ev.ChatMessage) -> None:
        """``e``, ``d`` or ``+`` on message ``m``: what the node would refuse is told at once, as one line."""
        why = self._refusal(action, m)
        if why:
            self.notice(why, error=True)
        elif action == "edit":
            self.start_edit(m)
        elif action == "delete":
            self.confirm_delete(m)
        else:
            self.pick_reaction(m)

    def _refusal(self, action: str, m: ev.ChatMessage) -> str:
        """Why ``action`` cannot be done to ``m`` here ("": it can; the node checks again, and so does everyone)."""
        what = {"edit": "edited", "delete": "deleted", "react": "reacted to"}[action]
        if m.kind not in ("msg", "me") or m.target is not None:
            return f"only a chat line can be {what}"
        if m.deleted:
            return "the message was deleted"
        if action == "edit" and not m.own:
            return "only your own messages can be edited"
        if action == "delete" and not m.own and not self._admin():
            return "only your own messages can be deleted (an admin of the channel can delete any)"
        return ""

    def _admin(self) -> bool:
        is_admin = getattr(self.node, "is_admin", None)
        return bool(is_admin is not None and is_admin(self.node.participant_id))

    def _bar(self, head: str, m: ev.ChatMessage, *, who: bool = True) -> None:
        """The line above the input while a reply or an edit is being written: ``head``, then the message (with
        its author's nick unless ``who`` is False)."""
        bar = self.query_one("#reply-bar", Static)
        quote = Text(no_wrap=True, overflow="ellipsis")
        quote.append(head, "italic")
        if who:
            quote.append(clean_text(m.nick), nick_style(m.sender_id))  # a peer's text: no escape sequences
        quote.append((": " if who else "") + clean_text(" ".join(m.text.split())), "italic")
        quote.append("   (Esc: cancel)", "dim")
        bar.update(quote)
        bar.add_class("-shown")

    def start_edit(self, m: ev.ChatMessage) -> None:
        """``e`` on our line: the input holds its text to change; Enter sends the edit, Escape cancels."""
        self.replying = None
        self.editing = m
        self._bar("✎ editing: ", m, who=False)
        box = self.input
        box.load_text(m.text)
        box.move_cursor(box.document.end)
        box.focus()

    def cancel_edit(self) -> bool:
        """No edit is being written any more (its text leaves the input); whether one was."""
        if self.editing is None:
            return False
        self.editing = None
        self.query_one("#reply-bar", Static).remove_class("-shown")
        self.input.clear()
        return True

    def send_edit(self, text: str) -> None:
        m = self.editing
        if m is None:
            return
        self.editing = None
        self.query_one("#reply-bar", Static).remove_class("-shown")
        if text == m.text:
            self.notice("not edited: the text is the same")
            return
        self.run_worker(self._act(self.node.edit(m.message_id, text), "not edited"), group="send", exit_on_error=False)

    def confirm_delete(self, m: ev.ChatMessage) -> None:
        """``d``: ask first (a deletion cannot be taken back: the text leaves every member's database)."""
        from ..screens.confirm import ConfirmScreen

        whose = "your message" if m.own else f"{clean_text(m.nick)}'s message, as an admin of the channel"
        subject = Text(no_wrap=True, overflow="ellipsis")
        subject.append(clean_text(m.nick), nick_style(m.sender_id))
        subject.append(": " + clean_text(" ".join(m.text.split())))

        def answered(yes: bool | None) -> None:
            if yes:
                coro = self.node.delete(m.message_id)
                self.run_worker(self._act(coro, "not deleted"), group="send", exit_on_error=False)

        self.app.push_screen(ConfirmScreen(f"Delete {whose}?", subject, yes="delete", no="keep"), answered)

    def pick_reaction(self, m: ev.ChatMessage) -> None:
        """``+``: pick a reaction; one of ours picked again is taken back (the node toggles)."""
        from ..screens.react import ReactScreen

        me = self.node.participant_id
        mine = [emoji for emoji, who in m.reactions if me in who]

        def picked(emoji: str | None) -> None:
            if emoji:
                coro = self.node.react(m.message_id, emoji)
                self.run_worker(self._act(coro, "no reaction"), group="send", exit_on_error=False)

        self.app.push_screen(ReactScreen(mine), picked)

    async def _act(self, coro, failed: str) -> None:
        """Run an edit, deletion or reaction: what the node refuses is a notice; anything else a bug, logged."""
        try:
            await coro
        except (UserError, PayloadError) as exc:
            self.notice(f"{failed}: {exc}", error=True)
        except Exception as exc:
            log.exception("%s", failed)
            self.post_message(UiError(f"{failed}: {exc}", "send"))

    def on_unmount(self) -> None:
        self.bridge.detach()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """This pane's workers (sends, typing, export) catch their failures; anything else surfaces here."""
        if event.state == WorkerState.ERROR:
            error = event.worker.error
            self.post_message(UiError(f"{error.__class__.__name__}: {error}", event.worker.group or "worker"))

    # -------------------------------------------------------- node events

    def on_node_events_ready(self, message: NodeEventsReady) -> None:
        message.stop()
        self._apply_held()  # (a busy channel's bridge posts only for your own line: that never waits)

    def _apply_held(self) -> None:
        if self._reads:  # a history read is changing the view: after its page (_reading)
            self._put_off = True
            return
        if self._pace_timer is not None:
            self._pace_timer.stop()
            self._pace_timer = None
        events = self.bridge.drain()
        if not events:  # nothing came in the paced second: the next line is shown at once
            self._set_busy(False)
            return
        try:
            self.apply_events(events)
        except Exception as exc:  # never let one bad batch take the app down
            log.exception("applying node events failed")
            self.post_message(UiError(f"display error: {exc.__class__.__name__}: {exc}", "view"))
        shown = self._shown_at
        now = time.monotonic()
        lines = sum(1 for e in events if type(e) is ev.MessageShown and not e.message.own)
        shown.extend([now] * min(lines, BUSY_LINES + 1))
        busy = len(shown) > BUSY_LINES and now - shown[0] < 1.0
        if busy:  # what arrives in the next PACE_S is shown with the frame then
            self._pace_timer = self.set_timer(PACE_S, self._apply_held)
            if self._panel_timer is not None:  # the panel's counters in the same frame, not one of their own
                self.refresh_panel()
        self._set_busy(busy)

    def _online_since(self) -> int:
        """Since when the node follows the channel live (its last connection; a pane shown later counts from
        there, not from when it was drawn)."""
        return self.node.online_since_ms or self.now_ms()

    def _set_busy(self, busy: bool) -> None:
        if busy != self._busy:
            self._busy = self.bridge.hold = busy  # busy: the events gather until the paced frame
            self.input.cursor_blink = self.blink and not busy  # (each blink is a frame as well)

    def apply_events(self, events: list[ev.NodeEvent]) -> None:
        tl = self.view.timeline
        now = self.now_ms()
        connection = self.connection
        new = 0
        named: list[ev.ChatMessage] = []
        own = False
        panel = urgent = False
        typing = False
        for e in events:
            if type(e) is ev.MessageShown:
                item = tl.add_message(e.message, now)
                if e.message.kind in ev.MESSAGE_ACTION_KINDS:
                    pass  # shown on its message (or, waiting for it, as a line): not news, and no jump to the end
                elif e.message.own:
                    own = True
                elif e.message.kind in ev.MEMBERSHIP_KINDS:
                    pass  # shown in the log, but not news
                else:
                    new += 1
                    if item.mention if item is not None else mentions(e.message.text, tl.highlight):
                        named.append(e.message)
                    self._typing.pop(e.message.sender_id, None)
                    typing = True
            elif type(e) is ev.AckStateChanged:
                tl.set_state(e.message_id, e.state, e.possible_acks, e.resends)
            elif type(e) is ev.MessageChanged:
                self._message_changed(e.message)
            elif type(e) is ev.GapOpened:
                tl.gap_opened(e.message_id, e.missing, e.senders)
            elif type(e) is ev.GapClosed:
                tl.gap_closed(e.message_id, e.lost)
            elif type(e) is ev.MessageRepaired:
                if tl.repaired(e.message_id, e.via, e.by, now + int(HIGHLIGHT_S * 1000)) is not None:
                    self.set_timer(HIGHLIGHT_S, lambda mid=e.message_id: self._unhighlight(mid))
            elif type(e) is ev.MessageLost:
                tl.message_lost(e.message_id, e.sender_id)
            elif type(e) is ev.ParticipantSeen:
                if e.nick:
                    tl.nicks[e.participant_id] = e.nick
                panel = True
            elif type(e) is ev.PresenceChanged:
                if e.participant_id == self.node.participant_id:
                    self._own_presence(e.state, e.message)
                panel = True
            elif type(e) is ev.TypingSeen:
                if e.participant_id != self.node.participant_id:
                    self._typing[e.participant_id] = (clean_text(e.nick), self.clock() + TYPING_SHOW_S)
                    typing = True
            elif type(e) is ev.ConnectionChanged:
                self._connection_changed(e.state, e.detail, now)
                panel = urgent = True
            elif type(e) is ev.CountersChanged:
                self._health = dict(e.counters)
                panel = True
            elif type(e) is ev.MembershipChanged:
                self._membership_changed(e)
            elif type(e) is ev.TopicChanged:
                self.post_message(self.TopicChanged(self))
            elif type(e) is ev.NickClash:
                shown = self.node.names().get(e.participant_id) or e.nick
                self.notice(
                    f"{shown} goes by {'your nick' if e.mine else repr(e.nick) + ', as another member does'}: "
                    f"both are shown with the start of their fingerprint now (/whois {shown})",
                    error=e.mine,
                )
                panel = True
            elif type(e) is ev.NodeProblem:
                if e.what == "storage":
                    self.post_message(UiError(e.detail or "database write failed", "storage"))
                panel = True
            elif type(e) is ev.FrameRejected:
                panel = True
        view = self.view
        if own and view.more_below:  # sent from a window around a search result: back to the end
            self.run_worker(self.show_latest(), group="history", exclusive=True, exit_on_error=False)
        if own or new or tl.updated or tl.first_moved is not None:  # (a batch of counters changes no line)
            view.commit(new_messages=new, to_bottom=own)
        self.find_parents()
        if new or connection != self.connection:
            self.post_message(self.Activity(self, new, len(named)))
        if named:
            tell_mentions(self, named)
        if self.display:  # a background channel of the window: panel and status are redrawn when shown
            self._redraw_side(urgent, panel, typing)

    def _redraw_side(self, urgent: bool, panel: bool, typing: bool) -> None:
        if urgent:
            self.refresh_panel()
        elif panel:
            self._refresh_panel_soon()
        if typing:
            self.show_status()

    def _message_changed(self, m: ev.ChatMessage) -> None:
        """Edited, deleted, reacted to (or an action's state changed): its line repaints; an edit being written
        of a message deleted meanwhile stops."""
        self.view.timeline.changed(m)
        if m.deleted and self.editing is not None and self.editing.message_id == m.message_id:
            self.cancel_edit()
            self.notice("the message you were editing was deleted", error=True)

    def _connection_changed(self, state: str, detail: str, now: int) -> None:
        if state == self.connection:
            return
        self.connection, self.connection_detail = state, detail
        if state == "connected" and self._was_connected:
            self.view.timeline.notice("connected again: unacknowledged messages go out now", now)
        elif state == "disconnected" and self._was_connected:
            self.view.timeline.notice(f"disconnected: {detail or 'broker unreachable'}", now)
        if state == "connected":
            self._was_connected = True
            self.view.timeline.came_online(self._online_since())

    def _unhighlight(self, mid: str) -> None:
        self.view.timeline.unhighlight(mid)
        self.view.commit()

    # ------------------------------------------------------------ panels

    def _own_presence(self, state: str, message: str) -> None:
        """Ours changed (/away, /back, idling, typing): one line says so (we begin online: nothing to say then)."""
        shown = (state, message)
        if shown != self._presence_shown and state != "offline":
            self.notice(
                f"you are marked away{': ' + clean_text(message) if message else ''} (/back, or type, to return)"
                if state == "away"
                else "you are back"
            )
        self._presence_shown = shown

    def _presences(self, participants) -> dict:
        """Participant id -> its presence, ours and the participants' (a node without presence: none)."""
        of = getattr(self.node, "presence", None)
        if of is None:
            return {}
        return {pid: of(pid) for pid in [self.node.participant_id, *(p.participant_id for p in participants)]}

    def on_key(self, event) -> None:
        """Every key that reaches the pane (not stopped below it) says the person is here: back from an idle away."""
        self.touched()

    def touched(self) -> None:
        """The person is here: every node of theirs hears it (the window's channels share one identity; the
        demo's panes are different people, each its own)."""
        me = self.node.participant_id
        for pane in getattr(self.app, "panes", None) or [self]:
            active = getattr(pane.node, "active", None) if pane.node.participant_id == me else None
            if active is not None:
                active()

    def panel_state(self) -> PanelState:
        node = self.node
        participants = node.participants()
        return PanelState(
            nick=node.nick,
            participant_id=node.participant_id,
            channel=self.channel_name,
            broker_url=getattr(node, "broker_url", "") or "",
            connection=self.connection,
            connection_detail=self.connection_detail,
            health=self._health,
            participants=participants,
            presence=self._presences(participants),
            impairment=node.impairment,
            now_ms=self.now_ms(),
            tz=self.tz,
        )

    def _refresh_panel_soon(self) -> None:
        """Counters change with every frame: redraw the panel at most every ``PANEL_EVERY_S`` (it repaints only
        the lines that changed, but counters read four times a second are all a person can follow)."""
        if self._panel_timer is not None:
            return
        wait = self._panel_at + PANEL_EVERY_S - time.monotonic()
        if wait <= 0:
            self.refresh_panel()
        else:
            self._panel_timer = self.set_timer(wait, self.refresh_panel)

    def refresh_panel(self) -> None:
        if self._panel_timer is not None:
            self._panel_timer.stop()
            self._panel_timer = None
        self._panel_at = time.monotonic()
        state = self.panel_state()
        self.query_one(SidePanel).show(state)
        if self.compact:
            title = Text.assemble((state.nick, nick_style(state.participant_id)), "  ", connection_text(state))
            self.query_one("#pane-title", Static).update(title)

    def _tick(self) -> None:
        now = self.clock()
        expired = [pid for pid, (_, until) in self._typing.items() if until <= now]
        for pid in expired:
            del self._typing[pid]
        if not self.display:  # a background channel of the window: updated when shown
            return
        self.show_status()
        self.refresh_panel()

    def show_status(self) -> None:
        names = [nick for nick, _ in self._typing.values()]
        self.query_one(StatusLine).show(sorted(names), self.view.new_below)

    def on_message_view_new_below(self, message: MessageView.NewBelow) -> None:
        message.stop()
        self.show_status()

    def toggle_impairment(self, show: bool | None = None) -> None:
        panel = self.query_one(ImpairmentPanel)
        show = not panel.has_class("-shown") if show is None else show
        panel.set_class(show, "-shown")
        if show:
            panel.show_settings(self.node.impairment)

    @property
    def side_panel_shown(self) -> bool:
        """Whether the side panel is on screen (the width and F3 decide: app.tcss)."""
        return self.query_one(SidePanel).display

    def on_impairment_panel_changed(self, message: ImpairmentPanel.Changed) -> None:
        message.stop()
        self.set_impairment(**message.settings)

    def on_impairment_panel_invalid(self, message: ImpairmentPanel.Invalid) -> None:
        message.stop()
        self.post_message(UiError(message.text, "link"))

    def set_impairment(self, **settings) -> bool:
        """Change this participant's link (``/loss``, F2's fields ...); whether the node took it. The settings
        come checked (:mod:`sdschat.ui.usage`): a refusal here is the node's, anything else a bug."""
        try:
            self.node.set_impairment(**settings)
        except UserError as exc:
            self.post_message(UiError(str(exc), "link"))
            return False
        except Exception as exc:  # a message handler's too (F2): one bad setting must not take the app down
            log.exception("changing the link failed: %s", settings)
            self.post_message(UiError(f"link: {exc.__class__.__name__}: {exc}", "link"))
            return False
        self.view.timeline.notice(link_summary(self.node.impairment), self.now_ms())
        self.view.commit()
        self.query_one(ImpairmentPanel).show_settings(self.node.impairment)
        self.refresh_panel()
        return True

    # ------------------------------------------------------------- input

    def on_chat_input_typed(self, message: ChatInput.Typed) -> None:
        message.stop()
        self.touched()
        self.query_one(CommandHint).show_for(message.text)
        text = message.text
        if text.strip() and not text.startswith("/") and self.editing is None:
            now = self.clock()
            if now - self._last_typing_sent >= TYPING_SEND_EVERY_S:
                self._last_typing_sent = now
                self.run_worker(self._send_typing(), group="typing", exit_on_error=False)

    async def _send_typing(self) -> None:
        try:
            await self.node.send_typing()
        except Exception as exc:  # a lost typing notice does not matter; say why once in the log
            log.debug("typing notice failed: %s", exc)

    def on_chat_input_submitted(self, message: ChatInput.Submitted) -> None:
        message.stop()
        self.query_one(CommandHint).show_for("")
        text = message.text
        parsed = slash.parse(text)
        if parsed is None and self.editing is not None:
            self.send_edit(text[1:] if text.startswith("//") else text)
        elif parsed is None:
            parent = self.replying
            self.cancel_reply()
            self.send(text[1:] if text.startswith("//") else text, reply_to=parent.message_id if parent else None)
        else:
            self.run_command(*parsed)

    def send(self, text: str, kind: str = "msg", reply_to: str | None = None) -> None:
        self.run_worker(self._send(text, kind, reply_to), group="send", exit_on_error=False)

    async def _send(self, text: str, kind: str, reply_to: str | None = None) -> None:
        try:
            if reply_to:
                await self.node.send_text(text, kind=kind, reply_to=reply_to)
            else:
                await self.node.send_text(text, kind=kind)
        except Exception as exc:
            self.post_message(UiError(f"not sent: {exc}", "send"))

    def _membership_changed(self, e) -> None:
        """What the log's membership lines do not say: that we were removed, that old keys were deleted."""
        names = self.node.names()
        if e.what == "removed":
            self.notice(
                f"{names.get(e.by) or e.by[:8]} removed you from #{self.channel_name}: its new key was not "
                "sent to you; nothing more can be sent here",
                error=True,
            )
        elif e.what == "epoch" and not e.mine:
            self.notice(
                f"key epoch {e.epoch} began without a key for you: an admin sends it once your join reaches them",
                error=True,
            )
        elif e.what == "leave" and e.by != self.node.participant_id:
            self.refresh_panel()  # (the line says it: the participant list loses them)
        elif e.what == "refused":
            self.notice(
                f"refused {names.get(e.by) or e.by[:8]}: it holds only a key from before a removal (epoch "
                f"{e.epoch}: an invite made before a kick, or by a removed member) and was not admitted since; "
                "nothing of it is accepted or handed on",
                error=True,
            )
        elif e.what == "expired":
            self.notice(
                f"the keys of #{self.channel_name} before epoch {e.epoch + 1} were deleted here (retention window over)"
            )

    def membership(self, coro, what: str) -> None:
        """Run a membership change (``/kick``, ``/rekey``, ``/admin``); its line shows in the log, a refusal here."""

        async def run() -> None:
            try:
                await coro
            except (UserError, PayloadError) as exc:
                self.notice(f"/{what}: {exc}", error=True)
            except Exception as exc:
                log.exception("/%s failed", what)
                self.post_message(UiError(f"/{what}: {exc}", what))

        self.run_worker(run(), group="membership", exit_on_error=False)

    def notice(self, text: str, error: bool = False) -> None:
        self.view.timeline.notice(text, self.now_ms(), error)
        self.view.commit(to_bottom=True)

    def run_command(self, name: str, arg: str) -> None:
        """A slash command (also used by the command palette): a :class:`~sdschat.node.UserError` (a usage
        mistake, a refusal by the node) is a notice; anything else is a bug, in the log with its traceback."""
        try:
            slash.run(self, name, arg)
        except (UserError, PayloadError) as exc:
            self.notice(str(exc), error=True)
        except Exception as exc:
            log.exception("command /%s failed", name)
            self.post_message(UiError(f"/{name}: {exc}", "command"))

    def nick_changed(self) -> None:
        """The node's nick changed (here or from another channel of the window)."""
        self._highlight()
        self.input.hint = f"Message #{self.channel_name} as {self.node.nick}  (/help)"
        self.notice(f"you are now known as {self.node.nick}")
        self.refresh_panel()
