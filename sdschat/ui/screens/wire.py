"""The wire view (F5 or /wire): the frames in and out of this node, live, with filters and rates.

It reads the node's ring buffer (:class:`sdschat.node.wirelog.WireLog`) four
times a second, never per frame, so a thousand frames a second cost the chat
almost nothing. Keys: ``k`` the kind shown (all, content, resend, repair req,
repair ans, sync, ephemeral, store), ``s`` the sender (all, then everyone seen),
``x`` rejected frames only, ``space`` pause, ``Esc`` close. The Lamport column is
a time (the engine keeps Lamport times at least the wall clock in ms). Under the
rates, the rejected frames counted by reason (what the side panel's
``rejected`` and ``undecryptable`` counters point here for).
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import tzinfo

from rich.console import Group
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Static

from sdschat.node.inspect import lamport_time, wall_clock
from sdschat.node.wirelog import KINDS

from ..layout import clean_text
from .live import LivePanel

__all__ = ["WireScreen", "WIDE_FROM"]

#: the body's width from which a frame's row has every column (hist, bloom, rep and a 20-cell sender): 85 cells
#: and what the node did
WIDE_FROM = 110

# styles as objects, not strings: Textual parses a style string again for every line it renders (measured: most
# of a repaint's time)
_HEAD, _OUT, _REJECTED, _IN = Style(bold=True), Style(color="grey62"), Style(color="red"), Style()


def _lamport(lamport: int | None, now_ms: int, tz: tzinfo | None) -> str:
    """A frame's Lamport time as the column shows it (:func:`sdschat.node.inspect.lamport_time`)."""
    return "-" if lamport is None else lamport_time(lamport, now_ms, lambda ms: wall_clock(ms, tz), tz)


def _bloom(fill: float | None) -> str:
    """The bloom column: the share of the filter's bits set, or "-" for a frame without a filter."""
    return f"{fill:.2%}" if fill is not None else "-"


def _rejected_reasons(frames) -> str:
    """The rejected frames among ``frames`` counted by reason, most first (``bad_signature 3 · malformed 1``);
    empty for none."""
    counts = Counter(f.outcome.removeprefix("rejected: ") for f in frames if f.outcome.startswith("rejected"))
    return " · ".join(f"{reason} {n}" for reason, n in counts.most_common())


