"""The Textual apps: :class:`ChatApp` (one participant) and :class:`DemoApp` (N side by side).

Both get already-started nodes (:mod:`sdschat.cli.chat` starts and stops
them), so the apps run on the same asyncio loop as the nodes.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import time
from collections.abc import Callable, Sequence
from datetime import tzinfo

from textual import events
from textual.actions import SkipAction
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.dom import DOMNode
from textual.screen import Screen
from textual.widgets import Footer, Header
from textual.worker import Worker, WorkerState

from . import slash
from .collector import FREEZE_EVERY_S, Collector
from .files import write_private_text
from .layout import header_subtitle
from .messages import UiError, UiNotice
from .palette import ChatCommands
from .screens import HelpScreen, SearchScreen
from .sizes import HORIZONTAL_BREAKPOINTS, SIDE_HIDDEN, SIDE_SHOWN, VERTICAL_BREAKPOINTS, size_classes
from .widgets import ChatInput, ChatPane
from .widgets.channel_list import ChannelList
from .widgets.too_small import TooSmall

__all__ = ["ChatApp", "DemoApp", "BaseChatApp"]

SEARCH_RESULTS = 200  # results per search (newest first)


class _AppLogHandler(logging.Handler):
    """Warnings and errors of sdschat's loggers go to the app (not over the TUI on stderr)."""

    def __init__(self, app: App) -> None:
        super().__init__(logging.WARNING)
        self.app = app

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage().splitlines()[0][:200]
        except Exception:  # pragma: no cover - a broken log call must not break the UI
            return
        if not self.app.is_running:
            return
        self.app.post_message(UiError(text, record.name) if record.levelno >= logging.ERROR else UiNotice(text))


