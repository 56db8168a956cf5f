"""``sdschat simulate``, ``sdschat report`` and ``sdschat sweep``: the data pipeline's commands.

Heavy imports (numpy, pyarrow, pyspark, matplotlib) happen inside the ``run``
functions; bad input is one :class:`CliError` line, never a JVM stack trace.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .args import add_spark_args, at_least, parsed_by, positive_float, probability, spark_conf
from .errors import CliError
from .extras import require_pipeline

__all__ = [
    "simulate_configure", "simulate_run", "report_configure", "report_run", "sweep_configure", "sweep_run",
]


def _check_out_dir(path: Path, marker_files: tuple[str, ...], what: str) -> None:
    """Refuse to write into an existing non-empty directory that is not a previous output of ours."""
    if path.exists() and not path.is_dir():
        raise CliError(f"--out {path} exists and is not a directory")
    if path.is_dir():
        entries = [e.name for e in path.iterdir()]
        if entries and not any(m in entries for m in marker_files):
            raise CliError(f"--out {path} is a non-empty directory that does not hold {what}; choose another")
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".sdschat-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise CliError(f"cannot write to {path}: {exc.strerror or exc}") from None


def _say_written(written: dict, data: str, quiet: bool) -> None:
    print(f"wrote {written['report']}", file=sys.stderr)
    if not quiet:
        print(f"  {data + ':':<8} {written[data]}", file=sys.stderr)
        print(f"  {'plots:':<8} {', '.join(str(p) for p in written['plots'])}", file=sys.stderr)


def _show_progress(quiet: bool) -> bool:
    return not quiet and sys.stderr.isatty()


# ---------------------------------------------------------------- simulate


def simulate_configure(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Simulate a group running the real SDS engine over a lossy broadcast network, in virtual time. "
        "Writes the node's event schema as Parquet shards, frames.parquet, logs.parquet and meta.json."
    )
    g = p.add_argument_group("group and traffic")
    g.add_argument("--participants", type=at_least(2), default=100, metavar="N", help="group size (default 100)")
    g.add_argument("--messages", type=at_least(0), default=100, metavar="M",
                   help="content messages to send (default 100)")
    g.add_argument("--rate", type=positive_float, default=1.0, metavar="PER_S",
                   help="aggregate send rate, messages per second, exponential gaps (default 1)")
    g.add_argument("--senders", type=at_least(1), default=None, metavar="K",
                   help="only the first K participants send (default: everyone); each message "
                        "comes from a random online one")
    g.add_argument("--content-bytes", type=at_least(1), default=100, metavar="B",
                   help="content size of each message (default 100)")
    g = p.add_argument_group("network")
    g.add_argument("--loss", type=probability, default=0.0, metavar="P",
                   help="probability that a copy of a frame is lost, per receiver (default 0)")
    g.add_argument("--latency-ms", type=parsed_by(_parse_latency, "LO:HI"), default=(20, 200), metavar="LO:HI",
                   help="latency of each copy, uniform in [LO, HI] ms (default 20:200)")
    g.add_argument("--duplicate", type=probability, default=0.0, metavar="P",
                   help="probability that a delivered copy arrives twice (default 0)")
    g.add_argument("--churn", type=parsed_by(_parse_churn, "FRACTION:MEAN_OFF_MS"), default=None,
                   metavar="FRACTION:MEAN_OFF_MS",
                   help="members alternate online/offline periods (exponential lengths): FRACTION of the group "
                        "is offline at any time on average, offline periods last MEAN_OFF_MS on average; "
                        "offline members get nothing and their frames go nowhere (default: no churn)")
    g = p.add_argument_group("store nodes")
    g.add_argument("--stores", type=at_least(0), default=0, metavar="S",
                   help="store nodes in the model (default 0): they keep the frames that reach them and answer "
                        "members as sdschat store does; members ask 200 ms after noticing a gap and catch up "
                        "on coming back online, with the node's timings")
    g.add_argument("--store-loss", type=probability, default=0.0, metavar="P",
                   help="probability that a frame copy to a store, a store request or an answer is lost (default 0)")
    g.add_argument("--store-latency-ms", type=parsed_by(_parse_latency, "LO:HI"), default=None, metavar="LO:HI",
                   help="latency of a store request and of its answer, each (default: the network's)")
    g.add_argument("--store-outages", type=parsed_by(_parse_outages, "FRACTION:MEAN_OFF_MS"), default=None,
                   metavar="FRACTION:MEAN_OFF_MS",
                   help="stores go down and come back as churning members do: FRACTION of the time down, for "
                        "MEAN_OFF_MS on average; a store that is down keeps nothing and answers nothing")
    g = p.add_argument_group("engine (defaults: the engine's RFC timings)")
    g.add_argument("--causal-history", type=at_least(0), default=10, metavar="K",
                   help="causal history length (default 10, as the node)")
    g.add_argument("--bloom-capacity", type=at_least(1), default=10_000, metavar="C",
                   help="bloom filter capacity (default 10000: 18,752-byte filters)")
    g.add_argument("--repair", action=argparse.BooleanOptionalAction, default=True,
                   help="SDS-R repair (default on)")
    g.add_argument("--response-groups", type=at_least(1), default=None, metavar="G",
                   help="SDS-R response groups (default: the RFC's participants // 128 + 1)")
    g.add_argument("--set", action="append", default=[], metavar="NAME=VALUE", dest="overrides",
                   help="any other ChannelConfig field (e.g. sync_interval_ms=10000) or RepairConfig field "
                        "as repair_NAME (e.g. repair_t_min_ms=2000); repeatable")
    g = p.add_argument_group("run")
    g.add_argument("--settle", choices=("continue", "clean"), default="continue",
                   help="after the last send: keep loss/duplication/churn (continue, default) or make the "
                        "network lossless with everyone online (clean) while the group settles")
    g.add_argument("--horizon-ms", type=at_least(0), default=600_000, metavar="MS",
                   help="settle for at most this long after the last send (default 600000); stops earlier "
                        "once quiescent")
    g.add_argument("--seed", type=int, default=1, help="seed: same seed, same events (default 1)")
    g.add_argument("--workers", type=at_least(0), default=0, metavar="W",
                   help="worker processes (same events for any W; default 0 = auto: one per core, at most 4, "
                        "for groups of 2,000 or more, else 1)")
    g.add_argument("--shard-rows", type=at_least(1000), default=1_000_000, metavar="ROWS",
                   help="rows per events-*.parquet shard, the most held in memory (default 1000000)")
    g.add_argument("--out", type=Path, required=True, metavar="DIR", help="output directory")
    g.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    g = p.add_argument_group("cluster")
    g.add_argument("--master", default=None, metavar="URL",
                   help="run the W shards as the tasks of a Spark barrier stage on this master (spark://HOST:7077, "
                        "or local[N]); same events as in this machine's processes. The cluster needs W free task "
                        "slots at once, and --out must be the same path on every machine (default W with a "
                        "master: 2; 1 runs here)")
    g.add_argument("--spark-conf", action="append", default=[], metavar="KEY=VALUE",
                   help="extra Spark configuration with --master (repeatable)")


def _parse_latency(text: str):
    require_pipeline("sdschat simulate", ("numpy", "pyarrow"))
    from sdschat.sim.params import parse_latency

    return parse_latency(text)


def _parse_churn(text: str, name: str = "churn"):
    require_pipeline("sdschat simulate", ("numpy", "pyarrow"))
    from sdschat.sim.params import parse_churn

    return parse_churn(text, name)


def _parse_outages(text: str):
    return _parse_churn(text, "store outages")


def auto_workers(participants: int) -> int:
    if participants < 2000:
        return 1
    return max(1, min(4, os.cpu_count() or 1))


def simulate_run(args: argparse.Namespace) -> int:
    require_pipeline("sdschat simulate", ("numpy", "pyarrow"))
    from sdschat.sim import SimParams, simulate
    from sdschat.sim.params import parse_overrides

    try:
        params = SimParams(
            participants=args.participants, messages=args.messages, rate=args.rate, senders=args.senders,
            content_bytes=args.content_bytes, loss=args.loss, latency_ms=tuple(args.latency_ms),
            duplicate=args.duplicate, churn=args.churn, stores=args.stores, store_loss=args.store_loss,
            store_latency_ms=tuple(args.store_latency_ms) if args.store_latency_ms else None,
            store_outages=args.store_outages, causal_history=args.causal_history,
            bloom_capacity=args.bloom_capacity, repair=args.repair, response_groups=args.response_groups,
            overrides=parse_overrides(args.overrides), settle=args.settle, horizon_ms=args.horizon_ms,
            seed=args.seed,
        )
    except ValueError as exc:
        raise CliError(str(exc)) from None
    out: Path = args.out
    _check_out_dir(out, ("meta.json", "events-00000.parquet", "events-w0-00000.parquet"), "a simulation")
    conf = spark_conf(args)
    if conf and args.master is None:
        raise CliError("--spark-conf goes with --master (a simulation runs without Spark otherwise)")
    if args.master is not None:
        require_pipeline("sdschat simulate --master")
        workers = args.workers or 2
        result = _simulate_on_cluster(args, params, out, workers, conf)
    else:
        workers = args.workers or auto_workers(params.participants)
        progress = _SimProgress(params) if _show_progress(args.quiet) else None
        try:
            result = simulate(params, out, workers=workers, progress=progress, shard_rows=args.shard_rows)
        except OSError as exc:
            raise CliError(f"writing {out} failed: {exc.strerror or exc}") from None
        except KeyboardInterrupt:
            raise
        finally:
            if progress is not None:
                progress.close()
    m = result.meta
    if not args.quiet:
        ratio = m["delivery_ratio"]
        ratio_text = "n/a" if ratio is None else f"{ratio:.4f}"
        conv = "converged" if m["converged"] else f"NOT converged ({m['distinct_logs']} distinct logs)"
        print(
            f"simulated {params.participants} participants, {m['messages_sent']} messages in "
            f"{m['wall_time_s']:.1f} s ({m['virtual_end_ms'] / 1000:.1f} s virtual, {m['stop_reason']}, "
            f"{m['workers']} worker{'s' if m['workers'] != 1 else ''}, peak {m['peak_rss_mb']:.0f} MB per process); "
            f"delivery {ratio_text}, {conv}",
            file=sys.stderr,
        )
        print(f"wrote {m['events']} events in {len(m['event_shards'])} shard(s), frames.parquet, logs.parquet, "
              f"meta.json to {out}", file=sys.stderr)
    return 0


def _simulate_on_cluster(args: argparse.Namespace, params, out: Path, workers: int, conf: dict):
    """``simulate`` with the shards as Spark barrier tasks (:mod:`sdschat.pipeline.simcluster`)."""
    from sdschat.pipeline.simcluster import BARRIER_CONF, spark_runner
    from sdschat.pipeline.spark import SparkJobError, spark_session
    from sdschat.sim import simulate

    if not args.quiet:
        print(f"running {workers} shard{'s' if workers != 1 else ''} as a barrier stage on {args.master}",
              file=sys.stderr)
    try:
        with spark_session("sdschat-simulate", master=args.master, conf={**BARRIER_CONF, **conf}) as spark:
            return simulate(params, out, workers=workers, shard_rows=args.shard_rows, runner=spark_runner(spark))
    except SparkJobError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"writing {out} failed: {exc.strerror or exc}") from None


class _SimProgress:
    """A rich progress display fed by :func:`sdschat.sim.simulate`'s progress callback."""

    def __init__(self, params) -> None:
        self.params = params
        self._progress = None
        self._send = self._settle = None

    def _start(self) -> None:
        # started lazily, after the worker processes are forked (no display thread exists when they fork)
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self._progress = Progress(
            TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[info]}"), TimeElapsedColumn(),
            console=Console(stderr=True), transient=False,
        )
        self._progress.start()
        self._send = self._progress.add_task("sending ", total=max(1, self.params.messages), info="")
        self._settle = self._progress.add_task("settling", total=max(1, self.params.horizon_ms), info="",
                                               visible=True)

    def __call__(self, st: dict) -> None:
        if self._progress is None:
            self._start()
        pr = self._progress
        virt = (st["now_ms"] - st["start_ms"]) / 1000
        pr.update(self._send, completed=st["sent"], info=f"{st['sent']}/{st['messages']} msgs, t={virt:.1f}s")
        if st["settling"]:
            done = min(st["now_ms"] - st["settle_ms"], self.params.horizon_ms)
            pr.update(self._settle, completed=done,
                      info=f"+{done / 1000:.0f}s of at most {self.params.horizon_ms / 1000:.0f}s")
        if st.get("done"):
            pr.update(self._send, completed=max(1, self.params.messages))
            pr.update(self._settle, completed=max(1, self.params.horizon_ms))

    def close(self) -> None:
        if self._progress is not None:
            self._progress.stop()


