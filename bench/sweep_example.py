"""Sweep bench: ``sdschat sweep`` wall time for the example grid (sdschat/pipeline/grids/example.toml).

Runs the sweep as the CLI does (embedded Spark, ``local[*]``, one simulation
per Spark task) into a temporary directory and prints the wall time, the
Spark start-up share and the sum of the scenarios' own run times (the work
the task slots shared).

Usage:
  .venv/bin/python bench/sweep_example.py [--grid GRID.toml] [--keep]
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from sdschat.pipeline.sweep import load_grid, run_sweep
from sdschat.profile.settings import spark_class_archive

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "sdschat" / "pipeline" / "grids" / "example.toml"
SMOKE_GRID = """
[sweep]
seeds = [1]
[base]
messages = 4
latency_ms = "10:20"
[grid]
loss = [0.0, 0.2]
participants = [4]
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grid", type=Path, default=EXAMPLE)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--quiet", action="store_true", help="no per-scenario lines")
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="a two-scenario grid, a few seconds of Spark: the bench still runs (the test suite runs this)",
    )
    args = ap.parse_args()
    if not args.quiet:  # the sweep says a line per scenario through its logger
        logging.basicConfig(level=logging.INFO, format="%(message)s")
    out = Path(tempfile.mkdtemp(prefix="sdschat-sweep-bench-"))
    if args.smoke:
        args.grid = out / "smoke.toml"
        args.grid.write_text(SMOKE_GRID)
    grid = load_grid(args.grid)
    load = os.getloadavg()[0]
    try:
        t0 = time.perf_counter()
        written = run_sweep(grid, out, class_archive=spark_class_archive())  # as `sdschat sweep` reads it
        wall = time.perf_counter() - t0
        import pyarrow.parquet as pq

        rows = pq.read_table(written["results"]).to_pylist()
        sim_s = sum(r["wall_s"] or 0 for r in rows)
        print(
            f"sweep wall time    {wall:.1f} s for {len(rows)} scenarios of {args.grid.name} "
            f"({os.cpu_count()} cores, load average before {load:.2f})"
        )
        print(
            f"  simulations      {sim_s:.1f} s of task time in total (longest {max(r['wall_s'] for r in rows):.1f} s)"
        )
        print(f"  events written   {sum(r['events'] or 0 for r in rows):,}")
        if args.keep:
            print(f"output in {out}")
    finally:
        if not args.keep:
            shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
