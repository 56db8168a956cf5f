"""``sdschat report --master spark://...`` on a real Spark standalone cluster (a master and a worker started from the
installed pyspark, as the README says) writes the same report as the embedded ``local[*]`` Spark."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

pytestmark = pytest.mark.timeout(300)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_line(path: Path, text: str, proc: subprocess.Popen, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and text in path.read_text(errors="replace"):
            return
        if proc.poll() is not None:
            raise AssertionError(f"{proc.args[1]} exited: {path.read_text(errors='replace')[-2000:]}")
        time.sleep(0.2)
    raise AssertionError(f"no {text!r} in {path} after {timeout} s: {path.read_text(errors='replace')[-2000:]}")


@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    """A Spark standalone master and one worker (2 cores, 2 GB) on loopback, from the installed pyspark."""
    import pyspark

    home = Path(pyspark.__file__).parent
    base = tmp_path_factory.mktemp("spark-standalone")
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable,
           "SPARK_LOG_DIR": str(base / "logs"), "SPARK_WORKER_DIR": str(base / "work")}
    port = free_port()
    spark_class = str(home / "bin" / "spark-class")
    procs = []
    try:
        master_log = base / "master.log"
        with open(master_log, "wb") as log:
            procs.append(subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                 "--webui-port", str(free_port())], stdout=log, stderr=subprocess.STDOUT, env=env,
                stdin=subprocess.DEVNULL))
        wait_for_line(master_log, "I have been elected leader", procs[0])
        url = f"spark://127.0.0.1:{port}"
        worker_log = base / "worker.log"
        with open(worker_log, "wb") as log:
            procs.append(subprocess.Popen(
                [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--cores", "2", "--memory", "2g",
                 "--webui-port", str(free_port()), "--work-dir", str(base / "work")], stdout=log,
                stderr=subprocess.STDOUT, env=env, stdin=subprocess.DEVNULL))
        wait_for_line(worker_log, "Successfully registered with master", procs[1])
        yield url
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()


def test_report_on_a_standalone_cluster_equals_the_local_report(spark_run, standalone):
    sim_dir, (db_a, db_b) = spark_run["sim_dir"], spark_run["dbs"]
    out = spark_run["base"] / "report-cluster"
    p = subprocess.run([sys.executable, "-m", "sdschat", "report", str(sim_dir), str(db_a), str(db_b), "--out",
                        str(out), "--master", standalone, "--spark-conf", "spark.sql.shuffle.partitions=4"],
                       capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stderr[-3000:]
    local = spark_run["base"] / "report"

    def numbers(md: Path) -> list[str]:  # the report less its last line, how long each step took
        return [line for line in md.read_text().splitlines() if "total_s" not in line]

    assert numbers(out / "report.md") == numbers(local / "report.md")
    assert sum("total_s" in line for line in (out / "report.md").read_text().splitlines()) == 1
    for table in ("summary", "messages", "latency", "latency_hist", "participants", "repair_rounds",
                  "bloom_evidence", "convergence", "kind_counts", "undelivered"):
        ours = pq.read_table(out / "tables" / f"{table}.parquet")
        theirs = pq.read_table(local / "tables" / f"{table}.parquet")
        assert ours.schema == theirs.schema, table
        assert sorted(map(repr, ours.to_pylist())) == sorted(map(repr, theirs.to_pylist())), table
