"""The simulator: determinism, delivery and convergence, output schema, worker equivalence."""

from __future__ import annotations

import json
from collections import Counter

import pyarrow.parquet as pq
import pytest
from sim_helpers import events_of, rows_without_seq

from sdschat.sds import native
from sdschat.sim import EVENT_SCHEMA, SimParams, log_hash, parse_churn, parse_latency, parse_overrides, simulate
from sdschat.sim.output import FRAME_SCHEMA, LOG_SCHEMA
from sdschat.store import EVENT_KINDS

#: short SDS-R timings so small lossy runs settle in little virtual time
FAST_REPAIR = {"repair_t_min_ms": 1000, "repair_t_max_ms": 4000}


def test_same_seed_same_events_different_seed_different(tmp_path):
    p = SimParams(
        participants=25,
        messages=20,
        rate=2.0,
        loss=0.15,
        duplicate=0.05,
        seed=7,
        overrides=FAST_REPAIR,
        horizon_ms=120_000,
    )
    a = simulate(p, tmp_path / "a")
    b = simulate(p, tmp_path / "b")
    simulate(p.replace(seed=8), tmp_path / "c")
    ta, tb, tc = events_of(tmp_path / "a"), events_of(tmp_path / "b"), events_of(tmp_path / "c")
    assert ta.num_rows > 1000
    assert ta.equals(tb)  # same rows, same order, same seq
    assert a.log_hashes == b.log_hashes
    assert pq.read_table(tmp_path / "a" / "frames.parquet").equals(pq.read_table(tmp_path / "b" / "frames.parquet"))
    drop = (
        "wall_time_s",
        "peak_rss_mb",
        "peak_rss_mb_total",
        "events_per_s",
        "worker_busy_s",
        "worker_cpu_s",
        "worker_wait_s",
    )
    assert {k: v for k, v in a.meta.items() if k not in drop} == {k: v for k, v in b.meta.items() if k not in drop}
    assert not tc.equals(ta)


def test_lossless_run_delivers_everything_and_converges(tmp_path):
    n, m = 12, 15
    r = simulate(SimParams(participants=n, messages=m, rate=2.0, seed=3), tmp_path)
    meta = r.meta
    kinds = meta["event_kinds"]
    assert kinds["sent"] == m
    assert kinds["delivered"] == m * (n - 1)
    assert kinds["received"] == m * (n - 1)
    assert meta["delivery_ratio"] == 1.0
    assert meta["converged"] and r.converged and meta["distinct_logs"] == 1
    assert meta["stop_reason"] == "quiescent"
    assert meta["counts"].get("copies_lost", 0) == 0
    logs = pq.read_table(tmp_path / "logs.parquet").to_pylist()
    assert len(logs) == n and {x["log_length"] for x in logs} == {m}
    assert len({x["log_hash"] for x in logs}) == 1


def test_lossy_run_with_repair_converges_and_without_repair_does_not(tmp_path):
    base = SimParams(
        participants=20, messages=30, rate=2.0, loss=0.2, seed=2, overrides=FAST_REPAIR, horizon_ms=120_000
    )
    with_repair = simulate(base)
    assert with_repair.meta["delivery_ratio"] == 1.0
    assert with_repair.converged
    assert with_repair.meta["event_kinds"]["repair_served"] > 0
    assert with_repair.meta["counts"]["copies_lost"] > 0
    without = simulate(base.replace(repair=False))
    assert without.meta["delivery_ratio"] < 1.0
    assert not without.converged
    assert "repair_served" not in without.meta["event_kinds"]


def test_churn_with_clean_settle_converges(tmp_path):
    p = SimParams(
        participants=20,
        messages=25,
        rate=1.0,
        loss=0.05,
        churn=(0.2, 5_000),
        settle="clean",
        seed=4,
        overrides=FAST_REPAIR,
        horizon_ms=200_000,
    )
    r = simulate(p, tmp_path)
    counts = r.meta["counts"]
    assert counts["went_offline"] > 0 and counts["came_online"] > 0
    assert counts["copies_to_offline"] > 0
    assert r.converged and r.meta["delivery_ratio"] == 1.0
    assert all(x["online"] for x in pq.read_table(tmp_path / "logs.parquet").to_pylist())


