"""Memory stays bounded: a node keeps only the newest messages (and those whose state can change) in memory;
the rest is in its database, and ``history()`` reads the whole channel back."""

from __future__ import annotations

import dataclasses

from node_helpers import FAST, run, settle

from sdschat.crypto import ChannelKey
from sdschat.node import Node, NodeConfig, node_channel_config


def test_messages_beyond_the_memory_window_stay_in_the_database(node_mosquitto, tmp_path):
    key = ChannelKey.generate("memory")
    cap = 100

    async def start(name: str) -> Node:
        cfg = NodeConfig(
            name,
            key,
            tmp_path / f"{name}.db",
            node_mosquitto.url,
            channel_config=node_channel_config(**FAST),
            memory_messages=cap,
        )
        return await Node.start(cfg)

    async def main():
        a, b = await start("a"), await start("b")
        try:
            sent = []
            for i in range(400):
                sent.append(await (a if i % 2 else b).send_text(f"m{i}"))
            await settle([a, b], 400, timeout=60)
            held = [len(a.messages()), len(b.messages())]
            histories = [await a.history(), await b.history()]
            logs = [a.channel.log, b.channel.log]
        finally:
            await a.stop()
            await b.stop()
        # a restart reads the database back within the same bound
        again = await Node.start(dataclasses.replace(a.config))
        try:
            # and pages it, newest first, each page in log order, the pages tiling the whole history
            pages, before = [], None
            while True:
                page = await again.history(limit=150, before=before)
                pages.insert(0, [m.message_id for m in page])
                if len(page) < 150:
                    break
                before = (page[0].lamport_timestamp, page[0].message_id)
            paged.extend(pages)
            return sent, held, histories, logs, len(again.messages()), await again.history()
        finally:
            await again.stop()

    paged: list[list[str]] = []
    sent, held, histories, logs, held_after_restart, history_after_restart = run(main())
    assert [len(p) for p in paged] == [100, 150, 150] and sum(paged, []) == logs[0]
    assert all(n <= cap + max(64, cap // 10) for n in held), held
    assert held_after_restart <= cap + max(64, cap // 10)
    for history, log in zip(histories, logs):
        assert [m.message_id for m in history] == log  # everything, in log order
        assert sorted(m.text for m in history) == sorted(f"m{i}" for i in range(400))
    assert [m.message_id for m in history_after_restart] == logs[0]
    assert {m.state for m in histories[0] if m.own} == {"acknowledged"}
    assert set(sent) == set(logs[0])
