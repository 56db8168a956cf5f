"""`sdschat demo` and `sdschat chat` launchers, and the demo screen with real nodes and bots."""

from __future__ import annotations

import argparse
import contextlib

import pytest
from ui_helpers import line_with, lines_of, wait_until, widget_text

from sdschat.cli import CliError
from sdschat.cli.args import Parser
from sdschat.cli.chat import chat_configure, chat_run, demo_configure, demo_run
from sdschat.cli.wiring import resolve_channel, start_demo_nodes
from sdschat.ui.app import DemoApp


def parser(configure) -> argparse.ArgumentParser:
    p = Parser(prog="sdschat x")
    configure(p)
    return p


def test_demo_arguments() -> None:
    args = parser(demo_configure).parse_args([])
    assert (args.participants, args.loss, args.bots) == (3, 0.2, False)
    args = parser(demo_configure).parse_args(["--participants", "5", "--loss", "0", "--bots"])
    assert (args.participants, args.loss, args.bots) == (5, 0.0, True)
    for bad in (["--participants", "0"], ["--participants", "9"], ["--loss", "2"], ["--bot-interval", "0"]):
        with pytest.raises(CliError):
            parser(demo_configure).parse_args(bad)


def test_chat_arguments_reuse_the_channel_options() -> None:
    args = parser(chat_configure).parse_args(["--name", "alice", "--channel", "ops", "--loss", "0.1"])
    assert (args.name, args.channel, args.loss) == ("alice", "ops", 0.1)
    # no --name: the profile's name; without a profile, one line saying so
    args = parser(chat_configure).parse_args(["--channel", "ops", "--key-file", "k.key"])
    with pytest.raises(CliError, match="--name"):
        resolve_channel(args)


def test_launchers_refuse_to_run_without_a_terminal(run) -> None:
    # pytest captures stdout, so it is not a tty: one line, no traceback, no TUI garbage
    with pytest.raises(CliError, match="terminal"):
        run(demo_run(parser(demo_configure).parse_args([])))
    with pytest.raises(CliError, match="terminal"):
        run(chat_run(parser(chat_configure).parse_args(["--name", "a"])))


@contextlib.asynccontextmanager
async def demo_nodes(tmp_path, count: int, loss: float = 0.0, **kw):
    """The demo's nodes (``start_demo_nodes``) on an embedded broker; every node stopped and the broker closed
    after."""
    from sdschat.transport import EmbeddedBroker

    broker = await EmbeddedBroker.start()
    nodes = []
    try:
        nodes = await start_demo_nodes(count, loss, db_dir=tmp_path, broker_url=broker.url, **kw)
        yield nodes
    finally:
        for node in nodes:
            await node.stop()
        await broker.close()


def test_demo_panes_are_real_nodes_with_their_own_controls(tmp_path, run) -> None:
    async def scenario():
        async with demo_nodes(tmp_path, 3, seed=3) as nodes:
            app = DemoApp(nodes, bots=True, bot_interval=0.3, seed=3, blink=False)
            async with app.run_test(size=(150, 36)) as pilot:
                alice, bob, carol = app.panes
                assert [p.node.nick for p in app.panes] == ["alice", "bob", "carol"]
                # bots chatter: every pane shows the others' messages
                await wait_until(
                    pilot,
                    lambda: all(len({m.sender_id for m in n.messages()}) == 3 for n in nodes),
                    timeout=10,
                    what="bot chatter everywhere",
                )
                await pilot.press("f4")  # bots quiet
                assert app.bots is False
                # typing into bob's pane sends from bob's node
                bob.input.focus()
                await pilot.press(*"from bob's pane", "enter")
                await wait_until(pilot, lambda: line_with(lines_of(app, carol), "from bob's pane"), what="carol")
                assert [m for m in nodes[1].messages() if m.text == "from bob's pane"][0].own
                # each pane has its own link controls
                await pilot.press("f2")
                assert all(p.query_one("ImpairmentPanel").has_class("-shown") for p in app.panes)
                carol.run_command("offline", "")
                assert nodes[2].impairment.offline and not nodes[0].impairment.offline
                # from one participant's input to another's: Alt+N, Alt+Left/Right, Ctrl+N (Tab completes instead)
                await pilot.press("alt+3")
                assert app.focused is carol.input
                await pilot.press("ctrl+n")
                assert app.focused is alice.input
                await pilot.press("alt+left")
                assert app.focused is carol.input
                await pilot.press("alt+right", "alt+right")
                assert app.focused is bob.input
                await pilot.press("tab")
                assert app.focused is bob.input
                assert app.errors == []

    run(scenario())


