"""Metric functions on hand-made event tables (no Spark)."""

from __future__ import annotations

import json

import pytest

from sdschat.pipeline.metrics import (
    SourceInfo,
    bloom_false_positives,
    cdf_points,
    compute,
    convergence,
    delivery,
    log_hash,
    percentiles,
    reduce_events,
    repair_rounds,
)
from sdschat.sim import log_hash as sim_log_hash

#: typed column -> the detail key it is read from (as migration 0004's generated columns)
TYPED_FROM_DETAIL = {
    "repaired": "repaired",
    "by_bloom": "by_bloom",
    "bytes": "bytes",
    "by_id": "by",
    "frame_ts": "frame_ts",
    "missing_ids": "missing",
    "carrier": "carrier",
}


def ev(kind, ts, mid=None, sender=None, pid=None, lamport=None, detail=None, source="g"):
    return {
        "source": source,
        "seq": 0,
        "ts_ms": ts,
        "kind": kind,
        "channel_id": "c",
        "message_id": mid,
        "sender_id": sender,
        "participant_id": pid,
        "lamport_timestamp": lamport,
        "detail": None if detail is None else json.dumps(detail),
        **{col: (detail or {}).get(key) for col, key in TYPED_FROM_DETAIL.items()},
    }


def group_events():
    """A, B, C. m1 (A) reaches B and C (C after a repair); m2 (B) reaches A only; m3 (C) reaches nobody."""
    return [
        ev("sent", 0, "m1", "A", "A", 1, {"bytes": 100}),
        ev("received", 100, "m1", "A", "B", 1),
        ev("delivered", 100, "m1", "A", "B", 1),
        ev("sent", 50, "m2", "B", "B", 2, {"bytes": 120}),
        ev("received", 80, "m2", "B", "A", 2),
        ev("delivered", 80, "m2", "B", "A", 2),
        ev("missing", 200, None, "B", "C", None, {"missing": ["m1"], "source": "sync"}),
        ev("repair_requested", 210, "m1", None, "C", None, {"carrier": "sync-1"}),
        ev("repair_served", 250, "m1", "A", "A", None, {"bytes": 90}),
        ev("repair_served", 260, "m1", "A", "B", None, {"bytes": 90}),
        ev("repair_cancelled", 300, "m1", "A", "C", None, {"what": "request", "via": "repair", "publisher": "A"}),
        ev("received", 300, "m1", "A", "C", 1),
        ev(
            "delivered", 300, "m1", "A", "C", 1, {"repaired": True, "via": "repair", "publisher": "A", "after_lost": []}
        ),
        ev("possibly_acked", 400, "m1", "A", "A", None, {"count": 1, "by": "B", "frame_ts": 150}),
        ev("acked", 500, "m1", "A", "A", None, {"by_bloom": True, "by": "C", "frame_ts": 280}),
        ev("sent", 600, "m3", "C", "C", 3, {"bytes": 110}),
        ev("resent", 5600, "m3", "C", "C", 3, {"resends": 1, "bytes": 110}),
    ]


def test_delivery_ratio_and_never_delivered():
    red = reduce_events(group_events())
    rows, summary = delivery(red.messages, ["A", "B", "C"])
    by = {r["message_id"]: r for r in rows}
    assert by["m1"]["delivery_ratio"] == 1.0 and by["m1"]["complete"]
    assert by["m2"]["delivery_ratio"] == 0.5 and not by["m2"]["complete"] and not by["m2"]["never_delivered"]
    assert by["m3"]["delivery_ratio"] == 0.0 and by["m3"]["never_delivered"]
    assert by["m1"]["repaired_deliveries"] == 1
    assert summary["deliveries"] == 3 and summary["expected_deliveries"] == 6
    assert summary["delivery_ratio"] == 0.5
    assert summary["mean_message_delivery_ratio"] == pytest.approx(0.5)
    assert summary["incomplete_messages"] == 2 and summary["never_delivered_messages"] == 1
    assert summary["complete_messages"] == 1


def test_delivery_counts_only_recording_participants():
    # databases of A and B only: C's message has both as recipients; A's message only B
    rows, summary = delivery([("g", "x", "A", 0, 1, 5, 5, 0), ("g", "y", "C", 0, 1, 5, 5, 0)], ["A", "B"])
    assert [r["recipients"] for r in rows] == [1, 2]
    assert summary["delivery_ratio"] == 2 / 3


