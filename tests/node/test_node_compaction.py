"""Real nodes keep a bounded window of full event rows; the report over a compacted database agrees.

Two nodes over mosquitto: one keeps every event (``events_keep=0``), one a window of 20 rows that it
compacts as it runs. The report's Python reduction, read through the pipeline's own staging, must give
the same delivery and latency for a compacted copy of the first database as for the original.
"""

from __future__ import annotations

import asyncio
import shutil
import sqlite3

import pyarrow.parquet as pq
import pytest
from node_helpers import FAST, run, settle

from sdschat.crypto import ChannelKey
from sdschat.node import Node, NodeConfig, node_channel_config
from sdschat.pipeline.inputs import stage_inputs
from sdschat.pipeline.metrics import compute, reduce_events
from sdschat.store import Store

pytestmark = pytest.mark.timeout(120)


def report(dbs, staging):
    staged = stage_inputs(dbs, staging)
    rows = [{**r, "source": s.name} for s in staged for f in s.event_files for r in pq.read_table(f).to_pylist()]
    return compute(reduce_events(rows), [s.info for s in staged])


def count(db, sql):
    conn = sqlite3.connect(db)
    try:
        return conn.execute(sql).fetchone()[0]
    finally:
        conn.close()


def test_a_node_compacts_as_it_runs_and_the_report_over_a_compacted_copy_agrees(node_mosquitto, tmp_path):
    key = ChannelKey.generate("compact")

    async def node(name, keep):
        return await Node.start(
            NodeConfig(
                name,
                key,
                tmp_path / f"{name}.db",
                node_mosquitto.url,
                channel_config=node_channel_config(**FAST),
                events_keep=keep,
            )
        )

    async def main():
        a, b = await node("a", 0), await node("b", 20)
        try:
            for i in range(15):
                await a.send_text(f"a {i}")
                await b.send_text(f"b {i}")
                await asyncio.sleep(0.02)
            await settle([a, b], 30)
            await asyncio.sleep(0.3)
            assert b.events_compacted > 0
        finally:
            await a.stop()
            await b.stop()

    run(main())
    a_db, b_db = tmp_path / "a.db", tmp_path / "b.db"
    # b kept its window (plus at most one compaction interval, plus the rare rows kept in full)
    rare = "kind IN ('missing', 'repair_requested', 'repair_served', 'lost', 'rejected') OR detail IS NOT NULL"
    assert count(b_db, "SELECT count(*) FROM events") <= 20 + 10 + count(
        b_db, f"SELECT count(*) FROM events WHERE {rare}"
    )
    assert count(b_db, "SELECT count(*) FROM message_events") >= 10
    assert count(a_db, "SELECT count(*) FROM message_events") == 0  # events_keep=0: every row in full
    full = count(a_db, "SELECT count(*) FROM events")

    copy = tmp_path / "a-compacted.db"
    shutil.copy(a_db, copy)

    async def compact():
        store = await Store.open(copy, create=False)
        try:
            return await store.compact_events(5)
        finally:
            await store.close()

    assert run(compact()) >= full - 5 - 10
    assert count(copy, "SELECT count(*) FROM events") < full // 3

    original = report([a_db, b_db], tmp_path / "stage1")
    compacted = report([copy, b_db], tmp_path / "stage2")
    assert compacted.messages == original.messages
    assert compacted.latency == original.latency
    assert compacted.participants == original.participants
    assert compacted.convergence == original.convergence
    summary = {k: v for k, v in original.summary[0].items() if "delivery" in k or "messages" in k}
    assert summary and summary == {k: compacted.summary[0][k] for k in summary}
    assert len(original.messages) == 30 and all(m["delivered_to"] == 1 for m in original.messages), original.messages