def test_output_schema_matches_the_node_event_table(tmp_path):
    r = simulate(
        SimParams(participants=15, messages=10, rate=2.0, loss=0.2, seed=5, overrides=FAST_REPAIR, horizon_ms=60_000),
        tmp_path,
        shard_rows=200,
    )
    shards = sorted(tmp_path.glob("events-*.parquet"))
    assert len(shards) == len(r.meta["event_shards"]) > 1
    for f in shards:
        assert pq.read_schema(f).equals(EVENT_SCHEMA)
    t = events_of(tmp_path)
    seq = t.column("seq").to_pylist()
    assert sorted(seq) == list(range(1, t.num_rows + 1))  # global across shards
    kinds = set(t.column("kind").to_pylist())
    assert kinds <= EVENT_KINDS
    assert {"sent", "received", "delivered", "acked", "missing", "repair_requested", "repair_served"} <= kinds
    assert set(t.column("channel_id").to_pylist()) == {"sim"}
    rows = t.to_pylist()
    for row in rows:
        if row["detail"] is not None:
            assert isinstance(json.loads(row["detail"]), dict)
        # the facts the report reads are typed columns (migrations/0004_typed_events.sql), not in detail
        assert not {"bytes", "by", "frame_ts", "missing", "repaired", "by_bloom", "carrier"} & set(
            json.loads(row["detail"]) if row["detail"] else {}
        )
        if row["kind"] in ("sent", "resent", "sync_sent"):
            assert row["sender_id"] == row["participant_id"]
            assert row["bytes"] > 0
        if row["kind"] in ("acked", "possibly_acked"):
            assert row["by_id"] is not None and row["frame_ts"] <= row["ts_ms"]
        if row["kind"] == "acked":
            assert row["by_bloom"] in (True, False)
        if row["kind"] == "missing":
            assert row["missing_ids"] and all(isinstance(m, str) for m in row["missing_ids"])
        if row["kind"] == "repair_requested":
            assert row["carrier"]
    assert any(r["repaired"] for r in rows if r["kind"] == "delivered")  # deliveries through repair say so
    assert pq.read_schema(tmp_path / "frames.parquet").equals(FRAME_SCHEMA)
    assert pq.read_schema(tmp_path / "logs.parquet").equals(LOG_SCHEMA)
    frames = pq.read_table(tmp_path / "frames.parquet").to_pylist()
    assert sum(f["bytes"] for f in frames) == r.meta["bytes_published"]
    assert sum(f["bytes"] * f["delivered"] for f in frames) == r.meta["bytes_received"]
    meta = json.loads((tmp_path / "meta.json").read_text())
    assert meta["params"]["seed"] == 5 and meta["events"] == t.num_rows
    assert SimParams.from_json(meta["params"]) == r.params


def test_log_hashes_are_the_hash_of_the_ordered_log(tmp_path):
    r = simulate(SimParams(participants=6, messages=8, rate=2.0, seed=9), tmp_path)
    sent = [x for x in events_of(tmp_path).to_pylist() if x["kind"] == "sent"]
    ordered = [x["message_id"] for x in sorted(sent, key=lambda x: (x["lamport_timestamp"], x["message_id"]))]
    assert set(r.log_hashes) == {log_hash(ordered)}


