"""The real ``sdschat`` command in a real terminal, not through Pilot: a tmux pane (what many people run it in),
driven with the bytes a terminal sends and read back from the pane's screen (``capture-pane``); and a bare
pseudo-terminal for resizing fast (tmux passes a pane's new size on after a quarter of a second).

Pilot hands Textual key names, so it cannot show what Textual makes of a terminal's bytes (``ESC 2`` for
Alt+2), nor draw through a terminal's own idea of a character's width.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import fcntl
import os
import pty
import select
import shutil
import signal
import struct
import subprocess
import sys
import termios
import time
import uuid
from pathlib import Path

__all__ = ["Tmux", "Pty", "tmux_binary", "sdschat_command", "cells", "column_of"]


def tmux_binary() -> str:
    """tmux, or an AssertionError saying how to install it (never a skip)."""
    found = shutil.which("tmux")
    assert found is not None, "tmux not found: install it with `apt-get install -y tmux` (bash .ci/setup does)"
    return found


def sdschat_command() -> str:
    """The installed ``sdschat`` console script of this interpreter's environment."""
    here = Path(sys.executable).with_name("sdschat")
    found = str(here) if here.exists() else shutil.which("sdschat")
    assert found is not None, "no `sdschat` command next to this Python (pip install -e . first)"
    return found


_libc = ctypes.CDLL(ctypes.util.find_library("c"))
_libc.wcwidth.argtypes = [ctypes.c_wchar]
_libc.wcwidth.restype = ctypes.c_int


def cells(text: str) -> int:
    """Cells ``text`` takes in the pane as tmux counts them (the C library's ``wcwidth``, one code point at a
    time: a skin-tone modifier is two more cells there, where Rich counts none)."""
    return sum(max(0, _libc.wcwidth(ch)) for ch in text)


def column_of(row: str, mark: str) -> int | None:
    """The cell column of ``mark`` in a captured row (None if absent)."""
    at = row.find(mark)
    return None if at < 0 else cells(row[:at])


