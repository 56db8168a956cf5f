"""The real Spark jobs (``report`` and ``sweep`` through the CLI), run once per session on tiny inputs."""

from __future__ import annotations

import json
import sqlite3

import pyarrow.parquet as pq
import pytest

from sdschat.pipeline.metrics import Reduced, reduce_events

PNG = b"\x89PNG\r\n\x1a\n"


def test_report_cli_succeeds_and_says_where(spark_run):
    assert spark_run["report_code"] == 0, spark_run["report_stderr"]
    out = spark_run["base"] / "report"
    # where it was written is the command's output; its progress (Spark ready, each table reduced) goes to stderr
    assert spark_run["report_stdout"].startswith(f"wrote {out / 'report.md'}\n"), spark_run["report_stdout"]
    assert "report: Spark" in spark_run["report_stderr"] and "report: reduced messages" in spark_run["report_stderr"]
    assert "Traceback" not in spark_run["report_stderr"] and "WARN" not in spark_run["report_stderr"]
    md = (out / "report.md").read_text()
    for heading in (
        "## Delivery",
        "## Latency",
        "## Repair and resend traffic",
        "## Bytes on the wire",
        "## Bloom-filter acknowledgements",
        "## Convergence",
    ):
        assert heading in md
    for png in ("latency_cdf.png", "participant_delivery.png", "message_delivery.png", "backlog.png"):
        assert (out / png).read_bytes()[:8] == PNG
    for table in (
        "summary",
        "messages",
        "latency",
        "latency_hist",
        "participants",
        "repair_rounds",
        "bloom_evidence",
        "convergence",
        "kind_counts",
        "undelivered",
        "repair_load",
        "backlog",
    ):
        pq.read_table(out / "tables" / f"{table}.parquet")
    assert "peak messages waiting" in md and "![backlog over time](backlog.png)" in md
    assert not (out / "_staging").exists()


def test_spark_submit_entry_point_writes_the_same_report(spark_run):
    assert spark_run["submit_code"] == 0, spark_run["submit_stderr"]
    ours = pq.read_table(spark_run["base"] / "report-submit" / "tables" / "summary.parquet").to_pylist()
    cli = pq.read_table(spark_run["base"] / "report" / "tables" / "summary.parquet").to_pylist()
    assert ours == cli and len(ours) == 2


def test_report_metrics_for_the_simulation_and_the_databases(spark_run):
    out = spark_run["base"] / "report"
    summary = {r["source"]: r for r in pq.read_table(out / "tables" / "summary.parquet").to_pylist()}
    meta = json.loads((spark_run["sim_dir"] / "meta.json").read_text())
    sim = summary["sim-run"]
    assert sim["kind"] == "sim" and sim["participants"] == 12
    assert sim["messages"] == meta["messages_sent"] == 15
    assert sim["delivery_ratio"] == meta["delivery_ratio"]
    assert sim["converged"] == meta["converged"] and sim["convergence_basis"] == "engine log"
    assert sim["events_log_mismatches"] == 0  # the log rebuilt from events is the engine's log
    assert sim["bytes_received"] == meta["bytes_received"] and sim["bytes_published"] == meta["bytes_published"]
    assert sim["repair_requests"] == meta["event_kinds"].get("repair_requested", 0)
    assert sim["bloom_acks_false"] is not None
    assert sim["send_to_deliver_p50_ms"] <= sim["send_to_deliver_p95_ms"] <= sim["send_to_deliver_p99_ms"]
    # repair load per member adds up to the repair traffic; the backlog has its slices and its peaks
    load = [r for r in pq.read_table(out / "tables" / "repair_load.parquet").to_pylist() if r["source"] == "sim-run"]
    assert sum(r["repair_requests"] for r in load) == sim["repair_requests"] > 0
    assert sum(r["repair_answers"] for r in load) == sim["repair_responses"]
    assert sim["repair_answers_max_member"] == max(r["repair_answers"] for r in load)
    backlog = [r for r in pq.read_table(out / "tables" / "backlog.parquet").to_pylist() if r["source"] == "sim-run"]
    assert len(backlog) == 120 and backlog[0]["t_ms"] == 0
    assert sim["backlog_peak_gaps_open"] == max(r["gaps_open"] for r in backlog) > 0  # a lossy run has gaps
    db = next(r for s, r in summary.items() if s.startswith("db:"))
    assert db["kind"] == "db" and db["participants"] == 2 and db["messages"] == 3
    assert db["delivery_ratio"] == 1.0 and db["converged"] is True
    assert db["bytes_published"] is None and db["bytes_received"] is None  # databases record no sizes
    assert db["bloom_acks"] == 0  # alice's messages were acked by causal history, not by bloom filter
    assert db["send_to_ack_n"] == 2  # alice's two messages, acked by bob's causal history
    latency = pq.read_table(out / "tables" / "latency.parquet").to_pylist()
    dl = next(r for r in latency if r["source"] == db["source"] and r["metric"] == "send_to_deliver")
    assert (dl["n"], dl["min"], dl["max"]) == (3, 40, 60)