class WireScreen(LivePanel):
    BINDINGS = [
        Binding("escape,q,f5", "dismiss", "close"),
        Binding("k", "kind", "kind"),
        Binding("s", "sender", "sender"),
        Binding("x", "rejected", "rejected only"),
        Binding("space", "pause", "pause"),
    ]
    DEFAULT_CSS = """
    WireScreen #wire-head { height: auto; min-height: 2; }
    WireScreen #wire-body { text-wrap: nowrap; text-overflow: ellipsis; }
    """
    TITLE = "wire (k kind · s sender · x rejected · space pause · Esc close)"
    REFRESH_S = 0.25

    def __init__(self, node, *, tz: tzinfo | None = None) -> None:
        super().__init__(node)
        self.tz = tz
        self.kind: str | None = None
        self.sender: str | None = None
        self.rejected_only = False
        self.paused = False
        #: the rows on screen, newest first, as text (tests read them)
        self.rows: list[str] = []
        self.header = ""
        #: the header's second line: why frames were rejected (empty while none was)
        self.reasons = ""

    def parts(self) -> ComposeResult:
        yield Static(id="wire-head")
        yield Static(id="wire-body")

    async def refresh_lines(self) -> None:
        self.refresh_view()

    def _who(self, pid: str | None) -> str:
        if not pid:
            return "?"
        if pid == self.node.participant_id:
            return "you"
        p = self.node.book.participants.get(pid) if hasattr(self.node, "book") else None
        return clean_text(p.nick) if p is not None and p.nick else pid[:8]

    def _shown(self) -> list:
        frames = list(self.node.wire.frames)
        out = []
        for f in reversed(frames):
            if self.kind is not None and f.kind != self.kind:
                continue
            if self.sender is not None and f.sender_id != self.sender:
                continue
            if self.rejected_only and not f.outcome.startswith("rejected"):
                continue
            out.append(f)
            if len(out) >= 200:
                break
        return out

    def refresh_view(self) -> None:
        wire = self.node.wire
        rates = wire.rates(int(time.time() * 1000))
        filters = [f"kind {self.kind or 'all'}", f"sender {self._who(self.sender) if self.sender else 'all'}"]
        if self.rejected_only:
            filters.append("rejected only")
        self.header = (
            f"{rates['in']:.1f} frames/s in · {rates['out']:.1f} out (last 5 s) · "
            f"{wire.totals['in']} in, {wire.totals['out']} out, {wire.totals['rejected']} rejected · "
            + " · ".join(filters)
            + (" · PAUSED" if self.paused else "")
        )
        reasons = _rejected_reasons(wire.frames)
        if reasons and wire.totals["in"] + wire.totals["out"] > len(wire.frames):
            reasons += f"  (of the last {len(wire.frames):,} frames)"  # the older ones have left the ring
        self.reasons = f"rejected, by reason: {reasons}" if reasons else ""
        top = self.query_one("#wire-head", Static)
        lines = [Text(self.header, _HEAD)]  # folded at a narrow width; the reasons under it, on one line
        if self.reasons:
            lines.append(Text(self.reasons, _REJECTED, no_wrap=True, overflow="ellipsis"))
        top.update(Group(*lines))
        if self.paused:
            return
        # fixed-width lines, not a table widget: a repaint 4 times a second stays cheap with thousands of frames.
        # Narrower than WIDE_FROM, a frame keeps one line: a shorter sender, no hist/bloom/rep (the inspector has them)
        width = self.query_one("#wire-body", Static).size.width or self.size.width
        wide = width >= WIDE_FROM
        sender_w = 20 if wide else 11
        head = (
            f"{'time':<12}   {'kind':<10} {'sender':<{sender_w}} {'lamport':<12} "
            + (f"{'hist':>4} {'bloom':>6} {'rep':>3} " if wide else "")
            + f"{'bytes':>7}  {'what the node did' if wide else 'outcome'}"
        )
        body = Text(no_wrap=True, overflow="ellipsis")
        body.append(head + "\n", _OUT)  # a span, not the text's base style: frames in stay bright
        rows = []
        height = max(1, self.size.height - 4 - top.size.height)  # the borders, the column names, one spare
        now_ms = int(time.time() * 1000)
        for f in self._shown()[:height]:
            clock = wall_clock(f.ts_ms, self.tz)
            arrow = "←" if f.direction == "in" else "→"
            # a Lamport time is at least the wall clock in ms: shown as a time (another day's with its date)
            lam = _lamport(f.lamport_timestamp, now_ms, self.tz)
            who = self._who(f.sender_id)
            if f.direction == "in" and f.publisher and f.sender_id and f.publisher != f.sender_id:
                who += f" via {self._who(f.publisher)}"  # a rebroadcast: the author, and who published it
            line = (
                f"{clock:<12} {arrow} {f.kind:<10} {who[:sender_w]:<{sender_w}} {lam:<12} "
                + (f"{f.history:>4} {_bloom(f.bloom_fill):>6} {f.repair:>3} " if wide else "")
                + f"{f.size:>7,}  {f.outcome}"
            )
            style = _REJECTED if f.outcome.startswith("rejected") else (_OUT if f.direction == "out" else _IN)
            body.append(line + "\n", style)
            rows.append(line)
        self.rows = rows
        self.query_one("#wire-body", Static).update(body)

    def _senders(self) -> list[str]:
        seen: dict[str, None] = {}
        for f in self.node.wire.frames:
            if f.sender_id:
                seen[f.sender_id] = None
        return list(seen)

    def action_kind(self) -> None:
        order = [None, *KINDS]
        self.kind = order[(order.index(self.kind) + 1) % len(order)]
        self.refresh_view()

    def action_sender(self) -> None:
        order = [None, *self._senders()]
        self.sender = order[(order.index(self.sender) + 1) % len(order)] if self.sender in order else None
        self.refresh_view()

    def action_rejected(self) -> None:
        self.rejected_only = not self.rejected_only
        self.refresh_view()

    def action_pause(self) -> None:
        self.paused = not self.paused
        self.refresh_view()
