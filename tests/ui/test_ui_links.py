"""Links in messages: finding them, painting them as terminal hyperlinks (OSC 8), and ``o`` on the message cursor
handing one to the opener program (real nodes over the embedded broker; a real terminal for the bytes)."""

from __future__ import annotations

import contextlib
import re
import subprocess
import time
from datetime import UTC
from pathlib import Path

import pytest
from brokers import Mosquitto, mosquitto_binary
from terminal import Pty, sdschat_command
from ui_helpers import channel_secret, cluster, line_with, lines_of, wait_until

from sdschat.node import events as ev
from sdschat.profile import Profile, resolve_paths
from sdschat.ui.app import ChatApp
from sdschat.ui.layout import Layout
from sdschat.ui.links import MAX_URL, find_links, opener_command
from sdschat.ui.screens import LinksScreen
from sdschat.ui.theme import S, nick_style
from sdschat.ui.timeline import MsgItem

SIZE = (120, 30)


def urls(text: str) -> list[str]:
    found = find_links(text)
    for start, end, url in found:
        assert text[start:end] == url
    return [url for _, _, url in found]


# ------------------------------------------------------------------ finding


def test_http_and_https_urls_are_found_with_their_offsets() -> None:
    text = "see http://a.example/x and https://b.example/y?q=1#top now"
    assert find_links(text) == [(4, 22, "http://a.example/x"), (27, 54, "https://b.example/y?q=1#top")]
    assert urls("HTTPS://Example.ORG/Path") == ["HTTPS://Example.ORG/Path"]
    assert urls("https://user@host.example:8443/p") == ["https://user@host.example:8443/p"]
    assert urls("no links here") == [] and urls("") == []


@pytest.mark.parametrize(
    "text",
    [
        "file:///etc/passwd",
        "javascript:alert(1)",
        "data:text/html,<b>x</b>",
        "www.example.org",
        "ftp://example.org/f",
        "xhttps://example.org",  # a scheme glued to a word
        "git+https://example.org/r",
        "https://",  # no host
        "https://./x",
        "https:///path",
        "http//example.org",
    ],
)
def test_only_http_and_https_with_a_host_are_links(text: str) -> None:
    assert find_links(text) == []


@pytest.mark.parametrize("mark", list(".,;:!?'\""))
def test_trailing_sentence_punctuation_is_not_part_of_the_url(mark: str) -> None:
    assert urls(f"go to https://x.org/a{mark} then") == ["https://x.org/a"]
    assert urls(f"go to https://x.org/a{mark}{mark}") == ["https://x.org/a"]
    if mark != '"':  # inside it stays (a double quote is never in a URL: it ends one)
        assert urls(f"https://x.org/a{mark}b") == [f"https://x.org/a{mark}b"]


def test_a_closing_bracket_is_kept_only_when_the_url_opened_it() -> None:
    assert urls("(see https://x.org/a_(b)).") == ["https://x.org/a_(b)"]
    assert urls("(see https://x.org/a)") == ["https://x.org/a"]
    assert urls("[https://x.org/list]") == ["https://x.org/list"]
    assert urls("https://x.org/w/Foo_(bar)") == ["https://x.org/w/Foo_(bar)"]
    assert urls("https://x.org/a[1]") == ["https://x.org/a[1]"]
    assert urls("(https://x.org/a_(b)?).") == ["https://x.org/a_(b)"]


def test_whitespace_ends_a_url_and_control_or_invisible_characters_refuse_it() -> None:
    assert urls("https://x.org/a b") == ["https://x.org/a"]
    assert urls("https://x.org/a\nb") == ["https://x.org/a"]
    assert urls("https://x.org/a\u00a0b") == ["https://x.org/a"]  # a no-break space is a space too
    assert urls("<https://x.org/a>") == ["https://x.org/a"]
    for bad in ("\x1b[31m", "\x07", "\x7f", "\u202e", "\u200b", "\u2066", "\x9b"):
        assert find_links(f"https://x.org/a{bad}b") == [], repr(bad)
    assert urls("https://x.org/\u202egnp.exe and https://ok.org") == ["https://ok.org"]


