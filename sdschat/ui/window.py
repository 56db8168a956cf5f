"""Bare ``sdschat``: every joined channel in one window, a channel list on the left.

The app gets a *client* (built by the CLI) that owns the channels' nodes:
``client.nodes`` in window order, ``client.opening()`` (the node to open on:
the channel shown last), ``client.unread(node)`` (unread when the window
opened), ``client.viewing(node)`` (now on screen), ``client.read(node)`` (on
screen to its end: read until now), ``await client.start_others(started,
failed)`` (channels still starting, inserted in window order as they come
up: ``client.nodes.index(node)``), ``client.read_ms(node)`` (read up to),
``client.notifications`` (bell and desktop switches, highlight words),
``client.muted(node)`` and ``client.set_muted(node, flag)`` (``/mute``), ``await
client.join(text)`` (an invite token, or a new channel's name) returning the
new node and a note for the person, ``await client.part(node)``,
``client.invite(node)`` (the token) and ``client.set_nick(nick)``. Requests by
name: ``await client.query(name)`` (``/query``: ``(node, contact, new)``), ``await
client.invite_by_name(node, name)`` (``/invite NAME``), ``client.on_request(handler)``
(each request someone sent us: ``handler(opened)``), ``await client.accept(opened)``
(``(node, note)``), ``client.contact_name(pid)`` and ``client.inbox_dropped()`` (requests
dropped, by reason: in ``/stats``). Every
channel keeps its own pane (history, scroll position, unsent input); only the
active one is shown.
"""

from __future__ import annotations

import contextlib

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import ContentSwitcher, Footer, Header

from .app import BaseChatApp
from .layout import channel_label, header_subtitle
from .messages import UiError
from .screens.invite import InviteScreen
from .screens.request import RequestScreen, request_line
from .widgets import ChatPane
from .widgets.channel_list import ChannelList
from .widgets.message_view import MessageView
from .widgets.too_small import TooSmall

__all__ = ["ChannelWindow"]


