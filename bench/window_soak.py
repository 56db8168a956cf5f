"""The window under steady traffic: CPU share and resident memory of the real ``sdschat`` window over time.

    .venv/bin/python bench/window_soak.py [--minutes 60] [--rate 10] [--interval 60] [--size 140x40]
        [--history 0] [--idle 10] [--window-cmd CMD] [--workdir DIR] [--smoke]

Mosquitto on loopback (as bench/soak_nodes.py), two profiles: alice, whose window is watched, and bob, who
joins her one channel by her invite. The window is the whole process as a person runs it: ``python -m sdschat``
with ``SDSCHAT_HOME`` (and ``--home``) at alice's profile, in a pseudo-terminal of ``--size`` (its output
read and dropped, as a terminal would; the bytes are counted). Once the channel is on screen, the window's
idle CPU is taken over a few seconds; then bob's headless node (a ``ProfileClient`` in a process of its own)
sends ``--rate`` lines a second, each of 2 to 30 words (some wrap), on a fixed schedule for ``--minutes``.

Every ``--interval`` seconds, one row: seconds since the first line, lines sent, the window's CPU seconds
(utime + stime of /proc/PID/stat, since the first line), its share of a core over the interval and overall,
CPU ms a line over the interval, RSS (VmRSS of /proc/PID/status), RSS growth per line over the interval, and
what the window wrote to its terminal per line. At the end::

    window: CPU 19.1% of a core at 10.0 lines/s (20.3 ms a line), RSS 65 -> 99 MB, last-interval growth 11.2 KB/line

then the RSS an hour at that rate would reach (36,000 lines at 10/s; a linear fit of RSS against lines over
the second half of the run, extrapolated when the run was shorter, which overestimates it before the node's
10,000-message caps have filled; the measured figure when not) and ``PASS``
or ``FAIL`` against the targets: at most 5% of a core at 10 lines/s, and at most 250 MB after an hour.
``--smoke`` (the test suite runs it) takes ~35 s at 5 lines/s with a row every 6 s and prints the
same lines; it does not fail on the targets.

To profile the window under this load, give its command: ``--window-cmd "python -m cProfile -o /tmp/w.prof -m
sdschat"`` (``--home DIR`` is appended; it quits with Ctrl+Q, so cProfile writes its file), or attach a
sampler to the window's PID, which is printed. To measure another checkout, put it first on ``PYTHONPATH``
(the window runs from a scratch folder, so the current folder is never imported); the code in use is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import fcntl
import multiprocessing
import os
import pty
import random
import shlex
import signal
import sqlite3
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

from kit import Broker, cpu_s, rss_kb
from soak_nodes import linfit
from window_channels import ESCAPES

SIZE = (140, 40)
CHANNEL = "soak"
WORDS = (
    "ack",
    "bloom",
    "lamport",
    "causal",
    "history",
    "repair",
    "resend",
    "gap",
    "sync",
    "buffer",
    "hello",
    "there",
    "reliable",
    "message",
    "delivered",
    "missing",
    "filter",
    "peer",
    "channel",
    "epoch",
)
#: the targets of issue 44 ("a window that stays light under traffic")
TARGET_CPU_PERCENT = 5.0
TARGET_RATE = 10.0
TARGET_RSS_MB = 250.0
TARGET_HOUR_S = 3600
#: a channel's engine keeps its newest 10,000 log rows and 10,000 of others' messages for repairs in memory
#: (sdschat.node.config.LOG_WINDOW, RepairConfig.cache_size): RSS grows faster until then
NODE_CAPS = 10_000


def line_text(i: int, rng: random.Random) -> str:
    return f"line {i:06d} " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 30)))


def make_profiles(work: Path, broker_url: str, history: int) -> tuple[Path, Path]:
    """alice (with ``history`` old messages in her channel, read) and bob, in alice's channel by her invite."""
    from sdschat.profile import Profile, decode_invite, encode_invite, resolve_paths

    alice_home, bob_home = work / "alice", work / "bob"
    if history:
        from window_channels import fill_profile

        # a Node writes the channel's rows, then the history
        fill_profile(str(alice_home), broker_url, 1, history)  # its channel is window_channels' "chan-0"
        alice = Profile.load(resolve_paths(alice_home))
    else:
        alice = Profile.create(resolve_paths(alice_home), "alice", broker_url)
        alice.add_channel(CHANNEL, os.urandom(32))
        alice.mark_read(CHANNEL, int(time.time() * 1000))
    name = next(iter(alice.channels))
    invite = decode_invite(encode_invite(alice.invite(name)))
    bob = Profile.create(resolve_paths(bob_home), "bob", broker_url)
    bob.add_channel(
        invite.channel,
        invite.secret,
        admins=invite.admins,
        epoch=(invite.epoch, invite.epoch_secret),
        removed=invite.removed,
    )
    return alice_home, bob_home


