"""Shared harness of the reliability runs (chaos_bots, crash_loop, soak_nodes, broker_faults).

Real processes only: mosquitto as a subprocess (killable and restartable on the
same port) and `sdschat bot` processes, each with its own SQLite database. The
figures are read back from those databases afterwards (read-only), so what is
measured is what a user's files hold:

* accepted  = the sender's own rows in its `messages` table (committed before
  publishing; see tests/node/test_node_cli.py::own_accepted);
* log       = the `messages` rows not waiting for dependencies, in local-log
  order (lamport_timestamp, message_id), as `sdschat export` prints them;
* events    = the append-only `events` table ('sent', 'delivered', 'resent',
  'repair_served', 'lost', ...).

Imported by the bench scripts (``sys.path`` gets this folder) and by
tests/reliability (loaded by path), so the long runs and the short tests share
one implementation.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

SDSCHAT = [sys.executable, "-m", "sdschat"]

#: protocol timers scaled down ~5x so runs settle in seconds (as tests/node/test_node_cli.py's FAST)
FAST_TUNE = ["repair_t_min_ms=300", "repair_t_max_ms=1500", "resend_unacknowledged_ms=400",
             "resend_possibly_acknowledged_ms=1200", "resend_max_interval_ms=3000", "sync_interval_ms=2000",
             "sync_jitter_ms=500"]
FAST = [a for kv in FAST_TUNE for a in ("--tune", kv)]
#: the same settings as keyword arguments of sdschat.node.node_channel_config
FAST_CONFIG = {k: int(v) for k, v in (kv.split("=") for kv in FAST_TUNE)}
#: how long a bot of a lossy run lingers once all is quiet: three of the slowest resends. A bot leaves after
#: `--linger` seconds without a peer's resend or repair; with one resend interval (3 s) a single lost resend let
#: every peer leave while a sender still waited for its acknowledgement, alone for good (seen under load).
LINGER_S = 3 * FAST_CONFIG["resend_max_interval_ms"] / 1000


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def mosquitto_binary() -> str:
    found = shutil.which("mosquitto") or shutil.which("mosquitto", path="/usr/sbin:/usr/local/sbin:/sbin")
    if not found:
        raise SystemExit("mosquitto not found: install it with `apt-get install -y mosquitto` (bash .ci/setup does)")
    return found


def percentile(values, q: float) -> float:
    values = sorted(values)
    if not values:
        return float("nan")
    k = (len(values) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(values) - 1)
    return values[lo] + (values[hi] - values[lo]) * (k - lo)


class Broker:
    """mosquitto on a fixed loopback port: start, kill -9, restart (same port), close."""

    def __init__(self, workdir: Path, *, port: int | None = None, max_queued: int = 100_000, extra: str = "") -> None:
        self.binary = mosquitto_binary()
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.config = self.workdir / f"mosquitto-{self.port}.conf"
        self.config.write_text(
            f"listener {self.port} 127.0.0.1\nallow_anonymous true\nmax_queued_messages {max_queued}\n"
            f"set_tcp_nodelay true\npersistence false\nlog_dest stderr\n{extra}")
        self.log_path = self.workdir / f"mosquitto-{self.port}.log"
        self.proc: subprocess.Popen | None = None
        self.restarts = 0

    @property
    def url(self) -> str:
        return f"mqtt://127.0.0.1:{self.port}"

    def start(self, timeout: float = 10.0) -> None:
        assert self.proc is None or self.proc.poll() is not None
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([self.binary, "-c", str(self.config)], stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                # the port may linger a moment after a kill -9: try again
                time.sleep(0.1)
                with open(self.log_path, "ab") as log:
                    self.proc = subprocess.Popen([self.binary, "-c", str(self.config)], stdout=log,
                                                 stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
                continue
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.02)
        raise RuntimeError(f"mosquitto did not listen on {self.port}: {self.log_path.read_text()[-1000:]}")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)

    def restart(self, down_s: float = 0.0) -> None:
        self.kill()
        if down_s:
            time.sleep(down_s)
        self.start()
        self.restarts += 1

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def keygen(folder: Path) -> Path:
    path = Path(folder) / "k.key"
    if not path.exists():
        subprocess.run([*SDSCHAT, "keygen", str(path)], check=True, capture_output=True, timeout=60)
    return path


@dataclass
class Bot:
    """One `sdschat bot` participant; its process may be killed and restarted on the same database."""

    folder: Path
    name: str
    url: str
    args: list[str] = field(default_factory=list)
    proc: subprocess.Popen | None = None
    starts: int = 0
    kills: int = 0
    exits: list[int] = field(default_factory=list)

    @property
    def db(self) -> Path:
        return self.folder / f"{self.name}.db"

    @property
    def out_path(self) -> Path:
        return self.folder / f"{self.name}.out"

    def start(self, *extra: str, url: str | None = None, max_runtime: float = 300) -> subprocess.Popen:
        assert self.proc is None or self.proc.poll() is not None, f"{self.name} is running"
        cmd = [*SDSCHAT, "bot", "--name", self.name, "--key-file", str(self.folder / "k.key"),
               "--broker", url or self.url, "--db", str(self.db), "--max-runtime", str(max_runtime),
               *self.args, *extra]
        with open(self.out_path, "a") as out:
            out.write(f"--- start {self.starts}: {' '.join(cmd[3:])}\n")
            out.flush()
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.starts += 1
        return self.proc

    @property
    def pid(self) -> int:
        return self.proc.pid

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_connected(self, timeout: float = 20.0) -> bool:
        """Wait until this start of the bot reports itself connected (True) or exits (False)."""
        marker = f"--- start {self.starts - 1}:"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = self.output()
            if f"{self.name}: participant " in out[out.rfind(marker):]:
                return True
            if not self.running():
                return False
            time.sleep(0.05)
        return self.running()

    def kill9(self) -> None:
        if self.running():
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
            self.kills += 1

    def terminate(self) -> None:
        if self.running():
            self.proc.send_signal(signal.SIGTERM)

    def wait(self, timeout: float) -> int:
        code = self.proc.wait(timeout)
        self.exits.append(code)
        return code

    def output(self) -> str:
        try:
            return self.out_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""


def connect_ro(db: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)


def own_accepted(db: Path) -> set[str]:
    """Own messages committed to the database (accepted): sender = the database's participant."""
    if not Path(db).exists():
        return set()
    try:
        con = connect_ro(db)
    except sqlite3.Error:
        return set()
    try:
        row = con.execute("SELECT participant_id FROM channels").fetchone()
        if row is None:
            return set()
        return {r[0] for r in con.execute("SELECT message_id FROM messages WHERE sender_id = ?", (row[0],))}
    except sqlite3.Error:  # still being created
        return set()
    finally:
        con.close()


