"""Reliability metrics as plain Python: the definitions, testable without Spark.

The report works in two steps:

1. **Reduce** the event rows (millions) to small intermediate tables
   (:class:`Reduced`): per-message delivery counts, latency histograms,
   per-participant counts, repair and bloom-ack totals, bytes per frame
   kind, ordered-log hashes. The Spark job does this with SQL
   (:mod:`sdschat.pipeline.queries`); :func:`reduce_events` is the same
   reduction in Python for small inputs -- the executable specification the
   SQL is checked against.
2. **Compute** the metrics from those tables (:func:`compute`): plain Python
   on data that fits in memory.

Definitions (one group = one *source*: a simulation, or the databases of one channel):

* **Sender** of a message: the smallest ``sender_id`` its ``sent``,
  ``received`` and ``delivered`` events name (they all name the same one).
* **Recipients** of a message: the participants recording the source (every
  member of a simulation; the members whose database was given), minus its
  sender. **Delivery ratio** of a message: distinct recipients with a
  ``delivered`` event for it / recipients. *Never delivered*: delivered to no
  recipient; *incomplete*: delivered to some but not all.
* **Send-to-shown latency**: the first ``received`` (the first copy to reach
  a recipient: the UI shows it at once, marked if earlier messages are still
  missing) minus ``sent.ts``. **Send-to-deliver**: ``delivered.ts -
  sent.ts`` per recipient, delivered in causal order (after every message it
  depends on). Both need the sender's ``sent`` event; their difference is the
  time a message waited behind a gap. **Send-to-ack**: the sender's first
  ``acked`` minus its ``sent``. **Repair latency**: a participant's first
  ``delivered`` of an id minus when it first noted that id missing (the ids in
  ``missing`` events' ``missing_ids``).
* **Percentiles** are exact nearest-rank values over the latency histogram
  (:func:`percentiles`).
* **Per delivered message**: resends, repair requests, repair responses and
  bytes divided by the number of deliveries.
* **Duplicate repair responses**: a message's ``repair_served`` events are
  grouped into *rounds*, each round starting at a ``repair_requested`` of
  that message (by anyone; a request and a response at the same millisecond:
  the request first); every response in a round after the first is a duplicate.
* **Bytes on the wire**: published = the sizes (``bytes``) of
  ``sent``/``resent``/``sync_sent``/``repair_served`` (simulations only);
  received = each frame's size times the copies that reached an online member
  (``frames.parquet``). Databases record no sizes: *n/a*.
* **Bloom false-positive acks**: an ack by bloom filter (``possibly_acked``,
  or ``acked`` with ``by_bloom``) names the participant whose filter said
  "possibly received" (``by_id``) and when that filter was sent
  (``frame_ts``); the evidence is false if that participant had no
  ``received`` event for the message at or before then. An ``acked`` by bloom is
  a false-positive ack if any of the bloom evidence that led to it was false.
  Only simulations record ``by``/``frame_ts``; for databases: *n/a*.
* **Backlog** over time: the run (first to last event of the source) cut into
  :data:`BACKLOG_BUCKETS` equal buckets; at the end of each, *messages
  waiting*: (participant, message) pairs shown (first ``received``) but not
  yet delivered in causal order, and *gaps open*: (participant, id) pairs
  noted missing (``missing_ids``) and not yet received or declared ``lost``
  by that participant. Summed over the participants.
* **Repair load per member**: the repair requests it sent
  (``repair_requested``), the answers it rebroadcast (``repair_served``, and
  their bytes) and the requests or answers of its that a message's arrival
  called off (``repair_cancelled``).
* **Convergence**: every recording participant's ordered log (message ids by
  ``(lamport_timestamp, message_id)``) hashes to the same value
  (:func:`log_hash`). The engine's own log is used when the input has it
  (``logs.parquet``, ``sds_log``); otherwise the log rebuilt from ``sent`` and
  ``delivered`` events (one entry per message, at its smallest Lamport timestamp).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from hashlib import sha256
from typing import Any, NamedTuple

from sdschat.sim.stats import percentiles

__all__ = [
    "LATENCY_METRICS",
    "Reduced",
    "SourceInfo",
    "Report",
    "reduce_events",
    "compute",
    "percentiles",
    "cdf_points",
    "log_hash",
    "convergence",
    "delivery",
    "repair_rounds",
    "bloom_false_positives",
    "bloom_counts",
    "bloom_summary",
    "comparison",
    "BACKLOG_BUCKETS",
    "backlog_series",
]

LATENCY_METRICS = ("send_to_shown", "send_to_deliver", "send_to_ack", "repair")
PUBLISH_KINDS = ("sent", "resent", "sync_sent", "repair_served")
#: buckets of the backlog time series, per source
BACKLOG_BUCKETS = 120


def log_hash(message_ids: Iterable[str]) -> str:
    """SHA-256 (hex) of the ordered log: ids joined by newlines (as :func:`sdschat.sim.output.log_hash`)."""
    return sha256("\n".join(message_ids).encode()).hexdigest()


# ------------------------------------------------------------ intermediate


@dataclass
class Reduced:
    """The small tables the report is computed from (lists of tuples, one per row)."""

    #: (source, kind, n)
    kind_counts: list[tuple] = field(default_factory=list)
    #: (source, message_id, sender_id, sent_ts|None, delivered_to, first_delivery_ts|None,
    #:  last_delivery_ts|None, repaired_deliveries)
    messages: list[tuple] = field(default_factory=list)
    #: (source, metric, latency_ms, n)
    latency_hist: list[tuple] = field(default_factory=list)
    #: (source, participant_id, delivered, sent)
    participants: list[tuple] = field(default_factory=list)
    #: (source, sender_id, metric, n, p50, p95, p99, max) for send_to_shown and send_to_deliver, per sender
    sender_latency: list[tuple] = field(default_factory=list)
    #: (source, requests, responses, rounds_answered, rounds_with_duplicates, duplicate_responses)
    #: for each source with repair traffic (see :func:`repair_rounds`)
    repair_totals: list[tuple] = field(default_factory=list)
    #: (source, evidence, judged, false_evidence, acks, false_acks) for each source with bloom evidence
    #: (see :func:`bloom_counts`)
    bloom_totals: list[tuple] = field(default_factory=list)
    #: (source, kind, frames, bytes|None)
    wire_bytes: list[tuple] = field(default_factory=list)
    #: (source, participant_id, log_hash, log_length)
    event_log_hashes: list[tuple] = field(default_factory=list)
    #: (source, participant_id, requests, answers, answer_bytes|None, called_off), members with repair traffic
    repair_load: list[tuple] = field(default_factory=list)
    #: (source, bucket, bucket_start_ms, waiting, gaps_open): :data:`BACKLOG_BUCKETS` rows per source
    backlog: list[tuple] = field(default_factory=list)
    #: per-event tables, one row per repair round with responses: (source, message_id, round, started_ts|None,
    #: responses); and per bloom evidence: (source, participant_id, message_id, kind, ts_ms, by|None,
    #: frame_ts|None, by_received_ts|None, false_positive|None). None: Spark wrote them to Parquet itself.
    repair_rounds: list[tuple] | None = field(default_factory=list)
    bloom_evidence: list[tuple] | None = field(default_factory=list)

    TABLES = (
        "kind_counts",
        "messages",
        "latency_hist",
        "participants",
        "sender_latency",
        "repair_totals",
        "bloom_totals",
        "wire_bytes",
        "event_log_hashes",
        "repair_load",
        "backlog",
    )
    DETAIL_TABLES = ("repair_rounds", "bloom_evidence")

    def sorted(self) -> Reduced:
        """Rows in a canonical order (for comparing two reductions)."""
        out = Reduced()
        for t in (*self.TABLES, *self.DETAIL_TABLES):
            rows = getattr(self, t)
            setattr(out, t, sorted(rows, key=_sort_key) if rows is not None else None)
        return out


def _sort_key(row: tuple) -> tuple:
    return tuple((x is None, x if x is not None else 0) if not isinstance(x, str) else (False, x) for x in row)


@dataclass
class SourceInfo:
    """What the report knows about one source besides its events."""

    name: str
    kind: str  # "sim" or "db"
    participants: list[str]  # who records events in this source
    inputs: list[str] = field(default_factory=list)
    engine_log_hashes: dict[str, tuple[str, int]] | None = None  # participant -> (hash, length)
    bytes_received: int | None = None
    frames: int | None = None
    meta: dict[str, Any] | None = None


def reduce_events(rows: Iterable[Mapping[str, Any]]) -> Reduced:
    """The reduction of :mod:`sdschat.pipeline.queries`, in Python.

    ``rows``: dicts with the events columns (the typed ones included: ``missing_ids`` a list, or JSON text as a
    database's generated column gives it) and ``source``.
    """
    acc = _Pass()
    for r in rows:
        acc.add(r)
    received = acc.received
    red = Reduced(
        kind_counts=[(s, k, n) for (s, k), n in acc.kind_counts.items()],
        messages=_messages(acc),
        latency_hist=[(s, m, v, n) for (s, m, v), n in _latency_hist(acc).items()],
        participants=_participant_counts(acc),
        sender_latency=_sender_latency(acc),
        wire_bytes=[(s, k, n, b) for (s, k), (n, b) in acc.wire.items()],
        event_log_hashes=_event_log_hashes(acc.log_entries),
        repair_load=[(s, p, *v) for (s, p), v in acc.repair_load.items()],
        backlog=_backlog(acc),
    )
    rounds: list[tuple] = []
    for src, events in _by_source(acc.repair_events).items():
        rows_, tot = repair_rounds([e[1:] for e in events])
        rounds += [(src, r["message_id"], r["round"], r["started_ts"], r["responses"]) for r in rows_]
        red.repair_totals.append(
            (
                src,
                tot["requests"],
                tot["responses"],
                tot["rounds_answered"],
                tot["rounds_with_duplicates"],
                tot["duplicate_responses"],
            )
        )
    # each piece of evidence with when the participant it names (``by``) received the message
    evidence = [(*e, received.get(EventKey(e[0], e[5], e[2])) if e[5] is not None else None) for e in acc.evidence]
    judged: list[tuple] = []
    for src, events in _by_source(evidence).items():
        brows, _ = bloom_false_positives([e[1:] for e in events])
        judged += [
            (
                src,
                r["participant_id"],
                r["message_id"],
                r["kind"],
                r["ts_ms"],
                r["by"],
                r["frame_ts"],
                r["by_received_ts"],
                r["false_positive"],
            )
            for r in brows
        ]
        red.bloom_totals.append((src, *bloom_counts(brows)))
    red.repair_rounds, red.bloom_evidence = rounds, judged
    return red


class MessageKey(NamedTuple):
    """One message of one source: the key of what :func:`reduce_events` gathers per message."""

    source: str
    message_id: str


class EventKey(NamedTuple):
    """One participant and one message of one source: the key of every fact :func:`reduce_events` gathers per
    participant and message (first received, delivered, acknowledged, noted missing, declared lost), always in
    this order."""

    source: str
    participant_id: str | None
    message_id: str

    @property
    def message(self) -> MessageKey:
        return MessageKey(self.source, self.message_id)


_MESSAGE_KINDS = frozenset(("sent", "received", "delivered", "acked"))
_REPAIR_KINDS = frozenset(("repair_requested", "repair_served", "repair_cancelled"))


class _Pass:
    """What :func:`reduce_events` gathers in one pass over the rows: firsts, counts and evidence per key."""

    def __init__(self) -> None:
        self.kind_counts: Counter = Counter()
        self.sender_of: dict[MessageKey, str] = {}  # smallest non-null sender_id of sent/received/delivered
        self.seen: set[MessageKey] = set()
        self.sent: dict[MessageKey, int] = {}  # first ts
        self.sent_by: set[EventKey] = set()  # of sent rows
        self.delivered: dict[EventKey, list] = {}  # [first ts, repaired]
        self.acked: dict[EventKey, int] = {}  # first ts
        self.received: dict[EventKey, int] = {}  # first ts
        self.detected: dict[EventKey, int] = {}  # first noted missing
        self.repair_events: list[tuple] = []
        self.evidence: list[tuple] = []
        self.wire: dict[tuple, list] = {}  # (src, kind) -> [frames, bytes|None]
        self.log_entries: dict[tuple, dict] = defaultdict(dict)  # (src, pid) -> {mid: smallest lamport}
        self.span: dict[str, list] = {}  # src -> [first ts, last ts]
        self.lost: dict[EventKey, int] = {}  # first declared lost
        self.repair_load: dict[tuple, list] = {}  # (src, pid) -> [requests, answers, answer bytes|None, called off]

    def add(self, r: Mapping[str, Any]) -> None:
        src, kind, ts = r["source"], r["kind"], r["ts_ms"]
        mid, pid, snd = r.get("message_id"), r.get("participant_id"), r.get("sender_id")
        self.kind_counts[(src, kind)] += 1
        span = self.span.get(src)
        if span is None:
            self.span[src] = [ts, ts]
        elif ts < span[0]:
            span[0] = ts
        elif ts > span[1]:
            span[1] = ts
        if kind in PUBLISH_KINDS:
            b = _int(r.get("bytes"))
            acc = self.wire.setdefault((src, kind), [0, None])
            acc[0] += 1
            if b is not None:
                acc[1] = (acc[1] or 0) + b
        if kind in _MESSAGE_KINDS:
            if mid is not None:
                self._message_event(r, src, kind, ts, mid, pid, snd)
        elif kind == "possibly_acked":
            self.evidence.append((src, pid, mid, kind, ts, r.get("by_id"), _int(r.get("frame_ts"))))
        elif kind == "missing":
            ids = r.get("missing_ids")
            if isinstance(ids, str):  # a database's generated column: JSON text
                ids = json.loads(ids)
            for m in ids or ():
                key = EventKey(src, pid, m)
                self.detected[key] = min(self.detected.get(key, ts), ts)
        elif kind in _REPAIR_KINDS:
            if kind != "repair_cancelled":
                self.repair_events.append((src, mid, ts, kind, pid))
            load = self.repair_load.setdefault((src, pid), [0, 0, None, 0])
            if kind == "repair_requested":
                load[0] += 1
            elif kind == "repair_served":
                load[1] += 1
                b = _int(r.get("bytes"))
                if b is not None:
                    load[2] = (load[2] or 0) + b
            else:
                load[3] += 1
        elif kind == "lost":
            if mid is not None:
                key = EventKey(src, pid, mid)
                self.lost[key] = min(self.lost.get(key, ts), ts)

    def _message_event(self, r: Mapping[str, Any], src: str, kind: str, ts: int, mid: str, pid, snd) -> None:
        key = EventKey(src, pid, mid)
        if kind == "acked":
            self.acked[key] = min(self.acked.get(key, ts), ts)
            if r.get("by_bloom"):
                self.evidence.append((src, pid, mid, kind, ts, r.get("by_id"), _int(r.get("frame_ts"))))
            return
        message = key.message
        self.seen.add(message)
        if snd is not None and (message not in self.sender_of or snd < self.sender_of[message]):
            self.sender_of[message] = snd
        if kind == "sent":
            self.sent[message] = min(self.sent.get(message, ts), ts)
            self.sent_by.add(key)
            self._log(src, pid, mid, r.get("lamport_timestamp"))
        elif kind == "delivered":
            rep = 1 if r.get("repaired") else 0
            cur = self.delivered.setdefault(key, [ts, rep])
            cur[0] = min(cur[0], ts)
            cur[1] = max(cur[1], rep)
            self._log(src, pid, mid, r.get("lamport_timestamp"))
        else:  # received
            self.received[key] = min(self.received.get(key, ts), ts)

    def _log(self, src: str, pid, mid: str, lamport) -> None:
        entries = self.log_entries[(src, pid)]
        if mid not in entries:
            entries[mid] = lamport
        elif lamport is not None and (entries[mid] is None or lamport < entries[mid]):
            entries[mid] = lamport


def _messages(acc: _Pass) -> list[tuple]:
    """Rows of :attr:`Reduced.messages`: deliveries to participants other than the sender, per message."""
    per_msg: dict[MessageKey, list] = {}
    for key, (ts, rep) in acc.delivered.items():
        if key.participant_id == acc.sender_of.get(key.message):
            continue
        m = per_msg.setdefault(key.message, [0, ts, ts, 0])
        m[0] += 1
        m[1] = min(m[1], ts)
        m[2] = max(m[2], ts)
        m[3] += rep
    messages = []
    for message in acc.seen:
        s = acc.sent.get(message)
        n, first, last, rep = per_msg.get(message, (0, None, None, 0))
        messages.append((message.source, message.message_id, acc.sender_of.get(message), s, n, first, last, rep))
    return messages


def _latency_hist(acc: _Pass) -> Counter:
    """``(source, metric, latency_ms) -> n`` for every metric of :data:`LATENCY_METRICS`."""
    hist: Counter = Counter()
    sent, delivered = acc.sent, acc.delivered
    for key, (ts, _r) in delivered.items():
        s = sent.get(key.message)
        if s is not None:
            hist[(key.source, "send_to_deliver", ts - s)] += 1
    for key, ts in acc.received.items():
        s = sent.get(key.message)
        if s is not None:
            hist[(key.source, "send_to_shown", ts - s)] += 1
    for key, ts in acc.acked.items():
        s = sent.get(key.message)
        if s is not None and acc.sender_of.get(key.message) == key.participant_id:
            hist[(key.source, "send_to_ack", ts - s)] += 1
    for key, t0 in acc.detected.items():
        d = delivered.get(key)
        if d is not None and d[0] >= t0:
            hist[(key.source, "repair", d[0] - t0)] += 1
    return hist


def _backlog(acc: _Pass) -> list[tuple]:
    """Rows of :attr:`Reduced.backlog` (see :func:`backlog_series`)."""
    intervals: dict[str, list[tuple]] = defaultdict(list)
    delivered = acc.delivered
    for key, shown in acc.received.items():
        d = delivered.get(key)
        end = d[0] if d is not None else None
        if end is None or end > shown:
            intervals[key.source].append((0, shown, end))
    for key, noted in acc.detected.items():
        ends = [t for t in (acc.received.get(key), acc.lost.get(key)) if t is not None]
        end = min(ends) if ends else None
        if end is None or end > noted:
            intervals[key.source].append((1, noted, end))
    out = []
    for src, (t0, t1) in acc.span.items():
        out += [(src, *row) for row in backlog_series(intervals.get(src, ()), t0, t1)]
    return out


def backlog_series(
    intervals: Iterable[tuple], t0: int, t1: int, buckets: int = BACKLOG_BUCKETS
) -> list[tuple[int, int, int, int]]:
    """``(bucket, bucket_start_ms, waiting, gaps_open)`` for ``buckets`` equal buckets of ``[t0, t1]``.

    ``intervals``: ``(what, start_ts, end_ts|None)``, what 0 a message waiting, 1 a gap open; each counts at
    the end of every bucket it spans (from ``start_ts`` to before ``end_ts``; None: to the end).
    """
    width = (t1 - t0 + buckets) // buckets  # ceil((t1 - t0 + 1) / buckets): every event falls in a bucket
    deltas = [[0, 0] for _ in range(buckets)]
    for what, start, end in intervals:
        deltas[(start - t0) // width][what] += 1
        if end is not None:
            deltas[(end - t0) // width][what] -= 1
    out, waiting, gaps = [], 0, 0
    for b, (dw, dg) in enumerate(deltas):
        waiting += dw
        gaps += dg
        out.append((b, t0 + b * width, waiting, gaps))
    return out


def _sender_latency(acc: _Pass) -> list[tuple]:
    """Rows of :attr:`Reduced.sender_latency`: send-to-shown and send-to-deliver percentiles per sender."""
    hists: dict[tuple, Counter] = defaultdict(Counter)
    for key, ts in acc.received.items():
        s = acc.sent.get(key.message)
        if s is not None:
            hists[(key.source, acc.sender_of.get(key.message), "send_to_shown")][ts - s] += 1
    for key, (ts, _r) in acc.delivered.items():
        s = acc.sent.get(key.message)
        if s is not None:
            hists[(key.source, acc.sender_of.get(key.message), "send_to_deliver")][ts - s] += 1
    out = []
    for (src, sender, metric), hist in hists.items():
        pc = percentiles(hist)
        out.append((src, sender, metric, pc["n"], pc["p50"], pc["p95"], pc["p99"], pc["max"]))
    return out


def _participant_counts(acc: _Pass) -> list[tuple]:
    """Rows of :attr:`Reduced.participants`: messages of others delivered, own messages sent."""
    got: dict[tuple, set] = defaultdict(set)
    for src, pid, mid in acc.delivered:
        if pid != acc.sender_of.get(MessageKey(src, mid)):
            got[(src, pid)].add(mid)
    own: dict[tuple, set] = defaultdict(set)
    for src, pid, mid in acc.sent_by:
        own[(src, pid)].add(mid)
    return [
        (src, pid, len(got.get((src, pid), ())), len(own.get((src, pid), ())))
        for src, pid in set(got) | set(own)
        if pid is not None
    ]


def _event_log_hashes(log_entries: Mapping[tuple, dict[str, Any]]) -> list[tuple]:
    """Rows of :attr:`Reduced.event_log_hashes`: each participant's log rebuilt from its events."""
    hashes = []
    for (src, pid), entries in log_entries.items():
        ordered = [m for m, _ in sorted(entries.items(), key=lambda x: (x[1] if x[1] is not None else -1, x[0]))]
        hashes.append((src, pid, log_hash(ordered), len(ordered)))
    return hashes


def _int(v: Any) -> int | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int):
        return v
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