async def _sender(home: str, rate: float, seconds: float, ready, go, stop, sent, cpu_ms) -> None:
    from sdschat.cli.window import ProfileClient
    from sdschat.profile import Profile, resolve_paths

    client = await ProfileClient.start(Profile.load(resolve_paths(Path(home))))
    try:
        node = client.nodes[0]
        await node.wait_ready()
        ready.set()
        while not go.is_set():
            await asyncio.sleep(0.01)
        rng = random.Random(1)
        start = time.monotonic()
        cpu0 = time.process_time()
        i = 0
        while i < int(seconds * rate) and not stop.is_set():
            wait = start + i / rate - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            await node.send_text(line_text(i, rng))
            i += 1
            sent.value = i
            cpu_ms.value = (time.process_time() - cpu0) * 1000
        while not stop.is_set():  # acknowledgements, resends: until the bench has read its last figures
            await asyncio.sleep(0.1)
    finally:
        await client.stop()


def sender_process(home: str, rate: float, seconds: float, ready, go, stop, sent, cpu_ms) -> None:
    asyncio.run(_sender(home, rate, seconds, ready, go, stop, sent, cpu_ms))


class Terminal:
    """The window's pseudo-terminal: a thread reads what it writes (dropping it, keeping a tail and a count)."""

    def __init__(self, argv: list[str], env: dict, cwd: Path) -> None:
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", SIZE[1], SIZE[0], 0, 0))
        self.proc = subprocess.Popen(
            argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd, start_new_session=True, close_fds=True
        )
        os.close(slave)
        self.bytes = 0
        self.tail = b""
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 1 << 16)
            except OSError:  # the child closed the terminal
                return
            if not chunk:
                return
            with self._lock:
                self.bytes += len(chunk)
                self.tail = (self.tail + chunk)[-(1 << 18) :]

    def text(self) -> str:
        with self._lock:
            raw = self.tail
        return ESCAPES.sub(b"", raw).replace("\u00a0".encode(), b" ").decode(errors="replace")

    def wait_for(self, marker: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if marker in self.text():
                return True
            if self.proc.poll() is not None:
                return False
            time.sleep(0.05)
        return False

    def quit(self) -> int:
        os.write(self.master, b"\x11")  # Ctrl+Q
        try:
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            return self.proc.wait()
        finally:
            self._thread.join(2)
            os.close(self.master)


def received(db: Path) -> int | None:
    """Messages of others in the window's channel database (the lines it received), read-only."""
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
        try:
            own = con.execute("SELECT participant_id FROM channels").fetchone()[0]
            return con.execute("SELECT COUNT(*) FROM messages WHERE sender_id != ?", (own,)).fetchone()[0]
        finally:
            con.close()
    except (sqlite3.Error, TypeError):
        return None


def run(work: Path, a: argparse.Namespace) -> dict:
    import sdschat
    from sdschat.profile import Profile, resolve_paths

    broker = Broker(work / "mosquitto")
    broker.start()
    ctx = multiprocessing.get_context("spawn")
    ready, go, stop = ctx.Event(), ctx.Event(), ctx.Event()
    sent, sender_cpu_ms = ctx.Value("q", 0), ctx.Value("d", 0.0)
    term = sender = None
    out: dict = {"code": os.path.dirname(sdschat.__file__), "rows": []}
    try:
        alice_home, bob_home = make_profiles(work, broker.url, a.history)
        alice = Profile.load(resolve_paths(alice_home))
        channel = next(iter(alice.channels))
        db = alice.db_path(alice.channels[channel])
        env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
        env.update(TERM="xterm-256color", SDSCHAT_HOME=str(alice_home))
        argv = [*shlex.split(a.window_cmd), "--home", str(alice_home)]
        t_spawn = time.monotonic()
        term = Terminal(argv, env, cwd=work)
        out["pid"] = term.proc.pid
        print(
            f"window: pid {term.proc.pid}, `{' '.join(argv)}` in a {SIZE[0]}x{SIZE[1]} pty; code {out['code']}",
            flush=True,
        )
        sender = ctx.Process(
            target=sender_process,
            args=(str(bob_home), a.rate, a.minutes * 60, ready, go, stop, sent, sender_cpu_ms),
            daemon=True,
        )
        sender.start()
        if not term.wait_for(f"#{channel}", 60):
            raise SystemExit(f"bench: the window never painted #{channel}; it wrote: {term.text()[-800:]!r}")
        out["paint_s"] = time.monotonic() - t_spawn
        if not ready.wait(60):
            raise SystemExit("bench: the sender's node did not start within 60 s")
        time.sleep(2.0)  # the window settles (the sender's join, first sync)
        pid = term.proc.pid
        c0, t0 = cpu_s(pid), time.monotonic()
        time.sleep(a.idle)
        out["idle_percent"] = 100 * (cpu_s(pid) - c0) / (time.monotonic() - t0)

        go.set()
        start = time.monotonic()
        cpu0, rss0, bytes0 = cpu_s(pid), rss_kb(pid), term.bytes
        out["rss0_mb"] = rss0 / 1024
        prev = {"t": 0.0, "sent": 0, "cpu": 0.0, "rss": rss0, "bytes": bytes0}
        print(
            f"idle window: {out['idle_percent']:.1f}% of a core over {a.idle:g} s; RSS {rss0 / 1024:.1f} MB "
            f"when the first line is sent (first paint {out['paint_s']:.1f} s after spawn)",
            flush=True,
        )
        print(
            f"{'elapsed s':>9} {'lines':>7} {'CPU s':>8} {'% intvl':>7} {'% all':>6} {'ms/line':>7} "
            f"{'RSS MB':>7} {'KB/line':>7} {'out KB/line':>11}",
            flush=True,
        )
        duration = a.minutes * 60
        k = 1
        while True:
            due = start + min(k * a.interval, duration)
            while time.monotonic() < due:
                if term.proc.poll() is not None:
                    raise SystemExit(f"bench: the window exited ({term.proc.returncode}): {term.text()[-800:]!r}")
                time.sleep(min(0.2, max(0.0, due - time.monotonic())))
            now = time.monotonic() - start
            row = {"t": now, "sent": sent.value, "cpu": cpu_s(pid) - cpu0, "rss": rss_kb(pid), "bytes": term.bytes}
            lines = row["sent"] - prev["sent"]
            span = row["t"] - prev["t"]
            row["pct"] = 100 * (row["cpu"] - prev["cpu"]) / span
            row["pct_all"] = 100 * row["cpu"] / row["t"]
            row["ms_line"] = 1000 * (row["cpu"] - prev["cpu"]) / lines if lines else float("nan")
            row["kb_line"] = (row["rss"] - prev["rss"]) / lines if lines else float("nan")
            row["out_kb_line"] = (row["bytes"] - prev["bytes"]) / 1024 / lines if lines else float("nan")
            out["rows"].append(row)
            print(
                f"{row['t']:9.0f} {row['sent']:7,} {row['cpu']:8.1f} {row['pct']:7.1f} {row['pct_all']:6.1f} "
                f"{row['ms_line']:7.1f} {row['rss'] / 1024:7.1f} {row['kb_line']:7.1f} {row['out_kb_line']:11.1f}",
                flush=True,
            )
            prev = row
            k += 1
            if now >= duration - 0.01:
                break
        out["sender_ms_line"] = sender_cpu_ms.value / max(1, sent.value)
        out["sent"] = sent.value
        # the last line reaches the screen (and the database) within a few seconds
        last = f"line {sent.value - 1:06d}"
        out["last_shown"] = term.wait_for(last, 15)
        out["received"] = received(db)
        stop.set()
        out["exit"] = term.quit()
        term = None
        sender.join(30)
    finally:
        stop.set()
        if term is not None and term.proc.poll() is None:
            os.killpg(term.proc.pid, signal.SIGKILL)
            term.proc.wait()
        if sender is not None and sender.is_alive():
            sender.kill()
            sender.join(5)
        broker.close()
    return out


def summarize(r: dict, a: argparse.Namespace) -> bool:
    rows = r["rows"]
    last = rows[-1]
    rate = last["sent"] / last["t"]
    ms_line = 1000 * last["cpu"] / max(1, last["sent"])
    print(
        f"window: CPU {last['pct_all']:.1f}% of a core at {rate:.1f} lines/s ({ms_line:.1f} ms a line), "
        f"RSS {r['rss0_mb']:.0f} -> {last['rss'] / 1024:.0f} MB, last-interval growth {last['kb_line']:.1f} KB/line"
    )
    # an hour at the target rate: the RSS fit over the second half of the run (once caches have had time to fill)
    hour_lines = int(TARGET_RATE * TARGET_HOUR_S)
    half = [x for x in rows if x["t"] >= last["t"] / 2] or rows
    if last["sent"] >= hour_lines:
        hour_mb, how = max(x["rss"] for x in rows) / 1024, "measured (peak)"
    elif len(half) >= 2:
        a0, per_line, _ = linfit([x["sent"] for x in half], [x["rss"] for x in half])
        hour_mb = max(last["rss"], a0 + per_line * hour_lines) / 1024
        how = f"extrapolated from {last['sent']:,} lines ({per_line:.1f} KB/line over the second half)"
        if last["sent"] < NODE_CAPS:
            how += (
                f"; an overestimate: the node's bounded parts (log window, repair cache) fill for the first "
                f"{NODE_CAPS:,} lines"
            )
    else:
        hour_mb = last["rss"] / 1024 + max(0.0, last["kb_line"]) * (hour_lines - last["sent"]) / 1024
        how = f"extrapolated from {last['sent']:,} lines (the last interval's growth)"
    # CPU at the target rate: the measured share scaled to 10 lines/s when the run used another rate
    cpu_at_target = last["pct_all"] * TARGET_RATE / rate if rate else float("nan")
    print(
        f"RSS after {hour_lines:,} lines (an hour at {TARGET_RATE:g}/s): {hour_mb:.0f} MB, {how} "
        f"[target <= {TARGET_RSS_MB:.0f} MB]"
    )
    print(
        f"CPU at {TARGET_RATE:g} lines/s: {cpu_at_target:.1f}% of a core"
        f"{'' if abs(rate - TARGET_RATE) < 0.5 else ' (scaled from the measured rate)'} "
        f"[target <= {TARGET_CPU_PERCENT:g}%]"
    )
    print(
        f"messages of others in the window's database: {r['received']} ({r['sent']} lines sent); "
        f"last line on screen: {r['last_shown']}; "
        f"exit status {r['exit']}; the sender's headless node: {r['sender_ms_line']:.1f} ms CPU a line"
    )
    ok = cpu_at_target <= TARGET_CPU_PERCENT and hour_mb <= TARGET_RSS_MB
    verdict = "PASS" if ok else "FAIL"
    if a.smoke:
        print(f"targets not enforced in a smoke run (it would be {verdict})")
    else:
        print(
            f"{verdict}: CPU {cpu_at_target:.1f}% (<= {TARGET_CPU_PERCENT:g}%), "
            f"RSS an hour {hour_mb:.0f} MB (<= {TARGET_RSS_MB:.0f} MB)"
        )
    return ok


def main() -> int:
    global SIZE
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=60.0, help="how long the sender sends")
    ap.add_argument("--rate", type=float, default=TARGET_RATE, help="lines a second")
    ap.add_argument("--interval", type=float, default=60.0, help="seconds between rows")
    ap.add_argument("--idle", type=float, default=10.0, help="seconds of idle CPU measured before the first line")
    ap.add_argument("--size", default=f"{SIZE[0]}x{SIZE[1]}", help="the terminal, COLUMNSxROWS")
    ap.add_argument("--history", type=int, default=0, help="old messages in the channel before the window opens")
    ap.add_argument(
        "--window-cmd",
        default=f"{shlex.quote(sys.executable)} -m sdschat",
        help="the window's command, before `--home DIR` (e.g. under cProfile)",
    )
    ap.add_argument("--workdir", type=Path, help="keep the profiles and broker log here (default: a temp folder)")
    ap.add_argument("--smoke", action="store_true", help="~35 s at 5 lines/s, a row every 6 s (the test suite)")
    a = ap.parse_args()
    SIZE = tuple(int(n) for n in a.size.lower().split("x"))
    if a.smoke:
        a.minutes, a.rate, a.interval, a.idle = 0.4, 5.0, 6.0, 3.0
    print(
        f"window soak: {a.rate:g} lines/s for {a.minutes:g} min, a row every {a.interval:g} s, "
        f"{a.history:,} messages of history, terminal {SIZE[0]}x{SIZE[1]}",
        flush=True,
    )
    if a.workdir:
        a.workdir.mkdir(parents=True, exist_ok=True)
        r = run(a.workdir, a)
    else:
        with tempfile.TemporaryDirectory(prefix="sdschat-window-soak-") as tmp:
            r = run(Path(tmp), a)
    ok = summarize(r, a)
    return 0 if ok or a.smoke else 1


if __name__ == "__main__":
    sys.exit(main())
