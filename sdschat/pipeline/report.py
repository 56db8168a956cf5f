"""``sdschat report``: the reliability report, a PySpark job.

What it does
------------
1. Stages the inputs (:mod:`sdschat.pipeline.inputs`): simulation directories
   are read as they are; participant databases are converted to Parquet with
   sqlite3 + pyarrow (never JDBC: Spark's SQLite JDBC path reads INTEGER as
   32-bit).
2. Spark reads every events file into one view (plus a ``source`` column) and
   reduces it with SQL (:mod:`sdschat.pipeline.queries`) to small tables.
3. The metrics are computed from those in plain Python
   (:mod:`sdschat.pipeline.metrics`, where every definition is written down).
4. Writes ``report.md``, PNG plots and every metric table as Parquet under
   ``tables/``; the command prints where. Spark stops in the background
   from the end of step 2 (:class:`Reduction`): by then the report needs
   nothing more from it, and its stop takes from under a second to half a
   minute (the first session on a machine writes its class archive then). The two tables with a row per event
   (``repair_rounds``, ``bloom_evidence``) are written by the executors in
   step 2 (each a folder of Parquet parts, readable as one table by pyarrow,
   pandas, DuckDB or Spark): nothing proportional to the events reaches
   this process.

Running it
----------
Embedded (default): ``sdschat report RUN_DIR [DB ...] --out REPORT_DIR`` starts
Spark in-process on every core (``local[*]``), quietly: log level ERROR, no
console progress bars, the JVM's own output in ``REPORT_DIR/spark-jvm.log``.
``--driver-memory`` (default 1200m: nothing per event reaches the driver, so a 50-million-event
report needs no more than a small one) and ``--spark-conf KEY=VALUE`` tune it.

On a cluster: ``sdschat report ... --master spark://HOST:7077`` (or ``yarn``,
``k8s://...``) runs the same job with this process as the driver. Inputs and
``--out`` must be on a filesystem every executor can read (the staged
Parquet of databases is written under ``--out``); the report's Spark work is
pure SQL, so executors need no Python packages.

With spark-submit (the cluster manager launches the driver)::

    spark-submit --master spark://HOST:7077 --driver-memory 1200m \\
        "$(python -c 'import sdschat.cli.submit as m; print(m.__file__)')" \\
        report RUN_DIR --out REPORT_DIR

``sdschat/cli/submit.py`` takes the same arguments as ``sdschat report``
and ``sdschat sweep`` and uses the session spark-submit provides. For
``sweep`` the executors run simulations in Python: install sdschat (and its
dependencies) on every node, or ship it with ``--py-files``, and point
``spark.pyspark.python`` at that interpreter.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information
import pyarrow.parquet as pq  # type: ignore[import-untyped]  # (nor does its parquet module)

from sdschat.sim.output import BASE_COLUMNS, EVENT_COLUMNS, EVENT_SCHEMA

from .inputs import InputError, Staged, stage_inputs
from .metrics import BACKLOG_BUCKETS, Reduced, Report, SourceInfo, comparison, compute
from .spark import QUICK_JIT_EVENTS, SparkJobError, embedded, one_line, spark_session

__all__ = [
    "ReportError",
    "Reduction",
    "ReportResult",
    "reduce_inputs",
    "run_report",
    "write_report",
    "build_events_view",
    "short_job",
    "cluster_partitions",
]

log = logging.getLogger("sdschat.pipeline.report")


class ReportError(Exception):
    """The report could not be made (one line)."""


#: the columns of the view ``events`` besides ``source``: what the report reads (not ``detail``)
VIEW_COLUMNS = (
    "seq",
    "ts_ms",
    "kind",
    "message_id",
    "sender_id",
    "participant_id",
    "lamport_timestamp",
    "repaired",
    "by_bloom",
    "bytes",
    "by_id",
    "frame_ts",
    "missing_ids",
    "carrier",
)

#: the typed columns out of ``detail``, for simulation outputs of format 1 (slower: JSON on every row)
_LEGACY = {
    "repaired": "CAST(get_json_object(detail, '$.repaired') AS BOOLEAN)",
    "by_bloom": "CAST(get_json_object(detail, '$.by_bloom') AS BOOLEAN)",
    "bytes": "CAST(get_json_object(detail, '$.bytes') AS BIGINT)",
    "by_id": "get_json_object(detail, '$.by')",
    "frame_ts": "CAST(get_json_object(detail, '$.frame_ts') AS BIGINT)",
    "missing_ids": "from_json(get_json_object(detail, '$.missing'), 'array<string>')",
    "carrier": "get_json_object(detail, '$.carrier')",
}


def _ddl(columns) -> str:
    """The Spark schema (DDL) of these columns of the events table (:data:`sdschat.sim.output.EVENT_SCHEMA`)."""
    names = {pa.int64(): "BIGINT", pa.string(): "STRING", pa.bool_(): "BOOLEAN", pa.list_(pa.string()): "ARRAY<STRING>"}
    return ", ".join(f"{c} {names[EVENT_SCHEMA.field(c).type]}" for c in columns)


def build_events_view(spark, staged: list[Staged]) -> None:
    """Register the view ``events``: every source's event files (:data:`VIEW_COLUMNS`) with a ``source`` column."""
    from functools import reduce

    from pyspark.sql import functions as F

    frames = []
    for s in staged:
        if not s.event_files:
            continue
        # the schema is known: Spark need not open every file's footer to infer it
        schema = _ddl(BASE_COLUMNS if s.legacy else EVENT_COLUMNS)
        df = spark.read.schema(schema).parquet(*[str(f) for f in s.event_files])
        cols = []
        for c in VIEW_COLUMNS:
            col = F.expr(_LEGACY[c]) if s.legacy and c in _LEGACY else F.col(c)
            if c in ("seq", "ts_ms", "lamport_timestamp", "bytes", "frame_ts"):
                col = col.cast("bigint")
            cols.append(col.alias(c))
        frames.append(df.select(F.lit(s.name).alias("source"), *cols))
    reduce(lambda a, b: a.unionByName(b), frames).createOrReplaceTempView("events")


