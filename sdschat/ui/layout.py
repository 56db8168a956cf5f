"""Word wrap and painting of timeline items into line strips.

The wrap is our own (not Rich's) so that an item's height can be computed
cheaply for 100,000 items — one-line ASCII messages take a fast path — and
painting wraps exactly the same way.

A message line::

    12:03 ◑2      alice hello world, this is a long message that
                        wraps under the text column

(narrow panes put the nick inline: ``12:03 ● alice: hello``.) An edited message ends in a dim "(edited)"; a
deleted one reads "message deleted" (by whom, when an admin deleted someone else's); the reactions to a message
are one line under it, indented as a reply's quote above it::

    12:04 ●         bob hello again (edited)
                        👍 2 alice, carol  🎉 1 bob
"""

from __future__ import annotations

import re
import unicodedata
from datetime import datetime, timedelta, tzinfo

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from sdschat.node import events as ev
from sdschat.node.inbox import channel_label

from .links import find_links
from .theme import STATE_STYLES, S, nick_style, state_glyph
from .timeline import DELETED, QUOTE_LOST, QUOTE_TEXT, CatchUpItem, MarkerItem, MsgItem, NoticeItem, UnreadItem

__all__ = ["Layout", "wrap_spans", "clean_text", "fit_cells", "header_subtitle", "channel_label", "HEADER_TOPIC"]

#: the most cells a channel's topic takes in the window's header (after "#channel · nick · "): with the title, it
#: stays on one 80-column line
HEADER_TOPIC = 32

#: the marks an edit, a deletion and the reactions leave on a message (the theme's :class:`S` has the rest)
EDITED_MARK = " (edited)"
EDITED_STYLE = Style(color="grey50")
DELETED_STYLE = Style(color="grey50", italic=True)
REACTION_STYLE = Style(bold=True)
REACTORS_STYLE = Style(color="grey62")
#: how an edit, deletion or reaction shown as a line of its own is styled after its text, by its state
ACTION_NOTE_STYLES = {ev.PENDING: S.missing, ev.LOST: S.lost, ev.REFUSED: S.notice}

NICK_WIDTH = 10
WIDE_MIN = 56  # below this width the nick goes inline
PREFIX = 9  # "HH:MM " + glyph (2) + " "
_TOKEN = re.compile(r"[^ \t]+[ \t]*|[ \t]+")  # only plain spaces break lines (NBSP keeps "↺ repaired" together)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")
# Characters whose width terminals disagree on: the joiner of emoji sequences (a family is 2 cells in tmux and
# kitty, 6 in others), emoji and text presentation selectors ("❤️": 1 cell in tmux, 2 in rich and VTE), the
# skin-tone modifiers ("👍🏽": 4 cells in tmux 3.3, 2 in rich) and tag characters (subdivision flags). Dropped,
# what is left has one width everywhere, the one the layout counts: a row never pushes the next column.
_UNSTABLE_WIDTH = re.compile("[\u200d\ufe0e\ufe0f\U0001f3fb-\U0001f3ff\U000e0000-\U000e007f]")


def clean_text(text: str) -> str:
    """Text safe to paint: tabs become spaces; control and bidi-override characters are dropped; so are the
    characters whose width depends on the terminal (:data:`_UNSTABLE_WIDTH`), and accents are composed (NFC)."""
    if text.isascii():
        if text.isprintable():
            return text
    elif text.isprintable():
        return _UNSTABLE_WIDTH.sub("", unicodedata.normalize("NFC", text))
    text = _CONTROL.sub("", text.replace("\t", "    ").replace("\r\n", "\n").replace("\r", "\n"))
    return text if text.isascii() else _UNSTABLE_WIDTH.sub("", unicodedata.normalize("NFC", text))


def wrap_spans(text: str, first: int, rest: int) -> list[tuple[int, int]]:
    """Greedy word wrap: ``(start, end)`` offsets of each line; the first line has ``first`` cells.

    Trailing spaces may overflow a line (they are invisible and cropped); a
    word longer than a line is split by cells.
    """
    first = max(1, first)
    rest = max(1, rest)
    if "\n" not in text and len(text) <= first and (text.isascii() or cell_len(text) <= first):
        return [(0, len(text))]
    if text.isascii():
        return _wrap_ascii(text, first, rest)
    spans: list[tuple[int, int]] = []
    offset = 0
    for para in text.split("\n"):
        limit = first if not spans else rest
        begin = offset
        used = 0
        for m in _TOKEN.finditer(para):
            tok = m.group()
            tok_start = offset + m.start()
            word_w = cell_len(tok.rstrip())
            if used + word_w <= limit:
                used += cell_len(tok)
                continue
            if used > 0:
                spans.append((begin, tok_start))
                begin, used, limit = tok_start, 0, rest
            if word_w <= limit:
                used = cell_len(tok)
                continue
            pos = tok_start
            for ch in tok:
                w = cell_len(ch)
                if used + w > limit and used > 0 and not ch.isspace():
                    spans.append((begin, pos))
                    begin, used, limit = pos, 0, rest
                used += w
                pos += len(ch)
        spans.append((begin, offset + len(para)))
        offset += len(para) + 1
    return spans


