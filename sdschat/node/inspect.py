"""The reliability inspector's reading of the database: one message's life, and every gap and how it closed.

Built only from what the node records (its ``events``, through the view
``event_history``, and the engine's tables as they are now), so it shows what
happened, after a restart too, and on a database someone sends you. The same
code serves ``sdschat inspect`` and the window's inspector panel
(:meth:`sdschat.node.Node.inspect`). Beyond the events window (``events_keep``)
only the first sent/received/delivered/acknowledged times remain of a message,
plus the rows that explain a repair or a loss.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Collection, Mapping
from datetime import datetime, tzinfo
from typing import Any

from ..store import EventRow, Store
from .book import decode_app
from .errors import UserError

__all__ = [
    "Step",
    "Inspection",
    "GapReport",
    "inspect_message",
    "gap_reports",
    "resolve_message_id",
    "message_ids_like",
    "check_message_id",
    "InspectError",
    "Rendered",
    "render",
    "render_parts",
    "gap_lines",
    "Member",
    "member_reports",
    "wall_clock",
    "lamport_time",
]

#: the shortest id prefix accepted
MIN_PREFIX = 6


class InspectError(UserError, ValueError):
    """An id that names no message of the channel, or more than one (one line)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Step:
    """One line of a message's timeline: when (wall-clock ms), what (a short kind), and a sentence."""

    ts_ms: int
    kind: str
    text: str
    detail: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Inspection:
    message_id: str
    sender_id: str
    nick: str | None
    text: str | None
    lamport_timestamp: int | None
    state: str | None
    own: bool
    steps: list[Step]
    #: what is still to happen, from the engine's tables now (timers as absolute ms; a view counts down)
    pending: list[Step]
    figures: dict[str, Any]

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


@dataclasses.dataclass
class GapReport:
    message_id: str
    sender_id: str | None
    detected_ms: int
    noticed_by: str
    closed_ms: int | None
    how: str
    by: str | None
    #: for a gap still open: what is to happen (a repair request due, ...), from the engine's tables now
    pending: list[Step] = dataclasses.field(default_factory=list)
    #: its retrieval hint as the causal history that named it carried (hex), if any
    hint: str | None = None
    #: what was done about it, in order: repair requests, answers called off, store queries and answers
    steps: list[Step] = dataclasses.field(default_factory=list)

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


#: the rows of a missing message that tell what was done about its gap (the gap inspector's lines)
_GAP_STEPS = frozenset({"repair_requested", "repair_cancelled", "store_query", "store_answer", "duplicate"})

_HOW = {
    "repair": "repaired (SDS-R)",
    "store": "filled from the store node",
    "resend": "its author resent it",
    "late": "a late copy arrived",
    "lost": "declared lost",
    "open": "still open",
}


def gap_lines(g: GapReport, names: Mapping[str, str | None], clock, now_ms: int) -> list[str]:
    """One gap as text: when it was noticed, how it closed and after how long; an open one's timers."""

    def name(pid):
        return _printable(names.get(pid or "") or (pid or "?")[:8])

    took = f" after {(g.closed_ms - g.detected_ms) / 1000:.2f} s" if g.closed_ms is not None else ""
    how = _HOW[g.how] + (f" by {name(g.by)}" if g.how == "repair" and g.by else "")
    out = [
        f"{clock(g.detected_ms)}  {g.message_id[:16]} from {name(g.sender_id)}: noticed through "
        f"{_printable(g.noticed_by)}; {how}{took}"
    ]
    if g.hint:
        out.append(f"    retrieval hint {g.hint[:16]}…")
    for s in g.steps:
        out.append(f"    {clock(s.ts_ms)}  +{(s.ts_ms - g.detected_ms) / 1000:.2f} s  {s.text}")
    for s in g.pending:
        due = s.ts_ms - now_ms
        when = f" (in {due / 1000:.1f} s)" if s.kind.endswith("_due") and due > 0 else ""
        out.append(f"    now: {s.text}{when}")
    return out


