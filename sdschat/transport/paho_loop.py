"""Driving one connected paho client from the asyncio loop, with no network thread of its own.

paho's threaded loop costs a thread hop in each direction for every message: an incoming one crosses from
paho's thread to the loop (``call_soon_threadsafe``, a self-pipe write), and every publish from the loop
wakes paho's thread (a write on its socketpair), with the GIL handed over each time. Here the loop runs
paho's steps itself: the selector watches the socket for reading (``loop_read``); when paho has packets
queued (it says so through ``on_socket_register_write``) they are written at the loop's next turn
(``loop_write``), and only a socket too full to take them all is watched for writing; ``loop_misc`` runs
about once a second for the keepalive (PINGREQ, and a broker that stopped answering). paho's callbacks
therefore run on the loop thread, inside those steps, never inside the caller's ``publish``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import paho.mqtt.client as paho

__all__ = ["LoopDriver"]

log = logging.getLogger("sdschat.transport.mqtt")

#: seconds between two ``loop_misc`` calls (paho's own thread wakes at least this often)
MISC_INTERVAL_S = 1.0


class LoopDriver:
    """The network I/O of one paho client whose socket is open, run by the asyncio loop until paho closes it.

    ``failed(exc)`` is called (on the loop) if an exception escapes paho's read, write or keepalive step:
    the socket is then unwatched and the connection is as good as lost.
    """

    def __init__(
        self, loop: asyncio.AbstractEventLoop, client: paho.Client, failed: Callable[[Exception], None]
    ) -> None:
        self._loop = loop
        self._client = client
        self._failed = failed
        self._sock: Any = None
        self._writing = False
        self._tick: asyncio.TimerHandle | None = None
        self._soon: asyncio.Handle | None = None  # a write at the loop's next turn
        #: done once the socket is no longer watched (paho closed it, or :meth:`detach`)
        self.closed: asyncio.Future[None] = loop.create_future()

    def attach(self) -> bool:
        """Watch the client's socket (call on the loop thread once the CONNECT is sent); False if it is closed."""
        client = self._client
        sock = client.socket()
        if sock is None:
            self._done()
            return False
        self._sock = sock
        client.on_socket_close = self._socket_closed
        client.on_socket_register_write = self._register_write
        client.on_socket_unregister_write = self._unregister_write
        self._loop.add_reader(sock, self._read)
        if client.want_write():  # a CONNECT the connecting thread could not write in one go
            self._soon = self._loop.call_soon(self._write)
        self._tick = self._loop.call_later(MISC_INTERVAL_S, self._misc)
        return True

    def detach(self) -> None:
        """Stop watching the socket (it stays open: paho or the caller closes it)."""
        sock, self._sock = self._sock, None
        if sock is not None:
            self._loop.remove_reader(sock)
            if self._writing:
                self._loop.remove_writer(sock)
        self._writing = False
        for handle in (self._tick, self._soon):
            if handle is not None:
                handle.cancel()
        self._tick = self._soon = None
        self._done()

    def _done(self) -> None:
        if not self.closed.done():
            self.closed.set_result(None)

    # ------------------------------------------------------------ paho's socket callbacks
    def _socket_closed(self, client: paho.Client, userdata: Any, sock: Any) -> None:
        if sock is self._sock:
            self.detach()

    def _register_write(self, client: paho.Client, userdata: Any, sock: Any) -> None:
        """paho queued a packet (a publish, an ack, a ping...): write at the loop's next turn."""
        if sock is self._sock and self._soon is None and not self._writing:
            self._soon = self._loop.call_soon(self._write)

    def _unregister_write(self, client: paho.Client, userdata: Any, sock: Any) -> None:
        """paho wrote everything it had (or is closing the socket)."""
        if sock is self._sock and self._writing:
            self._writing = False
            self._loop.remove_writer(sock)

    # ------------------------------------------------------------ the loop's calls into paho
    def _read(self) -> None:
        client = self._client
        try:
            client.loop_read()
            # TLS: records already decrypted wait in the SSL object, where the selector cannot see them
            while _decrypted_waiting(client.socket()):
                client.loop_read()
        except Exception as exc:  # noqa: BLE001 - a paho bug: the connection is unusable
            self._fail("read", exc)

    def _write(self) -> None:
        self._soon = None
        client = self._client
        try:
            client.loop_write()
        except Exception as exc:  # noqa: BLE001
            self._fail("write", exc)
            return
        # what the socket could not take waits for it to be writable (paho tells only once per queueing)
        sock = self._sock
        if sock is not None and not self._writing and client.want_write():
            self._writing = True
            self._loop.add_writer(sock, self._write)

    def _misc(self) -> None:
        self._tick = None
        try:
            self._client.loop_misc()
        except Exception as exc:  # noqa: BLE001
            self._fail("keepalive", exc)
            return
        if self._sock is not None:
            self._tick = self._loop.call_later(MISC_INTERVAL_S, self._misc)

    def _fail(self, step: str, exc: Exception) -> None:
        log.debug("MQTT network %s failed", step, exc_info=True)
        self.detach()
        with contextlib.suppress(Exception):
            self._failed(exc)


def _decrypted_waiting(sock: Any) -> bool:
    """Whether a TLS socket holds bytes already read and decrypted (a plain socket never does)."""
    pending = getattr(sock, "pending", None)
    return pending is not None and pending() > 0