def test_demo_nodes_get_the_loss_on_every_link(tmp_path, run) -> None:
    async def scenario():
        async with demo_nodes(tmp_path, 2, 0.25) as nodes:
            assert [(n.impairment.loss_in, n.impairment.loss_out) for n in nodes] == [(0.25, 0.25)] * 2
            assert nodes[0].key.channel_id == nodes[1].key.channel_id  # one channel key
            # each participant on a profile of its own: its name, key, identity and database, all private
            from sdschat.profile import Profile, resolve_paths

            for node in nodes:
                profile = Profile.load(resolve_paths(tmp_path / node.nick))
                assert profile.name == node.nick and list(profile.channels) == ["demo"]
                assert node.participant_id == profile.identity().participant_id
                assert node.config.db_path == profile.db_path(profile.channel("demo")) and node.config.db_path.exists()
                assert (tmp_path / node.nick).stat().st_mode & 0o777 == 0o700
            assert nodes[0].participant_id != nodes[1].participant_id

    run(scenario())


def test_demo_with_a_hostile_member_shows_its_forgeries_refused(tmp_path, run) -> None:
    """``demo --hostile reorder``: mallory (no pane) relays every message with a forged Lamport time or
    history; each pane counts the refusals in its status line and the wire view (F5) lists them."""

    async def scenario():
        import asyncio

        from sdschat.node.hostile import HostileMember
        from sdschat.ui.screens.wire import WireScreen

        stop = asyncio.Event()
        async with demo_nodes(tmp_path, 2, hostile="reorder") as nodes:
            try:
                assert [n.nick for n in nodes] == ["alice", "bob", "mallory"] and nodes[2].impairment.loss_in == 0
                playing = asyncio.ensure_future(HostileMember(nodes[2], "reorder").run(stop))
                app = DemoApp(nodes[:2], bots=False, blink=False)
                async with app.run_test(size=(150, 36)) as pilot:
                    await pilot.pause(0.5)  # mallory's connection subscribes
                    alice, bob = app.panes
                    alice.input.focus()
                    await pilot.press(*"hello", "enter")
                    await wait_until(pilot, lambda: line_with(lines_of(app, bob), "hello"), what="the first line")
                    await pilot.press(*"again", "enter")  # its history names the first: all three relays are forged
                    panel = bob.query_one("SidePanel")
                    await wait_until(pilot, lambda: nodes[1].counters["rejected"] >= 3, timeout=10, what="refusals")
                    await wait_until(
                        pilot,
                        lambda: f"refused {nodes[1].counters['rejected']}" in widget_text(panel),
                        what="the count in bob's status line",
                    )
                    await wait_until(pilot, lambda: line_with(lines_of(app, bob), "again"), what="the honest copy")
                    bob.input.focus()
                    await pilot.press("f5")
                    wire = app.screen
                    assert isinstance(wire, WireScreen) and wire.node is nodes[1]
                    await wait_until(
                        pilot,
                        lambda: sum("rejected: bad_signature" in r for r in wire.rows) == nodes[1].counters["rejected"],
                        what="the wire view",
                    )
                    assert nodes[0].channel.log == nodes[1].channel.log
                    assert app.errors == []
                stop.set()
                await playing
            finally:
                stop.set()  # (before the nodes stop)

    run(scenario())


def test_kick_and_rekey_typed_in_the_demo(tmp_path, run) -> None:
    """In the demo alice created the channel: ``/kick carol`` in her pane puts the change in every log, carol's
    pane says she was removed and what is said afterwards never reaches her; bob, no admin, gets one line."""

    async def scenario():
        async with demo_nodes(tmp_path, 3, seed=5) as nodes:
            app = DemoApp(nodes, bots=True, bot_interval=0.5, seed=5, blink=False)
            async with app.run_test(size=(150, 36)) as pilot:
                alice, bob, carol = app.panes
                alice.input.focus()
                await pilot.press(*"hello all", "enter")
                await wait_until(
                    pilot,
                    lambda: all(len(n.membership.members) == 3 for n in nodes),
                    timeout=10,
                    what="everyone's join everywhere",
                )
                bob.input.focus()
                await pilot.press(*"/kick carol", "enter")
                await wait_until(pilot, lambda: line_with(lines_of(app, bob), "only an admin"), what="bob refused")
                alice.input.focus()
                await pilot.press(*"/kick carol", "enter")
                await wait_until(
                    pilot,
                    lambda: line_with(lines_of(app, bob), "removed carol: new key (epoch 1)"),
                    what="the change in bob's log",
                )
                await wait_until(pilot, lambda: line_with(lines_of(app, carol), "removed you"), what="carol told")
                await pilot.press(*"after the kick", "enter")
                await wait_until(pilot, lambda: line_with(lines_of(app, bob), "after the kick"), what="bob reads")
                await pilot.press(*"/rekey", "enter")
                await wait_until(pilot, lambda: nodes[1].membership.current.number == 2, what="epoch 2")
                assert line_with(lines_of(app, bob), "rotated the channel key")
                await pilot.pause(1.5)  # bots chatting: carol's falls silent, it does not fail on every turn
                assert not line_with(lines_of(app, carol), "after the kick")
                assert app.errors == []

    run(scenario())
