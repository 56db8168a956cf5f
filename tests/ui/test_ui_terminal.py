"""Bare ``sdschat`` in a real terminal (a tmux pane, see terminal.py): the bytes terminals send for Alt+keys, wide
characters drawn by the terminal's own measure, and every width from 20 to 250 columns."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time

from brokers import Mosquitto, mosquitto_binary
from terminal import Pty, Tmux, column_of, sdschat_command
from ui_helpers import channel_secret

from sdschat.profile import Profile, resolve_paths
from sdschat.ui.sizes import too_small

#: a channel whose name has characters terminals measure their own way: a skin-tone modifier (tmux 3.3: 4 cells,
#: Rich: 2) and an emoji presentation selector (tmux: 1 cell, Rich: 2)
EMOJI_CHANNEL = "fête👍🏽❤️x"


@contextlib.contextmanager
def profile(tmp_path, channels=("team", EMOJI_CHANNEL)):
    """Alice's profile (its folder) with ``channels``, on a mosquitto of its own."""
    broker = Mosquitto(mosquitto_binary(), tmp_path)
    broker.start()
    try:
        home = tmp_path / "alice"
        created = Profile.create(resolve_paths(home), "alice", broker.url)
        for name in channels:
            created.add_channel(name, channel_secret(name))
        yield home
    finally:
        broker.close()


@contextlib.contextmanager
def window(tmp_path, size: tuple[int, int], channels=("team", EMOJI_CHANNEL)):
    """Bare ``sdschat`` on :func:`profile` in a tmux pane of ``size``, once every channel is up."""
    with profile(tmp_path, channels) as home:
        term = Tmux(tmp_path)
        try:
            term.start([sdschat_command(), "--home", str(home)], size)
            marks = [f"{i + 1} ● #" for i in range(len(channels))]  # started and connected
            term.wait_for(
                lambda rows: all(any(m in row for row in rows) for m in marks),
                40,
                "every channel started and connected",
            )
            yield term
        finally:
            term.close()


def header(rows: list[str]) -> str:
    return rows[0]


def input_row(rows: list[str]) -> str:
    return next(row for row in rows if "Message #" in row or "(/help)" in row)


def test_alt_keys_as_terminals_send_them(tmp_path) -> None:
    with window(tmp_path, (80, 24)) as term:
        term.wait_for(lambda rows: "#team · alice" in header(rows), what="#team on screen")

        # Alt+2 as tmux, xterm, GNOME Terminal and kitty send it: ESC then "2" (Textual read it as "™")
        term.send_bytes(b"\x1b2")
        rows = term.wait_for(lambda rows: "#fête👍❤x · alice" in header(rows), what="Alt+2: the second channel")
        assert "™" not in "\n".join(rows)
        term.send_bytes(b"\x1b1")
        term.wait_for(lambda rows: "#team · alice" in header(rows), what="Alt+1: back to the first")
        # Alt+Right / Alt+Left: CSI with the Alt modifier
        term.send_bytes(b"\x1b[1;3C")
        term.wait_for(lambda rows: "#fête👍❤x · alice" in header(rows), what="Alt+Right")
        term.send_bytes(b"\x1b[1;3D")
        term.wait_for(lambda rows: "#team · alice" in header(rows), what="Alt+Left")
        term.send_bytes(b"\x1b9")  # no ninth channel: nothing happens, and nothing is typed
        time.sleep(0.3)
        rows = term.screen()
        assert "#team · alice" in header(rows) and "ª" not in "\n".join(rows)

        # Alt+Enter (ESC CR) breaks the line instead of sending it; Enter sends both lines
        term.type("first line")
        term.send_bytes(b"\x1b\r")
        term.type("second line")
        rows = term.wait_for(
            lambda rows: any(row.rstrip().endswith("▕ second line") for row in rows), what="the draft's second line"
        )
        assert any(row.rstrip().endswith("▕ first line") for row in rows), "\n".join(rows)
        term.send_bytes(b"\r")
        term.wait_for(
            lambda rows: (
                any("alice first line" in row for row in rows)
                and any(row.rstrip().endswith(" second line") and "▕ second line" not in row for row in rows)
            ),
            what="the two-line message in the history",
        )