# ------------------------------------------------------------------ report


def report_configure(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Reliability report (PySpark) over simulation output directories and/or participant databases: "
        "delivery ratios, latency percentiles, repair traffic and duplicates, bytes per delivered message, "
        "bloom false-positive acks, convergence. Writes report.md, PNG plots and Parquet metric tables."
    )
    p.add_argument("inputs", nargs="+", type=Path, metavar="INPUT",
                   help="a simulation output directory or a participant SQLite database (databases of one "
                        "channel are reported together as one group)")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="output directory")
    p.add_argument("--quiet", action="store_true", help="print only where the report was written")
    p.add_argument("--compare", action="store_true",
                   help="two inputs (runs, or one channel's databases against a run): every metric of the second "
                        "against the first, with the change, and both on every plot")
    add_spark_args(p)


def report_run(args: argparse.Namespace) -> int:
    if args.compare and len(args.inputs) < 2:
        raise CliError(f"--compare needs two inputs, got {len(args.inputs)}")
    require_pipeline("sdschat report")
    from sdschat.pipeline.report import ReportError, run_report

    _check_out_dir(args.out, ("report.md", "tables"), "a report")
    try:
        written = run_report(args.inputs, args.out, master=args.master, driver_memory=args.driver_memory,
                             spark_conf=spark_conf(args), quiet=args.quiet, compare=args.compare)
    except ReportError as exc:
        raise CliError(str(exc)) from None
    _say_written(written, "tables", args.quiet)
    return 0