@pytest.mark.parametrize("workers", [2, 3])
def test_worker_processes_give_the_same_events(tmp_path, workers):
    p = SimParams(
        participants=30,
        messages=20,
        rate=2.0,
        loss=0.2,
        duplicate=0.05,
        churn=(0.1, 8_000),
        latency_ms=(5, 150),
        seed=11,
        overrides=FAST_REPAIR,
        horizon_ms=120_000,
    )
    one = simulate(p, tmp_path / "one", workers=1)
    many = simulate(p, tmp_path / "many", workers=workers)
    assert many.meta["workers"] == workers
    assert rows_without_seq(events_of(tmp_path / "one")) == rows_without_seq(events_of(tmp_path / "many"))
    assert one.log_hashes == many.log_hashes
    assert pq.read_table(tmp_path / "one" / "frames.parquet").equals(
        pq.read_table(tmp_path / "many" / "frames.parquet")
    )
    assert one.meta["stop_reason"] == many.meta["stop_reason"]
    assert one.meta["virtual_end_ms"] == many.meta["virtual_end_ms"]


def test_workers_write_their_shards_at_the_same_virtual_times(tmp_path):
    from sdschat.sim.core import FLUSH_GRID_MS

    p = SimParams(participants=20, messages=40, rate=1.0, loss=0.1, seed=3, overrides=FAST_REPAIR, horizon_ms=120_000)
    one = simulate(p, tmp_path / "one", workers=1)
    shard_rows = 400
    two = simulate(p, tmp_path / "two", workers=2, shard_rows=shard_rows)
    assert rows_without_seq(events_of(tmp_path / "one")) == rows_without_seq(events_of(tmp_path / "two"))
    assert one.log_hashes == two.log_hashes
    # the same events whether a shard's Python arenas are on huge pages (forked workers) or not (in-process)
    assert one.meta["worker_huge_pages"] == ["off (in the calling process)"]
    assert two.meta["worker_huge_pages"] == [native.huge_page_arenas(dry_run=True)] * 2
    ends = {}
    for w in (0, 1):
        shards = sorted((tmp_path / "two").glob(f"events-w{w}-*.parquet"))
        assert len(shards) > 2
        sizes = [pq.read_metadata(f).num_rows for f in shards]
        # (a full buffer is written after the event that filled it: a few rows over; the last: what was left)
        assert all(shard_rows // 2 <= n < shard_rows + 20 for n in sizes[:-1]), sizes
        assert min(sizes[:-1]) < shard_rows  # written at a grid time, before the buffer was full
        ends[w] = [max(pq.read_table(f, columns=["ts_ms"]).column(0).to_pylist()) // FLUSH_GRID_MS for f in shards[:-1]]
    # both workers wrote in the same grid intervals (balanced shards fill alike)
    assert len(set(ends[0]) & set(ends[1])) >= min(len(ends[0]), len(ends[1])) - 1, ends


def test_zero_minimum_latency_falls_back_to_one_worker():
    r = simulate(SimParams(participants=5, messages=3, latency_ms=(0, 10), seed=1), None, workers=2)
    assert r.meta["workers"] == 1


def test_no_messages_and_horizon_stop():
    r = simulate(SimParams(participants=4, messages=0, horizon_ms=1_000, seed=1))
    assert r.meta["messages_sent"] == 0 and r.meta["events"] == 0
    # an unacknowledged message keeps its sender busy: the horizon ends the run
    r = simulate(SimParams(participants=3, messages=1, loss=1.0, horizon_ms=20_000, seed=1))
    assert r.meta["stop_reason"] == "horizon"
    assert r.meta["event_kinds"]["resent"] >= 1
    assert r.meta["delivery_ratio"] == 0.0


def test_senders_limit_who_talks(tmp_path):
    simulate(SimParams(participants=10, messages=12, senders=2, seed=1), tmp_path)
    senders = {x["participant_id"] for x in events_of(tmp_path).to_pylist() if x["kind"] == "sent"}
    assert senders <= {"p00000", "p00001"}


def test_progress_callback_reports_sending_and_settling():
    seen = []
    simulate(SimParams(participants=5, messages=5, seed=1), None, progress=seen.append, progress_interval_s=0.0)
    assert seen[-1]["done"] and seen[-1]["sent"] == 5


# ----------------------------------------------------------------- params


@pytest.mark.parametrize(
    "kw, fragment",
    [
        ({"participants": 1}, "participants"),
        ({"loss": 1.5}, "loss"),
        ({"duplicate": -0.1}, "duplicate"),
        ({"latency_ms": (5, 2)}, "latency"),
        ({"rate": 0}, "rate"),
        ({"senders": 101}, "senders"),
        ({"churn": (1.0, 100)}, "churn"),
        ({"settle": "later"}, "settle"),
        ({"overrides": {"no_such_setting": 1}}, "unknown engine setting"),
        ({"overrides": {"sync_interval_ms": "soon"}}, "sync_interval_ms"),
        ({"overrides": {"causal_history_size": 3}}, "own option"),
    ],
)
def test_bad_params_are_one_line_value_errors(kw, fragment):
    with pytest.raises(ValueError) as e:
        SimParams(**kw)
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_text_forms():
    assert parse_latency("20:200") == (20, 200) and parse_latency("7") == (7, 7)
    assert parse_churn("0.1:30000") == (0.1, 30000) and parse_churn("0") is None
    assert parse_overrides(["sync_interval_ms=5000", "repair_t_min_ms = 10"]) == {
        "sync_interval_ms": "5000",
        "repair_t_min_ms": "10",
    }
    for bad in ("a:b", "5:1", "1:2:3"):
        with pytest.raises(ValueError):
            parse_latency(bad)
    for bad in ("x", "1.5:10", "0.1:-5"):
        with pytest.raises(ValueError):
            parse_churn(bad)
    with pytest.raises(ValueError):
        parse_overrides(["novalue"])
    p = SimParams(overrides={"sync_interval_ms": "5000", "repair_t_min_ms": "10", "ack_delay_ms": "none"})
    from sdschat.sim import channel_config

    cfg = channel_config(p)
    assert cfg.sync_interval_ms == 5000 and cfg.repair.t_min_ms == 10 and cfg.ack_delay_ms is None
    assert cfg.repair.num_response_groups == 1  # 100 // 128 + 1
    assert channel_config(SimParams(participants=1000)).repair.num_response_groups == 8


def test_frame_view_gives_the_same_events_as_the_protobuf_message(tmp_path):
    # (four response groups: the frame names each message's responders, where every receiver hashes for itself
    # when given the protobuf message)
    p = SimParams(
        participants=20,
        messages=15,
        rate=2.0,
        loss=0.2,
        duplicate=0.1,
        seed=12,
        overrides=FAST_REPAIR,
        horizon_ms=120_000,
        response_groups=4,
    )
    view = simulate(p, tmp_path / "view")
    plain = simulate(p, tmp_path / "plain", frame_view=False)
    assert events_of(tmp_path / "view").equals(events_of(tmp_path / "plain"))
    assert view.log_hashes == plain.log_hashes


@pytest.mark.parametrize("case", ["lossy", "churn", "horizon"])
def test_copies_of_a_held_message_skipping_the_engine_change_nothing(tmp_path, case):
    """A copy of a message its member already holds (and cannot answer a repair request for) skips the engine:
    the events, logs, frames, engine statistics and the rest of the results are the same as when every copy goes
    to the engine -- with workers, with churn (no copy is dropped before it is due), and when the run ends at the
    horizon with such copies still in flight."""
    p = {
        "lossy": SimParams(
            participants=30,
            messages=25,
            rate=2.0,
            loss=0.2,
            duplicate=0.1,
            seed=5,
            overrides=FAST_REPAIR,
            latency_ms=(5, 150),
            horizon_ms=120_000,
            response_groups=4,
        ),
        "churn": SimParams(
            participants=20,
            messages=25,
            rate=1.0,
            loss=0.1,
            churn=(0.2, 5_000),
            settle="clean",
            seed=4,
            overrides=FAST_REPAIR,
            latency_ms=(5, 150),
            horizon_ms=200_000,
            response_groups=4,
        ),
        "horizon": SimParams(
            participants=30,
            messages=30,
            rate=4.0,
            loss=0.3,
            seed=6,
            overrides=FAST_REPAIR,
            latency_ms=(5, 400),
            horizon_ms=1_500,
            response_groups=4,
        ),
    }[case]
    on = simulate(p, tmp_path / "on", workers=2)
    off = simulate(p, tmp_path / "off", workers=2, skip_held=False)
    assert rows_without_seq(events_of(tmp_path / "on")) == rows_without_seq(events_of(tmp_path / "off"))
    assert on.log_hashes == off.log_hashes
    assert pq.read_table(tmp_path / "on" / "frames.parquet").equals(pq.read_table(tmp_path / "off" / "frames.parquet"))
    skipped = on.meta["counts"].pop("receives_skipped_held")
    assert skipped > 100 and "receives_skipped_held" not in off.meta["counts"]
    drop = (
        "wall_time_s",
        "peak_rss_mb",
        "peak_rss_mb_total",
        "events_per_s",
        "worker_busy_s",
        "worker_cpu_s",
        "worker_wait_s",
        "windows",
    )
    assert {k: v for k, v in on.meta.items() if k not in drop} == {k: v for k, v in off.meta.items() if k not in drop}
    assert on.meta["engine_stats"]["duplicates"] >= skipped
    if case == "horizon":
        assert on.meta["stop_reason"] == "horizon" and on.meta["counts"]["copies_in_flight_at_end"] > 0


def test_a_frame_whose_copies_all_skip_the_engine_is_in_flight_until_they_are_due():
    """Quiescence and the end-of-run count see a frame whose every copy was dropped as held (an author's
    rebroadcast of a message everyone has) as in flight until its last copy is due, as they would its cursor."""
    from sdschat.sim.plan import make_plan
    from sdschat.sim.shard import Shard

    p = SimParams(participants=6, messages=2, rate=2.0, seed=1, latency_ms=(50, 90), response_groups=64)
    t = p.start_ms + 60_000

    def rebroadcast() -> tuple[Shard, tuple, int]:
        shard = Shard(p, make_plan(p), 0, 1, None)
        published = []
        ingest = shard.ingest_one
        shard.ingest_one = lambda fm: (published.append(fm), ingest(fm))
        shard.start()
        shard.run(t)
        assert shard.quiescent()
        # an author's message whose response group holds no other member: no receiver can answer for it
        fm = next(
            fm
            for fm in published
            if fm[4] == "message" and len(shard._response_group(fm[5], shard.pids[fm[0]])[0]) == 1
        )
        receives = shard.counts["receives"]
        shard.ingest_one((fm[0], 99, t, fm[3], "resend", fm[5], 0.0, 0.0))
        assert shard.busy_cursors == 0 and shard.counts["receives"] == receives + 5  # every copy skipped
        assert not shard.quiescent()
        return shard, fm, receives

    shard, fm, receives = rebroadcast()
    shard.run(t + 70)  # some copies due (50-90 ms), some not
    assert not shard.quiescent()
    part = shard.finish()
    assert 0 < part["copies_in_flight"] < 5
    assert part["counts"]["receives"] + part["copies_in_flight"] == receives + 5
    assert part["frame_recv"][(fm[0], 99)] == [5, 5 - part["copies_in_flight"]]
    shard, fm, receives = rebroadcast()
    shard.run(t + 91)
    assert shard.quiescent()
    part = shard.finish()
    assert part["copies_in_flight"] == 0 and part["counts"]["receives"] == receives + 5


def test_frame_view_reads_like_the_message():
    from sdschat.sds import ChannelConfig, MessageChannel
    from sdschat.sds.channel import Frame
    from sdschat.sds.wire import parse_pb

    a = MessageChannel("c", "a", ChannelConfig(), 0)
    a.send(b"one", 1)
    out = a.send(b"two", 2)
    pb = parse_pb(out.data)
    v = Frame(pb)
    for name in ("message_id", "sender_id", "channel_id", "content", "lamport_timestamp", "bloom_filter"):
        assert getattr(v, name) == getattr(pb, name)
    for name in ("content", "lamport_timestamp", "bloom_filter"):
        assert v.HasField(name) == pb.HasField(name)
    assert [e.message_id for e in v.causal_history] == [e.message_id for e in pb.causal_history]
    assert [e.HasField("sender_id") for e in v.causal_history] == [e.HasField("sender_id") for e in pb.causal_history]
    assert len(v.repair_request) == len(pb.repair_request) == 0 and not v.repair_request
    assert v.ByteSize() == pb.ByteSize()  # anything else falls through to the message
    sync = Frame(parse_pb(a.sync(3).data))
    assert not sync.HasField("content") and sync.content == b""


def test_repair_work_called_off_is_recorded_as_the_node_records_it(tmp_path):
    """A member's pending repair request or answer that a copy of the message calls off is a
    ``repair_cancelled`` row (what, via, publisher), as sdschat.node.receive writes it; the report counts them."""
    from sdschat.pipeline.metrics import SourceInfo, compute, reduce_events

    simulate(
        SimParams(participants=20, messages=30, rate=2.0, loss=0.2, seed=2, overrides=FAST_REPAIR, horizon_ms=120_000),
        tmp_path,
    )
    rows = events_of(tmp_path).to_pylist()
    called_off = [r for r in rows if r["kind"] == "repair_cancelled"]
    missing = {m for r in rows if r["kind"] == "missing" for m in r["missing_ids"]}
    asked = {r["message_id"] for r in rows if r["kind"] == "repair_requested"}
    whats = Counter(json.loads(r["detail"])["what"] for r in called_off)
    assert set(whats) == {"request", "answer"}  # answers called off: SDS-R's suppression of duplicate answers
    for r in called_off:
        d = json.loads(r["detail"])
        assert d["via"] in ("message", "resend", "repair") and d["publisher"]
        assert r["message_id"] in (missing if d["what"] == "request" else asked)  # there was something to call off
    for r in rows:
        r["source"] = "run"
    rep = compute(reduce_events(rows), [SourceInfo("run", "sim", sorted({r["participant_id"] for r in rows}))])
    assert rep.summary[0]["repair_called_off"] == len(called_off)


def test_meta_has_both_latencies_of_every_member_as_the_events_give_them(tmp_path):
    """send-to-shown (a member's first copy) and send-to-delivered (causal order), exact nearest-rank
    percentiles over every received and delivered row, the same for any number of workers."""
    from sdschat.sim.stats import percentiles

    p = SimParams(
        participants=25,
        messages=30,
        rate=2.0,
        loss=0.2,
        seed=9,
        overrides=FAST_REPAIR,
        latency_ms=(5, 150),
        horizon_ms=120_000,
    )
    one = simulate(p, tmp_path / "one")
    two = simulate(p, tmp_path / "two", workers=2)
    rows = events_of(tmp_path / "one").to_pylist()
    sent = {x["message_id"]: x["ts_ms"] for x in rows if x["kind"] == "sent"}
    for metric, kind in (("send_to_shown", "received"), ("send_to_deliver", "delivered")):
        hist = Counter(x["ts_ms"] - sent[x["message_id"]] for x in rows if x["kind"] == kind)
        want = percentiles(hist)
        want["mean"] = round(want["mean"], 1)
        assert one.meta["latency"][metric] == want == two.meta["latency"][metric]
    shown, deliver = one.meta["latency"]["send_to_shown"], one.meta["latency"]["send_to_deliver"]
    assert shown["n"] == deliver["n"] == one.meta["event_kinds"]["delivered"]
    assert shown["p50"] <= deliver["p50"] and shown["p99"] < deliver["p99"]  # waiting behind gaps