class BaseChatApp(App):
    CSS_PATH = "styles/app.tcss"
    AUTO_FOCUS = "ChatInput"
    COMMANDS = App.COMMANDS | {ChatCommands}
    # a class on each screen for its size: app.tcss narrows the channel list, hides the side panel, or shows
    # the "window too small" notice (TooSmall, in each app's layout) instead of the layout
    HORIZONTAL_BREAKPOINTS = HORIZONTAL_BREAKPOINTS
    VERTICAL_BREAKPOINTS = VERTICAL_BREAKPOINTS

    BINDINGS = [
        Binding("f1", "help", "help"),
        Binding("f2", "toggle_link", "link"),
        Binding("f3", "toggle_side", "panel"),
        Binding("f5", "wire", "wire"),
        Binding("pageup", "page(-1)", "scroll up", show=False, priority=True),
        Binding("pagedown", "page(1)", "scroll down", show=False, priority=True),
        Binding("ctrl+end", "latest", "latest", show=False, priority=True),
        Binding("escape", "focus_input", "input", show=False),
    ]

    def __init__(
        self, *, clock: Callable[[], float] = time.time, tz: tzinfo | None = None, blink: bool = False, **kwargs
    ) -> None:
        super().__init__(**kwargs)
        self.clock = clock
        self.tz = tz
        #: whether the input's cursor blinks. Off: a blinking cursor repaints the input twice a second, which was
        #: most of an idle window's CPU (2.4% of a core against 0.9% steady, ``bench/window_soak.py``)
        self.blink = blink
        self.errors: list[str] = []  # every error surfaced (tests read it)
        self._last_notice: dict[str, float] = {}
        self._log_handler: _AppLogHandler | None = None
        self.collector = Collector()

    def stats_extra(self) -> dict[str, int]:
        """Counters of the app's own, shown in ``/stats`` after the node's (none here)."""
        return {}

    # ----------------------------------------------------------- panes

    @property
    def panes(self) -> list[ChatPane]:
        return list(self.screen_stack[0].query(ChatPane)) if self.screen_stack else []

    def active_pane(self) -> ChatPane | None:
        node: DOMNode | None = self.focused
        while node is not None:
            if isinstance(node, ChatPane):
                return node
            node = node.parent
        panes = self.panes
        return panes[0] if panes else None

    def on_key(self, event: events.Key) -> None:
        """A key that reached the app: nothing took it (nothing had the focus, or the channel list has: a resize
        hid the layout and handed the focus on). A printable key goes into the active input, which takes the
        focus: what is typed is never lost to a focus the person did not choose. Not on a dialog (its own keys).

        Keys typed as the window opens come here too: they were read while nothing had the focus yet, and the
        input has it by the time they arrive (a chat input never lets a letter or Enter through). There Enter
        sends what was typed with it; one typed before the terminal was switched to raw input arrives as a line
        feed (the terminal's ICRNL turned the Enter into one), which Textual reads as ``ctrl+j``."""
        if len(self.screen_stack) != 1:
            return
        focused = self.screen.focused
        typed = bool(event.is_printable and event.character)
        if not (typed or (isinstance(focused, ChatInput) and event.key in ("enter", "ctrl+j"))):
            return
        # only there: a focused widget's bindings are looked up once its key reaches the app, after this handler
        # (the message cursor's r, e, d, o ...)
        if not (focused is None or isinstance(focused, (ChannelList, ChatInput))):
            return
        pane = self.active_pane()
        if pane is None:
            return
        event.stop()
        event.prevent_default()  # (the app's own handling would run the input's binding for it: a second Enter)
        pane.input.focus()
        if typed:
            pane.input.insert(event.character or "")
        else:
            pane.input.action_enter()

    # -------------------------------------------------------- lifecycle

    def get_default_screen(self) -> Screen:
        """The screen with the classes of the size the app starts at: its first layout is the one it keeps (the
        first resize would set them after the layout, and restyle and lay out every pane again: ~0.1 s of a
        window's first paint)."""
        screen = super().get_default_screen()
        screen.add_class(*size_classes(*self.size))
        return screen

    def notify_desktop(self, title: str, body: str) -> None:
        """A desktop notification through the terminal: OSC 777 (rxvt, foot, WezTerm, kitty, VTE terminals)
        and OSC 9 (iTerm2, Windows Terminal, ConEmu); terminals that know neither ignore both."""
        if self._driver is not None:
            self._driver.write(f"\x1b]777;notify;{title};{body}\x1b\\\x1b]9;{title}: {body}\x1b\\")

    def on_mount(self) -> None:
        self._log_handler = _AppLogHandler(self)
        logging.getLogger("sdschat").addHandler(self._log_handler)
        self.collector.start()
        self.set_interval(FREEZE_EVERY_S, self.collector.tick)
        panes = self.panes
        if panes:
            panes[0].input.focus()

    def on_unmount(self) -> None:
        self.collector.stop()
        if self._log_handler is not None:
            logging.getLogger("sdschat").removeHandler(self._log_handler)

    # ---------------------------------------------------------- errors

    def on_ui_error(self, message: UiError) -> None:
        """The one place errors reach the user (workers, handlers, node storage, commands, logs)."""
        text = message.text
        self.errors.append(text)
        self.notify(
            text, title="error" if not message.where else f"error ({message.where})", severity="error", timeout=8
        )

    def on_ui_notice(self, message: UiNotice) -> None:
        now = time.monotonic()
        if self._last_notice.get(message.text, -1e9) > now - 10:
            return  # the same warning again (e.g. a reconnect loop): once per 10 s is enough
        self._last_notice[message.text] = now
        self.notify(message.text, severity="warning", timeout=5)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Workers (sends, exports, bots) report their own failures; anything else lands here."""
        if event.state == WorkerState.ERROR:
            error = event.worker.error
            self.post_message(UiError(f"{error.__class__.__name__}: {error}", event.worker.group or "worker"))

    # --------------------------------------------------------- actions

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(slash.help_rows()))

    def action_toggle_link(self) -> None:
        pane = self.active_pane()
        if pane is not None:
            pane.toggle_impairment()

    def action_wire(self) -> None:
        from .screens.wire import WireScreen

        pane = self.active_pane()
        if pane is not None and not isinstance(self.screen, WireScreen):
            self.push_screen(WireScreen(pane.node, tz=self.tz))

    def action_toggle_side(self) -> None:
        """F3: the side panel hidden if it is on screen, else shown; at every width from then on (every pane)."""
        pane = self.active_pane()
        if pane is not None:
            shown = pane.side_panel_shown
            base = self.screen_stack[0]
            base.set_class(shown, SIDE_HIDDEN)
            base.set_class(not shown, SIDE_SHOWN)

    def _on_chat_screen(self) -> None:
        """The history's keys (PgUp, PgDn, Ctrl+End) take priority over the input; over a dialog (help, search)
        they are the dialog's."""
        if self.screen is not self.screen_stack[0]:
            raise SkipAction()

    def action_page(self, direction: int) -> None:
        self._on_chat_screen()
        pane = self.active_pane()
        if pane is not None:
            view = pane.view
            view.scroll_to(y=view.scroll_y + direction * max(1, view.size.height - 2), animate=False)

    def action_latest(self) -> None:
        self._on_chat_screen()
        pane = self.active_pane()
        if pane is not None:
            self.run_worker(pane.show_latest(), group="history", exit_on_error=False)

    def action_focus_input(self) -> None:
        """Escape: cancel a reply being written; back to the input."""
        pane = self.active_pane()
        if pane is not None:
            pane.cancel_reply()
            pane.input.focus()

    # ----------------------------------------------------- screenshots

    def save_screenshot(
        self, filename: str | None = None, path: str | None = None, time_format: str | None = None
    ) -> str:
        """Textual's, but the file shows decrypted chat: it is written 0600, whatever the umask."""
        from datetime import datetime

        stamp = datetime.now().strftime(time_format or "%Y-%m-%dT%H_%M_%S_%f")
        name = filename or f"{self.title.replace(' ', '_')}_{stamp}.svg"
        target = os.path.expanduser(os.path.join(path or "./", name))
        write_private_text(target, self.export_screenshot())
        return target

    def deliver_screenshot(
        self, filename: str | None = None, path: str | None = None, time_format: str | None = None
    ) -> str | None:
        """The command palette's Screenshot: saved 0600 (Textual's delivery would write it with the umask's
        mode) in ``path``, else the downloads folder."""
        from platformdirs import user_downloads_path

        try:
            saved = self.save_screenshot(filename, path or str(user_downloads_path()), time_format)
        except OSError as exc:
            self.notify(
                f"Failed to save screenshot: {exc.strerror or exc}", title="Screenshot", severity="error", markup=False
            )
            return None
        self.notify(f"Saved screenshot to {saved!r}", title="Screenshot", markup=False)
        return saved

    # ---------------------------------------------------------- search

    def search_panes(self, pane: ChatPane) -> list[ChatPane]:
        """Where ``/search`` looks from ``pane``: that channel (the channel window: every channel)."""
        return [pane]

    def open_search(self, pane: ChatPane, query: str) -> None:
        """``/search words``: the results screen; the result picked is shown in its channel."""
        from sdschat.node import merge_hits

        panes = self.search_panes(pane)
        by_channel = {p.channel_name: p for p in panes}

        async def search(text: str):
            found = [await p.node.search(text, limit=SEARCH_RESULTS) for p in panes]
            return merge_hits(found, SEARCH_RESULTS)

        def picked(hit) -> None:
            if hit is not None and hit.channel in by_channel:
                self.show_hit(by_channel[hit.channel], hit)

        self.push_screen(
            SearchScreen(query, search, now_ms=int(self.clock() * 1000), tz=self.tz, channels=len(panes) > 1), picked
        )

    def show_hit(self, pane: ChatPane, hit) -> None:
        m = hit.message
        self.run_worker(pane.jump_to(m.message_id, m.log_key), group="load", exit_on_error=False)

    def prefill_command(self, name: str) -> None:
        pane = self.active_pane()
        if pane is not None:
            pane.input.load_text(f"/{name} ")
            pane.input.move_cursor(pane.input.document.end)
            pane.input.focus()

    def run_slash(self, name: str, arg: str = "") -> None:
        pane = self.active_pane()
        if pane is not None:
            pane.run_command(name, arg)

    def on_chat_pane_window_command(self, message: ChatPane.WindowCommand) -> None:
        message.pane.notice(f"/{message.name} works in the channel window: run `sdschat` with no command", error=True)


