"""Broker faults: mosquitto killed and restarted, unreachable at start, dropping frames for a slow subscriber.

1. restart   Three running nodes (in-process, real mosquitto). The broker is killed -9 while they
             chat, stays down ``down`` seconds (each value in turn) while they keep sending (publishes
             fail: SDS keeps the messages in its outgoing buffer), then restarts on the same port.
             Measured: time from the broker listening again to every node reconnected (paho
             reconnects with backoff 0.5 s doubling to 30 s), and until every log holds every message.
2. unreachable  `sdschat bot --broker mqtt://127.0.0.1:PORT` with nothing listening there: exit status,
             stderr, time to fail. Then the broker starts and the same command (same database) runs.
3. slow      mosquitto with max_queued_messages ``max_queued`` (10): one bot is frozen (SIGSTOP) while
             others send a burst, so mosquitto drops QoS 0 frames for it ($SYS dropped counter); then
             SIGCONT: the frozen bot carries on and SDS must recover every message. Run with one peer
             bursting, then with two peers bursting at once (concurrent bursts can push a message out of
             every causal-history window: see tests/reliability/test_rel_chaos.py).

The long runs are tests/harness/test_broker_faults.py (``pytest -m slow``), short ones
tests/reliability/test_rel_broker_faults.py.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
from pathlib import Path

import kit as H

# ------------------------------------------------------------------ 1. restart


async def _restart_async(workdir: Path, down_s: float, nodes: int, per_phase: int) -> dict:
    from sdschat.crypto import ChannelKey
    from sdschat.node import Node, NodeConfig, node_channel_config
    from sdschat.transport import ConnectionState

    broker = H.Broker(workdir / f"broker-{down_s:g}")
    broker.start()
    key = ChannelKey.generate("broker-restart")
    group: list[Node] = []
    reconnected: dict[str, float] = {}
    try:
        for i in range(nodes):
            cfg = NodeConfig(
                f"r{i}",
                key,
                workdir / f"restart-{down_s:g}-r{i}.db",
                broker.url,
                channel_config=node_channel_config(**H.FAST_CONFIG),
                seed=i,
            )
            n = await Node.start(cfg)
            n.transport.inner.add_state_listener(
                lambda ch, name=n.nick: (
                    reconnected.__setitem__(name, time.monotonic()) if ch.state == ConnectionState.CONNECTED else None
                )
            )
            group.append(n)
        sent = 0
        for i in range(per_phase):
            for n in group:
                await n.send_text(f"{n.nick} before {i}")
                sent += 1
            await asyncio.sleep(0.02)
        await _settle(group, sent, 30)
        broker.kill()
        down_at = time.monotonic()
        reconnected.clear()
        failed_before = sum(n.counters["publish_failed"] for n in group)
        while time.monotonic() - down_at < down_s:  # the users keep typing while the broker is gone
            for n in group:
                if sent < 3 * nodes * per_phase:
                    await n.send_text(f"{n.nick} while down {sent}")
                    sent += 1
            await asyncio.sleep(min(0.2, down_s / 4))
        broker.start()
        up_at = time.monotonic()
        deadline = up_at + 90
        while len(reconnected) < nodes and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        all_reconnected = time.monotonic()
        for n in group:
            await n.send_text(f"{n.nick} after")
            sent += 1
        settle_s = await _settle(group, sent, 90)
        logs = [list(n.channel.log) for n in group]
        return {
            "down_s": down_s,
            "messages": sent,
            "publish_failed_while_down": sum(n.counters["publish_failed"] for n in group) - failed_before,
            "reconnect_after_up_s": round(max(reconnected.values(), default=float("nan")) - up_at, 2)
            if len(reconnected) == nodes
            else None,
            "all_reconnected_s": round(all_reconnected - up_at, 2),
            "recovered_s": round(time.monotonic() - up_at, 2),
            "settle_s": settle_s,
            "connects": [n.transport.inner.stats.connects for n in group],
            "converged": all(log == logs[0] for log in logs) and len(logs[0]) == sent,
        }
    finally:
        for n in group:
            await n.stop()
        broker.close()


async def _settle(group, expected: int, timeout: float) -> float | None:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if all(len(n.channel.log) == expected and not n.pending() for n in group):
            return round(time.monotonic() - t0, 2)
        await asyncio.sleep(0.05)
    return None


def restart(workdir: Path, down_s: float = 1.0, nodes: int = 3, per_phase: int = 5) -> dict:
    return asyncio.run(_restart_async(Path(workdir), down_s, nodes, per_phase))


# -------------------------------------------------------------- 2. unreachable


def unreachable(workdir: Path) -> dict:
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    H.keygen(workdir)
    port = H.free_port()
    cmd = [
        *H.SDSCHAT,
        "bot",
        "--name",
        "early",
        "--key-file",
        str(workdir / "k.key"),
        "--broker",
        f"mqtt://127.0.0.1:{port}",
        "--db",
        str(workdir / "early.db"),
        "--count",
        "2",
        "--interval",
        "0.1",
        "--linger",
        "1",
        "--quiet",
        "--max-runtime",
        "20",
        *H.FAST,
    ]
    t0 = time.monotonic()
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    fail_s = time.monotonic() - t0
    pid_before = H.participant_of(workdir / "early.db") if (workdir / "early.db").exists() else None
    broker = H.Broker(workdir / "late-broker", port=port)
    broker.start()
    try:
        peer = H.Bot(workdir, "peer", broker.url, ["--quiet", *H.FAST])
        peer.start("--count", "2", "--interval", "0.1", "--linger", "1", max_runtime=20)
        second = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        peer_code = peer.wait(60)
    finally:
        broker.close()
    ok, state = H.converged([workdir / "early.db", workdir / "peer.db"])
    return {
        "exit_code": first.returncode,
        "stderr": first.stderr.strip(),
        "fail_s": round(fail_s, 2),
        "stderr_lines": len([x for x in first.stderr.splitlines() if x.strip()]),
        "db_created": pid_before is not None,
        "same_identity_after": pid_before == H.participant_of(workdir / "early.db"),
        "second_exit_code": second.returncode,
        "second_stderr": second.stderr.strip(),
        "peer_exit_code": peer_code,
        "converged_after": ok,
        "state": state,
    }


# ------------------------------------------------------------ 3. slow subscriber


class SysWatch:
    """Reads mosquitto's $SYS/broker/publish/messages/dropped (needs sys_interval in the config)."""

    def __init__(self, port: int) -> None:
        import paho.mqtt.client as paho

        self.dropped = 0
        self.client = paho.Client(paho.CallbackAPIVersion.VERSION2)
        self.client.on_message = self._on
        self.client.connect("127.0.0.1", port)
        self.client.subscribe("$SYS/broker/publish/messages/dropped")
        self.client.loop_start()

    def _on(self, client, userdata, msg) -> None:
        try:
            self.dropped = max(self.dropped, int(msg.payload))
        except ValueError:
            pass

    def close(self) -> None:
        self.client.loop_stop()
        self.client.disconnect()