def test_a_url_longer_than_the_cap_is_not_a_link() -> None:
    fits = "https://x.org/" + "a" * (MAX_URL - len("https://x.org/"))
    assert urls(fits) == [fits]
    assert find_links(fits + "a") == []


def test_several_urls_in_order() -> None:
    text = "a https://one.org, b http://two.org/x; c (https://three.org)"
    assert urls(text) == ["https://one.org", "http://two.org/x", "https://three.org"]


def test_opener_from_the_environment_or_the_path(tmp_path) -> None:
    assert opener_command({"SDSCHAT_OPENER": "my-browser --new-tab 'a b'", "PATH": ""}) == [
        "my-browser",
        "--new-tab",
        "a b",
    ]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert opener_command({"SDSCHAT_OPENER": "  ", "PATH": str(empty)}) is None
    tool = empty / "xdg-open"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o700)
    assert opener_command({"PATH": str(empty)}) == [str(tool)]
    with pytest.raises(ValueError):
        opener_command({"SDSCHAT_OPENER": "broken 'quote"})


# ----------------------------------------------------------------- painting


def message(text: str, kind: str = "msg", **extra) -> ev.ChatMessage:
    return ev.ChatMessage("m1", "sender-1", "bob", text, kind, 1_763_805_600_000, 1, False, ev.RECEIVED, **extra)


def cells(strips) -> list[tuple[str, object]]:
    """Every painted character with its style, line after line."""
    return [(ch, seg.style) for strip in strips for seg in strip for ch in seg.text]


def linked(strips) -> dict[str, str]:
    """The text painted under each link, by URL."""
    out: dict[str, str] = {}
    for ch, style in cells(strips):
        if style is not None and style.link:
            out[style.link] = out.get(style.link, "") + ch
    return out


def test_a_url_is_painted_as_a_hyperlink_and_nothing_else_is() -> None:
    url = "https://x.org/a_(b)"
    layout = Layout(100, UTC)
    strips = layout.paint(MsgItem(message(f"(see {url}). then more")), None, str)
    assert linked(strips) == {url: url}
    styles = [style for _, style in cells(strips) if style is not None and style.link]
    assert all(s.underline and s.color == S.link.color for s in styles)
    assert len({s.link_id for s in styles}) == 1
    text = "".join(ch for ch, _ in cells(strips))
    assert "bob (see https://x.org/a_(b)). then more" in text
    nick = [style for ch, style in cells(strips)[: text.index("(see")] if ch in "bob"]
    assert nick and all(s == nick_style("sender-1") for s in nick)
    # the same message without its link paints the same characters in the same places
    plain = layout.paint(MsgItem(message("(see xxxxxxxxxxxxxxxxxxx). then more")), None, str)
    assert [s.cell_length for s in plain] == [s.cell_length for s in strips]


def test_a_wrapped_url_keeps_its_link_on_both_lines_and_the_tag_is_untouched() -> None:
    url = "https://example.org/" + "segment" * 12
    layout = Layout(60, UTC)
    item = MsgItem(message(f"read {url} please", repaired=True, repaired_by="carol"))
    item.repaired_via = "sds-r"
    strips = layout.paint(item, None, str)
    assert len(strips) >= 3
    assert linked(strips) == {url: url}
    pieces = [strip for strip in strips if any(seg.style is not None and seg.style.link for seg in strip)]
    assert len(pieces) >= 2
    ids = {seg.style.link_id for strip in pieces for seg in strip if seg.style is not None and seg.style.link}
    assert len(ids) == 1  # one link for the terminal, over the pieces
    tag = [style for ch, style in cells(strips) if ch == "↺"]
    assert tag == [S.repaired_tag]
    assert "please" in strips[-1].text or "please" in strips[-2].text


def test_an_action_keeps_its_style_under_the_link_and_the_selection_keeps_the_link() -> None:
    url = "https://x.org/me"
    item = MsgItem(message(f"waves at {url}", kind="me"))
    item.selected = True
    strips = Layout(100, UTC).paint(item, None, str)
    styles = [style for _, style in cells(strips) if style is not None and style.link == url]
    assert len(styles) == len(url)
    assert all(s.italic and s.underline and s.bgcolor == S.cursor_bg.bgcolor for s in styles)
    narrow = Layout(40, UTC).paint(MsgItem(message(f"x {url}")), None, str)  # the nick inline
    assert linked(narrow) == {url: url}
    assert "bob: x https://x.org/me" in "".join(s.text for s in narrow)