def participant_of(db: Path) -> str | None:
    con = connect_ro(db)
    try:
        row = con.execute("SELECT participant_id FROM channels").fetchone()
        return row[0] if row else None
    finally:
        con.close()


def log_of(db: Path) -> list[str]:
    """The ordered log as `sdschat export` gives it: delivered messages by (lamport, id)."""
    con = connect_ro(db)
    try:
        return [r[0] for r in con.execute(
            "SELECT message_id FROM messages WHERE state != 'waiting' ORDER BY lamport_timestamp, message_id")]
    finally:
        con.close()


def waiting_of(db: Path) -> list[str]:
    con = connect_ro(db)
    try:
        return [r[0] for r in con.execute("SELECT message_id FROM messages WHERE state = 'waiting'")]
    finally:
        con.close()


def event_counts(db: Path) -> Counter:
    con = connect_ro(db)
    try:
        return Counter(dict(con.execute("SELECT kind, COUNT(*) FROM events GROUP BY kind").fetchall()))
    finally:
        con.close()


def events_of(db: Path, kind: str) -> list[tuple[str, int, dict | None]]:
    con = connect_ro(db)
    try:
        return [(m, ts, json.loads(d) if d else None) for m, ts, d in con.execute(
            "SELECT message_id, ts_ms, detail FROM events WHERE kind = ? ORDER BY seq", (kind,))]
    finally:
        con.close()


def repaired_count(db: Path) -> int:
    """Messages of others that reached this database by a resend or an SDS-R repair after a gap."""
    con = connect_ro(db)
    try:
        return con.execute("SELECT COUNT(*) FROM messages WHERE repaired = 1").fetchone()[0]
    finally:
        con.close()


def integrity(db: Path) -> str:
    con = sqlite3.connect(db, timeout=10)
    try:
        return "\n".join(r[0] for r in con.execute("PRAGMA integrity_check"))
    finally:
        con.close()


def db_bytes(db: Path) -> int:
    return sum(p.stat().st_size for p in Path(db).parent.glob(Path(db).name + "*") if p.is_file())