def test_percentiles_nearest_rank():
    hist = {v: 1 for v in range(10, 101, 10)}  # 10, 20, ..., 100
    p = percentiles(hist)
    assert (p["n"], p["p50"], p["p95"], p["p99"], p["min"], p["max"]) == (10, 50, 100, 100, 10, 100)
    assert p["mean"] == 55
    weighted = percentiles([(5, 90), (1000, 9), (7000, 1)])
    assert (weighted["p50"], weighted["p95"], weighted["p99"]) == (5, 1000, 1000)
    assert percentiles([(5, 98), (1000, 1), (7000, 1)])["p99"] == 1000
    assert percentiles({})["p50"] is None and percentiles({})["n"] == 0
    assert percentiles({42: 3})["p99"] == 42
    assert cdf_points({2: 1, 1: 3}) == ([1, 2], [0.75, 1.0])


def test_latency_histograms():
    red = reduce_events(group_events())
    hist = {}
    for _s, metric, v, n in red.latency_hist:
        hist.setdefault(metric, {})[v] = n
    assert hist["send_to_deliver"] == {100: 1, 300: 1, 30: 1}
    assert hist["send_to_shown"] == {100: 1, 300: 1, 30: 1}  # every copy here came in order
    assert hist["send_to_ack"] == {500: 1}
    assert hist["repair"] == {100: 1}


def test_shown_and_delivered_in_order_are_two_latencies():
    """A message that arrives before one it depends on is shown at once (the UI marks the gap) but delivered
    in causal order only once the gap is filled: the two latencies differ by the wait."""
    rows = [
        ev("sent", 0, "m1", "A", "A", 1),
        ev("sent", 10, "m2", "A", "A", 2),
        ev("received", 40, "m2", "A", "B", 2),  # m1 lost on the way: m2 waits
        ev("missing", 40, "m2", "A", "B", 2, {"missing": ["m1"]}),
        ev("received", 2000, "m1", "A", "B", 1),
        ev("delivered", 2000, "m1", "A", "B", 1),
        ev("delivered", 2000, "m2", "A", "B", 2),
    ]
    rep = compute(reduce_events(rows), [SourceInfo("g", "sim", ["A", "B"])])
    s = rep.summary[0]
    assert (s["send_to_shown_p50_ms"], s["send_to_shown_max_ms"]) == (30, 2000)
    assert (s["send_to_deliver_p50_ms"], s["send_to_deliver_max_ms"]) == (1990, 2000)


def test_backlog_counts_messages_waiting_and_gaps_open_over_time():
    """m2 arrives before m1 (lost on the way) and waits behind the gap until m1 is repaired at 2,000 ms; m4
    names m3, which B never gets and declares lost at 3,000 ms (m4 is then delivered)."""
    rows = [
        ev("sent", 0, "m1", "A", "A", 1),
        ev("sent", 10, "m2", "A", "A", 2),
        ev("received", 40, "m2", "A", "B", 2),
        ev("missing", 40, "m2", "A", "B", 2, {"missing": ["m1"]}),
        ev("received", 2000, "m1", "A", "B", 1),
        ev("delivered", 2000, "m1", "A", "B", 1),
        ev("delivered", 2000, "m2", "A", "B", 2),
        ev("sent", 2100, "m3", "A", "A", 3),
        ev("sent", 2200, "m4", "A", "A", 4),
        ev("received", 2240, "m4", "A", "B", 4),
        ev("missing", 2240, "m4", "A", "B", 4, {"missing": ["m3"]}),
        ev("lost", 3000, "m3", "A", "B"),
        ev("delivered", 3000, "m4", "A", "B", 4),
        ev("repair_requested", 1000, "m1", None, "B"),
        ev("repair_served", 1500, "m1", "A", "A", None, {"bytes": 70}),
        ev("repair_cancelled", 2000, "m1", "A", "B", None, {"what": "request"}),
        ev("sync_sent", 11_999, "s", "A", "A"),  # the run lasts 12 s: 100 ms a slice
    ]
    red = reduce_events(rows)
    series = {b: (t, w, g) for _s, b, t, w, g in red.backlog}
    assert len(series) == 120 and series[1][0] == 100
    assert series[0][1:] == (1, 1)  # at 100 ms: m2 waits, m1 is missing
    assert series[19][1:] == (1, 1) and series[20][1:] == (0, 0)  # both over at 2,000 ms
    assert series[22][1:] == (1, 1) and series[29][1:] == (1, 1) and series[30][1:] == (0, 0)  # m3 lost at 3 s
    assert sorted(red.repair_load) == [("g", "A", 0, 1, 70, 0), ("g", "B", 1, 0, None, 1)]
    s = compute(red, [SourceInfo("g", "sim", ["A", "B"])]).summary[0]
    assert (s["backlog_peak_waiting"], s["backlog_peak_waiting_at_ms"]) == (1, 0)
    assert (s["backlog_peak_gaps_open"], s["backlog_peak_gaps_at_ms"]) == (1, 0)
    assert (s["repair_answers_max_member"], s["repair_answers_median_member"], s["repair_requests_max_member"]) == (
        1,
        0,
        1,
    )


