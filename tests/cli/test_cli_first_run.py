"""Bare ``sdschat`` on a real terminal (a pty): with no profile it asks for a name and creates the profile; with no
channel it says how to start or join one and exits 0 (it creates none); with a channel it opens the window, and
Ctrl+Q quits with exit status 0."""

from __future__ import annotations

import os
import pty
import select
import subprocess
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


def _window_until_ctrl_q(home) -> int:
    """Bare ``sdschat`` on a pty, 120x40, with a profile that has a channel: the window is drawn and connects,
    Ctrl+Q quits; its exit status."""
    pid, fd = pty.fork()
    if pid == 0:
        os.environ.update({"TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"})
        os.execv(sys.executable, [sys.executable, "-m", "sdschat", "--home", str(home)])
    try:
        read_until(fd, b"Channels", 60)  # the window is drawn
        read_until(fd, b"connected", 30)
        for _ in range(3):
            drain(fd)
        os.write(fd, b"\x11")  # Ctrl+Q
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status)
            drain(fd)  # a terminal nobody reads blocks the app's writes
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        raise AssertionError("sdschat did not quit on Ctrl+Q")
    finally:
        os.close(fd)


def test_first_run_asks_for_a_name_welcomes_and_creates_no_channel(tmp_path) -> None:
    """No profile: bare ``sdschat`` asks for a name, creates the profile and, having no channel to open, says how to
    start or join one (exit 0) -- it never makes up a channel. Once there is one, the window opens on it and Ctrl+Q
    exits 0."""
    home = tmp_path / "home"
    pid, fd = pty.fork()
    if pid == 0:  # the child: sdschat on the pty, 120x40
        os.environ.update({"TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"})
        os.execv(sys.executable, [sys.executable, "-m", "sdschat", "--home", str(home)])
    try:
        read_until(fd, b"your name:", 30)
        os.write(fd, b"alice\r")
        seen = read_until(fd, b"demo --bots", 30)
        deadline = time.monotonic() + 30
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                raise AssertionError(f"sdschat did not exit after the welcome: {seen[-1000:]!r}")
            drain(fd)  # a terminal nobody reads blocks the app's writes
    finally:
        os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0
    text = seen.decode(errors="replace")
    assert "Welcome to sdschat, alice" in text and "sdschat new NAME" in text and "sdschat join TOKEN" in text
    assert "Traceback" not in text and "#general" not in text
    profile = Profile.load(resolve_paths(home))
    assert profile.name == "alice" and list(profile.channels) == []

    # again, with the profile: the same welcome, exit 0, still no channel
    code, seen = _on_a_pty(["--home", str(home)], dict(os.environ), tmp_path)
    assert code == 0 and b"Welcome to sdschat, alice" in seen and b"sdschat new NAME" in seen, seen
    assert list(Profile.load(resolve_paths(home)).channels) == []

    # a channel of the person's choosing: now the window opens on it
    made = subprocess.run(
        [sys.executable, "-m", "sdschat", "new", "lobby", "--home", str(home)],
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert made.returncode == 0 and made.stdout == "lobby\n", made.stderr
    assert _window_until_ctrl_q(home) == 0
    profile = Profile.load(resolve_paths(home))
    assert list(profile.channels) == ["lobby"]
    assert profile.channel("lobby").read_ms > 0  # it was on screen


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
    env = {
        **os.environ,
        "HOME": str(user),
        "XDG_CONFIG_HOME": str(user / ".config"),
        "XDG_DATA_HOME": str(user / ".local"),
    }
    env.pop("SDSCHAT_HOME", None)
    for argv, extra in ((["--home", ""], {}), ([], {"SDSCHAT_HOME": ""}), ([], {"SDSCHAT_HOME": "  "})):
        code, seen = _on_a_pty(argv, {**env, **extra}, tmp_path)
        lines = [line for line in seen.decode(errors="replace").splitlines() if line.strip()]
        assert code == 2 and len(lines) == 1 and "empty" in lines[0], (argv, extra, seen)
        assert b"your name" not in seen and b"Traceback" not in seen
    assert sorted(p.name for p in tmp_path.iterdir()) == ["user"] and list(user.iterdir()) == []
