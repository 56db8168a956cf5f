"""``sdschat sweep``: a grid of simulations, one Spark task each, aggregated into tables and plots.

Grid file (TOML; see ``sdschat/pipeline/grids/example.toml``)::

    [sweep]                      # optional
    name = "example"
    seeds = [1, 2]               # each combination runs once per seed (default [1])

    [base]                       # settings every scenario shares
    messages = 40
    rate = 2.0
    latency_ms = "20:200"        # or [20, 200]
    repair_t_min_ms = 5000       # any engine setting: ChannelConfig field or repair_<RepairConfig field>

    [grid]                       # every combination of these lists
    loss = [0.0, 0.1, 0.3]
    participants = [20, 100]
    repair = [true, false]
    causal_history = [2, 10]

Keys of ``[base]`` and ``[grid]`` are :class:`~sdschat.sim.params.SimParams`
fields (``participants``, ``messages``, ``rate``, ``senders``,
``content_bytes``, ``loss``, ``latency_ms``, ``duplicate``, ``churn``
(``"FRACTION:MEAN_OFF_MS"``), ``causal_history``, ``bloom_capacity``,
``repair``, ``response_groups``, ``settle``, ``horizon_ms``) or engine
settings; anything else is an error, as is a scenario the simulator would
refuse (all are checked before Spark starts).

Each scenario is one element of an RDD (one partition each), mapped by
:func:`run_scenario` inside a Spark Python worker: the simulation runs in the
task (pure Python, one worker process per task) and returns its summary;
with events kept, the scenario's output directory ``scenarios/<id>/`` can be
fed to ``sdschat report``. While the job runs, the driver prints a line per
finished scenario (it polls Spark's status tracker and the summaries the
tasks write). Results: ``results.parquet`` (one row per scenario),
``aggregate.parquet`` (mean over seeds, computed with Spark SQL),
``delivery_vs_loss.png``, ``bandwidth_vs_loss.png``, ``latency_vs_loss.png``, ``sweep.md``.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
import tomllib
from pathlib import Path
from typing import Any

__all__ = ["GridError", "Grid", "load_grid", "parse_grid", "run_scenario", "run_sweep", "SCENARIO_KEYS"]

log = logging.getLogger("sdschat.pipeline.sweep")

#: SimParams fields a grid may set (value parsers below)
SCENARIO_KEYS = (
    "participants",
    "messages",
    "rate",
    "senders",
    "content_bytes",
    "loss",
    "latency_ms",
    "duplicate",
    "churn",
    "causal_history",
    "bloom_capacity",
    "repair",
    "response_groups",
    "settle",
    "horizon_ms",
    "stores",
    "store_loss",
    "store_latency_ms",
    "store_outages",
)
_SECTIONS = ("sweep", "base", "grid")
_SWEEP_KEYS = ("name", "seeds")


class GridError(Exception):
    """A grid file is missing, malformed, or names unknown settings (one line)."""


class Grid:
    def __init__(
        self, name: str, seeds: list[int], base: dict[str, Any], axes: dict[str, list[Any]], path: Path | None = None
    ) -> None:
        self.name = name
        self.seeds = seeds
        self.base = base
        self.axes = axes
        self.path = path

    def scenarios(self) -> list[dict[str, Any]]:
        """Every combination (axes in file order, then seed), as ``{"id", "values", "params"}``."""
        from sdschat.sim import SimParams

        keys = list(self.axes)
        out: list[dict[str, Any]] = []
        for combo in itertools.product(*(self.axes[k] for k in keys)):
            values = dict(zip(keys, combo))
            for seed in self.seeds:
                settings = {**self.base, **values}
                i = len(out)
                try:
                    params = SimParams(seed=seed, **_split_settings(settings))
                except ValueError as exc:
                    raise GridError(f"grid scenario {values}: {exc}") from None
                label = "-".join(f"{_abbrev(k)}{_short(v)}" for k, v in values.items())
                sid = f"{i:03d}" + (f"-{label}" if label else "") + (f"-s{seed}" if len(self.seeds) > 1 else "")
                out.append({"id": sid, "values": values, "seed": seed, "params": params.to_json()})
        return out


_ABBREV = {
    "participants": "n",
    "loss": "loss",
    "repair": "r",
    "causal_history": "K",
    "bloom_capacity": "C",
    "response_groups": "g",
    "messages": "m",
    "duplicate": "dup",
    "churn": "churn",
    "latency_ms": "lat",
}


def _abbrev(k: str) -> str:
    return _ABBREV.get(k, k)


def _short(v: Any) -> str:
    if isinstance(v, bool):
        return "on" if v else "off"
    if isinstance(v, (list, tuple)):
        return ":".join(_short(x) for x in v)
    return str(v).replace("/", "_").replace(" ", "")


def _split_settings(settings: dict[str, Any]) -> dict[str, Any]:
    """Grid settings -> SimParams keyword arguments (engine settings go into ``overrides``)."""
    from sdschat.sim.params import parse_churn, parse_latency

    kw: dict[str, Any] = {}
    overrides: dict[str, Any] = {}
    for k, v in settings.items():
        if k in ("latency_ms", "store_latency_ms"):
            if isinstance(v, str):
                v = parse_latency(v)
            elif isinstance(v, list) and len(v) == 2 and all(isinstance(x, int) for x in v):
                v = (v[0], v[1])
            elif isinstance(v, int) and not isinstance(v, bool):
                v = (v, v)
            else:
                raise ValueError(f'{k} must be "LO:HI" or [LO, HI], got {v!r}')
            kw[k] = v
        elif k in ("churn", "store_outages"):
            if isinstance(v, str):
                v = parse_churn(v, k)
            elif isinstance(v, list) and len(v) == 2:
                v = parse_churn(f"{v[0]}:{v[1]}", k)
            elif v in (0, False, None):
                v = None
            else:
                raise ValueError(f'{k} must be "FRACTION:MEAN_OFF_MS", got {v!r}')
            kw[k] = v
        elif k in SCENARIO_KEYS:
            if k in ("loss", "duplicate", "rate", "store_loss") and isinstance(v, int) and not isinstance(v, bool):
                v = float(v)
            kw[k] = v
        else:
            overrides[k] = v
    if overrides:
        kw["overrides"] = overrides
    return kw


def parse_grid(text: str, path: Path | None = None) -> Grid:
    """Parse and check a grid (raises :class:`GridError`)."""
    from sdschat.sim.params import CHANNEL_FIELDS, OWN_OPTIONS, REPAIR_FIELDS

    where = str(path) if path else "grid"
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise GridError(f"{where}: not valid TOML: {exc}") from None
    for section in doc:
        if section not in _SECTIONS:
            raise GridError(f"{where}: unknown section [{section}] (known: {', '.join(f'[{s}]' for s in _SECTIONS)})")
        if not isinstance(doc[section], dict):
            raise GridError(f"{where}: {section} must be a table ([{section}])")
    sweep = doc.get("sweep", {})
    for k in sweep:
        if k not in _SWEEP_KEYS:
            raise GridError(f"{where}: unknown key {k!r} in [sweep] (known: {', '.join(_SWEEP_KEYS)})")
    seeds = sweep.get("seeds", [1])
    if (
        not isinstance(seeds, list)
        or not seeds
        or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)
    ):
        raise GridError(f"{where}: [sweep] seeds must be a non-empty list of integers")
    name = str(sweep.get("name", path.stem if path else "sweep"))
    engine_keys = (set(CHANNEL_FIELDS) - set(OWN_OPTIONS)) | {f"repair_{k}" for k in REPAIR_FIELDS}
    known = set(SCENARIO_KEYS) | engine_keys

    def check_key(section: str, k: str) -> None:
        if k not in known:
            if k == "seed":
                raise GridError(f"{where}: set seeds in [sweep] as seeds = [...], not {k!r} in [{section}]")
            hint = f"; it has its own key: {OWN_OPTIONS[k]}" if k in OWN_OPTIONS else ""
            raise GridError(
                f"{where}: unknown key {k!r} in [{section}]{hint} (scenario keys: "
                f"{', '.join(SCENARIO_KEYS)}; or an engine setting such as sync_interval_ms, "
                f"repair_t_min_ms)"
            )

    base = doc.get("base", {})
    for k in base:
        check_key("base", k)
    axes = doc.get("grid", {})
    for k, v in axes.items():
        check_key("grid", k)
        if not isinstance(v, list) or not v:
            raise GridError(f"{where}: [grid] {k} must be a non-empty list of values")
        if k in base:
            raise GridError(f"{where}: {k!r} is in both [base] and [grid]")
    grid = Grid(name, seeds, base, axes, path)
    scen = grid.scenarios()  # every scenario must be valid before Spark starts
    if len(scen) > 10_000:
        raise GridError(f"{where}: {len(scen)} scenarios is too many (at most 10000)")
    return grid


def load_grid(path: Path) -> Grid:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise GridError(f"no grid file at {path}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise GridError(f"cannot read {path}: {exc}") from None
    return parse_grid(text, Path(path))


# ------------------------------------------------------------------ tasks


def run_scenario(task: dict[str, Any]) -> dict[str, Any]:
    """Run one scenario (inside a Spark Python worker); returns its summary row (also written as summary.json)."""
    import os

    from sdschat.sim import SimParams, simulate

    sid = task["id"]
    out_dir = Path(task["out"]) / sid
    out_dir.mkdir(parents=True, exist_ok=True)
    row: dict[str, Any] = {
        "scenario": sid,
        "seed": task["seed"],
        **{f"grid_{k}": _jsonable(v) for k, v in task["values"].items()},
    }
    t0 = time.perf_counter()
    try:
        params = SimParams.from_json(task["params"])
        result = simulate(params, out_dir if task["keep_events"] else None, workers=1)
        m = result.meta
        kinds = m["event_kinds"]
        sent = m["messages_sent"]
        row.update(
            {
                "participants": params.participants,
                "messages": sent,
                "loss": params.loss,
                "repair": params.repair,
                "causal_history": params.causal_history,
                "bloom_capacity": params.bloom_capacity,
                "response_groups": params.effective_response_groups,
                "duplicate": params.duplicate,
                "churn": None if params.churn is None else f"{params.churn[0]}:{params.churn[1]}",
                "delivery_ratio": m["delivery_ratio"],
                "converged": m["converged"],
                "distinct_logs": m["distinct_logs"],
                "largest_agreeing": m["largest_agreeing"],
                "bytes_published_per_message": m["bytes_published_per_message"],
                "bytes_received_per_delivery": m["bytes_received_per_delivery"],
                "bytes_published": m["bytes_published"],
                "bytes_received": m["bytes_received"],
                "frames_message": m["frames"].get("message", 0),
                "frames_resend": m["frames"].get("resend", 0),
                "frames_sync": m["frames"].get("sync", 0),
                "frames_repair": m["frames"].get("repair", 0),
                "repair_requests": kinds.get("repair_requested", 0),
                "repair_responses": kinds.get("repair_served", 0),
                "lost_declared": kinds.get("lost", 0),
                "events": m["events"],
                "stop_reason": m["stop_reason"],
                "virtual_s": (m["virtual_end_ms"] - m["virtual_start_ms"]) / 1000,
                "wall_s": m["wall_time_s"],
                "peak_rss_mb": m["peak_rss_mb"],
                "worker_pid": os.getpid(),
                "error": None,
                **{f"{short}_{q}_ms": m["latency"][metric][q] for short, metric in _LATENCIES for q in ("p50", "p99")},
                # what store nodes sent back (the frames' bytes), per message: not in the published bytes above
                "store_bytes_per_message": (m["counts"].get("store_envelope_bytes", 0) / sent) if sent else None,
                "events_dir": str(out_dir) if task["keep_events"] else None,
            }
        )
    except Exception as exc:  # keep the sweep going; the driver reports failures
        row.update({"error": f"{type(exc).__name__}: {exc}", "wall_s": round(time.perf_counter() - t0, 3)})
    (out_dir / "summary.json").write_text(json.dumps(row, indent=1, default=str) + "\n", encoding="utf-8")
    return row


def _seconds(p50: float | None, p99: float | None) -> str:
    if p50 is None or p99 is None:
        return "n/a"
    return f"{p50 / 1000:.2f} / {p99 / 1000:.2f}"


def _spread(lo: float | None, hi: float | None) -> str:
    """A range of milliseconds over seeds, in seconds (``lo–hi``)."""
    if lo is None or hi is None:
        return "n/a"
    return f"{lo / 1000:.2f}–{hi / 1000:.2f}"


def _jsonable(v: Any) -> Any:
    return ":".join(str(x) for x in v) if isinstance(v, (list, tuple)) else v


# ------------------------------------------------------------------- driver


def run_sweep(
    grid: Grid,
    out: Path,
    *,
    master: str | None = None,
    driver_memory: str | None = None,
    spark_conf: dict[str, str] | None = None,
    keep_events: bool = True,
    spark=None,
    class_archive: bool = True,
) -> dict:
    """Run every scenario of ``grid`` as a Spark task; write results under ``out``. ``spark``: use this session;
    ``class_archive``: whether the one it starts otherwise uses this machine's class archive
    (:class:`~sdschat.pipeline.spark.ClassArchive`)."""
    import contextlib

    from .spark import SparkJobError, one_line, spark_session

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    scen_dir = out / "scenarios"
    scen_dir.mkdir(exist_ok=True)
    scenarios = grid.scenarios()
    tasks = [{**s, "out": str(scen_dir.resolve()), "keep_events": keep_events} for s in scenarios]
    for t in tasks:  # a stale summary from an earlier sweep must not count as finished
        stale = scen_dir / t["id"] / "summary.json"
        if stale.exists():
            stale.unlink()

    t0 = time.perf_counter()
    log.info("sweep %s: %d scenarios", grid.name, len(tasks))
    try:
        session_cm = (
            contextlib.nullcontext(spark)
            if spark is not None
            else spark_session(
                "sdschat-sweep",
                master=master,
                driver_memory=driver_memory,
                conf=spark_conf,
                log_dir=out,
                class_archive=class_archive,
            )
        )
        with session_cm as spark:
            sc = spark.sparkContext
            log.info(
                "sweep: Spark %s ready (%.1f s), %d task slots",
                spark.version,
                time.perf_counter() - t0,
                sc.defaultParallelism,
            )
            rdd = sc.parallelize(tasks, len(tasks)).map(run_scenario)
            results = _collect_with_progress(sc, rdd, tasks, scen_dir)
            rows = sorted(results, key=lambda r: r["scenario"])
            aggregate = _aggregate(spark, rows, list(grid.axes))
    except SparkJobError as exc:
        raise GridError(str(exc)) from None
    except Exception as exc:
        if type(exc).__module__.startswith(("py4j", "pyspark")):
            raise GridError(f"Spark job failed: {one_line(exc)} (see {out / 'spark-jvm.log'})") from None
        raise
    wall = time.perf_counter() - t0
    written = _write(grid, rows, aggregate, out, wall)
    failed = [r for r in rows if r.get("error")]
    if failed:
        raise GridError(
            f"{len(failed)} of {len(rows)} scenarios failed (first: {failed[0]['scenario']}: "
            f"{failed[0]['error']}); results in {written['results']}"
        )
    written["wall_s"] = wall
    return written


def _collect_with_progress(sc, rdd, tasks: list[dict], scen_dir: Path) -> list[dict]:
    """``rdd.collect()`` in a thread; meanwhile log a line per scenario that finished."""
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["rows"] = rdd.collect()
        except BaseException as exc:  # re-raised in the caller's thread
            box["error"] = exc

    th = threading.Thread(target=work, name="sdschat-sweep-collect", daemon=True)
    th.start()
    done: set[str] = set()
    n = len(tasks)
    while True:
        finished = not th.is_alive()
        for t in tasks:
            if t["id"] in done:
                continue
            f = scen_dir / t["id"] / "summary.json"
            if f.exists():
                try:
                    row = json.loads(f.read_text(encoding="utf-8"))
                except ValueError:
                    continue  # being written
                done.add(t["id"])
                log.info("[%d/%d] %s", len(done), n, _progress_line(row))
        if finished:
            break
        th.join(0.5)
    if "error" in box:
        raise box["error"]
    rows = box["rows"]
    for r in rows:  # scenarios whose summary we could not see (e.g. a remote filesystem)
        if r["scenario"] not in done:
            done.add(r["scenario"])
            log.info("[%d/%d] %s", len(done), n, _progress_line(r))
    return rows


def _progress_line(r: dict) -> str:
    if r.get("error"):
        return f"{r['scenario']}: FAILED {r['error']}"
    ratio = r.get("delivery_ratio")
    bpm = r.get("bytes_published_per_message")
    return (
        f"{r['scenario']}: delivery {'n/a' if ratio is None else f'{ratio:.4f}'}, "
        f"{'n/a' if bpm is None else f'{bpm:,.0f}'} B published/msg, "
        f"{'converged' if r.get('converged') else 'not converged'}, {r.get('wall_s', 0):.1f} s"
    )


#: the run's two latencies (SimResult meta "latency"), as sweep columns ``shown_p50_ms`` ...
_LATENCIES = (("shown", "send_to_shown"), ("delivered", "send_to_deliver"))
_METRICS = (
    "delivery_ratio",
    "bytes_published_per_message",
    "bytes_received_per_delivery",
    "repair_requests",
    "repair_responses",
    "frames_repair",
    "frames_sync",
    "frames_resend",
    "wall_s",
    "shown_p50_ms",
    "shown_p99_ms",
    "delivered_p50_ms",
    "delivered_p99_ms",
    "store_bytes_per_message",
)
#: latencies whose range over seeds (``<name>_min_ms``, ``<name>_max_ms``) the aggregate keeps beside the mean
_SPREAD = ("delivered_p50", "delivered_p99")


def _aggregate(spark, rows: list[dict], axes: list[str]) -> list[dict]:
    """Mean (and min delivery, and each delivered percentile's range) over seeds per grid point, with Spark SQL."""
    import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information

    good = [r for r in rows if not r.get("error")]
    if not good:
        return []
    dims = [
        "participants",
        "loss",
        "repair",
        "causal_history",
        "bloom_capacity",
        "response_groups",
        "duplicate",
        "churn",
    ]
    extra = [f"grid_{a}" for a in axes if a not in dims]
    cols = dims + extra + list(_METRICS) + ["converged"]
    table = pa.table({c: [r.get(c) for r in good] for c in cols})
    df = _arrow_df(spark, table)
    df.createOrReplaceTempView("sweep_results")
    group = ", ".join(f"`{c}`" for c in dims + extra)
    means = ", ".join(f"avg(`{m}`) AS `{m}`" for m in _METRICS)
    ranges = ", ".join(f"min(`{m}_ms`) AS `{m}_min_ms`, max(`{m}_ms`) AS `{m}_max_ms`" for m in _SPREAD)
    sql = (
        f"SELECT {group}, count(*) AS runs, {means}, {ranges}, min(delivery_ratio) AS min_delivery_ratio, "
        f"avg(CASE WHEN converged THEN 1.0D ELSE 0.0D END) AS converged_fraction "
        f"FROM sweep_results GROUP BY {group} ORDER BY {group}"
    )
    res = spark.sql(sql).toArrow()
    return res.to_pylist()


def _arrow_df(spark, table):
    """A Spark DataFrame from a pyarrow table (no pandas needed)."""
    import pyarrow as pa  # type: ignore[import-untyped]  # pyarrow ships no type information
    from pyspark.sql.types import BooleanType, DoubleType, LongType, StringType, StructField, StructType

    fields = []
    for f in table.schema:
        t = f.type
        if pa.types.is_boolean(t):
            st = BooleanType()
        elif pa.types.is_integer(t):
            st = LongType()
        elif pa.types.is_floating(t):
            st = DoubleType()
        else:
            st = StringType()
        fields.append(StructField(f.name, st, True))
    schema = StructType(fields)
    data = [tuple(_cast(v, fld.dataType) for v, fld in zip(row.values(), fields)) for row in table.to_pylist()]
    return spark.createDataFrame(data, schema)


def _cast(v, t):
    from pyspark.sql.types import DoubleType, LongType, StringType

    if v is None:
        return None
    if isinstance(t, DoubleType):
        return float(v)
    if isinstance(t, LongType):
        return int(v)
    if isinstance(t, StringType):
        return str(v)
    return v


def _write(grid: Grid, rows: list[dict], aggregate: list[dict], out: Path, wall: float) -> dict:
    import pyarrow.parquet as pq  # type: ignore[import-untyped]  # (nor does its parquet module)

    from . import plots
    from .report import _fmt, _md_table, _table

    pq.write_table(_table(rows), out / "results.parquet")
    pq.write_table(_table(aggregate), out / "aggregate.parquet")
    # the grid's own dimensions besides loss, group size and SDS-R (response groups follow from the size
    # unless the grid sets them)
    dims = ("causal_history", "bloom_capacity", "response_groups", "duplicate", "churn")
    varying = [k if k in dims else f"grid_{k}" for k in grid.axes if k not in ("loss", "participants", "repair")]
    plot_rows = []
    for a in aggregate:
        variant = ", ".join(f"{_abbrev(k.removeprefix('grid_'))}={_short(a[k])}" for k in varying)
        plot_rows.append({**a, "variant": variant})
    plot_paths = [
        plots.sweep_plot(plot_rows, "delivery_ratio", "delivery ratio (mean over seeds)", out / "delivery_vs_loss.png"),
        plots.sweep_plot(
            plot_rows,
            "bytes_published_per_message",
            "bytes published per message",
            out / "bandwidth_vs_loss.png",
            logy=True,
        ),
        plots.sweep_plot(
            plot_rows,
            "delivered_p99_ms",
            "send to delivered in causal order, p99 (ms)",
            out / "latency_vs_loss.png",
            logy=True,
        ),
    ]
    header = (
        ["n", "loss", "SDS-R"]
        + [_abbrev(k.removeprefix("grid_")) for k in varying]
        + [
            "runs",
            "delivery",
            "min delivery",
            "converged",
            "shown p50 / p99 s",
            "delivered p50 / p99 s",
            "B published/msg",
            "B received/delivery",
            "repair frames",
            "sync frames",
        ]
    )
    seeds = len(grid.seeds) > 1
    if seeds:  # how far one seed's run may be from the mean
        header.insert(header.index("delivered p50 / p99 s") + 1, "delivered p50 / p99 s, range over seeds")
    body = []
    for a in aggregate:
        body.append(
            [_fmt(a["participants"]), _fmt(a["loss"]), "on" if a["repair"] else "off"]
            + [_short(a[k]) for k in varying]
            + [
                _fmt(a["runs"]),
                _fmt(a["delivery_ratio"], 5),
                _fmt(a["min_delivery_ratio"], 5),
                _fmt(a["converged_fraction"], 2),
                _seconds(a["shown_p50_ms"], a["shown_p99_ms"]),
                _seconds(a["delivered_p50_ms"], a["delivered_p99_ms"]),
                _fmt(a["bytes_published_per_message"], 0),
                _fmt(a["bytes_received_per_delivery"], 0),
                _fmt(a["frames_repair"], 1),
                _fmt(a["frames_sync"], 1),
            ]
        )
        if seeds:
            body[-1].insert(
                header.index("delivered p50 / p99 s, range over seeds"),
                f"{_spread(a['delivered_p50_min_ms'], a['delivered_p50_max_ms'])} / "
                f"{_spread(a['delivered_p99_min_ms'], a['delivered_p99_max_ms'])}",
            )
    failed = [r for r in rows if r.get("error")]
    md = [
        f"# sdschat sweep: {grid.name}",
        "",
        f"{len(rows)} scenarios ({len(failed)} failed) from `{grid.path}`, seeds {grid.seeds}, in {wall:.0f} s.",
        "",
        "Base: " + ", ".join(f"`{k} = {v}`" for k, v in grid.base.items()),
        "",
        "Grid: " + ", ".join(f"`{k}` {v}" for k, v in grid.axes.items()),
        "",
        _md_table(header, body),
        "",
        "![delivery ratio against loss](delivery_vs_loss.png)",
        "",
        "![bandwidth per message against loss](bandwidth_vs_loss.png)",
        "",
        "![delivery latency against loss](latency_vs_loss.png)",
        "",
        "Delivery = deliveries / (messages x (participants - 1)). Shown: from the send to a member's first copy "
        "(the UI shows it at once); delivered: to its delivery in causal order (means over seeds of each run's "
        "percentiles). Published bytes count each broadcast frame "
        "once; received bytes count each copy that reached an online member. Per-scenario rows: "
        "`results.parquet`; means over seeds: `aggregate.parquet`; each scenario's events (if kept) in "
        "`scenarios/<id>/` for `sdschat report`.",
        "",
    ]
    if failed:
        md += ["## Failed", ""] + [f"- `{r['scenario']}`: {r['error']}" for r in failed] + [""]
    (out / "sweep.md").write_text("\n".join(md), encoding="utf-8")
    return {
        "report": out / "sweep.md",
        "results": out / "results.parquet",
        "aggregate": out / "aggregate.parquet",
        "plots": plot_paths,
    }