def test_spark_reduction_equals_the_python_reference(spark_run):
    rows = []
    for s in spark_run["staged"]:
        if s.info.kind == "sim":
            for f in s.event_files:
                for r in pq.read_table(f).to_pylist():
                    rows.append({**r, "source": s.name})
    db_source = next(s.name for s in spark_run["staged"] if s.info.kind == "db")
    for db in spark_run["dbs"]:
        conn = sqlite3.connect(db)
        conn.row_factory = sqlite3.Row
        for r in conn.execute("SELECT * FROM events"):  # the typed columns are migration 0004's generated ones
            r = dict(r)
            r["missing_ids"] = json.loads(r["missing_ids"]) if r["missing_ids"] is not None else None
            rows.append({**r, "source": db_source})
        conn.close()
    python = reduce_events(rows).sorted()
    spark = spark_run["spark_reduced"].sorted()
    for table in (*Reduced.TABLES, *Reduced.DETAIL_TABLES):
        assert getattr(spark, table) == getattr(python, table), table
    assert python.repair_totals and python.messages  # the simulation had repair traffic to compare


def test_sweep_cli_runs_every_scenario_as_a_spark_task(spark_run):
    assert spark_run["sweep_code"] == 0, spark_run["sweep_stderr"]
    out = spark_run["base"] / "sweep"
    err = spark_run["sweep_stderr"]
    assert "[1/8]" in err and "[8/8]" in err and f"wrote {out / 'sweep.md'}" in spark_run["sweep_stdout"]
    results = pq.read_table(out / "results.parquet").to_pylist()
    assert len(results) == 8 and all(r["error"] is None for r in results)
    assert sorted(r["seed"] for r in results) == [1] * 4 + [2] * 4
    by = {(r["loss"], r["repair"]): r for r in results if r["seed"] == 1}
    assert by[(0.0, True)]["delivery_ratio"] == 1.0
    assert by[(0.3, False)]["delivery_ratio"] < by[(0.3, True)]["delivery_ratio"]
    assert len({r["worker_pid"] for r in results}) >= 1
    agg = pq.read_table(out / "aggregate.parquet").to_pylist()
    assert len(agg) == 4 and all(a["runs"] == 2 for a in agg)
    # each point: the mean over its two seeds, and the range of each delivered percentile
    for a in agg:
        runs = [r for r in results if (r["loss"], r["repair"]) == (a["loss"], a["repair"])]
        for m in ("delivered_p50_ms", "delivered_p99_ms"):
            values = [r[m] for r in runs]
            assert a[m] == pytest.approx(sum(values) / 2)
            assert (a[m.replace("_ms", "_min_ms")], a[m.replace("_ms", "_max_ms")]) == (min(values), max(values))
    lossy = next(a for a in agg if a["loss"] == 0.3 and a["repair"])
    assert lossy["delivered_p99_min_ms"] < lossy["delivered_p99_max_ms"]  # two seeds, two different runs
    for png in ("delivery_vs_loss.png", "bandwidth_vs_loss.png", "latency_vs_loss.png"):
        assert (out / png).read_bytes()[:8] == PNG
    md = (out / "sweep.md").read_text()
    assert "| n | loss | SDS-R |" in md and "delivered p50 / p99 s" in md
    lo, hi = lossy["delivered_p99_min_ms"] / 1000, lossy["delivered_p99_max_ms"] / 1000
    assert "range over seeds" in md and f"{lo:.2f}–{hi:.2f} |" in md
    # both latencies of each run, as its simulation measured them
    for r in results:
        meta = json.loads((out / "scenarios" / r["scenario"] / "meta.json").read_text())
        assert r["delivered_p99_ms"] == meta["latency"]["send_to_deliver"]["p99"] is not None
        assert r["shown_p50_ms"] == meta["latency"]["send_to_shown"]["p50"] <= r["delivered_p50_ms"]
    assert by[(0.3, True)]["delivered_p99_ms"] > by[(0.0, True)]["delivered_p99_ms"]
    # each scenario's events can be fed to `sdschat report`
    scen = out / "scenarios" / results[0]["scenario"]
    assert (scen / "meta.json").is_file() and list(scen.glob("events-*.parquet"))