async def _engine_check_async(db: Path, tune: dict) -> tuple[str, list[str], int]:
    from sdschat.node import node_channel_config
    from sdschat.sds import MessageChannel
    from sdschat.store import Store

    store = await Store.open(db, create=False)
    try:
        check = await store.integrity_check()
        ids = await store.channel_ids()
        problems: list[str] = []
        logged = 0
        for cid in ids:
            state = await store.load_state(cid)
            if state is None:
                problems.append(f"channel {cid} has no state")
                continue
            channel = MessageChannel.restore(state, node_channel_config(**tune))
            problems += channel.check_invariants()
            logged += channel.log_size()
        return check, problems, logged
    finally:
        await store.close()


def engine_check(db: Path, tune: dict | None = None) -> tuple[str, list[str], int]:
    """(PRAGMA integrity_check, MessageChannel.check_invariants() of the restored engine, log length).

    Uses the store API as the node does at start (Store.open migrates, so call it on a copy or on a
    database no process has open)."""
    import asyncio

    return asyncio.run(_engine_check_async(Path(db), FAST_CONFIG if tune is None else tune))


def converged(dbs: list[Path]) -> tuple[bool, dict]:
    """Whether every database holds every accepted message, in the same order, nothing waiting."""
    accepted: set[str] = set()
    for db in dbs:
        accepted |= own_accepted(db)
    logs = {db.stem: log_of(db) for db in dbs}
    missing = {name: len(accepted - set(log)) for name, log in logs.items()}
    waiting = {db.stem: len(waiting_of(db)) for db in dbs}
    same = len({tuple(v) for v in logs.values()}) == 1
    ok = same and not any(missing.values()) and not any(waiting.values())
    return ok, {"accepted": len(accepted), "same_order": same, "missing": missing, "waiting": waiting,
                "log_lengths": {k: len(v) for k, v in logs.items()}}


def group_figures(dbs: list[Path]) -> dict:
    """Sent, delivered, resent, repaired, lost (accepted but absent + 'lost' events), time to convergence."""
    accepted: dict[str, set[str]] = {db.stem: own_accepted(db) for db in dbs}
    all_accepted = set().union(*accepted.values())
    logs = {db.stem: log_of(db) for db in dbs}
    counts = {db.stem: event_counts(db) for db in dbs}
    last_sent = 0
    for db in dbs:
        for _, ts, _ in events_of(db, "sent"):
            last_sent = max(last_sent, ts)
    last_delivered = 0
    delivered = 0
    for db in dbs:
        seen = set()
        for mid, ts, _ in events_of(db, "delivered"):
            if mid in all_accepted and mid not in seen:
                seen.add(mid)
                last_delivered = max(last_delivered, ts)
        delivered += len(seen)
    expected = sum(len(all_accepted - accepted[n]) for n in accepted)
    absent = sum(len(all_accepted - set(log)) for log in logs.values())
    return {
        "sent": len(all_accepted),
        "delivered": delivered,
        "expected_deliveries": expected,
        "resent": sum(c["resent"] for c in counts.values()),
        "repaired": sum(repaired_count(db) for db in dbs),
        "repairs_served": sum(c["repair_served"] for c in counts.values()),
        "repair_requests": sum(c["repair_requested"] for c in counts.values()),
        "rejected": sum(c["rejected"] for c in counts.values()),
        "lost_events": sum(c["lost"] for c in counts.values()),
        "lost": absent,
        "same_order": len({tuple(v) for v in logs.values()}) == 1,
        "convergence_after_last_send_s": max(0, last_delivered - last_sent) / 1000 if last_sent else float("nan"),
    }


def rss_kb(pid: int) -> int | None:
    """VmRSS of a process in kB (from /proc/PID/status), or None when it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return None


def wait_until(predicate, timeout: float, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(interval)
    return False


def wait_all(bots: list[Bot], timeout: float) -> dict[str, int]:
    deadline = time.monotonic() + timeout
    codes = {}
    for b in bots:
        left = max(0.1, deadline - time.monotonic())
        try:
            codes[b.name] = b.wait(left)
        except subprocess.TimeoutExpired:
            b.kill9()
            codes[b.name] = -9
    return codes


def print_table(rows: list[tuple[str, object]]) -> None:
    width = max(len(k) for k, _ in rows)
    for k, v in rows:
        print(f"  {k:<{width}}  {v}")


def env_with(**extra: str) -> dict:
    return {**os.environ, **extra}