class ChatApp(BaseChatApp):
    """``sdschat chat``: one participant, with the side panel."""

    TITLE = "sdschat"

    def __init__(self, node, **kwargs) -> None:
        super().__init__(**kwargs)
        self.node = node
        self._subtitle(node.nick)

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="◑")
        yield ChatPane(self.node, clock=self.clock, tz=self.tz, blink=self.blink, id="pane")
        yield Footer()
        yield TooSmall()

    @property
    def pane(self) -> ChatPane:
        return self.query_one(ChatPane)

    def on_chat_pane_nick_changed(self, message: ChatPane.NickChanged) -> None:
        self._subtitle(message.nick)

    def on_chat_pane_topic_changed(self, message: ChatPane.TopicChanged) -> None:
        self._subtitle(self.node.nick)

    def _subtitle(self, nick: str) -> None:
        channel = getattr(getattr(self.node, "key", None), "channel_name", "") or "chat"
        topic = getattr(self.node, "topic", None)
        self.sub_title = header_subtitle(channel, nick, topic.text if topic is not None else "")


WORDS = (
    "ack",
    "bloom",
    "lamport",
    "causal",
    "history",
    "repair",
    "resend",
    "gap",
    "sync",
    "buffer",
    "hello",
    "anyone",
    "reliable",
    "message",
    "arrived",
    "missing",
    "filter",
    "peer",
    "channel",
    "lunch",
    "coffee",
    "deploy",
    "ship",
    "it",
    "works",
    "on",
    "my",
    "machine",
    "the",
    "a",
    "is",
    "not",
    "yet",
    "again",
)