@dataclass
class Reduction:
    """The Spark half of a report: the staged sources, what Spark reduced them to, how long each step took and
    whether the JVMs compiled with C1 alone (``quick_jit``: :func:`short_job`; None with a caller's session).

    Nothing here needs Spark any more: when the report started its own session, that session is already
    stopping in the background (:meth:`wait_for_spark`), while the metrics are computed and the files written.
    """

    staged: list[Staged]
    reduced: Reduced
    timings: dict[str, float]
    quick_jit: bool | None = None
    _stopping: _BackgroundStop | None = None

    def wait_for_spark(self) -> float | None:
        """Wait until the report's own Spark session has stopped and its JVM has exited; the seconds the stop took
        (None when the session was the caller's)."""
        return self._stopping.wait() if self._stopping is not None else None


class _BackgroundStop:
    """The end of a Spark session (an :class:`~contextlib.ExitStack` holding it) run in a thread of its own.

    The thread is not a daemon: an interpreter that exits first waits for it, so the JVM never outlives the
    command that started it."""

    def __init__(self, stack: contextlib.ExitStack) -> None:
        self._stack = stack
        self.seconds: float | None = None
        self._thread = threading.Thread(target=self._run, name="sdschat-spark-stop")
        self._thread.start()

    def _run(self) -> None:
        t0 = time.perf_counter()
        try:
            self._stack.close()
        finally:
            self.seconds = round(time.perf_counter() - t0, 2)

    def wait(self) -> float | None:
        if self._thread.is_alive():
            log.info(
                "report: waiting for Spark to stop (the first session on a machine writes its class archive then, once)"
            )
        self._thread.join()
        return self.seconds


