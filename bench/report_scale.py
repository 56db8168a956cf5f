"""Report scale bench: ``sdschat report`` wall time on about 2 million events.

The events come from the simulator (the same schema the node writes):
2,000 participants, 250 messages, 10% loss -- about 2 million rows. They are
generated once into --data (default: a temporary directory) and reused when
--data already holds them. Then the full report runs as the CLI runs it
(Spark start, staging, SQL reduction, metrics, Parquet tables, plots,
report.md), embedded ``local[*]``.

It prints the wall time until the report is written and events/s, where the
time went (Spark's stop runs in the background while the metrics and files
are made: it says how long the stop took and how much later than the report
the command could return), and the peak resident memory of the driver JVM
(in local mode it runs the executors too) and of this process. The class
archive Spark's JVM starts from is made by the first session on a machine
(its stop then takes tens of seconds): ``XDG_CACHE_HOME=$(mktemp -d)``
measures that first run.

Usage:
  .venv/bin/python bench/report_scale.py [--data DIR] [--participants 2000] [--messages 250] [--loss 0.1]
      [--master local[*]] [--driver-memory 1200m] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

from sdschat.pipeline.report import run_report
from sdschat.pipeline.spark import DRIVER_MEMORY
from sdschat.profile.settings import spark_class_archive
from sdschat.sim import SimParams, simulate
from sdschat.sim.output import FORMAT


class PeakRss:
    """The peak resident memory of this process and of its child processes (the Spark JVM), sampled every 0.2 s."""

    def __init__(self) -> None:
        self.peak_self = self.peak_child = 0
        self._stop = threading.Event()

    def _sample(self) -> None:
        while not self._stop.is_set():
            own = _rss(os.getpid())
            kids = sum(_rss(int(p)) for p in _children(os.getpid()))
            self.peak_self, self.peak_child = max(self.peak_self, own), max(self.peak_child, kids)
            self._stop.wait(0.2)

    def __enter__(self) -> PeakRss:
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _children(pid: int) -> list[str]:
    """Every descendant of ``pid`` (Linux /proc)."""
    out, todo = [], [str(pid)]
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/task/{p}/children") as f:
                kids = f.read().split()
        except OSError:
            kids = []
        out += kids
        todo += kids
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=None, help="simulation directory to (re)use")
    ap.add_argument("--participants", type=int, default=2_000)
    ap.add_argument("--messages", type=int, default=250)
    ap.add_argument("--loss", type=float, default=0.1)
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--master", default=None)
    ap.add_argument(
        "--driver-memory",
        default=DRIVER_MEMORY,
        help="the Spark driver's heap (local mode: the executors' too; default the report's)",
    )
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting (repeatable)")
    ap.add_argument("--keep", action="store_true", help="keep the generated data and the report")
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes, a few seconds: the bench still runs end to end (the test suite runs this)",
    )
    args = ap.parse_args()
    if args.smoke:
        args.participants, args.messages, args.workers = 12, 10, 1
    tmp = Path(tempfile.mkdtemp(prefix="sdschat-report-scale-"))
    data = args.data or tmp / "sim"
    params = SimParams(participants=args.participants, messages=args.messages, loss=args.loss, seed=1)
    try:
        meta_path = data / "meta.json"
        old = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
        if old.get("params") == params.to_json() and old.get("format") == FORMAT:
            meta = json.loads(meta_path.read_text())
            print(f"report_scale: reusing {meta['events']:,} events in {data}")
        elif old:  # someone's simulation: never overwrite it
            p = old.get("params", {})
            print(
                f"report_scale: {data} holds another simulation ({p.get('participants')} participants, "
                f"{p.get('messages')} messages, loss {p.get('loss')}, format {old.get('format')}): give its "
                "--participants/--messages/--loss, or another --data",
                file=sys.stderr,
            )
            return 2
        else:
            t0 = time.perf_counter()
            meta = simulate(params, data, workers=args.workers).meta
            print(
                f"report_scale: generated {meta['events']:,} events with the simulator in "
                f"{time.perf_counter() - t0:.1f} s ({args.participants} participants, {args.messages} messages, "
                f"loss {args.loss})"
            )
        load = os.getloadavg()[0]
        out = tmp / "report"
        t0 = time.perf_counter()
        with PeakRss() as rss:
            result = run_report(
                [data],
                out,
                master=args.master,
                driver_memory=args.driver_memory,
                spark_conf=dict(c.split("=", 1) for c in args.conf) or None,
                class_archive=spark_class_archive(),  # SDSCHAT_SPARK_CLASS_ARCHIVE, as `sdschat report` reads it
            )
            wall = time.perf_counter() - t0  # the report is written: what a user waits for
            result.wait_for_spark()
            ended = time.perf_counter() - t0  # Spark stopped too: when the command returns
        t = result.timings
        print(
            f"report wall time   {wall:.1f} s for {meta['events']:,} events "
            f"({meta['events'] / wall:,.0f} events/s; {os.cpu_count()} cores, load average before {load:.2f})"
        )
        other = ("stage_s", "spark_start_s", "spark_stop_s", "metrics_s", "write_s", "total_s", "reduce_s")
        sql = {k[:-2]: v for k, v in t.items() if k not in other}
        print(f"  staging          {t.get('stage_s', 0):.1f} s")
        jit = {True: "C1 alone, a short job", False: "C1 then C2 for hot code", None: "?"}[result.quick_jit]
        print(f"  Spark start      {t.get('spark_start_s', 0):.1f} s  (JIT: {jit})")
        print(
            f"  SQL reduction    {t.get('reduce_s', 0):.1f} s  (queries, some at once: "
            + ", ".join(f"{k} {v:.1f}" for k, v in sql.items())
            + ")"
        )
        print(f"  metrics          {t.get('metrics_s', 0):.1f} s")
        print(f"  tables+plots+md  {t.get('write_s', 0):.1f} s")
        print(
            f"  Spark stop       {t.get('spark_stop_s', 0):.1f} s  (in the background from the end of the "
            f"reduction; the command returned {ended - wall:.1f} s after the report was written)"
        )
        print(
            f"  peak RSS         driver JVM {rss.peak_child / 2**20:,.0f} MB (heap limit {args.driver_memory}), "
            f"this Python process {rss.peak_self / 2**20:,.0f} MB"
        )
        s = result.metrics.summary[0]
        print(
            f"  delivery {s['delivery_ratio']:.6f}, converged {s['converged']}, "
            f"p95 send->deliver {s['send_to_deliver_p95_ms']} ms"
        )
        if args.keep:
            print(f"report in {out}")
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