# --------------------------------------------------------------- functions


def cdf_points(hist: Iterable[tuple[int, int]] | Mapping[int, int]) -> tuple[list[int], list[float]]:
    """``(values, cumulative fractions)`` of a histogram, for plotting."""
    items = sorted(hist.items() if isinstance(hist, Mapping) else hist)
    n = sum(c for _, c in items)
    xs, ys, acc = [], [], 0
    for v, c in items:
        acc += c
        xs.append(v)
        ys.append(acc / n if n else 0.0)
    return xs, ys


def delivery(messages: Iterable[tuple], participants: list[str]) -> tuple[list[dict], dict[str, Any]]:
    """Per-message delivery (rows of :attr:`Reduced.messages` of one source) and a summary.

    Recipients of a message: ``participants`` minus its sender.
    """
    members = set(participants)
    rows = []
    for _src, mid, sender, sent_ts, n, first, last, repaired in messages:
        recipients = len(members) - (1 if sender in members else 0)
        ratio = (n / recipients) if recipients > 0 else None
        rows.append(
            {
                "message_id": mid,
                "sender_id": sender,
                "sent_ts": sent_ts,
                "delivered_to": n,
                "recipients": recipients,
                "delivery_ratio": ratio,
                "first_delivery_ts": first,
                "last_delivery_ts": last,
                "repaired_deliveries": repaired,
                "never_delivered": recipients > 0 and n == 0,
                "complete": recipients > 0 and n >= recipients,
            }
        )
    rows.sort(key=lambda r: (r["sent_ts"] is None, r["sent_ts"] or 0, r["message_id"]))
    ratios = [r["delivery_ratio"] for r in rows if r["delivery_ratio"] is not None]
    deliveries = sum(r["delivered_to"] for r in rows)
    expected = sum(r["recipients"] for r in rows)
    summary = {
        "messages": len(rows),
        "deliveries": deliveries,
        "expected_deliveries": expected,
        "delivery_ratio": (deliveries / expected) if expected else None,
        "mean_message_delivery_ratio": (sum(ratios) / len(ratios)) if ratios else None,
        "min_message_delivery_ratio": min(ratios) if ratios else None,
        "complete_messages": sum(1 for r in rows if r["complete"]),
        "incomplete_messages": sum(1 for r in rows if r["recipients"] > 0 and not r["complete"]),
        "never_delivered_messages": sum(1 for r in rows if r["never_delivered"]),
    }
    return rows, summary