# ----------------------------------------------------------------- opening


def recorder(folder: Path) -> tuple[Path, Path]:
    """A small opener that writes each argument it gets on a line of its own file."""
    out = folder / "opened.txt"
    script = folder / "opener.sh"
    script.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$@\" >> '{out}'\n")
    script.chmod(0o700)
    return script, out


async def wait_for_file(pilot, path: Path, lines: int) -> list[str]:
    await wait_until(pilot, lambda: path.exists() and len(path.read_text().splitlines()) >= lines, what=f"{path.name}")
    return path.read_text().splitlines()


def notices(app) -> list[str]:
    return [str(n.message) for n in app._notifications]


async def cursor_on(pilot, app, text: str) -> None:
    """The message cursor on the message whose text is ``text``."""
    await wait_until(pilot, lambda: line_with(lines_of(app), text[:30]), what=text)
    await pilot.press("up")
    view = app.pane.view
    for _ in range(20):
        if view.cursor is not None and view.cursor.msg.text == text:
            return
        await pilot.press("up")
    raise AssertionError(f"no cursor on {text!r}")


def test_o_opens_the_one_link_with_the_opener(tmp_path, run, monkeypatch) -> None:
    script, out = recorder(tmp_path)
    monkeypatch.setenv("SDSCHAT_OPENER", str(script))
    url = "https://example.org/path?a=1&b=2"

    async def scenario():
        async with cluster(tmp_path) as (alice, bob):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=SIZE) as pilot:
                await bob.send_text(f"the docs: {url}.")
                await cursor_on(pilot, app, f"the docs: {url}.")
                await pilot.press("o")
                assert await wait_for_file(pilot, out, 1) == [url]
                assert f"opening {url}" in notices(app)
                assert app.pane.view.has_focus and app.pane.view.cursor is not None
                assert app.errors == []

    run(scenario())


def test_several_links_ask_which_and_a_digit_opens_it(tmp_path, run, monkeypatch) -> None:
    script, out = recorder(tmp_path)
    monkeypatch.setenv("SDSCHAT_OPENER", str(script))
    text = "first https://one.example/a then https://two.example/b and https://one.example/a again"

    async def scenario():
        async with cluster(tmp_path) as (alice, bob):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=SIZE) as pilot:
                await bob.send_text(text)
                await cursor_on(pilot, app, text)
                await pilot.press("o")
                await wait_until(pilot, lambda: isinstance(app.screen, LinksScreen), what="the chooser")
                assert app.screen.urls == ["https://one.example/a", "https://two.example/b"]  # each once
                await pilot.press("escape")  # cancels: nothing opened
                await wait_until(pilot, lambda: not isinstance(app.screen, LinksScreen), what="closed")
                await pilot.pause(0.3)
                assert not out.exists()
                await pilot.press("o")
                await wait_until(pilot, lambda: isinstance(app.screen, LinksScreen), what="the chooser again")
                await pilot.press("2")
                assert await wait_for_file(pilot, out, 1) == ["https://two.example/b"]
                assert not isinstance(app.screen, LinksScreen)
                await pilot.press("o")  # Enter opens the highlighted one (the first)
                await wait_until(pilot, lambda: isinstance(app.screen, LinksScreen), what="the chooser, third")
                await pilot.press("enter")
                assert await wait_for_file(pilot, out, 2) == ["https://two.example/b", "https://one.example/a"]
                assert app.errors == []

    run(scenario())


def test_no_link_no_opener_and_a_failing_opener_are_one_line_each(tmp_path, run, monkeypatch) -> None:
    empty = tmp_path / "empty-path"
    empty.mkdir()
    monkeypatch.delenv("SDSCHAT_OPENER", raising=False)
    monkeypatch.setenv("PATH", str(empty))  # no xdg-open, no open
    url = "https://example.org/copied"

    async def scenario():
        async with cluster(tmp_path) as (alice, bob):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=SIZE) as pilot:
                await bob.send_text("just words")
                await cursor_on(pilot, app, "just words")
                await pilot.press("o")
                await wait_until(pilot, lambda: "no link in this message" in notices(app), what="no link")
                await pilot.press("escape")
                await bob.send_text(f"look {url}")
                await cursor_on(pilot, app, f"look {url}")
                await pilot.press("o")
                await wait_until(pilot, lambda: app.clipboard == url, what="the link in the clipboard")
                assert "no program to open links here (set SDSCHAT_OPENER); the link is copied" in notices(app)
                monkeypatch.setenv("SDSCHAT_OPENER", str(tmp_path / "no-such-program"))
                await pilot.press("o")
                await wait_until(
                    pilot, lambda: any(n.startswith("could not start") for n in notices(app)), what="the failure"
                )
                assert app.errors == []

    run(scenario())


