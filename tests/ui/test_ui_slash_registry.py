"""The slash commands' one registry (name, aliases, usage, help, handler), and what reaches the person when a command
fails: their mistake or the node's refusal as a notice in the log, a bug as an error with its traceback logged."""

from __future__ import annotations

import pytest
from ui_helpers import line_with, lines_of, widget_text

from sdschat.node import MemberNotFound, UserError
from sdschat.ui import slash
from sdschat.ui.app import ChatApp
from sdschat.ui.screens import HelpScreen
from sdschat.ui.slash import SlashCommand, SlashRegistry, UsageError
from sdschat.ui.widgets.impairment_panel import parse_field

SIZE = (120, 30)


def test_every_command_has_usage_help_and_a_handler() -> None:
    assert slash.COMMANDS is slash.REGISTRY.commands
    names = [c.name for c in slash.COMMANDS]
    assert len(names) == len(set(names)) and len(names) >= 20
    for c in slash.COMMANDS:
        assert c.name and c.name == c.name.lower() and " " not in c.name
        assert c.usage.startswith(f"/{c.name}") and c.usage == c.usage.strip()
        assert c.help.strip(), f"/{c.name} has no help"
        assert callable(c.handler), f"/{c.name} has no handler"
        assert slash.lookup(c.name) is c
        assert c in slash.matching(f"/{c.name}")  # Tab and the hint above the input complete it


def test_a_registry_finds_aliases_refuses_doubles_and_dispatches_to_the_handler() -> None:
    calls = []
    ping = SlashCommand("ping", "[WHO]", "answer", lambda pane, arg: calls.append((pane, arg)), aliases=("p",))
    registry = SlashRegistry([ping])
    assert registry.lookup("ping") is ping and registry.lookup("p") is ping and registry.lookup("x") is None
    assert registry.matching("/pi") == [ping] and registry.matching("/pi ng") == []
    registry.run("pane", "p", "bob")
    assert calls == [("pane", "bob")]
    with pytest.raises(UsageError, match="unknown command /nope"):
        registry.run("pane", "nope", "")
    with pytest.raises(ValueError, match="registered twice"):
        SlashRegistry([ping, SlashCommand("pong", "", "again", ping.handler, aliases=("ping",))])


def test_usage_errors_are_user_errors_not_value_errors() -> None:
    assert issubclass(UsageError, UserError) and not issubclass(UsageError, ValueError)
    assert parse_field("loss_in", "25%") == pytest.approx(0.25) and parse_field("delay_ms", "") == 0
    for name, text in (("loss_in", "lots"), ("duplicate", "1.5"), ("jitter_ms", "-1")):
        with pytest.raises(UsageError):
            parse_field(name, text)


def test_f1_lists_every_command(fake_node, run) -> None:
    async def scenario():
        app = ChatApp(fake_node, blink=False)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("f1")
            assert isinstance(app.screen, HelpScreen)
            text = "\n".join(widget_text(s) for s in app.screen.query("Static"))
            rows = [line.strip() for line in text.splitlines()]
            for c in slash.COMMANDS:
                assert any(row.startswith(c.usage + " ") and c.help.split()[0] in row for row in rows), c.usage

    run(scenario())


def test_a_mistake_or_a_refusal_is_a_notice_and_a_bug_is_an_error(fake_node, run) -> None:
    async def scenario():
        app = ChatApp(fake_node, blink=False)
        async with app.run_test(size=SIZE) as pilot:
            pane = app.pane

            async def command(text: str) -> None:
                pane.input.load_text(text)
                await pilot.press("enter")
                await pilot.pause(0.05)

            await command("/nick two words")  # the person's mistake: how to use it, in the log
            assert line_with(lines_of(app), "usage: /nick NAME")
            await command("/frobnicate")
            assert line_with(lines_of(app), "unknown command /frobnicate")

            def taken(nick):
                raise UserError(f"{nick} is taken here")

            fake_node.set_nick = taken  # the node's refusal: its text, as a notice
            await command("/nick bob")
            assert line_with(lines_of(app), "bob is taken here")

            def whois(name):  # the node's refusal of a name (MemberNotFound)
                raise MemberNotFound(f"no member called {name!r} here")

            fake_node.whois = whois
            await command("/whois zed")
            assert line_with(lines_of(app), "no member called 'zed' here")
            assert app.errors == []

            def broken(nick):
                raise ValueError("a bug, not the person's input")

            fake_node.set_nick = broken  # a ValueError is no refusal: a bug
            await command("/nick carol")
            await pilot.pause(0.1)
            assert not line_with(lines_of(app), "a bug, not the person's input")
            assert any("/nick: a bug" in e for e in app.errors)

            def bad_setting(**settings):
                raise TypeError("unexpected keyword")

            fake_node.set_impairment = bad_setting  # the link panel's handler survives a bug, and says it
            before = len(app.errors)
            assert pane.set_impairment(loss_in=0.5) is False
            await pilot.pause(0.1)
            assert any("TypeError: unexpected keyword" in e for e in app.errors[before:])
            assert app.is_running

    run(scenario())