def test_convergence_true_and_false():
    assert convergence({"A": "h", "B": "h"})["converged"] is True
    c = convergence({"A": "h1", "B": "h1", "C": "h2"})
    assert c["converged"] is False and c["distinct_logs"] == 2 and c["largest_agreeing"] == 2
    assert c["diverging"] == ["C"]
    assert convergence({})["converged"] is None


def test_convergence_from_events():
    same = [
        ev("sent", 0, "m1", "A", "A", 1),
        ev("delivered", 5, "m1", "A", "B", 1),
        ev("sent", 9, "m2", "B", "B", 2),
        ev("delivered", 12, "m2", "B", "A", 2),
    ]
    red = reduce_events(same)
    hashes = {p: h for _s, p, h, _n in red.event_log_hashes}
    assert hashes["A"] == hashes["B"] == log_hash(["m1", "m2"]) == sim_log_hash(["m1", "m2"])
    rep = compute(red, [SourceInfo("g", "sim", ["A", "B"])])
    assert rep.summary[0]["converged"] is True and rep.summary[0]["convergence_basis"] == "events"
    # B delivered m2's predecessor late and lacks m1: its log differs
    diverged = reduce_events(same[:1] + same[2:])
    rep = compute(diverged, [SourceInfo("g", "sim", ["A", "B"])])
    assert rep.summary[0]["converged"] is False and rep.summary[0]["distinct_logs"] == 2
    # the engine's own log hashes win over the events when given
    rep = compute(diverged, [SourceInfo("g", "sim", ["A", "B"], engine_log_hashes={"A": ("h", 2), "B": ("h", 2)})])
    assert rep.summary[0]["converged"] is True and rep.summary[0]["events_log_mismatches"] == 2


def test_repair_rounds_and_duplicates():
    rows, totals = repair_rounds(
        [
            ("m1", 0, "repair_requested", "C"),
            ("m1", 10, "repair_served", "A"),
            ("m1", 20, "repair_served", "B"),  # duplicate in round 1
            ("m1", 100, "repair_requested", "D"),
            ("m1", 105, "repair_served", "A"),
            ("m2", 7, "repair_served", "B"),  # no recorded request: round 0
            ("m3", 50, "repair_served", "A"),
            ("m3", 50, "repair_requested", "E"),  # same millisecond: the request comes first
        ]
    )
    assert totals == {
        "requests": 3,
        "responses": 5,
        "rounds_answered": 4,
        "rounds_with_duplicates": 1,
        "duplicate_responses": 1,
    }
    assert [(r["message_id"], r["round"], r["responses"]) for r in rows] == [
        ("m1", 1, 2),
        ("m1", 2, 1),
        ("m2", 0, 1),
        ("m3", 1, 1),
    ]