def test_a_url_with_shell_characters_reaches_the_opener_as_one_literal_argument(tmp_path, run, monkeypatch) -> None:
    script, out = recorder(tmp_path)
    monkeypatch.setenv("SDSCHAT_OPENER", f"{script} --first")
    marker = tmp_path / "pwned"
    url = f"https://example.org/a;touch${{IFS}}{marker};$(touch${{IFS}}{marker})&x=`id`|y"
    assert urls(url) == [url.split("`")[0]]  # a backtick ends a URL
    url = f"https://example.org/a;touch${{IFS}}{marker};$(touch${{IFS}}{marker})&x=|y*"

    async def scenario():
        async with cluster(tmp_path) as (alice, bob):
            app = ChatApp(alice, blink=False)
            async with app.run_test(size=SIZE) as pilot:
                await bob.send_text(url)
                await cursor_on(pilot, app, url)
                await pilot.press("o")
                assert await wait_for_file(pilot, out, 2) == ["--first", url]
                assert not marker.exists()
                assert app.errors == []

    run(scenario())


# ------------------------------------------------------------ real terminal


@contextlib.contextmanager
def alice_with_a_link(tmp_path, text: str):
    """Alice's profile on a mosquitto of its own, with ``text`` in #team's history (said by bob's bot while
    alice's bot listened)."""
    broker = Mosquitto(mosquitto_binary(), tmp_path)
    broker.start()
    try:
        alice = tmp_path / "alice"
        Profile.create(resolve_paths(alice), "alice", broker.url).add_channel("team", channel_secret("team"))
        bob = tmp_path / "bob"
        Profile.create(resolve_paths(bob), "bob", broker.url).add_channel("team", channel_secret("team"))
        common = ["--channel", "team", "--max-runtime", "30", "--quiet"]
        listener = subprocess.Popen(
            [sdschat_command(), "bot", "--home", str(alice), "--count", "0", "--linger", "3", *common],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        time.sleep(1.0)  # alice's listener is up
        said = subprocess.run(
            [sdschat_command(), "bot", "--home", str(bob), "--count", "1", "--linger", "2", "--text", text, *common],
            capture_output=True,
            text=True,
            timeout=40,
        )
        assert said.returncode == 0, said.stderr
        _, err = listener.communicate(timeout=40)
        assert listener.returncode == 0, err
        yield alice
    finally:
        broker.close()


_LINK = re.compile(rb"\x1b\]8;id=([^;\x1b]*);([^\x1b]*)\x1b\\(.*?)\x1b\]8;;\x1b\\", re.DOTALL)
_SGR = re.compile(rb"\x1b\[[0-9;:]*m")


def test_the_terminal_gets_an_osc_8_hyperlink_for_a_url(tmp_path) -> None:
    url = "https://example.org/docs_(v2)"
    with alice_with_a_link(tmp_path, f"the docs ({url}) are up") as alice:
        term = Pty([sdschat_command(), "--home", str(alice)], (100, 30))
        try:
            term.wait_for(b"are up", timeout=40, what="bob's line")
            term.wait_for(f";{url}\x1b\\".encode(), timeout=10, what="the hyperlink")
            term.read(0.3)
            links = _LINK.findall(bytes(term.output))
            assert links and {target for _, target, _ in links} == {url.encode()}  # only the URL is a link
            assert all(link_id for link_id, _, _ in links)
            # the link's cells show the URL itself (its style's codes aside), not the ")" after it
            assert url.encode() in {_SGR.sub(b"", shown) for _, _, shown in links}
            assert term.proc.poll() is None
        finally:
            term.close()
