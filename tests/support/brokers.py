"""Real MQTT brokers for tests: mosquitto (a subprocess) and the embedded amqtt broker
(in-process, on its own event-loop thread), both restartable on the same port."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

from sdschat.transport import EmbeddedBroker


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_listening(port: int, timeout: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"broker exited with code {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.01)
    raise RuntimeError(f"nothing listening on 127.0.0.1:{port} after {timeout} s")


def find_mosquitto() -> str | None:
    return shutil.which("mosquitto") or shutil.which("mosquitto", path="/usr/sbin:/usr/local/sbin:/sbin")


class Mosquitto:
    """A mosquitto process on a fixed loopback port; can be killed and restarted."""

    name = "mosquitto"

    def __init__(self, binary: str, workdir: Path, port: int | None = None, extra: str = "") -> None:
        self.binary = binary
        self.port = port or free_port()
        self.host = "127.0.0.1"
        self.workdir = workdir
        self.config = workdir / "mosquitto.conf"
        self.config.write_text(
            f"listener {self.port} 127.0.0.1\n"
            "allow_anonymous true\n"
            "max_queued_messages 100000\n"
            "set_tcp_nodelay true\n"
            "persistence false\n"
            "log_dest stderr\n" + extra
        )
        self.log_path = workdir / "mosquitto.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"mqtt://{self.host}:{self.port}"

    def start(self) -> None:
        assert self.proc is None or self.proc.poll() is not None
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        try:
            self.proc = subprocess.Popen(
                [self.binary, "-c", str(self.config)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        finally:
            log.close()
        try:
            _wait_listening(self.port, 5.0, self.proc)
        except RuntimeError as exc:
            self.kill()
            tail = self.log_path.read_text(errors="replace")[-2000:]
            raise RuntimeError(f"mosquitto did not start: {exc}\n{tail}") from None

    def kill(self) -> None:
        """SIGKILL: connections drop at once, as when a broker host dies."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)

    def restart(self) -> None:
        self.kill()
        self.start()

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


class Amqtt:
    """The embedded amqtt broker on its own event-loop thread (tests use asyncio.run)."""

    name = "amqtt"

    def __init__(self, port: int | None = None) -> None:
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="amqtt-test-broker", daemon=True)
        self._thread.start()
        self._broker: EmbeddedBroker | None = None

    @property
    def url(self) -> str:
        return f"mqtt://{self.host}:{self.port}"

    def _run(self, coro: object, timeout: float = 10.0) -> object:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)  # type: ignore[arg-type]

    def start(self) -> None:
        assert self._broker is None
        self._broker = self._run(EmbeddedBroker.start(self.host, self.port))  # type: ignore[assignment]

    def kill(self) -> None:
        if self._broker is not None:
            self._run(self._broker.close())
            self._broker = None

    def restart(self) -> None:
        self.kill()
        self.start()

    def close(self) -> None:
        self.kill()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()


def mosquitto_binary() -> str:
    """The mosquitto binary, or an AssertionError saying how to install it (never a skip)."""
    binary = find_mosquitto()
    assert binary is not None, "mosquitto not found: install it with `apt-get install -y mosquitto` (bash .ci/setup does)"
    return binary