def repair_rounds(events: Iterable[tuple]) -> tuple[list[dict], dict[str, int]]:
    """Group ``(message_id, ts_ms, kind, participant_id)`` repair events of one source into rounds.

    Returns per-round rows ``{message_id, round, started_ts, responses}`` (rounds
    with at least one response; round 0 = responses before any recorded request)
    and totals (requests, responses, rounds answered, rounds with duplicates,
    duplicate responses).
    """
    order = {"repair_requested": 0, "repair_served": 1}
    by_msg: dict[str, list] = defaultdict(list)
    for mid, ts, kind, pid in events:
        by_msg[mid].append((ts, order[kind], pid))
    rows = []
    totals: Counter[str] = Counter()
    for mid, evs in by_msg.items():
        evs.sort(key=lambda e: (e[0], e[1], e[2] or ""))
        rnd, started, served = 0, None, 0

        def close() -> None:
            if served:
                rows.append({"message_id": mid, "round": rnd, "started_ts": started, "responses": served})
                totals["rounds_answered"] += 1
                if served > 1:
                    totals["rounds_with_duplicates"] += 1
                    totals["duplicate_responses"] += served - 1

        for ts, k, _pid in evs:
            if k == 0:
                totals["requests"] += 1
                close()
                rnd += 1
                started, served = ts, 0
            else:
                totals["responses"] += 1
                served += 1
        close()
    for key in ("requests", "responses", "rounds_answered", "rounds_with_duplicates", "duplicate_responses"):
        totals.setdefault(key, 0)
    rows.sort(key=lambda r: (r["message_id"], r["round"]))
    return rows, dict(totals)