def _one_source(red: Reduced, source: str, name: str = "x") -> Reduced:
    """The rows of one source of a reduction, renamed ``name`` (to compare sources with each other)."""
    return Reduced(
        **{
            t: [(name, *r[1:]) for r in getattr(red, t) if r[0] == source]
            for t in (*Reduced.TABLES, *Reduced.DETAIL_TABLES)
        }
    ).sorted()


def test_every_kind_and_typed_fact_reduces_alike_in_spark_and_python(spark_run):
    from tests.pipeline.conftest import all_kinds_rows

    staged, spark = spark_run["all_kinds"]
    # a simulation of this format, one written before the typed columns, and a database of the previous schema
    assert [(s.info.kind, s.legacy) for s in staged] == [("sim", False), ("sim", True), ("db", False)]
    python = reduce_events(all_kinds_rows("x")).sorted()
    for s in staged:
        got = _one_source(spark, s.name)
        for table in (*Reduced.TABLES, *Reduced.DETAIL_TABLES):
            assert getattr(got, table) == getattr(python, table), (s.name, table)
    # the typed facts were read: repair rounds, bloom evidence, bytes, repaired deliveries, gaps
    assert python.repair_totals == [("x", 2, 2, 1, 1, 1)]  # m1: two answers to one request; m2: no answer
    assert python.bloom_totals == [("x", 3, 3, 2, 1, 1)]  # B had m1 by 1090; C had m2 after 1200; C had m1 after 1260
    assert sorted(python.wire_bytes) == [
        ("x", "repair_served", 2, 180),
        ("x", "resent", 1, 110),
        ("x", "sent", 2, 220),
        ("x", "sync_sent", 1, 60),
    ]
    repaired = {m: r for _s, m, _snd, _t, _n, _f, _l, r in python.messages}
    assert repaired == {"m1": 1, "m2": 0, "m3": 0}
    repair_latency = sorted(v for _s, metric, v, _n in python.latency_hist if metric == "repair")
    assert repair_latency == [70, 100]  # both first noted missing at 1200; delivered at 1270 and 1300
    assert sorted(python.repair_load) == [("x", "A", 0, 1, 90, 0), ("x", "B", 0, 1, 90, 0), ("x", "C", 2, 0, None, 1)]
    # 1000..5800 in 120 buckets of 41 ms; at C: m3 waits 1200-1301 behind m1 (open 1200-1270), m2 (1200-1300)
    # and m0 (noted 1210, lost 1302)
    backlog = {b: (w, g) for _s, b, _t, w, g in python.backlog}
    assert len(backlog) == 120 and python.backlog[0][2] == 1000 and python.backlog[1][2] == 1041
    assert [backlog[b] for b in range(3, 9)] == [(0, 0), (1, 2), (1, 3), (1, 2), (0, 0), (0, 0)]
    # the rebuilt logs were kept in a hash map while per_participant ran (short logs: up to 65,536 participants
    # per task), and the session's own setting came back afterwards (it had none)
    assert spark_run["log_keys_conf"] == ("65536", None)
    assert spark_run["log_keys_conf_set"] == ("4096", "4096")  # a value the caller set is left alone


def test_a_database_migrated_from_the_previous_schema_reports_the_same_numbers(spark_run):
    from sdschat.pipeline.metrics import compute

    assert spark_run["migrated_versions"] == [4, 5, 6]  # typed events, message actions, search in batches
    staged, before = spark_run["all_kinds"]
    db_before = next(s for s in staged if s.info.kind == "db")
    (db_after,), after = spark_run["migrated"]
    a, b = _one_source(before, db_before.name), _one_source(after, db_after.name)
    for table in (*Reduced.TABLES, *Reduced.DETAIL_TABLES):
        assert getattr(a, table) == getattr(b, table), table
    assert a.repair_totals and a.bloom_totals  # the facts that come out of detail were there
    db_before.info.name = db_after.info.name = "x"
    summary_before = compute(a, [db_before.info]).summary
    assert summary_before == compute(b, [db_after.info]).summary
    assert summary_before[0]["repair_requests"] == 2


