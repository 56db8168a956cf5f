"""Bare ``sdschat`` on a real terminal (a pty): with no profile it asks for a name, creates the profile with a
first channel, opens the window, and Ctrl+Q quits with exit status 0."""

from __future__ import annotations

import os
import pty
import select
import sys
import time

from sdschat.profile import Profile, resolve_paths


def read_until(fd: int, needle: bytes, timeout: float) -> bytes:
    seen = b""
    deadline = time.monotonic() + timeout
    while needle not in seen:
        left = deadline - time.monotonic()
        assert left > 0, f"no {needle!r} on the terminal; it showed: {seen[-2000:]!r}"
        ready, _, _ = select.select([fd], [], [], min(left, 0.5))
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # the child closed the terminal
                break
            seen += chunk
    return seen


def drain(fd: int, wait: float = 0.2) -> None:
    ready, _, _ = select.select([fd], [], [], wait)
    if ready:
        try:
            os.read(fd, 65536)
        except OSError:
            pass


def test_first_run_asks_for_a_name_then_ctrl_q_exits_0(tmp_path) -> None:
    home = tmp_path / "home"
    pid, fd = pty.fork()
    if pid == 0:  # the child: sdschat on the pty, 120x40
        os.environ.update({"TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"})
        os.execv(sys.executable, [sys.executable, "-m", "sdschat", "--home", str(home)])
    try:
        read_until(fd, b"your name:", 30)
        os.write(fd, b"alice\r")
        read_until(fd, b"Channels", 60)  # the window is drawn (stderr said "#general" before it started)
        read_until(fd, b"connected", 30)
        for _ in range(3):
            drain(fd)
        os.write(fd, b"\x11")  # Ctrl+Q
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            drain(fd)  # a terminal nobody reads blocks the app's writes

        else:
            os.kill(pid, 9)
            raise AssertionError("sdschat did not quit on Ctrl+Q")
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        os.close(fd)
    profile = Profile.load(resolve_paths(home))
    assert profile.name == "alice" and list(profile.channels) == ["general"]
    assert profile.channel("general").read_ms > 0  # it was on screen


def _on_a_pty(argv: list[str], env: dict[str, str], cwd) -> tuple[int, bytes]:
    """``sdschat ARGV`` on a terminal: its exit status and everything it wrote."""
    pid, fd = pty.fork()
    if pid == 0:
        os.chdir(cwd)
        os.execve(sys.executable, [sys.executable, "-m", "sdschat", *argv], {**env, "TERM": "xterm-256color"})
    seen = b""
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            ready, _, _ = select.select([fd], [], [], 0.2)
            if ready:
                try:
                    seen += os.read(fd, 65536)
                except OSError:
                    pass
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status), seen
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        raise AssertionError(f"sdschat {argv} neither asked nor quit: {seen[-500:]!r}")
    finally:
        os.close(fd)


def test_first_run_with_an_empty_home_is_one_line_and_writes_nothing(tmp_path) -> None:
    """An empty ``--home`` or ``$SDSCHAT_HOME`` would put the profile in the current folder (or, silently, in the
    platform's): refused before anything is asked or written."""
    user = tmp_path / "user"  # the platform's folders live under $HOME
    user.mkdir()
    env = {**os.environ, "HOME": str(user), "XDG_CONFIG_HOME": str(user / ".config"),
           "XDG_DATA_HOME": str(user / ".local")}
    env.pop("SDSCHAT_HOME", None)
    for argv, extra in ((["--home", ""], {}), ([], {"SDSCHAT_HOME": ""}), ([], {"SDSCHAT_HOME": "  "})):
        code, seen = _on_a_pty(argv, {**env, **extra}, tmp_path)
        lines = [line for line in seen.decode(errors="replace").splitlines() if line.strip()]
        assert code == 2 and len(lines) == 1 and "empty" in lines[0], (argv, extra, seen)
        assert b"your name" not in seen and b"Traceback" not in seen
    assert sorted(p.name for p in tmp_path.iterdir()) == ["user"] and list(user.iterdir()) == []
