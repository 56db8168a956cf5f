"""Crash consistency: kill -9 one `sdschat bot` again and again, at random points of its work.

A group of three bots over mosquitto (every link ``loss`` each way). Two of them chat
all along; the third, the victim, is started and killed with SIGKILL ``runs`` times on
the same database, each run in one phase, cycling through:

  startup  killed 0.05-0.6 s after it was spawned (store open, migrations, identity, connect)
  send     sending every 50 ms; killed 0-1 s after its first accepted message of the run
  persist  sending back to back (`--interval 0`: a commit always in flight); killed 0-0.3 s in
  receive  not sending, receiving the others' messages; killed 0-1.5 s after one arrived
  repair   not sending, 60% loss in: killed 0-0.3 s after it had a repair request pending

After each kill, on the database as the crash left it:
  * PRAGMA integrity_check is "ok";
  * the engine state loaded with the store API (Store.load_state) and restored
    (MessageChannel.restore) passes check_invariants() == [];
  * every message accepted before (own rows of `messages`) is still there.
At the end the others stop, all three restart with nothing to send, the group
settles, and every message ever accepted by anyone is in every log, in the same order.

``run`` returns the figures, every failed check and ``passed``. The long run (50 kills) is
tests/harness/test_crash_loop.py (``pytest -m slow``), one round of the phases tests/reliability/test_rel_crash.py.
"""

from __future__ import annotations

import random
import sqlite3
import time
from collections import Counter
from pathlib import Path

import kit as H

PHASES = ("startup", "send", "persist", "receive", "repair")


def _count(db: Path, sql: str) -> int:
    try:
        con = H.connect_ro(db)
    except sqlite3.Error:
        return 0
    try:
        return con.execute(sql).fetchone()[0]
    except sqlite3.Error:
        return 0
    finally:
        con.close()


def _received(db: Path) -> int:
    return _count(db, "SELECT COUNT(*) FROM messages WHERE sender_id != (SELECT participant_id FROM channels)")


def _requests(db: Path) -> int:
    return _count(db, "SELECT COUNT(*) FROM sds_repair_requests")


def run(workdir: Path, *, runs: int = 50, loss: float = 0.2, seed: int = 1, phases=PHASES, log=print) -> dict:
    rng = random.Random(seed)
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    broker = H.Broker(workdir)
    broker.start()
    H.keygen(workdir)
    common = ["--loss", str(loss), *H.FAST]
    others = [H.Bot(workdir, n, broker.url, ["--linger", str(H.LINGER_S), *common]) for n in ("a", "b")]
    victim = H.Bot(workdir, "v", broker.url, common)
    failures: list[str] = []
    phase_counts: Counter = Counter()
    accepted_ever: set[str] = set()
    checked = 0
    t0 = time.monotonic()
    try:
        for i, b in enumerate(others):
            b.start("--count", "100000", "--interval", "0.3", "--seed", str(seed * 10 + i), max_runtime=3600)
        time.sleep(1.0)
        for k in range(runs):
            phase = phases[k % len(phases)]
            before = H.own_accepted(victim.db)
            received_before = _received(victim.db)
            s = str(seed * 1000 + k)
            if phase == "startup":
                victim.start("--count", "5", "--interval", "0.05", "--seed", s)
                time.sleep(rng.uniform(0.05, 0.6))
            elif phase in ("send", "persist"):
                interval = "0.05" if phase == "send" else "0"
                victim.start("--count", "400", "--interval", interval, "--seed", s, "--text", f"v run{k} #{{i}}")
                H.wait_until(lambda: len(H.own_accepted(victim.db) - before) >= 1 or not victim.running(), 15)
                time.sleep(rng.uniform(0, 1.0) if phase == "send" else rng.uniform(0, 0.3))
            elif phase == "receive":
                victim.start("--count", "0", "--linger", "60", "--seed", s)
                H.wait_until(lambda: _received(victim.db) > received_before or not victim.running(), 15)
                time.sleep(rng.uniform(0, 1.5))
            else:  # repair
                victim.start("--count", "0", "--linger", "60", "--loss-in", "0.6", "--seed", s)
                H.wait_until(lambda: _requests(victim.db) > 0 or not victim.running(), 8)
                time.sleep(rng.uniform(0, 0.3))
            alive = victim.running()
            victim.kill9()
            if not alive:
                failures.append(f"run {k} ({phase}): the victim exited by itself: {victim.output()[-300:]}")
            phase_counts[phase] += 1
            where = f"run {k} ({phase})"
            if not victim.db.exists():
                log(f"  {where:<16} killed before the database file existed")
                continue
            after = H.own_accepted(victim.db)
            if not before <= after:
                failures.append(f"{where}: {len(before - after)} accepted messages vanished")
            check, problems, logged = H.engine_check(victim.db)
            checked += 1
            if check != "ok":
                failures.append(f"{where}: integrity_check: {check[:200]}")
            if problems:
                failures.append(f"{where}: invariants: {problems[:3]}")
            accepted_ever |= after
            log(
                f"  {where:<16} accepted {len(after):4d} (+{len(after - before)}), log {logged:5d}, "
                f"integrity {check}, invariants {'ok' if not problems else problems[:1]}"
            )
        # settle: the chatting bots stop (SIGTERM: a clean exit), then all three come back with nothing to send
        for b in others:
            b.terminate()
        for b in others:
            code = b.wait(60)
            if code != 0:
                failures.append(f"{b.name} exited {code} on SIGTERM: {b.output()[-300:]}")
        settle_start = time.monotonic()
        for b in [*others, victim]:
            b.start("--count", "0", "--linger", str(H.LINGER_S), "--seed", str(seed), max_runtime=240)
        codes = H.wait_all([*others, victim], 300)
        settle_s = time.monotonic() - settle_start
        for name, code in codes.items():
            if code != 0:
                failures.append(f"{name} exited {code} while settling")
    finally:
        for b in [*others, victim]:
            b.kill9()
        broker.close()
    dbs = [b.db for b in (*others, victim)]
    accepted_ever |= H.own_accepted(victim.db)
    ok, state = H.converged(dbs)
    logs = {db.stem: set(H.log_of(db)) for db in dbs}
    lost_victim = {n: len(accepted_ever - log) for n, log in logs.items()}
    if not ok:
        failures.append(f"group did not converge: {state}")
    if any(lost_victim.values()):
        failures.append(f"accepted victim messages missing from logs: {lost_victim}")
    for db in dbs:
        check, problems, _ = H.engine_check(db)
        if check != "ok" or problems:
            failures.append(f"{db.name} after settling: {check} {problems[:3]}")
    figures = H.group_figures(dbs)
    return {
        "runs": runs,
        "checked": checked,
        "phases": dict(phase_counts),
        "victim_accepted": len(accepted_ever),
        "group_accepted": state["accepted"],
        "lost": figures["lost"] + sum(lost_victim.values()),
        "same_order": state["same_order"],
        "settle_s": round(settle_s, 1),
        "wall_s": round(time.monotonic() - t0, 1),
        "resent": figures["resent"],
        "repaired": figures["repaired"],
        "failures": failures,
        "passed": not failures,
        "workdir": str(workdir),
    }