def bloom_false_positives(evidence: Iterable[tuple]) -> tuple[list[dict], dict[str, Any]]:
    """Classify bloom-filter ack evidence of one source; returns the rows and the report's summary fields.

    Each row: ``(participant_id, message_id, kind, ts_ms, by, frame_ts, by_received_ts)``.
    """
    rows = []
    for pid, mid, kind, ts, by, frame_ts, rts in evidence:
        known = by is not None and frame_ts is not None
        false = (rts is None or rts > frame_ts) if known else None
        rows.append(
            {
                "participant_id": pid,
                "message_id": mid,
                "kind": kind,
                "ts_ms": ts,
                "by": by,
                "frame_ts": frame_ts,
                "by_received_ts": rts,
                "false_positive": false,
            }
        )
    rows.sort(key=lambda r: (r["participant_id"] or "", r["message_id"] or "", r["ts_ms"], r["kind"]))
    return rows, bloom_summary(*bloom_counts(rows))


def bloom_counts(rows: list[dict]) -> tuple[int, int, int, int, int]:
    """``(evidence, judged, false evidence, acks, false acks)`` of classified evidence rows.

    Judged: the evidence names who and when (``by``, ``frame_ts``). An ack is
    false if any evidence for the same participant and message at or before
    its time (itself included) was false.
    """
    chains: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        chains[(r["participant_id"], r["message_id"])].append(r)
    false_acks = 0
    acks = 0
    for r in rows:
        if r["kind"] != "acked":
            continue
        acks += 1
        chain = chains[(r["participant_id"], r["message_id"])]
        if any(c["false_positive"] and c["ts_ms"] <= r["ts_ms"] for c in chain):
            false_acks += 1
    judged = sum(1 for r in rows if r["false_positive"] is not None)
    return len(rows), judged, sum(1 for r in rows if r["false_positive"]), acks, false_acks