def test_80x24_gives_the_messages_room_and_wide_characters_keep_their_columns(tmp_path) -> None:
    with window(tmp_path, (80, 24)) as term:
        rows = term.wait_for(lambda rows: "(/help)" in "\n".join(rows), what="the input")
        border = column_of(rows[3], "▕")  # the channel list's right border: the message column starts after it
        assert border is not None and 80 - border - 1 >= 54, "\n".join(rows)
        assert "Connection" not in "\n".join(rows)  # the side panel gave way
        assert input_row(rows).rstrip().endswith("Message #team as alice  (/help)")  # the placeholder on one line

        forty = "0123456789 abcdefghij ABCDEFGHIJ 012345!"
        assert len(forty) == 40
        term.type(forty)
        term.send_bytes(b"\r")
        term.wait_for(
            lambda rows: any(row.rstrip().endswith("alice " + forty) for row in rows),
            what="a 40-character line on one row",
        )
        # Up picks the message: at 80 columns its footer still shows the way out (the last keys do not fit)
        term.send_bytes(b"\x1b[A")
        term.wait_for(lambda rows: rows[-1].lstrip().startswith("esc back  r reply"), what="the cursor's footer")
        term.send_bytes(b"\x1b")
        term.wait_for(lambda rows: "esc back" not in rows[-1], what="Escape: back to the input")

        # emoji with a skin-tone modifier, a ZWJ family, a presentation selector: each row's columns stay put
        term.type("ok 👍🏽 👨‍👩‍👧 ❤️ 🇫🇷 café 漢字 end")
        term.send_bytes(b"\r")
        term.send_bytes(b"\x1b2")  # the channel list repaints its two rows (the one with emoji in its name)
        rows = term.wait_for(lambda rows: "#fête👍❤x · alice" in header(rows), what="Alt+2")
        term.send_bytes(b"\x1b1")
        rows = term.wait_for(
            lambda rows: any(row.rstrip().endswith("漢字 end") for row in rows), what="the emoji message"
        )
        borders = {column_of(row, "▕") for row in rows[1:-1]}
        assert borders == {border}, "\n".join(rows)
        emoji = next(row for row in rows if row.rstrip().endswith("漢字 end"))
        assert "alice ok 👍 👨👩👧 ❤ 🇫🇷 café 漢字 end" in emoji

        # F3 brings the side panel back at this width: every row's text keeps its column
        term.send_bytes(b"\x1bOR")  # F3 (xterm)
        rows = term.wait_for(lambda rows: any("Connection" in row for row in rows), what="F3: the side panel")
        panel = {column_of(row, "▏") for row in rows[1:-1] if "▏" in row}
        assert len(panel) == 1 and {column_of(row, "▕") for row in rows[1:-1]} == {border}, "\n".join(rows)