def wall_clock(ms: int, tz: tzinfo | None = None) -> str:
    """A wall-clock time to the millisecond, as the inspector, the gap list and the wire view show it."""
    if ms <= 0:
        return "--:--:--.---"
    return datetime.fromtimestamp(ms / 1000, tz).strftime("%H:%M:%S.%f")[:-3]


#: Lamport times below this are a plain counter (a peer that does not follow the clock), not ms since the epoch
_CLOCK_LAMPORT = 1_000_000_000_000


def lamport_time(lamport: int, now_ms: int, clock=wall_clock, tz: tzinfo | None = None) -> str:
    """A Lamport time as a person reads it. This app keeps Lamport times at least the wall clock in ms since the
    epoch, so it is a time (``clock(ms)``), with its date when that is not ``now_ms``'s day (in ``tz``); a plain
    counter, or a time no calendar holds, stays the number."""
    if lamport < _CLOCK_LAMPORT:
        return str(lamport)
    try:
        at = datetime.fromtimestamp(lamport / 1000, tz)
        text = clock(lamport)
    except (OverflowError, OSError, ValueError):  # a peer's absurd Lamport time: the number
        return str(lamport)
    now = datetime.fromtimestamp(now_ms / 1000, tz) if now_ms > 0 else at
    if at.date() == now.date():
        return text
    return f"{at.strftime('%d %b' if at.year == now.year else '%d %b %Y')} {text}"


def _detail(e: EventRow) -> Mapping[str, Any]:
    return e.detail if isinstance(e.detail, dict) else {}


def _short(mid: str | None) -> str:
    return (mid or "?")[:8]


class _Names:
    def __init__(self, names: Mapping[str, str | None], me: str) -> None:
        self.names, self.me = names, me

    def __call__(self, pid: str | None) -> str:
        if pid is None:
            return "someone"
        if pid == self.me:
            return "you"
        return self.names.get(pid) or pid[:8]


def check_message_id(text: str) -> str:
    """``text`` as a message id or id prefix (lower-case hex, at least 6 characters); InspectError if it is not one."""
    text = text.strip().lower()
    if len(text) < MIN_PREFIX or any(c not in "0123456789abcdef" for c in text):
        raise InspectError(f"{_printable(text)[:80]!r} is not a message id (hex, at least {MIN_PREFIX} characters)")
    return text


async def message_ids_like(store: Store, channel_id: str, text: str) -> list[str]:
    """The channel's message ids that ``text`` names: itself, or those it is a prefix of (at most 5)."""
    return await store.ids_with_prefix(channel_id, check_message_id(text))


async def resolve_message_id(store: Store, channel_id: str, text: str) -> str:
    """The full id of the message ``text`` names (the id, or an unambiguous prefix of at least 6 characters)."""
    text = check_message_id(text)
    found = await store.ids_with_prefix(channel_id, text)
    if not found:
        raise InspectError(f"no message {text} in this channel")
    if len(found) > 1 and text not in found:
        more = ", ".join(m[: len(text) + 4] for m in found)
        raise InspectError(
            f"{text} names {'more than ' if len(found) >= 5 else ''}{len(found)} messages ({more}): give more of the id"
        )
    return text if text in found else found[0]


def _came(d: Mapping[str, Any], sender: str | None, name: _Names) -> tuple[str, str]:
    """How a copy came, from its row's detail: (``store``, ``repair``, ``resend``, ``published`` by someone else
    or ``direct``, and who put it on the wire)."""
    via, publisher = d.get("via"), d.get("publisher")
    if via == "store":
        return "store", "the store node"
    if via == "repair":
        return "repair", name(publisher)
    if via == "resend":
        return "resend", name(publisher or sender)
    if publisher not in (None, sender):
        return "published", name(publisher)
    return "direct", name(sender)


def _arrival(d: Mapping[str, Any], sender: str | None, name: _Names) -> str:
    how, who = _came(d, sender, name)
    text = {
        "store": "first copy from the store node",
        "repair": f"first copy rebroadcast by {who} (SDS-R answer)",
        "resend": f"first copy resent by {who}",
        "published": f"first copy published by {who}",
        "direct": f"first copy straight from {who}",
    }[how]
    if how == "resend" and d.get("publisher") not in (None, sender):
        text += " (not its author)"
    return text


