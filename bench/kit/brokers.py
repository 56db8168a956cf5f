"""A killable mosquitto: a real broker process on a fixed loopback port that can be killed with SIGKILL and restarted
on the same port, as when a broker host dies and comes back."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

from kit.ports import free_port, wait_listening


def find_mosquitto() -> str | None:
    """The mosquitto binary on PATH or in the sbin folders Debian installs it to, or None."""
    return shutil.which("mosquitto") or shutil.which("mosquitto", path="/usr/sbin:/usr/local/sbin:/sbin")


def mosquitto_binary() -> str:
    """The mosquitto binary; without one, a bench exits with one line saying how to install it."""
    found = find_mosquitto()
    if not found:
        raise SystemExit("mosquitto not found: install it with `apt-get install -y mosquitto` (bash .ci/setup does)")
    return found


class Broker:
    """mosquitto on a fixed loopback port: start, kill -9, restart (same port), close."""

    name = "mosquitto"

    def __init__(
        self,
        workdir: Path,
        *,
        port: int | None = None,
        max_queued: int = 100_000,
        extra: str = "",
        binary: str | None = None,
    ) -> None:
        self.binary = binary or mosquitto_binary()
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self.config = self.workdir / f"mosquitto-{self.port}.conf"
        self.config.write_text(
            f"listener {self.port} 127.0.0.1\nallow_anonymous true\nmax_queued_messages {max_queued}\n"
            f"set_tcp_nodelay true\npersistence false\nlog_dest stderr\n{extra}"
        )
        self.log_path = self.workdir / f"mosquitto-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.restarts = 0

    @property
    def url(self) -> str:
        return f"mqtt://{self.host}:{self.port}"

    def _spawn(self) -> subprocess.Popen[bytes]:
        with open(self.log_path, "ab") as log:
            return subprocess.Popen(
                [self.binary, "-c", str(self.config)], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )

    def start(self, timeout: float = 10.0) -> None:
        """Start and wait until the port accepts connections. A process that exits at once is started again: the
        port may linger a moment after a kill -9."""
        assert self.proc is None or self.proc.poll() is not None
        self.proc = self._spawn()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                time.sleep(0.1)
                self.proc = self._spawn()
                continue
            try:
                wait_listening(self.port, 0.2, self.proc)
                return
            except RuntimeError:
                continue
        self.kill()
        raise RuntimeError(
            f"mosquitto did not listen on {self.port}: {self.log_path.read_text(errors='replace')[-2000:]}"
        )

    def kill(self) -> None:
        """SIGKILL: connections drop at once, as when a broker host dies."""
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
