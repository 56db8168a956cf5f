"""A quiet Spark session for the pipeline jobs.

* ``local[*]`` (an embedded Spark on every core) unless a master URL is given.
* ``PYSPARK_PYTHON`` / ``PYSPARK_DRIVER_PYTHON`` = ``sys.executable``, so
  Python workers run in this interpreter's environment (the venv).
* Quiet terminal: log4j2 at ERROR (no banner, no "Setting default log level"
  or native-hadoop warnings), ``spark.ui.showConsoleProgress=false``, and the
  JVM's own stdout/stderr (e.g. the JDK's incubator-module warning) go to a
  log file instead of the terminal.
* Embedded, the JVM collects garbage with the parallel (throughput)
  collector: a batch job on few cores, where G1's concurrent threads take
  time from the tasks.
* Spark failures become :class:`SparkJobError` with one line; the JVM log
  file holds the detail.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["SparkJobError", "spark_session", "one_line", "DRIVER_MEMORY"]

#: the driver JVM's heap in local mode, where it runs the executors too: the report collects nothing per event,
#: so its 50-million-event runs fit in this (bench/report_scale.py) as its 2-million ones do
DRIVER_MEMORY = "1200m"

_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
"""


class SparkJobError(Exception):
    """A Spark job failed (one line; details in the JVM log)."""


def one_line(exc: BaseException, limit: int = 300) -> str:
    """The first meaningful line of an exception (Py4J/Spark errors carry a JVM stack trace)."""
    text = str(exc).strip()
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("An error occurred while calling", "Traceback")):
            text = line
            break
    return text[:limit]


#: settings whose value is a list of JVM options: a ``conf`` value is appended to the session's own
_JVM_OPTIONS = ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")


@contextlib.contextmanager
def spark_session(app: str, *, master: str | None = None, driver_memory: str | None = None,
                  conf: dict[str, str] | None = None, log_dir: Path | None = None) -> Iterator:
    """Start a SparkSession, yield it, stop it. The JVM output goes to ``log_dir/spark-jvm.log``.

    ``conf`` overrides the session's settings, except the JVM options (``spark.driver.extraJavaOptions``,
    ``spark.executor.extraJavaOptions``), which are added after the session's own."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    if master is None:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # embedded: no network interface lookup
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession

    tmp = Path(tempfile.mkdtemp(prefix="sdschat-spark-"))
    log4j = tmp / "log4j2.properties"
    log4j.write_text(_LOG4J)
    log_path = (log_dir or tmp) / "spark-jvm.log"
    local = master is None or master.startswith("local")
    cores = os.cpu_count() or 1
    sconf = SparkConf().setAppName(app).setMaster(master or "local[*]")
    java_opts = f"-Dlog4j2.configurationFile=file:{log4j} -Dlog4j.configurationFile=file:{log4j}"
    settings = {
        "spark.ui.showConsoleProgress": "false",
        "spark.ui.enabled": "false",
        "spark.driver.extraJavaOptions": java_opts,
        "spark.executor.extraJavaOptions": java_opts,
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.python.worker.reuse": "true",
        "spark.local.dir": str(tmp / "local"),
    }
    if local:
        # the driver runs the executors: the throughput collector, not G1 (whose concurrent work competes with the
        # tasks for the cores) -- 10-13% less wall time for the report at 2 and 9.6 million events
        # (bench/report_scale.py, paired runs)
        settings["spark.driver.extraJavaOptions"] = f"{java_opts} -XX:+UseParallelGC"
        settings["spark.driver.memory"] = driver_memory or DRIVER_MEMORY
        settings["spark.sql.shuffle.partitions"] = str(max(4, 2 * cores))
        settings["spark.default.parallelism"] = str(cores)
    for key, value in (conf or {}).items():
        if key in _JVM_OPTIONS and key in settings:
            # the JVM options are added to ours (the log settings, the collector), not put in their place: a
            # later option wins over an earlier one of the same name
            value = f"{settings[key]} {value}"
        settings[key] = value
    for k, v in settings.items():
        sconf.set(k, v)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    logf = open(log_path, "ab")
    spark = None
    try:
        try:
            gateway = launch_gateway(sconf, popen_kwargs={"stdout": logf, "stderr": logf})
            sc = SparkContext(gateway=gateway, conf=sconf)
            sc.setLogLevel("ERROR")
            spark = SparkSession(sc)
        except Exception as exc:
            raise SparkJobError(f"could not start Spark ({one_line(exc)}); see {log_path}") from None
        yield spark
    finally:
        if spark is not None:
            with contextlib.suppress(Exception):
                spark.stop()
        with contextlib.suppress(Exception):
            # a new session in this process needs a new gateway (we launched this one ourselves)
            SparkContext._gateway = None
            SparkContext._jvm = None
        logf.close()
