"""``sdschat simulate``, ``sdschat report`` and ``sdschat sweep``: the data pipeline's commands.

Heavy imports (numpy, pyarrow, pyspark, matplotlib) happen inside the ``run``
functions (and ``simulate``'s options, which come from the simulator's
parameters, are added when that command is parsed); bad input is one
:class:`CliError` line, never a JVM stack trace. Progress goes to the loggers
under ``sdschat.pipeline`` (on stderr, a spinner or a progress bar where a
terminal waits); what a command wrote is its output, on stdout. Whether Spark's JVM starts from this
machine's class archive is read here (``SDSCHAT_SPARK_CLASS_ARCHIVE``, by
:func:`sdschat.profile.settings.spark_class_archive`) and passed to the job:
the pipeline reads no environment switch itself.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .args import add_spark_args, at_least, number, parsed_by, positive_float, spark_conf
from .errors import CliError
from .extras import require_pipeline

if TYPE_CHECKING:
    from rich.progress import Progress

__all__ = [
    "simulate_configure",
    "simulate_run",
    "report_configure",
    "report_run",
    "sweep_configure",
    "sweep_run",
]

#: the commands' own progress lines, beside those of the pipeline's modules (all under ``sdschat.pipeline``)
log = logging.getLogger("sdschat.pipeline.cli")


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


def _say_written(report: Path, data: tuple[str, Path], plots: list[Path], quiet: bool) -> None:
    """Where a report or a sweep was written (its markdown, its tables or results, its plots): the command's
    output, on stdout."""
    print(f"wrote {report}")
    if not quiet:
        print(f"  {data[0] + ':':<8} {data[1]}")
        print(f"  {'plots:':<8} {', '.join(str(p) for p in plots)}")
    sys.stdout.flush()


def _class_archive() -> bool:
    """Whether the Spark session a command starts uses this machine's class archive (``SDSCHAT_SPARK_CLASS_ARCHIVE``,
    default yes; a value that is neither yes nor no was refused before the command ran)."""
    from sdschat.profile.settings import spark_class_archive

    return spark_class_archive()


def _show_progress(quiet: bool) -> bool:
    return not quiet and sys.stderr.isatty()


class _StatusLine(logging.Handler):
    """The pipeline's progress on a terminal: each record a line, and below them a spinner with the latest one
    while the user waits (Spark starting, a long query)."""

    def __init__(self) -> None:
        super().__init__()
        from rich.console import Console

        self._console = Console(stderr=True)
        self._status = self._console.status("")

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = self.format(record)
            self._console.print(message, markup=False, highlight=False)
            if record.levelno < logging.WARNING:
                self._status.update(message)
                self._status.start()
        except Exception:  # noqa: BLE001 -- logging's contract: a handler reports its own failures
            self.handleError(record)

    def close(self) -> None:
        self._status.stop()
        super().close()


@contextlib.contextmanager
def _progress(quiet: bool) -> Iterator[None]:
    """The progress of a pipeline command (the info records of the loggers under ``sdschat.pipeline``) on stderr
    while it runs: on a terminal with a spinner (:class:`_StatusLine`), elsewhere as plain lines; none with
    ``--quiet``. Warnings and errors go on to the command's log as every other record does (``--log-level``)."""
    if quiet:
        yield
        return
    logger = logging.getLogger("sdschat.pipeline")
    handler: logging.Handler = _StatusLine() if _show_progress(quiet) else logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.setLevel(logging.INFO)
    handler.addFilter(lambda record: record.levelno < logging.WARNING)
    before = logger.level
    logger.setLevel(min(logger.getEffectiveLevel(), logging.INFO))
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(before)
        handler.close()


# ---------------------------------------------------------------- simulate


def simulate_configure(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Simulate a group running the real SDS engine over a lossy broadcast network, in virtual time. "
        "Writes the node's event schema as Parquet shards, frames.parquet, logs.parquet and meta.json."
    )
    # the scenario's options come from SimParams (sdschat.sim), which needs numpy: they are added when this
    # command is the one parsed, so that parsing any other command neither imports the simulator nor needs it
    parse_known_args = p.parse_known_args

    def with_scenario_options(args=None, namespace=None):
        if not any(a.dest == "participants" for a in p._actions):
            require_pipeline("sdschat simulate", ("numpy", "pyarrow"))
            _add_scenario_options(p)
        return parse_known_args(args, namespace)

    p.parse_known_args = with_scenario_options  # type: ignore[method-assign]  # (see above: options on demand)