class ChannelWindow(BaseChatApp):
    TITLE = "sdschat"

    BINDINGS = [
        # priority: before the input, which would take Alt+digit as text
        *(Binding(f"alt+{i}", f"select({i - 1})", f"channel {i}", show=False, priority=True) for i in range(1, 10)),
        # Alt+Up/Down is the message cursor; channels step sideways, as in WeeChat
        Binding("alt+left", "step(-1)", "previous channel", show=False, priority=True),
        Binding("alt+right", "step(1)", "next channel", show=False, priority=True),
        Binding("ctrl+n", "step(1)", "next channel", show=False, priority=True),
    ]

    def __init__(self, client, **kwargs) -> None:
        super().__init__(**kwargs)
        self.client = client
        self._ids = 0
        self._panes: list[ChatPane] | None = None  # the panes in window order, until one is added or removed

    @property
    def panes(self) -> list[ChatPane]:
        """The channels' panes in window order (asked for with every line that arrives: kept, not queried)."""
        if self._panes is None:
            if not self.screen_stack:
                return []
            self._panes = list(self.screen_stack[0].query(ChatPane))
        return self._panes

    # ---------------------------------------------------------- layout

    def _pane(self, node) -> ChatPane:
        self._ids += 1
        pane = ChatPane(
            node,
            clock=self.clock,
            tz=self.tz,
            blink=self.blink,
            lazy=True,
            notify=self.client.notifications,
            id=f"channel-{self._ids}",
        )
        pane.muted = self.client.muted(node)
        pane.on_listening = lambda: self._listening(pane)
        return pane

    def _listening(self, pane: ChatPane) -> None:
        """``pane`` listens to its node from now on: what arrived in its channel since the unread count was read
        is added to its row, and the pane counts the rest (nothing counted twice, nothing missed)."""
        listening = getattr(self.client, "listening", None)  # (a client of one channel counts nothing)
        arrived = listening(pane.node) if listening is not None else 0
        if not arrived:
            return
        rows = self.channel_list.rows
        index = next((i for i, row in enumerate(rows) if row.name == pane.channel_name), None)
        if index is not None:
            self.channel_list.activity(index, arrived, rows[index].connection)

    def stats_extra(self) -> dict[str, int]:
        """Requests to talk that our inbox dropped, by reason (replayed, stale, not from a contact, ...)."""
        return {f"inbox_dropped_{reason}": n for reason, n in self.client.inbox_dropped().items()}

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="◑")
        panes = [self._pane(node) for node in self.client.nodes]
        opening = self.client.opening()
        initial = next((p.id for p in panes if p.node is opening), panes[0].id if panes else None)
        with Horizontal(id="window"):
            yield ChannelList(
                [p.channel_name for p in panes],
                [self.client.unread(p.node) for p in panes],
                me=getattr(getattr(self.client, "profile", None), "name", ""),
                id="channel-list",
            )
            with ContentSwitcher(initial=initial, id="channel-panes"):
                yield from panes
        yield Footer()
        yield TooSmall()

    @property
    def channel_list(self) -> ChannelList:
        return self.query_one(ChannelList)

    @property
    def switcher(self) -> ContentSwitcher:
        return self.query_one(ContentSwitcher)

    def active_pane(self) -> ChatPane | None:
        panes = self.panes  # in window order: the switcher's children
        if not panes:
            return None
        current = self.switcher.current
        return next((p for p in panes if p.id == current), panes[0])

    def on_mount(self) -> None:
        super().on_mount()
        self._panes = None  # (whatever asked while the window was being put together saw part of it)
        panes = self.panes
        if panes:  # where the window was left
            opening = self.client.opening()
            self.select(next((i for i, p in enumerate(panes) if p.node is opening), 0))
        self.run_worker(self.client.start_others(self._started, self._not_started), group="start", exit_on_error=False)
        on_request = getattr(self.client, "on_request", None)
        if on_request is not None:  # (a client of one channel has no inbox)
            on_request(self._request)

    def _started(self, node) -> None:
        """A channel that was still starting when the window opened: its row and pane join the others."""
        pane = self._pane(node)
        pane.display = False  # the switcher hides only the panes it was composed with
        panes = self.panes
        nodes = self.client.nodes  # the profile's order, whichever started first
        index = min(nodes.index(node), len(panes)) if node in nodes else len(panes)
        self.switcher.mount(pane, before=panes[index] if index < len(panes) else None)
        self._panes = None
        self.channel_list.insert(index, pane.channel_name, self.client.unread(node))

    def _not_started(self, channel: str, reason: str) -> None:
        pane = self.active_pane()
        if pane is not None:
            pane.notice(f"#{channel} could not start: {reason}", error=True)

    # ---------------------------------------------------------- switching

    def search_panes(self, pane: ChatPane) -> list[ChatPane]:
        return self.panes

    def show_hit(self, pane: ChatPane, hit) -> None:
        """A search result: its channel on screen, the message under the cursor with its neighbours."""
        m = hit.message
        self.select(self.panes.index(pane), jump=(m.message_id, m.log_key))

    def select(self, index: int, *, jump: tuple | None = None) -> None:
        panes = self.panes
        if not 0 <= index < len(panes):
            return
        pane = panes[index]
        left = self.active_pane() if self.switcher.current else None
        if left is not None and left is not pane:
            left.left_at_ms = int(self.clock() * 1000)
            if left.view.at_bottom:  # seen to its end as it was left
                self.client.read(left.node)
            left.view.clear_unread()
        unread = self.channel_list.rows[index].unread
        # new since you left: since the window switched away, or (first time) since the profile last had it
        since = pane.left_at_ms if pane.left_at_ms is not None else self.client.read_ms(pane.node)
        self.switcher.current = pane.id
        self.channel_list.set_active(index)
        self.sub_title = _subtitle(pane, pane.node.nick)
        self.client.viewing(pane.node)
        pane.input.focus()
        if jump is not None:
            self.run_worker(pane.jump_to(*jump), group="load", exit_on_error=False)
        else:
            self.run_worker(pane.open_at_unread(since if unread else None, unread), group="load", exit_on_error=False)
        pane.refresh_panel()
        pane.show_status()

    def exit(self, *args, **kwargs) -> None:
        """Quitting (Ctrl+Q, /quit): the channel on screen counts as read if it shows its end (an empty channel
        does), even when the window closes before the view said it reached the bottom."""
        with contextlib.suppress(Exception):  # (a window half torn down has nothing to mark)
            pane = self.active_pane()
            if pane is not None and pane.view.at_bottom:
                self.client.read(pane.node)
        super().exit(*args, **kwargs)

    def on_message_view_reached_bottom(self, message: MessageView.ReachedBottom) -> None:
        """The unread count clears once the person has scrolled to the end of the channel on screen."""
        pane = self.active_pane()
        if pane is not None and pane.view is message.view:
            self.channel_list.clear_unread(self.panes.index(pane))
            self.client.read(pane.node)

    def action_select(self, index: int) -> None:
        self.select(index)

    def action_step(self, delta: int) -> None:
        panes = self.panes
        pane = self.active_pane()
        if pane is not None and panes:
            self.select((panes.index(pane) + delta) % len(panes))

    def on_channel_list_selected(self, message: ChannelList.Selected) -> None:
        self.select(message.index)

    def on_chat_pane_activity(self, message: ChatPane.Activity) -> None:
        panes = self.panes
        if message.new and message.pane is self.active_pane() and message.pane.view.at_bottom:
            self.client.read(message.pane.node)  # read as it arrives
        if message.pane in panes:
            self.channel_list.activity(
                panes.index(message.pane), message.new, message.pane.connection, message.mentions
            )

    def on_chat_pane_nick_changed(self, message: ChatPane.NickChanged) -> None:
        self.client.set_nick(message.nick)
        for pane in self.panes:
            if pane is not message.pane:
                pane.nick_changed()
        self.sub_title = _subtitle(message.pane, message.nick)

    def on_chat_pane_topic_changed(self, message: ChatPane.TopicChanged) -> None:
        if message.pane is self.active_pane():
            self.sub_title = _subtitle(message.pane, message.pane.node.nick)

    # ---------------------------------------------------------- /join /part /invite

    def on_chat_pane_window_command(self, message: ChatPane.WindowCommand) -> None:
        message.prevent_default()  # (the single-channel apps' handler, which says these need the window, is not run)
        pane, name, arg = message.pane, message.name, message.arg.strip()
        if name == "join":
            if not arg:
                pane.notice("usage: /join NAME (a new channel) or /join TOKEN (an invite)", error=True)
                return
            self.run_worker(self._join(pane, arg), group="join", exit_on_error=False)
        elif name == "part":
            if len(self.panes) == 1:
                pane.notice("this is your only channel: /join another one first", error=True)
                return
            self.run_worker(self._part(pane), group="part", exit_on_error=False)
        elif name in ("mute", "unmute"):
            muted = name == "mute"
            try:
                self.client.set_muted(pane.node, muted)
            except Exception as exc:
                pane.notice(f"/{name}: {exc}", error=True)
                return
            pane.muted = muted
            pane.notice(
                f"#{pane.channel_name}: mentions "
                + ("still highlighted and counted, but silent" if muted else "ring and notify again")
            )
        elif name == "query":
            if not arg:
                pane.notice("usage: /query NAME (a member of one of your channels)", error=True)
                return
            self.run_worker(self._query(pane, arg), group="join", exit_on_error=False)
        elif name == "invite" and arg:
            self.run_worker(self._invite_by_name(pane, arg), group="join", exit_on_error=False)
        elif name == "invite":
            try:
                token = self.client.invite(pane.node)
            except Exception as exc:
                pane.notice(f"/invite: {exc}", error=True)
                return
            self.copy_to_clipboard(token)
            pane.notice(
                f"invite to #{pane.channel_name} copied to the clipboard (a secret: it is the channel's "
                f"key; /invite shows it again)"
            )
            self.push_screen(InviteScreen(pane.channel_name, token))

    async def _join(self, pane: ChatPane, text: str) -> None:
        try:
            node, note = await self.client.join(text)
        except Exception as exc:
            pane.notice(f"/join: {exc}", error=True)
            return
        await self._show_new(node, note)

    async def _show_new(self, node, note: str = "") -> ChatPane:
        """A channel just joined: its pane and row, and on screen."""
        new = self._pane(node)
        new.display = False  # shown by select(), which hides the one on screen
        await self.switcher.mount(new)
        self._panes = None
        index = self.channel_list.add(new.channel_name)
        self.select(index)
        if note:
            new.notice(note)
        return new

    # ---------------------------------------------------------- requests by name: /query, /invite NAME

    async def _query(self, pane: ChatPane, name: str) -> None:
        try:
            node, contact, new = await self.client.query(name)
        except Exception as exc:
            pane.notice(f"/query: {exc}", error=True)
            return
        panes = self.panes
        there = next((p for p in panes if p.node is node), None)
        if there is None:
            there = await self._show_new(node)
        else:
            self.select(panes.index(there))
        there.notice(
            f"{'asked' if new else 'asked again'}: {contact.name} sees a request to talk here (sealed to them, "
            f"through their inbox); they join once they accept"
        )

    async def _invite_by_name(self, pane: ChatPane, name: str) -> None:
        try:
            contact = await self.client.invite_by_name(pane.node, name)
        except Exception as exc:
            pane.notice(f"/invite: {exc}", error=True)
            return
        pane.notice(f"invite to #{pane.channel_name} sent to {contact.name} (sealed to them, through their inbox)")

    def _request(self, opened) -> None:
        """A request arrived (on the connection's callback): the app asks, from its own message loop."""
        self.call_later(self._ask, opened)

    def _ask(self, opened) -> None:
        """Someone of a shared channel asks us to talk, or into a channel: Enter joins it, Escape drops it."""
        r = opened.request
        line = request_line(self.client.contact_name(opened.sender), r.kind, r.channel)
        pane = self.active_pane()
        if pane is not None:
            pane.notice(f"{line} (Enter: accept, Esc: ignore)")

        def answered(accept: bool | None) -> None:
            if accept:
                self.run_worker(self._accept(opened), group="join", exit_on_error=False)
            elif pane is not None:
                pane.notice(f"ignored: {line}")

        me = getattr(getattr(self.client, "profile", None), "name", "")
        opens = channel_label(r.channel, me)
        note = f"signed by {opened.sender[:8]}, a member of a channel you share; accepting opens {opens}"
        self.push_screen(RequestScreen(line, note), answered)

    async def _accept(self, opened) -> None:
        try:
            node, note = await self.client.accept(opened)
        except Exception as exc:
            pane = self.active_pane()
            if pane is not None:
                pane.notice(f"could not join #{opened.request.channel}: {exc}", error=True)
            return
        await self._show_new(node, note)

    async def _part(self, pane: ChatPane) -> None:
        index = self.panes.index(pane)
        try:
            await self.client.part(pane.node)
        except Exception as exc:
            self.post_message(UiError(f"/part: {exc}", "part"))
            return
        pane.display = False  # off the screen's map before its widgets are pruned
        await pane.remove()
        self._panes = None
        self.channel_list.remove_row(index)
        self.select(max(0, index - 1))


def _subtitle(pane, nick: str) -> str:
    """The header's subtitle for ``pane``'s channel: ``#channel · nick``, and its topic once it has one."""
    topic = getattr(pane.node, "topic", None)
    return header_subtitle(pane.channel_name, nick, topic.text if topic is not None else "")