def _copy(d: Mapping[str, Any], sender: str | None, name: _Names) -> str:
    """How a copy came, in a few words: ``resent by bob``, ``an SDS-R answer by carol``, ``from the store node``."""
    how, who = _came(d, sender, name)
    return {"repair": f"an SDS-R answer by {who}", "resend": f"resent by {who}"}.get(how, f"from {who}")


def _delivered(d: Mapping[str, Any], name: _Names) -> str:
    text = "delivered in causal order"
    if d.get("repaired"):
        via = d.get("via")
        how = {
            "repair": "SDS-R repair",
            "store": "the store node",
            "resend": "the author's resend",
            "sync": "a late copy",
            "message": "a late copy",
        }.get(str(via), str(via))
        text += f", repaired through {how}" + (
            f" by {name(d.get('publisher'))}" if d.get("publisher") and via == "repair" else ""
        )
    if d.get("after_lost"):
        text += f", after {len(d['after_lost'])} earlier message(s) were declared lost"
    return text


def _step(e: EventRow, mid: str, name: _Names) -> Step | None:
    d = _detail(e)
    kind = e.kind
    if kind == "sent":
        hist = d.get("history")
        if not isinstance(hist, list):
            text = "sent"
        elif hist:
            text = f"sent, naming {len(hist)} earlier message(s) in its causal history"
        else:
            text = "sent, naming no earlier message (the log was empty)"
    elif kind == "resent":
        text = f"resent (#{d.get('resends', '?')}): not yet acknowledged"  # its reason: _resend_reasons
    elif kind == "acked":
        how = "bloom filter" if d.get("by_bloom") else "causal history"
        frame = f" {d.get('via')} frame {_short(d.get('frame'))}" if d.get("frame") else " frame"
        text = f"acknowledged: in the {how} of {name(d.get('by')) if d.get('by') else 'a'}'s{frame}"
    elif kind == "ack_seen":
        text = f"{name(d.get('by'))} has it: named in the causal history of their frame {_short(d.get('frame'))}"
    elif kind == "possibly_acked":
        text = f"possibly acknowledged (bloom filter of {name(d.get('by'))}; {d.get('count', '?')} member(s) so far)"
    elif kind == "received":
        text = _arrival(d, e.sender_id, name)
    elif kind == "delivered":
        text = _delivered(d, name)
    elif kind == "missing":
        ids = [m for m in d.get("missing", []) if isinstance(m, str)]
        if e.message_id == mid:
            text = f"arrived before {len(ids)} earlier message(s) it names: waits for " + ", ".join(map(_short, ids))
        elif d.get("source") == "sync":
            text = f"noticed missing: named by a sync frame from {name(e.sender_id)}"
        else:
            text = f"noticed missing: named by {name(e.sender_id)}'s message {_short(e.message_id)}"
    elif kind == "repair_requested":
        text = f"you asked for a repair (SDS-R request in your frame {_short(d.get('carrier'))})"
    elif kind == "repair_served":
        text = "you rebroadcast it: an SDS-R answer"
    elif kind == "lost":
        if e.message_id == mid:
            text = "declared lost: no copy came by resend, repair or store"
        else:
            text = f"{_short(e.message_id)}, which it waited for, was declared lost"
    elif kind == "rejected":
        text = f"a copy was refused ({d.get('reason', '?')})"
    elif kind == "duplicate":
        text = f"another copy ({_copy(d, e.sender_id, name)}): a duplicate, dropped"
    elif kind == "repair_cancelled":
        came = _copy(d, e.sender_id, name)
        if d.get("what") == "answer":
            text = (
                f"your repair answer was called off: {name(d.get('publisher'))} answered first"
                if d.get("via") == "repair"
                else f"your repair answer was called off: it came ({came})"
            )
        else:
            text = f"your repair request was called off: it came ({came})"
    elif kind == "store_query":
        hint = d.get("hint")
        text = "asked the store node for it" + (f" (retrieval hint {hint[:12]}…)" if isinstance(hint, str) else "")
    elif kind == "store_answer":
        text = {
            "found": "the store node had it",
            "not found": "the store node did not have it",
            "arrived meanwhile": "the store node's answer came after it had arrived",
            "no answer": "no answer from the store node",
            "refused": "the store node refused the request",
        }.get(str(d.get("outcome")), f"the store node answered ({d.get('outcome')})")
    else:
        return None
    detail = dict(d)
    if kind == "missing" and e.message_id == mid:
        detail["waits"] = True  # its own arrival ahead of what it names (not it being named missing)
    return Step(e.ts_ms, kind, text, detail)


