"""``sdschat simulate --master spark://...``: the shards as the tasks of a Spark barrier stage on a real standalone
cluster (a master and two one-core workers started from the installed pyspark) give the same events as the
in-process run."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from spark_cluster import standalone_cluster

pytestmark = pytest.mark.timeout(300)

SCENARIO = [
    "--participants",
    "30",
    "--messages",
    "20",
    "--rate",
    "2",
    "--loss",
    "0.2",
    "--duplicate",
    "0.05",
    "--churn",
    "0.1:8000",
    "--latency-ms",
    "5:150",
    "--seed",
    "11",
    "--horizon-ms",
    "120000",
    "--set",
    "repair_t_min_ms=1000",
    "--set",
    "repair_t_max_ms=4000",
    "--quiet",
]


def sdschat(*args: str, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sdschat", *args], capture_output=True, text=True, timeout=timeout)


def content_hash(out) -> str:
    """A hash of every event's content (not its sequence number, which numbers rows per shard), in any order."""
    files = sorted(out.glob("events-*.parquet"))
    table = pa.concat_tables([pq.read_table(f) for f in files]).drop(["seq"])
    cols = [table.column(c).to_pylist() for c in table.column_names]
    rows = sorted(repr(row) for row in zip(*cols))
    assert len(rows) > 1_000
    return hashlib.sha256("\n".join(rows).encode()).hexdigest()


@pytest.fixture(scope="module")
def two_workers(tmp_path_factory):
    """A master and two workers of one core each: a barrier stage of two tasks needs both."""
    with standalone_cluster(tmp_path_factory.mktemp("spark-two-workers"), [(1, "1g"), (1, "1g")]) as url:
        yield url


def test_shards_as_barrier_tasks_on_a_cluster_give_the_in_process_events(tmp_path, two_workers):
    here = sdschat("simulate", *SCENARIO, "--workers", "1", "--out", str(tmp_path / "here"))
    assert here.returncode == 0, here.stderr[-3000:]
    p = sdschat(
        "simulate", *SCENARIO[:-1], "--workers", "2", "--master", two_workers, "--out", str(tmp_path / "cluster")
    )
    assert p.returncode == 0, p.stderr[-3000:]
    assert f"running 2 shards as a barrier stage on {two_workers}" in p.stderr
    cluster = tmp_path / "cluster"
    assert sorted({f.name[:10] for f in cluster.glob("events-*.parquet")}) == ["events-w0-", "events-w1-"]
    assert content_hash(cluster) == content_hash(tmp_path / "here")
    for name in ("frames.parquet", "logs.parquet"):
        assert pq.read_table(cluster / name).equals(pq.read_table(tmp_path / "here" / name)), name
    import json

    meta_here = json.loads((tmp_path / "here" / "meta.json").read_text())
    meta = json.loads((cluster / "meta.json").read_text())
    assert meta["workers"] == 2 and meta_here["workers"] == 1
    for key in ("events", "event_kinds", "delivery_ratio", "converged", "stop_reason", "virtual_end_ms"):
        assert meta[key] == meta_here[key], key
    assert meta["event_kinds"]["repair_served"] > 0 and meta["converged"]


def test_a_cluster_without_enough_free_slots_is_one_line(tmp_path, two_workers):
    p = sdschat(
        "simulate",
        *SCENARIO,
        "--workers",
        "3",
        "--master",
        two_workers,
        "--out",
        str(tmp_path / "x"),
        "--spark-conf",
        "spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures=2",
    )
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "fewer than 3 free task slots" in lines[0], p.stderr
    assert "Traceback" not in p.stderr


def test_spark_conf_without_a_master_is_one_line(tmp_path):
    p = sdschat("simulate", *SCENARIO, "--spark-conf", "a=b", "--out", str(tmp_path / "x"), timeout=60)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "--spark-conf goes with --master" in p.stderr