def test_every_size_from_20_to_250_columns(tmp_path) -> None:
    """Every width from 20 to 250 columns, each painted before the next; heights from 8 rows; then rapid resizes
    (as a window manager sends them while a window is dragged): the process stays up, and below 40x10 it shows
    the notice instead of the layout."""
    with profile(tmp_path) as home:
        term = Pty([sdschat_command(), "--home", str(home)], (80, 24))
        try:
            term.wait_for("#fête".encode(), timeout=40, what="the second channel started")
            os.write(term.master, b"a draft long enough to wrap over the input's lines when the window is narrow " * 2)
            term.wait_for(b"narrow", what="the draft")

            def painted(width: int, height: int, since: int) -> None:
                if too_small(width, height):
                    term.wait_for(
                        f"{width}x{height}: sdschat needs".encode(), since, what=f"the notice at {width}x{height}"
                    )
                else:  # the layout's full repaint (the channel list's title)
                    term.wait_for(b"Channels", since, what=f"the layout at {width}x{height}")

            t0 = time.monotonic()
            for width in range(20, 251):
                painted(width, 24, term.resize(width, 24))
            for height in range(8, 81):
                painted(100, height, term.resize(100, height))
            swept = time.monotonic() - t0

            os.write(term.master, b"\x1bOR")  # F3: the side panel squeezed in as well
            for width, height in [(140, 40), (60, 20), (40, 12), (36, 24), (250, 80), (20, 8)] * 3 + [
                (w, 8 + w % 40) for w in range(250, 19, -3)
            ]:
                term.resize(width, height)
                term.read(0.002)
            mark = term.resize(80, 24)
            term.wait_for(b"Channels", mark, what="the layout back at 80x24")
            # "Channels" may be an earlier size's repaint (a loaded machine is still working through the queued
            # resizes): the test types once the app has painted nothing for a second, at 80x24
            term.wait_quiet()
            assert term.proc.poll() is None
            assert "Traceback" not in term.text() and "ValueError" not in term.text()
            # typing still goes to the input (hidden while the window was too small, it lost the focus)
            mark = len(term.output)
            os.write(term.master, b"Zq")
            term.wait_for(b"Zq", mark, what="typing after the resizes")
            assert swept < 45, f"{swept:.1f} s for the sweep"
        finally:
            term.close()


