"""Chaos: N `sdschat bot` processes over mosquitto under loss, duplication and reordering,
one bot kill -9ed and restarted several times mid-run, the broker itself restarted.

Every link drops ``loss`` of the frames each way, duplicates ``duplicate`` of them and
delays them ``delay_ms`` +- ``jitter_ms`` (reordering). Bot n0 (the victim) is killed
with SIGKILL ``kills`` times while it sends and is restarted at once on the same
database (sending what it had not accepted yet); mosquitto is killed -9 and
restarted on the same port ``broker_restarts`` times. Then every bot lingers until
the group is quiet and exits.

Checked at the end: every accepted message (a row of its sender's `messages`
table with the sender's own id, i.e. committed before it was published) is in
every participant's log, every log is in the same order, nothing is left
waiting. Printed: messages sent, delivered, resent, repaired, lost (must be 0),
time to convergence.

``run`` returns the figures and ``passed`` (the group converged with nothing lost); ``report`` prints them. The
long run is tests/harness/test_chaos_bots.py (``pytest -m slow``), a short one tests/reliability/test_rel_chaos.py.
"""

from __future__ import annotations

import random
import time
from pathlib import Path

import kit as H


def run(
    workdir: Path,
    *,
    bots: int = 5,
    count: int = 60,
    interval: float = 0.1,
    loss: float = 0.3,
    duplicate: float = 0.2,
    delay_ms: float = 20,
    jitter_ms: float = 20,
    kills: int = 3,
    broker_restarts: int = 1,
    seed: int = 1,
    linger: float = H.LINGER_S,
    max_runtime: float = 300,
    log=print,
) -> dict:
    rng = random.Random(seed)
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    broker = H.Broker(workdir)
    broker.start()
    H.keygen(workdir)
    impair = [
        "--loss",
        str(loss),
        "--duplicate",
        str(duplicate),
        "--delay-ms",
        str(delay_ms),
        "--jitter-ms",
        str(jitter_ms),
    ]
    group = [H.Bot(workdir, f"n{i}", broker.url, ["--linger", str(linger), *impair, *H.FAST]) for i in range(bots)]
    victim = group[0]
    t0 = time.monotonic()
    try:
        for i, b in enumerate(group):
            b.start(
                "--count",
                str(count),
                "--interval",
                str(interval),
                "--start-after",
                "1.5",
                "--seed",
                str(seed * 100 + i),
                "--text",
                f"{b.name} start0 #{{i}}",
                max_runtime=max_runtime,
            )
        # faults, in time order, inside the sending window (sending starts ~2 s in: --start-after 1.5 + start-up):
        # kills spread over it (jittered), broker restarts between them
        span = max(1.0, count * interval - 0.5)
        plan = [("kill", 2.5 + span * (k + 0.5 + rng.uniform(-0.3, 0.3)) / kills) for k in range(kills)]
        plan += [("broker", 2.5 + span * (r + 0.75) / broker_restarts) for r in range(broker_restarts)]
        plan.sort(key=lambda p: p[1])
        # keep faults at least 1 s apart so a victim restart never meets a dead broker by design
        for j in range(1, len(plan)):
            if plan[j][1] < plan[j - 1][1] + 1.0:
                plan[j] = (plan[j][0], plan[j - 1][1] + 1.0)
        fault_log = []
        for what, at in plan:
            delay = at - (time.monotonic() - t0)
            if delay > 0:
                time.sleep(delay)
            if what == "kill":
                before = len(H.own_accepted(victim.db))
                victim.kill9()
                accepted = len(H.own_accepted(victim.db))
                remaining = max(0, count - accepted)
                fault_log.append(
                    f"{time.monotonic() - t0:6.2f} s  kill -9 {victim.name} (accepted {accepted}; "
                    f"{before} just before) -> restart sending {remaining} more"
                )
                time.sleep(0.2)
                _restart(victim, broker, remaining, interval, seed * 100 + victim.kills * 10, max_runtime)
            else:
                at_kill = time.monotonic() - t0
                broker.kill()
                down = rng.uniform(0.5, 1.5)
                time.sleep(down)
                broker.start()
                fault_log.append(f"{at_kill:6.2f} s  mosquitto kill -9, down {down:.1f} s, restarted")
        for line in fault_log:
            log("  " + line)
        codes = H.wait_all(group, max_runtime + 30)
        wall = time.monotonic() - t0
    finally:
        for b in group:
            b.kill9()
        broker.close()
    dbs = [b.db for b in group]
    ok, state = H.converged(dbs)
    figures = H.group_figures(dbs)
    integrity = {b.name: H.integrity(b.db) for b in group}
    result = {
        "bots": bots,
        "loss": loss,
        "duplicate": duplicate,
        "delay_ms": delay_ms,
        "jitter_ms": jitter_ms,
        "kills": victim.kills,
        "broker_restarts": broker.restarts + broker_restarts,
        "exit_codes": codes,
        "wall_s": round(wall, 1),
        "converged": ok,
        "state": state,
        "integrity": integrity,
        **figures,
        "victim_accepted": len(H.own_accepted(victim.db)),
        "workdir": str(workdir),
    }
    result["passed"] = bool(
        ok
        and figures["lost"] == 0
        and all(c == 0 for c in codes.values())
        and all(v == "ok" for v in integrity.values())
    )
    return result


def _restart(victim: H.Bot, broker: H.Broker, remaining: int, interval: float, seed: int, max_runtime: float) -> None:
    """Restart the victim on its database; if the broker happens to be down when it connects, it exits with
    one line (code 2): retry (on a loaded machine start-up alone can outlast the gap between two faults)."""
    for attempt in range(20):
        victim.start(
            "--count",
            str(remaining),
            "--interval",
            str(interval),
            "--seed",
            str(seed + attempt),
            "--text",
            f"{victim.name} restart{victim.kills} #{{i}}",
            max_runtime=max_runtime,
        )
        if victim.wait_connected() or victim.started.returncode == 0:
            return
        victim.exits.append(victim.started.returncode)
        time.sleep(0.5)
    raise RuntimeError(f"{victim.name} would not restart: {victim.output()[-500:]}")


def report(r: dict) -> None:
    print(
        f"{r['bots']} bots over mosquitto, loss {r['loss']:.0%} each way, duplicate {r['duplicate']:.0%}, "
        f"delay {r['delay_ms']:g}+-{r['jitter_ms']:g} ms; {r['kills']} kill -9 of n0, "
        f"{r['broker_restarts']} broker restart(s)"
    )
    H.print_table(
        [
            ("messages sent (accepted)", r["sent"]),
            ("delivered (to the other bots)", f"{r['delivered']} of {r['expected_deliveries']}"),
            ("resent", r["resent"]),
            ("repaired (arrived after a gap)", r["repaired"]),
            ("SDS-R repairs served / requested", f"{r['repairs_served']} / {r['repair_requests']}"),
            ("lost (accepted, not in every log)", r["lost"]),
            ("'lost' declarations", r["lost_events"]),
            ("logs identical, same order", r["same_order"]),
            ("time to convergence after the last send", f"{r['convergence_after_last_send_s']:.1f} s"),
            ("wall time", f"{r['wall_s']} s"),
            ("exit codes", r["exit_codes"]),
            ("integrity_check", set(r["integrity"].values())),
        ]
    )
    print("PASS" if r["passed"] else f"FAIL: {r['state']}")