def _resend_reasons(steps: list[Step], name: _Names) -> None:
    """Each resend's reason, from what the timeline tells before it: only possibly acknowledged (in the bloom
    filters of how many members, and whose), or not acknowledged at all. A ``resent`` row records the engine's
    possible-acknowledgement count when the resend went out (``possibly``); an older row without it is told
    from the ``possibly_acked`` rows before it."""
    by: list[str] = []
    for i, s in enumerate(steps):
        if s.kind == "possibly_acked" and s.detail.get("by") and s.detail["by"] not in by:
            by.append(s.detail["by"])
        elif s.kind == "resent":
            count = s.detail.get("possibly")
            count = count if isinstance(count, int) else len(by)
            n = s.detail.get("resends", "?")
            if count:
                whose = f" ({', '.join(name(p) for p in by)})" if by and len(by) <= count else ""
                text = (
                    f"resent (#{n}): only possibly acknowledged: in the bloom filter of {count} member(s)"
                    f"{whose}, in nobody's causal history yet"
                )
            else:
                text = f"resent (#{n}): not yet acknowledged: no member has named it or shown it in a bloom filter"
            steps[i] = dataclasses.replace(s, text=text, detail={**s.detail, "possibly": count})


async def _history_authors(store: Store, channel_id: str, steps: list[Step], name: _Names) -> None:
    """The ``sent`` step's causal history as ids (short) with their authors where this database knows them."""
    for i, s in enumerate(steps):
        hist = s.detail.get("history")
        if s.kind != "sent" or not isinstance(hist, list) or not hist:
            continue
        authors: dict[str, str | None] = {}
        for mid in hist[:32]:
            if isinstance(mid, str):
                row = await store.get_message(channel_id, mid)
                authors[mid] = row.sender_id if row is not None else None
        ids = ", ".join(f"{_short(m)} ({_printable(name(a))})" if a else _short(m) for m, a in authors.items())
        steps[i] = dataclasses.replace(s, text=f"{s.text}: {ids}", detail={**s.detail, "authors": authors})


def _asked(e: EventRow, name: _Names) -> list[Step]:
    """Other members' repair requests for the row's message, which the node remembered until the row that ended
    its story here (the first copy's ``received``, ``lost``, our ``repair_served`` or called-off answer) and
    wrote into its ``asked`` detail: one step each, at the time it was seen (kind ``repair_request_seen``)."""
    asked = _detail(e).get("asked")
    out = []
    for a in asked if isinstance(asked, list) else ():
        if not isinstance(a, dict) or type(a.get("ts")) is not int:
            continue
        text = f"{name(a.get('by'))} asked for a repair (SDS-R request in their frame {_short(a.get('frame'))})"
        if a.get("asking"):
            text += "; your own request backs off afresh"
        if type(a.get("answer_ms")) is int:
            text += f"; you answer in {(a['answer_ms'] - a['ts']) / 1000:.2f} s unless someone answers first"
        out.append(Step(a["ts"], "repair_request_seen", text, {k: v for k, v in a.items() if k != "ts"}))
    return out


