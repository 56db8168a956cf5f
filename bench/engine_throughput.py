"""Engine throughput: sdschat's SDS engine next to @waku/sds 0.0.8.

Workload (the engine issue's benchmark): two participants alternate sending N
messages; message i is sent by participant i % 2 and received by the other.
Causal history 2, default bloom filter (10,000 / 0.001), SDS-R enabled with
its defaults. A "message" is one send plus one receive (of the encoded frame).
Neither side runs periodic work inside the loop (no ``tick`` for sdschat, no
sweeps for @waku/sds) so the core send/receive paths are compared; @waku/sds
runs ``processTasks`` after every push, as an application must.

Runs, in one invocation:
  1. @waku/sds at N = --messages (node bench/waku_alternate.mjs, using the
     package installed by ``npm ci --prefix tests/interop``),
  2. sdschat at N = --messages, and the ratio sdschat / @waku/sds,
  3. sdschat at N = --long-messages, and the ratio of its rate to the
     N = --messages rate (target >= 0.8: flat per-message cost).

Each figure is the best of --repeat runs; the sdschat runs at the two sizes
are interleaved so machine noise affects both alike. Python's cyclic GC stays
enabled (as in the application); --gc-off-check adds the same two sdschat
measurements with it disabled, to show how much of any slowdown is GC.

Usage:
  .venv/bin/python bench/engine_throughput.py [--messages 2000] [--long-messages 20000]
      [--skip-waku] [--repeat 3] [--gc-off-check]
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import shutil
import subprocess
import time
from pathlib import Path

from google.protobuf.internal import api_implementation

from sdschat.sds import ChannelConfig, MessageChannel, native

ROOT = Path(__file__).resolve().parents[1]
WAKU_SCRIPT = ROOT / "bench" / "waku_alternate.mjs"
FLATNESS_TARGET = 0.8


def run_sdschat(n: int) -> float:
    """Seconds for the alternate workload of ``n`` messages (checked for correctness)."""
    config = ChannelConfig(causal_history_size=2)  # bloom 10,000 / 0.001 and repair: defaults
    t0 = 1_700_000_000_000  # sans-I/O: a synthetic clock, 1 ms per message
    chans = (MessageChannel("bench", "participant-0", config, t0), MessageChannel("bench", "participant-1", config, t0))
    payloads = [f"benchmark message {i}".encode() for i in range(n)]
    gc.collect()
    start = time.perf_counter()
    for i in range(n):
        now = t0 + i
        out = chans[i & 1].send(payloads[i], now)
        chans[1 - (i & 1)].receive(out.data, now)
    seconds = time.perf_counter() - start
    for ch in chans:
        if len(ch.log) != n or ch.incoming_ids:
            raise SystemExit(f"workload went wrong: log {len(ch.log)} of {n}, incoming {len(ch.incoming_ids)}")
    return seconds


def best_pair(n: int, long_n: int, repeat: int, gc_enabled: bool = True) -> tuple[float, float]:
    """Best seconds at ``n`` and at ``long_n``, runs interleaved so machine noise hits both alike."""
    was = gc.isenabled()
    (gc.enable if gc_enabled else gc.disable)()
    try:
        short, long_ = [], []
        for _ in range(repeat):
            short.append(run_sdschat(n))
            long_.append(run_sdschat(long_n))
        return min(short), min(long_)
    finally:
        (gc.enable if was else gc.disable)()


def run_waku(n: int, repeat: int) -> dict:
    node = shutil.which("node")
    if node is None:
        raise SystemExit("node is not on PATH (or pass --skip-waku)")
    proc = subprocess.run(
        [node, str(WAKU_SCRIPT), "--messages", str(n), "--repeat", str(repeat)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    if proc.returncode != 0:
        raise SystemExit(
            f"{WAKU_SCRIPT.name} failed (rc={proc.returncode}):\n{proc.stderr.strip()}\n"
            "install it with: npm ci --prefix tests/interop   (or pass --skip-waku)"
        )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=2000, help="N for the side-by-side run (default 2000)")
    ap.add_argument("--long-messages", type=int, default=20000, help="N for the sdschat flatness run (default 20000)")
    ap.add_argument("--skip-waku", action="store_true", help="do not run @waku/sds (no node needed)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement, best kept (default 3)")
    ap.add_argument(
        "--gc-off-check",
        action="store_true",
        help="also measure sdschat with Python's cyclic GC disabled (diagnoses GC share of the slowdown)",
    )
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes, a few seconds: the bench still runs end to end (the test suite runs this)",
    )
    args = ap.parse_args(argv)
    if args.smoke:
        args.messages, args.long_messages, args.repeat = 200, 1000, 1
    n, long_n = args.messages, args.long_messages

    backend = api_implementation.Type()
    print(
        f"python {platform.python_version()}  protobuf {__import__('google.protobuf').protobuf.__version__}"
        f"  backend: {backend}"
    )
    print(f"engine: {native.BUILD}")  # compiled by mypyc, or the Python sources (SDSCHAT_PURE_ENGINE=1)
    if backend != "upb":
        print(f"  WARNING: protobuf backend is {backend!r}, not 'upb': expect 10-20x slower frames")
    print(
        f"workload: 2 participants alternate, causal history 2, bloom 10,000/0.001, repair on; "
        f"1 message = 1 send + 1 receive; best of {args.repeat} runs (sdschat runs interleaved)"
    )
    print()

    rows: list[tuple[str, int, float, str]] = []
    waku = None
    if not args.skip_waku:
        waku = run_waku(n, args.repeat)
        rows.append((f"@waku/sds {waku['version']} (node {waku['node']})", n, waku["seconds"], ""))
    short, long_s = best_pair(n, long_n, args.repeat)
    rate = n / short
    note = f"{rate / waku['rate']:.1f}x @waku/sds" if waku else ""
    rows.append(("sdschat", n, short, note))
    long_rate = long_n / long_s
    flat = long_rate / rate
    verdict = "ok" if flat >= FLATNESS_TARGET else "BELOW TARGET"
    rows.append(
        ("sdschat", long_n, long_s, f"{flat:.2f} of its {n:,}-msg rate (target >= {FLATNESS_TARGET}: {verdict})")
    )
    if args.gc_off_check:
        s2, l2 = best_pair(n, long_n, args.repeat, gc_enabled=False)
        rows.append(("sdschat, gc disabled", n, s2, ""))
        rows.append(("sdschat, gc disabled", long_n, l2, f"{(long_n / l2) / (n / s2):.2f} of its {n:,}-msg rate"))

    w0 = max(len(r[0]) for r in rows)
    header = f"{'engine':<{w0}}  {'messages':>9}  {'seconds':>8}  {'msg/s':>9}  {'us/msg':>7}  note"
    print(header)
    print("-" * len(header))
    for name, count, secs, extra in rows:
        print(f"{name:<{w0}}  {count:>9,}  {secs:>8.3f}  {count / secs:>9,.0f}  {secs / count * 1e6:>7.1f}  {extra}")
    print()
    if waku:
        print(f"ratio sdschat / @waku/sds at {n:,} messages: {rate / waku['rate']:.1f}x")
    print(f"ratio sdschat {long_n:,} / {n:,} messages rate: {flat:.2f} (target >= {FLATNESS_TARGET}: {verdict})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