@dataclass
class ReportResult:
    """What :func:`run_report` wrote and measured.

    ``markdown``, ``tables`` and ``plots`` are where the report is; ``metrics`` what it says; ``timings`` how long
    each step took (``spark_stop_s`` once :meth:`wait_for_spark` has returned); ``quick_jit`` as in
    :class:`Reduction`. Spark may still be stopping when it is returned: call :meth:`wait_for_spark` after
    telling the user where the report is.
    """

    markdown: Path
    tables: Path
    plots: list[Path]
    metrics: Report
    timings: dict[str, float]
    quick_jit: bool | None
    reduction: Reduction

    def wait_for_spark(self) -> None:
        """Wait until the report's own Spark session has stopped (see :meth:`Reduction.wait_for_spark`)."""
        seconds = self.reduction.wait_for_spark()
        if seconds is not None:
            self.timings["spark_stop_s"] = seconds


def reduce_inputs(
    inputs: list[Path],
    out: Path,
    *,
    master: str | None = None,
    driver_memory: str | None = None,
    spark_conf: dict[str, str] | None = None,
    spark: Any = None,
    compare: bool = False,
    class_archive: bool = True,
) -> Reduction:
    """Stage the inputs and reduce them with Spark (the report's first two steps); see :func:`run_report`.

    The session this starts (none when ``spark`` is given) begins stopping as soon as the reduction is collected:
    the rest of the report needs no Spark, and a JVM's stop takes from under a second to half a minute (the
    first session on a machine writes its class archive then). ``class_archive``: whether that session's JVM
    uses this machine's class archive (:class:`~sdschat.pipeline.spark.ClassArchive`).
    """
    from .queries import reduce_with_spark

    t0 = time.perf_counter()
    staging = out / "_staging"
    tables = out / "tables"  # the per-event tables are written there by Spark
    if staging.exists():
        shutil.rmtree(staging)
    try:
        staged = stage_inputs([Path(p) for p in inputs], staging)
    except InputError as exc:
        raise ReportError(str(exc)) from None
    if compare and len(staged) != 2:
        raise ReportError(
            f"--compare needs two sources, the inputs are {len(staged)}: " + ", ".join(s.name for s in staged)
        )
    log.info(
        "report: %d source(s): %s",
        len(staged),
        ", ".join(f"{s.name} ({s.info.kind}, {len(s.info.participants)} participants)" for s in staged),
    )
    timings: dict[str, float] = {"stage_s": time.perf_counter() - t0}

    def on_table(name: str, secs: float) -> None:
        timings[f"{name}_s"] = round(secs, 2)
        log.info("report: reduced %s (%.1f s)", name, secs)

    if spark is not None:
        with _one_line_errors(out):
            build_events_view(spark, staged)
            return Reduction(staged, reduce_with_spark(spark, on_table, detail_dir=tables), timings)
    # matplotlib loads while Spark's JVM starts (mostly on one core), not after the queries
    threading.Thread(target=_load_plotting, name="sdschat-plots-import", daemon=True).start()
    events = sum(s.events for s in staged)
    quick_jit = short_job(events)
    stack = contextlib.ExitStack()
    try:
        with _one_line_errors(out):
            t1 = time.perf_counter()
            session = stack.enter_context(
                spark_session(
                    "sdschat-report",
                    master=master,
                    driver_memory=driver_memory,
                    conf=spark_conf,
                    log_dir=out,
                    quick_jit=quick_jit,
                    class_archive=class_archive,
                )
            )
            timings["spark_start_s"] = round(time.perf_counter() - t1, 2)
            notes = ["JIT: C1 alone, a short job"] if quick_jit else []
            if not embedded(master) and "spark.sql.shuffle.partitions" not in (spark_conf or {}):
                n = cluster_partitions(events, session.sparkContext.defaultParallelism)
                session.conf.set("spark.sql.shuffle.partitions", str(n))
                notes.append(f"{n} shuffle partitions")
            log.info(
                "report: Spark %s ready (%.1f s%s)",
                session.version,
                timings["spark_start_s"],
                "".join(f"; {x}" for x in notes),
            )
            t2 = time.perf_counter()
            build_events_view(session, staged)
            reduced = reduce_with_spark(session, on_table, detail_dir=tables)
            timings["reduce_s"] = round(time.perf_counter() - t2, 2)
    except BaseException:
        stack.close()
        raise
    return Reduction(staged, reduced, timings, quick_jit, _BackgroundStop(stack))