def _wrap_ascii(text: str, first: int, rest: int) -> list[tuple[int, int]]:
    """:func:`wrap_spans` for ASCII text (one cell per character): string searches, no tokenizing."""
    spans: list[tuple[int, int]] = []
    offset = 0
    for para in text.split("\n"):
        n = len(para)
        pos = 0
        limit = first if not spans else rest
        emitted = False
        while n - pos > limit:
            cut = para.rfind(" ", pos + 1, pos + limit + 1)
            if cut <= pos or not para[pos:cut].strip():  # no break point: split the word
                end = pos + limit
                spans.append((offset + pos, offset + end))
                pos = end
            else:
                nxt = cut
                while nxt < n and para[nxt] == " ":
                    nxt += 1
                spans.append((offset + pos, offset + nxt))
                pos = nxt
            emitted = True
            limit = rest
        if pos < n or not emitted:
            spans.append((offset + pos, offset + n))
        offset += n + 1
    return spans


def header_subtitle(channel: str, nick: str, topic: str = "") -> str:
    """The header's subtitle: ``#channel · nick`` (``@bob · alice`` for a two-member channel), and `` · topic``
    (cut to :data:`HEADER_TOPIC` cells) once the channel has one."""
    head = clean_text(f"{channel_label(channel, nick)} · {nick}")
    topic = " ".join(clean_text(topic).split())
    return f"{head} · {fit_cells(topic, HEADER_TOPIC)}" if topic else head


def fit_cells(text: str, width: int) -> str:
    """``text`` in at most ``width`` cells: cut with an ellipsis if longer."""
    if cell_len(text) <= width:
        return text
    out, used = [], 0
    for ch in text:
        w = cell_len(ch)
        if used + w > width - 1:
            break
        out.append(ch)
        used += w
    return "".join(out) + "…"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _sources(item: CatchUpItem, nick_of) -> str:
    """`` · from the store node, alice (SDS-R), bob (resent)``: where a catch-up's repaired messages came from."""
    by: dict[str, set[str]] = {}
    for via, who in item.via.values():
        by.setdefault(via, set()).add(nick_of(who) if who else "")
    parts = ["the store node"] if "store" in by else []
    for via, tag in (("sds-r", "SDS-R"), ("resend", "resent")):
        names = sorted(n for n in by.get(via, ()) if n)
        if names:
            parts.append(f"{', '.join(names)} ({tag})")
    return " · from " + ", ".join(parts) if parts else ""


def _text_runs(runs: list[tuple[int, Style]], base: int, text: str, style: Style) -> None:
    """The style runs of a message's ``text`` starting at offset ``base`` of the body: ``style``, and over each
    URL in it ``style`` underlined with the URL as its terminal hyperlink (OSC 8; one :class:`Style` a URL, so
    the pieces of a URL wrapped over lines are one link)."""
    for start, end, url in find_links(text):
        if start > 0:
            runs.append((base + start, style))
        runs.append((base + end, style + S.link + Style(link=url)))
    runs.append((base + len(text), style))


def _action_note(m: ev.ChatMessage) -> str:
    """What follows the text of an edit, deletion or reaction shown as a line of its own: why it is one (waiting
    for its message, lost with it, refused), as the message's own line says it; "" for any other message."""
    if m.kind not in ev.MESSAGE_ACTION_KINDS or not m.action_state:
        return ""
    head = f"* {m.nick} {m.text}"
    line = m.line
    return clean_text(line[len(head) :]) if line.startswith(head) else ""


