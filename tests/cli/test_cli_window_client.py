"""The window's client: many channels on one MQTT connection, where a channel that falls behind (its database
stalled) does not hold up the others, and catches up once it can write again."""

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
