"""The profile's kept broker session: one MQTT client id, used by one process at a time.

A window on an external broker keeps an MQTT session (:class:`sdschat.transport.MqttTransport`'s
``session_expiry_s``), so the broker queues what is sent to the profile's channels while the window is
closed. The broker finds the session by its client id, which must therefore be the same at every start:
``session.id`` in the profile's data folder (0600), ``sdschat-`` and 16 random hex digits -- nothing of the
participant id or the profile's name. Two processes with one client id would take the session from each other
(the broker drops the older connection) in turn: the one that holds an advisory lock on ``session.id`` (the
kernel drops it with the process, however it ends) uses the kept session; any other (a second window) connects
afresh with a random id, as every sdschat did before. A new profile gets its id when it is made; an older one
when its window first opens.
"""

from __future__ import annotations

import fcntl
import os
import re
from pathlib import Path

from .errors import ProfileError
from .files import private_dir, write_private

__all__ = ["BrokerSession", "claim_session", "ensure_session_id"]

_ID = re.compile(r"^sdschat-[0-9a-f]{16}$")


class BrokerSession:
    """A claimed session: its client id, held until :meth:`release` (or the process ends)."""

    def __init__(self, client_id: str, fd: int) -> None:
        self.client_id = client_id
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # (closing drops the lock)
            self._fd = None

    def __repr__(self) -> str:
        return f"BrokerSession({self.client_id!r}, held={self._fd is not None})"


def _read_id(file: Path) -> str:
    try:
        text = file.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return ""
    return text if _ID.match(text) else ""


def ensure_session_id(data_dir: Path) -> None:
    """Give the profile a session id if it has none (or a damaged one: the broker then starts a new session,
    and nothing is lost that SDS and the store node cannot bring)."""
    file = data_dir / "session.id"
    if not _read_id(file):
        write_private(file, f"sdschat-{os.urandom(8).hex()}\n".encode("ascii"))


def claim_session(data_dir: Path) -> BrokerSession | None:
    """The profile's kept session if no other process holds it, else None (then: connect afresh)."""
    try:
        private_dir(data_dir)
        ensure_session_id(data_dir)
        fd = os.open(data_dir / "session.id", os.O_RDONLY)
    except (OSError, ProfileError):
        return None  # (a read-only profile, say)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        client_id = os.read(fd, 64).decode("ascii", "replace").strip()  # (the file we hold, not a newer one)
    except OSError:
        os.close(fd)
        return None
    if not _ID.match(client_id):
        os.close(fd)
        return None
    return BrokerSession(client_id, fd)
