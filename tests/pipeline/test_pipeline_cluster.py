"""``sdschat report --master spark://...`` on a real Spark standalone cluster (a master and a worker started from the
installed pyspark, as the README says) writes the same report as the embedded ``local[*]`` Spark."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from spark_cluster import standalone_cluster

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    """A Spark standalone master and one worker (2 cores, 2 GB) on loopback, from the installed pyspark."""
    with standalone_cluster(tmp_path_factory.mktemp("spark-standalone"), [(2, "2g")]) as url:
        yield url


def test_report_on_a_standalone_cluster_equals_the_local_report(spark_run, standalone):
    sim_dir, (db_a, db_b) = spark_run["sim_dir"], spark_run["dbs"]
    out = spark_run["base"] / "report-cluster"
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "sdschat",
            "report",
            str(sim_dir),
            str(db_a),
            str(db_b),
            "--out",
            str(out),
            "--master",
            standalone,
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert p.returncode == 0, p.stderr[-3000:]
    # a few thousand events: the JVMs compile with C1 alone, and the shuffles have 8 partitions, not Spark's 200
    assert "JIT: C1 alone, a short job; 8 shuffle partitions)" in p.stderr, p.stderr[-3000:]
    local = spark_run["base"] / "report"

    def numbers(md: Path) -> list[str]:  # the report less its last line, how long each step took
        return [line for line in md.read_text().splitlines() if "total_s" not in line]

    assert numbers(out / "report.md") == numbers(local / "report.md")
    assert sum("total_s" in line for line in (out / "report.md").read_text().splitlines()) == 1
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
    ):
        ours = pq.read_table(out / "tables" / f"{table}.parquet")
        theirs = pq.read_table(local / "tables" / f"{table}.parquet")
        assert ours.schema == theirs.schema, table
        assert sorted(map(repr, ours.to_pylist())) == sorted(map(repr, theirs.to_pylist())), table


def _cmdline(pid: str) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def test_a_short_job_on_a_cluster_runs_its_driver_and_its_executors_with_c1_alone(standalone, tmp_path):
    from sdschat.pipeline.spark import spark_session

    with spark_session("sdschat-quick-jit-cluster", master=standalone, log_dir=tmp_path, quick_jit=True) as spark:
        assert spark.range(10_000).selectExpr("sum(id)").first()[0] == 49_995_000  # a job on the executors
        app = spark.sparkContext.applicationId
        driver = [
            str(a) for a in spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
        ]
        executors = [
            args
            for args in map(_cmdline, filter(str.isdigit, os.listdir("/proc")))
            if "org.apache.spark.executor.CoarseGrainedExecutorBackend" in args and app in args
        ]
    assert "-XX:TieredStopAtLevel=1" in driver, driver
    assert executors and all("-XX:TieredStopAtLevel=1" in args for args in executors), executors