def chatter(rng: random.Random) -> str:
    words = [rng.choice(WORDS) for _ in range(rng.randint(2, 9))]
    text = " ".join(words)
    return text[0].upper() + text[1:] + rng.choice((".", "!", "?", "", " :)"))


class DemoApp(BaseChatApp):
    """``sdschat demo``: N participants side by side, each a real node, one embedded broker."""

    TITLE = "sdschat demo"

    BINDINGS = [
        Binding("f2", "toggle_link", "link (all)"),
        Binding("f4", "toggle_bots", "bots"),
        # the participants' inputs, as the window's channels (Tab completes names in an input, never leaves it)
        *(
            Binding(f"alt+{i}", f"to_pane({i - 1})", f"participant {i}", show=False, priority=True)
            for i in range(1, 10)
        ),
        Binding("alt+left", "step_pane(-1)", "previous participant", show=False, priority=True),
        Binding("alt+right", "step_pane(1)", "next participant", show=False, priority=True),
        Binding("ctrl+n", "step_pane(1)", "next participant", show=False, priority=True),
    ]

    def __init__(
        self,
        nodes: Sequence,
        *,
        bots: bool = False,
        bot_interval: float = 4.0,
        seed: int | None = None,
        subtitle: str = "",
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.nodes = list(nodes)
        self.bots = bots
        self.bot_interval = bot_interval
        self.rng = random.Random(seed)
        self.sub_title = subtitle or f"{len(self.nodes)} participants"

    def compose(self) -> ComposeResult:
        yield Header(show_clock=False, icon="◑")
        with Horizontal(id="panes"):
            for i, node in enumerate(self.nodes):
                pane = ChatPane(
                    node,
                    compact=True,
                    clock=self.clock,
                    tz=self.tz,
                    blink=self.blink,
                    id=f"pane-{i}",
                    classes="demo-pane",
                )
                pane.border_title = node.nick
                yield pane
        yield Footer()
        yield TooSmall()

    def on_mount(self) -> None:
        super().on_mount()
        for pane in self.panes:
            self.run_worker(self._bot(pane), group="bots", exit_on_error=False)

    async def _bot(self, pane: ChatPane) -> None:
        rng = random.Random(self.rng.random())
        await asyncio.sleep(rng.uniform(0.3, 1.5))
        while True:
            if self.bots:
                if pane.node.removed_me:
                    return  # removed from the channel: its bot falls silent (its pane says why)
                try:
                    await pane.node.send_text(chatter(rng))
                except Exception as exc:
                    self.post_message(UiError(f"{pane.node.nick}: not sent: {exc}", "bot"))
            await asyncio.sleep(rng.uniform(0.5, 1.5) * self.bot_interval)

    def action_to_pane(self, index: int) -> None:
        panes = self.panes
        if 0 <= index < len(panes):
            panes[index].input.focus()

    def action_step_pane(self, delta: int) -> None:
        panes = self.panes
        pane = self.active_pane()
        if panes:
            at = panes.index(pane) if pane in panes else 0
            panes[(at + delta) % len(panes)].input.focus()

    def action_toggle_link(self) -> None:
        panes = self.panes
        show = not any(p.query_one("ImpairmentPanel").has_class("-shown") for p in panes)
        for pane in panes:
            pane.toggle_impairment(show)

    def on_chat_pane_nick_changed(self, message: ChatPane.NickChanged) -> None:
        message.pane.border_title = message.nick

    def action_toggle_bots(self) -> None:
        self.bots = not self.bots
        self.notify("bots chatting" if self.bots else "bots quiet", timeout=2)
