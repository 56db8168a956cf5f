"""Load and soak: N `sdschat bot` processes over mosquitto at a steady aggregate rate for minutes.

Default: 5 nodes, 200 msg/s all together, 10 minutes, the node's default protocol settings,
no impairment. After --minutes the bots are stopped (SIGTERM), then restarted with nothing to send
until the group is quiet, and the logs are compared. While they run, every --sample seconds: each bot's RSS (VmRSS from
/proc/PID/status), CPU time (/proc/PID/stat) and database size (file + -wal + -shm) against
the number of messages it holds. Afterwards, from the databases' events tables: latency from
the sender's 'sent' event (written once the message is durable) to each receiver's
'delivered' event, p50/p99 per minute of sending (same machine, same clock).

Printed: RSS per minute per node and its growth (a linear fit, kB per minute and per 1,000
messages), latency per minute and its drift (last minute vs first), database growth per
1,000 messages (linear fit of size against messages, with R^2), and whether the logs converged.

    python bench/soak_nodes.py [--minutes 10] [--nodes 5] [--rate 200] [--sample 5] [--json]
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import kit as H


def message_count(db: Path) -> int | None:
    try:
        con = H.connect_ro(db)
        try:
            return con.execute("SELECT COUNT(*) FROM messages").fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:
        return None


def linfit(xs: list[float], ys: list[float]) -> tuple[float, float, float]:
    """Least squares y = a + b x: (a, b, r^2)."""
    n = len(xs)
    if n < 2:
        return float("nan"), float("nan"), float("nan")
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys))
    syy = sum((y - my) ** 2 for y in ys)
    b = sxy / sxx if sxx else float("nan")
    a = my - b * mx
    r2 = (sxy * sxy) / (sxx * syy) if sxx and syy else float("nan")
    return a, b, r2


def run(
    workdir: Path,
    *,
    minutes: float = 10,
    nodes: int = 5,
    rate: float = 200,
    sample_s: float = 5,
    loss: float = 0.0,
    pace_overhead_ms: float = 6.0,
    log=print,
) -> dict:
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    broker = H.Broker(workdir)
    broker.start()
    H.keygen(workdir)
    per_node = rate / nodes
    # a bot sleeps --interval after each send; sending itself (sign, commit, publish) and the receive
    # work queued in the same event loop take a few ms, so the sleep is shortened by pace_overhead_ms
    interval = max(0.0, 1 / per_node - pace_overhead_ms / 1000)
    count = int(minutes * 60 * per_node * 2)  # more than enough: the run is stopped by time
    extra = ["--loss", str(loss)] if loss else []
    bots = [H.Bot(workdir, f"s{i}", broker.url, ["--quiet", *extra]) for i in range(nodes)]
    samples: list[dict] = []
    t0 = time.monotonic()
    try:
        for i, b in enumerate(bots):
            b.start(
                "--count",
                str(count),
                "--interval",
                f"{interval:.6f}",
                "--start-after",
                "2",
                "--linger",
                "5",
                "--seed",
                str(i),
                max_runtime=minutes * 60 * 3 + 180,
            )
        deadline = t0 + 2.5 + minutes * 60
        next_sample = time.monotonic()
        last_print = 0.0
        while time.monotonic() < deadline and any(b.running() for b in bots):
            now = time.monotonic()
            if now >= next_sample:
                row = {"t": now - t0, "nodes": {}}
                for b in bots:
                    if not b.running():
                        continue
                    row["nodes"][b.name] = {
                        "rss_kb": H.rss_kb(b.pid),
                        "cpu_s": H.cpu_s(b.pid),
                        "db_bytes": H.db_bytes(b.db),
                        "messages": message_count(b.db),
                    }
                samples.append(row)
                next_sample += sample_s
                if now - last_print >= 60:
                    last_print = now
                    rss = [v["rss_kb"] / 1024 for v in row["nodes"].values() if v["rss_kb"]]
                    msgs = [v["messages"] or 0 for v in row["nodes"].values()]
                    log(
                        f"  {row['t']:6.0f} s: RSS {min(rss, default=0):.0f}-{max(rss, default=0):.0f} MB, "
                        f"messages per node {min(msgs, default=0)}-{max(msgs, default=0)}"
                    )
            time.sleep(0.2)
        # time is up: stop sending (SIGTERM: a clean exit), then all come back with nothing to send and settle
        for b in bots:
            b.terminate()
        codes = {b.name: b.wait(60) for b in bots}
        settle_t0 = time.monotonic()
        for b in bots:
            b.start("--count", "0", "--linger", str(H.LINGER_S), max_runtime=300)
        codes_settle = H.wait_all(bots, 330)
        settle_s = time.monotonic() - settle_t0
        wall = time.monotonic() - t0
    finally:
        for b in bots:
            b.kill9()
        broker.close()
    codes = {k: (codes[k], codes_settle[k]) for k in codes}
    r = analyse(workdir, bots, samples, codes, wall, minutes=minutes, nodes=nodes, rate=rate, count=count)
    r["settle_s"] = round(settle_s, 1)
    return r


def analyse(workdir: Path, bots, samples, codes, wall, *, minutes, nodes, rate, count) -> dict:
    dbs = [b.db for b in bots]
    sent: dict[str, int] = {}
    for db in dbs:
        for mid, ts, _ in H.events_of(db, "sent"):
            sent[mid] = ts
    start_ms = min(sent.values()) if sent else 0
    span_s = (max(sent.values()) - start_ms) / 1000 if len(sent) > 1 else float("nan")
    per_minute: dict[int, list[float]] = {}
    for db in dbs:
        for mid, ts, _ in H.events_of(db, "delivered"):
            s = sent.get(mid)
            if s is not None:
                per_minute.setdefault(int((s - start_ms) // 60_000), []).append(ts - s)
    latency = [
        {
            "minute": m + 1,
            "n": len(v),
            "p50_ms": round(H.percentile(v, 0.5), 1),
            "p99_ms": round(H.percentile(v, 0.99), 1),
            "max_ms": round(max(v), 1),
        }
        for m, v in sorted(per_minute.items())
    ]
    full = [row for row in latency if row["n"] >= 0.5 * max(r["n"] for r in latency)] if latency else []
    drift = (full[-1]["p50_ms"] / full[0]["p50_ms"]) if len(full) >= 2 and full[0]["p50_ms"] else float("nan")
    drift99 = (full[-1]["p99_ms"] / full[0]["p99_ms"]) if len(full) >= 2 and full[0]["p99_ms"] else float("nan")
    # memory: per node, a linear fit of RSS against time after the first minute (warm-up)
    memory = {}
    for b in bots:
        pts = [
            (s["t"], s["nodes"][b.name]["rss_kb"], s["nodes"][b.name]["messages"] or 0)
            for s in samples
            if b.name in s["nodes"] and s["nodes"][b.name]["rss_kb"]
        ]
        warm = [p for p in pts if p[0] >= min(60, pts[-1][0] / 3)] if pts else []
        if len(warm) >= 2:
            _, per_s, _ = linfit([p[0] for p in warm], [p[1] for p in warm])
            _, per_msg, _ = linfit([p[2] for p in warm], [p[1] for p in warm])
        else:
            per_s = per_msg = float("nan")
        by_minute = {}
        for t, rss, _ in pts:
            by_minute[int(t // 60)] = rss
        memory[b.name] = {
            "first_mb": round(warm[0][1] / 1024, 1) if warm else None,
            "last_mb": round(pts[-1][1] / 1024, 1) if pts else None,
            "peak_mb": round(max(p[1] for p in pts) / 1024, 1) if pts else None,
            "kb_per_min": round(per_s * 60, 1),
            "kb_per_1000_msgs": round(per_msg * 1000, 1),
            "mb_at_minute_end": {m + 1: round(v / 1024, 1) for m, v in sorted(by_minute.items())},
        }
    # database growth: size against messages held, all samples of all nodes
    xs, ys = [], []
    for s in samples:
        for v in s["nodes"].values():
            if v["messages"]:
                xs.append(v["messages"])
                ys.append(v["db_bytes"])
    _, bytes_per_msg, r2 = linfit(xs, ys)
    final_sizes = {}
    for db in dbs:
        con = sqlite3.connect(db)
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.close()
        final_sizes[db.stem] = H.db_bytes(db)
    ok, state = H.converged(dbs)
    cpu = {}
    for b in bots:
        pts = [s["nodes"][b.name]["cpu_s"] for s in samples if b.name in s["nodes"] and s["nodes"][b.name]["cpu_s"]]
        ts = [s["t"] for s in samples if b.name in s["nodes"] and s["nodes"][b.name]["cpu_s"]]
        cpu[b.name] = (
            round(100 * (pts[-1] - pts[0]) / (ts[-1] - ts[0]), 1) if len(pts) >= 2 and ts[-1] > ts[0] else None
        )
    held = state["log_lengths"]
    return {
        "minutes": minutes,
        "nodes": nodes,
        "rate": rate,
        "sent": len(sent),
        "target": int(rate * minutes * 60),
        "actual_rate": round(len(sent) / span_s, 1),
        "wall_s": round(wall, 1),
        "exit_codes": codes,
        "converged": ok,
        "state": state,
        "latency": latency,
        "p50_drift": round(drift, 2),
        "p99_drift": round(drift99, 2),
        "memory": memory,
        "cpu_percent": cpu,
        "db_mb_per_1000_msgs_fit": round(bytes_per_msg * 1000 / 1e6, 3),
        "db_fit_r2": round(r2, 4),
        "db_mb_per_1000_msgs_final": {k: round(v / max(1, held[k]) * 1000 / 1e6, 3) for k, v in final_sizes.items()},
        "workdir": str(workdir),
    }


def report(r: dict) -> None:
    print(
        f"{r['nodes']} nodes over mosquitto, target {r['rate']:g} msg/s for {r['minutes']:g} min: sent {r['sent']} "
        f"({r['actual_rate']} msg/s while sending), wall {r['wall_s']} s, exit codes (stop, settle) "
        f"{set(r['exit_codes'].values())}, settled in {r.get('settle_s')} s, converged {r['converged']}"
    )
    print("latency sent -> delivered per minute of sending:")
    for row in r["latency"]:
        print(
            f"  minute {row['minute']:2d}: {row['n']:7d} deliveries  p50 {row['p50_ms']:7.1f} ms  "
            f"p99 {row['p99_ms']:8.1f} ms  max {row['max_ms']:8.1f} ms"
        )
    print(f"  drift last/first full minute: p50 x{r['p50_drift']}, p99 x{r['p99_drift']}")
    print("memory (RSS) per node:")
    for name, m in r["memory"].items():
        print(
            f"  {name}: {m['first_mb']} MB after warm-up -> {m['last_mb']} MB (peak {m['peak_mb']}), "
            f"{m['kb_per_min']} kB/min = {m['kb_per_1000_msgs']} kB per 1,000 messages held; "
            f"CPU {r['cpu_percent'][name]}% of a core"
        )
    print(
        f"database growth: {r['db_mb_per_1000_msgs_fit']} MB per 1,000 messages (linear fit, R^2 {r['db_fit_r2']}); "
        f"after checkpoint {r['db_mb_per_1000_msgs_final']}"
    )
    print(f"work dir {r['workdir']}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10)
    ap.add_argument("--nodes", type=int, default=5)
    ap.add_argument("--rate", type=float, default=200, help="messages per second, all nodes together")
    ap.add_argument("--sample", type=float, default=5, help="seconds between RSS/size samples")
    ap.add_argument("--loss", type=float, default=0.0)
    ap.add_argument(
        "--pace-overhead-ms",
        type=float,
        default=6.0,
        help="shorten each bot's sleep by this (the cost of a send), to approach --rate",
    )
    ap.add_argument("--workdir", type=Path)
    ap.add_argument("--json", action="store_true")
    ap.add_argument(
        "--smoke",
        action="store_true",
        help="tiny sizes, a few seconds: the bench still runs end to end (the test suite runs this)",
    )
    args = ap.parse_args()
    if args.smoke:
        args.minutes, args.nodes, args.rate, args.sample = 0.05, 2, 20, 1
    work = args.workdir or Path(tempfile.mkdtemp(prefix="sdschat-soak-"))
    r = run(
        work,
        minutes=args.minutes,
        nodes=args.nodes,
        rate=args.rate,
        sample_s=args.sample,
        loss=args.loss,
        pace_overhead_ms=args.pace_overhead_ms,
    )
    report(r)
    if args.json:
        print(json.dumps(r))
    return 0 if r["converged"] and all(c == (0, 0) for c in r["exit_codes"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
