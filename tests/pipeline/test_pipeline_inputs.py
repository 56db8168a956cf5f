"""Report inputs and sweep grids: staging, conversion, and one-line errors before any Spark starts."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from sdschat.cli import main
from sdschat.pipeline.inputs import InputError, stage_inputs
from sdschat.pipeline.metrics import log_hash
from sdschat.pipeline.sweep import GridError, parse_grid
from sdschat.sim import EVENT_SCHEMA, SimParams, simulate

from .conftest import CHANNEL, T0


@pytest.fixture
def sim_dir(tmp_path):
    out = tmp_path / "sim"
    simulate(SimParams(participants=5, messages=4, seed=1), out)
    return out


def test_database_is_converted_to_parquet_with_64_bit_integers(tmp_path, databases):
    db_a, db_b, log = databases
    staged = stage_inputs([db_a, db_b], tmp_path / "staging")
    assert len(staged) == 1
    s = staged[0]
    assert s.name == f"db:{CHANNEL[:16]}" and s.info.kind == "db"
    assert s.info.participants == ["alice", "bob"]
    assert s.info.engine_log_hashes == {"alice": (log_hash(log), 3), "bob": (log_hash(log), 3)}
    t = pq.read_table(s.event_files)
    assert t.schema.equals(EVENT_SCHEMA)
    ts = t.column("ts_ms").to_pylist()
    assert min(ts) > 2**31 and min(ts) > T0  # read as int64, not truncated
    assert set(t.column("kind").to_pylist()) == {"sent", "received", "delivered", "acked"}
    assert set(t.column("participant_id").to_pylist()) == {"alice", "bob"}


def test_simulation_directory_is_used_as_is(tmp_path, sim_dir):
    (s,) = stage_inputs([sim_dir, sim_dir], tmp_path / "staging")  # the same input twice counts once
    assert s.info.kind == "sim" and len(s.info.participants) == 5
    assert s.event_files == sorted(sim_dir.glob("events-*.parquet"))
    assert s.info.bytes_received > 0 and len(s.info.engine_log_hashes) == 5


def test_a_source_counts_its_events_and_a_short_report_compiles_with_c1_alone(
    tmp_path, sim_dir, databases, monkeypatch
):
    from sdschat.pipeline import report as report_mod

    sim, db = stage_inputs([sim_dir, *databases[:2]], tmp_path / "staging")
    meta = json.loads((sim_dir / "meta.json").read_text())
    assert sim.events == meta["events"] > 0
    assert db.events == pq.read_table(db.event_files).num_rows > 0
    both = sim.events + db.events
    # at most QUICK_JIT_EVENTS events: C1 alone; one more event: C1 then C2
    assert report_mod.short_job(both)
    monkeypatch.setattr(report_mod, "QUICK_JIT_EVENTS", both)
    assert report_mod.short_job(both)
    monkeypatch.setattr(report_mod, "QUICK_JIT_EVENTS", both - 1)
    assert not report_mod.short_job(both) and report_mod.short_job(sim.events)


def test_a_cluster_report_has_a_shuffle_partition_per_million_events_two_per_core_and_at_least_8():
    from sdschat.pipeline.report import cluster_partitions

    assert cluster_partitions(1_672, 2) == 8 and cluster_partitions(2_261_228, 2) == 8
    assert cluster_partitions(8_000_000, 2) == 8 and cluster_partitions(8_000_001, 2) == 9
    assert cluster_partitions(51_863_179, 2) == 52 and cluster_partitions(1_672, 32) == 64


def _newer_schema_db(path):
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO schema_version (version, applied_at) VALUES (99, 0)")
    conn.commit()
    conn.close()


@pytest.mark.parametrize(
    "case, fragment",
    [
        ("missing", "no such file or directory"),
        ("empty_dir", "is not a simulation output directory"),
        ("no_events", "has no events"),
        ("garbage", "neither a simulation output directory nor an sdschat database"),
        ("future_sim", "newer sdschat"),
        ("bad_meta", "is unreadable"),
        ("foreign_sqlite", "is not an sdschat database"),
        ("newer_schema", "newer than this sdschat"),
        ("empty_db", "has no events"),
        ("same_participant_twice", "two databases record participant alice"),
    ],
)
def test_bad_inputs(tmp_path, databases, sim_dir, case, fragment):
    target = tmp_path / case
    inputs = [target]
    if case == "empty_dir":
        target.mkdir()
    elif case == "no_events":
        simulate(SimParams(participants=3, messages=0, horizon_ms=100, seed=1), target)
    elif case == "garbage":
        target.write_bytes(b"not a database at all")
    elif case == "future_sim":
        target.mkdir()
        (target / "meta.json").write_text(json.dumps({"format": "sdschat-sim/9", "participants": 2}))
    elif case == "bad_meta":
        target.mkdir()
        (target / "meta.json").write_text("{ nope")
    elif case == "foreign_sqlite":
        conn = sqlite3.connect(target)
        conn.execute("CREATE TABLE t (x)")
        conn.close()
    elif case == "newer_schema":
        _newer_schema_db(databases[0])
        inputs = [databases[0]]
    elif case == "empty_db":
        import asyncio

        from sdschat.sds import MessageChannel
        from sdschat.store import Store

        async def make():
            store = await Store.open(target)
            await store.save_state(MessageChannel("c", "p", None, 0).snapshot(), "{}")
            await store.close()

        asyncio.run(make())
    elif case == "same_participant_twice":
        import shutil

        copy = tmp_path / "copy.db"
        shutil.copy(databases[0], copy)
        inputs = [databases[0], copy]
    with pytest.raises(InputError) as e:
        stage_inputs(inputs, tmp_path / "staging")
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_report_cli_bad_inputs_are_one_line_and_start_no_spark(tmp_path, databases, capsys, monkeypatch):
    from sdschat.pipeline import spark as spark_mod

    def no_spark(*a, **k):
        raise AssertionError("Spark must not start for bad input")

    monkeypatch.setattr(spark_mod, "spark_session", no_spark)
    _newer_schema_db(databases[0])
    cases = [
        ([str(tmp_path / "nothing-here")], "no such file or directory"),
        ([str(databases[0])], "newer than this sdschat"),
    ]
    for inputs, fragment in cases:
        code = main(["report", *inputs, "--out", str(tmp_path / "rep")])
        err = capsys.readouterr().err
        assert code == 2 and fragment in err and err.count("\n") == 1, err
    assert main(["report", "--out", str(tmp_path / "rep")]) == 2  # no inputs
    assert "INPUT" in capsys.readouterr().err


def test_report_compare_needs_two_sources_and_says_so_in_one_line(tmp_path, databases, capsys, monkeypatch):
    from sdschat.pipeline import report as report_mod

    def no_spark(*a, **k):
        raise AssertionError("Spark must not start for bad input")

    monkeypatch.setattr(report_mod, "spark_session", no_spark)
    db_a, db_b, _ = databases
    cases = [
        ([str(db_a)], "--compare needs two inputs, got 1"),
        ([str(db_a), str(db_b)], "--compare needs two sources, the inputs are 1"),  # one channel: one group
    ]
    for inputs, fragment in cases:
        code = main(["report", "--compare", *inputs, "--out", str(tmp_path / "rep")])
        err = capsys.readouterr().err
        assert code == 2 and fragment in err and err.count("\n") == 1, err


def test_comparison_puts_every_measured_field_side_by_side():
    from sdschat.pipeline.metrics import comparison

    a = {
        "source": "a",
        "kind": "sim",
        "inputs": "x",
        "delivery_ratio": 0.5,
        "messages": 10,
        "converged": True,
        "bytes_published": None,
        "events": 0,
    }
    b = {
        "source": "b",
        "kind": "sim",
        "inputs": "y",
        "delivery_ratio": 0.75,
        "messages": 10,
        "converged": False,
        "bytes_published": 5,
        "events": 3,
    }
    rows = {r["metric"]: r for r in comparison(a, b)}
    assert set(rows) == {"delivery_ratio", "messages", "converged", "bytes_published", "events"}
    assert (rows["delivery_ratio"]["delta"], rows["delivery_ratio"]["change"]) == (0.25, 0.5)
    assert (rows["messages"]["delta"], rows["messages"]["change"]) == (0, 0)
    assert rows["converged"]["delta"] is None and (rows["converged"]["a"], rows["converged"]["b"]) == (True, False)
    assert rows["bytes_published"]["delta"] is None  # not known for one of them
    assert rows["events"]["delta"] == 3 and rows["events"]["change"] is None  # from zero: no ratio


def test_spark_submit_script_runs_as_a_file_and_refuses_bad_input_in_one_line(tmp_path):
    import subprocess
    import sys

    from sdschat.cli import submit

    result = subprocess.run(
        [sys.executable, submit.__file__, "report", str(tmp_path / "nothing-here"), "--out", str(tmp_path / "rep")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    # under spark-submit Spark is up before the script runs (its start-up lines come first): ours is one line
    assert result.returncode == 2, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("sdschat: no such file or directory"), result.stderr
    assert "Traceback" not in result.stderr
    result = subprocess.run(
        [sys.executable, submit.__file__, "report", "--out", str(tmp_path / "rep")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2 and "INPUT" in result.stderr and result.stderr.count("\n") == 1


# ----------------------------------------------------------------- grids


GOOD = """
[sweep]
seeds = [1, 2]
[base]
messages = 5
latency_ms = "10:20"
sync_interval_ms = 5000
repair_t_min_ms = 1000
[grid]
loss = [0.0, 0.1]
participants = [4, 6]
repair = [true, false]
churn = ["0", "0.1:1000"]
"""


def test_grid_expands_every_combination_and_seed():
    g = parse_grid(GOOD)
    scen = g.scenarios()
    assert len(scen) == 2 * 2 * 2 * 2 * 2
    assert len({s["id"] for s in scen}) == len(scen)
    p = SimParams.from_json(scen[-1]["params"])
    assert p.latency_ms == (10, 20) and p.overrides == {"sync_interval_ms": 5000, "repair_t_min_ms": 1000}
    assert p.churn == (0.1, 1000) and p.seed == 2
    assert SimParams.from_json(scen[0]["params"]).churn is None


def test_grid_may_set_store_nodes():
    g = parse_grid(
        '[base]\nstore_latency_ms = "30:60"\nstore_outages = "0.1:5000"\nstore_loss = 0\n[grid]\nstores = [0, 1]\n'
    )
    params = [SimParams.from_json(s["params"]) for s in g.scenarios()]
    assert [p.stores for p in params] == [0, 1]
    assert params[1].store_latency_ms == (30, 60) and params[1].store_outages == (0.1, 5000)
    assert params[1].store_loss == 0.0


@pytest.mark.parametrize(
    "text, fragment",
    [
        ('[base]\nstore_outages = "often"\n', "store_outages"),
        ("[grid]\nloss = [0.1]\nfrobnicate = [1]\n", "unknown key 'frobnicate' in [grid]"),
        ("[base]\nwarp_speed = 9\n", "unknown key 'warp_speed' in [base]"),
        ("[extra]\nx = 1\n", "unknown section [extra]"),
        ("[sweep]\nseeds = 3\n", "seeds must be a non-empty list"),
        ("[sweep]\nparallel = true\n", "unknown key 'parallel' in [sweep]"),
        ("[grid]\nloss = 0.1\n", "must be a non-empty list"),
        ("[grid]\nloss = [0.1, 2.0]\n", "loss must be a probability"),
        ("[base]\nloss = 0.1\n[grid]\nloss = [0.2]\n", "in both [base] and [grid]"),
        ("[grid]\nseed = [1, 2]\n", "seeds = [...]"),
        ("[grid]\ncausal_history_size = [2]\n", "its own key: causal_history"),
        ("[grid\nloss = [0.1]\n", "not valid TOML"),
        ('[base]\nlatency_ms = "fast"\n', "latency"),
    ],
)
def test_bad_grids(text, fragment):
    with pytest.raises(GridError) as e:
        parse_grid(text)
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_sweep_cli_bad_grid_is_one_line(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text("[grid]\nloss = [0.1]\nbogus = [1]\n")
    assert main(["sweep", "--grid", str(bad), "--out", str(tmp_path / "sw")]) == 2
    err = capsys.readouterr().err
    assert "unknown key 'bogus' in [grid]" in err and err.count("\n") == 1
    assert main(["sweep", "--grid", str(tmp_path / "none.toml"), "--out", str(tmp_path / "sw")]) == 2
    assert "no grid file" in capsys.readouterr().err
    assert not (tmp_path / "sw").exists()


def test_example_grid_is_valid():
    from pathlib import Path

    import sdschat.pipeline

    example = Path(sdschat.pipeline.__file__).parent / "grids" / "example.toml"
    g = parse_grid(example.read_text(), example)
    scen = g.scenarios()
    assert len(scen) >= 24
    assert {s["values"]["repair"] for s in scen} == {True, False}
    assert len({s["values"]["participants"] for s in scen}) >= 2


_ROOT = Path(__file__).resolve().parents[2]
_STUDY_GRIDS = sorted(p.stem for p in (_ROOT / "sdschat" / "pipeline" / "grids").glob("sds-at-scale*.toml"))


def test_the_study_has_its_grids():
    assert len(_STUDY_GRIDS) >= 9 and "sds-at-scale-100k" in _STUDY_GRIDS


@pytest.mark.parametrize("name", _STUDY_GRIDS)
def test_the_study_grids_are_valid_and_say_their_size(name):
    path = _ROOT / "sdschat" / "pipeline" / "grids" / f"{name}.toml"
    g = parse_grid(path.read_text(), path)
    scen = g.scenarios()
    assert f"= {len(scen)} simulations" in path.read_text()  # the header's count is the grid's
    command = f"--grid sdschat/pipeline/grids/{name}.toml"
    assert command in path.read_text()  # and the command that runs it
    # the study shows the grid's command and links the output it made
    doc = (_ROOT / "docs" / "sds-at-scale.md").read_text()
    assert command in doc, name
    out = _ROOT / "docs" / "sds-at-scale" / (name.removeprefix("sds-at-scale").lstrip("-") or ".")
    assert (out / "sweep.md").is_file() and f"`{path.relative_to(_ROOT)}`" in (out / "sweep.md").read_text()
    if name != "sds-at-scale":
        return
    assert {s["values"]["stores"] for s in scen} == {0, 1}
    assert {SimParams.from_json(s["params"]).overrides["repair_t_min_ms"] for s in scen} == {30000, 5000}