def test_bloom_false_positive_acks():
    red = reduce_events(group_events())
    rows, summary = bloom_false_positives([b[1:8] for b in red.bloom_evidence])
    by_kind = {r["kind"]: r for r in rows}
    assert by_kind["possibly_acked"]["false_positive"] is False  # B had m1 at 100 <= 150
    assert by_kind["acked"]["false_positive"] is True  # C received m1 at 300 > 280
    assert summary == {"bloom_evidence": 2, "bloom_evidence_false": 1, "bloom_acks": 1, "bloom_acks_false": 1}
    # without the simulator's by/frame_ts (a database): unavailable
    rows, summary = bloom_false_positives([("A", "m1", "acked", 5, None, None, None)])
    assert summary["bloom_acks"] == 1 and summary["bloom_acks_false"] is None


def test_compute_summary_on_a_hand_made_table():
    rep = compute(reduce_events(group_events()), [SourceInfo("g", "sim", ["A", "B", "C"], bytes_received=1000)])
    s = rep.summary[0]
    assert s["messages"] == 3 and s["deliveries"] == 3 and s["delivery_ratio"] == 0.5
    assert s["resends"] == 1 and s["resends_per_delivery"] == pytest.approx(1 / 3)
    assert s["repair_requests"] == 1 and s["repair_responses"] == 2 and s["duplicate_repair_responses"] == 1
    assert s["repair_called_off"] == 1
    assert s["bytes_published"] == 100 + 120 + 90 + 90 + 110 + 110
    assert s["bytes_published_per_delivery"] == pytest.approx(620 / 3)
    assert s["bytes_received_per_delivery"] == pytest.approx(1000 / 3)
    assert s["send_to_deliver_p50_ms"] == 100 and s["send_to_deliver_max_ms"] == 300
    assert s["bloom_acks_false"] == 1
    parts = {r["participant_id"]: r for r in rep.participants}
    assert parts["A"]["delivered"] == 1 and parts["A"]["expected"] == 2 and parts["A"]["delivery_ratio"] == 0.5
    assert parts["C"]["delivered"] == 1 and parts["C"]["sent"] == 1
    assert {r["metric"] for r in rep.latency} == {"send_to_shown", "send_to_deliver", "send_to_ack", "repair"}
    never = [r["message_id"] for r in rep.messages if r["never_delivered"]]
    assert never == ["m3"]


def test_database_sources_have_no_byte_counts():
    rows = [ev("sent", 0, "m1", "A", "A", 1), ev("delivered", 5, "m1", "A", "B", 1)]
    rep = compute(reduce_events(rows), [SourceInfo("g", "db", ["A", "B"])])
    s = rep.summary[0]
    assert s["bytes_published"] is None and s["bytes_received_per_delivery"] is None
    assert s["delivery_ratio"] == 1.0


def test_log_keys_in_memory_holds_every_log_or_keeps_sparks_default():
    from sdschat.pipeline.queries import LOG_ENTRIES_IN_MEMORY, log_keys_in_memory

    # the bound is on the log entries (sent and delivered events) of every source together, inclusive
    at_bound = [("x", "sent", 1, 0), ("x", "delivered", LOG_ENTRIES_IN_MEMORY - 1, None)]
    assert log_keys_in_memory(at_bound) == 65_536
    assert log_keys_in_memory([*at_bound, ("y", "sent", 1, 0)]) is None
    # other kinds are no log entries, however many
    assert log_keys_in_memory([("x", "received", 10 * LOG_ENTRIES_IN_MEMORY, None)]) == 65_536
    # the bench's sizes: (source, kind, events, bytes): 2,000 x 250 -- 500,000 log entries, every participant's
    # log in a hash map
    small = [("s", "sent", 250, 27_500), ("s", "delivered", 499_750, None), ("s", "received", 499_750, None)]
    assert log_keys_in_memory(small) == 65_536
    # 5,000 x 500: 2.5 million entries -- no setting: Spark's own bound (it holds 128 logs, then sorts)
    big = [("b", "sent", 500, 0), ("b", "delivered", 2_499_500, None)]
    assert log_keys_in_memory(big) is None
    # every source counts: two that fit alone may not fit together
    assert log_keys_in_memory([("x", "delivered", 1_500_000, None), ("y", "delivered", 600_000, None)]) is None
    assert log_keys_in_memory([("x", "delivered", LOG_ENTRIES_IN_MEMORY, None)]) == 65_536
    assert log_keys_in_memory([]) == 65_536