class Tmux:
    """One detached tmux server of its own (its own socket, no config of the person's) with one pane."""

    def __init__(self, workdir: Path) -> None:
        self.binary = tmux_binary()
        self.socket = f"sdschat-test-{uuid.uuid4().hex[:10]}"
        self.config = workdir / "tmux.conf"
        # a pane whose program ended stays, with its last screen (a traceback) and its exit status
        self.config.write_text("set -g remain-on-exit on\nset -g history-limit 5000\n")
        self.env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE", "COLUMNS", "LINES")}
        self.env["LANG"] = "C.UTF-8"
        import locale

        locale.setlocale(locale.LC_CTYPE, "C.UTF-8")  # wcwidth as tmux's

    def tmux(self, *args: str, check: bool = True) -> str:
        out = subprocess.run(
            [self.binary, "-u", "-L", self.socket, "-f", str(self.config), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=20,
        )
        if check and out.returncode != 0:
            raise AssertionError(f"tmux {' '.join(args)}: {out.stderr.strip()}")
        return out.stdout

    def start(self, command: list[str], size: tuple[int, int]) -> None:
        line = " ".join(_quote(part) for part in command)
        self.tmux("new-session", "-d", "-s", "t", "-x", str(size[0]), "-y", str(size[1]), line)

    def close(self) -> None:
        socket_path = self.tmux("display", "-p", "#{socket_path}", check=False).strip()
        self.tmux("kill-server", check=False)
        if socket_path.endswith(self.socket):  # tmux leaves it behind
            Path(socket_path).unlink(missing_ok=True)

    # ------------------------------------------------------------ input

    def send_bytes(self, data: bytes) -> None:
        """``data`` as the terminal would send it: each byte as typed (ESC included)."""
        self.tmux("send-keys", "-t", "t", "-H", *(f"{b:02x}" for b in data))

    def type(self, text: str) -> None:
        self.tmux("send-keys", "-t", "t", "-l", text)

    def resize(self, width: int, height: int) -> None:
        self.tmux("resize-window", "-t", "t", "-x", str(width), "-y", str(height))

    # ----------------------------------------------------------- output

    def screen(self) -> list[str]:
        return self.tmux("capture-pane", "-p", "-t", "t").split("\n")[:-1]

    def scrollback(self) -> str:
        return self.tmux("capture-pane", "-p", "-S", "-", "-t", "t")

    def dead(self, settle: float = 3.0) -> tuple[bool, str]:
        """(whether the program ended, its exit status; ``"signal N"`` if a signal ended it). tmux marks the pane
        dead when the pty closes, and knows the status once it has reaped the child: a moment later, which a busy
        machine can stretch; a dead pane is polled for its status for up to ``settle`` seconds.

        A tmux built with libutempter can miss the child's SIGCHLD altogether: utempter's helper, run as the pty
        closes, puts in a SIGCHLD handler of its own for a moment, and a child ending in that moment stays a zombie
        tmux never reaps (tmux issue 311; seen here about once in a dozen quits under load). A dead pane with no
        status is therefore sent a SIGCHLD of its own after a short wait, which makes tmux reap it."""
        deadline = time.monotonic() + settle
        nudge_at = time.monotonic() + 0.5
        while True:
            dead, status, sig = (
                self.tmux("display", "-p", "-t", "t", "#{pane_dead} #{pane_dead_status} #{pane_dead_signal}").split()
                + ["", ""]
            )[:3]
            if dead != "1" or status or sig or time.monotonic() > deadline:
                return dead == "1", status or (f"signal {sig}" if sig else "")
            if time.monotonic() > nudge_at:
                self._nudge_server()
                nudge_at = time.monotonic() + 0.5
            time.sleep(0.05)

    def _nudge_server(self) -> None:
        """SIGCHLD to this tmux server: it then waits for every child that has ended (see :meth:`dead`)."""
        server = self.tmux("display", "-p", "#{pid}", check=False).strip()
        if server.isdigit():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(server), signal.SIGCHLD)

    def exit_status(self, timeout: float = 45.0) -> str:
        """Wait for the program to end and tmux to know how: its exit status, ``"signal N"``, or ``""`` if it
        had not ended (or tmux never learnt the status) within ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            dead, status = self.dead(settle=max(0.0, deadline - time.monotonic()))
            if (dead and status) or time.monotonic() > deadline:
                return status if dead else ""
            time.sleep(0.05)

    def wait_for(self, predicate, timeout: float = 20.0, what: str = "the screen") -> list[str]:
        deadline = time.monotonic() + timeout
        while True:
            rows = self.screen()
            if predicate(rows):
                return rows
            dead, status = self.dead()
            if dead:
                raise AssertionError(f"sdschat exited (status {status}) waiting for {what}:\n" + self.scrollback())
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; the screen:\n" + "\n".join(rows))
            time.sleep(0.01)


def _quote(part: str) -> str:
    import shlex

    return shlex.quote(part)


class Pty:
    """The program on a pseudo-terminal of its own (its controlling terminal: a new size is a SIGWINCH at once);
    everything it writes is kept in :attr:`output`."""

    def __init__(self, command: list[str], size: tuple[int, int]) -> None:
        self.master, slave = pty.openpty()
        self._winsize(slave, *size)
        env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE", "COLUMNS", "LINES")}
        env.update(TERM="xterm-256color", LANG="C.UTF-8")

        def controlling_terminal() -> None:  # after setsid (start_new_session): the pty becomes its terminal
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(
            command,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            close_fds=True,
            start_new_session=True,
            preexec_fn=controlling_terminal,
        )
        os.close(slave)
        self.output = bytearray()

    @staticmethod
    def _winsize(fd: int, width: int, height: int) -> None:
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", height, width, 0, 0))

    def resize(self, width: int, height: int) -> int:
        """The new size; returns where in :attr:`output` what is written after it starts."""
        self.read(0)
        mark = len(self.output)
        self._winsize(self.master, width, height)
        return mark

    def read(self, timeout: float) -> None:
        ready, _, _ = select.select([self.master], [], [], timeout)
        while ready:
            try:
                data = os.read(self.master, 65536)
            except OSError:  # the program ended (EIO)
                return
            if not data:
                return
            self.output += data
            ready, _, _ = select.select([self.master], [], [], 0)

    def wait_for(self, needle: bytes, since: int = 0, timeout: float = 20.0, what: str = "") -> None:
        deadline = time.monotonic() + timeout
        while needle not in self.output[since:]:
            if self.proc.poll() is not None:
                self.read(0.1)
                raise AssertionError(
                    f"exited (status {self.proc.returncode}) waiting for {what or needle!r}:\n" + self.text()[-4000:]
                )
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what or needle!r}; last output:\n" + self.text()[-2000:])
            self.read(0.05)

    def wait_quiet(self, quiet: float = 1.0, timeout: float = 60.0) -> None:
        """Read until the program has written nothing for ``quiet`` seconds (at most ``timeout``): its queued
        work (resizes, repaints) is done."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            size = len(self.output)
            self.read(quiet)
            if len(self.output) == size:
                return

    def text(self) -> str:
        return self.output.decode("utf-8", "replace")

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        os.close(self.master)