def _add_scenario_options(p: argparse.ArgumentParser) -> None:
    """Every :class:`~sdschat.sim.SimParams` field with an option (its flag, help and default written once, in the
    field: :class:`~sdschat.sim.params.Option`), then the run's and the cluster's own options."""
    from sdschat.sim.params import command_line_fields

    groups: dict[str, argparse._ArgumentGroup] = {}
    for f, opt in command_line_fields():
        g = groups.get(opt.group) or groups.setdefault(opt.group, p.add_argument_group(opt.group))
        flag = opt.flag or "--" + f.name.replace("_", "-")
        kw: dict[str, Any] = {"dest": f.name, "help": opt.help + _default_help(f, opt)}
        if opt.metavar:
            kw["metavar"] = opt.metavar
        if opt.repeated is not None:
            g.add_argument(flag, action="append", default=[], **kw)
            continue
        kw["default"] = f.default
        if opt.choices is not None:
            g.add_argument(flag, choices=opt.choices, **kw)
        elif isinstance(f.default, bool):
            g.add_argument(flag, action=argparse.BooleanOptionalAction, **kw)
        else:
            g.add_argument(flag, type=_option_type(f, opt), **kw)
    g = groups.get("run") or p.add_argument_group("run")
    g.add_argument(
        "--workers",
        type=at_least(0),
        default=0,
        metavar="W",
        help="worker processes (same events for any W; default 0 = auto: one per core, at most 4, "
        "for groups of 2,000 or more, else 1)",
    )
    g.add_argument(
        "--shard-rows",
        type=at_least(1000),
        default=1_000_000,
        metavar="ROWS",
        help="rows per events-*.parquet shard, the most held in memory (default 1000000)",
    )
    g.add_argument("--out", type=Path, required=True, metavar="DIR", help="output directory")
    g.add_argument("--quiet", action="store_true", help="no progress bar or summary")
    g = p.add_argument_group("cluster")
    g.add_argument(
        "--master",
        default=None,
        metavar="URL",
        help="run the W shards as the tasks of a Spark barrier stage on this master (spark://HOST:7077, "
        "or local[N]); same events as in this machine's processes. The cluster needs W free task "
        "slots at once, and --out must be the same path on every machine (default W with a "
        "master: 2; 1 runs here)",
    )
    g.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="extra Spark configuration with --master (repeatable)",
    )


def _default_help(f: dataclasses.Field, opt: Any) -> str:
    """The help's ``(default ...)``, from the field's own default."""
    d = f.default
    if d is None or d is dataclasses.MISSING:
        return f" (default: {opt.default_text})" if opt.default_text else ""
    if isinstance(d, bool):
        text = "on" if d else "off"
    elif isinstance(d, tuple):
        text = ":".join(str(x) for x in d)
    elif isinstance(d, float):
        text = f"{d:g}"
    else:
        text = str(d)
    return f" (default {text}{opt.note})"


def _option_type(f: dataclasses.Field, opt: Any) -> Callable[[str], Any]:
    """The argparse ``type`` of a field's option: its parser, else a number of the field's type in its bounds."""
    if opt.parse is not None:
        return parsed_by(opt.parse, opt.metavar or f.name)
    kind = float if "float" in str(f.type) else int
    if opt.positive:
        return positive_float
    if kind is float and (opt.minimum is not None or opt.maximum is not None):
        return number(float, opt.minimum, opt.maximum)
    if opt.minimum is not None:
        return at_least(int(opt.minimum))
    return kind


def auto_workers(participants: int) -> int:
    if participants < 2000:
        return 1
    return max(1, min(4, os.cpu_count() or 1))


def simulate_run(args: argparse.Namespace) -> int:
    require_pipeline("sdschat simulate", ("numpy", "pyarrow"))
    from sdschat.sim import simulate

    params = _sim_params(args)
    out: Path = args.out
    _check_out_dir(out, ("meta.json", "events-00000.parquet", "events-w0-00000.parquet"), "a simulation")
    conf = spark_conf(args)
    if conf and args.master is None:
        raise CliError("--spark-conf goes with --master (a simulation runs without Spark otherwise)")
    if args.master is not None:
        require_pipeline("sdschat simulate --master")
        workers = args.workers or 2
        with _progress(args.quiet):
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
            f"delivery {ratio_text}, {conv}"
        )
        print(
            f"wrote {m['events']} events in {len(m['event_shards'])} shard(s), frames.parquet, logs.parquet, "
            f"meta.json to {out}"
        )
        sys.stdout.flush()
    return 0


def _sim_params(args: argparse.Namespace) -> Any:
    """The :class:`~sdschat.sim.SimParams` of the parsed options (one :class:`CliError` line if refused)."""
    from sdschat.sim import SimParams
    from sdschat.sim.params import command_line_fields

    values: dict[str, Any] = {}
    try:
        for f, opt in command_line_fields():
            value = getattr(args, f.name)
            values[f.name] = opt.repeated(value) if opt.repeated is not None else value
        return SimParams(**values)
    except ValueError as exc:
        raise CliError(str(exc)) from None


