"""The window's client: many channels on one MQTT connection, where a channel that falls behind (its database
stalled) does not hold up the others, and catches up once it can write again; a channel whose database is
damaged does not keep the window shut on the others."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time

from sdschat.cli.window import ProfileClient
from sdschat.profile import Profile, resolve_paths
from sdschat.transport import EmbeddedBroker


def test_a_stalled_channel_does_not_hold_up_the_others(tmp_path) -> None:
    async def scenario():
        broker = await EmbeddedBroker.start()
        secrets = {"slow": os.urandom(32), "fast": os.urandom(32)}
        clients = []
        try:
            for who in ("alice", "bob"):
                profile = Profile.create(resolve_paths(tmp_path / who), who, broker.url)
                for name, secret in secrets.items():
                    profile.add_channel(name, secret)
                clients.append(await ProfileClient.start(profile))
            alice, bob = clients
            mine = {n.key.channel_name: n for n in alice.nodes}
            theirs = {n.key.channel_name: n for n in bob.nodes}
            await mine["slow"].writer.flush()
            # (waiting out a write or checkpoint of alice's that is under way: the node's own thread may hold the
            # lock for a moment, as any writer may)
            lock = sqlite3.connect(mine["slow"].config.db_path, timeout=5)
            lock.execute("BEGIN EXCLUSIVE")  # alice's #slow cannot write for a while
            try:
                for i in range(20):
                    await theirs["slow"].send_text(f"slow {i}")
                t0 = time.monotonic()
                for i in range(5):
                    await theirs["fast"].send_text(f"fast {i}")

                def chat(node) -> list[str]:
                    return sorted(m.text for m in node.messages() if m.kind == "msg")  # (joins aside)

                while len(chat(mine["fast"])) < 5:
                    assert time.monotonic() - t0 < 2.0, "#fast waited for #slow"
                    await asyncio.sleep(0.02)
                assert chat(mine["fast"]) == [f"fast {i}" for i in range(5)]
                await asyncio.sleep(0.5)
                probe = sqlite3.connect(mine["slow"].config.db_path, timeout=0)
                try:  # the stall is real: nobody can write #slow's database
                    probe.execute("BEGIN IMMEDIATE")
                    raise AssertionError("the lock did not hold")
                except sqlite3.OperationalError as exc:
                    assert "locked" in str(exc)
                finally:
                    probe.close()
            finally:
                lock.rollback()
                lock.close()
            # #slow writes what it held back and shows everything
            deadline = time.monotonic() + 15
            while len(await mine["slow"].history()) < 20:
                assert time.monotonic() < deadline, "#slow never caught up"
                await asyncio.sleep(0.1)
            assert mine["slow"].failure is None and mine["fast"].failure is None
        finally:
            for client in clients:
                await client.stop()
            await broker.close()

    asyncio.run(asyncio.wait_for(scenario(), 60))


def test_a_damaged_channel_the_window_would_open_on_leaves_it_open_on_the_others(tmp_path) -> None:
    """alice's window last showed #team, whose database is damaged since: the window opens on #ops, which says in
    one line that #team could not start and why; #ops works. With #team alone, the window does not open."""
    from ui_helpers import line_with, lines_of, wait_until

    from sdschat.store import StoreError
    from sdschat.ui.widgets.channel_list import ChannelList
    from sdschat.ui.window import ChannelWindow

    async def scenario():
        broker = await EmbeddedBroker.start()
        try:
            paths = resolve_paths(tmp_path / "alice")
            profile = Profile.create(paths, "alice", broker.url)
            profile.session_days = 0
            for name in ("team", "ops"):
                profile.add_channel(name, os.urandom(32))
            client = await ProfileClient.start(profile)  # both databases made
            await client.stop()
            profile = Profile.load(paths)
            profile.set_active("team")
            profile.save_channels()
            db = profile.db_path(profile.channel("team"))
            data = bytearray(db.read_bytes())
            data[4096:] = bytes(b ^ 0x5A for b in data[4096:])  # every page but the header's
            db.write_bytes(bytes(data))

            client = await ProfileClient.start(Profile.load(paths), all_channels=False)
            try:
                assert [n.key.channel_name for n in client.nodes] == ["ops"]
                app = ChannelWindow(client, blink=False)
                async with app.run_test(size=(100, 30)) as pilot:
                    pane = app.active_pane()
                    assert pane.channel_name == "ops"
                    assert [r.name for r in app.query_one(ChannelList).rows] == ["ops"]
                    await wait_until(pilot, lambda: line_with(lines_of(app), "could not start"), what="the notice")
                    notice = " ".join(lines_of(app))
                    assert "#team could not start" in notice and "damaged" in notice, notice
                    await pilot.press(*"still here", "enter")
                    await wait_until(pilot, lambda: line_with(lines_of(app), "still here"), what="a line in #ops")
                    await pilot.press("ctrl+q")
                assert app.errors == []
            finally:
                await client.stop()

            Profile.load(paths).remove_channel("ops")
            try:
                await ProfileClient.start(Profile.load(paths), all_channels=False)
                raise AssertionError("a window of one damaged channel opened")
            except StoreError as exc:
                assert "damaged" in str(exc) and "\n" not in str(exc)
        finally:
            await broker.close()

    asyncio.run(asyncio.wait_for(scenario(), 60))
