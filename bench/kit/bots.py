"""`sdschat bot` processes for the reliability runs: each with its own SQLite database, killable with SIGKILL and
restartable on the same database, with the protocol's timers scaled down so a run settles in seconds."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

SDSCHAT = [sys.executable, "-m", "sdschat"]

#: protocol timers scaled down ~5x so runs settle in seconds (as tests/node/test_node_cli.py's FAST)
FAST_TUNE = [
    "repair_t_min_ms=300",
    "repair_t_max_ms=1500",
    "resend_unacknowledged_ms=400",
    "resend_possibly_acknowledged_ms=1200",
    "resend_max_interval_ms=3000",
    "sync_interval_ms=2000",
    "sync_jitter_ms=500",
]
FAST = [a for kv in FAST_TUNE for a in ("--tune", kv)]
#: the same settings as keyword arguments of sdschat.node.node_channel_config
FAST_CONFIG = {k: int(v) for k, v in (kv.split("=") for kv in FAST_TUNE)}
#: how long a bot of a lossy run lingers once all is quiet: three of the slowest resends. A bot leaves after
#: `--linger` seconds without a peer's resend or repair; with one resend interval (3 s) a single lost resend let
#: every peer leave while a sender still waited for its acknowledgement, alone for good (seen under load).
LINGER_S = 3 * FAST_CONFIG["resend_max_interval_ms"] / 1000


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
        cmd = [
            *SDSCHAT,
            "bot",
            "--name",
            self.name,
            "--key-file",
            str(self.folder / "k.key"),
            "--broker",
            url or self.url,
            "--db",
            str(self.db),
            "--max-runtime",
            str(max_runtime),
            *self.args,
            *extra,
        ]
        with open(self.out_path, "a") as out:
            out.write(f"--- start {self.starts}: {' '.join(cmd[3:])}\n")
            out.flush()
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.starts += 1
        return self.proc

    @property
    def started(self) -> subprocess.Popen:
        """The process of the last start; AssertionError before the first, which is a mistake of the caller."""
        assert self.proc is not None, f"{self.name} was never started"
        return self.proc

    @property
    def pid(self) -> int:
        return self.started.pid

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait_connected(self, timeout: float = 20.0) -> bool:
        """Wait until this start of the bot reports itself connected (True) or exits (False)."""
        marker = f"--- start {self.starts - 1}:"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            out = self.output()
            if f"{self.name}: participant " in out[out.rfind(marker) :]:
                return True
            if not self.running():
                return False
            time.sleep(0.05)
        return self.running()

    def kill9(self) -> None:
        if self.running():
            self.started.send_signal(signal.SIGKILL)
            self.started.wait(10)
            self.kills += 1

    def terminate(self) -> None:
        if self.running():
            self.started.send_signal(signal.SIGTERM)

    def wait(self, timeout: float) -> int:
        code = self.started.wait(timeout)
        self.exits.append(code)
        return code

    def output(self) -> str:
        try:
            return self.out_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""


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


def env_with(**extra: str) -> dict:
    return {**os.environ, **extra}