def bloom_summary(evidence: int, judged: int, false_evidence: int, acks: int, false_acks: int) -> dict[str, Any]:
    """The report's bloom fields: the false counts only when every piece of evidence could be judged."""
    available = evidence == judged
    return {
        "bloom_evidence": evidence,
        "bloom_evidence_false": false_evidence if available else None,
        "bloom_acks": acks,
        "bloom_acks_false": false_acks if available else None,
    }


def convergence(hashes: Mapping[str, str]) -> dict[str, Any]:
    """Whether every participant's ordered-log hash is the same (``hashes``: participant -> hash)."""
    counts = Counter(hashes.values())
    if not counts:
        return {
            "participants": 0,
            "converged": None,
            "distinct_logs": 0,
            "largest_agreeing": 0,
            "majority_hash": None,
            "diverging": [],
        }
    majority, size = max(counts.items(), key=lambda kv: (kv[1], kv[0]))
    return {
        "participants": len(hashes),
        "converged": len(counts) == 1,
        "distinct_logs": len(counts),
        "largest_agreeing": size,
        "majority_hash": majority,
        "diverging": sorted(p for p, h in hashes.items() if h != majority),
    }


# ------------------------------------------------------------------ report


@dataclass
class Report:
    """Metric tables (lists of dict rows, each with a ``source`` key) ready to write."""

    summary: list[dict] = field(default_factory=list)
    messages: list[dict] = field(default_factory=list)
    latency: list[dict] = field(default_factory=list)
    latency_hist: list[dict] = field(default_factory=list)
    participants: list[dict] = field(default_factory=list)
    #: per-event tables: None when Spark wrote them under ``tables/`` itself (never collected)
    repair_rounds: list[dict] | None = field(default_factory=list)
    bloom_evidence: list[dict] | None = field(default_factory=list)
    convergence: list[dict] = field(default_factory=list)
    kind_counts: list[dict] = field(default_factory=list)
    #: per sender: send-to-shown and send-to-deliver percentiles (one row per sender, both metrics)
    senders: list[dict] = field(default_factory=list)
    #: per member with repair traffic: requests sent, answers rebroadcast (and bytes), called off; busiest first
    repair_load: list[dict] = field(default_factory=list)
    #: messages waiting and gaps open over time (:data:`BACKLOG_BUCKETS` rows per source)
    backlog: list[dict] = field(default_factory=list)
    #: ``report --compare``: the two sources' summaries side by side (:func:`comparison`)
    comparison: list[dict] = field(default_factory=list)

    TABLES = (
        "summary",
        "messages",
        "latency",
        "latency_hist",
        "participants",
        "repair_rounds",
        "bloom_evidence",
        "convergence",
        "kind_counts",
        "senders",
        "repair_load",
        "backlog",
    )


