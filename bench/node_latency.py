"""3 sdschat nodes (real `sdschat bot` processes) over mosquitto on loopback.

Default: 50 msg/s aggregate for 60 s. Prints p50/p99 send-to-delivered latency
(sender's "sent" event, written once the message is durable, to each
receiver's "delivered" event; same machine, same clock), CPU per node, and
database growth per 1,000 messages.

CPU is given twice: over the whole process (start-up, the 2 s before sending,
the linger after it: what `time` would say) and while the messages flow (from
the first message sent to the last, read from /proc every 0.2 s: what a chat at
this rate costs once it runs). The second is split into the main thread's (the
event loop: receiving, sending, signatures) and the other threads' (the
database's writes and the checkpoints).

On a shared host the same work takes more CPU while other work runs (caches
and cores are shared): the figure moved from 3% to over 6% of a core between
runs of one commit. So the bench also says how busy the host was: one Ed25519
check's CPU time (kit.ed25519_us) before and after the run, and the load
average. Compare runs only where these are alike.

    python bench/node_latency.py [--seconds 60] [--rate 50] [--nodes 3]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from kit import Broker, cpu_share, ed25519_us, percentile, sample_cpu


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--rate", type=float, default=50.0, help="messages per second, all nodes together")
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes, a few seconds: the bench still runs end to end (the test suite runs this)",
    )
    args = ap.parse_args()
    if args.smoke:
        args.seconds, args.rate, args.nodes = 3.0, 20.0, 2

    host_before = _host()
    work = Path(tempfile.mkdtemp(prefix="sdschat-bench-"))
    broker = Broker(work)  # (one line and exit when mosquitto is missing: `bash .ci/setup` installs it)
    broker.start()
    sds = [sys.executable, "-m", "sdschat"]
    subprocess.run([*sds, "keygen", str(work / "k.key")], check=True, capture_output=True)
    per_node = args.rate / args.nodes
    count = int(args.seconds * per_node)
    names = [f"n{i}" for i in range(args.nodes)]
    procs = {}
    t0 = time.monotonic()
    for name in names:
        procs[name] = subprocess.Popen(
            [
                *sds,
                "bot",
                "--name",
                name,
                "--key-file",
                str(work / "k.key"),
                "--broker",
                broker.url,
                "--db",
                str(work / f"{name}.db"),
                "--count",
                str(count),
                "--interval",
                str(1 / per_node),
                "--linger",
                "3",
                "--start-after",
                "2",
                "--quiet",
                "--max-runtime",
                str(args.seconds * 3 + 60),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
    samples: dict[str, list[tuple[float, float, float]]] = {name: [] for name in names}  # (wall, CPU s, main's)
    ended = threading.Event()
    sampler = threading.Thread(target=sample_cpu, args=(procs, samples, ended), daemon=True)
    sampler.start()
    cpu = {}  # (includes ~2 s start-up and linger at low load)
    for name, p in procs.items():
        _, status, usage = os.wait4(p.pid, 0)
        cpu[name] = usage.ru_utime + usage.ru_stime
        p.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - t0
    ended.set()
    sampler.join()
    broker.close()

    sent: dict[str, float] = {}
    delivered: list[float] = []
    shown: list[float] = []
    sizes = {}
    logs = {}
    for name in names:
        db = work / f"{name}.db"
        con = sqlite3.connect(db)
        for mid, ts in con.execute("SELECT message_id, ts_ms FROM events WHERE kind = 'sent'"):
            sent[mid] = ts
        logs[name] = [
            r[0]
            for r in con.execute(
                "SELECT message_id FROM messages WHERE state != 'waiting' ORDER BY lamport_timestamp, message_id"
            )
        ]
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.close()
        sizes[name] = sum(f.stat().st_size for f in work.glob(f"{name}.db*"))
    for name in names:
        con = sqlite3.connect(work / f"{name}.db")
        for mid, ts in con.execute("SELECT message_id, ts_ms FROM events WHERE kind = 'delivered'"):
            if mid in sent:
                delivered.append(ts - sent[mid])
        for mid, ts in con.execute("SELECT message_id, ts_ms FROM events WHERE kind = 'received'"):
            if mid in sent:
                shown.append(ts - sent[mid])
        con.close()
    total = len(sent)
    flowing = (min(sent.values()) / 1000, max(sent.values()) / 1000) if sent else (0.0, 0.0)
    converged = len({json.dumps(v) for v in logs.values()}) == 1
    print(f"{args.nodes} nodes over mosquitto (loopback, QoS 0), target {args.rate:g} msg/s for {args.seconds:g} s")
    print(
        f"messages sent {total}, wall {wall:.1f} s (actual rate {total / args.seconds:.1f} msg/s while sending), "
        f"exit codes {[p.returncode for p in procs.values()]}, logs identical: {converged}"
    )
    print(
        f"send-to-delivered latency over {len(delivered)} deliveries: p50 {percentile(delivered, 0.5):.1f} ms, "
        f"p99 {percentile(delivered, 0.99):.1f} ms, max {max(delivered):.0f} ms"
    )
    print(
        f"send-to-shown latency (first arrival, even before dependencies): p50 {percentile(shown, 0.5):.1f} ms, "
        f"p99 {percentile(shown, 0.99):.1f} ms"
    )
    host_after = _host()
    print(
        f"this host: one Ed25519 check {host_before[0]:.0f} us before the run and {host_after[0]:.0f} us after it, "
        f"load average {host_before[1]:.2f} and {host_after[1]:.2f} (a busier host takes more CPU for the same "
        "work: compare runs only at like figures)"
    )
    steady = {name: cpu_share(samples[name], *flowing) for name in names}
    steady_main = {name: cpu_share(samples[name], *flowing, main_thread=True) for name in names}
    for name in names:
        while_flowing = f"{100 * steady[name]:.1f}%" if steady[name] is not None else "n/a (no /proc)"
        share, main = steady[name], steady_main[name]
        if share is not None and main is not None:
            while_flowing += f" = main thread {100 * main:.1f}% + the others {100 * (share - main):.1f}%"
        print(
            f"  {name}: CPU {cpu[name]:.1f} s ({100 * cpu[name] / wall:.1f}% of one core over the whole process, "
            f"{while_flowing} while messages flow), "
            f"database {sizes[name] / 1e6:.2f} MB = {sizes[name] / max(1, len(logs[name])) * 1000 / 1e6:.2f} MB "
            f"per 1,000 messages"
        )
    print(f"mean CPU per node {statistics.mean(cpu.values()):.1f} s; work dir {work}")
    shares = [v for v in steady.values() if v is not None]
    mains = [v for v in steady_main.values() if v is not None]
    if shares:
        print(
            f"CPU per node while messages flow ({flowing[1] - flowing[0]:.1f} s): "
            f"median {100 * statistics.median(shares):.1f}% of one core"
            + (
                f" (main thread, the event loop: median {100 * statistics.median(mains):.1f}%; the others are the "
                "database's and the checkpoints')"
                if mains
                else ""
            )
        )
    return 0 if converged and all(p.returncode == 0 for p in procs.values()) else 1


def _host() -> tuple[float, float]:
    """How busy this host is: one Ed25519 check in us of CPU, and the 1-minute load average (0 without one)."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else 0.0
    return ed25519_us(repeat=100)[0], load


if __name__ == "__main__":
    sys.exit(main())
