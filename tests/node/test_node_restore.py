"""A node whose engine restores in the background (the window's first channel): the history is there at once,
a send waits for the engine, open gaps are told once it is up, and a damaged state is reported, not raised."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest
from node_helpers import FAST, run, start

from sdschat.crypto import ChannelKey
from sdschat.node import Node, NodeConfig, NodeFailed, node_channel_config
from sdschat.node import events as ev

pytestmark = pytest.mark.timeout(60)


def config(name, key, folder, url):
    return NodeConfig(name, key, folder / f"{name}.db", url, channel_config=node_channel_config(**FAST))


def test_background_restore_shows_history_at_once_sends_after_and_tells_the_open_gaps(node_mosquitto, tmp_path):
    key = ChannelKey.generate("restore")
    url = node_mosquitto.url

    async def with_a_gap():
        a = await start("a", key, tmp_path, url)
        b = await Node.start(config("b", key, tmp_path, url))
        gaps = []
        b.add_listener(lambda e: gaps.append(e) if isinstance(e, ev.GapOpened) else None)
        try:
            await a.send_text("before")
            for _ in range(100):
                if len(b.messages()) == 1:
                    break
                await asyncio.sleep(0.02)
            b.set_impairment(loss_in=1.0)
            lost = await a.send_text("b never gets this one")
            await asyncio.sleep(0.1)
            b.set_impairment(loss_in=0.0)
            await a.send_text("names the lost one")
            for _ in range(100):
                if gaps:
                    break
                await asyncio.sleep(0.01)
            assert gaps and lost in gaps[-1].missing
        finally:
            await a.stop()  # gone before it resends: b's gap stays open
            await b.stop()
        return lost

    lost = run(with_a_gap())

    async def reopen():
        told = []
        b = await Node.start(config("b", key, tmp_path, url), restore_in_background=True)
        b.add_listener(told.append)
        try:
            assert not b.ready and b.channel is None  # returned before the engine's state was read
            assert b.health()["connection"] == "restoring" and b.pending()
            texts = [m.text for m in await b.history()]
            assert texts == ["before", "names the lost one"]
            assert b.impairment.loss_in == 0.0
            b.set_impairment(delay_ms=5)  # kept for when it connects
            mid = await b.send_text("sent while restoring")  # waits for the engine
            assert b.ready and b.impairment.delay_ms == 5
            gaps = [e for e in told if isinstance(e, ev.GapOpened)]
            assert any(lost in g.missing for g in gaps)
            assert any(isinstance(e, ev.ConnectionChanged) and e.state == "connected" for e in told)
            assert (await b.message(mid)).text == "sent while restoring"
        finally:
            await b.stop()

    run(reopen())


def test_a_damaged_state_restoring_in_the_background_is_reported_once_and_sends_refuse(node_mosquitto, tmp_path):
    key = ChannelKey.generate("damaged")

    async def first():
        n = await Node.start(config("c", key, tmp_path, node_mosquitto.url))
        await n.send_text("hello")
        await n.stop()

    run(first())
    conn = sqlite3.connect(tmp_path / "c.db")
    conn.execute("UPDATE channels SET participant_id = 'someone else'")
    conn.commit()
    conn.close()

    async def reopen():
        told = []
        n = await Node.start(config("c", key, tmp_path, node_mosquitto.url), restore_in_background=True)
        n.add_listener(told.append)
        try:
            assert [m.text for m in await n.history()] == ["hello"]  # the history still shows
            with pytest.raises(NodeFailed, match="another identity"):
                await n.send_text("nope")
            problems = [e for e in told if isinstance(e, ev.NodeProblem)]
            assert len(problems) == 1 and problems[0].what == "storage" and "#damaged" in problems[0].detail
            assert not [e for e in told if isinstance(e, ev.FrameRejected)]  # the node's trouble, no frame's
            assert n.health()["connection"] == "stopped" and not n.pending()
        finally:
            await n.stop()

    run(reopen())