def slow_subscriber(
    workdir: Path,
    *,
    max_queued: int = 10,
    burst: int = 150,
    freeze_s: float = 4.0,
    seed: int = 0,
    chatters: int = 2,
    slow_count: int = 16,
    bursters: int = 2,
    burst_chars: int = 12_000,
) -> dict:
    """(``burst_chars``: each burst line this long, so a burst outgrows the frozen subscriber's socket buffers,
    which hold a few hundred KB: 200 chat lines of ~2 KB frames would fit)"""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    broker = H.Broker(workdir, max_queued=max_queued, extra="sys_interval 1\n")
    broker.start()
    H.keygen(workdir)
    watch = SysWatch(broker.port)
    # everyone is up before anything is sent (no late joiner); the slow one keeps sending slowly throughout;
    # the others linger long enough to outlast the freeze
    slow = H.Bot(workdir, "slow", broker.url, list(H.FAST))  # (not quiet: it says when it is connected)
    fast = [H.Bot(workdir, f"p{i + 1}", broker.url, ["--quiet", *H.FAST]) for i in range(chatters)]
    burst_bots = [H.Bot(workdir, f"burst{i}", broker.url, ["--quiet", *H.FAST]) for i in range(bursters)]
    t0 = time.monotonic()
    try:
        slow.start(
            "--count",
            str(slow_count),
            "--interval",
            "0.5",
            "--start-after",
            "1.5",
            "--linger",
            "3",
            "--seed",
            str(seed),
            max_runtime=120,
        )
        for i, b in enumerate(fast):
            b.start(
                "--count",
                "8",
                "--interval",
                "0.2",
                "--start-after",
                "1.5",
                "--linger",
                str(freeze_s + 2),
                "--seed",
                str(seed + i + 1),
                max_runtime=120,
            )
        for i, b in enumerate(burst_bots):  # they burst once the slow one is frozen
            b.start(
                "--count",
                str(burst),
                "--interval",
                "0",
                "--start-after",
                "3",
                "--linger",
                str(freeze_s + 2),
                "--seed",
                str(seed + 10 + i),
                "--text",
                "{name} #{i} " + "x" * burst_chars,
                max_runtime=120,
            )
        # frozen once subscribed (the bursts start 3 s after each burster connected, however loaded the
        # machine), and kept frozen at least freeze_s and until mosquitto has counted a dropped frame (its $SYS
        # counter is published every second) or, 2.5 s after every burst is out, has not (a short burst may fit
        # in the socket's buffers), at most 30 s
        slow.wait_connected(30)
        # ... and once it has published a line: the others have heard it, so it is a member that is slow, not one
        # that is gone (a member alone holds its resends; these bursts then are the frames it is sent)
        H.wait_until(lambda: len(H.own_accepted(slow.db)) >= 1, 30, 0.02)
        time.sleep(0.3)  # (durable first, then published: it is out and heard by now)
        slow.started.send_signal(signal.SIGSTOP)
        unfreeze_by = time.monotonic() + 30
        time.sleep(freeze_s)
        H.wait_until(
            lambda: watch.dropped > 0 or all(len(H.own_accepted(b.db)) >= burst for b in burst_bots),
            unfreeze_by - time.monotonic(),
            0.1,
        )
        H.wait_until(lambda: watch.dropped > 0, min(2.5, unfreeze_by - time.monotonic()), 0.1)
        dropped_frozen = watch.dropped
        slow.started.send_signal(signal.SIGCONT)
        codes = H.wait_all([slow, *fast, *burst_bots], 200)
        time.sleep(1.2)
        dropped = watch.dropped
    finally:
        for b in [slow, *fast, *burst_bots]:
            if b.running():
                b.started.send_signal(signal.SIGCONT)
            b.kill9()
        watch.close()
        broker.close()
    bots = [slow, *fast, *burst_bots]
    dbs = [b.db for b in bots]
    ok, state = H.converged(dbs)
    figures = H.group_figures(dbs)
    return {
        "max_queued": max_queued,
        "burst": bursters * burst,
        "dropped_by_broker": dropped,
        "dropped_while_frozen": dropped_frozen,
        "exit_codes": codes,
        "converged": ok,
        "state": state,
        "wall_s": round(time.monotonic() - t0, 1),
        "slow_repaired": H.repaired_count(slow.db),
        **figures,
        "workdir": str(workdir),
    }
