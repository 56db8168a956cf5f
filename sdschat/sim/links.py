"""Messages between worker processes: one socket per pair, non-blocking, length-prefixed pickles."""

from __future__ import annotations

import os
import pickle
import select
from typing import Any

__all__ = ["Links"]


class Links:
    """Messages to and from the other workers.

    Writes never block (what the socket does not take waits in a buffer and
    goes out at the next :meth:`flush`, or while :meth:`receive` waits), so
    two workers sending to each other at once cannot deadlock on full socket
    buffers however large their frames.
    """

    _HEAD = 8

    def __init__(self, conns: dict[int, Any]) -> None:
        self.conns = dict(sorted(conns.items()))  # the Connection objects own the file descriptors
        self.fds = {peer: conn.fileno() for peer, conn in self.conns.items()}
        for fd in self.fds.values():
            os.set_blocking(fd, False)
        self.out = {peer: bytearray() for peer in self.fds}
        self.inb = {peer: bytearray() for peer in self.fds}

    def send_all(self, msg: Any) -> None:
        data = pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL)
        head = len(data).to_bytes(self._HEAD, "little")
        for buf in self.out.values():
            buf += head
            buf += data
        self.flush()

    def flush(self) -> None:
        for peer, buf in self.out.items():
            while buf:
                try:
                    n = os.write(self.fds[peer], buf)
                except BlockingIOError:
                    break
                del buf[:n]

    def drain(self) -> None:
        """Block until everything queued has been written."""
        self.flush()
        while any(self.out.values()):
            select.select([], [self.fds[p] for p, b in self.out.items() if b], [], 5.0)
            self.flush()

    def receive(self, block: bool) -> list[tuple[int, Any]]:
        """The messages that have arrived, as ``(peer, message)`` in order per peer.

        With ``block``, wait until there is at least one (flushing queued output meanwhile).
        """
        got: list[tuple[int, Any]] = []
        while True:
            for peer, fd in self.fds.items():
                self._read(peer, fd, got)
            if got or not block:
                return got
            pending = [self.fds[p] for p, b in self.out.items() if b]
            _, writable, _ = select.select(list(self.fds.values()), pending, [], 5.0)
            if writable:
                self.flush()

    def _read(self, peer: int, fd: int, got: list[tuple[int, Any]]) -> None:
        """Read what ``peer`` has sent; append its complete messages to ``got``."""
        head = self._HEAD
        buf = self.inb[peer]
        while True:
            try:
                chunk = os.read(fd, 1 << 20)
            except BlockingIOError:
                break
            if not chunk:
                raise RuntimeError(f"simulation worker {peer} went away")
            buf += chunk
            if len(chunk) < 1 << 20:
                break
        pos = 0
        end = len(buf)
        while end - pos >= head:
            size = int.from_bytes(buf[pos : pos + head], "little")
            if end - pos - head < size:
                break
            got.append((peer, pickle.loads(buf[pos + head : pos + head + size])))
            pos += head + size
        if pos:
            del buf[:pos]