def _sdschat(*args: str, timeout: float = 40) -> subprocess.CompletedProcess:
    p = subprocess.run([sdschat_command(), *args], capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, p.stderr
    return p


def _unread(home) -> dict[str, int]:
    """``sdschat channels --json``'s unread count of each channel (another process than the window's)."""
    return {
        row["channel"]: row["unread"]
        for row in map(json.loads, _sdschat("channels", "--json", "--home", str(home)).stdout.splitlines())
    }


def _while_away(alice, bob, texts: str, count: int) -> None:
    """Bob's bot says ``count`` lines in #team to alice's headless bot (the window is closed)."""
    common = ["--channel", "team", "--max-runtime", "30", "--quiet"]
    listener = subprocess.Popen(
        [sdschat_command(), "bot", "--home", str(alice), "--count", "0", "--linger", "4", *common],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(1.0)  # alice's listener is up
    _sdschat(
        "bot", "--home", str(bob), "--count", str(count), "--interval", "0.1", "--linger", "2", "--text", texts, *common
    )
    _, err = listener.communicate(timeout=40)
    assert listener.returncode == 0, err


def test_quit_and_reopen_with_unread_lines_waiting(tmp_path) -> None:
    """Quit on #ops; while the window is closed bob says five lines in #team: the window reopens on #ops with
    #team's five unread, and #team shows "5 new messages since you left" above them. Read to the end, the
    position is saved as the window reads (no quit needed): `sdschat channels` agrees with the window."""
    with profile(tmp_path, channels=("team", "ops")) as alice:
        url = Profile.load(resolve_paths(alice)).broker
        bob = tmp_path / "bob"
        Profile.create(resolve_paths(bob), "bob", url).add_channel("team", channel_secret("team"))
        marks = ["1 ● #team", "2 ● #ops"]

        def up(rows) -> bool:
            return all(any(m in row for row in rows) for m in marks)

        term = Tmux(tmp_path)
        try:
            term.start([sdschat_command(), "--home", str(alice)], (100, 30))
            term.wait_for(up, 40, "both channels up")
            term.send_bytes(b"\x1b2")  # Alt+2 as terminals send it
            term.wait_for(lambda rows: "#ops · alice" in header(rows), what="#ops on screen")
            term.send_bytes(b"\x11")  # Ctrl+Q
            assert term.exit_status(45) == "0"
        finally:
            term.close()

        _while_away(alice, bob, "while away {i}", 5)
        assert _unread(alice) == {"team": 5, "ops": 0}  # (bob's join is no news)

        term = Tmux(tmp_path)
        try:
            term.start([sdschat_command(), "--home", str(alice)], (100, 30))
            rows = term.wait_for(up, 40, "both channels up, again")
            assert "#ops · alice" in header(rows), "\n".join(rows)  # where it was left
            team_row = next(row for row in rows if "#team" in row and "▕" in row)
            assert team_row.split("▕")[0].rstrip().endswith(" 5"), "\n".join(rows)  # its unread count
            term.send_bytes(b"\x1b1")
            rows = term.wait_for(
                lambda rows: (
                    any("since you left" in row for row in rows) and any("while away 4" in row for row in rows)
                ),
                what="#team's lines",
            )
            assert any("5 new messages since you left" in row for row in rows), "\n".join(rows)
            line = next(i for i, row in enumerate(rows) if "since you left" in row)
            assert "while away 0" in "\n".join(rows[line + 1 :]) and "while away" not in "\n".join(rows[:line])

            # on screen to its end: read, and saved while the window stays open
            deadline = time.monotonic() + 15
            while _unread(alice)["team"] != 0 and time.monotonic() < deadline:
                time.sleep(0.5)
            assert _unread(alice) == {"team": 0, "ops": 0}
            # a line arriving while #team is on screen at its end is read as it arrives
            _sdschat(
                "bot",
                "--home",
                str(bob),
                "--channel",
                "team",
                "--count",
                "1",
                "--linger",
                "2",
                "--max-runtime",
                "30",
                "--quiet",
                "--text",
                "live line",
            )
            term.wait_for(lambda rows: any("live line" in row for row in rows), what="the live line")
            deadline = time.monotonic() + 15
            while _unread(alice)["team"] != 0 and time.monotonic() < deadline:
                time.sleep(0.5)
            assert _unread(alice)["team"] == 0
        finally:
            term.close()


def test_keys_typed_ahead_arrive_in_order(tmp_path) -> None:
    """Keys that reach the window in one read (typed ahead over SSH, through tmux, while the window was busy) act
    in the order they were typed: a bound key (arrows, Home, End, Up) is not overtaken by the letters after it."""
    with window(tmp_path, (80, 24), channels=("team",)) as term:
        term.wait_for(lambda rows: "#team · alice" in header(rows), what="#team on screen")
        term.send_bytes(b"ab\x1b[Dc\x1b[Hd\x1b[Fe")  # a b Left c Home d End e, in one write
        term.wait_for(lambda rows: any(row.rstrip().endswith("▕ dacbe") for row in rows), what="dacbe in the input")
        term.send_bytes(b"\r")
        term.wait_for(lambda rows: any("alice dacbe" in row for row in rows), what="the line sent")
        term.send_bytes(b"\x1b[Ae")  # Up (the message cursor) and e (edit it), in one write
        term.wait_for(
            lambda rows: (
                any("✎ editing: dacbe" in row for row in rows)  # the bar, and the text to edit in the input
                and any(row.rstrip().endswith("▕ dacbe") for row in rows)
            ),
            what="editing the line",
        )


def test_a_line_typed_as_the_window_opens_is_sent(tmp_path) -> None:
    """Letters and Enter typed while ``sdschat`` is still starting (the terminal still in line mode, nothing with
    the focus yet when they are read) are not lost: the line is typed into the input and sent, and the input
    takes the next line as usual."""
    with profile(tmp_path, channels=("team",)) as home:
        term = Tmux(tmp_path)
        try:
            term.start([sdschat_command(), "--home", str(home)], (80, 24))
            term.type("typed ahead")
            term.send_bytes(b"\r")
            term.wait_for(lambda rows: any("alice typed ahead" in row for row in rows), 40, "the line typed ahead")
            term.wait_for(lambda rows: any("(/help)" in row for row in rows), what="the input empty again")
            term.type("and after")
            term.send_bytes(b"\r")
            term.wait_for(lambda rows: any("alice and after" in row for row in rows), what="the next line")
        finally:
            term.close()