class Layout:
    """Heights and painted lines of items for one width (and one time zone)."""

    def __init__(self, width: int, tz: tzinfo | None = None) -> None:
        self.width = max(1, width)
        self.tz = tz
        self.wide = self.width >= WIDE_MIN
        self.room = self.width - (PREFIX + NICK_WIDTH + 1 if self.wide else PREFIX)
        self._day = (0, -1, 0)  # [start_ms, end_ms) of the last day seen, and its ordinal

    # ------------------------------------------------------------ helpers

    def day_of(self, item: MsgItem) -> int:
        if item.day is None:
            ms = item.msg.sent_at_ms
            lo, hi, ordinal = self._day
            if not lo <= ms < hi:
                dt = datetime.fromtimestamp(ms / 1000, self.tz)
                midnight = dt.replace(hour=0, minute=0, second=0, microsecond=0)
                lo = int(midnight.timestamp() * 1000)
                hi = int((midnight + timedelta(days=1)).replace(hour=0).timestamp() * 1000)
                ordinal = dt.toordinal()
                self._day = (lo, hi, ordinal)
            item.day = ordinal
        return item.day

    def _clock(self, ms: int) -> str:
        return datetime.fromtimestamp(ms / 1000, self.tz).strftime("%H:%M")

    def _body(self, item: MsgItem, nick: str, nick_of) -> tuple[str, list[tuple[int, Style]], int]:
        """(plain body, style runs as (end offset, style), first-line room) of a message."""
        m = item.msg
        runs: list[tuple[int, Style]] = []
        body = ""
        nstyle = nick_style(m.sender_id)
        if m.deleted_by is not None:  # nothing of its text is left: who deleted it, if an admin did
            if not self.wide:
                body = nick + ": "
                runs.append((len(body), nstyle))
            by = "" if m.deleted_by == m.sender_id else f" by {nick_of(m.deleted_by)} (admin)"
            body += DELETED + by
            runs.append((len(body), DELETED_STYLE))
        elif m.newer:  # a kind from a newer sdschat: its fallback line, marked as such
            text = clean_text(m.text)
            body = f"{nick} {ev.NEWER_MARK} "
            runs.append((len(nick), nstyle))
            runs.append((len(body), S.me))
            _text_runs(runs, len(body), text, S.text)
            body += text
        elif m.kind in ev.ACTION_KINDS:
            text = clean_text(m.text)
            body = nick + " "
            runs.append((len(body), nstyle))
            _text_runs(runs, len(body), text, S.me)
            body += text
            note = _action_note(m)
            if note:
                body += note
                runs.append((len(body), ACTION_NOTE_STYLES.get(m.action_state or "", S.notice)))
        else:
            text = clean_text(m.text)
            if not self.wide:
                body = nick + ": "
                runs.append((len(body), nstyle))
            _text_runs(runs, len(body), text, S.text)
            body += text
        if m.edited and m.deleted_by is None:
            body += EDITED_MARK
            runs.append((len(body), EDITED_STYLE))
        tag = self._tag(item, nick_of)
        if tag:
            body += "  " + tag
            runs.append(
                (len(body), S.repaired_tag if item.repaired_via in ("sds-r", "resend", "store") else S.late_tag)
            )
        room = self.width - (PREFIX + NICK_WIDTH + 1 if self.wide else PREFIX)
        return body, runs, room

    def _tag(self, item: MsgItem, nick_of) -> str:
        via = item.repaired_via
        if not via:
            return ""
        nbsp = "\u00a0"
        if via == "sds-r":
            by = f" by {nick_of(item.repaired_by)}" if item.repaired_by else ""
            return f"↺{nbsp}repaired{by} (SDS-R)"
        if via == "resend":
            return f"↺{nbsp}repaired (resent by {nick_of(item.msg.sender_id)})"
        if via == "late":
            return f"↺{nbsp}arrived late"
        if via == "store":
            return f"↺{nbsp}filled from the store"
        return f"↺{nbsp}repaired"

    def separator_ms(self, items, i: int, prev: MsgItem | None) -> int | None:
        """When item ``i`` starts a new day: the time to label its day separator with (else None).

        A gap marker takes the separator of the message it sits above, so the
        two stay together.
        """
        item = items[i]
        if type(item) is MsgItem:
            before = items[i - 1] if i > 0 else None
            if type(before) is MarkerItem and before.anchor == item.msg.message_id:
                return None
            target = item
        elif type(item) is MarkerItem:
            after = items[i + 1] if i + 1 < len(items) else None
            if type(after) is not MsgItem or after.msg.message_id != item.anchor:
                return None
            target = after
        else:
            return None
        if prev is None or self.day_of(prev) != self.day_of(target):
            return target.msg.sent_at_ms
        return None

    def _separator_line(self, ms: int) -> Strip:
        label = f" {datetime.fromtimestamp(ms / 1000, self.tz).strftime('%a %d %b %Y')} "
        side = max(0, (self.width - cell_len(label)) // 2)
        return self._line([Segment("─" * side + label + "─" * side, S.day)])

    # ------------------------------------------------------------- height

    def height(self, item, sep_ms: int | None, nick_of) -> int:
        sep = 0 if sep_ms is None else 1
        if type(item) is MsgItem:
            m = item.msg
            text = m.text
            if item.quote is not None:
                sep += 1  # the quote of the message it answers
            if m.reactions:
                sep += 1  # the line of its reactions
            if (
                self.wide
                and m.kind == "msg"
                and not item.repaired_via
                and not m.edited
                and m.deleted_by is None
                and len(text) <= self.room
                and text.isascii()
                and text.isprintable()
            ):
                return 1 + sep  # the common case, without building the line
            nick = clean_text(m.nick) or nick_of(m.sender_id)
            body, _, room = self._body(item, nick, nick_of)
            cont = room if self.wide else self.width - PREFIX
            return len(wrap_spans(body, room, cont)) + sep
        if isinstance(item, NoticeItem):
            return len(wrap_spans(clean_text(item.text), self.width - PREFIX - 2, self.width - PREFIX - 2))
        return 1 + sep

    # -------------------------------------------------------------- paint

    def paint(self, item, sep_ms: int | None, nick_of) -> list[Strip]:
        lines = [] if sep_ms is None else [self._separator_line(sep_ms)]
        if isinstance(item, MsgItem):
            lines += self._paint_message(item, nick_of)
        elif isinstance(item, MarkerItem):
            lines.append(self._paint_marker(item, nick_of))
        elif isinstance(item, UnreadItem):
            lines.append(self._paint_unread(item))
        elif isinstance(item, CatchUpItem):
            lines.append(self._paint_catch_up(item, nick_of))
        else:
            lines += self._paint_notice(item)
        return lines

    def _paint_unread(self, item: UnreadItem) -> Strip:
        label = f" {_plural(item.count, 'new message')} since you left "
        if cell_len(label) > self.width:
            label = " new "
        side = max(0, (self.width - cell_len(label)) // 2)
        return self._line([Segment("━" * side + label + "━" * (self.width - side - cell_len(label)), S.unread)])

    def _paint_catch_up(self, item: CatchUpItem, nick_of) -> Strip:
        """ "loading earlier history… 40 of ~88" while messages it knows of are missing; then "caught up 88
        messages · from alice (SDS-R)" (the sources the repairs told; what came straight from its author, or
        first copies from the store node, is not told apart)."""
        forms: tuple[str, ...]
        if item.loading:
            total = item.count + len(item.pending) + len(item.lost)
            forms = (f"↑ loading earlier history… {item.count} of ~{total}", f"↑ loading {item.count}/~{total}")
        else:
            lost = f" · {len(item.lost)} lost" if item.lost else ""
            core = f"↑ caught up {_plural(item.count, 'message')}"
            forms = (core + _sources(item, nick_of) + lost, core + lost, f"↑ caught up {item.count}")
        label = next((f" {text} " for text in forms if cell_len(text) + 2 <= self.width), f" {forms[-1]} ")
        label = fit_cells(label, self.width)
        side = max(0, (self.width - cell_len(label)) // 2)
        return self._line([Segment("┄" * side + label + "┄" * (self.width - side - cell_len(label)), S.caught_up)])

    def _line(self, segments: list[Segment], bg: Style | None = None) -> Strip:
        if bg is not None:
            segments = list(Segment.apply_style(segments, post_style=bg))
        return Strip(segments).crop_extend(0, self.width, bg)

    def _paint_message(self, item: MsgItem, nick_of) -> list[Strip]:
        m = item.msg
        nick = clean_text(m.nick) or nick_of(m.sender_id)
        body, runs, room = self._body(item, nick, nick_of)
        cont = room if self.wide else self.width - PREFIX
        spans = wrap_spans(body, room, cont)
        bg: Style | None
        if item.selected:
            bg = S.cursor_bg
        else:
            bg = S.repaired_bg if item.highlight_until_ms else (S.mention_bg if item.mention else None)
        out: list[Strip] = []
        indent = " " * (PREFIX + NICK_WIDTH + 1 if self.wide else PREFIX)
        if item.quote is not None:
            out.append(self._paint_quote(item.quote, indent, bg))
        for n, (start, end) in enumerate(spans):
            segs: list[Segment] = []
            if n == 0:
                segs.append(Segment(self._clock(m.sent_at_ms) + " ", S.time))
                glyph_state = m.state if m.own or (m.state == ev.WAITING and not item.catch_up) else ev.RECEIVED
                segs.append(Segment(state_glyph(glyph_state, m.possible_acks), STATE_STYLES.get(glyph_state)))
                segs.append(Segment(" "))
                if self.wide:
                    action = (m.kind in ev.ACTION_KINDS or m.newer) and m.deleted_by is None
                    shown = "*" if action else fit_cells(nick, NICK_WIDTH)
                    pad = NICK_WIDTH - cell_len(shown)
                    segs.append(Segment(" " * pad))
                    segs.append(Segment(shown, nick_style(m.sender_id)))
                    segs.append(Segment(" "))
            else:
                segs.append(Segment(indent))
            pos = start
            for run_end, style in runs:
                if run_end <= pos:
                    continue
                piece_end = min(run_end, end)
                if piece_end > pos:
                    segs.append(Segment(body[pos:piece_end].rstrip("\n"), style))
                    pos = piece_end
                if pos >= end:
                    break
            out.append(self._line(segs, bg))
        if m.reactions:
            out.append(self._paint_reactions(m.reactions, indent, bg, nick_of))
        return out

    def _paint_reactions(self, reactions, indent: str, bg: Style | None, nick_of) -> Strip:
        """The line under a message reacted to: ``👍 2 alice, bob  ❤ 1 carol`` (each emoji, how many, who), cut to
        the width."""
        parts: list[tuple[str, Style]] = []
        for emoji, who in reactions:
            if parts:
                parts.append(("  ", REACTORS_STYLE))
            parts.append((f"{clean_text(emoji)} {len(who)}", REACTION_STYLE))
            parts.append((" " + ", ".join(nick_of(pid) for pid in who), REACTORS_STYLE))
        room = max(1, self.width - len(indent))
        segs = [Segment(indent)]
        for text, style in parts:
            width = cell_len(text)
            if width > room:
                segs.append(Segment(fit_cells(text, room), style))
                break
            segs.append(Segment(text, style))
            room -= width
            if room <= 0:
                break
        return self._line(segs, bg)

    def _paint_quote(self, quote: tuple, indent: str, bg: Style | None) -> Strip:
        """The line above a reply: what it answers (one line, cut to fit), or that the parent is not here."""
        if quote[0] == QUOTE_TEXT:
            _, nick, sender, text = quote
            room = max(1, self.width - len(indent) - 2)
            head = clean_text(nick) + ": "
            body = fit_cells(head + clean_text(text).replace("\n", " "), room)
            segs = [
                Segment(indent + "↳ ", S.quote),
                Segment(body[: len(head)], nick_style(sender)),
                Segment(body[len(head) :], S.quote),
            ]
        else:
            what = "lost" if quote[0] == QUOTE_LOST else "possibly missing"
            segs = [
                Segment(indent + "↳ ", S.quote),
                Segment(
                    fit_cells(f"reply to a message {what}", max(1, self.width - len(indent) - 2)),
                    S.lost if quote[0] == QUOTE_LOST else S.missing,
                ),
            ]
        return self._line(segs, bg)

    def _paint_marker(self, item: MarkerItem, nick_of) -> Strip:
        senders = sorted({nick_of(s) for s in item.senders})
        who = (" · from " + ", ".join(senders)) if senders else ""
        forms: tuple[str, ...]
        if item.kind == "lost":
            core = f"{_plural(len(item.lost), 'message')} lost"
            forms = (f"✗ {core}{who}", f"✗ {core}")
            style = S.lost
        else:
            core = f"{_plural(len(item.pending), 'message')} possibly missing"
            forms = (f"┈┈ {core}{who} ┈┈", f"┈ {core}{who}", f"{core}{who}", f"┈ {core}")
        style = S.lost if item.kind == "lost" else S.missing
        pad = " " * PREFIX
        for text in forms:  # the longest form that fits, with or without the indent
            if cell_len(text) + len(pad) <= self.width:
                return self._line([Segment(pad), Segment(text, style)])
            if cell_len(text) <= self.width:
                return self._line([Segment(text, style)])
        return self._line([Segment(fit_cells(forms[0], self.width), style)])

    def _paint_notice(self, item: NoticeItem) -> list[Strip]:
        text = clean_text(item.text)
        spans = wrap_spans(text, self.width - PREFIX - 2, self.width - PREFIX - 2)
        style = S.lost if item.error else S.notice
        out = []
        for n, (start, end) in enumerate(spans):
            lead = (self._clock(item.at_ms) + "    — ") if n == 0 else " " * (PREFIX + 2)
            out.append(self._line([Segment(lead, S.time), Segment(text[start:end], style)]))
        return out