def test_report_compare_sets_two_runs_side_by_side(spark_run):
    assert spark_run["compare_code"] == 0, spark_run["compare_stderr"]
    out = spark_run["base"] / "compare"
    md = (out / "report.md").read_text()
    assert "## sim-clean against sim-run" in md
    rows = {r["metric"]: r for r in pq.read_table(out / "tables" / "comparison.parquet").to_pylist()}
    assert rows["participants"]["delta"] == 0 and rows["messages"]["a"] == rows["messages"]["b"] == 15
    # the lossless run needs no repair and shows every message as soon as it is delivered
    assert rows["repair_requests"]["a"] > 0 and rows["repair_requests"]["b"] == 0
    assert rows["repair_requests"]["delta"] == -rows["repair_requests"]["a"]
    assert rows["send_to_shown_p99_ms"]["b"] <= rows["send_to_deliver_p99_ms"]["b"]
    line = next(ln for ln in md.splitlines() if ln.startswith("| repair_requests |"))
    assert "-100.0%" in line
    summary = pq.read_table(out / "tables" / "summary.parquet").to_pylist()
    assert [s["source"] for s in summary] == ["sim-run", "sim-clean"]
    senders = pq.read_table(out / "tables" / "senders.parquet").to_pylist()
    clean = [r for r in senders if r["source"] == "sim-clean"]
    assert clean and sum(r["delivered_n"] for r in clean) == rows["deliveries"]["b"]
    assert all(r["shown_p99_ms"] <= r["delivered_p99_ms"] for r in senders)  # never delivered before shown
    assert "Per sender" in md


def test_the_reports_of_a_few_events_ask_for_a_jvm_compiling_with_c1_alone(spark_run):
    # the report and the comparison, of a few thousand events each; the sweep's session runs many reports: not asked
    reports = [k for k in spark_run["sessions_asked"] if "quick_jit" in k]
    assert len(reports) == 2 and all(k["quick_jit"] is True for k in reports), spark_run["sessions_asked"]
    assert len(spark_run["sessions_asked"]) == 3  # and the sweep's


def test_the_cli_asks_for_the_class_archive_when_its_switch_is_unset(spark_run):
    # the reports' sessions and the sweep's: the command line read SDSCHAT_SPARK_CLASS_ARCHIVE (unset) as yes
    asked = spark_run["sessions_asked"]
    assert len(asked) == 3 and all(k.get("class_archive") is True for k in asked), asked


def test_the_embedded_spark_uses_the_parallel_collector_and_adds_a_callers_jvm_options(spark_run):
    # G1's concurrent threads compete with the tasks for two cores; the throughput collector's pauses do not
    assert spark_run["jvm_collectors"] == ["PS MarkSweep", "PS Scavenge"], spark_run["jvm_collectors"]
    # the optimizing JIT compiler waits for really hot code (its compiling took a core in the report's first seconds)
    args = spark_run["jvm_arguments"]
    assert "-XX:Tier4InvocationThreshold=50000" in args and "-XX:Tier4BackEdgeThreshold=400000" in args, args
    assert args.index("-XX:+UseParallelGC") < args.index("-Dsdschat.test.option=added")  # the caller's come last
    assert spark_run["adaptive"] == "false"  # one machine: no re-planning after each stage
    # the session was started with a JVM option of its caller's: added to the session's own, not in their place
    props = spark_run["jvm_properties"]
    assert props["sdschat.test.option"] == "added" and props["log4j2.configurationFile"].startswith("file:"), props


def test_a_spark_session_leaves_the_processs_ctrl_c_handler_in_place(spark_run):
    """SparkContext puts in a Ctrl+C handler of its own, which outlives the session and then fails on the stopped
    context (an AttributeError where a KeyboardInterrupt belongs): the session puts the process's own back."""
    before, during = spark_run["interrupt_handlers"]
    assert during is before, (before, during)