def _pending(rows: Mapping[str, tuple], name: _Names) -> list[Step]:
    out = []
    if "outgoing" in rows:
        sent_at, resends, next_resend, ack_senders = rows["outgoing"]
        senders = json.loads(ack_senders) if isinstance(ack_senders, str) else []
        text = f"not yet acknowledged: resend #{resends + 1} due"
        if senders:
            text += f"; possibly acknowledged by {', '.join(name(s) for s in senders)}"
        out.append(Step(next_resend, "resend_due", text, {"resends": resends, "possibly_by": senders}))
    if "incoming" in rows:
        received_at, unmet = rows["incoming"]
        ids = json.loads(unmet) if isinstance(unmet, str) else []
        out.append(
            Step(received_at, "buffered", "held back: waits for " + ", ".join(map(_short, ids)), {"waits_for": ids})
        )
    if "missing" in rows:
        sender, detected = rows["missing"]
        out.append(Step(detected, "missing", f"still missing (from {name(sender)})", {}))
    if "request" in rows:
        t_req, attempts = rows["request"]
        out.append(
            Step(
                t_req,
                "repair_request_due",
                f"you ask for a repair (attempt {attempts + 1}) unless it arrives first",
                {"attempts": attempts},
            )
        )
    if "response" in rows:
        out.append(
            Step(
                rows["response"][0],
                "repair_answer_due",
                "you answer a repair request then, unless someone answers first",
                {},
            )
        )
    if "lost" in rows:
        out.append(Step(0, "lost", "declared lost", {}))
    return out


async def inspect_message(
    store: Store, channel_id: str, message_id: str, *, me: str, names: Mapping[str, str | None]
) -> Inspection | None:
    """The life of ``message_id`` as this database tells it, or None if nothing here names it."""
    name = _Names(names, me)
    events = await store.events_about(channel_id, [message_id])
    rows = await store.engine_rows(channel_id, message_id)
    row = await store.get_message(channel_id, message_id)
    if row is None and not events and not rows:
        return None
    app = decode_app(row.content) if row is not None else None
    if row is not None:
        sender = row.sender_id
    else:  # never stored here: whoever its rows (or the engine's missing table: a gap still open) name
        sender = (
            next(
                (
                    e.sender_id
                    for e in events
                    if e.kind in ("received", "delivered", "sent", "lost")
                    and e.message_id == message_id
                    and e.sender_id
                ),
                None,
            )
            or rows.get("missing", ("",))[0]
            or ""
        )
    steps = [s for s in (_step(e, message_id, name) for e in events) if s is not None]
    asked = [s for e in events if e.message_id == message_id for s in _asked(e, name)]
    if asked:
        steps = sorted(steps + asked, key=lambda s: s.ts_ms)  # stable: rows of one time keep their order
    _resend_reasons(steps, name)
    await _history_authors(store, channel_id, steps, name)
    first = {s.kind: s.ts_ms for s in reversed(steps)}
    figures: dict[str, Any] = {}
    if "sent" in first and "acked" in first:
        figures["first_ack_ms"] = first["acked"] - first["sent"]
    if app is not None and app.sent_at_ms and "delivered" in first and sender != me:
        figures["written_to_delivered_ms"] = first["delivered"] - app.sent_at_ms
    if "received" in first and "delivered" in first:
        figures["held_back_ms"] = first["delivered"] - first["received"]
    duplicates = sum(1 for s in steps if s.kind == "duplicate")
    if duplicates:
        figures["duplicates"] = duplicates
    if sender == me and sender:  # per member: who has named it in a causal history (the events window)
        by = sorted({str(s.detail["by"]) for s in steps if s.kind == "ack_seen" and s.detail.get("by")})
        figures["acked_by"] = by
        figures["not_yet"] = sorted(p for p in names if p not in by and p != me)
        if by and not figures["not_yet"] and "sent" in first:  # the last member seen named it then
            figures["all_acked_ms"] = max(s.ts_ms for s in steps if s.kind == "ack_seen") - first["sent"]
    return Inspection(
        message_id=message_id,
        sender_id=sender,
        nick=(app.nick if app else None) or names.get(sender),
        text=app.text if app else None,
        lamport_timestamp=row.lamport_timestamp if row else None,
        state=row.state if row else ("lost" if "lost" in rows else None),
        own=sender == me,
        steps=steps,
        pending=_pending(rows, name),
        figures=figures,
    )