def _by_source(rows: Iterable[tuple]) -> dict[str, list[tuple]]:
    out: dict[str, list[tuple]] = defaultdict(list)
    for r in rows:
        out[r[0]].append(r)
    return out


_ROUND_COLUMNS = ("source", "message_id", "round", "started_ts", "responses")
_EVIDENCE_COLUMNS = (
    "source",
    "participant_id",
    "message_id",
    "kind",
    "ts_ms",
    "by",
    "frame_ts",
    "by_received_ts",
    "false_positive",
)


def compute(red: Reduced, sources: list[SourceInfo]) -> Report:
    """All metric tables from a reduction and what is known about each source.

    Where the reduction's per-event tables are None (Spark wrote them to Parquet), so are the report's.
    """
    rep = Report()
    if red.repair_rounds is None:
        rep.repair_rounds = None
    if red.bloom_evidence is None:
        rep.bloom_evidence = None
    tables = {t: _by_source(getattr(red, t) or ()) for t in (*Reduced.TABLES, *Reduced.DETAIL_TABLES)}
    for src in sources:
        _compute_source(rep, src, {t: rows.get(src.name, ()) for t, rows in tables.items()})
    return rep


def _compute_source(rep: Report, src: SourceInfo, red: Mapping[str, Iterable[tuple]]) -> None:
    """Append one source's rows to every table of ``rep`` (``red``: that source's rows of each reduced table)."""
    s = src.name
    kc = {k: n for _, k, n in red["kind_counts"]}
    rep.kind_counts += [{"source": s, "kind": k, "n": n} for k, n in sorted(kc.items())]
    mrows, dsum = delivery(red["messages"], src.participants)
    rep.messages += [{"source": s, **r} for r in mrows]
    lat = _latency(rep, s, red["latency_hist"])
    rep.senders += _sender_rows(s, red["sender_latency"])
    rep.participants += _participant_rows(s, src.participants, mrows, red["participants"])
    rt = next(iter(red["repair_totals"]), (s, 0, 0, 0, 0, 0))
    rtot = dict(
        zip(("requests", "responses", "rounds_answered", "rounds_with_duplicates", "duplicate_responses"), rt[1:])
    )
    if rep.repair_rounds is not None:
        rep.repair_rounds += [dict(zip(_ROUND_COLUMNS, r)) for r in red["repair_rounds"]]
    bsum = bloom_summary(*next(iter(red["bloom_totals"]), (s, 0, 0, 0, 0, 0))[1:])
    if rep.bloom_evidence is not None:
        rep.bloom_evidence += [dict(zip(_EVIDENCE_COLUMNS, r)) for r in red["bloom_evidence"]]
    load = _repair_load_rows(s, red["repair_load"])
    rep.repair_load += load
    series = sorted(red["backlog"], key=lambda r: r[1])
    start = series[0][2] if series else 0  # times from the source's first event
    backlog = [
        {"source": s, "bucket": b, "t_ms": t - start, "waiting": w, "gaps_open": g} for _src, b, t, w, g in series
    ]
    rep.backlog += backlog
    crows, conv = _convergence_rows(src, list(red["event_log_hashes"]))
    rep.convergence += crows
    summary = {
        "source": s,
        "kind": src.kind,
        "inputs": ", ".join(src.inputs),
        "participants": len(src.participants),
        **dsum,
        "events": sum(kc.values()),
    }
    for metric in LATENCY_METRICS:
        for q in ("p50", "p95", "p99", "max"):
            summary[f"{metric}_{q}_ms"] = lat[metric][q]
        summary[f"{metric}_n"] = lat[metric]["n"]
    summary.update(_cost_summary(src, kc, dsum["deliveries"], rtot, {k: (n, b) for _, k, n, b in red["wire_bytes"]}))
    summary.update(bsum)
    summary.update(_load_summary(load, backlog))
    summary.update(conv)
    rep.summary.append(summary)