@contextlib.contextmanager
def _one_line_errors(out: Path) -> Iterator[None]:
    """Spark's failures as one :class:`ReportError` line (Py4J and Spark analysis errors: the JVM log has the rest)."""
    try:
        yield
    except SparkJobError as exc:
        raise ReportError(str(exc)) from None
    except Exception as exc:
        if type(exc).__module__.startswith(("py4j", "pyspark")):
            raise ReportError(f"Spark job failed: {one_line(exc)} (see {out / 'spark-jvm.log'})") from None
        raise


def run_report(
    inputs: list[Path],
    out: Path,
    *,
    master: str | None = None,
    driver_memory: str | None = None,
    spark_conf: dict[str, str] | None = None,
    spark: Any = None,
    compare: bool = False,
    class_archive: bool = True,
) -> ReportResult:
    """Make the report: reduce with Spark (:func:`reduce_inputs`), compute the metrics, write the files.
    ``spark``: use this session instead of starting one; ``class_archive``: whether the one it starts uses this
    machine's class archive (:class:`~sdschat.pipeline.spark.ClassArchive`). On a cluster, the shuffle partitions
    follow the events (:func:`cluster_partitions`) unless ``spark_conf`` sets them.

    ``compare``: the inputs are two sources (two runs, or a run and one channel's databases); the report
    adds every summary metric of the second against the first (``tables/comparison.parquet``).

    The report is written while the session it started stops: the result's
    :meth:`~ReportResult.wait_for_spark` waits for that stop. Progress goes to the ``sdschat.pipeline.report``
    logger (its level decides what is said).
    """
    t0 = time.perf_counter()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    red = reduce_inputs(
        inputs,
        out,
        master=master,
        driver_memory=driver_memory,
        spark_conf=spark_conf,
        spark=spark,
        compare=compare,
        class_archive=class_archive,
    )
    try:
        timings = red.timings
        t3 = time.perf_counter()
        sources = [s.info for s in red.staged]
        report = compute(red.reduced, sources)
        if compare:
            report.comparison = comparison(*report.summary)
        timings["metrics_s"] = round(time.perf_counter() - t3, 2)
        timings["total_s"] = round(time.perf_counter() - t0, 2)
        written = write_report(report, out, sources, dict(timings))
        timings["write_s"] = round(time.perf_counter() - t0 - timings["total_s"], 2)
        shutil.rmtree(out / "_staging", ignore_errors=True)
    except BaseException:
        red.wait_for_spark()
        raise
    return ReportResult(
        markdown=written["report"],
        tables=written["tables"],
        plots=written["plots"],
        metrics=report,
        timings=timings,
        quick_jit=red.quick_jit,
        reduction=red,
    )


def short_job(events: int) -> bool:
    """Whether the JVMs of a report of ``events`` (its sources' :attr:`~sdschat.pipeline.inputs.Staged.events`)
    should compile with C1 alone (``spark_session(quick_jit=True)``): at most
    :data:`~sdschat.pipeline.spark.QUICK_JIT_EVENTS`, where C2 would take most of their CPU compiling."""
    return events <= QUICK_JIT_EVENTS


#: a cluster report's events per shuffle partition: Spark's default of 200 partitions made a report of 2.26 M events
#: on a two-core worker take 152 s, 54 s with 8 (4 to 16 alike; bench/report_scale.py --master)
CLUSTER_EVENTS_PER_PARTITION = 1_000_000


