"""Report scale bench: ``sdschat report`` wall time on about 2 million events.

The events come from the simulator (the same schema the node writes):
2,000 participants, 250 messages, 10% loss -- about 2 million rows. They are
generated once into --data (default: a temporary directory) and reused when
--data already holds them. Then the full report runs as the CLI runs it
(Spark start, staging, SQL reduction, metrics, Parquet tables, plots,
report.md), embedded ``local[*]``.

Usage:
  .venv/bin/python bench/report_scale.py [--data DIR] [--participants 2000] [--messages 250] [--loss 0.1]
      [--master local[*]] [--keep]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sdschat.pipeline.report import run_report  # noqa: E402
from sdschat.sim import SimParams, simulate  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=None, help="simulation directory to (re)use")
    ap.add_argument("--participants", type=int, default=2_000)
    ap.add_argument("--messages", type=int, default=250)
    ap.add_argument("--loss", type=float, default=0.1)
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--master", default=None)
    ap.add_argument("--keep", action="store_true", help="keep the generated data and the report")
    ap.add_argument("--smoke", action="store_true",
                    help="tiny sizes, a few seconds: the bench still runs end to end (the test suite runs this)")
    args = ap.parse_args()
    if args.smoke:
        args.participants, args.messages, args.workers = 12, 10, 1
    tmp = Path(tempfile.mkdtemp(prefix="sdschat-report-scale-"))
    data = args.data or tmp / "sim"
    params = SimParams(participants=args.participants, messages=args.messages, loss=args.loss, seed=1)
    try:
        meta_path = data / "meta.json"
        if meta_path.is_file() and json.loads(meta_path.read_text())["params"] == params.to_json():
            meta = json.loads(meta_path.read_text())
            print(f"report_scale: reusing {meta['events']:,} events in {data}")
        else:
            t0 = time.perf_counter()
            meta = simulate(params, data, workers=args.workers).meta
            print(f"report_scale: generated {meta['events']:,} events with the simulator in "
                  f"{time.perf_counter() - t0:.1f} s ({args.participants} participants, {args.messages} messages, "
                  f"loss {args.loss})")
        load = os.getloadavg()[0]
        out = tmp / "report"
        t0 = time.perf_counter()
        written = run_report([data], out, master=args.master, quiet=True)
        wall = time.perf_counter() - t0
        t = written["timings"]
        print(f"report wall time   {wall:.1f} s for {meta['events']:,} events "
              f"({meta['events'] / wall:,.0f} events/s; {os.cpu_count()} cores, load average before {load:.2f})")
        print(f"  Spark start      {t.get('spark_start_s', 0):.1f} s")
        reduce_s = sum(v for k, v in t.items() if k not in ("stage_s", "spark_start_s", "total_s"))
        print(f"  SQL reduction    {reduce_s:.1f} s  " + ", ".join(
            f"{k[:-2]} {v:.1f}" for k, v in t.items() if k not in ("stage_s", "spark_start_s", "total_s")))
        print(f"  metrics+output   {wall - reduce_s - t.get('spark_start_s', 0) - t.get('stage_s', 0):.1f} s")
        s = written["report_obj"].summary[0]
        print(f"  delivery {s['delivery_ratio']:.6f}, converged {s['converged']}, "
              f"p95 send->deliver {s['send_to_deliver_p95_ms']} ms")
        if args.keep:
            print(f"report in {out}")
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
