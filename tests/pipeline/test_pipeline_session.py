"""A Spark session's settings without a JVM, and a report's Spark stopping while the report is written."""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path

from sdschat.pipeline.metrics import Reduced, Report
from sdschat.pipeline.report import Reduction, ReportResult, _BackgroundStop
from sdschat.pipeline.spark import session_settings


def test_embedded_settings_size_by_the_cores_and_add_a_callers_jvm_options_last():
    s = session_settings(
        "app",
        java_options="-Dlog=x",
        driver_options="-Xshare",
        cores=3,
        conf={"spark.driver.extraJavaOptions": "-Dmine=1", "spark.sql.shuffle.partitions": "9"},
    )
    assert s["spark.master"] == "local[*]" and s["spark.app.name"] == "app"
    assert s["spark.default.parallelism"] == "3"
    assert s["spark.sql.shuffle.partitions"] == "9"  # the caller's setting wins
    driver = s["spark.driver.extraJavaOptions"].split()
    assert driver[:2] == ["-Dlog=x", "-Xshare"] and driver[-1] == "-Dmine=1" and "-XX:+UseParallelGC" in driver
    assert s["spark.executor.extraJavaOptions"] == "-Dlog=x"
    quick = session_settings("app", cores=1, quick_jit=True)
    assert "-XX:TieredStopAtLevel=1" in quick["spark.driver.extraJavaOptions"]
    assert quick["spark.sql.shuffle.partitions"] == "4"


def test_a_cluster_session_leaves_the_sizes_to_the_cluster_and_a_short_job_compiles_with_c1_everywhere():
    s = session_settings("app", master="spark://h:7077", java_options="-Dlog=x", quick_jit=True)
    assert s["spark.master"] == "spark://h:7077"
    assert "spark.sql.shuffle.partitions" not in s and "spark.driver.memory" not in s
    for key in ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions"):
        assert s[key].split() == ["-Dlog=x", "-XX:TieredStopAtLevel=1"], s[key]


def test_the_report_returns_while_spark_stops_and_waits_for_the_stop_when_asked():
    release = threading.Event()
    stopped = []
    stack = contextlib.ExitStack()
    stack.callback(lambda: (release.wait(10), stopped.append(time.perf_counter())))
    reduction = Reduction([], Reduced(), {"reduce_s": 1.0}, True, _BackgroundStop(stack))
    result = ReportResult(
        markdown=Path("report.md"),
        tables=Path("tables"),
        plots=[],
        metrics=Report(),
        timings={"reduce_s": 1.0},
        quick_jit=True,
        reduction=reduction,
    )
    assert not stopped  # the stop is under way, not done: the caller can say where the report is first
    stopper = next(t for t in threading.enumerate() if t.name == "sdschat-spark-stop")
    assert not stopper.daemon  # an interpreter that exits first waits for it: no JVM outlives the command
    release.set()
    result.wait_for_spark()
    assert stopped and "spark_stop_s" in result.timings
    assert Reduction([], Reduced(), {}).wait_for_spark() is None  # a caller's own session: nothing to wait for