# ------------------------------------------------------------------- sweep


def sweep_configure(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Run a grid of simulations as Spark tasks and aggregate delivery ratio and bandwidth per message "
        "by loss, group size and SDS-R on/off (see sdschat/pipeline/grids/example.toml)."
    )
    p.add_argument("--grid", type=Path, required=True, metavar="GRID.toml", help="the scenario grid")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="output directory")
    p.add_argument("--no-events", action="store_true",
                   help="keep only each scenario's summary (no per-scenario event shards)")
    p.add_argument("--quiet", action="store_true", help="no per-scenario progress lines")
    add_spark_args(p)


def sweep_run(args: argparse.Namespace) -> int:
    require_pipeline("sdschat sweep")
    from sdschat.pipeline.sweep import GridError, load_grid, run_sweep

    try:
        grid = load_grid(args.grid)
    except GridError as exc:
        raise CliError(str(exc)) from None
    _check_out_dir(args.out, ("sweep.md", "scenarios", "results.parquet"), "a sweep")
    try:
        written = run_sweep(grid, args.out, master=args.master, driver_memory=args.driver_memory,
                            spark_conf=spark_conf(args), keep_events=not args.no_events, quiet=args.quiet)
    except GridError as exc:
        raise CliError(str(exc)) from None
    _say_written(written, "results", args.quiet)
    return 0