def _simulate_on_cluster(args: argparse.Namespace, params, out: Path, workers: int, conf: dict):
    """``simulate`` with the shards as Spark barrier tasks (:mod:`sdschat.pipeline.simcluster`)."""
    from sdschat.pipeline.simcluster import BARRIER_CONF, spark_runner
    from sdschat.pipeline.spark import SparkJobError, spark_session
    from sdschat.sim import simulate

    log.info("running %d shard%s as a barrier stage on %s", workers, "s" if workers != 1 else "", args.master)
    try:
        with spark_session(
            "sdschat-simulate", master=args.master, conf={**BARRIER_CONF, **conf}, class_archive=_class_archive()
        ) as spark:
            return simulate(params, out, workers=workers, shard_rows=args.shard_rows, runner=spark_runner(spark))
    except SparkJobError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"writing {out} failed: {exc.strerror or exc}") from None


class _SimProgress:
    """A rich progress display fed by :func:`sdschat.sim.simulate`'s progress callback."""

    def __init__(self, params: Any) -> None:
        from rich.progress import TaskID

        self.params = params
        self._progress: Progress | None = None
        self._send = self._settle = TaskID(0)  # (the tasks' ids once the display starts)

    def _start(self) -> Progress:
        # started lazily, after the worker processes are forked (no display thread exists when they fork)
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        pr = self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.fields[info]}"),
            TimeElapsedColumn(),
            console=Console(stderr=True),
            transient=False,
        )
        pr.start()
        self._send = pr.add_task("sending ", total=max(1, self.params.messages), info="")
        self._settle = pr.add_task("settling", total=max(1, self.params.horizon_ms), info="", visible=True)
        return pr

    def __call__(self, st: dict) -> None:
        pr = self._progress if self._progress is not None else self._start()
        virt = (st["now_ms"] - st["start_ms"]) / 1000
        pr.update(self._send, completed=st["sent"], info=f"{st['sent']}/{st['messages']} msgs, t={virt:.1f}s")
        if st["settling"]:
            done = min(st["now_ms"] - st["settle_ms"], self.params.horizon_ms)
            pr.update(
                self._settle,
                completed=done,
                info=f"+{done / 1000:.0f}s of at most {self.params.horizon_ms / 1000:.0f}s",
            )
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
    p.add_argument(
        "inputs",
        nargs="+",
        type=Path,
        metavar="INPUT",
        help="a simulation output directory or a participant SQLite database (databases of one "
        "channel are reported together as one group)",
    )
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="output directory")
    p.add_argument("--quiet", action="store_true", help="print only where the report was written")
    p.add_argument(
        "--compare",
        action="store_true",
        help="two inputs (runs, or one channel's databases against a run): every metric of the second "
        "against the first, with the change, and both on every plot",
    )
    add_spark_args(p)


def report_run(args: argparse.Namespace) -> int:
    if args.compare and len(args.inputs) < 2:
        raise CliError(f"--compare needs two inputs, got {len(args.inputs)}")
    require_pipeline("sdschat report")
    from sdschat.pipeline.report import ReportError, run_report

    _check_out_dir(args.out, ("report.md", "tables"), "a report")
    with _progress(args.quiet):
        try:
            result = run_report(
                args.inputs,
                args.out,
                master=args.master,
                driver_memory=args.driver_memory,
                spark_conf=spark_conf(args),
                compare=args.compare,
                class_archive=_class_archive(),
            )
        except ReportError as exc:
            raise CliError(str(exc)) from None
        # the report is written while Spark stops: say where it is first, then let the JVM finish
        _say_written(result.markdown, ("tables", result.tables), result.plots, args.quiet)
        result.wait_for_spark()
    return 0


# ------------------------------------------------------------------- sweep


def sweep_configure(p: argparse.ArgumentParser) -> None:
    p.description = (
        "Run a grid of simulations as Spark tasks and aggregate delivery ratio and bandwidth per message "
        "by loss, group size and SDS-R on/off (see sdschat/pipeline/grids/example.toml)."
    )
    p.add_argument("--grid", type=Path, required=True, metavar="GRID.toml", help="the scenario grid")
    p.add_argument("--out", type=Path, required=True, metavar="DIR", help="output directory")
    p.add_argument(
        "--no-events", action="store_true", help="keep only each scenario's summary (no per-scenario event shards)"
    )
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
        with _progress(args.quiet):
            written = run_sweep(
                grid,
                args.out,
                master=args.master,
                driver_memory=args.driver_memory,
                spark_conf=spark_conf(args),
                keep_events=not args.no_events,
                class_archive=_class_archive(),
            )
    except GridError as exc:
        raise CliError(str(exc)) from None
    _say_written(written["report"], ("results", written["results"]), written["plots"], args.quiet)
    return 0