async def gap_reports(
    store: Store, channel_id: str, *, me: str, names: Mapping[str, str | None], ids: Collection[str] | None = None
) -> list[GapReport]:
    """Every message noticed missing in the channel (still told of by its events) and how its gap closed:
    ``repair`` (SDS-R), ``store``, ``resend``, ``late`` (a copy came by itself), ``lost``, or ``open``.
    With ``ids``, only the gaps of those messages (from the rows naming them, not every missing row)."""
    name = _Names(names, me)
    found: dict[str, GapReport] = {}
    if ids is None:
        noticed_rows = await store.missing_events(channel_id)
    else:
        noticed_rows = [e for e in await store.events_about(channel_id, list(ids)) if e.kind == "missing"]
    for e in noticed_rows:
        d = _detail(e)
        noticed = (
            f"a sync frame from {name(e.sender_id)}"
            if d.get("source") == "sync"
            else f"{name(e.sender_id)}'s message {_short(e.message_id)}"
        )
        raw_hints = d.get("hints")
        hints = raw_hints if isinstance(raw_hints, dict) else {}
        for mid in d.get("missing", []):
            if isinstance(mid, str) and mid not in found and (ids is None or mid in ids):
                hint = hints.get(mid)
                found[mid] = GapReport(
                    mid, None, e.ts_ms, noticed, None, "open", None, hint=hint if isinstance(hint, str) else None
                )
    if not found:
        return []
    # each gap's own rows (its lost row, its arrival); the rows merely naming it are the missing ones read above
    for e in await store.events_about(channel_id, list(found), named=False):
        gap = found.get(e.message_id or "")
        if gap is None:
            continue
        if e.kind in _GAP_STEPS and e.ts_ms >= gap.detected_ms - 1:
            step = _step(e, gap.message_id, name)
            if step is not None:
                gap.steps.append(step)
        asked = _asked(e, name)
        if asked:
            gap.steps = sorted(gap.steps + asked, key=lambda s: s.ts_ms)
        if gap.closed_ms is not None and gap.how != "late":
            continue
        d = _detail(e)
        if e.kind == "lost":
            gap.closed_ms, gap.how, gap.sender_id = e.ts_ms, "lost", e.sender_id
        elif e.kind in ("received", "delivered") and e.ts_ms >= gap.detected_ms - 1:
            via = d.get("via")
            how = {"repair": "repair", "store": "store", "resend": "resend"}.get(str(via), "late")
            if gap.closed_ms is None or how != "late":
                gap.closed_ms, gap.how, gap.sender_id = e.ts_ms, how, e.sender_id
                gap.by = d.get("publisher") if how == "repair" else None
    reports = sorted(found.values(), key=lambda g: g.detected_ms)
    for gap in [g for g in reports if g.how == "open"][-50:]:  # the live state of the newest open gaps
        rows = await store.engine_rows(channel_id, gap.message_id)
        gap.pending = _pending(rows, name)
        if "missing" in rows and gap.sender_id is None:
            gap.sender_id = rows["missing"][0]
    return reports


def _printable(text: str) -> str:
    return text if text.isprintable() else "".join(c if c.isprintable() else " " for c in text)


@dataclasses.dataclass
class Rendered:
    """An inspection as text: header lines, timeline rows ``(clock, since the first step, what)``, then
    what is still to happen and the figures."""

    head: list[str]
    rows: list[tuple[str, str, str]]
    tail: list[str]

    def lines(self) -> list[str]:
        out = list(self.head)
        if self.rows:
            out += [""] + [f"{c}  {d}  {t}" for c, d, t in self.rows]
        return out + self.tail