def cluster_partitions(events: int, cores: int) -> int:
    """The shuffle partitions of a report on a cluster: a partition per :data:`CLUSTER_EVENTS_PER_PARTITION` events,
    at least two per core the cluster has given the job, and at least 8."""
    return max(8, 2 * cores, -(-events // CLUSTER_EVENTS_PER_PARTITION))


def _load_plotting() -> None:
    """Import the plotting library (the report's plots need it; a failure here is the plots' to report)."""
    from . import plots

    try:
        plots.load()
    except Exception:  # noqa: BLE001 -- write_report imports it again and raises there
        pass


# ------------------------------------------------------------------- output


def _table(rows: list[dict]) -> pa.Table:
    if not rows:
        return pa.table({})
    keys = list(rows[0].keys())
    for r in rows[1:]:
        for k in r:
            if k not in keys:
                keys.append(k)
    cols = {}
    for k in keys:
        vals = [r.get(k) for r in rows]
        if all(v is None or isinstance(v, list) for v in vals) and any(isinstance(v, list) for v in vals):
            cols[k] = pa.array(vals, pa.list_(pa.string()))
        else:
            try:
                cols[k] = pa.array(vals)
            except (pa.ArrowInvalid, pa.ArrowTypeError):
                cols[k] = pa.array([None if v is None else str(v) for v in vals], pa.string())
    return pa.table(cols)


def _fmt(v: Any, digits: int = 4) -> str:
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "**no**"
    if isinstance(v, float):
        if v != 0 and abs(v) < 10**-digits:
            return f"{v:.2e}"
        return f"{v:.{digits}f}".rstrip("0").rstrip(".") if abs(v) < 1000 else f"{v:,.0f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def _ms(v: Any) -> str:
    if v is None:
        return "n/a"
    return f"{v / 1000:.3f} s" if v >= 1000 else f"{v} ms"


def _delta(row: dict, fmt=None) -> str:
    d = row["delta"]
    if d is None:
        return "same" if row["a"] == row["b"] else "differs"
    if d == 0:
        return "0"
    return ("+" if d > 0 else "-") + (fmt or _fmt)(abs(d))


def _pct(change: float | None) -> str:
    return "" if change is None or change == 0 else f"{change * 100:+.1f}%"


def _peak(n: int, at_ms: int | None) -> str:
    return _fmt(n) if at_ms is None else f"{_fmt(n)} at {at_ms / 1000:.1f} s"


def _md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def write_report(report: Report, out: Path, sources, timings: dict[str, float] | None = None) -> dict[str, Any]:
    """Write tables (Parquet), plots (PNG) and report.md under ``out``."""
    from . import plots

    tables = out / "tables"
    tables.mkdir(parents=True, exist_ok=True)
    for name in Report.TABLES:
        rows = getattr(report, name)
        if rows is None:  # written by Spark (a folder of Parquet parts)
            continue
        target = tables / f"{name}.parquet"
        if target.is_dir():
            shutil.rmtree(target)
        pq.write_table(_table(rows), target)
    if report.comparison:
        pq.write_table(_table(report.comparison), tables / "comparison.parquet")
    undelivered = [r for r in report.messages if not r["complete"] and r["recipients"] > 0]
    pq.write_table(_table(undelivered), tables / "undelivered.parquet")
    plot_paths = [
        plots.latency_cdfs(report.latency_hist, out / "latency_cdf.png"),
        plots.participant_delivery(report.participants, out / "participant_delivery.png"),
        plots.message_delivery(report.messages, out / "message_delivery.png"),
        plots.backlog(report.backlog, out / "backlog.png"),
    ]
    md = _markdown(report, sources, undelivered, timings or {})
    (out / "report.md").write_text(md, encoding="utf-8")
    return {"report": out / "report.md", "tables": tables, "plots": plot_paths}


def _markdown(rep: Report, sources: list[SourceInfo], undelivered: list[dict], timings: dict[str, float]) -> str:
    """report.md: its sections in order, each written by a function of its own."""
    parts = ["# sdschat reliability report", ""]
    parts += _md_inputs(rep, sources)
    parts += _md_comparison(rep)
    parts += _md_delivery(rep, undelivered)
    parts += _md_latency(rep)
    parts += _md_repair(rep)
    parts += _md_bytes(rep)
    parts += _md_bloom(rep)
    parts += _md_convergence(rep)
    parts += _md_definitions(timings)
    return "\n".join(parts)


def _md_inputs(rep: Report, sources: list[SourceInfo]) -> list[str]:
    """The inputs, and what each source is (a simulation's parameters, a channel's databases)."""
    parts = ["Inputs: " + "; ".join(f"**{s['source']}** ({s['kind']}: {s['inputs']})" for s in rep.summary), ""]
    for src in sources:
        if src.kind == "sim" and src.meta:
            p = src.meta.get("params", {})
            parts.append(
                f"- **{src.name}**: simulation of {p.get('participants')} participants, {p.get('messages')} messages "
                f"at {p.get('rate')}/s, loss {p.get('loss')}, latency {p.get('latency_ms')} ms, duplicate "
                f"{p.get('duplicate')}, churn {p.get('churn')}, causal history {p.get('causal_history')}, bloom "
                f"capacity {p.get('bloom_capacity')}, SDS-R {'on' if p.get('repair') else 'off'} "
                f"({p.get('effective_response_groups')} response groups), settle {p.get('settle')}, seed "
                f"{p.get('seed')}; stopped: {src.meta.get('stop_reason')} at "
                f"{(src.meta.get('virtual_end_ms') or 0) / 1000:.0f} s virtual."
            )
        elif src.kind == "db":
            parts.append(f"- **{src.name}**: {len(src.participants)} participant database(s) of one channel.")
    return parts


def _md_comparison(rep: Report) -> list[str]:
    """``--compare``: every summary metric of the second source against the first (nothing otherwise)."""
    if not rep.comparison:
        return []
    a, b = rep.summary[0]["source"], rep.summary[1]["source"]
    rows = []
    for r in rep.comparison:
        f = _ms if r["metric"].endswith("_ms") else _fmt
        rows.append([r["metric"], f(r["a"]), f(r["b"]), _delta(r, f), _pct(r["change"])])
    return [
        "",
        f"## {b} against {a}",
        "",
        _md_table(["metric", a, b, "change", "relative"], rows),
        f"\nChange: {b} minus {a}. Every table and plot below shows both; all of it in `tables/comparison.parquet`.",
    ]


def _md_delivery(rep: Report, undelivered: list[dict]) -> list[str]:
    """Delivery ratios, and the messages nobody (or not everyone) got."""
    parts = ["", "## Delivery", ""]
    parts.append(
        _md_table(
            [
                "source",
                "participants",
                "messages",
                "deliveries / expected",
                "delivery ratio",
                "mean per message",
                "worst message",
                "incomplete",
                "never delivered",
            ],
            [
                [
                    s["source"],
                    _fmt(s["participants"]),
                    _fmt(s["messages"]),
                    f"{_fmt(s['deliveries'])} / {_fmt(s['expected_deliveries'])}",
                    _fmt(s["delivery_ratio"], 6),
                    _fmt(s["mean_message_delivery_ratio"], 6),
                    _fmt(s["min_message_delivery_ratio"], 4),
                    _fmt(s["incomplete_messages"]),
                    _fmt(s["never_delivered_messages"]),
                ]
                for s in rep.summary
            ],
        )
    )
    never = [r for r in undelivered if r["never_delivered"]]
    parts.append("")
    if never:
        parts.append(f"Never delivered to anyone ({len(never)}; all in `tables/undelivered.parquet`):")
        parts.append("")
        for r in never[:50]:
            parts.append(f"- `{r['source']}` `{r['message_id']}` from `{r['sender_id']}`")
        if len(never) > 50:
            parts.append(f"- ... and {len(never) - 50} more")
    else:
        parts.append("No message was left undelivered to everyone.")
    if undelivered:
        parts.append(f"\n{len(undelivered)} message(s) missed at least one recipient: `tables/undelivered.parquet`.")
    parts += [
        "",
        "![per-participant delivery](participant_delivery.png)",
        "![per-message delivery](message_delivery.png)",
    ]
    return parts


def _md_latency(rep: Report) -> list[str]:
    """Latency percentiles of every metric, and the slowest senders."""
    parts = ["", "## Latency", ""]
    parts.append(
        _md_table(
            ["source", "metric", "samples", "p50", "p95", "p99", "max"],
            [
                [r["source"], r["metric"], _fmt(r["n"]), _ms(r["p50"]), _ms(r["p95"]), _ms(r["p99"]), _ms(r["max"])]
                for r in rep.latency
            ],
        )
    )
    parts.append(
        "\nShown: the first copy to reach a recipient (the UI shows it at once, marked while earlier "
        "messages are missing). Delivered: in causal order, after everything it depends on. The gap "
        "between the two is the time messages wait behind a gap."
    )
    parts += ["", "![latency CDFs](latency_cdf.png)", ""]
    if rep.senders:
        parts += [
            "Per sender (p99; slowest delivered first, at most 5 per source; all of them in `tables/senders.parquet`):",
            "",
        ]
        shown = []
        for src in [x["source"] for x in rep.summary]:
            shown += [r for r in rep.senders if r["source"] == src][:5]
        parts.append(
            _md_table(
                ["source", "sender", "deliveries", "shown p50", "shown p99", "delivered p50", "delivered p99"],
                [
                    [
                        r["source"],
                        f"`{str(r['sender_id'])[:16]}`",
                        _fmt(r["delivered_n"]),
                        _ms(r["shown_p50_ms"]),
                        _ms(r["shown_p99_ms"]),
                        _ms(r["delivered_p50_ms"]),
                        _ms(r["delivered_p99_ms"]),
                    ]
                    for r in shown
                ],
            )
        )
        parts.append("")
    return parts


def _md_repair(rep: Report) -> list[str]:
    """Resends and repair traffic, the repair load per member and the backlog."""
    S = rep.summary
    parts = ["## Repair and resend traffic", ""]
    parts.append(
        _md_table(
            [
                "source",
                "resends",
                "repair requests",
                "repair responses",
                "per delivery: resends / requests / responses",
                "rounds answered",
                "rounds with duplicates",
                "duplicate responses",
                "called off",
                "declared lost",
                "syncs",
            ],
            [
                [
                    s["source"],
                    _fmt(s["resends"]),
                    _fmt(s["repair_requests"]),
                    _fmt(s["repair_responses"]),
                    " / ".join(
                        _fmt(s[k], 5)
                        for k in (
                            "resends_per_delivery",
                            "repair_requests_per_delivery",
                            "repair_responses_per_delivery",
                        )
                    ),
                    _fmt(s["repair_rounds_answered"]),
                    _fmt(s["repair_rounds_with_duplicates"]),
                    _fmt(s["duplicate_repair_responses"]),
                    _fmt(s.get("repair_called_off")),
                    _fmt(s["lost_declared"]),
                    _fmt(s["syncs_sent"]),
                ]
                for s in S
            ],
        )
    )
    parts.append("")
    parts.append(
        _md_table(
            [
                "source",
                "members repairing",
                "answers: busiest / median member",
                "requests: busiest member",
                "peak messages waiting",
                "peak gaps open",
            ],
            [
                [
                    s["source"],
                    _fmt(sum(1 for r in rep.repair_load if r["source"] == s["source"])),
                    f"{_fmt(s['repair_answers_max_member'])} / {_fmt(s['repair_answers_median_member'])}",
                    _fmt(s["repair_requests_max_member"]),
                    _peak(s["backlog_peak_waiting"], s["backlog_peak_waiting_at_ms"]),
                    _peak(s["backlog_peak_gaps_open"], s["backlog_peak_gaps_at_ms"]),
                ]
                for s in S
            ],
        )
    )
    parts.append(
        "\nRepair load: per member with any repair traffic (requests sent, answers rebroadcast, called "
        "off: `tables/repair_load.parquet`). Backlog: (participant, message) pairs shown but waiting for "
        "causal order, and gaps noted but not yet filled or given up, summed over the members, at the end "
        f"of each of {BACKLOG_BUCKETS} equal slices of the run (`tables/backlog.parquet`)."
    )
    parts += ["", "![backlog over time](backlog.png)"]
    return parts


def _md_bytes(rep: Report) -> list[str]:
    """Bytes published and received, also per delivered message."""
    parts = ["", "## Bytes on the wire", ""]
    parts.append(
        _md_table(
            [
                "source",
                "frames published",
                "bytes published",
                "published per delivery",
                "bytes received",
                "received per delivery",
            ],
            [
                [
                    s["source"],
                    _fmt(s["frames_published"]),
                    _fmt(s["bytes_published"]),
                    _fmt(s["bytes_published_per_delivery"], 1),
                    _fmt(s["bytes_received"]),
                    _fmt(s["bytes_received_per_delivery"], 1),
                ]
                for s in rep.summary
            ],
        )
    )
    parts.append(
        "\nPublished: each frame counted once. Received: each frame times the copies that reached an "
        "online member. Databases record no frame sizes (n/a)."
    )
    return parts


def _md_bloom(rep: Report) -> list[str]:
    """Acknowledgements by bloom filter, and how many of them were false."""
    parts = ["", "## Bloom-filter acknowledgements", ""]
    parts.append(
        _md_table(
            ["source", "bloom evidence", "false evidence", "acks by bloom", "false-positive acks"],
            [
                [
                    s["source"],
                    _fmt(s["bloom_evidence"]),
                    _fmt(s["bloom_evidence_false"]),
                    _fmt(s["bloom_acks"]),
                    _fmt(s["bloom_acks_false"]),
                ]
                for s in rep.summary
            ],
        )
    )
    parts.append(
        "\nEvidence = a `possibly_acked`, or an `acked` by bloom filter. False = the participant whose "
        "filter claimed the message had not received it when it sent that filter (needs the simulator's "
        "`by`/`frame_ts` detail; n/a for databases)."
    )
    return parts


def _md_convergence(rep: Report) -> list[str]:
    """Whether every participant's ordered log is the same."""
    parts = ["", "## Convergence", ""]
    parts.append(
        _md_table(
            ["source", "converged", "distinct logs", "largest agreeing group", "basis", "event-log mismatches"],
            [
                [
                    s["source"],
                    _fmt(s["converged"]),
                    _fmt(s["distinct_logs"]),
                    f"{_fmt(s['largest_agreeing'])} of {_fmt(s['participants'])}",
                    s["convergence_basis"],
                    _fmt(s["events_log_mismatches"]),
                ]
                for s in rep.summary
            ],
        )
    )
    parts.append(
        "\nConverged = every participant's ordered log (ids by Lamport timestamp, then id) has the same "
        "SHA-256. Per participant: `tables/convergence.parquet`."
    )
    return parts


def _md_definitions(timings: dict[str, float]) -> list[str]:
    """Where the definitions and the tables are, and how long each step of the report took."""
    parts = [
        "",
        "## Definitions",
        "",
        "See `sdschat/pipeline/metrics.py` for each metric's exact definition. Tables (Parquet) in "
        "`tables/`: " + ", ".join(f"`{t}`" for t in (*Report.TABLES, "undelivered")) + ".",
        "",
    ]
    if timings:
        parts.append("Timings: " + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items()) + ".")
    parts.append("")
    return parts
