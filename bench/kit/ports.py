"""Loopback ports: a free one to bind a broker to, and a wait until something listens on one."""

from __future__ import annotations

import socket
import subprocess
import time


def free_port() -> int:
    """A TCP port nothing listens on at this moment (the kernel's pick for a bind to port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_listening(port: int, timeout: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    """Return once 127.0.0.1:``port`` accepts a connection; RuntimeError after ``timeout`` seconds, or at once when
    ``proc`` (the server that should be listening) has exited."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"the server exited with code {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.02)
    raise RuntimeError(f"nothing listening on 127.0.0.1:{port} after {timeout} s")