def render_parts(
    insp: Inspection, *, now_ms: int, clock, names: Mapping[str, str | None] | None = None, tz: tzinfo | None = None
) -> Rendered:
    """The inspection as text (``clock(ms)`` formats a wall-clock time; timers count down from ``now_ms``;
    ``names``: participant id -> nick, for the per-member line; ``tz``: the zone of ``clock``, for the date of a
    Lamport time not of today)."""

    names = names or {}

    def member(pid: str) -> str:
        return _printable(names.get(pid) or pid[:8])

    who = "you" if insp.own else _printable(insp.nick or insp.sender_id[:8] or "a member not known here")
    lamport = insp.lamport_timestamp
    head = [
        f"message {insp.message_id[:16]}… from {who}"
        + (f", Lamport time {lamport_time(lamport, now_ms, clock, tz)}" if lamport is not None else ""),
        f"state: {insp.state or 'not stored here'}",
    ]
    if insp.text is not None:
        head.append(f"text: {_printable(insp.text[:200])}")  # a peer's text: no escape sequences
    rows = []
    if insp.steps:
        t0 = insp.steps[0].ts_ms
        rows = [(clock(s.ts_ms), f"+{(s.ts_ms - t0) / 1000:6.2f} s", _printable(s.text)) for s in insp.steps]
    tail: list[str] = []
    if insp.pending:
        tail.append("")
        for s in insp.pending:
            due = s.ts_ms - now_ms
            when = (f"in {due / 1000:.1f} s" if due > 0 else "now") if s.kind.endswith("_due") else ""
            tail.append(f"now: {s.text}" + (f" ({when})" if when else ""))
    fig = insp.figures
    if fig:
        tail.append("")
        if "first_ack_ms" in fig:
            tail.append(f"first acknowledgement {fig['first_ack_ms'] / 1000:.2f} s after sending")
        if "all_acked_ms" in fig:
            tail.append(f"every member seen had it {fig['all_acked_ms'] / 1000:.2f} s after sending")
        if "written_to_delivered_ms" in fig:
            tail.append(f"delivered {fig['written_to_delivered_ms'] / 1000:.2f} s after its author wrote it")
        if fig.get("held_back_ms"):
            tail.append(f"held back {fig['held_back_ms'] / 1000:.2f} s for earlier messages")
        if fig.get("duplicates"):
            tail.append(f"{fig['duplicates']} duplicate cop{'y' if fig['duplicates'] == 1 else 'ies'} seen")
        if fig.get("acked_by") or fig.get("not_yet"):
            acked = ", ".join(member(p) for p in fig.get("acked_by", [])) or "nobody yet"
            missing = f"; not yet by {', '.join(member(p) for p in fig['not_yet'])}" if fig.get("not_yet") else ""
            tail.append(f"acknowledged by {acked}{missing}")
    return Rendered(head, rows, tail)


def render(
    insp: Inspection, *, now_ms: int, clock, names: Mapping[str, str | None] | None = None, tz: tzinfo | None = None
) -> list[str]:
    """:func:`render_parts` as plain lines (``sdschat inspect``)."""
    return render_parts(insp, now_ms=now_ms, clock=clock, names=names, tz=tz).lines()


@dataclasses.dataclass
class Member:
    participant_id: str
    nick: str | None
    last_seen_ms: int
    messages: int
    #: the link both ways, in the events window (:meth:`sdschat.store.Store.member_figures`): tries (our
    #: publishes of each message they acknowledged, up to their acknowledgement, + their messages received here)
    #: and how many of those were lost (our publishes beyond the first that got through, + their messages whose
    #: first copy came resent, repaired or from the store)
    tries: int
    lost: int
    #: our messages they acknowledged (their causal history named them), and the median time to that (ms)
    acks: int
    ack_lag_ms: float | None
    #: messages of others they rebroadcast to us (SDS-R answers)
    repairs: int

    @property
    def loss_estimate(self) -> float | None:
        """The share of tries lost: an estimate of the loss between us, both ways."""
        return self.lost / self.tries if self.tries else None

    def to_json(self) -> dict:
        return {**dataclasses.asdict(self), "loss_estimate": self.loss_estimate}


async def member_reports(store: Store, channel_id: str, participants) -> list[Member]:
    """Everyone seen in the channel (``participants``: ParticipantRow), most recently heard first."""
    figures = await store.member_figures(channel_id)
    out = []
    for p in participants:
        f = figures.get(p.participant_id, {})
        out.append(
            Member(
                p.participant_id,
                p.nick,
                p.last_seen_ms,
                int(f.get("messages", 0)),
                int(f.get("tries", 0)),
                int(f.get("lost", 0)),
                int(f.get("acks", 0)),
                f.get("ack_lag_ms"),
                int(f.get("repairs", 0)),
            )
        )
    return sorted(out, key=lambda m: -m.last_seen_ms)