def _latency(rep: Report, s: str, hist: Iterable[tuple]) -> dict[str, dict[str, Any]]:
    """Append source ``s``'s latency percentiles and histograms to ``rep``; the percentiles per metric."""
    hist = list(hist)
    lat: dict[str, Any] = {}
    for metric in LATENCY_METRICS:
        h = [(v, n) for _, m, v, n in hist if m == metric]
        pc = percentiles(h)
        rep.latency.append({"source": s, "metric": metric, **pc})
        rep.latency_hist += [{"source": s, "metric": metric, "latency_ms": v, "n": n} for v, n in sorted(h)]
        lat[metric] = pc
    return lat


def _sender_rows(s: str, rows: Iterable[tuple]) -> list[dict]:
    """One row per sender: its messages' send-to-shown and send-to-deliver percentiles, slowest delivery first."""
    by: dict[Any, dict] = {}
    for _src, sender, metric, n, p50, p95, p99, mx in rows:
        row = by.setdefault(sender, {"source": s, "sender_id": sender})
        short = "shown" if metric == "send_to_shown" else "delivered"
        row.update(
            {
                f"{short}_n": n,
                f"{short}_p50_ms": p50,
                f"{short}_p95_ms": p95,
                f"{short}_p99_ms": p99,
                f"{short}_max_ms": mx,
            }
        )
    keys = [f"{m}_{q}" for m in ("shown", "delivered") for q in ("n", "p50_ms", "p95_ms", "p99_ms", "max_ms")]
    out = [{**{k: None for k in keys}, **r} for r in by.values()]
    out.sort(key=lambda r: (-(r["delivered_p99_ms"] or -1), str(r["sender_id"])))
    return out


def _repair_load_rows(s: str, rows: Iterable[tuple]) -> list[dict]:
    """One row per member with repair traffic, the most answers first."""
    out = [
        {
            "source": s,
            "participant_id": p,
            "repair_requests": req,
            "repair_answers": ans,
            "repair_answer_bytes": b,
            "repair_called_off": off,
        }
        for _src, p, req, ans, b, off in rows
    ]
    out.sort(key=lambda r: (-r["repair_answers"], -r["repair_requests"], str(r["participant_id"])))
    return out


