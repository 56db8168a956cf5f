"""Store nodes in the model (``SimParams.stores``): members ask them as the node does, and what they answer goes
through the receive path; the same seed gives the same events for any number of workers."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import pyarrow.parquet as pq
import pytest
from sim_helpers import events_of, rows_without_seq

from sdschat.sim import SimParams, simulate
from sdschat.sim.stores import HINT_DELAY_MS, TIMEOUT_MS

LOSSY = dict(participants=30, messages=40, rate=2.0, loss=0.2, duplicate=0.05, latency_ms=(5, 150), seed=5)


def rows_of(out) -> list[dict]:
    return sorted(events_of(out).to_pylist(), key=lambda x: x["seq"])


def via(row: dict) -> str | None:
    return json.loads(row["detail"])["via"] if row["detail"] else None


def latencies(rows: list[dict]) -> list[int]:
    sent = {x["message_id"]: x["ts_ms"] for x in rows if x["kind"] == "sent"}
    return sorted(x["ts_ms"] - sent[x["message_id"]] for x in rows if x["kind"] == "delivered")


def test_a_store_fills_gaps_long_before_sds_r(tmp_path):
    """Without a store, a lost message waits for SDS-R (T_min 30 s); with one, members ask it 200 ms after
    noticing the gap and get the message from it."""
    simulate(SimParams(**LOSSY), tmp_path / "none")
    result = simulate(SimParams(**LOSSY, stores=1), tmp_path / "store")
    none, store = rows_of(tmp_path / "none"), rows_of(tmp_path / "store")
    assert result.meta["delivery_ratio"] == 1.0 and result.meta["converged"]
    repaired = Counter(via(x) for x in store if x["kind"] == "delivered" and x["repaired"])
    assert repaired["store"] > 100 and repaired["store"] > 5 * repaired.get("repair", 0)
    assert Counter(via(x) for x in none if x["kind"] == "delivered" and x["repaired"])["repair"] > 100
    # every id asked for is asked once by a member, within 200 ms of noticing it missing (with the ids queued
    # since the first of a batch, 200 ms after that one), and answered
    noticed: dict[tuple, int] = {}
    for x in store:
        if x["kind"] == "missing":
            for mid in x["missing_ids"]:
                noticed.setdefault((x["participant_id"], mid), x["ts_ms"])
    queries = [x for x in store if x["kind"] == "store_query"]
    assert queries and len({(x["participant_id"], x["message_id"]) for x in queries}) == len(queries)
    for q in queries:
        first = noticed[(q["participant_id"], q["message_id"])]
        assert first < q["ts_ms"] <= first + HINT_DELAY_MS
    answers = {
        (x["participant_id"], x["message_id"]): json.loads(x["detail"]) for x in store if x["kind"] == "store_answer"
    }
    assert set(answers) == {(q["participant_id"], q["message_id"]) for q in queries}
    outcomes = Counter(a["outcome"] for a in answers.values())
    assert outcomes["found"] > 0.9 * len(answers)
    # what a store changes, in the two latencies' terms: the median wait in causal order drops from SDS-R's
    # tens of seconds to a few hundred milliseconds
    slow, fast = latencies(none), latencies(store)
    assert slow[len(slow) // 2] > 10_000 and fast[len(fast) // 2] < 1_000
    assert fast[int(len(fast) * 0.99)] < slow[int(len(slow) * 0.99)]


def test_members_back_online_catch_up_from_the_store(tmp_path):
    """No loss, no SDS-R: what a member misses is what it was offline for; coming back, it asks the store for
    everything since it went away, and gets it at once."""
    p = SimParams(
        participants=20,
        messages=60,
        rate=1.0,
        churn=(0.2, 20_000),
        repair=False,
        latency_ms=(10, 100),
        seed=2,
        stores=1,
    )
    result = simulate(p, tmp_path)
    counts = result.meta["counts"]
    assert counts["store_catch_ups"] == counts["came_online"] > 5
    assert counts["store_envelopes"] > 0 and result.meta["delivery_ratio"] == 1.0
    rows = rows_of(tmp_path)
    # (as the node writes it: a received row says where the first copy came from when not from its author)
    came = [x for x in rows if x["kind"] == "received" and via(x) == "store"]
    assert came, "nothing received from a store"
    assert all(json.loads(x["detail"])["publisher"] == x["sender_id"] for x in came)
    # catch-ups bring messages nobody asked for by id (the member did not know it missed them)
    asked = {(x["participant_id"], x["message_id"]) for x in rows if x["kind"] == "store_query"}
    assert any((x["participant_id"], x["message_id"]) not in asked for x in came)


def test_stores_nobody_reaches_change_nothing_but_their_own_rows(tmp_path):
    """Every copy to a store and every request lost: each id asked for times out after 3 s ("no answer") and
    every other event is the same as without stores."""
    base = dict(LOSSY, churn=(0.1, 15_000))
    simulate(SimParams(**base), tmp_path / "none")
    result = simulate(SimParams(**base, stores=2, store_loss=1.0), tmp_path / "dead")
    dead = rows_without_seq(events_of(tmp_path / "dead"))
    store_rows = Counter({k: v for k, v in dead.items() if k[1] in ("store_query", "store_answer")})
    assert store_rows and result.meta["counts"]["store_timeouts"] > 0
    assert dead - store_rows == rows_without_seq(events_of(tmp_path / "none"))
    rows = rows_of(tmp_path / "dead")
    asked = {(x["participant_id"], x["message_id"]): x["ts_ms"] for x in rows if x["kind"] == "store_query"}
    for x in rows:
        if x["kind"] == "store_answer":
            assert json.loads(x["detail"]) == {"outcome": "no answer", "envelopes": 0}
            assert x["ts_ms"] == asked[(x["participant_id"], x["message_id"])] + TIMEOUT_MS


def test_stores_with_outages_give_the_same_events_for_any_number_of_workers(tmp_path):
    workers = 3
    p = SimParams(**LOSSY, churn=(0.1, 15_000), stores=2, store_loss=0.1, store_outages=(0.3, 10_000))
    one = simulate(p, tmp_path / "one")
    many = simulate(p, tmp_path / "many", workers=workers)
    assert rows_without_seq(events_of(tmp_path / "one")) == rows_without_seq(events_of(tmp_path / "many"))
    assert one.log_hashes == many.log_hashes and one.meta["counts"] == many.meta["counts"] | {
        k: v for k, v in one.meta["counts"].items() if k not in many.meta["counts"]
    }
    outcomes = Counter(
        json.loads(x["detail"])["outcome"] for x in rows_of(tmp_path / "one") if x["kind"] == "store_answer"
    )
    assert outcomes["found"] > 0 and outcomes["no answer"] > 0  # outages and loss: some requests go unanswered
    assert pq.read_table(tmp_path / "one" / "frames.parquet").equals(
        pq.read_table(tmp_path / "many" / "frames.parquet")
    )


def test_store_settings_are_checked_and_recorded(tmp_path):
    for bad, text in (
        (dict(stores=-1), "stores"),
        (dict(stores=1, store_loss=2.0), "store_loss"),
        (dict(stores=1, store_latency_ms=(1, 5)), "lookahead"),
        (dict(stores=1, store_outages=(1.5, 10)), "outage"),
    ):
        with pytest.raises(ValueError, match=text):
            SimParams(**bad)
    p = SimParams(
        participants=5, messages=3, stores=2, store_loss=0.1, store_latency_ms=(30, 60), store_outages=(0.1, 5_000)
    )
    assert SimParams.from_json(json.loads(json.dumps(p.to_json()))) == p
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "sdschat",
            "simulate",
            "--participants",
            "5",
            "--stores",
            "1",
            "--store-latency-ms",
            "1:5",
            "--out",
            str(tmp_path / "x"),
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "store latency" in r.stderr


def test_a_long_absence_is_caught_up_in_pages():
    """Away for a minute at 10 messages/s: more than a page (500 frames) to catch up on, asked page after page."""
    from sdschat.sim.stores import MAX_PAGE

    p = SimParams(
        participants=12,
        messages=900,
        rate=10.0,
        churn=(0.3, 60_000),
        repair=False,
        latency_ms=(10, 100),
        seed=4,
        stores=1,
    )
    counts = simulate(p, None).meta["counts"]
    assert counts["store_pages"] > counts["store_catch_ups"] == counts["came_online"] > 3
    assert counts["store_envelopes"] > MAX_PAGE and counts["store_delivered"] > MAX_PAGE
    assert counts["store_envelope_bytes"] > 1_000 * counts["store_envelopes"]


def test_a_second_store_that_answers_later_fills_what_the_first_lacked(tmp_path):
    """Two stores that each lose copies: when the first answer says "not found", the other store's later answer
    (as the node now takes it) brings the message, long before SDS-R could; one store alone cannot."""
    lossy = dict(LOSSY, stores=2, store_loss=0.3)
    result = simulate(SimParams(**lossy), tmp_path / "two")
    rows = rows_of(tmp_path / "two")
    assert result.meta["delivery_ratio"] == 1.0 and result.meta["converged"]
    late = result.meta["counts"]["store_late_answers"]
    assert late > 10
    not_found = {
        (x["participant_id"], x["message_id"]): x["ts_ms"]
        for x in rows
        if x["kind"] == "store_answer" and json.loads(x["detail"])["outcome"] == "not found"
    }
    from_store = {
        (x["participant_id"], x["message_id"]): x["ts_ms"]
        for x in rows
        if x["kind"] == "delivered" and via(x) == "store"
    }
    # a "not found" first answer, then the message from the store within the request's time (3 s)
    filled = [k for k, t in not_found.items() if k in from_store and 0 <= from_store[k] - t <= TIMEOUT_MS]
    assert len(filled) > 5
    # the same run with one store: a "not found" is never followed by the message from a store that soon
    one = simulate(SimParams(**dict(lossy, stores=1)), tmp_path / "one")
    rows = rows_of(tmp_path / "one")
    assert one.meta["counts"].get("store_late_answers", 0) == 0
    not_found = {
        (x["participant_id"], x["message_id"]): x["ts_ms"]
        for x in rows
        if x["kind"] == "store_answer" and json.loads(x["detail"])["outcome"] == "not found"
    }
    from_store = {
        (x["participant_id"], x["message_id"]): x["ts_ms"]
        for x in rows
        if x["kind"] == "delivered" and via(x) == "store"
    }
    assert not_found and not [
        k for k, t in not_found.items() if k in from_store and 0 <= from_store[k] - t <= TIMEOUT_MS
    ]
    # and the late answers are the same for any number of workers
    again = simulate(SimParams(**lossy), tmp_path / "two-w3", workers=3)
    assert again.meta["counts"]["store_late_answers"] == late
    assert rows_without_seq(events_of(tmp_path / "two-w3")) == rows_without_seq(events_of(tmp_path / "two"))