def _load_summary(load: list[dict], backlog: list[dict]) -> dict[str, Any]:
    """The summary's repair load (busiest member; median over the members with any) and backlog peaks."""
    answers = sorted(r["repair_answers"] for r in load)
    requests = sorted(r["repair_requests"] for r in load)
    peak_w = max(backlog, key=lambda r: (r["waiting"], -r["bucket"]), default=None)
    peak_g = max(backlog, key=lambda r: (r["gaps_open"], -r["bucket"]), default=None)
    return {
        "repair_answers_max_member": answers[-1] if answers else 0,
        "repair_answers_median_member": answers[(len(answers) - 1) // 2] if answers else 0,
        "repair_requests_max_member": requests[-1] if requests else 0,
        "backlog_peak_waiting": peak_w["waiting"] if peak_w else 0,
        "backlog_peak_waiting_at_ms": peak_w["t_ms"] if peak_w and peak_w["waiting"] else None,
        "backlog_peak_gaps_open": peak_g["gaps_open"] if peak_g else 0,
        "backlog_peak_gaps_at_ms": peak_g["t_ms"] if peak_g and peak_g["gaps_open"] else None,
    }


def _participant_rows(s: str, participants: list[str], mrows: list[dict], parts: Iterable[tuple]) -> list[dict]:
    """Per participant: messages of others delivered, own messages sent, and its delivery ratio."""
    members = set(participants)
    sent_count: Counter[str] = Counter()
    for r in mrows:
        if r["sender_id"] in members:
            sent_count[r["sender_id"]] += 1
    counts = {p: (d, snt) for _, p, d, snt in parts}
    n_msgs = len(mrows)
    rows = []
    for p in participants:
        d, snt = counts.get(p, (0, 0))
        own = sent_count.get(p, snt)
        expected = n_msgs - own
        rows.append(
            {
                "source": s,
                "participant_id": p,
                "delivered": d,
                "sent": own,
                "expected": expected,
                "delivery_ratio": (d / expected) if expected > 0 else None,
            }
        )
    return rows


def _convergence_rows(src: SourceInfo, ev_hashes: list[tuple]) -> tuple[list[dict], dict[str, Any]]:
    """Per participant: its log's hash and length, and whether it agrees; plus the summary's convergence fields."""
    s = src.name
    ev = {p: h for _, p, h, _n in ev_hashes}
    empty = log_hash([])
    if src.engine_log_hashes is not None:
        hashes = {p: src.engine_log_hashes[p][0] for p in src.participants if p in src.engine_log_hashes}
        basis = "engine log"
    else:
        hashes = {p: ev.get(p, empty) for p in src.participants}
        basis = "events"
    conv = convergence(hashes)
    mismatch = sum(1 for p, h in hashes.items() if ev.get(p, empty) != h)
    majority = conv["majority_hash"]
    rows = []
    for p in src.participants:
        h = hashes.get(p)
        length = (src.engine_log_hashes or {}).get(p, (None, None))[1]
        if length is None:
            length = next((n for _, q, _h, n in ev_hashes if q == p), 0)
        rows.append(
            {
                "source": s,
                "participant_id": p,
                "log_hash": h,
                "log_length": length,
                "agrees_with_majority": h == majority,
                "events_log_matches": ev.get(p, empty) == h,
            }
        )
    return rows, {
        "converged": conv["converged"],
        "distinct_logs": conv["distinct_logs"],
        "largest_agreeing": conv["largest_agreeing"],
        "convergence_basis": basis,
        "events_log_mismatches": mismatch if src.engine_log_hashes is not None else None,
    }


def _cost_summary(
    src: SourceInfo, kc: Mapping[str, int], deliveries: int, rtot: Mapping[str, int], wbytes: Mapping[str, tuple]
) -> dict[str, Any]:
    """The summary's cost fields: resends, repair traffic and bytes, also per delivered message."""
    published = None
    if src.kind == "sim" or any(b is not None for _, b in wbytes.values()):
        published = sum(b or 0 for _, b in wbytes.values())

    def per(x):
        return (x / deliveries) if (x is not None and deliveries) else None

    resends = kc.get("resent", 0)
    return {
        "resends": resends,
        "repair_requests": kc.get("repair_requested", 0),
        "repair_responses": kc.get("repair_served", 0),
        "resends_per_delivery": per(resends),
        "repair_requests_per_delivery": per(kc.get("repair_requested", 0)),
        "repair_responses_per_delivery": per(kc.get("repair_served", 0)),
        "repair_rounds_answered": rtot["rounds_answered"],
        "repair_rounds_with_duplicates": rtot["rounds_with_duplicates"],
        "duplicate_repair_responses": rtot["duplicate_responses"],
        # repair requests and answers a message's arrival called off (SDS-R's suppression at work)
        "repair_called_off": kc.get("repair_cancelled", 0),
        "syncs_sent": kc.get("sync_sent", 0),
        "lost_declared": kc.get("lost", 0),
        "frames_published": sum(n for n, _ in wbytes.values()) if wbytes else 0,
        "bytes_published": published,
        "bytes_published_per_delivery": per(published),
        "bytes_received": src.bytes_received,
        "bytes_received_per_delivery": per(src.bytes_received),
    }


#: summary fields that describe a source rather than measure it (not compared)
_NOT_COMPARED = ("source", "kind", "inputs", "convergence_basis")


def comparison(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[dict]:
    """Every measured field of two sources' summaries side by side: ``{metric, a, b, delta, change}``.

    ``delta`` is ``b - a`` and ``change`` ``delta / a`` for numbers (None when either is missing, or ``a``
    is 0 for ``change``); yes/no fields get neither.
    """
    rows = []
    for key in a:
        if key in _NOT_COMPARED or key not in b:
            continue
        x, y = a[key], b[key]
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (x, y))
        delta = y - x if numbers else None
        change = delta / x if numbers and x else None
        rows.append({"metric": key, "a": x, "b": y, "delta": delta, "change": change})
    return rows
